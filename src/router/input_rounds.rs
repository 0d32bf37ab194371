//! Multi round-trip results for agents of the session era (MCP 2026-07-28
//! `basic/patterns/mrtr.mdx`, MCP 2026-07-28 §5): a 2026-07-28 backend that answers `tools/call`,
//! `prompts/get` or `resources/read` with `resultType: "input_required"` has its input requests put to a
//! 2025-11-25 agent as the server-to-client requests that agent understands (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`, relayed like a 2025 backend's own), and is retried with the answers
//! until it gives a final answer.
//!
//! Rules:
//! - Only for an agent that can be sent requests at all (a 2026-07-28 agent's relay refuses them; it gets the
//!   `input_required` result itself), and only kinds it declared in `initialize` (an `elicitation` without `form`
//!   or `url` means form only; sampling with `tools` needs `sampling.tools`). A backend that asks for anything else
//!   ends the call with an error naming what it asked; nothing is sent to the agent then.
//! - A retry is the same method and params plus `inputResponses`, keyed as the backend keyed its requests, and the
//!   backend's `requestState` echoed exactly when it gave one; the backend client gives it a fresh JSON-RPC id.
//! - The rounds are one logical call: the caller claims it before the first round and settles it after the last,
//!   and what this returns is never `input_required`. Once the first round reached the backend, every way the
//!   loop can end without a final answer is after delivery (the claim becomes `unknown`, never rerun) — a retry
//!   the backend provably did not get included, as the first round may have done something already.
//! - The agent answers within the call's deadline; its JSON-RPC error, a missing answer, a backend still asking
//!   after [`MAX_ROUNDS`] rounds or an agent that cannot be asked (JSON-only answers) end the call. Its
//!   `notifications/cancelled` ends it too: between rounds nothing is open upstream, within one the backend
//!   client closes the stream, which is the cancellation signal of the modern wire.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::continuation::CONTINUABLE;
use super::{CallRouter, Relayed};
use crate::backend::mcp_client::{AfterDeliveryCause, Destination, McpError};
use crate::mcp::{Relay, jsonrpc, method};

/// How many `input_required` answers one call may get. A backend that keeps asking is more likely looping than
/// gathering input, and every round holds a claim and waits on a person: 16 covers any dialogue a tool needs.
pub(super) const MAX_ROUNDS: usize = 16;
/// Numbers the `elicitationId`s the gateway gives URL-mode elicitations that came without one.
static NEXT_ELICITATION: AtomicU64 = AtomicU64::new(0);

/// Why the rounds ended without the backend's final answer.
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error("its input_required result is malformed: {0}")]
    Malformed(String),
    #[error("it asked for `{method}`, which the agent did not declare in initialize ({needs})")]
    Undeclared { method: String, needs: &'static str },
    #[error("it asked for `{0}`, but the agent cannot be sent requests during this call (it accepts only JSON)")]
    CannotAsk(String),
    #[error("the agent answered its `{method}` with error {code}: {message}")]
    AgentError { method: String, code: i64, message: String },
    #[error("the agent answered its `{0}` without a result")]
    NoResult(String),
    #[error("the agent did not answer its `{0}` before the call's deadline")]
    Deadline(String),
    #[error("it still asked for input after {MAX_ROUNDS} rounds")]
    TooManyRounds,
    #[error("cancelled")]
    Cancelled,
}

impl Stop {
    fn into_error(self) -> McpError {
        let cause = match self {
            Stop::Cancelled => return McpError::Cancelled,
            Stop::Deadline(_) => AfterDeliveryCause::Deadline,
            _ => AfterDeliveryCause::Malformed,
        };
        McpError::AfterDelivery { cause, reason: format!("the backend needed input it did not get: {self}").into() }
    }
}

/// One input request of the backend's: its key, method and params.
struct InputRequest<'a> {
    key: &'a str,
    method: &'a str,
    params: &'a Value,
}

impl CallRouter {
    /// Sends `method` to the backend and, for an agent that can be asked, serves the backend's `input_required`
    /// answers until it gives a final one (see the module rules).
    pub(super) async fn request_in_rounds(
        &self,
        to: Destination<'_>,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Result<Relayed, McpError> {
        if !CONTINUABLE.contains(&method) || relay.refuses_requests() {
            return self.client.request_raw(to, method, params, relay).await.map(Relayed::read);
        }
        let mut answer = Relayed::read(self.client.request_raw(to, method, params.clone(), relay).await?);
        let mut rounds = 0;
        // Only an answer that asks for input is read as a tree; a final one goes back as the backend's text.
        while answer.flags.asks_input() {
            rounds += 1;
            let asking = answer.result.to_value();
            let retry = match rounds {
                1..=MAX_ROUNDS => Box::pin(ask_agent(&asking, &params, relay, to.context.deadline())).await,
                _ => Err(Stop::TooManyRounds),
            };
            let retry = retry.map_err(Stop::into_error)?;
            // Boxed, as the rounds are rare: the first request's future alone sizes the call's.
            let retried = Box::pin(self.client.request_raw(to, method, retry, relay));
            answer = Relayed::read(retried.await.map_err(delivered)?);
        }
        Ok(answer)
    }
}

/// A retry's failure, once an earlier round reached the backend: "not delivered" no longer proves the call did
/// nothing.
fn delivered(error: McpError) -> McpError {
    if !error.proves_not_delivered() {
        return error;
    }
    let reason = format!("a retry did not reach it ({error}), but an earlier round of the call did");
    McpError::AfterDelivery { cause: AfterDeliveryCause::Ended, reason: reason.into() }
}

/// Puts the input requests of `asking` (an `input_required` result) to the agent and gives the retry's params.
async fn ask_agent(asking: &Value, params: &Value, relay: &Relay, deadline: Instant) -> Result<Value, Stop> {
    let requests = input_requests(asking)?;
    let state = asking.get("requestState");
    if requests.is_empty() && state.is_none() {
        return Err(Stop::Malformed("neither inputRequests nor requestState".into()));
    }
    for request in &requests {
        declared(relay.capabilities(), request)?;
    }
    let mut waiting = Vec::with_capacity(requests.len());
    for request in &requests {
        let message = jsonrpc::request(&json!(request.key), request.method, Some(for_agent(request)));
        let answer = relay.ask(request.method, message).ok_or_else(|| Stop::CannotAsk(request.method.into()))?;
        waiting.push((request, answer));
    }
    let responses = answers(waiting, relay, deadline).await?;
    let mut retry = params.as_object().cloned().unwrap_or_default();
    if !requests.is_empty() {
        retry.insert("inputResponses".into(), Value::Object(responses));
    }
    match state {
        Some(state) => retry.insert("requestState".into(), state.clone()),
        None => retry.remove("requestState"),
    };
    Ok(Value::Object(retry))
}

/// The input requests of an `input_required` result, in the backend's order.
fn input_requests(asking: &Value) -> Result<Vec<InputRequest<'_>>, Stop> {
    let requests = match asking.get("inputRequests") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(requests)) => requests,
        Some(_) => return Err(Stop::Malformed("inputRequests is not an object".into())),
    };
    requests
        .iter()
        .map(|(key, request)| {
            let method = request.get("method").and_then(Value::as_str);
            let method = method.ok_or_else(|| Stop::Malformed(format!("input request `{key}` has no method")))?;
            let params = request.get("params").unwrap_or(&Value::Null);
            Ok(InputRequest { key, method, params })
        })
        .collect()
}

/// Whether the agent declared what `request` needs (2025-11-25 `client/elicitation.mdx`, `client/sampling.mdx`).
fn declared(capabilities: &Value, request: &InputRequest<'_>) -> Result<(), Stop> {
    let has = |pointer: &str| capabilities.pointer(pointer).is_some_and(|value| !value.is_null());
    let needs = match request.method {
        method::ELICITATION_CREATE if request.params.get("mode").and_then(Value::as_str) == Some("url") => {
            Some("elicitation.url").filter(|_| !has("/elicitation/url"))
        }
        method::ELICITATION_CREATE => {
            let form = has("/elicitation/form") || (has("/elicitation") && !has("/elicitation/url"));
            Some("elicitation.form").filter(|_| !form)
        }
        method::SAMPLING_CREATE_MESSAGE if request.params.get("tools").is_some() => {
            Some("sampling.tools").filter(|_| !has("/sampling/tools"))
        }
        method::SAMPLING_CREATE_MESSAGE => Some("sampling").filter(|_| !has("/sampling")),
        method::ROOTS_LIST => Some("roots").filter(|_| !has("/roots")),
        _ => Some("not a kind of input request"),
    };
    match needs {
        None => Ok(()),
        Some(needs) => Err(Stop::Undeclared { method: request.method.into(), needs }),
    }
}

/// The params of `request` as a 2025 agent expects them: a URL-mode elicitation must carry an `elicitationId`
/// (2025-11-25 `client/elicitation.mdx`), which the modern form has no use for; a missing one is made unique
/// within the gateway.
fn for_agent(request: &InputRequest<'_>) -> Value {
    let mut params = request.params.clone();
    let url_mode = params.get("mode").and_then(Value::as_str) == Some("url");
    if let Some(object) = params.as_object_mut().filter(|_| request.method == method::ELICITATION_CREATE && url_mode) {
        let next = NEXT_ELICITATION.fetch_add(1, Ordering::Relaxed);
        object.entry("elicitationId").or_insert_with(|| json!(format!("switchyard-elicitation-{next}")));
    }
    params
}

/// The agent's results, keyed as the backend keyed its requests; the agent's cancel or the deadline end the wait.
async fn answers(
    waiting: Vec<(&InputRequest<'_>, oneshot::Receiver<Value>)>,
    relay: &Relay,
    deadline: Instant,
) -> Result<Map<String, Value>, Stop> {
    let cancelled = async {
        match relay.cancel() {
            Some(cancel) => cancel.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(cancelled);
    let mut responses = Map::new();
    for (request, answer) in waiting {
        let reply = tokio::select! {
            () = &mut cancelled => return Err(Stop::Cancelled),
            reply = tokio::time::timeout_at(deadline, answer) => reply,
        };
        let Ok(Ok(reply)) = reply else { return Err(Stop::Deadline(request.method.into())) };
        responses.insert(request.key.to_owned(), result_of(request, reply)?);
    }
    Ok(responses)
}

/// The result of the agent's response to `request`.
fn result_of(request: &InputRequest<'_>, mut reply: Value) -> Result<Value, Stop> {
    if let Some(error) = reply.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(jsonrpc::INTERNAL_ERROR);
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        return Err(Stop::AgentError { method: request.method.into(), code, message });
    }
    match reply.get_mut("result").map(Value::take) {
        Some(result) if result.is_object() => Ok(result),
        _ => Err(Stop::NoResult(request.method.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(method: &'a str, params: &'a Value) -> InputRequest<'a> {
        InputRequest { key: "k", method, params }
    }

    fn needs(capabilities: Value, method: &str, params: Value) -> Option<&'static str> {
        match declared(&capabilities, &request(method, &params)) {
            Ok(()) => None,
            Err(Stop::Undeclared { needs, .. }) => Some(needs),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn only_declared_kinds_and_modes_are_asked() {
        let form = json!({"message": "m", "requestedSchema": {}});
        let url = json!({"mode": "url", "message": "m", "url": "https://example.test/"});
        assert_eq!(needs(json!({"elicitation": {}}), method::ELICITATION_CREATE, form.clone()), None);
        assert_eq!(needs(json!({"elicitation": {}}), method::ELICITATION_CREATE, url.clone()), Some("elicitation.url"));
        assert_eq!(needs(json!({"elicitation": {"url": {}}}), method::ELICITATION_CREATE, url), None);
        let url_only = needs(json!({"elicitation": {"url": {}}}), method::ELICITATION_CREATE, form.clone());
        assert_eq!(url_only, Some("elicitation.form"));
        assert_eq!(needs(json!({"roots": {}}), method::ELICITATION_CREATE, form), Some("elicitation.form"));
        let sample = json!({"messages": [], "maxTokens": 5});
        assert_eq!(needs(json!({"sampling": {}}), method::SAMPLING_CREATE_MESSAGE, sample.clone()), None);
        assert_eq!(needs(json!(null), method::SAMPLING_CREATE_MESSAGE, sample), Some("sampling"));
        let with_tools = json!({"messages": [], "maxTokens": 5, "tools": []});
        let tools = needs(json!({"sampling": {}}), method::SAMPLING_CREATE_MESSAGE, with_tools);
        assert_eq!(tools, Some("sampling.tools"));
        assert_eq!(needs(json!({"roots": {"listChanged": true}}), method::ROOTS_LIST, json!(null)), None);
        assert_eq!(needs(json!({"roots": {}}), "tools/list", json!(null)), Some("not a kind of input request"));
    }

    #[test]
    fn url_elicitations_get_an_id_when_they_have_none() {
        let url = json!({"mode": "url", "message": "m", "url": "https://example.test/"});
        let given = for_agent(&request(method::ELICITATION_CREATE, &url));
        assert!(given["elicitationId"].as_str().is_some_and(|id| id.starts_with("switchyard-elicitation-")));
        assert_eq!(given["url"], url["url"], "the rest verbatim");
        let other = for_agent(&request(method::ELICITATION_CREATE, &url))["elicitationId"].clone();
        assert_ne!(given["elicitationId"], other, "unique");
        let own = json!({"mode": "url", "message": "m", "url": "u", "elicitationId": "e-1"});
        assert_eq!(for_agent(&request(method::ELICITATION_CREATE, &own)), own, "an id of the backend's stays");
        let form = json!({"message": "m", "requestedSchema": {}});
        assert_eq!(for_agent(&request(method::ELICITATION_CREATE, &form)), form, "form mode has no id");
    }

    #[test]
    fn malformed_requests_and_agent_errors_are_named() {
        let not_object = json!({"resultType": "input_required", "inputRequests": []});
        assert!(matches!(input_requests(&not_object), Err(Stop::Malformed(_))));
        let no_method = json!({"inputRequests": {"a": {"params": {}}}});
        assert!(input_requests(&no_method).is_err_and(|stop| stop.to_string().contains("`a` has no method")));
        let params = json!({});
        let asked = request(method::ROOTS_LIST, &params);
        let refused = result_of(&asked, json!({"id": 1, "error": {"code": -1, "message": "no"}})).unwrap_err();
        assert_eq!(refused.to_string(), "the agent answered its `roots/list` with error -1: no");
        assert!(matches!(result_of(&asked, json!({"id": 1})), Err(Stop::NoResult(_))));
        assert_eq!(result_of(&asked, json!({"id": 1, "result": {"roots": []}})).unwrap(), json!({"roots": []}));
    }

    #[test]
    fn stops_are_after_delivery_and_retries_not_delivered_become_so() {
        let error = Stop::TooManyRounds.into_error();
        assert!(matches!(error, McpError::AfterDelivery { cause: AfterDeliveryCause::Malformed, .. }));
        assert!(error.to_string().contains("still asked for input after 16 rounds"), "{error}");
        assert!(matches!(Stop::Cancelled.into_error(), McpError::Cancelled));
        let deadline = Stop::Deadline("roots/list".into()).into_error();
        assert!(matches!(deadline, McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, .. }));
        let refused = McpError::NotDelivered {
            cause: crate::backend::mcp_client::NotDeliveredCause::Connect,
            reason: "could not connect".into(),
        };
        let retried = delivered(refused);
        assert!(!retried.proves_not_delivered(), "{retried}");
        assert!(matches!(delivered(McpError::Cancelled), McpError::Cancelled));
    }
}
