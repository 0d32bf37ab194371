//! A request's work polled by whoever awaits it — the handler, then an event stream's task — instead of a task of
//! its own ([`Call`]), with what it ends with in each era ([`Reply`]).
//!
//! Rules: dropped before it finished (the agent went away), the work goes on on a task of its own, so a call is
//! never stopped half-way and its ledger claim is always settled; a panic inside it becomes a JSON-RPC internal
//! error, as it would on a task; made to wait for a [`Cutoff`], it answers the cutoff's reply when the cutoff
//! comes first and goes on detached.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use serde_json::Value;

use super::cutoff::Cutoff;
use super::splice::JsonRpcReply;

/// What a call ends with: the agent's JSON-RPC response (with its HTTP status, in the 2026-07-28 era).
pub(super) trait Reply: Send + 'static {
    /// The reply of a call that panicked inside the gateway; `error` is its JSON-RPC internal error.
    fn failed(error: Value) -> Self;
}

impl Reply for JsonRpcReply {
    fn failed(error: Value) -> JsonRpcReply {
        JsonRpcReply::Tree(error)
    }
}

impl Reply for (StatusCode, Value) {
    fn failed(error: Value) -> Self {
        (StatusCode::OK, error)
    }
}

/// The call, once it is done.
type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A call polled by whoever awaits it (no task, no channel on the way); dropped before it finished, it goes on
/// running on a task of its own, so the agent's going away never stops a call half-way nor leaves its ledger
/// claim unsettled (both eras: in the 2026-07-28 era the front cancels the backend request first, and the call
/// settles that). A panic inside the call becomes a JSON-RPC internal error, as it would on a task. Made
/// [`Call::cut_at`] a cutoff, it answers the cutoff's reply when the cutoff comes first, and goes on detached.
pub(super) struct Call<T: Reply = JsonRpcReply> {
    call: Option<Pending<T>>,
    cut: Option<Pending<T>>,
}

impl<T: Reply> Call<T> {
    pub(super) fn new(call: impl Future<Output = T> + Send + 'static) -> Call<T> {
        Call { call: Some(Box::pin(call)), cut: None }
    }

    /// This call, answered `reply()` instead if it is still running when `cutoff` is reached
    /// ([`super::cutoff`]).
    pub(super) fn cut_at(mut self, cutoff: &Cutoff, reply: impl FnOnce() -> T + Send + 'static) -> Call<T> {
        let reached = cutoff.reached();
        self.cut = Some(Box::pin(async move {
            reached.await;
            reply()
        }));
        self
    }

    /// The cutoff's reply, once it came; the call then goes on on a task of its own.
    fn poll_cut(&mut self, cx: &mut Context<'_>) -> Poll<T> {
        let Some(cut) = self.cut.as_mut() else { return Poll::Pending };
        let reply = std::task::ready!(cut.as_mut().poll(cx));
        self.cut = None;
        self.detach();
        Poll::Ready(reply)
    }

    fn detach(&mut self) {
        if let (Some(call), Ok(runtime)) = (self.call.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(call);
        }
    }
}

impl<T: Reply> Future for Call<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(call) = self.call.as_mut() else { return Poll::Pending };
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(cx)));
        let reply = match polled {
            Ok(Poll::Pending) => return self.poll_cut(cx),
            Ok(Poll::Ready(reply)) => reply,
            Err(panic) => T::failed(internal_error(&format_args!("panicked: {}", panic_message(panic.as_ref())))),
        };
        self.call = None;
        self.cut = None;
        Poll::Ready(reply)
    }
}

impl<T: Reply> Drop for Call<T> {
    fn drop(&mut self) {
        self.detach();
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("")
}

fn internal_error(error: &impl std::fmt::Display) -> Value {
    crate::mcp::jsonrpc::error(
        None,
        crate::mcp::jsonrpc::INTERNAL_ERROR,
        &format!("the call failed inside the gateway: {error}"),
    )
}
