//! The tasks running now, for the console: whose each is, which tool, since when and its ttl (docs/tasks.md).
//!
//! Rules: read-only, like every console view; no arguments or results (they are the principal's), only what an
//! operator needs to see what runs in the background.

use serde::Serialize;

use super::super::CallRouter;
use super::calls::{InspectError, MAX_CALLS};
use crate::ledger::{RUNNING_STATES, TaskFilter, TaskRow};

/// One running task, as the console shows it.
#[derive(Debug, Serialize)]
pub struct RunningTask {
    pub task_id: String,
    pub principal: String,
    /// The exposed tool name.
    pub tool: String,
    pub status: String,
    pub created_ms: i64,
    pub ttl_ms: i64,
}

impl CallRouter {
    /// The tasks running now (`working`, `input_required`), oldest first, at most `limit` (capped at
    /// [`MAX_CALLS`]).
    pub async fn running_tasks(&self, limit: usize) -> Result<Vec<RunningTask>, InspectError> {
        let limit = u32::try_from(limit.min(MAX_CALLS)).unwrap_or(u32::MAX);
        let mut running = Vec::new();
        for state in RUNNING_STATES {
            let filter = TaskFilter { state: Some(state.to_owned()), limit, ..TaskFilter::default() };
            running.extend(self.ledger.store.tasks(&filter).await?.into_iter().map(view));
        }
        running.sort_by_key(|task| task.created_ms);
        running.truncate(limit as usize);
        Ok(running)
    }
}

fn view(row: TaskRow) -> RunningTask {
    RunningTask {
        task_id: row.id,
        principal: row.principal,
        tool: row.tool,
        status: row.state,
        created_ms: row.created_ms,
        ttl_ms: row.ttl_ms,
    }
}
