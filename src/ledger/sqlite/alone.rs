//! A caller who is alone commits its job itself, on its own thread, instead of handing it to the writer thread
//! and waiting to be woken with the answer.
//!
//! With one call at a time the writer's batches hold one claim (and the previous call's parked completion), so
//! group commit saves nothing while the two hand-offs (caller → writer thread → caller) cost four context
//! switches per call, the largest share of what the SQLite ledger adds to a call at one connection
//! (docs/ledger.md, *Where a durable call's time goes*). Under concurrency the hand-off is what batches the
//! callers' jobs, and callers taking turns at the connection instead made batches collapse (BENCHMARKS.md, *Tried
//! and reverted*), so a caller runs its job itself only when it is plainly alone.
//!
//! Rules:
//! - [`Solitude`] counts the jobs callers are waiting for. A caller is alone when no other job is awaited as it
//!   arrives and the last [`ALONE_STREAK`] arrivals were alone too; any arrival that meets another job ends the
//!   streak. Two relaxed atomic operations per job; nothing waits on them.
//! - Only claims and settles, a statement each ([`Writes::One`](super::batch::Writes::One)); every other job
//!   (purges, lists, renewals, which can take longer) goes to the writer thread.
//! - Alone, the caller takes the connection only if it is free at once (the writer thread is not running a
//!   batch) and the file's write lock at once (`BEGIN IMMEDIATE` with no busy timeout): it never waits for
//!   another process on the async runtime. Otherwise its job goes to the writer thread as any other.
//! - What the caller runs is what the writer would have run: the parked completions first, then its job, in
//!   one transaction, answered after the commit and once the connection is released, counted in the writer's
//!   counters (as run by a caller).
//!   Nothing about durability changes: the job is answered only once its transaction committed.
//! - It runs inside the caller's poll, for the tens of microseconds of one small transaction (no `fsync`: the
//!   file is in WAL mode with `synchronous = NORMAL`). SQLite's own checkpoint, which would sync, runs there
//!   only if the log passed its bound because the checkpoint thread fell behind.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use super::batch::{Job, RunBy, Served, run_after_parked, statement};
use super::worker::{BUSY_TIMEOUT, Db};

/// How many arrivals in a row must have been alone before a caller runs its own job.
pub(super) const ALONE_STREAK: u32 = 8;

/// The awaited jobs and how long callers have been arriving alone.
#[derive(Debug, Default)]
pub(super) struct Solitude {
    awaited: AtomicUsize,
    streak: AtomicU32,
}

/// One awaited job, counted until its caller has its answer (or gave up).
#[derive(Debug)]
pub(super) struct Arrival<'a> {
    solitude: &'a Solitude,
    alone: bool,
}

impl Solitude {
    /// Counts a job in and says whether its caller is alone.
    pub(super) fn arrive(&self) -> Arrival<'_> {
        let met_another = self.awaited.fetch_add(1, Ordering::Relaxed) > 0;
        let alone = if met_another {
            self.streak.store(0, Ordering::Relaxed);
            false
        } else {
            let streak = self.streak.load(Ordering::Relaxed);
            if streak < ALONE_STREAK {
                self.streak.store(streak + 1, Ordering::Relaxed);
            }
            streak >= ALONE_STREAK
        };
        Arrival { solitude: self, alone }
    }
}

impl Arrival<'_> {
    pub(super) fn alone(&self) -> bool {
        self.alone
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.solitude.awaited.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `job` with the parked completions on the caller's thread if the connection and the file's write lock
/// are free at once; otherwise gives it back, untouched, for the writer thread.
pub(super) fn run_here(served: &Served, job: Job) -> Option<Job> {
    let Some(db) = served.db.try_lock() else {
        return Some(job);
    };
    if !begin_at_once(&db) {
        return Some(job);
    }
    run_after_parked(db, [job], served, RunBy::Caller);
    None
}

/// `BEGIN IMMEDIATE` without waiting for another process's write lock; whether the transaction is open.
fn begin_at_once(db: &Db) -> bool {
    if db.conn.busy_timeout(std::time::Duration::ZERO).is_err() {
        return false;
    }
    let begun = statement(db, "BEGIN IMMEDIATE").is_ok();
    // Restored before any statement of the batch runs: once the write lock is held, nothing waits for it.
    let _ = db.conn.busy_timeout(BUSY_TIMEOUT);
    begun
}

#[cfg(test)]
#[path = "alone_tests.rs"]
mod tests;
