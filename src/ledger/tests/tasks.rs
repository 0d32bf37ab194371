//! The task rules every store must have (`ledger/tasks.rs`): a call key has one task, a terminal status never
//! changes, an owner's running tasks fail as unknown at its restart, listings filter and page in creation order,
//! expired tasks are purged, and a second instance sees it all.

use super::Harness;
use crate::ledger::{TaskEnd, TaskFilter, TaskRow};

fn task(id: &str, principal: &str, created_ms: i64) -> TaskRow {
    TaskRow {
        id: id.into(),
        principal: principal.into(),
        owner: "gw-1".into(),
        call_key: None,
        tool: "docs__search".into(),
        state: "working".into(),
        message: None,
        outcome: None,
        answer: None,
        created_ms,
        updated_ms: created_ms,
        ttl_ms: 1_000,
        poll_ms: 500,
    }
}

fn end(state: &str, answer: &str) -> TaskEnd {
    TaskEnd { state: state.into(), message: None, outcome: None, answer: Some(answer.into()), updated_ms: 7 }
}

pub(super) async fn a_call_key_has_one_task(h: &Harness) {
    let first = TaskRow { call_key: Some("alice\nk1".into()), ..task("t1", "alice", 1) };
    assert_eq!(h.store.create_task(&first).await.expect("create"), first);
    let again = TaskRow { id: "t2".into(), ..first.clone() };
    assert_eq!(h.store.create_task(&again).await.expect("create"), first, "the existing task");
    assert_eq!(h.store.task("t2").await.expect("get"), None);
    let other = task("t3", "alice", 2);
    assert_eq!(h.store.create_task(&other).await.expect("create"), other, "no key: a task of its own");
}

pub(super) async fn a_terminal_task_never_changes(h: &Harness) {
    h.store.create_task(&task("t1", "alice", 1)).await.expect("create");
    assert!(h.store.finish_task("t1", &end("cancelled", "{}")).await.expect("cancel"));
    assert!(!h.store.finish_task("t1", &end("completed", "{\"result\":{}}")).await.expect("complete"));
    let stored = h.store.task("t1").await.expect("get").expect("a task");
    assert_eq!((stored.state.as_str(), stored.answer.as_deref(), stored.updated_ms), ("cancelled", Some("{}"), 7));
    assert!(!h.store.finish_task("nope", &end("completed", "{}")).await.expect("finish"), "no such task");
}

pub(super) async fn a_step_needs_the_status_and_time_it_read(h: &Harness) {
    h.store.create_task(&task("t1", "alice", 1)).await.expect("create");
    let asking = TaskEnd { updated_ms: 2, ..end("input_required", "{\"input\":{}}") };
    assert!(!h.store.step_task("t1", ("working", 0), &asking).await.expect("step"), "a stale update time");
    assert!(!h.store.step_task("t1", ("input_required", 1), &asking).await.expect("step"), "a stale status");
    assert!(h.store.step_task("t1", ("working", 1), &asking).await.expect("step"));
    let stored = h.second().await.task("t1").await.expect("get").expect("a task");
    assert_eq!((stored.state.as_str(), stored.updated_ms), ("input_required", 2));
    assert!(h.store.finish_task("t1", &end("cancelled", "{}")).await.expect("cancel"), "input_required is running");
    let back = TaskEnd { answer: None, ..end("working", "") };
    assert!(!h.store.step_task("t1", ("cancelled", 7), &back).await.expect("step"), "a terminal task stays");
    assert_eq!(h.store.task("t1").await.expect("get").expect("a task").state, "cancelled");
}

pub(super) async fn orphaned_tasks_fail_as_unknown_and_are_shared(h: &Harness) {
    h.store.create_task(&task("t1", "alice", 1)).await.expect("create");
    h.store.create_task(&TaskRow { owner: "gw-2".into(), ..task("t2", "alice", 2) }).await.expect("create");
    h.store.create_task(&task("t3", "alice", 3)).await.expect("create");
    h.store.finish_task("t3", &end("completed", "{\"result\":{}}")).await.expect("finish");
    assert_eq!(h.store.orphan_tasks("gw-1", "restarted", 9).await.expect("orphan"), 1);
    let second = h.second().await;
    let orphan = second.task("t1").await.expect("get").expect("a task");
    let read = (orphan.state.as_str(), orphan.outcome.as_deref(), orphan.message.as_deref(), orphan.updated_ms);
    assert_eq!(read, ("failed", Some("unknown"), Some("restarted"), 9));
    assert_eq!(second.task("t2").await.expect("get").expect("a task").state, "working", "another owner's");
}

pub(super) async fn tasks_are_listed_in_pages_and_purged_after_their_ttl(h: &Harness) {
    for (id, principal, created) in [("b", "alice", 1), ("a", "alice", 1), ("c", "bob", 2), ("d", "alice", 3)] {
        h.store.create_task(&task(id, principal, created)).await.expect("create");
    }
    h.store.finish_task("d", &end("completed", "{}")).await.expect("finish");
    let ids = |rows: Vec<TaskRow>| rows.into_iter().map(|row| row.id).collect::<Vec<_>>();
    let alice = |after, limit| TaskFilter { principal: Some("alice".into()), state: None, after, limit };
    assert_eq!(ids(h.store.tasks(&alice(None, 2)).await.expect("list")), ["a", "b"]);
    assert_eq!(ids(h.store.tasks(&alice(Some((1, "b".into())), 2)).await.expect("list")), ["d"]);
    let working = TaskFilter { state: Some("working".into()), limit: 10, ..TaskFilter::default() };
    assert_eq!(ids(h.store.tasks(&working).await.expect("list")), ["a", "b", "c"]);
    assert_eq!(
        h.store.purge_tasks(1_002).await.expect("purge"),
        2,
        "created at 1 with a ttl of 1 000: gone after 1 001"
    );
    assert_eq!(ids(h.store.tasks(&TaskFilter { limit: 10, ..TaskFilter::default() }).await.expect("list")), ["c", "d"]);
}
