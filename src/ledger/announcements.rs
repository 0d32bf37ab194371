//! Who announces an operator's decision: every gateway sharing the store learns of approval decisions and
//! resolutions by reading them back ([`LedgerStore::decided_approvals_since`], [`LedgerStore::resolutions_since`]),
//! whoever took them (a console, the command line); the first to take a decision's mark here is the one that
//! announces it (counts it, and writes its audit event), so a fleet announces each decision once.
//!
//! Rules:
//! - A decision is named by its kind, what it decided (a call's key; a pin's `backend/kind/name`) and its time in
//!   whole milliseconds: a request is decided once, an `unknown` claim resolved once per time it became
//!   `unknown`, a pin approved once per approval.
//! - Taking a mark is one conditional insert (`ON CONFLICT DO NOTHING`): of all who ask, one is told it won.
//! - Marks leave with the claims' retention ([`LedgerStore::purge_announcements`]); a decision is only looked for
//!   within a short window after it, far shorter than any retention.
//! - The table is additive, like the approvals': created (`IF NOT EXISTS`) on every open, outside the schema
//!   version.

use std::time::SystemTime;

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;
use super::types::to_millis;

/// The table's name (in the configured schema on Postgres).
pub(crate) const ANNOUNCEMENTS_TABLE: &str = "switchyard_announcements";

/// What kind of decision a mark names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Announced {
    /// An approval request's decision (`approved`, `denied`).
    ApprovalDecision,
    /// An `unknown` call's resolution.
    Resolution,
    /// An operator's approval of a pinned definition (named `backend/kind/name`).
    PinApproval,
}

impl Announced {
    pub fn as_str(self) -> &'static str {
        match self {
            Announced::ApprovalDecision => "approval_decision",
            Announced::Resolution => "resolution",
            Announced::PinApproval => "pin_approval",
        }
    }
}

/// The statements for one table and dialect.
#[derive(Debug, Clone)]
pub(crate) struct AnnouncementSql {
    /// `$1` kind, `$2` key, `$3` at (ms); nothing when the mark exists.
    pub(crate) take: String,
    /// `$1` cutoff (ms).
    pub(crate) purge: String,
}

impl AnnouncementSql {
    pub(crate) fn new(table: &str, dialect: Dialect) -> AnnouncementSql {
        AnnouncementSql {
            take: dialect
                .render(&format!("INSERT INTO {table} (kind, key, at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")),
            purge: dialect.render(&format!("DELETE FROM {table} WHERE at < $1")),
        }
    }
}

/// The statement that creates the table if it is missing.
pub(crate) fn create_statement(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (kind TEXT NOT NULL, key TEXT NOT NULL, at BIGINT NOT NULL, \
         PRIMARY KEY (kind, key, at))"
    )
}

impl LedgerStore {
    /// Whether this call took the mark of the decision (`kind`, `key`, `at`): `true` for the first to ask.
    pub async fn take_announcement(&self, kind: Announced, key: &str, at: SystemTime) -> Result<bool, LedgerError> {
        dispatch!(self.take_announcement(kind.as_str(), key, to_millis(at)))
    }

    /// Removes the marks of decisions taken before `cutoff`.
    pub async fn purge_announcements(&self, cutoff: SystemTime) -> Result<u64, LedgerError> {
        dispatch!(self.purge_announcements(to_millis(cutoff)))
    }
}
