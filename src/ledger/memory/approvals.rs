//! The memory store's approval requests: a plain map behind a lock of its own. Requests are few (one per call a
//! person must approve), so a listing may walk them all.

use std::cmp::Reverse;

use super::super::approvals::{ApprovalRow, ApprovalState, Decision};
use super::super::error::LedgerError;
use super::super::types::{ClaimKey, from_millis};
use super::MemoryStore;

impl MemoryStore {
    /// Whether `row` was inserted (no row had its key).
    pub(crate) async fn insert_approval(&self, row: &ApprovalRow) -> Result<bool, LedgerError> {
        let mut rows = self.inner.approvals.lock();
        if rows.contains_key(&row.key) {
            return Ok(false);
        }
        rows.insert(row.key.clone(), row.clone());
        Ok(true)
    }

    pub(crate) async fn approval(&self, key: &ClaimKey) -> Result<Option<ApprovalRow>, LedgerError> {
        Ok(self.inner.approvals.lock().get(key).cloned())
    }

    /// Whether the decision was recorded (the row awaited one and had not expired).
    pub(crate) async fn decide_approval(&self, key: &ClaimKey, decision: &Decision) -> Result<bool, LedgerError> {
        let mut rows = self.inner.approvals.lock();
        let Some(row) = rows.get_mut(key).filter(|row| row.state_at(decision.at) == ApprovalState::AwaitingApproval)
        else {
            return Ok(false);
        };
        row.state = if decision.approve { ApprovalState::Approved } else { ApprovalState::Denied };
        row.decided_by = Some(decision.by.clone());
        row.decided_at = Some(decision.at);
        row.note = decision.note.clone();
        Ok(true)
    }

    pub(crate) async fn purge_approvals(&self, cutoff_ms: i64) -> Result<u64, LedgerError> {
        let cutoff = from_millis(cutoff_ms);
        let mut rows = self.inner.approvals.lock();
        let before = rows.len();
        rows.retain(|_, row| match row.decided_at {
            Some(decided_at) => decided_at >= cutoff,
            None => row.expires_at >= cutoff,
        });
        Ok((before - rows.len()) as u64)
    }

    pub(crate) async fn approvals(
        &self,
        state: Option<ApprovalState>,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>, LedgerError> {
        let rows = self.inner.approvals.lock();
        let mut found: Vec<ApprovalRow> =
            rows.values().filter(|row| state.is_none_or(|state| row.state == state)).cloned().collect();
        found.sort_by(|a, b| (Reverse(a.requested_at), &a.key).cmp(&(Reverse(b.requested_at), &b.key)));
        found.truncate(limit);
        Ok(found)
    }

    pub(crate) async fn decided_approvals_since(&self, since_ms: i64) -> Result<Vec<ApprovalRow>, LedgerError> {
        let since = from_millis(since_ms);
        let rows = self.inner.approvals.lock();
        let mut found: Vec<ApprovalRow> =
            rows.values().filter(|row| row.decided_at.is_some_and(|at| at >= since)).cloned().collect();
        found.sort_by(|a, b| (a.decided_at, &a.key).cmp(&(b.decided_at, &b.key)));
        Ok(found)
    }

    pub(crate) async fn take_announcement(&self, kind: &str, key: &str, at_ms: i64) -> Result<bool, LedgerError> {
        Ok(self.inner.announcements.lock().insert((kind.to_owned(), key.to_owned(), at_ms)))
    }

    pub(crate) async fn purge_announcements(&self, cutoff_ms: i64) -> Result<u64, LedgerError> {
        let mut marks = self.inner.announcements.lock();
        let before = marks.len();
        marks.retain(|(_, _, at)| *at >= cutoff_ms);
        Ok((before - marks.len()) as u64)
    }
}
