//! Tasks beside the claims: one row per task an agent created by asking for a tool call to run in the background
//! (MCP tasks; see docs/tasks.md). The row is the task's whole durable state — who owns it, which instance runs
//! it, its status and, once terminal, the answer the call would have had — so any replica sharing the store can
//! answer for it, and a restart finds it.
//!
//! Rules:
//! - A terminal status (`completed`, `failed`, `cancelled`) never changes: [`LedgerStore::finish_task`] is a
//!   compare-and-set from a running status, so of a cancel and a completion racing, exactly one wins.
//! - A running task changes between running statuses (`working` ⇄ `input_required`, or `input_required` with
//!   more of its input) only by [`LedgerStore::step_task`], a compare-and-set on the status and the update time
//!   the caller read, so two updates racing have one winner and a cancel is never undone.
//! - `call_key` (the principal's idempotency key, when the agent sent one) is unique: creating a task for a key
//!   that has one returns that task instead ([`LedgerStore::create_task`]), so a retried creation never runs the
//!   tool twice.
//! - A running task is failed `unknown` by its own instance's restart ([`LedgerStore::orphan_tasks`]) or, on
//!   PostgreSQL, by any replica's upkeep once its instance holds no live lease any more.
//! - What the fields mean (status names, the answer's JSON) is the router's; the ledger keeps text and integers.
//! - The table is additive, like the limit counters': created (`IF NOT EXISTS`) on every open, outside the schema
//!   version.

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;

/// The table's name (in the configured schema on Postgres).
pub(crate) const TASKS_TABLE: &str = "switchyard_tasks";

/// The statuses a task may still leave.
pub const RUNNING_STATES: [&str; 2] = ["working", "input_required"];

/// One task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    /// Unguessable, made by the router.
    pub id: String,
    /// Whose task it is: only this principal may read or cancel it.
    pub principal: String,
    /// The instance running the call (as the claims' owner).
    pub owner: String,
    /// The principal's idempotency key of the creating call, if any (unique).
    pub call_key: Option<String>,
    /// The exposed tool name.
    pub tool: String,
    pub state: String,
    pub message: Option<String>,
    /// The at-most-once outcome of a failed call (`unknown`, `not_delivered`).
    pub outcome: Option<String>,
    /// JSON text of the answer: `{"result": …}` or `{"error": …}`; set once terminal (not for `cancelled`).
    pub answer: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    pub updated_ms: i64,
    pub ttl_ms: i64,
    pub poll_ms: i64,
}

impl TaskRow {
    pub fn is_terminal(&self) -> bool {
        !RUNNING_STATES.contains(&self.state.as_str())
    }
}

/// The status and update time a step expects a task to still have (`None`: any running task).
pub(crate) type Seen<'a> = Option<(&'a str, i64)>;

/// How a running task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    pub state: String,
    pub message: Option<String>,
    pub outcome: Option<String>,
    pub answer: Option<String>,
    pub updated_ms: i64,
}

/// Which tasks to list: a principal's (or all), in one status (or any), after a cursor, oldest first.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub principal: Option<String>,
    pub state: Option<String>,
    /// Lists tasks created after this (created_ms, id).
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

/// Every column, in the order the stores read them.
pub(crate) const TASK_COLUMNS: &str =
    "id, principal, owner, call_key, tool, state, message, outcome, answer, created_ms, updated_ms, ttl_ms, poll_ms";

/// The statements for one table and dialect (`$n` placeholders; SQLite gets `?n`).
#[derive(Debug, Clone)]
pub(crate) struct TaskSql {
    /// Every column in [`TASK_COLUMNS`] order; changes nothing when the id or call key exists.
    pub(crate) insert: String,
    /// `$1` id.
    pub(crate) select: String,
    /// `$1` call key.
    pub(crate) by_call_key: String,
    /// `$1` id, `$2` state, `$3` message, `$4` outcome, `$5` answer, `$6` updated; `$7` the state and `$8` the
    /// update time the task must still have, or NULL for any running task.
    pub(crate) finish: String,
    /// `$1` owner, `$2` message, `$3` updated.
    pub(crate) orphan: String,
    /// `$1` principal or NULL, `$2` state or NULL, `$3` after created, `$4` after id, `$5` limit.
    pub(crate) list: String,
    /// `$1` now: deletes the tasks whose ttl ran out.
    pub(crate) purge: String,
}

impl TaskSql {
    pub(crate) fn new(table: &str, dialect: Dialect) -> TaskSql {
        let render = |sql: String| dialect.render(&sql);
        let running = "state IN ('working', 'input_required')";
        let text = match dialect {
            Dialect::Sqlite => "",
            Dialect::Postgres => "::TEXT",
        };
        TaskSql {
            insert: render(format!(
                "INSERT INTO {table} ({TASK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                 ON CONFLICT DO NOTHING"
            )),
            select: render(format!("SELECT {TASK_COLUMNS} FROM {table} WHERE id = $1")),
            by_call_key: render(format!("SELECT {TASK_COLUMNS} FROM {table} WHERE call_key = $1")),
            finish: render(format!(
                "UPDATE {table} SET state = $2, message = $3, outcome = $4, answer = $5, updated_ms = $6 \
                 WHERE id = $1 AND {running} AND ($7{text} IS NULL OR (state = $7 AND updated_ms = $8))"
            )),
            orphan: render(format!(
                "UPDATE {table} SET state = 'failed', message = $2, outcome = 'unknown', updated_ms = $3 \
                 WHERE owner = $1 AND {running}"
            )),
            list: render(format!(
                "SELECT {TASK_COLUMNS} FROM {table} WHERE ($1{text} IS NULL OR principal = $1) \
                 AND ($2{text} IS NULL OR state = $2) AND (created_ms > $3 OR (created_ms = $3 AND id > $4)) \
                 ORDER BY created_ms, id LIMIT $5"
            )),
            purge: render(format!("DELETE FROM {table} WHERE created_ms + ttl_ms < $1")),
        }
    }
}

/// The statements that create the table if it is missing.
pub(crate) fn create_statement(table: &str) -> String {
    let index = table.rsplit('.').next().unwrap_or(table);
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (id TEXT PRIMARY KEY, principal TEXT NOT NULL, owner TEXT NOT NULL, \
         call_key TEXT UNIQUE, tool TEXT NOT NULL, state TEXT NOT NULL, message TEXT, outcome TEXT, answer TEXT, \
         created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, poll_ms BIGINT NOT NULL); \
         CREATE INDEX IF NOT EXISTS {index}_by_principal ON {table} (principal, created_ms)"
    )
}

impl LedgerStore {
    /// Stores `row`, durable once this returns; when its call key already has a task, returns that task instead
    /// (and stores nothing).
    pub async fn create_task(&self, row: &TaskRow) -> Result<TaskRow, LedgerError> {
        dispatch!(self.create_task(row))
    }

    pub async fn task(&self, id: &str) -> Result<Option<TaskRow>, LedgerError> {
        dispatch!(self.task(id))
    }

    /// Ends the running task `id` as `end` says; false when it was not running (already terminal, or gone).
    pub async fn finish_task(&self, id: &str, end: &TaskEnd) -> Result<bool, LedgerError> {
        dispatch!(self.finish_task(id, end, None))
    }

    /// Moves the running task `id` from `seen` (the status and update time read) to `next`, a running status;
    /// false when it changed since (another update, a cancel, its end).
    pub async fn step_task(&self, id: &str, seen: (&str, i64), next: &TaskEnd) -> Result<bool, LedgerError> {
        dispatch!(self.finish_task(id, next, Some(seen)))
    }

    /// At start: fails the tasks `owner` was running when it last stopped (their calls' outcome is unknown);
    /// returns how many.
    pub async fn orphan_tasks(&self, owner: &str, message: &str, now_ms: i64) -> Result<u64, LedgerError> {
        dispatch!(self.orphan_tasks(owner, message, now_ms))
    }

    /// The tasks `filter` selects, oldest first.
    pub async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>, LedgerError> {
        dispatch!(self.tasks(filter))
    }

    /// Deletes the tasks whose ttl ended before `now_ms`; returns how many.
    pub async fn purge_tasks(&self, now_ms: i64) -> Result<u64, LedgerError> {
        dispatch!(self.purge_tasks(now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_take_each_dialects_placeholders() {
        let sql = TaskSql::new("t", Dialect::Sqlite);
        for statement in [&sql.insert, &sql.finish, &sql.list, &sql.orphan] {
            assert!(!statement.contains('$') && statement.contains("?1"), "{statement}");
        }
        assert!(TaskSql::new("s.t", Dialect::Postgres).list.contains("$1::TEXT IS NULL"));
        assert!(create_statement("s.t").contains("INDEX IF NOT EXISTS t_by_principal ON s.t"));
    }
}
