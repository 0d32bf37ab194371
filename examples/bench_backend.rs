//! A minimal, fast MCP server for the gateway benchmark (`bench/gateway/`): what sits behind Switchyard when the
//! figures should show the gateway's own cost rather than a backend's. Built with
//! `cargo build --release --example bench_backend`; not part of the gateway.
//!
//!     bench_backend [--listen 127.0.0.1:0]   Streamable HTTP at /mcp; the first line of stdout names the URL
//!     bench_backend --stdio                  newline-delimited JSON-RPC on stdin/stdout
//!
//! With `BENCH_BACKEND_SSE=1` in its environment, the HTTP server answers every request as an SSE stream of one
//! event instead of `application/json`, so the gateway answers its agents with a stream too (what a call whose
//! events are kept for resumption costs; `bench/ledger/durable.sh`, `DEMO_ENV`).
//!
//! Rules:
//! - It answers `initialize` (echoing the client's `protocolVersion`, a fresh `Mcp-Session-Id` over HTTP),
//!   notifications (HTTP 202, nothing on stdio), `ping`, `tools/list` (one tool, `echo`) and `tools/call` of
//!   `echo` (its `text` back as text content); any other method gets JSON-RPC `-32601` (so the gateway's
//!   `server/discover` probe falls back to `initialize`). Answers are `application/json` (an SSE stream of one
//!   event with `BENCH_BACKEND_SSE=1`).
//! - Session ids are not checked (a benchmark backend keeps no per-session state), but they are counted:
//!   `GET /stats` answers `{"sessions_opened":N,"sessions_deleted":M}`, which the session benchmark reads to
//!   tell how many backend sessions the gateway holds. `GET /mcp` is 405 (no standalone stream).
//! - A body that is not a JSON-RPC message gets HTTP 400 with a JSON-RPC parse error; it never stops the server.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test, bench or example reports a failure by panicking")]

use std::convert::Infallible;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// Request bodies larger than this are refused: the benchmark sends a few hundred bytes.
const MAX_BODY: usize = 1 << 20;
const DEFAULT_VERSION: &str = "2025-11-25";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--stdio"] => serve_stdio(),
        [] => serve_http("127.0.0.1:0"),
        ["--listen", address] => serve_http(address),
        _ => anyhow::bail!("usage: bench_backend [--listen ADDRESS | --stdio]"),
    }
}

/// What one JSON-RPC message gets: an answer (requests; `initialize`'s opens a session), nothing
/// (notifications), or a parse error.
enum Reply {
    Answer(Value),
    Opened(Value),
    Accepted,
    Unparsable(Value),
}

/// Answers one message. `initialize` is the caller's business only for the session id it adds over HTTP.
fn reply(body: &[u8]) -> Reply {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return Reply::Unparsable(error(Value::Null, -32700, "not a JSON-RPC message"));
    };
    let Some(id) = message.get("id").cloned() else {
        return Reply::Accepted;
    };
    let params = message.get("params");
    let method = message.get("method").and_then(Value::as_str);
    let answer = match method {
        Some("initialize") => Ok(initialize(params)),
        Some("ping") => Ok(json!({})),
        Some("tools/list") => Ok(tools()),
        Some("tools/call") => call(params),
        Some(_) | None => Err((-32601, "method not found")),
    };
    match answer {
        Ok(result) if method == Some("initialize") => {
            Reply::Opened(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Ok(result) => Reply::Answer(json!({"jsonrpc": "2.0", "id": id, "result": result})),
        Err((code, text)) => Reply::Answer(error(id, code, text)),
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn initialize(params: Option<&Value>) -> Value {
    let version = params.and_then(|params| params.get("protocolVersion")).and_then(Value::as_str);
    json!({
        "protocolVersion": version.unwrap_or(DEFAULT_VERSION),
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "switchyard-bench-backend", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn tools() -> Value {
    json!({"tools": [{
        "name": "echo",
        "description": "Returns its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }]})
}

fn call(params: Option<&Value>) -> Result<Value, (i64, &'static str)> {
    let params = params.ok_or((-32602, "tools/call needs params"))?;
    if params.get("name").and_then(Value::as_str) != Some("echo") {
        return Err((-32602, "unknown tool"));
    }
    let text = params
        .get("arguments")
        .and_then(|arguments| arguments.get("text"))
        .and_then(Value::as_str)
        .ok_or((-32602, "echo needs arguments.text, a string"))?;
    Ok(json!({"content": [{"type": "text", "text": text}], "isError": false}))
}

fn serve_stdio() -> anyhow::Result<()> {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        match reply(line.as_bytes()) {
            Reply::Answer(answer) | Reply::Opened(answer) | Reply::Unparsable(answer) => {
                serde_json::to_writer(&mut stdout, &answer)?;
                stdout.write_all(b"\n")?;
                stdout.flush()?;
            }
            Reply::Accepted => {}
        }
    }
    Ok(())
}

/// Sessions handed out and ended over HTTP.
#[derive(Default)]
struct Counters {
    opened: AtomicU64,
    deleted: AtomicU64,
    /// Answers as an SSE stream of one event (`BENCH_BACKEND_SSE=1`).
    sse: bool,
}

fn serve_http(address: &str) -> anyhow::Result<()> {
    let address: SocketAddr = address.parse().with_context(|| format!("not a socket address: {address}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address).await.with_context(|| format!("binding {address}"))?;
        println!("bench backend at http://{}/mcp", listener.local_addr()?);
        let sse = std::env::var("BENCH_BACKEND_SSE").is_ok_and(|value| value == "1");
        let counters = Arc::new(Counters { sse, ..Counters::default() });
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    eprintln!("accept: {error}");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let counters = Arc::clone(&counters);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| handle(request, Arc::clone(&counters)));
                let served = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                if let Err(error) = served.await {
                    eprintln!("connection: {error}");
                }
            });
        }
    })
}

async fn handle(request: Request<Incoming>, counters: Arc<Counters>) -> Result<Response<String>, Infallible> {
    Ok(match (request.method(), request.uri().path()) {
        (&Method::POST, "/mcp") => match read_body(request.into_body()).await {
            Some(body) => post(&body, &counters),
            None => plain(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large or broken"),
        },
        (&Method::DELETE, "/mcp") => {
            counters.deleted.fetch_add(1, Ordering::Relaxed);
            plain(StatusCode::OK, "")
        }
        (&Method::GET, "/mcp") => plain(StatusCode::METHOD_NOT_ALLOWED, ""),
        (&Method::GET, "/stats") => json_response(
            StatusCode::OK,
            &json!({
                "sessions_opened": counters.opened.load(Ordering::Relaxed),
                "sessions_deleted": counters.deleted.load(Ordering::Relaxed),
            }),
        ),
        _ => plain(StatusCode::NOT_FOUND, "not found"),
    })
}

fn post(body: &[u8], counters: &Counters) -> Response<String> {
    match reply(body) {
        Reply::Accepted => plain(StatusCode::ACCEPTED, ""),
        Reply::Unparsable(answer) => json_response(StatusCode::BAD_REQUEST, &answer),
        Reply::Answer(answer) if counters.sse => sse_response(&answer),
        Reply::Answer(answer) => json_response(StatusCode::OK, &answer),
        Reply::Opened(answer) => {
            let mut response = json_response(StatusCode::OK, &answer);
            let session = counters.opened.fetch_add(1, Ordering::Relaxed) + 1;
            if let Ok(value) = format!("bench-{session}").parse() {
                response.headers_mut().insert("mcp-session-id", value);
            }
            response
        }
    }
}

/// The whole body, or `None` when it is larger than [`MAX_BODY`] or the connection broke.
async fn read_body(mut body: Incoming) -> Option<Bytes> {
    let mut collected: Vec<u8> = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame.ok()?.into_data() {
            if collected.is_empty() && body.is_end_stream() {
                return Some(data);
            }
            collected.extend_from_slice(&data);
            if collected.len() > MAX_BODY {
                return None;
            }
        }
    }
    Some(Bytes::from(collected))
}

fn json_response(status: StatusCode, value: &Value) -> Response<String> {
    let mut response = Response::new(value.to_string());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

/// `value` as the one event of an SSE stream.
fn sse_response(value: &Value) -> Response<String> {
    let mut response = Response::new(format!("event: message\ndata: {value}\n\n"));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    response
}

fn plain(status: StatusCode, text: &str) -> Response<String> {
    let mut response = Response::new(text.to_owned());
    *response.status_mut() = status;
    response
}
