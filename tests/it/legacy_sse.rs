//! The legacy HTTP+SSE (2024-11-05) transport driven directly: against the real
//! server-everything in `sse` mode (handshake, tools, progress) and against `support/fault_legacy_sse.rs` for the
//! error classes that keep at most once (no endpoint, a foreign endpoint, refused and failed POSTs, a dropped
//! stream, garbage, a stalled call), sessions, server-to-client pings, credentials, and the configuration lowered
//! into a runnable backend.

use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};
use switchyard::backend::http_client::HttpClient;
use switchyard::backend::legacy_sse::{LegacySseBackend, LegacySseConnection, Sharing, Standing};
use switchyard::backend::mcp_client::McpError;
use switchyard::backend::testing::{ConnectionRequest, SseEndpoint};
use switchyard::config::Config;
use switchyard::mcp::{Relay, RelayMessage};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::support::assert::text;
use crate::support::fault_legacy_sse::{EndpointEvent, FaultLegacySse, Script};
use crate::support::interop::InteropServer;

const TOKEN: &str = "Bearer legacy-t0ken";

fn deadline(seconds: u64) -> Instant {
    Instant::now() + Duration::from_secs(seconds)
}

fn backend(url: &str) -> LegacySseBackend {
    LegacySseBackend {
        name: "legacy".into(),
        url: url.parse().expect("a URL"),
        credential: Some((reqwest::header::AUTHORIZATION, HeaderValue::from_static(TOKEN))),
        headers: vec![(HeaderName::from_static("x-extra"), HeaderValue::from_static("1"))],
        sharing: Sharing::PerAgent,
    }
}

async fn connect(url: &str) -> Result<LegacySseConnection, McpError> {
    LegacySseConnection::connect(
        &HttpClient::new().unwrap(),
        &backend(url),
        &json!({}),
        Standing::default(),
        deadline(20),
    )
    .await
}

async fn call(connection: &LegacySseConnection, tool: &str, arguments: Value, seconds: u64) -> Result<Value, McpError> {
    let params = json!({"name": tool, "arguments": arguments});
    connection.request("tools/call", params, &Relay::default(), deadline(seconds)).await
}

fn assert_not_delivered<T: std::fmt::Debug>(result: Result<T, McpError>, mentions: &str) {
    match result {
        Err(McpError::NotDelivered { reason, .. }) => assert!(reason.to_string().contains(mentions), "{reason}"),
        other => panic!("expected NotDelivered mentioning {mentions:?}, got {other:?}"),
    }
}

fn assert_after_delivery(result: Result<Value, McpError>, mentions: &str) {
    match result {
        Err(McpError::AfterDelivery { reason, .. }) => assert!(reason.to_string().contains(mentions), "{reason}"),
        other => panic!("expected AfterDelivery mentioning {mentions:?}, got {other:?}"),
    }
}

/// Waits until the backend recorded a POST of `method` (notifications are sent in the background).
async fn posted(backend: &FaultLegacySse, method: &str) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let posted = backend.posted(method);
        if !posted.is_empty() || Instant::now() > until {
            return posted;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn server_everything_over_legacy_sse_lists_echoes_and_reports_progress() {
    let Some(server) = InteropServer::everything_legacy_sse() else { return };
    let connection = connect(&server.legacy_sse_url()).await.expect("handshake");
    assert!(switchyard::backend::mcp_client::is_supported_version(connection.version()));
    assert!(connection.capabilities().get("tools").is_some(), "{}", connection.capabilities());
    assert_eq!(connection.endpoint().path(), "/message");
    let listed = connection.request("tools/list", Value::Null, &Relay::default(), deadline(20)).await.expect("list");
    let names: Vec<&str> =
        listed["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"echo") && names.contains(&"trigger-long-running-operation"), "{names:?}");
    let echoed = call(&connection, "echo", json!({"message": "over legacy SSE"}), 20).await.expect("echo");
    assert_eq!(text(&echoed), "Echo: over legacy SSE");

    let (sink, mut messages) = mpsc::unbounded_channel();
    let relay = Relay::new(json!({}), Some(sink));
    let params = json!({
        "name": "trigger-long-running-operation",
        "arguments": {"duration": 0.2, "steps": 2},
        "_meta": {"progressToken": "agent-token"},
    });
    let done = connection.request("tools/call", params, &relay, deadline(20)).await.expect("long-running operation");
    assert!(text(&done).starts_with("Long running operation completed"), "{done}");
    drop(relay);
    let mut progress = Vec::new();
    while let Some(RelayMessage::Notification(note)) = messages.recv().await {
        if note["method"] == "notifications/progress" {
            progress.push(note["params"].clone());
        }
    }
    assert_eq!(progress.len(), 2, "{progress:?}");
    assert!(progress.iter().all(|params| params["progressToken"] == "agent-token"), "{progress:?}");
    assert_eq!(progress[1]["progress"], 2);
}

#[tokio::test]
async fn a_stream_without_an_endpoint_event_is_not_delivered_at_the_deadline() {
    let backend = FaultLegacySse::start(Script { endpoint: EndpointEvent::Never, ..Script::default() }).await;
    let started = Instant::now();
    let refused = LegacySseConnection::connect(
        &HttpClient::new().unwrap(),
        &self::backend(&backend.url()),
        &json!({}),
        Standing::default(),
        Instant::now() + Duration::from_millis(300),
    )
    .await;
    assert_not_delivered(refused.map(|c| c.version()), "`endpoint` event");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(backend.requests().iter().all(|r| r.http_method == "GET"), "nothing was POSTed");
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_and_gets_no_credential() {
    let elsewhere = FaultLegacySse::start(Script::default()).await;
    let foreign = format!("{}/message?session=1", elsewhere.origin());
    let backend =
        FaultLegacySse::start(Script { endpoint: EndpointEvent::Absolute(foreign), ..Script::default() }).await;
    assert_not_delivered(connect(&backend.url()).await.map(|c| c.version()), "another origin");
    assert!(elsewhere.requests().is_empty(), "the foreign origin was contacted: {:?}", elsewhere.requests());
    let seen = backend.requests();
    assert_eq!(seen.len(), 1, "only the GET: {seen:?}");
    assert_eq!(seen[0].header("authorization"), Some(TOKEN), "the configured origin gets the credential");
}

#[tokio::test]
async fn refused_posts_are_not_delivered_and_the_session_goes_on() {
    let backend = FaultLegacySse::start(Script::default()).await;
    let connection = connect(&backend.url()).await.expect("handshake");
    for status in [429, 413] {
        backend.update(|script| script.call_status = Some(status));
        assert_not_delivered(call(&connection, "echo", json!({"text": "x"}), 10).await, &format!("HTTP {status}"));
    }
    assert_eq!(backend.executions("echo"), 0);
    backend.update(|script| script.call_status = None);
    assert_eq!(text(&call(&connection, "echo", json!({"text": "after"}), 10).await.expect("echo")), "after");
    assert!(connection.is_alive());
}

#[tokio::test]
async fn a_post_failing_with_500_has_an_unknown_outcome() {
    let backend = FaultLegacySse::start(Script { call_status: Some(500), ..Script::default() }).await;
    let connection = connect(&backend.url()).await.expect("handshake");
    let failed = call(&connection, "echo", json!({"text": "x"}), 10).await;
    assert!(matches!(failed, Err(McpError::HttpStatus { status: 500, .. })), "{failed:?}");
    assert!(!failed.unwrap_err().proves_not_delivered());
    assert_eq!(backend.executions("echo"), 1);
}

#[tokio::test]
async fn a_stream_dropped_after_the_post_is_after_delivery_ends_the_session_and_is_not_retried() {
    let backend = FaultLegacySse::start(Script { drop_stream_after_call: true, ..Script::default() }).await;
    let connection = connect(&backend.url()).await.expect("handshake");
    assert_after_delivery(call(&connection, "echo", json!({"text": "once"}), 10).await, "closed its SSE stream");
    assert!(!connection.is_alive());
    assert_not_delivered(call(&connection, "echo", json!({"text": "again"}), 10).await, "closed its SSE stream");
    assert_eq!(backend.executions("echo"), 1, "the call in flight ran once and was not repeated");
    backend.update(|script| script.drop_stream_after_call = false);
    let fresh = connect(&backend.url()).await.expect("a new session");
    assert_eq!(text(&call(&fresh, "echo", json!({"text": "next"}), 10).await.expect("echo")), "next");
    assert_eq!(backend.sessions_opened(), 2);
    assert_eq!(backend.executions("echo"), 2);
}

#[tokio::test]
async fn garbage_on_the_stream_is_after_delivery_and_ends_the_session() {
    let backend = FaultLegacySse::start(Script { garbage_after_call: true, ..Script::default() }).await;
    let connection = connect(&backend.url()).await.expect("handshake");
    assert_after_delivery(call(&connection, "echo", json!({"text": "x"}), 10).await, "not JSON");
    assert!(!connection.is_alive());
    assert_eq!(backend.executions("echo"), 1);
}

#[tokio::test]
async fn a_stalled_call_is_after_delivery_at_its_deadline_and_cancelled_by_its_own_id() {
    let backend = FaultLegacySse::start(Script { stall_call: true, ..Script::default() }).await;
    let connection = connect(&backend.url()).await.expect("handshake");
    let params = json!({"name": "echo", "arguments": {"text": "x"}});
    let soon = Instant::now() + Duration::from_millis(300);
    let stalled = connection.request("tools/call", params, &Relay::default(), soon).await;
    assert_after_delivery(stalled, "deadline passed");
    let call_id = backend.posted("tools/call")[0]["id"].clone();
    let cancelled = posted(&backend, "notifications/cancelled").await;
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["params"]["requestId"], call_id);
    assert!(connection.is_alive(), "a timeout does not end the session");
}

#[tokio::test]
async fn two_connections_are_two_backend_sessions() {
    let backend = FaultLegacySse::start(Script::default()).await;
    let (one, two) = (connect(&backend.url()).await.expect("one"), connect(&backend.url()).await.expect("two"));
    assert_ne!(one.endpoint(), two.endpoint());
    for expected in ["1", "2"] {
        assert_eq!(text(&call(&one, "counter", json!({}), 10).await.expect("counter")), expected);
    }
    assert_eq!(text(&call(&two, "counter", json!({}), 10).await.expect("counter")), "1");
    assert_eq!(backend.sessions_opened(), 2);
    assert_eq!(posted(&backend, "notifications/initialized").await.len(), 2);
    for request in backend.requests() {
        assert_eq!(request.header("authorization"), Some(TOKEN), "{} {}", request.http_method, request.path);
        assert_eq!(request.header("x-extra"), Some("1"), "{} {}", request.http_method, request.path);
    }
}

#[tokio::test]
async fn a_ping_from_the_backend_is_answered_over_post() {
    let backend = FaultLegacySse::start(Script { ping_before_result: true, ..Script::default() }).await;
    let connection = connect(&backend.url()).await.expect("handshake");
    let answered = call(&connection, "echo", json!({"text": "x"}), 20).await.expect("the call completes");
    let answer: Value = serde_json::from_str(text(&answered)).expect("the client's answer, as JSON");
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": "ping-1", "result": {}}));
}

#[tokio::test]
async fn a_configured_sse_backend_lowers_into_a_connection_with_its_credential_and_is_discovered() {
    let backend = FaultLegacySse::start(Script::default()).await;
    let toml = format!(
        "[[backends]]\nname = \"legacy\"\ntransport = \"sse\"\nurl = {:?}\nheaders = {{ X-Extra = \"1\" }}\n\
         credential = {{ header = \"Authorization\", prefix = \"Bearer \", env = \"LEGACY_TOKEN\" }}\n",
        backend.url()
    );
    let config =
        Config::from_toml_str(&toml, "t.toml", [("LEGACY_TOKEN", "legacy-t0ken")]).expect("valid configuration");
    let lowered = switchyard::gateway::testing::legacy_sse_backend(&config.backends[0]).expect("an sse backend");
    assert!(!format!("{lowered:?}").contains("legacy-t0ken"), "Debug must not show the credential");
    let connection = LegacySseConnection::connect(
        &HttpClient::new().unwrap(),
        &lowered,
        &json!({}),
        Standing::default(),
        deadline(10),
    )
    .await
    .expect("handshake");
    assert_eq!(text(&call(&connection, "echo", json!({"text": "cfg"}), 10).await.expect("echo")), "cfg");
    let requests = backend.requests();
    assert!(requests.iter().all(|r| r.header("authorization") == Some(TOKEN)), "{requests:?}");
    assert!(switchyard::gateway::testing::stdio_backend(&config.backends[0]).is_none());
    let gateway = switchyard::gateway::Gateway::for_discovery(config).await.expect("the gateway serves the transport");
    gateway.discover_once().await;
    let routes = gateway.router.catalog().routes();
    assert!(routes.iter().any(|route| route.name == "echo"), "discovered through the gateway's client");
}
