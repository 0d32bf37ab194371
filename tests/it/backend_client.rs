//! The backend client (`switchyard::backend::mcp_client`) against the fault-injecting backend: every rule of
//! its module docs, asserted on what crossed the wire and on the class of every failure.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard::backend::mcp_client::{
    AfterDeliveryCause, BackendEndpoint, BackendTarget, ClientConfig, LATEST_PROTOCOL_VERSION, McpBackendClient,
    McpError, NotDeliveredCause, Relay, RelayMessage, SlotKey,
};
use switchyard::backend::testing::{AgentSlot, CachedSessions};
use switchyard::mcp::SessionHolder;
use tokio::time::Instant;

use crate::support::assert::{eventually, text};
use crate::support::backend_calls::on;
use crate::support::fault_backend::{Answer, FaultBackend, PROGRESS_TOKEN, Resume, Script, SessionIds};

const TIMEOUT: Duration = Duration::from_secs(10);

fn client() -> McpBackendClient {
    McpBackendClient::new(ClientConfig::default()).expect("the client builds")
}

fn endpoint(backend: &FaultBackend) -> BackendTarget {
    BackendEndpoint::new(backend.url().parse().unwrap(), TIMEOUT).into()
}

fn slot(agent: &str) -> SlotKey {
    SlotKey::agent(agent, "fault")
}

async fn echo(client: &McpBackendClient, backend: &FaultBackend, agent: &str) -> Result<Value, McpError> {
    echo_with(client, &endpoint(backend), agent).await
}

async fn echo_with(client: &McpBackendClient, endpoint: &BackendTarget, agent: &str) -> Result<Value, McpError> {
    let params = json!({"name": "echo", "arguments": {"text": "hello"}});
    on(client, &slot(agent), endpoint).request("tools/call", params).await
}

async fn backend(script: Script) -> FaultBackend {
    FaultBackend::start(script).await
}

fn assert_not_delivered(result: Result<Value, McpError>) {
    assert!(matches!(result, Err(McpError::NotDelivered { .. })), "expected NotDelivered, got {result:?}");
}

fn assert_after_delivery(result: Result<Value, McpError>) {
    assert!(matches!(result, Err(McpError::AfterDelivery { .. })), "expected AfterDelivery, got {result:?}");
}

#[tokio::test]
async fn handshake_then_every_request_carries_the_session_headers() {
    let server = backend(Script::default()).await;
    let client = client();
    let endpoint: BackendTarget = BackendEndpoint::new(server.url().parse().unwrap(), TIMEOUT)
        .with_credential("authorization".parse().unwrap(), "Bearer backend-secret".parse().unwrap())
        .with_header("x-intent".parse().unwrap(), "token-1".parse().unwrap())
        .into();
    let result = echo_with(&client, &endpoint, "a").await.unwrap();
    assert_eq!(text(&result), "hello");

    let requests = server.requests();
    let methods: Vec<_> = requests.iter().map(|r| r.rpc_method.clone().unwrap_or_default()).collect();
    // The era probe goes first; this backend refuses it like a 2025 server, so the handshake follows.
    assert_eq!(methods, ["server/discover", "initialize", "notifications/initialized", "tools/call"]);
    assert_eq!(requests[0].header("mcp-protocol-version"), Some("2026-07-28"), "the probe is a modern request");
    let requests = &requests[1..];
    let init = &requests[0];
    assert_eq!(init.body.as_ref().unwrap()["params"]["protocolVersion"], LATEST_PROTOCOL_VERSION);
    assert_eq!(init.header("mcp-session-id"), None, "initialize carries no session id");
    for request in &server.requests() {
        assert_eq!(request.header("accept"), Some("application/json, text/event-stream"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("accept-encoding"), Some("identity"));
        assert_eq!(request.header("authorization"), Some("Bearer backend-secret"));
        assert_eq!(request.header("x-intent"), Some("token-1"));
    }
    for later in &requests[1..] {
        assert_eq!(later.header("mcp-session-id"), Some("sess-1"));
        assert_eq!(later.header("mcp-protocol-version"), Some(LATEST_PROTOCOL_VERSION));
    }
    let call = requests[2].body.as_ref().unwrap();
    assert!(call["id"].is_u64(), "the client's own request id");
    assert_eq!(server.executions("echo"), 1);
}

#[tokio::test]
async fn a_slot_reuses_its_session_and_another_agent_gets_its_own() {
    let server = backend(Script::default()).await;
    let client = client();
    echo(&client, &server, "a").await.unwrap();
    echo(&client, &server, "a").await.unwrap();
    echo(&client, &server, "b").await.unwrap();
    assert_eq!(server.rpc_count("initialize"), 2);
    let sessions: Vec<_> = server
        .requests()
        .iter()
        .filter(|r| r.rpc_method.as_deref() == Some("tools/call"))
        .map(|r| r.header("mcp-session-id").unwrap().to_owned())
        .collect();
    assert_eq!(sessions, ["sess-1", "sess-1", "sess-2"]);
    assert_eq!(client.cached_sessions(), 2);
}

#[tokio::test]
async fn a_backend_that_assigns_no_session_gets_no_session_header() {
    let server = backend(Script { session: SessionIds::Omit, ..Script::default() }).await;
    let client = client();
    echo(&client, &server, "a").await.unwrap();
    let session = on(&client, &slot("a"), &endpoint(&server)).session().await.unwrap();
    assert_eq!(session.id(), None);
    assert!(server.requests().iter().all(|r| r.header("mcp-session-id").is_none()));
    let after_the_handshake =
        server.requests().into_iter().skip_while(|r| r.rpc_method.as_deref() != Some("initialize"));
    assert!(after_the_handshake.skip(1).all(|r| r.header("mcp-protocol-version") == Some(LATEST_PROTOCOL_VERSION)));
}

#[tokio::test]
async fn connect_refused_is_not_delivered() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let endpoint: BackendTarget = BackendEndpoint::new(url.parse().unwrap(), TIMEOUT).into();
    let result = echo_with(&client(), &endpoint, "a").await;
    assert!(matches!(result, Err(McpError::NotDelivered { cause: NotDeliveredCause::Connect, .. })), "{result:?}");
}

#[tokio::test]
async fn every_refused_handshake_is_not_delivered_and_no_call_is_sent() {
    let refusals: Vec<(&str, Script)> = vec![
        ("HTTP 500", Script { initialize_status: Some(500), ..Script::default() }),
        ("JSON-RPC error", Script { initialize_error: true, ..Script::default() }),
        ("unsupported version", Script { version: Some("2099-01-01".into()), ..Script::default() }),
        ("initialized refused", Script { refuse_initialized: true, ..Script::default() }),
        ("duplicate session ids", Script { session: SessionIds::Duplicate, ..Script::default() }),
        ("empty session id", Script { session: SessionIds::Invalid(Vec::new()), ..Script::default() }),
        ("space in session id", Script { session: SessionIds::Invalid(b"a b".to_vec()), ..Script::default() }),
        ("non-ASCII session id", Script { session: SessionIds::Invalid(b"a\x80b".to_vec()), ..Script::default() }),
        ("1025-character session id", Script { session: SessionIds::Invalid(vec![b'x'; 1025]), ..Script::default() }),
    ];
    for (what, script) in refusals {
        let server = backend(script).await;
        let result = echo(&client(), &server, "a").await;
        assert!(matches!(result, Err(McpError::NotDelivered { .. })), "{what}: {result:?}");
        assert_eq!(server.rpc_count("tools/call"), 0, "{what}: the call must not be sent");
    }
}

#[tokio::test]
async fn a_1024_character_session_id_is_accepted() {
    let id = vec![b'~'; 1024];
    let server = backend(Script { session: SessionIds::Invalid(id.clone()), ..Script::default() }).await;
    echo(&client(), &server, "a").await.unwrap();
    let call = server.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    assert_eq!(call.header("mcp-session-id").map(str::len), Some(1024));
}

#[tokio::test]
async fn older_supported_versions_are_accepted_and_sent_back() {
    let server = backend(Script { version: Some("2025-03-26".into()), ..Script::default() }).await;
    let client = client();
    echo(&client, &server, "a").await.unwrap();
    assert_eq!(on(&client, &slot("a"), &endpoint(&server)).session().await.unwrap().version(), "2025-03-26");
    let call = server.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    assert_eq!(call.header("mcp-protocol-version"), Some("2025-03-26"));
}

#[tokio::test]
async fn an_ended_session_is_reinitialized_and_the_call_retried_once() {
    let server = backend(Script::default()).await;
    let client = client();
    echo(&client, &server, "a").await.unwrap();
    server.end_all_sessions();
    let result = echo(&client, &server, "a").await.unwrap();
    assert_eq!(text(&result), "hello");
    assert_eq!(server.rpc_count("initialize"), 2, "one re-initialize");
    assert_eq!(server.rpc_count("tools/call"), 3, "the 404'd call and exactly one retry");
    assert_eq!(server.executions("echo"), 2, "the 404'd call did not run");
    let last = server.requests().into_iter().last().unwrap();
    assert_eq!(last.header("mcp-session-id"), Some("sess-2"));
}

#[tokio::test]
async fn a_second_404_is_an_error_without_another_retry() {
    let server = backend(Script { calls_404: true, ..Script::default() }).await;
    let result = echo(&client(), &server, "a").await;
    assert_not_delivered(result);
    assert_eq!(server.rpc_count("initialize"), 2);
    assert_eq!(server.rpc_count("tools/call"), 2);
}

#[tokio::test]
async fn a_404_without_a_session_id_is_returned_as_such() {
    let server = backend(Script { calls_404: true, session: SessionIds::Omit, ..Script::default() }).await;
    let result = echo(&client(), &server, "a").await;
    assert!(matches!(result, Err(McpError::HttpStatus { status: 404, .. })), "{result:?}");
    assert_eq!(server.rpc_count("initialize"), 1, "no re-initialize without a session");
    assert_eq!(server.rpc_count("tools/call"), 1);
}

/// Every status whose definition proves the backend refused the request unprocessed is `NotDelivered`, naming the
/// status; nothing ran, and the slot keeps its session (no re-initialize).
#[tokio::test]
async fn statuses_that_prove_a_refusal_are_not_delivered() {
    for status in [400, 401, 403, 405, 411, 413, 414, 415, 421, 429, 431] {
        let server = backend(Script { call_status: Some(status), ..Script::default() }).await;
        let result = echo(&client(), &server, "a").await;
        let Err(McpError::NotDelivered { cause, reason }) = &result else {
            panic!("{status}: expected NotDelivered, got {result:?}")
        };
        assert_eq!(*cause, NotDeliveredCause::Refused, "{status}");
        assert!(
            reason.to_string().contains(&format!("HTTP {status} ")),
            "{status}: the reason names the status: {reason}"
        );
        assert!(reason.to_string().contains("scripted refusal"), "{status}: the backend's words are kept: {reason}");
        assert_eq!(server.executions("echo"), 0);
        assert_eq!(server.rpc_count("initialize"), 1, "{status}: a refusal is not a lost session");
    }
}

/// Statuses that do not prove a refusal keep the outcome unknown: a 500 may come after the tool ran.
#[tokio::test]
async fn other_error_statuses_stay_unknown() {
    for status in [406, 408, 409, 410, 422, 500, 502, 503, 504] {
        let server = backend(Script { call_status: Some(status), ..Script::default() }).await;
        let result = echo(&client(), &server, "a").await;
        let error = result.expect_err("an error status");
        assert!(matches!(error, McpError::HttpStatus { status: s, .. } if s == status), "{status}: {error:?}");
        assert!(!error.proves_not_delivered(), "{status}");
    }
}

/// A backend whose body limit is below the request's answers 413: not delivered, and nothing ran.
#[tokio::test]
async fn a_body_over_the_backends_limit_is_not_delivered() {
    let server = backend(Script { body_limit: Some(1024), ..Script::default() }).await;
    let client = client();
    let params = json!({"name": "echo", "arguments": {"text": "x".repeat(4096)}});
    let result = on(&client, &slot("a"), &endpoint(&server)).request("tools/call", params).await;
    let Err(McpError::NotDelivered { cause, reason }) = &result else {
        panic!("expected NotDelivered, got {result:?}")
    };
    assert_eq!(*cause, NotDeliveredCause::Refused);
    assert!(reason.to_string().contains("HTTP 413 Content Too Large"), "{reason}");
    assert_eq!(server.executions("echo"), 0);
    assert_eq!(text(&echo(&client, &server, "a").await.unwrap()), "hello", "a small call still goes through");
}

#[tokio::test]
async fn sse_answers_are_read_and_priming_events_ignored() {
    let server = backend(Script { answer: Answer::Sse, ..Script::default() }).await;
    let result = echo(&client(), &server, "a").await.unwrap();
    assert_eq!(text(&result), "hello");
}

#[tokio::test]
async fn server_requests_on_the_stream_are_answered_while_the_call_waits() {
    let script = Script {
        answer: Answer::Sse,
        before_result: vec![
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
            json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage", "params": {}}),
        ],
        await_answers: true,
        ..Script::default()
    };
    let server = backend(script).await;
    let result = echo(&client(), &server, "a").await.unwrap();
    assert_eq!(text(&result), "hello");
    let answers = server.client_answers();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0], json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}}));
    assert_eq!(answers[1]["id"], "srv-2");
    assert_eq!(answers[1]["error"]["code"], -32601);
    let posts = server
        .requests()
        .into_iter()
        .filter(|r| r.body.as_ref().is_some_and(|b| b.get("result").is_some() || b.get("error").is_some()));
    for post in posts {
        assert_eq!(post.header("mcp-session-id"), Some("sess-1"), "answers go to the same session");
    }
}

fn resume(retry_ms: u64, breaks: usize, with_id: bool) -> Script {
    Script { answer: Answer::Sse, resume: Some(Resume { retry_ms, breaks, with_id }), ..Script::default() }
}

#[tokio::test]
async fn an_early_end_with_an_event_id_is_resumed_after_retry() {
    let server = backend(resume(300, 1, true)).await;
    let result = echo(&client(), &server, "a").await.unwrap();
    assert_eq!(text(&result), "hello");
    let requests = server.requests();
    let post = requests.iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    let gets: Vec<_> = requests.iter().filter(|r| r.http_method == "GET").collect();
    assert_eq!(gets.len(), 1);
    let last_event_id = gets[0].header("last-event-id").unwrap();
    assert!(last_event_id.starts_with("stream"), "{last_event_id}");
    assert_eq!(gets[0].header("mcp-session-id"), Some("sess-1"));
    assert_eq!(gets[0].header("accept"), Some("text/event-stream"));
    let waited = gets[0].at - post.at;
    assert!(waited >= Duration::from_millis(300), "resumed after {waited:?}, before the stream's retry");
    assert_eq!(server.executions("echo"), 1);
}

#[tokio::test]
async fn resumption_gives_up_after_three_tries() {
    let server = backend(resume(10, 10, true)).await;
    assert_after_delivery(echo(&client(), &server, "a").await);
    let gets: Vec<_> = server.requests().into_iter().filter(|r| r.http_method == "GET").collect();
    assert_eq!(gets.len(), 3);
    let ids: Vec<_> = gets.iter().map(|g| g.header("last-event-id").unwrap().to_owned()).collect();
    assert_eq!(ids.iter().collect::<std::collections::HashSet<_>>().len(), 3, "each GET names the newest id: {ids:?}");
}

#[tokio::test]
async fn the_retry_wait_is_capped_at_five_seconds() {
    let server = backend(resume(60_000, 1, true)).await;
    let started = Instant::now();
    echo(&client(), &server, "a").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(9), "waited {:?}", started.elapsed());
}

#[tokio::test]
async fn an_early_end_without_an_event_id_is_after_delivery() {
    let server = backend(resume(10, 1, false)).await;
    assert_after_delivery(echo(&client(), &server, "a").await);
    assert!(server.requests().iter().all(|r| r.http_method != "GET"), "nothing to resume from");
    assert_eq!(server.executions("echo"), 1);
}

#[tokio::test]
async fn a_stall_is_after_delivery_at_the_deadline() {
    let server = backend(Script { stall: true, ..Script::default() }).await;
    let client = client();
    on(&client, &slot("a"), &endpoint(&server)).session().await.unwrap();
    let deadline = Duration::from_millis(400);
    let endpoint: BackendTarget = BackendEndpoint::new(server.url().parse().unwrap(), deadline).into();
    let started = Instant::now();
    let result = echo_with(&client, &endpoint, "a").await;
    assert!(matches!(result, Err(McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, .. })), "{result:?}");
    let took = started.elapsed();
    assert!(took >= deadline && took < deadline + Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn the_deadline_covers_resumptions() {
    let server = backend(resume(1_000, 10, true)).await;
    let client = client();
    on(&client, &slot("a"), &endpoint(&server)).session().await.unwrap();
    let endpoint: BackendTarget =
        BackendEndpoint::new(server.url().parse().unwrap(), Duration::from_millis(1_500)).into();
    let started = Instant::now();
    assert_after_delivery(echo_with(&client, &endpoint, "a").await);
    assert!(started.elapsed() < Duration::from_millis(2_500), "took {:?}", started.elapsed());
    let gets = server.requests().into_iter().filter(|r| r.http_method == "GET").count();
    assert_eq!(gets, 1, "only one resumption fits in the deadline");
}

#[tokio::test]
async fn oversize_answers_are_after_delivery() {
    for answer in [Answer::Json, Answer::Sse] {
        let server = backend(Script { answer, oversize: Some(17 * 1024 * 1024), ..Script::default() }).await;
        assert_after_delivery(echo(&client(), &server, "a").await);
    }
}

#[tokio::test]
async fn an_endless_sse_line_is_after_delivery() {
    let server = backend(Script { answer: Answer::Sse, endless_line: true, ..Script::default() }).await;
    assert_after_delivery(echo(&client(), &server, "a").await);
}

#[tokio::test]
async fn gzip_non_json_and_dropped_connections_are_after_delivery() {
    let faults: Vec<(&str, Script)> = vec![
        ("gzip", Script { gzip: true, ..Script::default() }),
        ("non-JSON body", Script { non_json: true, ..Script::default() }),
        ("non-JSON event", Script { non_json: true, answer: Answer::Sse, ..Script::default() }),
        ("dropped connection", Script { drop_after_call: true, ..Script::default() }),
    ];
    for (what, script) in faults {
        let server = backend(script).await;
        let result = echo(&client(), &server, "a").await;
        assert!(matches!(result, Err(McpError::AfterDelivery { .. })), "{what}: {result:?}");
        assert_eq!(server.executions("echo"), 1, "{what}: the call reached the backend once");
    }
}

#[tokio::test]
async fn a_backend_error_result_passes_through() {
    let server = backend(Script { tool_is_error: true, ..Script::default() }).await;
    let result = echo(&client(), &server, "a").await.unwrap();
    assert_eq!(result["isError"], true);
}

#[tokio::test]
async fn concurrent_first_calls_on_one_slot_share_one_handshake() {
    let server = backend(Script { initialize_delay: Some(Duration::from_millis(200)), ..Script::default() }).await;
    let client = Arc::new(client());
    let endpoint = endpoint(&server);
    let calls = (0..8).map(|_| {
        let (client, endpoint) = (Arc::clone(&client), endpoint.clone());
        tokio::spawn(async move { echo_with(&client, &endpoint, "a").await })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await.unwrap().unwrap();
    }
    assert_eq!(server.rpc_count("initialize"), 1);
    assert_eq!(server.executions("echo"), 8);
}

#[tokio::test]
async fn eviction_takes_the_oldest_idle_slot_and_never_one_in_use() {
    let server = backend(Script::default()).await;
    let client = Arc::new(
        McpBackendClient::new(ClientConfig { max_sessions: 2, ..ClientConfig::default() }).expect("the client builds"),
    );
    echo(&client, &server, "a").await.unwrap();
    // "b" holds its slot during a held call while "c" needs room: "a" (idle) must go, "b" must stay.
    server.update(|script| script.hold_calls = true);
    let in_use = {
        let (client, endpoint) = (Arc::clone(&client), endpoint(&server));
        tokio::spawn(async move { echo_with(&client, &endpoint, "b").await })
    };
    eventually("b's call runs on the backend", || async { server.executions("echo") == 2 }).await;
    server.update(|script| script.hold_calls = false);
    echo(&client, &server, "c").await.unwrap();
    assert!(!in_use.is_finished(), "b's call was still in use while c made room");
    server.release_calls();
    in_use.await.unwrap().unwrap();
    assert_eq!(client.cached_sessions(), 2);
    let before = server.rpc_count("initialize");
    echo(&client, &server, "b").await.unwrap();
    assert_eq!(server.rpc_count("initialize"), before, "b kept its session");
    eventually("a's backend session is deleted", || async {
        server.requests().iter().any(|r| r.http_method == "DELETE" && r.header("mcp-session-id") == Some("sess-1"))
    })
    .await;
}

#[tokio::test]
async fn a_full_table_of_slots_in_use_refuses_without_evicting() {
    let server = backend(Script { hold_calls: true, ..Script::default() }).await;
    let client = Arc::new(
        McpBackendClient::new(ClientConfig { max_sessions: 1, ..ClientConfig::default() }).expect("the client builds"),
    );
    let busy = {
        let (client, endpoint) = (Arc::clone(&client), endpoint(&server));
        tokio::spawn(async move { echo_with(&client, &endpoint, "a").await })
    };
    eventually("a's call runs on the backend", || async { server.executions("echo") == 1 }).await;
    assert_not_delivered(echo(&client, &server, "b").await);
    server.release_calls();
    busy.await.unwrap().unwrap();
}

#[tokio::test]
async fn forgetting_an_agent_drops_only_its_slots_and_deletes_its_sessions() {
    let server = backend(Script::default()).await;
    let client = client();
    echo(&client, &server, "a").await.unwrap();
    echo(&client, &server, "b").await.unwrap();
    client.forget_agent_session(&SessionHolder::agent("a"));
    assert_eq!(client.cached_sessions(), 1);
    eventually("a's backend session is deleted", || async {
        server.requests().iter().any(|r| r.http_method == "DELETE")
    })
    .await;
    let deletes: Vec<_> = server.requests().into_iter().filter(|r| r.http_method == "DELETE").collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].header("mcp-session-id"), Some("sess-1"));
    let before = server.rpc_count("initialize");
    echo(&client, &server, "b").await.unwrap();
    assert_eq!(server.rpc_count("initialize"), before, "b's session survived");
    echo(&client, &server, "a").await.unwrap();
    assert_eq!(server.rpc_count("initialize"), before + 1, "a starts afresh");
}

#[tokio::test]
async fn tools_list_follows_cursors_within_bounds() {
    let tools: Vec<Value> =
        (0..25).map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}})).collect();
    let server = backend(Script { tools, page_size: Some(10), ..Script::default() }).await;
    let listed = on(&client(), &slot("a"), &endpoint(&server)).list_tools().await.unwrap();
    let names: Vec<_> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 25);
    assert_eq!(names[24], "t24");
    assert_eq!(server.rpc_count("tools/list"), 3);

    let endless = backend(Script { endless_pages: true, page_size: Some(1), ..Script::default() }).await;
    assert_after_delivery(on(&client(), &slot("a"), &endpoint(&endless)).list_tools().await.map(Value::from));
    assert_eq!(endless.rpc_count("tools/list"), 32, "at most 32 pages");

    let many: Vec<Value> = (0..2049).map(|i| json!({"name": format!("t{i}")})).collect();
    let crowded = backend(Script { tools: many, ..Script::default() }).await;
    assert_after_delivery(on(&client(), &slot("a"), &endpoint(&crowded)).list_tools().await.map(Value::from));
}

#[tokio::test]
async fn progress_and_log_notifications_are_relayed_with_the_callers_token() {
    let script = Script {
        answer: Answer::Sse,
        before_result: vec![
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": PROGRESS_TOKEN, "progress": 1}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "someone-else", "progress": 9}}),
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": PROGRESS_TOKEN, "progress": 2}}),
        ],
        ..Script::default()
    };
    let server = backend(script).await;
    let client = client();
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel();
    let params = json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "agent-token"}});
    let relay = Relay::new(json!({}), Some(sender));
    let result = on(&client, &slot("a"), &endpoint(&server)).request_relayed("tools/call", params, &relay).await;
    assert_eq!(text(&result.unwrap()), "hi");

    let sent = server.requests().into_iter().find(|r| r.rpc_method.as_deref() == Some("tools/call")).unwrap();
    let sent_token = &sent.body.as_ref().unwrap()["params"]["_meta"]["progressToken"];
    assert_ne!(sent_token, "agent-token", "the backend sees the client's own token");
    let mut relayed = Vec::new();
    while let Ok(message) = received.try_recv() {
        if let RelayMessage::Notification(message) = message {
            relayed.push(message);
        }
    }
    let summary: Vec<(String, Value)> =
        relayed.iter().map(|m| (m["method"].as_str().unwrap().to_owned(), m["params"]["progress"].clone())).collect();
    assert_eq!(
        summary,
        [
            ("notifications/progress".to_owned(), json!(1)),
            ("notifications/message".to_owned(), Value::Null),
            ("notifications/progress".to_owned(), json!(2)),
        ],
        "in order, foreign tokens dropped"
    );
    assert_eq!(relayed[0]["params"]["progressToken"], "agent-token");
}

#[tokio::test]
async fn list_changed_notifications_reach_the_subscriber() {
    let script = Script {
        answer: Answer::Sse,
        before_result: vec![
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}),
        ],
        ..Script::default()
    };
    let server = backend(script).await;
    let client = client();
    let mut changes = client.subscribe_list_changed();
    let (sender, mut relayed) = tokio::sync::mpsc::unbounded_channel();
    let params = json!({"name": "echo", "arguments": {"text": "x"}});
    let relay = Relay::new(json!({}), Some(sender));
    on(&client, &slot("a"), &endpoint(&server)).request_relayed("tools/call", params, &relay).await.unwrap();
    let announced: Vec<String> = std::iter::from_fn(|| changes.try_recv().ok()).map(|c| c.method).collect();
    assert_eq!(announced, ["notifications/tools/list_changed", "notifications/resources/list_changed"]);
    let to_agent: Vec<Value> = std::iter::from_fn(|| relayed.try_recv().ok())
        .filter_map(|message| match message {
            RelayMessage::Notification(note) => Some(note),
            _ => None,
        })
        .collect();
    assert_eq!(to_agent.len(), 1, "only the resources change goes to the agent: {to_agent:?}");
    assert_eq!(to_agent[0]["method"], "notifications/resources/list_changed");
}
