//! The calls awaiting approval, for the console: what each is (tool, backend, principal, arguments' digest), when
//! it was asked and expires, and the commands that decide it.
//!
//! Rules: read-only, like every console view. The arguments themselves are opened only when the caller says its
//! reader is an approver (the console's approvals page decides who is); `switchyard calls show KEY` prints them
//! to whoever holds the token key. Expired requests are left out: nobody can decide them any more.

use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::super::{CallRouter, approval_arguments, decision_commands};
use super::calls::{InspectError, MAX_CALLS, unix_ms};
use crate::backend::oauth::Vault;
use crate::ledger::{ApprovalRow, ApprovalState, ClaimKey};

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
    /// The arguments, for approvers only (`null` when they cannot be opened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    pub requested_ms: u64,
    pub expires_ms: u64,
    pub approve_command: String,
    pub deny_command: String,
}

/// What an approval link finds.
#[derive(Debug)]
pub enum LinkedApproval {
    /// The request still awaits a decision.
    Awaiting(Box<PendingApproval>),
    /// Decided (`by`) or expired (`by` is `None`).
    Closed { state: &'static str, by: Option<String> },
}

impl CallRouter {
    /// The calls awaiting approval now, newest first, at most `limit` (capped at [`MAX_CALLS`]); with their
    /// arguments when `for_approver`.
    pub async fn pending_approvals(
        &self,
        limit: usize,
        for_approver: bool,
    ) -> Result<Vec<PendingApproval>, InspectError> {
        let rows = self.ledger.store.awaiting_approvals(limit.min(MAX_CALLS)).await?;
        let vault = for_approver.then(|| self.approvals.get().and_then(|gate| gate.vault.get().ok())).flatten();
        Ok(rows.iter().map(|row| view(row, vault.as_deref(), for_approver)).collect())
    }

    /// The request under the key `key` names (none for a malformed key), as an approval link shows it: never
    /// its arguments.
    pub async fn linked_approval(&self, key: &str) -> Result<Option<LinkedApproval>, InspectError> {
        let Ok(key) = ClaimKey::parse(key) else { return Ok(None) };
        let Some(row) = self.ledger.store.approval(&key).await? else { return Ok(None) };
        Ok(Some(match row.state_at(SystemTime::now()) {
            ApprovalState::AwaitingApproval => LinkedApproval::Awaiting(Box::new(view(&row, None, false))),
            state => LinkedApproval::Closed { state: state.as_str(), by: row.decided_by },
        }))
    }
}

fn view(row: &ApprovalRow, vault: Option<&Vault>, for_approver: bool) -> PendingApproval {
    let [approve, deny] = decision_commands(&row.key);
    let arguments = for_approver.then(|| vault.and_then(|vault| approval_arguments(vault, row)).unwrap_or(Value::Null));
    PendingApproval {
        key: row.key.as_str().to_owned(),
        principal: row.principal.clone(),
        backend: row.backend.clone(),
        tool: row.tool.clone(),
        arguments_sha256: row.args_digest.clone(),
        arguments,
        requested_ms: unix_ms(row.requested_at),
        expires_ms: unix_ms(row.expires_at),
        approve_command: format!("{approve} --note TEXT"),
        deny_command: format!("{deny} --note TEXT"),
    }
}
