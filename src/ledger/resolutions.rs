//! The history of operators' resolutions of `unknown` calls: who settled which call how, when and why, with the
//! call as it stood (who made it, its tool, its arguments' digest, why its outcome was unknown).
//!
//! Rules:
//! - A resolution is recorded in the same atomic step that settles the claim (one statement on PostgreSQL, one
//!   transaction on SQLite, one critical section in memory), and only when the claim was `unknown`; what the
//!   claim becomes is unchanged ([`Resolution::effect`]): a `--failed` claim is still deleted so a retry runs the
//!   call, and its history row is what keeps the record.
//! - A key may gather several rows (a call resolved `--failed`, run again, and resolved again); they are read
//!   oldest first. The rows are kept whatever the retention (operators' acts are few).
//! - The table is created when missing (`CREATE TABLE IF NOT EXISTS`), so a ledger written before it existed
//!   keeps working and gains it at its next open.

use std::time::SystemTime;

use super::approvals::MAX_NOTE;
use super::error::LedgerError;
use super::sql::Dialect;
use super::types::{ClaimKey, ClaimRecord, Resolution, from_millis, to_millis};

pub const RESOLUTIONS_TABLE: &str = "switchyard_resolutions";

/// An operator's resolution of an `unknown` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolve {
    pub resolution: Resolution,
    /// Who resolved (the OS user, or an admin principal).
    pub by: String,
    pub note: Option<String>,
}

impl Resolve {
    /// Refuses a note longer than an approval's.
    pub(crate) fn check(&self) -> Result<(), LedgerError> {
        match &self.note {
            Some(note) if note.len() > MAX_NOTE => {
                Err(LedgerError::InvalidResolution { problem: "the note exceeds 4096 bytes".into() })
            }
            _ => Ok(()),
        }
    }
}

/// One recorded resolution and the call it settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolutionRecord {
    pub key: ClaimKey,
    pub resolution: Resolution,
    pub by: String,
    pub at: SystemTime,
    pub note: Option<String>,
    pub principal: String,
    pub session: String,
    pub backend: String,
    pub tool: String,
    pub args_digest: String,
    pub started: SystemTime,
    /// Why the outcome was unknown.
    pub error: Option<String>,
}

impl ResolutionRecord {
    /// The row recording `resolve` of `claim` at `at`.
    pub(crate) fn of(claim: &ClaimRecord, resolve: &Resolve, at: SystemTime) -> ResolutionRecord {
        ResolutionRecord {
            key: claim.key.clone(),
            resolution: resolve.resolution,
            by: resolve.by.clone(),
            at,
            note: resolve.note.clone(),
            principal: claim.principal.clone(),
            session: claim.session.clone(),
            backend: claim.backend.clone(),
            tool: claim.tool.clone(),
            args_digest: claim.args_digest.clone(),
            started: claim.created_at,
            error: claim.error.clone(),
        }
    }
}

/// Which resolutions a store reads: one call's, or every call's since a time (unix milliseconds).
#[derive(Debug, Clone)]
pub(crate) enum Pick {
    Key(String),
    Since(i64),
}

/// The columns written and read, in order.
const COLUMNS: &str = "key, resolution, resolved_by, resolved_at, note, principal, agent_session, backend, tool, args_digest, created_at, \
     error";
/// The claim's columns a resolution copies (after `key` and the resolution's own four).
const FROM_CLAIM: &str = "principal, agent_session, backend, tool, args_digest, created_at, error";

/// A row's columns as read from a SQL store, in [`COLUMNS`] order.
pub(crate) type Columns =
    (String, String, String, i64, Option<String>, String, String, String, String, String, i64, Option<String>);

/// The statements of the table. Parameters: `$1` key, `$2` resolution, `$3` by, `$4` at, `$5` note; PostgreSQL's
/// `complete` adds `$6` owner and `$7` the claim's note.
#[derive(Debug)]
pub(crate) struct ResolutionSql {
    /// SQLite: copies an `unknown` claim into the history (the claim is changed next, in the same transaction).
    pub(crate) record: String,
    /// PostgreSQL: records and completes an `unknown` claim in one statement.
    pub(crate) complete: String,
    /// PostgreSQL: records and deletes an `unknown` claim in one statement.
    pub(crate) delete: String,
    /// `$1` key; oldest first.
    pub(crate) select: String,
    /// `$1` since: every key's resolutions at or after it, oldest first.
    pub(crate) since: String,
}

impl ResolutionSql {
    pub(crate) fn new(claims: &str, table: &str, dialect: Dialect) -> ResolutionSql {
        let copy = |from: &str| {
            format!(
                "INSERT INTO {table} ({COLUMNS}) SELECT key, CAST($2 AS TEXT), CAST($3 AS TEXT), CAST($4 AS BIGINT), \
                 CAST($5 AS TEXT), {FROM_CLAIM} FROM {from}"
            )
        };
        ResolutionSql {
            record: dialect.render(&format!("{} WHERE key = $1 AND state = 'unknown'", copy(claims))),
            complete: format!(
                "WITH old AS (SELECT key, {FROM_CLAIM} FROM {claims} WHERE key = $1 AND state = 'unknown' FOR UPDATE), \
                 changed AS (UPDATE {claims} SET state = 'completed', owner = $6, error = $7, updated_at = $4 \
                 WHERE key IN (SELECT key FROM old) RETURNING key) {} JOIN changed USING (key)",
                copy("old"),
            ),
            delete: format!(
                "WITH gone AS (DELETE FROM {claims} WHERE key = $1 AND state = 'unknown' RETURNING key, {FROM_CLAIM}) \
                 {}",
                copy("gone"),
            ),
            select: dialect
                .render(&format!("SELECT {COLUMNS} FROM {table} WHERE key = $1 ORDER BY resolved_at, resolution")),
            since: dialect.render(&format!(
                "SELECT {COLUMNS} FROM {table} WHERE resolved_at >= $1 ORDER BY resolved_at, key, resolution"
            )),
        }
    }

    /// The select of `pick`, whose `$1` is [`Pick::value`].
    pub(crate) fn select_of(&self, pick: &Pick) -> &str {
        match pick {
            Pick::Key(_) => &self.select,
            Pick::Since(_) => &self.since,
        }
    }
}

/// The statements that create the table and its index if they are missing.
pub(crate) fn create_statements(table: &str) -> [String; 2] {
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (key TEXT NOT NULL, resolution TEXT NOT NULL, resolved_by TEXT NOT NULL, \
             resolved_at BIGINT NOT NULL, note TEXT, principal TEXT NOT NULL, agent_session TEXT NOT NULL, \
             backend TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL, created_at BIGINT NOT NULL, error TEXT)"
        ),
        format!("CREATE INDEX IF NOT EXISTS {RESOLUTIONS_TABLE}_key ON {table} (key)"),
    ]
}

/// The values of `$2`–`$5` for `resolve` at `at`.
pub(crate) fn values(resolve: &Resolve, at: SystemTime) -> (&'static str, &str, i64, Option<&str>) {
    (resolve.resolution.state(), &resolve.by, to_millis(at), resolve.note.as_deref())
}

/// A row read back, refused as corrupt when its resolution is not one a store writes.
pub(crate) fn from_columns(columns: Columns) -> Result<ResolutionRecord, LedgerError> {
    let (key, resolution, by, at, note, principal, session, backend, tool, args_digest, started, error) = columns;
    let resolution = Resolution::parse_state(&resolution).ok_or_else(|| {
        LedgerError::corrupt(format!("the resolution {resolution:?} of {key} is not one Switchyard writes"))
    })?;
    Ok(ResolutionRecord {
        key: ClaimKey::parse(&key)
            .map_err(|_| LedgerError::corrupt(format!("the resolved key {key:?} is malformed")))?,
        resolution,
        by,
        at: from_millis(at),
        note,
        principal,
        session,
        backend,
        tool,
        args_digest,
        started: from_millis(started),
        error,
    })
}
