//! Backend OAuth tokens on SQLite: the `switchyard_backend_tokens` table in the ledger's own file. Each
//! operation is one statement on the worker thread, like the claims'.

use std::sync::LazyLock;

use rusqlite::params;

use super::SqliteStore;
use crate::ledger::backend_tokens::{BACKEND_TOKENS_TABLE, BackendTokenRow, BackendTokenSql, TokenFilter};
use crate::ledger::error::LedgerError;
use crate::ledger::sql::Dialect;
use crate::ledger::sql::stored_time;

static SQL: LazyLock<BackendTokenSql> = LazyLock::new(|| BackendTokenSql::new(BACKEND_TOKENS_TABLE, Dialect::Sqlite));

impl SqliteStore {
    pub(crate) async fn put_backend_token(&self, row: &BackendTokenRow) -> Result<(), LedgerError> {
        let row = row.clone();
        self.inner
            .worker
            .run(move |db| {
                let expires_at = row.expires_at.map(stored_time);
                let values = params![
                    row.principal,
                    row.backend,
                    row.sealed,
                    row.scopes,
                    expires_at,
                    stored_time(row.updated_at)
                ];
                db.conn.prepare_cached(&SQL.put)?.execute(values)?;
                Ok(())
            })
            .await
    }

    pub(crate) async fn backend_tokens(&self, filter: &TokenFilter) -> Result<Vec<BackendTokenRow>, LedgerError> {
        let filter = filter.clone();
        self.inner
            .worker
            .run(move |db| {
                let mut statement = db.conn.prepare_cached(&SQL.select)?;
                let rows = statement.query_map(params![filter.principal, filter.backend], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?))
                })?;
                rows.map(|row| {
                    let (principal, backend, sealed, scopes, expires_at, updated_at) = row?;
                    BackendTokenRow::from_stored(principal, backend, sealed, scopes, expires_at, updated_at)
                })
                .collect()
            })
            .await
    }

    pub(crate) async fn delete_backend_tokens(&self, filter: &TokenFilter) -> Result<u64, LedgerError> {
        let filter = filter.clone();
        self.inner
            .worker
            .run(move |db| {
                Ok(db.conn.prepare_cached(&SQL.delete)?.execute(params![filter.principal, filter.backend])? as u64)
            })
            .await
    }
}
