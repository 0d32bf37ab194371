//! Limits across replicas: with a PostgreSQL ledger, rates and quotas count against counters every replica
//! shares (`LedgerStore::limit_counter`), leased in batches so the store is not asked on every call.
//!
//! Rules:
//! - A gateway takes a batch of tokens (a quarter of the burst, 1 to 64) and of quota calls (a hundredth of the
//!   quota, 1 to 64) from the shared row in one compare-and-swap, and spends them locally; it goes back to the
//!   store only when its lease runs out or is [`LEASE_FOR`] old, and then returns what it did not spend in the
//!   same swap. So the store sees about one write per replica and principal per second, or per batch of calls.
//! - Leased tokens were already taken from the shared bucket, so a fleet never admits more than the bucket gives
//!   out, only later: in any interval of length W the fleet admits at most `burst + rate·W + R·B` calls (R
//!   replicas, B the batch), one batch per replica beyond one gateway's bound. Quota calls are leased within their
//!   window and dropped with it, so a quota is never exceeded.
//! - A refused lease (the shared bucket or quota is empty) is remembered until the wait it reported, so refusals
//!   do not reach the store either.
//! - Concurrency permits are leased by [`super::permits`]; the repeat guard stays per gateway.
//! - If the store cannot be read or written, the limit counts per gateway until it can (logged): the calls need
//!   the same store for their claims, so nothing runs unrecorded either way.

use std::sync::Arc;

use super::clock::nanos;
use super::counters::{Lease, Usage};
use super::limit::Limit;
use super::refusal::{Refusal, Violated};
use super::{Counted, Held, Took};
use crate::ledger::{CounterRow, LedgerError, LedgerStore};

/// How long a gateway may keep leased tokens before it returns what is left.
pub const LEASE_FOR: std::time::Duration = std::time::Duration::from_secs(1);
/// Compare-and-swap attempts before the store is taken as unavailable.
const ATTEMPTS: usize = 16;

/// What a principal's lease answered.
enum Local {
    Taken,
    Refused(Refusal),
    /// The lease ran out or expired: refill it, returning `Lease`'s leftovers.
    Empty(Lease),
}

/// Takes `limit`'s token and quota call for `key` from the lease, refilling it from `store` when needed.
/// `None`: the store failed, and the caller counts this limit per gateway.
pub async fn take_leased(
    limit: &Arc<Limit>,
    store: &LedgerStore,
    key: &str,
    now: u64,
    held: &mut Held,
) -> Option<Result<(), Refusal>> {
    for _ in 0..ATTEMPTS {
        let returned = match take_local(limit, key, now, held) {
            Local::Taken => return Some(Ok(())),
            Local::Refused(refusal) => return Some(Err(refusal)),
            Local::Empty(returned) => returned,
        };
        if let Err(error) = refill(limit, store, key, now, returned).await {
            tracing::warn!(limit = %limit.spec.label, %error, "the shared limit counters are unavailable; counting here");
            return None;
        }
    }
    // Other calls of the principal kept spending each new lease first: the allowance is that busy, so wait.
    let violated = if limit.spec.rate.is_some() { Violated::Rate } else { Violated::Quota };
    Some(Err(Refusal::new(&limit.spec, violated, nanos(std::time::Duration::from_secs(1)))))
}

fn take_local(limit: &Arc<Limit>, key: &str, now: u64, held: &mut Held) -> Local {
    let (spec, period) = (&limit.spec, limit.period());
    let mut usage = limit.usage.lock();
    let entry = usage.entry(key, |usage| !usage.is_idle(period, now));
    let lease = &mut entry.lease;
    let window = period.map(|period| now / period);
    let expired = lease.until <= now && lease.holds_some();
    let has_token = spec.rate.is_none() || lease.tokens > 0;
    let has_call = window.is_none_or(|window| lease.calls > 0 && lease.window == window);
    if !expired && has_token && has_call {
        lease.tokens = lease.tokens.saturating_sub(u64::from(spec.rate.is_some()));
        lease.calls = lease.calls.saturating_sub(u64::from(window.is_some()));
        held.taken.push(Took {
            limit: Arc::clone(limit),
            key: key.into(),
            counted: Some(Counted::Leased),
            permit: false,
        });
        return Local::Taken;
    }
    if !has_token && lease.no_tokens_until > now {
        return Local::Refused(Refusal::new(spec, Violated::Rate, lease.no_tokens_until - now));
    }
    if !has_call && lease.no_calls_until > now {
        return Local::Refused(Refusal::new(spec, Violated::Quota, lease.no_calls_until - now));
    }
    Local::Empty(std::mem::replace(lease, Lease { no_tokens_until: 0, no_calls_until: 0, ..Lease::default() }))
}

/// Returns `returned`'s leftovers to the shared row and leases a new batch, in one compare-and-swap.
async fn refill(limit: &Limit, store: &LedgerStore, key: &str, now: u64, returned: Lease) -> Result<(), LedgerError> {
    let spec = &limit.spec;
    for _ in 0..ATTEMPTS {
        let read = store.limit_counter(&limit.shared_key, key).await?;
        let mut shared = from_row(read.unwrap_or_default());
        if let Some(rate) = spec.rate {
            shared.tat = shared.tat.saturating_sub(returned.tokens * rate.bucket().interval);
        }
        if shared.window == returned.window {
            shared.used = shared.used.saturating_sub(returned.calls);
        }
        let leased = lease(limit, &mut shared, now);
        if store.swap_limit_counter(&limit.shared_key, key, read, to_row(&shared)).await? {
            let period = limit.period();
            let mut usage = limit.usage.lock();
            let entry = usage.entry(key, |usage| !usage.is_idle(period, now));
            entry.lease =
                Lease { tokens: entry.lease.tokens + leased.tokens, calls: entry.lease.calls + leased.calls, ..leased };
            return Ok(());
        }
    }
    Err(LedgerError::unavailable(format!("the counters of limit {} kept changing", spec.label)))
}

/// Takes a batch from the shared counters `shared` at `now`: the lease, with when it ends or why it is empty.
fn lease(limit: &Limit, shared: &mut Usage, now: u64) -> Lease {
    let spec = &limit.spec;
    let mut leased = Lease { until: now + nanos(LEASE_FOR), ..Lease::default() };
    if let Some(rate) = spec.rate {
        let (bucket, batch) = (rate.bucket(), u64::from(rate.burst / 4).clamp(1, 64));
        while leased.tokens < batch {
            match shared.take_rate(bucket, now) {
                Ok(()) => leased.tokens += 1,
                Err(wait) => {
                    leased.no_tokens_until = if leased.tokens == 0 { now + wait } else { 0 };
                    break;
                }
            }
        }
    }
    if let (Some(quota), Some(period)) = (spec.quota, limit.period()) {
        let batch = (quota.calls / 100).clamp(1, 64);
        leased.window = now / period;
        while leased.calls < batch {
            match shared.take_quota(quota.calls, period, now) {
                Ok(()) => leased.calls += 1,
                Err(wait) => {
                    leased.no_calls_until = if leased.calls == 0 { now + wait } else { 0 };
                    break;
                }
            }
        }
    }
    leased
}

pub fn from_row(row: CounterRow) -> Usage {
    let unsigned = |value: i64| u64::try_from(value).unwrap_or(0);
    Usage { tat: unsigned(row.tat), window: unsigned(row.window), used: unsigned(row.used), ..Usage::default() }
}

fn to_row(usage: &Usage) -> CounterRow {
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    CounterRow { tat: signed(usage.tat), window: signed(usage.window), used: signed(usage.used) }
}
