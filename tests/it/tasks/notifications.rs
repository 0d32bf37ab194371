//! Task status notifications through the gateway. 2026-07-28 (the tasks extension): a `subscriptions/listen`
//! stream that opted into `taskIds` is told each status the gateway writes for those tasks of its principal —
//! `notifications/tasks` with the `DetailedTask`, tagged with the subscription — and nothing for another
//! principal's task. 2025-11-25: the session that created a task hears `notifications/tasks/status` (the `Task`)
//! on its standalone stream.

use std::time::Duration;

use serde_json::{Value, json};

use super::{EXTENSION, TOOL, create};
use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::gateway::read_until;
use crate::modern_front::{ModernAgent, messages};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, SESSION, TestGateway, backend_toml};

const SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

/// The `notifications/tasks` messages of a stream's text.
fn task_notes(raw: &str) -> Vec<Value> {
    messages(raw).into_iter().filter(|message| message["method"] == "notifications/tasks").collect()
}

#[tokio::test]
async fn a_listen_stream_hears_its_principals_tasks_change_and_nothing_of_others() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(2)), ..Script::default() }).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &backend.url(), "")).await;
    gateway.wait_for_tool(TOOL).await;
    let alice = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let bob = ModernAgent::as_principal(gateway.mcp(), BOB_KEY);
    let mut params = json!({"name": TOOL, "arguments": {"text": "watched"}});
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}});
    let created = alice.send_with(json!(1), "tools/call", params, |_| {}).await.body.expect("an answer");
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();

    let mut mine = alice.listen("mine", json!({"taskIds": [id]})).await;
    let mut theirs = bob.listen("theirs", json!({"taskIds": [id]})).await;
    let acked = read_until(&mut theirs, "acknowledged", Duration::from_secs(5)).await.expect("an acknowledgement");
    assert_eq!(messages(&acked)[0]["params"]["notifications"], json!({"taskIds": [id]}), "acknowledged as given");
    let told = read_until(&mut mine, "notifications/tasks\"", Duration::from_secs(10)).await.expect("a status");
    let note = &task_notes(&told)[0];
    assert_eq!((&note["params"]["taskId"], &note["params"]["status"]), (&json!(id), &json!("completed")), "{note}");
    assert_eq!(note["params"]["result"]["content"][0]["text"], "watched", "the DetailedTask: {note}");
    assert_eq!(note["params"]["_meta"][SUBSCRIPTION], "mine");
    let leaked = read_until(&mut theirs, "notifications/tasks\"", Duration::from_millis(500)).await;
    assert!(leaked.is_none(), "another principal's task is never announced");
}

#[tokio::test]
async fn a_2025_session_hears_its_tasks_status_on_its_standalone_stream() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(1)), ..Script::default() }).await;
    let gateway = TestGateway::start("", &backend_toml("fault", &backend.url(), "")).await;
    gateway.wait_for_tool(TOOL).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let session = agent.session.clone().expect("a session");
    let open = agent.http.get(gateway.mcp()).header("accept", "text/event-stream").header(SESSION, &session);
    let mut stream = open.send().await.expect("a standalone stream");
    assert!(read_until(&mut stream, "data: \n", Duration::from_secs(5)).await.is_some(), "a priming event");
    let task = create(&mut agent, "told").await;
    let told = read_until(&mut stream, "\"completed\"", Duration::from_secs(10)).await.expect("a status");
    let note = messages(&told).into_iter().find(|m| m["method"] == "notifications/tasks/status").expect("one");
    assert_eq!((&note["params"]["taskId"], &note["params"]["status"]), (&task["taskId"], &json!("completed")));
    assert!(note["params"]["ttl"].as_i64().is_some() && note["params"].get("result").is_none(), "the Task: {note}");
}
