//! Tasks in memory: a map by id behind a lock of its own, with the same rules as the SQL stores' table (a
//! terminal status never changes; a call key has one task).

use super::super::error::LedgerError;
use super::super::tasks::{Seen, TaskEnd, TaskFilter, TaskRow};
use super::MemoryStore;

impl MemoryStore {
    pub(crate) async fn create_task(&self, row: &TaskRow) -> Result<TaskRow, LedgerError> {
        let mut tasks = self.inner.tasks.lock();
        let same_key = |task: &&TaskRow| row.call_key.is_some() && task.call_key == row.call_key;
        if let Some(existing) = tasks.values().find(same_key) {
            return Ok(existing.clone());
        }
        Ok(tasks.entry(row.id.clone()).or_insert_with(|| row.clone()).clone())
    }

    pub(crate) async fn task(&self, id: &str) -> Result<Option<TaskRow>, LedgerError> {
        Ok(self.inner.tasks.lock().get(id).cloned())
    }

    /// Ends (or, with `seen`, steps) a running task; see the SQL stores' `finish` statement.
    pub(crate) async fn finish_task(&self, id: &str, end: &TaskEnd, seen: Seen<'_>) -> Result<bool, LedgerError> {
        let mut tasks = self.inner.tasks.lock();
        match tasks.get_mut(id) {
            Some(task)
                if !task.is_terminal() && seen.is_none_or(|seen| (task.state.as_str(), task.updated_ms) == seen) =>
            {
                finish(task, end);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    pub(crate) async fn orphan_tasks(&self, owner: &str, message: &str, now_ms: i64) -> Result<u64, LedgerError> {
        let end = TaskEnd {
            state: "failed".into(),
            message: Some(message.into()),
            outcome: Some("unknown".into()),
            answer: None,
            updated_ms: now_ms,
        };
        let mut tasks = self.inner.tasks.lock();
        let orphans = tasks.values_mut().filter(|task| task.owner == owner && !task.is_terminal());
        Ok(orphans.map(|task| finish(task, &end)).count() as u64)
    }

    pub(crate) async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>, LedgerError> {
        let tasks = self.inner.tasks.lock();
        let mut selected: Vec<TaskRow> = tasks.values().filter(|task| selects(filter, task)).cloned().collect();
        selected.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        selected.truncate(filter.limit as usize);
        Ok(selected)
    }

    pub(crate) async fn purge_tasks(&self, now_ms: i64) -> Result<u64, LedgerError> {
        let mut tasks = self.inner.tasks.lock();
        let before = tasks.len();
        tasks.retain(|_, task| task.created_ms + task.ttl_ms >= now_ms);
        Ok((before - tasks.len()) as u64)
    }
}

fn finish(task: &mut TaskRow, end: &TaskEnd) {
    task.state.clone_from(&end.state);
    task.message.clone_from(&end.message);
    task.outcome.clone_from(&end.outcome);
    task.answer.clone_from(&end.answer);
    task.updated_ms = end.updated_ms;
}

fn selects(filter: &TaskFilter, task: &TaskRow) -> bool {
    let after = filter.after.as_ref().is_none_or(|(created, id)| (task.created_ms, &task.id) > (*created, id));
    filter.principal.as_ref().is_none_or(|principal| &task.principal == principal)
        && filter.state.as_ref().is_none_or(|state| &task.state == state)
        && after
}
