//! Log lines of a failure that repeats — a ledger that cannot write during an outage, once per call — written at
//! most once per interval, each saying how many were left out since the one before, so a minute of full disk is a
//! handful of lines rather than tens of thousands (docs/operations.md, *Logs*).
//!
//! Rules: one [`LogThrottle`] per log site (a `static`); the first occurrence is always written; the count of
//! lines left out is the `left_out` field of the next line written.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often one repeating failure is logged.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// When a log site last wrote, and how many of its lines were left out since.
pub struct LogThrottle {
    state: Mutex<Option<(Instant, u64)>>,
}

impl LogThrottle {
    pub const fn new() -> LogThrottle {
        LogThrottle { state: Mutex::new(None) }
    }

    /// Whether to write the line now: `Some(left_out)` (the lines left out since the last one written), or `None`
    /// when a line was written less than [`LOG_EVERY`] ago (this one is counted).
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock();
        match &mut *state {
            Some((last, left_out)) if now.duration_since(*last) < LOG_EVERY => {
                *left_out += 1;
                None
            }
            slot => Some(slot.replace((now, 0)).map_or(0, |(_, left_out)| left_out)),
        }
    }
}

impl Default for LogThrottle {
    fn default() -> Self {
        LogThrottle::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeating_line_is_written_once_per_interval_with_the_count_it_left_out() {
        let throttle = LogThrottle::new();
        let start = Instant::now();
        assert_eq!(throttle.admit_at(start), Some(0), "the first is written");
        for n in 1..=500u64 {
            assert_eq!(throttle.admit_at(start + Duration::from_millis(n * 10)), None);
        }
        assert_eq!(throttle.admit_at(start + LOG_EVERY), Some(500), "the next says how many were left out");
        assert_eq!(throttle.admit_at(start + LOG_EVERY + Duration::from_secs(1)), None);
        assert_eq!(throttle.admit_at(start + LOG_EVERY * 3), Some(1));
    }
}
