//! Interop of the gateway's backend client (`switchyard::backend::mcp_client`) with MCP servers it did not write:
//! the reference `server-everything` (TypeScript SDK) in `streamableHttp` mode, and a server on the official
//! Python SDK answering with SSE streams or with plain JSON bodies.
//!
//! The Python SDK's server serves both protocol eras: the 2025-era checks run against it with `era = legacy`, and
//! the 2026-07-28 checks with the probe deciding.
//!
//! Each test starts its own peer on a free loopback port (see `support::interop`) and checks the handshake,
//! `tools/list` (across pages where the server paginates), `tools/call`, and that one (agent session, backend)
//! slot keeps exactly one backend session — observed from both sides: the client's table, and the sessions the
//! server itself reports having started.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard::backend::mcp_client::{
    BackendEndpoint, BackendTarget, ClientConfig, Era, LATEST_PROTOCOL_VERSION, McpBackendClient, McpError, SlotKey,
};
use switchyard::backend::testing::{AgentSlot, CachedSessions};
use switchyard::mcp::SessionHolder;

use crate::support::assert::{PATIENCE, poll_until, text};
use crate::support::backend_calls::on;
use crate::support::interop::{InteropServer, PYTHON_PAGE_SIZE, PythonMode, python_tool_names};

/// Per-exchange budget; generous because the first request to a cold Node or Python peer is slow on a busy
/// 2-core machine, and tight enough that a hung exchange fails the test instead of stalling the suite.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);

/// The server reached in `era` (`Auto` probes it).
fn endpoint_in(server: &InteropServer, era: Era) -> BackendTarget {
    BackendEndpoint::new(server.url().parse().expect("a valid loopback URL"), EXCHANGE_TIMEOUT).with_era(era).into()
}

fn tool_names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|tool| tool.get("name").and_then(Value::as_str).unwrap_or_else(|| panic!("tool without name: {tool}")))
        .map(str::to_owned)
        .collect()
}

fn assert_unique(names: &[String]) {
    let mut seen = HashSet::new();
    for name in names {
        assert!(seen.insert(name), "tool {name} listed twice in {names:?}");
    }
}

/// Waits until the server's own output satisfies `done`, or fails with its logs.
async fn wait_for(server: &InteropServer, what: &str, done: impl Fn(&InteropServer) -> bool) {
    let met = poll_until(PATIENCE, || async { done(server) }).await;
    assert!(met, "timed out after {PATIENCE:?} waiting until {what}\n{}", server.logs());
}

/// The checks every peer must pass: handshake, discovery, a call, and exactly one backend session per slot —
/// even across several requests and a second `session()` lookup.
async fn exercise(server: &InteropServer, era: Era, echo_arguments: Value, expected_echo: &str) -> Vec<String> {
    let endpoint = |server: &InteropServer| endpoint_in(server, era);
    let client = McpBackendClient::new(ClientConfig::default()).expect("the client builds");
    let slot = SlotKey::agent("agent-session-1", "peer");

    let session =
        on(&client, &slot, &endpoint(server)).session().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    let session_id = session.id().expect("a stateful peer assigns an MCP-Session-Id").to_owned();
    assert_eq!(session.version(), LATEST_PROTOCOL_VERSION, "both sides speak {LATEST_PROTOCOL_VERSION}");

    let tools =
        on(&client, &slot, &endpoint(server)).list_tools().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    for tool in &tools {
        assert!(tool.get("inputSchema").is_some_and(Value::is_object), "tool without inputSchema: {tool}");
    }
    let names = tool_names(&tools);
    assert_unique(&names);

    let echoed = on(&client, &slot, &endpoint(server))
        .request("tools/call", json!({"name": "echo", "arguments": echo_arguments}))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(text(&echoed), expected_echo, "echo result: {echoed}");
    assert_ne!(echoed.get("isError"), Some(&Value::Bool(true)), "echo failed: {echoed}");

    // A second call and a second lookup on the same slot must ride the same backend session.
    on(&client, &slot, &endpoint(server))
        .request("tools/call", json!({"name": "echo", "arguments": echo_arguments}))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    let again =
        on(&client, &slot, &endpoint(server)).session().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(again.id(), Some(session_id.as_str()), "the slot's backend session was replaced");
    assert_eq!(client.cached_sessions(), 1);

    // And from the server's side: it started exactly that one session.
    wait_for(server, "the server reports the session it started", |s| !s.started_sessions().is_empty()).await;
    assert_eq!(server.started_sessions(), vec![session_id], "{}", server.logs());
    names
}

/// Two agent sessions must never share a backend session, and forgetting one ends its backend session with a
/// `DELETE` the peer understands, while the other keeps working.
async fn exercise_isolation_and_forget(server: &InteropServer, era: Era, echo_arguments: Value) {
    let endpoint = |server: &InteropServer| endpoint_in(server, era);
    let client = McpBackendClient::new(ClientConfig::default()).expect("the client builds");
    let first = SlotKey::agent("agent-a", "peer");
    let second = SlotKey::agent("agent-b", "peer");
    let a = on(&client, &first, &endpoint(server)).session().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    let b =
        on(&client, &second, &endpoint(server)).session().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    let (a, b) = (a.id().unwrap().to_owned(), b.id().unwrap().to_owned());
    assert_ne!(a, b, "two agent sessions got one backend session");
    assert_eq!(client.cached_sessions(), 2);
    wait_for(server, "the peer reports both sessions", |s| {
        let started = s.started_sessions();
        started.contains(&a) && started.contains(&b)
    })
    .await;
    let started_before = server.started_sessions().len();

    client.forget_agent_session(&SessionHolder::agent("agent-a"));
    assert_eq!(client.cached_sessions(), 1);
    wait_for(server, "the peer sees the forgotten session's DELETE", |s| s.ended_sessions().contains(&a)).await;
    assert!(!server.ended_sessions().contains(&b), "the other agent's session was ended too");

    let result = on(&client, &second, &endpoint(server))
        .request("tools/call", json!({"name": "echo", "arguments": echo_arguments}))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_ne!(result.get("isError"), Some(&Value::Bool(true)), "{result}");
    assert_eq!(server.started_sessions().len(), started_before, "agent-b's slot started another backend session");
}

/// The 2025-era checks against the Python SDK's server, which serves both eras: told to speak 2025's.
async fn exercise_python(mode: PythonMode) {
    let Some(server) = InteropServer::python(mode) else { return };
    let endpoint = |server: &InteropServer| endpoint_in(server, Era::Legacy);
    let names = exercise(&server, Era::Legacy, json!({"text": "hi"}), "hi").await;
    // The server lists PYTHON_PAGE_SIZE tools per page, so these only all arrive if the client followed
    // `nextCursor` page after page; order and uniqueness show it neither repeated nor skipped a page.
    let expected = python_tool_names();
    assert!(expected.len() > 2 * PYTHON_PAGE_SIZE, "the fixture must need at least three pages");
    assert_eq!(names, expected);

    let client = McpBackendClient::new(ClientConfig::default()).expect("the client builds");
    let slot = SlotKey::agent("agent-session-2", "peer");
    let sum = on(&client, &slot, &endpoint(&server))
        .request("tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(text(&sum), "5", "{sum}");

    // A JSON-RPC error from the peer stays a JSON-RPC error, with its code.
    let error = on(&client, &slot, &endpoint(&server))
        .request("tools/call", json!({"name": "no_such_tool", "arguments": {}}))
        .await
        .expect_err("an unknown tool is an error");
    assert!(matches!(error, McpError::Rpc { code: -32602, .. }), "{error:?}");

    exercise_isolation_and_forget(&server, Era::Legacy, json!({"text": "hi"})).await;
}

#[tokio::test]
async fn server_everything_streamable_http() {
    let Some(server) = InteropServer::everything() else { return };
    // server-everything's echo takes `message` and prefixes its answer.
    // server-everything speaks only 2025's era: the probe falls back to the handshake.
    let endpoint = |server: &InteropServer| endpoint_in(server, Era::Auto);
    let names = exercise(&server, Era::Auto, json!({"message": "hi"}), "Echo: hi").await;
    for expected in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"] {
        assert!(names.iter().any(|name| name == expected), "{expected} missing from {names:?}");
    }

    let client = McpBackendClient::new(ClientConfig::default()).expect("the client builds");
    let slot = SlotKey::agent("agent-session-2", "everything");
    let sum = on(&client, &slot, &endpoint(&server))
        .request("tools/call", json!({"name": "get-sum", "arguments": {"a": 2, "b": 3}}))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert!(text(&sum).contains('5'), "{sum}");

    exercise_isolation_and_forget(&server, Era::Auto, json!({"message": "hi"})).await;
}

#[tokio::test]
async fn python_sdk_sse_responses() {
    exercise_python(PythonMode::Sse).await;
}

#[tokio::test]
async fn python_sdk_json_responses() {
    exercise_python(PythonMode::Json).await;
}

/// The Python SDK's server answers the probe as a 2026-07-28 server: no handshake, no session, and every request it
/// takes passes its own header checks (it refuses a missing or wrong `Mcp-Name` with `-32020`).
async fn exercise_python_modern(mode: PythonMode) {
    let Some(server) = InteropServer::python(mode) else { return };
    let client = McpBackendClient::new(ClientConfig::default()).expect("the client builds");
    let slot = SlotKey::agent("agent-session-1", "peer");
    let target = endpoint_in(&server, Era::Auto);
    let session = on(&client, &slot, &target).session().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(session.version(), "2026-07-28", "{}", server.logs());
    assert_eq!(session.id(), None, "a modern backend keeps no session");
    assert!(session.capabilities().get("tools").is_some(), "capabilities come from server/discover");

    let tools = on(&client, &slot, &target).list_tools().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(tool_names(&tools), python_tool_names(), "every page, in order");
    let echoed = on(&client, &slot, &target)
        .request("tools/call", json!({"name": "echo", "arguments": {"text": "modern"}}))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(text(&echoed), "modern");
    let error = on(&client, &slot, &target)
        .request("tools/call", json!({"name": "no_such_tool", "arguments": {}}))
        .await
        .expect_err("an unknown tool is an error");
    assert!(matches!(error, McpError::Rpc { code: -32602, .. }), "{error:?}");

    // Another agent session of the same client: the era is remembered, and the server never started a session.
    let other = SlotKey::agent("agent-session-2", "peer");
    let again = on(&client, &other, &target).session().await.unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    assert_eq!(again.version(), "2026-07-28");
    assert!(server.started_sessions().is_empty(), "{}", server.logs());
}

#[tokio::test]
async fn python_sdk_is_spoken_to_in_the_2026_era_with_sse_responses() {
    exercise_python_modern(PythonMode::Sse).await;
}

#[tokio::test]
async fn python_sdk_is_spoken_to_in_the_2026_era_with_json_responses() {
    exercise_python_modern(PythonMode::Json).await;
}
