//! Notifications across a fleet: what one replica hears or writes reaches the agents' streams on the other — a
//! gateway task's `notifications/tasks/status` on the creating session's standalone stream, its
//! `notifications/tasks` on a `subscriptions/listen` stream, a backend's own task status (passthrough, in front of
//! the reference `server-everything`), and a backend's `notifications/tools/list_changed`, heard on one replica
//! only, which the other acts on at once (its catalog refreshed, its agents told in both eras).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{Replicas, same_session};
use crate::gateway::read_until;
use crate::modern_front::{ModernAgent, messages};
use crate::support::fault_backend::{Answer, FaultBackend, Script};
use crate::support::gateway::Agent;
use crate::support::interop::InteropServer;

const SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The agent's standalone stream, open and primed.
async fn primed(agent: &Agent) -> reqwest::Response {
    let mut stream = agent.open_stream().await;
    assert_eq!(stream.status(), StatusCode::OK);
    read_until(&mut stream, "data: \n", Duration::from_secs(10)).await.expect("a priming event");
    stream
}

/// The messages of `raw` with this method.
fn notes(raw: &str, method: &str) -> Vec<Value> {
    messages(raw).into_iter().filter(|message| message["method"] == method).collect()
}

/// The task of a 2025-11-25 task-augmented call of `tool`.
async fn create(agent: &mut Agent, tool: &str, arguments: Value) -> String {
    let params = json!({"name": tool, "arguments": arguments, "task": {"ttl": 60_000}});
    let created = agent.request("tools/call", params).await;
    created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned()
}

/// The session's standalone stream is on `b`; its task runs on `a`, which writes the task's statuses there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_status_written_on_one_replica_reaches_the_sessions_stream_on_the_other() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(1)), ..Script::default() }).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let mut on_a = Agent::connected(fleet.a.mcp()).await;
    let mut stream = primed(&same_session(&on_a, fleet.b.mcp())).await;

    let id = create(&mut on_a, "fault__echo", json!({"text": "told"})).await;
    let told = read_until(&mut stream, "\"completed\"", Duration::from_secs(20)).await.expect("the status, on b");
    let told = notes(&told, "notifications/tasks/status");
    let last = told.last().expect("a status notification");
    assert_eq!((&last["params"]["taskId"], &last["params"]["status"]), (&json!(id), &json!("completed")), "{told:?}");
    assert_eq!(backend.executions("echo"), 1);
}

/// A 2026-07-28 agent's task runs on `a`; its listen stream watching the task is on `b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_on_one_replica_hears_a_task_the_other_runs() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(2)), ..Script::default() }).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let mut params = json!({"name": "fault__echo", "arguments": {"text": "watched"}});
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}});
    let created = ModernAgent::new(fleet.a.mcp()).send_with(json!(1), "tools/call", params, |_| {}).await;
    let created = created.body.unwrap_or_else(|| panic!("an answer: {}", created.raw));
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();

    let mut listening = ModernAgent::new(fleet.b.mcp()).listen("watch", json!({"taskIds": [id]})).await;
    let told = read_until(&mut listening, "notifications/tasks\"", Duration::from_secs(20)).await.expect("on b");
    let told = notes(&told, "notifications/tasks");
    let note = told.last().expect("a task notification");
    assert_eq!((&note["params"]["taskId"], &note["params"]["status"]), (&json!(id), &json!("completed")), "{note}");
    assert_eq!(note["params"]["result"]["content"][0]["text"], "watched", "the DetailedTask: {note}");
    assert_eq!(note["params"]["_meta"][SUBSCRIPTION], "watch", "{note}");
}

/// The backend runs the task itself: its session (and the backend's standalone stream carrying the task's
/// statuses) is on `a`, where the task was created; the agent's standalone stream is on `b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_own_task_status_reaches_the_sessions_stream_on_the_other_replica() {
    let Some(everything) = InteropServer::everything() else { return };
    let Some(fleet) = Replicas::start_before(&everything.url(), None).await else { return };
    let mut on_a = Agent::connected(fleet.a.mcp()).await;
    let mut stream = primed(&same_session(&on_a, fleet.b.mcp())).await;

    let id = create(&mut on_a, "fault__simulate-research-query", json!({"topic": "fleets"})).await;
    assert!(id.starts_with("syt1."), "the backend's task, under a sealed id: {id}");
    let told = read_until(&mut stream, "\"completed\"", Duration::from_secs(30)).await.expect("the status, on b");
    let told = notes(&told, "notifications/tasks/status");
    assert!(!told.is_empty() && told.iter().all(|note| note["params"]["taskId"] == json!(id)), "sealed: {told:?}");
    assert_eq!(told.last().expect("a status")["params"]["status"], "completed", "{told:?}");
}

/// The backend announces a new tool on a call's stream on `a` only (it has no standalone stream): `b` refreshes
/// its catalog at once (not at its next `refresh`), and tells its agents of both eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_list_change_heard_on_one_replica_refreshes_the_other() {
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let backend =
        FaultBackend::start(Script { answer: Answer::Sse, before_result: vec![changed], ..Script::default() }).await;
    let Some(fleet) = Replicas::start(&backend).await else { return };
    let mut on_a = Agent::connected(fleet.a.mcp()).await;
    let mut on_b = Agent::connected(fleet.b.mcp()).await;
    let mut stream = primed(&on_b).await;
    let mut listening = ModernAgent::new(fleet.b.mcp()).listen("tools", json!({"toolsListChanged": true})).await;
    read_until(&mut listening, "acknowledged", Duration::from_secs(10)).await.expect("an acknowledgement");
    let names = |listed: &Value| -> Vec<String> {
        let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect()
    };
    assert!(!names(&on_b.request("tools/list", json!({})).await).contains(&"fault__fresh".to_owned()));

    let fresh = json!({"name": "fresh", "description": "New.", "inputSchema": {"type": "object"}});
    backend.update(|script| script.tools.push(fresh));
    let answered = on_a.call_tool("fault__echo", json!({"text": "x"})).await;
    assert_eq!(answered["result"]["content"][0]["text"], "x", "{answered}");
    let wait = Duration::from_secs(20);
    read_until(&mut stream, "notifications/tools/list_changed", wait).await.expect("b's 2025 agent is told");
    let told = read_until(&mut listening, "notifications/tools/list_changed", wait).await.expect("and its 2026 one");
    assert_eq!(notes(&told, "notifications/tools/list_changed")[0]["params"]["_meta"][SUBSCRIPTION], "tools");
    let listed = on_b.request("tools/list", json!({})).await;
    assert!(names(&listed).contains(&"fault__fresh".to_owned()), "b lists the new tool: {listed}");
}
