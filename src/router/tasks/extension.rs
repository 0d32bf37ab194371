//! How a task reads to a 2026-07-28 agent: the `io.modelcontextprotocol/tasks` extension (server-directed
//! creation, a flat `CreateTaskResult` with `resultType: "task"`, `tasks/get` inlining the outcome, `ttlMs` and
//! `pollIntervalMs`).
//!
//! Rules: a request uses the extension only when its own `_meta` client capabilities declare it; without, the
//! `tasks/*` methods are refused with `-32021` naming it, and a tool the backend says requires tasks is refused the
//! same way. A tool that reported an error is `completed` with its `isError` result (the status `failed` is for
//! protocol errors and for failures the gateway reports with an at-most-once outcome, inlined as `error`).

use serde_json::{Value, json};

use super::super::RpcFailure;
use super::input::Pending;
use super::wire::{self, CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED};
use crate::ledger::TaskRow;
use crate::mcp::{OUTCOME_META, jsonrpc};

/// The extension's identifier (capabilities, `requiredCapabilities`).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether the client capabilities a request declares include the extension.
pub(super) fn declared(capabilities: &Value) -> bool {
    capabilities.get("extensions").and_then(|extensions| extensions.get(TASKS_EXTENSION)).is_some()
}

/// `-32021`, naming the extension the request lacks.
pub(super) fn missing(what: &str) -> RpcFailure {
    let mut failure = RpcFailure::new(
        jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("{what} needs the {TASKS_EXTENSION} extension: declare it in the request's client capabilities"),
    );
    failure.data = Some(json!({ "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } } }));
    failure
}

/// Whether a tool definition says the tool must run as a task.
pub(super) fn required(definition: &Value) -> bool {
    definition.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required")
}

/// The `Task` fields both results carry, and the status as this era reads it.
fn base(row: &TaskRow, status: &str) -> Value {
    wire::fields(row, status, ["ttlMs", "pollIntervalMs"])
}

/// `CreateTaskResult`: flat, `resultType: "task"`.
pub(super) fn created(row: &TaskRow) -> Value {
    let mut created = base(row, &row.state);
    created["resultType"] = json!("task");
    created
}

/// `tasks/get`'s `DetailedTask`: a terminal task inlines what its call answered (see the module rules), one
/// waiting for input the requests not answered yet.
pub(super) fn detailed(row: &TaskRow) -> Value {
    if row.state == INPUT_REQUIRED {
        let mut task = base(row, &row.state);
        task["inputRequests"] = Value::Object(Pending::of(row).map(|pending| pending.unanswered()).unwrap_or_default());
        return task;
    }
    if row.state == CANCELLED || !row.is_terminal() {
        return base(row, &row.state);
    }
    match wire::call_answer(row) {
        Ok(result) if row.state == COMPLETED || row.outcome.is_none() => {
            let mut task = base(row, COMPLETED);
            task["result"] = result;
            task
        }
        Ok(result) => {
            let text = result.pointer("/content/0/text").and_then(Value::as_str).unwrap_or("the call failed");
            let error = json!({"code": jsonrpc::INTERNAL_ERROR, "message": text, "data": {OUTCOME_META: row.outcome}});
            failed(row, error)
        }
        Err(failure) => {
            let mut error = json!({ "code": failure.code, "message": failure.message });
            if let Some(data) = failure.data {
                error["data"] = data;
            }
            failed(row, error)
        }
    }
}

fn failed(row: &TaskRow, error: Value) -> Value {
    let mut task = base(row, FAILED);
    task["error"] = error;
    task
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: &str, outcome: Option<&str>, answer: &str) -> TaskRow {
        wire::sample_row(state, outcome, Some(answer))
    }

    #[test]
    fn a_tools_own_error_is_completed_and_the_gateways_failures_are_failed() {
        let own = detailed(&row(FAILED, None, r#"{"result":{"content":[],"isError":true}}"#));
        assert_eq!(
            (&own["status"], &own["result"]["isError"], own.get("error")),
            (&json!("completed"), &json!(true), None)
        );
        let lost = r#"{"result":{"content":[{"type":"text","text":"may have run"}],"isError":true}}"#;
        let lost = detailed(&row(FAILED, Some("unknown"), lost));
        assert_eq!((&lost["status"], &lost["error"]["data"][OUTCOME_META]), (&json!("failed"), &json!("unknown")));
        assert!(lost.get("result").is_none());
        let protocol = detailed(&row(FAILED, None, r#"{"error":{"code":-32603,"message":"boom"}}"#));
        assert_eq!((&protocol["status"], &protocol["error"]["message"]), (&json!("failed"), &json!("boom")));
        let created = created(&row("working", None, "{}"));
        assert_eq!(
            (&created["resultType"], &created["ttlMs"], created.get("ttl")),
            (&json!("task"), &json!(60_000), None)
        );
    }

    #[test]
    fn the_extension_is_read_from_the_requests_capabilities() {
        assert!(declared(&json!({"extensions": {TASKS_EXTENSION: {}}})));
        assert!(!declared(&json!({"extensions": {}})) && !declared(&Value::Null));
        assert_eq!(
            missing("tasks/get").data.expect("data")["requiredCapabilities"]["extensions"][TASKS_EXTENSION],
            json!({})
        );
        assert!(required(&json!({"execution": {"taskSupport": "required"}})) && !required(&json!({})));
    }
}
