//! How the router asks the limits about one request, and what it answers when they refuse: a tool call gets a
//! tool result (`isError`, `_meta["switchyard/outcome"] = "not_delivered"`, `_meta["switchyard/retry-after"]`),
//! counted as `limited`; any other request the [`Refusal`] itself, which the front answers with HTTP 429.
//!
//! Rules: callers enter only when a limit counts the request ([`Limits::is_empty`], [`Limits::count_every_request`]),
//! so an unlimited one computes nothing (not even the principal's key); every refusal is counted
//! in `switchyard_limit_refusals_total` by the limit's label and logged with the principal.

use serde_json::Value;

use super::{Held, Limits, Refusal, Request};
use crate::catalog::Route;
use crate::router::{Caller, outcome};
use crate::telemetry::ToolOutcome;

/// Admits `caller`'s call of `route`, or answers the refusal as the call's result.
pub async fn admit_call(
    limits: &Limits,
    caller: &Caller,
    route: &Route,
    arguments: Option<&Value>,
) -> Result<Held, Value> {
    let key = caller.fairness_key();
    let request = Request { principal: &caller.principal, key: &key, tool: Some((&route.exposed, &route.backend)) };
    limits.admit(&request, arguments).await.map_err(|refusal| {
        counted(caller, &refusal);
        caller.record.tool_outcome(ToolOutcome::Limited);
        outcome::limited(&refusal.to_string(), refusal.retry_after)
    })
}

/// Admits a request other than a tool call by the limits that count every request (`methods = ["*"]`).
pub async fn admit_request(limits: &Limits, caller: &Caller) -> Result<Held, Refusal> {
    let key = caller.fairness_key();
    let request = Request { principal: &caller.principal, key: &key, tool: None };
    limits.admit(&request, None).await.inspect_err(|refusal| counted(caller, refusal))
}

fn counted(caller: &Caller, refusal: &Refusal) {
    tracing::info!(principal = %caller.principal.name, limit = %refusal.label, "refused by a limit");
    caller.record.limit_refused(&refusal.label);
}
