//! A browser agent in headless Chromium: a page served from another loopback port (another origin) initializes a
//! session with `fetch` through the preflight, reads the exposed `Mcp-Session-Id`, calls a tool, and reads a
//! 401's `WWW-Authenticate` from a gateway that wants credentials.

use std::net::SocketAddr;
use std::time::Duration;

use axum::response::Html;
use serde_json::Value;

use super::gateway;
use crate::agent_auth::api_keys;
use crate::support::chromium::{Browser, chromium};

/// The page: `mcp(url)` runs `initialize` and a `tools/call` against `url`; `challenge(url)` reads a refusal.
const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>agent</title></head><body><script>
const post = (url, message, session) => fetch(url, {
  method: "POST",
  headers: Object.assign(
    {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    session ? {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"} : {}),
  body: JSON.stringify(message),
});
async function mcp(url) {
  const init = await post(url, {jsonrpc: "2.0", id: 1, method: "initialize", params: {
    protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "page", version: "1"}}});
  const session = init.headers.get("Mcp-Session-Id");
  const initialized = await init.json();
  await post(url, {jsonrpc: "2.0", method: "notifications/initialized"}, session);
  const call = await post(url, {jsonrpc: "2.0", id: 2, method: "tools/call",
    params: {name: "demo__echo", arguments: {text: "from another origin"}}}, session);
  return {session, version: initialized.result.protocolVersion, status: call.status, answer: await call.json()};
}
async function challenge(url) {
  const refused = await post(url, {jsonrpc: "2.0", id: 1, method: "ping"});
  return {status: refused.status, challenge: refused.headers.get("WWW-Authenticate")};
}
</script></body></html>"#;

/// Serves [`PAGE`] at `/` on a loopback port of its own: `http://127.0.0.1:<port>`.
async fn serve_page() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/", axum::routing::get(|| async { Html(PAGE) }));
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (origin, server)
}

#[tokio::test]
async fn a_page_of_another_origin_initializes_and_calls_a_tool_with_fetch() {
    let Some(binary) = chromium() else { return };
    let (gateway, _demo) = gateway("", "").await;
    let (guarded, _guarded_demo) = super::gateway("", &api_keys()).await;
    let (origin, _page) = serve_page().await;
    assert_ne!(origin, gateway.base, "the page is of another origin");

    let mut browser = Browser::launch(&binary).await;
    browser.navigate(&format!("{origin}/")).await;
    let loaded = |page: &Value| page == &Value::Bool(true);
    browser.wait_for("typeof mcp === 'function'", Duration::from_secs(30), loaded).await;

    let outcome = browser.evaluate(&format!("mcp({:?})", gateway.mcp())).await;
    assert!(outcome["session"].as_str().is_some_and(|session| !session.is_empty()), "{outcome}");
    assert_eq!(outcome["version"], "2025-11-25", "{outcome}");
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(outcome["answer"]["result"]["content"][0]["text"], "from another origin", "{outcome}");

    let refused = browser.evaluate(&format!("challenge({:?})", guarded.mcp())).await;
    assert_eq!(refused["status"], 401, "{refused}");
    assert!(refused["challenge"].as_str().is_some_and(|value| value.starts_with("Bearer")), "{refused}");
    assert!(browser.problems().iter().all(is_the_expected_401), "{:#?}", browser.problems());
}

/// The browser's own log line for the 401 the page asked for.
fn is_the_expected_401(problem: &Value) -> bool {
    problem["entry"]["source"] == "network"
        && problem["entry"]["text"].as_str().is_some_and(|text| text.contains("401"))
}
