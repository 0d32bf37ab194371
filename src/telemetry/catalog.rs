//! The search-mode metrics: `switchyard_tool_searches_total{result}` (searches of `switchyard__search_tools`,
//! `found` or `empty`) and `switchyard_tools_list_bytes` (the size of each `tools/list` answer, in either mode:
//! what an agent's model pays for the list).
//!
//! Rules: the one label has two fixed values; sizes are bucketed by powers of four from 256 B to 4 MiB.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub const TOOL_SEARCHES: &str = "switchyard_tool_searches_total";
pub const TOOLS_LIST_BYTES: &str = "switchyard_tools_list_bytes";

/// Histogram boundaries, in bytes.
const BYTE_BUCKETS: [f64; 8] = [256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262_144.0, 1_048_576.0, 4_194_304.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SearchLabels {
    result: &'static str,
}

/// The two families, registered once with the gateway's registry.
pub(super) struct CatalogMetrics {
    searches: Family<SearchLabels, Counter>,
    list_bytes: Histogram,
}

impl Default for CatalogMetrics {
    fn default() -> Self {
        Self { searches: Family::default(), list_bytes: Histogram::new(BYTE_BUCKETS) }
    }
}

impl CatalogMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        let searches = "Tool searches (switchyard__search_tools), by result (found, empty)";
        // The exposition adds `_total` to a counter's registered name.
        registry.register(TOOL_SEARCHES.trim_end_matches("_total"), searches, self.searches.clone());
        let bytes = "Size of tools/list answers in bytes (what listing the tools costs an agent's model)";
        registry.register(TOOLS_LIST_BYTES, bytes, self.list_bytes.clone());
    }

    pub(super) fn searched(&self, found: bool) {
        let result = if found { "found" } else { "empty" };
        self.searches.get_or_create(&SearchLabels { result }).inc();
    }

    pub(super) fn listed(&self, bytes: usize) {
        self.list_bytes.observe(bytes as f64);
    }
}
