//! The memory store's side tables: the revocation log, the backend OAuth tokens and the limit counters, each a
//! plain map behind a lock of its own. All stay small (deleted sessions until their expiry, one token per principal and backend),
//! so unlike the claims they need no care against whole-map work.

use super::super::backend_tokens::{BackendTokenRow, TokenFilter};
use super::super::error::LedgerError;
use super::super::limit_counters::{CounterRow, LimitCounter};
use super::super::revocations::Revocation;
use super::MemoryStore;

impl MemoryStore {
    pub(crate) async fn record_revocation(&self, revocation: &Revocation) -> Result<(), LedgerError> {
        let mut revocations = self.inner.revocations.lock();
        let expires_at = revocations.entry(revocation.session.clone()).or_default();
        *expires_at = (*expires_at).max(revocation.expires_at);
        Ok(())
    }

    pub(crate) async fn unexpired_revocations(&self, now_unix: u64) -> Result<Vec<Revocation>, LedgerError> {
        let revocations = self.inner.revocations.lock();
        let unexpired = revocations.iter().filter(|(_, expires_at)| **expires_at >= now_unix);
        Ok(unexpired
            .map(|(session, expires_at)| Revocation { session: session.clone(), expires_at: *expires_at })
            .collect())
    }

    pub(crate) async fn purge_revocations(&self, now_unix: u64) -> Result<u64, LedgerError> {
        let mut revocations = self.inner.revocations.lock();
        let before = revocations.len();
        revocations.retain(|_, expires_at| *expires_at >= now_unix);
        Ok((before - revocations.len()) as u64)
    }

    pub(crate) async fn put_backend_token(&self, row: &BackendTokenRow) -> Result<(), LedgerError> {
        self.inner.backend_tokens.lock().insert((row.backend.clone(), row.principal.clone()), row.clone());
        Ok(())
    }

    pub(crate) async fn backend_tokens(&self, filter: &TokenFilter) -> Result<Vec<BackendTokenRow>, LedgerError> {
        Ok(self.inner.backend_tokens.lock().values().filter(|row| matches(filter, row)).cloned().collect())
    }

    pub(crate) async fn delete_backend_tokens(&self, filter: &TokenFilter) -> Result<u64, LedgerError> {
        let mut rows = self.inner.backend_tokens.lock();
        let before = rows.len();
        rows.retain(|_, row| !matches(filter, row));
        Ok((before - rows.len()) as u64)
    }

    pub(crate) async fn limit_counter(&self, limit: &str, principal: &str) -> Result<Option<CounterRow>, LedgerError> {
        Ok(self.inner.limit_counters.lock().get(&(limit.to_owned(), principal.to_owned())).copied())
    }

    pub(crate) async fn swap_limit_counter(
        &self,
        limit: &str,
        principal: &str,
        read: Option<CounterRow>,
        new: CounterRow,
    ) -> Result<bool, LedgerError> {
        let mut rows = self.inner.limit_counters.lock();
        let key = (limit.to_owned(), principal.to_owned());
        let swapped = rows.get(&key).copied() == read;
        if swapped {
            rows.insert(key, new);
        }
        Ok(swapped)
    }

    pub(crate) async fn limit_counters(&self) -> Result<Vec<LimitCounter>, LedgerError> {
        let rows = self.inner.limit_counters.lock();
        let counter = |((limit, principal), row): (&(String, String), &CounterRow)| LimitCounter {
            limit: limit.clone(),
            principal: principal.clone(),
            row: *row,
        };
        Ok(rows.iter().map(counter).collect())
    }
}

fn matches(filter: &TokenFilter, row: &BackendTokenRow) -> bool {
    filter.principal.as_ref().is_none_or(|principal| *principal == row.principal)
        && filter.backend.as_ref().is_none_or(|backend| *backend == row.backend)
}
