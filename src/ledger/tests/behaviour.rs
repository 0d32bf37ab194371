//! The behaviour every store must have, one function per case, run against each store by the suite macro.

use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::time::Instant;

use crate::raw_json::RawJson;

use super::{Harness, claim_of, winners_and_losers};
// Cases about batches and the completion nobody waits for live in their own file; the suite finds them here.
pub(super) use super::completion::{
    a_duplicate_before_the_completion_is_durable_gets_its_result, many_concurrent_claims_are_each_answered_and_durable,
    queued_settles_are_applied_before_orphaning,
};
use crate::ledger::{
    BackendTokenRow, CallMismatch, ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, CounterRow, LedgerError,
    LedgerStore, ListFilter, NewClaim, OPERATOR, Resolution, Resolve, Revocation, TokenFilter, WaitOutcome,
    canonical_digest,
};

pub(super) fn key(name: &str) -> ClaimKey {
    ClaimKey::idempotency("alice", name)
}

pub(super) async fn claimed(store: &LedgerStore, name: &str, owner: &str) -> ClaimRecord {
    match store.claim(claim_of(name, owner)).await.expect("claim") {
        ClaimOutcome::Claimed(record) => record,
        ClaimOutcome::Existing(record) => panic!("{name} was already claimed: {record:?}"),
    }
}

async fn existing(store: &LedgerStore, name: &str, owner: &str) -> ClaimRecord {
    match store.claim(claim_of(name, owner)).await.expect("claim") {
        ClaimOutcome::Existing(record) => record,
        ClaimOutcome::Claimed(record) => panic!("{name} was claimed twice: {record:?}"),
    }
}

pub(super) async fn stored(store: &LedgerStore, name: &str) -> ClaimRecord {
    store.get(&key(name)).await.expect("get").expect("the claim exists")
}

pub(super) fn result(text: &str) -> RawJson {
    RawJson::of(&json!({ "content": [{ "type": "text", "text": text }], "isError": false }))
}

pub(super) async fn claim_once_then_existing(h: &Harness) {
    let record = claimed(&h.store, "k", "gw-a").await;
    assert_eq!(record.state, ClaimState::InFlight);
    assert_eq!((record.owner.as_str(), record.tool.as_str(), record.backend.as_str()), ("gw-a", "search", "docs"));
    assert_eq!(record.id.len(), 32);
    assert!(record.lease_until > record.created_at);
    // What the store kept is exactly what the claimant was told, whoever asks.
    assert_eq!(existing(&h.store, "k", "gw-b").await, record);
    assert_eq!(stored(&h.store, "k").await, record);
    assert_eq!(h.store.get(&key("other")).await.expect("get"), None);
}

/// Another call under a claimed key finds the first call's claim unchanged, whatever it asks for, so the
/// router can tell it is not the same call.
pub(super) async fn a_key_names_one_call(h: &Harness) {
    let first = claimed(&h.store, "k", "gw-a").await;
    let tool = NewClaim { tool: "delete".into(), ..claim_of("k", "gw-b") };
    let backend = NewClaim { backend: "mail".into(), ..claim_of("k", "gw-b") };
    let arguments = NewClaim { args_digest: canonical_digest(&json!({"query": "other"})), ..claim_of("k", "gw-b") };
    for (call, mismatch) in
        [(tool, CallMismatch::Tool), (backend, CallMismatch::Tool), (arguments, CallMismatch::Arguments)]
    {
        let ClaimOutcome::Existing(found) = h.store.claim(call.clone()).await.expect("claim") else {
            panic!("a claimed key was claimed again by {call:?}");
        };
        assert_eq!(found, first, "the first claim is untouched");
        assert_eq!(found.mismatch(&call), Some(mismatch), "{call:?}");
    }
    assert_eq!(existing(&h.store, "k", "gw-b").await.mismatch(&claim_of("k", "gw-b")), None, "the same call");
    assert_eq!(stored(&h.store, "k").await, first);
}

pub(super) async fn concurrent_claims_have_one_winner(h: &Harness) {
    let tasks: Vec<_> = (0..1000)
        .map(|task| {
            let store = h.store.clone();
            tokio::spawn(async move { store.claim(claim_of("hot", &format!("gw-{}", task % 7))).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("task").expect("claim"));
    }
    let (winners, losers) = winners_and_losers(outcomes);
    assert_eq!(winners.len(), 1, "exactly one claim may win");
    assert_eq!(losers.len(), 999);
    assert!(losers.iter().all(|record| record.id == winners[0].id));
}

pub(super) async fn complete_then_replay(h: &Harness) {
    claimed(&h.store, "k", "gw-a").await;
    let answer = result("done");
    h.store.complete(&key("k"), "gw-a", &answer, super::MAX_RESULT).await.expect("complete");
    let record = existing(&h.store, "k", "gw-b").await;
    assert_eq!(record.state, ClaimState::Completed);
    assert_eq!(record.result, Some(answer.clone()));
    assert_eq!((record.result_digest, record.error), (None, None));
    assert!(record.updated_at >= record.created_at);
    // A repeated completion (a retry after a lost reply) is accepted; a different result is not.
    h.store.complete(&key("k"), "gw-a", &answer, super::MAX_RESULT).await.expect("same result again");
    let different = h.store.complete(&key("k"), "gw-a", &result("other"), super::MAX_RESULT).await;
    assert!(matches!(different, Err(LedgerError::WrongState { state: ClaimState::Completed, .. })), "{different:?}");
}

pub(super) async fn oversize_result_is_kept_as_digest(h: &Harness) {
    claimed(&h.store, "big", "gw-a").await;
    let answer = result(&"x".repeat(2000));
    h.store.complete(&key("big"), "gw-a", &answer, 1000).await.expect("complete");
    let record = stored(&h.store, "big").await;
    assert_eq!(record.state, ClaimState::Completed);
    assert_eq!(record.result, None);
    assert_eq!(record.result_digest, Some(canonical_digest(&answer.to_value())));
}

pub(super) async fn mark_unknown_records_the_error(h: &Harness) {
    claimed(&h.store, "k", "gw-a").await;
    h.store.mark_unknown(&key("k"), "gw-a", "backend timed out after delivery").await.expect("mark unknown");
    let record = existing(&h.store, "k", "gw-b").await;
    assert_eq!(record.state, ClaimState::Unknown);
    assert_eq!(record.error.as_deref(), Some("backend timed out after delivery"));
    // The owner learning the outcome later replaces "unknown" with it.
    h.store.complete(&key("k"), "gw-a", &result("late"), super::MAX_RESULT).await.expect("late completion");
    let record = stored(&h.store, "k").await;
    assert_eq!((record.state, record.error), (ClaimState::Completed, None));
}

pub(super) async fn release_lets_the_call_run_again(h: &Harness) {
    claimed(&h.store, "k", "gw-a").await;
    h.store.release(&key("k"), "gw-a").await.expect("release");
    assert_eq!(h.store.get(&key("k")).await.expect("get"), None);
    h.store.release(&key("k"), "gw-a").await.expect("releasing a released claim is accepted");
    assert_eq!(claimed(&h.store, "k", "gw-b").await.owner, "gw-b");
}

pub(super) async fn only_the_owner_settles(h: &Harness) {
    let record = claimed(&h.store, "k", "gw-a").await;
    let (k, answer) = (key("k"), result("r"));
    let attempts = [
        h.store.complete(&k, "gw-b", &answer, super::MAX_RESULT).await,
        h.store.mark_unknown(&k, "gw-b", "no").await,
        h.store.release(&k, "gw-b").await,
    ];
    for attempt in attempts {
        assert!(matches!(&attempt, Err(LedgerError::NotOwner { owner, .. }) if owner == "gw-a"), "{attempt:?}");
    }
    assert_eq!(stored(&h.store, "k").await, record, "refused settles change nothing");
    let missing = h.store.complete(&key("missing"), "gw-a", &answer, super::MAX_RESULT).await;
    assert!(matches!(missing, Err(LedgerError::NotFound { .. })), "{missing:?}");
    assert!(matches!(h.store.mark_unknown(&key("missing"), "gw-a", "x").await, Err(LedgerError::NotFound { .. })));
    h.store.complete(&k, "gw-a", &answer, super::MAX_RESULT).await.expect("owner completes");
    for late in [h.store.mark_unknown(&k, "gw-a", "x").await, h.store.release(&k, "gw-a").await] {
        assert!(matches!(late, Err(LedgerError::WrongState { state: ClaimState::Completed, .. })), "{late:?}");
    }
}

pub(super) async fn expired_leases_become_unknown(h: &Harness) {
    claimed(&h.store, "alive", "gw-a").await;
    claimed(&h.store, "dead", "gw-b").await;
    claimed(&h.store, "done", "gw-b").await;
    h.store.complete(&key("done"), "gw-b", &result("r"), super::MAX_RESULT).await.expect("complete");
    let now = SystemTime::now();
    assert_eq!(h.store.renew_leases("gw-a", now + Duration::from_secs(7200)).await.expect("renew"), 1);
    assert_eq!(h.store.expire_leases(now + Duration::from_secs(10)).await.expect("nothing due yet"), 0);
    assert_eq!(h.store.expire_leases(now + Duration::from_secs(3600)).await.expect("expire"), 1);
    assert_eq!(stored(&h.store, "alive").await.state, ClaimState::InFlight);
    let dead = stored(&h.store, "dead").await;
    assert_eq!(dead.state, ClaimState::Unknown);
    assert!(dead.error.as_deref().is_some_and(|error| error.contains("lease")), "{dead:?}");
    assert_eq!(stored(&h.store, "done").await.state, ClaimState::Completed);
    assert_eq!(h.store.renew_leases("gw-b", now).await.expect("renew"), 0, "only in-flight claims are renewed");
}

pub(super) async fn orphan_marks_leftovers_unknown(h: &Harness) {
    for name in ["a1", "a2", "a3"] {
        claimed(&h.store, name, "gw-a").await;
    }
    claimed(&h.store, "b1", "gw-b").await;
    h.store.complete(&key("a3"), "gw-a", &result("r"), super::MAX_RESULT).await.expect("complete");
    assert_eq!(h.store.orphan("gw-a").await.expect("orphan"), 2);
    for name in ["a1", "a2"] {
        let record = stored(&h.store, name).await;
        assert_eq!(record.state, ClaimState::Unknown);
        assert!(record.error.as_deref().is_some_and(|error| error.contains("restarted")), "{record:?}");
    }
    assert_eq!(stored(&h.store, "a3").await.state, ClaimState::Completed);
    assert_eq!(stored(&h.store, "b1").await.state, ClaimState::InFlight);
    assert_eq!(h.store.orphan("gw-a").await.expect("again"), 0);
}

/// A tool call that asked its agent for input (multi round-trip results, `router::continuation`) keeps its one
/// claim open between rounds: renewed with its owner's leases, waited for by duplicates, settled once by its final
/// answer; an unanswered one is marked unknown by its owner, and one a crash interrupted by the next start.
pub(super) async fn a_call_waiting_for_input_stays_open_until_settled_once(h: &Harness) {
    for name in ["answered", "unanswered", "interrupted"] {
        claimed(&h.store, name, "gw-a").await;
    }
    let now = SystemTime::now();
    assert_eq!(h.store.renew_leases("gw-a", now + Duration::from_secs(7200)).await.expect("renew"), 3);
    let soon = Instant::now() + Duration::from_millis(50);
    assert_eq!(h.store.wait_settled(&key("answered"), soon).await.expect("wait"), WaitOutcome::TimedOut);
    h.store.complete(&key("answered"), "gw-a", &result("final"), super::MAX_RESULT).await.expect("final answer");
    let again = h.store.complete(&key("answered"), "gw-a", &result("other"), super::MAX_RESULT).await;
    assert!(matches!(again, Err(LedgerError::WrongState { .. })), "settled once: {again:?}");
    assert_eq!(stored(&h.store, "answered").await.result, Some(result("final")));
    h.store.mark_unknown(&key("unanswered"), "gw-a", "the agent did not answer").await.expect("expired round");
    assert_eq!(stored(&h.store, "unanswered").await.state, ClaimState::Unknown);
    assert_eq!(h.store.orphan("gw-a").await.expect("restart"), 1);
    assert_eq!(stored(&h.store, "interrupted").await.state, ClaimState::Unknown, "never run again");
}

pub(super) async fn purge_removes_old_settled_claims(h: &Harness) {
    for name in ["done", "lost", "running"] {
        claimed(&h.store, name, "gw-a").await;
    }
    h.store.complete(&key("done"), "gw-a", &result("r"), super::MAX_RESULT).await.expect("complete");
    h.store.mark_unknown(&key("lost"), "gw-a", "timeout").await.expect("mark unknown");
    let now = SystemTime::now();
    assert_eq!(h.store.purge(now - Duration::from_secs(3600)).await.expect("purge"), 0, "too recent");
    assert_eq!(h.store.purge(now + Duration::from_secs(1)).await.expect("purge"), 2);
    assert_eq!(h.store.get(&key("done")).await.expect("get"), None);
    assert_eq!(h.store.get(&key("lost")).await.expect("get"), None);
    assert_eq!(stored(&h.store, "running").await.state, ClaimState::InFlight, "in-flight claims are never purged");
}

/// A purge larger than a slice takes several statements and still removes every old claim, and only those.
pub(super) async fn purge_goes_on_slice_after_slice_until_nothing_old_is_left(h: &Harness) {
    let count = 2 * crate::ledger::sql::PURGE_SLICE + 7;
    for n in 0..count {
        claimed(&h.store, &format!("old-{n}"), "gw-a").await;
    }
    assert_eq!(h.store.orphan("gw-a").await.expect("settle them all as unknown"), count);
    claimed(&h.store, "running", "gw-b").await;
    assert_eq!(h.store.purge(SystemTime::now() + Duration::from_secs(1)).await.expect("purge"), count);
    assert_eq!(h.store.get(&key("old-0")).await.expect("get"), None);
    assert_eq!(stored(&h.store, "running").await.state, ClaimState::InFlight);
}

pub(super) async fn list_filters(h: &Harness) {
    let start = SystemTime::now() - Duration::from_millis(5);
    let mut other_principal = claim_of("bob-1", "gw-a");
    other_principal.principal = "bob".to_owned();
    other_principal.key = ClaimKey::idempotency("bob", "1");
    h.store.claim(other_principal).await.expect("claim");
    for name in ["first", "second", "third"] {
        // Distinct creation times make "newest first" observable.
        tokio::time::sleep(Duration::from_millis(3)).await;
        claimed(&h.store, name, "gw-a").await;
    }
    let mut fetch = claim_of("fetch", "gw-a");
    fetch.tool = "fetch".to_owned();
    fetch.backend = "web".to_owned();
    h.store.claim(fetch).await.expect("claim");
    h.store.complete(&key("second"), "gw-a", &result("r"), super::MAX_RESULT).await.expect("complete");

    let names =
        |records: Vec<ClaimRecord>| records.into_iter().map(|record| record.key.to_string()).collect::<Vec<_>>();
    let list = |filter: ListFilter| async move { h.store.list(&filter).await.expect("list") };
    assert_eq!(list(ListFilter::default()).await.len(), 5);
    let alice = list(ListFilter { principal: Some("alice".into()), tool: Some("search".into()), ..Default::default() });
    assert_eq!(names(alice.await), [key("third"), key("second"), key("first")].map(|key| key.to_string()));
    let completed = list(ListFilter { state: Some(ClaimState::Completed), ..Default::default() }).await;
    assert_eq!(names(completed), [key("second").to_string()]);
    let fetches = list(ListFilter { tool: Some("fetch".into()), ..Default::default() }).await;
    assert_eq!(names(fetches), [key("fetch").to_string()]);
    let web = list(ListFilter { backend: Some("web".into()), ..Default::default() }).await;
    assert_eq!(names(web), [key("fetch").to_string()]);
    let docs = list(ListFilter { backend: Some("docs".into()), ..Default::default() }).await;
    assert_eq!(docs.len(), 4, "every claim but the other backend's");
    assert!(
        list(ListFilter { backend: Some("docs".into()), tool: Some("fetch".into()), ..Default::default() })
            .await
            .is_empty()
    );
    assert_eq!(list(ListFilter { principal: Some("bob".into()), ..Default::default() }).await.len(), 1);
    assert_eq!(list(ListFilter { since: Some(start), ..Default::default() }).await.len(), 5);
    let future = SystemTime::now() + Duration::from_secs(60);
    assert!(list(ListFilter { since: Some(future), ..Default::default() }).await.is_empty());
    assert_eq!(list(ListFilter { limit: 2, ..Default::default() }).await.len(), 2);
}

fn by_ops(resolution: Resolution, note: Option<&str>) -> Resolve {
    Resolve { resolution, by: "ops".into(), note: note.map(str::to_owned) }
}

pub(super) async fn resolve_settles_unknown_claims(h: &Harness) {
    let missing = h.store.resolve(&key("missing"), &by_ops(Resolution::Completed, None)).await;
    assert!(matches!(missing, Err(LedgerError::NotFound { .. })), "{missing:?}");
    claimed(&h.store, "ran", "gw-a").await;
    let in_flight = h.store.resolve(&key("ran"), &by_ops(Resolution::Failed, None)).await;
    assert!(matches!(in_flight, Err(LedgerError::WrongState { state: ClaimState::InFlight, .. })), "{in_flight:?}");

    h.store.mark_unknown(&key("ran"), "gw-a", "timeout").await.expect("mark unknown");
    let long = by_ops(Resolution::Completed, Some(&"x".repeat(crate::ledger::MAX_NOTE + 1)));
    let refused = h.store.resolve(&key("ran"), &long).await;
    assert!(matches!(refused, Err(LedgerError::InvalidResolution { .. })), "{refused:?}");
    h.store.resolve(&key("ran"), &by_ops(Resolution::Completed, Some("it ran"))).await.expect("resolve completed");
    let record = existing(&h.store, "ran", "gw-b").await;
    assert_eq!((record.state, record.owner.as_str(), &record.result), (ClaimState::Completed, OPERATOR, &None));
    assert!(record.error.as_deref().is_some_and(|note| note.contains("operator")), "{record:?}");
    let late = h.store.complete(&key("ran"), "gw-a", &result("r"), super::MAX_RESULT).await;
    assert!(matches!(late, Err(LedgerError::NotOwner { .. })), "the operator's settlement stands: {late:?}");
    let again = h.store.resolve(&key("ran"), &by_ops(Resolution::Failed, None)).await;
    assert!(matches!(again, Err(LedgerError::WrongState { state: ClaimState::Completed, .. })), "{again:?}");
    let history = h.store.resolutions(&key("ran")).await.expect("history");
    assert_eq!(history.len(), 1, "refused resolutions leave no history: {history:?}");
    let row = &history[0];
    assert_eq!((row.resolution, row.by.as_str(), row.note.as_deref()), (Resolution::Completed, "ops", Some("it ran")));
    assert_eq!(
        (row.principal.as_str(), row.backend.as_str(), row.error.as_deref()),
        ("alice", "docs", Some("timeout"))
    );
    assert_eq!((row.started, row.args_digest.as_str()), (record.created_at, record.args_digest.as_str()));
    assert!(row.at >= row.started && row.at <= SystemTime::now(), "{row:?}");

    claimed(&h.store, "never-ran", "gw-a").await;
    h.store.mark_unknown(&key("never-ran"), "gw-a", "timeout").await.expect("mark unknown");
    h.store.resolve(&key("never-ran"), &by_ops(Resolution::Failed, None)).await.expect("resolve failed");
    assert_eq!(h.store.get(&key("never-ran")).await.expect("get"), None, "a retry runs the call again");
    claimed(&h.store, "never-ran", "gw-b").await;
    let history = h.store.resolutions(&key("never-ran")).await.expect("history");
    assert_eq!(history.len(), 1, "the failed call's record is kept: {history:?}");
    assert_eq!((history[0].resolution.state(), history[0].note.as_deref()), ("resolved_failed", None));
}

pub(super) async fn wait_settled_wakes_and_times_out(h: &Harness) {
    claimed(&h.store, "k", "gw-a").await;
    let waiter = {
        let store = h.store.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = store.wait_settled(&key("k"), started + Duration::from_secs(20)).await;
            (outcome, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.store.complete(&key("k"), "gw-a", &result("r"), super::MAX_RESULT).await.expect("complete");
    let (outcome, waited) = waiter.await.expect("waiter");
    let Ok(WaitOutcome::Settled(record)) = outcome else { panic!("not settled: {outcome:?}") };
    assert_eq!(record.state, ClaimState::Completed);
    assert!(waited < Duration::from_secs(5), "woken late: {waited:?}");
    // Already settled: no waiting at all.
    let immediate = h.store.wait_settled(&key("k"), Instant::now()).await.expect("wait");
    assert!(matches!(immediate, WaitOutcome::Settled(_)));

    claimed(&h.store, "slow", "gw-a").await;
    let started = Instant::now();
    let outcome = h.store.wait_settled(&key("slow"), started + Duration::from_millis(150)).await.expect("wait");
    assert_eq!(outcome, WaitOutcome::TimedOut);
    assert!(started.elapsed() >= Duration::from_millis(140));

    let store = h.store.clone();
    let waiter =
        tokio::spawn(async move { store.wait_settled(&key("slow"), Instant::now() + Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.store.release(&key("slow"), "gw-a").await.expect("release");
    assert_eq!(waiter.await.expect("waiter").expect("wait"), WaitOutcome::Released);
    assert_eq!(h.store.wait_settled(&key("never"), Instant::now()).await.expect("wait"), WaitOutcome::Released);
}

pub(super) async fn many_waiters_on_one_key(h: &Harness) {
    claimed(&h.store, "popular", "gw-a").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let store = h.store.clone();
            tokio::spawn(async move { store.wait_settled(&key("popular"), deadline).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    h.store.complete(&key("popular"), "gw-a", &result("r"), super::MAX_RESULT).await.expect("complete");
    for waiter in waiters {
        let outcome = waiter.await.expect("waiter").expect("wait");
        assert!(matches!(outcome, WaitOutcome::Settled(record) if record.state == ClaimState::Completed));
    }
    assert!(started.elapsed() < Duration::from_secs(10), "1000 waiters took {:?}", started.elapsed());
}

pub(super) async fn second_instance_shares_claims_and_wakeups(h: &Harness) {
    let second = h.second().await;
    let record = claimed(&h.store, "shared", "gw-a").await;
    let ClaimOutcome::Existing(seen) = second.claim(claim_of("shared", "gw-b")).await.expect("claim") else {
        panic!("the second instance claimed a key the first holds");
    };
    assert_eq!(seen, record);
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (second.wait_settled(&key("shared"), started + Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.store.complete(&key("shared"), "gw-a", &result("r"), super::MAX_RESULT).await.expect("complete");
    let (outcome, waited) = waiter.await.expect("waiter");
    assert!(matches!(outcome, Ok(WaitOutcome::Settled(_))), "{outcome:?}");
    assert!(waited < Duration::from_secs(3), "the other instance was woken late: {waited:?}");
    // And the other way round: a claim made through the second instance is seen by the first.
    let ClaimOutcome::Claimed(_) = second.claim(claim_of("from-second", "gw-b")).await.expect("claim") else {
        panic!("a fresh key was already claimed");
    };
    assert_eq!(existing(&h.store, "from-second", "gw-a").await.owner, "gw-b");
}

pub(super) async fn ping_answers(h: &Harness) {
    h.store.ping().await.expect("ping");
    assert!(["memory", "sqlite", "postgres"].contains(&h.store.kind()));
}

fn revoked(session: &str, expires_at: u64) -> Revocation {
    Revocation { session: session.to_owned(), expires_at }
}

/// The unexpired revocations at `now`, in a stable order.
async fn unexpired(store: &LedgerStore, now: u64) -> Vec<Revocation> {
    let mut found = store.unexpired_revocations(now).await.expect("load revocations");
    found.sort_by(|a, b| a.session.cmp(&b.session));
    found
}

pub(super) async fn revocations_last_until_expiry_then_are_purged(h: &Harness) {
    let store = &h.store;
    store.record_revocation(&revoked("a", 100)).await.expect("record a");
    store.record_revocation(&revoked("b", 200)).await.expect("record b");
    // Recording again never shortens an entry.
    store.record_revocation(&revoked("a", 50)).await.expect("record a again");
    assert_eq!(unexpired(store, 100).await, [revoked("a", 100), revoked("b", 200)], "in force up to its expiry");
    assert_eq!(unexpired(store, 101).await, [revoked("b", 200)], "expired entries are not loaded");
    store.record_revocation(&revoked("b", 300)).await.expect("extend b");
    assert_eq!(store.purge_revocations(101).await.expect("purge"), 1);
    assert_eq!(store.purge_revocations(101).await.expect("purge again"), 0);
    assert_eq!(unexpired(store, 0).await, [revoked("b", 300)], "only the expired entry was purged");
    let far = revoked("c", u64::MAX);
    store.record_revocation(&far).await.expect("record a far expiry");
    assert_eq!(unexpired(store, u64::MAX).await.len(), 1, "an expiry beyond BIGINT never passes");
}

pub(super) async fn malformed_revocations_are_refused(h: &Harness) {
    for session in ["", "has blank", "line\nbreak", &"x".repeat(129)] {
        let refused = h.store.record_revocation(&revoked(session, 100)).await;
        assert!(matches!(refused, Err(LedgerError::InvalidSession { .. })), "{session:?}: {refused:?}");
    }
    assert!(unexpired(&h.store, 0).await.is_empty(), "nothing was written");
}

pub(super) async fn revocations_are_seen_by_a_second_instance(h: &Harness) {
    h.store.record_revocation(&revoked("deleted", 500)).await.expect("record");
    // SQLite: the same file reopened, as after a restart; PostgreSQL: another replica.
    let second = h.second().await;
    assert_eq!(unexpired(&second, 0).await, [revoked("deleted", 500)]);
    let announced = h.store.revocation_feed().is_some();
    assert_eq!(announced, h.store.kind() == "postgres", "only a store others write announces revocations");
}

/// Polls `key` until `done` holds for its claim (or its absence), for changes made in the background.
async fn eventually(store: &LedgerStore, name: &str, done: impl Fn(Option<&ClaimRecord>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let current = store.get(&key(name)).await.expect("get");
        if done(current.as_ref()) {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never got there: {current:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(super) async fn abandoned_claims_are_released(h: &Harness) {
    // A zero timeout polls the claim once, then drops it: the caller is gone before it hears the outcome.
    let attempt = tokio::time::timeout(Duration::ZERO, h.store.claim(claim_of("dropped", "gw-a"))).await;
    if let Ok(outcome) = attempt {
        // Finished within its first poll (the memory store): the caller did hear it, and holds the claim.
        assert!(matches!(outcome, Ok(ClaimOutcome::Claimed(_))), "{outcome:?}");
        return;
    }
    // The caller never learned it held the claim, so it cannot have sent the call: the claim is released, and
    // another call gets the key. (The dropped claim may still be queued: then it finds the new claim instead.)
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match h.store.claim(claim_of("dropped", "gw-b")).await.expect("claim") {
            ClaimOutcome::Claimed(record) => return assert_eq!(record.owner, "gw-b"),
            ClaimOutcome::Existing(record) => {
                assert_eq!((record.owner.as_str(), record.state), ("gw-a", ClaimState::InFlight), "{record:?}");
                let waited = h.store.wait_settled(&key("dropped"), deadline).await.expect("wait");
                assert_eq!(waited, WaitOutcome::Released, "the abandoned claim is released, never left in flight");
            }
        }
    }
}

pub(super) async fn settles_finish_when_their_caller_leaves(h: &Harness) {
    claimed(&h.store, "k", "gw-a").await;
    let answer = result("r");
    let _ = tokio::time::timeout(Duration::ZERO, h.store.complete(&key("k"), "gw-a", &answer, super::MAX_RESULT)).await;
    eventually(&h.store, "k", |record| record.is_some_and(|record| record.state == ClaimState::Completed)).await;
}

fn token_row(principal: &str, backend: &str, sealed: &[u8]) -> BackendTokenRow {
    BackendTokenRow {
        principal: principal.to_owned(),
        backend: backend.to_owned(),
        sealed: sealed.to_vec(),
        scopes: "a b".to_owned(),
        expires_at: Some(1_900_000_000),
        updated_at: 1_800_000_000,
    }
}

fn token_filter(principal: Option<&str>, backend: Option<&str>) -> TokenFilter {
    TokenFilter { principal: principal.map(str::to_owned), backend: backend.map(str::to_owned) }
}

pub(super) async fn backend_tokens_are_put_replaced_listed_and_deleted(h: &Harness) {
    let store = &h.store;
    store.put_backend_token(&token_row("alice", "docs", b"\x00sealed-1")).await.expect("put");
    store.put_backend_token(&token_row("bob", "docs", b"sealed-2")).await.expect("put");
    store.put_backend_token(&token_row("", "github", b"sealed-3")).await.expect("the gateway's own row");
    let mut replaced = token_row("alice", "docs", b"sealed-4");
    replaced.expires_at = None;
    store.put_backend_token(&replaced).await.expect("replace");
    assert_eq!(store.backend_token("alice", "docs").await.expect("get"), Some(replaced.clone()));
    assert_eq!(store.backend_token("carol", "docs").await.expect("get"), None);
    let all = store.backend_tokens(&TokenFilter::default()).await.expect("list");
    let keys: Vec<(&str, &str)> = all.iter().map(|row| (row.backend.as_str(), row.principal.as_str())).collect();
    assert_eq!(keys, [("docs", "alice"), ("docs", "bob"), ("github", "")], "by backend, then principal");
    assert_eq!(store.backend_tokens(&token_filter(Some("bob"), None)).await.expect("list").len(), 1);
    assert_eq!(store.delete_backend_tokens(&token_filter(Some("alice"), Some("github"))).await.expect("delete"), 0);
    assert_eq!(store.delete_backend_tokens(&token_filter(None, Some("docs"))).await.expect("delete"), 2);
    assert_eq!(store.backend_tokens(&TokenFilter::default()).await.expect("list").len(), 1);
    let refused = store.put_backend_token(&token_row("alice", "", b"x")).await;
    assert!(matches!(refused, Err(LedgerError::InvalidBackendToken { .. })), "{refused:?}");
}

pub(super) async fn backend_tokens_are_seen_by_a_second_instance(h: &Harness) {
    h.store.put_backend_token(&token_row("alice", "docs", b"sealed")).await.expect("put");
    let second = h.second().await;
    assert_eq!(second.backend_token("alice", "docs").await.expect("get"), Some(token_row("alice", "docs", b"sealed")));
}

pub(super) async fn limit_counters_are_replaced_only_when_unchanged(h: &Harness) {
    let store = &h.store;
    let first = CounterRow { tat: 5, window: 1, used: 2 };
    assert_eq!(store.limit_counter("rate#1", "alice").await.expect("get"), None);
    assert!(store.swap_limit_counter("rate#1", "alice", None, first).await.expect("insert"));
    assert!(!store.swap_limit_counter("rate#1", "alice", None, first).await.expect("insert"), "the row exists");
    let second = CounterRow { used: 3, ..first };
    assert!(store.swap_limit_counter("rate#1", "alice", Some(first), second).await.expect("swap"));
    assert!(!store.swap_limit_counter("rate#1", "alice", Some(first), first).await.expect("swap"), "a stale read");
    assert_eq!(store.limit_counter("rate#1", "alice").await.expect("get"), Some(second));
    assert!(store.swap_limit_counter("rate#1", "anonymous@::1", None, first).await.expect("insert"));
    let second_instance = h.second().await;
    let listed = second_instance.limit_counters().await.expect("list");
    let keys: Vec<(&str, &str, CounterRow)> =
        listed.iter().map(|counter| (counter.limit.as_str(), counter.principal.as_str(), counter.row)).collect();
    assert_eq!(keys, [("rate#1", "alice", second), ("rate#1", "anonymous@::1", first)], "shared, in order");
}
