//! A fault-injecting MCP backend (Streamable HTTP, MCP 2025-11-25) for integration tests.
//!
//! It owns the wire end to end: a hand-written HTTP/1.1 request parser on a raw `TcpListener` and hand-written
//! responses, because the client must be proven against bytes no HTTP library would emit (duplicated or invalid
//! header values, close-delimited SSE, endless lines, sockets dropped mid-exchange, stalls). Every misbehaviour is
//! scripted per test through [`Script`], and everything the client sent is recorded so tests can assert what
//! reached the backend and how often a tool actually ran.
//!
//! Every response carries `Connection: close`: one request per connection keeps the parser trivial.
//!
//! It serves the 2025-11-25 era by default; [`Eras::Both`] adds the 2026-07-28 era on the same endpoint and
//! [`Eras::Modern`] serves that era only (see `modern.rs`).

mod modern;

pub use modern::{Eras, STATE_PREFIX};

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::{JoinHandle, JoinSet};

/// Bounds on what the parser buffers, so a broken client cannot make a test eat the machine's memory.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Large and endless bodies are written from this one static chunk instead of being built in memory.
static FILL: [u8; 64 * 1024] = [b'x'; 64 * 1024];

/// Stands in for the text of an oversized result while serializing it, so the result's shape has one source; plain
/// ASCII so that JSON serialization leaves it intact.
const FILL_MARK: &str = "@@fault-backend-fill@@";

const SESSION_HEADER: &str = "Mcp-Session-Id";
const LATEST_VERSION: &str = "2025-11-25";

/// How requests are answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Answer {
    /// One `application/json` object with a `Content-Length`.
    #[default]
    Json,
    /// A close-delimited `text/event-stream`: a priming event (id, empty data), then messages, then the result.
    Sse,
}

/// What the `initialize` response says about sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SessionIds {
    /// A fresh `sess-<n>`; later requests must carry a live one (missing or unknown: 400, ended: 404).
    #[default]
    Assign,
    /// No session header; nothing is checked.
    Omit,
    /// Two `Mcp-Session-Id` header lines with different values; nothing is checked.
    Duplicate,
    /// This exact raw header value; nothing is checked.
    Invalid(Vec<u8>),
}

/// A `tools/call` answered as SSE that closes early and must be resumed with `GET` + `Last-Event-ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    /// Sent as the `retry` field of every event before a close.
    pub retry_ms: u64,
    /// How many times the stream closes before the result (the POST counts as the first; 0 behaves like 1).
    pub breaks: usize,
    /// Whether the priming event carries an `id`; without one the stream cannot be resumed.
    pub with_id: bool,
}

/// The backend's behaviour; `Default` is a correct, well-behaved backend answering JSON.
///
/// The `tools/call` faults are exclusive; the first set one wins, in this order: `drop_after_call`, `stall`,
/// `endless_line`, `non_json`, `oversize`, `gzip`, `resume` (SSE only).
#[derive(Clone, Debug)]
pub struct Script {
    pub answer: Answer,
    pub session: SessionIds,
    /// Negotiate this protocol version instead of echoing the client's.
    pub version: Option<String>,
    /// Answer `initialize` with this HTTP status (plain-text body) instead.
    pub initialize_status: Option<u16>,
    /// Answer `initialize` with a JSON-RPC error (-32602) instead.
    pub initialize_error: bool,
    /// Wait this long before answering `initialize` (lets concurrent callers pile up on one handshake).
    pub initialize_delay: Option<Duration>,
    /// Answer `notifications/initialized` with 400 instead of 202.
    pub refuse_initialized: bool,
    pub tools: Vec<Value>,
    /// Paginate `tools/list` with opaque `nextCursor`s.
    pub page_size: Option<usize>,
    /// Always return a `nextCursor` (pages past the end are empty).
    pub endless_pages: bool,
    pub tool_is_error: bool,
    /// Wait this long after counting a `tools/call` execution before answering it.
    pub call_delay: Option<Duration>,
    /// After counting a `tools/call` execution, hold it until [`FaultBackend::release_calls`]: a test that must
    /// act while a call runs waits for `executions` instead of guessing how long the call takes.
    pub hold_calls: bool,
    /// Messages sent on the SSE stream of a `tools/call` before its result (ignored when answering JSON).
    pub before_result: Vec<Value>,
    /// Hold the result until the client has POSTed an answer to every request in `before_result`.
    pub await_answers: bool,
    pub resume: Option<Resume>,
    /// Answer `tools/call` with `Content-Encoding: gzip` and real gzip bytes of the normal answer.
    pub gzip: bool,
    /// Answer `tools/call` with an SSE body `data: ` followed by 'x' forever, never a newline.
    pub endless_line: bool,
    /// Answer `tools/call` with a valid result whose text is this many bytes, streamed.
    pub oversize: Option<usize>,
    /// Read the `tools/call` and never answer; hold the socket until the client goes away.
    pub stall: bool,
    /// Answer `tools/call` with a body that is not JSON.
    pub non_json: bool,
    /// Write the `tools/call` response pretty-printed (several lines; several `data:` lines as SSE).
    pub pretty: bool,
    /// Read the `tools/call`, count the execution, then close the socket without a response.
    pub drop_after_call: bool,
    /// Status for `DELETE`; a 2xx ends the session it names.
    pub delete_status: u16,
    /// Answer every `tools/call` with 404 without running it, whatever session it carries.
    pub calls_404: bool,
    /// Answer every `tools/call` with this HTTP status (plain-text body) without running it.
    pub call_status: Option<u16>,
    /// Refuse a `tools/call` whose body is larger than this many bytes with 413, without running it (a backend
    /// whose body limit is below the gateway's).
    pub body_limit: Option<usize>,
    /// Serve a standalone stream on `GET` (without `Last-Event-ID`) carrying these messages; `None`: 405.
    pub standalone: Option<Vec<Value>>,
    /// The `ServerCapabilities` declared in the `initialize` result (and in `server/discover`'s).
    pub capabilities: Value,
    /// Which protocol eras are served.
    pub eras: Eras,
    /// The 2026-07-28-era versions served; a modern request at another one is refused with `-32022`.
    pub modern_versions: Vec<String>,
    /// Listed by `prompts/list`; `prompts/get` answers any of them.
    pub prompts: Vec<Value>,
    /// What `resources/list` lists, on one page (`resources/templates/list` lists nothing).
    pub resources: Vec<Value>,
    /// On a `subscriptions/listen` stream, after the acknowledgement and the resource updates: announce that the
    /// tool list changed.
    pub announce_tools_changed: bool,
    /// 2026-07-28 era: a `tools/call`, `prompts/get` or `resources/read` asks for input before it runs, one `input_required` round per entry (that
    /// round's `inputRequests`), its own `requestState` naming the next round; a retry missing an answer is asked
    /// the same round again; the request runs (a call is counted) only once every round is answered.
    pub input_rounds: Vec<Value>,
    /// How long the backend works before each `input_rounds` answer (a tool that asks after a while).
    pub input_delay: Option<Duration>,
    /// Answer 401 with a bare `WWW-Authenticate: Bearer` challenge to every request without an
    /// `Authorization: Bearer …` header (an OAuth-protected backend; the token itself is not checked).
    pub require_bearer: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            answer: Answer::Json,
            session: SessionIds::Assign,
            version: None,
            initialize_status: None,
            initialize_error: false,
            initialize_delay: None,
            refuse_initialized: false,
            tools: vec![echo_tool()],
            page_size: None,
            endless_pages: false,
            tool_is_error: false,
            call_delay: None,
            hold_calls: false,
            before_result: Vec::new(),
            await_answers: false,
            resume: None,
            gzip: false,
            endless_line: false,
            oversize: None,
            stall: false,
            non_json: false,
            pretty: false,
            drop_after_call: false,
            delete_status: 200,
            calls_404: false,
            call_status: None,
            body_limit: None,
            standalone: None,
            capabilities: json!({ "tools": { "listChanged": false } }),
            eras: Eras::Legacy,
            modern_versions: vec![modern::LATEST_MODERN.to_owned()],
            prompts: Vec::new(),
            resources: Vec::new(),
            announce_tools_changed: false,
            input_rounds: Vec::new(),
            input_delay: None,
            require_bearer: false,
        }
    }
}

fn echo_tool() -> Value {
    json!({
        "name": "echo",
        "description": "Returns its text argument.",
        "inputSchema": {
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        }
    })
}

/// The placeholder a test puts in a `before_result` message where the call's own progress token belongs.
pub const PROGRESS_TOKEN: &str = "$progressToken";

/// Replaces [`PROGRESS_TOKEN`] in a message with the progress token the call carried.
fn fill_progress_token(message: &mut Value, params: &Value) {
    let token = params.pointer("/_meta/progressToken").cloned().unwrap_or(Value::Null);
    if let Some(slot) = message.pointer_mut("/params/progressToken").filter(|slot| *slot == PROGRESS_TOKEN) {
        *slot = token;
    }
}

/// One HTTP request as the backend received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub http_method: String,
    pub path: String,
    /// Names lowercased, values lossy UTF-8, duplicates kept in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, if it was JSON.
    pub body: Option<Value>,
    /// The body's size in bytes.
    pub body_length: usize,
    pub rpc_method: Option<String>,
    /// The request's `params._meta` (trace context, progress token, idempotency key), if it carried one.
    pub meta: Option<Value>,
    /// When the request had been read completely.
    pub at: Instant,
}

impl Recorded {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A running fault backend; dropping it stops the server and every open connection.
pub struct FaultBackend {
    url: String,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl FaultBackend {
    pub async fn start(script: Script) -> FaultBackend {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fault backend");
        let port = listener.local_addr().expect("fault backend address").port();
        let shared = Arc::new(Shared::new(script));
        let served = shared.clone();
        let server = tokio::spawn(accept_loop(listener, move |stream| serve(served.clone(), stream)));
        FaultBackend { url: format!("http://127.0.0.1:{port}/mcp"), shared, server }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn update(&self, f: impl FnOnce(&mut Script)) {
        f(&mut self.shared.lock().script);
    }

    pub fn end_all_sessions(&self) {
        let mut state = self.shared.lock();
        let live = std::mem::take(&mut state.live);
        state.ended.extend(live);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    pub fn rpc_count(&self, rpc_method: &str) -> usize {
        let state = self.shared.lock();
        state.requests.iter().filter(|r| r.rpc_method.as_deref() == Some(rpc_method)).count()
    }

    /// The `params._meta` of every request of `rpc_method`, in arrival order (`Null` when one had none).
    pub fn metas(&self, rpc_method: &str) -> Vec<Value> {
        let state = self.shared.lock();
        let requests = state.requests.iter().filter(|r| r.rpc_method.as_deref() == Some(rpc_method));
        requests.map(|r| r.meta.clone().unwrap_or(Value::Null)).collect()
    }

    pub fn executions(&self, tool: &str) -> usize {
        self.shared.lock().executions.get(tool).copied().unwrap_or(0)
    }

    pub fn client_answers(&self) -> Vec<Value> {
        self.shared.lock().client_answers.clone()
    }

    /// Lets every held call (and every later one) answer; see [`Script::hold_calls`].
    pub fn release_calls(&self) {
        self.shared.released.send_replace(true);
    }

    /// How many `stall`ed calls the client gave up on by closing their connection.
    pub fn abandoned_calls(&self) -> usize {
        self.shared.lock().abandoned
    }
}

impl Drop for FaultBackend {
    fn drop(&mut self) {
        self.server.abort();
    }
}

struct Shared {
    state: Mutex<State>,
    /// Woken whenever the client POSTs a JSON-RPC response, for `await_answers`.
    answered: Notify,
    /// Whether held calls may answer (`hold_calls`).
    released: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    script: Script,
    requests: Vec<Recorded>,
    executions: HashMap<String, usize>,
    client_answers: Vec<Value>,
    live: HashSet<String>,
    ended: HashSet<String>,
    sessions_made: u64,
    streams_made: u64,
    /// Streams closed early and waiting for a `GET` with `Last-Event-ID`, by stream name.
    parked: HashMap<String, Parked>,
    /// `stall`ed calls whose client closed the connection.
    abandoned: usize,
}

struct Parked {
    ids: EventIds,
    session: Option<String>,
    result: Value,
    resume: Resume,
    closes: usize,
}

/// Event ids are `<stream>-<seq>`, unique per backend, so a `Last-Event-ID` names its stream.
struct EventIds {
    stream: String,
    next: u64,
}

impl EventIds {
    fn next(&mut self) -> String {
        let id = format!("{}-{}", self.stream, self.next);
        self.next += 1;
        id
    }
}

impl Shared {
    fn new(script: Script) -> Shared {
        let state = State { script, ..State::default() };
        Shared { state: Mutex::new(state), answered: Notify::new(), released: watch::Sender::new(false) }
    }

    /// A test that panicked while holding the lock must not turn every later assertion into a poison panic.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the request and returns the script it is to be answered by.
    fn record(&self, request: &Recorded) -> Script {
        let mut state = self.lock();
        state.requests.push(request.clone());
        state.script.clone()
    }

    fn new_stream(&self) -> EventIds {
        let mut state = self.lock();
        state.streams_made += 1;
        EventIds { stream: format!("stream{}", state.streams_made), next: 0 }
    }

    fn count_execution(&self, tool: &str) {
        *self.lock().executions.entry(tool.to_owned()).or_default() += 1;
    }

    fn issue_session(&self, mode: &SessionIds) -> Vec<(&'static str, Vec<u8>)> {
        let mut state = self.lock();
        state.sessions_made += 1;
        let n = state.sessions_made;
        match mode {
            SessionIds::Assign => {
                let id = format!("sess-{n}");
                state.live.insert(id.clone());
                vec![(SESSION_HEADER, id.into_bytes())]
            }
            SessionIds::Omit => Vec::new(),
            SessionIds::Duplicate => vec![
                (SESSION_HEADER, format!("sess-{n}a").into_bytes()),
                (SESSION_HEADER, format!("sess-{n}b").into_bytes()),
            ],
            SessionIds::Invalid(raw) => vec![(SESSION_HEADER, raw.clone())],
        }
    }

    fn end_session(&self, id: &str) {
        let mut state = self.lock();
        if state.live.remove(id) {
            state.ended.insert(id.to_owned());
        }
    }

    fn add_client_answer(&self, message: Value) {
        self.lock().client_answers.push(message);
        self.answered.notify_waiters();
    }

    fn answered_all(&self, ids: &[Value]) -> bool {
        let state = self.lock();
        ids.iter().all(|id| state.client_answers.iter().any(|a| a.get("id") == Some(id)))
    }

    async fn wait_answered(&self, ids: &[Value]) {
        loop {
            // Registered before the check, so an answer landing in between still wakes us.
            let notified = self.answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.answered_all(ids) {
                return;
            }
            notified.await;
        }
    }

    /// The next piece of a parked stream for a `GET` resuming after `last_event_id`: another early close until
    /// the scripted number of breaks happened, then the result (which unparks the stream).
    fn resume_step(&self, last_event_id: &str, session: Option<&str>) -> Option<Vec<u8>> {
        let (stream, _) = last_event_id.rsplit_once('-')?;
        let mut state = self.lock();
        let parked = state.parked.get_mut(stream)?;
        if parked.session.as_deref() != session {
            return None;
        }
        let id = parked.ids.next();
        if parked.closes < parked.resume.breaks {
            parked.closes += 1;
            return Some(event(Some(&id), Some(parked.resume.retry_ms), ""));
        }
        let parked = state.parked.remove(stream)?;
        Some(event(Some(&id), None, &parked.result.to_string()))
    }
}

/// Serves each accepted connection with `serve`. Connection tasks live in a `JoinSet` owned by this task, so
/// aborting the server also ends stalled and endless connections instead of leaking them into later tests.
pub async fn accept_loop<F, Served>(listener: TcpListener, serve: F)
where
    F: Fn(TcpStream) -> Served,
    Served: std::future::Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve(stream));
                }
                // Out of descriptors and the like: back off rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn serve(shared: Arc<Shared>, mut stream: TcpStream) {
    let _ = exchange(&shared, &mut stream).await;
    let _ = stream.shutdown().await;
}

async fn exchange(shared: &Shared, stream: &mut TcpStream) -> io::Result<()> {
    let request = match read_request(stream).await? {
        Ok(request) => request,
        Err(status) => return send_raw(stream, status, Vec::new(), "text/plain", b"").await,
    };
    let script = shared.record(&request);
    Exchange { stream, shared, script, request, modern: false }.route().await
}

/// Reads one request: head up to CRLFCRLF, then a `Content-Length` body. `Ok(Err(status))` is a request to refuse.
pub async fn read_request(stream: &mut TcpStream) -> io::Result<Result<Recorded, u16>> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Ok(Err(431));
        }
        if stream.read_buf(&mut buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    };
    let Some((http_method, path, headers)) = parse_head(&buf[..head_end]) else {
        return Ok(Err(400));
    };
    let length = match body_length(&headers) {
        Ok(length) => length,
        Err(status) => return Ok(Err(status)),
    };
    let mut body = buf.split_off(head_end + 4);
    let have = body.len().min(length);
    body.resize(length, 0);
    stream.read_exact(&mut body[have..]).await?;
    let body_length = body.len();
    let body: Option<Value> = serde_json::from_slice(&body).ok();
    let rpc_method = body.as_ref().and_then(|b| b.get("method")).and_then(Value::as_str).map(str::to_owned);
    let meta = body.as_ref().and_then(|b| b.pointer("/params/_meta")).cloned();
    Ok(Ok(Recorded { http_method, path, headers, body, body_length, rpc_method, meta, at: Instant::now() }))
}

type Head = (String, String, Vec<(String, String)>);

fn parse_head(raw: &[u8]) -> Option<Head> {
    let mut lines = raw.split(|&b| b == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = std::str::from_utf8(lines.next()?).ok()?;
    let mut parts = request_line.split(' ');
    let (method, path, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let headers = lines.map(parse_header_line).collect::<Option<Vec<_>>>()?;
    Some((method.to_owned(), path.to_owned(), headers))
}

fn parse_header_line(line: &[u8]) -> Option<(String, String)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let name = std::str::from_utf8(&line[..colon]).ok()?.trim().to_ascii_lowercase();
    let value = String::from_utf8_lossy(line[colon + 1..].trim_ascii()).into_owned();
    Some((name, value))
}

/// Chunked request bodies are refused (501): the clients under test send a `Content-Length`.
fn body_length(headers: &[(String, String)]) -> Result<usize, u16> {
    if headers.iter().any(|(name, _)| name == "transfer-encoding") {
        return Err(501);
    }
    let length = match headers.iter().find(|(name, _)| name == "content-length") {
        None => 0,
        Some((_, value)) => value.parse().map_err(|_| 400u16)?,
    };
    if length > MAX_BODY { Err(413) } else { Ok(length) }
}

/// One request being answered, with the script snapshot taken when it arrived.
struct Exchange<'a> {
    stream: &'a mut TcpStream,
    shared: &'a Shared,
    script: Script,
    request: Recorded,
    /// Whether the request is served in the 2026-07-28 era, whose results all carry `resultType`.
    modern: bool,
}

impl Exchange<'_> {
    async fn route(mut self) -> io::Result<()> {
        if self.request.path.split('?').next() != Some("/mcp") {
            return self.text(404, "no MCP endpoint here").await;
        }
        let bearer = self.request.header("authorization").is_some_and(|value| value.starts_with("Bearer "));
        if self.script.require_bearer && !bearer {
            let challenge = vec![("WWW-Authenticate", b"Bearer".to_vec())];
            return send_raw(self.stream, 401, challenge, "text/plain", b"a bearer token is required").await;
        }
        if let Some(served) = self.modern_route().await {
            return served;
        }
        if let Some((status, why)) = self.session_gate() {
            return self.text(status, why).await;
        }
        match self.request.http_method.as_str() {
            "POST" => self.post().await,
            "GET" => self.resume().await,
            "DELETE" => self.delete().await,
            _ => self.text(405, "POST, GET or DELETE").await,
        }
    }

    fn session(&self) -> Option<&str> {
        self.request.header(SESSION_HEADER)
    }

    fn session_gate(&self) -> Option<(u16, &'static str)> {
        let is_initialize = self.request.rpc_method.as_deref() == Some("initialize");
        if self.script.session != SessionIds::Assign || is_initialize {
            return None;
        }
        let state = self.shared.lock();
        match self.session() {
            None => Some((400, "missing Mcp-Session-Id")),
            Some(id) if state.live.contains(id) => None,
            Some(id) if state.ended.contains(id) => Some((404, "session ended")),
            Some(_) => Some((400, "unknown Mcp-Session-Id")),
        }
    }

    async fn post(&mut self) -> io::Result<()> {
        let Some(message) = self.request.body.clone() else {
            let parse_error = failure(Value::Null, -32700, "parse error");
            return self.send_json(400, Vec::new(), &parse_error).await;
        };
        let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, message.get("id").cloned()) {
            (None, _) => {
                self.shared.add_client_answer(message);
                self.text(202, "").await
            }
            (Some(method), None) => self.notification(&method).await,
            (Some(method), Some(id)) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.rpc(&method, id, &params).await
            }
        }
    }

    async fn notification(&mut self, method: &str) -> io::Result<()> {
        if method == "notifications/initialized" && self.script.refuse_initialized {
            return self.text(400, "scripted refusal of notifications/initialized").await;
        }
        self.text(202, "").await
    }

    async fn rpc(&mut self, method: &str, id: Value, params: &Value) -> io::Result<()> {
        match method {
            "initialize" => self.initialize(id, params).await,
            "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
                self.reply(Vec::new(), self.success(id, json!({}))).await
            }
            "tools/list" => {
                let page = self.tools_page(id, params);
                self.reply(Vec::new(), page).await
            }
            "tools/call" => self.call_tool(id, params).await,
            "prompts/list" => self.reply(Vec::new(), self.success(id, json!({ "prompts": self.script.prompts }))).await,
            "prompts/get" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
                let text = format!("prompt {name} with {}", params.get("arguments").unwrap_or(&Value::Null));
                let messages = json!([{ "role": "user", "content": { "type": "text", "text": text } }]);
                self.reply(Vec::new(), self.success(id, json!({ "messages": messages }))).await
            }
            "resources/list" | "resources/templates/list" => {
                let page = match method {
                    "resources/list" => json!({ "resources": self.script.resources }),
                    _ => json!({ "resourceTemplates": [] }),
                };
                self.reply(Vec::new(), self.success(id, page)).await
            }
            "resources/read" => {
                let uri = params.get("uri").cloned().unwrap_or(Value::Null);
                let contents = json!([{ "uri": uri, "mimeType": "text/plain", "text": format!("content of {uri}") }]);
                self.reply(Vec::new(), self.success(id, json!({ "contents": contents }))).await
            }
            _ => self.reply(Vec::new(), failure(id, -32601, "method not found")).await,
        }
    }

    async fn initialize(&mut self, id: Value, params: &Value) -> io::Result<()> {
        pause(self.script.initialize_delay).await;
        if let Some(status) = self.script.initialize_status {
            return self.text(status, "scripted initialize failure").await;
        }
        if self.script.initialize_error {
            return self.reply(Vec::new(), failure(id, -32602, "Unsupported protocol version")).await;
        }
        let offered = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(LATEST_VERSION);
        let version = self.script.version.clone().unwrap_or_else(|| offered.to_owned());
        let result = json!({
            "protocolVersion": version,
            "capabilities": self.script.capabilities.clone(),
            "serverInfo": { "name": "fault-backend", "version": "0.0.0" }
        });
        let headers = self.shared.issue_session(&self.script.session);
        self.reply(headers, success(id, result)).await
    }

    fn tools_page(&self, id: Value, params: &Value) -> Value {
        let page = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(cursor) => match cursor.as_str().and_then(parse_cursor) {
                Some(page) => page,
                None => return failure(id, -32602, "invalid cursor"),
            },
        };
        let tools = &self.script.tools;
        let size = self.script.page_size.unwrap_or(tools.len()).max(1);
        let start = page.saturating_mul(size).min(tools.len());
        let end = start.saturating_add(size).min(tools.len());
        let mut result = json!({ "tools": tools[start..end] });
        if end < tools.len() || self.script.endless_pages {
            result["nextCursor"] = json!(cursor(page + 1));
        }
        self.success(id, result)
    }

    async fn call_tool(&mut self, id: Value, params: &Value) -> io::Result<()> {
        if self.script.calls_404 {
            return self.text(404, "session not found").await;
        }
        if let Some(status) = self.script.call_status {
            return self.text(status, "scripted refusal of tools/call").await;
        }
        if self.script.body_limit.is_some_and(|limit| self.request.body_length > limit) {
            return self.text(413, "the request body exceeds this backend's limit").await;
        }
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        self.shared.count_execution(name);
        pause(self.script.call_delay).await;
        if self.script.hold_calls {
            // Only fails if the sender is gone, and `shared` owns it.
            let _ = self.shared.released.subscribe().wait_for(|released| *released).await;
        }
        if self.script.drop_after_call {
            return Ok(());
        }
        if self.script.stall {
            let _ = client_gone(self.stream).await;
            self.shared.lock().abandoned += 1;
            return Ok(());
        }
        if self.script.endless_line {
            return self.endless_line().await;
        }
        if self.script.non_json {
            return self.non_json().await;
        }
        if let Some(size) = self.script.oversize {
            return self.oversize(id, size).await;
        }
        let text = params.pointer("/arguments/text").and_then(Value::as_str).unwrap_or(name);
        let result = self.success(id, tool_result(text, self.script.tool_is_error));
        if self.script.gzip {
            return self.gzipped(&result).await;
        }
        match (self.script.answer, self.script.resume) {
            (Answer::Json, _) if self.script.pretty => {
                let text = serde_json::to_string_pretty(&result).expect("JSON");
                send_raw(self.stream, 200, Vec::new(), "application/json", text.as_bytes()).await
            }
            (Answer::Json, _) => self.send_json(200, Vec::new(), &result).await,
            (Answer::Sse, None) => self.stream_result(&result, params).await,
            (Answer::Sse, Some(resume)) => self.park(result, resume).await,
        }
    }

    async fn stream_result(&mut self, result: &Value, params: &Value) -> io::Result<()> {
        let mut ids = self.open_sse(Vec::new()).await?;
        for mut message in self.script.before_result.clone() {
            fill_progress_token(&mut message, params);
            self.send_event(&mut ids, &message.to_string()).await?;
        }
        if self.script.await_answers && !self.await_answers().await {
            return Ok(());
        }
        let text = match self.script.pretty {
            true => serde_json::to_string_pretty(result).expect("JSON"),
            false => result.to_string(),
        };
        self.send_event(&mut ids, &text).await
    }

    /// Waits for the client's answers to the requests in `before_result`; false if the client went away first.
    async fn await_answers(&mut self) -> bool {
        let requests = &self.script.before_result;
        let ids: Vec<Value> =
            requests.iter().filter(|m| m.get("method").is_some()).filter_map(|m| m.get("id").cloned()).collect();
        tokio::select! {
            () = self.shared.wait_answered(&ids) => true,
            _ = client_gone(self.stream) => false,
        }
    }

    /// Sends the priming event and closes; the rest waits for a `GET` with `Last-Event-ID` (see `resume`).
    async fn park(&mut self, result: Value, resume: Resume) -> io::Result<()> {
        self.write_sse_head(Vec::new()).await?;
        let mut ids = self.shared.new_stream();
        let priming_id = resume.with_id.then(|| ids.next());
        if resume.with_id {
            // Parked before the priming event goes out, so a quick GET cannot miss it.
            let session = self.session().map(str::to_owned);
            let parked = Parked { ids, session, result, resume, closes: 1 };
            let stream = parked.ids.stream.clone();
            self.shared.lock().parked.insert(stream, parked);
        }
        let priming = event(priming_id.as_deref(), Some(resume.retry_ms), "");
        self.stream.write_all(&priming).await
    }

    async fn resume(&mut self) -> io::Result<()> {
        let Some(last_event_id) = self.request.header("last-event-id") else {
            return match self.script.standalone.clone() {
                Some(messages) => self.standalone(messages).await,
                None => self.text(405, "no standalone SSE stream; GET only resumes").await,
            };
        };
        let Some(step) = self.shared.resume_step(last_event_id, self.session()) else {
            return self.text(400, "Last-Event-ID names no open stream of this session").await;
        };
        self.write_sse_head(Vec::new()).await?;
        self.stream.write_all(&step).await
    }

    /// The session's standalone stream: the scripted messages, then silence until the client goes away.
    async fn standalone(&mut self, messages: Vec<Value>) -> io::Result<()> {
        let mut ids = self.open_sse(Vec::new()).await?;
        for message in messages {
            self.send_event(&mut ids, &message.to_string()).await?;
        }
        let _ = client_gone(self.stream).await;
        Ok(())
    }

    async fn delete(&mut self) -> io::Result<()> {
        let status = self.script.delete_status;
        if let (true, Some(id)) = ((200..300).contains(&status), self.session()) {
            self.shared.end_session(id);
        }
        self.text(status, "").await
    }

    async fn endless_line(&mut self) -> io::Result<()> {
        self.write_sse_head(Vec::new()).await?;
        self.stream.write_all(b"data: ").await?;
        loop {
            self.stream.write_all(&FILL).await?;
        }
    }

    async fn non_json(&mut self) -> io::Result<()> {
        match self.script.answer {
            Answer::Json => send_raw(self.stream, 200, Vec::new(), "application/json", b"not json").await,
            Answer::Sse => {
                let mut ids = self.open_sse(Vec::new()).await?;
                self.send_event(&mut ids, "not json").await
            }
        }
    }

    /// Streams the result text from the static fill chunk: only the framing differs between JSON and SSE.
    async fn oversize(&mut self, id: Value, size: usize) -> io::Result<()> {
        let whole = success(id, tool_result(FILL_MARK, self.script.tool_is_error)).to_string();
        let (before, after) = whole.split_once(FILL_MARK).expect("the mark survives serialization");
        let (lead, tail) = match self.script.answer {
            Answer::Json => {
                let length = before.len() + size + after.len();
                let headers = vec![("Content-Length", length.to_string().into_bytes())];
                self.write_head_typed(200, headers, "application/json").await?;
                (before.to_owned(), after.to_owned())
            }
            Answer::Sse => {
                let mut ids = self.open_sse(Vec::new()).await?;
                (format!("id: {}\ndata: {before}", ids.next()), format!("{after}\n\n"))
            }
        };
        self.stream.write_all(lead.as_bytes()).await?;
        write_fill(self.stream, size).await?;
        self.stream.write_all(tail.as_bytes()).await
    }

    async fn gzipped(&mut self, message: &Value) -> io::Result<()> {
        let (content_type, plain) = match self.script.answer {
            Answer::Json => ("application/json", message.to_string().into_bytes()),
            Answer::Sse => {
                let mut ids = self.shared.new_stream();
                let mut body = event(Some(&ids.next()), None, "");
                body.extend(event(Some(&ids.next()), None, &message.to_string()));
                ("text/event-stream", body)
            }
        };
        let headers = vec![("Content-Encoding", b"gzip".to_vec())];
        send_raw(self.stream, 200, headers, content_type, &gzip_stored(&plain)).await
    }

    /// Answers a request in the scripted `answer` mode.
    /// A result message; in the 2026-07-28 era with `resultType: "complete"` (2026-07-28 basic §"Results").
    fn success(&self, id: Value, mut result: Value) -> Value {
        if self.modern
            && let Some(members) = result.as_object_mut()
        {
            members.insert("resultType".into(), json!("complete"));
        }
        success(id, result)
    }

    async fn reply(&mut self, headers: Vec<(&'static str, Vec<u8>)>, message: Value) -> io::Result<()> {
        match self.script.answer {
            Answer::Json => self.send_json(200, headers, &message).await,
            Answer::Sse => {
                let mut ids = self.open_sse(headers).await?;
                self.send_event(&mut ids, &message.to_string()).await
            }
        }
    }

    /// Starts an SSE response with its priming event (an id and empty data).
    async fn open_sse(&mut self, headers: Vec<(&'static str, Vec<u8>)>) -> io::Result<EventIds> {
        self.write_sse_head(headers).await?;
        let mut ids = self.shared.new_stream();
        self.stream.write_all(&event(Some(&ids.next()), None, "")).await?;
        Ok(ids)
    }

    async fn send_event(&mut self, ids: &mut EventIds, data: &str) -> io::Result<()> {
        self.stream.write_all(&event(Some(&ids.next()), None, data)).await
    }

    /// SSE bodies are close-delimited: no `Content-Length`, no chunking.
    async fn write_sse_head(&mut self, mut headers: Vec<(&'static str, Vec<u8>)>) -> io::Result<()> {
        headers.push(("Cache-Control", b"no-cache".to_vec()));
        self.write_head_typed(200, headers, "text/event-stream").await
    }

    async fn write_head_typed(
        &mut self,
        status: u16,
        mut headers: Vec<(&'static str, Vec<u8>)>,
        content_type: &str,
    ) -> io::Result<()> {
        headers.push(("Content-Type", content_type.as_bytes().to_vec()));
        write_head(self.stream, status, &headers).await
    }

    async fn send_json(&mut self, status: u16, headers: Vec<(&'static str, Vec<u8>)>, body: &Value) -> io::Result<()> {
        send_raw(self.stream, status, headers, "application/json", body.to_string().as_bytes()).await
    }

    async fn text(&mut self, status: u16, text: &str) -> io::Result<()> {
        send_raw(self.stream, status, Vec::new(), "text/plain; charset=utf-8", text.as_bytes()).await
    }
}

/// Header values are raw bytes so a script can put on the wire what no HTTP library would.
pub async fn write_head(stream: &mut TcpStream, status: u16, headers: &[(&str, Vec<u8>)]) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status)).into_bytes();
    for (name, value) in headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    stream.write_all(&head).await
}

pub async fn send_raw(
    stream: &mut TcpStream,
    status: u16,
    mut headers: Vec<(&'static str, Vec<u8>)>,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    headers.push(("Content-Type", content_type.as_bytes().to_vec()));
    headers.push(("Content-Length", body.len().to_string().into_bytes()));
    write_head(stream, status, &headers).await?;
    stream.write_all(body).await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

/// One SSE event; multi-line data becomes several `data` lines, empty data a bare `data:` line.
fn event(id: Option<&str>, retry: Option<u64>, data: &str) -> Vec<u8> {
    let mut out = String::new();
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    if let Some(ms) = retry {
        out.push_str(&format!("retry: {ms}\n"));
    }
    if data.is_empty() {
        out.push_str("data:\n");
    }
    for line in data.lines() {
        out.push_str(&format!("data: {line}\n"));
    }
    out.push('\n');
    out.into_bytes()
}

async fn write_fill(stream: &mut TcpStream, mut remaining: usize) -> io::Result<()> {
    while remaining > 0 {
        let n = remaining.min(FILL.len());
        stream.write_all(&FILL[..n]).await?;
        remaining -= n;
    }
    Ok(())
}

/// Resolves when the peer closes or resets its side; anything it still sends is discarded.
async fn client_gone(stream: &mut TcpStream) -> io::Result<()> {
    let mut sink = [0u8; 1024];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

async fn pause(delay: Option<Duration>) {
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
}

fn success(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

fn failure(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn tool_result(text: &str, is_error: bool) -> Value {
    let mut result = json!({ "content": [{ "type": "text", "text": text }] });
    if is_error {
        result["isError"] = json!(true);
    }
    result
}

fn cursor(page: usize) -> String {
    format!("opaque~{page:x}")
}

fn parse_cursor(cursor: &str) -> Option<usize> {
    usize::from_str_radix(cursor.strip_prefix("opaque~")?, 16).ok()
}

/// A gzip member (RFC 1952) holding `data` in stored deflate blocks (RFC 1951 §3.2.4): real gzip bytes without
/// a compression dependency, so a client that wrongly decoded them would see the right answer and the test would
/// prove the refusal came from the header.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let blocks: Vec<&[u8]> = if data.is_empty() { vec![data] } else { data.chunks(0xffff).collect() };
    for (i, block) in blocks.iter().enumerate() {
        let len = u16::try_from(block.len()).expect("stored blocks hold at most 65535 bytes");
        out.push(u8::from(i + 1 == blocks.len()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    // ISIZE is the length modulo 2^32 by definition.
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
