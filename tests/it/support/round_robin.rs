//! A loopback TCP proxy that sends each new connection to the next of its targets in turn (a round-robin load
//! balancer that knows nothing of HTTP): the first connection goes to the first target. It counts the
//! connections each target got; dropping it stops accepting.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct RoundRobin {
    address: SocketAddr,
    connections: Arc<Mutex<Vec<usize>>>,
    task: JoinHandle<()>,
}

impl RoundRobin {
    pub async fn start(targets: Vec<SocketAddr>) -> RoundRobin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        let connections = Arc::new(Mutex::new(vec![0; targets.len()]));
        let counted = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            for turn in 0.. {
                let Ok((mut agent, _)) = listener.accept().await else { return };
                let next = turn % targets.len();
                counted.lock()[next] += 1;
                let target = targets[next];
                tokio::spawn(async move {
                    if let Ok(mut replica) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut agent, &mut replica).await;
                    }
                });
            }
        });
        RoundRobin { address, connections, task }
    }

    /// The MCP endpoint behind the proxy.
    pub fn mcp(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// How many connections each target got, in the targets' order.
    pub fn connections(&self) -> Vec<usize> {
        self.connections.lock().clone()
    }
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        self.task.abort();
    }
}
