//! What each limit's counters hold now, per principal: the console's `/admin/api/limits`.
//!
//! Rules: a read takes each limit's lock once and copies; it never changes a counter (a quota whose window ended
//! reads as unused, a bucket as refilled, as the next call would find them). Rows come in configuration order,
//! principals sorted by name; a principal whose counters are idle is not listed.

use serde::Serialize;

use super::Limits;

/// One principal's use of one limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitUse {
    pub limit: String,
    /// The principal's name (`anonymous@ADDRESS` for an unauthenticated agent).
    pub principal: String,
    /// Tokens left of the burst, when the limit has a rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Calls counted in the quota's current window, of `quota`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<u64>,
    /// Calls running now, of `concurrency`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

impl Limits {
    /// Every principal's use of every limit now.
    pub fn usage(&self) -> Vec<LimitUse> {
        let now = self.clock.now();
        let mut rows = Vec::new();
        for limit in &self.set {
            let (spec, period) = (&limit.spec, limit.period());
            let usage = limit.usage.lock();
            let mut principals: Vec<_> =
                usage.entries.iter().filter(|(_, usage)| !usage.is_idle(period, now)).collect();
            principals.sort_by(|a, b| a.0.cmp(b.0));
            rows.extend(principals.into_iter().map(|(principal, usage)| LimitUse {
                limit: spec.label.to_string(),
                principal: principal.to_string(),
                tokens: spec.rate.map(|rate| usage.tokens(rate.bucket(), now)),
                burst: spec.rate.map(|rate| u64::from(rate.burst)),
                used: period.map(|period| usage.used_at(period, now)),
                quota: spec.quota.map(|quota| quota.calls),
                in_flight: spec.concurrency.map(|_| usage.in_flight),
                concurrency: spec.concurrency,
            }));
        }
        rows
    }
}
