//! Behaviour cases (run against every store by the suite) about group commit and the completion nobody waits
//! for (`LedgerStore::settle_soon`): many callers at once, a duplicate while the completion is not yet durable,
//! and orphaning after queued completions.

use std::time::Duration;

use tokio::time::Instant;

use super::Harness;
use super::behaviour::{claimed, key, result, stored};
use super::claim_of;
use crate::ledger::{ClaimOutcome, ClaimState, ListFilter, Settlement, WaitOutcome};

/// Hundreds of callers at once (the SQL stores batch them): each is answered, each claim and its queued
/// completion is durable, as another instance sees.
pub(super) async fn many_concurrent_claims_are_each_answered_and_durable(h: &Harness) {
    const CALLS: usize = 300;
    let tasks: Vec<_> = (0..CALLS)
        .map(|n| {
            let store = h.store.clone();
            tokio::spawn(async move {
                let name = format!("call-{n}");
                let outcome = store.claim(claim_of(&name, "gw-a")).await.expect("claim");
                assert!(matches!(outcome, ClaimOutcome::Claimed(_)), "{name}: {outcome:?}");
                store.settle_soon(&key(&name), "gw-a", Settlement::Completed(result(&name)), super::MAX_RESULT);
                let settled = store.wait_settled(&key(&name), Instant::now() + Duration::from_secs(20)).await;
                assert!(matches!(settled, Ok(WaitOutcome::Settled(_))), "{name}: {settled:?}");
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a caller");
    }
    let second = h.second().await;
    let completed = ListFilter { state: Some(ClaimState::Completed), limit: CALLS + 1, ..Default::default() };
    let listed = second.list(&completed).await.expect("list");
    assert_eq!(listed.len(), CALLS, "every claim and completion is durable");
    let sample = second.get(&key("call-123")).await.expect("get").expect("stored");
    assert_eq!(sample.result, Some(result("call-123")));
}

/// A completion queued but not yet durable (another process holds the write lock): the claim is still
/// `in_flight` in the store, and a duplicate waits and then gets the result; it never becomes a new claim.
pub(super) async fn a_duplicate_before_the_completion_is_durable_gets_its_result(h: &Harness) {
    claimed(&h.store, "k", "gw-a").await;
    let hold = h.hold_writes("k").await;
    let answer = result("ran once");
    h.store.settle_soon(&key("k"), "gw-a", Settlement::Completed(answer.clone()), super::MAX_RESULT);
    if let Some(hold) = &hold {
        assert_eq!(hold.state("k").await.as_deref(), Some("in_flight"), "the completion cannot be durable yet");
    }
    let duplicate = {
        let store = h.store.clone();
        tokio::spawn(async move {
            let existing = match store.claim(claim_of("k", "gw-b")).await.expect("claim") {
                ClaimOutcome::Existing(record) => record,
                ClaimOutcome::Claimed(record) => panic!("a claimed call was claimed again: {record:?}"),
            };
            if existing.state != ClaimState::InFlight {
                return existing;
            }
            match store.wait_settled(&key("k"), Instant::now() + Duration::from_secs(20)).await.expect("wait") {
                WaitOutcome::Settled(record) => *record,
                other => panic!("the duplicate did not get the result: {other:?}"),
            }
        })
    };
    if let Some(hold) = hold {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!duplicate.is_finished(), "nothing but the durable completion may answer the duplicate");
        hold.release().await;
    }
    let record = duplicate.await.expect("the duplicate");
    assert_eq!((record.state, record.owner.as_str()), (ClaimState::Completed, "gw-a"));
    assert_eq!(record.result, Some(answer));
}

/// Orphaning (the shutdown's last step) first applies the completions still queued, so they are not marked
/// `unknown` as leftovers.
pub(super) async fn queued_settles_are_applied_before_orphaning(h: &Harness) {
    for n in 0..20 {
        claimed(&h.store, &format!("q{n}"), "gw-a").await;
    }
    claimed(&h.store, "running", "gw-a").await;
    for n in 0..20 {
        let settled = Settlement::Completed(result(&format!("q{n}")));
        h.store.settle_soon(&key(&format!("q{n}")), "gw-a", settled, super::MAX_RESULT);
    }
    assert_eq!(h.store.orphan("gw-a").await.expect("orphan"), 1, "only the call still running is left over");
    for n in 0..20 {
        assert_eq!(stored(&h.store, &format!("q{n}")).await.state, ClaimState::Completed);
    }
    assert_eq!(stored(&h.store, "running").await.state, ClaimState::Unknown);
}
