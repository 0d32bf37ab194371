//! Everything MCP carries besides tools, through the gateway to a real backend
//! (`@modelcontextprotocol/server-everything`) next to the demo server: prompts, resources and templates
//! (aggregated, routed by URI and template), completions, logging, and progress relayed while a tool runs.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::support::gateway::{Agent, TestGateway, backend_toml};
use crate::support::interop::InteropServer;

async fn gateway(everything: &InteropServer) -> (TestGateway, tokio::task::JoinHandle<()>) {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let backends = backend_toml("demo", &format!("http://{address}/mcp"), "")
        + &backend_toml("everything", &everything.url(), "timeout = \"20s\"");
    (TestGateway::start("", &backends).await, demo)
}

fn result(reply: &Value) -> &Value {
    assert!(reply.get("error").is_none(), "unexpected error: {reply}");
    &reply["result"]
}

#[tokio::test]
async fn prompts_are_listed_with_prefixes_and_routed_with_arguments() {
    let Some(everything) = InteropServer::everything() else { return };
    let (gateway, _demo) = gateway(&everything).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let listed = agent.request("prompts/list", json!({})).await;
    let names: Vec<&str> =
        result(&listed)["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"everything__args-prompt"), "{names:?}");
    let got = agent
        .request(
            "prompts/get",
            json!({"name": "everything__args-prompt", "arguments": {"city": "Lyon", "state": "Rhône"}}),
        )
        .await;
    let text = result(&got)["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("Lyon"), "the arguments reached the backend: {got}");
    let unknown = agent.request("prompts/get", json!({"name": "everything__nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602);
}

#[tokio::test]
async fn resources_are_aggregated_and_read_by_uri_or_template() {
    let Some(everything) = InteropServer::everything() else { return };
    let (gateway, _demo) = gateway(&everything).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let mut uris = Vec::new();
    let mut cursor = Value::Null;
    for _ in 0..50 {
        let params = if cursor.is_null() { json!({}) } else { json!({"cursor": cursor}) };
        let page = agent.request("resources/list", params).await;
        uris.extend(
            result(&page)["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap().to_owned()),
        );
        cursor = result(&page).get("nextCursor").cloned().unwrap_or(Value::Null);
        if cursor.is_null() {
            break;
        }
    }
    assert!(cursor.is_null(), "pagination ends");
    let listed = uris.iter().find(|uri| uri.starts_with("demo://resource/static/")).expect("a static document").clone();
    let read = agent.request("resources/read", json!({"uri": listed})).await;
    assert_eq!(result(&read)["contents"][0]["uri"], listed.as_str());

    let templates = agent.request("resources/templates/list", json!({})).await;
    let template_uris: Vec<&str> = result(&templates)["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert!(template_uris.iter().any(|t| t.contains("{resourceId}")), "{template_uris:?}");
    let dynamic = agent.request("resources/read", json!({"uri": "demo://resource/dynamic/text/7"})).await;
    assert_eq!(result(&dynamic)["contents"][0]["uri"], "demo://resource/dynamic/text/7", "routed by its template");

    let bad_cursor = agent.request("resources/list", json!({"cursor": "garbage"})).await;
    assert_eq!(bad_cursor["error"]["code"], -32602);
}

#[tokio::test]
async fn completions_follow_their_prompt_and_logging_fans_out() {
    let Some(everything) = InteropServer::everything() else { return };
    let (gateway, _demo) = gateway(&everything).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let completion = agent
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "everything__completable-prompt"},
                   "argument": {"name": "department", "value": "E"}}),
        )
        .await;
    let values = result(&completion)["completion"]["values"].as_array().unwrap().clone();
    assert!(!values.is_empty(), "{completion}");
    let level = agent.request("logging/setLevel", json!({"level": "debug"})).await;
    assert_eq!(result(&level), &json!({}));
}

#[tokio::test]
async fn progress_from_a_real_backend_streams_before_the_result() {
    let Some(everything) = InteropServer::everything() else { return };
    let (gateway, _demo) = gateway(&everything).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
        "_meta": {"progressToken": "p-1"}}});
    let reply = agent.send(&call).await;
    assert_eq!(reply.headers["content-type"], "text/event-stream", "{}", reply.raw);
    let progress = reply.raw.find("notifications/progress").expect("progress was relayed");
    let answer = reply.raw.find("\"id\":3").expect("the result");
    assert!(progress < answer, "progress arrives before the result");
    assert!(reply.raw.contains("\"progressToken\":\"p-1\""), "with the agent's own token");
}

#[tokio::test]
async fn a_resource_prefix_separates_two_backends_with_the_same_uris() {
    let (Some(first), Some(second)) = (InteropServer::everything(), InteropServer::everything()) else { return };
    let backends = backend_toml("one", &first.url(), "timeout = \"20s\"")
        + &backend_toml("two", &second.url(), "timeout = \"20s\"\nresource_prefix = \"two+\"");
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let templates = agent.request("resources/templates/list", json!({})).await;
    let mut all = result(&templates)["resourceTemplates"].as_array().unwrap().clone();
    let mut cursor = result(&templates).get("nextCursor").cloned();
    while let Some(next) = cursor.take() {
        let page = agent.request("resources/templates/list", json!({"cursor": next})).await;
        all.extend(result(&page)["resourceTemplates"].as_array().unwrap().iter().cloned());
        cursor = result(&page).get("nextCursor").cloned();
    }
    let uris: Vec<&str> = all.iter().map(|t| t["uriTemplate"].as_str().unwrap()).collect();
    assert!(uris.iter().any(|t| t.starts_with("two+demo://")), "{uris:?}");
    assert!(uris.iter().any(|t| t.starts_with("demo://")), "{uris:?}");

    let prefixed = agent.request("resources/read", json!({"uri": "two+demo://resource/dynamic/text/5"})).await;
    assert_eq!(result(&prefixed)["contents"][0]["uri"], "two+demo://resource/dynamic/text/5", "the prefix comes back");
    let plain = agent.request("resources/read", json!({"uri": "demo://resource/dynamic/text/5"})).await;
    assert_eq!(result(&plain)["contents"][0]["uri"], "demo://resource/dynamic/text/5");
}
