//! Limit counters on SQLite: the `switchyard_limit_counters` table in the ledger's own file, one statement per
//! operation on the worker thread (the gateway does not share them on SQLite; they are here so every store keeps
//! the same rows).

use std::sync::LazyLock;

use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::ledger::error::LedgerError;
use crate::ledger::limit_counters::{CounterRow, LIMIT_COUNTERS_TABLE, LimitCounter, LimitCounterSql};
use crate::ledger::sql::Dialect;

static SQL: LazyLock<LimitCounterSql> = LazyLock::new(|| LimitCounterSql::new(LIMIT_COUNTERS_TABLE, Dialect::Sqlite));

impl SqliteStore {
    pub(crate) async fn limit_counter(&self, limit: &str, principal: &str) -> Result<Option<CounterRow>, LedgerError> {
        let (limit, principal) = (limit.to_owned(), principal.to_owned());
        self.inner
            .worker
            .run(move |db| {
                let mut statement = db.conn.prepare_cached(&SQL.select)?;
                let row = statement.query_row(params![limit, principal], |row| {
                    Ok(CounterRow { tat: row.get(0)?, window: row.get(1)?, used: row.get(2)? })
                });
                Ok(row.optional()?)
            })
            .await
    }

    pub(crate) async fn swap_limit_counter(
        &self,
        limit: &str,
        principal: &str,
        read: Option<CounterRow>,
        new: CounterRow,
    ) -> Result<bool, LedgerError> {
        let (limit, principal) = (limit.to_owned(), principal.to_owned());
        self.inner
            .worker
            .run(move |db| {
                let changed = match read {
                    None => db
                        .conn
                        .prepare_cached(&SQL.insert)?
                        .execute(params![limit, principal, new.tat, new.window, new.used])?,
                    Some(old) => db.conn.prepare_cached(&SQL.update)?.execute(params![
                        limit, principal, new.tat, new.window, new.used, old.tat, old.window, old.used
                    ])?,
                };
                Ok(changed == 1)
            })
            .await
    }

    pub(crate) async fn limit_counters(&self) -> Result<Vec<LimitCounter>, LedgerError> {
        self.inner
            .worker
            .run(move |db| {
                let mut statement = db.conn.prepare_cached(&SQL.list)?;
                let rows = statement.query_map([], |row| {
                    let counter = CounterRow { tat: row.get(2)?, window: row.get(3)?, used: row.get(4)? };
                    Ok(LimitCounter { limit: row.get(0)?, principal: row.get(1)?, row: counter })
                })?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }
}
