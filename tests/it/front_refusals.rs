//! What the agent-facing endpoint refuses, and how: every refusal is the right HTTP
//! status with a JSON-RPC error body, and a refused message changes nothing.

use std::net::SocketAddr;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::gateway::{Agent, Reply, SESSION, TestGateway, backend_toml};

async fn gateway(server_keys: &str) -> (TestGateway, tokio::task::JoinHandle<()>) {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let backends = backend_toml("demo", &format!("http://{address}/mcp"), "");
    (TestGateway::start(server_keys, &backends).await, demo)
}

/// The JSON-RPC error code of a refusal, after checking that its body is a JSON-RPC error with `status`.
fn refusal_code(reply: &Reply, status: StatusCode) -> i64 {
    assert_eq!(reply.status, status, "{}", reply.raw);
    assert_eq!(reply.headers["content-type"], "application/json", "{}", reply.raw);
    let body = reply.body.as_ref().unwrap_or_else(|| panic!("not JSON: {}", reply.raw));
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    body["error"]["code"].as_i64().unwrap_or_else(|| panic!("not a JSON-RPC error: {body}"))
}

async fn reply_of(response: reqwest::Response) -> Reply {
    let (status, headers) = (response.status(), response.headers().clone());
    let raw = response.text().await.unwrap();
    Reply { status, headers, body: serde_json::from_str(&raw).ok(), raw }
}

#[tokio::test]
async fn readyz_applies_the_host_and_origin_checks_of_mcp() {
    let (gateway, _demo) = gateway("").await;
    let http = reqwest::Client::new();
    let readyz = format!("{}/readyz", gateway.base);
    let rebound = reply_of(http.get(&readyz).header("host", "evil.example").send().await.unwrap()).await;
    assert_eq!(refusal_code(&rebound, StatusCode::FORBIDDEN), -32600);
    assert!(!rebound.raw.contains("demo"), "nothing about the backends leaks: {}", rebound.raw);
    let foreign = reply_of(http.get(&readyz).header("origin", "https://evil.example").send().await.unwrap()).await;
    assert_eq!(refusal_code(&foreign, StatusCode::FORBIDDEN), -32600);
    let local = http.get(&readyz).header("origin", "http://localhost:6274").send().await.unwrap();
    assert_eq!(local.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_message_without_jsonrpc_2_0_is_an_invalid_request() {
    let (gateway, _demo) = gateway("").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let call = json!({"name": "demo__counter", "arguments": {}});
    for message in [
        json!({"id": 7, "method": "tools/call", "params": call}),
        json!({"jsonrpc": "1.0", "id": 7, "method": "tools/call", "params": call}),
        json!({"jsonrpc": 2.0, "id": 7, "method": "tools/call", "params": call}),
    ] {
        let reply = agent.send(&message).await;
        assert_eq!(refusal_code(&reply, StatusCode::BAD_REQUEST), -32600, "{message}");
        assert_eq!(reply.body.as_ref().unwrap()["id"], 7, "the id is answered when it can be read");
    }
    let counted = agent.call_tool("demo__counter", json!({})).await;
    assert_eq!(counted["result"]["content"][0]["text"], "1", "the refused calls did not run: {counted}");
}

#[tokio::test]
async fn a_body_that_is_not_declared_json_is_unsupported_media() {
    let (gateway, _demo) = gateway("").await;
    let agent = Agent::connected(gateway.mcp()).await;
    let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap();
    for kind in ["text/plain", "application/x-www-form-urlencoded", "application/jsonp"] {
        let reply = agent.post_raw(ping.clone(), &[("content-type", kind)]).await;
        assert_eq!(refusal_code(&reply, StatusCode::UNSUPPORTED_MEDIA_TYPE), -32600, "{kind}");
    }
    let undeclared = reqwest::Client::new()
        .post(gateway.mcp())
        .header(SESSION, agent.session.as_deref().unwrap())
        .body(ping.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(refusal_code(&reply_of(undeclared).await, StatusCode::UNSUPPORTED_MEDIA_TYPE), -32600);
    let declared = agent.post_raw(ping, &[("content-type", "application/json; charset=utf-8")]).await;
    assert_eq!(declared.status, StatusCode::OK, "parameters are allowed: {}", declared.raw);
}

#[tokio::test]
async fn delete_on_an_unknown_backend_is_not_found() {
    let (gateway, _demo) = gateway("").await;
    let agent = Agent::connected(gateway.mcp()).await;
    let session = agent.session.clone().unwrap();
    let http = reqwest::Client::new();
    let unknown = http.delete(format!("{}/nope", gateway.mcp())).header(SESSION, &session).send().await.unwrap();
    assert_eq!(refusal_code(&reply_of(unknown).await, StatusCode::NOT_FOUND), -32600);
    let ping = agent.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})).await;
    assert_eq!(ping.status, StatusCode::OK, "the session was not deleted: {}", ping.raw);
    let known = http.delete(format!("{}/demo", gateway.mcp())).header(SESSION, &session).send().await.unwrap();
    assert_eq!(known.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_body_over_max_body_gets_a_json_rpc_413() {
    let (gateway, _demo) = gateway("max_body = \"2KiB\"").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"text": "x".repeat(4096)}}});
    let reply = agent.send(&huge).await;
    assert_eq!(refusal_code(&reply, StatusCode::PAYLOAD_TOO_LARGE), -32600);
    let message = reply.body.as_ref().unwrap()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("max_body = 2048 bytes"), "{message}");
    let echoed: Value = agent.call_tool("demo__echo", json!({"text": "fits"})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "fits", "nothing was lost");
}

/// Sends `request` as written on a fresh connection and reads the whole answer (the request asks to close).
async fn raw_exchange(gateway: &TestGateway, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = gateway.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.expect("connect to the gateway");
    socket.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
    read.expect("answered within 10 s").expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// One host per request, on every route: two `Host` headers are 400 (RFC 9112 §3.2), an absolute-form target
/// naming another host than `Host` is 421 (§3.2.2: that authority, not `Host`, is the host asked for); the
/// absolute form naming the `Host` is served.
#[tokio::test]
async fn a_request_naming_two_hosts_is_refused() {
    let (gateway, _demo) = gateway("").await;
    let host = gateway.base.trim_start_matches("http://").to_owned();
    for path in ["/readyz", "/admin/api/calls", "/mcp"] {
        for (first, second) in [(host.as_str(), "evil.example"), ("evil.example", host.as_str())] {
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: {first}\r\nHost: {second}\r\nConnection: close\r\n\r\n");
            let answer = raw_exchange(&gateway, &request).await;
            assert!(answer.starts_with("HTTP/1.1 400"), "{path}, Host {first} then {second}: {answer}");
            assert!(answer.contains("more than one Host header"), "{answer}");
        }
        let elsewhere = format!("GET http://evil.example{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let answer = raw_exchange(&gateway, &elsewhere).await;
        assert!(answer.starts_with("HTTP/1.1 421"), "{path}: {answer}");
        assert!(answer.contains("names another host than the Host header"), "{answer}");
        assert!(answer.contains("\"code\":-32600"), "a JSON-RPC error body: {answer}");
    }
    let here = format!("GET http://{host}/readyz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let answer = raw_exchange(&gateway, &here).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "the absolute form naming the Host: {answer}");
}
