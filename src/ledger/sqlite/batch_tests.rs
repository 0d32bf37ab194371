//! The worker's batches, driven through its queue directly: a first job holds the worker until everything else
//! is queued, so the rest is taken as one batch.

use std::sync::mpsc as std_mpsc;
use std::time::SystemTime;

use tokio::sync::oneshot;

use super::super::ops;
use super::super::worker::{Db, Queue, Worker};
use crate::ledger::error::LedgerError;
use crate::ledger::resolutions::Resolve;
use crate::ledger::rules::Settle;
use crate::ledger::tests::{claim_of, scratch_dir, winners_and_losers};
use crate::ledger::types::{ClaimOutcome, Resolution, new_claim_id};

/// Queues `job`; the receiver gets its answer once its batch committed.
fn submit<T, F>(queue: &Queue, job: F) -> oneshot::Receiver<Result<T, LedgerError>>
where
    T: Send + 'static,
    F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    queue.submit(job, move |outcome| drop(reply.send(outcome))).expect("the worker runs");
    answer
}

fn claim(queue: &Queue, name: &str, owner: &str) -> oneshot::Receiver<Result<ClaimOutcome, LedgerError>> {
    let (new, id, now) = (claim_of(name, owner), new_claim_id().expect("an id"), SystemTime::now());
    submit(queue, move |db| ops::claim(db, &new, id, now))
}

/// The keys stored in the file, read by a connection of its own (what another process would see).
fn stored_keys(path: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    let mut statement = conn.prepare("SELECT key FROM switchyard_claims ORDER BY key").expect("prepare");
    statement.query_map([], |row| row.get(0)).expect("query").collect::<Result<_, _>>().expect("rows")
}

#[tokio::test]
async fn a_batch_commits_every_job_and_undoes_only_the_one_that_failed() {
    let dir = scratch_dir("batch");
    let path = dir.join("ledger.db");
    let worker = Worker::start(path.clone(), crate::ledger::background::LINGER).await.expect("open");
    let queue = worker.queue();
    let (open_gate, gate) = std_mpsc::channel::<()>();
    let held = submit(queue, move |_db| gate.recv().map_err(|_| LedgerError::unavailable("gate dropped")));

    let distinct: Vec<_> = (0..100).map(|n| claim(queue, &format!("k{n}"), "gw-a")).collect();
    // Makes a change, then fails: the change must not be committed with the others.
    let failing = {
        let (new, id, now) = (claim_of("bad", "gw-a"), new_claim_id().expect("an id"), SystemTime::now());
        submit(queue, move |db| {
            let made = ops::claim(db, &new, id, now)?;
            assert!(matches!(made, ClaimOutcome::Claimed(_)), "{made:?}");
            Err::<(), _>(LedgerError::unavailable("failed after its insert"))
        })
    };
    let duplicates = [claim(queue, "dup", "gw-a"), claim(queue, "dup", "gw-b")];
    open_gate.send(()).expect("the worker waits at the gate");
    held.await.expect("answered").expect("the gate job");

    for answer in distinct {
        assert!(matches!(answer.await.expect("answered"), Ok(ClaimOutcome::Claimed(_))));
    }
    let failed = failing.await.expect("answered");
    assert!(
        matches!(&failed, Err(LedgerError::Unavailable { cause }) if cause.contains("after its insert")),
        "{failed:?}"
    );
    let mut outcomes = Vec::new();
    for answer in duplicates {
        outcomes.push(answer.await.expect("answered").expect("claim"));
    }
    let (winners, losers) = winners_and_losers(outcomes);
    assert_eq!((winners.len(), losers.len()), (1, 1), "one claim of a key wins, even within one batch");
    assert_eq!(winners[0].id, losers[0].id, "the loser is shown the winner's claim");

    let keys = stored_keys(&path);
    assert_eq!(keys.len(), 101, "every claim but the failed job's is durable: {keys:?}");
    assert!(!keys.iter().any(|key| key.ends_with(":bad")), "the failed job's insert was rolled back: {keys:?}");
    drop(worker);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn an_operators_resolution_commits_inside_a_batch_of_other_jobs() {
    let dir = scratch_dir("batch-resolve");
    let worker = Worker::start(dir.join("ledger.db"), crate::ledger::background::LINGER).await.expect("open");
    let queue = worker.queue();
    let lost = claim_of("lost", "gw-a");
    let key = lost.key.clone();
    claim(queue, "lost", "gw-a").await.expect("answered").expect("claimed");
    let marked =
        submit(queue, move |db| ops::settle(db, &key, "gw-a", Settle::MarkUnknown("dropped"), SystemTime::now()));
    marked.await.expect("answered").expect("marked unknown");

    let (open_gate, gate) = std_mpsc::channel::<()>();
    let held = submit(queue, move |_db| gate.recv().map_err(|_| LedgerError::unavailable("gate dropped")));
    let resolved = submit(queue, move |db| {
        let resolve = Resolve { resolution: Resolution::Failed, by: "ann".into(), note: None };
        ops::resolve(db, &lost.key, &resolve, SystemTime::now())
    });
    let other = claim(queue, "other", "gw-a");
    open_gate.send(()).expect("the worker waits at the gate");
    held.await.expect("answered").expect("the gate job");
    resolved.await.expect("answered").expect("resolved within the batch's transaction");
    assert!(matches!(other.await.expect("answered"), Ok(ClaimOutcome::Claimed(_))));
    assert_eq!(
        stored_keys(&dir.join("ledger.db")),
        [claim_of("other", "gw-a").key.as_str()],
        "the failed call's claim is gone"
    );
    drop(worker);
    let _ = std::fs::remove_dir_all(dir);
}
