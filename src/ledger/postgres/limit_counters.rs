//! Limit counters on PostgreSQL: the `switchyard_limit_counters` table every replica shares. A replica touches
//! it only when a lease of tokens runs out (see the router's limits), so its statements are not prepared per
//! connection.

use tokio_postgres::Row;

use super::PostgresStore;
use crate::ledger::error::LedgerError;
use crate::ledger::limit_counters::{CounterRow, LimitCounter};

/// The three integers of `row`, starting at column `first`.
fn counter(row: &Row, first: usize) -> Result<CounterRow, LedgerError> {
    let read =
        || Ok(CounterRow { tat: row.try_get(first)?, window: row.try_get(first + 1)?, used: row.try_get(first + 2)? });
    read()
        .map_err(|error: tokio_postgres::Error| LedgerError::corrupt(format!("unreadable limit counter row: {error}")))
}

impl PostgresStore {
    pub(crate) async fn limit_counter(&self, limit: &str, principal: &str) -> Result<Option<CounterRow>, LedgerError> {
        let sql = self.inner.limit_counter_sql.select.as_str();
        let row = self.inner.conn.run(|db| async move { Ok(db.client.query_opt(sql, &[&limit, &principal]).await?) });
        match row.await? {
            None => Ok(None),
            Some(row) => counter(&row, 0).map(Some),
        }
    }

    pub(crate) async fn swap_limit_counter(
        &self,
        limit: &str,
        principal: &str,
        read: Option<CounterRow>,
        new: CounterRow,
    ) -> Result<bool, LedgerError> {
        let sql = &self.inner.limit_counter_sql;
        let changed = self
            .inner
            .conn
            .run(|db| async move {
                let changed = match read {
                    None => {
                        let values: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                            [&limit, &principal, &new.tat, &new.window, &new.used];
                        db.client.execute(sql.insert.as_str(), &values).await?
                    }
                    Some(old) => {
                        let values: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
                            [&limit, &principal, &new.tat, &new.window, &new.used, &old.tat, &old.window, &old.used];
                        db.client.execute(sql.update.as_str(), &values).await?
                    }
                };
                Ok(changed)
            })
            .await?;
        Ok(changed == 1)
    }

    pub(crate) async fn limit_counters(&self) -> Result<Vec<LimitCounter>, LedgerError> {
        let sql = self.inner.limit_counter_sql.list.as_str();
        let rows = self.inner.conn.run(|db| async move { Ok(db.client.query(sql, &[]).await?) }).await?;
        rows.iter()
            .map(|row| {
                let unreadable = |error| LedgerError::corrupt(format!("unreadable limit counter row: {error}"));
                let (limit, principal) = (row.try_get(0).map_err(unreadable)?, row.try_get(1).map_err(unreadable)?);
                Ok(LimitCounter { limit, principal, row: counter(row, 2)? })
            })
            .collect()
    }
}
