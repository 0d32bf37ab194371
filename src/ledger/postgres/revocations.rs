//! The revocation log on PostgreSQL: the `switchyard_revocations` table every replica shares. Recording is one
//! statement that writes the entry and announces it (`pg_notify` on the schema's revocation channel, sent when
//! it commits); the [`super::listen`] task passes announcements on to [`RevocationFeed`] subscribers. These
//! operations are rare (a `DELETE`, a start, a purge a minute), so their statements are not prepared per
//! connection.

use super::PostgresStore;
use crate::ledger::error::LedgerError;
use crate::ledger::revocations::{Revocation, RevocationFeed};
use crate::ledger::sql::stored_time;

impl PostgresStore {
    pub(crate) async fn record_revocation(&self, revocation: &Revocation) -> Result<(), LedgerError> {
        let (session, expires_at) = (revocation.session.as_str(), revocation.stored_expiry());
        let sql = self.inner.revocation_sql.record.as_str();
        self.inner
            .conn
            .run(|db| async move {
                db.client.query(sql, &[&session, &expires_at]).await?;
                Ok(())
            })
            .await
    }

    pub(crate) async fn unexpired_revocations(&self, now_unix: u64) -> Result<Vec<Revocation>, LedgerError> {
        let (now, sql) = (stored_time(now_unix), self.inner.revocation_sql.unexpired.as_str());
        let rows = self.inner.conn.run(|db| async move { Ok(db.client.query(sql, &[&now]).await?) }).await?;
        rows.iter()
            .map(|row| {
                let unreadable = |error| LedgerError::corrupt(format!("unreadable revocation row: {error}"));
                Revocation::from_row(row.try_get(0).map_err(unreadable)?, row.try_get(1).map_err(unreadable)?)
            })
            .collect()
    }

    pub(crate) async fn purge_revocations(&self, now_unix: u64) -> Result<u64, LedgerError> {
        let (now, sql) = (stored_time(now_unix), self.inner.revocation_sql.purge.as_str());
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, &[&now]).await?) }).await
    }

    pub(crate) fn revocation_feed(&self) -> RevocationFeed {
        RevocationFeed::new(self.inner.revocations.subscribe())
    }
}
