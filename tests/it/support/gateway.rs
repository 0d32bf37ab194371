//! A Switchyard gateway running in the test process on 127.0.0.1:0, and a minimal agent that speaks to it over
//! HTTP, so tests can assert exactly what crosses the agent-facing wire. [`ChildGateway`] runs the real
//! `switchyard` binary instead, for tests that kill or restart a gateway or run several replicas.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use switchyard::config::Config;
use switchyard::gateway::Gateway;
use switchyard::router::CallRouter;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::assert::{PATIENCE, eventually, poll_until};

pub const SESSION: &str = "mcp-session-id";

/// A running gateway; dropping it shuts it down.
pub struct TestGateway {
    pub base: String,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
    pub data_dir: std::path::PathBuf,
    /// The running gateway's router (and through it its ledger), for assertions on state the wire does not show.
    pub router: Arc<CallRouter>,
    /// `http://<address>` of `/metrics`'s own listener, when `[telemetry] metrics_listen` is set.
    pub metrics_base: Option<String>,
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.server.abort();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

fn fresh_data_dir() -> std::path::PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("switchyard-it-{}-{n}", std::process::id()))
}

impl TestGateway {
    /// Starts a gateway whose configuration is `[server]` defaults plus `extra` TOML (backends, server keys).
    pub async fn start(extra_server: &str, backends: &str) -> TestGateway {
        TestGateway::start_with(extra_server, "", backends).await
    }

    /// [`TestGateway::start`] with `sections`, extra top-level TOML tables (such as `[ledger]`) placed between the
    /// `[server]` keys and the backends.
    pub async fn start_with(extra_server: &str, sections: &str, backends: &str) -> TestGateway {
        let gateway = TestGateway::launch(extra_server, sections, backends).await;
        gateway.wait_ready().await;
        gateway
    }

    /// [`TestGateway::start_with`] without waiting until it is ready (for gateways that are not).
    pub async fn launch(extra_server: &str, sections: &str, backends: &str) -> TestGateway {
        TestGateway::launch_env(extra_server, sections, backends, &[]).await
    }

    /// [`TestGateway::start_with`] with these environment variables (the process's own are never read).
    pub async fn start_env(sections: &str, backends: &str, env: &[(&str, &str)]) -> TestGateway {
        let gateway = TestGateway::launch_env("", sections, backends, env).await;
        gateway.wait_ready().await;
        gateway
    }

    async fn launch_env(extra_server: &str, sections: &str, backends: &str, env: &[(&str, &str)]) -> TestGateway {
        let data_dir = fresh_data_dir();
        let text = format!(
            "[server]\ndata_dir = {:?}\n{extra_server}\n{sections}\n{backends}",
            data_dir.display().to_string()
        );
        let config = Config::from_toml_str(&text, "test.toml", env.iter().copied()).expect("test config");
        let scheme = config.server.scheme();
        let metrics_scheme = if config.telemetry.metrics_tls { "https" } else { "http" };
        let mut gateway = Gateway::build(config).await.expect("gateway builds");
        let metrics = gateway.bind_metrics().await.expect("the metrics listener binds");
        let metrics_base = metrics.map(|address| format!("{metrics_scheme}://{address}"));
        let router = Arc::clone(&gateway.router);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the gateway");
        let base = format!("{scheme}://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            gateway.serve(listener, async move { drop(stopped.await) }).await.expect("gateway serve");
        });
        TestGateway { base, stop: Some(stop), server, data_dir, router, metrics_base }
    }

    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Waits until the catalog exposes `tool` at `/mcp`. `/readyz` counts a discovery that failed as tried, and a
    /// retry may still bring the tools, so a test that needs a backend's tools waits for them, not for readiness.
    pub async fn wait_for_tool(&self, tool: &str) {
        let exposed = || self.router.catalog().routes().iter().any(|route| route.exposed == tool);
        eventually(&format!("the gateway exposes {tool}"), || async { exposed() }).await;
    }

    /// Waits until every backend's discovery has been tried once.
    async fn wait_ready(&self) {
        assert!(wait_ready(&self.base).await, "the gateway did not become ready");
    }
}

/// Polls `{base}/readyz` for up to [`PATIENCE`]; whether it answered 200.
pub async fn wait_ready(base: &str) -> bool {
    let http = if base.starts_with("https://") { trusting_client(&TEST_CERTIFICATES) } else { reqwest::Client::new() };
    let url = format!("{base}/readyz");
    poll_until(PATIENCE, || async {
        http.get(&url).send().await.is_ok_and(|response| response.status() == StatusCode::OK)
    })
    .await
}

/// The test certificates (`tests/fixtures/tls-N.crt`, for `localhost` and `127.0.0.1`) a TLS gateway serves.
pub const TEST_CERTIFICATES: [&str; 2] = ["tls-1", "tls-2"];

/// `tests/fixtures/NAME.crt` and `NAME.key`.
pub fn test_certificate(name: &str) -> (PathBuf, PathBuf) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    (fixtures.join(format!("{name}.crt")), fixtures.join(format!("{name}.key")))
}

/// An HTTP client that trusts exactly the test certificates `names` (no platform roots).
pub fn trusting_client(names: &[&str]) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().tls_built_in_root_certs(false).no_proxy();
    for name in names {
        let pem = std::fs::read(test_certificate(name).0).expect("a test certificate");
        builder = builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("PEM"));
    }
    builder.build().expect("client")
}

/// A `switchyard serve` child process: the real binary, its own process, killable with SIGKILL. Dropping it kills
/// the process.
pub struct ChildGateway {
    pub base: String,
    child: Child,
    /// Kept open for the life of the process: a gateway must never find its stdout closed.
    _stdout: Lines<BufReader<ChildStdout>>,
}

impl ChildGateway {
    /// Runs `switchyard serve --config CONFIG --listen 127.0.0.1:0` (no `SWITCHYARD_*` or `OTEL_*` variables from
    /// the test's environment), with its stderr appended to `log`; takes the URL from its first stdout line and waits until
    /// `/readyz` answers 200.
    pub async fn spawn(config: &Path, log: &Path) -> ChildGateway {
        ChildGateway::spawn_in(Some(config), Path::new("."), log).await
    }

    /// [`ChildGateway::spawn`] in the working directory `dir`; without a configuration file the gateway looks
    /// for one there and otherwise serves its embedded demo backend.
    pub async fn spawn_in(config: Option<&Path>, dir: &Path, log: &Path) -> ChildGateway {
        ChildGateway::launch(config, dir, log, &[], &[]).await
    }

    /// [`ChildGateway::spawn`] with extra `serve` arguments and environment variables (set after the defaults, so
    /// `SWITCHYARD_LOG` may be replaced; the test's own `SWITCHYARD_*` and `OTEL_*` variables are removed).
    pub async fn spawn_with(config: &Path, log: &Path, args: &[&str], env: &[(&str, &str)]) -> ChildGateway {
        ChildGateway::launch(Some(config), Path::new("."), log, args, env).await
    }

    /// [`ChildGateway::spawn`] with these environment variables set.
    pub async fn spawn_env(config: &Path, log: &Path, env: &[(&str, &str)]) -> ChildGateway {
        ChildGateway::spawn_with(config, log, &[], env).await
    }

    async fn launch(
        config: Option<&Path>,
        dir: &Path,
        log: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ChildGateway {
        let gateway = ChildGateway::launch_unready(config, dir, log, args, env).await;
        assert!(wait_ready(&gateway.base).await, "the gateway did not become ready; its log:\n{}", read_log(log));
        gateway
    }

    /// [`ChildGateway::spawn`] without waiting for it to be ready: returns once it printed its address.
    pub async fn spawn_unready(config: &Path, log: &Path) -> ChildGateway {
        ChildGateway::launch_unready(Some(config), Path::new("."), log, &[], &[]).await
    }

    async fn launch_unready(
        config: Option<&Path>,
        dir: &Path,
        log: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ChildGateway {
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("open the gateway log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        command.arg("serve").current_dir(dir);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command
            .args(args)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true);
        for (name, _) in std::env::vars_os() {
            let name_text = name.to_string_lossy();
            if name_text.starts_with("SWITCHYARD_") || name_text.starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        // A test that stops a gateway drains at once unless it asks for a grace period.
        command
            .env("SWITCHYARD_LOG", "switchyard=info")
            .env("SWITCHYARD_SHUTDOWN_GRACE", "0s")
            .envs(env.iter().copied());
        let mut child = command.spawn().expect("spawn the switchyard binary");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), stdout.next_line()).await;
        let Ok(Ok(Some(line))) = first else {
            let _ = child.start_kill();
            panic!("the gateway did not start ({first:?}); its log:\n{}", read_log(log));
        };
        // "Switchyard is serving MCP at http://127.0.0.1:PORT/mcp  (backends: …)", or "… is waiting for its call
        // ledger before serving MCP at http://…/mcp  (…)"
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://") || word.starts_with("https://"))
            .unwrap_or_else(|| panic!("no URL in the first line: {line:?}"));
        let base = url.strip_suffix("/mcp").unwrap_or(url).to_owned();
        ChildGateway { base, child, _stdout: stdout }
    }

    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("a running gateway")
    }

    /// Sends SIGHUP (reload the configuration file); returns once it is sent.
    pub async fn hang_up(&self) {
        let sent = Command::new("kill").args(["-HUP", &self.pid().to_string()]).status().await.expect("run kill");
        assert!(sent.success(), "SIGHUP the gateway");
    }

    /// Sends SIGTERM (a graceful shutdown) and returns the exit status once the process is gone.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("a running gateway").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().await.expect("run kill");
        assert!(sent.success(), "SIGTERM the gateway");
        self.child.wait().await.expect("reap the gateway")
    }

    /// Kills the process with SIGKILL (no shutdown of any kind) and returns once it is gone.
    pub async fn kill(mut self) {
        self.child.start_kill().expect("SIGKILL the gateway");
        let status = self.child.wait().await.expect("reap the gateway");
        assert!(!status.success(), "a killed gateway does not exit cleanly: {status}");
    }
}

fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_else(|error| format!("<unreadable: {error}>"))
}

/// A fresh directory under the system's temporary directory, removed when dropped.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(tag: &str) -> ScratchDir {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("switchyard-it-{}-{tag}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create a scratch directory");
        ScratchDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn backend_toml(name: &str, url: &str, extra: &str) -> String {
    format!("[[backends]]\nname = \"{name}\"\nurl = \"{url}\"\n{extra}\n")
}

/// What came back for one POST.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Option<Value>,
    pub raw: String,
}

/// An agent: an HTTP client bound to one endpoint and, after `initialize`, one session.
pub struct Agent {
    pub http: reqwest::Client,
    pub url: String,
    pub session: Option<String>,
    next_id: u64,
}

impl Agent {
    pub fn new(url: String) -> Agent {
        Agent::with_client(url, reqwest::Client::new())
    }

    /// An agent sending its requests with `http` (a client trusting a test certificate, say).
    pub fn with_client(url: String, http: reqwest::Client) -> Agent {
        Agent { http, url, session: None, next_id: 1 }
    }

    /// An agent that has initialized a session (and sent `notifications/initialized`).
    pub async fn connected(url: String) -> Agent {
        Agent::connected_with(url, json!({})).await
    }

    /// [`Agent::connected`], declaring these client capabilities.
    pub async fn connected_with(url: String, capabilities: Value) -> Agent {
        Agent::new(url).connect(capabilities).await
    }

    /// An agent that sends `Authorization: Bearer <token>` with every request.
    pub fn with_token(url: String, token: &str) -> Agent {
        let mut headers = HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().expect("header value"));
        let http = reqwest::Client::builder().default_headers(headers).build().expect("client");
        Agent { http, url, session: None, next_id: 1 }
    }

    /// Another handle on this agent's session (same credentials), numbering its requests from 1000 so its ids
    /// never repeat this handle's: for a request that runs while this one makes others.
    pub fn same_session(&self) -> Agent {
        Agent { http: self.http.clone(), url: self.url.clone(), session: self.session.clone(), next_id: 1000 }
    }

    /// An agent presenting `token` that has initialized a session.
    pub async fn connected_as(url: String, token: &str) -> Agent {
        Agent::with_token(url, token).connect(json!({})).await
    }

    /// Initializes a session, declaring `capabilities`, and sends `notifications/initialized`.
    pub async fn connect(mut self, capabilities: Value) -> Agent {
        let reply = self.initialize_with("2025-11-25", capabilities).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.raw);
        let ack = self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        assert_eq!(ack.status, StatusCode::ACCEPTED);
        self
    }

    pub async fn initialize(&mut self, version: &str) -> Reply {
        self.initialize_with(version, json!({})).await
    }

    pub async fn initialize_with(&mut self, version: &str, capabilities: Value) -> Reply {
        let message = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "it", "version": "1"}}});
        let reply = self.send(&message).await;
        self.session = reply.headers.get(SESSION).map(|v| v.to_str().unwrap().to_owned());
        reply
    }

    pub async fn send(&self, message: &Value) -> Reply {
        self.post_raw(serde_json::to_vec(message).unwrap(), &[]).await
    }

    /// The session's standalone `GET` stream, left open so its events can be read as they come.
    pub async fn open_stream(&self) -> reqwest::Response {
        let session = self.session.as_deref().expect("a session");
        let request = self.http.get(&self.url).header("accept", "text/event-stream").header(SESSION, session);
        request.send().await.expect("the agent's stream")
    }

    /// POSTs `message` in the session, accepting an event stream, and returns the response unread.
    pub async fn post_streaming(&self, message: &Value) -> reqwest::Response {
        let session = self.session.as_deref().expect("a session");
        let request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(SESSION, session)
            .body(message.to_string());
        request.send().await.expect("gateway reachable")
    }

    pub async fn post_raw(&self, body: Vec<u8>, headers: &[(&str, &str)]) -> Reply {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(session) = &self.session {
            request = request.header(SESSION, session);
        }
        // `headers` replaces same-named defaults (an agent that accepts only JSON sends one Accept).
        let mut extra = HeaderMap::new();
        for (name, value) in headers {
            extra.append(reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        request = request.headers(extra);
        let response = request.send().await.expect("gateway reachable");
        let (status, headers) = (response.status(), response.headers().clone());
        let raw = response.text().await.unwrap_or_default();
        let streamed = headers.get("content-type").is_some_and(|kind| kind == "text/event-stream");
        let body = if streamed { response_event(&raw) } else { serde_json::from_str(&raw).ok() };
        Reply { status, headers, body, raw }
    }

    /// Sends a request and returns the whole JSON-RPC response (asserting HTTP 200).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let reply = self.send(&message).await;
        assert_eq!(reply.status, StatusCode::OK, "{method}: {}", reply.raw);
        let body = reply.body.expect("a JSON body");
        assert_eq!(body["id"], json!(self.next_id), "the agent's own id comes back");
        body
    }

    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments})).await
    }

    pub async fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", json!({})).await;
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }
}

/// The JSON-RPC response in an SSE body (the last event that carries `result` or `error`).
fn response_event(raw: &str) -> Option<Value> {
    let mut decoder = switchyard::backend::event_stream::SseDecoder::new(1 << 24);
    decoder.feed(raw.as_bytes()).ok()?;
    let events = std::iter::from_fn(|| decoder.next_event());
    let messages = events.filter_map(|event| serde_json::from_str::<Value>(&event.data).ok());
    messages.filter(|message| message.get("result").is_some() || message.get("error").is_some()).last()
}
