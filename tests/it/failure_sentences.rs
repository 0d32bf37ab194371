//! One sentence per backend failure (docs/operations.md, *When a backend fails*): `switchyard check` names the
//! backend, its URL or command and the root cause once — a refused connection, a wrong path (404), a refused
//! credential (401), a package npm cannot find, a process killed by a signal, a process that exited — and none of
//! the words of the nested chains it replaced. `serve`'s JSON log of such failures carries plain values. An agent
//! reads the same sentence, without the command when its principal may not read the console.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::agent_auth::{ALICE_KEY, BOB_KEY, api_keys};
use crate::stdio::{FAULT_SCRIPT, python};
use crate::support::assert::{PATIENCE, poll_until};
use crate::support::gateway::{Agent, ChildGateway, ScratchDir, TestGateway};

/// Words of the chains a failure used to be reported in; a sentence has none of them.
const CHAIN_WORDS: [&str; 5] = [
    "did not process the request",
    "handshake failed",
    "the gateway stopped the process",
    "may have received the request",
    "stdin closed",
];

/// What `switchyard check` printed for some backends.
struct Checked {
    stdout: String,
}

/// A configuration file in `scratch` with `backends`.
fn config(scratch: &ScratchDir, backends: &str) -> PathBuf {
    let data = scratch.path().join("data").display().to_string();
    let config = scratch.path().join("switchyard.toml");
    std::fs::write(&config, format!("[server]\ndata_dir = {data:?}\n{backends}")).expect("config");
    config
}

async fn check(scratch: &ScratchDir, backends: &str) -> Checked {
    let config = config(scratch, backends);
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("check")
        .arg("--config")
        .arg(&config)
        .output()
        .await
        .expect("run switchyard check");
    assert_eq!(output.status.code(), Some(1), "a failed backend fails the check");
    Checked { stdout: String::from_utf8_lossy(&output.stdout).into_owned() }
}

impl Checked {
    /// Asserts the one line reporting `backend`: it names `place` and `cause`, the cause is said once in the whole
    /// output, and no chain words repeat anywhere.
    fn assert_one_sentence(&self, backend: &str, place: &str, cause: &str) -> &str {
        let start = format!("discovery failed: backend `{backend}` ({place}): ");
        let Some(line) = self.stdout.lines().find(|line| line.starts_with(&start)) else {
            panic!("no sentence starting {start:?}:\n{}", self.stdout)
        };
        assert!(line.contains(cause), "{line}");
        assert_eq!(self.stdout.matches(cause).count(), 1, "the cause is said once:\n{}", self.stdout);
        for words in CHAIN_WORDS {
            assert!(!self.stdout.contains(words), "{words:?} in:\n{}", self.stdout);
        }
        line
    }
}

/// Every field of a JSON log line is a plain value: no Rust `Debug` rendering of a string, an option or a status.
fn assert_plain(line: &Value) {
    let Some(fields) = line.as_object() else { panic!("a log line is an object: {line}") };
    for (name, value) in fields {
        if let Some(text) = value.as_str() {
            assert!(!text.starts_with('"'), "`{name}` is a quoted string: {line}");
            for debug in ["Some(", "None", "ExitStatus(", "unix_wait_status"] {
                assert!(!text.contains(debug), "`{name}` holds a Debug rendering: {line}");
            }
        } else {
            assert!(value.is_number() || value.is_boolean(), "`{name}` is not plain: {line}");
        }
    }
}

/// An executable shell script `name` in `scratch` with `body`.
fn script(scratch: &ScratchDir, name: &str, body: &str) -> PathBuf {
    let path = scratch.path().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn stdio_toml(name: &str, command: &Path, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|arg| format!("{arg:?}")).collect();
    format!(
        "[[backends]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [{}]\ntimeout = \"10s\"\n",
        command.display().to_string(),
        args.join(", ")
    )
}

/// A loopback HTTP server answering every request with `status` and a short body; its URL, at `path`.
async fn answering(status: &'static str, path: &str) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}{path}", listener.local_addr().expect("address"));
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_request(&mut socket).await;
                let body = "no MCP server here";
                let head =
                    format!("HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n", body.len());
                let _ = socket.write_all(format!("{head}connection: close\r\n\r\n{body}").as_bytes()).await;
            });
        }
    });
    (url, task)
}

/// Reads one request's head and body (by its `content-length`), so closing the socket after the answer resets
/// nothing.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = seen.windows(4).position(|window| window == b"\r\n\r\n");
        if let Some(end) = head_end {
            let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if seen.len() >= end + 4 + length {
                return;
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => seen.extend_from_slice(&chunk[..read]),
        }
    }
}

#[tokio::test]
async fn a_refused_connection_names_its_address() {
    let scratch = ScratchDir::new("sentence-refused");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = closed.local_addr().expect("address");
    drop(closed);
    let url = format!("http://{address}/mcp");
    let checked = check(&scratch, &format!("[[backends]]\nname = \"gone\"\nurl = \"{url}\"\ntimeout = \"5s\"\n")).await;
    let line = checked.assert_one_sentence("gone", &url, &format!("connection refused at {address}"));
    assert!(line.ends_with("check that the server is running and listening there"), "{line}");
}

#[tokio::test]
async fn a_wrong_path_is_http_404_at_the_url() {
    let scratch = ScratchDir::new("sentence-404");
    let (url, server) = answering("404 Not Found", "/wrong/path").await;
    let checked = check(&scratch, &format!("[[backends]]\nname = \"lost\"\nurl = \"{url}\"\ntimeout = \"5s\"\n")).await;
    let line = checked.assert_one_sentence("lost", &url, "HTTP 404 Not Found");
    assert!(line.contains("check the path in `url`"), "{line}");
    server.abort();
}

#[tokio::test]
async fn a_refused_credential_is_http_401_and_names_the_keys_to_check() {
    let scratch = ScratchDir::new("sentence-401");
    let (url, server) = answering("401 Unauthorized", "/mcp").await;
    let checked =
        check(&scratch, &format!("[[backends]]\nname = \"locked\"\nurl = \"{url}\"\ntimeout = \"5s\"\n")).await;
    let line = checked.assert_one_sentence("locked", &url, "HTTP 401 Unauthorized");
    assert!(line.contains("check `credential` or `oauth`"), "{line}");
    server.abort();
}

/// What npm 10 writes to stderr (and exits 1) when `npx -y` names a package its registry does not have.
const NPM_404: &str = r#"echo "npm error code E404" >&2
echo "npm error 404 Not Found - GET https://registry.npmjs.org/@scope%2fpkg - Not found" >&2
echo "npm error 404" >&2
echo "npm error 404  '@scope/pkg@*' is not in this registry." >&2
echo "npm error 404" >&2
echo "npm error 404 Note that you can also install from a" >&2
echo "npm error 404 tarball, folder, http url, or git url." >&2
echo "npm error A complete log of this run can be found in: /tmp/npm-debug.log" >&2
exit 1
"#;

#[tokio::test]
async fn a_package_npm_cannot_find_is_named_from_its_error_lines() {
    let scratch = ScratchDir::new("sentence-npm");
    let npx = script(&scratch, "npx", NPM_404);
    let checked = check(&scratch, &stdio_toml("files", &npx, &["-y", "@scope/pkg"])).await;
    let place = format!("command `{} -y @scope/pkg`", npx.display());
    let cause = "the process exited with status 1: npm could not find the package '@scope/pkg@*' in its registry";
    let line = checked.assert_one_sentence("files", &place, cause);
    assert!(line.ends_with("check the package name in `args`"), "{line}");
}

#[tokio::test]
async fn a_process_killed_by_a_signal_is_not_the_gateways_stop() {
    let scratch = ScratchDir::new("sentence-signal");
    let server = script(&scratch, "dies", "echo \"out of memory, giving up\" >&2\nkill -9 $$\n");
    let checked = check(&scratch, &stdio_toml("dies", &server, &[])).await;
    let place = format!("command `{}`", server.display());
    let line = checked.assert_one_sentence("dies", &place, "the process was killed by signal 9 (SIGKILL)");
    assert!(line.contains("its last stderr lines: \"out of memory, giving up\""), "{line}");
}

#[tokio::test]
async fn a_process_that_exits_by_itself_says_its_status_and_last_stderr_lines() {
    let scratch = ScratchDir::new("sentence-exit");
    let server =
        script(&scratch, "quits", "echo \"reading /etc/quits.conf\" >&2\necho \"missing key: token\" >&2\nexit 3\n");
    let checked = check(&scratch, &stdio_toml("quits", &server, &[])).await;
    let place = format!("command `{}`", server.display());
    let line = checked.assert_one_sentence("quits", &place, "the process exited with status 3");
    assert!(line.contains("\"reading /etc/quits.conf | missing key: token\""), "{line}");
}

#[tokio::test]
async fn the_json_log_of_failing_backends_holds_plain_values() {
    let scratch = ScratchDir::new("sentence-json");
    let quits = script(&scratch, "quits", "echo \"bye\" >&2\nexit 3\n");
    let dies = script(&scratch, "dies", "kill -9 $$\n");
    let backends = format!(
        "[[backends]]\nname = \"gone\"\nurl = \"http://127.0.0.1:9/mcp\"\n{}{}",
        stdio_toml("quits", &quits, &["--flag", "two words"]),
        stdio_toml("dies", &dies, &[])
    );
    let log = scratch.path().join("gateway.log");
    let gateway = ChildGateway::spawn_with(&config(&scratch, &backends), &log, &["--log-format", "json"], &[]).await;
    let lines = || -> Vec<Value> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"))).collect()
    };
    let failed = |lines: &[Value], backend: &str| {
        lines.iter().any(|line| line["message"] == "tool discovery failed" && line["backend"] == backend)
    };
    let all_failed = || async { ["gone", "quits", "dies"].iter().all(|backend| failed(&lines(), backend)) };
    assert!(poll_until(PATIENCE, all_failed).await, "{}", std::fs::read_to_string(&log).unwrap_or_default());
    let lines = lines();
    lines.iter().for_each(assert_plain);
    let line = |message: &str, backend: &str| {
        let found = lines.iter().find(|line| line["message"] == message && line["backend"] == backend);
        found.unwrap_or_else(|| panic!("no {message:?} of {backend}: {lines:?}")).clone()
    };
    assert_eq!(line("stdio backend process exited", "quits")["code"], 3);
    assert_eq!(line("stdio backend process exited", "dies")["signal"], 9);
    assert_eq!(line("started a stdio backend process", "quits")["args"], "--flag 'two words'");
    assert_eq!(line("tool discovery failed", "gone")["retry_in_ms"].as_u64().map(|ms| ms > 0), Some(true));
    let error = line("tool discovery failed", "quits")["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("the process exited with status 3; its last stderr lines: \"bye\""), "{error}");
    gateway.terminate().await;
}

/// The text of a failed tool call's result.
fn said(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {reply}"))
}

#[tokio::test]
async fn an_agent_reads_the_same_sentence_without_the_command_unless_its_principal_is_an_administrator() {
    let python = python().display().to_string();
    let backend = stdio_toml("f", Path::new(&python), &[FAULT_SCRIPT, "crash"]);
    let sections = format!("[auth]\nadmin_principals = [\"alice\"]\n{}", api_keys());
    let gateway = TestGateway::start_with("", &sections, &backend).await;
    gateway.wait_for_tool("f__echo").await;
    let mut admin = Agent::connected_as(gateway.mcp(), ALICE_KEY).await;
    let operator = admin.call_tool("f__echo", json!({"text": "x"})).await;
    let place = format!("backend `f` (command `{python} {FAULT_SCRIPT} crash`): the process exited with status 3");
    assert!(said(&operator).contains(&place), "{operator}");
    let mut agent = Agent::connected_as(gateway.mcp(), BOB_KEY).await;
    let redacted = agent.call_tool("f__echo", json!({"text": "x"})).await;
    let text = said(&redacted);
    assert!(text.contains("backend `f`: the process exited with status 3"), "{text}");
    assert!(!text.contains(FAULT_SCRIPT) && !text.contains(&python) && !text.contains("stderr"), "{text}");
    assert_eq!(redacted["result"]["_meta"]["switchyard/outcome"], "unknown", "the process may have run it");
}
