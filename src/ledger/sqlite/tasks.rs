//! Tasks on SQLite: the `switchyard_tasks` table in the ledger's own file, one statement per operation on the
//! worker thread (a creation that finds its call key taken reads the existing task in the same job).

use std::sync::LazyLock;

use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use crate::ledger::error::LedgerError;
use crate::ledger::sql::Dialect;
use crate::ledger::tasks::{Seen, TASKS_TABLE, TaskEnd, TaskFilter, TaskRow, TaskSql};

static SQL: LazyLock<TaskSql> = LazyLock::new(|| TaskSql::new(TASKS_TABLE, Dialect::Sqlite));

fn read(row: &Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        id: row.get(0)?,
        principal: row.get(1)?,
        owner: row.get(2)?,
        call_key: row.get(3)?,
        tool: row.get(4)?,
        state: row.get(5)?,
        message: row.get(6)?,
        outcome: row.get(7)?,
        answer: row.get(8)?,
        created_ms: row.get(9)?,
        updated_ms: row.get(10)?,
        ttl_ms: row.get(11)?,
        poll_ms: row.get(12)?,
    })
}

impl SqliteStore {
    pub(crate) async fn create_task(&self, row: &TaskRow) -> Result<TaskRow, LedgerError> {
        let row = row.clone();
        self.inner
            .worker
            .run(move |db| {
                let inserted = db.conn.prepare_cached(&SQL.insert)?.execute(params![
                    row.id,
                    row.principal,
                    row.owner,
                    row.call_key,
                    row.tool,
                    row.state,
                    row.message,
                    row.outcome,
                    row.answer,
                    row.created_ms,
                    row.updated_ms,
                    row.ttl_ms,
                    row.poll_ms
                ])?;
                if inserted == 1 {
                    return Ok(row);
                }
                let existing = db.conn.prepare_cached(&SQL.by_call_key)?.query_row(params![row.call_key], read);
                existing.optional()?.ok_or_else(|| LedgerError::corrupt(format!("task id {} is taken", row.id)))
            })
            .await
    }

    pub(crate) async fn task(&self, id: &str) -> Result<Option<TaskRow>, LedgerError> {
        let id = id.to_owned();
        self.inner
            .worker
            .run(move |db| Ok(db.conn.prepare_cached(&SQL.select)?.query_row(params![id], read).optional()?))
            .await
    }

    pub(crate) async fn finish_task(&self, id: &str, end: &TaskEnd, seen: Seen<'_>) -> Result<bool, LedgerError> {
        let (id, end) = (id.to_owned(), end.clone());
        let (state, updated) = seen.map(|(state, updated)| (state.to_owned(), updated)).unzip();
        self.inner
            .worker
            .run(move |db| {
                let changed = db.conn.prepare_cached(&SQL.finish)?.execute(params![
                    id,
                    end.state,
                    end.message,
                    end.outcome,
                    end.answer,
                    end.updated_ms,
                    state,
                    updated
                ])?;
                Ok(changed == 1)
            })
            .await
    }

    pub(crate) async fn orphan_tasks(&self, owner: &str, message: &str, now_ms: i64) -> Result<u64, LedgerError> {
        let (owner, message) = (owner.to_owned(), message.to_owned());
        self.inner
            .worker
            .run(move |db| Ok(db.conn.prepare_cached(&SQL.orphan)?.execute(params![owner, message, now_ms])? as u64))
            .await
    }

    pub(crate) async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>, LedgerError> {
        let filter = filter.clone();
        self.inner
            .worker
            .run(move |db| {
                let (created, id) = filter.after.unwrap_or((i64::MIN, String::new()));
                let mut statement = db.conn.prepare_cached(&SQL.list)?;
                let rows = statement
                    .query_map(params![filter.principal, filter.state, created, id, i64::from(filter.limit)], read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    pub(crate) async fn purge_tasks(&self, now_ms: i64) -> Result<u64, LedgerError> {
        self.inner.worker.run(move |db| Ok(db.conn.prepare_cached(&SQL.purge)?.execute(params![now_ms])? as u64)).await
    }
}
