//! A round-robin TCP load balancer for fleet tests: each new client connection goes to the next replica whose
//! `/readyz` answered 200 when last polled, as a cloud load balancer or a Kubernetes Service with a readiness probe
//! does; the bytes are then copied both ways until either side closes.
//!
//! Rules:
//! - Readiness is polled every [`POLL`] with a short timeout; a replica that does not answer is not ready.
//! - A connection that arrives while no replica is ready waits (up to [`WAIT_FOR_READY`]) for one, as the
//!   balancer's queue would; after that it is closed.
//! - Like a layer-4 balancer (a Kubernetes Service's), it does not try another replica when the chosen one refuses
//!   the connection: the client's connection is closed, and its request fails. So a replica that stopped
//!   listening before the balancer saw it not ready loses requests, which is what a rolling restart must avoid.
//! - Loopback only; every task ends when the balancer is dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How often each replica's `/readyz` is asked.
const POLL: Duration = Duration::from_millis(50);
/// How long a connection waits for a ready replica before it is closed.
const WAIT_FOR_READY: Duration = Duration::from_secs(30);

#[derive(Clone, Copy)]
struct Replica {
    address: SocketAddr,
    ready: bool,
}

/// The balancer, listening on a loopback port of its own.
pub struct Balancer {
    address: SocketAddr,
    replicas: Arc<Mutex<Vec<Replica>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl Balancer {
    /// Balances over `replicas` (each `host:port` of a gateway serving plain HTTP).
    pub async fn start(replicas: &[SocketAddr]) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the balancer");
        let address = listener.local_addr().expect("balancer address");
        let replicas =
            Arc::new(Mutex::new(replicas.iter().map(|&address| Replica { address, ready: false }).collect::<Vec<_>>()));
        let tasks =
            vec![tokio::spawn(poll(Arc::clone(&replicas))), tokio::spawn(accept(listener, Arc::clone(&replicas)))];
        Balancer { address, replicas, tasks }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Replaces replica `index` by one at `address` (not ready until its `/readyz` says so).
    pub fn replace(&self, index: usize, address: SocketAddr) {
        self.replicas.lock()[index] = Replica { address, ready: false };
    }

    /// How many replicas were ready when last polled.
    pub fn ready(&self) -> usize {
        self.replicas.lock().iter().filter(|replica| replica.ready).count()
    }
}

async fn poll(replicas: Arc<Mutex<Vec<Replica>>>) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).no_proxy().build().expect("client");
    loop {
        let addresses: Vec<SocketAddr> = replicas.lock().iter().map(|replica| replica.address).collect();
        for address in addresses {
            let answer = http.get(format!("http://{address}/readyz")).send().await;
            let ready = answer.is_ok_and(|answer| answer.status() == reqwest::StatusCode::OK);
            for replica in replicas.lock().iter_mut().filter(|replica| replica.address == address) {
                replica.ready = ready;
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn accept(listener: TcpListener, replicas: Arc<Mutex<Vec<Replica>>>) {
    let mut next = 0;
    while let Ok((client, _)) = listener.accept().await {
        next += 1;
        let replicas = Arc::clone(&replicas);
        tokio::spawn(async move {
            if let Some(upstream) = connect(&replicas, next).await {
                let (mut client, mut upstream) = (client, upstream);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
    }
}

/// A connection to the first ready replica counting from `turn` (round robin), waiting for one to be ready;
/// `None` when that replica refuses it.
async fn connect(replicas: &Mutex<Vec<Replica>>, turn: usize) -> Option<TcpStream> {
    let deadline = tokio::time::Instant::now() + WAIT_FOR_READY;
    while tokio::time::Instant::now() < deadline {
        let chosen = {
            let replicas = replicas.lock();
            let count = replicas.len();
            (0..count).map(|offset| replicas[(turn + offset) % count]).find(|replica| replica.ready)
        };
        if let Some(replica) = chosen {
            return TcpStream::connect(replica.address).await.ok();
        }
        tokio::time::sleep(POLL).await;
    }
    None
}
