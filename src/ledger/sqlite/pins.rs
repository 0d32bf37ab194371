//! Pinned definitions on SQLite: the `switchyard_pins` table in the ledger's own file. Each operation is one
//! statement on the worker thread, like the claims'; another process sharing the file sees the writes through
//! [`SqliteStore::pins_revision`].

use std::sync::LazyLock;

use rusqlite::params;

use super::SqliteStore;
use crate::ledger::error::LedgerError;
use crate::ledger::pins::{PINS_TABLE, PinKey, PinOffer, PinRow, PinSql};
use crate::ledger::sql::{Dialect, stored_time};

static SQL: LazyLock<PinSql> = LazyLock::new(|| PinSql::new(PINS_TABLE, Dialect::Sqlite));

impl SqliteStore {
    pub(crate) async fn trust_pin(&self, row: &PinRow) -> Result<bool, LedgerError> {
        let row = row.clone();
        self.inner
            .worker
            .run(move |db| {
                let PinKey { backend, kind, name } = &row.key;
                let values = params![
                    backend,
                    kind,
                    name,
                    row.digest,
                    row.definition,
                    row.state.as_str(),
                    row.offered_digest,
                    row.offered,
                    stored_time(row.first_seen)
                ];
                Ok(db.conn.prepare_cached(&SQL.trust)?.execute(values)? > 0)
            })
            .await
    }

    pub(crate) async fn offer_pin(&self, offer: &PinOffer) -> Result<bool, LedgerError> {
        let offer = offer.clone();
        self.inner
            .worker
            .run(move |db| {
                let PinKey { backend, kind, name } = &offer.key;
                let values = params![backend, kind, name, offer.digest, offer.definition, i64::from(offer.quarantine)];
                Ok(db.conn.prepare_cached(&SQL.offer)?.execute(values)? > 0)
            })
            .await
    }

    pub(crate) async fn approve_pin(
        &self,
        key: &PinKey,
        offered: &str,
        by: &str,
        at: u64,
    ) -> Result<bool, LedgerError> {
        let (key, offered, by) = (key.clone(), offered.to_owned(), by.to_owned());
        self.inner
            .worker
            .run(move |db| {
                let values = params![key.backend, key.kind, key.name, offered, by, stored_time(at)];
                Ok(db.conn.prepare_cached(&SQL.approve)?.execute(values)? > 0)
            })
            .await
    }

    pub(crate) async fn reject_pin(&self, key: &PinKey, offered: &str) -> Result<bool, LedgerError> {
        let (key, offered) = (key.clone(), offered.to_owned());
        self.inner
            .worker
            .run(move |db| {
                let values = params![key.backend, key.kind, key.name, offered];
                Ok(db.conn.prepare_cached(&SQL.reject)?.execute(values)? > 0)
            })
            .await
    }

    pub(crate) async fn pins(&self, backend: Option<&str>) -> Result<Vec<PinRow>, LedgerError> {
        let backend = backend.map(str::to_owned);
        self.inner
            .worker
            .run(move |db| {
                let mut statement = db.conn.prepare_cached(&SQL.select)?;
                let rows = statement.query_map(params![backend], |row| row.try_into())?;
                rows.map(|row| PinRow::from_stored(row?)).collect()
            })
            .await
    }

    pub(crate) async fn pins_revision(&self) -> Result<i64, LedgerError> {
        self.inner.worker.run(|db| Ok(db.conn.prepare_cached(&SQL.revision)?.query_row([], |row| row.get(0))?)).await
    }
}
