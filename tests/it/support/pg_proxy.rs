//! A loopback TCP proxy that a test can cut and restore on the same port, to simulate a server going away and
//! coming back without touching the real server: made for PostgreSQL outages (the gateway's ledger URL names the
//! proxy instead of the server), and usable in front of any loopback TCP service (a backend "down").
//!
//! Rules:
//! - [`TcpProxy::cut`] closes the listener AND every open proxied connection, and returns only once they are all
//!   closed: from then on, connecting is refused and every connection made before is gone (both sides see EOF).
//! - [`TcpProxy::restore`] listens again on the same port; new connections reach the target again.
//! - Dropping the proxy cuts it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// A running (or cut) proxy from `127.0.0.1:port` to `target`.
pub struct TcpProxy {
    address: SocketAddr,
    target: SocketAddr,
    running: Option<Running>,
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a fresh loopback port and forwards every connection to `target`.
    pub async fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        TcpProxy { address, target, running: Some(Running::spawn(listener, target)) }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops listening and closes every proxied connection; returns when all of them are closed.
    pub async fn cut(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.stop.send(());
            let _ = running.task.await;
        }
    }

    /// Listens again on the same port (retrying briefly if the port is not free yet).
    pub async fn restore(&mut self) {
        if self.running.is_some() {
            return;
        }
        let mut attempts = 0;
        let listener = loop {
            match TcpListener::bind(self.address).await {
                Ok(listener) => break listener,
                Err(error) if attempts < 100 => {
                    attempts += 1;
                    if attempts == 1 {
                        eprintln!("proxy: cannot listen on {} yet ({error}); retrying", self.address);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => panic!("proxy: cannot listen on {} again: {error}", self.address),
            }
        };
        self.running = Some(Running::spawn(listener, self.target));
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.task.abort();
        }
    }
}

impl Running {
    fn spawn(listener: TcpListener, target: SocketAddr) -> Running {
        let (stop, stopped) = oneshot::channel();
        Running { stop, task: tokio::spawn(accept_loop(listener, target, stopped)) }
    }
}

/// Accepts until stopped; the connections live in a `JoinSet` owned here, so stopping (or aborting) this task
/// closes all of them.
async fn accept_loop(listener: TcpListener, target: SocketAddr, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((inbound, _)) => {
                    connections.spawn(pipe(inbound, target));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Aborts every connection task and waits until each has dropped its sockets.
    connections.shutdown().await;
}

async fn pipe(mut inbound: TcpStream, target: SocketAddr) {
    let Ok(mut outbound) = TcpStream::connect(target).await else {
        return;
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
}
