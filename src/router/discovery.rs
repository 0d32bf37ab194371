//! Catalog discovery: each backend is discovered on its own task, so one broken backend never
//! delays or breaks the others. A backend that fails is retried with capped exponential backoff, and its tools
//! appear when it comes up; a discovered backend is refreshed every `ttl`. Between discoveries the same task
//! probes the backend's health (docs/operations.md, *Backend health*) when no exchange has ended with it, or it
//! has been down, for its `health_interval`; a failed probe starts discovery over, so a backend that returns
//! is discovered anew. A reload ends the task of a backend
//! it removes or replaces ([`spawn`] returns each task's handle) and starts one for each backend it adds or
//! replaces; a discovery always uses the backend's target in force when it starts.
//!
//! A backend's `notifications/tools/list_changed` (or prompts') is heard on whichever backend session it is sent
//! on, so on one replica of a fleet only: that replica rediscovers at once and tells the others
//! ([`CallRouter::list_announcements`], passed on by the front), which rediscover too.
//!
//! Discovery uses the gateway's own backend session per backend ([`SessionHolder::Catalog`]), never an
//! agent's: a stdio backend runs one process for discovery, never one per agent (and a backend with shared
//! sessions runs its one process for both).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{CallRouter, ToolsChanged};
use crate::backend::mcp_client::{Audience, BackendTarget, CallContext, Destination, Failure, McpError, SlotKey};
use crate::catalog::Listing;
use crate::mcp::{SessionHolder, method};

/// The agent-session key of the gateway's own discovery sessions. Agent keys are hex, so this cannot collide.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(30);

impl CallRouter {
    /// Discovers one backend's tools, prompts and resource templates once and records the result. Returns
    /// whether the tools agents see changed.
    pub async fn discover(&self, backend: &str) -> Result<bool, String> {
        let Some(target) = self.routing.load().targets.get(backend).cloned() else {
            return Err(format!("unknown backend `{backend}`"));
        };
        match self.list_everything(backend, &target).await {
            Ok(listing) => {
                // Boxed: `discover` is awaited inside `tools/list` (after an agent's authorization), so whatever
                // its future holds inline makes every request's future larger and every move of it dearer.
                let quarantine_changed = match Box::pin(self.judge_pins(backend, &listing)).await {
                    Ok(changed) => changed,
                    Err(text) => {
                        self.catalog.update(backend, Err(text.clone()));
                        return Err(text);
                    }
                };
                // Marked authorized only with the listing recorded (no await between): a `tools/list` that finds
                // the backend authorized must find its tools too.
                self.unauthorized.mark(backend, false);
                let changed = self.catalog.update(backend, Ok(listing)) || quarantine_changed;
                if changed {
                    // Nobody listening (no agent stream open) is fine.
                    let _ = self.tool_changes.send(ToolsChanged::Backend(Arc::from(backend)));
                }
                Ok(changed)
            }
            Err(error) => {
                self.ledger.metrics.discovery_failed(backend);
                self.unauthorized.mark(backend, matches!(error, McpError::AuthorizationRequired { .. }));
                let place = target.place();
                let text = Failure { backend, place: &place, error: &error, audience: Audience::Operator }.to_string();
                self.client.health().set_down(backend, text.clone());
                self.catalog.update(backend, Err(text.clone()));
                Err(text)
            }
        }
    }
}

impl CallRouter {
    /// What the backend offers, by the capabilities it declared: tools always, prompts and resource templates
    /// when it has them.
    async fn list_everything(&self, backend: &str, target: &BackendTarget) -> Result<Listing, McpError> {
        let slot = SlotKey::new(SessionHolder::Catalog, backend);
        let context = CallContext::starting_now(target);
        let to = Destination { slot: &slot, target, context: &context };
        let capabilities = self.client.session(to).await?.capabilities().clone();
        let list = |method, field| self.client.list_all(to, method, field);
        let tools = list(method::TOOLS_LIST, "tools").await?;
        let prompts = if capabilities.get("prompts").is_some() {
            list(method::PROMPTS_LIST, "prompts").await?
        } else {
            Vec::new()
        };
        let templates = if capabilities.get("resources").is_some() {
            list(method::RESOURCES_TEMPLATES_LIST, "resourceTemplates").await?
        } else {
            Vec::new()
        };
        Ok(Listing { capabilities, tools, prompts, templates })
    }
}

/// Starts the task that keeps `backend` discovered (at once, then every `ttl`, with backoff after failures) and
/// probes its health whenever it has been idle, or down, for `health_interval`. It runs until aborted.
pub fn spawn(router: &Arc<CallRouter>, backend: &str, ttl: Duration, health_interval: Duration) -> JoinHandle<()> {
    let every = Every { ttl, health_interval };
    tokio::spawn(keep_discovered(Arc::clone(router), backend.to_owned(), every))
}

/// Starts the task that rediscovers a backend when it announces `notifications/tools/list_changed` (or prompts).
/// It runs until aborted.
pub fn follow(router: &Arc<CallRouter>) -> JoinHandle<()> {
    tokio::spawn(follow_announcements(Arc::clone(router)))
}

async fn follow_announcements(router: Arc<CallRouter>) {
    let mut announcements = router.client.subscribe_list_changed();
    while let Some(change) = announcements.recv().await {
        let catalogued = [method::TOOLS_LIST_CHANGED, method::PROMPTS_LIST_CHANGED];
        if catalogued.contains(&change.method.as_str()) {
            // Nobody listening (one replica) is fine.
            let _ = router.list_announcements.send(Arc::clone(&change.backend));
            router.rediscover_announced(&change.backend).await;
        }
    }
}

impl CallRouter {
    /// The backends heard here announcing that their tools or prompts changed, from now on: what the other
    /// replicas of a fleet are told, since a backend announces a change on one backend session only.
    pub fn list_announcements(&self) -> broadcast::Receiver<Arc<str>> {
        self.list_announcements.subscribe()
    }

    /// Rediscovers `backend` after it announced that its tools or prompts changed (here, or heard by another
    /// replica of the fleet); a backend not configured here is ignored.
    pub async fn rediscover_announced(&self, backend: &str) {
        if !self.routing.load().targets.contains_key(backend) {
            return tracing::debug!(backend, "list_changed of a backend not configured here ignored");
        }
        if let Err(error) = self.discover(backend).await {
            tracing::warn!(backend, %error, "rediscovery after list_changed failed");
        }
    }
}

/// How often a backend is rediscovered and probed.
#[derive(Clone, Copy)]
struct Every {
    ttl: Duration,
    health_interval: Duration,
}

async fn keep_discovered(router: Arc<CallRouter>, backend: String, every: Every) {
    let mut retry = FIRST_RETRY;
    loop {
        match router.discover(&backend).await {
            Ok(_) => {
                retry = FIRST_RETRY;
                router.watch_health(&backend, every).await;
            }
            Err(error) => {
                let retry_in_ms = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX);
                tracing::warn!(%backend, %error, retry_in_ms, "tool discovery failed");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

impl CallRouter {
    /// Until the next discovery is due, probes `backend` each time it has been idle or down for the health
    /// interval; returns early when a probe fails, so that a backend that comes back is discovered anew.
    async fn watch_health(&self, backend: &str, every: Every) {
        let rediscover_at = Instant::now() + every.ttl;
        loop {
            let wake = (Instant::now() + every.health_interval).min(rediscover_at);
            tokio::time::sleep_until(wake).await;
            if wake == rediscover_at {
                return;
            }
            if self.client.health().needs_probe(backend, every.health_interval) && self.probe(backend).await.is_err() {
                return;
            }
        }
    }

    /// One health probe of `backend` on the gateway's own session.
    async fn probe(&self, backend: &str) -> Result<(), McpError> {
        let Some(target) = self.routing.load().targets.get(backend).cloned() else { return Ok(()) };
        let slot = SlotKey::new(SessionHolder::Catalog, backend);
        self.client
            .probe(Destination { slot: &slot, target: &target, context: &CallContext::starting_now(&target) })
            .await
    }
}
