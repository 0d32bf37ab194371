//! A fault-injecting legacy HTTP+SSE (2024-11-05) MCP backend for integration tests.
//!
//! `GET /sse` opens a session: an event stream whose first event is `endpoint` (or not, or one naming another
//! origin, as scripted); `POST /message?session=<n>` delivers one message, acknowledged with 202 after any answer
//! was queued on the stream (so an answer may overtake its acknowledgement, as real servers allow). Each session
//! keeps its own counter (the `counter` tool), so tests can tell sessions apart. Every request is recorded, and
//! every tool run is counted, so tests can assert what reached the backend and how often a tool ran.
//!
//! HTTP is hand-written on a raw loopback `TcpListener` with the fault backend's parser (one request per
//! connection); a stream ends when its session is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::fault_backend::{Recorded, accept_loop, read_request, send_raw, write_head};

/// How long a ping sent before a result waits for the client's answer.
const PING_WAIT: Duration = Duration::from_secs(10);

/// What the first event of a stream says.
#[derive(Clone, Debug, Default)]
pub enum EndpointEvent {
    /// `endpoint` with `/message?session=<n>`, resolved against the stream's URL.
    #[default]
    Relative,
    /// `endpoint` with this URI verbatim.
    Absolute(String),
    /// No event at all; the stream stays open.
    Never,
}

/// The backend's behaviour; `Default` is a correct, well-behaved backend. The `tools/call` faults are exclusive;
/// the first set one wins, in this order.
#[derive(Clone, Debug, Default)]
pub struct Script {
    pub endpoint: EndpointEvent,
    /// Answer a `tools/call` POST with this status: a 4xx without running the tool, a 5xx after running it.
    pub call_status: Option<u16>,
    /// Accept a `tools/call` (it runs), then end its session's stream without answering.
    pub drop_stream_after_call: bool,
    /// Accept a `tools/call` (it runs), then answer with a `message` event whose data is not JSON.
    pub garbage_after_call: bool,
    /// Accept a `tools/call` (it runs) and never answer it.
    pub stall_call: bool,
    /// Before answering a `tools/call`, send the client a `ping` and wait for its answer; the result's text is
    /// that answer.
    pub ping_before_result: bool,
}

/// A running backend; dropping it stops the server and every open stream.
pub struct FaultLegacySse {
    origin: String,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    script: Script,
    requests: Vec<Recorded>,
    executions: HashMap<String, usize>,
    sessions_opened: u64,
    /// Live sessions by number; removing one ends its stream.
    sessions: HashMap<u64, Session>,
}

struct Session {
    events: mpsc::UnboundedSender<Vec<u8>>,
    counter: u64,
    /// Waits for the client's answer to the ping sent on this session.
    ping: Option<oneshot::Sender<Value>>,
}

impl FaultLegacySse {
    pub async fn start(script: Script) -> FaultLegacySse {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the legacy SSE backend");
        let port = listener.local_addr().expect("legacy SSE backend address").port();
        let shared = Arc::new(Shared::default());
        shared.lock().script = script;
        let served = Arc::clone(&shared);
        let server = tokio::spawn(accept_loop(listener, move |stream| serve(Arc::clone(&served), stream)));
        FaultLegacySse { origin: format!("http://127.0.0.1:{port}"), shared, server }
    }

    /// The event stream's URL.
    pub fn url(&self) -> String {
        format!("{}/sse", self.origin)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn update(&self, change: impl FnOnce(&mut Script)) {
        change(&mut self.shared.lock().script);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// The JSON-RPC messages POSTed with this method.
    pub fn posted(&self, rpc_method: &str) -> Vec<Value> {
        let state = self.shared.lock();
        state
            .requests
            .iter()
            .filter(|r| r.rpc_method.as_deref() == Some(rpc_method))
            .filter_map(|r| r.body.clone())
            .collect()
    }

    pub fn executions(&self, tool: &str) -> usize {
        self.shared.lock().executions.get(tool).copied().unwrap_or(0)
    }

    pub fn sessions_opened(&self) -> u64 {
        self.shared.lock().sessions_opened
    }
}

impl Drop for FaultLegacySse {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues an event on a session's stream; false when the session is gone.
    fn push(&self, session: u64, event: Vec<u8>) -> bool {
        self.lock().sessions.get(&session).is_some_and(|live| live.events.send(event).is_ok())
    }
}

async fn serve(shared: Arc<Shared>, mut stream: TcpStream) {
    let Ok(Ok(request)) = read_request(&mut stream).await else { return };
    shared.lock().requests.push(request.clone());
    let _ = match (request.http_method.as_str(), request.path.split('?').next()) {
        ("GET", Some("/sse")) => open_stream(&shared, &mut stream).await,
        ("POST", Some("/message")) => post(&shared, &mut stream, &request).await,
        _ => send_raw(&mut stream, 404, Vec::new(), "text/plain", b"no such endpoint").await,
    };
    let _ = stream.shutdown().await;
}

async fn open_stream(shared: &Arc<Shared>, stream: &mut TcpStream) -> std::io::Result<()> {
    let (events, mut queued) = mpsc::unbounded_channel();
    let (number, endpoint) = {
        let mut state = shared.lock();
        state.sessions_opened += 1;
        let number = state.sessions_opened;
        state.sessions.insert(number, Session { events, counter: 0, ping: None });
        (number, state.script.endpoint.clone())
    };
    let head = [("Content-Type", b"text/event-stream".to_vec()), ("Cache-Control", b"no-cache".to_vec())];
    write_head(stream, 200, &head).await?;
    match endpoint {
        EndpointEvent::Relative => stream.write_all(&event("endpoint", &format!("/message?session={number}"))).await?,
        EndpointEvent::Absolute(uri) => stream.write_all(&event("endpoint", &uri)).await?,
        EndpointEvent::Never => {}
    }
    while let Some(bytes) = queued.recv().await {
        stream.write_all(&bytes).await?;
    }
    Ok(())
}

/// One message from the client; the 202 goes out after any answer was queued on the stream.
async fn post(shared: &Arc<Shared>, stream: &mut TcpStream, request: &Recorded) -> std::io::Result<()> {
    let session = request.path.split("session=").nth(1).and_then(|number| number.parse::<u64>().ok());
    let Some(session) = session.filter(|number| shared.lock().sessions.contains_key(number)) else {
        return send_raw(stream, 404, Vec::new(), "text/plain", b"no such session").await;
    };
    let message = request.body.clone().unwrap_or(Value::Null);
    let (Some(id), Some(method)) = (message.get("id").cloned(), message["method"].as_str()) else {
        let ping = shared.lock().sessions.get_mut(&session).and_then(|live| live.ping.take());
        if let (Some(ping), Some(_)) = (ping, message.get("result").or(message.get("error"))) {
            let _ = ping.send(message);
        }
        return accepted(stream).await;
    };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fault-legacy-sse", "version": "1"},
        }),
        "tools/list" => json!({"tools": [tool("echo"), tool("counter")]}),
        "tools/call" => return call(shared, stream, session, id, &message["params"]).await,
        _ => {
            return answer(
                shared,
                stream,
                session,
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}}),
            )
            .await;
        }
    };
    answer(shared, stream, session, json!({"jsonrpc": "2.0", "id": id, "result": result})).await
}

async fn call(
    shared: &Arc<Shared>,
    stream: &mut TcpStream,
    session: u64,
    id: Value,
    params: &Value,
) -> std::io::Result<()> {
    let script = shared.lock().script.clone();
    if let Some(status) = script.call_status.filter(|status| *status < 500) {
        return send_raw(stream, status, Vec::new(), "text/plain", b"refused by script").await;
    }
    let tool = params["name"].as_str().unwrap_or_default().to_owned();
    let text = {
        let mut state = shared.lock();
        *state.executions.entry(tool.clone()).or_default() += 1;
        let live = state.sessions.get_mut(&session).expect("checked before");
        live.counter += 1;
        match tool.as_str() {
            "counter" => live.counter.to_string(),
            _ => params["arguments"]["text"].as_str().unwrap_or_default().to_owned(),
        }
    };
    if let Some(status) = script.call_status {
        return send_raw(stream, status, Vec::new(), "text/plain", b"failed after running").await;
    }
    if script.drop_stream_after_call {
        accepted(stream).await?;
        shared.lock().sessions.remove(&session);
        return Ok(());
    }
    if script.garbage_after_call {
        shared.push(session, event("message", "{this is not json"));
        return accepted(stream).await;
    }
    if script.stall_call {
        return accepted(stream).await;
    }
    if script.ping_before_result {
        accepted(stream).await?;
        let (waiting, pinged) = oneshot::channel();
        if let Some(live) = shared.lock().sessions.get_mut(&session) {
            live.ping = Some(waiting);
        }
        shared
            .push(session, event("message", &json!({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"}).to_string()));
        let answered = tokio::time::timeout(PING_WAIT, pinged).await.ok().and_then(Result::ok).unwrap_or(Value::Null);
        shared.push(session, event("message", &result(&id, &answered.to_string()).to_string()));
        return Ok(());
    }
    answer(shared, stream, session, result(&id, &text)).await
}

/// Queues `message` on the session's stream, then acknowledges the POST.
async fn answer(shared: &Shared, stream: &mut TcpStream, session: u64, message: Value) -> std::io::Result<()> {
    shared.push(session, event("message", &message.to_string()));
    accepted(stream).await
}

async fn accepted(stream: &mut TcpStream) -> std::io::Result<()> {
    send_raw(stream, 202, Vec::new(), "text/plain", b"Accepted").await
}

fn result(id: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}], "isError": false}})
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn event(name: &str, data: &str) -> Vec<u8> {
    format!("event: {name}\ndata: {data}\n\n").into_bytes()
}
