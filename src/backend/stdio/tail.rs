//! The last lines a stdio backend's process wrote to stderr, kept for the sentence that reports its end.
//!
//! Rules: at most [`TAIL_LINES`] lines and [`TAIL_BYTES`] bytes (the oldest go first; one longer line is cut), every
//! line whatever the log's budget ([`super::stderr`]); a package manager's error line is kept apart as soon as it
//! is seen ([`super::exit::recognise`]), so a long tail after it does not push it out. A process's end is reported
//! once its stderr has closed, or [`SETTLE`] after it exited (a surviving grandchild may hold the pipe open).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::timeout;

use super::exit::{self, Recognised};
use crate::backend::mcp_client::ManagerError;

/// Lines kept.
const TAIL_LINES: usize = 5;
/// Bytes kept, all lines together.
const TAIL_BYTES: usize = 1024;
/// How long after the process exited its stderr may take to close.
const SETTLE: Duration = Duration::from_millis(500);

/// One process's stderr tail; clones share it.
#[derive(Clone)]
pub(super) struct Tail(Arc<Shared>);

struct Shared {
    kept: Mutex<Kept>,
    /// `true` once stderr has closed.
    closed: watch::Sender<bool>,
}

#[derive(Default)]
struct Kept {
    lines: VecDeque<String>,
    bytes: usize,
    manager: Option<Recognised>,
}

impl Tail {
    pub(super) fn new() -> Tail {
        Tail(Arc::new(Shared { kept: Mutex::default(), closed: watch::channel(false).0 }))
    }

    /// Keeps `line` (lossy UTF-8, cut to [`TAIL_BYTES`]), dropping the oldest lines over the bounds.
    pub(super) fn push(&self, line: &[u8]) {
        let mut text = String::from_utf8_lossy(line).trim_end().to_owned();
        if text.is_empty() {
            return;
        }
        if text.len() > TAIL_BYTES {
            let cut = (0..=TAIL_BYTES).rev().find(|cut| text.is_char_boundary(*cut)).unwrap_or(0);
            text.truncate(cut);
        }
        let mut kept = self.0.kept.lock();
        if let Some(seen) = exit::recognise(&text)
            && kept.manager.as_ref().is_none_or(|known| seen.rank > known.rank)
        {
            kept.manager = Some(seen);
        }
        kept.bytes += text.len();
        kept.lines.push_back(text);
        while kept.lines.len() > TAIL_LINES || kept.bytes > TAIL_BYTES {
            let Some(oldest) = kept.lines.pop_front() else { break };
            kept.bytes -= oldest.len();
        }
    }

    /// Marks stderr closed.
    pub(super) fn close(&self) {
        self.0.closed.send_replace(true);
    }

    /// The lines kept (oldest first) and the package manager's error, once stderr closed or [`SETTLE`] passed.
    pub(super) async fn settled(&self) -> (Vec<String>, Option<ManagerError>) {
        let mut closed = self.0.closed.subscribe();
        let _ = timeout(SETTLE, closed.wait_for(|closed| *closed)).await;
        let kept = self.0.kept.lock();
        (kept.lines.iter().cloned().collect(), kept.manager.as_ref().map(|seen| seen.error.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tail_keeps_the_last_lines_within_its_bounds() {
        let tail = Tail::new();
        for n in 0..8 {
            tail.push(format!("line {n}\r\n").as_bytes());
        }
        tail.push(b"   ");
        tail.close();
        let (lines, manager) = tail.settled().await;
        assert_eq!(lines, ["line 3", "line 4", "line 5", "line 6", "line 7"], "blank lines are not kept");
        assert_eq!(manager, None);
        let long = Tail::new();
        long.push("é".repeat(TAIL_BYTES).as_bytes());
        long.push(b"last");
        long.close();
        let (lines, _) = long.settled().await;
        assert_eq!(lines, ["last"], "the bytes bound drops the oldest line");
        let one = Tail::new();
        one.push("é".repeat(TAIL_BYTES).as_bytes());
        one.close();
        let (lines, _) = one.settled().await;
        assert_eq!(lines[0].len(), TAIL_BYTES, "one long line is cut on a character boundary");
    }
}
