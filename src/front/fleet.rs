//! Requests that land on one replica and belong to another: replicas behind one load balancer, sharing a
//! PostgreSQL ledger, pass each other what only the replica holding a call can act on (see docs/deployment.md,
//! *A fleet of replicas*). The front reaches the other replicas through a [`FleetLink`] (the composition root's,
//! over the ledger's fleet bus); with one replica there is none and nothing here runs.
//!
//! Rules:
//! - An agent's response to a relayed server-to-client request, and a `notifications/cancelled`, that nobody
//!   waits for here are told to every other replica, which applies them exactly as if they had landed there
//!   (same session, same id): the one holding the request acts, the others find nothing. The agent is answered
//!   202 at once either way, as on one replica.
//! - A 2026-07-28 retry whose `requestState` continues a tool call another replica holds is forwarded whole
//!   (path, headers, body) to that replica, which serves it as its own request — authentication included — and
//!   sends back the response; the agent gets that response. The owner confirms at once that it took the request
//!   and answers every [`ALIVE_EVERY`] check while it runs; when it does not, it is gone, and the agent gets the
//!   answer of a call lost with its replica (outcome `unknown`, never run again): no hang, no rerun. A forwarded
//!   request that reaches its owner only after waiting half of [`ALIVE_EVERY`] (the owner was reconnecting to
//!   the bus) is not served: its sender may already have given the agent that answer.
//! - What a backend sends on its standalone stream for an agent session with no standalone stream here goes to
//!   the one replica that holds one (MCP transports §"Multiple Connections": each message on one stream only):
//!   the replicas are asked who holds one, the first to say so is sent the message, and a message nobody claims
//!   within [`ALIVE_EVERY`] is dropped (a request's waiter with it, so its backend is told at once). A session's
//!   messages are sent one after another, in the order the backend sent them, each to the holder its first
//!   waiting message found. A relayed request keeps its waiter here; the agent's answer comes back like any
//!   answer that lands elsewhere. A request that reaches the holder after its stream closed is answered there
//!   at once with an error (-32603), sent back as that answer, so the backend is not left waiting. A gateway
//!   task's `notifications/tasks/status` for a session with no standalone stream here goes the same way.
//! - Every task status this replica writes is told to every other replica (its principal and the task's id,
//!   never the task itself), whose router reads it back for the listen streams there that watch it.
//! - A backend's `list_changed` heard here is told to every other replica, which rediscovers that backend (and
//!   tells its agents, as after any discovery that changed their tools).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use super::Front;
use super::pending::PendingRequests;
use crate::mcp::jsonrpc;
use crate::router::HeldElsewhere;

/// How long a forwarded request's owner may stay silent (not confirming, not answering a check) before it is
/// taken for gone.
pub const ALIVE_EVERY: Duration = Duration::from_secs(5);
/// The error a relayed request gets when the stream it was sent to closed before it arrived.
const UNDELIVERED: &str = "the agent's stream closed before the request reached it";
/// The largest forwarded response read back.
const MAX_FORWARDED_RESPONSE: usize = 64 << 20;
/// Headers a forwarded request does not carry (hop-by-hop, or recomputed for the new body).
const NOT_FORWARDED: [&str; 4] = ["content-length", "connection", "transfer-encoding", "keep-alive"];

/// What sending on the fleet link gives: done once the message left, or why it could not.
pub type Sending<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// How this replica reaches the others.
pub trait FleetLink: Send + Sync {
    /// Sends `body` to the replica `to`, or to every other replica (`None`).
    fn send<'a>(&'a self, to: Option<&'a str>, body: String) -> Sending<'a>;
}

/// One message between replicas.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
enum Note {
    /// An agent's response to a relayed request of `session`.
    Answer { session: String, message: Value },
    /// An agent's `notifications/cancelled` for request `id` of `session`.
    Cancel { session: String, id: Value },
    /// A request forwarded to its owner, numbered `n` by the sender.
    Forward { n: u64, request: Carried },
    /// The owner took request `n`, or still serves it.
    Alive { n: u64 },
    /// Is request `n` still served?
    Check { n: u64 },
    /// The owner's response to request `n`.
    Reply { n: u64, response: Carried },
    /// Who holds a standalone stream of `session`? Asked as `n`.
    Seek { n: u64, session: String },
    /// The sender holds one (the answer to seek `n`).
    Holds { n: u64 },
    /// A message for `session`'s standalone stream, from a backend's standalone stream on the sender.
    Deliver { session: String, message: Value },
    /// The sender wrote a status of `principal`'s task `id` (for the listen streams watching it).
    Task { principal: String, id: String },
    /// `backend` announced on the sender that its tools or prompts changed.
    ListChanged { backend: String },
}

/// An HTTP message carried between replicas: the request's path (or the response's status), headers and body.
#[derive(Debug, Serialize, Deserialize)]
struct Carried {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    path: String,
    #[serde(default)]
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

/// What the sender of a forwarded request, or of a seek, hears about it.
enum Heard {
    Alive,
    Reply(Carried),
    /// This replica holds the stream sought.
    Holds(String),
}

/// This replica's side of the fleet.
pub struct Fleet {
    link: Arc<dyn FleetLink>,
    /// Requests forwarded and seeks sent from here, waiting for their answers.
    forwards: Mutex<HashMap<u64, mpsc::UnboundedSender<Heard>>>,
    /// Per agent session, the messages for its standalone stream on another replica not yet sent there.
    outbox: Mutex<HashMap<String, VecDeque<Value>>>,
    next: AtomicU64,
}

impl Fleet {
    pub fn new(link: Arc<dyn FleetLink>) -> Fleet {
        Fleet { link, forwards: Mutex::default(), outbox: Mutex::default(), next: AtomicU64::new(0) }
    }

    /// Sends `note` without waiting; a message that cannot be sent is logged (its request then ends by its own
    /// deadline, as a lost message would).
    fn tell(&self, to: Option<&str>, note: &Note) {
        let Ok(body) = serde_json::to_string(note) else { return };
        let (link, to) = (Arc::clone(&self.link), to.map(str::to_owned));
        tokio::spawn(async move {
            if let Err(error) = link.send(to.as_deref(), body).await {
                tracing::warn!(%error, "fleet: a message to another replica was not sent");
            }
        });
    }

    /// Tells the other replicas an agent's response nobody waits for here.
    pub(super) fn answer_elsewhere(&self, session: &str, message: Value) {
        self.tell(None, &Note::Answer { session: session.to_owned(), message });
    }

    /// Tells the other replicas a cancel for a request not running here.
    pub(super) fn cancel_elsewhere(&self, session: &str, id: &Value) {
        self.tell(None, &Note::Cancel { session: session.to_owned(), id: id.clone() });
    }

    /// Tells the other replicas that this one wrote a status of `principal`'s task `id`.
    pub(super) fn task_changed(&self, principal: &str, id: &str) {
        self.tell(None, &Note::Task { principal: principal.to_owned(), id: id.to_owned() });
    }

    /// Tells the other replicas that `backend` announced here that its tools or prompts changed.
    pub(super) fn list_changed(&self, backend: &str) {
        self.tell(None, &Note::ListChanged { backend: backend.to_owned() });
    }

    /// A new number for a message whose answers are awaited, where they arrive, and what forgets it.
    fn awaiting(&self) -> (u64, mpsc::UnboundedReceiver<Heard>, Forgotten<'_>) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (heard, hearing) = mpsc::unbounded_channel();
        self.forwards.lock().insert(n, heard);
        (n, hearing, Forgotten { fleet: self, n })
    }

    /// Hands `message` to the replica holding a standalone stream of `session`, after the messages for it that
    /// are still waiting; a relayed request that no replica takes is forgotten in `pending`.
    pub(super) fn deliver_elsewhere(self: &Arc<Self>, session: String, message: Value, pending: &Arc<PendingRequests>) {
        let mut outbox = self.outbox.lock();
        if let Some(waiting) = outbox.get_mut(&session) {
            return waiting.push_back(message);
        }
        outbox.insert(session.clone(), VecDeque::from([message]));
        tokio::spawn(Arc::clone(self).hand_over(session, Arc::clone(pending)));
    }

    /// Finds the holder of `session`'s standalone stream and sends it the session's waiting messages one by one,
    /// in order, until none is left.
    async fn hand_over(self: Arc<Self>, session: String, pending: Arc<PendingRequests>) {
        let holder = self.holder_of(&session).await;
        loop {
            let message = {
                let mut outbox = self.outbox.lock();
                let Some(message) = outbox.get_mut(&session).and_then(VecDeque::pop_front) else {
                    outbox.remove(&session);
                    return;
                };
                message
            };
            let Some(holder) = &holder else {
                pending.forget(&session, &message);
                continue;
            };
            let Ok(body) = serde_json::to_string(&Note::Deliver { session: session.clone(), message }) else {
                continue;
            };
            if let Err(error) = self.link.send(Some(holder), body).await {
                tracing::warn!(%error, "fleet: a message for a standalone stream on another replica was not sent");
            }
        }
    }

    /// The replica that first says it holds a standalone stream of `session`; `None` when none does within
    /// [`ALIVE_EVERY`].
    async fn holder_of(&self, session: &str) -> Option<String> {
        let (n, mut hearing, _forgotten) = self.awaiting();
        self.tell(None, &Note::Seek { n, session: session.to_owned() });
        loop {
            match tokio::time::timeout(ALIVE_EVERY, hearing.recv()).await {
                Ok(Some(Heard::Holds(holder))) => return Some(holder),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Forwards a request to `owner`; `None` when the owner is gone (see the module rules).
    async fn forward(&self, owner: &str, request: Carried) -> Option<Carried> {
        let (n, mut hearing, _forgotten) = self.awaiting();
        self.tell(Some(owner), &Note::Forward { n, request });
        loop {
            match tokio::time::timeout(ALIVE_EVERY, hearing.recv()).await {
                Ok(Some(Heard::Reply(response))) => return Some(response),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
            // Alive: ask again before the next silence is judged.
            self.tell(Some(owner), &Note::Check { n });
        }
    }

    fn heard(&self, n: u64, what: Heard) {
        if let Some(waiting) = self.forwards.lock().get(&n) {
            let _ = waiting.send(what);
        }
    }
}

/// The answer a relayed request gets when its stream closed before it arrived; `None` for a notification.
fn undelivered(message: &Value) -> Option<Value> {
    message.get("method")?;
    let id = message.get("id")?;
    Some(jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, UNDELIVERED))
}

/// Forgets a forwarded request when its sender stops waiting.
struct Forgotten<'a> {
    fleet: &'a Fleet,
    n: u64,
}

impl Drop for Forgotten<'_> {
    fn drop(&mut self) {
        self.fleet.forwards.lock().remove(&self.n);
    }
}

impl Front {
    /// Serves one message another replica sent this one, `age` after it was sent.
    pub fn hear_fleet(self: &Arc<Self>, from: String, body: &str, age: Duration) {
        match serde_json::from_str(body) {
            Ok(Note::Forward { .. }) if age > ALIVE_EVERY / 2 => {
                tracing::info!(from, ?age, "fleet: a forwarded request arrived too late to be served");
            }
            Ok(note) => self.heard(from, note),
            Err(error) => tracing::warn!(%error, from, "fleet: ignored a malformed message"),
        }
    }

    fn heard(self: &Arc<Self>, from: String, note: Note) {
        let Some(fleet) = &self.fleet else { return };
        match note {
            Note::Answer { session, message } => drop(self.pending.answer(&session, message)),
            Note::Cancel { session, id } => drop(self.cancels.cancel(&session, &id)),
            Note::Seek { n, session } if self.streams.has(&session) => fleet.tell(Some(&from), &Note::Holds { n }),
            Note::Seek { .. } => {}
            Note::Holds { n } => fleet.heard(n, Heard::Holds(from)),
            Note::Deliver { session, message } => {
                let failed = undelivered(&message);
                if self.streams.deliver(&session, message) {
                    return;
                }
                tracing::debug!("fleet: a standalone stream closed before its message arrived");
                // The sender's backend waits for the answer: it gets an error now, not when its stream ends.
                if let Some(message) = failed {
                    fleet.tell(Some(&from), &Note::Answer { session, message });
                }
            }
            Note::Task { principal, id } => {
                let router = Arc::clone(&self.router);
                tokio::spawn(async move { router.task_changed_elsewhere(&principal, &id).await });
            }
            Note::ListChanged { backend } => {
                let router = Arc::clone(&self.router);
                tokio::spawn(async move { router.rediscover_announced(&backend).await });
            }
            Note::Forward { n, request } => {
                fleet.tell(Some(&from), &Note::Alive { n });
                tokio::spawn(Arc::clone(self).serve_forwarded(from, n, request));
            }
            // Answered whatever `n` is: a request this replica took is served until it answers.
            Note::Check { n } => fleet.tell(Some(&from), &Note::Alive { n }),
            Note::Alive { n } => fleet.heard(n, Heard::Alive),
            Note::Reply { n, response } => fleet.heard(n, Heard::Reply(response)),
        }
    }

    /// Tells the other replicas of each backend heard here announcing that its tools or prompts changed, until
    /// the router stops; with one replica, returns at once.
    pub async fn tell_list_announcements(self: Arc<Self>, mut announced: broadcast::Receiver<Arc<str>>) {
        let Some(fleet) = &self.fleet else { return };
        loop {
            match announced.recv().await {
                Ok(backend) => fleet.list_changed(&backend),
                // The other replicas still rediscover every `refresh`.
                Err(RecvError::Lagged(missed)) => tracing::warn!(missed, "fleet: list changes not passed on"),
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// Serves a request another replica forwarded, as if it had landed here, and sends back the response.
    async fn serve_forwarded(self: Arc<Self>, from: String, n: u64, request: Carried) {
        let Some(fleet) = self.fleet.clone() else { return };
        let response = match http_request(request) {
            Some(request) => served(super::app(Arc::clone(&self)), request).await,
            None => StatusCode::BAD_REQUEST.into_response(),
        };
        let status = response.status().as_u16();
        let headers = carried_headers(response.headers());
        let body = axum::body::to_bytes(response.into_body(), MAX_FORWARDED_RESPONSE).await.unwrap_or_default();
        let body = String::from_utf8_lossy(&body).into_owned();
        fleet.tell(Some(&from), &Note::Reply { n, response: Carried { path: String::new(), status, headers, body } });
    }

    /// When a 2026-07-28 `tools/call` retry continues a call another replica holds: that replica's response to
    /// it, or the answer of a call lost with its replica.
    pub(super) async fn forwarded(
        &self,
        held: HeldElsewhere,
        id: &Value,
        path: String,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Response {
        let Some(fleet) = &self.fleet else { return StatusCode::INTERNAL_SERVER_ERROR.into_response() };
        let body = String::from_utf8_lossy(body).into_owned();
        let request = Carried { path, status: 0, headers: carried_headers(headers), body };
        match fleet.forward(&held.owner, request).await {
            Some(response) => http_response(response),
            None => super::http::json(StatusCode::OK, &jsonrpc::result(id, held.lost())),
        }
    }
}

/// Runs `request` through the front's routes.
async fn served(mut app: axum::Router, request: Request<Body>) -> Response {
    use tower_service::Service;
    match app.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn carried_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    let kept = headers.iter().filter(|(name, _)| !NOT_FORWARDED.contains(&name.as_str()));
    kept.filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))).collect()
}

fn header_map(carried: Vec<(String, String)>) -> HeaderMap {
    let parsed = carried
        .into_iter()
        .filter_map(|(name, value)| Some((HeaderName::try_from(name).ok()?, HeaderValue::try_from(value).ok()?)));
    parsed.collect()
}

fn http_request(carried: Carried) -> Option<Request<Body>> {
    if !carried.path.starts_with("/mcp") {
        return None;
    }
    let mut request =
        Request::builder().method(HttpMethod::POST).uri(&carried.path).body(Body::from(carried.body)).ok()?;
    *request.headers_mut() = header_map(carried.headers);
    Some(request)
}

fn http_response(carried: Carried) -> Response {
    let status = StatusCode::from_u16(carried.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (status, carried.body).into_response();
    let headers = header_map(carried.headers);
    response.headers_mut().remove(header::CONTENT_TYPE);
    response.headers_mut().extend(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_read_back_as_written() {
        let note = Note::Cancel { session: "s".into(), id: serde_json::json!(7) };
        let text = serde_json::to_string(&note).unwrap();
        assert_eq!(text, r#"{"k":"cancel","session":"s","id":7}"#);
        assert!(matches!(serde_json::from_str(&text).unwrap(), Note::Cancel { id, .. } if id == 7));
        let task = serde_json::to_string(&Note::Task { principal: "alice".into(), id: "t1".into() }).unwrap();
        assert_eq!(task, r#"{"k":"task","principal":"alice","id":"t1"}"#, "the id and principal, never the task");
        let changed = r#"{"k":"list_changed","backend":"github"}"#;
        assert!(matches!(serde_json::from_str(changed).unwrap(), Note::ListChanged { backend } if backend == "github"));
    }

    #[test]
    fn a_request_whose_stream_closed_is_answered_with_an_error_its_waiter_gets() {
        let pending = PendingRequests::default();
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        let asked = serde_json::json!({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"});
        let relayed = pending.prepare("s", crate::mcp::RelayMessage::Request { message: asked, reply }).unwrap();
        let failed = undelivered(&relayed).expect("a request is answered");
        assert_eq!((&failed["id"], &failed["error"]["code"]), (&relayed["id"], &serde_json::json!(-32603)));
        assert!(pending.answer("s", failed.clone()), "the waiter takes it");
        assert_eq!(answer.try_recv().unwrap(), failed);
        let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/resources/updated"});
        assert_eq!(undelivered(&note), None, "nothing waits for a notification");
    }

    #[test]
    fn only_requests_of_the_mcp_endpoint_are_served_for_another_replica() {
        let carried = |path: &str| Carried { path: path.into(), status: 0, headers: vec![], body: String::new() };
        assert!(http_request(carried("/mcp/fault")).is_some());
        assert!(http_request(carried("/admin/api/calls")).is_none());
        let headers = header_map(vec![("content-length".into(), "3".into()), ("x".into(), "\n".into())]);
        assert!(carried_headers(&headers).is_empty(), "hop-by-hop headers and unusable values are dropped");
    }
}
