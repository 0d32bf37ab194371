//! The in-memory store: for tests, demos and as the benchmarks' baseline. Everything is lost when the process
//! exits, so it gives no protection across restarts or replicas. It keeps every settled claim for the retention,
//! like the durable stores, so it holds hundreds of thousands of claims under load (docs/ledger.md, *The memory
//! ledger*).
//!
//! Rules:
//! - Every operation on one claim is one critical section over [`claims::Claims`], which makes it atomic; the lock
//!   is never held across an `.await` or while waking waiters. The state machine is [`super::rules`]'s.
//! - No critical section does work that grows with the number of stored claims, because every call waits while
//!   one runs: the claims live in a map that never rehashes ([`table`]), upkeep walks only in-flight claims, and
//!   the purge and the listing work in slices of [`SLICE`], taking the lock anew for each.
//! - Records are compact and share their names ([`record`]); what the store hands out are copies.

mod approvals;
mod claims;
mod pins;
mod record;
mod side;
mod table;
mod tasks;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use crate::raw_json::RawJson;

use super::approvals::ApprovalRow;
use super::backend_tokens::BackendTokenRow;
use super::digest::StoredResult;
use super::error::LedgerError;
use super::limit_counters::CounterRow;
use super::resolutions::{Pick, ResolutionRecord, Resolve};
use super::rules::{EXPIRED_NOTE, ORPHANED_NOTE, Settle};
use super::types::{
    ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, ListFilter, NewClaim, Settlement, new_claim_id_bytes, to_millis,
};
use super::waiters::Waiters;
use claims::Claims;
use record::{Names, Stored};

/// How many claims one critical section of the purge or the listing handles at most.
const SLICE: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Every critical section decides the rules first and then applies them, so a panic cannot leave the claims
    /// and their indexes half-changed for the next holder.
    claims: Mutex<Claims>,
    waiters: Waiters,
    /// Revoked sessions and their expiry (unix seconds).
    revocations: Mutex<HashMap<String, u64>>,
    /// Backend OAuth tokens by (backend, principal), in listing order.
    backend_tokens: Mutex<BTreeMap<(String, String), BackendTokenRow>>,
    /// Approval requests by claim key.
    approvals: Mutex<HashMap<ClaimKey, ApprovalRow>>,
    /// Limit counters by (limit, principal), in listing order.
    limit_counters: Mutex<BTreeMap<(String, String), CounterRow>>,
    /// Pinned definitions (see `pins.rs`).
    pins: Mutex<pins::Pins>,
    /// Tasks by id (see `tasks.rs`).
    tasks: Mutex<HashMap<String, super::tasks::TaskRow>>,
    /// Operators' resolutions, oldest first (see `super::resolutions`).
    resolutions: Mutex<Vec<ResolutionRecord>>,
    /// Announcement marks: (kind, key, at ms) (see `super::announcements`).
    announcements: Mutex<HashSet<(String, String, i64)>>,
}

/// Now, as the store keeps times.
fn now_ms() -> i64 {
    to_millis(SystemTime::now())
}

impl MemoryStore {
    pub(crate) fn waiters(&self) -> &Waiters {
        &self.inner.waiters
    }

    pub(crate) async fn claim(&self, new: NewClaim) -> Result<ClaimOutcome, LedgerError> {
        let id = new_claim_id_bytes()?;
        Ok(self.inner.claims.lock().claim(&new, id, SystemTime::now()))
    }

    pub(crate) async fn complete(
        &self,
        key: &ClaimKey,
        owner: &str,
        result: &RawJson,
        max_result: usize,
    ) -> Result<(), LedgerError> {
        self.completed(key, owner, result.clone(), max_result)
    }

    pub(crate) async fn mark_unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        self.unknown(key, owner, error)
    }

    pub(crate) async fn release(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        self.released(key, owner)
    }

    /// Applies `settlement` at once: nothing here is worth queueing.
    pub(crate) fn settle_now(
        &self,
        key: &ClaimKey,
        owner: &str,
        settlement: Settlement,
        max_result: usize,
    ) -> Result<(), LedgerError> {
        match settlement {
            Settlement::Completed(result) => self.completed(key, owner, result, max_result),
            Settlement::Unknown(why) => self.unknown(key, owner, &why),
            Settlement::Released => self.released(key, owner),
        }
    }

    fn completed(&self, key: &ClaimKey, owner: &str, result: RawJson, max_result: usize) -> Result<(), LedgerError> {
        let stored = StoredResult::bound(&result, max_result);
        self.settle(key, owner, Settle::Complete(&stored), |record, _| {
            record.state = ClaimState::Completed;
            record.result = stored.text.is_some().then_some(result);
            record.result_digest = stored.digest.as_deref().map(Box::from);
            record.error = None;
        })
    }

    fn unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        self.settle(key, owner, Settle::MarkUnknown(error), |record, _| {
            record.state = ClaimState::Unknown;
            record.error = Some(error.into());
        })
    }

    fn released(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        self.inner.claims.lock().release(key, owner)?;
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    /// Applies `change` to the claim when the rules allow `operation`, then wakes its waiters.
    fn settle(
        &self,
        key: &ClaimKey,
        owner: &str,
        operation: Settle<'_>,
        change: impl FnOnce(&mut Stored, &mut Names),
    ) -> Result<(), LedgerError> {
        if self.inner.claims.lock().settle(key, owner, operation, now_ms(), change)? {
            self.inner.waiters.wake(key.as_str());
        }
        Ok(())
    }

    pub(crate) async fn get(&self, key: &ClaimKey) -> Result<Option<ClaimRecord>, LedgerError> {
        Ok(self.inner.claims.lock().get(key.as_str()))
    }

    pub(crate) async fn renew_leases(&self, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
        Ok(self.inner.claims.lock().renew(owner, to_millis(lease_until)))
    }

    pub(crate) async fn expire_leases(&self, now: SystemTime) -> Result<u64, LedgerError> {
        let now_ms = to_millis(now);
        Ok(self.unknown_where(|record| record.lease_ms < now_ms, EXPIRED_NOTE, now_ms))
    }

    pub(crate) async fn orphan(&self, owner: &str) -> Result<u64, LedgerError> {
        Ok(self.unknown_where(|record| &*record.owner == owner, ORPHANED_NOTE, now_ms()))
    }

    /// Marks every in-flight claim matching `select` unknown with `note`, wakes their waiters; returns how many.
    fn unknown_where(&self, select: impl Fn(&Stored) -> bool, note: &str, now_ms: i64) -> u64 {
        let changed = self.inner.claims.lock().unknown_where(select, note, now_ms);
        for key in &changed {
            self.inner.waiters.wake(key);
        }
        changed.len() as u64
    }

    /// Removes the settled claims last changed before `older_than`, [`SLICE`] at a time, letting calls in
    /// between; exact, because each slice takes the oldest that remain.
    pub(crate) async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        let cutoff_ms = to_millis(older_than);
        let mut purged = 0;
        loop {
            let (removed, more) = self.inner.claims.lock().sweep(cutoff_ms, SLICE);
            purged += removed;
            if !more {
                return Ok(purged);
            }
            tokio::task::yield_now().await;
        }
    }

    /// The claims matching `filter`, newest first, gathered [`SLICE`] at a time: a claim that changes while the
    /// walk runs is listed as it was when its slice was read (or not at all, if it came or went meanwhile).
    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        let newest_first = |a: &ClaimRecord, b: &ClaimRecord| b.created_at.cmp(&a.created_at).then(a.key.cmp(&b.key));
        let (mut found, mut resume) = (Vec::new(), None);
        loop {
            resume = self.inner.claims.lock().list_slice(filter, resume, SLICE, &mut found);
            // Keeps the gathered claims at twice the limit at most, whatever the store holds.
            if found.len() > filter.limit.saturating_mul(2).max(SLICE) {
                found.sort_by(newest_first);
                found.truncate(filter.limit);
            }
            if resume.is_none() {
                break;
            }
            tokio::task::yield_now().await;
        }
        found.sort_by(newest_first);
        found.truncate(filter.limit);
        Ok(found)
    }

    pub(crate) async fn resolve(&self, key: &ClaimKey, resolve: &Resolve, now: SystemTime) -> Result<(), LedgerError> {
        let mut claims = self.inner.claims.lock();
        let before = claims.resolve(key, resolve.resolution, to_millis(now))?;
        // Taken while the claims are held, so a reader never sees the claim settled without its history.
        self.inner.resolutions.lock().push(ResolutionRecord::of(&before, resolve, now));
        Ok(())
    }

    pub(crate) async fn resolutions(&self, pick: &Pick) -> Result<Vec<ResolutionRecord>, LedgerError> {
        let picked = |row: &&ResolutionRecord| match pick {
            Pick::Key(key) => row.key.as_str() == key,
            Pick::Since(since) => to_millis(row.at) >= *since,
        };
        Ok(self.inner.resolutions.lock().iter().filter(picked).cloned().collect())
    }

    pub(crate) async fn ping(&self) -> Result<(), LedgerError> {
        Ok(())
    }
}
