//! The gateway's metrics and their Prometheus text exposition (`GET /metrics`,
//! format 0.0.4).
//!
//! Owns: one [`Metrics`] per gateway — a `prometheus-client` registry and its families, every name and help text
//! ([`names`]) — and the calls each layer makes to record what it saw. The front, the router and the backend
//! client call these; this file knows none of them.
//!
//! Rules:
//! - Durations are histograms in seconds over [`BUCKETS`]: the OpenTelemetry MCP conventions' boundaries
//!   (0.01 … 300 s) with three below 10 ms, where a gateway's own answers (lists, refusals, replays) fall.
//! - Label values are bounded ([`super::labels`]): methods, outcomes, states, reasons and error types are
//!   `&'static str` from fixed lists; backend and tool names are interned `Arc<str>` from the configuration and
//!   the catalog. So recording costs a family look-up with a cheap key (no formatting, no allocation once the
//!   name is known), and series whose labels never change (ledger states, agent sessions) are resolved once.
//! - Metrics are always on; a fresh [`Metrics`] (as tests and `check` use) is complete but nobody scrapes it.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::audit::{Audit, AuditError, AuditSettings};
use super::catalog::CatalogMetrics;
use super::labels::{self, ClaimWrite, ErrorType, Names, ToolOutcome, UNKNOWN_TOOL};
use super::pins::PinMetrics;
use super::tasks::TaskMetrics;
use super::trace::Counts;
pub use series::Counted;
use series::{
    BackendLabels, BackendSeries, ClientLabels, DecisionLabels, Histograms, LimitLabels, MethodLabels, ReasonLabels,
    ServerLabels, StateLabels, ToolCallLabels, counted, drop_series, duration_histogram,
};

mod series;

/// The exported names (counters carry the `_total` the exposition adds to their registered name).
pub mod names {
    pub const SERVER_DURATION: &str = "mcp_server_operation_duration_seconds";
    pub const CLIENT_DURATION: &str = "mcp_client_operation_duration_seconds";
    pub const TOOL_CALLS: &str = "switchyard_tool_calls_total";
    pub const LEDGER_CLAIMS: &str = "switchyard_ledger_claims_total";
    pub const LEDGER_WAITING: &str = "switchyard_ledger_calls_waiting";
    pub const BACKEND_UP: &str = "switchyard_backend_up";
    pub const DISCOVERY_FAILURES: &str = "switchyard_backend_discovery_failures_total";
    pub const BACKEND_SESSIONS: &str = "switchyard_backend_sessions";
    pub const STDIO_PROCESSES: &str = "switchyard_stdio_processes";
    pub const AGENT_SESSIONS_OPENED: &str = "switchyard_agent_sessions_opened_total";
    pub const AGENT_SESSIONS_DELETED: &str = "switchyard_agent_sessions_deleted_total";
    pub const RELAYED_REQUESTS: &str = "switchyard_relayed_requests_total";
    pub const AUTH_FAILURES: &str = "switchyard_auth_failures_total";
    pub const LIMIT_REFUSALS: &str = "switchyard_limit_refusals_total";
    pub const TRACE_SPANS_EXPORTED: &str = "switchyard_trace_spans_exported_total";
    pub const TRACE_SPANS_DROPPED: &str = "switchyard_trace_spans_dropped_total";
    pub const TRACE_EXPORT_FAILURES: &str = "switchyard_trace_export_failures_total";
    pub const APPROVALS: &str = "switchyard_approvals_total";
    pub const APPROVAL_NOTIFY_FAILURES: &str = "switchyard_approval_notifications_failed_total";
    pub const AUDIT_EVENTS_DROPPED: &str = "switchyard_audit_events_dropped_total";
}

/// The `reason` of a span dropped by the trace exporter.
pub mod dropped {
    pub const QUEUE_FULL: &str = "queue_full";
    pub const EXPORT_FAILED: &str = "export_failed";
}

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Histogram boundaries, in seconds.
pub const BUCKETS: [f64; 17] =
    [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// Every metric of one gateway.
pub struct Metrics {
    registry: Registry,
    names: Names,
    /// The tool label of operations that name no tool.
    no_tool: Arc<str>,
    unknown_tool: Arc<str>,
    server_duration: Histograms<ServerLabels>,
    client_duration: Histograms<ClientLabels>,
    tool_calls: Family<ToolCallLabels, Counter>,
    /// One counter per [`ClaimWrite`], in [`ClaimWrite::ALL`]'s order.
    ledger_claims: [Counter; 4],
    ledger_waiting: Gauge,
    backend_up: Family<BackendLabels, Gauge>,
    discovery_failures: Family<BackendLabels, Counter>,
    backend_sessions: Family<BackendLabels, Gauge>,
    stdio_processes: Family<BackendLabels, Gauge>,
    sessions_opened: Counter,
    sessions_deleted: Counter,
    relayed_requests: Family<MethodLabels, Counter>,
    auth_failures: Family<ReasonLabels, Counter>,
    limit_refusals: Family<LimitLabels, Counter>,
    trace_counts: Counts,
    approvals: Family<DecisionLabels, Counter>,
    approval_notify_failures: Counter,
    /// `switchyard_tool_pins` and `switchyard_tool_definition_changes_total` (`pins.rs`).
    pins: PinMetrics,
    /// `switchyard_tool_searches_total` and `switchyard_tools_list_bytes` (`catalog.rs`).
    catalog: CatalogMetrics,
    /// `switchyard_tasks` and `switchyard_tasks_created_total` (`tasks.rs`).
    tasks: TaskMetrics,
    /// The series of the two families whose labels hold more than a backend, noted when first created, so a
    /// backend's series can all be dropped when a reload removes it.
    backend_series: Mutex<BackendSeries>,
    /// The audit trail, once started (`None` without `[audit]`).
    audit: OnceLock<Audit>,
    audit_dropped: Counter,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let ledger_family = Family::<StateLabels, Counter>::default();
        let dropped_family = Family::<ReasonLabels, Counter>::default();
        let trace_counts = Counts {
            dropped: dropped_family.get_or_create_owned(&ReasonLabels { reason: dropped::QUEUE_FULL }),
            failed: dropped_family.get_or_create_owned(&ReasonLabels { reason: dropped::EXPORT_FAILED }),
            ..Counts::default()
        };
        let ledger_claims =
            ClaimWrite::ALL.map(|state| ledger_family.get_or_create_owned(&StateLabels { state: state.as_str() }));
        let mut metrics = Metrics {
            registry: Registry::default(),
            names: Names::default(),
            no_tool: Arc::from(""),
            unknown_tool: Arc::from(UNKNOWN_TOOL),
            server_duration: Histograms::new_with_constructor(duration_histogram),
            client_duration: Histograms::new_with_constructor(duration_histogram),
            tool_calls: Family::default(),
            ledger_claims,
            ledger_waiting: Gauge::default(),
            backend_up: Family::default(),
            discovery_failures: Family::default(),
            backend_sessions: Family::default(),
            stdio_processes: Family::default(),
            sessions_opened: Counter::default(),
            sessions_deleted: Counter::default(),
            relayed_requests: Family::default(),
            auth_failures: Family::default(),
            limit_refusals: Family::default(),
            trace_counts,
            approvals: Family::default(),
            approval_notify_failures: Counter::default(),
            pins: PinMetrics::default(),
            catalog: CatalogMetrics::default(),
            tasks: TaskMetrics::default(),
            backend_series: Mutex::default(),
            audit: OnceLock::new(),
            audit_dropped: Counter::default(),
        };
        metrics.register(ledger_family, dropped_family);
        metrics
    }

    fn register(&mut self, ledger_claims: Family<StateLabels, Counter>, spans_dropped: Family<ReasonLabels, Counter>) {
        let registry = &mut self.registry;
        registry.register(
            names::SERVER_DURATION,
            "Duration of MCP requests agents sent to the gateway, by method, tool (exposed name) and error type",
            self.server_duration.clone(),
        );
        registry.register(
            names::CLIENT_DURATION,
            "Duration of MCP requests the gateway sent to backends, by method, tool (the backend's own name), error \
             type and backend",
            self.client_duration.clone(),
        );
        let tool_calls = "Tool calls by backend, tool (exposed name) and outcome";
        registry.register(counter(names::TOOL_CALLS), tool_calls, self.tool_calls.clone());
        let claims = "Ledger claims this instance wrote, by the state written";
        registry.register(counter(names::LEDGER_CLAIMS), claims, ledger_claims);
        let waiting =
            "Tool calls waiting on the ledger: for their claim to be written, or for a running call's to settle";
        registry.register(names::LEDGER_WAITING, waiting, self.ledger_waiting.clone());
        let up = "Whether the backend's last discovery succeeded (1) or not (0)";
        registry.register(names::BACKEND_UP, up, self.backend_up.clone());
        let failures = "Failed discoveries, by backend";
        registry.register(counter(names::DISCOVERY_FAILURES), failures, self.discovery_failures.clone());
        let sessions = "Live backend sessions (any transport), by backend";
        registry.register(names::BACKEND_SESSIONS, sessions, self.backend_sessions.clone());
        let processes = "Live stdio backend processes, by backend";
        registry.register(names::STDIO_PROCESSES, processes, self.stdio_processes.clone());
        let approvals =
            "Approval requests created (`requested`) and decided through this instance (`approved`, `denied`)";
        registry.register(counter(names::APPROVALS), approvals, self.approvals.clone());
        let notify = "Failed attempts to announce an approval request to `[approvals] notify_url`";
        registry.register(counter(names::APPROVAL_NOTIFY_FAILURES), notify, self.approval_notify_failures.clone());
        let opened = "Agent sessions opened (initialize)";
        registry.register(counter(names::AGENT_SESSIONS_OPENED), opened, self.sessions_opened.clone());
        let deleted = "Agent sessions ended by their agent (DELETE)";
        registry.register(counter(names::AGENT_SESSIONS_DELETED), deleted, self.sessions_deleted.clone());
        let relayed = "Server-to-client requests of backends relayed to agents, by method";
        registry.register(counter(names::RELAYED_REQUESTS), relayed, self.relayed_requests.clone());
        let refused = "Requests refused for their credentials, by reason";
        registry.register(counter(names::AUTH_FAILURES), refused, self.auth_failures.clone());
        let limited = "Requests refused by a [[limits]] entry, by limit (its name, or limits[INDEX])";
        registry.register(counter(names::LIMIT_REFUSALS), limited, self.limit_refusals.clone());
        let exported = "Spans the trace exporter delivered to the collector";
        registry.register(counter(names::TRACE_SPANS_EXPORTED), exported, self.trace_counts.exported.clone());
        let dropped = "Spans the trace exporter dropped, by reason (queue_full, export_failed)";
        registry.register(counter(names::TRACE_SPANS_DROPPED), dropped, spans_dropped);
        let failed = "Trace export requests the collector refused or did not answer in time";
        registry.register(counter(names::TRACE_EXPORT_FAILURES), failed, self.trace_counts.failed_exports.clone());
        let audit = "Audit events dropped: the queue was full or a sink could not take them";
        registry.register(counter(names::AUDIT_EVENTS_DROPPED), audit, self.audit_dropped.clone());
        self.pins.register(registry);
        self.catalog.register(registry);
        self.tasks.register(registry);
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }

    /// Starts the series of the configured backends at zero (down, nothing live), so they are there before the
    /// first discovery and `rate()` sees their first failure.
    pub fn register_backends<'a>(&self, backends: impl IntoIterator<Item = &'a str>) {
        for backend in backends {
            let labels = BackendLabels { backend: self.names.get(backend) };
            self.backend_up.get_or_create(&labels).set(0);
            self.discovery_failures.get_or_create(&labels).inc_by(0);
            self.backend_sessions.get_or_create(&labels).set(0);
            self.stdio_processes.get_or_create(&labels).set(0);
        }
    }

    /// The trace exporter's counters (for [`super::trace::Tracer::start`]).
    pub fn trace_counts(&self) -> Counts {
        self.trace_counts.clone()
    }

    /// The interned form of a name the configuration or the catalog gave (never of raw input).
    pub fn name(&self, name: &str) -> Arc<str> {
        self.names.get(name)
    }

    /// The tool label of an agent request that named no tool the catalog knows.
    pub fn unknown_tool(&self) -> Arc<str> {
        Arc::clone(&self.unknown_tool)
    }

    /// One agent request: `method` is already a label ([`labels::method`]), `tool` interned or `None`.
    pub fn observe_server(&self, method: &'static str, tool: Option<&Arc<str>>, error: ErrorType, elapsed: Duration) {
        let labels = ServerLabels {
            mcp_method_name: method,
            gen_ai_tool_name: Arc::clone(tool.unwrap_or(&self.no_tool)),
            error_type: error.label(),
        };
        self.server_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }

    /// One request to `backend`; `tool` is the (interned) backend's own name of the tool the router resolved.
    pub fn observe_client(
        &self,
        backend: &Arc<str>,
        method: &str,
        tool: Option<&Arc<str>>,
        error: ErrorType,
        elapsed: Duration,
    ) {
        let labels = ClientLabels {
            mcp_method_name: labels::method(method),
            gen_ai_tool_name: Arc::clone(tool.unwrap_or(&self.no_tool)),
            error_type: error.label(),
            backend: Arc::clone(backend),
        };
        if let Some(series) = self.client_duration.get(&labels) {
            return series.observe(elapsed.as_secs_f64());
        }
        if self.backend_series.lock().note(backend, &labels, |series| &mut series.client_duration) {
            self.client_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        }
    }

    pub fn count_tool_call(&self, backend: &Arc<str>, tool: &Arc<str>, outcome: ToolOutcome) {
        let labels = ToolCallLabels { backend: Arc::clone(backend), tool: Arc::clone(tool), outcome: outcome.as_str() };
        if let Some(series) = self.tool_calls.get(&labels) {
            series.inc();
            return;
        }
        if self.backend_series.lock().note(backend, &labels, |series| &mut series.tool_calls) {
            self.tool_calls.get_or_create(&labels).inc();
        }
    }

    /// A request the limit labelled `limit` refused (labels come from the configuration: bounded).
    pub fn limit_refused(&self, limit: &Arc<str>) {
        self.limit_refusals.get_or_create(&LimitLabels { limit: Arc::clone(limit) }).inc();
    }

    pub fn count_claims(&self, state: ClaimWrite, claims: u64) {
        let index = ClaimWrite::ALL.iter().position(|known| *known == state).unwrap_or_default();
        self.ledger_claims[index].inc_by(claims);
    }

    /// Counts a task created (and running here).
    pub fn task_created(&self) {
        self.tasks.created();
    }

    /// Counts a task ended `state`: one this instance ran (`ran`), or one it cancelled for another.
    pub fn task_ended(&self, state: &str, ran: bool) {
        self.tasks.ended(state, ran);
    }

    /// Counts an approval request created (`requested`) or decided (`approved`, `denied`).
    pub fn count_approval(&self, decision: &'static str) {
        self.approvals.get_or_create(&DecisionLabels { decision }).inc();
    }

    /// Counts a failed attempt to announce an approval request.
    pub fn count_approval_notification_failure(&self) {
        self.approval_notify_failures.inc();
    }

    /// Counts a search of `switchyard__search_tools`; `found`: it found some tool.
    pub fn count_tool_search(&self, found: bool) {
        self.catalog.searched(found);
    }

    /// Observes the size of one `tools/list` answer.
    pub fn tools_list_bytes(&self, bytes: usize) {
        self.catalog.listed(bytes);
    }

    /// Counts a tool call waiting on the ledger until the guard is dropped.
    pub fn waiting_on_ledger(&self) -> Counted {
        self.ledger_waiting.inc();
        Counted(self.ledger_waiting.clone())
    }

    /// Drops every series labelled with `backend`, which a reload removed: it no longer exists, so it is neither
    /// up nor down.
    pub fn forget_backend(&self, backend: &str) {
        let labels = BackendLabels { backend: self.names.get(backend) };
        for family in [&self.backend_up, &self.backend_sessions, &self.stdio_processes] {
            family.remove(&labels);
        }
        self.discovery_failures.remove(&labels);
        self.pins.forget(&labels.backend);
        let mut series = self.backend_series.lock();
        series.removed.insert(labels.backend);
        drop_series(&self.client_duration, &mut series.client_duration, |labels| &*labels.backend == backend);
        drop_series(&self.tool_calls, &mut series.tool_calls, |labels| &*labels.backend == backend);
    }

    /// Whether `backend` is up, as its health says (`backend::mcp_client::health`); a backend configured again
    /// after a reload removed it records series again.
    pub fn backend_up(&self, backend: &str, up: bool) {
        let labels = BackendLabels { backend: self.names.get(backend) };
        self.backend_up.get_or_create(&labels).set(i64::from(up));
        if !up {
            self.backend_series.lock().removed.remove(backend);
        }
    }

    /// How many of `backend`'s pinned tools and prompts are served and how many quarantined.
    pub fn tool_pins(&self, backend: &str, pinned: usize, quarantined: usize) {
        self.pins.set(self.names.get(backend), pinned, quarantined);
    }

    /// `changes` definitions of `backend` changed after they were pinned.
    pub fn definitions_changed(&self, backend: &str, changes: u64) {
        self.pins.changed(self.names.get(backend), changes);
    }

    /// One failed discovery of `backend`.
    pub fn discovery_failed(&self, backend: &str) {
        self.discovery_failures.get_or_create(&BackendLabels { backend: self.names.get(backend) }).inc();
    }

    /// Counts one live backend session of `backend` until the guard is dropped.
    pub fn live_session(&self, backend: &Arc<str>) -> Counted {
        counted(&self.backend_sessions, backend)
    }

    /// Counts one live stdio process of `backend` until the guard is dropped (when the process has ended).
    pub fn live_process(&self, backend: &Arc<str>) -> Counted {
        counted(&self.stdio_processes, backend)
    }

    pub fn agent_session_opened(&self) {
        self.sessions_opened.inc();
    }

    pub fn agent_session_deleted(&self) {
        self.sessions_deleted.inc();
    }

    /// A backend's server-to-client request handed to an agent.
    pub fn relayed_request(&self, method: &str) {
        self.relayed_requests.get_or_create(&MethodLabels { method: labels::method(method) }).inc();
    }

    /// Starts the audit trail every part then reaches through [`Metrics::audit`] (once per gateway; a second
    /// start is refused).
    pub fn start_audit(&self, settings: AuditSettings) -> Result<(), AuditError> {
        let audit = Audit::start(settings, self.audit_dropped.clone())?;
        self.audit.set(audit).map_err(|_| AuditError::Started)
    }

    /// The audit trail; `None` (one branch) without `[audit]`.
    pub fn audit(&self) -> Option<&Audit> {
        self.audit.get()
    }

    /// A request refused for its credentials; `reason` comes from a fixed list (the authenticator's).
    pub fn auth_failure(&self, reason: &'static str) {
        self.auth_failures.get_or_create(&ReasonLabels { reason }).inc();
    }
}

/// The name a counter is registered under: the exposition appends `_total` itself.
fn counter(name: &'static str) -> &'static str {
    name.strip_suffix("_total").unwrap_or(name)
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
pub(super) mod tests;
