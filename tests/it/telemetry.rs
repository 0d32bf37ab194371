//! Metrics through the running gateway: `/metrics` scraped after real calls, asserting the
//! exact series and label values of every tool-call outcome (completed, tool error, unknown, not delivered to a
//! dead backend, replayed duplicate, denied by policy) and of an unknown tool; bounded labels under a flood of
//! made-up names; `/metrics` on its own listener with `[telemetry] metrics_listen`; agent sessions, refused
//! credentials and relayed requests. The access log and its secrets are [`logs`]'.

mod logs;

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::router::IDEMPOTENCY_META;

use crate::agent_auth::{ALICE_KEY, api_keys};
use crate::gateway::read_until;
use crate::support::fault_backend::{Answer, FaultBackend, Script};
use crate::support::gateway::{Agent, SESSION, TestGateway, backend_toml};
use crate::support::pg_proxy::TcpProxy;

/// The body of `GET {base}/metrics`, checking its status and content type.
pub async fn scrape(base: &str) -> String {
    let response = reqwest::get(format!("{base}/metrics")).await.expect("the metrics endpoint answers");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    response.text().await.expect("a text body")
}

/// The value of the sample written exactly `series` (name and labels as exposed), if any.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The lines of `text` starting with `prefix`.
fn series<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|line| line.starts_with(prefix)).collect()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
}

fn call(name: &str, key: Option<&str>) -> Value {
    let mut params = json!({"name": name, "arguments": {"text": "hi"}});
    if let Some(key) = key {
        params["_meta"] = json!({IDEMPOTENCY_META: key});
    }
    params
}

fn address_of(backend: &FaultBackend) -> SocketAddr {
    let url = backend.url();
    url.strip_prefix("http://").and_then(|rest| rest.split('/').next()).expect("http URL").parse().expect("address")
}

fn tool_calls(outcome: &str, tool: &str) -> String {
    format!("switchyard_tool_calls_total{{backend=\"fault\",tool=\"{tool}\",outcome=\"{outcome}\"}}")
}

fn server_count(tool: &str, error: &str) -> String {
    format!(
        "mcp_server_operation_duration_seconds_count{{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"{tool}\",\
         error_type=\"{error}\"}}"
    )
}

fn client_count(error: &str) -> String {
    format!(
        "mcp_client_operation_duration_seconds_count{{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"echo\",\
         error_type=\"{error}\",backend=\"fault\"}}"
    )
}

/// A gateway that has served one tool call of each outcome (completed, replayed, tool error, unknown, denied, not
/// delivered) and one of an unknown tool, with the backend and proxy it needs alive. `deploy`'s check reuses it.
pub struct EveryOutcome {
    pub gateway: TestGateway,
    _backend: FaultBackend,
    _proxy: TcpProxy,
}

pub async fn every_outcome() -> EveryOutcome {
    let backend = FaultBackend::start(Script { tools: vec![tool("echo"), tool("secret")], ..Script::default() }).await;
    let mut proxy = TcpProxy::start(address_of(&backend)).await;
    let policy =
        "[[policies]]\nprincipals = [\"*\"]\nallow = [\"*\"]\ndeny = [\"fault__secret\"]\nbackends = [\"*\"]\n";
    let url = format!("http://{}/mcp", proxy.address());
    let gateway = TestGateway::start_with("", policy, &backend_toml("fault", &url, "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;

    let completed = agent.request("tools/call", call("fault__echo", Some("k-1"))).await;
    assert_eq!(completed["result"]["content"][0]["text"], "hi", "{completed}");
    let replayed = agent.request("tools/call", call("fault__echo", Some("k-1"))).await;
    assert_eq!(replayed["result"]["_meta"]["switchyard/replayed"], true, "{replayed}");
    backend.update(|script| script.tool_is_error = true);
    let failed = agent.request("tools/call", call("fault__echo", None)).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    backend.update(|script| (script.tool_is_error, script.drop_after_call) = (false, true));
    let lost = agent.request("tools/call", call("fault__echo", None)).await;
    assert_eq!(lost["result"]["_meta"]["switchyard/outcome"], "unknown", "{lost}");
    let denied = agent.request("tools/call", call("fault__secret", None)).await;
    assert_eq!(denied["error"]["code"], -32602, "{denied}");
    let unknown = agent.request("tools/call", call("nonexistent", None)).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    proxy.cut().await;
    let dead = agent.request("tools/call", call("fault__echo", None)).await;
    assert_eq!(dead["result"]["_meta"]["switchyard/outcome"], "not_delivered", "{dead}");
    EveryOutcome { gateway, _backend: backend, _proxy: proxy }
}

#[tokio::test]
async fn every_tool_call_outcome_is_counted_with_exact_labels() {
    let served = every_outcome().await;
    let text = scrape(&served.gateway.base).await;
    let counted = series(&text, "switchyard_tool_calls_total{");
    assert_eq!(counted.len(), 6, "one series per outcome seen:\n{}", counted.join("\n"));
    for outcome in ["completed", "replayed", "tool_error", "unknown", "not_delivered"] {
        assert_eq!(sample(&text, &tool_calls(outcome, "fault__echo")), Some(1.0), "{outcome}:\n{text}");
    }
    assert_eq!(sample(&text, &tool_calls("denied", "fault__secret")), Some(1.0), "{text}");
    assert!(!text.contains("nonexistent"), "an agent's made-up name is never a label:\n{text}");

    // The agent's view: a replay and a completed call are successes; every failure the gateway reports as a
    // `CallToolResult` is a tool error; refusals carry their JSON-RPC code.
    assert_eq!(sample(&text, &server_count("fault__echo", "")), Some(2.0), "{text}");
    assert_eq!(sample(&text, &server_count("fault__echo", "tool_error")), Some(3.0), "{text}");
    assert_eq!(sample(&text, &server_count("fault__secret", "-32602")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &server_count("_unknown", "-32602")), Some(1.0), "{text}");
    assert_eq!(series(&text, "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\"").len(), 4);
    let initialize = "mcp_server_operation_duration_seconds_count{mcp_method_name=\"initialize\",gen_ai_tool_name=\"\",error_type=\"\"}";
    assert_eq!(sample(&text, initialize), Some(1.0), "{text}");

    // The backend's view: only calls that were sent, by how the exchange ended.
    for (error, count) in [("", 1.0), ("tool_error", 1.0), ("after_delivery", 1.0), ("not_delivered", 1.0)] {
        assert_eq!(sample(&text, &client_count(error)), Some(count), "`{error}`:\n{text}");
    }
    assert_eq!(series(&text, "mcp_client_operation_duration_seconds_count{mcp_method_name=\"tools/call\"").len(), 4);
    let discovery = "mcp_client_operation_duration_seconds_count{mcp_method_name=\"tools/list\",gen_ai_tool_name=\"\",error_type=\"\",backend=\"fault\"}";
    assert!(sample(&text, discovery).is_some_and(|count| count >= 1.0), "{text}");

    // Claims: four calls were claimed; two completed (a tool error is a completed call), one unknown, one released.
    for (state, count) in [("in_flight", 4.0), ("completed", 2.0), ("unknown", 1.0), ("released", 1.0)] {
        let claims = format!("switchyard_ledger_claims_total{{state=\"{state}\"}}");
        assert_eq!(sample(&text, &claims), Some(count), "{state}:\n{text}");
    }
    // The cut proxy refused the last call's connection: the backend is down since.
    assert_eq!(sample(&text, "switchyard_backend_up{backend=\"fault\"}"), Some(0.0));
    assert_eq!(sample(&text, "switchyard_backend_discovery_failures_total{backend=\"fault\"}"), Some(0.0));
    // The discovery session and the agent's.
    assert_eq!(sample(&text, "switchyard_backend_sessions{backend=\"fault\"}"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "switchyard_stdio_processes{backend=\"fault\"}"), Some(0.0));
    assert_eq!(sample(&text, "switchyard_agent_sessions_opened_total"), Some(1.0));
}

#[tokio::test]
async fn a_flood_of_made_up_names_adds_no_series() {
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &backend.url(), "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    agent.request("tools/call", call("nope-0", None)).await;
    agent.request("made/up-0", json!({})).await;
    let before = scrape(&gateway.base).await;
    for n in 1..=100 {
        agent.request("tools/call", call(&format!("nope-{n}"), None)).await;
        agent.request(&format!("made/up-{n}"), json!({})).await;
        let note = json!({"jsonrpc": "2.0", "method": format!("notifications/made-up-{n}")});
        assert_eq!(agent.send(&note).await.status, StatusCode::ACCEPTED);
    }
    let after = scrape(&gateway.base).await;
    let shape = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| line.rsplit_once(' ').unwrap().0.to_owned())
            .collect()
    };
    assert_eq!(shape(&before), shape(&after), "the same series, only their values moved");
    assert!(!after.contains("nope-") && !after.contains("made/up") && !after.contains("made-up"), "{after}");
    assert_eq!(sample(&after, &server_count("_unknown", "-32602")), Some(101.0));
    let other = "mcp_server_operation_duration_seconds_count{mcp_method_name=\"_other\",gen_ai_tool_name=\"\",error_type=\"-32601\"}";
    assert_eq!(sample(&after, other), Some(101.0), "{after}");
}

#[tokio::test]
async fn metrics_listen_moves_metrics_to_their_own_listener() {
    let backend = FaultBackend::start(Script::default()).await;
    let backends = backend_toml("fault", &backend.url(), "");
    let gateway = TestGateway::start_with("", "[telemetry]\nmetrics_listen = \"127.0.0.1:0\"\n", &backends).await;
    let own = gateway.metrics_base.clone().expect("a metrics listener");
    assert_ne!(own, gateway.base);
    let main = reqwest::get(format!("{}/metrics", gateway.base)).await.unwrap();
    assert_eq!(main.status(), StatusCode::NOT_FOUND, "not on the main listener");
    let mut agent = Agent::connected(gateway.mcp()).await;
    agent.call_tool("fault__echo", json!({"text": "hi"})).await;
    let text = scrape(&own).await;
    assert_eq!(sample(&text, &tool_calls("completed", "fault__echo")), Some(1.0), "{text}");
    let elsewhere = reqwest::get(format!("{own}/mcp")).await.unwrap();
    assert_eq!(elsewhere.status(), StatusCode::NOT_FOUND, "the metrics listener serves nothing else");

    let plain = TestGateway::start("", &backends).await;
    assert!(plain.metrics_base.is_none());
    let text = scrape(&plain.base).await;
    assert_eq!(sample(&text, "switchyard_backend_up{backend=\"fault\"}"), Some(1.0), "{text}");
    let rebound = reqwest::Client::new()
        .get(format!("{}/metrics", plain.base))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN, "the main listener's header checks apply");
}

#[tokio::test]
async fn sessions_refused_credentials_and_relayed_requests_are_counted() {
    let asking = Script {
        answer: Answer::Sse,
        before_result: vec![json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
            "params": {"message": "Which colour?", "requestedSchema": {"type": "object"}}})],
        await_answers: true,
        ..Script::default()
    };
    let backend = FaultBackend::start(asking).await;
    let sections = format!("[auth]\n{}", api_keys());
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &backend.url(), "")).await;
    let agent = Agent::with_token(gateway.mcp(), ALICE_KEY).connect(json!({"elicitation": {}})).await;
    for token in [None, Some("sy_wrong"), Some("sy_wrong-again")] {
        let mut request = reqwest::Client::new().post(gateway.mcp()).header("content-type", "application/json");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let refused = request.body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    }
    let message = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "painted"}}});
    let mut stream = agent.post_streaming(&message).await;
    let seen = read_until(&mut stream, "elicitation/create", Duration::from_secs(5)).await.expect("the request");
    let data = seen.lines().filter_map(|line| line.strip_prefix("data: ")).find(|data| data.contains("elicitation"));
    let request: Value = serde_json::from_str(data.expect("the request event")).unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}});
    assert_eq!(agent.send(&answer).await.status, StatusCode::ACCEPTED);
    assert!(read_until(&mut stream, "painted", Duration::from_secs(5)).await.is_some(), "the call ends");
    let session = agent.session.clone().unwrap();
    let deleted = agent.http.delete(gateway.mcp()).header(SESSION, session).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);

    let text = scrape(&gateway.base).await;
    assert_eq!(sample(&text, "switchyard_auth_failures_total{reason=\"missing\"}"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "switchyard_auth_failures_total{reason=\"unknown_key\"}"), Some(2.0), "{text}");
    assert!(!text.contains("sy_wrong") && !text.contains("alice"), "no credential or principal is a label");
    assert_eq!(sample(&text, "switchyard_relayed_requests_total{method=\"elicitation/create\"}"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_agent_sessions_opened_total"), Some(1.0));
    assert_eq!(sample(&text, "switchyard_agent_sessions_deleted_total"), Some(1.0));
}
