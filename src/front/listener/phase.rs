//! Where a connection is in its request cycle, and the deadline its reads run against: `idle_timeout` while no
//! request is on it (before its first byte, and between keep-alive requests), `header_timeout` once a request's
//! first byte has arrived, none while a request is served.
//!
//! Rules: [`Serving`] marks a request served for as long as it lives (until its answer is written or dropped);
//! a reader that waited while it was served is woken when the connection becomes idle again, so the idle
//! deadline starts from the end of the answer, not from the last byte read.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::ConnectionLimits;

/// Where a connection is in its request cycle, which decides the deadline its reads run against.
#[derive(Debug)]
pub(super) struct Phase {
    /// Requests being served (HTTP/1.1 serves one at a time; a count keeps the bookkeeping obviously right).
    serving: usize,
    /// When the connection was last left without a request: at accept, or when an answer was finished.
    idle_since: Instant,
    /// When the first byte of the next request arrived, once it has.
    head_since: Option<Instant>,
    /// The reader waiting while a request was served, woken when the connection becomes idle again.
    reader: Option<Waker>,
}

/// Which deadline expired.
#[derive(Debug, Clone, Copy)]
pub(super) enum Expiry {
    Idle,
    Header,
}

impl Phase {
    pub(super) fn idle() -> Phase {
        Phase { serving: 0, idle_since: Instant::now(), head_since: None, reader: None }
    }

    fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, Expiry)> {
        if self.serving > 0 {
            return None;
        }
        Some(match self.head_since {
            Some(head) => (head + limits.header_timeout, Expiry::Header),
            None => (self.idle_since + limits.idle_timeout, Expiry::Idle),
        })
    }
}

/// The connection's socket, whose reads fail with `TimedOut` once the current phase's deadline has passed.
pub(super) struct Deadlined<S> {
    pub(super) stream: S,
    pub(super) limits: ConnectionLimits,
    pub(super) phase: Arc<Mutex<Phase>>,
    pub(super) timer: Option<Pin<Box<Sleep>>>,
    /// Held until the connection closes: it is what `max_connections` counts.
    pub(super) _slot: OwnedSemaphorePermit,
}

impl<S> Deadlined<S> {
    /// Called when a read found nothing: `Pending` until data comes or the deadline passes.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let deadline = {
            let mut phase = self.phase.lock();
            let deadline = phase.deadline(&self.limits);
            if deadline.is_none() {
                phase.reader = Some(cx.waker().clone());
            }
            deadline
        };
        let Some((deadline, expiry)) = deadline else {
            return Poll::Pending;
        };
        let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let what = match expiry {
                    Expiry::Idle => "the connection was idle for longer than idle_timeout",
                    Expiry::Header => "the request header was not complete within header_timeout",
                };
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let mut phase = this.phase.lock();
                    if phase.serving == 0 && phase.head_since.is_none() {
                        phase.head_since = Some(Instant::now());
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.poll_deadline(cx),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Marks a request as being served for as long as it lives.
pub(super) struct Serving(Arc<Mutex<Phase>>);

impl Serving {
    pub(super) fn begin(phase: Arc<Mutex<Phase>>) -> Serving {
        {
            let mut state = phase.lock();
            state.serving += 1;
            state.head_since = None;
        }
        Serving(phase)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let mut phase = self.0.lock();
        phase.serving -= 1;
        if phase.serving == 0 {
            phase.idle_since = Instant::now();
            if let Some(reader) = phase.reader.take() {
                reader.wake();
            }
        }
    }
}
