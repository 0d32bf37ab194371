//! Limit counters beside the claims: one row per (limit, principal) holding three integers the router's limits
//! read and replace, so every replica sharing a PostgreSQL store counts against the same allowance.
//!
//! Rules:
//! - Plain integers only: what they mean (a bucket's arrival time, a quota's window and its count) is the
//!   router's; the ledger only reads rows and replaces one when it still holds what the caller read
//!   ([`LedgerStore::swap_limit_counter`], a compare-and-swap), so two replicas never both spend one token.
//! - The table is additive, like the backend tokens': created (`IF NOT EXISTS`) on every open, outside the schema
//!   version. Every store has it; the gateway shares it only on PostgreSQL (memory and SQLite serve one gateway,
//!   whose limits count in memory).

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;

/// The table's name (in the configured schema on Postgres).
pub(crate) const LIMIT_COUNTERS_TABLE: &str = "switchyard_limit_counters";

/// The three integers of one (limit, principal).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterRow {
    pub tat: i64,
    pub window: i64,
    pub used: i64,
}

/// A stored row with its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitCounter {
    pub limit: String,
    pub principal: String,
    pub row: CounterRow,
}

/// The statements for one table and dialect (`$n` placeholders; SQLite gets `?n`).
#[derive(Debug, Clone)]
pub(crate) struct LimitCounterSql {
    /// `$1` limit, `$2` principal.
    pub(crate) select: String,
    /// `$1` limit, `$2` principal, `$3` tat, `$4` window, `$5` used; changes nothing when the row exists.
    pub(crate) insert: String,
    /// As `insert`, then `$6`–`$8` the values read; changes nothing when the row no longer holds them.
    pub(crate) update: String,
    pub(crate) list: String,
}

impl LimitCounterSql {
    pub(crate) fn new(table: &str, dialect: Dialect) -> LimitCounterSql {
        let render = |sql: String| dialect.render(&sql);
        let key = "limit_key = $1 AND principal = $2";
        LimitCounterSql {
            select: render(format!("SELECT tat, win, used FROM {table} WHERE {key}")),
            insert: render(format!(
                "INSERT INTO {table} (limit_key, principal, tat, win, used) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (limit_key, principal) DO NOTHING"
            )),
            update: render(format!(
                "UPDATE {table} SET tat = $3, win = $4, used = $5 WHERE {key} AND tat = $6 AND win = $7 AND used = $8"
            )),
            list: render(format!(
                "SELECT limit_key, principal, tat, win, used FROM {table} ORDER BY limit_key, principal"
            )),
        }
    }
}

/// The statement that creates the table if it is missing.
pub(crate) fn create_statement(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (limit_key TEXT NOT NULL, principal TEXT NOT NULL, tat BIGINT NOT NULL, \
         win BIGINT NOT NULL, used BIGINT NOT NULL, PRIMARY KEY (limit_key, principal))"
    )
}

impl LedgerStore {
    /// The row of (`limit`, `principal`), if any.
    pub async fn limit_counter(&self, limit: &str, principal: &str) -> Result<Option<CounterRow>, LedgerError> {
        dispatch!(self.limit_counter(limit, principal))
    }

    /// Replaces the row of (`limit`, `principal`) with `new` if it still holds `read` (`None`: there was no row);
    /// whether it did. Durable once this returns.
    pub async fn swap_limit_counter(
        &self,
        limit: &str,
        principal: &str,
        read: Option<CounterRow>,
        new: CounterRow,
    ) -> Result<bool, LedgerError> {
        dispatch!(self.swap_limit_counter(limit, principal, read, new))
    }

    /// Every row, by limit then principal.
    pub async fn limit_counters(&self) -> Result<Vec<LimitCounter>, LedgerError> {
        dispatch!(self.limit_counters())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_statements_take_numbered_question_marks() {
        let sql = LimitCounterSql::new("t", Dialect::Sqlite);
        for statement in [&sql.select, &sql.insert, &sql.update] {
            assert!(!statement.contains('$') && statement.contains("?1"), "{statement}");
        }
        assert!(LimitCounterSql::new("s.t", Dialect::Postgres).update.starts_with("UPDATE s.t SET"));
    }
}
