//! Backend OAuth tokens beside the claims: one row per (principal, backend) holding a sealed token set the
//! ledger cannot read, so every replica sharing the store shares the tokens.
//!
//! Rules:
//! - Plain types only: the sealed bytes are opaque here (sealing and opening are the OAuth client's); the
//!   scopes, expiry and last change are plain so an operator can list rows without the key.
//! - A put replaces the row of its (principal, backend). The principal may be empty (the gateway's own
//!   client-credentials row); the backend may not. Sizes are bounded ([`MAX_SEALED_TOKEN`]).
//! - The table is additive, like the revocations': created (`IF NOT EXISTS`) on every open, outside the schema
//!   version, so older builds keep working on a ledger that has it.

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;
pub use crate::token_row::BackendTokenRow;

/// The table's name (in the configured schema on Postgres).
pub(crate) const BACKEND_TOKENS_TABLE: &str = "switchyard_backend_tokens";
/// The largest sealed token set stored.
pub const MAX_SEALED_TOKEN: usize = 64 * 1024;
const MAX_NAME: usize = 1024;

/// Which rows a list or delete touches; `None` matches every value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenFilter {
    pub principal: Option<String>,
    pub backend: Option<String>,
}

impl BackendTokenRow {
    fn check(&self) -> Result<(), LedgerError> {
        let problem = if self.backend.is_empty() || self.backend.len() > MAX_NAME {
            "the backend must be 1–1024 bytes"
        } else if self.principal.len() > MAX_NAME || self.scopes.len() > MAX_NAME * 8 {
            "the principal or the scopes are too long"
        } else if self.sealed.is_empty() || self.sealed.len() > MAX_SEALED_TOKEN {
            "the sealed token set must be 1–65536 bytes"
        } else {
            return Ok(());
        };
        Err(LedgerError::InvalidBackendToken { problem: problem.to_owned() })
    }

    /// A row read back, refused as corrupt when it cannot have been written here.
    pub(crate) fn from_stored(
        principal: String,
        backend: String,
        sealed: Vec<u8>,
        scopes: String,
        expires_at: Option<i64>,
        updated_at: i64,
    ) -> Result<BackendTokenRow, LedgerError> {
        let unsigned = |value: i64| {
            u64::try_from(value)
                .map_err(|_| LedgerError::corrupt(format!("a token row of {backend} has a negative time")))
        };
        Ok(BackendTokenRow {
            expires_at: expires_at.map(unsigned).transpose()?,
            updated_at: unsigned(updated_at)?,
            principal,
            backend: backend.clone(),
            sealed,
            scopes,
        })
    }
}

/// The statements for one table and dialect (`$n` placeholders; SQLite gets `?n`).
#[derive(Debug, Clone)]
pub(crate) struct BackendTokenSql {
    /// `$1` principal, `$2` backend, `$3` sealed, `$4` scopes, `$5` expires_at, `$6` updated_at.
    pub(crate) put: String,
    /// `$1` principal (or NULL), `$2` backend (or NULL).
    pub(crate) select: String,
    pub(crate) delete: String,
}

impl BackendTokenSql {
    pub(crate) fn new(table: &str, dialect: Dialect) -> BackendTokenSql {
        let filter =
            "WHERE (CAST($1 AS TEXT) IS NULL OR principal = $1) AND (CAST($2 AS TEXT) IS NULL OR backend = $2)";
        let render = |sql: String| dialect.render(&sql);
        BackendTokenSql {
            put: render(format!(
                "INSERT INTO {table} (principal, backend, sealed, scopes, expires_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (principal, backend) DO UPDATE SET \
                 sealed = excluded.sealed, scopes = excluded.scopes, expires_at = excluded.expires_at, \
                 updated_at = excluded.updated_at"
            )),
            select: render(format!(
                "SELECT principal, backend, sealed, scopes, expires_at, updated_at FROM {table} {filter} \
                 ORDER BY backend, principal"
            )),
            delete: render(format!("DELETE FROM {table} {filter}")),
        }
    }
}

/// The statement that creates the table if it is missing.
pub(crate) fn create_statement(table: &str, dialect: Dialect) -> String {
    let bytes = if dialect == Dialect::Sqlite { "BLOB" } else { "BYTEA" };
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (principal TEXT NOT NULL, backend TEXT NOT NULL, sealed {bytes} NOT NULL, \
         scopes TEXT NOT NULL, expires_at BIGINT, updated_at BIGINT NOT NULL, PRIMARY KEY (principal, backend))"
    )
}

impl LedgerStore {
    /// Stores `row`, replacing the row of its (principal, backend); durable once this returns.
    pub async fn put_backend_token(&self, row: &BackendTokenRow) -> Result<(), LedgerError> {
        row.check()?;
        dispatch!(self.put_backend_token(row))
    }

    /// The rows matching `filter`, by backend then principal.
    pub async fn backend_tokens(&self, filter: &TokenFilter) -> Result<Vec<BackendTokenRow>, LedgerError> {
        dispatch!(self.backend_tokens(filter))
    }

    /// The row of (`principal`, `backend`), if any.
    pub async fn backend_token(&self, principal: &str, backend: &str) -> Result<Option<BackendTokenRow>, LedgerError> {
        let filter = TokenFilter { principal: Some(principal.to_owned()), backend: Some(backend.to_owned()) };
        Ok(self.backend_tokens(&filter).await?.into_iter().next())
    }

    /// Deletes the rows matching `filter`; returns how many.
    pub async fn delete_backend_tokens(&self, filter: &TokenFilter) -> Result<u64, LedgerError> {
        dispatch!(self.delete_backend_tokens(filter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_statements_take_numbered_question_marks() {
        let sql = BackendTokenSql::new("t", Dialect::Sqlite);
        for statement in [&sql.put, &sql.select, &sql.delete] {
            assert!(!statement.contains('$') && statement.contains("?1"), "{statement}");
        }
        assert!(BackendTokenSql::new("s.t", Dialect::Postgres).put.contains("INSERT INTO s.t "));
        assert!(create_statement("t", Dialect::Postgres).contains("BYTEA"));
    }

    #[test]
    fn rows_are_checked_and_negative_times_are_corrupt() {
        let row = |backend: &str, sealed: Vec<u8>| BackendTokenRow {
            principal: String::new(),
            backend: backend.to_owned(),
            sealed,
            scopes: String::new(),
            expires_at: None,
            updated_at: 1,
        };
        assert!(row("docs", vec![1]).check().is_ok(), "the gateway's own row has an empty principal");
        for bad in [row("", vec![1]), row("docs", Vec::new()), row("docs", vec![0; MAX_SEALED_TOKEN + 1])] {
            assert!(matches!(bad.check(), Err(LedgerError::InvalidBackendToken { .. })), "{bad:?}");
        }
        let stored = |expires, updated| {
            BackendTokenRow::from_stored("a".into(), "b".into(), vec![1], String::new(), expires, updated)
        };
        assert!(matches!(stored(Some(-1), 1), Err(LedgerError::Corrupt { .. })));
        assert!(matches!(stored(None, -1), Err(LedgerError::Corrupt { .. })));
        assert_eq!(stored(Some(5), 6).map(|row| (row.expires_at, row.updated_at)).ok(), Some((Some(5), 6)));
    }
}
