//! Group commit: the worker runs the jobs that queued up while it was busy in one transaction.
//!
//! Rules:
//! - A lone job runs in autocommit mode, as its own transaction, so an idle store pays nothing extra. Jobs that
//!   arrived together run in one `BEGIN IMMEDIATE … COMMIT`: one lock round and one write of each touched page
//!   instead of one per job, which is what lets many concurrent callers share one connection.
//! - A job answers only after its transaction committed: it returns a [`Reply`] that is called with the commit's
//!   outcome, and a failed commit turns every answer of the batch into that error, so nobody is told about a
//!   change that did not happen.
//! - Every job makes at most one change, with the last statement that changed anything (the operations in
//!   [`super::ops`] read after a write only when the write changed nothing), so a job that fails leaves nothing
//!   half-done in the batch for the others to commit.
//! - If SQLite rolls the whole transaction back on an error (disk full, I/O error), the jobs that ran in it are
//!   answered with an error and the rest of the batch runs one by one.

use std::sync::mpsc::{self, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::ErrorCode;

use super::worker::{BUSY_TIMEOUT, Db};
use crate::ledger::error::LedgerError;

/// The most jobs committed together.
const MAX_BATCH: usize = 256;
/// How long the worker polls for the next job before it sleeps. A tool call's completion follows its claim after
/// one backend round trip (typically 50–300 µs); a worker still awake then saves waking a parked thread, which
/// on a VM costs tens of µs per hop (BENCHMARKS.md: +129 µs added median with 50 µs of polling, +58 µs with
/// 400 µs). An idle store polls at most this long after its last job.
const SPIN: Duration = Duration::from_micros(400);

/// A job's answer, sent once the outcome of its transaction is known.
pub(super) type Reply = Box<dyn FnOnce(Result<(), LedgerError>) + Send>;
/// A job: runs on the connection and returns how to answer.
pub(super) type Job = Box<dyn FnOnce(&mut Db) -> Reply + Send>;

/// Runs jobs until every sender is gone.
pub(super) fn serve(mut db: Db, queue: &mpsc::Receiver<Job>) {
    while let Some(first) = next_job(queue) {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run(&mut db, batch);
    }
}

/// The next job: polled for a moment before sleeping, because a sleeping thread (on a VM, a sleeping virtual
/// CPU) takes tens of microseconds to wake, more than a whole SQLite write, and a call's claim, completion and
/// the next call's claim often follow each other closely.
fn next_job(queue: &mpsc::Receiver<Job>) -> Option<Job> {
    let spinning = Instant::now();
    while spinning.elapsed() < SPIN {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    queue.recv().ok()
}

fn run(db: &mut Db, batch: Vec<Job>) {
    if batch.len() == 1 {
        return one_by_one(db, batch);
    }
    match db.conn.execute_batch("BEGIN IMMEDIATE") {
        Ok(()) => in_transaction(db, batch),
        Err(error) if error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
            // Another process held the write lock for the whole busy timeout: rather than have every queued
            // job wait that long again, writes fail at once (reads still work), and the next batch tries anew.
            let _ = db.conn.busy_timeout(Duration::ZERO);
            one_by_one(db, batch);
            let _ = db.conn.busy_timeout(BUSY_TIMEOUT);
        }
        // Each job meets the problem (a read-only file, say) and reports it itself.
        Err(_) => one_by_one(db, batch),
    }
}

fn one_by_one(db: &mut Db, jobs: impl IntoIterator<Item = Job>) {
    for job in jobs {
        job(db)(Ok(()));
    }
}

fn in_transaction(db: &mut Db, batch: Vec<Job>) {
    let mut jobs = batch.into_iter();
    let mut replies = Vec::new();
    for job in jobs.by_ref() {
        replies.push(job(db));
        if db.conn.is_autocommit() {
            break;
        }
    }
    let outcome = if db.conn.is_autocommit() {
        Err(LedgerError::unavailable("SQLite rolled back a transaction after an error"))
    } else {
        commit(db)
    };
    for reply in replies {
        reply(outcome.clone());
    }
    one_by_one(db, jobs);
}

fn commit(db: &mut Db) -> Result<(), LedgerError> {
    db.conn.execute_batch("COMMIT").map_err(|error| {
        // A failed COMMIT can leave the transaction open; nothing of it may survive.
        let _ = db.conn.execute_batch("ROLLBACK");
        LedgerError::from(error)
    })
}
