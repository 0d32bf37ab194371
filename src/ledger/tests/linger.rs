//! The SQL stores' lingering completions (see `ledger::background`): a completion nobody waits for rides with the
//! next job in one transaction, lands on its own within its linger when no job comes, and is applied at once when
//! the store shuts down, is dropped, or has a full parking. Run against SQLite and PostgreSQL (the memory store
//! completes at once). Transactions are counted by the writer, never timed.

use std::time::Duration;

use tokio::time::Instant;

use super::Harness;
use super::behaviour::{claimed, key, result, stored};
use crate::ledger::background::{LINGER, MAX_PARKED};
use crate::ledger::{ClaimOutcome, ClaimState, LedgerStore, ListFilter, Settlement, WaitOutcome};

/// Long enough that only a nudge or another job can apply a parked completion within a test.
const FOREVER: Duration = Duration::from_secs(3600);

/// The batches (transactions) `store`'s writer has run.
fn batches(store: &LedgerStore) -> u64 {
    match store {
        LedgerStore::Sqlite(store) => store.batches(),
        LedgerStore::Postgres(store) => store.batches(),
        LedgerStore::Memory(_) => panic!("the memory store has no writer"),
    }
}

fn complete_soon(store: &LedgerStore, name: &str) {
    store.settle_soon(&key(name), "gw-a", Settlement::Completed(result(name)), super::MAX_RESULT);
}

/// Waits (reading through `store`, another instance) until every one of `names` is completed.
async fn until_completed(store: &LedgerStore, names: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let completed = ListFilter { state: Some(ClaimState::Completed), limit: names.len() + 1, ..Default::default() };
    loop {
        let listed = store.list(&completed).await.expect("list");
        if listed.len() == names.len() {
            return;
        }
        assert!(Instant::now() < deadline, "{} of {} completions landed", listed.len(), names.len());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A completion and the next claim commit in one transaction, and a duplicate on another instance that waits
/// for the completion is woken when that transaction lands.
pub(super) async fn a_completion_rides_with_the_next_claim(h: &Harness) {
    let store = h.lingering(FOREVER).await;
    let second = h.second().await;
    claimed(&store, "first", "gw-a").await;
    let ClaimOutcome::Existing(seen) = second.claim(super::claim_of("first", "gw-b")).await.expect("claim") else {
        panic!("another instance claimed a key the first holds");
    };
    assert_eq!(seen.state, ClaimState::InFlight);
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move { second.wait_settled(&key("first"), Instant::now() + Duration::from_secs(20)).await })
    };
    let before = batches(&store);
    complete_soon(&store, "first");
    assert_eq!(batches(&store), before, "a parked completion wakes nobody");
    claimed(&store, "next", "gw-a").await;
    assert_eq!(batches(&store), before + 1, "the completion and the next claim shared one transaction");
    match waiter.await.expect("waiter") {
        Ok(WaitOutcome::Settled(record)) => assert_eq!(record.result, Some(result("first"))),
        other => panic!("the other instance's duplicate did not get the result: {other:?}"),
    }
    assert_eq!(stored(&second, "next").await.state, ClaimState::InFlight);
}

/// With no other job, a completion lands once it waited its linger: another instance waiting for it is woken.
pub(super) async fn a_lone_completion_lands_within_its_linger(h: &Harness) {
    let store = h.lingering(LINGER).await;
    let second = h.second().await;
    claimed(&store, "lone", "gw-a").await;
    let before = batches(&store);
    complete_soon(&store, "lone");
    let waited = second.wait_settled(&key("lone"), Instant::now() + Duration::from_secs(20)).await.expect("wait");
    let WaitOutcome::Settled(record) = waited else { panic!("the lone completion never landed: {waited:?}") };
    assert_eq!((record.state, record.result), (ClaimState::Completed, Some(result("lone"))));
    // The other instance hears of the commit as it happens; the writer counts its batch once the commit answered.
    let counted = Instant::now() + Duration::from_secs(10);
    while batches(&store) == before && Instant::now() < counted {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(batches(&store), before + 1, "it went alone, with no other call");
}

/// Shutdown (`orphan`) applies a parked completion at once instead of waiting out its linger.
pub(super) async fn shutdown_applies_a_lingering_completion_at_once(h: &Harness) {
    let store = h.lingering(FOREVER).await;
    claimed(&store, "done", "gw-a").await;
    claimed(&store, "running", "gw-a").await;
    complete_soon(&store, "done");
    let orphaned = tokio::time::timeout(Duration::from_secs(30), store.orphan("gw-a")).await;
    assert_eq!(orphaned.expect("orphan waited for the linger").expect("orphan"), 1, "only the running call is left");
    assert_eq!(stored(&h.store, "done").await.state, ClaimState::Completed);
    assert_eq!(stored(&h.store, "running").await.state, ClaimState::Unknown);
}

/// Dropping the store applies what is still parked (it does not wait out the linger, nor keep the store open).
pub(super) async fn dropping_the_store_applies_lingering_completions(h: &Harness) {
    let store = h.lingering(FOREVER).await;
    claimed(&store, "dropped", "gw-a").await;
    complete_soon(&store, "dropped");
    drop(store);
    until_completed(&h.store, &["dropped".to_owned()]).await;
}

/// A full parking is applied at once, without another job or the linger.
pub(super) async fn a_full_parking_is_applied_at_once(h: &Harness) {
    let store = h.lingering(FOREVER).await;
    let names: Vec<String> = (0..MAX_PARKED).map(|n| format!("full-{n}")).collect();
    for name in &names {
        claimed(&store, name, "gw-a").await;
    }
    for name in &names {
        complete_soon(&store, name);
    }
    until_completed(&h.store, &names).await;
}
