//! The stdio transport driven directly: handshake and calls against the demo server over
//! stdio and against `support/fault_stdio.py`, the error classes that keep at most once, process hygiene
//! (stderr drained, the group stopped with its grandchildren, the environment cleared), relaying, and the
//! configuration lowered into a runnable backend. Every process started here is stopped and reaped by the test.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::support::assert::{eventually, text};
use serde_json::{Value, json};
use switchyard::backend::mcp_client::{Era, McpError, Relay, RelayMessage};
use switchyard::backend::stdio::{
    ENV_ALLOWLIST, GROUP_TOKEN_VAR, Launcher, Opening, Sharing, SpawnStatus, Standing, StdioBackend, StdioCommand,
    StdioConnection, StdioOptions,
};
use switchyard::backend::testing::{ConnectionRequest, StdioClose};
use switchyard::config::Config;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

pub(crate) const FAULT_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/fault_stdio.py");

fn options() -> StdioOptions {
    StdioOptions { max_line: 64 * 1024, grace: Duration::from_millis(300), ..StdioOptions::default() }
}

fn deadline(seconds: u64) -> Instant {
    Instant::now() + Duration::from_secs(seconds)
}

fn on_path(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH is set");
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file()).expect("on PATH")
}

/// The real interpreter behind `python3` (a version-manager shim would add variables of its own to the child's
/// environment).
pub(crate) fn python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let output = std::process::Command::new(on_path("python3"))
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 runs");
            PathBuf::from(String::from_utf8(output.stdout).expect("UTF-8").trim())
        })
        .clone()
}

fn backend(program: PathBuf, args: &[&str], env: &[(&str, &str)]) -> StdioBackend {
    StdioBackend {
        name: "fault".into(),
        command: StdioCommand {
            program,
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            env: env.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect(),
            cwd: None,
        },
        sharing: Sharing::PerAgent,
        idle_timeout: Duration::from_secs(600),
        max_processes: 4,
        era: Era::Auto,
    }
}

fn fault(mode: &str) -> StdioBackend {
    backend(python(), &[FAULT_SCRIPT, mode], &[])
}

async fn connect(backend: &StdioBackend) -> StdioConnection {
    StdioConnection::connect(backend, &options(), &json!({}), Standing::default(), Opening::Legacy, deadline(20))
        .await
        .expect("handshake")
}

async fn call(connection: &StdioConnection, tool: &str, arguments: Value, seconds: u64) -> Result<Value, McpError> {
    let params = json!({"name": tool, "arguments": arguments});
    connection.request("tools/call", params, &Relay::default(), deadline(seconds)).await
}

/// Running means signalable and not a zombie (a zombie runs no code; where PID 1 does not reap orphans, a
/// killed grandchild stays one).
pub(crate) fn is_running(pid: u32) -> bool {
    // SAFETY: signal 0 sends nothing; kill reads no memory of ours.
    let signalable = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = state.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
    signalable && !zombie
}

pub(crate) async fn assert_gone(pid: u32) {
    eventually(&format!("process {pid} is gone"), || async { !is_running(pid) }).await;
}

fn assert_after_delivery(result: Result<Value, McpError>, mentions: &str) {
    match result {
        Err(McpError::AfterDelivery { reason, .. }) => assert!(reason.to_string().contains(mentions), "{reason}"),
        other => panic!("expected AfterDelivery mentioning {mentions:?}, got {other:?}"),
    }
}

fn assert_not_delivered<T: std::fmt::Debug>(result: Result<T, McpError>, mentions: &str) {
    match result {
        Err(McpError::NotDelivered { reason, .. }) => assert!(reason.to_string().contains(mentions), "{reason}"),
        other => panic!("expected NotDelivered mentioning {mentions:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn the_demo_server_serves_its_tools_over_stdio() {
    let demo = backend(PathBuf::from(env!("CARGO_BIN_EXE_switchyard")), &["demo-server", "--stdio"], &[]);
    let connection = connect(&demo).await;
    assert_eq!(connection.version(), "2025-11-25");
    assert_eq!(connection.capabilities()["tools"]["listChanged"], false);
    let listed = connection.request("tools/list", Value::Null, &Relay::default(), deadline(10)).await.expect("list");
    let names: Vec<&str> =
        listed["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "add", "counter", "sleep", "fail"]);
    assert_eq!(
        text(&call(&connection, "echo", json!({"text": "over a pipe"}), 10).await.expect("echo")),
        "over a pipe"
    );
    let (first, second) =
        tokio::join!(call(&connection, "counter", json!({}), 10), call(&connection, "counter", json!({}), 10));
    let mut counts = [text(&first.expect("counter")).to_owned(), text(&second.expect("counter")).to_owned()];
    counts.sort();
    assert_eq!(counts, ["1", "2"].map(str::to_owned), "one session per process");
    let unknown = connection.request("resources/list", Value::Null, &Relay::default(), deadline(10)).await;
    assert!(matches!(unknown, Err(McpError::Rpc { code: -32601, .. })), "{unknown:?}");
    let pid = connection.pid();
    connection.close().await;
    assert_gone(pid).await;
}

#[tokio::test]
async fn the_fault_server_works_in_normal_mode_and_each_process_counts_alone() {
    let normal = fault("normal");
    let (one, two) = (connect(&normal).await, connect(&normal).await);
    assert_ne!(one.pid(), two.pid());
    let listed = one.request("tools/list", Value::Null, &Relay::default(), deadline(10)).await.expect("list");
    assert_eq!(listed["tools"][0]["name"], "echo");
    assert_eq!(text(&call(&one, "echo", json!({"text": "hi"}), 10).await.expect("echo")), "hi");
    for expected in ["1", "2"] {
        assert_eq!(text(&call(&one, "counter", json!({}), 10).await.expect("counter")), expected);
    }
    assert_eq!(text(&call(&two, "counter", json!({}), 10).await.expect("counter")), "1");
    one.close().await;
    two.close().await;
}

#[tokio::test]
async fn a_crash_mid_call_is_after_delivery_and_the_next_call_is_not_delivered() {
    let connection = connect(&fault("crash")).await;
    let pid = connection.pid();
    assert_after_delivery(call(&connection, "echo", json!({"text": "x"}), 10).await, "exited with status 3");
    assert_gone(pid).await;
    assert!(!connection.is_alive());
    assert_not_delivered(call(&connection, "echo", json!({}), 10).await, "exited with status 3");
    connection.close().await;
}

#[tokio::test]
async fn a_process_that_exits_before_the_handshake_is_not_delivered() {
    let refused = StdioConnection::connect(
        &fault("early"),
        &options(),
        &json!({}),
        Standing::default(),
        Opening::Legacy,
        deadline(10),
    )
    .await;
    assert_not_delivered(refused.map(|connection| connection.pid()), "the process exited with status 1");
}

#[tokio::test]
async fn a_command_that_cannot_start_is_not_delivered_with_its_name() {
    let missing = backend(PathBuf::from("/nonexistent/mcp-server"), &[], &[]);
    let refused =
        StdioConnection::connect(&missing, &options(), &json!({}), Standing::default(), Opening::Legacy, deadline(10))
            .await;
    assert_not_delivered(refused.map(|connection| connection.pid()), "could not start `/nonexistent/mcp-server`");
}

#[tokio::test]
async fn a_noisy_stderr_is_drained_and_never_blocks_the_process() {
    let connection = connect(&fault("noise")).await;
    for round in 0..3 {
        let said = format!("round {round}");
        let echoed = call(&connection, "echo", json!({"text": said}), 60).await.expect("echo despite the noise");
        assert_eq!(text(&echoed), said);
    }
    connection.close().await;
}

#[tokio::test]
async fn a_line_that_is_not_json_rpc_ends_the_process_and_the_call_is_after_delivery() {
    let connection = connect(&fault("garbage")).await;
    let pid = connection.pid();
    assert_after_delivery(call(&connection, "echo", json!({}), 10).await, "not JSON");
    assert_gone(pid).await;
    assert!(!connection.is_alive());
}

#[tokio::test]
async fn a_huge_line_is_cut_at_the_limit_and_the_call_is_after_delivery() {
    let connection = connect(&fault("huge")).await;
    let pid = connection.pid();
    // The process writes 64 MiB; the connection gives up after 64 KiB instead of buffering the line.
    assert_after_delivery(call(&connection, "echo", json!({}), 20).await, "longer than 65536 bytes");
    assert_gone(pid).await;
}

#[tokio::test]
async fn a_hung_call_ends_at_its_deadline_as_after_delivery_and_shutdown_still_stops_the_process() {
    let connection = connect(&fault("hang")).await;
    let pid = connection.pid();
    let started = Instant::now();
    let params = json!({"name": "echo", "arguments": {}});
    let answer =
        connection.request("tools/call", params, &Relay::default(), Instant::now() + Duration::from_millis(300)).await;
    assert_after_delivery(answer, "deadline passed");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Closing stdin does not stop this process; SIGTERM to its group does.
    connection.close().await;
    assert_gone(pid).await;
}

#[tokio::test]
async fn cancelled_and_timed_out_calls_are_cancelled_at_the_process_by_its_own_id() {
    let connection = connect(&fault("hang")).await;
    let cancel = Arc::new(Notify::new());
    let relay = Relay::new(json!({}), None).cancellable(Arc::clone(&cancel));
    let params = json!({"name": "echo", "arguments": {}});
    let (answer, ()) = tokio::join!(connection.request("tools/call", params, &relay, deadline(10)), async {
        eventually("the process has the call", || async {
            let received = connection.request("fault/received", Value::Null, &Relay::default(), deadline(10)).await;
            received.expect("received")["methods"].as_array().expect("a list").contains(&json!("tools/call"))
        })
        .await;
        cancel.notify_one();
    });
    assert!(matches!(answer, Err(McpError::Cancelled)), "{answer:?}");
    let hang = Instant::now() + Duration::from_millis(300);
    assert_after_delivery(
        connection.request("tools/call", json!({"name": "echo"}), &Relay::default(), hang).await,
        "deadline",
    );
    let told = connection.request("fault/cancelled", Value::Null, &Relay::default(), deadline(10)).await.expect("told");
    let reasons: Vec<&str> =
        told["cancelled"].as_array().expect("a list").iter().filter_map(|p| p["reason"].as_str()).collect();
    assert_eq!(reasons, ["cancelled by the agent", "the gateway's deadline for the request passed"]);
    let ids: Vec<u64> =
        told["cancelled"].as_array().expect("a list").iter().filter_map(|p| p["requestId"].as_u64()).collect();
    assert!(ids.len() == 2 && ids[0] < ids[1], "the process-side ids of the two requests: {ids:?}");
    connection.close().await;
}

#[tokio::test]
async fn a_grandchild_that_ignores_sigterm_does_not_survive_shutdown() {
    let connection = connect(&fault("normal")).await;
    let grandchild: u32 =
        text(&call(&connection, "grandchild", json!({}), 10).await.expect("grandchild")).parse().expect("a pid");
    assert!(is_running(grandchild), "the grandchild runs while its server does");
    let pid = connection.pid();
    connection.close().await;
    assert_gone(pid).await;
    assert_gone(grandchild).await;
}

#[tokio::test]
async fn the_child_sees_only_the_allowlist_and_its_configured_variables() {
    let configured = [("PYTHONCOERCECLOCALE", "0"), ("SWITCHYARD_TEST_SECRET", "s3cret")];
    let backend = backend(python(), &[FAULT_SCRIPT, "normal"], &configured);
    assert!(!format!("{:?}", backend.command).contains("s3cret"), "Debug must not show env values");
    let connection = connect(&backend).await;
    let seen: serde_json::Map<String, Value> =
        serde_json::from_str(text(&call(&connection, "env", json!({}), 10).await.expect("env"))).expect("JSON");
    for name in seen.keys() {
        let allowed = ENV_ALLOWLIST.contains(&name.as_str())
            || configured.iter().any(|(var, _)| var == name)
            || name == GROUP_TOKEN_VAR;
        assert!(allowed, "the child sees {name}");
    }
    assert_eq!(seen["SWITCHYARD_TEST_SECRET"], "s3cret");
    let token = seen[GROUP_TOKEN_VAR].as_str().unwrap_or_default();
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "the group's token: {token:?}");
    assert_eq!(seen.get("PATH").and_then(Value::as_str), std::env::var("PATH").ok().as_deref());
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some() && !seen.contains_key("CARGO_MANIFEST_DIR"));
    connection.close().await;
}

#[tokio::test]
async fn server_requests_are_answered_or_relayed_by_capability() {
    let connection = connect(&fault("normal")).await;
    let refused = call(&connection, "ask", json!({}), 10).await.expect("ask");
    let answers: Value = serde_json::from_str(text(&refused)).expect("JSON");
    assert_eq!(answers[0]["result"], json!({}), "ping is answered by the gateway");
    assert_eq!(answers[1]["error"]["code"], -32601, "roots/list without the capability");

    let (sink, mut messages) = mpsc::unbounded_channel();
    let relay = Relay::new(json!({"roots": {}}), Some(sink));
    let agent = tokio::spawn(async move {
        while let Some(message) = messages.recv().await {
            if let RelayMessage::Request { message, reply } = message {
                assert_eq!(message["method"], "roots/list");
                let _ = reply.send(json!({"jsonrpc": "2.0", "id": "agent-side", "result": {"roots": []}}));
            }
        }
    });
    let params = json!({"name": "ask", "arguments": {}});
    let relayed = connection.request("tools/call", params, &relay, deadline(10)).await.expect("ask");
    let answers: Value = serde_json::from_str(text(&relayed)).expect("JSON");
    assert_eq!(
        answers[1],
        json!({"jsonrpc": "2.0", "id": "s-2", "result": {"roots": []}}),
        "the agent's answer, our id"
    );
    drop(relay);
    connection.close().await;
    agent.await.expect("the agent task");
}

#[tokio::test]
async fn progress_and_log_notifications_reach_the_caller_with_its_own_token() {
    let connection = connect(&fault("normal")).await;
    let (sink, mut messages) = mpsc::unbounded_channel();
    let relay = Relay::new(json!({}), Some(sink));
    let params = json!({"name": "progress", "arguments": {}, "_meta": {"progressToken": "agent-token"}});
    let done = connection.request("tools/call", params, &relay, deadline(10)).await.expect("progress");
    assert_eq!(text(&done), "done");
    drop(relay);
    let mut heard = Vec::new();
    while let Some(RelayMessage::Notification(note)) = messages.recv().await {
        heard.push(note);
    }
    assert_eq!(heard.len(), 2, "the progress for an unknown token is dropped: {heard:?}");
    assert_eq!(heard[0]["params"]["progressToken"], "agent-token");
    assert_eq!(heard[1]["method"], "notifications/message");
    connection.close().await;
}

#[tokio::test]
async fn failed_starts_back_off_and_are_reported() {
    let launcher = Launcher::new(backend(PathBuf::from("/nonexistent/mcp-server"), &[], &[]), options());
    assert_eq!(launcher.status(), SpawnStatus::Ready);
    assert_not_delivered(
        launcher.connect(&json!({}), Standing::default(), Opening::Legacy, deadline(5)).await.map(|c| c.pid()),
        "could not start",
    );
    let SpawnStatus::Failing { failures: 1, last_error, .. } = launcher.status() else {
        panic!("expected one failure, got {:?}", launcher.status());
    };
    assert!(last_error.contains("could not start"), "{last_error}");
    assert_not_delivered(
        launcher.connect(&json!({}), Standing::default(), Opening::Legacy, deadline(5)).await.map(|c| c.pid()),
        "failed starts in a row: 1",
    );
}

#[tokio::test]
async fn a_configured_stdio_backend_runs_with_its_secret_env_and_is_discovered_by_the_gateway() {
    let python = python();
    let name = python.file_name().expect("a file name").to_string_lossy().into_owned();
    let toml = format!(
        "[[backends]]\nname = \"local\"\ntransport = \"stdio\"\ncommand = {name:?}\nargs = [{FAULT_SCRIPT:?}, \"normal\"]\n\
         env = {{ PYTHONCOERCECLOCALE = \"0\", API_TOKEN = {{ env = \"LOCAL_TOKEN\" }} }}\n"
    );
    let path = python.parent().expect("a directory").display().to_string();
    let config = Config::from_toml_str(&toml, "t.toml", [("PATH", path.as_str()), ("LOCAL_TOKEN", "tok-123")])
        .expect("valid configuration");
    let stdio = switchyard::gateway::testing::stdio_backend(&config.backends[0]).expect("a stdio backend");
    assert_eq!(stdio.command.program, python);
    let connection = connect(&stdio).await;
    let seen: Value =
        serde_json::from_str(text(&call(&connection, "env", json!({}), 10).await.expect("env"))).expect("JSON");
    assert_eq!(seen["API_TOKEN"], "tok-123");
    connection.close().await;
    let gateway = switchyard::gateway::Gateway::for_discovery(config).await.expect("the gateway serves the transport");
    gateway.discover_once().await;
    let routes = gateway.router.catalog().routes();
    assert!(routes.iter().any(|route| route.name == "echo"), "discovered through the gateway's client");

    let missing = "[[backends]]\nname = \"x\"\ntransport = \"stdio\"\ncommand = \"no-such-mcp-server\"\n";
    let error = Config::from_toml_str(missing, "t.toml", [("PATH", path.as_str())]).expect_err("not on PATH");
    let message = error.to_string();
    assert!(
        message.starts_with("t.toml: backends[0].command = \"no-such-mcp-server\": expected a program found on PATH"),
        "{message}"
    );
}
