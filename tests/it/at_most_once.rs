//! At most once, end to end: one behaviour suite, run against every ledger store — memory, SQLite (in
//! a temporary data directory) and PostgreSQL (a fresh schema per test, dropped afterwards) — with the fault
//! backend counting how often the tool really ran. Each test asserts what crossed the wire (the backend's
//! `executions`), the machine-readable outcome in `_meta`, and the key phrases of the sentence the agent reads.
//!
//! Crash, restart and replica tests run the real `switchyard` binary as child processes ([`ChildGateway`]);
//! PostgreSQL outages go through a loopback proxy the test cuts ([`TcpProxy`]), never the real server.
//!
//! PostgreSQL is the one `support::postgres` finds; when it is unreachable its tests print a `*** SKIPPED: ` line
//! and pass, unless `CI=true`, where they fail.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::ledger::ClaimKey;
use switchyard::router::{CLAIM_META, IDEMPOTENCY_META, REPLAYED_META};
use tokio::task::JoinSet;

use crate::support::assert::{eventually, outcome, text};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, SESSION, ScratchDir, TestGateway, backend_toml, wait_ready};
use crate::support::pg_proxy::TcpProxy;
use crate::support::postgres::{self, PgSchema};
use completion::{
    Outside, a_crash_before_the_completion_is_durable_is_unknown_not_rerun,
    a_duplicate_before_the_completion_is_durable_gets_the_result,
};
use keys::{a_reused_request_id_for_another_call_is_refused, one_key_for_another_tool_is_refused};

mod completion;
mod keys;

/// The fault backend's tool as the gateway exposes it (backend `fault`, default prefix).
const TOOL: &str = "fault__echo";
/// The fault backend's own name for it, as counted by `executions`.
const RAN: &str = "echo";

// ---------------------------------------------------------------------------------------------------------------
// Stores

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    Memory,
    Sqlite,
    Postgres,
}

/// One test's ledger: the URL the gateway is configured with, and the PostgreSQL schema to drop afterwards.
struct Ledger {
    url: String,
    _schema: Option<PgSchema>,
}

impl Ledger {
    /// `None` when the store is PostgreSQL and it cannot be reached outside CI (the test is then skipped).
    async fn open(store: Store) -> Option<Ledger> {
        Some(match store {
            Store::Memory => Ledger { url: "memory".into(), _schema: None },
            // `<data_dir>/ledger.db`, in the gateway's own temporary data directory.
            Store::Sqlite => Ledger { url: "sqlite".into(), _schema: None },
            Store::Postgres => {
                let schema = PgSchema::create().await?;
                Ledger { url: schema.url(), _schema: Some(schema) }
            }
        })
    }

    fn section(&self) -> String {
        ledger_section(&self.url)
    }

    /// An in-process gateway on this ledger in front of `backend` (named `fault`).
    async fn gateway(&self, backend_url: &str) -> TestGateway {
        TestGateway::start_with("", &self.section(), &backend_toml("fault", backend_url, "")).await
    }
}

pub(crate) fn ledger_section(url: &str) -> String {
    format!("[ledger]\nurl = {url:?}\n")
}

/// One test function per store: `name::memory`, `name::sqlite`, `name::postgres` (or the listed subset).
macro_rules! run_on {
    ($stores:tt $($test:ident),+ $(,)?) => {$(
        mod $test {
            run_on!(@each $test $stores);
        }
    )+};
    (@each $test:ident [$($store:ident),+]) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $store() {
            super::$test(super::store_named(stringify!($store))).await
        }
    )+};
}

fn store_named(name: &str) -> Store {
    match name {
        "memory" => Store::Memory,
        "sqlite" => Store::Sqlite,
        "postgres" => Store::Postgres,
        other => panic!("no store {other}"),
    }
}

run_on!([memory, sqlite, postgres]
    a_resent_request_id_runs_once,
    one_key_from_two_sessions_runs_once,
    one_key_with_other_arguments_is_refused,
    one_key_for_another_tool_is_refused,
    a_reused_request_id_for_another_call_is_refused,
    a_thousand_concurrent_duplicates_run_once,
    a_lost_answer_is_unknown_and_never_repeated,
    an_unreachable_backend_releases_the_claim,
    a_duplicate_before_the_completion_is_durable_gets_the_result,
);

run_on!([sqlite, postgres]
    a_call_cut_short_by_sigkill_is_unknown_after_restart,
    a_completed_result_survives_a_restart,
    a_crash_before_the_completion_is_durable_is_unknown_not_rerun,
);

// ---------------------------------------------------------------------------------------------------------------
// The agent's side of the wire

fn call(id: u64, text: &str, key: Option<&str>) -> Value {
    let mut params = json!({"name": TOOL, "arguments": {"text": text}});
    if let Some(key) = key {
        params["_meta"] = json!({ IDEMPOTENCY_META: key });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// POSTs one message on `agent`'s session with extra `headers`; asserts HTTP 200 and returns the JSON-RPC response.
async fn post(agent: &Agent, message: &Value, headers: &[(&str, &str)]) -> Value {
    let reply = agent.post_raw(serde_json::to_vec(message).unwrap(), headers).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.raw);
    let body = reply.body.unwrap_or_else(|| panic!("not JSON: {}", reply.raw));
    assert_eq!(body["id"], message["id"], "the agent's own id comes back: {body}");
    body
}

/// [`post`] for many concurrent requests: one shared client, no assertions, failures as text.
async fn post_on(http: reqwest::Client, url: String, session: String, message: Value) -> Result<Value, String> {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(SESSION, session)
        .body(serde_json::to_vec(&message).expect("JSON"))
        .send()
        .await
        .map_err(|error| format!("send: {error}"))?;
    let status = response.status();
    let raw = response.text().await.map_err(|error| format!("read: {error}"))?;
    if status != StatusCode::OK {
        return Err(format!("HTTP {status}: {raw}"));
    }
    serde_json::from_str(&raw).map_err(|error| format!("{error}: {raw}"))
}

fn replayed(body: &Value) -> bool {
    body["result"]["_meta"][REPLAYED_META] == json!(true)
}

/// Asserts a plain successful result of the fault backend's echo of `said`.
fn assert_echo(body: &Value, said: &str) {
    assert!(body.get("error").is_none(), "{body}");
    assert_eq!(text(body), said, "{body}");
    assert_ne!(body["result"]["isError"], json!(true), "{body}");
    assert!(outcome(body).is_none(), "a result that ran carries no failure outcome: {body}");
}

/// Asserts an error result with outcome `expected` whose text contains every phrase; returns the text.
fn assert_failure<'a>(body: &'a Value, expected: &str, phrases: &[&str]) -> &'a str {
    assert!(body.get("error").is_none(), "a failure is a CallToolResult, not a JSON-RPC error: {body}");
    assert_eq!(body["result"]["isError"], json!(true), "{body}");
    assert_eq!(outcome(body), Some(expected), "{body}");
    let said = text(body);
    for phrase in phrases {
        assert!(said.contains(phrase), "{phrase:?} missing from {said:?}");
    }
    said
}

fn backend_address(backend: &FaultBackend) -> SocketAddr {
    let url = backend.url();
    let authority = url.strip_prefix("http://").and_then(|rest| rest.split('/').next()).expect("http URL");
    authority.parse().expect("a loopback address")
}

async fn readyz(base: &str) -> (StatusCode, Value) {
    let response = reqwest::get(format!("{base}/readyz")).await.expect("readyz answers");
    let status = response.status();
    (status, serde_json::from_str(&response.text().await.unwrap()).expect("readyz is JSON"))
}

// ---------------------------------------------------------------------------------------------------------------
// 1–6: every store

/// The same JSON-RPC id re-sent on the same session is the same call: it runs once, the second answer is the
/// stored result marked replayed. Another id, or the same id on another session, is another call.
async fn a_resent_request_id_runs_once(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    let message = call(42, "once", None);
    let first = post(&agent, &message, &[]).await;
    assert_echo(&first, "once");
    assert!(!replayed(&first), "{first}");
    let second = post(&agent, &message, &[]).await;
    assert_eq!(backend.executions(RAN), 1, "a re-sent request id must not run again");
    assert!(replayed(&second), "{second}");
    assert_eq!(second["result"]["content"], first["result"]["content"], "the stored result comes back");
    assert!(outcome(&second).is_none(), "{second}");

    assert_echo(&post(&agent, &call(43, "once", None), &[]).await, "once");
    assert_eq!(backend.executions(RAN), 2, "a new id is a new call");
    let other = Agent::connected(gateway.mcp()).await;
    let elsewhere = post(&other, &message, &[]).await;
    assert_echo(&elsewhere, "once");
    assert!(!replayed(&elsewhere));
    assert_eq!(backend.executions(RAN), 3, "the same id on another session is a new call");
}

/// An idempotency key is the agent's, not the session's: sent once in `_meta` and once in the `Idempotency-Key`
/// header, from two sessions, it runs once.
async fn one_key_from_two_sessions_runs_once(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let (first_agent, second_agent) = (Agent::connected(gateway.mcp()).await, Agent::connected(gateway.mcp()).await);
    assert_ne!(first_agent.session, second_agent.session);

    let first = post(&first_agent, &call(1, "order 42", Some("order-42")), &[]).await;
    assert_echo(&first, "order 42");
    assert!(!replayed(&first));
    let second = post(&second_agent, &call(1, "order 42", None), &[("Idempotency-Key", "order-42")]).await;
    assert_eq!(backend.executions(RAN), 1, "one key, one execution");
    assert!(replayed(&second), "{second}");
    assert_eq!(second["result"]["content"], first["result"]["content"]);

    // And the other way round: the header first, then `_meta`.
    let third = post(&second_agent, &call(2, "order 43", None), &[("Idempotency-Key", "order-43")]).await;
    assert_echo(&third, "order 43");
    let fourth = post(&first_agent, &call(2, "order 43", Some("order-43")), &[]).await;
    assert!(replayed(&fourth), "{fourth}");
    assert_eq!(backend.executions(RAN), 2);
}

/// Reusing a key for other arguments is the agent's mistake: JSON-RPC -32602, and nothing runs.
async fn one_key_with_other_arguments_is_refused(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    assert_echo(&post(&agent, &call(1, "pay 10", Some("payment-7")), &[]).await, "pay 10");
    for (id, headers) in [(2, &[][..]), (3, &[("Idempotency-Key", "payment-7")][..])] {
        let key = if headers.is_empty() { Some("payment-7") } else { None };
        let refused = post(&agent, &call(id, "pay 1000", key), headers).await;
        assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("other arguments") && message.contains("new key"), "{message}");
        assert!(refused.get("result").is_none());
    }
    assert_eq!(backend.executions(RAN), 1, "the refused calls did not run");
    let again = post(&agent, &call(4, "pay 10", Some("payment-7")), &[]).await;
    assert!(replayed(&again), "the original arguments still get the stored result: {again}");
    assert_eq!(backend.executions(RAN), 1);
}

/// Single flight: 1000 concurrent duplicates of one key while the slow tool runs; one execution, and every
/// request gets its result (999 of them replayed).
async fn a_thousand_concurrent_duplicates_run_once(store: Store) {
    const DUPLICATES: u64 = 1000;
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend =
        FaultBackend::start(Script { call_delay: Some(Duration::from_millis(300)), ..Script::default() }).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let session = agent.session.clone().expect("a session");

    let mut calls = JoinSet::new();
    for id in 1..=DUPLICATES {
        let message = call(id, "single flight", Some("flight-1000"));
        calls.spawn(post_on(agent.http.clone(), gateway.mcp(), session.clone(), message));
    }
    let (mut answered, mut fresh) = (0, 0);
    while let Some(joined) = calls.join_next().await {
        let body = joined.expect("the request task").unwrap_or_else(|error| panic!("a duplicate failed: {error}"));
        assert!(body.get("error").is_none(), "{body}");
        assert_eq!(text(&body), "single flight", "{body}");
        assert!(outcome(&body).is_none(), "every duplicate waits for the result: {body}");
        answered += 1;
        fresh += usize::from(!replayed(&body));
    }
    assert_eq!(answered, DUPLICATES);
    assert_eq!(backend.executions(RAN), 1, "1000 duplicates, one execution");
    assert_eq!(fresh, 1, "exactly one answer is the call itself; the others are replays");
}

/// The backend reads the call and drops the connection: the call may have run, so the outcome is `unknown`; a
/// retry with the same key is answered from the ledger — not sent, still `unknown` — even once the backend is
/// healthy again.
async fn a_lost_answer_is_unknown_and_never_repeated(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script { drop_after_call: true, ..Script::default() }).await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;

    let lost = post(&agent, &call(1, "send email", Some("email-5")), &[]).await;
    assert_eq!(backend.executions(RAN), 1);
    assert_failure(&lost, "unknown", &["`fault`", "the backend may have received it", "may have run", "not repeated"]);
    let claim = lost["result"]["_meta"][CLAIM_META].as_str().expect("the claim is named");
    assert!(claim.contains("email-5"), "{claim}");
    assert!(!replayed(&lost));

    backend.update(|script| script.drop_after_call = false);
    let retry = post(&agent, &call(2, "send email", Some("email-5")), &[]).await;
    assert_eq!(backend.executions(RAN), 1, "a call that may have run is never repeated");
    assert_failure(&retry, "unknown", &["outcome is unknown", "not repeated", "switchyard calls resolve"]);
    assert_eq!(retry["result"]["_meta"][CLAIM_META], json!(claim));
    assert!(replayed(&retry), "{retry}");
}

/// A backend that cannot be reached did not get the call: `not_delivered`, the claim is released (gone from the
/// ledger), and a retry with the same key runs once the backend is up.
async fn an_unreachable_backend_releases_the_claim(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    // The gateway reaches the backend through a proxy, so the backend can be "down" on its configured port.
    let mut proxy = TcpProxy::start(backend_address(&backend)).await;
    let gateway = ledger.gateway(&format!("http://{}/mcp", proxy.address())).await;
    let agent = Agent::connected(gateway.mcp()).await;
    proxy.cut().await;

    for id in [1, 2] {
        let refused = post(&agent, &call(id, "deploy", Some("deploy-6")), &[]).await;
        assert_failure(&refused, "not_delivered", &["`fault`", "connect", "did not run", "safe to retry"]);
        let claim = refused["result"]["_meta"][CLAIM_META].as_str().expect("the claim is named");
        let key = ClaimKey::parse(claim).expect("a claim key");
        let stored = gateway.router.ledger().store.get(&key).await.expect("the ledger answers");
        assert!(stored.is_none(), "a call that was not delivered leaves no claim: {stored:?}");
    }
    assert_eq!(backend.executions(RAN), 0);

    proxy.restore().await;
    let ran = post(&agent, &call(3, "deploy", Some("deploy-6")), &[]).await;
    assert_echo(&ran, "deploy");
    assert!(!replayed(&ran));
    assert_eq!(backend.executions(RAN), 1, "the released key runs once the backend is up");
    let replay = post(&agent, &call(4, "deploy", Some("deploy-6")), &[]).await;
    assert!(replayed(&replay), "{replay}");
    assert_eq!(backend.executions(RAN), 1);
}

// ---------------------------------------------------------------------------------------------------------------
// 7–8: the durable stores, with the real binary

/// A gateway process configuration with a fixed data directory and session key, so it can be restarted as the
/// same instance (and the agent's session stays valid).
pub(crate) struct Instance {
    config: PathBuf,
    log: PathBuf,
}

impl Instance {
    /// `<dir>/<name>/` is the data directory; `secret` the session key file (shared by replicas).
    pub(crate) fn new(dir: &Path, name: &str, ledger_url: &str, backend_url: &str, secret: &Path) -> Instance {
        let data_dir = dir.join(name);
        // Replicas share the vault key as they share the session key: a result one seals, the other replays.
        crate::support::gateway::with_shared_vault_key(&data_dir);
        let text = format!(
            "[server]\ndata_dir = {:?}\nsession_secret_file = {:?}\n\n{}\n{}",
            data_dir.display().to_string(),
            secret.display().to_string(),
            ledger_section(ledger_url),
            backend_toml("fault", backend_url, ""),
        );
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, text).expect("write the gateway configuration");
        Instance { config, log: dir.join(format!("{name}.log")) }
    }

    pub(crate) async fn start(&self) -> ChildGateway {
        ChildGateway::spawn(&self.config, &self.log).await
    }
}

/// The gateway is killed (SIGKILL) while the backend runs the call; restarted as the same instance, it marks the
/// orphaned claim `unknown`, and the retry is told so — it is not sent again.
async fn a_call_cut_short_by_sigkill_is_unknown_after_restart(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script { call_delay: Some(Duration::from_secs(3)), ..Script::default() }).await;
    let dir = ScratchDir::new("sigkill");
    let instance = Instance::new(dir.path(), "gw", &ledger.url, &backend.url(), &dir.path().join("session.key"));
    let gateway = instance.start().await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let session = agent.session.clone().expect("a session");

    let message = call(1, "charge card", Some("charge-7"));
    let in_flight = tokio::spawn(post_on(agent.http.clone(), gateway.mcp(), session.clone(), message.clone()));
    eventually("the backend has the call", || async { backend.executions(RAN) == 1 }).await;
    gateway.kill().await;
    let lost = in_flight.await.expect("the request task");
    assert!(lost.is_err(), "the agent never heard back from the killed gateway: {lost:?}");

    let gateway = instance.start().await;
    agent.url = gateway.mcp();
    let retry = post(&agent, &call(2, "charge card", Some("charge-7")), &[]).await;
    assert_eq!(backend.executions(RAN), 1, "the call the killed gateway sent is not sent again");
    assert_failure(&retry, "unknown", &["outcome is unknown", "restarted before it finished", "not repeated"]);
    assert!(replayed(&retry), "{retry}");
    assert!(retry["result"]["_meta"][CLAIM_META].as_str().is_some_and(|claim| claim.contains("charge-7")));
}

/// A completed call's result is in the durable ledger: after the gateway is killed and restarted, retries (by
/// idempotency key, and by re-sent request id on the same session) are answered from it. (The completion is
/// written just after the agent is answered, so the test waits until it is durable before killing; a crash
/// within that window is `a_crash_before_the_completion_is_durable_is_unknown_not_rerun`.)
async fn a_completed_result_survives_a_restart(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("restart");
    let instance = Instance::new(dir.path(), "gw", &ledger.url, &backend.url(), &dir.path().join("session.key"));
    let gateway = instance.start().await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let by_key = call(1, "ship order", Some("ship-8"));
    let by_id = call(2, "ship other order", None);
    let first_by_key = post(&agent, &by_key, &[]).await;
    assert_echo(&first_by_key, "ship order");
    assert_echo(&post(&agent, &by_id, &[]).await, "ship other order");
    assert_eq!(backend.executions(RAN), 2);
    Outside::open(&ledger, &dir.path().join("gw")).await.expect("a durable store").until_settled().await;
    gateway.kill().await;

    let gateway = instance.start().await;
    agent.url = gateway.mcp();
    let replay = post(&agent, &call(3, "ship order", Some("ship-8")), &[]).await;
    assert!(replayed(&replay), "{replay}");
    assert_eq!(replay["result"]["content"], first_by_key["result"]["content"]);
    let resent = post(&agent, &by_id, &[]).await;
    assert!(replayed(&resent), "{resent}");
    assert_eq!(text(&resent), "ship other order");
    assert_eq!(backend.executions(RAN), 2, "nothing ran again after the restart");
}

// ---------------------------------------------------------------------------------------------------------------
// 9–10: PostgreSQL only

/// Two gateway processes on one PostgreSQL ledger and one session key; 100 duplicates of one key alternate
/// between them while the slow tool runs: one execution, every request gets the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_share_one_flight() {
    let Some(ledger) = Ledger::open(Store::Postgres).await else { return };
    let backend =
        FaultBackend::start(Script { call_delay: Some(Duration::from_millis(300)), ..Script::default() }).await;
    let dir = ScratchDir::new("replicas");
    let secret = dir.path().join("session.key");
    // Started one after the other: the first creates the schema and the session key, the second finds them.
    let first = Instance::new(dir.path(), "a", &ledger.url, &backend.url(), &secret).start().await;
    let second = Instance::new(dir.path(), "b", &ledger.url, &backend.url(), &secret).start().await;
    let agent = Agent::connected(first.mcp()).await;
    let session = agent.session.clone().expect("a session");

    let mut calls = JoinSet::new();
    for id in 0..100u64 {
        let url = if id % 2 == 0 { first.mcp() } else { second.mcp() };
        calls.spawn(post_on(agent.http.clone(), url, session.clone(), call(id, "replicated", Some("replicas-9"))));
    }
    let mut fresh = 0;
    for joined in calls.join_all().await {
        let body = joined.unwrap_or_else(|error| panic!("a duplicate failed: {error}"));
        assert_eq!(text(&body), "replicated", "{body}");
        assert!(outcome(&body).is_none(), "every duplicate waits for the result: {body}");
        fresh += usize::from(!replayed(&body));
    }
    assert_eq!(backend.executions(RAN), 1, "100 duplicates on two replicas, one execution");
    assert_eq!(fresh, 1);
}

/// PostgreSQL goes away mid-run (the proxy the ledger URL names is cut): the gateway fails closed — `tools/call`
/// is `not_delivered` with a sentence naming the ledger and nothing reaches the backend, `tools/list` still works,
/// `/readyz` is not ready with the ledger unavailable — and recovers when PostgreSQL is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_going_away_fails_closed_then_recovers() {
    let Some(schema) = PgSchema::create().await else { return };
    let mut proxy = TcpProxy::start(postgres::address()).await;
    let backend = FaultBackend::start(Script::default()).await;
    let sections = ledger_section(&schema.url_through(&proxy));
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &backend.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    assert_echo(&post(&agent, &call(1, "before", Some("before-10")), &[]).await, "before");
    assert_eq!(backend.executions(RAN), 1);

    proxy.cut().await;
    for (id, key) in [(2, "during-10"), (3, "before-10")] {
        let refused = post(&agent, &call(id, "during", Some(key)), &[]).await;
        assert_failure(&refused, "not_delivered", &["ledger", "did not run", "safe to retry"]);
    }
    assert_eq!(backend.executions(RAN), 1, "nothing reaches the backend without a claim");
    let listed = post(&agent, &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}), &[]).await;
    assert!(listed["result"]["tools"].as_array().is_some_and(|tools| tools.iter().any(|t| t["name"] == TOOL)));
    let (status, report) = readyz(&gateway.base).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{report}");
    assert_eq!(report["ready"], json!(false));
    assert_eq!(report["ledger"]["status"], "unavailable", "{report}");
    assert_eq!(report["ledger"]["store"], "postgres", "{report}");

    proxy.restore().await;
    assert!(wait_ready(&gateway.base).await, "ready again once PostgreSQL is back");
    let ran = post(&agent, &call(5, "during", Some("during-10")), &[]).await;
    assert_echo(&ran, "during");
    assert_eq!(backend.executions(RAN), 2, "the refused call runs once the ledger is back");
    let replay = post(&agent, &call(6, "before", Some("before-10")), &[]).await;
    assert!(replayed(&replay), "claims made before the outage are still there: {replay}");
    assert_eq!(backend.executions(RAN), 2);
}

/// `serve` started while PostgreSQL cannot be reached waits for it instead of exiting: `/healthz` answers,
/// `/readyz` says the ledger is unavailable and why, a call is refused with 503 and `Retry-After` and reaches no
/// backend; once PostgreSQL is there the gateway opens its ledger and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_waits_for_an_unreachable_ledger_and_says_why() {
    let Some(schema) = PgSchema::create().await else { return };
    let mut proxy = TcpProxy::start(postgres::address()).await;
    proxy.cut().await;
    let backend = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("ledger-wait");
    let instance = Instance::new(dir.path(), "gw", &schema.url_through(&proxy), &backend.url(), &dir.path().join("s"));
    let gateway = ChildGateway::spawn_unready(&instance.config, &instance.log).await;

    let health = reqwest::get(format!("{}/healthz", gateway.base)).await.expect("/healthz");
    assert_eq!(health.status(), StatusCode::OK, "the process is up while it waits");
    let (status, report) = readyz(&gateway.base).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{report}");
    assert_eq!((&report["ledger"]["status"], &report["ledger"]["store"]), (&json!("unavailable"), &json!("postgres")));
    assert!(report["ledger"]["attempts"].as_u64().is_some_and(|attempts| attempts >= 1), "{report}");
    let error = report["ledger"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("unavailable"), "a caller on this machine reads why: {report}");
    let refused = reqwest::Client::new()
        .post(gateway.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(call(1, "early", Some("early-1")).to_string())
        .send()
        .await
        .expect("POST /mcp");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().contains_key("retry-after"));

    proxy.restore().await;
    assert!(wait_ready(&gateway.base).await, "ready once PostgreSQL is reachable");
    let agent = Agent::connected(gateway.mcp()).await;
    assert_echo(&post(&agent, &call(2, "late", Some("late-1")), &[]).await, "late");
    assert_eq!(backend.executions(RAN), 1, "only the call made once the ledger was open ran");
    let log = std::fs::read_to_string(&instance.log).unwrap_or_default();
    assert!(log.contains("cannot open the call ledger; waiting for it"), "{log}");
    gateway.kill().await;
}

// ---------------------------------------------------------------------------------------------------------------
// 11: SQLite only

/// SQLite that cannot be written fails closed: `not_delivered` naming the ledger, nothing reaches the backend.
///
/// How writes are made to fail: tests run as root, where permissions do not stop writes — and even for another
/// user, `chmod` after start cannot affect the gateway's connection, whose files are already open (permissions are
/// checked at open). So a second connection holds SQLite's write lock (`BEGIN IMMEDIATE`), as a stuck process
/// sharing the file would; the gateway's claim gives up after the store's busy timeout (5 s). A ledger file that
/// cannot be opened at all stops the gateway from starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_that_cannot_be_written_fails_closed() {
    let backend = FaultBackend::start(Script::default()).await;
    let gateway =
        TestGateway::start_with("", &ledger_section("sqlite"), &backend_toml("fault", &backend.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    assert_echo(&post(&agent, &call(1, "before", Some("before-11")), &[]).await, "before");

    let blocker = rusqlite::Connection::open(gateway.data_dir.join("ledger.db")).expect("open the ledger file");
    blocker.busy_timeout(Duration::from_secs(5)).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    let refused = post(&agent, &call(2, "during", Some("during-11")), &[]).await;
    let said = assert_failure(&refused, "not_delivered", &["ledger", "did not run", "safe to retry"]);
    assert!(said.contains("SQLite"), "{said}");
    assert_eq!(backend.executions(RAN), 1, "nothing reaches the backend without a claim");

    blocker.execute_batch("ROLLBACK").unwrap();
    assert_echo(&post(&agent, &call(3, "during", Some("during-11")), &[]).await, "during");
    assert_eq!(backend.executions(RAN), 2, "the refused call runs once the ledger can be written");

    // A ledger path that cannot be created (under a regular file, which no permission can fix) refuses to start.
    let dir = ScratchDir::new("unwritable");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let text = format!(
        "[server]\ndata_dir = {:?}\n{}",
        dir.path().join("data").display().to_string(),
        ledger_section(&format!("sqlite://{}/ledger.db", file.display())),
    );
    let config = switchyard::config::Config::from_toml_str(&text, "test.toml", Vec::<(String, String)>::new())
        .expect("valid configuration");
    let refused = switchyard::gateway::Gateway::build(config).await.err().expect("the gateway does not start");
    assert!(refused.to_string().contains("ledger"), "{refused}");
}
