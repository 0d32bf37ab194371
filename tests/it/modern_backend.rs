//! Backends of the 2026-07-28 era behind the gateway: the era probe and its fallback, the
//! modern wire as a backend sees it (no handshake, no session, `_meta` and the mirrored headers on every request,
//! the backend's own tool names), the at-most-once classes on that wire (no resumption, close-to-cancel), and
//! what replaces the `GET` stream and the removed methods. The backends are the fault backend in its modern and
//! dual-era modes (it checks every header against the body itself and records what reached it), the Python SDK's
//! dual-era server over stdio, `fault_stdio.py` in its 2025 and 2026 modes, and the conformance fixture in its
//! `modern` and `dual` modes.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::backend::mcp_client::{
    BackendEndpoint, BackendTarget, ClientConfig, Era, McpBackendClient, McpError, Relay, RelayMessage, SlotKey,
};
use switchyard::backend::stdio::{Launcher, Sharing, StdioBackend, StdioCommand, StdioOptions};
use switchyard::backend::testing::AgentSlot;
use switchyard::mcp::SessionHolder;

use crate::gateway::read_until;
use crate::support::assert::{eventually, outcome, text};
use crate::support::backend_calls::on;
use crate::support::fault_backend::{Answer, Eras, FaultBackend, Recorded, Resume, Script};
use crate::support::gateway::{Agent, SESSION, TestGateway, backend_toml};
use crate::support::interop::{InteropServer, interop_dir, python_interpreter};

const TIMEOUT: Duration = Duration::from_secs(60);

fn route_tool() -> Value {
    json!({
        "name": "route",
        "description": "Echoes its text; the region travels in a header.",
        "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "text": {"type": "string"}
        }}
    })
}

fn echo_tool() -> Value {
    json!({"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
}

/// A modern-only backend with tools, a prompt, resources and logging.
fn modern_script() -> Script {
    Script {
        eras: Eras::Modern,
        tools: vec![echo_tool(), route_tool()],
        prompts: vec![json!({"name": "greet", "arguments": [{"name": "who"}]})],
        capabilities: json!({"tools": {}, "prompts": {}, "resources": {"subscribe": true}, "logging": {}}),
        ..Script::default()
    }
}

async fn gateway_for(fault: &FaultBackend) -> TestGateway {
    TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await
}

/// The requests of one JSON-RPC method that reached the backend.
fn sent(fault: &FaultBackend, method: &str) -> Vec<Recorded> {
    fault.requests().into_iter().filter(|r| r.rpc_method.as_deref() == Some(method)).collect()
}

fn meta(request: &Recorded) -> Value {
    request.body.as_ref().and_then(|body| body.pointer("/params/_meta")).cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_modern_only_backend_serves_a_legacy_agent_end_to_end() {
    let fault = FaultBackend::start(modern_script()).await;
    let gateway = gateway_for(&fault).await;
    let mut agent = Agent::connected(gateway.mcp()).await;

    assert_eq!(agent.tool_names().await, ["fault__echo", "fault__route"]);
    let routed = agent.call_tool("fault__route", json!({"region": "eu-west", "text": "hi"})).await;
    assert_eq!(text(&routed), "hi", "{routed}");
    let read = agent.request("resources/read", json!({"uri": "fault://docs/ä"})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "content of \"fault://docs/ä\"", "{read}");
    let prompt = agent.request("prompts/get", json!({"name": "fault__greet", "arguments": {"who": "x"}})).await;
    assert!(prompt["result"]["messages"][0]["content"]["text"].as_str().unwrap().starts_with("prompt greet"));
    assert_eq!(agent.request("logging/setLevel", json!({"level": "debug"})).await["result"], json!({}));
    agent.call_tool("fault__echo", json!({"text": "after"})).await;

    // The backend checked every header against its body (a mismatch is refused with -32020); here is what it saw.
    let requests = fault.requests();
    assert!(requests.iter().all(|r| r.http_method == "POST"), "no GET or DELETE on the modern wire");
    assert!(requests.iter().all(|r| r.header(SESSION).is_none()), "no session id");
    assert_eq!(sent(&fault, "initialize").len(), 0, "no handshake");
    assert_eq!(sent(&fault, "server/discover").len(), 1, "one probe for the gateway's lifetime");
    assert_eq!(sent(&fault, "logging/setLevel").len(), 0, "the removed method is kept by the gateway");
    for request in requests.iter().filter(|r| r.rpc_method.is_some()) {
        let meta = meta(request);
        assert_eq!(request.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(request.header("mcp-method"), request.rpc_method.as_deref());
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{meta}");
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object(), "{meta}");
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "switchyard", "{meta}");
    }
    let call = &sent(&fault, "tools/call")[0];
    assert_eq!(call.body.as_ref().unwrap()["params"]["name"], "route", "the backend's own name");
    assert_eq!(call.header("mcp-name"), Some("route"), "Mcp-Name names the tool as the backend knows it");
    assert_eq!(call.header("mcp-param-region"), Some("eu-west"));
    let read = &sent(&fault, "resources/read")[0];
    assert_eq!(read.header("mcp-name"), Some("=?base64?ZmF1bHQ6Ly9kb2NzL8Ok?="), "a non-ASCII URI is encoded");
    assert_eq!(sent(&fault, "prompts/get")[0].header("mcp-name"), Some("greet"));
    let after = &sent(&fault, "tools/call")[1];
    assert_eq!(meta(after)["io.modelcontextprotocol/logLevel"], "debug", "the level rides on later requests");
    assert!(meta(call).get("io.modelcontextprotocol/logLevel").is_none(), "no level before it was set");
}

#[tokio::test]
async fn a_legacy_agent_never_sees_members_only_the_2026_era_defines() {
    let fault = FaultBackend::start(modern_script()).await;
    let gateway = gateway_for(&fault).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let answers = [
        agent.call_tool("fault__echo", json!({"text": "plain"})).await,
        agent.request("tools/list", json!({})).await,
        agent.request("prompts/get", json!({"name": "fault__greet", "arguments": {"who": "x"}})).await,
        agent.request("resources/read", json!({"uri": "fault://docs/a"})).await,
    ];
    for answer in answers {
        assert!(answer["result"].is_object(), "{answer}");
        assert!(answer["result"].get("resultType").is_none(), "{answer}");
    }
    assert_eq!(sent(&fault, "tools/call").len(), 1, "the call reached the 2026-era backend");
}

#[tokio::test]
async fn a_dual_era_backend_is_spoken_to_in_the_modern_era() {
    let fault = FaultBackend::start(Script { eras: Eras::Both, ..modern_script() }).await;
    let gateway = gateway_for(&fault).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(text(&agent.call_tool("fault__echo", json!({"text": "dual"})).await), "dual");
    assert_eq!(sent(&fault, "initialize").len(), 0, "a dual-era backend needs no handshake");
    assert_eq!(sent(&fault, "server/discover").len(), 1);
    assert!(meta(&sent(&fault, "tools/call")[0])["io.modelcontextprotocol/protocolVersion"] == "2026-07-28");
}

#[tokio::test]
async fn a_legacy_backend_still_initializes_and_is_probed_once() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = gateway_for(&fault).await;
    for _agent_session in 0..2 {
        let mut agent = Agent::connected(gateway.mcp()).await;
        for _call in 0..2 {
            assert_eq!(text(&agent.call_tool("fault__echo", json!({"text": "old"})).await), "old");
        }
    }
    assert_eq!(sent(&fault, "server/discover").len(), 1, "the era is remembered, not probed per session or call");
    assert_eq!(sent(&fault, "initialize").len(), 3, "discovery's session and one per agent session");
    assert!(sent(&fault, "tools/call").iter().all(|r| r.header(SESSION).is_some()));
    assert_eq!(fault.executions("echo"), 4);
}

/// A call whose stream the backend ends after it received the call: `unknown`, and never run again.
async fn assert_lost_after_delivery(script: Script) {
    let fault = FaultBackend::start(script).await;
    let gateway = gateway_for(&fault).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "lost"}}});
    let lost = agent.send(&call).await.body.unwrap();
    assert_eq!(outcome(&lost), Some("unknown"), "{lost}");
    let again = agent.send(&call).await.body.unwrap();
    assert_eq!(outcome(&again), Some("unknown"), "answered from the claim: {again}");
    assert_eq!(fault.executions("echo"), 1, "never rerun");
    assert!(fault.requests().iter().all(|r| r.http_method != "GET"), "2026-07-28 streams are not resumed");
}

#[tokio::test]
async fn a_modern_stream_closed_after_the_call_arrived_is_unknown_and_not_rerun() {
    // An event stream that ends after its priming event (which carries an id a 2025 client would resume from).
    let resume = Resume { retry_ms: 10, breaks: 1, with_id: true };
    assert_lost_after_delivery(Script { answer: Answer::Sse, resume: Some(resume), ..modern_script() }).await;
}

#[tokio::test]
async fn a_modern_connection_dropped_after_the_call_arrived_is_unknown_and_not_rerun() {
    assert_lost_after_delivery(Script { drop_after_call: true, ..modern_script() }).await;
}

#[tokio::test]
async fn a_modern_backend_that_refuses_connections_is_not_delivered() {
    let fault = FaultBackend::start(modern_script()).await;
    let gateway = gateway_for(&fault).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(text(&agent.call_tool("fault__echo", json!({"text": "up"})).await), "up");
    drop(fault); // the listener closes: connections are refused from now on
    let refused = agent.call_tool("fault__echo", json!({"text": "down"})).await;
    assert_eq!(outcome(&refused), Some("not_delivered"), "{refused}");
    let retried = agent.call_tool("fault__echo", json!({"text": "down"})).await;
    assert_eq!(outcome(&retried), Some("not_delivered"), "the claim was released, the retry tried again: {retried}");
}

#[tokio::test]
async fn cancelling_a_call_closes_its_stream_to_the_modern_backend() {
    let fault = FaultBackend::start(Script { stall: true, ..modern_script() }).await;
    let gateway = gateway_for(&fault).await;
    let agent = Arc::new(Agent::connected(gateway.mcp()).await);
    let call = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": {"text": "slow"}}});
    let running = {
        let (agent, call) = (Arc::clone(&agent), call.clone());
        tokio::spawn(async move { agent.send(&call).await })
    };
    eventually("the call reaches the backend", || async { fault.executions("echo") == 1 }).await;
    assert_eq!(fault.abandoned_calls(), 0);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}});
    assert_eq!(agent.send(&cancel).await.status, StatusCode::ACCEPTED);
    let answered = tokio::time::timeout(TIMEOUT, running).await.expect("the call ends").unwrap().body.unwrap();
    assert!(text(&answered).contains("cancelled"), "{answered}");
    eventually("the backend sees its response stream closed", || async { fault.abandoned_calls() == 1 }).await;
    assert!(sent(&fault, "notifications/cancelled").is_empty(), "closing the stream is the whole signal");
    let again = agent.send(&call).await.body.unwrap();
    assert_eq!(outcome(&again), Some("unknown"), "recorded, not repeated: {again}");
    assert_eq!(fault.executions("echo"), 1);
}

#[tokio::test]
async fn a_tool_whose_header_arguments_changed_is_listed_again_and_called_once() {
    let plain =
        json!({"name": "route", "inputSchema": {"type": "object", "properties": {"region": {"type": "string"}}}});
    let fault = FaultBackend::start(Script { tools: vec![plain], ..modern_script() }).await;
    let gateway = gateway_for(&fault).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    fault.update(|script| script.tools = vec![route_tool()]);
    let routed = agent.call_tool("fault__route", json!({"region": "us", "text": "again"})).await;
    assert_eq!(text(&routed), "again", "{routed}");
    let calls = sent(&fault, "tools/call");
    assert_eq!(calls.len(), 2, "refused with -32020, then sent again after the tool list was fetched");
    assert_eq!((calls[0].header("mcp-param-region"), calls[1].header("mcp-param-region")), (None, Some("us")));
    assert_eq!(fault.executions("route"), 1);
}

#[tokio::test]
async fn resource_subscriptions_and_list_changes_travel_on_listen_streams() {
    let script = Script {
        capabilities: json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}),
        announce_tools_changed: true,
        ..modern_script()
    };
    let fault = FaultBackend::start(script).await;
    let gateway = gateway_for(&fault).await;
    // The gateway's own stream for list changes: its announcement makes the catalog list the tools again.
    eventually("the catalog is refreshed after the announced change", || async {
        sent(&fault, "tools/list").len() >= 2
    })
    .await;
    let listen = &sent(&fault, "subscriptions/listen")[0];
    assert_eq!(listen.body.as_ref().unwrap()["params"]["notifications"], json!({"toolsListChanged": true}));

    let mut agent = Agent::connected(gateway.mcp()).await;
    let mut stream = agent.open_stream().await;
    assert_eq!(stream.status(), StatusCode::OK);
    let subscribed = agent.request("resources/subscribe", json!({"uri": "fault://watched"})).await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let seen = read_until(&mut stream, "notifications/resources/updated", TIMEOUT).await.expect("the update");
    assert!(seen.contains("fault://watched"), "{seen}");
    assert!(!seen.contains("subscriptions/acknowledged"), "the acknowledgement is the gateway's: {seen}");
    assert!(sent(&fault, "resources/subscribe").is_empty(), "2026-07-28 has no resources/subscribe");
    let resource_listen = sent(&fault, "subscriptions/listen")
        .into_iter()
        .find(|r| r.body.as_ref().unwrap().pointer("/params/notifications/resourceSubscriptions").is_some())
        .expect("a listen stream for the agent's subscription");
    assert_eq!(
        resource_listen.body.unwrap()["params"]["notifications"]["resourceSubscriptions"],
        json!(["fault://watched"])
    );
}

fn client_target(fault: &FaultBackend) -> BackendTarget {
    BackendEndpoint::new(fault.url().parse().unwrap(), TIMEOUT).into()
}

async fn echo(client: &McpBackendClient, target: &BackendTarget, agent: &str) -> Result<Value, McpError> {
    let call = json!({"name": "echo", "arguments": {"text": "v"}});
    on(client, &SlotKey::agent(agent, "fault"), target).request("tools/call", call).await
}

#[tokio::test]
async fn an_unsupported_version_naming_2025_versions_falls_back_to_the_handshake() {
    let script = Script { eras: Eras::Both, modern_versions: vec!["2099-01-01".into()], ..modern_script() };
    let fault = FaultBackend::start(script).await;
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    echo(&client, &client_target(&fault), "a").await.expect("served in the 2025 era");
    let probe = &fault.requests()[0];
    assert_eq!(probe.rpc_method.as_deref(), Some("server/discover"));
    assert_eq!(sent(&fault, "initialize").len(), 1);
    assert_eq!(sent(&fault, "tools/call")[0].header("mcp-protocol-version"), Some("2025-11-25"));
}

#[tokio::test]
async fn a_version_refused_later_is_negotiated_again_and_the_call_sent_once_more() {
    let fault = FaultBackend::start(Script { eras: Eras::Both, ..modern_script() }).await;
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let target = client_target(&fault);
    echo(&client, &target, "a").await.expect("modern");
    // The backend stops serving 2026-07-28: the next call is refused with -32022 naming the 2025 versions.
    fault.update(|script| script.modern_versions = vec!["2099-01-01".into()]);
    echo(&client, &target, "a").await.expect("retried once, in the 2025 era");
    let calls = sent(&fault, "tools/call");
    let versions: Vec<_> = calls.iter().map(|r| r.header("mcp-protocol-version").unwrap().to_owned()).collect();
    assert_eq!(versions, ["2026-07-28", "2026-07-28", "2025-11-25"]);
    assert_eq!(fault.executions("echo"), 2, "the refused request did not run");
    assert_eq!(sent(&fault, "server/discover").len(), 2, "probed again");
}

#[tokio::test]
async fn a_modern_only_backend_with_no_common_version_is_refused_naming_them() {
    let script = Script { modern_versions: vec!["2099-01-01".into()], ..modern_script() };
    let fault = FaultBackend::start(script).await;
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let error = echo(&client, &client_target(&fault), "a").await.expect_err("nothing in common");
    assert!(error.proves_not_delivered(), "{error:?}");
    assert!(error.to_string().contains("2099-01-01"), "{error}");
    assert!(sent(&fault, "tools/call").is_empty());
}

#[tokio::test]
async fn era_legacy_never_probes_and_era_modern_refuses_a_2025_backend() {
    let fault = FaultBackend::start(Script::default()).await;
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let legacy: BackendTarget =
        BackendEndpoint::new(fault.url().parse().unwrap(), TIMEOUT).with_era(Era::Legacy).into();
    echo(&client, &legacy, "a").await.expect("2025 era");
    assert!(sent(&fault, "server/discover").is_empty());
    let modern: BackendTarget =
        BackendEndpoint::new(fault.url().parse().unwrap(), TIMEOUT).with_era(Era::Modern).into();
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let error = echo(&client, &modern, "a").await.expect_err("not a modern backend");
    assert!(error.proves_not_delivered() && error.to_string().contains("era = \"modern\""), "{error}");
}

/// The Python SDK's server over stdio (`python_server.py --stdio`), as the gateway's launcher starts it.
fn python_stdio(era: Era) -> Option<BackendTarget> {
    let python = python_interpreter()?;
    let script = interop_dir().join("python_server.py").display().to_string();
    let backend = StdioBackend {
        name: "py".into(),
        command: StdioCommand { program: python, args: vec![script, "--stdio".into()], env: Vec::new(), cwd: None },
        sharing: Sharing::PerAgent,
        idle_timeout: Duration::from_secs(60),
        max_processes: 4,
        era,
    };
    Some(BackendTarget::stdio(Arc::new(Launcher::new(backend, StdioOptions::default())), Duration::from_secs(90)))
}

#[tokio::test]
async fn a_stdio_backend_of_the_2026_era_is_probed_and_spoken_to_without_a_handshake() {
    let (Some(auto), Some(legacy)) = (python_stdio(Era::Auto), python_stdio(Era::Legacy)) else { return };
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let slot = SlotKey::agent("agent", "py");
    let session = on(&client, &slot, &auto).session().await.expect("the process starts");
    assert_eq!(session.version(), "2026-07-28", "the probe found a modern server");
    let echoed = on(&client, &slot, &auto)
        .request("tools/call", json!({"name": "echo", "arguments": {"text": "piped"}}))
        .await
        .expect("a modern call over stdio");
    assert_eq!(echoed["content"][0]["text"], "piped");
    let error = on(&client, &slot, &auto)
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .await
        .expect_err("an unknown tool");
    assert!(matches!(error, McpError::Rpc { code: -32602, .. }), "{error:?}");

    // The same server told to speak 2025's era does the handshake.
    let other = McpBackendClient::new(ClientConfig::default()).unwrap();
    let session = on(&other, &slot, &legacy).session().await.expect("the process starts");
    assert_eq!(session.version(), "2025-11-25");
}

/// A legacy agent uses the conformance fixture, serving the 2026-07-28 era alone or both eras, through the
/// gateway; the fixture refuses any request whose headers do not match its body.
async fn exercise_fixture(era: &'static str) {
    let Some(fixture) = InteropServer::fixture(era) else { return };
    let gateway = TestGateway::start("", &backend_toml("fixture", &fixture.url(), "prefix = \"\"")).await;
    gateway.wait_for_tool("test_simple_text").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let tools = agent.tool_names().await;
    if !tools.contains(&"test_simple_text".to_owned()) {
        // Say why: the backend's discovery state as the gateway reports it (a CI run once saw no tools here).
        let ready = reqwest::get(format!("{}/readyz", gateway.base)).await.unwrap().text().await.unwrap();
        panic!("no test_simple_text in {tools:?}\nreadyz: {ready}\n{}", fixture.logs());
    }
    let simple = agent.call_tool("test_simple_text", json!({})).await;
    assert_eq!(text(&simple), "This is a simple text response for testing.", "{simple}\n{}", fixture.logs());
    let progress = agent
        .request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "agent-token"}}),
        )
        .await;
    assert_eq!(text(&progress), "Tool with progress executed successfully", "{progress}");
    let read = agent.request("resources/read", json!({"uri": "test://static-text"})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "This is the content of the static text resource.");
    let missing = agent.request("resources/read", json!({"uri": "test://template/x/nope"})).await;
    assert_eq!(missing["error"]["code"], -32602, "the 2026-07-28 code for a missing resource: {missing}");
    let prompt = agent
        .request("prompts/get", json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}))
        .await;
    assert!(prompt["result"]["messages"][0]["content"]["text"].as_str().unwrap().contains("arg1='a'"), "{prompt}");
    let completion = agent
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                "argument": {"name": "arg1", "value": "pa"}}),
        )
        .await;
    assert_eq!(completion["result"]["completion"]["values"], json!(["paris", "park", "party"]), "{completion}");

    let mut stream = agent.open_stream().await;
    agent.request("resources/subscribe", json!({"uri": "test://watched-resource"})).await;
    let seen = read_until(&mut stream, "notifications/resources/updated", TIMEOUT).await;
    assert!(seen.is_some_and(|seen| seen.contains("test://watched-resource")), "{}", fixture.logs());
    assert!(!fixture.logs().contains("opened (protocol"), "no 2025-era session was opened:\n{}", fixture.logs());
}

#[tokio::test]
async fn the_fixture_serving_only_the_2026_era_serves_a_legacy_agent() {
    exercise_fixture("modern").await;
}

#[tokio::test]
async fn the_fixture_serving_both_eras_is_spoken_to_in_the_2026_era() {
    exercise_fixture("dual").await;
}

/// `fault_stdio.py` in `mode`, its era probed.
fn fault_stdio(mode: &str) -> BackendTarget {
    let backend = StdioBackend {
        name: "fault".into(),
        command: StdioCommand {
            program: crate::stdio::python(),
            args: vec![crate::stdio::FAULT_SCRIPT.into(), mode.into()],
            env: Vec::new(),
            cwd: None,
        },
        sharing: Sharing::PerAgent,
        idle_timeout: Duration::from_secs(60),
        max_processes: 4,
        era: Era::Auto,
    };
    BackendTarget::stdio(Arc::new(Launcher::new(backend, StdioOptions::default())), TIMEOUT)
}

#[tokio::test]
async fn a_stdio_backend_that_refuses_the_probe_does_the_handshake() {
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let target = fault_stdio("normal");
    let slot = SlotKey::agent("agent", "fault");
    assert_eq!(on(&client, &slot, &target).session().await.expect("started").version(), "2025-11-25");
    let echoed =
        on(&client, &slot, &target).request("tools/call", json!({"name": "echo", "arguments": {"text": "e"}})).await;
    assert_eq!(echoed.expect("a 2025 call")["content"][0]["text"], "e");
}

#[tokio::test]
async fn a_modern_stdio_backend_gets_the_meta_and_listens_for_changes_and_subscriptions() {
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let mut changes = client.subscribe_list_changed();
    let mut messages = client.subscribe_session_messages();
    let target = fault_stdio("modern");
    let slot = SlotKey::agent("agent-7", "fault");
    assert_eq!(on(&client, &slot, &target).session().await.expect("started").version(), "2026-07-28");
    let change = tokio::time::timeout(TIMEOUT, changes.recv()).await.expect("announced").expect("a change");
    assert_eq!((&*change.backend, change.method.as_str()), ("fault", "notifications/tools/list_changed"));

    assert_eq!(
        on(&client, &slot, &target).request("logging/setLevel", json!({"level": "info"})).await.unwrap(),
        json!({})
    );
    let relay = Relay::new(json!({"roots": {}}), None);
    let call = json!({"name": "meta", "arguments": {}});
    let answered = on(&client, &slot, &target).request_relayed("tools/call", call, &relay).await.expect("answered");
    let meta: Value = serde_json::from_str(text(&answered)).unwrap();
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({"roots": {}}), "the agent's capabilities");
    assert_eq!(meta["io.modelcontextprotocol/logLevel"], "info", "setLevel became the request's log level");

    let subscribed = on(&client, &slot, &target).request("resources/subscribe", json!({"uri": "fault://a"})).await;
    assert_eq!(subscribed.expect("answered by the gateway"), json!({}));
    let message = tokio::time::timeout(TIMEOUT, messages.recv()).await.expect("an update").expect("a message");
    assert_eq!(message.holder, SessionHolder::agent("agent-7"));
    let RelayMessage::Notification(update) = message.message else { panic!("{:?}", message.message) };
    assert_eq!(update["method"], "notifications/resources/updated", "{update}");
    assert_eq!(update["params"]["uri"], "fault://a");
}

#[tokio::test]
async fn a_retired_backend_is_asked_its_era_again() {
    let fault = FaultBackend::start(Script::default()).await;
    let client = McpBackendClient::new(ClientConfig::default()).unwrap();
    let target = client_target(&fault);
    echo(&client, &target, "a").await.expect("2025 era");
    echo(&client, &target, "b").await.expect("2025 era");
    assert_eq!(sent(&fault, "server/discover").len(), 1, "remembered");
    // A reload replaced the backend: it may be another server now.
    client.retire_backend("fault");
    echo(&client, &target, "a").await.expect("2025 era");
    assert_eq!(sent(&fault, "server/discover").len(), 2, "probed again after the backend was retired");
}
