//! One principal's use of one limit, as plain arithmetic on the limit clock's nanoseconds: a token bucket (kept
//! as its theoretical arrival time, GCRA), a fixed-window quota and the calls in flight; and the repeat guard's
//! recent identical calls.
//!
//! Rules: every check either takes what it counts and answers `Ok`, or takes nothing and answers how long until
//! it would succeed; what was taken can be given back ([`Usage::refund_rate`], [`Usage::refund_quota`]) when a
//! later limit refuses the same call, so a refused call costs no limit anything.

use std::collections::VecDeque;

/// A rate as the bucket needs it: one token every `interval` ns, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub interval: u64,
    pub burst: u64,
}

/// One principal's counters of one limit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Usage {
    /// When the bucket will be full again (ns since the epoch); at or before now: it is full.
    pub tat: u64,
    /// The quota window `used` counts in (now / period).
    pub window: u64,
    pub used: u64,
    pub in_flight: u32,
    /// What this gateway leased from the shared counters (a PostgreSQL ledger; unused otherwise).
    pub lease: Lease,
    /// The concurrency permits this gateway leased from the shared counters (likewise).
    pub permits: super::permits::Permits,
}

/// Tokens and quota calls taken from the shared counters in a batch, spent here without asking the store again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub tokens: u64,
    pub calls: u64,
    /// The quota window `calls` belong to.
    pub window: u64,
    /// When what is left goes back to the shared counters (ns since the epoch).
    pub until: u64,
    /// Until when the shared bucket, or the shared quota, is known to be empty (ns since the epoch).
    pub no_tokens_until: u64,
    pub no_calls_until: u64,
}

impl Lease {
    /// Whether it holds anything the shared counters should get back.
    pub fn holds_some(&self) -> bool {
        self.tokens > 0 || self.calls > 0
    }
}

impl Usage {
    /// Takes one token, or answers the wait (ns) until one is there.
    pub fn take_rate(&mut self, bucket: Bucket, now: u64) -> Result<(), u64> {
        let tolerance = bucket.interval.saturating_mul(bucket.burst - 1);
        let tat = self.tat.max(now);
        match tat - now > tolerance {
            true => Err(tat - tolerance - now),
            false => {
                self.tat = tat + bucket.interval;
                Ok(())
            }
        }
    }

    pub fn refund_rate(&mut self, bucket: Bucket) {
        self.tat = self.tat.saturating_sub(bucket.interval);
    }

    /// Tokens left at `now`.
    pub fn tokens(&self, bucket: Bucket, now: u64) -> u64 {
        let owed = self.tat.saturating_sub(now).div_ceil(bucket.interval);
        bucket.burst.saturating_sub(owed)
    }

    /// Counts one call in the window of `now` (`period` ns long, from the epoch), or answers the wait until the
    /// next window.
    pub fn take_quota(&mut self, calls: u64, period: u64, now: u64) -> Result<(), u64> {
        self.used = self.used_at(period, now);
        self.window = now / period;
        match self.used >= calls {
            true => Err((self.window + 1) * period - now),
            false => {
                self.used += 1;
                Ok(())
            }
        }
    }

    pub fn refund_quota(&mut self) {
        self.used = self.used.saturating_sub(1);
    }

    /// The calls counted in the window of `now`.
    pub fn used_at(&self, period: u64, now: u64) -> u64 {
        if self.window == now / period { self.used } else { 0 }
    }

    /// Whether nothing here would change the next decision: the bucket full, the quota's window over, nothing in
    /// flight (such an entry can be forgotten).
    pub fn is_idle(&self, period: Option<u64>, now: u64) -> bool {
        self.tat <= now
            && self.in_flight == 0
            && !self.lease.holds_some()
            && self.permits.lease == 0
            && period.is_none_or(|period| self.used_at(period, now) == 0)
    }
}

/// The times (ns) of one principal's recent calls of one tool with one argument digest.
#[derive(Debug, Default)]
pub struct Repeats(VecDeque<u64>);

impl Repeats {
    /// Whether another call may run: fewer than `times` calls within the `window` ns before `now`; else the
    /// wait until the oldest leaves the window.
    pub fn check(&mut self, times: u32, window: u64, now: u64) -> Result<(), u64> {
        self.forget_before(now.saturating_sub(window));
        match self.0.len() >= times as usize {
            true => Err(self.0.front().map_or(1, |oldest| oldest + window - now)),
            false => Ok(()),
        }
    }

    pub fn record(&mut self, now: u64) {
        self.0.push_back(now);
    }

    pub fn is_empty_after(&mut self, since: u64) -> bool {
        self.forget_before(since);
        self.0.is_empty()
    }

    fn forget_before(&mut self, since: u64) {
        while self.0.front().is_some_and(|at| *at <= since) {
            self.0.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const FIVE_PER_SECOND: Bucket = Bucket { interval: SECOND / 5, burst: 5 };

    #[test]
    fn a_bucket_admits_its_burst_then_its_rate() {
        let (mut usage, start) = (Usage::default(), 1_000 * SECOND);
        for _ in 0..5 {
            usage.take_rate(FIVE_PER_SECOND, start).expect("the burst");
        }
        assert_eq!(usage.take_rate(FIVE_PER_SECOND, start), Err(SECOND / 5), "the sixth waits one interval");
        assert_eq!(usage.tokens(FIVE_PER_SECOND, start), 0);
        let later = start + SECOND / 5;
        usage.take_rate(FIVE_PER_SECOND, later).expect("one token an interval later");
        assert!(usage.take_rate(FIVE_PER_SECOND, later).is_err(), "and only one");
        usage.refund_rate(FIVE_PER_SECOND);
        usage.take_rate(FIVE_PER_SECOND, later).expect("a refunded token is there again");
        assert_eq!(usage.tokens(FIVE_PER_SECOND, later + 10 * SECOND), 5, "never more than the burst");
    }

    #[test]
    fn a_quota_resets_at_its_window_boundary() {
        let day = 86_400 * SECOND;
        let (mut usage, evening) = (Usage::default(), 20_000 * day + day - 10 * SECOND);
        usage.take_quota(2, day, evening).expect("first");
        usage.take_quota(2, day, evening).expect("second");
        assert_eq!(usage.take_quota(2, day, evening), Err(10 * SECOND), "until midnight");
        assert!(!usage.is_idle(Some(day), evening));
        usage.take_quota(2, day, evening + 10 * SECOND).expect("a new day");
        assert_eq!(usage.used_at(day, evening + 10 * SECOND), 1);
    }

    #[test]
    fn repeats_count_within_their_window() {
        let mut repeats = Repeats::default();
        for at in [1, 2, 3] {
            repeats.check(3, 10 * SECOND, at * SECOND).expect("within the allowance");
            repeats.record(at * SECOND);
        }
        assert_eq!(repeats.check(3, 10 * SECOND, 4 * SECOND), Err(7 * SECOND), "the fourth waits for the first");
        repeats.check(3, 10 * SECOND, 11 * SECOND).expect("the first left the window");
        assert!(!repeats.is_empty_after(2 * SECOND));
        assert!(repeats.is_empty_after(3 * SECOND));
    }
}
