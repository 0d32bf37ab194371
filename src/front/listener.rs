//! The agent-facing accept loop: HTTP/1.1 connections served by hyper, with the limits that keep slow, idle and
//! too many clients from holding the gateway's memory and file descriptors.
//!
//! Rules:
//! - At most `max_connections` connections are served at once. Beyond that the loop stops accepting, so new
//!   connections wait in the kernel's backlog while the open ones (and `/healthz` on them) keep being served.
//! - A connection with no request on it is closed after `idle_timeout`: before its first byte, and between
//!   keep-alive requests. Once a request's first byte has arrived, its header must be complete within
//!   `header_timeout`. While a request is being served (its body read, its answer written, an event stream held
//!   open) neither applies: the body has its own deadline in the front (`body_timeout`, answered 408).
//!   hyper's own header timer is not used because it starts when hyper waits for a request, so it would count
//!   keep-alive idleness as header time; the phases are kept apart here instead.
//! - Each request carries the peer's address as axum's `ConnectInfo<SocketAddr>`, and a [`ShareSlot`] where its
//!   admission leaves the principal's share, held with the answer's body until it is sent or dropped.
//! - A request naming more than one host ([`guard::check_target`]) is refused here, before any route sees it.
//! - Sockets are `TCP_NODELAY`: every write goes out when it is made (an event is never held for an ACK).
//! - A connection's task is polled through [`crate::inline_wake`]: a wake-up it gives itself while being polled
//!   (the backend's answer handed back, the connection turning idle) is another round of the poll, not a
//!   reschedule that wakes the other worker thread.
//! - The limits may change while serving (a configuration reload, through a `watch` channel): a connection keeps
//!   the timeouts it was accepted with; a raised `max_connections` admits more at once, a lowered one takes effect
//!   as open connections close (none is closed for it).
//! - A request whose answer is ready before its body was read (a refusal from authentication, say) keeps its
//!   connection usable: the rest of the body, up to [`early_answer::DRAIN_MAX`] bytes arriving within
//!   [`early_answer::DRAIN_TIME`], is read and dropped before the answer goes out. A longer or slower rest gets
//!   `Connection: close` (RFC 9112 §9.6), so the agent opens a new connection instead of sending its next request
//!   into one the gateway is closing ([`early_answer`]). The idle and header deadlines are kept by [`phase`].
//! - With TLS ([`ServerTls`]), each connection's handshake runs in its own task within `header_timeout`, with the
//!   configuration current when it was accepted; a client that does not complete it (a plaintext request, say)
//!   is dropped, never answered in plain HTTP. The idle and header deadlines start after the handshake.
//! - Shutdown stops accepting, lets every connection finish the request it is serving (hyper's graceful
//!   shutdown closes idle ones at once) and returns when all are closed. Dropping the future closes them all.

use std::borrow::Borrow;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use axum::response::IntoResponse;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::error::FrontError;
use super::guard;
use super::shares::ShareSlot;
use super::tls::ServerTls;
use early_answer::{Returned, closing, drain};
use phase::{Deadlined, Phase, Serving};

mod early_answer;
mod phase;

/// How long the loop pauses after an accept error that is not about one connection (out of file descriptors or
/// memory), so that it does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The limits on clients' connections (`[server]` keys of the same names).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

/// Serves `app` on `listener` (over TLS when `tls` is given) until `shutdown` completes, then until every
/// connection has closed; `limits` are read at each accept and may change meanwhile. A borrowed listener stays
/// open for whoever serves on it next.
pub async fn serve(
    listener: impl Borrow<TcpListener>,
    app: Router,
    mut limits: watch::Receiver<ConnectionLimits>,
    tls: Option<Arc<ServerTls>>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = pin!(shutdown);
    let mut current = *limits.borrow_and_update();
    let mut capacity = Capacity::new(current.max_connections);
    let slots = Arc::clone(&capacity.slots);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next() => capacity.settle(),
            Ok(()) = limits.changed() => {
                current = *limits.borrow_and_update();
                capacity.resize(current.max_connections);
            }
            (stream, peer, slot) = next_connection(listener.borrow(), &slots) => {
                let accepted = Accepted { stream, slot, limits: current, peer };
                let tls = tls.as_ref().map(|tls| tls.current());
                connections.spawn(accepted.serve(app.clone(), tls, graceful.watcher()));
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The connection slots: a semaphore of `max` permits, shrunk by forgetting permits as they come back.
struct Capacity {
    slots: Arc<Semaphore>,
    max: usize,
    /// Permits still to forget after `max` was lowered (they are held by open connections).
    owed: usize,
}

impl Capacity {
    fn new(max: usize) -> Self {
        Self { slots: Arc::new(Semaphore::new(max)), max, owed: 0 }
    }

    fn resize(&mut self, max: usize) {
        if max >= self.max {
            let grow = max - self.max;
            let repaid = grow.min(self.owed);
            self.owed -= repaid;
            self.slots.add_permits(grow - repaid);
        } else {
            self.owed += self.max - max;
            self.settle();
        }
        self.max = max;
    }

    /// Forgets what is owed of the permits now free (called whenever a connection closes).
    fn settle(&mut self) {
        if self.owed > 0 {
            self.owed -= self.slots.forget_permits(self.owed);
        }
    }
}

/// Waits for a free connection slot, then for a client; errors about one connection are skipped.
async fn next_connection(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> (TcpStream, SocketAddr, OwnedSemaphorePermit) {
    loop {
        // `serve` never closes `slots`; if it did, no connection could be counted, so none would be accepted.
        let Ok(slot) = Arc::clone(slots).acquire_owned().await else {
            return std::future::pending().await;
        };
        match listener.accept().await {
            Ok((stream, peer)) => return (stream, peer, slot),
            Err(error) if is_connection_error(&error) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection; pausing");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Errors that concern only the connection being accepted (it was reset before it could be accepted).
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// A connection just accepted, holding its slot (released when it closes).
struct Accepted {
    stream: TcpStream,
    slot: OwnedSemaphorePermit,
    limits: ConnectionLimits,
    peer: SocketAddr,
}

impl Accepted {
    /// Serves the connection (after its TLS handshake, when `tls` is given) until it closes; `watcher` lets a
    /// graceful shutdown wait for it.
    async fn serve(self, app: Router, tls: Option<Arc<TlsAcceptor>>, watcher: Watcher) {
        let Accepted { stream, slot, limits, peer } = self;
        // An event stream's answer is many small writes; Nagle's algorithm would hold each one back until the
        // agent acknowledged the last (up to its delayed-ACK timer, tens of milliseconds).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        let served = match tls {
            None => serve_http(stream, slot, limits, peer, app, watcher).await,
            Some(tls) => match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await {
                Ok(Ok(stream)) => serve_http(stream, slot, limits, peer, app, watcher).await,
                Ok(Err(error)) => return tracing::debug!(%peer, %error, "TLS handshake failed"),
                Err(_) => return tracing::debug!(%peer, "TLS handshake not complete within header_timeout"),
            },
        };
        if let Err(error) = served {
            tracing::debug!(%peer, %error, "connection closed");
        }
    }
}

/// Serves one connection's HTTP/1.1 with hyper over `stream` (a socket, or a TLS session on one) until it
/// closes, polled through [`crate::inline_wake`] and watched by `watcher`.
async fn serve_http<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    stream: S,
    slot: OwnedSemaphorePermit,
    limits: ConnectionLimits,
    peer: SocketAddr,
    app: Router,
    watcher: Watcher,
) -> hyper::Result<()> {
    let phase = Arc::new(Mutex::new(Phase::idle()));
    let io = Deadlined { stream, limits, phase: Arc::clone(&phase), timer: None, _slot: slot };
    let service = PerRequest { app: TowerToHyperService::new(app), peer, phase };
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service);
    crate::inline_wake::run(watcher.watch(connection)).await
}

/// The per-connection service: tags each request with the peer's address and keeps the connection's phase
/// `serving` from the end of the request's header until its answer has been written (or abandoned).
struct PerRequest {
    app: TowerToHyperService<Router>,
    peer: SocketAddr,
    phase: Arc<Mutex<Phase>>,
}

impl hyper::service::Service<Request<Incoming>> for PerRequest {
    type Response = Response<Holding<(Serving, ShareSlot)>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let held = (Serving::begin(Arc::clone(&self.phase)), ShareSlot::default());
        let (mut request, unread) = Returned::wrap(request);
        let answering = match guard::check_target(request.uri(), request.headers()) {
            // The request is dropped here, so its body comes back to be drained like any other.
            Err(refusal) => Err(FrontError::from(refusal).into_response()),
            Ok(()) => {
                request.extensions_mut().insert(ConnectInfo(self.peer));
                request.extensions_mut().insert(held.1.clone());
                Ok(hyper::service::Service::call(&self.app, request))
            }
        };
        Box::pin(async move {
            let mut answer = match answering {
                Ok(answering) => answering.await?,
                Err(refused) => refused,
            };
            if let Some(rest) = unread.and_then(|mut unread| unread.try_recv().ok())
                && !drain(rest).await
            {
                answer = closing(answer);
            }
            Ok(answer.map(|body| Holding::new(body, held)))
        })
    }
}

/// A response body that keeps `held` (here: its request `serving`) until hyper has written it all (or dropped it);
/// its size is the body's, so a JSON answer keeps its `Content-Length`.
pub(super) struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T> Holding<T> {
    pub(super) fn new(body: Body, held: T) -> Holding<T> {
        Holding { body, _held: held }
    }
}

impl<T: Unpin> http_body::Body for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
#[path = "listener_tests.rs"]
mod tests;
