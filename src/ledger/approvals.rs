//! Approval requests beside the claims: one row per tool call that waits for a person's decision, keyed by the
//! call's claim key, so that once approved the call runs as an ordinary claim under the same key (and at most
//! once, whatever the retries and replicas).
//!
//! Rules:
//! - A row is created once per key ([`LedgerStore::request_approval`]: the first request wins, later ones get
//!   the existing row) in state `awaiting_approval`, and decided once: `approved` or `denied`
//!   ([`LedgerStore::decide_approval`], a single conditional statement, so two deciders cannot both win). A row
//!   still awaiting at its `expires_at` reads as `expired` ([`ApprovalRow::state_at`]) and can no longer be
//!   decided; expiry needs no writer.
//! - The arguments are opaque sealed bytes here (sealing is the router's); the digest, names and times are plain
//!   so an operator lists rows without the key.
//! - Rows leave with the claims' retention ([`LedgerStore::purge_approvals`]): a decided row once decided before the
//!   cutoff, an undecided one once expired before it. A retry after that finds the call's claim (and is answered
//!   from it) or, if that is gone too, asks again.
//! - The table is additive, like the backend tokens': created (`IF NOT EXISTS`) on every open, outside the
//!   schema version.

use std::fmt;
use std::time::SystemTime;

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;
use super::types::{ClaimKey, from_millis, to_millis, truncate_to_millis};

/// The table's name (in the configured schema on Postgres).
pub(crate) const APPROVALS_TABLE: &str = "switchyard_approvals";
/// The largest sealed arguments stored.
pub const MAX_SEALED_ARGS: usize = 1024 * 1024;
/// The longest decision note.
pub const MAX_NOTE: usize = 4096;

/// Where an approval request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalState {
    AwaitingApproval,
    Approved,
    Denied,
    /// Nobody decided before `expires_at`: as denied.
    Expired,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingApproval => "awaiting_approval",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalState> {
        [Self::AwaitingApproval, Self::Approved, Self::Denied, Self::Expired]
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One approval request.
#[derive(Clone, PartialEq, Eq)]
pub struct ApprovalRow {
    pub key: ClaimKey,
    pub principal: String,
    pub backend: String,
    pub tool: String,
    pub args_digest: String,
    /// The call's arguments, sealed by the gateway.
    pub sealed_args: Vec<u8>,
    /// As stored: `awaiting_approval`, `approved` or `denied` (see [`ApprovalRow::state_at`]).
    pub state: ApprovalState,
    pub requested_at: SystemTime,
    pub expires_at: SystemTime,
    pub decided_by: Option<String>,
    pub decided_at: Option<SystemTime>,
    pub note: Option<String>,
}

impl fmt::Debug for ApprovalRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalRow")
            .field("key", &self.key)
            .field("principal", &self.principal)
            .field("backend", &self.backend)
            .field("tool", &self.tool)
            .field("state", &self.state)
            .field("sealed_args", &format_args!("<{} bytes>", self.sealed_args.len()))
            .field("decided_by", &self.decided_by)
            .field("note", &self.note)
            .finish_non_exhaustive()
    }
}

impl ApprovalRow {
    /// The state at `now`: a request still awaiting a decision at its expiry is `expired`.
    pub fn state_at(&self, now: SystemTime) -> ApprovalState {
        match self.state {
            ApprovalState::AwaitingApproval if now >= self.expires_at => ApprovalState::Expired,
            state => state,
        }
    }

    /// The row as a store keeps it (times in whole milliseconds), so one built in memory equals one read back.
    pub(crate) fn normalized(mut self) -> ApprovalRow {
        self.requested_at = truncate_to_millis(self.requested_at);
        self.expires_at = truncate_to_millis(self.expires_at);
        self.decided_at = self.decided_at.map(truncate_to_millis);
        self
    }

    /// Unit tests' request: `bot` calling `pay`'s `send` under idempotency key `name`, awaiting its decision for
    /// `timeout` from `requested_at`.
    #[cfg(test)]
    pub(crate) fn awaiting(name: &str, requested_at: SystemTime, timeout: std::time::Duration) -> ApprovalRow {
        ApprovalRow {
            key: ClaimKey::idempotency("bot", name),
            principal: "bot".into(),
            backend: "pay".into(),
            tool: "send".into(),
            args_digest: "d1".into(),
            sealed_args: b"\x01sealed".to_vec(),
            state: ApprovalState::AwaitingApproval,
            requested_at,
            expires_at: requested_at + timeout,
            decided_by: None,
            decided_at: None,
            note: None,
        }
        .normalized()
    }

    fn check(&self) -> Result<(), LedgerError> {
        if self.state != ApprovalState::AwaitingApproval || self.decided_by.is_some() {
            return Err(LedgerError::InvalidApproval { problem: "a new request awaits its decision".into() });
        }
        if self.sealed_args.len() > MAX_SEALED_ARGS {
            return Err(LedgerError::InvalidApproval { problem: "the sealed arguments exceed 1 MiB".into() });
        }
        Ok(())
    }
}

/// A person's decision on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// `true`: approved; `false`: denied.
    pub approve: bool,
    /// Who decided.
    pub by: String,
    pub note: Option<String>,
    pub at: SystemTime,
}

impl Decision {
    fn state(&self) -> ApprovalState {
        if self.approve { ApprovalState::Approved } else { ApprovalState::Denied }
    }
}

/// What [`LedgerStore::request_approval`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalRequest {
    /// This request created the row (announce it).
    Created(ApprovalRow),
    /// A request under this key exists (a retry, or another replica's).
    Existing(ApprovalRow),
}

/// The columns every select reads, in [`RowColumns`] order.
const COLUMNS: &str = "key, principal, backend, tool, args_digest, sealed_args, state, requested_at, expires_at, decided_by, decided_at, note";

/// The statements for one table and dialect (`$n` placeholders; SQLite gets `?n`).
#[derive(Debug, Clone)]
pub(crate) struct ApprovalSql {
    /// `$1`–`$9`: key … expires_at; nothing when the key exists.
    pub(crate) insert: String,
    /// `$1` key.
    pub(crate) select: String,
    /// `$1` key, `$2` state, `$3` decided_by, `$4` decided_at, `$5` note; only an awaiting, unexpired row.
    pub(crate) decide: String,
    /// `$1` state (or NULL), `$2` limit; newest first.
    pub(crate) list: String,
    /// `$1` cutoff: rows decided, or expired undecided, before it.
    pub(crate) purge: String,
    /// `$1` since: rows decided at or after it, oldest decision first.
    pub(crate) decided_since: String,
}

impl ApprovalSql {
    pub(crate) fn new(table: &str, dialect: Dialect) -> ApprovalSql {
        let render = |sql: String| dialect.render(&sql);
        ApprovalSql {
            insert: render(format!(
                "INSERT INTO {table} (key, principal, backend, tool, args_digest, sealed_args, state, requested_at, \
                 expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO NOTHING"
            )),
            select: render(format!("SELECT {COLUMNS} FROM {table} WHERE key = $1")),
            decide: render(format!(
                "UPDATE {table} SET state = $2, decided_by = $3, decided_at = $4, note = $5 \
                 WHERE key = $1 AND state = 'awaiting_approval' AND expires_at > $4"
            )),
            list: render(format!(
                "SELECT {COLUMNS} FROM {table} WHERE (CAST($1 AS TEXT) IS NULL OR state = $1) \
                 ORDER BY requested_at DESC, key LIMIT $2"
            )),
            purge: render(format!(
                "DELETE FROM {table} WHERE (decided_at IS NOT NULL AND decided_at < $1) \
                 OR (state = 'awaiting_approval' AND expires_at < $1)"
            )),
            decided_since: render(format!(
                "SELECT {COLUMNS} FROM {table} WHERE decided_at >= $1 ORDER BY decided_at, key"
            )),
        }
    }
}

/// The statement that creates the table if it is missing.
pub(crate) fn create_statement(table: &str, dialect: Dialect) -> String {
    let bytes = if dialect == Dialect::Sqlite { "BLOB" } else { "BYTEA" };
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, principal TEXT NOT NULL, backend TEXT NOT NULL, \
         tool TEXT NOT NULL, args_digest TEXT NOT NULL, sealed_args {bytes} NOT NULL, state TEXT NOT NULL, \
         requested_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, decided_by TEXT, decided_at BIGINT, note TEXT)"
    )
}

/// A row's columns as read from a SQL store, in [`COLUMNS`] order.
pub(crate) type RowColumns =
    (String, String, String, String, String, Vec<u8>, String, i64, i64, Option<String>, Option<i64>, Option<String>);

/// The values of a row's insert, in the insert's order (`$1`–`$9`).
pub(crate) fn insert_values(row: &ApprovalRow) -> (&str, &str, &str, &str, &str, &[u8], &'static str, i64, i64) {
    (
        row.key.as_str(),
        &row.principal,
        &row.backend,
        &row.tool,
        &row.args_digest,
        &row.sealed_args,
        row.state.as_str(),
        to_millis(row.requested_at),
        to_millis(row.expires_at),
    )
}

/// A row read back, refused as corrupt when its state is not one a store writes.
pub(crate) fn from_columns(columns: RowColumns) -> Result<ApprovalRow, LedgerError> {
    let (key, principal, backend, tool, args_digest, sealed_args, state, requested, expires, by, at, note) = columns;
    let state = ApprovalState::parse(&state)
        .filter(|state| *state != ApprovalState::Expired)
        .ok_or_else(|| LedgerError::corrupt(format!("approval {key} has the unknown state {state:?}")))?;
    Ok(ApprovalRow {
        key: ClaimKey::from_stored(key),
        principal,
        backend,
        tool,
        args_digest,
        sealed_args,
        state,
        requested_at: from_millis(requested),
        expires_at: from_millis(expires),
        decided_by: by,
        decided_at: at.map(from_millis),
        note,
    })
}

/// The values of a decision's update, in its order (`$2`–`$5`).
pub(crate) fn decision_values(decision: &Decision) -> (&'static str, &str, i64, Option<&str>) {
    (decision.state().as_str(), &decision.by, to_millis(decision.at), decision.note.as_deref())
}

/// Why a decision was refused, once the conditional update changed nothing: `row` is what the key holds.
fn refusal(key: &ClaimKey, row: Option<ApprovalRow>, at: SystemTime) -> LedgerError {
    match row {
        None => LedgerError::NotFound { key: key.to_string() },
        Some(row) => LedgerError::AlreadyDecided {
            key: key.to_string(),
            state: row.state_at(at),
            by: row.decided_by.unwrap_or_default(),
        },
    }
}

impl LedgerStore {
    /// Creates the request `row` (state `awaiting_approval`) unless one exists under its key; durable once this
    /// returns.
    pub async fn request_approval(&self, row: ApprovalRow) -> Result<ApprovalRequest, LedgerError> {
        row.check()?;
        let row = row.normalized();
        if dispatch!(self.insert_approval(&row))? {
            return Ok(ApprovalRequest::Created(row));
        }
        let existing = self.approval(&row.key).await?;
        existing.map(ApprovalRequest::Existing).ok_or_else(|| LedgerError::unavailable("an approval vanished"))
    }

    /// The request under `key`, if any.
    pub async fn approval(&self, key: &ClaimKey) -> Result<Option<ApprovalRow>, LedgerError> {
        dispatch!(self.approval(key))
    }

    /// Records `decision` on the request under `key`, if it still awaits one and has not expired; returns the
    /// decided row. Otherwise [`LedgerError::NotFound`] or [`LedgerError::AlreadyDecided`] (with the state it
    /// has, `expired` included).
    pub async fn decide_approval(&self, key: &ClaimKey, decision: &Decision) -> Result<ApprovalRow, LedgerError> {
        if decision.note.as_ref().is_some_and(|note| note.len() > MAX_NOTE) {
            return Err(LedgerError::InvalidApproval { problem: "the note exceeds 4096 bytes".into() });
        }
        let decision = Decision { at: truncate_to_millis(decision.at), ..decision.clone() };
        let decided = dispatch!(self.decide_approval(key, &decision))?;
        let row = self.approval(key).await?;
        match row {
            Some(row) if decided => Ok(row),
            row => Err(refusal(key, row, decision.at)),
        }
    }

    /// Deletes the requests decided before `cutoff`, and the undecided ones that expired before it; returns how
    /// many.
    pub async fn purge_approvals(&self, cutoff: SystemTime) -> Result<u64, LedgerError> {
        dispatch!(self.purge_approvals(to_millis(cutoff)))
    }

    /// The requests in `state` as stored (all when `None`), newest first, at most `limit`.
    pub async fn approvals(&self, state: Option<ApprovalState>, limit: usize) -> Result<Vec<ApprovalRow>, LedgerError> {
        dispatch!(self.approvals(state, limit))
    }

    /// The requests decided at or after `since`, oldest decision first (for the gateways to announce decisions
    /// taken elsewhere; see `announcements.rs`).
    pub async fn decided_approvals_since(&self, since: SystemTime) -> Result<Vec<ApprovalRow>, LedgerError> {
        dispatch!(self.decided_approvals_since(to_millis(since)))
    }

    /// The requests still awaiting a decision now (stored as awaiting and not expired), newest first, at most
    /// `limit`: those an approver can still decide.
    pub async fn awaiting_approvals(&self, limit: usize) -> Result<Vec<ApprovalRow>, LedgerError> {
        let now = SystemTime::now();
        let mut rows = self.approvals(Some(ApprovalState::AwaitingApproval), limit).await?;
        rows.retain(|row| row.state_at(now) == ApprovalState::AwaitingApproval);
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_statements_take_numbered_question_marks() {
        let sql = ApprovalSql::new("t", Dialect::Sqlite);
        for statement in [&sql.insert, &sql.select, &sql.decide, &sql.list, &sql.purge] {
            assert!(!statement.contains('$') && statement.contains("?1"), "{statement}");
        }
        assert!(create_statement("t", Dialect::Postgres).contains("BYTEA"));
    }

    #[test]
    fn states_round_trip_and_expired_is_never_stored() {
        for state in [ApprovalState::AwaitingApproval, ApprovalState::Approved, ApprovalState::Denied] {
            assert_eq!(ApprovalState::parse(state.as_str()), Some(state));
        }
        let columns = |state: &str| -> RowColumns {
            ("k".into(), "p".into(), "b".into(), "t".into(), "d".into(), vec![], state.into(), 0, 0, None, None, None)
        };
        assert!(matches!(from_columns(columns("expired")), Err(LedgerError::Corrupt { .. })));
        assert!(matches!(from_columns(columns("done")), Err(LedgerError::Corrupt { .. })));
        assert!(from_columns(columns("approved")).is_ok());
    }
}
