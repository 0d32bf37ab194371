//! Tests of `front::listener`: the peer's address, graceful shutdown, and resizing the connection cap.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn handlers_see_the_peers_address_and_shutdown_waits_for_the_running_request() {
    let app = Router::new().route(
        "/peer",
        axum::routing::get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            peer.to_string()
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_connections: 4,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (_limits, watched) = watch::channel(limits);
    let server = tokio::spawn(serve(listener, app, watched, async move { drop(stopped.await) }));

    let mut client = TcpStream::connect(address).await.unwrap();
    client.write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
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
