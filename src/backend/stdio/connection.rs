//! One MCP session with one stdio backend process (MCP 2025-11-25 `basic/transports.mdx` §stdio, `lifecycle`,
//! `utilities/cancellation`; design §2, §7).
//!
//! Rules:
//! - Framing: one JSON-RPC message per line on stdin and stdout, UTF-8, no embedded newlines (serde_json never
//!   writes one). A stdout line is bounded ([`super::StdioOptions::max_line`]); a longer one, a line that is not
//!   JSON, or JSON that is not a JSON-RPC message is logged and ends the process. Blank lines are skipped.
//! - One writer task owns stdin, so a request's line is written whole or not at all, whatever the caller does;
//!   one reader task owns stdout; a supervisor task owns the process and stops it (see [`super::process`]) when
//!   the connection is closed or dropped, or the process ends or misbehaves.
//! - The handshake is `initialize` then `notifications/initialized`, under the caller's deadline.
//! - Requests are numbered by the connection, so agents' ids never reach the process; responses are matched by
//!   id. A caller's progress token is swapped for the request's id and swapped back on the way to the agent.
//! - Server-to-client requests: `ping` → `{}`; sampling, elicitation and roots are relayed to the agent when it
//!   declared the capability, anything else is -32601 (shared code with the HTTP client). The relay used is that
//!   of the newest call in flight, because with `sessions = "per-agent"` every call on the process belongs to the
//!   same agent session; a shared process relays nothing that cannot be attributed (only progress, by token).
//! - Error classes keep at most once: `NotDelivered` only when no byte of the request entered the pipe (the
//!   process had already ended, or stdin was closed before the first byte); once bytes may have been written, a
//!   crash, a timeout or a garbled answer is `AfterDelivery`. A cancelled or timed-out request is announced with
//!   `notifications/cancelled` carrying the process-side id.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};

use super::lines::LineReader;
use super::process::{self, Spawned};
use super::{Sharing, StdioBackend, StdioOptions};
use crate::backend::mcp_client::{
    Listener, McpError, Relay, answer_server_request, initialize_params, into_result, negotiated_version,
    swap_progress_token,
};
use crate::mcp::jsonrpc::{self, Kind};
use crate::mcp::method;

/// How much of a bad stdout line is quoted in the log.
const EXCERPT: usize = 200;

/// A live session with one process.
pub struct StdioConnection {
    shared: Arc<Shared>,
    supervisor: Option<JoinHandle<()>>,
    pid: u32,
    version: &'static str,
    capabilities: Value,
}

/// What the connection's tasks share.
struct Shared {
    backend: Arc<str>,
    sharing: Sharing,
    next_id: AtomicU64,
    state: Mutex<State>,
    writer: mpsc::UnboundedSender<Outgoing>,
    /// Asks the supervisor to stop the process.
    stop: Notify,
}

#[derive(Default)]
struct State {
    /// Why the process is gone, once it is.
    ended: Option<String>,
    /// Requests waiting for their response, by the connection's id (newest last).
    calls: BTreeMap<u64, InFlight>,
}

struct InFlight {
    answer: oneshot::Sender<Value>,
    relay: Relay,
    /// The caller's progress token, when it sent one.
    theirs: Option<Value>,
    deadline: Instant,
}

/// A line for stdin; `written` learns whether it went in whole (`Err(n)`: only `n` bytes did).
struct Outgoing {
    line: Vec<u8>,
    written: Option<oneshot::Sender<Result<(), usize>>>,
}

fn not_delivered(reason: impl Into<String>) -> McpError {
    McpError::NotDelivered { reason: reason.into() }
}

fn after_delivery(reason: impl Into<String>) -> McpError {
    McpError::AfterDelivery { reason: reason.into() }
}

impl StdioConnection {
    /// Starts a process for `backend` and completes the handshake before `deadline`, offering the agent's
    /// client `capabilities`. Every failure is `NotDelivered`: no request of the caller was sent yet.
    pub async fn connect(
        backend: &StdioBackend,
        options: &StdioOptions,
        capabilities: &Value,
        deadline: Instant,
    ) -> Result<StdioConnection, McpError> {
        let program = &backend.command.program;
        let spawned = process::spawn(&backend.name, &backend.command)
            .map_err(|error| not_delivered(format!("could not start `{}`: {error}", program.display())))?;
        let mut connection = StdioConnection::start(backend, spawned, options);
        match timeout_at(deadline, connection.handshake(capabilities, deadline)).await {
            Ok(Ok(())) => Ok(connection),
            Ok(Err(error)) => Err(not_delivered(format!("the backend process's handshake failed: {error}"))),
            Err(_) => Err(not_delivered("the deadline passed during the backend process's handshake")),
        }
    }

    fn start(backend: &StdioBackend, spawned: Spawned, options: &StdioOptions) -> StdioConnection {
        let Spawned { child, pid, stdin, stdout } = spawned;
        let (writer, queue) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            backend: Arc::clone(&backend.name),
            sharing: backend.sharing,
            next_id: AtomicU64::new(1),
            state: Mutex::default(),
            writer,
            stop: Notify::new(),
        });
        let (closing, closed) = watch::channel(false);
        tokio::spawn(write_stdin(Arc::clone(&shared), stdin, queue, closed));
        tokio::spawn(read_stdout(Arc::clone(&shared), stdout, options.max_line));
        let supervisor = tokio::spawn(supervise(Arc::clone(&shared), child, pid, closing, options.grace));
        StdioConnection { shared, supervisor: Some(supervisor), pid, version: "", capabilities: Value::Null }
    }

    async fn handshake(&mut self, capabilities: &Value, deadline: Instant) -> Result<(), McpError> {
        let result =
            self.request(method::INITIALIZE, initialize_params(capabilities), &Relay::default(), deadline).await?;
        self.version = negotiated_version(&result)?;
        self.capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        // Queued behind nothing and ahead of every later request: the writer keeps the order.
        self.shared.send(&jsonrpc::notification(method::INITIALIZED, None));
        Ok(())
    }

    /// Sends one request and returns its JSON-RPC `result`; `params` of `Value::Null` are omitted. The backend's
    /// messages about the request go to `relay`; the agent may cancel through it.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        relay: &Relay,
        deadline: Instant,
    ) -> Result<Value, McpError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let ours = Value::from(id);
        let mut params = (!params.is_null()).then_some(params);
        let theirs = swap_progress_token(&mut params, &ours);
        let line = encode(&jsonrpc::request(&ours, method, params)).map_err(not_delivered)?;
        let (answer, answered) = oneshot::channel();
        let call = InFlight { answer, relay: relay.clone(), theirs, deadline };
        let _registered = self.shared.register(id, call)?;
        self.deliver(line, deadline).await?;
        let cancelled = async {
            match relay.cancel() {
                Some(cancel) => cancel.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = timeout_at(deadline, answered) => match answer {
                Ok(Ok(message)) => into_result(message),
                Ok(Err(_)) => Err(after_delivery(format!(
                    "the backend process ended before answering: {}",
                    self.shared.ended().unwrap_or_default()
                ))),
                Err(_) => {
                    self.shared.cancel(id, "the gateway's deadline for the request passed");
                    Err(after_delivery("the deadline passed before the backend process answered"))
                }
            },
            () = cancelled => {
                self.shared.cancel(id, "cancelled by the agent");
                Err(McpError::Cancelled)
            }
        }
    }

    /// Hands the line to the writer and learns whether any of it entered the pipe.
    async fn deliver(&self, line: Vec<u8>, deadline: Instant) -> Result<(), McpError> {
        let (written, outcome) = oneshot::channel();
        let unsent = |shared: &Shared| {
            not_delivered(format!(
                "the backend process's stdin closed before the request was written: {}",
                shared.ended().unwrap_or_else(|| "it stopped reading".into())
            ))
        };
        if self.shared.writer.send(Outgoing { line, written: Some(written) }).is_err() {
            return Err(unsent(&self.shared));
        }
        match timeout_at(deadline, outcome).await {
            Ok(Ok(Ok(()))) => Ok(()),
            // Dropped unwritten (the writer stopped first), or refused before its first byte.
            Ok(Err(_) | Ok(Err(0))) => Err(unsent(&self.shared)),
            Ok(Ok(Err(bytes))) => {
                Err(after_delivery(format!("the backend process stopped reading after {bytes} bytes of the request")))
            }
            Err(_) => Err(after_delivery("the deadline passed while the request was being written to the process")),
        }
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The server capabilities from the process's `InitializeResult`.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process can still take requests.
    pub fn is_alive(&self) -> bool {
        self.shared.ended().is_none()
    }

    /// Stops the process (stdin closed, SIGTERM, SIGKILL to its group) and waits until it is reaped.
    pub async fn close(mut self) {
        self.shared.stop.notify_one();
        if let Some(supervisor) = self.supervisor.take() {
            let _ = supervisor.await;
        }
    }
}

impl Drop for StdioConnection {
    fn drop(&mut self) {
        // The supervisor stops and reaps the process in the background.
        self.shared.stop.notify_one();
    }
}

/// Removes a call from the table when its caller stops waiting, however it stops.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.lock().calls.remove(&self.id);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single insert, removal or assignment: a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn ended(&self) -> Option<String> {
        self.lock().ended.clone()
    }

    fn register(&self, id: u64, call: InFlight) -> Result<Registered<'_>, McpError> {
        let mut state = self.lock();
        if let Some(reason) = &state.ended {
            return Err(not_delivered(format!("the backend process had already ended: {reason}")));
        }
        state.calls.insert(id, call);
        Ok(Registered { shared: self, id })
    }

    /// Records why the process is gone (the first reason wins), fails every waiting call (their callers see
    /// the answer channel close) and asks the supervisor to stop the process.
    fn end(&self, reason: String) {
        let calls = {
            let mut state = self.lock();
            state.ended.get_or_insert(reason);
            std::mem::take(&mut state.calls)
        };
        drop(calls);
        self.stop.notify_one();
    }

    /// Queues a message whose delivery nobody waits for (notifications, answers to the process's requests).
    fn send(&self, message: &Value) {
        if let Ok(line) = encode(message) {
            let _ = self.writer.send(Outgoing { line, written: None });
        }
    }

    fn cancel(&self, id: u64, reason: &str) {
        let params = json!({"requestId": id, "reason": reason});
        self.send(&jsonrpc::notification(method::CANCELLED, Some(params)));
    }

    /// Handles one stdout line; `Err` is why the process must end.
    fn receive(self: &Arc<Self>, line: &[u8]) -> Result<(), String> {
        let message: Value = serde_json::from_slice(line)
            .map_err(|error| format!("the process wrote a line that is not JSON ({error}): {}", excerpt(line)))?;
        match jsonrpc::kind(&message) {
            Kind::Response { id } => {
                let call = id.as_u64().and_then(|id| self.lock().calls.remove(&id));
                match call {
                    Some(call) => drop(call.answer.send(message)),
                    None => tracing::debug!(backend = %self.backend, %id, "a response nobody waits for (any more)"),
                }
                Ok(())
            }
            Kind::Request { id, method } => {
                self.answer_request(id.clone(), method.to_owned(), message.clone());
                Ok(())
            }
            Kind::Notification { method } => {
                self.hear(&message, method);
                Ok(())
            }
            Kind::Invalid => Err(format!("the process wrote a line that is not a JSON-RPC message: {}", excerpt(line))),
        }
    }

    /// The newest call in flight, when messages not addressed to a call may go to its agent.
    fn attributable_call(&self) -> Option<(Relay, Instant)> {
        if self.sharing == Sharing::Shared {
            return None;
        }
        let state = self.lock();
        state.calls.values().next_back().map(|call| (call.relay.clone(), call.deadline))
    }

    fn answer_request(self: &Arc<Self>, id: Value, method: String, message: Value) {
        let shared = Arc::clone(self);
        let (relay, deadline) = match self.attributable_call() {
            Some((relay, deadline)) => (Some(relay), deadline),
            None => (None, Instant::now()),
        };
        // The agent may take until the call's deadline to answer; stdout must keep being read meanwhile.
        tokio::spawn(async move {
            let reply = answer_server_request(relay.as_ref(), deadline, &id, &method, message).await;
            shared.send(&reply);
        });
    }

    fn hear(&self, message: &Value, method: &str) {
        if method == method::PROGRESS {
            let token = message.pointer("/params/progressToken").and_then(Value::as_u64);
            let call = token.and_then(|token| {
                let state = self.lock();
                let call = state.calls.get(&token)?;
                Some((call.relay.clone(), call.theirs.clone()?))
            });
            if let (Some(token), Some((relay, theirs))) = (token, call) {
                let ours = Value::from(token);
                let listener = Listener { relay: Some(&relay), progress: Some((&ours, &theirs)), list_changed: None };
                listener.hear(message.clone(), method);
            }
            return;
        }
        let relay = self.attributable_call().map(|(relay, _)| relay);
        Listener { relay: relay.as_ref(), progress: None, list_changed: None }.hear(message.clone(), method);
    }
}

fn encode(message: &Value) -> Result<Vec<u8>, String> {
    let mut line = serde_json::to_vec(message).map_err(|error| format!("cannot encode the request: {error}"))?;
    line.push(b'\n');
    Ok(line)
}

fn excerpt(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(EXCERPT)]).into_owned();
    if line.len() > EXCERPT { format!("{text}…") } else { text }
}

async fn write_stdin(
    shared: Arc<Shared>,
    mut stdin: ChildStdin,
    mut queue: mpsc::UnboundedReceiver<Outgoing>,
    mut closing: watch::Receiver<bool>,
) {
    loop {
        let next = tokio::select! {
            biased;
            _ = closing.changed() => break,
            next = queue.recv() => next,
        };
        let Some(outgoing) = next else { break };
        let result = write_line(&mut stdin, &outgoing.line).await;
        let failed = result.is_err();
        if let Some(written) = outgoing.written {
            let _ = written.send(result);
        }
        if failed {
            shared.end("the process closed its stdin".into());
            break;
        }
    }
    // Dropping stdin closes the pipe: the first step of a polite shutdown.
}

/// Writes all of `line`; `Err(n)` when the pipe failed after `n` bytes.
async fn write_line(stdin: &mut ChildStdin, line: &[u8]) -> Result<(), usize> {
    let mut written = 0;
    while written < line.len() {
        match stdin.write(&line[written..]).await {
            Ok(0) | Err(_) => return Err(written),
            Ok(bytes) => written += bytes,
        }
    }
    Ok(())
}

async fn read_stdout(shared: Arc<Shared>, stdout: ChildStdout, max_line: usize) {
    let mut lines = LineReader::new(BufReader::new(stdout), max_line);
    let reason = loop {
        match lines.next_line().await {
            Ok(None) => break "the process closed its stdout (it exited or crashed)".to_owned(),
            Err(error) => break format!("reading the process's stdout failed: {error}"),
            Ok(Some(line)) if line.truncated => break format!("the process wrote a line longer than {max_line} bytes"),
            Ok(Some(line)) if line.bytes.trim_ascii().is_empty() => {}
            Ok(Some(line)) => {
                if let Err(reason) = shared.receive(&line.bytes) {
                    tracing::warn!(backend = %shared.backend, %reason, "stopping a stdio backend process");
                    break reason;
                }
            }
        }
    };
    shared.end(reason);
}

/// Owns the process: waits until it must stop (or stops on its own), then stops its group and reaps it.
async fn supervise(shared: Arc<Shared>, mut child: Child, pid: u32, closing: watch::Sender<bool>, grace: Duration) {
    tokio::select! {
        () = shared.stop.notified() => {}
        status = child.wait() => {
            tracing::info!(backend = %shared.backend, pid, status = ?status.ok(), "stdio backend process exited");
        }
    }
    let _ = closing.send(true);
    process::stop(&mut child, pid, grace).await;
    shared.end("the gateway stopped the process".into());
    tracing::debug!(backend = %shared.backend, pid, "stdio backend process stopped");
}
