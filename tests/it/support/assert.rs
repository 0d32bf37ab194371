//! What the tests read out of answers, and how they wait: one way each, shared by every module.
//!
//! Rules:
//! - Readers fail loudly: [`text`] panics with the whole value when there is no text, so a negative assertion on
//!   the text (`!text(..).contains(..)`) can never pass because the text was missing.
//! - Readers take a whole JSON-RPC response or the bare `CallToolResult` (what a backend client returns).
//! - Nothing waits for a fixed time: [`eventually`] polls a condition until it holds or its deadline passes, and
//!   then names what it waited for. The deadline is generous (a busy 2-core machine is slow); it bounds a hang, it
//!   is not what a test measures.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use switchyard::router::OUTCOME_META;

/// How long [`eventually`] waits by default.
pub const PATIENCE: Duration = Duration::from_secs(120);
/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(10);

/// The `CallToolResult` inside `value`: its `result` when `value` is a JSON-RPC response, else `value` itself.
fn call_result(value: &Value) -> &Value {
    if value.get("jsonrpc").is_some() { &value["result"] } else { value }
}

/// The first text block of a tool call's result; panics with the whole value when there is none.
pub fn text(value: &Value) -> &str {
    call_result(value)["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text result in {value}"))
}

/// The machine-readable outcome (`_meta["switchyard/outcome"]`) of a tool call's result, if it has one.
pub fn outcome(value: &Value) -> Option<&str> {
    call_result(value)["_meta"][OUTCOME_META].as_str()
}

/// Polls `probe` until it says yes; panics naming `what` when it has not after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_within(PATIENCE, what, probe).await;
}

/// [`eventually`] with a deadline of `limit`.
pub async fn eventually_within<F, Fut>(limit: Duration, what: &str, probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    assert!(poll_until(limit, probe).await, "timed out after {limit:?} waiting until {what}");
}

/// Polls `probe` until it says yes or `limit` passes; whether it said yes. For callers that add their own
/// evidence (a peer's log) to the failure.
pub async fn poll_until<F, Fut>(limit: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if probe().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}
