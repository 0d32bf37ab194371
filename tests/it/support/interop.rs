//! Third-party MCP servers as real peers for interop tests: the reference `server-everything` (Node), a server on
//! the official Python SDK (`tests/interop/python_server.py`) and the project's conformance fixture
//! (`tests/conformance/fixture.mjs`, on the TypeScript SDK, in one of its protocol eras), each started on a free
//! loopback port for one test and killed when its [`InteropServer`] is dropped.
//!
//! The peers are installed by `scripts/test` (npm packages in `tests/interop/node_modules`, a venv in
//! `target/interop-venv`), which exports where they are:
//!
//! - `SWITCHYARD_INTEROP_NODE_MODULES`: the `node_modules` holding `@modelcontextprotocol/server-everything`;
//! - `SWITCHYARD_INTEROP_PYTHON`: the venv's `python`, with the `mcp` package;
//! - `SWITCHYARD_INTEROP_NODE`: the `node` binary (default: `node` on `PATH`).
//!
//! Without the variables the default install locations in this checkout are used, so a plain `cargo test` works
//! once `scripts/test` has run. When a peer is missing, a test is skipped with a loud `SKIPPED:` line — except
//! under `CI=true`, where a missing peer is a setup bug and panics.
//!
//! Every peer listens on 127.0.0.1 only: server-everything binds all interfaces by itself, so it is started with
//! `tests/interop/loopback-preload.cjs`, which gives its `listen(PORT)` the host 127.0.0.1. No peer outlives its
//! test: Drop kills its process group, and should this process die without unwinding, the peer sees its stdin
//! close and exits.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long a peer gets to accept connections: a bound on a hang, not a measurement. Node and Python cold starts
/// on a busy 2-core machine are slow (under `stress-ng --cpu 2` and parallel builds they took over 20 s).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);
/// Attempts at starting a peer; a port picked from the kernel can be taken by someone else before the peer binds.
const START_ATTEMPTS: usize = 3;
/// Bytes of output kept per stream; older output is dropped so a chatty peer cannot grow without bound.
const LOG_CAP: usize = 256 * 1024;

/// Tools per `tools/list` page the Python server is started with.
pub const PYTHON_PAGE_SIZE: usize = 10;
/// Every tool the Python server lists, in its order: `echo`, `add`, then `tool_01` … `tool_25`.
pub fn python_tool_names() -> Vec<String> {
    let mut names = vec!["echo".to_owned(), "add".to_owned()];
    names.extend((1..=25).map(|i| format!("tool_{i:02}")));
    names
}

/// How the Python server answers POSTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonMode {
    /// Every response as a `text/event-stream`.
    Sse,
    /// Every response as one `application/json` body (the SDK's `json_response`).
    Json,
}

/// The stdout line prefixes with which a server reports, by itself, a session it started and one a client ended
/// with `DELETE`; each is followed by the session id.
#[derive(Clone, Copy)]
struct SessionMarkers {
    started: &'static str,
    ended: &'static str,
}

/// server-everything's own per-request logging (its `console.log` lines).
const EVERYTHING_MARKERS: SessionMarkers = SessionMarkers {
    started: "Session initialized with ID: ",
    ended: "Received session termination request for session ",
};
/// The fixture reports sessions on stderr only ("session <id> opened"); see [`InteropServer::logs`].
const FIXTURE_MARKERS: SessionMarkers = SessionMarkers { started: "SESSION ", ended: "ENDED " };
/// Printed by `python_server.py` for exactly this purpose.
const PYTHON_MARKERS: SessionMarkers = SessionMarkers { started: "SESSION ", ended: "ENDED " };

/// A running third-party MCP server. Dropping it kills the server's whole process group.
pub struct InteropServer {
    name: String,
    markers: SessionMarkers,
    child: Child,
    /// Held open for the server's lifetime: both peers exit when their stdin ends, so if this test process dies
    /// without running Drop, the kernel closes the pipe and the servers follow instead of lingering.
    _stdin: Option<ChildStdin>,
    port: u16,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The threads draining stdout and stderr; joined after the kill so the logs are complete.
    readers: Vec<JoinHandle<()>>,
    /// Whether the child has been waited for. After that its pid may belong to someone else, so no signal may be
    /// sent to it or to its group any more.
    reaped: bool,
}

impl InteropServer {
    /// `@modelcontextprotocol/server-everything` in `streamableHttp` mode, or `None` if it is not installed
    /// (outside CI).
    pub fn everything() -> Option<Self> {
        Self::everything_in("streamableHttp")
    }

    /// server-everything in the legacy HTTP+SSE (2024-11-05) mode: its event stream is [`Self::legacy_sse_url`].
    pub fn everything_legacy_sse() -> Option<Self> {
        Self::everything_in("sse")
    }

    /// server-everything with the transport named by its first argument.
    fn everything_in(transport: &'static str) -> Option<Self> {
        let (node, entry) = everything_command()?;
        let preload = interop_dir().join("loopback-preload.cjs");
        Some(Self::start("server-everything", EVERYTHING_MARKERS, |port| {
            let mut command = Command::new(&node);
            command
                .arg("--require")
                .arg(&preload)
                .arg(&entry)
                .arg(transport)
                .env("PORT", port.to_string())
                .env("SWITCHYARD_EXIT_ON_STDIN_EOF", "1")
                .current_dir(interop_dir());
            command
        }))
    }

    /// The conformance fixture serving the protocol era `era` (`legacy`, `dual` or `modern`), or `None` if Node or
    /// the SDK is not installed (outside CI).
    pub fn fixture(era: &'static str) -> Option<Self> {
        Self::fixture_in(era, "0")
    }

    /// The conformance fixture serving both eras, its 2026-07-28 side running the tasks scenarios' tools as tasks
    /// of its own (`FIXTURE_TASKS=1`: the tasks extension, for a gateway to pass through), or `None` if Node or the
    /// SDK is not installed (outside CI). Its stderr logs each task request (`task <what> <id>`).
    pub fn fixture_with_tasks() -> Option<Self> {
        Self::fixture_in("dual", "1")
    }

    fn fixture_in(era: &'static str, tasks: &'static str) -> Option<Self> {
        let (node, entry) = everything_command()?;
        let node_modules = entry.ancestors().nth(4).expect("node_modules above server-everything").to_path_buf();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/fixture.mjs");
        Some(Self::start("conformance fixture", FIXTURE_MARKERS, |port| {
            let mut command = Command::new(&node);
            command
                .arg(&script)
                .env("PORT", port.to_string())
                .env("FIXTURE_ERA", era)
                .env("FIXTURE_TASKS", tasks)
                .env("SWITCHYARD_INTEROP_NODE_MODULES", &node_modules)
                .env("SWITCHYARD_EXIT_ON_STDIN_EOF", "1");
            command
        }))
    }

    /// The Python SDK server in the given response mode, or `None` if its venv is not installed (outside CI).
    pub fn python(mode: PythonMode) -> Option<Self> {
        let python = python_interpreter()?;
        let script = interop_dir().join("python_server.py");
        let name = match mode {
            PythonMode::Sse => "python-sdk (SSE)",
            PythonMode::Json => "python-sdk (JSON)",
        };
        Some(Self::start(name, PYTHON_MARKERS, |port| {
            let mut command = Command::new(&python);
            command.arg(&script).arg(port.to_string()).arg("--exit-on-stdin-eof");
            command.arg("--page-size").arg(PYTHON_PAGE_SIZE.to_string());
            if mode == PythonMode::Json {
                command.arg("--json");
            }
            // Unbuffered, so the ready line and any traceback reach the captured logs promptly.
            command.env("PYTHONUNBUFFERED", "1").current_dir(interop_dir());
            command
        }))
    }

    /// The MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// server-everything's legacy event stream, `http://127.0.0.1:<port>/sse`.
    pub fn legacy_sse_url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }

    /// Everything the server printed so far, for assertion messages.
    pub fn logs(&self) -> String {
        let stdout = String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned();
        let stderr = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
        format!("--- {} stderr ---\n{stderr}\n--- {} stdout ---\n{stdout}", self.name, self.name)
    }

    /// Ids of the sessions the server says it started, in order, as far as its output has been read.
    pub fn started_sessions(&self) -> Vec<String> {
        self.marked(self.markers.started)
    }

    /// Ids of the sessions the server says a client ended with `DELETE`, as far as its output has been read.
    pub fn ended_sessions(&self) -> Vec<String> {
        self.marked(self.markers.ended)
    }

    fn marked(&self, prefix: &str) -> Vec<String> {
        let stdout = self.stdout.lock().unwrap();
        String::from_utf8_lossy(&stdout)
            .lines()
            .filter_map(|line| line.trim().strip_prefix(prefix))
            .map(|id| id.trim().to_owned())
            .collect()
    }

    /// Starts the server, retrying on a fresh port if the picked one was taken in the meantime.
    fn start(name: &str, markers: SessionMarkers, command: impl Fn(u16) -> Command) -> Self {
        let mut last_logs = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let mut command = command(port);
            // Its own process group, so Drop can kill anything the server spawned along with it.
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
            let mut child = command.spawn().unwrap_or_else(|error| panic!("cannot start {name}: {error}"));
            let stdin = child.stdin.take();
            let (stdout, stdout_reader) = capture(child.stdout.take().expect("piped stdout"));
            let (stderr, stderr_reader) = capture(child.stderr.take().expect("piped stderr"));
            let readers = vec![stdout_reader, stderr_reader];
            let mut server = Self {
                name: name.to_owned(),
                markers,
                child,
                _stdin: stdin,
                port,
                stdout,
                stderr,
                readers,
                reaped: false,
            };
            match server.wait_until_accepting() {
                Ok(()) => return server,
                Err(reason) => {
                    server.stop();
                    last_logs = format!("{reason}\n{}", server.logs());
                    // Only a lost port race is worth another try.
                    let taken = last_logs.contains("EADDRINUSE") || last_logs.contains("address already in use");
                    if !taken {
                        break;
                    }
                }
            }
        }
        panic!("{name} did not start:\n{last_logs}");
    }

    fn wait_until_accepting(&mut self) -> Result<(), String> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(|error| error.to_string())? {
                self.reaped = true;
                return Err(format!("{} exited before accepting connections ({status})", self.name));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                return Err(format!("{} did not accept on {address} within {STARTUP_TIMEOUT:?}", self.name));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl InteropServer {
    /// Kills the server and everything in its process group, reaps it, and waits for its output to be drained.
    /// Idempotent.
    fn stop(&mut self) {
        if !self.reaped {
            // The group is killed before the child is reaped: until `wait`, the child's pid (= the group id)
            // cannot be reused, so the signal cannot hit an unrelated process.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
        // The pipes reach end-of-file once every process holding them is gone, which the group kill ensured.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
    }
}

impl Drop for InteropServer {
    fn drop(&mut self) {
        self.stop();
        // A failing test unwinds through here: show what the server said, next to the assertion message.
        if thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

/// The venv's `python`, with the `mcp` package, or `None` if the venv is not installed (outside CI). For tests
/// that run a script of `tests/interop` on the Python SDK themselves, such as the SDK client
/// `python_agent.py`.
/// The `node` binary (absolute) and server-everything's entry script, or `None` if either is missing (outside CI).
pub fn everything_command() -> Option<(PathBuf, PathBuf)> {
    let node_modules = tool_path("SWITCHYARD_INTEROP_NODE_MODULES", || interop_dir().join("node_modules"));
    let entry = node_modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.is_file() {
        return missing(&format!("server-everything is not installed ({} does not exist)", entry.display()));
    }
    let node = std::env::var_os("SWITCHYARD_INTEROP_NODE").map_or_else(|| PathBuf::from("node"), PathBuf::from);
    let Some(node) = absolute_program(&node) else {
        return missing(&format!("Node.js is not runnable as `{}`", node.display()));
    };
    Some((node, entry))
}

/// `program` as an absolute path: itself when it has a `/`, else found on `PATH`.
fn absolute_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}

pub fn python_interpreter() -> Option<PathBuf> {
    let python = tool_path("SWITCHYARD_INTEROP_PYTHON", || {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop-venv/bin/python")
    });
    if !python.is_file() {
        return missing(&format!("the Python venv is not installed ({} does not exist)", python.display()));
    }
    Some(python)
}

/// `tests/interop`, where the peers' scripts and packages live.
pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn tool_path(variable: &str, default: impl FnOnce() -> PathBuf) -> PathBuf {
    std::env::var_os(variable).filter(|value| !value.is_empty()).map_or_else(default, PathBuf::from)
}

/// A peer is not installed: skip the test, unless this is CI, where every peer must be present.
fn missing<T>(what: &str) -> Option<T> {
    skip_unless_ci(&format!("interop peer missing: {what}"), "run scripts/test (it installs the interop peers)")
}

/// `None` after a loud `SKIPPED:` line naming `what` is missing and how to get it (`hint`); a panic under `CI=true`,
/// where a missing peer is a setup bug.
pub fn skip_unless_ci<T>(what: &str, hint: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("under CI=true: {what}; {hint}");
    }
    // Straight to the process's stderr: libtest captures `eprintln!` of passing tests, and a skip must be seen
    // (scripts/test also counts these lines in its summary).
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {what}; {hint} ***\n");
    None
}

/// A port that was free a moment ago. The listener is dropped so the peer can bind it; the small race with other
/// processes is covered by [`START_ATTEMPTS`].
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address of a bound listener").port()
}

/// Drains a child's output on a thread (an undrained pipe would stall a chatty server) into a bounded buffer.
fn capture(stream: impl Read + Send + 'static) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buffer);
    let reader = thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            let mut kept = sink.lock().unwrap();
            kept.extend_from_slice(&line);
            if kept.len() > LOG_CAP {
                let excess = kept.len() - LOG_CAP / 2;
                kept.drain(..excess);
            }
            line.clear();
        }
    });
    (buffer, reader)
}
