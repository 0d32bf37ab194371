//! The calls awaiting approval, for the console: what each is (tool, backend, principal, arguments' digest), when
//! it was asked and expires, and the commands that decide it.
//!
//! Rules: read-only, like every console view; the arguments themselves are not shown (the console does not know
//! whether its caller is an approver; `switchyard calls show KEY` prints them to whoever holds the token key).
//! Expired requests are left out: nobody can decide them any more.

use serde::Serialize;

use super::super::{CallRouter, decision_commands};
use super::calls::{InspectError, MAX_CALLS, unix_ms};
use crate::ledger::ApprovalRow;

/// One call awaiting approval, as the console shows it.
#[derive(Debug, Serialize)]
pub struct PendingApproval {
    /// The claim key (`switchyard calls approve KEY`).
    pub key: String,
    pub principal: String,
    pub backend: String,
    /// The backend's own tool name.
    pub tool: String,
    pub arguments_sha256: String,
    pub requested_ms: u64,
    pub expires_ms: u64,
    pub approve_command: String,
    pub deny_command: String,
}

impl CallRouter {
    /// The calls awaiting approval now, newest first, at most `limit` (capped at [`MAX_CALLS`]).
    pub async fn pending_approvals(&self, limit: usize) -> Result<Vec<PendingApproval>, InspectError> {
        let rows = self.ledger.store.awaiting_approvals(limit.min(MAX_CALLS)).await?;
        Ok(rows.iter().map(view).collect())
    }
}

fn view(row: &ApprovalRow) -> PendingApproval {
    let [approve, deny] = decision_commands(&row.key);
    PendingApproval {
        key: row.key.as_str().to_owned(),
        principal: row.principal.clone(),
        backend: row.backend.clone(),
        tool: row.tool.clone(),
        arguments_sha256: row.args_digest.clone(),
        requested_ms: unix_ms(row.requested_at),
        expires_ms: unix_ms(row.expires_at),
        approve_command: format!("{approve} --note TEXT"),
        deny_command: format!("{deny} --note TEXT"),
    }
}
