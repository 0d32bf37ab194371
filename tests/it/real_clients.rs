//! Real MCP clients through the gateway: the official Python SDK's client (`tests/interop/python_agent.py`, run
//! as a subprocess and driven line by line over its stdin) and the official Rust SDK's client (`rmcp`, in this
//! process), each against `/mcp` of an in-process gateway in front of the demo server and, where a test needs
//! a second backend, `@modelcontextprotocol/server-everything`.
//!
//! For both clients: the handshake, `tools/list` across both backends, `tools/call` on each, one backend
//! session per agent (the demo's `counter` counts per backend session), and a demo backend restarted under an
//! open agent session — the new instance answers the old backend session with 404, and the gateway must start a new
//! backend session without the agent noticing. Neither client may paper over a gateway fault by itself: the
//! Python SDK turns a 404 into a "Session terminated" error, and `rmcp`'s own re-initialization is switched off.
//!
//! Peers that are not installed skip the test outside CI, as in `support::interop`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use crate::support::gateway::{TestGateway, backend_toml};
use crate::support::interop::{InteropServer, interop_dir, python_interpreter};

/// How long one answer of a client may take. Generous: a cold Python start (imports of the SDK, pydantic) or a
/// cold Node peer on a busy 2-core machine is slow; a hung exchange still fails the test instead of stalling it.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(90);
/// Every backend gets this `timeout`, so a gateway that hangs on a backend fails well within [`ANSWER_TIMEOUT`].
pub(crate) const BACKEND_TIMEOUT: &str = "timeout = \"60s\"";

// ---------------------------------------------------------------------------------------------------------------
// Backends

/// The demo server in this process, which can be restarted on the same port (the new instance knows no session).
pub(crate) struct Demo {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl Demo {
    pub(crate) async fn start() -> Demo {
        let (address, task) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("demo");
        Demo { address, task }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// Stops the server (which also closes its idle keep-alive connections) and starts a fresh one on the same
    /// address.
    async fn restart(&mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
        for _ in 0..100 {
            match switchyard::demo::spawn(self.address).await {
                Ok((_, task)) => {
                    self.task = task;
                    return;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        panic!("the demo server could not be restarted on {}", self.address);
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A gateway in front of the demo server alone.
async fn gateway_with(demo: &Demo) -> TestGateway {
    TestGateway::start("", &backend_toml("demo", &demo.url(), BACKEND_TIMEOUT)).await
}

/// A gateway in front of the demo server (`demo`) and server-everything (`everything`).
async fn gateway_with_both(demo: &Demo, everything: &InteropServer) -> TestGateway {
    let backends = backend_toml("demo", &demo.url(), BACKEND_TIMEOUT)
        + &backend_toml("everything", &everything.url(), BACKEND_TIMEOUT);
    TestGateway::start("", &backends).await
}

fn assert_lists_both_backends(names: &[String]) {
    for expected in ["demo__echo", "demo__counter", "everything__echo"] {
        assert!(names.iter().any(|name| name == expected), "{expected} missing from {names:?}");
    }
    assert!(
        names.iter().all(|name| name.starts_with("demo__") || name.starts_with("everything__")),
        "every tool carries its backend's prefix: {names:?}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// The Python SDK client

/// One agent on the Python SDK: `python_agent.py` connected and initialized, waiting for commands.
pub(crate) struct PythonAgent {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<String>>,
    /// What the SDK reported about the handshake (`protocolVersion`, `serverName`, `tools`).
    initialized: Value,
}

impl PythonAgent {
    /// Starts the agent against `url` and waits for its handshake.
    pub(crate) async fn connect(python: &Path, url: &str) -> PythonAgent {
        PythonAgent::connect_with(python, url, &[]).await
    }

    /// [`PythonAgent::connect`] with more of `python_agent.py`'s options (`--header NAME=VALUE`, `--oauth`).
    pub(crate) async fn connect_with(python: &Path, url: &str, options: &[&str]) -> PythonAgent {
        PythonAgent::connect_env(python, url, options, &[]).await
    }

    /// [`PythonAgent::connect_with`] with these environment variables (`SSL_CERT_FILE`, say).
    pub(crate) async fn connect_env(python: &Path, url: &str, options: &[&str], env: &[(&str, &str)]) -> PythonAgent {
        let mut child = Command::new(python)
            .arg(interop_dir().join("python_agent.py"))
            .arg(url)
            .args(options)
            .envs(env.iter().copied())
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(interop_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", python.display()));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        // Drained on a task, so a chatty SDK cannot block on a full pipe; kept for assertion messages.
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let mut pipe = child.stderr.take().expect("piped stderr");
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buffer).await
                && n > 0
            {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        let mut agent = PythonAgent { child, stdin, stdout, stderr, initialized: Value::Null };
        let hello = agent.answer("initialize").await;
        assert_eq!(hello["ok"], true, "the Python SDK could not initialize: {hello}\n{}", agent.stderr());
        agent.initialized = hello["initialized"].clone();
        agent
    }

    fn stderr(&self) -> String {
        format!("--- python_agent.py stderr ---\n{}", self.stderr.lock().unwrap())
    }

    /// The next line the agent prints, as JSON.
    async fn answer(&mut self, what: &str) -> Value {
        let line = match tokio::time::timeout(ANSWER_TIMEOUT, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("python_agent.py exited before answering {what}\n{}", self.stderr()),
            Ok(Err(error)) => panic!("reading python_agent.py's answer to {what}: {error}"),
            Err(_) => panic!("python_agent.py did not answer {what} within {ANSWER_TIMEOUT:?}\n{}", self.stderr()),
        };
        serde_json::from_str(&line).unwrap_or_else(|error| panic!("{what}: not JSON ({error}): {line}"))
    }

    pub(crate) async fn command(&mut self, command: &str) -> Value {
        let answer = self.ask(command).await;
        assert_eq!(answer["ok"], true, "{command}: {answer}\n{}", self.stderr());
        answer
    }

    /// Sends one command and returns the agent's answer, whether it succeeded or not.
    pub(crate) async fn ask(&mut self, command: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("the agent is still running");
        stdin.write_all(format!("{command}\n").as_bytes()).await.expect("write a command to python_agent.py");
        stdin.flush().await.expect("flush python_agent.py's stdin");
        self.answer(command).await
    }

    pub(crate) async fn tool_names(&mut self) -> Vec<String> {
        let listed = self.command("list").await;
        serde_json::from_value(listed["tools"].clone()).expect("a list of names")
    }

    /// Calls a tool and returns the text of its only text block, asserting that it is not an error result.
    pub(crate) async fn call_text(&mut self, tool: &str, arguments: Value) -> String {
        let answer = self.command(&format!("call {tool} {arguments}")).await;
        assert_eq!(answer["isError"], false, "{tool}: {answer}");
        let texts = answer["texts"].as_array().expect("texts");
        assert_eq!(texts.len(), 1, "{tool}: {answer}");
        texts[0].as_str().expect("a text").to_owned()
    }

    /// Ends the session (`quit`: the SDK sends `DELETE`) and checks that the agent exits cleanly.
    pub(crate) async fn quit(mut self) {
        let mut stdin = self.stdin.take().expect("quit once");
        stdin.write_all(b"quit\n").await.expect("write quit");
        drop(stdin);
        let status = tokio::time::timeout(ANSWER_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("python_agent.py did not exit after quit\n{}", self.stderr()))
            .expect("wait for python_agent.py");
        assert!(status.success(), "python_agent.py exited with {status}\n{}", self.stderr());
    }
}

#[tokio::test]
async fn python_sdk_client_initializes_lists_and_calls_both_backends() {
    let Some(python) = python_interpreter() else { return };
    let Some(everything) = InteropServer::everything() else { return };
    let demo = Demo::start().await;
    let gateway = gateway_with_both(&demo, &everything).await;

    let mut agent = PythonAgent::connect(&python, &gateway.mcp()).await;
    assert_eq!(agent.initialized["protocolVersion"], "2025-11-25", "{}", agent.initialized);
    assert_eq!(agent.initialized["tools"], true, "the gateway offers tools: {}", agent.initialized);

    assert_lists_both_backends(&agent.tool_names().await);
    assert_eq!(agent.call_text("demo__echo", json!({"text": "from python"})).await, "from python");
    assert_eq!(agent.call_text("everything__echo", json!({"message": "from python"})).await, "Echo: from python");
    let added = agent.command(&format!("call demo__add {}", json!({"a": 2, "b": 3}))).await;
    assert_eq!(added["structured"], json!({"sum": 5}), "structured content passes through: {added}");
    agent.quit().await;
}

#[tokio::test]
async fn python_sdk_clients_get_a_backend_session_each() {
    let Some(python) = python_interpreter() else { return };
    let demo = Demo::start().await;
    let gateway = gateway_with(&demo).await;

    let mut first = PythonAgent::connect(&python, &gateway.mcp()).await;
    let mut second = PythonAgent::connect(&python, &gateway.mcp()).await;
    assert_eq!(first.call_text("demo__counter", json!({})).await, "1");
    assert_eq!(first.call_text("demo__counter", json!({})).await, "2");
    assert_eq!(second.call_text("demo__counter", json!({})).await, "1", "the second agent's counter is its own");
    assert_eq!(first.call_text("demo__counter", json!({})).await, "3", "the first agent kept its backend session");
    first.quit().await;
    second.quit().await;
}

#[tokio::test]
async fn python_sdk_client_survives_a_backend_restart_under_its_session() {
    let Some(python) = python_interpreter() else { return };
    let mut demo = Demo::start().await;
    let gateway = gateway_with(&demo).await;

    let mut agent = PythonAgent::connect(&python, &gateway.mcp()).await;
    assert_eq!(agent.call_text("demo__echo", json!({"text": "before"})).await, "before");
    assert_eq!(agent.call_text("demo__counter", json!({})).await, "1");
    assert_eq!(agent.call_text("demo__counter", json!({})).await, "2");

    // The new instance answers the gateway's old backend session with 404; the agent's own session stays valid.
    demo.restart().await;
    assert_eq!(agent.call_text("demo__echo", json!({"text": "after"})).await, "after");
    assert_eq!(agent.call_text("demo__counter", json!({})).await, "1", "a new backend session on the new instance");
    agent.quit().await;
}

// ---------------------------------------------------------------------------------------------------------------
// The rmcp client

pub(crate) type RmcpAgent = RunningService<RoleClient, ()>;

/// An `rmcp` client connected and initialized against `url`. Its own re-initialization on an expired session is
/// off: a 404 from the gateway must fail the test, not be hidden by a new agent session.
async fn rmcp_agent(url: &str) -> RmcpAgent {
    rmcp_agent_with(StreamableHttpClientTransportConfig::with_uri(url)).await
}

/// [`rmcp_agent`] with a configuration of the test's (a bearer token, say).
pub(crate) async fn rmcp_agent_with(config: StreamableHttpClientTransportConfig) -> RmcpAgent {
    let config = config.reinit_on_expired_session(false);
    let transport = StreamableHttpClientTransport::from_config(config);
    tokio::time::timeout(ANSWER_TIMEOUT, ().serve(transport))
        .await
        .expect("rmcp initialize within the timeout")
        .unwrap_or_else(|error| panic!("rmcp could not initialize: {error}"))
}

async fn rmcp_call(agent: &RmcpAgent, tool: &'static str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else { panic!("arguments must be an object") };
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    tokio::time::timeout(ANSWER_TIMEOUT, agent.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool}: no answer within {ANSWER_TIMEOUT:?}"))
        .unwrap_or_else(|error| panic!("{tool}: {error}"))
}

/// Calls a tool and returns the text of its only text block, asserting that it is not an error result.
pub(crate) async fn rmcp_call_text(agent: &RmcpAgent, tool: &'static str, arguments: Value) -> String {
    let result = rmcp_call(agent, tool, arguments).await;
    assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    assert_eq!(result.content.len(), 1, "{tool}: {result:?}");
    result.content[0].as_text().unwrap_or_else(|| panic!("{tool}: not text: {result:?}")).text.clone()
}

pub(crate) async fn rmcp_tool_names(agent: &RmcpAgent) -> Vec<String> {
    let tools = tokio::time::timeout(ANSWER_TIMEOUT, agent.list_all_tools())
        .await
        .expect("tools/list within the timeout")
        .unwrap_or_else(|error| panic!("tools/list: {error}"));
    tools.into_iter().map(|tool| tool.name.into_owned()).collect()
}

pub(crate) async fn rmcp_close(agent: RmcpAgent) {
    let closed = tokio::time::timeout(ANSWER_TIMEOUT, agent.cancel()).await;
    assert!(matches!(closed, Ok(Ok(_))), "rmcp did not close cleanly: {closed:?}");
}

#[tokio::test]
async fn rmcp_client_initializes_lists_and_calls_both_backends() {
    let Some(everything) = InteropServer::everything() else { return };
    let demo = Demo::start().await;
    let gateway = gateway_with_both(&demo, &everything).await;

    let agent = rmcp_agent(&gateway.mcp()).await;
    let info = agent.peer_info().expect("the handshake's result");
    assert_eq!(info.protocol_version.to_string(), "2025-11-25", "{info:?}");
    assert!(info.capabilities.tools.is_some(), "the gateway offers tools: {info:?}");

    assert_lists_both_backends(&rmcp_tool_names(&agent).await);
    assert_eq!(rmcp_call_text(&agent, "demo__echo", json!({"text": "from rmcp"})).await, "from rmcp");
    assert_eq!(rmcp_call_text(&agent, "everything__echo", json!({"message": "from rmcp"})).await, "Echo: from rmcp");
    let added = rmcp_call(&agent, "demo__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(added.structured_content, Some(json!({"sum": 5})), "structured content passes through: {added:?}");
    rmcp_close(agent).await;
}

#[tokio::test]
async fn rmcp_clients_get_a_backend_session_each() {
    let demo = Demo::start().await;
    let gateway = gateway_with(&demo).await;

    let first = rmcp_agent(&gateway.mcp()).await;
    let second = rmcp_agent(&gateway.mcp()).await;
    assert_eq!(rmcp_call_text(&first, "demo__counter", json!({})).await, "1");
    assert_eq!(rmcp_call_text(&first, "demo__counter", json!({})).await, "2");
    assert_eq!(rmcp_call_text(&second, "demo__counter", json!({})).await, "1", "the second agent's counter is its own");
    assert_eq!(rmcp_call_text(&first, "demo__counter", json!({})).await, "3", "the first agent kept its session");
    rmcp_close(first).await;
    rmcp_close(second).await;
}

#[tokio::test]
async fn rmcp_client_survives_a_backend_restart_under_its_session() {
    let mut demo = Demo::start().await;
    let gateway = gateway_with(&demo).await;

    let agent = rmcp_agent(&gateway.mcp()).await;
    assert_eq!(rmcp_call_text(&agent, "demo__echo", json!({"text": "before"})).await, "before");
    assert_eq!(rmcp_call_text(&agent, "demo__counter", json!({})).await, "1");
    assert_eq!(rmcp_call_text(&agent, "demo__counter", json!({})).await, "2");

    demo.restart().await;
    assert_eq!(rmcp_call_text(&agent, "demo__echo", json!({"text": "after"})).await, "after");
    assert_eq!(
        rmcp_call_text(&agent, "demo__counter", json!({})).await,
        "1",
        "a new backend session on the new instance"
    );
    rmcp_close(agent).await;
}
