//! A 2026-07-28 request served through the router (transports §"Streamable HTTP": delivery, cancellation; basic
//! §"`_meta`" `logLevel`): answered with JSON, or with an event stream once the backend sends something about the
//! request that the agent may see.
//!
//! Rules:
//! - The request is polled by the handler, and by the event stream's task once it has one, as a
//!   [`polled::Call`]: dropped unfinished (the agent went away), it goes on on a task of its own, so its ledger
//!   claim is always settled. The agent closing its response (the connection, or the event stream) is this era's
//!   cancellation and cancels the backend request (the claim becomes `unknown`, never retried).
//! - The stream carries only notifications about this request: `notifications/progress`, and
//!   `notifications/message` when the request's `_meta` set a `logLevel` at or below the message's level (none
//!   without one). Never a request, never anything else; then the response, which ends the stream.
//! - The client capabilities the request declares in `_meta` reach a 2026-07-28 backend in that request's `_meta`
//!   (so it may answer `input_required` for what the agent can give); backend sessions of the session era declare
//!   none, and a server-to-client request such a backend sends anyway is refused with [`super::REFUSAL`] (see
//!   docs/protocol-eras.md).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use super::checks::RequestMeta;
use super::{REFUSAL, events, shape};
use crate::front::stream::KEEP_ALIVE;
use crate::front::{Front, http};
use crate::front::{cutoff, polled};
use crate::mcp::method::{self, Method};
use crate::mcp::{Relay, RelayMessage, meta};
use crate::router::{Caller, Found, View};
use crate::telemetry::trace::ServerSpan;

/// One routed request of a sessionless agent.
pub(super) struct Call {
    pub(super) caller: Caller,
    /// The backend of `/mcp/{backend}`, `None` for `/mcp`.
    pub(super) backend: Option<String>,
    pub(super) method: Method,
    pub(super) params: Value,
    pub(super) request: RequestMeta,
    /// The request's SERVER span, when traces are on; the routed work runs inside it.
    pub(super) span: Option<ServerSpan>,
}

/// The relay of a sessionless agent's request: the client capabilities it declared for this request (a modern
/// backend hears them in `_meta`; backend sessions declare none), every server-to-client request refused,
/// messages about the request to `sink` (`None`: JSON only).
pub(super) fn relay(capabilities: Value, sink: Option<mpsc::UnboundedSender<RelayMessage>>) -> Relay {
    Relay::new(capabilities, sink).refusing_requests(REFUSAL)
}

/// The HTTP status and JSON-RPC response of a finished call.
type Answer = (StatusCode, Value);

/// Cancels the request when dropped armed: the agent went away before its answer.
struct CancelOnDrop(Option<Arc<Notify>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            // notify_one keeps a permit, so a cancel that races the request's start is not lost.
            cancel.notify_one();
        }
    }
}

impl Front {
    /// Serves `call`; `streaming`: whether the agent accepts an event stream.
    pub(super) async fn serve_call(self: &Arc<Self>, call: Call, streaming: bool) -> Response {
        let Call { caller, backend, method, params, request, span } = call;
        let RequestMeta { log_level, capabilities } = request;
        let cancel = Arc::new(Notify::new());
        let (sink, mut messages) = mpsc::unbounded_channel();
        let relay = relay(capabilities, streaming.then_some(sink)).cancellable(Arc::clone(&cancel));
        let router = Arc::clone(&self.router);
        let (cut_id, cut_method) = (caller.request_id.clone(), method.clone());
        let cut = move || {
            shape::answer(&cut_id, &cut_method, &Value::Null, cutoff::answer(&cut_method).map(Found::into_value))
        };
        // Polled here, detached to a task only when it must outlive this handler (see `polled::Call`).
        let mut call: polled::Call<Answer> = polled::Call::new(async move {
            let work = async {
                let view = backend.as_deref().map_or(View::All, View::Backend);
                let answer = router.handle(&caller, view, &method, params.clone(), &relay).await;
                // The era's shape edits every result (`resultType`, `_meta`): a tree.
                shape::answer(&caller.request_id, &method, &params, answer.map(Found::into_value))
            };
            let Some(span) = span else { return work.await };
            let answer = span.run(work).await;
            span.end(&answer.1);
            answer
        })
        .cut_at(&self.cutoff, cut);
        let mut armed = CancelOnDrop(Some(Arc::clone(&cancel)));
        let first = loop {
            tokio::select! {
                biased;
                Some(message) = messages.recv() => {
                    if let Some(first) = for_agent(message, log_level) {
                        break first;
                    }
                }
                answer = &mut call => {
                    armed.0 = None;
                    // Polled inline, the call may have sent its messages in the same poll that finished it.
                    let Some(first) = next_for_agent(&mut messages, log_level) else {
                        return http::json(answer.0, &answer.1);
                    };
                    call = polled::Call::new(std::future::ready(answer));
                    break first;
                }
            }
        };
        armed.0 = None;
        let (events, response) = events::open();
        tokio::spawn(pump(events, first, messages, call, cancel, log_level));
        response
    }
}

/// Feeds the event stream: the first message, what follows, keep-alives, then the response.
async fn pump(
    events: events::Events,
    first: Value,
    mut messages: mpsc::UnboundedReceiver<RelayMessage>,
    mut call: polled::Call<Answer>,
    cancel: Arc<Notify>,
    log_level: Option<usize>,
) {
    let mut open = events.send(&first);
    while open {
        open = tokio::select! {
            biased;
            Some(message) = messages.recv() => for_agent(message, log_level).is_none_or(|note| events.send(&note)),
            (_, reply) = &mut call => {
                while let Some(note) = next_for_agent(&mut messages, log_level) {
                    events.send(&note);
                }
                events.send(&reply);
                return;
            }
            () = tokio::time::sleep(KEEP_ALIVE) => events.keep_alive(),
            () = events.closed() => false,
        };
    }
    // The agent closed the stream: in this era that cancels the request, which then settles on a task of its own
    // (dropping `call` detaches it).
    cancel.notify_one();
}

/// The next message already queued that the agent sees, if any.
fn next_for_agent(messages: &mut mpsc::UnboundedReceiver<RelayMessage>, log_level: Option<usize>) -> Option<Value> {
    std::iter::from_fn(|| messages.try_recv().ok()).find_map(|message| for_agent(message, log_level))
}

/// What of a backend's message about the request the agent sees (see the module rules); `log_level`: the rank of
/// the lowest log level the request wants.
fn for_agent(message: RelayMessage, log_level: Option<usize>) -> Option<Value> {
    let RelayMessage::Notification(note) = message else {
        return None;
    };
    match note.get("method").and_then(Value::as_str)? {
        method::PROGRESS => Some(note),
        method::MESSAGE => {
            let level = note.pointer("/params/level").and_then(Value::as_str).and_then(meta::log_level_rank)?;
            log_level.filter(|wanted| level >= *wanted).map(|_| note)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn note(method: &str, params: Value) -> RelayMessage {
        RelayMessage::Notification(json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    #[test]
    fn only_progress_and_wanted_log_messages_reach_the_agent() {
        let quiet = None;
        let warnings = meta::log_level_rank("warning");
        assert!(for_agent(note(method::PROGRESS, json!({"progress": 1})), quiet).is_some());
        let error = || note(method::MESSAGE, json!({"level": "error", "data": "x"}));
        let info = || note(method::MESSAGE, json!({"level": "info", "data": "x"}));
        assert!(for_agent(error(), quiet).is_none(), "no logLevel, no log messages");
        assert!(for_agent(error(), warnings).is_some());
        assert!(for_agent(info(), warnings).is_none(), "below the level asked for");
        assert!(for_agent(note(method::TOOLS_LIST_CHANGED, json!({})), warnings).is_none());
        assert!(for_agent(RelayMessage::StreamOpened, warnings).is_none());
    }
}
