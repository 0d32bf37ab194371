//! What each limit's counters hold now, per principal: the console's `/admin/api/limits` and `switchyard limits`.
//!
//! Rules: a read never changes a counter (a quota whose window ended reads as unused, a bucket as refilled, as
//! the next call would find them). With shared counters (a PostgreSQL ledger) tokens and quota use are the
//! fleet's, read from the store, and calls in flight this gateway's; otherwise all are this gateway's. Rows come in
//! configuration order, principals sorted by name; a principal whose counters are idle is not listed.

use serde::Serialize;

use super::Limits;
use super::counters::Usage;
use super::limit::Limit;
use super::shared;
use crate::ledger::LedgerError;

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
    /// Calls running now on this gateway, of `concurrency`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

impl Limits {
    /// Every principal's use of every limit now.
    pub async fn usage(&self) -> Result<Vec<LimitUse>, LedgerError> {
        let now = self.clock.now();
        let shared = match &self.shared {
            Some(store) => Some(store.limit_counters().await?),
            None => None,
        };
        let mut rows = Vec::new();
        for limit in &self.set {
            let local = limit.usage.lock();
            let mut principals: Vec<(String, Usage)> = match &shared {
                None => local.entries.iter().map(|(key, usage)| (key.to_string(), usage.clone())).collect(),
                Some(counters) => counters
                    .iter()
                    .filter(|counter| *counter.limit == *limit.shared_key)
                    .map(|counter| {
                        let in_flight =
                            local.entries.get(counter.principal.as_str()).map_or(0, |usage| usage.in_flight);
                        (counter.principal.clone(), Usage { in_flight, ..shared::from_row(counter.row) })
                    })
                    .collect(),
            };
            principals.retain(|(_, usage)| !usage.is_idle(limit.period(), now));
            principals.sort_by(|a, b| a.0.cmp(&b.0));
            rows.extend(principals.into_iter().map(|(principal, usage)| row(limit, principal, &usage, now)));
        }
        Ok(rows)
    }
}

fn row(limit: &Limit, principal: String, usage: &Usage, now: u64) -> LimitUse {
    let spec = &limit.spec;
    LimitUse {
        limit: spec.label.to_string(),
        principal,
        tokens: spec.rate.map(|rate| usage.tokens(rate.bucket(), now)),
        burst: spec.rate.map(|rate| u64::from(rate.burst)),
        used: limit.period().map(|period| usage.used_at(period, now)),
        quota: spec.quota.map(|quota| quota.calls),
        in_flight: spec.concurrency.map(|_| usage.in_flight),
        concurrency: spec.concurrency,
    }
}
