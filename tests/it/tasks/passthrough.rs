//! Passthrough of a backend's own tasks (docs/tasks.md, *Passthrough*), in front of the reference
//! `server-everything`, whose `simulate-research-query` tool is a task of the TypeScript SDK's own (four one-second
//! stages): the task-augmented call is relayed, the agent sees only the gateway's sealed id, `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel` reach the backend's task on the agent's backend session, its
//! status notifications come back under the sealed id, another principal's or a forged id is an unknown task,
//! and the creating call is claimed once (a retry with its idempotency key gets the same task).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::gateway::read_until;
use crate::modern_front::messages;
use crate::support::gateway::{Agent, TestGateway, backend_toml};
use crate::support::interop::InteropServer;

const RESEARCH: &str = "everything__simulate-research-query";
const RELATED: &str = "io.modelcontextprotocol/related-task";

async fn gateway(everything: &InteropServer, extra: &str) -> TestGateway {
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("everything", &everything.url(), extra)).await;
    gateway.wait_for_tool(RESEARCH).await;
    gateway
}

/// Asks for the research as a task; returns the JSON-RPC answer.
async fn research(agent: &Agent, topic: &str, idempotency_key: &str) -> Value {
    let params = json!({"name": RESEARCH, "arguments": {"topic": topic}, "task": {"ttl": 60_000}});
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let reply = agent.post_raw(call.to_string().into_bytes(), &[("idempotency-key", idempotency_key)]).await;
    reply.body.unwrap_or_else(|| panic!("an answer: {}", reply.raw))
}

/// The backend's own id inside a sealed id (sealed ids are signed, not encrypted).
pub(super) fn backend_id(sealed: &str) -> String {
    let payload = sealed.strip_prefix("syt1.").and_then(|rest| rest.split('.').next()).expect("a sealed id");
    let bound: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON");
    bound["t"].as_str().expect("the backend's id").to_owned()
}

pub(super) fn refused_as_unknown(answer: &Value) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

/// With `tasks = "gateway"` (the default), a tool the backend itself runs as a task (`taskSupport: "required"`,
/// tasks declared) passes through: created, polled, listed and fetched under the sealed id, notified on the
/// agent's standalone stream, and nobody else's; a tool of the same backend without `taskSupport` runs as a
/// gateway task.
#[tokio::test]
async fn a_backends_own_task_passes_through_under_a_sealed_id() {
    let Some(everything) = InteropServer::everything() else { return };
    let gateway = gateway(&everything, "").await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let listed = alice.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let tool = tools.iter().find(|tool| tool["name"] == RESEARCH).expect("the research tool");
    assert_eq!(tool["execution"]["taskSupport"], "required", "kept as the backend says: {tool}");
    let mut stream = alice.open_stream().await;

    let created = research(&alice, "rust", "research-1").await;
    let task = &created["result"]["task"];
    let id = task["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let own = backend_id(&id);
    assert!(id.starts_with("syt1.") && !created.to_string().contains(&format!("\"{own}\"")), "{created}");
    assert_eq!(task["status"], "working", "{created}");

    let got = alice.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!((&got["result"]["taskId"], got["result"]["status"].as_str()), (&json!(id), Some("working")), "{got}");
    let listed = alice.request("tasks/list", json!({})).await;
    let ids: Vec<&Value> = listed["result"]["tasks"].as_array().expect("tasks").iter().map(|t| &t["taskId"]).collect();
    assert!(ids.contains(&&json!(id)), "the backend's task is listed under its sealed id: {listed}");

    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    refused_as_unknown(&bob.request("tasks/get", json!({"taskId": id})).await);
    refused_as_unknown(&bob.request("tasks/cancel", json!({"taskId": id})).await);
    let forged =
        format!("syt1.{}", URL_SAFE_NO_PAD.encode(json!({"p": "bob", "b": "everything", "t": own}).to_string()));
    refused_as_unknown(&bob.request("tasks/result", json!({"taskId": format!("{forged}.AAAA")})).await);
    let bobs = bob.request("tasks/list", json!({})).await;
    assert!(!bobs.to_string().contains(&id), "another principal's listing: {bobs}");

    let result = alice.request("tasks/result", json!({"taskId": id})).await;
    let text = result["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a result: {result}"));
    assert!(text.contains("Research Report: rust"), "{text}");
    assert!(!result.to_string().contains(&format!("\"{own}\"")), "the backend's id never shows: {result}");
    if let Some(related) = result["result"]["_meta"].get(RELATED) {
        assert_eq!(related["taskId"], json!(id), "{result}");
    }
    let done = alice.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let update = alice.request("tasks/update", json!({"taskId": id, "inputResponses": {}})).await;
    assert_eq!(update["error"]["code"], -32601, "a 2026-07-28 method: {update}");

    let params = json!({"name": "everything__echo", "arguments": {"message": "hi"}, "task": {}});
    let plain = alice.request("tools/call", params).await;
    let gateway_id = plain["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {plain}"));
    assert!(!gateway_id.starts_with("syt1."), "a tool without taskSupport runs as the gateway's task: {plain}");
    let echoed = alice.request("tasks/result", json!({"taskId": gateway_id})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "Echo: hi", "{echoed}");

    let told = read_until(&mut stream, "\"completed\"", Duration::from_secs(10)).await.expect("status notifications");
    let notes: Vec<Value> =
        messages(&told).into_iter().filter(|m| m["method"] == "notifications/tasks/status").collect();
    assert!(!notes.is_empty(), "{told}");
    assert!(notes.iter().all(|note| note["params"]["taskId"] == json!(id)), "sealed in every status: {notes:?}");
}

/// With `tasks = "passthrough"`: `tasks/cancel` reaches the backend (whose own `tasks/get` then says
/// `cancelled`), and a retry of the creating call with its idempotency key is answered from its claim with the
/// same task, never a second one.
#[tokio::test]
async fn a_passthrough_task_is_cancelled_at_the_backend_and_created_once() {
    let Some(everything) = InteropServer::everything() else { return };
    let gateway = gateway(&everything, "tasks = \"passthrough\"").await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let created = research(&alice, "cancelled research", "research-2").await;
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let again = research(&alice, "cancelled research", "research-2").await;
    assert_eq!(again["result"]["task"]["taskId"], json!(id), "the claim answers the retry: {again}");
    let listed = alice.request("tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"].as_array().map(Vec::len), Some(1), "one backend task: {listed}");

    let cancelled = alice.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!((&cancelled["result"]["taskId"], &cancelled["result"]["status"]), (&json!(id), &json!("cancelled")));
    let got = alice.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "cancelled", "the backend's own task says so: {got}");
    let twice = alice.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(twice["error"]["code"], -32602, "the backend refuses a terminal task's cancel: {twice}");
}
