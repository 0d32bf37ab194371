//! A task waiting for input (2026-07-28 tasks extension, `input_required`): what a backend's multi round-trip
//! answer (2026-07-28 basic/patterns/mrtr) asked while the gateway ran the call as a task, kept in the task row
//! until the agent's `tasks/update`s have answered every request, then the retry that continues the call.
//!
//! Rules:
//! - The row's answer holds, while the status is `input_required`: the backend's `inputRequests` as it sent them,
//!   the gateway's sealed `requestState` of the call's next round (never shown on `tasks/get`), the call's params
//!   and view, and the responses received so far. It is the whole state, so any replica sharing the store can
//!   take the next update.
//! - `tasks/update` may answer a subset of the requests: answered keys leave `inputRequests`; keys the backend
//!   did not ask (or already answered) are ignored, as MCP says of extra responses. Once every request is
//!   answered, the call is retried once with all the responses and the sealed state — the same retry a
//!   2026-07-28 agent would send itself, so the claim, the round checks and the state's expiry are the
//!   continuation's ([`super::super::continuation`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::super::RpcFailure;
use super::super::continuation::REQUEST_STATE;
use super::wire::{self, INPUT_REQUIRED};
use crate::ledger::{TaskEnd, TaskRow};

/// What a task waiting for input keeps in its row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Pending {
    /// The backend's input requests, by its keys.
    #[serde(rename = "inputRequests")]
    requests: Map<String, Value>,
    /// The gateway's sealed state for the call's next round, if the answer carried one.
    #[serde(rename = "requestState", default, skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    /// The `tools/call` params the call was made with.
    params: Value,
    /// The backend view (`/mcp/<backend>`) the call was made through, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    view: Option<String>,
    /// The responses received so far, by request key.
    #[serde(default)]
    responses: Map<String, Value>,
}

impl Pending {
    /// What `asking` (an `input_required` answer of the call made with `params` through `view`) leaves to wait for.
    pub(super) fn new(asking: &Value, params: Value, view: Option<String>) -> Pending {
        let requests = asking.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
        let state = asking.get(REQUEST_STATE).and_then(Value::as_str).map(str::to_owned);
        Pending { requests, state, params, view, responses: Map::new() }
    }

    /// The pending input of a task in `input_required`.
    pub(super) fn of(row: &TaskRow) -> Result<Pending, RpcFailure> {
        let text = row.answer.as_deref().unwrap_or_default();
        serde_json::from_str(text).map_err(|_| {
            tracing::error!(task = %row.id, "tasks: the input a task waits for is unreadable");
            RpcFailure::new(crate::mcp::jsonrpc::INTERNAL_ERROR, "the task's stored input requests are unreadable")
        })
    }

    /// The row's next state: still waiting, at `now_ms`.
    pub(super) fn waiting(&self, now_ms: i64) -> TaskEnd {
        TaskEnd {
            state: INPUT_REQUIRED.into(),
            message: Some("waiting for the agent's input (tasks/update)".into()),
            outcome: None,
            answer: Some(json!(self).to_string()),
            updated_ms: now_ms,
        }
    }

    /// The requests not answered yet.
    pub(super) fn unanswered(&self) -> Map<String, Value> {
        let open = self.requests.iter().filter(|(key, _)| !self.responses.contains_key(*key));
        open.map(|(key, request)| (key.clone(), request.clone())).collect()
    }

    /// Takes the responses to requests still open; returns how many were taken.
    pub(super) fn answer(&mut self, responses: &Map<String, Value>) -> usize {
        let fresh: Vec<_> = responses
            .iter()
            .filter(|(key, _)| self.requests.contains_key(*key) && !self.responses.contains_key(*key))
            .map(|(key, response)| (key.clone(), response.clone()))
            .collect();
        let taken = fresh.len();
        self.responses.extend(fresh);
        taken
    }

    /// Whether every request is answered (a state-only answer has none to wait for).
    pub(super) fn complete(&self) -> bool {
        self.requests.keys().all(|key| self.responses.contains_key(key))
    }

    /// The retry that continues the call: its params with every response and the sealed state, and its view.
    pub(super) fn retry(self) -> (Value, Option<String>) {
        let mut params = self.params;
        if let Some(object) = params.as_object_mut() {
            if !self.requests.is_empty() {
                object.insert("inputResponses".into(), Value::Object(self.responses));
            }
            if let Some(state) = self.state {
                object.insert(REQUEST_STATE.into(), Value::String(state));
            }
        }
        (params, self.view)
    }
}

/// `params.inputResponses` of a `tasks/update`: an object of objects.
pub(super) fn responses(params: &Value) -> Result<&Map<String, Value>, RpcFailure> {
    let bad =
        || wire::invalid("`params.inputResponses` must be an object of responses keyed as the task's inputRequests");
    let responses = params.get("inputResponses").and_then(Value::as_object).ok_or_else(bad)?;
    match responses.values().all(Value::is_object) {
        true => Ok(responses),
        false => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking() -> Value {
        json!({
            "resultType": "input_required",
            "inputRequests": {"a": {"method": "elicitation/create"}, "b": {"method": "elicitation/create"}},
            "requestState": "sy1.sealed",
        })
    }

    #[test]
    fn responses_accumulate_until_every_request_is_answered() {
        let mut pending = Pending::new(&asking(), json!({"name": "t", "arguments": {}}), Some("fx".into()));
        let first = json!({"a": {"action": "accept"}, "zz": {"action": "accept"}});
        assert_eq!(pending.answer(first.as_object().unwrap()), 1, "an unasked key is ignored");
        assert_eq!(pending.unanswered().keys().collect::<Vec<_>>(), ["b"]);
        assert!(!pending.complete());
        let again = json!({"a": {"action": "decline"}, "b": {"action": "accept"}});
        assert_eq!(pending.answer(again.as_object().unwrap()), 1, "an answered key keeps its first response");
        assert!(pending.complete());
        let (params, view) = pending.retry();
        assert_eq!(view.as_deref(), Some("fx"));
        assert_eq!(params["inputResponses"]["a"], json!({"action": "accept"}));
        assert_eq!((&params["requestState"], &params["name"]), (&json!("sy1.sealed"), &json!("t")));
    }

    #[test]
    fn the_pending_input_survives_the_row_and_bad_updates_are_refused() {
        let pending = Pending::new(&asking(), json!({"name": "t"}), None);
        let row = TaskRow { answer: pending.waiting(5).answer, ..wire::sample_row(INPUT_REQUIRED, None, None) };
        assert_eq!(Pending::of(&row).expect("readable"), pending);
        assert!(Pending::of(&TaskRow { answer: Some("[".into()), ..row }).is_err());
        assert!(responses(&json!({"inputResponses": {"a": {}}})).is_ok());
        for bad in [json!({}), json!({"inputResponses": []}), json!({"inputResponses": {"a": 12345}})] {
            assert_eq!(responses(&bad).expect_err("refused").code, -32602, "{bad}");
        }
        let state_only = Pending::new(&json!({"requestState": "s"}), json!({"name": "t"}), None);
        assert!(state_only.complete(), "nothing to wait for");
        assert!(state_only.retry().0.get("inputResponses").is_none());
    }
}
