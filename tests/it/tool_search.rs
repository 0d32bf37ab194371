//! Search mode (`[catalog] mode = "search"`) through the running gateway, with the official Python SDK as the
//! agent: what `tools/list` offers on `/mcp` and `/mcp/<backend>`, what a search finds (and never finds for a
//! principal a policy refuses), `switchyard__call_tool` claimed, replayed and limited exactly as a direct call,
//! and found tools joining the session's list with `notifications/tools/list_changed`.

use serde_json::{Value, json};

use crate::agent_auth::{BOB_KEY, api_keys};
use crate::cli::{run, scratch_dir, stdout, switchyard};
use crate::real_clients::PythonAgent;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};
use crate::support::interop::python_interpreter;

const SEARCH: &str = "switchyard__search_tools";
const CALL: &str = "switchyard__call_tool";

fn tool(name: &str, description: &str, properties: Value) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": properties}})
}

/// A backend with tools an agent would look for by different words.
fn tools() -> Vec<Value> {
    vec![
        tool("echo", "Echoes the text back", json!({"text": {"type": "string"}})),
        tool(
            "create_issue",
            "Open a new issue in a GitHub repository",
            json!({"title": {"type": "string", "description": "The issue's title"}}),
        ),
        tool(
            "get_forecast",
            "Weather for the coming days",
            json!({"latitude": {"type": "number", "description": "Degrees north of the equator"},
                   "longitude": {"type": "number"}}),
        ),
        tool("delete_repo", "Delete a repository for good", json!({"repo": {"type": "string"}})),
    ]
}

async fn fault() -> FaultBackend {
    FaultBackend::start(Script { tools: tools(), ..Script::default() }).await
}

/// A gateway in search mode (with `catalog`'s extra keys) in front of `fault`, with `sections` beside it.
async fn searching(fault: &FaultBackend, catalog: &str, sections: &str) -> TestGateway {
    let sections = format!("[catalog]\nmode = \"search\"\n{catalog}\n{sections}");
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    gateway.wait_for_tool("fault__echo").await;
    gateway
}

async fn search(agent: &mut PythonAgent, query: &str) -> Vec<String> {
    let answer = agent.command(&format!("call {SEARCH} {}", json!({"query": query}))).await;
    assert_eq!(answer["isError"], false, "{answer}");
    let hits = answer["structured"]["tools"].as_array().expect("structured hits");
    for hit in hits {
        assert!(hit["inputSchema"].is_object() && hit["description"].is_string(), "{hit}");
        let name = hit["name"].as_str().expect("a name");
        assert!(answer["texts"][0].as_str().is_some_and(|text| text.contains(name)), "the text names {name}");
    }
    hits.iter().filter_map(|hit| Some(hit["name"].as_str()?.to_owned())).collect()
}

#[tokio::test]
async fn search_mode_lists_the_gateway_tools_and_the_always_ones_on_both_endpoints() {
    let Some(python) = python_interpreter() else { return };
    let fault = fault().await;
    let gateway = searching(&fault, "always = [\"fault__echo\"]\nexpand = false", "").await;
    let mut agent = PythonAgent::connect(&python, &gateway.mcp()).await;
    assert_eq!(agent.tool_names().await, [SEARCH, CALL, "fault__echo"]);
    agent.quit().await;
    let mut own = PythonAgent::connect(&python, &format!("{}/fault", gateway.mcp())).await;
    assert_eq!(own.tool_names().await, [SEARCH, CALL, "echo"], "the backend's endpoint, bare names");
    assert_eq!(search(&mut own, "weather days").await, ["get_forecast"]);
    own.quit().await;

    let overridden =
        format!("[catalog]\nmode = \"search\"\n{}", backend_toml("fault", &fault.url(), "catalog_mode = \"full\""));
    let gateway = TestGateway::start_with("", "", &overridden).await;
    gateway.wait_for_tool("fault__echo").await;
    let mut full = PythonAgent::connect(&python, &format!("{}/fault", gateway.mcp())).await;
    assert_eq!(full.tool_names().await, ["echo", "create_issue", "get_forecast", "delete_repo"]);
    let answer = full.ask(&format!("call {SEARCH} {}", json!({"query": "x"}))).await;
    assert!(answer["error"].as_str().is_some_and(|error| error.contains("unknown tool")), "full mode: {answer}");
    full.quit().await;
}

#[tokio::test]
async fn a_search_finds_tools_by_description_and_parameter_words_and_they_are_callable() {
    let Some(python) = python_interpreter() else { return };
    let fault = fault().await;
    let gateway = searching(&fault, "expand = false", "").await;
    let mut agent = PythonAgent::connect(&python, &gateway.mcp()).await;
    assert_eq!(search(&mut agent, "open an issue on github").await[0], "fault__create_issue", "description words");
    assert_eq!(search(&mut agent, "degrees north").await, ["fault__get_forecast"], "parameter description");
    assert_eq!(search(&mut agent, "latitude").await, ["fault__get_forecast"], "parameter name");
    assert!(search(&mut agent, "kubernetes").await.is_empty());
    let bad = agent.command(&format!("call {SEARCH} {}", json!({"query": "x", "limit": 50}))).await;
    assert_eq!(bad["isError"], true, "a limit past 20 is the model's to fix: {bad}");

    agent.call_text(CALL, json!({"name": "fault__echo", "arguments": {"text": "via"}})).await;
    agent.call_text("fault__echo", json!({"text": "direct"})).await;
    assert_eq!(fault.executions("echo"), 2, "through call_tool and by its name");
    agent.quit().await;
}

#[tokio::test]
async fn a_principal_never_finds_or_calls_a_tool_its_policy_denies() {
    let Some(python) = python_interpreter() else { return };
    let fault = fault().await;
    let policy =
        format!("{}[[policies]]\nprincipals = [\"bob\"]\nallow = [\"*\"]\ndeny = [\"fault__delete_*\"]\n", api_keys());
    let gateway = searching(&fault, "", &policy).await;
    let header = format!("Authorization=Bearer {BOB_KEY}");
    let mut bob = PythonAgent::connect_with(&python, &gateway.mcp(), &["--header", &header]).await;
    let found = search(&mut bob, "delete a repository").await;
    assert!(!found.contains(&"fault__delete_repo".to_owned()), "{found:?}");
    let denied = bob.ask(&format!("call {CALL} {}", json!({"name": "fault__delete_repo", "arguments": {}}))).await;
    let unknown = bob.ask(&format!("call {CALL} {}", json!({"name": "fault__no_such_tool", "arguments": {}}))).await;
    let error = |answer: &Value| answer["error"].as_str().unwrap_or_default().replace("delete_repo", "no_such_tool");
    assert!(error(&denied).contains("unknown tool `fault__no_such_tool`"), "{denied}");
    assert_eq!(error(&denied), error(&unknown), "refused exactly like a tool that does not exist");
    assert_eq!(fault.executions("delete_repo"), 0);
    bob.quit().await;
}

#[tokio::test]
async fn call_tool_is_claimed_replayed_and_limited_exactly_as_a_direct_call() {
    let Some(python) = python_interpreter() else { return };
    let fault = fault().await;
    let limit = "[[limits]]\nprincipals = [\"*\"]\ntools = [\"fault__get_forecast\"]\nquota = 2\nperiod = \"1d\"\n";
    let gateway = searching(&fault, "", limit).await;
    let mut agent = PythonAgent::connect(&python, &gateway.mcp()).await;
    let keyed = |key: &str, text: &str| {
        json!({"arguments": {"name": "fault__echo", "arguments": {"text": text}},
               "_meta": {"switchyard/idempotency-key": key}})
    };
    let first = agent.command(&format!("callmeta {CALL} {}", keyed("k-1", "once"))).await;
    assert_eq!(first["isError"], false, "{first}");
    let again = agent.command(&format!("callmeta {CALL} {}", keyed("k-1", "once"))).await;
    assert_eq!(again["meta"]["switchyard/replayed"], true, "answered from the claim: {again}");
    let direct = json!({"arguments": {"text": "once"}, "_meta": {"switchyard/idempotency-key": "k-1"}});
    let direct = agent.command(&format!("callmeta fault__echo {direct}")).await;
    assert_eq!(direct["meta"]["switchyard/replayed"], true, "the direct call is the same call: {direct}");
    assert_eq!(fault.executions("echo"), 1);
    let other = agent.ask(&format!("callmeta {CALL} {}", keyed("k-1", "other"))).await;
    assert!(other["error"].as_str().is_some_and(|error| error.contains("with other arguments")), "{other}");

    let forecast = json!({"name": "fault__get_forecast", "arguments": {"latitude": 1}});
    agent.call_text(CALL, forecast.clone()).await;
    agent.call_text("fault__get_forecast", json!({"latitude": 2})).await;
    let refused = agent.command(&format!("call {CALL} {forecast}")).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["meta"]["switchyard/outcome"], "not_delivered", "{refused}");
    assert!(refused["texts"][0].as_str().is_some_and(|text| text.contains("limit `limits[0]`")), "{refused}");
    assert_eq!(fault.executions("get_forecast"), 2, "direct and inner calls count against one quota");
    agent.quit().await;
}

#[tokio::test]
async fn found_tools_join_the_sessions_list_with_list_changed_newest_kept() {
    let Some(python) = python_interpreter() else { return };
    let fault = fault().await;
    let gateway = searching(&fault, "expand_max = 2", "").await;
    let mut agent = PythonAgent::connect(&python, &gateway.mcp()).await;
    let mut other = PythonAgent::connect(&python, &gateway.mcp()).await;
    assert_eq!(search(&mut agent, "weather").await, ["fault__get_forecast"]);
    eventually_told(&mut agent, 1).await;
    assert_eq!(agent.tool_names().await, [SEARCH, CALL, "fault__get_forecast"]);
    search(&mut agent, "github issue").await;
    search(&mut agent, "echo text").await;
    eventually_told(&mut agent, 3).await;
    assert_eq!(agent.tool_names().await, [SEARCH, CALL, "fault__create_issue", "fault__echo"], "the oldest left");
    assert_eq!(other.tool_names().await, [SEARCH, CALL], "another session's list is its own");
    assert_eq!(other.command("changes").await["toolsListChanged"], 0);

    let metrics =
        reqwest::get(format!("{}/metrics", gateway.base)).await.expect("metrics").text().await.expect("a body");
    assert!(metrics.contains("switchyard_tool_searches_total{result=\"found\"} 3"), "{metrics}");
    assert!(metrics.contains("switchyard_tools_list_bytes_count"), "{metrics}");
    agent.quit().await;
    other.quit().await;
}

/// Waits until the agent's session has received `count` `notifications/tools/list_changed`.
async fn eventually_told(agent: &mut PythonAgent, count: u64) {
    for _ in 0..200 {
        if agent.command("changes").await["toolsListChanged"].as_u64() >= Some(count) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the agent was not told {count} times that its tools changed");
}

#[tokio::test]
async fn full_mode_has_no_gateway_tools() {
    let fault = fault().await;
    let gateway = TestGateway::start("", &backend_toml("fault", &fault.url(), "")).await;
    gateway.wait_for_tool("fault__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let listed = agent.request("tools/list", json!({})).await;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["fault__echo", "fault__create_issue", "fault__get_forecast", "fault__delete_repo"]);
    let called = agent.call_tool(SEARCH, json!({"query": "echo"})).await;
    assert!(called["error"]["message"].as_str().is_some_and(|text| text.contains("unknown tool")), "{called}");
}

#[tokio::test]
async fn the_command_line_ranks_as_the_gateway_does_with_a_principals_policies() {
    let demo = crate::real_clients::Demo::start().await;
    let dir = scratch_dir("tool-search");
    let config = dir.join("switchyard.toml");
    let text = format!(
        "[server]\ndata_dir = {:?}\n{}[[policies]]\nprincipals = [\"bob\"]\nallow = [\"*\"]\ndeny = [\"demo__add\"]\n{}",
        dir.join("data").display().to_string(),
        api_keys(),
        backend_toml("demo", &demo.url(), "")
    );
    std::fs::write(&config, text).expect("write the configuration");
    let search = |principal: Option<&str>| {
        let mut command = switchyard();
        command.args(["tools", "search", "sum of two numbers", "--config"]).arg(&config);
        command.args(principal.map(|name| ["--principal", name]).into_iter().flatten());
        command
    };
    let everyone = run(&mut search(None)).await;
    assert!(everyone.status.success(), "{everyone:?}");
    let first = stdout(&everyone).lines().nth(1).map(str::to_owned).unwrap_or_default();
    assert!(first.starts_with("1") && first.contains("demo__add"), "the best match first:\n{}", stdout(&everyone));
    let bob = run(&mut search(Some("bob"))).await;
    assert!(!stdout(&bob).contains("demo__add"), "bob's policy denies it:\n{}", stdout(&bob));
}
