//! Slow, idle and too many clients, spoken to over raw TCP so that a test controls every byte and
//! every pause: `[server] header_timeout`, `body_timeout`, `idle_timeout` and `max_connections`, with short
//! configured values and generous bounds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::gateway::{Agent, TestGateway, backend_toml};

/// How long a test waits for something that must happen; far longer than any configured timeout.
const PATIENCE: Duration = Duration::from_secs(10);

async fn gateway(server_keys: &str) -> (TestGateway, tokio::task::JoinHandle<()>) {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let backends = backend_toml("demo", &format!("http://{address}/mcp"), "");
    (TestGateway::start(server_keys, &backends).await, demo)
}

async fn connect(gateway: &TestGateway) -> TcpStream {
    TcpStream::connect(gateway.base.trim_start_matches("http://")).await.expect("connect to the gateway")
}

fn healthz_request() -> &'static [u8] {
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
}

/// One HTTP/1.1 response read off `stream`: its status line, its header block and its body (by
/// `Content-Length`). `None` when nothing arrives within `wait`.
async fn read_response(stream: &mut TcpStream, wait: Duration) -> Option<(String, String, String)> {
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(end) = received.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&received[..end]).into_owned();
            let length = content_length(&head);
            if received.len() >= end + 4 + length {
                let body = String::from_utf8_lossy(&received[end + 4..end + 4 + length]).into_owned();
                let (status, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
                return Some((status.to_owned(), headers.to_ascii_lowercase(), body));
            }
        }
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(0)) => panic!("the connection closed mid-response: {:?}", String::from_utf8_lossy(&received)),
            Ok(Ok(read)) => received.extend_from_slice(&chunk[..read]),
            Ok(Err(error)) => panic!("reading the response failed: {error}"),
            Err(_) => {
                assert!(received.is_empty(), "an incomplete response: {:?}", String::from_utf8_lossy(&received));
                return None;
            }
        }
    }
}

fn content_length(head: &str) -> usize {
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, value)| value.trim().parse().expect("a numeric Content-Length"))
}

/// Waits until the gateway closes `stream` (end of file or reset); how long that took. Panics after [`PATIENCE`]
/// or when data arrives.
async fn closed_after(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut chunk = [0u8; 1024];
    match tokio::time::timeout(PATIENCE, stream.read(&mut chunk)).await {
        Ok(Ok(0) | Err(_)) => started.elapsed(),
        Ok(Ok(read)) => panic!("expected the connection to close, got {:?}", String::from_utf8_lossy(&chunk[..read])),
        Err(_) => panic!("the gateway kept the connection open for {PATIENCE:?}"),
    }
}

#[tokio::test]
async fn a_partial_header_is_cut_off_after_header_timeout() {
    let (gateway, _demo) = gateway("header_timeout = \"300ms\"\nidle_timeout = \"60s\"").await;
    let mut slow = connect(&gateway).await;
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    let waited = closed_after(&mut slow).await;
    assert!(waited >= Duration::from_millis(200), "closed by the header deadline, not at once: {waited:?}");

    let mut prompt = connect(&gateway).await;
    prompt.write_all(healthz_request()).await.unwrap();
    let (status, _, body) = read_response(&mut prompt, PATIENCE).await.expect("a complete header is answered");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok\n"));
}

#[tokio::test]
async fn a_body_that_stops_short_gets_408_and_the_connection_closes() {
    let (gateway, _demo) = gateway("body_timeout = \"300ms\"").await;
    let mut stream = connect(&gateway).await;
    let head =
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(br#"{"jsonrpc": "2.0", "id": 1, "#).await.unwrap();
    let (status, headers, body) = read_response(&mut stream, PATIENCE).await.expect("an answer to the stalled body");
    assert_eq!(status, "HTTP/1.1 408 Request Timeout");
    assert!(headers.contains("connection: close"), "{headers}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error body");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("body_timeout"), "{error}");
    closed_after(&mut stream).await;
}

#[tokio::test]
async fn idle_connections_are_closed_after_idle_timeout_but_running_calls_are_not() {
    // Long enough that the agent below never leaves its pooled connection idle that long between its requests.
    let (gateway, _demo) = gateway("idle_timeout = \"1s\"\nheader_timeout = \"60s\"").await;
    let mut keep_alive = connect(&gateway).await;
    keep_alive.write_all(healthz_request()).await.unwrap();
    let (status, headers, _) = read_response(&mut keep_alive, PATIENCE).await.expect("answered");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(!headers.contains("connection: close"), "kept alive: {headers}");
    let waited = closed_after(&mut keep_alive).await;
    assert!(waited >= Duration::from_millis(800), "closed by the idle deadline, not at once: {waited:?}");

    let mut silent = connect(&gateway).await;
    closed_after(&mut silent).await;

    // A call that runs longer than idle_timeout is not idleness: it is answered.
    let mut agent = Agent::connected(gateway.mcp()).await;
    let slept = agent.call_tool("demo__sleep", json!({"ms": 2500})).await;
    assert_eq!(slept["result"]["content"][0]["text"], "slept 2500 ms", "{slept}");
}

#[tokio::test]
async fn beyond_max_connections_new_connections_wait_while_established_ones_are_served() {
    let (gateway, _demo) = gateway("max_connections = 2").await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = connect(&gateway).await;
        stream.write_all(healthz_request()).await.unwrap();
        let (status, _, _) = read_response(&mut stream, PATIENCE).await.expect("within max_connections");
        assert_eq!(status, "HTTP/1.1 200 OK");
        held.push(stream);
    }

    let mut third = connect(&gateway).await;
    third.write_all(healthz_request()).await.unwrap();
    let early = read_response(&mut third, Duration::from_millis(500)).await;
    assert!(early.is_none(), "the third connection was served while two were held: {early:?}");

    held[0].write_all(healthz_request()).await.unwrap();
    let (status, _, body) = read_response(&mut held[0], PATIENCE).await.expect("an established connection is served");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok\n"));

    drop(held.pop());
    let (status, _, _) = read_response(&mut third, PATIENCE).await.expect("served once a connection closed");
    assert_eq!(status, "HTTP/1.1 200 OK");
}
