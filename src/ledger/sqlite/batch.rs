//! Group commit: the worker runs every job queued when it wakes up in one transaction.
//!
//! Rules:
//! - The worker sleeps on its queue and is woken by the next job: nothing polls or spins, so an idle store costs
//!   no CPU. Whatever queued up while it was busy (at most [`MAX_BATCH`] jobs), after the completions parked
//!   until then (see [`crate::ledger::background`]), is the next batch: a quiet call's completion and the next
//!   call's claim share one wake-up and one transaction.
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

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::ErrorCode;

use super::checkpoint::Checkpointer;
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

/// What the worker shares with the store besides its queue.
pub(super) struct Served {
    pub(super) parking: Arc<Parking<Job>>,
    pub(super) counters: Arc<WriterCounters>,
}

/// Runs jobs until every sender is gone, then what is still parked, telling `checkpointer` after each batch.
pub(super) fn serve(
    mut db: Db,
    queue: &mpsc::Receiver<Option<Job>>,
    served: &Served,
    checkpointer: Option<&Checkpointer>,
) {
    let mut batch = Vec::new();
    while let Ok(first) = queue.recv() {
        served.parking.take_into(&mut batch);
        let parked = batch.len();
        batch.extend(first);
        batch.extend(queue.try_iter().take(MAX_BATCH - 1).flatten());
        run_counted(&mut db, std::mem::take(&mut batch), parked, served, checkpointer);
    }
    served.parking.take_into(&mut batch);
    let parked = batch.len();
    run_counted(&mut db, batch, parked, served, checkpointer);
}

/// Runs `batch`, whose first `parked` jobs were parked (nobody waits for them), and records it.
fn run_counted(db: &mut Db, batch: Vec<Job>, parked: usize, served: &Served, checkpointer: Option<&Checkpointer>) {
    // A nudge whose jobs an earlier wake-up took finds nothing.
    if batch.is_empty() {
        return;
    }
    let started = Instant::now();
    let waited = batch[parked..].iter().map(|job| started.saturating_duration_since(job.queued)).sum();
    let mut record = Batch { jobs: batch.len(), awaited: batch.len() - parked, waited, ..Batch::default() };
    let counters = &served.counters;
    // Recorded before its jobs are answered, so an answered caller sees it.
    run(db, batch, |commit| {
        record.commit = commit;
        record.busy = started.elapsed();
        counters.record(&record);
    });
    if let Some(checkpointer) = checkpointer {
        checkpointer.wrote();
    }
}

/// Runs `batch`; `committed` is told how long the commit took (zero for autocommit jobs) before any job of the
/// batch is answered.
fn run(db: &mut Db, mut batch: Vec<Job>, committed: impl FnOnce(Duration)) {
    if batch.len() == 1
        && let Some(job) = batch.pop()
    {
        // Its own statements committed it.
        let ran = (job.run)(db);
        committed(Duration::ZERO);
        return (ran.reply)(Ok(()));
    }
    match db.conn.prepare_cached("BEGIN IMMEDIATE").and_then(|mut begin| begin.execute([])) {
        Ok(_) => in_transaction(db, batch, committed),
        Err(error) if error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
            // Another process held the write lock for the whole busy timeout: rather than have every queued
            // job wait that long again, writes fail at once (reads still work), and the next batch tries anew.
            let _ = db.conn.busy_timeout(Duration::ZERO);
            committed(Duration::ZERO);
            one_by_one(db, batch);
            let _ = db.conn.busy_timeout(BUSY_TIMEOUT);
        }
        // Each job meets the problem (a read-only file, say) and reports it itself.
        Err(_) => {
            committed(Duration::ZERO);
            one_by_one(db, batch);
        }
    }
}

fn one_by_one(db: &mut Db, jobs: impl IntoIterator<Item = Job>) {
    for job in jobs {
        ((job.run)(db).reply)(Ok(()));
    }
}

fn in_transaction(db: &mut Db, batch: Vec<Job>, committed: impl FnOnce(Duration)) {
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
    for reply in replies {
        reply(outcome.clone());
    }
    one_by_one(db, jobs);
}

fn statement(db: &Db, sql: &str) -> Result<(), LedgerError> {
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
