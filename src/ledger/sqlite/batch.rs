//! Group commit: the worker runs every job queued when it wakes up in one transaction.
//!
//! Rules:
//! - The worker sleeps on its queue and is woken by the next job: nothing polls or spins, so an idle store costs
//!   no CPU. Whatever queued up while it was busy (at most [`MAX_BATCH`] jobs), after the completions parked
//!   until then (see [`crate::ledger::background`]), is the next batch: a quiet call's completion and the next
//!   call's claim share one wake-up and one transaction. A caller alone runs such a batch itself instead
//!   ([`alone`](super::alone)); the connection's lock makes the two take turns.
//! - Woken for a single job, the worker yields the processor once before taking what queued meanwhile: on two
//!   saturated cores it was otherwise woken for nearly every claim, and half its batches held one job; on a
//!   machine with a core to spare the yield returns at once (docs/ledger.md, *Where a durable call's time goes*).
//! - A lone job runs in autocommit mode, as its own transaction. Jobs that arrived together run in one
//!   `BEGIN IMMEDIATE … COMMIT`: one lock round and one write of each touched page instead of one per job. Both
//!   come from the statement cache, like every statement on this path, rather than being parsed per batch.
//! - Each job of a batch that may change several things runs inside a savepoint of its own: a job that fails is
//!   rolled back to its savepoint, so whatever it changed before failing is undone and the others commit without
//!   it. Claims and settles change at most one row with one statement, and fail only when that statement did not
//!   apply ([`Writes::One`]): they run without one, which spares two statements and the savepoint's copy of
//!   every page they touch.
//! - A job answers only after its transaction committed: it returns a [`Reply`] that is called with the commit's
//!   outcome, and a failed commit turns every answer of the batch into that error, so nobody is told about a
//!   change that did not happen.
//! - If SQLite rolls the whole transaction back on an error (disk full, I/O error), the jobs that ran in it are
//!   answered with an error and the rest of the batch runs one by one.
//! - After a batch of the writer thread is answered, the log is rewound when the checkpoint thread says it is due
//!   ([`checkpoint::rewind`]); a caller alone never does it, its thread being the runtime's.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use rusqlite::ErrorCode;

use super::alone::Solitude;
use super::checkpoint::{self, Checkpointer};
use super::worker::{BUSY_TIMEOUT, Db};
use crate::ledger::background::Parking;
use crate::ledger::error::LedgerError;
use crate::ledger::stats::{Batch, WriterCounters};

/// The most jobs committed together.
const MAX_BATCH: usize = 256;

/// A job's answer, sent once the outcome of its transaction is known.
pub(super) type Reply = Box<dyn FnOnce(Result<(), LedgerError>) + Send>;
/// A job: runs on the connection and says whether it failed and how to answer.
pub(super) struct Job {
    /// When it was queued or parked.
    pub(super) queued: Instant,
    pub(super) writes: Writes,
    pub(super) run: Box<dyn FnOnce(&mut Db) -> Ran + Send>,
}

/// What a job may leave behind when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writes {
    /// Nothing: it changes the store with at most one statement and fails only when no statement of it changed
    /// anything (SQLite undoes a failed statement itself). Claims and settles: it needs no savepoint.
    One,
    /// Possibly part of its work: it runs in a savepoint of its own.
    Several,
}

/// What a job did.
pub(super) struct Ran {
    /// The job failed: whatever it changed must not be committed.
    pub(super) failed: bool,
    pub(super) reply: Reply,
}

/// What the writer thread shares with the callers besides its queue.
pub(super) struct Served {
    /// The connection: the writer thread holds it while it runs a batch, a caller alone while it runs its own
    /// (see [`alone`](super::alone)).
    pub(super) db: Mutex<Db>,
    pub(super) parking: Arc<Parking<Job>>,
    pub(super) counters: Arc<WriterCounters>,
    /// Told after each batch; `None` when its thread could not start (SQLite then checkpoints alone).
    pub(super) checkpointer: Option<Checkpointer>,
    pub(super) solitude: Solitude,
}

/// Who runs a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunBy {
    /// The writer thread, which opens the batch's transaction itself (a lone job runs in autocommit mode).
    Writer,
    /// A caller alone, which already opened the transaction ([`alone::run_here`](super::alone::run_here)).
    Caller,
}

/// Runs jobs until every sender is gone, then what is still parked.
pub(super) fn serve(queue: &mpsc::Receiver<Option<Job>>, served: &Served) {
    let mut queued = Vec::new();
    let take_queued = |queued: &mut Vec<Job>| queued.extend(queue.try_iter().take(MAX_BATCH - 1).flatten());
    while let Ok(first) = queue.recv() {
        queued.extend(first);
        take_queued(&mut queued);
        if queued.len() == 1 {
            // Callers running now may be about to queue theirs.
            std::thread::yield_now();
            take_queued(&mut queued);
        }
        run_after_parked(served.db.lock(), queued.drain(..), served, RunBy::Writer);
    }
    run_after_parked(served.db.lock(), [], served, RunBy::Writer);
}

/// Runs the jobs parked until now, then `jobs`, as one batch on `db` (taken before the parked jobs are, so that
/// whoever holds the connection runs them in the order they came).
pub(super) fn run_after_parked(
    db: MutexGuard<'_, Db>,
    jobs: impl IntoIterator<Item = Job>,
    served: &Served,
    by: RunBy,
) {
    let mut batch = Vec::new();
    served.parking.take_into(&mut batch);
    let parked = batch.len();
    batch.extend(jobs);
    run_counted(db, batch, parked, served, by);
}

/// Runs `batch`, whose first `parked` jobs were parked (nobody waits for them), records it, tells the
/// checkpointer, and answers its jobs once `db` is released, so that a caller answered does not find the
/// connection still taken.
fn run_counted(mut db: MutexGuard<'_, Db>, batch: Vec<Job>, parked: usize, served: &Served, by: RunBy) {
    // A nudge whose jobs an earlier wake-up took finds nothing.
    if batch.is_empty() {
        return;
    }
    let started = Instant::now();
    let waited = batch[parked..].iter().map(|job| started.saturating_duration_since(job.queued)).sum();
    let awaited = batch.len() - parked;
    let mut record = Batch { jobs: batch.len(), awaited, waited, by_caller: by == RunBy::Caller, ..Batch::default() };
    let counters = &served.counters;
    // Recorded before its jobs are answered, so an answered caller sees it.
    let committed = |commit| {
        record.commit = commit;
        record.busy = started.elapsed();
        counters.record(&record);
    };
    let mut answers = Vec::with_capacity(batch.len());
    match by {
        RunBy::Writer => run(&mut db, batch, committed, &mut answers),
        RunBy::Caller => in_transaction(&mut db, batch, committed, &mut answers),
    }
    drop(db);
    if let Some(checkpointer) = &served.checkpointer {
        checkpointer.wrote();
    }
    for (reply, outcome) in answers {
        reply(outcome);
    }
    // After the answers, so that no caller of this batch waits for it; never on a caller's thread.
    if by == RunBy::Writer && served.checkpointer.as_ref().is_some_and(Checkpointer::take_rewind) {
        checkpoint::rewind(&served.db.lock().conn);
    }
}

/// The batch's replies, each with the outcome of its job's transaction, called once the connection is released.
type Answers = Vec<(Reply, Result<(), LedgerError>)>;

/// Runs `batch`; `committed` is told how long the commit took (zero for autocommit jobs).
fn run(db: &mut Db, mut batch: Vec<Job>, committed: impl FnOnce(Duration), answers: &mut Answers) {
    if batch.len() == 1
        && let Some(job) = batch.pop()
    {
        // Its own statements committed it.
        let ran = (job.run)(db);
        committed(Duration::ZERO);
        return answers.push((ran.reply, Ok(())));
    }
    match db.conn.prepare_cached("BEGIN IMMEDIATE").and_then(|mut begin| begin.execute([])) {
        Ok(_) => in_transaction(db, batch, committed, answers),
        Err(error) if error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
            // Another process held the write lock for the whole busy timeout: rather than have every queued
            // job wait that long again, writes fail at once (reads still work), and the next batch tries anew.
            let _ = db.conn.busy_timeout(Duration::ZERO);
            committed(Duration::ZERO);
            one_by_one(db, batch, answers);
            let _ = db.conn.busy_timeout(BUSY_TIMEOUT);
        }
        // Each job meets the problem (a read-only file, say) and reports it itself.
        Err(_) => {
            committed(Duration::ZERO);
            one_by_one(db, batch, answers);
        }
    }
}

fn one_by_one(db: &mut Db, jobs: impl IntoIterator<Item = Job>, answers: &mut Answers) {
    answers.extend(jobs.into_iter().map(|job| ((job.run)(db).reply, Ok(()))));
}

fn in_transaction(db: &mut Db, batch: Vec<Job>, committed: impl FnOnce(Duration), answers: &mut Answers) {
    let mut jobs = batch.into_iter().peekable();
    let mut replies = Vec::new();
    let mut broken = None;
    while let Some(writes) = jobs.peek().map(|job| job.writes) {
        let guarded = writes == Writes::Several;
        if guarded && let Err(error) = statement(db, "SAVEPOINT job") {
            broken = Some(error);
            break;
        }
        let Some(job) = jobs.next() else { break };
        let ran = (job.run)(db);
        replies.push(ran.reply);
        if db.conn.is_autocommit() {
            broken = Some(LedgerError::unavailable("SQLite rolled back a transaction after an error"));
            break;
        }
        if !guarded {
            continue;
        }
        let closed = if ran.failed {
            statement(db, "ROLLBACK TO job").and_then(|()| statement(db, "RELEASE job"))
        } else {
            statement(db, "RELEASE job")
        };
        if let Err(error) = closed {
            broken = Some(error);
            break;
        }
    }
    let commit_started = Instant::now();
    let outcome = match broken {
        None => commit(db),
        Some(error) => {
            rollback(db);
            Err(error)
        }
    };
    committed(commit_started.elapsed());
    answers.extend(replies.into_iter().map(|reply| (reply, outcome.clone())));
    one_by_one(db, jobs, answers);
}

pub(super) fn statement(db: &Db, sql: &str) -> Result<(), LedgerError> {
    db.conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

fn commit(db: &mut Db) -> Result<(), LedgerError> {
    statement(db, "COMMIT").inspect_err(|_| {
        // A failed COMMIT can leave the transaction open; nothing of it may survive.
        rollback(db);
    })
}

fn rollback(db: &Db) {
    if !db.conn.is_autocommit() {
        let _ = db.conn.execute_batch("ROLLBACK");
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
