//! `switchyard tasks`: the operator's view of the ledger's task store — every task agents created (tool calls
//! run as MCP tasks; docs/tasks.md), oldest first, optionally one principal's or in one status. Part of the
//! binary's edge, like `main.rs`.
//!
//! Rules: principals, tool names and status messages come from agents and backends; they are printed through
//! [`super::terminal`] (escaped by the table). Results are never printed: they may hold what the agent alone may
//! read.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::bail;
use switchyard::ledger::{RUNNING_STATES, TaskFilter, TaskRow};

use super::calls::timestamp;
use super::open_ledger;
use super::table::print_table;

/// The statuses a task may have, as `--state` takes them.
const STATES: [&str; 5] = ["working", "input_required", "completed", "failed", "cancelled"];
/// The most tasks one listing prints.
const LIMIT: u32 = 1000;

#[derive(clap::Args)]
pub struct TasksFilter {
    /// Only tasks of this principal (as the gateway names it; `anonymous@<address>` for agents without
    /// credentials).
    #[arg(long)]
    pub principal: Option<String>,
    /// Only tasks in this status: working, input_required, completed, failed or cancelled.
    #[arg(long)]
    pub state: Option<String>,
}

pub async fn list(filter: TasksFilter, config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    if let Some(state) = filter.state.as_deref().filter(|state| !STATES.contains(state)) {
        bail!("--state {state:?} is not a task status; use one of {}", STATES.join(", "));
    }
    let store = open_ledger(config).await?;
    let query = TaskFilter { principal: filter.principal, state: filter.state, after: None, limit: LIMIT };
    let rows = store.tasks(&query).await?.into_iter().map(row).collect();
    print_table(["CREATED (UTC)", "STATUS", "OUTCOME", "PRINCIPAL", "TOOL", "TASK"], rows);
    Ok(ExitCode::SUCCESS)
}

fn row(task: TaskRow) -> [String; 6] {
    let created = UNIX_EPOCH + Duration::from_millis(u64::try_from(task.created_ms).unwrap_or_default());
    let outcome = match RUNNING_STATES.contains(&task.state.as_str()) {
        true => String::new(),
        false => task.outcome.unwrap_or_default(),
    };
    [timestamp(created), task.state, outcome, task.principal, task.tool, task.id]
}
