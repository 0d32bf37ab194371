//! Backend health end to end (docs/operations.md, *Backend health*): a backend killed after discovery is `down`
//! in `/readyz`, the console and `switchyard_backend_up` within its `health_interval`, and `up` in all three
//! once it answers again; a stdio backend whose process exits at start is down; `/readyz` counts the tools
//! agents see, after the backend's tool filter. And calls during start-up (*Calls during start-up*): a call of a
//! backend still being discovered waits up to `[server] discovery_wait` for it, then is answered
//! `not_delivered`, never "unknown tool". A stdio process killed from outside stops counting as live at once, in
//! `switchyard_stdio_processes` and the console alike.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::stdio::{FAULT_SCRIPT, assert_gone, python};
use crate::support::assert::{eventually, text};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, TestGateway, backend_toml};

async fn json(url: String) -> Value {
    serde_json::from_str(&reqwest::get(url).await.unwrap().text().await.unwrap()).unwrap()
}

/// The backend's health as `/readyz`, the console and `/metrics` show it.
async fn health_everywhere(gateway: &TestGateway, backend: &str) -> (Value, Value, Option<String>) {
    let readyz = json(format!("{}/readyz", gateway.base)).await;
    let console = json(format!("{}/admin/api/backends", gateway.base)).await;
    let listed = console["backends"].as_array().unwrap().iter().find(|view| view["name"] == backend).cloned();
    let metrics = reqwest::get(format!("{}/metrics", gateway.base)).await.unwrap().text().await.unwrap();
    let series = format!("switchyard_backend_up{{backend=\"{backend}\"}} ");
    let up = metrics.lines().find_map(|line| line.strip_prefix(&series).map(str::to_owned));
    (readyz["backends"][backend]["health"].clone(), listed.unwrap()["health"].clone(), up)
}

async fn agree_on(gateway: &TestGateway, backend: &str, state: &str) -> bool {
    let (readyz, console, metric) = health_everywhere(gateway, backend).await;
    let up = if state == "up" { "1" } else { "0" };
    readyz["state"] == state && console["state"] == state && metric.as_deref() == Some(up)
}

#[tokio::test]
async fn a_backend_killed_after_discovery_is_down_everywhere_and_up_when_it_returns() {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let url = format!("http://{address}/mcp");
    let gateway = TestGateway::start("", &backend_toml("demo", &url, "health_interval = \"200ms\"")).await;
    eventually("the demo is up in all three places", || agree_on(&gateway, "demo", "up")).await;

    demo.abort();
    eventually("the killed demo is down in all three places", || agree_on(&gateway, "demo", "down")).await;
    let (readyz, console, _) = health_everywhere(&gateway, "demo").await;
    assert!(readyz["error"].as_str().is_some_and(|error| !error.is_empty()), "readyz says why: {readyz}");
    assert_eq!(console["error"], readyz["error"], "one sentence in both");
    assert!(readyz["down_since_ms"].as_u64().is_some(), "{readyz}");

    let (_, _back) = switchyard::demo::spawn(address).await.unwrap();
    eventually("the returned demo is up in all three places", || agree_on(&gateway, "demo", "up")).await;
    let (readyz, _, _) = health_everywhere(&gateway, "demo").await;
    assert!(readyz.get("error").is_none() && readyz.get("down_since_ms").is_none(), "{readyz}");
}

#[tokio::test]
async fn readyz_counts_the_tools_agents_see_and_a_process_that_cannot_start_is_down() {
    let (address, _demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let filtered =
        backend_toml("demo", &format!("http://{address}/mcp"), "[backends.tools]\nallow = [\"echo\", \"add\"]");
    let missing = "[[backends]]\nname = \"missing\"\ntransport = \"stdio\"\ncommand = \"/bin/false\"\n";
    let gateway = TestGateway::start("", &(filtered + missing)).await;
    let readyz = json(format!("{}/readyz", gateway.base)).await;
    assert_eq!(readyz["backends"]["demo"]["tools"], 2, "after the filter: {readyz}");
    eventually("the stdio backend whose process exits at once is down", || agree_on(&gateway, "missing", "down")).await;
}

/// A gateway (`server` keys) whose one backend, `slow`, takes `delay` to answer `initialize`, just launched, and an
/// agent connected to it.
async fn starting(delay: Duration, server: &str) -> (FaultBackend, TestGateway, Agent) {
    let slow = FaultBackend::start(Script { initialize_delay: Some(delay), ..Script::default() }).await;
    let gateway = TestGateway::launch(server, "", &backend_toml("slow", &slow.url(), "")).await;
    let agent = Agent::connected(gateway.mcp()).await;
    (slow, gateway, agent)
}

#[tokio::test]
async fn a_call_during_discovery_waits_for_it_and_runs() {
    let (slow, _gateway, mut agent) = starting(Duration::from_millis(700), "").await;
    let echoed = agent.call_tool("slow__echo", json!({"text": "after discovery"})).await;
    assert_eq!(text(&echoed), "after discovery", "{echoed}");
    assert_eq!(slow.executions("echo"), 1);
}

#[tokio::test]
async fn a_call_still_waiting_when_discovery_wait_ends_is_not_delivered_and_says_the_backend_is_starting() {
    let (slow, _gateway, mut agent) = starting(Duration::from_secs(30), "discovery_wait = \"100ms\"").await;
    let refused = agent.call_tool("slow__echo", json!({"text": "too early"})).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(refused["result"]["_meta"]["switchyard/outcome"], "not_delivered", "{refused}");
    let sentence = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(sentence.contains("`slow` is starting") && !sentence.contains("unknown tool"), "{sentence}");
    let elsewhere = agent.call_tool("nobody__echo", json!({})).await;
    assert_eq!(elsewhere["error"]["code"], -32602, "a name no starting backend owns is unknown at once: {elsewhere}");
    assert_eq!(slow.executions("echo"), 0);
}

/// The live processes of `backend` as `switchyard_stdio_processes` and the console count them.
async fn processes(gateway: &TestGateway, backend: &str) -> (Option<String>, Value) {
    let metrics = reqwest::get(format!("{}/metrics", gateway.base)).await.unwrap().text().await.unwrap();
    let series = format!("switchyard_stdio_processes{{backend=\"{backend}\"}} ");
    let gauge = metrics.lines().find_map(|line| line.strip_prefix(&series).map(str::to_owned));
    let console = json(format!("{}/admin/api/backends", gateway.base)).await;
    let listed = console["backends"].as_array().unwrap().iter().find(|view| view["name"] == backend).cloned();
    (gauge, listed.unwrap()["processes"].clone())
}

#[tokio::test]
async fn a_stdio_process_killed_from_outside_stops_counting_as_live() {
    let backend = format!(
        "[[backends]]\nname = \"fault\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [{FAULT_SCRIPT:?}, \"normal\"]\n",
        python().display().to_string()
    );
    let gateway = TestGateway::start("", &backend).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let pid: u32 = text(&agent.call_tool("fault__pid", json!({})).await).parse().expect("a PID");
    assert_eq!(processes(&gateway, "fault").await, (Some("2".into()), json!(2)), "discovery's and the agent's");
    // SAFETY: kill reads no memory of ours; the PID is the agent's backend process, a child of this test.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
    assert_gone(pid).await;
    eventually("the killed process no longer counts", || async {
        processes(&gateway, "fault").await == (Some("1".into()), json!(1))
    })
    .await;
    let pid_again = text(&agent.call_tool("fault__pid", json!({})).await).to_owned();
    assert_ne!(pid_again, pid.to_string(), "the next call started a new process");
    assert_eq!(processes(&gateway, "fault").await, (Some("2".into()), json!(2)));
}
