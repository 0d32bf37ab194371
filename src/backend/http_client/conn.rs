//! One HTTP/1.1 connection to a backend, driven by the task that uses it (no task hop per call).
//!
//! Rules:
//! - hyper's connection future ([`http1::Connection`]) does the socket I/O; nothing is spawned for it. Whoever
//!   holds the connection polls it: the call's task while it sends the request and reads the response
//!   ([`Conn::exchange`], [`super::body::Body::next_chunk`]), and the next call when it takes the connection from the pool
//!   ([`Conn::ready`]). So one call is one task, without a spawned connection task per pooled connection and the
//!   channel hops between the two (BENCHMARKS.md measures what that saves).
//! - Nobody polls an idle connection: a peer that closed it is noticed when it is next taken ([`Conn::ready`]
//!   fails, or the request comes back unsent, see [`super::pool`]).
//! - A finished connection future is dropped at once: that closes the request channel, so the sender reports the
//!   connection closed and a request still waiting on it gets its error, instead of waiting for a future that
//!   nobody will poll again.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Context;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{TrySendError, http1};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A connection's byte stream: plain TCP or TLS over it.
pub(super) type Io = MaybeHttpsStream<TokioIo<TcpStream>>;
/// A request as the connection takes it (origin-form URI, `Host` set).
pub(super) type WireRequest = http::Request<Full<Bytes>>;

/// A connection and the future that does its I/O.
pub(super) struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once it has finished (the connection is closed or broken).
    driver: Option<http1::Connection<Io, Full<Bytes>>>,
}

impl Conn {
    /// Starts HTTP/1.1 on `io` (no bytes are exchanged until the first request). Boxed: the connection's state
    /// is large, and it moves between the pool, the sending future and the body.
    pub(super) async fn open(io: Io) -> Result<Box<Conn>, hyper::Error> {
        let (sender, driver) = http1::Builder::new().handshake(io).await?;
        Ok(Box::new(Conn { sender, driver: Some(driver) }))
    }

    /// Moves the connection's I/O along as far as it can go now.
    pub(super) fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(driver) = &mut self.driver
            && Pin::new(driver).poll(cx).is_ready()
        {
            self.driver = None;
        }
    }

    /// Whether the connection can still carry requests, as far as is known without waiting.
    pub(super) fn reusable(&self) -> bool {
        self.driver.is_some() && !self.sender.is_closed()
    }

    /// Waits until the connection takes a request; fails when it closed meanwhile.
    pub(super) async fn ready(&mut self) -> Result<(), hyper::Error> {
        poll_fn(|cx| {
            self.drive(cx);
            self.sender.poll_ready(cx)
        })
        .await
    }

    /// Sends `request` and waits for the response's head; the request comes back in the error when it never
    /// left (the connection closed first).
    pub(super) async fn exchange(
        &mut self,
        request: WireRequest,
    ) -> Result<http::Response<Incoming>, TrySendError<WireRequest>> {
        let mut response = pin!(self.sender.try_send_request(request));
        poll_fn(|cx| {
            self.drive(cx);
            response.as_mut().poll(cx)
        })
        .await
    }
}
