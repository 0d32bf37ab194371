//! The time limits count in: nanoseconds since the Unix epoch (UTC), so a quota's window ends at the same
//! instant on every replica.
//!
//! Rules: the clock reads the system time unless a test paused it ([`LimitClock::pause_at`]), after which it
//! moves only when told ([`LimitClock::advance`]): a test of a rate or of a window boundary then depends on no
//! scheduling. The clock is shared by every generation of the limits (a reload keeps it), so a paused clock stays
//! paused. A system clock set before the epoch reads as the epoch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Default)]
pub struct LimitClock {
    paused: AtomicBool,
    /// The paused time, in nanoseconds since the epoch.
    at: AtomicU64,
}

impl LimitClock {
    /// Now, in nanoseconds since the epoch.
    pub fn now(&self) -> u64 {
        if self.paused.load(Ordering::Acquire) {
            return self.at.load(Ordering::Acquire);
        }
        nanos(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
    }

    /// Stops the clock at `at`.
    pub(crate) fn pause_at(&self, at: SystemTime) {
        self.at.store(nanos(at.duration_since(UNIX_EPOCH).unwrap_or_default()), Ordering::Release);
        self.paused.store(true, Ordering::Release);
    }

    /// Moves a paused clock forward by `by`.
    pub(crate) fn advance(&self, by: Duration) {
        self.at.fetch_add(nanos(by), Ordering::AcqRel);
    }
}

/// `duration` in nanoseconds, saturating (u64 nanoseconds reach the year 2554).
pub fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_clock_moves_only_when_told() {
        let clock = LimitClock::default();
        assert!(clock.now() > nanos(Duration::from_secs(1_700_000_000)), "the system time");
        clock.pause_at(UNIX_EPOCH + Duration::from_secs(86_400));
        assert_eq!(clock.now(), nanos(Duration::from_secs(86_400)));
        clock.advance(Duration::from_millis(200));
        assert_eq!(clock.now(), nanos(Duration::from_millis(86_400_200)));
    }
}
