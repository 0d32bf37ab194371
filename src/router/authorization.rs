//! How an agent learns that a backend protected by OAuth (`[backends.oauth]`, `authorization_code`) needs its
//! principal's authorization (MCP 2025-11-25
//! `client/elicitation.mdx` URL mode).
//!
//! Rules:
//! - The call is not sent (the backend client answers [`McpError::AuthorizationRequired`], which releases the
//!   claim): the agent is told it is safe to retry once the user has authorized.
//! - An agent that declared `elicitation.url` gets the JSON-RPC error `-32042` (URL elicitation required) whose
//!   `data.elicitations` holds one URL-mode elicitation per authorization URL; any other agent gets the URL in a
//!   sentence (an `isError` result for `tools/call`; `_meta["switchyard/authorization"]` on `tools/list`).
//! - A backend nobody has authorized yet has no catalog entry; an agent's `tools/list` then asks that backend on
//!   the agent's own session: its principal either already holds a token (the backend is discovered at once with
//!   it) or is handed the authorization URL. Only backends the caller's policies may grant a tool of are asked
//!   (judged by the backend's prefix, its tools being unknown): a principal granted nothing makes no
//!   authorization wait, and learns of no backend it could not use.
//! - Those probes run in parallel, each as its own task, and `tools/list` waits for them at most
//!   [`PROBE_DEADLINE`] in all: a backend (or its authorization server) that hangs delays no list by more, and
//!   a probe still running then finishes in the background, so the OAuth client can remember its failure
//!   (`backend/oauth/backoff.rs`) for the next list.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{CallRouter, Caller, RpcFailure};
use crate::backend::mcp_client::{Destination, McpError};
use crate::catalog::View;
use crate::mcp::{Relay, jsonrpc, method};

/// Where `tools/list` names the authorization URLs for agents without URL-mode elicitation.
pub const AUTHORIZATION_META: &str = "switchyard/authorization";
/// How long `tools/list` waits for the probes of unauthorized backends, all together.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// The backends whose last discovery found that nobody has authorized them.
#[derive(Debug, Default)]
pub(super) struct Unauthorized(Mutex<HashSet<Arc<str>>>);

impl Unauthorized {
    /// Forgets the backends `keep` refuses (a reload removed them).
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.0.lock().retain(|backend| keep(backend));
    }

    pub(super) fn mark(&self, backend: &str, unauthorized: bool) {
        let mut set = self.0.lock();
        if unauthorized {
            set.insert(backend.into());
        } else {
            set.remove(backend);
        }
    }

    fn backends(&self) -> Vec<Arc<str>> {
        self.0.lock().iter().cloned().collect()
    }
}

/// One authorization the agent's user must give.
#[derive(Debug, Clone)]
pub(super) struct Needed {
    pub(super) backend: String,
    pub(super) url: String,
}

impl Needed {
    pub(super) fn of(error: &McpError) -> Option<Needed> {
        match error {
            McpError::AuthorizationRequired { backend, url: Some(url) } => {
                Some(Needed { backend: backend.clone(), url: url.clone() })
            }
            _ => None,
        }
    }
}

/// Whether the agent declared URL-mode elicitation (`capabilities.elicitation.url`).
pub(super) fn declares_url_elicitation(capabilities: &Value) -> bool {
    capabilities.pointer("/elicitation/url").is_some_and(Value::is_object)
}

/// The `-32042` error naming every authorization URL.
pub(super) fn url_elicitation_required(needed: &[Needed]) -> RpcFailure {
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    let elicitations: Vec<Value> = needed
        .iter()
        .map(|needed| {
            json!({
                "mode": "url",
                "elicitationId": format!("switchyard-authorize-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)),
                "url": needed.url,
                "message": format!("Authorize access to the backend `{}`, then retry the request; it was not sent.", needed.backend),
            })
        })
        .collect();
    let backends: Vec<&str> = needed.iter().map(|needed| needed.backend.as_str()).collect();
    RpcFailure {
        code: jsonrpc::URL_ELICITATION_REQUIRED,
        message: format!(
            "Authorization required for backend(s) {}: open the URL, authorize, then retry; the request was not sent.",
            backends.join(", ")
        ),
        data: Some(json!({ "elicitations": elicitations, super::OUTCOME_META: "not_delivered" })),
    }
}

impl CallRouter {
    /// `tools/list`: the catalog's tools, after asking every backend nobody has authorized yet on the caller's
    /// behalf (see the module rules).
    pub(super) async fn list_tools(&self, caller: &Caller, view: View<'_>, relay: &Relay) -> Result<Value, RpcFailure> {
        let routing = self.routing.load();
        let grants = routing.grants(caller);
        let unauthorized = self
            .unauthorized
            .backends()
            .into_iter()
            .filter(|backend| view.shows(backend))
            .filter(|backend| self.catalog.prefix(backend).is_some_and(|prefix| grants.some_name_under(&prefix)))
            .collect();
        let needed = self.probe_all(caller, unauthorized).await;
        let mut answer = json!({ "tools": self.listed_tools(caller, view, &grants) });
        if needed.is_empty() {
            return Ok(answer);
        }
        if declares_url_elicitation(relay.capabilities()) {
            return Err(url_elicitation_required(&needed));
        }
        let urls: Vec<Value> = needed.iter().map(|need| json!({"backend": need.backend, "url": need.url})).collect();
        answer["_meta"] = json!({ AUTHORIZATION_META: urls });
        Ok(answer)
    }

    /// Lists each unauthorized backend as `caller`, in parallel, until [`PROBE_DEADLINE`]: the authorization
    /// URLs its principal must open; a backend it may already use is discovered now.
    async fn probe_all(&self, caller: &Caller, backends: Vec<Arc<str>>) -> Vec<Needed> {
        let deadline = Instant::now() + PROBE_DEADLINE;
        let routing = self.routing.load();
        let mut probes = JoinSet::new();
        for backend in backends {
            let Some(target) = routing.targets.get(&backend) else { continue };
            let (slot, context) = caller.on_backend(&backend, target);
            let (client, target) = (Arc::clone(&self.client), target.clone());
            probes.spawn(async move {
                let to = Destination { slot: &slot, target: &target, context: &context };
                let answer = client.request(to, method::TOOLS_LIST, Value::Null).await;
                (backend, answer)
            });
        }
        let mut needed = Vec::new();
        let mut usable = Vec::new();
        while let Ok(Some(joined)) = tokio::time::timeout_at(deadline, probes.join_next()).await {
            match joined {
                Ok((backend, Ok(_))) => usable.push(backend),
                Ok((backend, Err(error))) => match Needed::of(&error) {
                    Some(need) => needed.push(need),
                    None => {
                        tracing::info!(%backend, %error, "an unauthorized backend could not be listed for an agent");
                    }
                },
                Err(error) => tracing::warn!(%error, "a probe of an unauthorized backend failed"),
            }
        }
        if !probes.is_empty() {
            tracing::info!(
                running = probes.len(),
                "unauthorized backends did not answer in time; listing without them"
            );
            probes.detach_all();
        }
        for backend in usable {
            if let Err(error) = self.discover(&backend).await {
                tracing::warn!(%backend, %error, "discovery after an agent's authorization failed");
            }
        }
        needed
    }
}
