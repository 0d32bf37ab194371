//! `[[limits]]` through the running gateway, counted at the fault backend: a rate admits its burst then its rate,
//! a daily quota resets at midnight UTC, concurrency admits two of ten parallel calls, the loop guard refuses the
//! fourth identical call (replays from the ledger not counted), `methods = ["*"]` answers other requests with 429,
//! `/admin/api/limits` and `switchyard limits` show each principal's use, two replicas on PostgreSQL share one
//! rate (within the documented bound), and a reload applies a changed rate while an unchanged limit keeps its
//! counters. Rates and windows run on the gateway's limit clock, stopped by the test, so nothing depends on
//! scheduling.

use std::time::{Duration, UNIX_EPOCH};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::router::testing::{advance_limit_clock, pause_limit_clock};
use tokio::sync::mpsc;

use crate::support::assert::{eventually, outcome, text};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway, backend_toml};
use crate::support::postgres::PgSchema;

/// 2026-12-04T23:59:50Z: ten seconds before a UTC day ends.
const BEFORE_MIDNIGHT: u64 = 20_791 * 86_400 - 10;

async fn limited_gateway(fault: &FaultBackend, sections: &str) -> TestGateway {
    let gateway = TestGateway::start_with("", sections, &backend_toml("fault", &fault.url(), "")).await;
    gateway.wait_for_tool("fault__echo").await;
    pause_limit_clock(&gateway.router, UNIX_EPOCH + Duration::from_secs(BEFORE_MIDNIGHT));
    gateway
}

fn echo(n: usize) -> Value {
    json!({"text": format!("call {n}")})
}

/// Calls `fault__echo` `calls` times (each with other arguments); how many were refused by a limit, after checking
/// that each refusal reads as one.
async fn refused_of(agent: &mut Agent, calls: usize, limit: &str) -> usize {
    let mut refused = 0;
    for n in 0..calls {
        let answer = agent.call_tool("fault__echo", echo(n)).await;
        if answer["result"]["isError"] == true {
            assert_refused(&answer, limit);
            refused += 1;
        }
    }
    refused
}

/// Starts `calls` calls of `fault__echo` at once, each with other arguments, spread over `agents`' sessions; their
/// answers, in the order they come.
fn parallel_calls(agents: &[Agent], calls: usize) -> mpsc::UnboundedReceiver<Value> {
    let (answers, answered) = mpsc::unbounded_channel();
    for n in 0..calls {
        let (agent, answers) = (agents[n % agents.len()].same_session(), answers.clone());
        tokio::spawn(async move {
            let message = json!({"jsonrpc": "2.0", "id": 5000 + n, "method": "tools/call",
                "params": {"name": "fault__echo", "arguments": echo(n)}});
            let _ = answers.send(agent.send(&message).await.body.expect("a JSON-RPC answer"));
        });
    }
    answered
}

/// `answer` is a tool call a limit named `limit` refused: not sent, with when to retry.
fn assert_refused(answer: &Value, limit: &str) -> u64 {
    assert_eq!(outcome(answer), Some("not_delivered"), "{answer}");
    assert!(text(answer).contains(&format!("limit `{limit}`")), "names the limit: {answer}");
    let retry_after = answer["result"]["_meta"]["switchyard/retry-after"].as_u64().expect("switchyard/retry-after");
    assert!(text(answer).contains(&format!("Retry in {retry_after} seconds")), "{answer}");
    retry_after
}

#[tokio::test]
async fn a_rate_admits_exactly_its_burst_then_its_rate() {
    let fault = FaultBackend::start(Script::default()).await;
    let limit = "[[limits]]\nname = \"search\"\nprincipals = [\"*\"]\nrate = \"5/s\"\nburst = 5\n";
    let gateway = limited_gateway(&fault, limit).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(refused_of(&mut agent, 8, "search").await, 3, "the burst of 5 passes, the rest is refused");
    assert_eq!(fault.executions("echo"), 5, "refused calls never reach the backend");
    advance_limit_clock(&gateway.router, Duration::from_secs(1));
    assert_eq!(refused_of(&mut agent, 7, "search").await, 2, "a second later: 5 more");
    advance_limit_clock(&gateway.router, Duration::from_millis(200));
    assert_eq!(refused_of(&mut agent, 3, "search").await, 2, "200 ms later: exactly one");
    assert_eq!(fault.executions("echo"), 11);
    let metrics = gateway.router.ledger().metrics.encode();
    let limited = "switchyard_tool_calls_total{backend=\"fault\",tool=\"fault__echo\",outcome=\"limited\"} 7";
    assert!(metrics.contains(limited), "{metrics}");
    assert!(metrics.contains("switchyard_limit_refusals_total{limit=\"search\"} 7"), "{metrics}");
    let console = reqwest::get(format!("{}/admin/api/limits", gateway.base)).await.expect("the console answers");
    let listed: Value = serde_json::from_str(&console.text().await.expect("a body")).expect("JSON");
    let expected = json!([{"limit": "search", "principal": "anonymous@127.0.0.1", "tokens": 0, "burst": 5}]);
    assert_eq!(listed["limits"], expected, "the console shows the bucket emptied");
}

#[tokio::test]
async fn a_daily_quota_resets_at_midnight_utc() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = limited_gateway(&fault, "[[limits]]\nprincipals = [\"*\"]\nquota = 3\nperiod = \"1d\"\n").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(refused_of(&mut agent, 3, "limits[0]").await, 0);
    let refused = agent.call_tool("fault__echo", echo(4)).await;
    assert_eq!(assert_refused(&refused, "limits[0]"), 10, "until midnight");
    advance_limit_clock(&gateway.router, Duration::from_secs(9));
    assert_eq!(refused_of(&mut agent, 1, "limits[0]").await, 1, "still the same day");
    advance_limit_clock(&gateway.router, Duration::from_secs(1));
    assert_eq!(refused_of(&mut agent, 4, "limits[0]").await, 1, "a new day: three more");
    assert_eq!(fault.executions("echo"), 6);
}

#[tokio::test]
async fn concurrency_two_admits_two_of_ten_parallel_calls() {
    let fault = FaultBackend::start(Script { hold_calls: true, ..Script::default() }).await;
    let gateway = limited_gateway(&fault, "[[limits]]\nprincipals = [\"*\"]\nconcurrency = 2\n").await;
    let agent = Agent::connected(gateway.mcp()).await;
    let mut answered = parallel_calls(std::slice::from_ref(&agent), 10);
    // The two admitted calls are held by the backend, so the first eight answers are the refusals.
    for _ in 0..8 {
        assert_refused(&answered.recv().await.expect("an answer"), "limits[0]");
    }
    eventually("two calls reach the backend", || async { fault.executions("echo") == 2 }).await;
    fault.release_calls();
    for _ in 0..2 {
        assert_eq!(answered.recv().await.expect("an answer")["result"]["isError"], Value::Null);
    }
    let mut agent = agent.same_session();
    assert_eq!(text(&agent.call_tool("fault__echo", echo(11)).await), "call 11", "the permits came back");
}

#[tokio::test]
async fn the_loop_guard_refuses_the_fourth_identical_call_and_not_replays_or_other_arguments() {
    let fault = FaultBackend::start(Script::default()).await;
    let gateway = limited_gateway(&fault, "[[limits]]\nname = \"loop\"\nprincipals = [\"*\"]\nrepeat = 3\n").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let same = json!({"text": "again"});
    let keyed = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "fault__echo", "arguments": same}});
    for _ in 0..3 {
        let reply = agent.post_raw(keyed.to_string().into_bytes(), &[("Idempotency-Key", "loop-1")]).await;
        assert_eq!(text(&reply.body.expect("an answer")), "again", "the first call, then its replays");
    }
    assert_eq!(text(&agent.call_tool("fault__echo", same.clone()).await), "again");
    assert_eq!(text(&agent.call_tool("fault__echo", same.clone()).await), "again", "replays did not count");
    let fourth = agent.call_tool("fault__echo", same.clone()).await;
    assert_eq!(assert_refused(&fourth, "loop"), 600, "the first call leaves the 10 minute window then");
    assert_eq!(text(&agent.call_tool("fault__echo", json!({"text": "other"})).await), "other");
    assert_eq!(fault.executions("echo"), 4, "three identical calls and the other one");
}

#[tokio::test]
async fn a_limit_on_every_method_answers_other_requests_with_429() {
    let fault = FaultBackend::start(Script::default()).await;
    let limit = "[[limits]]\nname = \"all\"\nprincipals = [\"*\"]\nmethods = [\"*\"]\nrate = \"2/h\"\n";
    let gateway = limited_gateway(&fault, limit).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(agent.tool_names().await, ["fault__echo"], "counted: the first request");
    assert_eq!(text(&agent.call_tool("fault__echo", echo(1)).await), "call 1", "counted: the second");
    let listed = agent.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})).await;
    assert_eq!(listed.status, StatusCode::TOO_MANY_REQUESTS, "{}", listed.raw);
    assert_eq!(listed.headers["retry-after"], "1800", "one token every half hour");
    let error = &listed.body.expect("a JSON-RPC error")["error"];
    assert!(error["message"].as_str().unwrap().contains("limit `all`"), "{error}");
    assert_refused(&agent.call_tool("fault__echo", echo(2)).await, "all");
}

#[tokio::test]
async fn a_reload_applies_a_changed_rate_and_keeps_the_counters_of_an_unchanged_limit() {
    let fault = FaultBackend::start(Script::default()).await;
    let dir = ScratchDir::new("limits-reload");
    let (config, log) = (dir.path().join("switchyard.toml"), dir.path().join("gateway.log"));
    let write = |rate: &str| {
        let data_dir = dir.path().join("data").display().to_string();
        let limits = format!(
            "[[limits]]\nname = \"rate\"\nprincipals = [\"*\"]\nrate = \"{rate}\"\n\
             [[limits]]\nname = \"kept\"\nprincipals = [\"*\"]\nquota = 4\n"
        );
        let text = format!("[server]\ndata_dir = {data_dir:?}\n{limits}{}", backend_toml("fault", &fault.url(), ""));
        std::fs::write(&config, text).unwrap();
    };
    write("2/h");
    let gateway = ChildGateway::spawn(&config, &log).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    eventually("the fault backend's tools", || async { agent.same_session().tool_names().await.len() == 1 }).await;
    assert_eq!(refused_of(&mut agent, 3, "rate").await, 1, "two an hour");
    write("3/h");
    let reload = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("reload")
        .arg("--config")
        .arg(&config)
        .output()
        .await
        .expect("run switchyard reload");
    assert!(String::from_utf8_lossy(&reload.stdout).contains("limits changed"), "{reload:?}");
    assert_eq!(refused_of(&mut agent, 1, "rate").await, 0, "the new rate starts with a full bucket");
    assert_eq!(refused_of(&mut agent, 2, "kept").await, 1, "the unchanged quota of 4 kept its count of 3");
    assert_eq!(fault.executions("echo"), 4);
}

/// The documented bound on a fleet's rate over an interval W: `burst + rate·W + R·B`, with R replicas and a batch
/// B of a quarter of the burst. The clocks are stopped here (W = 0).
const FLEET_BOUND: usize = 20 + 2 * 5;

#[tokio::test]
async fn two_replicas_on_postgresql_share_one_rate_under_200_parallel_calls() {
    let Some(schema) = PgSchema::create().await else { return };
    let fault = FaultBackend::start(Script::default()).await;
    let sections = format!(
        "[ledger]\nurl = {:?}\n[[limits]]\nname = \"fleet\"\nprincipals = [\"*\"]\nrate = \"20/s\"\n",
        schema.url()
    );
    let replicas = [limited_gateway(&fault, &sections).await, limited_gateway(&fault, &sections).await];
    let agents = [Agent::connected(replicas[0].mcp()).await, Agent::connected(replicas[1].mcp()).await];
    let mut answered = parallel_calls(&agents, 200);
    let mut refused = 0;
    for _ in 0..200 {
        let answer = answered.recv().await.expect("an answer");
        if answer["result"]["isError"] == true {
            assert_refused(&answer, "fleet");
            refused += 1;
        }
    }
    let admitted = fault.executions("echo");
    assert_eq!(admitted + refused, 200);
    assert!(admitted <= FLEET_BOUND, "{admitted} admitted, more than the documented bound {FLEET_BOUND}");
    assert_eq!(admitted, 20, "on stopped clocks the fleet spends exactly the shared burst");
    let counters = replicas[0].router.ledger().store.limit_counters().await.expect("the shared counters");
    assert_eq!(counters.len(), 1, "{counters:?}");
    assert!(counters[0].limit.starts_with("fleet#") && counters[0].principal == "anonymous@127.0.0.1");
    let console = reqwest::get(format!("{}/admin/api/limits", replicas[1].base)).await.expect("the console answers");
    let listed: Value = serde_json::from_str(&console.text().await.expect("a body")).expect("JSON");
    let expected = json!([{"limit": "fleet", "principal": "anonymous@127.0.0.1", "tokens": 0, "burst": 20}]);
    assert_eq!(listed["limits"], expected, "the console reads the fleet's counters");
}

/// Two replicas on one PostgreSQL ledger share `concurrency = 2`: of ten parallel calls spread over both, two
/// reach the backend (held there) and eight are refused; once they end, the permits a replica leased go back
/// to the fleet and the other replica's next call runs.
#[tokio::test]
async fn two_replicas_on_postgresql_share_one_concurrency_limit() {
    let Some(schema) = PgSchema::create().await else { return };
    let fault = FaultBackend::start(Script { hold_calls: true, ..Script::default() }).await;
    let sections = format!(
        "[ledger]\nurl = {:?}\n[[limits]]\nname = \"pair\"\nprincipals = [\"*\"]\nconcurrency = 2\n",
        schema.url()
    );
    let replicas = [limited_gateway(&fault, &sections).await, limited_gateway(&fault, &sections).await];
    let agents = [Agent::connected(replicas[0].mcp()).await, Agent::connected(replicas[1].mcp()).await];
    let mut answered = parallel_calls(&agents, 10);
    for _ in 0..8 {
        assert_refused(&answered.recv().await.expect("an answer"), "pair");
    }
    eventually("two calls reach the backend", || async { fault.executions("echo") == 2 }).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fault.executions("echo"), 2, "no third call runs anywhere in the fleet");
    fault.release_calls();
    for _ in 0..2 {
        assert_eq!(answered.recv().await.expect("an answer")["result"]["isError"], Value::Null);
    }
    for agent in &agents {
        eventually("the permits came back to the fleet", || async {
            agent.same_session().call_tool("fault__echo", echo(20)).await["result"]["isError"] == Value::Null
        })
        .await;
    }
}

/// Runs `switchyard limits` on the file `text` in `dir`; its exit status, standard output and standard error.
async fn limits_command(dir: &ScratchDir, text: &str) -> (bool, String, String) {
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, text).unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("limits")
        .arg("--config")
        .arg(&config)
        .env_remove("SWITCHYARD_CONFIG")
        .output()
        .await
        .expect("run switchyard limits");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

#[tokio::test]
async fn the_limits_command_prints_the_shared_counters_or_says_where_they_are() {
    let Some(schema) = PgSchema::create().await else { return };
    let fault = FaultBackend::start(Script::default()).await;
    let sections = format!(
        "[ledger]\nurl = {:?}\n[[limits]]\nname = \"hourly\"\nprincipals = [\"*\"]\nrate = \"1/h\"\nburst = 2\n",
        schema.url()
    );
    let gateway = TestGateway::start_with("", &sections, &backend_toml("fault", &fault.url(), "")).await;
    gateway.wait_for_tool("fault__echo").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(refused_of(&mut agent, 2, "hourly").await, 0);
    let dir = ScratchDir::new("limits-command");
    let data_dir = dir.path().join("data").display().to_string();
    let file = format!("[server]\ndata_dir = {data_dir:?}\n{sections}");
    let (ok, out, err) = limits_command(&dir, &file).await;
    assert!(ok, "{err}");
    let line = out.lines().find(|line| line.contains("hourly")).unwrap_or_else(|| panic!("no row: {out}"));
    assert!(line.contains("anonymous@127.0.0.1") && line.contains("0/2"), "{out}");
    let local = file.replace(&format!("url = {:?}", schema.url()), "url = \"memory\"");
    let (ok, _, err) = limits_command(&dir, &local).await;
    assert!(!ok && err.contains("each gateway counts its limits in its own memory"), "{err}");
}
