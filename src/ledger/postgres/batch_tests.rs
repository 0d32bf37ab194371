//! Batches run directly on a writer's connection of a fresh test store (nothing else is queued on it), so the
//! jobs given are exactly one batch.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::super::PostgresStore;
use super::{Answer, Job, run};
use crate::ledger::LedgerStore;
use crate::ledger::background::QueuedSettle;
use crate::ledger::error::LedgerError;
use crate::ledger::stats::WriterCounters;
use crate::ledger::tests::{Harness, claim_of, winners_and_losers};
use crate::ledger::types::{ClaimKey, ClaimOutcome, ClaimState, NewClaim, Settlement, WaitOutcome, new_claim_id};
use crate::raw_json::RawJson;

type Claimed = oneshot::Receiver<Result<ClaimOutcome, LedgerError>>;
type Settled = oneshot::Receiver<Result<(), LedgerError>>;

fn postgres(harness: &Harness) -> &PostgresStore {
    match &harness.store {
        LedgerStore::Postgres(store) => store,
        other => panic!("not a PostgreSQL store: {}", other.kind()),
    }
}

fn claim_job(new: NewClaim) -> (Job, Claimed) {
    let (reply, answer) = oneshot::channel();
    let reply = Answer::new(Box::new(move |outcome| drop(reply.send(outcome))) as super::ClaimReply);
    let id = new_claim_id().expect("an id");
    (Job::Claim { new, id, now: SystemTime::now(), reply }, answer)
}

fn settle_job(name: &str, owner: &str, settlement: &Settlement) -> (Job, Settled) {
    let (reply, answer) = oneshot::channel();
    let reply = Answer::new(Box::new(move |outcome| drop(reply.send(outcome))) as super::SettleReply);
    let queued = QueuedSettle::new(&ClaimKey::idempotency("alice", name), owner, settlement, 1 << 20);
    (Job::Settle { queued: Arc::new(queued), now: SystemTime::now(), reply }, answer)
}

/// Runs `jobs` as one batch on the store's first writer connection.
async fn run_batch(store: &PostgresStore, jobs: Vec<Job>) {
    let (conn, slot) = (&store.inner.conn, store.inner.conn.writer_slots().start);
    conn.drive(slot, run(conn, slot, jobs, &WriterCounters::default(), |_| {})).await;
}

/// Claims each of `names` for `gw-a`, each alone.
async fn claim_each(harness: &Harness, names: &[&str]) {
    for name in names {
        let outcome = harness.store.claim(claim_of(name, "gw-a")).await.expect("claim");
        assert!(matches!(outcome, ClaimOutcome::Claimed(_)));
    }
}

/// A claim of `name` PostgreSQL refuses for its own values: a NUL character in text (SQLSTATE 22021).
fn refused_claim(name: &str) -> NewClaim {
    NewClaim { principal: "al\0ice".into(), ..claim_of(name, "gw-a") }
}

fn assert_refused(outcome: &Result<ClaimOutcome, LedgerError>) {
    assert!(matches!(outcome, Err(LedgerError::Unavailable { cause }) if cause.contains("22021")), "{outcome:?}");
}

/// A tool call's settlement with an empty result.
fn completed() -> Settlement {
    Settlement::Completed(RawJson::of(&json!({"result": {"content": []}})))
}

/// The state of the claim `name`, if there is one.
async fn state_of(harness: &Harness, name: &str) -> Option<ClaimState> {
    harness.store.get(&ClaimKey::idempotency("alice", name)).await.expect("get").map(|record| record.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_commits_every_claim_and_one_claim_per_key_wins() {
    let Some(harness) = Harness::postgres().await else { return };
    let store = postgres(&harness);
    let (mut jobs, mut distinct) = (Vec::new(), Vec::new());
    for n in 0..100 {
        let (job, answer) = claim_job(claim_of(&format!("k{n}"), "gw-a"));
        jobs.push(job);
        distinct.push(answer);
    }
    let mut duplicates = Vec::new();
    for owner in ["gw-a", "gw-b", "gw-c"] {
        let (job, answer) = claim_job(claim_of("dup", owner));
        jobs.push(job);
        duplicates.push(answer);
    }
    let counters = WriterCounters::default();
    let (conn, slot) = (&store.inner.conn, store.inner.conn.writer_slots().start);
    conn.drive(slot, run(conn, slot, jobs, &counters, |_| {})).await;

    // Only the duplicates' rows are read, after the commit: the batch itself reads nothing back.
    assert_eq!(counters.snapshot().after_commit, 2);
    for answer in distinct {
        assert!(matches!(answer.await.expect("answered"), Ok(ClaimOutcome::Claimed(_))));
    }
    let outcomes = futures_of(duplicates).await.into_iter().map(|outcome| outcome.expect("claim"));
    let (winners, losers) = winners_and_losers(outcomes);
    assert_eq!((winners.len(), losers.len()), (1, 2), "one claim of a key wins, even within one batch");
    assert!(losers.iter().all(|record| record.id == winners[0].id), "every duplicate is shown the winner's claim");
    // Durable: another instance (other connections) sees every claim.
    let second = harness.second().await;
    for n in [0, 57, 99] {
        let key = ClaimKey::idempotency("alice", &format!("k{n}"));
        assert!(second.get(&key).await.expect("get").is_some(), "k{n} was committed");
    }
    drop(second);
    harness.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_statement_is_reported_to_its_caller_only() {
    let Some(harness) = Harness::postgres().await else { return };
    let store = postgres(&harness);
    claim_each(&harness, &["done", "lost"]).await;
    let (first, first_answer) = claim_job(claim_of("a", "gw-a"));
    // This statement fails on its own values.
    let (bad, bad_answer) = claim_job(refused_claim("b"));
    let (last, last_answer) = claim_job(claim_of("c", "gw-a"));
    let completed = completed();
    let (done, done_answer) = settle_job("done", "gw-a", &completed);
    let (lost, lost_answer) = settle_job("lost", "gw-a", &Settlement::Unknown("timed out".into()));
    // Changes nothing in the batch; the rules say why after the commit.
    let (missing, missing_answer) = settle_job("missing", "gw-a", &completed);
    run_batch(store, vec![first, bad, last, done, lost, missing]).await;

    assert_refused(&bad_answer.await.expect("answered"));
    let missing = missing_answer.await.expect("answered");
    assert!(matches!(missing, Err(LedgerError::NotFound { .. })), "{missing:?}");
    for answer in [first_answer, last_answer] {
        assert!(matches!(answer.await.expect("answered"), Ok(ClaimOutcome::Claimed(_))));
    }
    done_answer.await.expect("answered").expect("completed");
    lost_answer.await.expect("answered").expect("marked unknown");
    assert_eq!(state_of(&harness, "a").await, Some(ClaimState::InFlight));
    assert_eq!(state_of(&harness, "b").await, None, "the refused claim left nothing behind");
    assert_eq!(state_of(&harness, "c").await, Some(ClaimState::InFlight));
    assert_eq!(state_of(&harness, "done").await, Some(ClaimState::Completed));
    assert_eq!(state_of(&harness, "lost").await, Some(ClaimState::Unknown));
    harness.finish().await;
}

/// The writers' connections plan each statement once; the general ones leave the choice to the server (their
/// listings' optional filters fold away only in a plan made for the values at hand).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_plan_their_statements_once_and_general_connections_choose() {
    let Some(harness) = Harness::postgres().await else { return };
    let conn = &postgres(&harness).inner.conn;
    let plan_cache_mode = |session: Arc<super::super::conn::Session>| async move {
        Ok(session.client.query_one("SHOW plan_cache_mode", &[]).await?.get::<_, String>(0))
    };
    let slot = conn.writer_slots().start;
    let writer = conn.drive(slot, conn.run_on(slot, plan_cache_mode)).await.expect("writer");
    assert_eq!(writer, "force_generic_plan");
    let general = conn.run(plan_cache_mode).await.expect("general");
    assert_eq!(general, "auto");
    harness.finish().await;
}

/// A batch of claims and completions only is one statement in autocommit: what each part decides, and what it
/// leaves to the single operations after the commit, reaches each caller; a bad value among them still costs only
/// its own job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_completions_alone_are_decided_by_one_statement() {
    let Some(harness) = Harness::postgres().await else { return };
    let store = postgres(&harness);
    claim_each(&harness, &["done", "again"]).await;
    let completed = completed();
    let one_batch = |bad: bool| {
        let (fresh, fresh_answer) = claim_job(claim_of(if bad { "fresh-2" } else { "fresh-1" }, "gw-a"));
        let name = if bad { "again" } else { "done" };
        // The same key completed and claimed again (a retry) in one batch: the claim conflicts with the row and
        // is read after the commit, which finds it completed.
        let (done, done_answer) = settle_job(name, "gw-a", &completed);
        let (retry, retry_answer) = claim_job(claim_of(name, "gw-b"));
        let (missing, missing_answer) = settle_job("missing", "gw-a", &completed);
        let mut jobs = vec![fresh, done, retry, missing];
        let bad_answer = bad.then(|| {
            // The statement fails as a whole.
            let (job, answer) = claim_job(refused_claim("bad"));
            jobs.push(job);
            answer
        });
        (jobs, [fresh_answer, retry_answer], [done_answer, missing_answer], bad_answer)
    };
    for bad in [false, true] {
        let (jobs, [fresh, retry], [done, missing], refused) = one_batch(bad);
        run_batch(store, jobs).await;
        assert!(matches!(fresh.await.expect("answered"), Ok(ClaimOutcome::Claimed(_))), "bad={bad}");
        done.await.expect("answered").expect("completed");
        let retry = retry.await.expect("answered").expect("claim");
        let ClaimOutcome::Existing(record) = retry else { panic!("a retry is shown the existing claim: {retry:?}") };
        assert_eq!(record.state, ClaimState::Completed, "bad={bad}");
        let missing = missing.await.expect("answered");
        assert!(matches!(missing, Err(LedgerError::NotFound { .. })), "{missing:?}");
        if let Some(refused) = refused {
            assert_refused(&refused.await.expect("answered"));
        }
    }
    assert_eq!(state_of(&harness, "fresh-1").await, Some(ClaimState::InFlight));
    assert_eq!(state_of(&harness, "fresh-2").await, Some(ClaimState::InFlight), "the batch ran again without it");
    assert_eq!(state_of(&harness, "bad").await, None);
    harness.finish().await;
}

/// A batch's settles of claims another instance waits for (marked by its waiters) are announced by the trigger at
/// the batch's commit: that instance is woken at once, for every kind of settle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batchs_settles_wake_waiters_on_other_instances() {
    let Some(harness) = Harness::postgres().await else { return };
    let store = postgres(&harness);
    claim_each(&harness, &["done", "lost"]).await;
    let second = harness.second().await;
    let waiters: Vec<_> = ["done", "lost"]
        .into_iter()
        .map(|name| {
            let second = second.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let key = ClaimKey::idempotency("alice", name);
                (second.wait_settled(&key, started + Duration::from_secs(20)).await, started.elapsed())
            })
        })
        .collect();
    // The second instance's listener connects in the background.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (fresh, fresh_answer) = claim_job(claim_of("fresh", "gw-a"));
    let completed = completed();
    let (done, done_answer) = settle_job("done", "gw-a", &completed);
    let (lost, lost_answer) = settle_job("lost", "gw-a", &Settlement::Unknown("timed out".into()));
    run_batch(store, vec![fresh, done, lost]).await;

    assert!(matches!(fresh_answer.await.expect("answered"), Ok(ClaimOutcome::Claimed(_))));
    done_answer.await.expect("answered").expect("completed");
    lost_answer.await.expect("answered").expect("marked unknown");
    for waiter in waiters {
        let (outcome, waited) = waiter.await.expect("waiter");
        assert!(matches!(outcome, Ok(WaitOutcome::Settled(_))), "{outcome:?}");
        assert!(waited < Duration::from_secs(3), "the other instance was woken late: {waited:?}");
    }
    drop(second);
    harness.finish().await;
}

async fn futures_of<T>(answers: Vec<oneshot::Receiver<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for answer in answers {
        out.push(answer.await.expect("answered"));
    }
    out
}
