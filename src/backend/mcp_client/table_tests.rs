//! Tests of `backend::mcp_client::table`.

use super::*;
use crate::backend::testing::AgentSlot;
use std::time::Duration;

fn key(agent: &str, backend: &str) -> SlotKey {
    SlotKey::agent(agent, backend)
}

/// A slot of `owner` (agent sessions are named after their owner and a number).
fn owned(owner: &str, n: usize) -> SlotKey {
    SlotKey::agent(&format!("{owner}-{n}"), "x").owned_by(owner)
}

fn holds(table: &SessionTable, owner: &str) -> usize {
    table.lock().held_by(owner)
}

#[test]
fn full_table_evicts_the_oldest_idle_slot() {
    let table = SessionTable::new(2, 2);
    drop(table.acquire(&key("a", "x")).unwrap());
    drop(table.acquire(&key("b", "x")).unwrap());
    drop(table.acquire(&key("a", "x")).unwrap()); // "a" is now the most recent
    let (_c, evicted) = table.acquire(&key("c", "x")).unwrap();
    assert!(evicted.is_some());
    assert_eq!(table.len(), 2);
    assert_eq!(table.remove_holder(&SessionHolder::agent("b")).len(), 0, "b was the oldest idle slot and is gone");
    assert_eq!(table.remove_holder(&SessionHolder::agent("a")).len(), 1);
}

#[test]
fn a_slot_in_use_is_never_evicted() {
    let table = SessionTable::new(1, 1);
    let (held, _) = table.acquire(&key("a", "x")).unwrap();
    let refused = table.acquire(&key("b", "x"));
    assert_eq!(refused.err(), Some(TableFull::Busy { capacity: 1 }));
    drop(held);
    let (_b, evicted) = table.acquire(&key("b", "x")).unwrap();
    assert!(evicted.is_some());
}

#[test]
fn remove_holder_drops_only_that_holders_slots() {
    let table = SessionTable::new(8, 8);
    for (agent, backend) in [("a", "x"), ("a", "y"), ("b", "x")] {
        drop(table.acquire(&key(agent, backend)).unwrap());
    }
    assert_eq!(table.remove_holder(&SessionHolder::agent("a")).len(), 2);
    assert_eq!(table.len(), 1);
    assert_eq!(table.remove_holder(&SessionHolder::agent("b")).len(), 1);
    assert!(table.lock().held.is_empty(), "removed slots no longer count against their owners");
}

/// A hog that filled the table loses its own idle slots, even its most recent ones, before anyone else loses
/// an older one.
#[test]
fn the_largest_holder_loses_its_idle_slots_first() {
    let table = SessionTable::new(10, 10);
    for n in 0..2 {
        drop(table.acquire(&owned("alice", n)).unwrap());
    }
    for n in 0..8 {
        drop(table.acquire(&owned("hog", n)).unwrap());
    }
    for n in 0..3 {
        let (_bob, evicted) = table.acquire(&owned("bob", n)).unwrap();
        assert!(evicted.is_some());
    }
    assert_eq!((holds(&table, "alice"), holds(&table, "bob"), holds(&table, "hog")), (2, 3, 5));
    assert_eq!(table.remove_holder(&SessionHolder::agent("hog-0")).len(), 0, "the hog's oldest slots went first");
    assert_eq!(table.remove_holder(&SessionHolder::agent("hog-3")).len(), 1);
}

/// The largest holder's slots in use are safe; then the next largest holder with an idle slot pays.
#[test]
fn a_busy_hog_is_skipped_and_a_full_busy_table_refuses() {
    let table = SessionTable::new(4, 4);
    let hog: Vec<_> = (0..3).map(|n| table.acquire(&owned("hog", n)).unwrap()).collect();
    drop(table.acquire(&owned("alice", 0)).unwrap());
    let (bob, evicted) = table.acquire(&owned("bob", 0)).unwrap();
    assert!(evicted.is_some(), "alice's idle slot made room");
    assert_eq!(holds(&table, "alice"), 0);
    assert_eq!(holds(&table, "hog"), 3, "slots in use are never evicted");
    assert_eq!(table.acquire(&owned("carol", 0)).err(), Some(TableFull::Busy { capacity: 4 }));
    drop((hog, bob));
}

/// At its cap an owner recycles its own oldest idle slot, even with room in the table; others keep theirs.
#[test]
fn an_owner_at_its_cap_recycles_its_own_oldest_idle_slot() {
    let table = SessionTable::new(100, 3);
    drop(table.acquire(&owned("alice", 0)).unwrap());
    for n in 0..3 {
        drop(table.acquire(&owned("hog", n)).unwrap());
    }
    let (_fourth, evicted) = table.acquire(&owned("hog", 3)).unwrap();
    assert!(evicted.is_some());
    assert_eq!(holds(&table, "hog"), 3);
    assert_eq!(table.remove_holder(&SessionHolder::agent("hog-0")).len(), 0, "its oldest slot was recycled");
    assert_eq!(holds(&table, "alice"), 1, "another owner keeps its slot");
}

/// At its cap with every slot in use, an owner is refused; it never takes another owner's slot.
#[test]
fn an_owner_at_its_cap_with_all_slots_busy_is_refused() {
    let table = SessionTable::new(100, 2);
    drop(table.acquire(&owned("alice", 0)).unwrap());
    let busy: Vec<_> = (0..2).map(|n| table.acquire(&owned("hog", n)).unwrap()).collect();
    assert_eq!(table.acquire(&owned("hog", 2)).err(), Some(TableFull::OwnerBusy { cap: 2 }));
    assert_eq!((holds(&table, "alice"), table.len()), (1, 3));
    drop(busy);
    assert!(table.acquire(&owned("hog", 2)).is_ok(), "once idle, its own slot is recycled");
}

fn http_session(generation: u64) -> BackendSession {
    let home = super::super::BackendEndpoint::new("http://127.0.0.1:9/mcp".parse().unwrap(), Duration::from_secs(1));
    BackendSession {
        id: None,
        version: "2025-11-25",
        capabilities: Arc::default(),
        generation,
        revision: 0,
        carrier: super::super::session::transport::Carrier::Http { home: Arc::new(home) },
        principal: None,
        live: None,
    }
}

fn hold(table: &SessionTable, agent: &str, generation: u64) -> SlotGuard {
    let (guard, _) = table.acquire(&key(agent, "x")).unwrap();
    *guard.session.try_lock().unwrap() = Some(http_session(generation));
    guard
}

/// A cap takes the session of the idle slot used longest ago that is eligible; a slot in use never gives its
/// session up, and the slot itself stays.
#[test]
fn take_idle_session_takes_the_oldest_eligible_idle_session_only() {
    let table = SessionTable::new(8, 8);
    let busy = hold(&table, "busy", 1);
    drop(hold(&table, "old", 2));
    drop(hold(&table, "new", 3));
    let taken = table.take_idle_session(|_, _| true).expect("an idle session");
    assert_eq!(taken.generation, 2, "the idle slot used longest ago");
    let taken = table.take_idle_session(|key, _| key.holder != SessionHolder::agent("new"));
    assert!(taken.is_none(), "only `new` holds an idle session, and it is not eligible");
    assert_eq!(table.take_idle_session(|_, _| true).map(|s| s.generation), Some(3));
    assert!(table.take_idle_session(|_, _| true).is_none(), "the busy slot keeps its session");
    assert_eq!(table.len(), 3, "slots stay; only their sessions went");
    assert!(busy.session.try_lock().unwrap().is_some());
}

#[test]
fn a_slot_is_idle_only_without_users_and_a_reaper_takes_only_its_own_generation() {
    let table = SessionTable::new(8, 8);
    let guard = hold(&table, "a", 7);
    assert_eq!(guard.idle_for(), None, "in use");
    let slot = Arc::clone(guard.arc());
    drop(guard);
    assert!(slot.idle_for().is_some_and(|quiet| quiet < Duration::from_secs(5)));
    assert!(matches!(slot.take_session_of(6), Reaped::Done));
    assert!(slot.session.try_lock().unwrap().is_some(), "another generation's reaper leaves it");
    assert!(matches!(slot.take_session_of(7), Reaped::Done));
    assert!(slot.session.try_lock().unwrap().is_none());
}

/// The owner is not part of a slot's identity: the same agent session from another address keeps its slot.
#[test]
fn a_slot_is_found_whatever_owner_asks_for_it() {
    let table = SessionTable::new(4, 4);
    drop(table.acquire(&key("a", "x").owned_by("anonymous@10.0.0.1")).unwrap());
    let (_again, evicted) = table.acquire(&key("a", "x").owned_by("anonymous@10.0.0.2")).unwrap();
    assert!(evicted.is_none());
    assert_eq!((table.len(), holds(&table, "anonymous@10.0.0.1")), (1, 1));
}

/// A retired backend's slots leave the table at once; each can be waited on until its last call has ended.
#[tokio::test]
async fn removing_a_backend_takes_its_slots_and_each_can_be_awaited_until_idle() {
    let table = SessionTable::new(8, 8);
    let (busy, _) = table.acquire(&key("a", "x")).unwrap();
    drop(table.acquire(&key("b", "x")).unwrap());
    drop(table.acquire(&key("a", "y")).unwrap());
    let removed = table.remove_backend("x");
    assert_eq!((removed.len(), table.len()), (2, 1), "only backend y's slot stays");
    let (idle, in_use): (Vec<_>, Vec<_>) = removed.into_iter().partition(|slot| slot.idle_for().is_some());
    let wait = Duration::from_secs(5);
    tokio::time::timeout(wait, idle[0].until_idle()).await.expect("an idle slot is idle at once");
    let slot = Arc::clone(&in_use[0]);
    let waiting = tokio::spawn(async move { slot.until_idle().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "a slot in use is not idle");
    drop(busy);
    tokio::time::timeout(wait, waiting).await.expect("the last user leaving wakes the waiter").unwrap();
}
