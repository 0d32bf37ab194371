//! One agent request as telemetry sees it: what the layers learn about it while it is
//! served, and, once it is done, its access-log line (target [`ACCESS_TARGET`]) and its
//! `mcp_server_operation_duration_seconds` observation.
//!
//! Rules:
//! - The front starts a [`RequestRecord`] per HTTP request of the MCP endpoint and shares it (`Arc`) with the
//!   router; each fills in what it knows: principal and session (front), method and error type (front), tool,
//!   backend and tool outcome (router, from the catalog only: an unresolved name is `_unknown`).
//! - The request is done when the last holder lets go: its answer's status is set and its call has returned (an
//!   SSE answer's call may outlive the response head). Then, exactly once, the line is written and — when the
//!   message was a JSON-RPC request — the duration observed. A request whose answer was never sent (the agent
//!   went away) is logged with status 499, as nginx does.
//! - The line is written by [`super::access_line`] (formatted by hand, off the request's thread).
//! - When the audit trail is on, a request that resolved a tool also becomes its audit event when dropped: a
//!   `tool_call` (with the arguments [`RequestRecord::arguments`] kept, the outcome and the duration), or a
//!   `policy_denial` / `limit_refusal` when the call was refused before it ran.
//! - A tool call the gateway goes on running after the request is answered (a task's) has a record of its own
//!   ([`RequestRecord::background`]): it writes no line and counts nothing (the task is counted as a task), and
//!   becomes the call's `tool_call` event only once the call settled ([`RequestRecord::settled`]), not when it
//!   stops to wait for the agent's input.
//! - The line never holds a credential: only the principal's name, the session's id (not its sealed token),
//!   label values and numbers.

use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::Value;

use super::access_line::AccessFields;
use super::audit::AuditEvent;
use super::labels::{self, ErrorType, ToolOutcome};
use super::metrics::Metrics;

/// The `tracing` target of access lines (so `SWITCHYARD_LOG=switchyard::access=off` silences them).
pub const ACCESS_TARGET: &str = "switchyard::access";
/// The status logged for a request whose answer was never sent.
const NO_ANSWER: u16 = 499;

/// What is known about one agent request; reported when dropped (see the module rules).
pub struct RequestRecord {
    /// `None`: a request served outside the MCP endpoint's routes (unit tests, other callers): nothing reported.
    metrics: Option<Arc<Metrics>>,
    /// `Some` for a background call's record: whether its call settled.
    background: Option<AtomicBool>,
    started: Instant,
    fields: Mutex<Fields>,
}

#[derive(Default)]
struct Fields {
    /// The HTTP method, the line's `method` until a JSON-RPC method is known.
    verb: &'static str,
    principal: Option<String>,
    session: Option<String>,
    /// The MCP method's label, and whether the message was a request (only requests are operations).
    method: Option<&'static str>,
    request: bool,
    tool: Option<Arc<str>>,
    backend: Option<Arc<str>>,
    outcome: Option<ToolOutcome>,
    error: ErrorType,
    status: Option<u16>,
    /// The tool call's arguments as the audit trail shows them (set only when it is on).
    arguments: Option<Value>,
    /// Why the call was refused before it ran, for the audit trail.
    refusal: Option<Refusal>,
}

/// A refusal the audit trail records as its own event rather than as a tool call.
enum Refusal {
    Policy,
    Limit(Arc<str>),
}

impl RequestRecord {
    /// A request of the MCP endpoint, received now with HTTP method `verb`.
    pub fn start(metrics: Arc<Metrics>, verb: &'static str) -> Arc<RequestRecord> {
        let fields = Fields { verb, ..Fields::default() };
        let metrics = Some(metrics);
        Arc::new(RequestRecord { metrics, background: None, started: Instant::now(), fields: Mutex::new(fields) })
    }

    /// A record that reports nothing.
    pub fn unrecorded() -> Arc<RequestRecord> {
        Arc::new(RequestRecord { metrics: None, background: None, started: Instant::now(), fields: Mutex::default() })
    }

    /// The record of a call run in the background for this request, starting now: this request's principal and
    /// session, reported only as its audit event once [`RequestRecord::settled`].
    pub fn background(&self) -> Arc<RequestRecord> {
        let known = self.fields.lock();
        let fields = Fields { principal: known.principal.clone(), session: known.session.clone(), ..Fields::default() };
        Arc::new(RequestRecord {
            metrics: self.metrics.clone(),
            background: Some(AtomicBool::new(false)),
            started: Instant::now(),
            fields: Mutex::new(fields),
        })
    }

    /// The background call settled: its event is written when the record is dropped.
    pub fn settled(&self) {
        if let Some(settled) = &self.background {
            settled.store(true, Ordering::Relaxed);
        }
    }

    /// The metrics a request counts in (none for a background call's record).
    fn counted(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref().filter(|_| self.background.is_none())
    }

    /// The authenticated principal's name.
    pub fn principal(&self, name: &str) {
        self.fields.lock().principal = Some(name.to_owned());
    }

    /// The agent session's id (never its sealed token).
    pub fn session(&self, id: &impl Display) {
        self.fields.lock().session = Some(id.to_string());
    }

    /// The message's JSON-RPC method; `request`: it has an id (a notification is no operation).
    pub fn message(&self, method: &str, request: bool) {
        let mut fields = self.fields.lock();
        fields.method = Some(labels::method(method));
        fields.request = request;
    }

    /// The tool the request names, resolved by the catalog: its backend and exposed name.
    pub fn tool(&self, backend: &Arc<str>, exposed: &str) {
        let tool = self.metrics.as_ref().map_or_else(|| Arc::from(exposed), |metrics| metrics.name(exposed));
        let mut fields = self.fields.lock();
        fields.backend = Some(Arc::clone(backend));
        fields.tool = Some(tool);
    }

    /// The request names a tool the catalog does not know (or none).
    pub fn unknown_tool(&self) {
        let tool = self.metrics.as_ref().map_or_else(|| Arc::from(labels::UNKNOWN_TOOL), |m| m.unknown_tool());
        self.fields.lock().tool = Some(tool);
    }

    /// How the tool call ended; counted in `switchyard_tool_calls_total` now (needs [`RequestRecord::tool`]).
    pub fn tool_outcome(&self, outcome: ToolOutcome) {
        let mut fields = self.fields.lock();
        fields.outcome = Some(outcome);
        if let (Some(metrics), Some(backend), Some(tool)) = (self.counted(), &fields.backend, &fields.tool) {
            metrics.count_tool_call(backend, tool, outcome);
        }
    }

    /// The request was refused by the limit labelled `limit` (`switchyard_limit_refusals_total`).
    pub fn limit_refused(&self, limit: &Arc<str>) {
        if self.metrics.is_some() {
            if let Some(counted) = self.counted() {
                counted.limit_refused(limit);
            }
            self.fields.lock().refusal = Some(Refusal::Limit(Arc::clone(limit)));
        }
    }

    /// The principal's policies do not grant the tool (the agent is told it is unknown).
    pub fn policy_denied(&self) {
        self.fields.lock().refusal = Some(Refusal::Policy);
    }

    /// The tool call's arguments, kept for the audit trail when it is on (nothing else happens when it is off);
    /// `digest` is the ledger's digest of arguments.
    pub fn arguments(&self, arguments: Option<&Value>, digest: impl FnOnce(&Value) -> String) {
        if let Some(audit) = self.metrics.as_ref().and_then(|metrics| metrics.audit()) {
            let shown = audit.arguments(arguments.unwrap_or(&Value::Null), digest);
            self.fields.lock().arguments = Some(shown);
        }
    }

    /// The JSON-RPC response the agent is sent.
    pub fn answered(&self, response: &Value) {
        self.fields.lock().error = ErrorType::of_response(response);
    }

    /// The request was answered with a result that reports `error` (a result passed on as text, whose response
    /// is not a tree [`answered`](Self::answered) could read).
    pub fn answered_with(&self, error: ErrorType) {
        self.fields.lock().error = error;
    }

    /// The request was refused with this JSON-RPC error code (an HTTP error answer of the front).
    pub fn refused(&self, code: i64) {
        self.fields.lock().error = ErrorType::Rpc(code);
    }

    /// The HTTP status of the answer.
    pub fn responded(&self, status: u16) {
        self.fields.lock().status = Some(status);
    }
}

impl std::fmt::Debug for RequestRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestRecord").field("recorded", &self.metrics.is_some()).finish_non_exhaustive()
    }
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        let Some(metrics) = &self.metrics else { return };
        let elapsed = self.started.elapsed();
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let fields = self.fields.get_mut();
        if let Some(settled) = &self.background {
            if settled.load(Ordering::Relaxed) {
                let outcome = fields.outcome.map_or("error", ToolOutcome::as_str);
                audit(metrics, fields, outcome, micros);
            }
            return;
        }
        if let (Some(method), true) = (fields.method, fields.request) {
            metrics.observe_server(method, fields.tool.as_ref(), fields.error, elapsed);
        }
        let outcome = match (fields.outcome, fields.error) {
            (Some(outcome), _) => outcome.as_str(),
            (None, ErrorType::None) => "ok",
            (None, _) => "error",
        };
        super::access_line::write(&AccessFields {
            principal: fields.principal.as_deref().unwrap_or("-"),
            session: fields.session.as_deref().unwrap_or("-"),
            method: fields.method.unwrap_or(fields.verb),
            tool: fields.tool.as_deref().unwrap_or("-"),
            backend: fields.backend.as_deref().unwrap_or("-"),
            outcome,
            error_type: fields.error.label(),
            status: fields.status.unwrap_or(NO_ANSWER),
            micros,
        });
        audit(metrics, fields, outcome, micros);
    }
}

fn audit(metrics: &Metrics, fields: &mut Fields, outcome: &str, micros: u64) {
    if let Some(audit) = metrics.audit()
        && let Some(event) = audit_event(fields, outcome, micros)
    {
        audit.record(event);
    }
}

/// The audit event of a request that resolved a tool (a call, or its refusal by a policy or a limit).
fn audit_event(fields: &mut Fields, outcome: &str, micros: u64) -> Option<AuditEvent> {
    let (Some(backend), Some(tool)) = (&fields.backend, &fields.tool) else { return None };
    let kind = match &fields.refusal {
        None => "tool_call",
        Some(Refusal::Policy) => "policy_denial",
        Some(Refusal::Limit(_)) => "limit_refusal",
    };
    let text = |value: &Option<String>| value.clone().map_or(Value::Null, Value::String);
    let mut event = AuditEvent::new(kind)
        .field("principal", text(&fields.principal))
        .field("session", text(&fields.session))
        .field("backend", &**backend)
        .field("tool", &**tool);
    match &fields.refusal {
        Some(Refusal::Limit(limit)) => event = event.field("limit", &**limit),
        Some(Refusal::Policy) => {}
        None => {
            event = event
                .field("arguments", fields.arguments.take().unwrap_or(Value::Null))
                .field("outcome", outcome)
                .field("duration_ms", micros as f64 / 1000.0);
        }
    }
    Some(event)
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
