//! Approval requests on SQLite: the `switchyard_approvals` table in the ledger's own file. Each operation is one
//! statement on the worker thread, like the claims'.

use std::sync::LazyLock;

use rusqlite::params;

use super::SqliteStore;
use crate::ledger::announcements::{ANNOUNCEMENTS_TABLE, AnnouncementSql};
use crate::ledger::approvals::{
    APPROVALS_TABLE, ApprovalRow, ApprovalSql, ApprovalState, Decision, decision_values, from_columns, insert_values,
};
use crate::ledger::error::LedgerError;
use crate::ledger::sql::Dialect;
use crate::ledger::types::ClaimKey;

static SQL: LazyLock<ApprovalSql> = LazyLock::new(|| ApprovalSql::new(APPROVALS_TABLE, Dialect::Sqlite));
static ANNOUNCEMENT_SQL: LazyLock<AnnouncementSql> =
    LazyLock::new(|| AnnouncementSql::new(ANNOUNCEMENTS_TABLE, Dialect::Sqlite));

impl SqliteStore {
    pub(crate) async fn insert_approval(&self, row: &ApprovalRow) -> Result<bool, LedgerError> {
        let row = row.clone();
        self.inner
            .worker
            .run(move |db| {
                let (key, principal, backend, tool, digest, sealed, state, requested, expires) = insert_values(&row);
                let values = params![key, principal, backend, tool, digest, sealed, state, requested, expires];
                Ok(db.conn.prepare_cached(&SQL.insert)?.execute(values)? == 1)
            })
            .await
    }

    pub(crate) async fn approval(&self, key: &ClaimKey) -> Result<Option<ApprovalRow>, LedgerError> {
        let key = key.as_str().to_owned();
        self.inner.worker.run(move |db| select(db, &SQL.select, params![key]).map(|rows| rows.into_iter().next())).await
    }

    pub(crate) async fn decide_approval(&self, key: &ClaimKey, decision: &Decision) -> Result<bool, LedgerError> {
        let (key, decision) = (key.as_str().to_owned(), decision.clone());
        self.inner
            .worker
            .run(move |db| {
                let (state, by, at, note) = decision_values(&decision);
                Ok(db.conn.prepare_cached(&SQL.decide)?.execute(params![key, state, by, at, note])? == 1)
            })
            .await
    }

    pub(crate) async fn purge_approvals(&self, cutoff_ms: i64) -> Result<u64, LedgerError> {
        self.inner
            .worker
            .run(move |db| Ok(db.conn.prepare_cached(&SQL.purge)?.execute(params![cutoff_ms])? as u64))
            .await
    }

    pub(crate) async fn approvals(
        &self,
        state: Option<ApprovalState>,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>, LedgerError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.inner.worker.run(move |db| select(db, &SQL.list, params![state.map(ApprovalState::as_str), limit])).await
    }

    pub(crate) async fn decided_approvals_since(&self, since_ms: i64) -> Result<Vec<ApprovalRow>, LedgerError> {
        self.inner.worker.run(move |db| select(db, &SQL.decided_since, params![since_ms])).await
    }

    pub(crate) async fn take_announcement(&self, kind: &str, key: &str, at_ms: i64) -> Result<bool, LedgerError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.inner
            .worker
            .run(move |db| Ok(db.conn.prepare_cached(&ANNOUNCEMENT_SQL.take)?.execute(params![kind, key, at_ms])? == 1))
            .await
    }

    pub(crate) async fn purge_announcements(&self, cutoff_ms: i64) -> Result<u64, LedgerError> {
        self.inner
            .worker
            .run(move |db| Ok(db.conn.prepare_cached(&ANNOUNCEMENT_SQL.purge)?.execute(params![cutoff_ms])? as u64))
            .await
    }
}

fn select(
    db: &mut super::worker::Db,
    sql: &str,
    values: impl rusqlite::Params,
) -> Result<Vec<ApprovalRow>, LedgerError> {
    let mut statement = db.conn.prepare_cached(sql)?;
    let rows = statement.query_map(values, |row| row.try_into())?;
    rows.map(|row| from_columns(row?)).collect()
}
