//! Stdio and legacy SSE backends end to end through the gateway: the same client API serves
//! them as HTTP backends — discovery, calls, progress, relayed server requests, `/mcp/<backend>`, allow/deny and
//! prefixes — against real servers (server-everything over stdio and over legacy SSE, the Python SDK over stdio,
//! `switchyard demo-server --stdio`) and `support/fault_stdio.py` for the lifetime rules: a crash mid-call is
//! `unknown` and never repeated, a process per agent session (or one shared), idle reaping, the process cap, and
//! the process stopped with its agent session. Every process is checked by PID; the gateway stops all of them.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::gateway::read_until;
use crate::stdio::{FAULT_SCRIPT, assert_gone, is_running, python};
use crate::support::assert::{outcome, text};
use crate::support::gateway::{Agent, SESSION, TestGateway};
use crate::support::interop::{InteropServer, everything_command, python_interpreter};
use crate::support::stdio_gate::Gate;

/// A `transport = "stdio"` backend running `program args…`, with `extra` keys.
fn stdio_toml(name: &str, program: &Path, args: &[&str], extra: &str) -> String {
    let program = program.display().to_string();
    format!(
        "[[backends]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {program:?}\nargs = {args:?}\n\
         timeout = \"60s\"\n{extra}\n"
    )
}

fn fault_toml(name: &str, mode: &str, extra: &str) -> String {
    stdio_toml(name, &python(), &[FAULT_SCRIPT, mode], extra)
}

async fn pid_of(agent: &mut Agent, tool: &str) -> u32 {
    text(&agent.call_tool(tool, json!({})).await).parse().expect("a PID")
}

async fn names_at(url: String) -> Vec<String> {
    let mut agent = Agent::connected(url).await;
    agent.tool_names().await
}

#[tokio::test]
async fn server_everything_over_stdio_serves_tools_progress_bare_names_and_filters() {
    let Some((node, entry)) = everything_command() else { return };
    let entry = entry.display().to_string();
    let backends = stdio_toml("everything", &node, &[&entry, "stdio"], "tools = { deny = [\"get-env\"] }")
        + &stdio_toml("plain", &node, &[&entry, "stdio"], "prefix = \"ev_\"\ntools = { allow = [\"echo\"] }");
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let names = agent.tool_names().await;
    assert!(names.contains(&"everything__echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"everything__get-env".to_owned()), "deny applies: {names:?}");
    assert!(names.contains(&"ev_echo".to_owned()) && !names.iter().any(|n| n == "ev_get-sum"), "{names:?}");
    let echoed = agent.call_tool("everything__echo", json!({"message": "over stdio"})).await;
    assert!(text(&echoed).contains("over stdio"), "{echoed}");

    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
        "_meta": {"progressToken": "p-7"}}});
    let reply = agent.send(&call).await;
    let progress = reply.raw.find("notifications/progress").expect("progress was relayed");
    assert!(progress < reply.raw.find("\"id\":7").expect("the result"), "progress arrives before the result");
    assert!(reply.raw.contains("\"progressToken\":\"p-7\""), "with the agent's own token: {}", reply.raw);

    let bare = names_at(format!("{}/everything", gateway.mcp())).await;
    assert!(bare.contains(&"echo".to_owned()) && !bare.contains(&"get-env".to_owned()), "{bare:?}");
    let mut direct = Agent::connected(format!("{}/plain", gateway.mcp())).await;
    assert!(text(&direct.call_tool("echo", json!({"message": "bare"})).await).contains("bare"));
}

#[tokio::test]
async fn server_everything_over_legacy_sse_is_served_like_any_backend() {
    let Some(everything) = InteropServer::everything_legacy_sse() else { return };
    let backends = format!(
        "[[backends]]\nname = \"old\"\ntransport = \"sse\"\nurl = \"{}\"\ntimeout = \"60s\"\nprefix = \"old_\"\n\
         tools = {{ deny = [\"get-env\"] }}\n",
        everything.legacy_sse_url()
    );
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let names = agent.tool_names().await;
    assert!(names.contains(&"old_echo".to_owned()) && !names.contains(&"old_get-env".to_owned()), "{names:?}");
    let echoed = agent.call_tool("old_echo", json!({"message": "legacy"})).await;
    assert!(text(&echoed).contains("legacy"), "{echoed}\n{}", everything.logs());
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "old_trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2},
        "_meta": {"progressToken": "p-9"}}});
    let reply = agent.send(&call).await;
    assert!(reply.raw.contains("\"progressToken\":\"p-9\""), "progress relayed: {}", reply.raw);
    let bare = names_at(format!("{}/old", gateway.mcp())).await;
    assert!(bare.contains(&"echo".to_owned()), "{bare:?}");
}

#[tokio::test]
async fn the_python_sdk_and_the_demo_server_work_as_stdio_backends() {
    let Some(python_sdk) = python_interpreter() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python_server.py").display().to_string();
    let switchyard = Path::new(env!("CARGO_BIN_EXE_switchyard"));
    let backends = stdio_toml("py", &python_sdk, &[&script, "--stdio", "--page-size", "4"], "")
        + &stdio_toml("demo", switchyard, &["demo-server", "--stdio"], "");
    let gateway = TestGateway::start("", &backends).await;
    gateway.wait_for_tool("py__tool_25").await;
    gateway.wait_for_tool("demo__counter").await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let names = agent.tool_names().await;
    assert!(names.contains(&"py__tool_25".to_owned()), "every page was followed: {names:?}");
    assert!(names.contains(&"demo__counter".to_owned()), "{names:?}");
    assert_eq!(text(&agent.call_tool("py__add", json!({"a": 2, "b": 3})).await), "5");
    assert_eq!(text(&agent.call_tool("demo__echo", json!({"text": "piped"})).await), "piped");
}

#[tokio::test]
async fn a_crash_mid_call_is_unknown_never_repeated_and_the_next_call_gets_a_fresh_process() {
    let gateway = TestGateway::start("", &fault_toml("crashy", "normal", "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(text(&agent.call_tool("crashy__counter", json!({})).await), "1");
    assert_eq!(text(&agent.call_tool("crashy__counter", json!({})).await), "2");
    let first = pid_of(&mut agent, "crashy__pid").await;
    // Killing the process while its call runs is the crash: the call's outcome is unknown.
    let gate = Gate::new();
    let running = agent.call_tool("crashy__gate", gate.arguments());
    let killer = async {
        gate.wait_running(1).await;
        // SAFETY: kill only sends a signal to the process this test started.
        unsafe { libc::kill(first as libc::pid_t, libc::SIGKILL) };
    };
    let (lost, ()) = tokio::join!(running, killer);
    assert_eq!(lost["result"]["isError"], true, "{lost}");
    assert_eq!(outcome(&lost), Some("unknown"), "{lost}");
    assert_gone(first).await;
    assert_eq!(text(&agent.call_tool("crashy__counter", json!({})).await), "1", "a fresh process counts anew");
    assert_ne!(pid_of(&mut agent, "crashy__pid").await, first);
}

#[tokio::test]
async fn a_crash_on_the_call_itself_is_unknown_and_a_process_dying_before_its_handshake_is_not_delivered() {
    let marker = std::env::temp_dir().join(format!("switchyard-early-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let marker_env = format!("env = {{ FAULT_EARLY_IF = {:?} }}", marker.display().to_string());
    let backends = fault_toml("crash", "crash", "") + &fault_toml("late", "normal", &marker_env);
    let gateway = TestGateway::start("", &backends).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let lost = agent.call_tool("crash__echo", json!({"text": "x"})).await;
    assert_eq!(outcome(&lost), Some("unknown"), "{lost}");

    // Discovery's process started; from now on new processes exit before their handshake.
    std::fs::write(&marker, b"").expect("the marker file");
    let refused = agent.call_tool("late__echo", json!({"text": "x"})).await;
    assert_eq!(outcome(&refused), Some("not_delivered"), "{refused}");
    let backing_off = agent.call_tool("late__echo", json!({"text": "x"})).await;
    assert_eq!(outcome(&backing_off), Some("not_delivered"), "{backing_off}");
    let detail = serde_json::to_value(gateway.router.readiness().await).expect("a report serializes");
    assert!(detail["backends"]["late"]["process_start"]["failures"].as_u64() >= Some(1), "{detail}");
    assert!(gateway.router.failing_starts().iter().any(|(name, ..)| &**name == "late"));
    std::fs::remove_file(&marker).expect("the marker is removed");
}

#[tokio::test]
async fn two_agents_get_two_processes_and_shared_sessions_one() {
    let backends = fault_toml("own", "normal", "") + &fault_toml("shared", "normal", "sessions = \"shared\"");
    let gateway = TestGateway::start("", &backends).await;
    let (mut one, mut two) = (Agent::connected(gateway.mcp()).await, Agent::connected(gateway.mcp()).await);
    assert_eq!(text(&one.call_tool("own__counter", json!({})).await), "1");
    assert_eq!(text(&two.call_tool("own__counter", json!({})).await), "1", "another agent, another process");
    assert_ne!(pid_of(&mut one, "own__pid").await, pid_of(&mut two, "own__pid").await);

    let shared = pid_of(&mut one, "shared__pid").await;
    assert_eq!(pid_of(&mut two, "shared__pid").await, shared, "one process for every agent");
    let counts = [
        text(&one.call_tool("shared__counter", json!({})).await).to_owned(),
        text(&two.call_tool("shared__counter", json!({})).await).to_owned(),
    ];
    // Discovery used the same process (tools/list only); the counter counts calls of both agents.
    assert_eq!(counts, ["1", "2"].map(str::to_owned));
    drop((one, two));
    drop(gateway);
    assert_gone(shared).await;
}

#[tokio::test]
async fn an_idle_process_is_stopped_and_the_next_call_starts_another() {
    let gateway = TestGateway::start("", &fault_toml("idle", "normal", "idle_timeout = \"1s\"")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let first = pid_of(&mut agent, "idle__pid").await;
    assert_eq!(text(&agent.call_tool("idle__sleep", json!({"seconds": 1.5})).await), "slept");
    assert!(is_running(first), "a busy process is never reaped, even past its idle timeout");
    assert_gone(first).await;
    assert_ne!(pid_of(&mut agent, "idle__pid").await, first);
}

#[tokio::test]
async fn at_the_process_cap_a_second_agent_is_not_delivered_and_no_process_is_killed() {
    let gateway = TestGateway::start("", &fault_toml("capped", "normal", "max_processes = 1")).await;
    let mut one = Agent::connected(gateway.mcp()).await;
    let mut two = Agent::connected(gateway.mcp()).await;
    // Discovery's process is idle, so the first agent's process replaces it.
    let first = pid_of(&mut one, "capped__pid").await;
    let gate = Gate::new();
    let busy = one.call_tool("capped__gate", gate.arguments());
    let refused = async {
        gate.wait_running(1).await;
        let refused = two.call_tool("capped__echo", json!({"text": "x"})).await;
        gate.release();
        refused
    };
    let (released, refused) = tokio::join!(busy, refused);
    assert_eq!(outcome(&refused), Some("not_delivered"), "{refused}");
    assert!(text(&refused).contains("max_processes"), "{refused}");
    assert_eq!(text(&released), "released", "the busy call completed");
    assert!(is_running(first), "no process was killed");
    assert_eq!(text(&two.call_tool("capped__echo", json!({"text": "now"})).await), "now", "idle one recycled");
    assert_gone(first).await;
}

#[tokio::test]
async fn the_global_process_cap_spans_backends() {
    let backends = fault_toml("first", "normal", "") + &fault_toml("second", "normal", "");
    let gateway = TestGateway::start("max_stdio_processes = 1", &backends).await;
    let mut one = Agent::connected(gateway.mcp()).await;
    let mut two = Agent::connected(gateway.mcp()).await;
    // The two discoveries share the one process place: one of them may have been refused and is retried.
    gateway.wait_for_tool("first__gate").await;
    gateway.wait_for_tool("second__echo").await;
    let gate = Gate::new();
    let busy = one.call_tool("first__gate", gate.arguments());
    let refused = async {
        gate.wait_running(1).await;
        let refused = two.call_tool("second__echo", json!({"text": "x"})).await;
        gate.release();
        refused
    };
    let (released, refused) = tokio::join!(busy, refused);
    assert_eq!(text(&released), "released");
    assert_eq!(outcome(&refused), Some("not_delivered"), "{refused}");
    assert!(text(&refused).contains("max_stdio_processes"), "{refused}");
    assert_eq!(text(&two.call_tool("second__echo", json!({"text": "now"})).await), "now", "the idle one made room");
}

#[tokio::test]
async fn deleting_the_agent_session_stops_its_process() {
    let gateway = TestGateway::start("", &fault_toml("mine", "normal", "")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let pid = pid_of(&mut agent, "mine__pid").await;
    let deleted = agent
        .http
        .delete(gateway.mcp())
        .header(SESSION, agent.session.as_deref().expect("a session"))
        .send()
        .await
        .expect("gateway reachable");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_gone(pid).await;
}

#[tokio::test]
async fn server_requests_are_relayed_and_messages_outside_calls_reach_the_agents_stream() {
    let gateway = TestGateway::start("", &fault_toml("asks", "normal", "")).await;
    let agent = Agent::connected_with(gateway.mcp(), json!({"roots": {}})).await;
    let mut stream = agent.open_stream().await;
    assert_eq!(stream.status(), StatusCode::OK);
    let call =
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "asks__ask", "arguments": {}}});
    let mut asking = agent.post_streaming(&call).await;
    let seen = read_until(&mut asking, "roots/list", Duration::from_secs(10)).await.expect("roots/list relayed");
    let request = data_with(&seen, "roots/list");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": [{"uri": "file:///stdio"}]}});
    assert_eq!(agent.send(&answer).await.status, StatusCode::ACCEPTED);
    let rest = read_until(&mut asking, "file:///stdio", Duration::from_secs(10)).await.expect("the result");
    assert!(rest.contains("\"id\":5"), "{rest}");

    let announced = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "asks__announce"}});
    assert!(agent.send(&announced).await.raw.contains("announced"));
    let outside = read_until(&mut stream, "fault://watched", Duration::from_secs(10)).await;
    assert!(outside.is_some_and(|seen| seen.contains("notifications/resources/updated")), "reached the stream");
}

#[tokio::test]
async fn a_list_change_of_a_shared_process_refreshes_the_catalog_and_tells_the_agent() {
    let gateway = TestGateway::start("", &fault_toml("grows", "normal", "sessions = \"shared\"")).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let mut stream = agent.open_stream().await;
    assert!(!agent.tool_names().await.contains(&"grows__extra".to_owned()));
    assert_eq!(text(&agent.call_tool("grows__grow", json!({})).await), "grown");
    let told = read_until(&mut stream, "notifications/tools/list_changed", Duration::from_secs(10)).await;
    assert!(told.is_some(), "the agent heard that the tools changed");
    assert!(agent.tool_names().await.contains(&"grows__extra".to_owned()), "the catalog was refreshed");
}

/// The JSON of the first `data:` line mentioning `needle`.
fn data_with(seen: &str, needle: &str) -> Value {
    let line = seen.lines().find(|line| line.starts_with("data:") && line.contains(needle)).expect("an event");
    serde_json::from_str(line.trim_start_matches("data:").trim()).expect("JSON data")
}
