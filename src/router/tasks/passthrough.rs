//! Passthrough of a backend's own tasks (MCP 2025-11-25, utilities §"Tasks"; docs/tasks.md, *Passthrough*): a
//! task-augmented `tools/call` of a tool whose backend runs tasks itself is relayed with its `task`, and the
//! backend's task is then reached through the gateway under an id the gateway sealed.
//!
//! Rules:
//! - Which calls pass through: every task-augmented call of a `tasks = "passthrough"` backend; of a
//!   `tasks = "gateway"` backend, a 2025-11-25 agent's calls of a tool whose `execution.taskSupport` is
//!   `optional` or `required` when the backend declared `capabilities.tasks.requests.tools.call`
//!   ([`CallRouter::passes_through`]).
//! - The creating call is an ordinary call (policy, limits, approval, the ledger claim, the settle): what the
//!   claim records is the backend's `CreateTaskResult`, so a retry with the call's idempotency key is answered
//!   with the same task, never a second one.
//! - The agent never sees a backend's task id: it gets `syt1.` + a seal ([`crate::seal`], its own purpose under
//!   the request-state key) of the principal, the backend and the backend's id. An id that does not open, or
//!   opens for another principal, is answered as an unknown task (`-32602`), before anything is sent.
//! - `tasks/get`, `tasks/result`, `tasks/cancel` (and 2026-07-28's `tasks/update`) go to the sealed backend on
//!   the caller's own backend session (backends bind tasks to the session that created them), the backend's id
//!   in, the sealed id out.
//! - The backend's `notifications/tasks/status` on that session's standalone stream (opened by the creating
//!   call) reach the agent with the sealed id; a status for a task not created through this instance is not
//!   relayed (its sealed id is not known here, and the backend's id is never shown). A 2026-07-28 backend's
//!   `notifications/tasks` reach the agent's listen streams that name the sealed id ([`super::passthrough_listen`]).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::super::request_state::StateKey;
use super::super::{CallRouter, Caller, Found, RpcFailure, View};
use super::{extension, wire};
use crate::catalog::Route;
use crate::mcp::method::{TASKS_LIST, TASKS_UPDATE};
use crate::mcp::{Relay, SessionHolder, jsonrpc};
use crate::seal::Seal;
use crate::swap::Swap;

/// What starts every sealed task id (a gateway task's id is hex).
const PREFIX: &str = "syt1.";
/// The seal's purpose: nothing sealed for another purpose opens as a task id.
const PURPOSE: &[u8] = b"switchyard/passthrough-task/v1\n";
/// The longest task id opened (an agent sends it).
const MAX_ID_LEN: usize = 4096;
/// How many created tasks' sealed ids this instance keeps for their status notifications.
const REMEMBERED: usize = 4096;
/// Where a backend's answer names a task: a `Task` (`tasks/get`, `tasks/cancel`, a 2026-07-28 `CreateTaskResult`),
/// a 2025-11-25 `CreateTaskResult`, a result tied to its task (`tasks/result`).
const ID_POINTERS: [&str; 3] = ["/taskId", "/task/taskId", "/_meta/io.modelcontextprotocol~1related-task/taskId"];

/// A task created through this instance: the backend session it lives on, its backend, the backend's id.
type CreatedKey = (SessionHolder, Arc<str>, String);

/// What a sealed id binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct BackendTask {
    #[serde(rename = "p")]
    principal: String,
    #[serde(rename = "b")]
    pub(super) backend: String,
    #[serde(rename = "t")]
    pub(super) task: String,
}

/// Seals backends' task ids and remembers those created here.
pub(super) struct Passthrough {
    seal: Swap<Seal>,
    created: Mutex<Created>,
}

/// The sealed id of each task created through this instance, by backend session and the backend's id, with the
/// order of creation: when full, the older half is forgotten (notifications are hints; forgetting costs a few
/// of the oldest tasks' status updates, never the tasks).
#[derive(Default)]
struct Created {
    sealed: HashMap<CreatedKey, (u64, String)>,
    next: u64,
}

impl Created {
    fn remember(&mut self, key: CreatedKey, sealed: String) {
        if self.sealed.len() >= REMEMBERED {
            // At most the REMEMBERED / 2 newest creations have numbers from here on.
            let oldest_kept = self.next.saturating_sub(REMEMBERED as u64 / 2);
            self.sealed.retain(|_, (made, _)| *made >= oldest_kept);
        }
        self.sealed.insert(key, (self.next, sealed));
        self.next += 1;
    }
}

impl std::fmt::Debug for Passthrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passthrough(<redacted>)")
    }
}

impl Passthrough {
    pub(super) fn new(key: &StateKey) -> Self {
        Self { seal: Swap::new(key.seal_for(PURPOSE)), created: Mutex::default() }
    }

    pub(super) fn use_key(&self, key: &StateKey) {
        self.seal.store(key.seal_for(PURPOSE));
    }

    fn seal_id(&self, bound: &BackendTask) -> String {
        // A struct of strings always serializes.
        let payload = serde_json::to_vec(bound).unwrap_or_default();
        format!("{PREFIX}{}", self.seal.load().seal(&payload))
    }

    /// The backend task the sealed `id` names; an id that does not open, or is another principal's, is an
    /// unknown task.
    pub(super) fn open(&self, id: &str, principal: &str) -> Result<BackendTask, RpcFailure> {
        let sealed = id.strip_prefix(PREFIX).filter(|_| id.len() <= MAX_ID_LEN);
        let opened = sealed.and_then(|sealed| self.seal.load().open(sealed).ok());
        let bound: Option<BackendTask> = opened.and_then(|payload| serde_json::from_slice(&payload).ok());
        bound.filter(|bound| bound.principal == principal).ok_or_else(|| wire::unknown_task(id))
    }

    /// Replaces every backend task id in `answer` with its sealed id for `principal` (and remembers the ids of a
    /// created task for its notifications, `created`: the backend session it lives on).
    fn reseal(&self, principal: &str, backend: &Arc<str>, answer: &mut Value, created: Option<&SessionHolder>) {
        for pointer in ID_POINTERS {
            let Some(id) = answer.pointer_mut(pointer) else { continue };
            let Some(task) = id.as_str().map(str::to_owned) else { continue };
            let bound = BackendTask { principal: principal.to_owned(), backend: backend.to_string(), task };
            let sealed = self.seal_id(&bound);
            *id = json!(sealed);
            if let Some(holder) = created {
                self.created.lock().remember((holder.clone(), Arc::clone(backend), bound.task), sealed);
            }
        }
    }

    /// Rewrites a backend's `notifications/tasks/status` for the agent holding its session; false when the task
    /// was not created through this instance (the notification is then not relayed).
    pub(super) fn reseal_status(&self, holder: &SessionHolder, backend: &Arc<str>, note: &mut Value) -> bool {
        let Some(id) = note.pointer_mut("/params/taskId") else { return false };
        let key = (holder.clone(), Arc::clone(backend), id.as_str().unwrap_or_default().to_owned());
        let mut remembered = self.created.lock();
        let Some((_, sealed)) = remembered.sealed.get(&key).cloned() else { return false };
        *id = json!(sealed);
        let status = note.pointer("/params/status").and_then(Value::as_str).unwrap_or_default();
        if [wire::COMPLETED, wire::FAILED, wire::CANCELLED].contains(&status) {
            remembered.sealed.remove(&key);
        }
        true
    }
}

/// Whether a `tasks/*` request names a backend's task (a sealed id) rather than a gateway task.
pub(in crate::router) fn names_backend_task(params: &Value) -> bool {
    params.get("taskId").and_then(Value::as_str).is_some_and(|id| id.starts_with(PREFIX))
}

/// Whether a tool definition says the tool can run as a task.
fn supports_tasks(definition: &Value) -> bool {
    matches!(definition.pointer("/execution/taskSupport").and_then(Value::as_str), Some("optional" | "required"))
}

impl CallRouter {
    /// Rewrites a backend's `notifications/tasks/status` from the backend session `holder` holds for the agent;
    /// false when it is not to be relayed (see the module rules).
    pub(in crate::router) fn expose_task_status(
        &self,
        holder: &SessionHolder,
        backend: &Arc<str>,
        note: &mut Value,
    ) -> bool {
        self.tasks.passthrough.reseal_status(holder, backend, note)
    }

    /// Whether a task-augmented call of `route` is the backend's to run (see the module rules; `sessionless`: a
    /// 2026-07-28 agent, whose tasks a `"gateway"` backend's 2025-11-25 tasks capability does not describe).
    pub(super) fn passes_through(&self, route: &Route, sessionless: bool) -> bool {
        let routing = self.routing.load();
        let tasks = &routing.tasks;
        tasks.passthrough.contains(&route.backend)
            || (!sessionless
                && tasks.gateway.contains(&route.backend)
                && supports_tasks(&route.definition)
                && self.catalog.declares(&route.backend, "/tasks/requests/tools/call"))
    }

    /// Relays a task-augmented call to `route`'s backend as the ordinary call it is, `params` still holding its
    /// `task`; a task it answers with reaches the agent under its sealed id.
    pub(super) async fn pass_task(
        &self,
        caller: &Caller,
        view: View<'_>,
        params: Value,
        relay: &Relay,
        route: &Route,
    ) -> Result<Found, RpcFailure> {
        let relay = relay.clone().with_standalone_stream();
        let mut answer = self.call_tool(caller, view, params, &relay).await?.into_value();
        let created = answer.get("task").is_some() || answer.get("resultType").and_then(Value::as_str) == Some("task");
        if created {
            let holder = Some(&caller.session);
            self.tasks.passthrough.reseal(&caller.fairness_key(), &route.backend, &mut answer, holder);
        }
        Ok(Found::Built(answer))
    }

    /// Relays a `tasks/*` request naming a sealed id ([`names_backend_task`]) to the backend that runs the task,
    /// on the caller's backend session: the backend's id in, the sealed id out. A sessionless request that did
    /// not declare the tasks extension is refused first, as for a gateway task.
    pub(in crate::router) async fn relay_task(
        &self,
        caller: &Caller,
        method: &str,
        mut params: Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        let task = self.tasks.passthrough.open(wire::task_id(&params)?, &caller.fairness_key())?;
        if caller.sessionless && !extension::declared(relay.capabilities()) {
            return Err(extension::missing(method));
        }
        if method == TASKS_UPDATE && !caller.sessionless {
            return Err(RpcFailure::new(jsonrpc::METHOD_NOT_FOUND, "tasks/update is a 2026-07-28 method"));
        }
        let backend: Arc<str> = task.backend.as_str().into();
        params["taskId"] = json!(task.task);
        let mut answer = self.forward(caller, &backend, method, params, relay).await?;
        self.tasks.passthrough.reseal(&task.principal, &backend, &mut answer, None);
        Ok(answer)
    }

    /// The caller's tasks on `backend`: one page of the backend's `tasks/list` at `cursor`, its ids sealed, and
    /// the backend's next cursor.
    pub(super) async fn backend_tasks(
        &self,
        caller: &Caller,
        backend: &Arc<str>,
        cursor: Option<Value>,
    ) -> Result<(Vec<Value>, Option<Value>), RpcFailure> {
        let params = cursor.map_or(Value::Null, |cursor| json!({ "cursor": cursor }));
        let mut page = self.forward(caller, backend, TASKS_LIST, params, &Relay::default()).await?;
        let principal = caller.fairness_key();
        let mut tasks = match page.get_mut("tasks").map(Value::take) {
            Some(Value::Array(tasks)) => tasks,
            _ => Vec::new(),
        };
        for task in &mut tasks {
            self.tasks.passthrough.reseal(&principal, backend, task, None);
        }
        Ok((tasks, page.get("nextCursor").filter(|next| next.is_string()).cloned()))
    }

    /// The backends whose own tasks `tasks/list` merges, in configuration order: those that may run the
    /// caller's tasks and declared `tasks.list`.
    pub(super) fn listing_backends(&self) -> Vec<Arc<str>> {
        let routing = self.routing.load();
        let tasks = &routing.tasks;
        let mut listing = self.catalog.backends_with(View::All, "tasks");
        let runs = |backend: &Arc<str>| match tasks.passthrough.contains(backend) {
            true => true,
            false => tasks.gateway.contains(backend) && self.catalog.declares(backend, "/tasks/requests/tools/call"),
        };
        listing.retain(|backend| runs(backend) && self.catalog.declares(backend, "/tasks/list"));
        listing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passthrough() -> Passthrough {
        Passthrough::new(&StateKey::derived_from(&[3; 32]))
    }

    #[test]
    fn a_sealed_id_opens_for_its_principal_only() {
        let pass = passthrough();
        let (alice, backend): (_, Arc<str>) = ("alice", "b".into());
        let mut answer = json!({"task": {"taskId": "backend-1", "status": "working"}});
        pass.reseal(alice, &backend, &mut answer, None);
        let sealed = answer["task"]["taskId"].as_str().expect("sealed").to_owned();
        assert!(sealed.starts_with(PREFIX) && !sealed.contains("backend-1"), "{sealed}");
        let opened = pass.open(&sealed, alice).expect("opens");
        assert_eq!((opened.backend.as_str(), opened.task.as_str()), ("b", "backend-1"));
        assert_eq!(pass.open(&sealed, "mallory").expect_err("another principal").code, -32602);
        assert_eq!(pass.open("syt1.forged.tag", alice).expect_err("forged").code, -32602);
        assert!(pass.open("0123abcd", alice).is_err(), "a gateway task's id is not a backend's");
        assert!(names_backend_task(&json!({"taskId": sealed})) && !names_backend_task(&json!({"taskId": "0123"})));
        let other_key = Passthrough::new(&StateKey::derived_from(&[4; 32]));
        assert!(other_key.open(&sealed, alice).is_err(), "another gateway's key does not open it");
    }

    #[test]
    fn status_notifications_are_rewritten_only_for_tasks_created_here() {
        let pass = passthrough();
        let (holder, backend): (_, Arc<str>) = (SessionHolder::agent("s1"), "b".into());
        let mut created = json!({"task": {"taskId": "t-9"}});
        pass.reseal("alice", &backend, &mut created, Some(&holder));
        let mut note =
            json!({"method": "notifications/tasks/status", "params": {"taskId": "t-9", "status": "working"}});
        assert!(pass.reseal_status(&holder, &backend, &mut note));
        assert_eq!(note["params"]["taskId"], created["task"]["taskId"]);
        let mut stranger = json!({"params": {"taskId": "t-10", "status": "working"}});
        assert!(!pass.reseal_status(&holder, &backend, &mut stranger), "never created here");
        let mut ended = json!({"params": {"taskId": "t-9", "status": "completed"}});
        assert!(pass.reseal_status(&holder, &backend, &mut ended), "the terminal status is relayed");
        assert!(!pass.reseal_status(&holder, &backend, &mut json!({"params": {"taskId": "t-9"}})), "then forgotten");
    }

    #[test]
    fn a_full_memory_of_created_tasks_forgets_the_oldest_half() {
        let pass = passthrough();
        let (holder, backend): (_, Arc<str>) = (SessionHolder::agent("s1"), "b".into());
        let create = |n: usize| {
            pass.reseal("alice", &backend, &mut json!({"task": {"taskId": format!("t-{n}")}}), Some(&holder));
        };
        let relayed = |n: usize| {
            let mut note = json!({"params": {"taskId": format!("t-{n}"), "status": "working"}});
            pass.reseal_status(&holder, &backend, &mut note)
        };
        (0..REMEMBERED).for_each(create);
        assert!(relayed(0) && relayed(REMEMBERED - 1), "all remembered while there is room");
        create(REMEMBERED);
        let remembered: Vec<usize> = (0..=REMEMBERED).filter(|&n| relayed(n)).collect();
        let newest: Vec<usize> = (REMEMBERED / 2..=REMEMBERED).collect();
        assert_eq!(remembered, newest, "the older half is forgotten, the newer half and the new task kept");
    }

    #[test]
    fn only_tools_that_say_so_support_tasks() {
        assert!(supports_tasks(&json!({"execution": {"taskSupport": "required"}})));
        assert!(supports_tasks(&json!({"execution": {"taskSupport": "optional"}})));
        assert!(!supports_tasks(&json!({"execution": {"taskSupport": "forbidden"}})) && !supports_tasks(&json!({})));
    }
}
