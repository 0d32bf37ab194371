//! `subscriptions/listen` (2026-07-28 basic/patterns §"Subscriptions"): the stream of list changes and resource
//! updates that replaced the session era's `GET` stream and `resources/subscribe`.
//!
//! Rules:
//! - The response is an event stream that stays open until the agent closes it. Its first message is
//!   `notifications/subscriptions/acknowledged`, whose `notifications` are the subset of the request's opt-ins the
//!   gateway honors: `toolsListChanged` (the catalog's list-change signal, for the tools of the stream's view) and
//!   `resourceSubscriptions` (each URI the gateway could subscribe to on the backend that owns it, on the agent's
//!   principal-keyed backend session; `notifications/resources/updated` for them comes from those backend
//!   sessions' streams, as for the session era's subscriptions). Prompt and resource list changes are not
//!   announced by the gateway (its capabilities say so), so those opt-ins are not honored. `taskIds` (the tasks
//!   extension) is honored as given: `notifications/tasks` (the `DetailedTask`, as `tasks/get` answers) for each
//!   status written for one of those tasks of the stream's principal, by this replica or, on a fleet, by
//!   another ([`crate::router::CallRouter::task_changed_elsewhere`]), and for a backend's own task (a sealed
//!   passthrough id) each status the backend announces on a listen stream the gateway holds on it meanwhile;
//!   another principal's task id is acknowledged like any other and never announced (no existence leak).
//! - Nothing the agent did not opt into is sent, and every message carries
//!   `_meta["io.modelcontextprotocol/subscriptionId"]`, the listen request's id. Keep-alive comments while idle.
//! - Closing the stream ends the subscription: a URI no other open listen stream of the same principal still
//!   holds is unsubscribed on its backend. When the gateway stops, the stream ends with the listen request's
//!   response (`resultType: "complete"`).
//! - Streams are this replica's connection state, kept by principal scope in [`Listens`]; a resource update is
//!   delivered to every stream of that principal that subscribed to its URI (a principal may run several agents).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::response::Response;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};

use super::{call, events};
use crate::front::Front;
use crate::front::error::FrontError;
use crate::front::stream::KEEP_ALIVE;
use crate::mcp::method::{self, Method};
use crate::mcp::{RelayMessage, SessionHolder, SessionMessage, jsonrpc, meta};
use crate::router::{BackendTaskWatch, CallRouter, Caller, TaskChange, TaskEar, TaskHearing, ToolsChanged, View};

type Inbox = mpsc::UnboundedSender<Value>;

/// One open listen stream.
struct Listener {
    id: u64,
    uris: HashSet<String>,
    inbox: Inbox,
}

/// The listen streams open on this replica, by the holder of their principal's backend sessions.
#[derive(Default)]
pub struct Listens {
    open: Mutex<HashMap<SessionHolder, Vec<Listener>>>,
    next: AtomicU64,
}

/// Keeps a stream registered while it is open.
struct Registration {
    listens: Arc<Listens>,
    holder: SessionHolder,
    id: u64,
    /// The stream's inbox, for what else reaches it (backends' task statuses).
    inbox: Inbox,
}

impl Listens {
    fn register(
        self: &Arc<Self>,
        holder: SessionHolder,
        uris: HashSet<String>,
    ) -> (Registration, mpsc::UnboundedReceiver<Value>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (inbox, messages) = mpsc::unbounded_channel();
        self.open.lock().entry(holder.clone()).or_default().push(Listener { id, uris, inbox: inbox.clone() });
        (Registration { listens: Arc::clone(self), holder, id, inbox }, messages)
    }

    /// Whether an open stream of `holder` still subscribes to `uri`.
    fn holds(&self, holder: &SessionHolder, uri: &str) -> bool {
        self.open
            .lock()
            .get(holder)
            .is_some_and(|listeners| listeners.iter().any(|listener| listener.uris.contains(uri)))
    }

    /// Takes what a backend sent outside a call for a sessionless agent (its backend session is held for a
    /// principal): a resource update goes to the streams that subscribed to it, anything else is dropped (such an agent
    /// is never sent requests; list changes reach it from the catalog). A session's message is handed back.
    pub fn take(&self, message: SessionMessage) -> Option<SessionMessage> {
        if !matches!(message.holder, SessionHolder::Principal(_)) {
            return Some(message);
        }
        let RelayMessage::Notification(note) = message.message else {
            return None;
        };
        let updated = note.get("method").and_then(Value::as_str) == Some(method::RESOURCES_UPDATED);
        let uri = note.pointer("/params/uri").and_then(Value::as_str).filter(|_| updated);
        if let Some(uri) = uri
            && let Some(listeners) = self.open.lock().get(&message.holder)
        {
            for listener in listeners.iter().filter(|listener| listener.uris.contains(uri)) {
                let _ = listener.inbox.send(note.clone());
            }
        }
        None
    }
}

impl Registration {
    /// Narrows the stream's URIs to those it was subscribed to.
    fn keep_only(&self, uris: &[String]) {
        if let Some(listener) = self
            .listens
            .open
            .lock()
            .get_mut(&self.holder)
            .and_then(|listeners| listeners.iter_mut().find(|listener| listener.id == self.id))
        {
            listener.uris.retain(|uri| uris.contains(uri));
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut open = self.listens.open.lock();
        if let Some(listeners) = open.get_mut(&self.holder) {
            listeners.retain(|listener| listener.id != self.id);
            if listeners.is_empty() {
                open.remove(&self.holder);
            }
        }
    }
}

/// What the agent opted into.
struct OptIns {
    tools: bool,
    uris: Option<Vec<String>>,
    tasks: Option<Vec<String>>,
}

/// An array of strings under `field` of the opt-ins, if there.
fn strings(wanted: &Value, field: &str, id: &Value) -> Result<Option<Vec<String>>, FrontError> {
    let why = || FrontError::BadParams { id: id.clone(), why: format!("`{field}` must be an array of strings") };
    match wanted.get(field) {
        None => Ok(None),
        Some(Value::Array(items)) => {
            let items = items.iter().map(|item| item.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>();
            items.map(Some).ok_or_else(why)
        }
        Some(_) => Err(why()),
    }
}

impl OptIns {
    fn of(id: &Value, params: &Value) -> Result<OptIns, FrontError> {
        let bad = |why: &str| FrontError::BadParams { id: id.clone(), why: why.into() };
        let wanted = params.get("notifications").cloned().unwrap_or_else(|| json!({}));
        if !wanted.is_object() {
            return Err(bad("`params.notifications` must be an object of opt-ins"));
        }
        let uris = strings(&wanted, "resourceSubscriptions", id)?;
        let tasks = strings(&wanted, "taskIds", id)?;
        Ok(OptIns { tools: wanted.get("toolsListChanged") == Some(&json!(true)), uris, tasks })
    }
}

/// A listen stream's message, tagged with the listen request's id.
fn tagged(mut message: Value, subscription: &Value) -> Value {
    if !message.get("params").is_some_and(Value::is_object) {
        message["params"] = json!({});
    }
    let params = &mut message["params"];
    if !params.get("_meta").is_some_and(Value::is_object) {
        params["_meta"] = json!({});
    }
    params["_meta"][meta::SUBSCRIPTION_ID] = subscription.clone();
    message
}

/// Everything a listen stream's task needs.
struct Stream {
    router: Arc<CallRouter>,
    caller: Caller,
    backend: Option<String>,
    registration: Registration,
    inbox: mpsc::UnboundedReceiver<Value>,
    changes: broadcast::Receiver<ToolsChanged>,
    tools: bool,
    uris: Vec<String>,
    tasks: Option<TaskWatch>,
}

/// The tasks a stream announces: its principal's, with these ids.
struct TaskWatch {
    principal: String,
    ids: HashSet<String>,
    changes: broadcast::Receiver<TaskChange>,
    /// The principal hears its task statuses while the stream is open.
    _hearing: TaskHearing,
    /// The backends' own tasks among the ids (passthrough), heard on the backends' listen streams meanwhile.
    _backends: BackendTaskWatch,
}

/// The next `notifications/tasks` for the stream; pending forever when it watches no task.
async fn next_task_note(watch: &mut Option<TaskWatch>) -> Option<Value> {
    let Some(tasks) = watch else { return std::future::pending().await };
    match tasks.changes.recv().await {
        Ok(change) if change.principal == tasks.principal && tasks.ids.contains(&change.id) => {
            Some(jsonrpc::notification(method::TASKS_NOTIFICATION, Some(change.detailed)))
        }
        // A missed change is only a missed hint (`tasks/get` is the truth).
        Ok(_) | Err(RecvError::Lagged(_)) => None,
        Err(RecvError::Closed) => {
            *watch = None;
            None
        }
    }
}

impl Front {
    /// Opens a listen stream for `caller` (request `caller.request_id`), showing the view of `backend`.
    pub(super) async fn listen(
        self: &Arc<Self>,
        caller: Caller,
        backend: Option<String>,
        params: &Value,
    ) -> Result<Response, FrontError> {
        let opt_ins = OptIns::of(&caller.request_id, params)?;
        // Registered first, so an update the backend sends as soon as it is subscribed is not lost; subscribed
        // before the stream opens, so the acknowledgement (the stream's first message) tells the truth.
        let requested: HashSet<String> = opt_ins.uris.iter().flatten().cloned().collect();
        let (registration, inbox) = self.listens.register(caller.session.clone(), requested);
        let mut uris = Vec::new();
        for uri in opt_ins.uris.iter().flatten() {
            match subscription(&self.router, &caller, backend.as_deref(), Method::ResourcesSubscribe, uri).await {
                Ok(()) => uris.push(uri.clone()),
                Err(error) => tracing::info!(principal = %caller.principal.name, uri, %error, "not subscribed"),
            }
        }
        registration.keep_only(&uris);
        let mut honored = serde_json::Map::new();
        if opt_ins.tools {
            honored.insert("toolsListChanged".into(), json!(true));
        }
        if opt_ins.uris.is_some() {
            honored.insert("resourceSubscriptions".into(), json!(uris));
        }
        let tasks = opt_ins.tasks.map(|ids| {
            honored.insert("taskIds".into(), json!(ids));
            let (principal, changes) = (caller.fairness_key(), self.router.task_changes());
            let _hearing = self.router.hear_tasks(TaskEar::Principal(principal.clone()));
            let _backends = self.router.watch_backend_tasks(&caller, &ids, &registration.inbox);
            TaskWatch { principal, ids: ids.into_iter().collect(), changes, _hearing, _backends }
        });
        let ack = jsonrpc::notification(method::SUBSCRIPTIONS_ACKNOWLEDGED, Some(json!({"notifications": honored})));
        let changes = self.router.tool_changes();
        let stream = Stream {
            router: Arc::clone(&self.router),
            caller,
            backend,
            registration,
            inbox,
            changes,
            tools: opt_ins.tools,
            uris,
            tasks,
        };
        let (events, response) = events::open();
        tokio::spawn(feed(events, ack, stream));
        Ok(response)
    }
}

/// `resources/subscribe` or `resources/unsubscribe` of `uri` on the caller's backend session.
async fn subscription(
    router: &Arc<CallRouter>,
    caller: &Caller,
    backend: Option<&str>,
    which: Method,
    uri: &str,
) -> Result<(), String> {
    let view = backend.map_or(View::All, View::Backend);
    let asked = router.handle(caller, view, &which, json!({"uri": uri}), &call::relay(json!({}), None)).await;
    asked.map(drop).map_err(|failure| failure.message)
}

async fn feed(events: events::Events, ack: Value, mut stream: Stream) {
    let subscription_id = stream.caller.request_id.clone();
    let list_changed = tagged(jsonrpc::notification(method::TOOLS_LIST_CHANGED, None), &subscription_id);
    let mut open = events.send(&tagged(ack, &subscription_id));
    while open {
        open = tokio::select! {
            change = stream.changes.recv() => match change {
                Ok(changed) if !stream.tools || !changed.shows_in(stream.backend.as_deref().map_or(View::All, View::Backend)) => true,
                // A lagging receiver missed changes: telling the agent once more is harmless.
                Ok(_) | Err(RecvError::Lagged(_)) => events.send(&list_changed),
                Err(RecvError::Closed) => {
                    // The gateway is stopping: the listen request's response ends the stream.
                    let done = json!({"resultType": "complete", "_meta": {meta::SUBSCRIPTION_ID: subscription_id}});
                    events.send(&jsonrpc::result(&subscription_id, done));
                    false
                }
            },
            Some(message) = stream.inbox.recv() => events.send(&tagged(message, &subscription_id)),
            note = next_task_note(&mut stream.tasks) => note.is_none_or(|note| events.send(&tagged(note, &subscription_id))),
            () = tokio::time::sleep(KEEP_ALIVE) => events.keep_alive(),
            () = events.closed() => false,
        };
    }
    let Stream { router, caller, backend, registration, uris, .. } = stream;
    let holder = registration.holder.clone();
    let listens = Arc::clone(&registration.listens);
    drop(registration);
    for uri in uris.iter().filter(|uri| !listens.holds(&holder, uri)) {
        if let Err(error) = subscription(&router, &caller, backend.as_deref(), Method::ResourcesUnsubscribe, uri).await
        {
            tracing::info!(principal = %caller.principal.name, uri, %error, "not unsubscribed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(holder: &SessionHolder, uri: &str) -> SessionMessage {
        let note = json!({"jsonrpc": "2.0", "method": method::RESOURCES_UPDATED, "params": {"uri": uri}});
        SessionMessage { holder: holder.clone(), backend: "b".into(), message: RelayMessage::Notification(note) }
    }

    #[test]
    fn updates_reach_every_stream_of_the_principal_that_subscribed() {
        let listens = Arc::new(Listens::default());
        let scope = SessionHolder::Principal("alice".into());
        let (_first, mut first) = listens.register(scope.clone(), HashSet::from(["file:///a".to_owned()]));
        let (_second, mut second) = listens.register(scope.clone(), HashSet::from(["file:///b".to_owned()]));
        let (_other, mut other) = listens.register(SessionHolder::Principal("bob".into()), HashSet::new());
        assert!(listens.take(update(&scope, "file:///a")).is_none(), "a principal's message is taken");
        assert_eq!(first.try_recv().unwrap()["params"]["uri"], "file:///a");
        assert!(second.try_recv().is_err(), "not subscribed to that URI");
        assert!(other.try_recv().is_err(), "another principal's stream");
        assert!(listens.take(update(&SessionHolder::agent("alice"), "file:///a")).is_some(), "a session's");
        assert!(listens.holds(&scope, "file:///b"));
        drop(_second);
        assert!(!listens.holds(&scope, "file:///b"), "a closed stream holds nothing");
    }

    #[test]
    fn messages_are_tagged_with_the_subscription() {
        let note = tagged(jsonrpc::notification(method::TOOLS_LIST_CHANGED, None), &json!(7));
        assert_eq!(note["params"]["_meta"][meta::SUBSCRIPTION_ID], 7);
        let update = json!({"method": method::RESOURCES_UPDATED, "params": {"uri": "u", "_meta": {"x": 1}}});
        let update = tagged(update, &json!("s"));
        assert_eq!(update["params"]["_meta"], json!({"x": 1, meta::SUBSCRIPTION_ID: "s"}));
        assert!(OptIns::of(&json!(1), &json!({"notifications": []})).is_err());
        assert!(OptIns::of(&json!(1), &json!({"notifications": {"resourceSubscriptions": [1]}})).is_err());
        let opted = OptIns::of(&json!(1), &json!({"notifications": {"toolsListChanged": true}})).unwrap();
        assert!(opted.tools && opted.uris.is_none() && opted.tasks.is_none());
        assert!(OptIns::of(&json!(1), &json!({"notifications": {"taskIds": "t1"}})).is_err());
        let tasks = OptIns::of(&json!(1), &json!({"notifications": {"taskIds": ["t1"]}})).unwrap();
        assert_eq!(tasks.tasks, Some(vec!["t1".to_owned()]));
    }
}
