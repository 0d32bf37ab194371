//! Gateway tasks through the gateway, for 2025-11-25 agents and 2026-07-28 ones (the tasks extension), with raw
//! requests (docs/tasks.md): any tool of the fault
//! backend — which knows nothing of tasks — runs as a task; the task is the call's ledger claim made visible, so
//! it is answered at once, run once, settled once (a failure with its at-most-once outcome), cancelled for real,
//! kept in the ledger across a restart, shared by replicas, and only its principal's.

mod input;
mod notifications;
mod passthrough;
mod passthrough_2026;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::cli::{run, stdout, switchyard};
use crate::modern_front::ModernAgent;
use crate::support::assert::eventually;
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway, backend_toml};
use crate::support::postgres::PgSchema;
use crate::telemetry::scrape;

const TOOL: &str = "fault__echo";
const RAN: &str = "echo";
const RELATED: &str = "io.modelcontextprotocol/related-task";
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

async fn gateway(backend: &FaultBackend, sections: &str) -> TestGateway {
    let gateway = TestGateway::start_with("", sections, &backend_toml("fault", &backend.url(), "")).await;
    gateway.wait_for_tool(TOOL).await;
    gateway
}

/// Writes the configuration of a child gateway in `dir` (its own data directory) with `sections` and the fault
/// backend; returns the configuration's and the log's paths.
fn child_config(dir: &ScratchDir, backend: &FaultBackend, sections: &str) -> (PathBuf, PathBuf) {
    let text = format!(
        "[server]\ndata_dir = {:?}\nsession_secret_file = {:?}\n\n{sections}\n{}",
        dir.path().join("data").display().to_string(),
        dir.path().join("secret").display().to_string(),
        backend_toml("fault", &backend.url(), ""),
    );
    let (config, log) = (dir.path().join("gateway.toml"), dir.path().join("gateway.log"));
    std::fs::write(&config, text).expect("write the configuration");
    (config, log)
}

/// Starts `TOOL` as a task; returns the `Task` of the answer.
async fn create(agent: &mut Agent, text: &str) -> Value {
    let params = json!({"name": TOOL, "arguments": {"text": text}, "task": {"ttl": 60_000}});
    let answer = agent.request("tools/call", params).await;
    answer["result"]["task"].clone()
}

async fn get(agent: &mut Agent, task: &Value) -> Value {
    agent.request("tasks/get", json!({"taskId": task["taskId"]})).await
}

async fn status(agent: &mut Agent, task: &Value) -> String {
    get(agent, task).await["result"]["status"].as_str().unwrap_or("(none)").to_owned()
}

#[tokio::test]
async fn a_slow_tool_runs_as_a_task_created_at_once_polled_and_fetched() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(5)), ..Script::default() }).await;
    let gateway = gateway(&backend, "").await;
    let mut agent = Agent::new(gateway.mcp());
    let initialized = agent.initialize("2025-11-25").await.body.expect("a body");
    let declared = &initialized["result"]["capabilities"]["tasks"];
    assert_eq!(declared["requests"]["tools"]["call"], json!({}), "{initialized}");
    let listed = agent.request("tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["execution"]["taskSupport"], "optional", "{listed}");

    let started = Instant::now();
    let task = create(&mut agent, "slow").await;
    assert!(started.elapsed() < Duration::from_secs(4), "answered before the tool ends");
    assert_eq!(task["status"], "working", "{task}");
    assert_eq!((task["ttl"].as_i64(), task["pollInterval"].as_i64()), (Some(60_000), Some(1_000)));
    let id = task["taskId"].as_str().expect("an id");
    assert!(id.len() >= 32 && task["createdAt"].as_str().is_some_and(|at| at.ends_with('Z')), "{task}");
    assert_eq!(status(&mut agent, &task).await, "working");
    let listed = agent.request("tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["taskId"], task["taskId"], "{listed}");

    let result = agent.request("tasks/result", json!({"taskId": id})).await;
    assert!(started.elapsed() >= Duration::from_secs(5), "tasks/result waits for the call");
    assert_eq!(result["result"]["content"][0]["text"], "slow", "{result}");
    assert_eq!(result["result"]["_meta"][RELATED]["taskId"], id);
    assert_eq!(status(&mut agent, &task).await, "completed");
    assert_eq!(backend.executions(RAN), 1);
    let metrics = scrape(&gateway.base).await;
    for line in ["switchyard_tasks_created_total 1", "switchyard_tasks{state=\"completed\"} 1"] {
        assert!(metrics.lines().any(|metric| metric == line), "{line} in {metrics}");
    }
    assert!(metrics.lines().any(|metric| metric == "switchyard_tasks{state=\"working\"} 0"), "{metrics}");
}

#[tokio::test]
async fn a_task_cancelled_while_running_is_cancelled_at_the_backend_and_stays_cancelled() {
    let backend = FaultBackend::start(Script { hold_calls: true, ..Script::default() }).await;
    let gateway = gateway(&backend, "").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let task = create(&mut agent, "long").await;
    eventually("the backend runs the call", || async { backend.executions(RAN) == 1 }).await;
    let console = reqwest::get(format!("{}/admin/api/tasks", gateway.base)).await.expect("the console answers");
    let console: Value = serde_json::from_str(&console.text().await.expect("a body")).expect("JSON");
    assert_eq!(console["tasks"][0]["task_id"], task["taskId"], "the console shows it running: {console}");
    assert_eq!((&console["tasks"][0]["status"], &console["tasks"][0]["tool"]), (&json!("working"), &json!(TOOL)));

    let cancelled = agent.request("tasks/cancel", json!({"taskId": task["taskId"]})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    eventually("the backend is told", || async { backend.rpc_count("notifications/cancelled") == 1 }).await;
    let result = agent.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(result["result"]["_meta"]["switchyard/outcome"], "unknown", "it may have partly run");
    backend.release_calls();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(status(&mut agent, &task).await, "cancelled", "a terminal task never changes");
    let again = agent.request("tasks/cancel", json!({"taskId": task["taskId"]})).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert_eq!(backend.executions(RAN), 1);
}

#[tokio::test]
async fn a_failing_tool_and_a_dying_backend_fail_their_tasks_and_are_not_rerun() {
    let backend = FaultBackend::start(Script { tool_is_error: true, ..Script::default() }).await;
    let gateway = gateway(&backend, "").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let task = create(&mut agent, "bad").await;
    let result = agent.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result["result"]["isError"], true, "the tool's own error, verbatim: {result}");
    assert_eq!(status(&mut agent, &task).await, "failed");

    backend.update(|script| script.drop_after_call = true);
    let task = create(&mut agent, "lost").await;
    let result = agent.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result["result"]["_meta"]["switchyard/outcome"], "unknown", "{result}");
    let got = get(&mut agent, &task).await;
    assert_eq!(
        (&got["result"]["status"], &got["result"]["_meta"]["switchyard/outcome"]),
        (&json!("failed"), &json!("unknown"))
    );
    assert_eq!(backend.executions(RAN), 2, "each call ran once, none again");
}

#[tokio::test]
async fn another_principals_task_is_unknown_and_an_idempotency_key_names_one_task() {
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = gateway(&backend, &format!("[auth]\n{}", api_keys())).await;
    let mut alice = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let mut bob = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let task = create(&mut alice, "mine").await;
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let refused = bob.request(method, json!({"taskId": task["taskId"]})).await;
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
    }
    assert_eq!(bob.request("tasks/list", json!({})).await["result"]["tasks"], json!([]));
    let unknown = alice.request("tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602);

    let keyed = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": TOOL, "arguments": {"text": "once"}, "task": {}}})
    };
    let headers = [("idempotency-key", "export-1")];
    let first = alice.post_raw(keyed(100).to_string().into_bytes(), &headers).await.body.expect("a body");
    let second = alice.post_raw(keyed(101).to_string().into_bytes(), &headers).await.body.expect("a body");
    assert_eq!(first["result"]["task"]["taskId"], second["result"]["task"]["taskId"], "{second}");
    eventually("the keyed call ran", || async { backend.executions(RAN) == 2 }).await;
    let mut plain = keyed(102);
    plain["params"].as_object_mut().expect("params").remove("task");
    let retried = alice.post_raw(plain.to_string().into_bytes(), &headers).await.body.expect("a body");
    assert_eq!(retried["result"]["content"][0]["text"], "once", "a plain retry gets the task's result: {retried}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(backend.executions(RAN), 2, "one run for the key");
}

/// The real binary on SQLite: a settled task's result is fetched after a restart, and a task whose call was
/// running when the gateway was killed is failed, `unknown`, and not run again.
#[tokio::test]
async fn tasks_outlive_a_restart_on_sqlite() {
    let backend = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("tasks-restart");
    let (config, log) = child_config(&dir, &backend, "");

    let gateway = ChildGateway::spawn(&config, &log).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let done = create(&mut agent, "kept").await;
    let mut settled = String::new();
    for _ in 0..100 {
        settled = status(&mut agent, &done).await;
        if settled != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(settled, "completed");
    backend.update(|script| script.hold_calls = true);
    let cut = create(&mut agent, "cut").await;
    eventually("the backend runs the call", || async { backend.executions(RAN) == 2 }).await;
    gateway.kill().await;

    let gateway = ChildGateway::spawn(&config, &log).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let result = agent.request("tasks/result", json!({"taskId": done["taskId"]})).await;
    assert_eq!(result["result"]["content"][0]["text"], "kept", "{result}");
    let orphan = get(&mut agent, &cut).await;
    assert_eq!(orphan["result"]["status"], "failed", "{orphan}");
    assert_eq!(orphan["result"]["_meta"]["switchyard/outcome"], "unknown");
    let answer = agent.request("tasks/result", json!({"taskId": cut["taskId"]})).await;
    assert_eq!(answer["error"]["data"]["switchyard/outcome"], "unknown", "{answer}");
    backend.release_calls();
    assert_eq!(backend.executions(RAN), 2, "not rerun");

    // The operator's view of the same store, beside the running gateway.
    let listed = run(switchyard().args(["tasks", "--state", "failed", "--config"]).arg(&config)).await;
    let text = stdout(&listed);
    assert!(listed.status.success(), "{text}");
    let cut_id = cut["taskId"].as_str().expect("an id");
    assert!(text.contains(cut_id) && text.contains("unknown") && text.contains(TOOL), "{text}");
    assert!(!text.contains(done["taskId"].as_str().expect("an id")), "only failed tasks: {text}");
    let bad = run(switchyard().args(["tasks", "--state", "done", "--config"]).arg(&config)).await;
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("not a task status"));
    gateway.terminate().await;
}

/// Two replicas on one PostgreSQL schema: a task created through one is read, fetched and cancelled through the
/// other.
#[tokio::test]
async fn a_task_created_on_one_replica_is_fetched_on_the_other() {
    let Some(schema) = PgSchema::create().await else { return };
    let backend =
        FaultBackend::start(Script { call_delay: Some(Duration::from_millis(500)), ..Script::default() }).await;
    let section = format!("[ledger]\nurl = {:?}\n", schema.url());
    let (first, second) = (gateway(&backend, &section).await, gateway(&backend, &section).await);
    let mut on_first = Agent::connected(first.mcp()).await;
    let mut on_second = Agent::connected(second.mcp()).await;
    let task = create(&mut on_first, "shared").await;
    assert_eq!(status(&mut on_second, &task).await, "working");
    let result = on_second.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result["result"]["content"][0]["text"], "shared", "{result}");
    assert_eq!(backend.executions(RAN), 1);

    // Cancelled through the other replica, the call is cancelled at the backend by the one running it.
    backend.update(|script| script.hold_calls = true);
    let held = create(&mut on_first, "held").await;
    eventually("the backend runs the call", || async { backend.executions(RAN) == 2 }).await;
    let cancelled = on_second.request("tasks/cancel", json!({"taskId": held["taskId"]})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    eventually("the backend is told", || async { backend.rpc_count("notifications/cancelled") == 1 }).await;
    assert_eq!(status(&mut on_first, &held).await, "cancelled");
    backend.release_calls();
}

/// Two replicas on one PostgreSQL schema with a short lease: the replica running a task is killed (SIGKILL) and
/// never returns; the other one's upkeep expires its leases and fails the task, `unknown`, within the lease (and
/// a tick), and the call is not run again.
#[tokio::test]
async fn a_task_of_a_replica_that_died_fails_unknown_on_the_other() {
    let Some(schema) = PgSchema::create().await else { return };
    let backend = FaultBackend::start(Script { hold_calls: true, ..Script::default() }).await;
    let lease = Duration::from_secs(2);
    let section = format!("[ledger]\nurl = {:?}\nlease = \"2s\"\n", schema.url());
    let dir = ScratchDir::new("tasks-dead-replica");
    let (config, log) = child_config(&dir, &backend, &section);
    let dying = ChildGateway::spawn(&config, &log).await;
    let survivor = gateway(&backend, &section).await;
    let mut on_dying = Agent::connected(dying.mcp()).await;
    let mut on_survivor = Agent::connected(survivor.mcp()).await;

    let task = create(&mut on_dying, "orphaned").await;
    eventually("the backend runs the call", || async { backend.executions(RAN) == 1 }).await;
    // Longer than a lease: a live replica's renewals keep its task running.
    tokio::time::sleep(lease + lease / 2).await;
    assert_eq!(status(&mut on_survivor, &task).await, "working");
    dying.kill().await;
    let killed = Instant::now();

    let mut seen = get(&mut on_survivor, &task).await;
    while seen["result"]["status"] == "working" && killed.elapsed() < lease * 4 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = get(&mut on_survivor, &task).await;
    }
    let took = killed.elapsed();
    assert_eq!(seen["result"]["status"], "failed", "{seen}");
    assert_eq!(seen["result"]["_meta"]["switchyard/outcome"], "unknown", "{seen}");
    // The lease runs out at most a lease after the last renewal and the survivor notices within a third of its
    // own; the rest is slack for a loaded machine (the task's ttl is a minute).
    assert!(took <= lease * 2, "failed {took:?} after the kill");
    let answer = on_survivor.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(answer["error"]["data"]["switchyard/outcome"], "unknown", "{answer}");
    backend.release_calls();
    tokio::time::sleep(lease).await;
    assert_eq!(backend.executions(RAN), 1, "not rerun");
    assert_eq!(status(&mut on_survivor, &task).await, "failed", "terminal stays terminal");
}

/// A 2026-07-28 agent that declares the tasks extension: the gateway decides, so a 5-second call becomes a task
/// (a flat `CreateTaskResult`), `tasks/get` inlines the result once it is there, and a request without the
/// extension is refused the task methods with `-32021`.
#[tokio::test]
async fn a_slow_tool_becomes_a_task_for_a_2026_agent_that_declared_the_extension() {
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(5)), ..Script::default() }).await;
    let gateway = gateway(&backend, "").await;
    let agent = ModernAgent::new(gateway.mcp());
    let extension = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}});
    let send = |id: u64, method: &'static str, mut params: Value, declared: bool| {
        if declared {
            params["_meta"] = extension.clone();
        }
        let agent = &agent;
        async move {
            let reply = agent.send_with(json!(id), method, params, |_| {}).await;
            reply.body.unwrap_or_else(|| panic!("{method}: no answer in {}", reply.raw))
        }
    };
    let discovered = send(1, "server/discover", json!({}), false).await;
    assert_eq!(discovered["result"]["capabilities"]["extensions"][EXTENSION], json!({}), "{discovered}");
    assert!(discovered["result"]["capabilities"].get("tasks").is_none());

    let started = Instant::now();
    let created = send(2, "tools/call", json!({"name": TOOL, "arguments": {"text": "later"}}), true).await;
    let task = &created["result"];
    assert!(started.elapsed() < Duration::from_secs(4), "answered before the tool ends");
    assert_eq!((&task["resultType"], &task["status"]), (&json!("task"), &json!("working")), "{created}");
    assert!(task["ttlMs"].as_i64().is_some() && task.get("ttl").is_none() && task.get("task").is_none());
    let id = task["taskId"].clone();
    let refused = send(3, "tasks/get", json!({"taskId": id}), false).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let mut got = Value::Null;
    for n in 0..100 {
        got = send(10 + n, "tasks/get", json!({"taskId": id}), true).await;
        if got["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["result"]["content"][0]["text"], "later");
    assert!(got["result"]["result"]["_meta"].get(RELATED).is_none(), "the task id is at the root");
    let ack = send(200, "tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(ack["result"]["resultType"], "complete", "a terminal task's cancel is acknowledged: {ack}");
    assert!(ack["result"].get("status").is_none());

    backend.update(|script| script.call_delay = None);
    let quick = send(201, "tools/call", json!({"name": TOOL, "arguments": {"text": "now"}}), true).await;
    assert_eq!(quick["result"]["resultType"], "complete", "a quick call is answered with its result: {quick}");
    assert_eq!(quick["result"]["content"][0]["text"], "now");
    assert_eq!(backend.executions(RAN), 2);
}

/// `tasks = "off"`: no capability, no `taskSupport`, and a `task` field is ignored (the call runs as asked).
#[tokio::test]
async fn tasks_off_offers_none() {
    let backend = FaultBackend::start(Script::default()).await;
    let off = TestGateway::start("", &backend_toml("fault", &backend.url(), "tasks = \"off\"")).await;
    off.wait_for_tool(TOOL).await;
    let mut agent = Agent::new(off.mcp());
    let initialized = agent.initialize("2025-11-25").await.body.expect("a body");
    assert!(initialized["result"]["capabilities"].get("tasks").is_none(), "{initialized}");
    let listed = agent.request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"][0].get("execution").is_none(), "{listed}");
    let params = json!({"name": TOOL, "arguments": {"text": "plain"}, "task": {"ttl": 1000}});
    let answered = agent.request("tools/call", params).await;
    assert_eq!(answered["result"]["content"][0]["text"], "plain", "{answered}");
}
