//! The memory store's side tables: the revocation log and the backend OAuth tokens, each a plain map behind a
//! lock of its own. Both stay small (deleted sessions until their expiry, one token per principal and backend),
//! so unlike the claims they need no care against whole-map work.

use super::super::backend_tokens::{BackendTokenRow, TokenFilter};
use super::super::error::LedgerError;
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
}

fn matches(filter: &TokenFilter, row: &BackendTokenRow) -> bool {
    filter.principal.as_ref().is_none_or(|principal| *principal == row.principal)
        && filter.backend.as_ref().is_none_or(|backend| *backend == row.backend)
}
