//! Input during a task, through the gateway: a 2026-07-28 backend's `input_required` answer to a call the gateway
//! runs as a task puts the task in `input_required` (its requests on `tasks/get`, no `requestState`), the agent's
//! `tasks/update`s answer them — a part at a time if it likes — and the call continues as the same claim until
//! it settles. A call that asks at once is answered with the question itself (no task yet), and its retry may
//! become the task. A 2025-11-25 agent's task cannot be asked anything: the call ends `unknown`. Bad updates
//! (an unknown task, another principal's, one not waiting, malformed responses) are refused with `-32602`.

use std::time::Duration;

use serde_json::{Value, json};

use super::{EXTENSION, RAN, TOOL, create, status};
use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::modern_front::ModernAgent;
use crate::support::fault_backend::{Eras, FaultBackend, STATE_PREFIX, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

fn elicit(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object"}}})
}

fn accepted(value: &str) -> Value {
    json!({"action": "accept", "content": {"value": value}})
}

/// Two rounds: two questions at once, then one more.
fn rounds() -> Vec<Value> {
    vec![json!({"name": elicit("your name?"), "color": elicit("your colour?")}), json!({"confirm": elicit("sure?")})]
}

async fn asking_gateway(script: Script) -> (FaultBackend, TestGateway) {
    let backend = FaultBackend::start(Script { eras: Eras::Modern, ..script }).await;
    let gateway = TestGateway::start_with("", &api_keys(), &backend_toml("fault", &backend.url(), "")).await;
    gateway.wait_for_tool(TOOL).await;
    (backend, gateway)
}

/// The params of the `n`th `tools/call` the backend received.
fn tool_call(backend: &FaultBackend, n: usize) -> Value {
    let mut calls = backend.requests().into_iter().filter(|r| r.rpc_method.as_deref() == Some("tools/call"));
    calls.nth(n).and_then(|request| request.body).expect("a call reached the backend")["params"].clone()
}

/// A 2026-07-28 agent that declares the tasks extension on every request.
pub(super) struct TaskAgent(pub(super) ModernAgent);

impl TaskAgent {
    pub(super) async fn send(&self, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}});
        let reply = self.0.send_with(json!(method), method, params, |_| {}).await;
        reply.body.unwrap_or_else(|| panic!("{method}: no answer in {}", reply.raw))
    }

    /// `tasks/get` until the task leaves `from`.
    pub(super) async fn next_status(&self, id: &Value, from: &str) -> Value {
        for _ in 0..200 {
            let got = self.send("tasks/get", json!({"taskId": id})).await;
            if got["result"]["status"] != from {
                return got["result"].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {id} stayed {from}");
    }

    pub(super) async fn update(&self, id: &Value, responses: Value) -> Value {
        self.send("tasks/update", json!({"taskId": id, "inputResponses": responses})).await
    }
}

#[tokio::test]
async fn a_task_waits_for_input_answered_by_tasks_update_in_parts_then_completes_once() {
    let script = Script { input_rounds: rounds(), input_delay: Some(Duration::from_secs(1)), ..Script::default() };
    let (backend, gateway) = asking_gateway(script).await;
    let alice = TaskAgent(ModernAgent::as_principal(gateway.mcp(), ALICE_KEY));
    let bob = TaskAgent(ModernAgent::as_principal(gateway.mcp(), BOB_KEY));
    let created = alice.send("tools/call", json!({"name": TOOL, "arguments": {"text": "asked"}})).await;
    assert_eq!(created["result"]["resultType"], "task", "the backend works a while before it asks: {created}");
    let id = created["result"]["taskId"].clone();

    let waiting = alice.next_status(&id, "working").await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert_eq!(waiting["inputRequests"], rounds()[0], "the backend's requests, as it sent them");
    assert!(waiting.get("requestState").is_none() && waiting.get("result").is_none(), "{waiting}");

    for (who, task) in [(&bob, id.clone()), (&alice, json!("no-such-task"))] {
        let refused = who.update(&task, json!({"name": accepted("x")})).await;
        assert_eq!(refused["error"]["code"], -32602, "another principal's or an unknown task: {refused}");
    }
    for bad in [json!([]), json!({"name": "not an object"})] {
        let refused = alice.update(&id, bad).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }

    let ack = alice.update(&id, json!({"name": accepted("Ada"), "unasked": accepted("-")})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(["taskId", "status", "inputRequests"].iter().all(|field| ack["result"].get(field).is_none()), "{ack}");
    let partial = alice.send("tasks/get", json!({"taskId": id})).await["result"].clone();
    assert_eq!(partial["status"], "input_required", "one request is still open: {partial}");
    assert_eq!(partial["inputRequests"], json!({"color": rounds()[0]["color"]}), "only the open one");

    alice.update(&id, json!({"color": accepted("blue")})).await;
    let second = alice.next_status(&id, "working").await;
    assert_eq!((&second["status"], &second["inputRequests"]), (&json!("input_required"), &rounds()[1]), "{second}");
    let round_one = tool_call(&backend, 1);
    assert_eq!(round_one["inputResponses"]["name"], accepted("Ada"), "answers kept across updates: {round_one}");
    assert_eq!(round_one["requestState"], format!("{STATE_PREFIX}1"), "the backend's own state, back");

    alice.update(&id, json!({"confirm": accepted("yes")})).await;
    let done = alice.next_status(&id, "working").await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "asked");
    let late = alice.update(&id, json!({"confirm": accepted("again")})).await;
    assert_eq!(late["error"]["code"], -32602, "a task not waiting for input: {late}");
    assert!(late["error"]["message"].as_str().is_some_and(|text| text.contains("not waiting for input")), "{late}");
    assert_eq!(backend.executions(RAN), 1, "one call, run once");
}

#[tokio::test]
async fn a_call_that_asks_at_once_is_answered_with_the_question_and_its_retry_becomes_the_task() {
    let script = Script { call_delay: Some(Duration::from_secs(2)), ..Script::default() };
    let (backend, gateway) = asking_gateway(Script { input_rounds: vec![rounds()[1].clone()], ..script }).await;
    let alice = TaskAgent(ModernAgent::as_principal(gateway.mcp(), ALICE_KEY));
    let params = json!({"name": TOOL, "arguments": {"text": "composed"}});
    let asked = alice.send("tools/call", params.clone()).await["result"].clone();
    assert_eq!(asked["resultType"], "input_required", "no task before the input: {asked}");
    assert!(asked.get("taskId").is_none());
    let mut retry = params;
    retry["inputResponses"] = json!({"confirm": accepted("yes")});
    retry["requestState"] = asked["requestState"].clone();
    let created = alice.send("tools/call", retry).await["result"].clone();
    assert_eq!(created["resultType"], "task", "the retry runs long: {created}");
    assert!(created.get("requestState").is_none() && created.get("inputRequests").is_none(), "{created}");
    let done = alice.next_status(&created["taskId"], "working").await;
    assert_eq!(done["result"]["content"][0]["text"], "composed", "{done}");
    assert_eq!(backend.executions(RAN), 1);
}

#[tokio::test]
async fn a_2025_agents_task_cannot_be_asked_for_input_and_ends_unknown() {
    let (backend, gateway) = asking_gateway(Script { input_rounds: rounds(), ..Script::default() }).await;
    let mut agent = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let task = create(&mut agent, "session").await;
    let result = agent.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result["result"]["_meta"]["switchyard/outcome"], "unknown", "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("needed input it did not get"), "says why: {text}");
    assert_eq!(status(&mut agent, &task).await, "failed");
    let update = agent.request("tasks/update", json!({"taskId": task["taskId"], "inputResponses": {}})).await;
    assert_eq!(update["error"]["code"], -32601, "a 2026-07-28 method: {update}");
    assert_eq!(backend.executions(RAN), 0, "the backend never ran the tool");
}
