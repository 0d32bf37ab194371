//! Counters of the SQL stores' writers: how many batches they committed, how large, how long the jobs waited
//! for a batch and how long the batches took. They say where a durable call's time goes (`bench/ledger/`,
//! the debug log line at shutdown) without a profiler.
//!
//! Rules:
//! - Written by the writers only, once per batch (a few relaxed atomic additions), never per call on the
//!   callers' side; read as a [`WriterStats`] snapshot. Nothing here has a timer or a task: an idle store
//!   costs nothing.
//! - Batch sizes are counted in power-of-two buckets (1, 2–3, 4–7, …, 256+).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How many batch-size buckets there are: 1, 2–3, 4–7, …, 128–255, 256+.
const BUCKETS: usize = 9;

/// A writer's counters, shared between its thread or tasks and its store.
#[derive(Debug, Default)]
pub(crate) struct WriterCounters {
    batches: AtomicU64,
    jobs: AtomicU64,
    /// Jobs that were awaited by a caller (queued, not parked), and their summed wait for a batch to start.
    awaited: AtomicU64,
    waited_ns: AtomicU64,
    /// Summed time from a batch's start to the end of its commit.
    busy_ns: AtomicU64,
    /// Summed time of the commits alone (SQLite: `COMMIT`; PostgreSQL: the pipelined round trip).
    commit_ns: AtomicU64,
    /// Operations run after a batch's commit because the batch could not decide them (PostgreSQL: one round
    /// trip each).
    after_commit: AtomicU64,
    /// Batches a caller ran itself rather than the writer (SQLite: a caller alone).
    by_callers: AtomicU64,
    sizes: [AtomicU64; BUCKETS],
}

/// One batch, as its writer reports it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Batch {
    pub(crate) jobs: usize,
    pub(crate) awaited: usize,
    pub(crate) waited: Duration,
    pub(crate) busy: Duration,
    pub(crate) commit: Duration,
    pub(crate) by_caller: bool,
}

impl WriterCounters {
    pub(crate) fn record(&self, batch: &Batch) {
        let add = |counter: &AtomicU64, value: u64| counter.fetch_add(value, Ordering::Relaxed);
        add(&self.batches, 1);
        add(&self.jobs, batch.jobs as u64);
        add(&self.awaited, batch.awaited as u64);
        add(&self.waited_ns, nanos(batch.waited));
        add(&self.busy_ns, nanos(batch.busy));
        add(&self.commit_ns, nanos(batch.commit));
        add(&self.by_callers, u64::from(batch.by_caller));
        let bucket = (usize::BITS - batch.jobs.max(1).leading_zeros()) as usize - 1;
        add(&self.sizes[bucket.min(BUCKETS - 1)], 1);
    }

    pub(crate) fn after_commit(&self) {
        self.after_commit.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> WriterStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WriterStats {
            batches: get(&self.batches),
            jobs: get(&self.jobs),
            awaited: get(&self.awaited),
            waited: Duration::from_nanos(get(&self.waited_ns)),
            busy: Duration::from_nanos(get(&self.busy_ns)),
            committing: Duration::from_nanos(get(&self.commit_ns)),
            after_commit: get(&self.after_commit),
            by_callers: get(&self.by_callers),
            batch_sizes: std::array::from_fn(|bucket| get(&self.sizes[bucket])),
        }
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// What a store's writers did since it opened (all zero for the memory store, which has none).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriterStats {
    /// Batches committed (a lone job is a batch of one).
    pub batches: u64,
    /// Jobs in them: claims, settles (queued completions included) and every other operation.
    pub jobs: u64,
    /// Jobs a caller waited for, and their summed wait from being queued until their batch started.
    pub awaited: u64,
    pub waited: Duration,
    /// Summed time from each batch's start to the end of its commit.
    pub busy: Duration,
    /// Summed time of the commits alone.
    pub committing: Duration,
    /// Operations a batch left to be run alone after its commit.
    pub after_commit: u64,
    /// Batches a caller ran itself instead of the writer.
    pub by_callers: u64,
    /// Batches by size: 1, 2–3, 4–7, …, 128–255, 256+.
    pub batch_sizes: [u64; BUCKETS],
}

impl WriterStats {
    /// The counts accumulated since `earlier` (a snapshot of the same store).
    pub fn since(&self, earlier: &WriterStats) -> WriterStats {
        let minus = |a: u64, b: u64| a.saturating_sub(b);
        WriterStats {
            batches: minus(self.batches, earlier.batches),
            jobs: minus(self.jobs, earlier.jobs),
            awaited: minus(self.awaited, earlier.awaited),
            waited: self.waited.saturating_sub(earlier.waited),
            busy: self.busy.saturating_sub(earlier.busy),
            committing: self.committing.saturating_sub(earlier.committing),
            after_commit: minus(self.after_commit, earlier.after_commit),
            by_callers: minus(self.by_callers, earlier.by_callers),
            batch_sizes: std::array::from_fn(|bucket| minus(self.batch_sizes[bucket], earlier.batch_sizes[bucket])),
        }
    }
}

impl fmt::Display for WriterStats {
    /// One line: `batches=… jobs=… jobs_per_batch=… wait_us_per_awaited_job=… busy_us_per_batch=…
    /// commit_us_per_batch=… after_commit=… by_callers=… sizes=1:…,2:…,4:…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = |total: Duration, count: u64| total.as_secs_f64() * 1e6 / count.max(1) as f64;
        write!(
            f,
            "batches={} jobs={} jobs_per_batch={:.1} wait_us_per_awaited_job={:.1} busy_us_per_batch={:.1} \
             commit_us_per_batch={:.1} after_commit={} by_callers={} sizes=",
            self.batches,
            self.jobs,
            self.jobs as f64 / self.batches.max(1) as f64,
            per(self.waited, self.awaited),
            per(self.busy, self.batches),
            per(self.committing, self.batches),
            self.after_commit,
            self.by_callers,
        )?;
        let mut first = true;
        for (bucket, count) in self.batch_sizes.iter().enumerate().filter(|(_, count)| **count > 0) {
            write!(f, "{}{}:{count}", if first { "" } else { "," }, 1u64 << bucket)?;
            first = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_counted_by_size_bucket() {
        let counters = WriterCounters::default();
        for jobs in [1, 2, 3, 4, 64, 255, 256, 300] {
            counters.record(&Batch { jobs, awaited: 1, waited: Duration::from_micros(10), ..Batch::default() });
        }
        let stats = counters.snapshot();
        assert_eq!(stats.batches, 8);
        assert_eq!(stats.jobs, 885);
        assert_eq!(stats.batch_sizes, [1, 2, 1, 0, 0, 0, 1, 1, 2]);
        assert_eq!(stats.since(&stats), WriterStats::default());
        let line = stats.to_string();
        assert!(line.contains("wait_us_per_awaited_job=10.0"), "{line}");
        assert!(line.ends_with("sizes=1:1,2:2,4:1,64:1,128:1,256:2"), "{line}");
    }
}
