//! A caller alone runs its own job: when it may, what it runs with it, and when it hands the job to the writer
//! thread instead.

use std::sync::mpsc as std_mpsc;
use std::thread::{self, ThreadId};
use std::time::{Duration, SystemTime};

use super::*;
use crate::ledger::error::LedgerError;
use crate::ledger::sqlite::ops;
use crate::ledger::sqlite::worker::Worker;
use crate::ledger::tests::{claim_of, scratch_dir};
use crate::ledger::types::{ClaimOutcome, new_claim_id};

/// Long enough that no parked job is nudged to the writer during a test.
const NO_NUDGE: Duration = Duration::from_secs(600);

/// Claims `name` through the worker's awaited path; returns the thread the claim ran on.
async fn claim_on(worker: &Worker, name: &str) -> ThreadId {
    let (new, id, now) = (claim_of(name, "gw-a"), new_claim_id().expect("an id"), SystemTime::now());
    worker
        .run_one(move |db| {
            let made = ops::claim(db, &new, id, now)?;
            assert!(matches!(made, ClaimOutcome::Claimed(_)), "{made:?}");
            Ok(thread::current().id())
        })
        .await
        .expect("claimed")
}

/// Whether the caller runs a claim itself again once nothing else holds the connection: claims until one runs on
/// its thread, for at most a second. A claim may still go to the writer first, since after a batch of its own the
/// writer can hold the connection a moment longer to rewind the log ([`checkpoint`](super::super::checkpoint)).
async fn alone_again(worker: &Worker, name: &str) -> bool {
    for attempt in 0..100 {
        if claim_on(worker, &format!("{name}-{attempt}")).await == thread::current().id() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// A worker on a fresh file in a scratch directory (returned, with the file's path) that has served
/// [`ALONE_STREAK`] claims one after the other, each on its own thread: the next lone caller runs its own job.
async fn worker_after_a_streak(name: &str) -> (std::path::PathBuf, std::path::PathBuf, Worker) {
    let dir = scratch_dir(name);
    let path = dir.join("ledger.db");
    let worker = Worker::start(path.clone(), NO_NUDGE).await.expect("open");
    for n in 0..ALONE_STREAK {
        let ran_on = claim_on(&worker, &format!("warm-{n}")).await;
        assert_ne!(ran_on, thread::current().id(), "arrival {n} is not alone long enough");
    }
    (dir, path, worker)
}

fn stored(path: &std::path::Path, key_suffix: &str) -> bool {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    let found: i64 = conn
        .query_row("SELECT count(*) FROM switchyard_claims WHERE key LIKE '%' || ?1", [key_suffix], |row| row.get(0))
        .expect("count");
    found == 1
}

#[test]
fn a_caller_is_alone_only_after_a_streak_of_lone_arrivals_and_meeting_another_job_ends_it() {
    let solitude = Solitude::default();
    for n in 0..ALONE_STREAK {
        assert!(!solitude.arrive().alone(), "arrival {n} comes before the streak is long enough");
    }
    assert!(solitude.arrive().alone());
    {
        let first = solitude.arrive();
        assert!(first.alone(), "nobody else was waiting as it arrived");
        assert!(!solitude.arrive().alone(), "it meets the job still awaited");
    }
    for n in 0..ALONE_STREAK {
        assert!(!solitude.arrive().alone(), "the meeting ended the streak; arrival {n} starts a new one");
    }
    assert!(solitude.arrive().alone());
}

#[tokio::test]
async fn a_caller_alone_commits_its_job_with_the_parked_completions_on_its_own_thread() {
    let (dir, path, worker) = worker_after_a_streak("alone-runs").await;
    let caller = thread::current().id();

    let (answered, parked_answer) = std_mpsc::channel();
    let (new, id, now) = (claim_of("parked", "gw-a"), new_claim_id().expect("an id"), SystemTime::now());
    worker.park(move |db| ops::claim(db, &new, id, now).map(drop), move |outcome| drop(answered.send(outcome)));
    assert!(!stored(&path, ":parked"), "a parked job waits for the next batch");

    assert_eq!(claim_on(&worker, "mine").await, caller, "alone, the caller runs its claim itself");
    assert!(stored(&path, ":mine") && stored(&path, ":parked"), "both committed before the caller's answer");
    parked_answer.try_recv().expect("the parked job was answered").expect("and committed");
    assert_eq!(claim_on(&worker, "again").await, caller);
    let stats = worker.stats();
    assert_eq!(stats.by_callers, 2, "{stats}");
    assert_eq!(stats.batches, u64::from(ALONE_STREAK) + 2, "{stats}");
    drop(worker);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_caller_alone_hands_its_job_to_the_writer_thread_while_that_runs_a_batch() {
    let (dir, _, worker) = worker_after_a_streak("alone-busy-writer").await;
    let caller = thread::current().id();

    // A job nobody awaits through the worker keeps the writer thread (and the connection) until released.
    let (release, gate) = std_mpsc::channel::<()>();
    let (held, holding) = std_mpsc::channel::<()>();
    worker
        .queue()
        .submit(
            move |_db| {
                let _ = held.send(());
                gate.recv().map_err(|_| LedgerError::unavailable("gate dropped"))
            },
            drop,
        )
        .expect("queued");
    holding.recv().expect("the writer runs the gate job");
    let releaser = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        release.send(())
    });
    assert_ne!(claim_on(&worker, "queued").await, caller, "the connection was taken: the writer ran it");
    releaser.join().expect("joined").expect("released");
    assert!(alone_again(&worker, "mine").await, "alone again with the connection free");
    drop(worker);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_caller_alone_never_waits_for_another_process_write_lock() {
    let (dir, path, worker) = worker_after_a_streak("alone-locked").await;
    let caller = thread::current().id();

    // Another process's transaction holds the file's write lock for a while.
    let other = rusqlite::Connection::open(&path).expect("open the file");
    other.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    let holder = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        other.execute_batch("COMMIT").expect("commit");
    });
    let started = std::time::Instant::now();
    let ran_on = claim_on(&worker, "after-the-lock").await;
    assert_ne!(ran_on, caller, "the caller gave its job to the writer, which waits out the lock");
    assert!(started.elapsed() >= Duration::from_millis(150), "the claim committed only once the lock was free");
    holder.join().expect("joined");
    assert!(stored(&path, ":after-the-lock"));
    assert!(alone_again(&worker, "mine").await, "the lock free, the caller is alone again");
    drop(worker);
    let _ = std::fs::remove_dir_all(dir);
}
