//! Who on this replica can be told of a task's status change, so that a change nobody can be told of costs no
//! ledger read (a status is read back before it is announced, as another writer may race it).
//!
//! Rules (docs/tasks.md):
//! - A 2025-11-25 agent session hears `notifications/tasks/status` for the statuses written on its behalf while it
//!   holds a standalone stream on this replica (MCP 2025-11-25 utilities §"Tasks"); a 2026-07-28
//!   `subscriptions/listen` stream that opted into `taskIds` hears `notifications/tasks` for its principal's
//!   tasks. The front registers each for as long as the stream is open ([`TaskEar`], [`TaskHearing`]).
//! - A status is written on behalf of the task's own principal (another principal's request is answered as for
//!   a task that does not exist), so the writer's principal is the task's.
//! - Notifications are hints (`tasks/get` is the truth): a stream that opens while a change is announced may
//!   miss it, as it may miss a change it lags behind on.
//! - On a ledger replicas share ([`Audience::share`]), a stream on another replica may hear any status: every
//!   status is read back and announced, the front passing it on (a session's to the replica holding its
//!   standalone stream, every one to the replicas' listen streams). A status another replica wrote is read here
//!   only when a listen stream here can be told of it ([`CallRouter::task_changed_elsewhere`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::super::CallRouter;
use super::{TaskChange, extension, wire};
use crate::mcp::SessionHolder;

/// What a stream listens for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEar {
    /// The statuses written for requests of this agent session (its standalone stream, 2025-11-25).
    Session(String),
    /// The statuses of this principal's tasks (by its fairness key; a listen stream, 2026-07-28).
    Principal(String),
}

/// The open streams that hear task statuses, counted by session and by principal.
#[derive(Debug, Default)]
pub(super) struct Audience {
    sessions: Mutex<HashMap<String, usize>>,
    principals: Mutex<HashMap<String, usize>>,
    /// Other replicas' streams may hear what this replica writes.
    shared: AtomicBool,
}

/// A stream's registration in the audience; dropping it (the stream closed) ends it.
#[derive(Debug)]
pub struct TaskHearing {
    audience: Arc<Audience>,
    ear: TaskEar,
}

impl Audience {
    fn ears<'a>(&'a self, ear: &'a TaskEar) -> (&'a Mutex<HashMap<String, usize>>, &'a str) {
        match ear {
            TaskEar::Session(session) => (&self.sessions, session),
            TaskEar::Principal(principal) => (&self.principals, principal),
        }
    }

    /// Registers a stream listening for `ear` until the returned hearing is dropped.
    pub(super) fn hear(self: &Arc<Self>, ear: TaskEar) -> TaskHearing {
        let (ears, key) = self.ears(&ear);
        *ears.lock().entry(key.to_owned()).or_default() += 1;
        TaskHearing { audience: Arc::clone(self), ear }
    }

    /// From now on, streams of other replicas may hear this replica's statuses.
    pub(super) fn share(&self) {
        self.shared.store(true, Ordering::Relaxed);
    }

    /// Whether a status written on behalf of `session` for `principal` (the writer's fairness key, computed only
    /// when a listen stream is open) can be told to anyone here, or, on a shared ledger, anywhere.
    pub(super) fn hears(&self, session: &SessionHolder, principal: impl FnOnce() -> String) -> bool {
        let heard = matches!(session, SessionHolder::Agent(session) if self.sessions.lock().contains_key(&**session));
        heard || self.shared.load(Ordering::Relaxed) || self.hears_principal(principal)
    }

    /// Whether a listen stream of `principal` is open here.
    fn hears_principal(&self, principal: impl FnOnce() -> String) -> bool {
        let principals = self.principals.lock();
        !principals.is_empty() && principals.contains_key(&principal())
    }
}

impl CallRouter {
    /// Tells this replica's listen streams of task `id` of `principal`, whose status another replica wrote (its
    /// front heard so from that replica's); read back only when a listen stream of the principal is open here.
    pub async fn task_changed_elsewhere(&self, principal: &str, id: &str) {
        if self.tasks.audience.hears_principal(|| principal.to_owned()) {
            self.tell_task_change(SessionHolder::Principal(principal.into()), id, false).await;
        }
    }

    /// Reads task `id` back and tells the streams of its change, written for `session` (`here`: by this replica).
    pub(super) async fn tell_task_change(&self, session: SessionHolder, id: &str, here: bool) {
        if let Ok(Some(row)) = self.ledger.store.task(id).await {
            let change = TaskChange {
                principal: row.principal.clone(),
                session,
                id: row.id.clone(),
                detailed: extension::detailed(&row),
                task: wire::task(&row),
                here,
            };
            let _ = self.tasks.changes.send(change);
        }
    }
}

impl Drop for TaskHearing {
    fn drop(&mut self) {
        let (ears, key) = self.audience.ears(&self.ear);
        let mut ears = ears.lock();
        if let Some(count) = ears.get_mut(key) {
            *count -= 1;
            if *count == 0 {
                ears.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(session: &str) -> SessionHolder {
        SessionHolder::Agent(session.into())
    }

    #[test]
    fn a_status_is_heard_only_while_its_session_or_principal_has_a_stream_open() {
        let audience = Arc::new(Audience::default());
        let alice = || "alice".to_owned();
        assert!(!audience.hears(&agent("s1"), alice), "no stream: nobody hears");
        let first = audience.hear(TaskEar::Session("s1".into()));
        let second = audience.hear(TaskEar::Session("s1".into()));
        assert!(audience.hears(&agent("s1"), alice));
        assert!(!audience.hears(&agent("s2"), alice), "another session's stream does not hear it");
        assert!(
            !audience.hears(&SessionHolder::Principal("alice".into()), alice),
            "a 2026-07-28 writer has no session stream"
        );
        drop(first);
        assert!(audience.hears(&agent("s1"), alice), "the session's other stream still hears");
        drop(second);
        assert!(!audience.hears(&agent("s1"), alice));

        let listen = audience.hear(TaskEar::Principal("alice".into()));
        assert!(audience.hears(&SessionHolder::Principal("alice".into()), alice));
        assert!(audience.hears(&agent("s9"), alice), "alice's listen stream hears her tasks from any session");
        assert!(!audience.hears(&agent("s9"), || "bob".to_owned()), "not bob's");
        drop(listen);
        assert!(!audience.hears(&SessionHolder::Principal("alice".into()), alice));

        audience.share();
        assert!(audience.hears(&agent("s1"), alice), "on a shared ledger, another replica's stream may hear it");
        assert!(!audience.hears_principal(alice), "but no listen stream here hears alice's");
    }
}
