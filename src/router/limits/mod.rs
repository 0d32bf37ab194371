//! Rate limits, quotas, concurrency limits and the runaway-loop guard (`[[limits]]`), checked before a call is
//! claimed or sent.
//!
//! Rules:
//! - A request must satisfy every limit that counts it ([`Limit::counts`]); each limit counts each principal on
//!   its own (`anonymous` per client address). A refused request is not sent and costs no limit anything: what
//!   earlier limits took for it is given back.
//! - A rate is a token bucket (`burst` tokens, one more every `per / calls`); a quota counts calls in fixed
//!   windows of its period aligned on the epoch (UTC); concurrency holds a permit while the call runs
//!   ([`Held`]); the repeat guard refuses a principal's call of a tool with the same argument digest once it ran
//!   `times` times within the window — only calls that ran count ([`Held::ran`]), so a replay from the ledger
//!   never does.
//! - With no limit configured the call path pays one `is_empty` test ([`Limits::admit`]) and allocates nothing.
//! - A reload builds new limits and carries over ([`Limits::carried_from`]) the clock and the counters of every
//!   limit whose spec did not change; a changed limit starts afresh with the next call.
//! - With a PostgreSQL ledger, rates, quotas and concurrency hold for the fleet: they lease batches from counters
//!   every replica shares ([`shared`], [`permits`]); with SQLite or memory every counter is this gateway's.

mod clock;
mod counters;
mod gate;
mod limit;
mod permits;
mod refusal;
mod shared;
mod usage;

use std::sync::Arc;

use serde_json::Value;

pub use clock::LimitClock;
use counters::Usage;
pub use gate::{admit_call, admit_request};
use limit::Limit;
pub use limit::{Calls, LimitSpec, Quota, Rate, Repeat, Request};
pub use permits::{RENEW_EVERY, renew};
pub use refusal::{Refusal, Violated};
pub use usage::LimitUse;

use crate::ledger::{LedgerStore, canonical_digest};

/// Every configured limit, with the clock they count in.
#[derive(Debug, Default)]
pub struct Limits {
    set: Vec<Arc<Limit>>,
    clock: Arc<LimitClock>,
    /// The store whose counters replicas share (PostgreSQL), when there is one ([`shared`]).
    shared: Option<LedgerStore>,
}

impl Limits {
    pub fn new(specs: Vec<LimitSpec>) -> Limits {
        let set = specs.into_iter().map(|spec| Arc::new(Limit::new(spec))).collect();
        Limits { set, clock: Arc::default(), shared: None }
    }

    /// Counts rates and quotas against `store`'s shared counters, leased in batches ([`shared`]).
    pub fn share_in(&mut self, store: LedgerStore) {
        self.shared = Some(store);
    }

    /// These limits with `running`'s clock, and `running`'s counters for each limit whose spec is unchanged.
    pub fn carried_from(self, running: &Limits) -> Limits {
        let set = self
            .set
            .into_iter()
            .map(|limit| {
                let same = running.set.iter().find(|old| old.spec == limit.spec);
                same.map_or(limit, Arc::clone)
            })
            .collect();
        Limits { set, clock: Arc::clone(&running.clock), shared: running.shared.clone() }
    }

    /// Whether the counters are the fleet's (a shared store), not this gateway's alone.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Whether any limit counts requests other than tool calls (`methods = ["*"]`).
    pub fn count_every_request(&self) -> bool {
        self.set.iter().any(|limit| limit.spec.calls == Calls::Every)
    }

    pub fn clock(&self) -> &Arc<LimitClock> {
        &self.clock
    }

    /// Takes what every limit counting `request` needs, or takes nothing and says which limit refused.
    /// `arguments` are the tool call's (their digest keys the repeat guard).
    pub async fn admit(&self, request: &Request<'_>, arguments: Option<&Value>) -> Result<Held, Refusal> {
        if self.set.is_empty() {
            return Ok(Held::default());
        }
        let now = self.clock.now();
        let mut held = Held { taken: Vec::new(), repeats: Vec::new(), clock: Some(Arc::clone(&self.clock)) };
        let mut digest = None;
        for limit in self.set.iter().filter(|limit| limit.counts(request)) {
            let taken = match &self.shared {
                // Boxed: the lease's database future is large, and inline it would be copied with every call's.
                Some(store) => Box::pin(take_shared(limit, store, request.key, now, &mut held)).await,
                None => take(limit, request.key, now, &mut held),
            };
            taken.map_err(|refusal| held.refund(refusal))?;
            let (Some(repeat), Some((tool, _))) = (limit.spec.repeat, request.tool) else { continue };
            let digest = digest.get_or_insert_with(|| canonical_digest(arguments.unwrap_or(&Value::Null)));
            let key: Box<str> = format!("{}\0{tool}\0{digest}", request.key).into();
            let window = clock::nanos(repeat.window);
            let checked = limit
                .repeats
                .lock()
                .entry(&key, |seen| !seen.is_empty_after(now.saturating_sub(window)))
                .check(repeat.times, window, now);
            checked.map_err(|wait| held.refund(Refusal::new(&limit.spec, Violated::Repeat, wait)))?;
            held.repeats.push((Arc::clone(limit), key));
        }
        Ok(held)
    }
}

/// Takes `limit`'s rate token and quota call for `key` from the leases of the shared counters, then its permit
/// ([`permits`]); a part whose store fails counts here instead.
async fn take_shared(
    limit: &Arc<Limit>,
    store: &LedgerStore,
    key: &str,
    now: u64,
    held: &mut Held,
) -> Result<(), Refusal> {
    let spec = &limit.spec;
    if spec.rate.is_some() || spec.quota.is_some() {
        let leased = shared::take_leased(limit, store, key, now, held).await;
        leased.unwrap_or_else(|| take_counts(limit, key, now, held))?;
    }
    if spec.concurrency.is_some() {
        let permit = permits::take(limit, store, key, now, held).await;
        permit.unwrap_or_else(|| take_permit(limit, key, now, held))?;
    }
    Ok(())
}

/// Takes `limit`'s rate token, quota call and permit for `key`, all or none.
fn take(limit: &Arc<Limit>, key: &str, now: u64, held: &mut Held) -> Result<(), Refusal> {
    take_counts(limit, key, now, held)?;
    take_permit(limit, key, now, held).map_err(|refusal| held.refund(refusal))
}

/// Takes `limit`'s rate token and quota call for `key` from this gateway's counters, both or none.
fn take_counts(limit: &Arc<Limit>, key: &str, now: u64, held: &mut Held) -> Result<(), Refusal> {
    let spec = &limit.spec;
    if spec.rate.is_none() && spec.quota.is_none() {
        return Ok(());
    }
    let spec = &limit.spec;
    let period = limit.period();
    let mut usage = limit.usage.lock();
    let entry = usage.entry(key, |usage| !usage.is_idle(period, now));
    let refused = |violated, wait| Refusal::new(spec, violated, wait);
    if let Some(rate) = spec.rate {
        entry.take_rate(rate.bucket(), now).map_err(|wait| refused(Violated::Rate, wait))?;
    }
    if let (Some(quota), Some(period)) = (spec.quota, period)
        && let Err(wait) = entry.take_quota(quota.calls, period, now)
    {
        spec.rate.inspect(|rate| entry.refund_rate(rate.bucket()));
        return Err(refused(Violated::Quota, wait));
    }
    held.taken.push(Took { limit: Arc::clone(limit), key: key.into(), counted: Some(Counted::Here), permit: false });
    Ok(())
}

/// Takes `limit`'s concurrency permit for `key` from this gateway's calls in flight.
fn take_permit(limit: &Arc<Limit>, key: &str, now: u64, held: &mut Held) -> Result<(), Refusal> {
    let Some(max) = limit.spec.concurrency else { return Ok(()) };
    let period = limit.period();
    let mut usage = limit.usage.lock();
    let entry = usage.entry(key, |usage| !usage.is_idle(period, now));
    if entry.in_flight >= max {
        return Err(Refusal::new(&limit.spec, Violated::Concurrency, 0));
    }
    entry.in_flight += 1;
    held.taken.push(Took { limit: Arc::clone(limit), key: key.into(), counted: None, permit: true });
    Ok(())
}

/// What a request took of one limit, for one principal's key.
#[derive(Debug)]
struct Took {
    limit: Arc<Limit>,
    key: Box<str>,
    /// Where its rate token and quota call came from, if it took any.
    counted: Option<Counted>,
    /// Whether it holds a concurrency permit (given back when the call ends).
    permit: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// This gateway's counters.
    Here,
    /// A lease of the shared counters.
    Leased,
}

/// What a request admitted by the limits holds: its concurrency permits (given back when it is dropped, that is
/// when the call ends) and the identical-call records it makes once it has run.
#[derive(Debug, Default)]
pub struct Held {
    /// What each limit that counted the request took.
    taken: Vec<Took>,
    repeats: Vec<(Arc<Limit>, Box<str>)>,
    clock: Option<Arc<LimitClock>>,
}

impl Held {
    /// The call was sent (not answered from the ledger): it counts for the repeat guard.
    pub fn ran(&mut self) {
        let Some(clock) = &self.clock else { return };
        let now = clock.now();
        for (limit, key) in self.repeats.drain(..) {
            limit.repeats.lock().entry(&key, |_| true).record(now);
        }
    }

    /// Gives back what was taken for a request `refusal` refused, and passes the refusal on.
    fn refund(&mut self, refusal: Refusal) -> Refusal {
        self.repeats.clear();
        for took in self.taken.drain(..) {
            let (spec, mut usage) = (&took.limit.spec, took.limit.usage.lock());
            let Some(entry) = usage.entries.get_mut(&took.key) else { continue };
            match took.counted {
                Some(Counted::Leased) => {
                    entry.lease.tokens += u64::from(spec.rate.is_some());
                    entry.lease.calls += u64::from(spec.quota.is_some());
                }
                Some(Counted::Here) => {
                    spec.rate.inspect(|rate| entry.refund_rate(rate.bucket()));
                    spec.quota.inspect(|_| entry.refund_quota());
                }
                None => {}
            }
            release(&took, entry);
        }
        refusal
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Only a concurrency permit is given back when a call ends.
        for took in self.taken.iter().filter(|took| took.permit) {
            if let Some(entry) = took.limit.usage.lock().entries.get_mut(&took.key) {
                release(took, entry);
            }
        }
    }
}

fn release(took: &Took, usage: &mut Usage) {
    if took.permit {
        usage.in_flight = usage.in_flight.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests;
