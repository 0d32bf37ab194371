//! The client against hand-written backends: what goes on the wire, when a connection is reused, and when a
//! request is (never) resent.

use std::sync::Mutex;

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Answers one request on `listener` with `answer` and returns the request's bytes.
async fn answer_once(listener: TcpListener, answer: String) -> Vec<u8> {
    let (mut socket, _) = listener.accept().await.unwrap();
    let mut request = vec![0; 4096];
    let read = socket.read(&mut request).await.unwrap();
    request.truncate(read);
    socket.write_all(answer.as_bytes()).await.unwrap();
    request
}

fn get(uri: &Uri) -> Request {
    request(Method::GET, uri, HeaderMap::new(), Bytes::new())
}

#[tokio::test]
async fn a_redirect_is_returned_not_followed_and_a_body_arrives_as_sent() {
    let elsewhere = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
    let answer = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{}/mcp\r\nContent-Encoding: gzip\r\n\
         Content-Length: 5\r\n\r\nhello",
        elsewhere.local_addr().unwrap()
    );
    let server = tokio::spawn(answer_once(listener, answer));
    let mut response = HttpClient::new().unwrap().send(get(&uri)).await.unwrap();
    assert_eq!(response.status(), http::StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(content_length(&response), Some(5));
    assert_eq!(next_chunk(response.body_mut()).await.unwrap().as_deref(), Some(&b"hello"[..]), "not decoded");
    assert!(next_chunk(response.body_mut()).await.unwrap().is_none());
    let sent = String::from_utf8(server.await.unwrap()).unwrap();
    assert!(sent.starts_with("GET /mcp HTTP/1.1\r\n"), "origin form: {sent}");
    let host = format!("host: {}\r\n", uri.authority().unwrap());
    assert!(sent.to_ascii_lowercase().contains(&host), "{sent}");
    let followed = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
    assert!(followed.is_err(), "the redirect must not be followed");
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
    drop(listener);
    let error = HttpClient::new().unwrap().send(get(&uri)).await.unwrap_err();
    assert!(matches!(error, SendError::Connect { .. }) && error.never_sent(), "{error:?}");
}

#[tokio::test]
async fn a_connection_closed_after_the_request_is_not_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
    let server = tokio::spawn(answer_once(listener, String::new()));
    let error = HttpClient::new().unwrap().send(get(&uri)).await.unwrap_err();
    assert!(!error.never_sent(), "{error:?}");
    assert!(!server.await.unwrap().is_empty(), "the request went out");
}

/// What a test backend does after reading a request: writes `.0`, then `.1`.
type Reply = (&'static str, After);

#[derive(Clone, Copy, PartialEq)]
enum After {
    KeepOpen,
    Close,
    /// Closes with a TCP reset, as when the backend's process dies.
    Reset,
}

const OK: Reply = ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", After::KeepOpen);

/// Every request a test backend read: (connection number, request head).
type Seen = Arc<Mutex<Vec<(usize, String)>>>;

/// A backend that answers each request with `reply(connection number, request number on it)`.
async fn backend(reply: fn(usize, usize) -> Reply) -> (Uri, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        for connection in 0.. {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(serve(socket, connection, reply, Arc::clone(&log)));
        }
    });
    (uri, seen)
}

async fn serve(mut socket: TcpStream, connection: usize, reply: fn(usize, usize) -> Reply, seen: Seen) {
    for number in 0.. {
        let Some(head) = read_head(&mut socket).await else { return };
        seen.lock().unwrap().push((connection, head));
        let (answer, after) = reply(connection, number);
        socket.write_all(answer.as_bytes()).await.unwrap();
        match after {
            After::KeepOpen => {}
            After::Close => return,
            After::Reset => return socket.set_zero_linger().unwrap(),
        }
    }
}

/// One request head, up to its blank line; `None` when the peer closed first.
async fn read_head(socket: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0];
        if socket.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8(head).unwrap())
}

/// Sends a `GET` and reads the whole answer, within a bound that turns a hang into a failure.
async fn fetch(client: &HttpClient, uri: &Uri) -> String {
    let exchange = async {
        let mut response = client.send(get(uri)).await.unwrap();
        let mut text = Vec::new();
        while let Some(chunk) = next_chunk(response.body_mut()).await.unwrap() {
            text.extend_from_slice(&chunk);
        }
        String::from_utf8(text).unwrap()
    };
    tokio::time::timeout(Duration::from_secs(5), exchange).await.expect("the exchange hung")
}

/// The connection number of each request the backend saw, in order.
fn connections(seen: &Seen) -> Vec<usize> {
    seen.lock().unwrap().iter().map(|(connection, _)| *connection).collect()
}

#[tokio::test]
async fn requests_in_turn_share_one_connection_which_goes_back_to_the_pool() {
    let (uri, seen) = backend(|_, _| OK).await;
    let client = HttpClient::new().unwrap();
    for _ in 0..3 {
        assert_eq!(fetch(&client, &uri).await, "ok");
    }
    assert_eq!(connections(&seen), [0, 0, 0]);
    assert_eq!(client.pool.idle(&Key::of(&uri).unwrap()), 1);
}

#[tokio::test]
async fn an_idle_connection_the_backend_closed_is_replaced_and_the_request_sent_once() {
    for ending in [After::Close, After::Reset] {
        let (uri, seen) = backend(match ending {
            After::Close => |connection, _| (OK.0, if connection == 0 { After::Close } else { After::KeepOpen }),
            _ => |connection, _| (OK.0, if connection == 0 { After::Reset } else { After::KeepOpen }),
        })
        .await;
        let client = HttpClient::new().unwrap();
        assert_eq!(fetch(&client, &uri).await, "ok");
        // Let the backend's close reach this side before the pooled connection is taken again.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(fetch(&client, &uri).await, "ok");
        assert_eq!(connections(&seen), [0, 1], "the second request went out once, on a new connection");
    }
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let (uri, seen) = backend(|connection, _| match connection {
        0 => ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", After::KeepOpen),
        _ => OK,
    })
    .await;
    let client = HttpClient::new().unwrap();
    let mut response = client.send(get(&uri)).await.unwrap();
    assert_eq!(next_chunk(response.body_mut()).await.unwrap().as_deref(), Some(&b"hello"[..]));
    drop(response);
    assert_eq!(fetch(&client, &uri).await, "ok", "the rest of the first body is not read as an answer");
    assert_eq!(connections(&seen), [0, 1]);
}

#[tokio::test]
async fn an_empty_body_gives_its_connection_back_unread() {
    let (uri, seen) = backend(|_, _| ("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", After::KeepOpen)).await;
    let client = HttpClient::new().unwrap();
    for _ in 0..2 {
        let response = tokio::time::timeout(Duration::from_secs(5), client.send(get(&uri))).await.unwrap().unwrap();
        assert_eq!(response.status(), http::StatusCode::ACCEPTED);
    }
    assert_eq!(connections(&seen), [0, 0]);
}

#[tokio::test]
async fn a_connection_the_backend_says_it_closes_is_not_reused() {
    let (uri, seen) =
        backend(|_, _| ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", After::KeepOpen)).await;
    let client = HttpClient::new().unwrap();
    assert_eq!(fetch(&client, &uri).await, "ok");
    assert_eq!(fetch(&client, &uri).await, "ok");
    assert_eq!(connections(&seen), [0, 1]);
}

#[tokio::test]
async fn a_relative_uri_is_refused_before_anything_is_sent() {
    let error = HttpClient::new().unwrap().send(get(&Uri::from_static("/mcp"))).await.unwrap_err();
    assert!(matches!(error, SendError::NotAbsolute(_)) && error.never_sent(), "{error:?}");
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_time_without_any_traffic() {
    let (uri, _seen) = backend(|_, _| OK).await;
    let client = HttpClient::with_pool(super::connector().unwrap(), Pool::keeping_idle_for(Duration::from_millis(90)));
    assert_eq!(fetch(&client, &uri).await, "ok");
    let key = Key::of(&uri).unwrap();
    assert_eq!(client.pool.idle(&key), 1, "kept for the next request");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while client.pool.idle(&key) > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the idle connection was never closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
