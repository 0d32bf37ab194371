//! Pinned definitions on PostgreSQL: the `switchyard_pins` table every replica shares. Writes are rare (a
//! definition first seen or changed, an operator's decision); the revision is polled by every replica, one
//! aggregate over a small table.

use tokio_postgres::types::ToSql;

use super::PostgresStore;
use crate::ledger::error::LedgerError;
use crate::ledger::pins::{PinKey, PinOffer, PinRow};
use crate::ledger::sql::stored_time;

impl PostgresStore {
    async fn execute_pin(&self, sql: &str, values: &[&(dyn ToSql + Sync)]) -> Result<bool, LedgerError> {
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, values).await? > 0) }).await
    }

    pub(crate) async fn trust_pin(&self, row: &PinRow) -> Result<bool, LedgerError> {
        let PinKey { backend, kind, name } = &row.key;
        let (state, first_seen) = (row.state.as_str(), stored_time(row.first_seen));
        let values: [&(dyn ToSql + Sync); 9] =
            [backend, kind, name, &row.digest, &row.definition, &state, &row.offered_digest, &row.offered, &first_seen];
        self.execute_pin(&self.inner.pin_sql.trust, &values).await
    }

    pub(crate) async fn offer_pin(&self, offer: &PinOffer) -> Result<bool, LedgerError> {
        let PinKey { backend, kind, name } = &offer.key;
        let quarantine = i64::from(offer.quarantine);
        let values: [&(dyn ToSql + Sync); 6] = [backend, kind, name, &offer.digest, &offer.definition, &quarantine];
        self.execute_pin(&self.inner.pin_sql.offer, &values).await
    }

    pub(crate) async fn approve_pin(
        &self,
        key: &PinKey,
        offered: &str,
        by: &str,
        at: u64,
    ) -> Result<bool, LedgerError> {
        let at = stored_time(at);
        let values: [&(dyn ToSql + Sync); 6] = [&key.backend, &key.kind, &key.name, &offered, &by, &at];
        self.execute_pin(&self.inner.pin_sql.approve, &values).await
    }

    pub(crate) async fn reject_pin(&self, key: &PinKey, offered: &str) -> Result<bool, LedgerError> {
        let values: [&(dyn ToSql + Sync); 4] = [&key.backend, &key.kind, &key.name, &offered];
        self.execute_pin(&self.inner.pin_sql.reject, &values).await
    }

    pub(crate) async fn pins(&self, backend: Option<&str>) -> Result<Vec<PinRow>, LedgerError> {
        let sql = self.inner.pin_sql.select.as_str();
        let rows = self.inner.conn.run(|db| async move { Ok(db.client.query(sql, &[&backend]).await?) }).await?;
        rows.iter()
            .map(|row| {
                let unreadable = |error| LedgerError::corrupt(format!("unreadable pin row: {error}"));
                let get = |index| row.try_get::<_, String>(index).map_err(unreadable);
                let maybe = |index| row.try_get::<_, Option<String>>(index).map_err(unreadable);
                PinRow::from_stored((
                    get(0)?,
                    get(1)?,
                    get(2)?,
                    get(3)?,
                    get(4)?,
                    get(5)?,
                    maybe(6)?,
                    maybe(7)?,
                    row.try_get(8).map_err(unreadable)?,
                    maybe(9)?,
                    row.try_get(10).map_err(unreadable)?,
                ))
            })
            .collect()
    }

    pub(crate) async fn pins_revision(&self) -> Result<i64, LedgerError> {
        let sql = self.inner.pin_sql.revision.as_str();
        self.inner.conn.run(|db| async move { Ok(db.client.query_one(sql, &[]).await?.try_get(0)?) }).await
    }
}
