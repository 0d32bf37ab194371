//! The SQL both database stores run, written once with `$N` parameters and rendered per dialect (SQLite takes
//! the same numbered parameters as `?N`), and the row shape they read back.
//!
//! Rules:
//! - Every state-changing rule of [`super::rules`] is in the `WHERE` clause of one statement, so it holds across
//!   processes without explicit locks: a conditional `UPDATE`/`DELETE` either applies or changes nothing.
//! - State names in SQL are the spellings of [`ClaimState::as_str`] (a test checks them).
//! - Times are `BIGINT` milliseconds since the Unix epoch, results JSON text: both dialects store them natively
//!   and the text keeps the result's key order exactly.

use crate::raw_json::RawJson;

use super::error::LedgerError;
use super::types::{ClaimKey, ClaimRecord, ClaimState, from_millis};

/// The claims table's name (in the configured schema on Postgres).
pub(crate) const CLAIMS_TABLE: &str = "switchyard_claims";

/// The schema version this build creates and understands.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// The most claims one purge statement deletes: about a millisecond of the SQLite writer's time, so calls queued
/// behind a slice wait no longer than that (BENCHMARKS.md, *The SQLite retention purge under calls*).
pub(crate) const PURGE_SLICE: u64 = 128;

/// Purges in slices: runs `slice` (one statement deleting at most [`PURGE_SLICE`] claims, returning how many) until
/// one deletes fewer, yielding in between so the writes queued meanwhile go first. Returns the total.
pub(crate) async fn purge_in_slices<F, Fut>(mut slice: F) -> Result<u64, LedgerError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<u64, LedgerError>>,
{
    let mut purged = 0;
    loop {
        let removed = slice().await?;
        purged += removed;
        if removed < PURGE_SLICE {
            return Ok(purged);
        }
        tokio::task::yield_now().await;
    }
}

/// How many times a store re-runs a conditional statement that lost a race before giving up.
pub(crate) const RACE_ATTEMPTS: usize = 4;

/// Every column of the claims table, in the order [`RawRow`] reads them.
pub(crate) const COLUMNS: &str = "key, id, principal, agent_session, backend, tool, args_digest, state, result, result_digest, \
                       error, created_at, updated_at, owner, lease_until";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `sql` written with `$n` placeholders, as this dialect takes them (SQLite: `?n`).
    pub(crate) fn render(self, sql: &str) -> String {
        match self {
            Dialect::Sqlite => sql.replace('$', "?"),
            Dialect::Postgres => sql.to_owned(),
        }
    }

    /// An `UPDATE {t} SET {set} WHERE {filter}` of many claims. On PostgreSQL the rows are locked first, in key
    /// order (byte order, as the batch writers sort their jobs): every transaction that holds several claims
    /// then takes them in one order, so none waits for another in a cycle (see `postgres::batch`). SQLite has
    /// one writer at a time and needs no such care.
    fn bulk_update(self, set: &str, filter: &str, returning_keys: bool) -> String {
        match self {
            Dialect::Sqlite => {
                let returning = if returning_keys { " RETURNING key" } else { "" };
                format!("UPDATE {{t}} SET {set} WHERE {filter}{returning}")
            }
            Dialect::Postgres => {
                let returning = if returning_keys { " RETURNING claim.key" } else { "" };
                format!(
                    "WITH locked AS MATERIALIZED (SELECT key FROM {{t}} WHERE {filter} ORDER BY key COLLATE \"C\" \
                     FOR UPDATE) UPDATE {{t}} AS claim SET {set} FROM locked WHERE claim.key = locked.key{returning}"
                )
            }
        }
    }

    /// How the claims' key is compared: byte by byte. SQLite's default does; PostgreSQL's default is the
    /// database's collation, whose comparisons go through the C library's locale and were a tenth of the
    /// server's CPU on the claims' key index (docs/ledger.md, *Where a durable call's time goes*).
    fn key_collation(self) -> &'static str {
        if self == Dialect::Postgres { " COLLATE \"C\"" } else { "" }
    }

    /// The claims' state constraint. SQLite checks `IN` of three or more values by building a temporary table each
    /// time the row is written (every claim and every settle), so its tables spell the same test with `OR`.
    pub(crate) fn state_check(self) -> &'static str {
        match self {
            Dialect::Sqlite => STATE_CHECK,
            Dialect::Postgres => STATE_CHECK_IN,
        }
    }

    /// What a table clustered on its key is declared with: in SQLite it saves a separate key index, so a write
    /// touches one b-tree less. For tables of small rows; the claims table is not clustered (see
    /// [`create_statements`]).
    pub(crate) fn clustered(self) -> &'static str {
        if self == Dialect::Sqlite { " WITHOUT ROWID" } else { "" }
    }
}

/// The claims' state constraint as every PostgreSQL table and the SQLite files made before the `OR` spelling
/// declare it.
pub(crate) const STATE_CHECK_IN: &str = "CHECK (state IN ('in_flight', 'completed', 'unknown'))";
/// The same constraint as SQLite tables declare it (see [`Dialect::state_check`]).
pub(crate) const STATE_CHECK: &str = "CHECK (state = 'in_flight' OR state = 'completed' OR state = 'unknown')";

/// A unix time as the stores keep and compare it.
pub(crate) fn stored_time(unix_seconds: u64) -> i64 {
    i64::try_from(unix_seconds).unwrap_or(i64::MAX)
}

/// Every statement, rendered for one table and dialect.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    /// `$1` key … `$7` args_digest, `$8` now, `$9` owner, `$10` lease_until.
    pub(crate) insert: String,
    /// `$1` key.
    pub(crate) select: String,
    /// `$1` key, `$2` owner, `$3` result, `$4` result_digest, `$5` now.
    pub(crate) complete: String,
    /// `$1` key, `$2` owner, `$3` error, `$4` now.
    pub(crate) mark_unknown: String,
    /// `$1` key, `$2` owner.
    pub(crate) release: String,
    /// `$1` owner, `$2` lease_until.
    pub(crate) renew: String,
    /// `$1` now, `$2` error; returns the keys.
    pub(crate) expire: String,
    /// `$1` owner, `$2` error, `$3` now; returns the keys.
    pub(crate) orphan: String,
    /// `$1` cutoff, `$2` most rows deleted.
    pub(crate) purge: String,
    /// `$1` state, `$2` principal, `$3` backend, `$4` tool, `$5` since (each NULL for any), `$6` limit.
    pub(crate) list: String,
    /// `$1` key, `$2` owner (the operator), `$3` note, `$4` now.
    pub(crate) resolve_completed: String,
    /// `$1` key.
    pub(crate) resolve_failed: String,
}

impl Statements {
    pub(crate) fn new(table: &str, dialect: Dialect) -> Statements {
        let render = |template: &str| dialect.render(&template.replace("{t}", table).replace("{columns}", COLUMNS));
        Statements {
            insert: render(
                "INSERT INTO {t} (key, id, principal, agent_session, backend, tool, args_digest, state, created_at, \
                 updated_at, owner, lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7, 'in_flight', $8, $8, $9, $10) \
                 ON CONFLICT (key) DO NOTHING",
            ),
            select: render("SELECT {columns} FROM {t} WHERE key = $1"),
            complete: render(
                "UPDATE {t} SET state = 'completed', result = $3, result_digest = $4, error = NULL, updated_at = $5 \
                 WHERE key = $1 AND owner = $2 AND state IN ('in_flight', 'unknown')",
            ),
            mark_unknown: render(
                "UPDATE {t} SET state = 'unknown', error = $3, updated_at = $4 \
                 WHERE key = $1 AND owner = $2 AND state IN ('in_flight', 'unknown')",
            ),
            release: render("DELETE FROM {t} WHERE key = $1 AND owner = $2 AND state IN ('in_flight', 'unknown')"),
            renew: render(&dialect.bulk_update("lease_until = $2", "owner = $1 AND state = 'in_flight'", false)),
            expire: render(&dialect.bulk_update(
                "state = 'unknown', error = $2, updated_at = $1",
                "state = 'in_flight' AND lease_until < $1",
                true,
            )),
            orphan: render(&dialect.bulk_update(
                "state = 'unknown', error = $2, updated_at = $3",
                "owner = $1 AND state = 'in_flight'",
                true,
            )),
            // A claim settles after it is created, so `created_at < $1` only narrows the search to the index. At
            // most `$2` rows at a time: one statement holds the writer (SQLite's only one) while it runs.
            purge: render(
                "DELETE FROM {t} WHERE key IN (SELECT key FROM {t} WHERE created_at < $1 AND updated_at < $1 \
                 AND state IN ('completed', 'unknown') LIMIT $2)",
            ),
            list: render(
                // The casts give Postgres the parameters' types where `IS NULL` alone would leave them undetermined.
                "SELECT {columns} FROM {t} WHERE (CAST($1 AS TEXT) IS NULL OR state = $1) \
                 AND (CAST($2 AS TEXT) IS NULL OR principal = $2) AND (CAST($3 AS TEXT) IS NULL OR backend = $3) \
                 AND (CAST($4 AS TEXT) IS NULL OR tool = $4) AND (CAST($5 AS BIGINT) IS NULL OR created_at >= $5) \
                 ORDER BY created_at DESC, key LIMIT $6",
            ),
            resolve_completed: render(
                "UPDATE {t} SET state = 'completed', owner = $2, error = $3, updated_at = $4 \
                 WHERE key = $1 AND state = 'unknown'",
            ),
            resolve_failed: render("DELETE FROM {t} WHERE key = $1 AND state = 'unknown'"),
        }
    }
}

/// The statements that create schema version 1 (tables and indexes; Postgres adds its trigger).
pub(crate) fn create_statements(table: &str, dialect: Dialect) -> Vec<String> {
    let (state_check, key_collation) = (dialect.state_check(), dialect.key_collation());
    vec![
        // In SQLite a rowid table, not one clustered on the key: rows are stored in insertion order, so a batch's
        // claims share the newest pages and its completions find their rows there, where a table clustered on
        // the key put every agent session's claims in a region of their own and made each claim and each
        // completion dirty a page of its own (docs/ledger.md, *Where a durable call's time goes*); the other
        // indexes then carry the row's 8-byte id instead of the key. Files made clustered keep their layout.
        format!(
            "CREATE TABLE {table} (
                key TEXT{key_collation} NOT NULL PRIMARY KEY,
                id TEXT NOT NULL,
                principal TEXT NOT NULL,
                agent_session TEXT NOT NULL,
                backend TEXT NOT NULL,
                tool TEXT NOT NULL,
                args_digest TEXT NOT NULL,
                state TEXT NOT NULL {state_check},
                result TEXT,
                result_digest TEXT,
                error TEXT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                owner TEXT NOT NULL,
                lease_until BIGINT NOT NULL
            )"
        ),
        // Few claims are in flight at any time, so renewal, orphaning and expiry scan a small partial index, and
        // settling a claim removes it from there. Every index is written on the hot path, so there are only two.
        format!("CREATE INDEX {CLAIMS_TABLE}_in_flight ON {table} (lease_until) WHERE state = 'in_flight'"),
        // Listing newest first, and purging by age (see `purge`).
        format!("CREATE INDEX {CLAIMS_TABLE}_created ON {table} (created_at)"),
    ]
}

/// One row as the drivers read it, before it is checked.
#[derive(Debug)]
pub(crate) struct RawRow {
    pub(crate) key: String,
    pub(crate) id: String,
    pub(crate) principal: String,
    pub(crate) session: String,
    pub(crate) backend: String,
    pub(crate) tool: String,
    pub(crate) args_digest: String,
    pub(crate) state: String,
    pub(crate) result: Option<String>,
    pub(crate) result_digest: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) owner: String,
    pub(crate) lease_until: i64,
}

impl RawRow {
    /// The record, or [`LedgerError::Corrupt`] when a value cannot have been written by a ledger.
    pub(crate) fn into_record(self) -> Result<ClaimRecord, LedgerError> {
        let state = ClaimState::parse(&self.state)
            .ok_or_else(|| LedgerError::corrupt(format!("claim {} has an unknown state {:?}", self.key, self.state)))?;
        let result = self
            .result
            .map(RawJson::from_text)
            .transpose()
            .map_err(|error| LedgerError::corrupt(format!("claim {} has a malformed result: {error}", self.key)))?;
        Ok(ClaimRecord {
            key: ClaimKey::from_stored(self.key),
            id: self.id,
            principal: self.principal,
            session: self.session,
            backend: self.backend,
            tool: self.tool,
            args_digest: self.args_digest,
            state,
            result,
            result_digest: self.result_digest,
            error: self.error,
            created_at: from_millis(self.created_at),
            updated_at: from_millis(self.updated_at),
            owner: self.owner,
            lease_until: from_millis(self.lease_until),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_gets_numbered_question_marks() {
        let sqlite = Statements::new("t", Dialect::Sqlite);
        assert_eq!(sqlite.select, format!("SELECT {COLUMNS} FROM t WHERE key = ?1"));
        assert!(!sqlite.list.contains('$'));
        let postgres = Statements::new("s.t", Dialect::Postgres);
        assert!(postgres.complete.contains("WHERE key = $1 AND owner = $2"));
    }

    #[tokio::test]
    async fn a_purge_runs_slice_after_slice_until_a_short_one() {
        let mut slices = vec![PURGE_SLICE, PURGE_SLICE, 7].into_iter();
        let mut asked = 0;
        let purged = purge_in_slices(|| {
            asked += 1;
            std::future::ready(Ok(slices.next().unwrap_or(0)))
        });
        assert_eq!(purged.await.expect("purge"), 2 * PURGE_SLICE + 7);
        assert_eq!(asked, 3, "a short slice is the last");
        let failing = purge_in_slices(|| std::future::ready(Err(LedgerError::Corrupt { cause: "down".into() })));
        assert!(failing.await.is_err(), "a failed slice ends the purge with its error");
    }

    #[test]
    fn state_literals_match_the_enum() {
        let every = Statements::new("t", Dialect::Postgres);
        let text = [every.insert, every.complete, every.mark_unknown, every.expire, every.purge].join(" ");
        for state in [ClaimState::InFlight, ClaimState::Completed, ClaimState::Unknown] {
            assert!(text.contains(&format!("'{}'", state.as_str())), "{state}");
        }
        assert!(create_statements("t", Dialect::Postgres)[0].contains("'in_flight', 'completed', 'unknown'"));
        let sqlite = &create_statements("t", Dialect::Sqlite)[0];
        assert!(sqlite.contains(STATE_CHECK) && !sqlite.contains(STATE_CHECK_IN), "{sqlite}");
        for state in [ClaimState::InFlight, ClaimState::Completed, ClaimState::Unknown] {
            assert!(STATE_CHECK.contains(&format!("state = '{}'", state.as_str())), "{state}");
        }
    }

    #[test]
    fn bad_rows_are_corrupt() {
        let row = || RawRow {
            key: "idem:1:a:b".into(),
            id: "i".into(),
            principal: "a".into(),
            session: "s".into(),
            backend: "b".into(),
            tool: "t".into(),
            args_digest: "d".into(),
            state: "completed".into(),
            result: Some("{\"a\":1}".into()),
            result_digest: None,
            error: None,
            created_at: 1,
            updated_at: 2,
            owner: "o".into(),
            lease_until: 3,
        };
        assert_eq!(row().into_record().expect("valid").state, ClaimState::Completed);
        assert!(matches!(RawRow { state: "done".into(), ..row() }.into_record(), Err(LedgerError::Corrupt { .. })));
        let malformed = RawRow { result: Some("{".into()), ..row() }.into_record();
        assert!(matches!(malformed, Err(LedgerError::Corrupt { .. })));
    }
}
