//! A rolling restart of a fleet loses no request: two replicas on one PostgreSQL ledger (sharing the session key)
//! behind a round-robin balancer that sends new connections only to replicas whose `/readyz` answers 200; an
//! agent calls tools throughout while each replica in turn gets SIGTERM and a successor is started. A stopping
//! replica reports not ready, keeps serving for `shutdown_grace` and closes each connection after its answer
//! (docs/deployment.md, *Rolling restarts*), so every call is answered.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::real_clients::Demo;
use crate::support::assert::eventually;
use crate::support::balancer::Balancer;
use crate::support::gateway::{Agent, ChildGateway, ScratchDir};
use crate::support::postgres::PgSchema;

/// Long enough for the balancer's poll (50 ms) to see a stopping replica even on a loaded machine, short enough
/// for a quick test.
const GRACE: (&str, &str) = ("SWITCHYARD_SHUTDOWN_GRACE", "2s");

/// Agents calling at once: each holds its own keep-alive connection, so both replicas serve some.
const AGENTS: usize = 4;

/// The fleet's replicas, each with its own data directory and configuration file.
struct Fleet {
    dir: ScratchDir,
    ledger: String,
    backend: String,
}

impl Fleet {
    fn config(&self, replica: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{replica}.toml"));
        let (data, key) = (self.dir.path().join(replica), self.dir.path().join("session.key"));
        let text = format!(
            "[server]\ndata_dir = {:?}\nsession_secret_file = {:?}\n[ledger]\nurl = {:?}\n\
             [[backends]]\nname = \"demo\"\nurl = {:?}\n",
            data.display().to_string(),
            key.display().to_string(),
            self.ledger,
            self.backend
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    async fn start(&self, replica: &str) -> ChildGateway {
        let log = self.dir.path().join(format!("{replica}.log"));
        ChildGateway::spawn_with(&self.config(replica), &log, &[], &[GRACE]).await
    }
}

fn address(replica: &ChildGateway) -> SocketAddr {
    replica.base.strip_prefix("http://").and_then(|address| address.parse().ok()).expect("a replica's address")
}

/// Agents calling `demo__echo` until `stop`, each on its own connections, counting answered calls and recording
/// every failure.
struct Caller {
    calls: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Caller {
    fn start(agents: Vec<Agent>) -> Caller {
        let (calls, failures, stop): (Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>, Arc<AtomicBool>) =
            (Arc::default(), Arc::default(), Arc::default());
        let tasks = agents
            .into_iter()
            .map(|agent| tokio::spawn(call_until(agent, Arc::clone(&calls), Arc::clone(&failures), Arc::clone(&stop))))
            .collect();
        Caller { calls, failures, stop, tasks }
    }

    fn count(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    /// Waits until `more` calls beyond the current count were answered.
    async fn wait_for(&self, more: usize) {
        let target = self.count() + more;
        eventually(&format!("{target} calls answered"), || async { self.count() >= target }).await;
    }
}

async fn call_until(agent: Agent, calls: Arc<AtomicUsize>, failures: Arc<Mutex<Vec<String>>>, stop: Arc<AtomicBool>) {
    let session = agent.session.clone().expect("a session");
    let mut id = 0;
    while !stop.load(Ordering::Relaxed) {
        id += 1;
        let text = format!("call {id}");
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "demo__echo", "arguments": {"text": text}}});
        let request = agent
            .http
            .post(&agent.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .body(message.to_string());
        match answered(request.send().await, &text).await {
            Ok(()) => calls.fetch_add(1, Ordering::Relaxed),
            Err(failure) => {
                failures.lock().push(format!("call {id}: {failure}"));
                0
            }
        };
    }
}

/// Whether a call's answer is its echo.
async fn answered(response: reqwest::Result<reqwest::Response>, text: &str) -> Result<(), String> {
    let response = response.map_err(|error| format!("no answer: {error:?}"))?;
    let status = response.status();
    let body = response.text().await.map_err(|error| format!("{status}, body cut: {error:?}"))?;
    let answer: Value = serde_json::from_str(&body).map_err(|_| format!("{status}: {body}"))?;
    if answer["result"]["content"][0]["text"] == text { Ok(()) } else { Err(format!("{status}: {body}")) }
}

/// Stops replica `index` gracefully (SIGTERM to its process, reaped by its id), then starts its successor and
/// puts it in the balancer in its place; calls must keep being answered meanwhile.
async fn restart(
    fleet: &Fleet,
    balancer: &Balancer,
    caller: &Caller,
    replica: ChildGateway,
    index: usize,
    name: &str,
) -> ChildGateway {
    let before = caller.count();
    let status = replica.terminate().await;
    assert!(status.success(), "replica {name} stops cleanly: {status}");
    assert!(caller.count() > before, "calls were answered while replica {name} was stopping");
    let successor = fleet.start(name).await;
    balancer.replace(index, address(&successor));
    eventually("both replicas ready again", || async { balancer.ready() == 2 }).await;
    caller.wait_for(20).await;
    successor
}

fn log_of(dir: &Path, replica: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{replica}.log"))).unwrap_or_default()
}

#[tokio::test]
async fn a_rolling_restart_of_two_replicas_loses_no_request() {
    let Some(schema) = PgSchema::create().await else { return };
    let demo = Demo::start().await;
    let fleet = Fleet { dir: ScratchDir::new("rolling"), ledger: schema.url(), backend: demo.url() };
    let a = fleet.start("a").await;
    let b = fleet.start("b").await;
    let balancer = Balancer::start(&[address(&a), address(&b)]).await;
    eventually("the balancer sees both replicas ready", || async { balancer.ready() == 2 }).await;
    let mut agents = Vec::new();
    for _ in 0..AGENTS {
        agents.push(Agent::connected(format!("http://{}/mcp", balancer.address())).await);
    }
    let caller = Caller::start(agents);
    caller.wait_for(20).await;

    let a = restart(&fleet, &balancer, &caller, a, 0, "a").await;
    let b = restart(&fleet, &balancer, &caller, b, 1, "b").await;

    caller.stop.store(true, Ordering::Relaxed);
    let answered = caller.count();
    for task in caller.tasks {
        task.await.expect("the agents end");
    }
    let failures = caller.failures.lock().clone();
    let logs = format!("--- a ---\n{}\n--- b ---\n{}", log_of(fleet.dir.path(), "a"), log_of(fleet.dir.path(), "b"));
    assert!(failures.is_empty(), "{} of {} calls failed: {failures:#?}\n{logs}", failures.len(), answered);
    assert!(log_of(fleet.dir.path(), "a").contains("stopping: /readyz answers 503"), "{logs}");
    a.kill().await;
    b.kill().await;
}

#[tokio::test]
async fn a_stopping_gateway_is_not_ready_but_answers_and_closes_each_connection() {
    let demo = Demo::start().await;
    let dir = ScratchDir::new("grace");
    let config = dir.path().join("switchyard.toml");
    let data = dir.path().join("data").display().to_string();
    let text = format!("[server]\ndata_dir = {data:?}\n[[backends]]\nname = \"demo\"\nurl = {:?}\n", demo.url());
    std::fs::write(&config, text).unwrap();
    let gateway = ChildGateway::spawn_with(
        &config,
        &dir.path().join("gateway.log"),
        &[],
        &[("SWITCHYARD_SHUTDOWN_GRACE", "30s")],
    )
    .await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let pid = gateway.pid().to_string();
    let sent = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    assert!(sent.success(), "SIGTERM the gateway");
    let readyz = format!("{}/readyz", gateway.base);
    eventually("/readyz answers 503 once stopping", || async {
        let answer = reqwest::get(&readyz).await.unwrap();
        answer.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE
            && answer
                .text()
                .await
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .is_some_and(|report| report["stopping"] == true && report["ready"] == false)
    })
    .await;
    let message = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"text": "still served"}}});
    let reply = agent.send(&message).await;
    assert_eq!(
        reply.body.as_ref().map(|body| body["result"]["content"][0]["text"].clone()),
        Some(json!("still served")),
        "{}",
        reply.raw
    );
    assert_eq!(reply.headers.get("connection").and_then(|value| value.to_str().ok()), Some("close"));
    let healthz = reqwest::get(format!("{}/healthz", gateway.base)).await.unwrap();
    assert_eq!(healthz.status(), reqwest::StatusCode::OK, "the process is alive: /healthz is not a readiness check");
    assert!(!agent.tool_names().await.is_empty(), "a new connection is still served during the grace period");
    gateway.kill().await;
}
