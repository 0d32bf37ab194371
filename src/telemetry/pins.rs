//! The pinned-definition metrics: `switchyard_tool_pins{backend,state}` (how many tools and prompts of each
//! backend are pinned and served, or quarantined) and `switchyard_tool_definition_changes_total{backend}`
//! (definitions a backend changed after they were pinned, whatever `pin` then did).
//!
//! Rules: backend names are interned by [`super::Metrics`]; the state is one of two fixed labels.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub const TOOL_PINS: &str = "switchyard_tool_pins";
pub const DEFINITION_CHANGES: &str = "switchyard_tool_definition_changes_total";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PinLabels {
    backend: Arc<str>,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeLabels {
    backend: Arc<str>,
}

/// The two families, registered once with the gateway's registry.
#[derive(Default)]
pub(super) struct PinMetrics {
    pins: Family<PinLabels, Gauge>,
    changes: Family<ChangeLabels, Counter>,
}

impl PinMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        let pins = "Pinned tool and prompt definitions, by backend and state (pinned, quarantined)";
        registry.register(TOOL_PINS, pins, self.pins.clone());
        let changes = "Tool and prompt definitions a backend changed after they were pinned, by backend";
        // The exposition adds `_total` to a counter's registered name.
        let name = DEFINITION_CHANGES.trim_end_matches("_total");
        registry.register(name, changes, self.changes.clone());
    }

    pub(super) fn set(&self, backend: Arc<str>, pinned: usize, quarantined: usize) {
        for (state, count) in [("pinned", pinned), ("quarantined", quarantined)] {
            let labels = PinLabels { backend: Arc::clone(&backend), state };
            self.pins.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    pub(super) fn changed(&self, backend: Arc<str>, changes: u64) {
        self.changes.get_or_create(&ChangeLabels { backend }).inc_by(changes);
    }

    pub(super) fn forget(&self, backend: &Arc<str>) {
        for state in ["pinned", "quarantined"] {
            self.pins.remove(&PinLabels { backend: Arc::clone(backend), state });
        }
        self.changes.remove(&ChangeLabels { backend: Arc::clone(backend) });
    }
}
