//! Live reload through the real binary: `switchyard reload` and SIGHUP re-read the
//! configuration file while agent sessions are open and a call is running. A backend is added (its tools appear,
//! agents are told), a policy and the API keys change, a backend is replaced and one removed while a call runs on
//! it: the call finishes exactly once on the process it started on, which then stops (checked by PID), and new
//! calls get the new configuration at once. An invalid file is refused with the error `switchyard check` prints
//! and changes nothing; a restart-only key is reported while the rest applies. `support/fault_stdio.py`'s `gate`
//! tool is the running call: it logs its PID and holds until the test creates its release file.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::auth::{api_key_digest, hex};
use tokio::task::JoinHandle;

use crate::gateway::read_until;
use crate::stdio::{FAULT_SCRIPT, assert_gone, is_running, python};
use crate::support::assert::{eventually, text};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, backend_toml};

const ALICE: &str = "sy_reload-alice";
const CAROL: &str = "sy_reload-carol";
const WAIT: Duration = Duration::from_secs(20);
const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// A configuration file in a scratch directory, the gateway's log, and the files of the `gate` tool.
struct Scene {
    dir: ScratchDir,
}

impl Scene {
    fn new(tag: &str) -> Scene {
        Scene { dir: ScratchDir::new(tag) }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("switchyard.toml")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("gateway.log")
    }

    /// Writes the configuration: `[server]` with the data directory and `server`, then `rest`.
    fn write(&self, server: &str, rest: &str) {
        let data_dir = self.dir.path().join("data").display().to_string();
        std::fs::write(self.config(), format!("[server]\ndata_dir = {data_dir:?}\n{server}\n{rest}")).unwrap();
    }

    fn gate_arguments(&self) -> Value {
        let path = |name: &str| self.dir.path().join(name).display().to_string();
        json!({"log": path("gate.log"), "release": path("gate.release")})
    }

    /// The PIDs of the processes the `gate` tool ran in, one line per run.
    fn gate_runs(&self) -> Vec<u32> {
        let log = std::fs::read_to_string(self.dir.path().join("gate.log")).unwrap_or_default();
        log.lines().map(|line| line.parse().expect("a PID")).collect()
    }

    fn release_gate(&self) {
        std::fs::write(self.dir.path().join("gate.release"), "").unwrap();
    }

    async fn switchyard(&self, command: &str) -> Output {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
        child.arg(command).arg("--config").arg(self.config());
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SWITCHYARD_") {
                child.env_remove(name);
            }
        }
        child.output().await.expect("run switchyard")
    }

    /// `switchyard reload`, asserting that it was applied; its standard output.
    async fn reload(&self) -> String {
        let output = self.switchyard("reload").await;
        let (out, err) = (text_of(&output.stdout), text_of(&output.stderr));
        assert!(output.status.success(), "reload refused:\n{out}{err}\ngateway log:\n{}", self.gateway_log());
        out
    }

    fn gateway_log(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The line a failed command printed its error on.
fn error_line(output: &Output) -> String {
    let stderr = text_of(&output.stderr);
    stderr
        .lines()
        .find(|line| line.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error in {stderr:?}"))
        .to_owned()
}

fn api_key(principal: &str, key: &str) -> String {
    format!("[[auth.api_keys]]\nprincipal = \"{principal}\"\nsha256 = \"{}\"\n", hex(&api_key_digest(key)))
}

fn policy(deny: &str) -> String {
    format!("[[policies]]\nprincipals = [\"*\"]\nallow = [\"*\"]\ndeny = [{deny}]\n")
}

/// `support/fault_stdio.py` as backend `name` (a process per agent session), with `extra` keys.
fn stdio_backend(name: &str, extra: &str) -> String {
    format!(
        "[[backends]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [{FAULT_SCRIPT:?}, \"normal\"]\n\
         timeout = \"60s\"\n{extra}\n",
        python().display().to_string()
    )
}

/// Starts the `gate` call of backend `a` on `agent`'s session and waits until it runs; returns its answer's task
/// and the PID of the process it runs in.
async fn start_gate(agent: &Agent, scene: &Scene) -> (JoinHandle<Value>, u32) {
    let mut handle = agent.same_session();
    let arguments = scene.gate_arguments();
    let call = tokio::spawn(async move { handle.call_tool("a__gate", arguments).await });
    eventually("the gate call runs", || async { scene.gate_runs().len() == 1 }).await;
    (call, scene.gate_runs()[0])
}

/// Asserts that the `gate` call still runs in its process, releases it, and asserts that it answers, that it ran
/// exactly once (in that process), and that every process of `retired` then stops.
async fn finish_gate(scene: &Scene, gate: JoinHandle<Value>, gate_pid: u32, retired: &[u32]) {
    assert!(!gate.is_finished() && is_running(gate_pid), "the call still runs on the backend it started on");
    scene.release_gate();
    let answer = tokio::time::timeout(WAIT, gate).await.expect("the call finishes").unwrap();
    assert_eq!(text(&answer), "released", "{answer}");
    assert_eq!(scene.gate_runs(), [gate_pid], "the call ran once, in its own process");
    for pid in retired {
        assert_gone(*pid).await;
    }
}

/// The running `fault_stdio.py` processes the gateway `parent` started.
fn fault_processes(parent: u32) -> Vec<u32> {
    let entries = std::fs::read_dir("/proc").expect("procfs");
    let pids = entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|pid| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains("fault_stdio.py") && is_running(*pid)
    })
    .collect()
}

#[tokio::test]
async fn a_reload_changes_backends_policies_keys_and_limits_while_a_call_runs() {
    let scene = Scene::new("reload");
    let fault = FaultBackend::start(Script::default()).await;
    let b = backend_toml("b", &fault.url(), "");
    let alice = api_key("alice", ALICE);
    scene.write("", &[alice.as_str(), &policy("\"a__counter\""), &stdio_backend("a", "")].concat());
    let gateway = ChildGateway::spawn(&scene.config(), &scene.log()).await;
    let mut running = Agent::connected_as(gateway.mcp(), ALICE).await;
    let mut agent = Agent::connected_as(gateway.mcp(), ALICE).await;
    let mut stream = agent.open_stream().await;
    assert_eq!(stream.status(), StatusCode::OK);
    let denied = agent.call_tool("a__counter", json!({})).await;
    assert_eq!(denied["error"]["code"], -32602, "denied by policy: {denied}");
    assert!(scene.reload().await.contains("nothing to change"), "the same file changes nothing");
    let (gate, gate_pid) = start_gate(&running, &scene).await;

    // A backend added: its tools appear, agents are told, and the session with the running call still works.
    scene.write("", &[alice.as_str(), &policy("\"a__counter\""), &stdio_backend("a", ""), &b].concat());
    assert!(scene.reload().await.contains("backends added: b"));
    eventually("b's tools appear", || async { agent.same_session().tool_names().await.contains(&"b__echo".into()) })
        .await;
    assert!(read_until(&mut stream, LIST_CHANGED, WAIT).await.is_some(), "the agent was told");
    assert_eq!(text(&running.call_tool("b__echo", json!({"text": "still here"})).await), "still here");

    // A policy changed by SIGHUP: the denied tool is allowed.
    let open = [alice.as_str(), &policy(""), &stdio_backend("a", ""), &b].concat();
    scene.write("", &open);
    gateway.hang_up().await;
    eventually("the policy allows a__counter", || async {
        agent.same_session().call_tool("a__counter", json!({})).await["result"]["content"][0]["text"] == "1"
    })
    .await;
    assert!(read_until(&mut stream, LIST_CHANGED, WAIT).await.is_some(), "a policy change tells every agent");
    assert!(scene.gateway_log().contains("configuration reloaded"), "the SIGHUP reload is logged");

    // An API key added works at once; once removed it is refused.
    scene.write("", &[open.as_str(), &api_key("carol", CAROL)].concat());
    assert!(scene.reload().await.contains("agent authentication changed"));
    let mut carol = Agent::connected_as(gateway.mcp(), CAROL).await;
    assert_eq!(text(&carol.call_tool("b__echo", json!({"text": "carol"})).await), "carol");
    scene.write("", &open);
    scene.reload().await;
    let list = json!({"jsonrpc": "2.0", "id": 50, "method": "tools/list"});
    assert_eq!(carol.send(&list).await.status, StatusCode::UNAUTHORIZED, "a removed key is refused");
    assert_eq!(Agent::with_token(gateway.mcp(), CAROL).initialize("2025-11-25").await.status, StatusCode::UNAUTHORIZED);

    // The backend with the running call removed: its tools go, new calls are refused clearly, the call finishes.
    let watcher = Agent::connected_as(gateway.mcp(), ALICE).await;
    let mut told = watcher.open_stream().await;
    let processes = fault_processes(gateway.pid());
    assert!(
        processes.contains(&gate_pid) && processes.len() >= 3,
        "discovery's, the gate's, the agent's: {processes:?}"
    );
    scene.write("", &[alice.as_str(), &policy(""), &b].concat());
    assert!(scene.reload().await.contains("backends removed"));
    let names = agent.tool_names().await;
    assert!(names.iter().all(|name| !name.starts_with("a__")) && names.contains(&"b__echo".into()), "{names:?}");
    let gone = agent.call_tool("a__echo", json!({"text": "x"})).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    assert!(gone["error"]["message"].as_str().unwrap().contains("unknown tool `a__echo`"), "{gone}");
    let bare = Agent::with_token(format!("{}/a", gateway.mcp()), ALICE).initialize("2025-11-25").await;
    assert_eq!(bare.status, StatusCode::NOT_FOUND, "/mcp/a is gone");
    assert!(read_until(&mut told, LIST_CHANGED, WAIT).await.is_some(), "an agent that was listening was told");
    finish_gate(&scene, gate, gate_pid, &processes).await;
    assert_eq!(text(&running.call_tool("b__echo", json!({"text": "after"})).await), "after", "the session lives on");
    let metrics = reqwest::get(format!("{}/metrics", gateway.base)).await.unwrap().text().await.unwrap();
    assert!(!metrics.contains("backend=\"a\""), "the removed backend's series are gone:\n{metrics}");
    assert!(metrics.contains("switchyard_backend_up{backend=\"b\"} 1"), "{metrics}");

    // An invalid file is refused with the error `check` prints, and the running configuration keeps serving.
    let valid = [alice.as_str(), &policy(""), &b].concat();
    scene.write("", &[valid.as_str(), &backend_toml("broken", "ftp://127.0.0.1/mcp", "")].concat());
    let checked = scene.switchyard("check").await;
    let refused = scene.switchyard("reload").await;
    assert!(!checked.status.success() && !refused.status.success());
    assert_eq!(error_line(&refused), error_line(&checked), "the same error as `switchyard check`");
    assert!(error_line(&refused).contains("backends[1].url"), "{}", error_line(&refused));
    assert_eq!(agent.tool_names().await, names, "nothing changed");
    assert_eq!(text(&agent.call_tool("b__echo", json!({"text": "served"})).await), "served");

    // A restart-only key is reported; a limit changed beside it applies.
    let big = json!({"jsonrpc": "2.0", "id": 60, "method": "tools/call",
        "params": {"name": "b__echo", "arguments": {"text": "x".repeat(3 << 20)}}});
    assert_eq!(agent.send(&big).await.status, StatusCode::OK, "3 MiB fit the default 4 MiB");
    scene.write("session_ttl = \"2h\"\nmax_body = \"2MiB\"", &valid);
    let reported = scene.reload().await;
    assert!(reported.contains("need a restart: server.session_ttl"), "{reported}");
    assert!(reported.contains("changed: server.max_body"), "{reported}");
    assert_eq!(agent.send(&big).await.status, StatusCode::PAYLOAD_TOO_LARGE, "the new limit applies");
    gateway.kill().await;
}

/// The fair-share caps are `[server]` limits a reload changes for new requests, like the others.
#[tokio::test]
async fn a_reload_changes_the_stream_and_principal_caps() {
    let scene = Scene::new("reload-shares");
    let fault = FaultBackend::start(Script::default()).await;
    let rest = [api_key("alice", ALICE).as_str(), &backend_toml("b", &fault.url(), "")].concat();
    scene.write("max_streams_per_session = 1", &rest);
    let gateway = ChildGateway::spawn(&scene.config(), &scene.log()).await;
    let agent = Agent::connected_as(gateway.mcp(), ALICE).await;
    let first = agent.open_stream().await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(agent.open_stream().await.status(), StatusCode::TOO_MANY_REQUESTS, "one stream per session");

    scene.write("max_streams_per_session = 2\nmax_connections_per_principal = 3", &rest);
    let reported = scene.reload().await;
    assert!(
        reported.contains("changed: server.max_connections_per_principal, server.max_streams_per_session"),
        "{reported}"
    );
    let second = agent.open_stream().await;
    assert_eq!(second.status(), StatusCode::OK, "two streams per session now");
    assert_eq!(agent.open_stream().await.status(), StatusCode::TOO_MANY_REQUESTS, "but not three");
    let other = Agent::connected_as(gateway.mcp(), ALICE).await;
    let third = other.open_stream().await;
    assert_eq!(third.status(), StatusCode::OK, "alice's third request in flight");
    let list = json!({"jsonrpc": "2.0", "id": 70, "method": "tools/list"});
    let refused = other.send(&list).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS, "a fourth is over the new cap: {}", refused.raw);
    assert!(refused.raw.contains("max_connections_per_principal = 3"), "{}", refused.raw);
    drop((first, second, third));
    gateway.kill().await;
}

#[tokio::test]
async fn replaced_backends_serve_new_calls_while_a_running_call_finishes_on_the_old_process() {
    let scene = Scene::new("replace");
    let fault = FaultBackend::start(Script::default()).await;
    let h = |revision: &str| backend_toml("h", &fault.url(), &format!("headers = {{ X-Revision = \"{revision}\" }}"));
    scene.write("", &[stdio_backend("a", "env = { MARK = \"one\" }"), h("1")].concat());
    let gateway = ChildGateway::spawn(&scene.config(), &scene.log()).await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    assert_eq!(text(&agent.call_tool("h__echo", json!({"text": "one"})).await), "one");
    let (gate, gate_pid) = start_gate(&agent, &scene).await;
    let before = fault_processes(gateway.pid());

    scene.write("", &[stdio_backend("a", "env = { MARK = \"two\" }"), h("2")].concat());
    assert!(scene.reload().await.contains("backends replaced (new sessions, rediscovered): a, h"));
    // The HTTP backend's old sessions (the agent's and discovery's) are ended; new calls carry the new header.
    let deleted = || fault.requests().into_iter().filter(|request| request.http_method == "DELETE").count();
    eventually("the old HTTP sessions are deleted", || async { deleted() >= 2 }).await;
    assert_eq!(text(&agent.call_tool("h__echo", json!({"text": "two"})).await), "two");
    let last = fault.requests().into_iter().rev().find(|request| request.rpc_method.as_deref() == Some("tools/call"));
    assert_eq!(last.expect("the call").header("x-revision"), Some("2"));
    // The same agent session, while its call still runs in the old process: a new process, the new environment.
    let env: Value = serde_json::from_str(text(&agent.call_tool("a__env", json!({})).await)).expect("JSON");
    assert_eq!(env["MARK"], "two");
    let fresh: u32 = text(&agent.call_tool("a__pid", json!({})).await).parse().expect("a PID");
    assert_ne!(fresh, gate_pid);
    finish_gate(&scene, gate, gate_pid, &before).await;
    assert!(is_running(fresh), "the new process serves on");
    gateway.kill().await;
}

#[tokio::test]
async fn reload_says_why_when_there_is_no_gateway_or_no_file() {
    let scene = Scene::new("nogateway");
    scene.write("", "");
    let output = scene.switchyard("reload").await;
    assert!(!output.status.success());
    assert!(error_line(&output).contains("no running gateway answers at"), "{}", error_line(&output));

    // A first run (no configuration file) has nothing to re-read, and says so.
    let dir = ScratchDir::new("reload-demo");
    let gateway = ChildGateway::spawn_in(None, dir.path(), &dir.path().join("gateway.log")).await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.arg("reload").current_dir(dir.path()).env_remove("SWITCHYARD_DATA_DIR");
    let output = command.output().await.expect("run switchyard");
    assert!(!output.status.success());
    assert!(error_line(&output).contains("started without a configuration file"), "{}", error_line(&output));
    gateway.kill().await;
}

#[tokio::test]
async fn command_line_overrides_are_not_reported_as_restart_only_changes() {
    let scene = Scene::new("overrides");
    scene.write("", "");
    let args = ["--log-format", "json"];
    let gateway = ChildGateway::spawn_with(&scene.config(), &scene.log(), &args, &[]).await;
    let reported = scene.reload().await;
    assert!(reported.contains("nothing to change"), "{reported}");
    assert!(!reported.contains("telemetry.log_format"), "{reported}");
    gateway.kill().await;
}

/// Two configuration files naming one data directory: the second gateway is refused at start with the first one's
/// PID, and `reload --config` of the second file reaches the first gateway, which refuses it rather than reload
/// its own file; `reload` of the right file says which gateway answered.
#[tokio::test]
async fn a_data_directory_serves_one_gateway_and_reload_names_the_file_it_means() {
    let scene = Scene::new("onedir");
    scene.write("", "");
    let gateway = ChildGateway::spawn(&scene.config(), &scene.log()).await;
    let other = scene.dir.path().join("other.toml");
    std::fs::copy(scene.config(), &other).unwrap();
    let mut second = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    second.args(["serve", "--listen", "127.0.0.1:0", "--config"]).arg(&other).kill_on_drop(true);
    let refused = tokio::time::timeout(WAIT, second.output()).await.expect("the second gateway exits").unwrap();
    assert!(!refused.status.success());
    let said = text_of(&refused.stderr);
    assert!(said.contains(&format!("in use by another running gateway (PID {})", gateway.pid())), "{said}");

    let mut reload_other = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    let wrong = reload_other.arg("reload").arg("--config").arg(&other).output().await.unwrap();
    assert!(!wrong.status.success());
    assert!(error_line(&wrong).contains("this is not the gateway of"), "{}", text_of(&wrong.stderr));
    let answered = format!("(gateway PID {} serving", gateway.pid());
    assert!(text_of(&wrong.stderr).contains(&answered), "{}", text_of(&wrong.stderr));
    let right = scene.reload().await;
    assert!(right.contains(&format!("gateway PID {} serving", gateway.pid())), "{right}");
    gateway.kill().await;
}
