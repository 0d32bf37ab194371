//! What the operator's console shows, as plain views the front serializes: the backends
//! (health, transport, tools, live sessions and processes, latency), the catalog, the ledger's calls, and the
//! pinned tool definitions ([`pins`]), and the tasks running now ([`tasks`]).
//!
//! Rules: read-only — nothing here changes a backend, the catalog or a claim, and nothing waits for a backend
//! (the census skips a slot that is handshaking). The views name tools as the ledger and the catalog do; they
//! carry no arguments, results or credentials, only digests' absence: what an operator needs to see what ran.
//! Latency comes from the ledger ([`latency`]), so every replica sharing a ledger shows the same numbers.

mod approvals;
mod calls;
mod latency;
mod pins;
mod tasks;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::CallRouter;
use super::readiness::HealthReport;
use crate::catalog::{BackendState, BackendStatus};
pub use approvals::LinkedApproval;
pub use calls::{CallQuery, DEFAULT_CALLS, InspectError, MAX_CALLS};
pub use latency::Latency;

/// One backend as the console shows it.
#[derive(Debug, Serialize)]
pub struct BackendView {
    pub name: String,
    /// As configured: "mcp", "stdio" or "sse".
    pub transport: &'static str,
    /// Discovery's verdict: "pending" (not tried yet), "discovered" or "failed".
    pub status: &'static str,
    /// Why the last discovery failed.
    pub error: Option<String>,
    /// Whether it answers now.
    pub health: HealthReport,
    /// Tools of this backend agents see at `/mcp`.
    pub tools: usize,
    /// Live backend sessions (discovery's own included).
    pub sessions: usize,
    /// Live stdio processes.
    pub processes: usize,
    /// A stdio backend whose processes keep failing to start.
    pub process_start: Option<ProcessStart>,
    pub latency: Latency,
}

/// Why a stdio backend's processes do not start.
#[derive(Debug, Serialize)]
pub struct ProcessStart {
    pub failures: u32,
    /// The last start's error (`None` only in a report for a caller that may not read error texts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub retry_in_ms: u128,
}

/// The catalog as agents see it at `/mcp`, and what was withheld.
#[derive(Debug, Serialize)]
pub struct CatalogView {
    pub tools: Vec<ToolView>,
    pub withheld: Vec<WithheldView>,
}

#[derive(Debug, Serialize)]
pub struct ToolView {
    /// The name agents call.
    pub exposed: String,
    pub backend: String,
    /// The backend's own name (the ledger's `tool`).
    pub name: String,
    pub description: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct WithheldView {
    pub backend: String,
    pub kind: &'static str,
    pub name: String,
    pub reason: String,
}

impl CallRouter {
    /// Every configured backend, in configuration order.
    pub async fn backend_views(&self) -> Result<Vec<BackendView>, InspectError> {
        let routing = self.routing.load();
        let census = self.client.census();
        let mut failing = self.process_starts();
        let mut healths = self.health_reports();
        let mut views = Vec::new();
        for BackendState { name, status, tools } in self.catalog.statuses() {
            let counted = census.get(&name).copied().unwrap_or_default();
            let (status, error) = match status {
                BackendStatus::Pending => ("pending", None),
                BackendStatus::Discovered => ("discovered", None),
                BackendStatus::Failed { error } => ("failed", Some(error)),
            };
            views.push(BackendView {
                transport: routing.targets.get(&name).map_or("mcp", |target| target.transport()),
                status,
                error,
                health: healths.remove(&name).unwrap_or_else(|| HealthReport::of(None)),
                tools,
                sessions: counted.sessions,
                processes: counted.processes,
                process_start: failing.remove(&name),
                latency: self.latency(&name).await?,
                name: name.to_string(),
            });
        }
        Ok(views)
    }

    /// The stdio backends whose processes keep failing to start, by name.
    pub(super) fn process_starts(&self) -> HashMap<Arc<str>, ProcessStart> {
        let failing = self.failing_starts().into_iter();
        let start = |(name, failures, error, retry_in): (Arc<str>, u32, String, std::time::Duration)| {
            (name, ProcessStart { failures, error: Some(error), retry_in_ms: retry_in.as_millis() })
        };
        failing.map(start).collect()
    }

    /// The tools agents see at `/mcp` (before policies, which differ per principal) and those withheld.
    pub fn catalog_view(&self) -> CatalogView {
        let tools = self
            .catalog
            .routes()
            .iter()
            .map(|route| ToolView {
                exposed: route.exposed.clone(),
                backend: route.backend.to_string(),
                name: route.name.clone(),
                description: route.definition.get("description").and_then(|text| text.as_str()).map(str::to_owned),
            })
            .collect();
        let withheld = self
            .catalog
            .withheld()
            .into_iter()
            .map(|withheld| WithheldView {
                backend: withheld.backend.to_string(),
                kind: withheld.kind,
                name: withheld.name,
                reason: withheld.reason,
            })
            .collect();
        CatalogView { tools, withheld }
    }
}
