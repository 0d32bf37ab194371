//! The end of a graceful shutdown's drain, as the requests still running see it (docs/operations.md, *Listener,
//! limits and shutdown*): when `shutdown_drain` has run out, every request the front is still answering through a
//! [`super::stream::Call`] is answered at once — a `tools/call` with the `unknown` outcome
//! (`router::shut_down`), any other request with a JSON-RPC internal error — in the JSON or event-stream answer it
//! was going to get, so its agent reads why instead of a dropped connection.
//!
//! Rules: the cut only changes what the agent is told; the request itself goes on, detached, until the process
//! ends, and the gateway marks its claim `unknown` before it exits (`orphan`), which is what the agent was told.
//! Before the cut, it costs each such request one waiting future and nothing else.

use serde_json::Value;
use tokio::sync::watch;

use crate::mcp::jsonrpc;
use crate::mcp::method::Method;
use crate::router::{Found, RpcFailure};

/// Whether the drain has run out; set once, by the composition root.
pub struct Cutoff(watch::Sender<bool>);

impl Default for Cutoff {
    fn default() -> Self {
        Cutoff(watch::Sender::new(false))
    }
}

impl Cutoff {
    /// The drain ran out: every request waiting on [`Cutoff::reached`] is answered now.
    pub fn cut(&self) {
        self.0.send_replace(true);
    }

    /// Completes once [`Cutoff::cut`] was called (never, if it is not).
    pub(super) fn reached(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut cut = self.0.subscribe();
        async move {
            if cut.wait_for(|cut| *cut).await.is_err() {
                // The front is gone, so no cut will come.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// What a request of `method` still running at the cut is answered.
pub(super) fn answer(method: &Method) -> Result<Found, RpcFailure> {
    match method {
        Method::ToolsCall => Ok(Found::Built(crate::router::shut_down())),
        _ => Err(RpcFailure::new(
            jsonrpc::INTERNAL_ERROR,
            format!("the gateway is shutting down and stopped waiting for this {} request; retry it", method.as_str()),
        )),
    }
}

/// [`answer`] for a request whose id is `id` — the JSON-RPC response a session-era agent gets.
pub(super) fn response(id: &Value, method: &Method) -> super::splice::JsonRpcReply {
    super::splice::JsonRpcReply::of(id, answer(method))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::OUTCOME_META;

    #[tokio::test]
    async fn a_call_is_told_its_outcome_is_unknown_and_other_requests_get_an_error() {
        let cutoff = Cutoff::default();
        let reached = cutoff.reached();
        cutoff.cut();
        reached.await;
        let Ok(Found::Built(result)) = answer(&Method::ToolsCall) else { panic!("a result") };
        assert_eq!(result["isError"], true);
        assert_eq!(result["_meta"][OUTCOME_META], "unknown");
        let Err(failure) = answer(&Method::PromptsGet) else { panic!("an error") };
        assert_eq!(failure.code, jsonrpc::INTERNAL_ERROR);
        assert!(failure.message.contains("shutting down"), "{}", failure.message);
    }
}
