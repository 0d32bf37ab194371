//! Gateway tasks (MCP 2025-11-25, utilities §"Tasks", and 2026-07-28's `io.modelcontextprotocol/tasks`
//! extension; docs/tasks.md): a `tools/call` run as a task is answered with the task, and the gateway runs the
//! call in the background as the ordinary call it is — claimed in the ledger, sent once, settled once — then
//! keeps its answer in the ledger's task store for the `tasks/*` methods. Each era's shapes are in [`wire`]
//! (2025-11-25) and [`extension`] (2026-07-28).
//!
//! Rules:
//! - Any tool of a backend with `tasks = "gateway"` may run as a task; the backend knows nothing of it.
//! - A backend that runs tasks itself keeps them: its tasks pass through under ids the gateway seals
//!   ([`passthrough`]; `tasks = "passthrough"`, or a tool the backend marks as supporting tasks).
//! - The task row is durable before the agent hears of it, and written once more when the call ends
//!   ([`crate::ledger::LedgerStore::finish_task`], which never changes a terminal task). A gateway that stopped
//!   while a call ran fails its tasks as `unknown` at its next start, never reruns them.
//! - A task is its principal's (for agents without credentials: `anonymous@<address>`, as fairness counts
//!   them): any other principal is answered as for a task that does not exist (`-32602`).
//! - With an idempotency key, a second task-augmented call returns the first call's task; a plain retry is
//!   answered from the call's claim as any retry is.
//! - `tasks/cancel` ends the task `cancelled` before answering, then tells the backend: at once when this
//!   instance runs the call, within a poll interval when another replica sharing a PostgreSQL store does. The
//!   call's outcome stays `unknown` (it may have reached the backend).
//! - `tasks/result` waits in the agent's request: woken at once by a task this instance ends, else it polls.
//! - A 2026-07-28 backend's `input_required` answer to a task's call puts the task in `input_required` until the
//!   agent's `tasks/update`s answer it ([`input`]); the call then continues as the same claim. Within the inline
//!   window, before the agent heard of the task, the question is the call's answer instead (no task is shown),
//!   and the agent's retry may become the task. A 2025-11-25 agent's task cannot be asked: its relay has no
//!   stream, so the call ends as any call whose agent cannot be asked.
//! - Nothing here runs for an ordinary call but one map lookup (`params.task`; for a 2026-07-28 agent, its
//!   declared capabilities and the tool's `taskSupport`).

mod audience;
mod extension;
mod input;
mod passthrough;
mod passthrough_listen;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

use super::continuation;
use super::forward::GatewayCursor;
use super::request_state::StateKey;
use super::starting::Resolved;
use super::{CallRouter, Caller, Found, RpcFailure, View};
use crate::ledger::{LedgerStore, TaskEnd, TaskFilter, TaskRow};
use crate::mcp::method::{TASKS_CANCEL, TASKS_GET, TASKS_UPDATE};
use crate::mcp::{Relay, SessionHolder, jsonrpc};
pub use audience::{TaskEar, TaskHearing};
pub use extension::TASKS_EXTENSION;
pub(super) use passthrough::names_backend_task;
pub use passthrough_listen::BackendTaskWatch;
pub use wire::RELATED_TASK_META;

/// The ttl of a task that did not ask for one.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// How often agents are asked to poll, and how often `tasks/result` reads a task another instance runs.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long a 2026-07-28 agent's call may take to be answered with its result rather than a task.
const INLINE_WINDOW: Duration = Duration::from_millis(500);
/// Tasks per `tasks/list` page.
const PAGE: u32 = 50;
/// Empty pages `tasks/list` skips in a row before it answers one.
const MAX_EMPTY_PAGES: usize = 8;

/// The backends whose tool calls may run as tasks, by who runs them: the gateway (`tasks = "gateway"`; a tool the
/// backend itself runs as a task may still pass through, [`passthrough`]) or the backend (`"passthrough"`).
#[derive(Debug, Default)]
pub struct TaskBackends {
    pub gateway: HashSet<Arc<str>>,
    pub passthrough: HashSet<Arc<str>>,
}

impl TaskBackends {
    fn is_empty(&self) -> bool {
        self.gateway.is_empty() && self.passthrough.is_empty()
    }
}

/// This instance's running tasks.
#[derive(Debug)]
pub(super) struct Tasks {
    /// The calls this instance runs as tasks, by task id.
    running: Mutex<HashMap<String, Arc<Running>>>,
    /// Woken whenever this instance ends a task.
    ended: Notify,
    /// The longest ttl a task gets (the ledger's retention).
    max_ttl: Mutex<Duration>,
    /// Every status this instance writes (and those another replica wrote that a listen stream here hears), for
    /// the agents' streams.
    changes: broadcast::Sender<TaskChange>,
    /// The open streams that can be told of a status.
    audience: Arc<audience::Audience>,
    /// Seals the ids of backends' own tasks ([`passthrough`]).
    passthrough: passthrough::Passthrough,
}

impl Default for Tasks {
    fn default() -> Self {
        Self {
            running: Mutex::default(),
            ended: Notify::new(),
            max_ttl: Mutex::new(Duration::from_secs(86_400)),
            changes: broadcast::channel(CHANGES).0,
            audience: Arc::default(),
            passthrough: passthrough::Passthrough::new(&StateKey::random()),
        }
    }
}

/// How many status changes a slow listen stream may fall behind by (it then misses some: notifications are
/// hints, `tasks/get` is the truth).
const CHANGES: usize = 256;

/// A task's status as this instance wrote it: whose task, the agent session of the request that wrote it (the
/// creator's, for the call's own changes), the 2026-07-28 `notifications/tasks` params (the `DetailedTask`, as
/// `tasks/get` would answer) and the 2025-11-25 `notifications/tasks/status` params (the `Task`).
#[derive(Debug, Clone)]
pub struct TaskChange {
    pub principal: String,
    /// For a change another replica wrote, the principal's holder (only listen streams hear it).
    pub session: SessionHolder,
    pub id: String,
    pub detailed: Value,
    pub task: Value,
    /// Written by this replica (the front tells the fleet of it), not heard from another.
    pub here: bool,
}

/// A call this instance runs as a task.
#[derive(Debug)]
struct Running {
    /// Tells the call to stop (`tasks/cancel`).
    cancel: Arc<Notify>,
    /// Whether the agent has not been told of the task yet (a 2026-07-28 call within its inline window): then a
    /// backend's `input_required` goes to the agent as the call's answer. Whichever of the call and the waiting
    /// request clears it first decides.
    unrevealed: AtomicBool,
}

impl Tasks {
    /// Announces every status, as streams of other replicas sharing the ledger may hear it.
    pub(super) fn share_changes(&self) {
        self.audience.share();
    }

    /// Seals backends' task ids with `key` (the request-state key every replica shares) from now on.
    pub(super) fn use_key(&self, key: &StateKey) {
        self.passthrough.use_key(key);
    }

    /// The waiting request tells the agent of task `id`; false when the call already took its answer for the
    /// agent (the task then ends at once).
    fn reveal(&self, id: &str) -> bool {
        self.running.lock().get(id).is_none_or(|running| running.unrevealed.swap(false, Ordering::SeqCst))
    }
}

/// Whether a `tools/call` may run as a task: asked for with `task` (2025-11-25), or for a 2026-07-28 agent, one
/// whose request declares the extension (the gateway then decides).
pub(super) fn wanted(caller: &Caller, params: &Value, relay: &Relay) -> bool {
    match caller.sessionless {
        false => params.get("task").is_some(),
        true => extension::declared(relay.capabilities()),
    }
}

/// A 2026-07-28 call of a tool whose backend requires tasks, from a request that did not declare the extension.
pub(super) fn refuse_untasked(caller: &Caller, definition: &Value, relay: &Relay) -> Result<(), RpcFailure> {
    match caller.sessionless && extension::required(definition) && !extension::declared(relay.capabilities()) {
        true => Err(extension::missing("this tool")),
        false => Ok(()),
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64)
}

/// The update time of a task's next state: now, and always after the one read (a compare-and-set compares it).
fn next_update(row: &TaskRow) -> i64 {
    now_ms().max(row.updated_ms + 1)
}

/// An unguessable task id: 128 random bits.
fn new_task_id() -> Result<String, RpcFailure> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| internal("no randomness for a task id"))?;
    Ok(crate::hex::encode(&bytes))
}

fn internal(message: &str) -> RpcFailure {
    RpcFailure::new(jsonrpc::INTERNAL_ERROR, message)
}

fn unavailable(error: crate::ledger::LedgerError) -> RpcFailure {
    tracing::warn!(%error, "tasks: the ledger did not answer");
    internal("the gateway's task store is unavailable; retry shortly")
}

/// Fails the tasks `owner` runs (at shutdown) or ran when it last stopped (at start): their calls will not be
/// settled by it, so their outcome is unknown, and they are never rerun.
pub async fn fail_orphaned_tasks(store: &LedgerStore, owner: &str) {
    let why = "the gateway stopped while the call ran: it may have run; it was not repeated";
    match store.orphan_tasks(owner, why, now_ms()).await {
        Ok(0) => {}
        Ok(failed) => {
            tracing::warn!(failed, "tasks whose calls were running when the gateway stopped are failed (unknown)");
        }
        Err(error) => tracing::error!(%error, "ledger: cannot fail the tasks of calls that were running"),
    }
}

impl CallRouter {
    /// The status changes of the tasks this instance runs, from now on.
    pub fn task_changes(&self) -> broadcast::Receiver<TaskChange> {
        self.tasks.changes.subscribe()
    }

    /// Registers a stream that tells its agent of task statuses ([`TaskEar`]) while the hearing is held.
    pub fn hear_tasks(&self, ear: TaskEar) -> TaskHearing {
        self.tasks.audience.hear(ear)
    }

    /// Tells the listen streams that task `id` changed (read back, as a status written may be raced by another
    /// writer; nothing is read when no open stream can be told of it).
    async fn announce(&self, caller: &Caller, id: &str) {
        if self.tasks.audience.hears(&caller.session, || caller.fairness_key()) {
            self.tell_task_change(caller.session.clone(), id, true).await;
        }
    }

    /// Tasks live at most `retention` (how long the ledger keeps settled calls).
    pub fn limit_task_ttl(&self, retention: Duration) {
        *self.tasks.max_ttl.lock() = retention;
    }

    /// Whether any backend's tools may run as tasks (the gateway then declares the capability).
    pub fn offers_tasks(&self) -> bool {
        !self.routing.load().tasks.is_empty()
    }

    /// Marks the listed tools of backends with gateway tasks `execution.taskSupport: "optional"`, unless the
    /// backend said what its tool supports (kept as it said).
    pub(super) fn offer_tasks(&self, view: View<'_>, listed: &mut Value) {
        let routing = self.routing.load();
        if routing.tasks.is_empty() {
            return;
        }
        let Some(tools) = listed.get_mut("tools").and_then(Value::as_array_mut) else { return };
        for tool in tools {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            let offered =
                self.catalog.resolve(view, name).is_some_and(|route| routing.tasks.gateway.contains(&route.backend));
            let Some(tool) = tool.as_object_mut().filter(|_| offered) else { continue };
            let execution = tool.entry("execution").or_insert_with(|| json!({}));
            if let Some(execution) = execution.as_object_mut() {
                execution.entry("taskSupport").or_insert_with(|| json!("optional"));
            }
        }
    }

    /// A `tools/call` run as a task: the task, its call started in the background (2025-11-25: when asked with
    /// `task`). For a 2026-07-28 agent that declared the extension (server-directed creation), a call that ends
    /// within [`INLINE_WINDOW`] is answered with its result instead. A tool the caller cannot use is answered as a
    /// plain call of it is.
    pub(super) async fn start_task(
        self: &Arc<Self>,
        caller: &Caller,
        view: View<'_>,
        mut params: Value,
        relay: &Relay,
    ) -> Result<Found, RpcFailure> {
        let task = params.get("task").cloned();
        let asked = match caller.sessionless {
            // The 2025-11-25 `task` hint means nothing to this era: the gateway decides.
            true => wire::Asked::take(&mut params).ok().flatten().unwrap_or_default(),
            false => wire::Asked::take(&mut params)?.unwrap_or_default(),
        };
        let routing = self.routing.load();
        if routing.tasks.is_empty() {
            // No tasks declared: the `task` field is ignored (2025-11-25 tasks §"Capabilities").
            return self.call_tool(caller, view, params, relay).await;
        }
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let route = match self.resolve_tool(view, &name, routing.discovery_wait).await {
            Resolved::Route(route) if routing.grants(caller).tool(&route.exposed) => route,
            _ => return self.call_tool(caller, view, params, relay).await,
        };
        if self.passes_through(&route, caller.sessionless) {
            if let Some(task) = task {
                params["task"] = task;
            }
            return self.pass_task(caller, view, params, relay, &route).await;
        }
        if !routing.tasks.gateway.contains(&route.backend) {
            let text = format!("tool `{name}` does not run as a task here; call it without `task`");
            return Err(RpcFailure::new(jsonrpc::METHOD_NOT_FOUND, text));
        }
        let (now, principal) = (now_ms(), caller.fairness_key());
        let row = TaskRow {
            id: new_task_id()?,
            principal: principal.clone(),
            owner: self.ledger.owner.clone(),
            call_key: caller.idempotency_key.as_ref().map(|key| format!("{principal}\n{}", key.as_str())),
            tool: route.exposed.clone(),
            state: wire::WORKING.into(),
            message: None,
            outcome: None,
            answer: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: asked.ttl(DEFAULT_TTL, *self.tasks.max_ttl.lock()),
            poll_ms: POLL_INTERVAL.as_millis() as i64,
        };
        let stored = self.ledger.store.create_task(&row).await.map_err(unavailable)?;
        if stored.id == row.id {
            let backend = match view {
                View::All => None,
                View::Backend(backend) => Some(backend.to_owned()),
            };
            self.run_task(caller, backend, params, relay, &row.id, caller.sessionless);
            self.ledger.metrics.task_created();
        }
        if !caller.sessionless {
            return Ok(Found::Built(wire::created(&stored)));
        }
        let mut now = self.wait_terminal(&stored.id, &principal, Some(Instant::now() + INLINE_WINDOW)).await?;
        if !now.is_terminal() {
            now = match self.tasks.reveal(&stored.id) {
                // Read again: a call that ended meanwhile is answered with its answer.
                true => self.owned_task(&stored.id, &principal).await?,
                false => self.wait_terminal(&stored.id, &principal, None).await?,
            };
        }
        match now.is_terminal() {
            true => wire::call_answer(&now).map(Found::Built),
            false => Ok(Found::Built(extension::created(&now))),
        }
    }

    /// The task `id` of `principal` once terminal, or as it is at `until`.
    async fn wait_terminal(&self, id: &str, principal: &str, until: Option<Instant>) -> Result<TaskRow, RpcFailure> {
        loop {
            // Subscribed before reading, so a task ending in between still wakes the wait.
            let ended = self.tasks.ended.notified();
            let row = self.owned_task(id, principal).await?;
            let wait = match until {
                _ if row.is_terminal() => return Ok(row),
                None => POLL_INTERVAL,
                Some(until) if until <= Instant::now() => return Ok(row),
                Some(until) => POLL_INTERVAL.min(until - Instant::now()),
            };
            let _ = tokio::time::timeout(wait, ended).await;
        }
    }

    /// Runs the task's call in the background, as an ordinary call of the same caller, and ends the task with
    /// its answer, or has it wait for input ([`input`]). `unrevealed`: the agent has not been told of the task.
    fn run_task(
        self: &Arc<Self>,
        caller: &Caller,
        view: Option<String>,
        params: Value,
        relay: &Relay,
        id: &str,
        unrevealed: bool,
    ) {
        let running = Arc::new(Running { cancel: Arc::new(Notify::new()), unrevealed: AtomicBool::new(unrevealed) });
        self.tasks.running.lock().insert(id.to_owned(), Arc::clone(&running));
        // The agent's request ends now; the call reports to no access line of its own, only to the audit trail.
        let caller = Caller { record: caller.record.background(), ..caller.clone() };
        let relay = relay.detached().cancellable(Arc::clone(&running.cancel));
        let (router, id) = (Arc::clone(self), id.to_owned());
        tokio::spawn(async move {
            router.drive(&caller, view, params, &relay, &id, &running).await;
            router.tasks.running.lock().remove(&id);
            router.tasks.ended.notify_waiters();
        });
    }

    /// Calls until the call ends or waits for the agent's input; an answer with only a `requestState` (the
    /// backend asks to be called again) is retried after a poll interval.
    async fn drive(
        &self,
        caller: &Caller,
        view: Option<String>,
        params: Value,
        relay: &Relay,
        id: &str,
        running: &Running,
    ) {
        let (mut params, mut view) = (params, view);
        loop {
            let call = self.call_tool(caller, view.as_deref().map_or(View::All, View::Backend), params.clone(), relay);
            let answer = match self.ledger.store {
                LedgerStore::Postgres(_) => self.watch_cancel(call, id, &running.cancel).await,
                _ => call.await,
            };
            let asking = match &answer {
                Ok(Found::Built(result)) if continuation::asks_input(result) => Some(result),
                _ => None,
            };
            let pending = match asking {
                Some(result) if !running.unrevealed.swap(false, Ordering::SeqCst) => {
                    input::Pending::new(result, params, view)
                }
                _ => {
                    caller.record.settled();
                    return self.end_task(caller, id, answer).await;
                }
            };
            if !pending.complete() {
                return self.await_input(caller, id, &pending).await;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            (params, view) = pending.retry();
        }
    }

    /// Ends the task `id` with the call's answer.
    async fn end_task(&self, caller: &Caller, id: &str, answer: Result<Found, RpcFailure>) {
        let end = wire::ending(answer, now_ms());
        let finished = match self.ledger.store.finish_task(id, &end).await {
            Ok(finished) => finished,
            Err(error) => {
                tracing::warn!(%error, task = %id, "tasks: the call ended but its task could not be updated");
                false
            }
        };
        // A task that was no longer running (cancelled) was counted by its canceller.
        self.ledger.metrics.task_ended(if finished { &end.state } else { "" }, true);
        if finished {
            self.announce(caller, id).await;
        }
    }

    /// The working task `id` waits for the input `pending` asks (unless it was cancelled meanwhile).
    async fn await_input(&self, caller: &Caller, id: &str, pending: &input::Pending) {
        let stepped = match self.ledger.store.task(id).await {
            Ok(Some(row)) if row.state == wire::WORKING => {
                let next = pending.waiting(next_update(&row));
                self.ledger.store.step_task(id, (&row.state, row.updated_ms), &next).await
            }
            Ok(_) => Ok(false),
            Err(error) => Err(error),
        };
        match stepped {
            Ok(true) => self.announce(caller, id).await,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, task = %id, "tasks: the call asks for input but its task could not be updated");
            }
        }
    }

    /// Runs `call`, reading its task every [`POLL_INTERVAL`] meanwhile: a replica sharing the store may have
    /// cancelled it, and then the backend is told as if it had been cancelled here.
    async fn watch_cancel<T>(&self, call: impl Future<Output = T>, id: &str, cancel: &Notify) -> T {
        tokio::pin!(call);
        loop {
            tokio::select! {
                answer = &mut call => return answer,
                () = tokio::time::sleep(POLL_INTERVAL) => {
                    let row = self.ledger.store.task(id).await;
                    if row.is_ok_and(|row| row.is_some_and(|row| row.state == wire::CANCELLED)) {
                        cancel.notify_one();
                    }
                }
            }
        }
    }

    /// The task `id` of `principal`, unexpired.
    async fn owned_task(&self, id: &str, principal: &str) -> Result<TaskRow, RpcFailure> {
        let row = self.ledger.store.task(id).await.map_err(unavailable)?;
        row.filter(|row| row.principal == principal && row.created_ms + row.ttl_ms >= now_ms())
            .ok_or_else(|| wire::unknown_task(id))
    }

    /// The caller's task `params.taskId`, and whether the caller reads it as the 2026-07-28 extension does. A
    /// sessionless request that did not declare the extension is refused (`-32021`).
    async fn asked_task(
        &self,
        caller: &Caller,
        method: &str,
        params: &Value,
        relay: &Relay,
    ) -> Result<(TaskRow, bool), RpcFailure> {
        if caller.sessionless && !extension::declared(relay.capabilities()) {
            return Err(extension::missing(method));
        }
        let row = self.owned_task(wire::task_id(params)?, &caller.fairness_key()).await?;
        Ok((row, caller.sessionless))
    }

    /// `tasks/get`.
    pub(super) async fn get_task(&self, caller: &Caller, params: &Value, relay: &Relay) -> Result<Value, RpcFailure> {
        match self.asked_task(caller, TASKS_GET, params, relay).await? {
            (row, true) => Ok(extension::detailed(&row)),
            (row, false) => Ok(wire::task(&row)),
        }
    }

    /// `tasks/result` (2025-11-25): waits until the task is terminal, then answers what its call answered.
    pub(super) async fn task_result(&self, caller: &Caller, params: &Value) -> Result<Value, RpcFailure> {
        let row = self.wait_terminal(wire::task_id(params)?, &caller.fairness_key(), None).await?;
        wire::stored_answer(&row)
    }

    /// `tasks/update` (2026-07-28): responses to the input requests of a task in `input_required` ([`input`]).
    /// Once every request is answered, the call is continued in the background and the task is `working` again.
    pub(super) async fn update_task(
        self: &Arc<Self>,
        caller: &Caller,
        params: &Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        if !caller.sessionless {
            return Err(RpcFailure::new(jsonrpc::METHOD_NOT_FOUND, "tasks/update is a 2026-07-28 method"));
        }
        let (row, _) = self.asked_task(caller, TASKS_UPDATE, params, relay).await?;
        let responses = input::responses(params)?;
        if row.state != wire::INPUT_REQUIRED {
            let text = format!("task `{}` is not waiting for input (it is {})", row.id, row.state);
            return Err(wire::invalid(&text));
        }
        let mut pending = input::Pending::of(&row)?;
        if pending.answer(responses) == 0 {
            return Ok(json!({}));
        }
        let seen = (row.state.as_str(), row.updated_ms);
        let next = match pending.complete() {
            true => TaskEnd { state: wire::WORKING.into(), message: None, outcome: None, answer: None, updated_ms: 0 },
            false => pending.waiting(0),
        };
        let next = TaskEnd { updated_ms: next_update(&row), ..next };
        if !self.ledger.store.step_task(&row.id, seen, &next).await.map_err(unavailable)? {
            let text = format!("task `{}` changed while this update was applied; read it with tasks/get", row.id);
            return Err(wire::invalid(&text));
        }
        if next.state == wire::WORKING {
            let (params, view) = pending.retry();
            self.run_task(caller, view, params, relay, &row.id, false);
        }
        self.announce(caller, &row.id).await;
        Ok(json!({}))
    }

    /// `tasks/list`: the caller's own tasks, a page at a time — the gateway's first (oldest first, [`PAGE`] a
    /// page), then each passthrough backend's in configuration order, as its `tasks/list` on the caller's backend
    /// session pages them. A page holds one source's tasks; the cursor names the source and the place in it.
    pub(super) async fn list_tasks(
        &self,
        caller: &Caller,
        view: View<'_>,
        params: &Value,
    ) -> Result<Value, RpcFailure> {
        let mut backends = self.listing_backends();
        let routing = self.routing.load();
        backends.retain(|backend| view.shows(backend) && self.grants_something(&routing.grants(caller), backend));
        let bad = || wire::invalid("`params.cursor` is not a cursor this gateway gave");
        let mut position = match params.get("cursor") {
            None | Some(Value::Null) => GatewayCursor { backend: 0, cursor: None },
            Some(cursor) => cursor
                .as_str()
                .and_then(GatewayCursor::decode)
                .filter(|cursor| cursor.backend <= backends.len())
                .ok_or_else(bad)?,
        };
        for _ in 0..=backends.len() + MAX_EMPTY_PAGES {
            let page = match position.backend.checked_sub(1).and_then(|index| backends.get(index)) {
                None => self.gateway_tasks(caller, position.cursor.take()).await?,
                Some(backend) => self.backend_tasks(caller, backend, position.cursor.take()).await.unwrap_or_else(|failure| {
                    tracing::warn!(%backend, error = %failure.message, "tasks/list: the backend's tasks are left out");
                    (Vec::new(), None)
                }),
            };
            let (tasks, next) = page;
            let next = match next {
                Some(cursor) => Some(GatewayCursor { backend: position.backend, cursor: Some(cursor) }),
                None => Some(GatewayCursor { backend: position.backend + 1, cursor: None })
                    .filter(|next| next.backend <= backends.len()),
            };
            match next {
                Some(next) if tasks.is_empty() => position = next,
                next => {
                    let mut answer = json!({ "tasks": tasks });
                    if let Some(next) = next {
                        answer["nextCursor"] = json!(next.encode());
                    }
                    return Ok(answer);
                }
            }
        }
        Ok(json!({ "tasks": [] }))
    }

    /// One page of the gateway's own tasks of the caller, and the cursor of the next.
    async fn gateway_tasks(
        &self,
        caller: &Caller,
        cursor: Option<Value>,
    ) -> Result<(Vec<Value>, Option<Value>), RpcFailure> {
        let after = match cursor {
            None => None,
            Some(cursor) => Some(wire::read_cursor(cursor.as_str().unwrap_or_default())?),
        };
        let filter = TaskFilter { principal: Some(caller.fairness_key()), state: None, after, limit: PAGE };
        let rows = self.ledger.store.tasks(&filter).await.map_err(unavailable)?;
        let now = now_ms();
        let tasks: Vec<Value> = rows.iter().filter(|row| row.created_ms + row.ttl_ms >= now).map(wire::task).collect();
        let next = rows.last().filter(|_| rows.len() == PAGE as usize).map(|last| json!(wire::cursor(last)));
        Ok((tasks, next))
    }

    /// `tasks/cancel`: the task ends `cancelled` (durably) before the answer; the backend is told when this
    /// instance runs the call. A terminal task is refused (2025-11-25) or acknowledged as is (2026-07-28).
    pub(super) async fn cancel_task(
        &self,
        caller: &Caller,
        params: &Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        let (row, extended) = self.asked_task(caller, TASKS_CANCEL, params, relay).await?;
        let terminal = |row: &TaskRow| match extended {
            true => Ok(json!({})),
            false => Err(wire::invalid(&format!("task `{}` already ended ({})", row.id, row.state))),
        };
        if row.is_terminal() {
            return terminal(&row);
        }
        if !self.ledger.store.finish_task(&row.id, &wire::cancelled(now_ms())).await.map_err(unavailable)? {
            return terminal(&self.owned_task(&row.id, &row.principal).await?);
        }
        if let Some(running) = self.tasks.running.lock().get(&row.id) {
            running.cancel.notify_one();
        }
        self.ledger.metrics.task_ended(wire::CANCELLED, false);
        self.tasks.ended.notify_waiters();
        self.announce(caller, &row.id).await;
        match extended {
            true => Ok(json!({})),
            false => Ok(wire::task(&self.owned_task(&row.id, &row.principal).await?)),
        }
    }
}
