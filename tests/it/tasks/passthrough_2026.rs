//! Passthrough of a 2026-07-28 backend's own tasks (docs/tasks.md, *Passthrough*), in front of the conformance
//! fixture in its tasks mode (`FIXTURE_TASKS=1`: it implements the `io.modelcontextprotocol/tasks` extension
//! itself and logs every task request it gets): a 2026-07-28 agent's call is answered with the backend's
//! `CreateTaskResult` under the gateway's sealed id, `tasks/get` reaches the backend's task until it is terminal
//! and inlines its result, `tasks/update` answers the backend's input requests, `tasks/cancel` cancels it at the
//! backend, and another principal's or a forged id is an unknown task (`-32602`) that never reaches the backend.
//! The backend's `notifications/tasks` reach the agent's `subscriptions/listen` stream that names the sealed id,
//! under that id. The backend's own id never shows in an answer or a notification.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::input::TaskAgent;
use super::passthrough::{backend_id, refused_as_unknown};
use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::gateway::read_until;
use crate::modern_front::{ModernAgent, messages};
use crate::support::assert::eventually;
use crate::support::gateway::{TestGateway, backend_toml};
use crate::support::interop::InteropServer;

const SLOW: &str = "fixture__slow_compute";
const CONFIRM: &str = "fixture__confirm_delete";

async fn gateway(fixture: &InteropServer) -> TestGateway {
    let backend = backend_toml("fixture", &fixture.url(), "tasks = \"passthrough\"");
    let gateway = TestGateway::start_with("", &api_keys(), &backend).await;
    gateway.wait_for_tool(SLOW).await;
    gateway
}

/// The fixture, a passthrough gateway in front of it, and Alice; `None` when the fixture is not installed.
async fn alice_before_the_fixture() -> Option<(InteropServer, TestGateway, TaskAgent)> {
    let fixture = InteropServer::fixture_with_tasks()?;
    let gateway = gateway(&fixture).await;
    let alice = TaskAgent(ModernAgent::as_principal(gateway.mcp(), ALICE_KEY));
    Some((fixture, gateway, alice))
}

/// A `confirm_delete` task of `filename` once it waits for its confirmation: its sealed id, the backend's, and
/// what `tasks/get` said then.
async fn asking(alice: &TaskAgent, filename: &str) -> (String, String, Value) {
    let (id, own) = create(alice, CONFIRM, json!({ "filename": filename })).await;
    let asking = poll(alice, &id, "input_required").await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    (id, own, asking)
}

/// The agent's confirmation, as `confirm_delete` asks for it.
fn confirmed() -> Value {
    json!({"confirm_delete": {"action": "accept", "content": {"confirm": true}}})
}

/// Creates a task of `tool`; returns its sealed id and the backend's own.
async fn create(agent: &TaskAgent, tool: &str, arguments: Value) -> (String, String) {
    let created = agent.send("tools/call", json!({"name": tool, "arguments": arguments})).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let sealed = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let own = backend_id(&sealed);
    assert!(sealed.starts_with("syt1.") && !created.to_string().contains(&format!("\"{own}\"")), "{created}");
    (sealed, own)
}

/// `tasks/get` until the task is terminal, or in `stop_at`.
async fn poll(agent: &TaskAgent, id: &str, stop_at: &str) -> Value {
    let mut now = agent.next_status(&json!(id), "working").await;
    while now["status"] != stop_at && now["status"] == "input_required" {
        now = agent.next_status(&json!(id), "input_required").await;
    }
    now
}

/// How many times the fixture logged `line`, once it logged it at least `least` times (its output is read by
/// another thread).
async fn logged(fixture: &InteropServer, line: &str, least: usize) -> usize {
    let count = || fixture.logs().lines().filter(|logged| logged.contains(line)).count();
    eventually(&format!("the fixture logged `{line}` {least} times"), || async { count() >= least }).await;
    count()
}

#[tokio::test]
async fn a_2026_backends_own_task_is_created_polled_and_fetched_under_a_sealed_id() {
    let Some((fixture, gateway, alice)) = alice_before_the_fixture().await else { return };
    let (id, own) = create(&alice, SLOW, json!({"seconds": 1, "label": "relayed"})).await;
    assert_eq!(logged(&fixture, &format!("task created {own} (slow_compute)"), 1).await, 1, "the backend's task");

    let done = poll(&alice, &id, "completed").await;
    assert_eq!((&done["taskId"], &done["status"]), (&json!(id), &json!("completed")), "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "computed relayed after 1s", "the backend's result: {done}");
    assert!(!done.to_string().contains(&own), "the backend's id never shows: {done}");

    let bob = TaskAgent(ModernAgent::as_principal(gateway.mcp(), BOB_KEY));
    let gets = logged(&fixture, &format!("task get {own}"), 1).await;
    refused_as_unknown(&bob.send("tasks/get", json!({"taskId": id})).await);
    refused_as_unknown(&bob.send("tasks/cancel", json!({"taskId": id})).await);
    let forged = json!({"p": "bob", "b": "fixture", "t": own}).to_string();
    let forged = format!("syt1.{}.AAAA", URL_SAFE_NO_PAD.encode(forged));
    refused_as_unknown(&bob.send("tasks/get", json!({"taskId": forged})).await);
    refused_as_unknown(&alice.send("tasks/get", json!({"taskId": forged})).await);
    let again = alice.send("tasks/get", json!({"taskId": id})).await;
    assert_eq!(again["result"]["status"], "completed", "{again}");
    // Alice's read is the marker: it reached the backend after every refusal, which added nothing.
    let after = logged(&fixture, &format!("task get {own}"), gets + 1).await;
    assert_eq!(after, gets + 1, "a refused id never reaches the backend");

    let undeclared = ModernAgent::as_principal(gateway.mcp(), ALICE_KEY);
    let gated = undeclared.send_with(json!(1), "tasks/get", json!({"taskId": id}), |_| {}).await;
    assert_eq!(gated.body.expect("an answer")["error"]["code"], -32021, "the extension must be declared");
}

#[tokio::test]
async fn a_2026_passthrough_task_takes_input_by_tasks_update_and_is_cancelled_at_the_backend() {
    let Some((fixture, _gateway, alice)) = alice_before_the_fixture().await else { return };

    let (id, own, asking) = asking(&alice, "notes.txt").await;
    let request = &asking["inputRequests"]["confirm_delete"];
    assert_eq!(request["method"], "elicitation/create", "the backend's own request: {asking}");
    assert!(asking.get("requestState").is_none(), "{asking}");
    let ack = alice.update(&json!(id), confirmed()).await;
    assert_eq!(ack["result"]["resultType"], "complete", "an empty acknowledgement: {ack}");
    assert!(ack["result"].get("taskId").is_none(), "{ack}");
    assert_eq!(logged(&fixture, &format!("task update {own} confirm_delete"), 1).await, 1, "the backend's update");
    let done = poll(&alice, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "deleted notes.txt", "{done}");

    let (id, own) = create(&alice, SLOW, json!({"seconds": 60, "label": "never"})).await;
    let ack = alice.send("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(logged(&fixture, &format!("task cancelled {own}"), 1).await, 1, "cancelled at the backend");
    let got = alice.send("tasks/get", json!({"taskId": id})).await;
    assert_eq!((&got["result"]["taskId"], &got["result"]["status"]), (&json!(id), &json!("cancelled")), "{got}");
    assert!(!got.to_string().contains(&own), "{got}");
}

#[tokio::test]
async fn a_2026_backends_task_notifications_reach_the_listen_stream_under_the_sealed_id() {
    let Some((fixture, gateway, alice)) = alice_before_the_fixture().await else { return };
    // Waiting for input holds the task still while the streams open.
    let (id, own, _) = asking(&alice, "told.txt").await;
    let bob = ModernAgent::as_principal(gateway.mcp(), BOB_KEY);
    let mut theirs = bob.listen("theirs", json!({"taskIds": [id]})).await;
    let mut mine = alice.0.listen("mine", json!({"taskIds": [id]})).await;
    let acked = read_until(&mut mine, "acknowledged", Duration::from_secs(10)).await.expect("an acknowledgement");
    assert_eq!(messages(&acked)[0]["params"]["notifications"], json!({"taskIds": [id]}), "{acked}");
    // The gateway's own stream on the backend asks for the backend's id, and for Alice's stream only.
    assert_eq!(logged(&fixture, &format!("task listen {own}"), 1).await, 1, "one backend stream");

    alice.update(&json!(id), confirmed()).await;
    let told = read_until(&mut mine, "\"completed\"", Duration::from_secs(20)).await.expect("the statuses");
    let notes: Vec<Value> = messages(&told).into_iter().filter(|m| m["method"] == "notifications/tasks").collect();
    let last = notes.last().unwrap_or_else(|| panic!("notifications/tasks: {told}"));
    assert_eq!((&last["params"]["taskId"], &last["params"]["status"]), (&json!(id), &json!("completed")), "{last}");
    assert_eq!(last["params"]["result"]["content"][0]["text"], "deleted told.txt", "the DetailedTask: {last}");
    assert_eq!(last["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "mine", "{last}");
    assert!(notes.iter().all(|note| note["params"]["taskId"] == json!(id)), "sealed in every status: {notes:?}");
    assert!(!told.contains(&own), "the backend's id never shows: {told}");
    let leaked = read_until(&mut theirs, "notifications/tasks\"", Duration::from_millis(500)).await;
    assert!(leaked.is_none(), "another principal's stream hears nothing of the task");
}
