//! Draining a stdio backend process's stderr into the log, within a budget (MCP 2025-11-25
//! `basic/transports.mdx` §stdio: the server may write anything to stderr, and the client may ignore it).
//!
//! Rules:
//! - stderr is read continuously (an unread pipe would block the child), line by line, each line cut at
//!   [`MAX_STDERR_LINE`] bytes and marked ` [line cut]`; lines go to `tracing` at info level, tagged with the
//!   backend and pid.
//! - Per process, the log gets at most [`STDERR_BURST`] bytes at once and [`STDERR_RATE`] bytes a second after
//!   that (a token bucket; each line costs its length plus [`LINE_COST`], what a log line adds around it). Lines
//!   over the budget are counted, not logged; [`SUMMARY_EVERY`] after the first of them (and before the next line
//!   logged, and when stderr closes) one line says how many lines and bytes were suppressed. A child that floods
//!   stderr thus costs the log about 8 KiB a second, not what it writes.
//! - A reader task feeds the logging loop through a short channel, so the summary's timer never interrupts a
//!   read halfway through a line; it also keeps every line in the process's [`Tail`], whatever the budget.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::BufReader;
use tokio::process::ChildStderr;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::lines::{Line, LineReader};
use super::tail::Tail;

/// Longest stderr line logged; the rest of a longer line is dropped.
pub const MAX_STDERR_LINE: usize = 4096;
/// Bytes of stderr a process may log at once.
pub const STDERR_BURST: u64 = 64 * 1024;
/// Bytes of stderr a process may log per second, once its burst is spent.
pub const STDERR_RATE: u64 = 8 * 1024;
/// What each logged line costs beyond its bytes.
pub const LINE_COST: u64 = 128;
/// How long after the first suppressed line the count of suppressed lines is logged.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(5);
/// Lines read ahead of the logging loop.
const QUEUE: usize = 64;

/// Logs the lines of `stderr` for `backend`'s process `pid` within the budget, on tasks of their own; the
/// returned tail keeps the last of them.
pub(super) fn drain(backend: Arc<str>, pid: u32, stderr: ChildStderr) -> Tail {
    let (lines, queue) = mpsc::channel(QUEUE);
    let tail = Tail::new();
    tokio::spawn(read(stderr, lines, tail.clone()));
    tokio::spawn(log(backend, pid, queue));
    tail
}

async fn read(stderr: ChildStderr, queue: mpsc::Sender<Line>, tail: Tail) {
    let mut lines = LineReader::new(BufReader::new(stderr), MAX_STDERR_LINE);
    while let Ok(Some(line)) = lines.next_line().await {
        tail.push(&line.bytes);
        if queue.send(line).await.is_err() {
            break;
        }
    }
    tail.close();
}

async fn log(backend: Arc<str>, pid: u32, mut queue: mpsc::Receiver<Line>) {
    let mut budget = Budget::new(Instant::now());
    let summarize = |suppressed: Suppressed| {
        let Suppressed { lines, bytes } = suppressed;
        tracing::warn!(backend = %backend, pid, lines, bytes, "stderr: suppressed {lines} lines ({bytes} bytes) over the log budget");
    };
    loop {
        let summary_due = budget.summary_due();
        let line = tokio::select! {
            line = queue.recv() => line,
            () = sleep_until(summary_due.unwrap_or_else(Instant::now)), if summary_due.is_some() => {
                budget.take_suppressed().into_iter().for_each(summarize);
                continue;
            }
        };
        let Some(line) = line else { break };
        if budget.admit(line.bytes.len(), Instant::now()) {
            budget.take_suppressed().into_iter().for_each(summarize);
            let text = String::from_utf8_lossy(&line.bytes);
            let cut = if line.truncated { " [line cut]" } else { "" };
            tracing::info!(backend = %backend, pid, "stderr: {text}{cut}");
        }
    }
    budget.take_suppressed().into_iter().for_each(summarize);
}

/// Lines over the budget since the last summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Suppressed {
    lines: u64,
    bytes: u64,
}

/// One process's token bucket of log bytes, and what it refused.
struct Budget {
    tokens: u64,
    refilled: Instant,
    suppressed: Option<(Suppressed, Instant)>,
}

impl Budget {
    fn new(now: Instant) -> Budget {
        Budget { tokens: STDERR_BURST, refilled: now, suppressed: None }
    }

    /// Whether a line of `len` bytes may be logged at `now`; a refused one is counted.
    fn admit(&mut self, len: usize, now: Instant) -> bool {
        let earned = now.saturating_duration_since(self.refilled).as_millis() as u64 * STDERR_RATE / 1000;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(STDERR_BURST);
            self.refilled = now;
        }
        let bytes = len as u64;
        let cost = bytes + LINE_COST;
        if cost <= self.tokens {
            self.tokens -= cost;
            return true;
        }
        let (counted, _) = self.suppressed.get_or_insert((Suppressed { lines: 0, bytes: 0 }, now + SUMMARY_EVERY));
        counted.lines += 1;
        counted.bytes += bytes;
        false
    }

    /// When the summary of the lines suppressed so far is due (`None`: none were).
    fn summary_due(&self) -> Option<Instant> {
        self.suppressed.map(|(_, due)| due)
    }

    fn take_suppressed(&mut self) -> Option<Suppressed> {
        self.suppressed.take().map(|(counted, _)| counted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_logged_up_to_the_burst_then_at_the_rate_and_the_rest_counted() {
        let start = Instant::now();
        let mut budget = Budget::new(start);
        let line = 1024 - LINE_COST as usize;
        let admitted = (0..1000).filter(|_| budget.admit(line, start)).count();
        assert_eq!(admitted as u64, STDERR_BURST / 1024, "the burst, and not a line more");
        assert_eq!(budget.summary_due(), Some(start + SUMMARY_EVERY));
        let later = start + Duration::from_secs(1);
        let admitted = (0..1000).filter(|_| budget.admit(line, later)).count();
        assert_eq!(admitted as u64, STDERR_RATE / 1024, "a second's worth");
        let refused = 2000 - STDERR_BURST / 1024 - STDERR_RATE / 1024;
        assert_eq!(budget.take_suppressed(), Some(Suppressed { lines: refused, bytes: refused * line as u64 }));
        assert_eq!(budget.take_suppressed(), None, "counted once");
        assert!(budget.admit(10, start + Duration::from_secs(60)), "a quiet minute refills the bucket");
        assert_eq!(budget.tokens, STDERR_BURST - 10 - LINE_COST, "up to the burst only");
    }
}
