//! Approval requests on PostgreSQL: the `switchyard_approvals` table every replica shares, so a decision made
//! through any replica (or the CLI) is seen by all. These operations are rare (a call that needs a person), so
//! their statements are not prepared per connection.

use tokio_postgres::types::ToSql;

use super::PostgresStore;
use crate::ledger::approvals::{
    ApprovalRow, ApprovalState, Decision, RowColumns, decision_values, from_columns, insert_values,
};
use crate::ledger::error::LedgerError;
use crate::ledger::types::ClaimKey;

impl PostgresStore {
    pub(crate) async fn insert_approval(&self, row: &ApprovalRow) -> Result<bool, LedgerError> {
        let sql = self.inner.approval_sql.insert.as_str();
        let (key, principal, backend, tool, digest, sealed, state, requested, expires) = insert_values(row);
        self.inner
            .conn
            .run(|db| async move {
                let values: [&(dyn ToSql + Sync); 9] =
                    [&key, &principal, &backend, &tool, &digest, &sealed, &state, &requested, &expires];
                Ok(db.client.execute(sql, &values).await? == 1)
            })
            .await
    }

    pub(crate) async fn approval(&self, key: &ClaimKey) -> Result<Option<ApprovalRow>, LedgerError> {
        let key = key.as_str();
        Ok(self.select(&self.inner.approval_sql.select, &[&key]).await?.into_iter().next())
    }

    pub(crate) async fn decide_approval(&self, key: &ClaimKey, decision: &Decision) -> Result<bool, LedgerError> {
        let sql = self.inner.approval_sql.decide.as_str();
        let key = key.as_str();
        let (state, by, at, note) = decision_values(decision);
        self.inner
            .conn
            .run(|db| async move {
                let values: [&(dyn ToSql + Sync); 5] = [&key, &state, &by, &at, &note];
                Ok(db.client.execute(sql, &values).await? == 1)
            })
            .await
    }

    pub(crate) async fn purge_approvals(&self, cutoff_ms: i64) -> Result<u64, LedgerError> {
        let sql = self.inner.approval_sql.purge.as_str();
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, &[&cutoff_ms]).await?) }).await
    }

    pub(crate) async fn approvals(
        &self,
        state: Option<ApprovalState>,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>, LedgerError> {
        let state = state.map(ApprovalState::as_str);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.select(&self.inner.approval_sql.list, &[&state, &limit]).await
    }

    pub(crate) async fn decided_approvals_since(&self, since_ms: i64) -> Result<Vec<ApprovalRow>, LedgerError> {
        self.select(&self.inner.approval_sql.decided_since, &[&since_ms]).await
    }

    pub(crate) async fn take_announcement(&self, kind: &str, key: &str, at_ms: i64) -> Result<bool, LedgerError> {
        let sql = self.inner.announcement_sql.take.as_str();
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, &[&kind, &key, &at_ms]).await? == 1) }).await
    }

    pub(crate) async fn purge_announcements(&self, cutoff_ms: i64) -> Result<u64, LedgerError> {
        let sql = self.inner.announcement_sql.purge.as_str();
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, &[&cutoff_ms]).await?) }).await
    }

    async fn select(&self, sql: &str, values: &[&(dyn ToSql + Sync)]) -> Result<Vec<ApprovalRow>, LedgerError> {
        let rows = self.inner.conn.run(|db| async move { Ok(db.client.query(sql, values).await?) }).await?;
        rows.iter()
            .map(|row| {
                let columns: RowColumns = row_columns!(row, "approval", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
                from_columns(columns)
            })
            .collect()
    }
}
