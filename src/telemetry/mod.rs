//! Telemetry: what the gateway tells its operators about the work it does — metrics, access
//! lines, the log's format and traces. Every layer reports to it; it knows none of them.
//!
//! Owns: [`metrics`] (the registry, every metric name, the Prometheus exposition), [`access`] (one agent request's
//! record: its access line and its duration), [`labels`] (the bounded label values), [`logs`] (text or JSON on
//! stderr), [`throttle`] (repeating failures logged once per interval), [`trace`] (OpenTelemetry traces over OTLP/HTTP following the MCP semantic conventions) and [`audit`] (the hash-chained audit trail, to a file and as OTLP logs).
//!
//! Rules: it may use the MCP vocabulary (`crate::mcp`), the calendar and the glob leaves, and nothing else of the crate; the front, the router and
//! the backend client call into it with plain values (names, labels, durations); no label value comes from raw
//! input.

pub(crate) mod access;
mod access_line;
pub mod audit;
mod catalog;
pub(crate) mod labels;
pub mod logs;
pub(crate) mod metrics;
mod otlp_post;
mod pins;
mod tasks;
mod throttle;
pub(crate) mod trace;

pub use access::RequestRecord;
pub use labels::{ClaimWrite, ErrorType, ToolOutcome};
pub use metrics::{Counted, Metrics};
pub use throttle::LogThrottle;
