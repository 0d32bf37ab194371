//! A 2025-11-25 agent in front of a 2026-07-28 backend that answers with `input_required`: the
//! gateway puts the backend's input requests to the agent as server-to-client requests and retries the backend
//! with the answers, round after round, as one call of the ledger. The backend is [`AskingBackend`], a modern-only
//! server of our own whose `book` tool asks for an elicitation, then a sampling and the roots in one round, then
//! completes (checking that its `requestState` came back exactly); the agents are the official Python SDK's
//! client and our own raw HTTP agent, which also walks the fault paths (a decline, an agent's error, an
//! undeclared kind, a JSON-only agent, a backend that never stops asking, a cancel, an agent that hangs up, a
//! backend gone before a retry).

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{Value, json};
use switchyard::backend::event_stream::SseDecoder;
use switchyard::ledger::{ClaimState, ListFilter};
use tokio::task::JoinHandle;

use crate::real_clients::ANSWER_TIMEOUT;
use crate::support::assert::{eventually, outcome, text};
use crate::support::fault_backend::accept_loop;
use crate::support::gateway::{Agent, TestGateway, backend_toml};
use crate::support::interop::{interop_dir, python_interpreter};

/// The first `requestState` of `book`: not plain ASCII, with quotes, so only an exact echo matches.
const FIRST_STATE: &str = "book-1/ä\"opaque\"";
const ALL_KINDS: &str = r#"{"elicitation": {}, "sampling": {}, "roots": {"listChanged": true}}"#;

fn all_kinds() -> Value {
    serde_json::from_str(ALL_KINDS).unwrap()
}

/// A modern-only MCP server (no sessions, no `initialize`) whose tools ask for input; it records every
/// `tools/call` message it receives.
struct AskingBackend {
    url: String,
    calls: Arc<Mutex<Vec<Value>>>,
    server: JoinHandle<()>,
}

impl Drop for AskingBackend {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl AskingBackend {
    async fn start() -> AskingBackend {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the backend");
        let url = format!("http://{}/mcp", listener.local_addr().expect("backend address"));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new().fallback(post(serve)).with_state(Arc::clone(&calls));
        let server = tokio::spawn(accept_loop(listener, move |stream| {
            let service = TowerToHyperService::new(app.clone());
            async move {
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            }
        }));
        AskingBackend { url, calls, server }
    }

    /// The params of every `tools/call` received, in order.
    fn calls(&self) -> Vec<Value> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|call| call["params"].clone()).collect()
    }

    /// Stops serving: connections close and new ones are refused.
    fn stop(&self) {
        self.server.abort();
    }

    fn ids(&self) -> Vec<Value> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|call| call["id"].clone()).collect()
    }
}

async fn serve(State(calls): State<Arc<Mutex<Vec<Value>>>>, body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else { return StatusCode::BAD_REQUEST.into_response() };
    let Some(id) = message.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let answer = match message["method"].as_str().unwrap_or_default() {
        "server/discover" => Ok(json!({
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "prompts": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "asking", "version": "0"}}})),
        "tools/list" => Ok(json!({"resultType": "complete", "tools": [
            {"name": "book", "inputSchema": {"type": "object"}},
            {"name": "forever", "inputSchema": {"type": "object"}}]})),
        "prompts/list" => Ok(json!({"resultType": "complete", "prompts": [{"name": "greet"}]})),
        "prompts/get" => Ok(match params.get("requestState") {
            None => asking(json!({"dirs": {"method": "roots/list", "params": {}}}), "greet-1"),
            Some(_) => json!({"resultType": "complete", "messages": [{"role": "user", "content": {"type": "text",
                "text": format!("hello from {}", params["inputResponses"]["dirs"]["roots"][0]["uri"])}}]}),
        }),
        "tools/call" => {
            calls.lock().unwrap_or_else(PoisonError::into_inner).push(message.clone());
            match params["name"].as_str() {
                Some("forever") => Ok(asking(json!({"again": elicitation("Once more?")}), "forever")),
                _ => book(&params),
            }
        }
        _ => Err((-32601, "method not found")),
    };
    let response = match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, text)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}),
    };
    let token = params.pointer("/_meta/progressToken").filter(|_| response["result"]["resultType"] == "complete");
    match token {
        // The last round streams a progress notification before its result.
        Some(token) => {
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "total": 1}});
            let body = format!("data: {progress}\n\ndata: {response}\n\n");
            ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }
        None => ([(header::CONTENT_TYPE, "application/json")], response.to_string()).into_response(),
    }
}

fn elicitation(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object",
        "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}}})
}

fn asking(requests: Value, state: &str) -> Value {
    json!({"resultType": "input_required", "inputRequests": requests, "requestState": state})
}

fn complete(text: String) -> Value {
    json!({"resultType": "complete", "content": [{"type": "text", "text": text}]})
}

/// `book`: seats (elicitation), then a note (sampling) and the roots in one round, then the booking.
fn book(params: &Value) -> Result<Value, (i64, &'static str)> {
    let responses = &params["inputResponses"];
    match params.get("requestState").and_then(Value::as_str) {
        None => Ok(asking(json!({"seats": elicitation("How many seats?")}), FIRST_STATE)),
        Some(FIRST_STATE) if responses["seats"]["action"] != "accept" => {
            Ok(complete(format!("not booked: the user chose {}", responses["seats"]["action"])))
        }
        Some(FIRST_STATE) => {
            let seats = responses["seats"]["content"]["seats"].as_i64().ok_or((-32602, "no seats"))?;
            let note = json!({"method": "sampling/createMessage", "params": {"maxTokens": 20, "messages": [
                {"role": "user", "content": {"type": "text", "text": "Describe the seat"}}]}});
            let roots = json!({"method": "roots/list", "params": {}});
            Ok(asking(json!({"note": note, "dirs": roots}), &format!("book-2:{seats}")))
        }
        Some(state) if state.starts_with("book-2:") => {
            let note = responses["note"]["content"]["text"].as_str().ok_or((-32602, "no note"))?;
            let roots = responses["dirs"]["roots"].as_array().ok_or((-32602, "no roots"))?;
            let uris: Vec<&str> = roots.iter().filter_map(|root| root["uri"].as_str()).collect();
            Ok(complete(format!("booked {} seats; note: {note}; roots: {}", &state[7..], uris.join(","))))
        }
        Some(_) => Err((-32602, "invalid requestState")),
    }
}

async fn gateway_for(backend: &AskingBackend, extra: &str) -> TestGateway {
    TestGateway::start("", &backend_toml("trips", &backend.url, extra)).await
}

fn call(id: u64, tool: &str, key: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {"trip": 7},
        "_meta": {"progressToken": "p-1", "switchyard/idempotency-key": key}}})
}

/// The messages of one call's event stream, as the agent reads them.
struct Events {
    response: reqwest::Response,
    decoder: SseDecoder,
}

impl Events {
    /// Posts `message`; an answer in plain JSON (nothing for the agent on the way) reads as one message.
    async fn open(agent: &Agent, message: &Value) -> Events {
        let mut response = agent.post_streaming(message).await;
        let mut decoder = SseDecoder::new(1 << 20);
        if response.headers()["content-type"] == "application/json" {
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.expect("the answer reads") {
                body.extend_from_slice(&chunk);
            }
            decoder.feed(format!("data: {}\n\n", String::from_utf8_lossy(&body)).as_bytes()).expect("one event");
        }
        Events { response, decoder }
    }

    /// The next JSON message, within 10 s.
    async fn next(&mut self) -> Value {
        loop {
            while let Some(event) = self.decoder.next_event() {
                if let Ok(message) = serde_json::from_str(&event.data) {
                    return message;
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk()).await;
            let chunk = chunk.expect("a message within 10 s").expect("the stream reads").expect("the stream goes on");
            self.decoder.feed(&chunk).expect("well-formed events");
        }
    }
}

/// What an agent saw during one call: the requests put to it, the notifications, and the response.
struct Seen {
    requests: Vec<Value>,
    notifications: Vec<Value>,
    response: Value,
}

/// Posts `message` and answers every request on its stream with `answer` (a `result` or an `error` member).
async fn drive(agent: &Agent, message: &Value, answer: impl Fn(&Value) -> Value) -> Seen {
    let mut events = Events::open(agent, message).await;
    let mut seen = Seen { requests: Vec::new(), notifications: Vec::new(), response: Value::Null };
    loop {
        let next = events.next().await;
        match (next.get("method"), next.get("id")) {
            (Some(_), Some(id)) => {
                let mut reply = answer(&next);
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = id.clone();
                assert_eq!(agent.send(&reply).await.status, reqwest::StatusCode::ACCEPTED);
                seen.requests.push(next);
            }
            (Some(_), None) => seen.notifications.push(next),
            (None, _) => {
                seen.response = next;
                return seen;
            }
        }
    }
}

/// What the raw agent answers: three seats, an aisle seat, one root.
fn answers(request: &Value) -> Value {
    match request["method"].as_str() {
        Some("elicitation/create") => json!({"result": {"action": "accept", "content": {"seats": 3}}}),
        Some("sampling/createMessage") => json!({"result": {"role": "assistant", "model": "raw",
            "content": {"type": "text", "text": "aisle"}}}),
        Some("roots/list") => json!({"result": {"roots": [{"uri": "file:///home", "name": "home"}]}}),
        other => panic!("unexpected request {other:?}"),
    }
}

fn methods(requests: &[Value]) -> Vec<&str> {
    requests.iter().map(|request| request["method"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_2025_agent_answers_a_modern_backends_input_requests_round_by_round() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;

    let seen = drive(&agent, &call(1, "trips__book", "k-1"), answers).await;
    assert_eq!(text(&seen.response), "booked 3 seats; note: aisle; roots: file:///home", "{}", seen.response);
    assert_eq!(seen.response["id"], 1);
    assert!(seen.response["result"].get("resultType").is_none_or(|kind| kind == "complete"), "{}", seen.response);
    assert_eq!(methods(&seen.requests), ["elicitation/create", "sampling/createMessage", "roots/list"]);
    assert!(seen.requests.iter().all(|r| r["id"].as_str().is_some_and(|id| id.starts_with("switchyard-"))));
    assert_eq!(seen.requests[0]["params"]["message"], "How many seats?", "the params verbatim");
    let progress: Vec<&Value> = seen.notifications.iter().filter(|n| n["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 1, "{:?}", seen.notifications);
    assert_eq!(progress[0]["params"]["progressToken"], "p-1", "progress of a later round, with the agent's token");

    let calls = backend.calls();
    assert_eq!(calls.len(), 3, "three rounds: {calls:?}");
    let ids = backend.ids();
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "a fresh id per round: {ids:?}");
    assert!(calls[0].get("inputResponses").is_none() && calls[0].get("requestState").is_none());
    for retry in &calls {
        assert_eq!((&retry["name"], &retry["arguments"]), (&json!("book"), &json!({"trip": 7})), "same params");
    }
    assert_eq!(calls[1]["requestState"], FIRST_STATE, "echoed exactly");
    assert_eq!(calls[1]["inputResponses"], json!({"seats": {"action": "accept", "content": {"seats": 3}}}));
    assert_eq!(calls[2]["requestState"], "book-2:3");
    let keys: Vec<&String> = calls[2]["inputResponses"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["note", "dirs"], "keyed as the backend keyed its requests");
    assert_eq!(calls[2]["inputResponses"]["dirs"]["roots"][0]["uri"], "file:///home");

    // One logical call: the same key again is answered from the claim; no round runs again.
    let again = drive(&agent, &call(2, "trips__book", "k-1"), answers).await;
    assert_eq!(text(&again.response), text(&seen.response));
    assert_eq!(again.response["result"]["_meta"]["switchyard/replayed"], true, "{}", again.response);
    assert!(again.requests.is_empty());
    assert_eq!(backend.calls().len(), 3, "the final round never runs twice");
}

#[tokio::test]
async fn the_python_sdk_client_answers_the_rounds_with_its_callbacks() {
    let Some(python) = python_interpreter() else { return };
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let mut command = tokio::process::Command::new(python);
    command.arg(interop_dir().join("python_input_agent.py")).arg(gateway.mcp()).arg("trips__book").arg("{}");
    command.current_dir(interop_dir()).stdout(Stdio::piped()).kill_on_drop(true);
    let output = tokio::time::timeout(ANSWER_TIMEOUT, command.output()).await.expect("the agent finishes");
    let output = output.expect("the Python agent runs");
    let line = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(line.trim()).unwrap_or_else(|_| panic!("one JSON line: {line}"));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["isError"], false, "{report}");
    assert_eq!(report["texts"], json!(["booked 2 seats; note: a window seat; roots: file:///trips"]));
    let asked = json!([
        ["elicitation/create", "How many seats?"],
        ["sampling/createMessage", "Describe the seat"],
        ["roots/list", ""]
    ]);
    assert_eq!(report["asked"], asked, "each kind asked once, in the backend's order");
    let calls = backend.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[2]["inputResponses"]["note"]["model"], "python-sdk-test", "the SDK's own result, verbatim");
}

#[tokio::test]
async fn a_decline_goes_to_the_backend_which_decides() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let seen = drive(&agent, &call(1, "trips__book", "k"), |_| json!({"result": {"action": "decline"}})).await;
    assert_eq!(text(&seen.response), "not booked: the user chose \"decline\"");
    assert!(seen.response["result"].get("isError").is_none(), "{}", seen.response);
    assert_eq!(backend.calls().len(), 2);
}

/// The call ended without the backend's final answer: an error result, `unknown`, never rerun.
async fn assert_unknown(agent: &Agent, seen: &Seen, backend: &AskingBackend, rounds: usize, why: &str) {
    let response = &seen.response;
    assert_eq!(response["result"]["isError"], true, "{response}");
    assert_eq!(outcome(response), Some("unknown"), "{response}");
    assert!(text(response).contains(why), "{response}");
    assert_eq!(backend.calls().len(), rounds);
    let again = drive(agent, &call(9, "trips__book", "k"), answers).await;
    assert_eq!(outcome(&again.response), Some("unknown"), "a duplicate is not run: {}", again.response);
    assert!(again.requests.is_empty());
    assert_eq!(backend.calls().len(), rounds, "no round ran again");
}

#[tokio::test]
async fn an_agents_error_ends_the_call_as_unknown() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let refuse = |_: &Value| json!({"error": {"code": -32000, "message": "the user closed the dialog"}});
    let seen = drive(&agent, &call(1, "trips__book", "k"), refuse).await;
    let why = "the agent answered its `elicitation/create` with error -32000: the user closed the dialog";
    assert_unknown(&agent, &seen, &backend, 1, why).await;
}

#[tokio::test]
async fn a_kind_the_agent_did_not_declare_is_not_sent() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), json!({"elicitation": {}, "roots": {}})).await;
    let seen = drive(&agent, &call(1, "trips__book", "k"), answers).await;
    assert_eq!(methods(&seen.requests), ["elicitation/create"], "nothing of the second round was sent");
    let why = "asked for `sampling/createMessage`, which the agent did not declare in initialize (sampling)";
    assert_unknown(&agent, &seen, &backend, 2, why).await;
}

#[tokio::test]
async fn a_backend_that_keeps_asking_is_stopped_after_16_rounds() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let seen = drive(&agent, &call(1, "trips__forever", "k"), answers).await;
    assert_eq!(seen.requests.len(), 16, "{}", seen.response);
    assert_eq!(seen.response["result"]["isError"], true, "{}", seen.response);
    assert_eq!(outcome(&seen.response), Some("unknown"));
    assert!(text(&seen.response).contains("still asked for input after 16 rounds"), "{}", seen.response);
    assert_eq!(backend.calls().len(), 17, "the first call and 16 retries");
}

#[tokio::test]
async fn an_agent_that_accepts_only_json_cannot_be_asked() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let body = serde_json::to_vec(&call(1, "trips__book", "k")).unwrap();
    let reply = agent.post_raw(body, &[("accept", "application/json")]).await;
    let response = reply.body.expect("a JSON answer");
    assert_eq!(response["result"]["isError"], true, "{response}");
    assert_eq!(outcome(&response), Some("unknown"));
    assert!(text(&response).contains("it accepts only JSON"), "{response}");
    assert_eq!(backend.calls().len(), 1);
}

#[tokio::test]
async fn a_cancel_between_rounds_ends_the_call() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let mut events = Events::open(&agent, &call(1, "trips__book", "k")).await;
    assert_eq!(events.next().await["method"], "elicitation/create");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    assert_eq!(agent.send(&cancel).await.status, reqwest::StatusCode::ACCEPTED);
    let response = events.next().await;
    assert_eq!(outcome(&response), Some("unknown"), "{response}");
    assert!(text(&response).contains("cancelled at your request"), "{response}");
    assert_eq!(backend.calls().len(), 1, "no retry after the cancel");
}

#[tokio::test]
async fn an_agent_that_hangs_up_mid_loop_leaves_the_call_unknown() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "timeout = \"2s\"").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let mut events = Events::open(&agent, &call(1, "trips__book", "k")).await;
    assert_eq!(events.next().await["method"], "elicitation/create");
    drop(events);
    // The first call ends at its deadline without the agent's answer.
    eventually("the first call's claim is unknown", || async {
        let claims = gateway.router.ledger().store.list(&ListFilter::default()).await.expect("the ledger answers");
        claims.iter().any(|claim| claim.state == ClaimState::Unknown)
    })
    .await;
    let again = drive(&agent, &call(2, "trips__book", "k"), answers).await;
    assert_eq!(outcome(&again.response), Some("unknown"), "{}", again.response);
    assert!(again.requests.is_empty(), "the duplicate asks nothing");
    // A later call of another trip has reached the backend and finished: a stray round of the first would be in.
    let mut marker = call(3, "trips__book", "marker");
    marker["params"]["arguments"]["trip"] = json!(8);
    drive(&agent, &marker, answers).await;
    let first_trip = backend.calls().into_iter().filter(|call| call["arguments"]["trip"] == 7).count();
    assert_eq!(first_trip, 1, "no round after the first, and none twice");
}

#[tokio::test]
async fn a_prompt_may_ask_too() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "trips__greet"}});
    let seen = drive(&agent, &get, answers).await;
    assert_eq!(methods(&seen.requests), ["roots/list"]);
    assert_eq!(seen.response["result"]["messages"][0]["content"]["text"], "hello from \"file:///home\"");
}

#[tokio::test]
async fn a_retry_that_cannot_reach_the_backend_is_unknown_not_released() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    let mut events = Events::open(&agent, &call(1, "trips__book", "k")).await;
    let asked = events.next().await;
    assert_eq!(asked["method"], "elicitation/create");
    backend.stop();
    let mut reply = answers(&asked);
    reply["jsonrpc"] = json!("2.0");
    reply["id"] = asked["id"].clone();
    assert_eq!(agent.send(&reply).await.status, reqwest::StatusCode::ACCEPTED);
    let response = events.next().await;
    assert_eq!(outcome(&response), Some("unknown"), "the first round reached the backend: {response}");
    assert_eq!(backend.calls().len(), 1);
    let again = drive(&agent, &call(2, "trips__book", "k"), answers).await;
    assert_eq!(outcome(&again.response), Some("unknown"), "never rerun: {}", again.response);
}

/// A session-era agent is never handed a backend's `requestState` (the gateway serves its rounds), so one it
/// sends itself is checked like a sessionless agent's: a state the gateway did not seal is refused with `-32602`
/// and never reaches the backend as the backend's own.
#[tokio::test]
async fn a_2025_agents_own_request_state_is_refused_before_the_backend() {
    let backend = AskingBackend::start().await;
    let gateway = gateway_for(&backend, "").await;
    let agent = Agent::connected_with(gateway.mcp(), all_kinds()).await;
    for (id, state) in [(1, json!(FIRST_STATE)), (2, json!("sy1.e30.AAAA")), (3, json!({"forged": true}))] {
        let mut forged = call(id, "trips__book", &format!("k-forged-{id}"));
        forged["params"]["requestState"] = state.clone();
        forged["params"]["inputResponses"] = json!({"seats": {"action": "accept", "content": {"seats": 99}}});
        let reply = agent.send(&forged).await;
        assert_eq!(reply.status, reqwest::StatusCode::OK, "{}", reply.raw);
        let body = reply.body.expect("a JSON answer");
        assert_eq!(body["error"]["code"], -32602, "{state}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|text| text.contains("requestState")), "{body}");
    }
    assert!(backend.calls().is_empty(), "nothing reached the backend: {:?}", backend.calls());
    let seen = drive(&agent, &call(4, "trips__book", "k-honest"), answers).await;
    assert_eq!(text(&seen.response), "booked 3 seats; note: aisle; roots: file:///home", "{}", seen.response);
}
