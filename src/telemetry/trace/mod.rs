//! OpenTelemetry traces of the gateway's MCP traffic (the OpenTelemetry MCP semantic conventions): one
//! SERVER span per agent request, one CLIENT span per backend request, exported over OTLP/HTTP as JSON.
//!
//! Owns: the [`Tracer`] (sampling, recording, export), the [`ServerSpan`] and [`ClientSpan`] the front and the
//! backend client record, and how a SERVER span's context reaches the CLIENT spans made while it runs.
//!
//! Rules:
//! - Off is free: a part holds an `Option<Tracer>` and, when it is `None`, does nothing else — no span object,
//!   no allocation, no clock read.
//! - Context: the agent's `traceparent` (and `tracestate`) in `params._meta` makes our SERVER span its child; for
//!   a 2026-07-28 agent, the HTTP `traceparent` header does when `_meta` carries none. A malformed one is ignored
//!   and the span starts a new trace ([`context`]). While the front's work runs
//!   inside [`ServerSpan::run`], the SERVER span's context is the task's (a Tokio task-local), so the backend
//!   client's [`Tracer::client_span`] finds its parent without the router carrying it. The CLIENT span's context
//!   is written into the backend request's `params._meta` ([`ClientSpan::inject`]), replacing the agent's, so the
//!   backend continues our CLIENT span.
//! - Sampling ([`sampler`]) decides at each span; an unsampled span records nothing but still propagates its
//!   context (flag `00`), so the backend keeps the trace id.
//! - A span dropped before it was ended (its future cancelled) is exported with `error.type` `cancelled`.
//! - Exporting never delays a call ([`export`]): spans wait in a bounded queue and are dropped, and counted, when
//!   it is full.

mod context;
pub mod conventions;
mod export;
mod otlp;
mod sampler;
mod span;

use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;

pub use context::{SpanContext, SpanId, TRACEPARENT, TRACESTATE, TraceId};
pub use conventions::CallFailure;
pub use export::{Batch, Counts, Export, ExportSetupError};
pub use sampler::{RootSampler, Sampler};
use span::{Attr, Kind, SpanRecord};

tokio::task_local! {
    /// The context of the SERVER span whose work the task is doing.
    static SERVING: SpanContext;
}

/// The span events a CLIENT span records.
pub const HANDSHAKE_EVENT: &str = "switchyard.backend.handshake";
pub const RETRY_EVENT: &str = "switchyard.backend.retry";
pub const RESUMPTION_EVENT: &str = "switchyard.backend.resumption";

/// Everything the tracer needs, in the telemetry's own plain types (the composition root lowers the configuration
/// into it).
#[derive(Debug, Clone)]
pub struct TraceSettings {
    pub export: Export,
    pub sampler: Sampler,
}

/// Records spans and hands them to the exporter. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Tracer(Arc<Inner>);

struct Inner {
    sampler: Sampler,
    queue: export::Queue,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").field("sampler", &self.0.sampler).finish_non_exhaustive()
    }
}

impl Tracer {
    /// Starts the exporter on the current Tokio runtime; it counts into `counts` ([`crate::telemetry::Metrics::trace_counts`]).
    pub fn start(settings: TraceSettings, counts: Counts) -> Result<Tracer, ExportSetupError> {
        let queue = export::Queue::start(settings.export, counts)?;
        Ok(Tracer(Arc::new(Inner { sampler: settings.sampler, queue })))
    }

    /// Exports every span ended so far (for shutdown; the caller bounds the wait).
    pub async fn flush(&self) {
        self.0.queue.flush().await;
    }

    /// What became of the spans recorded so far.
    #[cfg(test)]
    pub fn counts(&self) -> &Counts {
        &self.0.queue.counts
    }

    /// A new span's context under `parent`, and its record when it is sampled.
    fn begin(
        &self,
        parent: Option<&SpanContext>,
        name: impl FnOnce() -> String,
        kind: Kind,
    ) -> (SpanContext, Option<SpanRecord>) {
        let trace_id = parent.map_or_else(TraceId::random, |parent| parent.trace_id);
        let sampled = self.0.sampler.samples(parent, trace_id);
        let trace_state = parent.and_then(|parent| parent.trace_state.clone());
        let context = SpanContext { trace_id, span_id: SpanId::random(), sampled, remote: false, trace_state };
        let record = sampled.then(|| SpanRecord::start(context.clone(), parent, name(), kind));
        (context, record)
    }

    /// The SERVER span of one agent request.
    pub fn server_span(&self, request: &ServerRequest<'_>) -> ServerSpan {
        self.server_span_or(request, None)
    }

    /// The SERVER span of one agent request whose context may also come from elsewhere than `params._meta`
    /// (`fallback`: a 2026-07-28 agent's HTTP `traceparent`); `_meta` wins, being the MCP request's own.
    pub fn server_span_or(&self, request: &ServerRequest<'_>, fallback: Option<SpanContext>) -> ServerSpan {
        let parent = SpanContext::from_params(request.params).or(fallback);
        let name = || conventions::span_name(request.method, request.params);
        let (context, mut record) = self.begin(parent.as_ref(), name, Kind::Server);
        if let Some(record) = &mut record {
            record.attributes = conventions::request_attributes(request.method, Some(request.id), request.params);
            record.attributes.extend([
                Attr::text(conventions::NETWORK_TRANSPORT, "tcp"),
                Attr::text(conventions::NETWORK_PROTOCOL_NAME, "http"),
                Attr::text(conventions::NETWORK_PROTOCOL_VERSION, "1.1"),
            ]);
            record.attributes.extend(request.peer.map(|ip| Attr::text(conventions::CLIENT_ADDRESS, &ip.to_string())));
            if let Some((session, version)) = request.session {
                set_session(record, Some(session), version);
            }
        }
        ServerSpan { context, record, tracer: self.clone() }
    }

    /// The CLIENT span of one backend request, a child of the SERVER span the task serves (a root span for the
    /// gateway's own requests, such as discovery).
    pub fn client_span(&self, request: &ClientRequest<'_>) -> ClientSpan {
        let parent = SERVING.try_with(SpanContext::clone).ok();
        let name = || conventions::span_name(request.method, request.params);
        let (context, mut record) = self.begin(parent.as_ref(), name, Kind::Client);
        if let Some(record) = &mut record {
            record.attributes = conventions::request_attributes(request.method, None, request.params);
            record.attributes.push(Attr::text(conventions::NETWORK_TRANSPORT, request.peer.transport));
            if let Some(address) = &request.peer.address {
                record.attributes.push(Attr::text(conventions::SERVER_ADDRESS, address));
            }
            if let Some(port) = request.peer.port {
                record.attributes.push(Attr::int(conventions::SERVER_PORT, i64::from(port)));
            }
        }
        ClientSpan { context, record: record.map(Mutex::new), tracer: self.clone() }
    }

    fn export(&self, record: SpanRecord) {
        self.0.queue.push(record);
    }
}

/// What the front knows of an agent's request when it starts serving it.
pub struct ServerRequest<'a> {
    pub method: &'a str,
    pub id: &'a Value,
    pub params: &'a Value,
    /// The agent session's key and its negotiated protocol version (none yet for `initialize`).
    pub session: Option<(&'a str, &'a str)>,
    pub peer: Option<IpAddr>,
}

/// What the backend client knows of a backend request when it starts it.
pub struct ClientRequest<'a> {
    pub method: &'a str,
    pub params: &'a Value,
    pub peer: Peer,
}

/// Where a backend is (`network.transport`, `server.address`, `server.port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `tcp` for HTTP transports, `pipe` for stdio.
    pub transport: &'static str,
    pub address: Option<String>,
    pub port: Option<u16>,
}

/// Sets (or replaces) `mcp.session.id` and `mcp.protocol.version`.
fn set_session(record: &mut SpanRecord, session: Option<&str>, version: &str) {
    record.attributes.retain(|attr| attr.key != conventions::SESSION_ID && attr.key != conventions::PROTOCOL_VERSION);
    record.attributes.extend(session.map(|session| Attr::text(conventions::SESSION_ID, session)));
    record.attributes.push(Attr::text(conventions::PROTOCOL_VERSION, version));
}

/// Ends `record` with `failure` (if any) and queues it.
fn finish(tracer: &Tracer, mut record: SpanRecord, failure: Option<&CallFailure>) {
    if let Some(failure) = failure {
        if let Some(code) = failure.rpc_code {
            record.attributes.push(Attr::text(conventions::STATUS_CODE, &code.to_string()));
        }
        record.fail(&failure.error_type, failure.message.as_deref());
    }
    record.end();
    tracer.export(record);
}

/// The SERVER span of one agent request.
pub struct ServerSpan {
    context: SpanContext,
    record: Option<SpanRecord>,
    tracer: Tracer,
}

impl ServerSpan {
    /// Runs the request's work with this span as the task's context, so CLIENT spans made in it are its children.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        SERVING.scope(self.context.clone(), work).await
    }

    /// Records the agent session the request opened (`initialize`).
    pub fn opened_session(&mut self, session: &str, version: &str) {
        if let Some(record) = &mut self.record {
            set_session(record, Some(session), version);
        }
    }

    /// Records the protocol version of a request served without a session (the 2026-07-28 era's, from its `_meta`).
    pub fn sessionless(&mut self, version: &str) {
        if let Some(record) = &mut self.record {
            set_session(record, None, version);
        }
    }

    /// Ends the span with the JSON-RPC response the agent gets.
    pub fn end(mut self, response: &Value) {
        if let Some(record) = self.record.take() {
            finish(&self.tracer, record, conventions::response_failure(response).as_ref());
        }
    }
}

impl Drop for ServerSpan {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            finish(&self.tracer, record, Some(&CallFailure::new("cancelled", "the request's work was abandoned")));
        }
    }
}

/// The CLIENT span of one backend request. Shared by reference with the exchange that records its events.
pub struct ClientSpan {
    context: SpanContext,
    record: Option<Mutex<SpanRecord>>,
    tracer: Tracer,
}

impl ClientSpan {
    fn record(&self) -> Option<MutexGuard<'_, SpanRecord>> {
        self.record.as_ref().map(Mutex::lock)
    }

    /// Writes this span's context into the request's `params._meta`, so the backend continues it.
    pub fn inject(&self, params: &mut Value) {
        self.context.inject(params);
    }

    /// Records the backend session the request goes out on (again after a retry on a new session).
    pub fn session(&self, session: Option<&str>, version: &str) {
        if let Some(mut record) = self.record() {
            set_session(&mut record, session, version);
        }
    }

    /// Records the request's JSON-RPC id on the backend session.
    pub fn request_id(&self, id: &Value) {
        if let (Some(mut record), Some(id)) = (self.record(), conventions::request_id(id)) {
            record.attributes.retain(|attr| attr.key != conventions::REQUEST_ID);
            record.attributes.push(Attr::text(conventions::REQUEST_ID, &id));
        }
    }

    /// A new backend session was started for the request: its version, or why the handshake failed.
    pub fn handshake(&self, outcome: Result<&str, String>) {
        if let Some(mut record) = self.record() {
            let attributes = match outcome {
                Ok(version) => vec![Attr::text(conventions::PROTOCOL_VERSION, version)],
                Err(error) => {
                    vec![Attr::text("error.type", "handshake_failed"), Attr::text("exception.message", &error)]
                }
            };
            record.event(HANDSHAKE_EVENT, attributes);
        }
    }

    /// The request is sent again (`reason`: `session_ended`, `authorization`).
    pub fn retry(&self, reason: &'static str) {
        if let Some(mut record) = self.record() {
            record.event(RETRY_EVENT, vec![Attr::text("switchyard.retry.reason", reason)]);
        }
    }

    /// The answer's event stream broke and is resumed (`attempt` 1, 2, …).
    pub fn resumption(&self, attempt: usize) {
        if let Some(mut record) = self.record() {
            let attempt = i64::try_from(attempt).unwrap_or(i64::MAX);
            record.event(RESUMPTION_EVENT, vec![Attr::int("switchyard.resumption.attempt", attempt)]);
        }
    }

    /// Ends the span: the backend's `result`, or how the request failed.
    pub fn end(mut self, outcome: Result<&Value, CallFailure>) {
        let Some(record) = self.record.take() else { return };
        let record = record.into_inner();
        let failure = match outcome {
            Ok(result) => conventions::result_failure(result),
            Err(failure) => Some(failure),
        };
        finish(&self.tracer, record, failure.as_ref());
    }
}

impl Drop for ClientSpan {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            let record = record.into_inner();
            finish(&self.tracer, record, Some(&CallFailure::new("cancelled", "the backend request was abandoned")));
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
