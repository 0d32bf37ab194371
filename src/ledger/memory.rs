//! The in-memory store: a map behind one mutex. For tests, demos and as the benchmarks' baseline; everything is
//! lost when the process exits, so it gives no protection across restarts or replicas.
//!
//! Rules: every operation is one critical section over the map, which makes it atomic; the lock is never held
//! across an `.await` or while waking waiters. The state machine is [`super::rules`]'s.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use crate::raw_json::RawJson;

use super::backend_tokens::{BackendTokenRow, TokenFilter};
use super::digest::StoredResult;
use super::error::LedgerError;
use super::revocations::Revocation;
use super::rules::{self, EXPIRED_NOTE, ORPHANED_NOTE, RESOLVED_NOTE, Settle, Verdict};
use super::types::{
    ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, ListFilter, NewClaim, OPERATOR, Resolution, Settlement,
    new_claim_id, truncate_to_millis,
};
use super::waiters::Waiters;

#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    claims: Mutex<HashMap<String, ClaimRecord>>,
    waiters: Waiters,
    /// Revoked sessions and their expiry (unix seconds).
    revocations: Mutex<HashMap<String, u64>>,
    /// Backend OAuth tokens by (backend, principal), in listing order.
    backend_tokens: Mutex<BTreeMap<(String, String), BackendTokenRow>>,
}

impl MemoryStore {
    fn claims(&self) -> MutexGuard<'_, HashMap<String, ClaimRecord>> {
        // Every critical section leaves the map consistent, so a panic elsewhere cannot have broken it.
        self.inner.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn waiters(&self) -> &Waiters {
        &self.inner.waiters
    }

    pub(crate) async fn claim(&self, new: NewClaim) -> Result<ClaimOutcome, LedgerError> {
        let id = new_claim_id()?;
        let mut claims = self.claims();
        match claims.entry(new.key.as_str().to_owned()) {
            Entry::Occupied(existing) => Ok(ClaimOutcome::Existing(existing.get().clone())),
            Entry::Vacant(slot) => {
                let record = ClaimRecord::claimed(&new, id, SystemTime::now());
                slot.insert(record.clone());
                Ok(ClaimOutcome::Claimed(record))
            }
        }
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
        self.settle(key, owner, Settle::Complete(&stored), |record| {
            record.state = ClaimState::Completed;
            record.result = stored.text.is_some().then_some(result);
            record.result_digest = stored.digest.clone();
            record.error = None;
        })
    }

    fn unknown(&self, key: &ClaimKey, owner: &str, error: &str) -> Result<(), LedgerError> {
        self.settle(key, owner, Settle::MarkUnknown(error), |record| {
            record.state = ClaimState::Unknown;
            record.error = Some(error.to_owned());
        })
    }

    fn released(&self, key: &ClaimKey, owner: &str) -> Result<(), LedgerError> {
        {
            let mut claims = self.claims();
            if rules::explain(Settle::Release, key, owner, claims.get(key.as_str()))? == Verdict::Apply {
                claims.remove(key.as_str());
            }
        }
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    /// Applies `change` to the claim when the rules allow `operation`, then wakes its waiters.
    fn settle(
        &self,
        key: &ClaimKey,
        owner: &str,
        operation: Settle<'_>,
        change: impl FnOnce(&mut ClaimRecord),
    ) -> Result<(), LedgerError> {
        {
            let mut claims = self.claims();
            let record = claims.get_mut(key.as_str());
            if rules::explain(operation, key, owner, record.as_deref())? == Verdict::AlreadyDone {
                return Ok(());
            }
            if let Some(record) = record {
                change(record);
                record.updated_at = truncate_to_millis(SystemTime::now());
            }
        }
        self.inner.waiters.wake(key.as_str());
        Ok(())
    }

    pub(crate) async fn get(&self, key: &ClaimKey) -> Result<Option<ClaimRecord>, LedgerError> {
        Ok(self.claims().get(key.as_str()).cloned())
    }

    pub(crate) async fn renew_leases(&self, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
        let lease_until = truncate_to_millis(lease_until);
        let mut renewed = 0;
        for record in self.claims().values_mut() {
            if record.owner == owner && record.state == ClaimState::InFlight {
                record.lease_until = lease_until;
                renewed += 1;
            }
        }
        Ok(renewed)
    }

    pub(crate) async fn expire_leases(&self, now: SystemTime) -> Result<u64, LedgerError> {
        let now = truncate_to_millis(now);
        Ok(self.to_unknown(|record| record.lease_until < now, EXPIRED_NOTE, now))
    }

    pub(crate) async fn orphan(&self, owner: &str) -> Result<u64, LedgerError> {
        let now = truncate_to_millis(SystemTime::now());
        Ok(self.to_unknown(|record| record.owner == owner, ORPHANED_NOTE, now))
    }

    /// Marks every in-flight claim matching `select` unknown with `note`; returns how many changed.
    fn to_unknown(&self, select: impl Fn(&ClaimRecord) -> bool, note: &str, now: SystemTime) -> u64 {
        let mut changed = Vec::new();
        for record in self.claims().values_mut() {
            if record.state == ClaimState::InFlight && select(record) {
                record.state = ClaimState::Unknown;
                record.error = Some(note.to_owned());
                record.updated_at = now;
                changed.push(record.key.clone());
            }
        }
        for key in &changed {
            self.inner.waiters.wake(key.as_str());
        }
        changed.len() as u64
    }

    pub(crate) async fn purge(&self, older_than: SystemTime) -> Result<u64, LedgerError> {
        let cutoff = truncate_to_millis(older_than);
        let mut claims = self.claims();
        let before = claims.len();
        claims.retain(|_, record| record.state == ClaimState::InFlight || record.updated_at >= cutoff);
        Ok((before - claims.len()) as u64)
    }

    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
        let since = filter.since.map(truncate_to_millis);
        let mut found: Vec<ClaimRecord> = self
            .claims()
            .values()
            .filter(|record| filter.state.is_none_or(|state| record.state == state))
            .filter(|record| filter.principal.as_ref().is_none_or(|principal| &record.principal == principal))
            .filter(|record| filter.backend.as_ref().is_none_or(|backend| &record.backend == backend))
            .filter(|record| filter.tool.as_ref().is_none_or(|tool| &record.tool == tool))
            .filter(|record| since.is_none_or(|since| record.created_at >= since))
            .cloned()
            .collect();
        found.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.key.cmp(&b.key)));
        found.truncate(filter.limit);
        Ok(found)
    }

    pub(crate) async fn resolve(&self, key: &ClaimKey, resolution: Resolution) -> Result<(), LedgerError> {
        let mut claims = self.claims();
        rules::explain_resolve(key, claims.get(key.as_str()))?;
        match resolution {
            Resolution::Failed => {
                claims.remove(key.as_str());
            }
            Resolution::Completed => {
                if let Some(record) = claims.get_mut(key.as_str()) {
                    record.state = ClaimState::Completed;
                    record.owner = OPERATOR.to_owned();
                    record.error = Some(RESOLVED_NOTE.to_owned());
                    record.updated_at = truncate_to_millis(SystemTime::now());
                }
            }
        }
        Ok(())
    }

    pub(crate) async fn ping(&self) -> Result<(), LedgerError> {
        Ok(())
    }
}

impl MemoryStore {
    fn revocations(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        // Single map operations: a panic elsewhere cannot leave the map half-changed.
        self.inner.revocations.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) async fn record_revocation(&self, revocation: &Revocation) -> Result<(), LedgerError> {
        let mut revocations = self.revocations();
        let expires_at = revocations.entry(revocation.session.clone()).or_default();
        *expires_at = (*expires_at).max(revocation.expires_at);
        Ok(())
    }

    pub(crate) async fn unexpired_revocations(&self, now_unix: u64) -> Result<Vec<Revocation>, LedgerError> {
        let revocations = self.revocations();
        let unexpired = revocations.iter().filter(|(_, expires_at)| **expires_at >= now_unix);
        Ok(unexpired
            .map(|(session, expires_at)| Revocation { session: session.clone(), expires_at: *expires_at })
            .collect())
    }

    pub(crate) async fn purge_revocations(&self, now_unix: u64) -> Result<u64, LedgerError> {
        let mut revocations = self.revocations();
        let before = revocations.len();
        revocations.retain(|_, expires_at| *expires_at >= now_unix);
        Ok((before - revocations.len()) as u64)
    }

    fn backend_token_rows(&self) -> MutexGuard<'_, BTreeMap<(String, String), BackendTokenRow>> {
        self.inner.backend_tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) async fn put_backend_token(&self, row: &BackendTokenRow) -> Result<(), LedgerError> {
        self.backend_token_rows().insert((row.backend.clone(), row.principal.clone()), row.clone());
        Ok(())
    }

    pub(crate) async fn backend_tokens(&self, filter: &TokenFilter) -> Result<Vec<BackendTokenRow>, LedgerError> {
        Ok(self.backend_token_rows().values().filter(|row| matches(filter, row)).cloned().collect())
    }

    pub(crate) async fn delete_backend_tokens(&self, filter: &TokenFilter) -> Result<u64, LedgerError> {
        let mut rows = self.backend_token_rows();
        let before = rows.len();
        rows.retain(|_, row| !matches(filter, row));
        Ok((before - rows.len()) as u64)
    }
}

fn matches(filter: &TokenFilter, row: &BackendTokenRow) -> bool {
    filter.principal.as_ref().is_none_or(|principal| *principal == row.principal)
        && filter.backend.as_ref().is_none_or(|backend| *backend == row.backend)
}
