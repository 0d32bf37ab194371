//! Pinned tool and prompt definitions beside the claims: one row per (backend, kind, name) holding the digest
//! (and canonical text) of the definition an operator trusts, and the definition a backend offers instead when
//! it changed, so every replica sharing the store serves the same tools.
//!
//! Rules:
//! - Plain types only: digests and definitions are opaque text here (canonicalising is the router's); the
//!   ledger knows nothing of MCP.
//! - [`LedgerStore::trust_pin`] inserts a row only when none exists (first trust); every later change goes
//!   through a conditional statement: [`LedgerStore::offer_pin`] records what the backend offers now (or clears
//!   the offer when the backend went back to the pinned definition), [`LedgerStore::approve_pin`] and
//!   [`LedgerStore::reject_pin`] act only on the offer the operator saw (its digest), so an approval never
//!   accepts a definition nobody looked at.
//! - Every write raises the row's `revision` above every revision in the table; [`LedgerStore::pins_revision`]
//!   (their sum) therefore grows with every write of any replica, which is what replicas poll for changes.
//! - The table is additive, like the revocations': created (`IF NOT EXISTS`) on every open, outside the schema
//!   version.

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;

/// The table's name (in the configured schema on Postgres).
pub(crate) const PINS_TABLE: &str = "switchyard_pins";

/// Whether a pinned item is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinState {
    /// Served (under `pin = "warn"` also while a changed definition is offered).
    Pinned,
    /// Left out of every listing and refused until an operator approves the offered definition.
    Quarantined,
}

impl PinState {
    pub fn as_str(self) -> &'static str {
        match self {
            PinState::Pinned => "pinned",
            PinState::Quarantined => "quarantined",
        }
    }

    fn parse(text: &str) -> Result<PinState, LedgerError> {
        match text {
            "pinned" => Ok(PinState::Pinned),
            "quarantined" => Ok(PinState::Quarantined),
            other => Err(LedgerError::corrupt(format!("a pin has the unknown state {other:?}"))),
        }
    }
}

/// Which item a pin is about: a backend's tool or prompt, by the backend's own name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PinKey {
    pub backend: String,
    /// `"tool"` or `"prompt"`.
    pub kind: String,
    pub name: String,
}

/// One stored pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRow {
    pub key: PinKey,
    /// The trusted definition's digest; empty while nothing was ever trusted (a new item held for approval).
    pub digest: String,
    /// The trusted definition's canonical text (empty with `digest`).
    pub definition: String,
    pub state: PinState,
    /// What the backend offers instead, when it differs from the trusted definition.
    pub offered_digest: Option<String>,
    pub offered: Option<String>,
    /// Unix seconds.
    pub first_seen: u64,
    pub approved_by: Option<String>,
    /// Unix seconds.
    pub approved_at: Option<u64>,
}

/// A backend's current definition of an item, recorded by [`LedgerStore::offer_pin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinOffer {
    pub key: PinKey,
    pub digest: String,
    pub definition: String,
    /// A new offer quarantines the item (`pin = "strict"`); otherwise its state is kept.
    pub quarantine: bool,
}

/// The statements for one table and dialect (`$n` placeholders; SQLite gets `?n`).
#[derive(Debug, Clone)]
pub(crate) struct PinSql {
    /// `$1`–`$3` key, `$4` digest, `$5` definition, `$6` state, `$7` offered_digest, `$8` offered, `$9` first_seen.
    pub(crate) trust: String,
    /// `$1`–`$3` key, `$4` digest, `$5` definition, `$6` 1 to quarantine.
    pub(crate) offer: String,
    /// `$1`–`$3` key, `$4` the offered digest approved, `$5` by, `$6` at.
    pub(crate) approve: String,
    /// `$1`–`$3` key, `$4` the offered digest rejected.
    pub(crate) reject: String,
    /// `$1` backend (or NULL).
    pub(crate) select: String,
    pub(crate) revision: String,
}

impl PinSql {
    pub(crate) fn new(table: &str, dialect: Dialect) -> PinSql {
        let next = format!("(SELECT COALESCE(MAX(revision), 0) + 1 FROM {table})");
        let key = "backend = $1 AND kind = $2 AND name = $3";
        let render = |sql: String| dialect.render(&sql);
        PinSql {
            trust: render(format!(
                "INSERT INTO {table} (backend, kind, name, digest, definition, state, offered_digest, offered, \
                 first_seen, revision) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, {next}) \
                 ON CONFLICT (backend, kind, name) DO NOTHING"
            )),
            offer: render(format!(
                "UPDATE {table} SET \
                 state = CASE WHEN digest = $4 THEN 'pinned' WHEN CAST($6 AS BIGINT) = 1 THEN 'quarantined' \
                 ELSE state END, \
                 offered_digest = CASE WHEN digest = $4 THEN NULL ELSE $4 END, \
                 offered = CASE WHEN digest = $4 THEN NULL ELSE $5 END, revision = {next} \
                 WHERE {key} AND CASE WHEN digest = $4 THEN offered_digest IS NOT NULL \
                 ELSE COALESCE(offered_digest, '') <> $4 END"
            )),
            approve: render(format!(
                "UPDATE {table} SET digest = offered_digest, definition = offered, state = 'pinned', \
                 offered_digest = NULL, offered = NULL, approved_by = $5, approved_at = $6, revision = {next} \
                 WHERE {key} AND offered_digest = $4"
            )),
            reject: render(format!(
                "UPDATE {table} SET state = 'quarantined', revision = {next} WHERE {key} AND offered_digest = $4"
            )),
            select: render(format!(
                "SELECT backend, kind, name, digest, definition, state, offered_digest, offered, first_seen, \
                 approved_by, approved_at FROM {table} WHERE (CAST($1 AS TEXT) IS NULL OR backend = $1) \
                 ORDER BY backend, kind, name"
            )),
            revision: format!("SELECT CAST(COALESCE(SUM(revision), 0) AS BIGINT) FROM {table}"),
        }
    }
}

/// The statement that creates the table if it is missing.
pub(crate) fn create_statement(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, \
         digest TEXT NOT NULL, definition TEXT NOT NULL, state TEXT NOT NULL, offered_digest TEXT, offered TEXT, \
         first_seen BIGINT NOT NULL, approved_by TEXT, approved_at BIGINT, revision BIGINT NOT NULL, \
         PRIMARY KEY (backend, kind, name))"
    )
}

/// A row's columns as the stores read them back, in [`PinSql::select`]'s order.
pub(crate) type StoredPin =
    (String, String, String, String, String, String, Option<String>, Option<String>, i64, Option<String>, Option<i64>);

impl PinRow {
    /// A row read back, refused as corrupt when it cannot have been written here.
    pub(crate) fn from_stored(stored: StoredPin) -> Result<PinRow, LedgerError> {
        let (backend, kind, name, digest, definition, state, offered_digest, offered, first_seen, by, at) = stored;
        let unsigned = |value: i64| {
            u64::try_from(value).map_err(|_| LedgerError::corrupt(format!("a pin of {backend} has a negative time")))
        };
        Ok(PinRow {
            first_seen: unsigned(first_seen)?,
            approved_at: at.map(unsigned).transpose()?,
            state: PinState::parse(&state)?,
            key: PinKey { backend: backend.clone(), kind, name },
            digest,
            definition,
            offered_digest,
            offered,
            approved_by: by,
        })
    }
}

impl LedgerStore {
    /// Records `row` unless its item already has a pin; returns whether it did.
    pub async fn trust_pin(&self, row: &PinRow) -> Result<bool, LedgerError> {
        dispatch!(self.trust_pin(row))
    }

    /// Records what the backend offers now for a pinned item: nothing happens when it is the pinned definition
    /// or the offer already recorded; the pinned definition again withdraws the offer (and any quarantine).
    /// Returns whether the row changed.
    pub async fn offer_pin(&self, offer: &PinOffer) -> Result<bool, LedgerError> {
        dispatch!(self.offer_pin(offer))
    }

    /// Accepts the offered definition whose digest is `offered` (recorded with `by` and `at`, unix seconds): it
    /// becomes the pinned one and the item is served. Returns false when that is no longer what is offered.
    pub async fn approve_pin(&self, key: &PinKey, offered: &str, by: &str, at: u64) -> Result<bool, LedgerError> {
        dispatch!(self.approve_pin(key, offered, by, at))
    }

    /// Keeps the item quarantined with the offered definition whose digest is `offered` (also under
    /// `pin = "warn"`). Returns false when that is no longer what is offered.
    pub async fn reject_pin(&self, key: &PinKey, offered: &str) -> Result<bool, LedgerError> {
        dispatch!(self.reject_pin(key, offered))
    }

    /// The pins of `backend` (every backend's when `None`), by backend, kind and name.
    pub async fn pins(&self, backend: Option<&str>) -> Result<Vec<PinRow>, LedgerError> {
        dispatch!(self.pins(backend))
    }

    /// A number that grows with every write to the pins (of any replica); equal numbers mean nothing changed.
    pub async fn pins_revision(&self) -> Result<i64, LedgerError> {
        dispatch!(self.pins_revision())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_statements_take_numbered_question_marks() {
        let sql = PinSql::new("t", Dialect::Sqlite);
        for statement in [&sql.trust, &sql.offer, &sql.approve, &sql.reject, &sql.select] {
            assert!(!statement.contains('$') && statement.contains("?1"), "{statement}");
        }
    }

    #[test]
    fn unknown_states_and_negative_times_are_corrupt() {
        let stored = |state: &str, first_seen| {
            let text = || String::from("x");
            (text(), text(), text(), text(), text(), state.to_owned(), None, None, first_seen, None, None)
        };
        assert!(matches!(PinRow::from_stored(stored("lost", 1)), Err(LedgerError::Corrupt { .. })));
        assert!(matches!(PinRow::from_stored(stored("pinned", -1)), Err(LedgerError::Corrupt { .. })));
        assert_eq!(
            PinRow::from_stored(stored("quarantined", 3)).map(|row| row.state).ok(),
            Some(PinState::Quarantined)
        );
    }
}
