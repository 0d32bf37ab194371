//! Tests of `front::listener`: the peer's address, graceful shutdown, and resizing the connection cap.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn handlers_see_the_peers_address_and_shutdown_waits_for_the_running_request() {
    // The handler says when it has the request, so shutdown starts while it is being served.
    let arrived = Arc::new(tokio::sync::Notify::new());
    let seen = Arc::clone(&arrived);
    let app = Router::new().route(
        "/peer",
        axum::routing::get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
            seen.notify_one();
            tokio::time::sleep(Duration::from_millis(200)).await;
            peer.to_string()
        }),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (address, server) = serving(app, async move { drop(stopped.await) }).await;

    let mut client = TcpStream::connect(address).await.unwrap();
    client.write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    arrived.notified().await;
    stop.send(()).unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    let peer = client.local_addr().unwrap().to_string();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with(&peer), "the handler saw {answer:?}, the client is {peer}");
    tokio::time::timeout(Duration::from_secs(5), server).await.expect("serve returns").unwrap();
    assert!(TcpStream::connect(address).await.is_err(), "no longer accepting");
}

#[test]
fn a_lowered_cap_is_taken_from_permits_as_they_come_back() {
    let mut capacity = Capacity::new(3);
    let held: Vec<_> = (0..3).map(|_| Arc::clone(&capacity.slots).try_acquire_owned().unwrap()).collect();
    capacity.resize(1);
    assert_eq!(capacity.owed, 2, "every permit is held: the cut waits");
    drop(held);
    capacity.settle();
    assert_eq!((capacity.slots.available_permits(), capacity.owed), (1, 0));
    capacity.resize(4);
    assert_eq!(capacity.slots.available_permits(), 4, "a raised cap admits more at once");
    capacity.resize(2);
    capacity.resize(3);
    assert_eq!((capacity.slots.available_permits(), capacity.owed), (3, 0));
}

/// Serves `app` on a loopback port until `shutdown`; the address and the server's task.
async fn serving(
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_connections: 4,
    };
    let (limits, watched) = watch::channel(limits);
    let server = tokio::spawn(async move {
        serve(listener, app, watched, None, shutdown).await;
        drop(limits);
    });
    (address, server)
}

/// Serves a route answering before it reads the body; the address and the server's task.
async fn early_answerer() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let app = Router::new().route("/early", axum::routing::post(|| async { "early" }));
    serving(app, std::future::pending()).await
}

/// Writes a `POST /early` declaring `declared` body bytes and sending `body`; reads the answer's head and body.
async fn post_early(client: &mut TcpStream, declared: usize, body: &[u8]) -> String {
    let head = format!("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: {declared}\r\n\r\n");
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        assert_eq!(client.read(&mut byte).await.unwrap(), 1, "the connection closed before an answer: {answer:?}");
        answer.push(byte[0]);
    }
    let mut rest = [0u8; 5];
    client.read_exact(&mut rest).await.unwrap();
    answer.extend_from_slice(&rest);
    String::from_utf8(answer).unwrap().to_ascii_lowercase()
}

#[tokio::test]
async fn a_body_left_unread_by_an_early_answer_is_drained_and_the_connection_serves_the_next_request() {
    let (address, server) = early_answerer().await;
    let mut client = TcpStream::connect(address).await.unwrap();
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#;
    for round in 0..3 {
        let answer = post_early(&mut client, body.len(), body).await;
        assert!(answer.starts_with("http/1.1 200"), "round {round}: {answer}");
        assert!(answer.ends_with("early"), "round {round}: {answer}");
        assert!(!answer.contains("connection: close"), "round {round}: {answer}");
    }
    server.abort();
}

#[tokio::test]
async fn an_unread_body_too_large_or_too_slow_to_drain_closes_the_connection_with_the_answer() {
    let (address, server) = early_answerer().await;
    let large = vec![b'x'; early_answer::DRAIN_MAX + 1];
    let mut client = TcpStream::connect(address).await.unwrap();
    let answer = post_early(&mut client, large.len(), &large).await;
    assert!(answer.starts_with("http/1.1 200") && answer.contains("connection: close"), "{answer}");
    let mut slow = TcpStream::connect(address).await.unwrap();
    let answer = post_early(&mut slow, 100, b"{\"partial\":").await;
    assert!(answer.starts_with("http/1.1 200") && answer.contains("connection: close"), "{answer}");
    let mut after = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut after)).await;
    assert!(closed.is_ok_and(|read| read.is_err() || after.is_empty()), "the gateway closes it: {after:?}");
    server.abort();
}
