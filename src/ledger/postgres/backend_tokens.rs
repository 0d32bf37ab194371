//! Backend OAuth tokens on PostgreSQL: the `switchyard_backend_tokens` table every replica shares. These
//! operations are rare (a token obtained or refreshed, an operator's list), so their statements are not prepared
//! per connection.

use super::PostgresStore;
use crate::ledger::backend_tokens::{BackendTokenRow, TokenFilter};
use crate::ledger::error::LedgerError;
use crate::ledger::sql::stored_time;

impl PostgresStore {
    pub(crate) async fn put_backend_token(&self, row: &BackendTokenRow) -> Result<(), LedgerError> {
        let sql = self.inner.backend_token_sql.put.as_str();
        let (expires_at, updated_at) = (row.expires_at.map(stored_time), stored_time(row.updated_at));
        self.inner
            .conn
            .run(|db| async move {
                let values: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
                    [&row.principal, &row.backend, &row.sealed, &row.scopes, &expires_at, &updated_at];
                db.client.execute(sql, &values).await?;
                Ok(())
            })
            .await
    }

    pub(crate) async fn backend_tokens(&self, filter: &TokenFilter) -> Result<Vec<BackendTokenRow>, LedgerError> {
        let sql = self.inner.backend_token_sql.select.as_str();
        let (principal, backend) = (filter.principal.as_deref(), filter.backend.as_deref());
        let rows =
            self.inner.conn.run(|db| async move { Ok(db.client.query(sql, &[&principal, &backend]).await?) }).await?;
        rows.iter()
            .map(|row| {
                let unreadable = |error| LedgerError::corrupt(format!("unreadable backend token row: {error}"));
                BackendTokenRow::from_stored(
                    row.try_get(0).map_err(unreadable)?,
                    row.try_get(1).map_err(unreadable)?,
                    row.try_get(2).map_err(unreadable)?,
                    row.try_get(3).map_err(unreadable)?,
                    row.try_get(4).map_err(unreadable)?,
                    row.try_get(5).map_err(unreadable)?,
                )
            })
            .collect()
    }

    pub(crate) async fn delete_backend_tokens(&self, filter: &TokenFilter) -> Result<u64, LedgerError> {
        let sql = self.inner.backend_token_sql.delete.as_str();
        let (principal, backend) = (filter.principal.as_deref(), filter.backend.as_deref());
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, &[&principal, &backend]).await?) }).await
    }
}
