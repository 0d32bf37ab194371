//! The first phase of a graceful shutdown as the front shows it (docs/deployment.md, *Rolling restarts*): from the
//! stop signal until `shutdown_grace` has passed, the gateway serves as before, but `/readyz` answers 503 so a
//! load balancer stops sending it new connections, and every answer says `Connection: close` (RFC 9112 §9.6), so
//! an agent holding a keep-alive connection opens its next one through the balancer, to another replica.
//!
//! Rules: set once, by the composition root, when the stop signal comes; nothing else changes (requests are
//! served, connections accepted); the drain that follows is the listener's and the cutoff's. Before it is set, it
//! costs each request one atomic load: the MCP endpoint's and the browser routes' answers are marked by the
//! middleware they already pass ([`Stopping::mark`]); only the other routes get [`close_connections`] as a layer
//! of its own, so an ordinary call pays no extra layer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Front;

/// Whether this gateway is stopping.
#[derive(Default)]
pub struct Stopping(AtomicBool);

impl Stopping {
    /// The stop signal came: not ready from now on.
    pub fn begin(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(super) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Adds `Connection: close` to `answer` while stopping.
    pub(super) fn mark(&self, answer: &mut Response) {
        if self.is_set() {
            answer.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
}

/// Adds `Connection: close` to every answer while stopping (the routes without a middleware of their own).
pub(super) async fn close_connections(State(front): State<Arc<Front>>, request: Request, next: Next) -> Response {
    let mut answer = next.run(request).await;
    front.stopping.mark(&mut answer);
    answer
}
