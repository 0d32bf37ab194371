//! Tasks on PostgreSQL: the `switchyard_tasks` table every replica shares, so a task created through one
//! replica is read, awaited and cancelled through any other. Tasks are few next to calls, so their statements
//! are not prepared per connection.
//!
//! A replica that dies leaves its tasks `working` with nobody to end them. Whichever replica's upkeep expires
//! the dead replica's leases (docs/tasks.md, "A replica that dies") also fails the `working` tasks of every
//! instance that owned one of the expired claims and holds no live lease any more: that instance runs no call,
//! so none of its tasks can end otherwise. It costs nothing while no lease expires, and nothing on any call.

use std::time::SystemTime;

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use crate::ledger::error::LedgerError;
use crate::ledger::rules::ABANDONED_TASK_NOTE;
use crate::ledger::tasks::{Seen, TaskEnd, TaskFilter, TaskRow};
use crate::ledger::types::to_millis;

/// `$1` the keys of the claims just expired, `$2` now, `$3` message: fails the `working` tasks of their owners
/// that hold no live lease. `input_required` tasks are left alone: no call of theirs runs until a
/// `tasks/update`, which any replica takes.
pub(super) fn abandon_statement(tasks: &str, claims: &str) -> String {
    format!(
        "UPDATE {tasks} t SET state = 'failed', message = $3, outcome = 'unknown', updated_ms = $2 \
         WHERE t.state = 'working' AND t.owner IN (SELECT owner FROM {claims} WHERE key = ANY($1)) \
         AND NOT EXISTS (SELECT 1 FROM {claims} c WHERE c.owner = t.owner AND c.state = 'in_flight' \
         AND c.lease_until >= $2)"
    )
}

fn read(row: &Row) -> Result<TaskRow, LedgerError> {
    let read = || {
        Ok(TaskRow {
            id: row.try_get(0)?,
            principal: row.try_get(1)?,
            owner: row.try_get(2)?,
            call_key: row.try_get(3)?,
            tool: row.try_get(4)?,
            state: row.try_get(5)?,
            message: row.try_get(6)?,
            outcome: row.try_get(7)?,
            answer: row.try_get(8)?,
            created_ms: row.try_get(9)?,
            updated_ms: row.try_get(10)?,
            ttl_ms: row.try_get(11)?,
            poll_ms: row.try_get(12)?,
        })
    };
    read().map_err(|error: tokio_postgres::Error| LedgerError::corrupt(format!("unreadable task row: {error}")))
}

impl PostgresStore {
    /// Runs `sql` with `values` and reads the rows it returns as tasks.
    async fn task_rows(&self, sql: &str, values: &[&(dyn ToSql + Sync)]) -> Result<Vec<TaskRow>, LedgerError> {
        let rows = self.inner.conn.run(|db| async move { Ok(db.client.query(sql, values).await?) }).await?;
        rows.iter().map(read).collect()
    }

    async fn task_execute(&self, sql: &str, values: &[&(dyn ToSql + Sync)]) -> Result<u64, LedgerError> {
        self.inner.conn.run(|db| async move { Ok(db.client.execute(sql, values).await?) }).await
    }

    pub(crate) async fn create_task(&self, row: &TaskRow) -> Result<TaskRow, LedgerError> {
        let sql = &self.inner.task_sql;
        let values: [&(dyn ToSql + Sync); 13] = [
            &row.id,
            &row.principal,
            &row.owner,
            &row.call_key,
            &row.tool,
            &row.state,
            &row.message,
            &row.outcome,
            &row.answer,
            &row.created_ms,
            &row.updated_ms,
            &row.ttl_ms,
            &row.poll_ms,
        ];
        if self.task_execute(&sql.insert, &values).await? == 1 {
            return Ok(row.clone());
        }
        let existing = self.task_rows(&sql.by_call_key, &[&row.call_key]).await?;
        existing.into_iter().next().ok_or_else(|| LedgerError::corrupt(format!("task id {} is taken", row.id)))
    }

    pub(crate) async fn task(&self, id: &str) -> Result<Option<TaskRow>, LedgerError> {
        Ok(self.task_rows(&self.inner.task_sql.select, &[&id]).await?.into_iter().next())
    }

    pub(crate) async fn finish_task(&self, id: &str, end: &TaskEnd, seen: Seen<'_>) -> Result<bool, LedgerError> {
        let (state, updated) = seen.unzip();
        let values: [&(dyn ToSql + Sync); 8] =
            [&id, &end.state, &end.message, &end.outcome, &end.answer, &end.updated_ms, &state, &updated];
        Ok(self.task_execute(&self.inner.task_sql.finish, &values).await? == 1)
    }

    pub(crate) async fn orphan_tasks(&self, owner: &str, message: &str, now_ms: i64) -> Result<u64, LedgerError> {
        self.task_execute(&self.inner.task_sql.orphan, &[&owner, &message, &now_ms]).await
    }

    pub(crate) async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>, LedgerError> {
        let (created, id) = filter.after.clone().unwrap_or((i64::MIN, String::new()));
        let limit = i64::from(filter.limit);
        let values: [&(dyn ToSql + Sync); 5] = [&filter.principal, &filter.state, &created, &id, &limit];
        self.task_rows(&self.inner.task_sql.list, &values).await
    }

    /// Fails the tasks the owners of the expired claims `keys` left running (see the module's rules).
    pub(super) async fn abandon_tasks(&self, keys: &[String], now: SystemTime) -> Result<u64, LedgerError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let now_ms = to_millis(now);
        self.task_execute(&self.inner.abandon_sql, &[&keys, &now_ms, &ABANDONED_TASK_NOTE]).await
    }

    pub(crate) async fn purge_tasks(&self, now_ms: i64) -> Result<u64, LedgerError> {
        self.task_execute(&self.inner.task_sql.purge, &[&now_ms]).await
    }
}
