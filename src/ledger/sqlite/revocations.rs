//! The revocation log on SQLite: the `switchyard_revocations` table in the ledger's own file, so a restart
//! refuses the sessions deleted before it. Each operation is one statement on the worker thread, like the claims'.

use std::sync::LazyLock;

use rusqlite::params;

use super::SqliteStore;
use crate::ledger::error::LedgerError;
use crate::ledger::revocations::{REVOCATIONS_TABLE, Revocation, RevocationSql};
use crate::ledger::sql::Dialect;
use crate::ledger::sql::stored_time;

static SQL: LazyLock<RevocationSql> = LazyLock::new(|| RevocationSql::new(REVOCATIONS_TABLE, Dialect::Sqlite, ""));

impl SqliteStore {
    pub(crate) async fn record_revocation(&self, revocation: &Revocation) -> Result<(), LedgerError> {
        let (session, expires_at) = (revocation.session.clone(), revocation.stored_expiry());
        self.inner
            .worker
            .run(move |db| {
                db.conn.prepare_cached(&SQL.record)?.execute(params![session, expires_at])?;
                Ok(())
            })
            .await
    }

    pub(crate) async fn unexpired_revocations(&self, now_unix: u64) -> Result<Vec<Revocation>, LedgerError> {
        let now = stored_time(now_unix);
        self.inner
            .worker
            .run(move |db| {
                let mut statement = db.conn.prepare_cached(&SQL.unexpired)?;
                let rows = statement.query_map([now], |row| Ok((row.get(0)?, row.get(1)?)))?;
                rows.map(|row| {
                    let (session, expires_at) = row?;
                    Revocation::from_row(session, expires_at)
                })
                .collect()
            })
            .await
    }

    pub(crate) async fn purge_revocations(&self, now_unix: u64) -> Result<u64, LedgerError> {
        let now = stored_time(now_unix);
        self.inner.worker.run(move |db| Ok(db.conn.prepare_cached(&SQL.purge)?.execute([now])? as u64)).await
    }
}
