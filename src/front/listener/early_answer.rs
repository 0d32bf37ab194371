//! An answer ready before its request's body was read (a refusal from authentication, say): the rest of the body
//! is read and dropped so the connection stays usable for the next request.
//!
//! Rules: at most [`DRAIN_MAX`] bytes arriving within [`DRAIN_TIME`] are read; a longer or slower rest gets
//! `Connection: close` (RFC 9112 §9.6), so the agent opens a new connection instead of sending its next request
//! into one the gateway is closing. A body the route read to its end, or that had none, is never drained.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, Response};
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::oneshot;

/// How much of an unread request body is read and dropped to keep the connection open after an early answer.
pub(super) const DRAIN_MAX: usize = 64 * 1024;
/// How long that rest may take to arrive.
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// `answer`, saying that the connection closes after it.
pub(super) fn closing<B>(mut answer: Response<B>) -> Response<B> {
    answer.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    answer
}

/// Reads and drops the rest of a request body; whether it ended within [`DRAIN_MAX`] and [`DRAIN_TIME`].
pub(super) async fn drain(mut rest: Incoming) -> bool {
    let read = async {
        let mut size = 0;
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut rest).poll_frame(cx)).await {
            let Ok(frame) = frame else { return false };
            size += frame.data_ref().map_or(0, Bytes::len);
            if size > DRAIN_MAX {
                return false;
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read).await.unwrap_or(false)
}

/// A request body that, dropped before its end, hands the rest back to the connection (see [`drain`]).
pub(super) struct Returned {
    body: Option<Incoming>,
    back: Option<oneshot::Sender<Incoming>>,
}

impl Returned {
    /// The request with its body wrapped, and where an unread rest comes back (`None`: it has no body).
    pub(super) fn wrap(request: Request<Incoming>) -> (Request<Returned>, Option<oneshot::Receiver<Incoming>>) {
        if request.body().is_end_stream() {
            return (request.map(|body| Returned { body: Some(body), back: None }), None);
        }
        let (back, unread) = oneshot::channel();
        (request.map(|body| Returned { body: Some(body), back: Some(back) }), Some(unread))
    }
}

impl http_body::Body for Returned {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let Some(body) = this.body.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            this.back = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map(http_body::Body::size_hint).unwrap_or_default()
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        if let (Some(body), Some(back)) = (self.body.take(), self.back.take())
            && !body.is_end_stream()
        {
            let _ = back.send(body);
        }
    }
}
