//! How a task reads on the wire (MCP 2025-11-25, utilities §"Tasks"): the `task` a `tools/call` asks with, the
//! `Task` object, the stored answer of a finished call, and the errors of the `tasks/*` methods.
//!
//! Rules: what the ledger keeps is era-neutral — the status (`isError: true` is `failed`, as 2025-11-25 says for
//! tools), the at-most-once outcome of a failure the gateway reported (`unknown`, `not_delivered`), and the answer
//! as `{"result": …}` or `{"error": …}` JSON text; each era's shape is made from it here. Every refusal of a
//! `tasks/*` request is `-32602`, also for another principal's task (no existence leak).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::super::{Found, RpcFailure};
use crate::civil_date::iso8601_millis;
use crate::ledger::{TaskEnd, TaskRow};
use crate::mcp::{OUTCOME_META, jsonrpc};

/// The `_meta` key tying a result to its task.
pub const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";
pub(super) const WORKING: &str = "working";
pub(super) const INPUT_REQUIRED: &str = "input_required";
pub(super) const COMPLETED: &str = "completed";
pub(super) const FAILED: &str = "failed";
pub(super) const CANCELLED: &str = "cancelled";

/// What a task-augmented request asked for: `params.task`, removed from the params the backend gets.
#[derive(Default)]
pub(super) struct Asked {
    /// `task.ttl` in milliseconds, when given.
    pub ttl_ms: Option<i64>,
}

impl Asked {
    /// `None`: the request is not task-augmented. A `task` that is not an object, or a `ttl` that is not a
    /// non-negative integer, is refused.
    pub(super) fn take(params: &mut Value) -> Result<Option<Asked>, RpcFailure> {
        let Some(task) = params.as_object_mut().and_then(|params| params.remove("task")) else {
            return Ok(None);
        };
        let Value::Object(task) = task else {
            return Err(invalid("`params.task` must be an object, e.g. {\"ttl\": 60000}"));
        };
        let ttl_ms = match task.get("ttl") {
            None | Some(Value::Null) => None,
            Some(ttl) => Some(
                ttl.as_u64()
                    .and_then(|ttl| i64::try_from(ttl).ok())
                    .ok_or_else(|| invalid("`params.task.ttl` must be a whole number of milliseconds"))?,
            ),
        };
        Ok(Some(Asked { ttl_ms }))
    }

    /// The ttl the task gets: the one asked for, else `default`, at most `max`.
    pub(super) fn ttl(&self, default: Duration, max: Duration) -> i64 {
        let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.ttl_ms.unwrap_or_else(|| millis(default)).min(millis(max))
    }
}

/// `-32602` with `message`.
pub(super) fn invalid(message: &str) -> RpcFailure {
    RpcFailure::new(jsonrpc::INVALID_PARAMS, message)
}

/// The answer for a task id that is not the caller's (or does not exist, or expired).
pub(super) fn unknown_task(id: &str) -> RpcFailure {
    invalid(&format!("unknown task `{id}` (tasks expire after their ttl)"))
}

/// `params.taskId`.
pub(super) fn task_id(params: &Value) -> Result<&str, RpcFailure> {
    params.get("taskId").and_then(Value::as_str).ok_or_else(|| invalid("`params.taskId` must be a task id"))
}

/// The fields of a `Task` in either era, `status` as the era reads it; the era names the ttl and the poll
/// interval (`[ttl, pollInterval]` or `[ttlMs, pollIntervalMs]`).
pub(super) fn fields(row: &TaskRow, status: &str, [ttl, poll]: [&str; 2]) -> Value {
    let mut task = json!({
        "taskId": row.id,
        "status": status,
        "createdAt": iso8601_millis(row.created_ms),
        "lastUpdatedAt": iso8601_millis(row.updated_ms),
        ttl: row.ttl_ms,
        poll: row.poll_ms,
    });
    if let Some(message) = &row.message {
        task["statusMessage"] = json!(message);
    }
    task
}

/// The `Task` object.
pub(super) fn task(row: &TaskRow) -> Value {
    let mut task = fields(row, &row.state, ["ttl", "pollInterval"]);
    if let Some(outcome) = &row.outcome {
        task["_meta"] = json!({ OUTCOME_META: outcome });
    }
    task
}

/// `CreateTaskResult`.
pub(super) fn created(row: &TaskRow) -> Value {
    json!({ "task": task(row) })
}

/// How a call's answer ends its task, at `now_ms`.
pub(super) fn ending(answer: Result<Found, RpcFailure>, now_ms: i64) -> TaskEnd {
    let end = |state: &str, message: Option<String>, outcome: Option<String>, answer: Value| TaskEnd {
        state: state.into(),
        message,
        outcome,
        answer: Some(answer.to_string()),
        updated_ms: now_ms,
    };
    match answer {
        Ok(found) => {
            let result = found.into_value();
            let outcome =
                result.pointer(&format!("/_meta/{}", OUTCOME_META.replace('/', "~1"))).and_then(Value::as_str);
            match result.get("isError").and_then(Value::as_bool) == Some(true) {
                true => {
                    let outcome = outcome.map(str::to_owned);
                    end(FAILED, Some("the tool call ended in an error".into()), outcome, json!({ "result": result }))
                }
                false => end(COMPLETED, None, None, json!({ "result": result })),
            }
        }
        Err(failure) => {
            let mut error = json!({ "code": failure.code, "message": failure.message });
            if let Some(data) = failure.data {
                error["data"] = data;
            }
            end(FAILED, Some(failure.message), None, json!({ "error": error }))
        }
    }
}

/// How a cancel ends a running task: the call may have reached the backend, so its outcome is unknown.
pub(super) fn cancelled(now_ms: i64) -> TaskEnd {
    let sentence = "The task was cancelled at your request; the call may have partly run; it was not repeated.";
    let result = json!({
        "content": [{ "type": "text", "text": sentence }],
        "isError": true,
        "_meta": { OUTCOME_META: "unknown" },
    });
    TaskEnd {
        state: CANCELLED.into(),
        message: Some("cancelled at the agent's request".into()),
        outcome: Some("unknown".into()),
        answer: Some(json!({ "result": result }).to_string()),
        updated_ms: now_ms,
    }
}

/// What the call answered, for a terminal task: its result or its JSON-RPC error. A task that failed at a restart
/// has no answer: it reads as an unknown outcome.
pub(super) fn call_answer(row: &TaskRow) -> Result<Value, RpcFailure> {
    let stored: Option<Map<String, Value>> = row.answer.as_deref().and_then(|text| serde_json::from_str(text).ok());
    let Some(mut stored) = stored else {
        let sentence = row.message.clone().unwrap_or_else(|| "the gateway stopped while the call ran".into());
        let mut failure = RpcFailure::new(jsonrpc::INTERNAL_ERROR, sentence);
        failure.data = Some(json!({ OUTCOME_META: row.outcome.as_deref().unwrap_or("unknown") }));
        return Err(failure);
    };
    if let Some(Value::Object(mut error)) = stored.remove("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(jsonrpc::INTERNAL_ERROR);
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut failure = RpcFailure::new(code, message);
        failure.data = error.remove("data");
        return Err(failure);
    }
    Ok(stored.remove("result").unwrap_or_else(|| json!({})))
}

/// What `tasks/result` answers (2025-11-25): the call's answer, a result tied to the task in `_meta`.
pub(super) fn stored_answer(row: &TaskRow) -> Result<Value, RpcFailure> {
    let mut result = call_answer(row)?;
    if let Some(result) = result.as_object_mut() {
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK_META.into(), json!({ "taskId": row.id }));
        }
    }
    Ok(result)
}

/// The cursor of the page after `row`, and its reading.
pub(super) fn cursor(row: &TaskRow) -> String {
    format!("{}.{}", row.created_ms, row.id)
}

pub(super) fn read_cursor(cursor: &str) -> Result<(i64, String), RpcFailure> {
    let bad = || invalid("`params.cursor` is not a cursor this gateway gave");
    let (created, id) = cursor.split_once('.').ok_or_else(bad)?;
    Ok((created.parse().map_err(|_| bad())?, id.to_owned()))
}

/// A task row for tests, in `state`, with `outcome` and `answer`.
#[cfg(test)]
pub(super) fn sample_row(state: &str, outcome: Option<&str>, answer: Option<&str>) -> TaskRow {
    TaskRow {
        id: "t1".into(),
        principal: "alice".into(),
        owner: "gw".into(),
        call_key: None,
        tool: "slow".into(),
        state: state.into(),
        message: None,
        outcome: outcome.map(str::to_owned),
        answer: answer.map(str::to_owned),
        created_ms: 0,
        updated_ms: 1,
        ttl_ms: 60_000,
        poll_ms: 1_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw_json::RawJson;
    use crate::router::Relayed;

    fn row(answer: Option<&str>) -> TaskRow {
        sample_row(COMPLETED, None, answer)
    }

    #[test]
    fn task_params_are_taken_out_and_checked() {
        let mut params = json!({"name": "x", "task": {"ttl": 5000}});
        let asked = Asked::take(&mut params).expect("valid").expect("asked");
        assert_eq!((asked.ttl_ms, params), (Some(5000), json!({"name": "x"})));
        assert_eq!(asked.ttl(Duration::from_secs(60), Duration::from_secs(1)), 1000, "bounded");
        assert!(Asked::take(&mut json!({"name": "x"})).expect("valid").is_none());
        assert!(Asked::take(&mut json!({"task": {"ttl": -1}})).is_err());
        assert!(Asked::take(&mut json!({"task": 3})).is_err());
    }

    #[test]
    fn error_results_fail_the_task_with_their_outcome() {
        let raw = RawJson::of(&json!({"content": [], "isError": true, "_meta": {OUTCOME_META: "unknown"}}));
        let end = ending(Ok(Found::Relayed(Relayed::read(raw))), 5);
        assert_eq!((end.state.as_str(), end.outcome.as_deref()), (FAILED, Some("unknown")));
        let end = ending(Ok(Found::Built(json!({"content": []}))), 5);
        assert_eq!((end.state.as_str(), end.outcome), (COMPLETED, None));
        let end = ending(Err(RpcFailure::new(-32602, "bad")), 5);
        assert_eq!(end.answer.as_deref(), Some(r#"{"error":{"code":-32602,"message":"bad"}}"#));
    }

    #[test]
    fn stored_answers_read_back_as_the_call_would_have_answered() {
        let result = stored_answer(&row(Some(r#"{"result":{"content":[]}}"#))).expect("a result");
        assert_eq!(result, json!({"content": [], "_meta": {RELATED_TASK_META: {"taskId": "t1"}}}));
        let error = stored_answer(&row(Some(r#"{"error":{"code":-32602,"message":"bad"}}"#))).expect_err("error");
        assert_eq!((error.code, error.message.as_str()), (-32602, "bad"));
        let orphan = stored_answer(&row(None)).expect_err("no answer");
        assert_eq!(orphan.data, Some(json!({OUTCOME_META: "unknown"})));
        assert!(read_cursor(&cursor(&row(None))).is_ok() && read_cursor("x").is_err());
    }
}
