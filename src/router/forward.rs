//! Everything an agent asks besides tools: prompts, resources, completions and
//! logging, forwarded on the agent's own backend sessions.
//!
//! Rules: `prompts/get` goes to the backend whose prompt the name denotes (bare name on the wire);
//! `resources/list` and `resources/templates/list` are aggregated live across the backends in view, one backend
//! page per gateway page, with an opaque gateway cursor naming (backend, backend cursor); a resource URI is routed
//! to the backend that listed it, else to the one whose template matches it, else to the only backend with
//! resources; an empty page is always the last (empty backend pages are skipped, at most [`MAX_EMPTY_PAGES`] per
//! gateway page); `completion/complete` follows its `ref` (a prompt or a resource); `logging/setLevel` is sent to
//! every backend in view that declared logging and on which the caller's policy grants something (a tool, a prompt
//! or its resources). A backend that cannot be reached while listing is skipped, not
//! fatal. These requests run no tools, so the ledger is not involved. A prompt, or a backend's resources, the
//! caller's policy does not grant are left out of lists and answered like unknown ones (the router's rule). A
//! session-era caller gets a 2026-07-28-era backend's results without `resultType`, which its revision lacks.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::outcome::Report;
use super::request_state::CallIdentity;
use super::{CallRouter, Caller, RpcFailure, View, continuation, no_longer_configured, usable};
use crate::auth::Grants;
use crate::backend::mcp_client::{Destination, McpError};
use crate::mcp::jsonrpc;
use crate::mcp::method::{self, Method};
use crate::mcp::modern::without_result_type;
use crate::mcp::{Relay, RelayMessage, SessionHolder, SessionMessage};

/// How many empty backend pages one gateway page reads past before it ends the listing: an empty page that names
/// a next one would make an agent ask again for nothing, so only a non-empty page carries a `nextCursor`.
const MAX_EMPTY_PAGES: usize = 32;

/// Bound of the URI → backend map; it is cleared when full (it only remembers who listed what).
const MAX_REMEMBERED_URIS: usize = 100_000;

/// Which backend listed which resource URI.
#[derive(Default)]
pub(super) struct ResourceOwners(Mutex<HashMap<String, Arc<str>>>);

impl ResourceOwners {
    fn remember(&self, backend: &Arc<str>, resources: &[Value]) {
        let mut owners = self.0.lock();
        if owners.len() + resources.len() > MAX_REMEMBERED_URIS {
            owners.clear();
        }
        for uri in resources.iter().filter_map(|resource| resource.get("uri")?.as_str()) {
            owners.insert(uri.to_owned(), Arc::clone(backend));
        }
    }

    fn owner(&self, uri: &str) -> Option<Arc<str>> {
        self.0.lock().get(uri).cloned()
    }

    /// Forgets the URIs of backends `keep` refuses (a reload removed them).
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.0.lock().retain(|_, backend| keep(backend));
    }
}

/// Where a paginated aggregate continues: the index of a backend in the view, and that backend's cursor.
#[derive(Debug, PartialEq)]
pub(super) struct GatewayCursor {
    pub(super) backend: usize,
    pub(super) cursor: Option<Value>,
}

impl GatewayCursor {
    pub(super) fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(json!({"b": self.backend, "c": self.cursor}).to_string())
    }

    pub(super) fn decode(text: &str) -> Option<GatewayCursor> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let value: Value = serde_json::from_slice(&bytes).ok()?;
        let backend = usize::try_from(value.get("b")?.as_u64()?).ok()?;
        let cursor = value.get("c").filter(|cursor| !cursor.is_null()).cloned();
        Some(GatewayCursor { backend, cursor })
    }
}

impl CallRouter {
    /// Sends one request to one backend on the caller's backend session.
    pub(super) async fn forward(
        &self,
        caller: &Caller,
        backend: &Arc<str>,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        let Some(target) = self.routing.load().targets.get(backend).cloned() else {
            return Err(RpcFailure::new(jsonrpc::INVALID_PARAMS, no_longer_configured("request", method, backend)));
        };
        let (slot, context) = caller.on_backend(backend, &target);
        self.request_in_rounds(Destination { slot: &slot, target: &target, context: &context }, method, params, relay)
            .await
            .map_err(|error| match error {
                McpError::Rpc { code, message, data } => RpcFailure { code, message, data },
                other => {
                    let report = Report { backend, target: &target, audience: caller.audience };
                    RpcFailure::new(jsonrpc::INTERNAL_ERROR, report.sentence(&other))
                }
            })
            // Prompts, resources and completions are read or rewritten above: a tree.
            .and_then(|relayed| continuation::refuse_elsewhere(backend, method, relayed.result.to_value()))
            .map(|result| match caller.sessionless || continuation::asks_input(&result) {
                true => result,
                false => without_result_type(result),
            })
    }

    pub(super) async fn get_prompt(
        &self,
        caller: &Caller,
        view: View<'_>,
        mut params: Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let routing = self.routing.load();
        let grants = routing.grants(caller);
        let route = self
            .catalog
            .resolve_prompt(view, &name)
            .filter(|route| usable(&grants, caller, "prompt", route, Grants::prompt));
        let Some(route) = route else {
            let held = self.catalog.quarantined_prompt(view, &name);
            return Err(match held.filter(|route| usable(&grants, caller, "prompt", route, Grants::prompt)) {
                Some(route) => super::pins::refusal("prompt", &name, &route),
                None => RpcFailure::new(jsonrpc::INVALID_PARAMS, format!("unknown prompt `{name}`; call prompts/list")),
            });
        };
        let call = CallIdentity::of(caller, &route.backend, method::PROMPTS_GET, &name, params.get("arguments"));
        self.continued(&call, &mut params)?;
        params["name"] = Value::String(route.name.clone());
        let result = self.forward(caller, &route.backend, method::PROMPTS_GET, params, relay).await?;
        Ok(self.pass_input(caller, &call, result))
    }

    /// `resources/list` (`field` = "resources") or `resources/templates/list` ("resourceTemplates").
    pub(super) async fn list_resources(
        &self,
        caller: &Caller,
        view: View<'_>,
        method: &Method,
        field: &str,
        params: &Value,
    ) -> Result<Value, RpcFailure> {
        let mut backends = self.catalog.backends_with(view, "resources");
        let routing = self.routing.load();
        let grants = routing.grants(caller);
        backends.retain(|backend| grants.backend_resources(backend));
        let mut position = match params.get("cursor").and_then(Value::as_str) {
            None => GatewayCursor { backend: 0, cursor: None },
            Some(text) => GatewayCursor::decode(text)
                .filter(|cursor| cursor.backend < backends.len())
                .ok_or_else(|| RpcFailure::new(jsonrpc::INVALID_PARAMS, "invalid cursor"))?,
        };
        let mut empty_pages = 0;
        while let Some(backend) = backends.get(position.backend) {
            let params = position.cursor.take().map_or(Value::Null, |cursor| json!({"cursor": cursor}));
            match self.forward(caller, backend, method.as_str(), params, &Relay::default()).await {
                Ok(mut page) => {
                    let mut items = match page.get_mut(field).map(Value::take) {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    };
                    let member = if field == "resources" { "uri" } else { "uriTemplate" };
                    self.expose_uris(backend, items.iter_mut().filter_map(|item| item.get_mut(member)));
                    self.resource_owners.remember(backend, &items);
                    let next = match page.get("nextCursor").filter(|next| next.is_string()) {
                        Some(next) => Some(GatewayCursor { backend: position.backend, cursor: Some(next.clone()) }),
                        None => Some(GatewayCursor { backend: position.backend + 1, cursor: None })
                            .filter(|next| next.backend < backends.len()),
                    };
                    if items.is_empty()
                        && let Some(next) = next
                    {
                        if empty_pages < MAX_EMPTY_PAGES {
                            empty_pages += 1;
                            position = next;
                            continue;
                        }
                        tracing::warn!(%backend, "{}: too many empty pages in a row; listing ended", method.as_str());
                        return Ok(json!({ field: items }));
                    }
                    let mut answer = json!({ field: items });
                    if let Some(next) = next {
                        answer["nextCursor"] = Value::String(next.encode());
                    }
                    return Ok(answer);
                }
                Err(failure) => {
                    tracing::warn!(%backend, error = %failure.message, "{}: backend skipped", method.as_str());
                    position = GatewayCursor { backend: position.backend + 1, cursor: None };
                }
            }
        }
        Ok(json!({ field: [] }))
    }

    /// `resources/read`, `resources/subscribe`, `resources/unsubscribe`: routed by `params.uri`.
    pub(super) async fn resource_request(
        &self,
        caller: &Caller,
        view: View<'_>,
        method: &Method,
        mut params: Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
        let (backend, backend_uri) = self.resource_owner(caller, view, &uri)?;
        let call = CallIdentity::of(caller, &backend, method.as_str(), &uri, None);
        if *method == Method::ResourcesRead {
            self.continued(&call, &mut params)?;
        }
        params["uri"] = Value::String(backend_uri);
        let mut result = self.forward(caller, &backend, method.as_str(), params, relay).await?;
        if let Some(Value::Array(contents)) = result.get_mut("contents") {
            self.expose_uris(&backend, contents.iter_mut().filter_map(|content| content.get_mut("uri")));
        }
        Ok(self.pass_input(caller, &call, result))
    }

    /// Puts the backend's resource prefix (if any) in front of URIs it sent.
    fn expose_uris<'v>(&self, backend: &str, uris: impl Iterator<Item = &'v mut Value>) {
        let Some(prefix) = self.catalog.resource_prefix(backend) else { return };
        for uri in uris {
            if let Value::String(text) = uri {
                text.insert_str(0, &prefix);
            }
        }
    }

    /// Rewrites what a backend sends an agent outside a call so it names resources and tasks as the agent knows
    /// them; false when the agent is not to see it.
    fn expose_to_agent(&self, holder: &SessionHolder, backend: &Arc<str>, message: &mut Value) -> bool {
        match message.get("method").and_then(Value::as_str) {
            Some(method::RESOURCES_UPDATED) => {
                self.expose_uris(backend, message.pointer_mut("/params/uri").into_iter());
            }
            Some(method::TASKS_STATUS) => return self.expose_task_status(holder, backend, message),
            _ => {}
        }
        true
    }

    /// The backend a resource URI goes to, and the URI as that backend knows it: by resource prefix, else the
    /// backend that listed it, else the one whose template matches, else the only backend with resources. Only
    /// backends whose resources the caller is granted are candidates; a URI of another is logged and unknown.
    fn resource_owner(&self, caller: &Caller, view: View<'_>, uri: &str) -> Result<(Arc<str>, String), RpcFailure> {
        let routing = self.routing.load();
        let grants = routing.grants(caller);
        let granted = |backend: &Arc<str>| grants.backend_resources(backend);
        let unknown =
            || RpcFailure::new(jsonrpc::RESOURCE_NOT_FOUND, format!("no backend offers the resource `{uri}`"));
        if let Some((backend, rest)) = self.catalog.split_resource_prefix(view, uri) {
            if !granted(&backend) {
                tracing::warn!(principal = %caller.principal.name, %backend, uri, "resource refused by policy");
                return Err(unknown());
            }
            return Ok((backend, rest.to_owned()));
        }
        let unprefixed = |backend: &Arc<str>| self.catalog.resource_prefix(backend).is_none();
        let listed = self.resource_owners.owner(uri).filter(|owner| view.shows(owner) && unprefixed(owner));
        if let Some(owner) = listed.filter(granted) {
            return Ok((owner, uri.to_owned()));
        }
        let mut candidates = self.catalog.template_owners(view, uri);
        candidates.retain(granted);
        if candidates.is_empty() {
            candidates = self.catalog.backends_with(view, "resources");
            candidates.retain(|backend| unprefixed(backend) && granted(backend));
        }
        match candidates.as_slice() {
            [only] => Ok((Arc::clone(only), uri.to_owned())),
            [] => {
                tracing::warn!(principal = %caller.principal.name, uri, "no granted backend offers the resource");
                Err(unknown())
            }
            several => {
                let names: Vec<&str> = several.iter().map(|name| &**name).collect();
                Err(RpcFailure::new(
                    jsonrpc::RESOURCE_NOT_FOUND,
                    format!(
                        "the resource `{uri}` is ambiguous between backends {}; list resources first, or configure `resource_prefix`",
                        names.join(", ")
                    ),
                ))
            }
        }
    }

    pub(super) async fn complete(
        &self,
        caller: &Caller,
        view: View<'_>,
        mut params: Value,
        relay: &Relay,
    ) -> Result<Value, RpcFailure> {
        let reference = params.get("ref").cloned().unwrap_or_default();
        let backend = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
                let routing = self.routing.load();
                let grants = routing.grants(caller);
                let route = self
                    .catalog
                    .resolve_prompt(view, name)
                    .filter(|route| usable(&grants, caller, "prompt", route, Grants::prompt))
                    .ok_or_else(|| RpcFailure::new(jsonrpc::INVALID_PARAMS, format!("unknown prompt `{name}`")))?;
                params["ref"]["name"] = Value::String(route.name.clone());
                Arc::clone(&route.backend)
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default();
                let (backend, backend_uri) = self.resource_owner(caller, view, uri)?;
                params["ref"]["uri"] = Value::String(backend_uri);
                backend
            }
            _ => {
                return Err(RpcFailure::new(
                    jsonrpc::INVALID_PARAMS,
                    "completion/complete needs a ref/prompt or ref/resource",
                ));
            }
        };
        self.forward(caller, &backend, method::COMPLETION_COMPLETE, params, relay).await
    }

    /// Sets the level on every backend in view that declared logging and grants the caller something; the agent
    /// gets `{}` once all answered.
    pub(super) async fn set_level(&self, caller: &Caller, view: View<'_>, params: Value) -> Result<Value, RpcFailure> {
        let granted: Vec<Arc<str>> = {
            let routing = self.routing.load();
            let grants = routing.grants(caller);
            let logging = self.catalog.backends_with(view, "logging");
            logging.into_iter().filter(|backend| self.grants_something(&grants, backend)).collect()
        };
        for backend in granted {
            if let Err(failure) =
                self.forward(caller, &backend, method::LOGGING_SET_LEVEL, params.clone(), &Relay::default()).await
            {
                tracing::warn!(%backend, error = %failure.message, "logging/setLevel not applied");
            }
        }
        Ok(json!({}))
    }

    /// Whether `grants` give anything on `backend` (one of its tools or prompts, or its resources): a backend the
    /// caller may use nothing of is not asked anything on its behalf, so no session of the caller's is opened there.
    pub(super) fn grants_something(&self, grants: &Grants<'_>, backend: &str) -> bool {
        let only = View::Backend(backend);
        grants.backend_resources(backend)
            || !self.catalog.usable_tools(only, |name| grants.tool(name)).is_empty()
            || !self.catalog.usable_prompts(only, |name| grants.prompt(name)).is_empty()
    }
}

/// What backends send on the standalone streams of agents' backend sessions, already rewritten to name resources
/// as the agents know them ([`CallRouter::session_messages`]).
pub struct SessionMessages {
    router: Arc<CallRouter>,
    raw: mpsc::UnboundedReceiver<SessionMessage>,
}

impl SessionMessages {
    /// The next message for an agent; `None` once the backend client is gone.
    pub async fn recv(&mut self) -> Option<SessionMessage> {
        loop {
            let mut message = self.raw.recv().await?;
            let shown = match &mut message.message {
                RelayMessage::Notification(note) => {
                    self.router.expose_to_agent(&message.holder, &message.backend, note)
                }
                _ => true,
            };
            if shown {
                return Some(message);
            }
        }
    }
}

impl CallRouter {
    /// What backends send on the standalone streams of agents' backend sessions, for the agents. One subscriber
    /// at a time; subscribing again replaces it.
    pub fn session_messages(self: &Arc<Self>) -> SessionMessages {
        SessionMessages { router: Arc::clone(self), raw: self.client.subscribe_session_messages() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let cursor = GatewayCursor { backend: 2, cursor: Some(json!("page-3")) };
        assert_eq!(GatewayCursor::decode(&cursor.encode()), Some(cursor));
        assert_eq!(GatewayCursor::decode("not a cursor"), None);
        assert_eq!(GatewayCursor::decode(&URL_SAFE_NO_PAD.encode("{\"b\": -1}")), None);
    }
}
