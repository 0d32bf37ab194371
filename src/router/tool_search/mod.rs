//! Search mode (`[catalog] mode = "search"`): `tools/list` offers two gateway tools, `switchyard__search_tools`
//! and `switchyard__call_tool`, plus the `always` tools and the tools a search added to the agent session
//! (docs/tool-search.md).
//!
//! Rules:
//! - A search ranks only what the caller's policies let it use in the view, quarantined tools never included
//!   (the catalog's index filters before ranking), so it neither shows nor counts a tool the caller may not call.
//! - `switchyard__call_tool` hands the named tool and its arguments, with the rest of the outer call's params
//!   (`_meta`: idempotency key, progress token; a sessionless agent's `requestState`), to [`CallRouter::call_tool`], the one path of every direct call: policy (a refused
//!   name reads as unknown), pins, limits, approvals, the ledger and outcome metadata apply as they would to the
//!   same call made directly, and the inner tool's result is the answer.
//! - The gateway tools exist only in a view in search mode; elsewhere their names are ordinary (unknown) names,
//!   and an ordinary call pays one prefix comparison for them.
//! - With `expand`, the tools a search finds join that agent session's list (at most `expand_max`, the oldest
//!   leaving first) and the session is told (`ToolsChanged::Session`); agents without sessions get no expansion.

mod answer;
mod expansion;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{CallRouter, Caller, Found, RpcFailure, ToolsChanged, View};
use crate::auth::{Grants, Principal};
use crate::glob::Glob;
use crate::mcp::{Relay, SessionHolder};
pub use answer::gateway_tools;
pub(super) use expansion::Expansions;

/// The gateway's two tools' names.
pub const SEARCH_TOOL: &str = "switchyard__search_tools";
pub const CALL_TOOL: &str = "switchyard__call_tool";
const GATEWAY_PREFIX: &str = "switchyard__";

/// The most hits one search returns, and how many when the agent does not say.
const MAX_LIMIT: u64 = 20;
const DEFAULT_LIMIT: u64 = 5;

/// How each view offers its tools (`[catalog]`, `[[backends]] catalog_mode`), lowered from the configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogModes {
    /// Whether `/mcp` is in search mode.
    pub search: bool,
    /// The backends whose own endpoint's mode is set apart from `search`: whether each is in search mode.
    pub backends: HashMap<Arc<str>, bool>,
    /// Exposed names a search-mode list shows beside the gateway's tools.
    pub always: Vec<Glob>,
    /// Whether found tools join the session's list, and how many at most.
    pub expand: bool,
    pub expand_max: usize,
}

impl CatalogModes {
    /// Whether `view` is in search mode.
    pub fn searching(&self, view: View<'_>) -> bool {
        match view {
            View::All => self.search,
            View::Backend(backend) => self.backends.get(backend).copied().unwrap_or(self.search),
        }
    }
}

/// One of the gateway's tools, by the name a `tools/call` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GatewayTool {
    Search,
    Call,
}

impl GatewayTool {
    /// The gateway tool `params.name` names, if any (whether the view offers it is the caller's question).
    pub(super) fn named(params: &Value) -> Option<GatewayTool> {
        let name = params.get("name")?.as_str()?;
        if !name.starts_with(GATEWAY_PREFIX) {
            return None;
        }
        match name {
            SEARCH_TOOL => Some(GatewayTool::Search),
            CALL_TOOL => Some(GatewayTool::Call),
            _ => None,
        }
    }
}

impl CallRouter {
    /// The tool definitions `tools/list` answers in `view`: every usable one in full mode; in search mode the
    /// gateway's tools, the usable `always` ones and the session's found ones.
    pub(super) fn listed_tools(&self, caller: &Caller, view: View<'_>, grants: &Grants<'_>) -> Vec<Value> {
        let routing = self.routing.load();
        let modes = &routing.catalog;
        if !modes.searching(view) {
            return self.catalog.usable_tools(view, |name| grants.tool(name));
        }
        let always = |name: &str| modes.always.iter().any(|glob| glob.matches(name));
        let mut tools = answer::gateway_tools();
        tools.extend(self.catalog.usable_tools(view, |name| always(name) && grants.tool(name)));
        if modes.expand {
            let found = self.expansions.names(&caller.session);
            let listed = |name: &str| tools.iter().any(|tool| tool["name"] == name);
            let shown: Vec<Value> = found
                .iter()
                .filter(|name| !listed(name))
                .filter_map(|name| self.catalog.resolve(view, name))
                .filter(|route| grants.tool(&route.exposed))
                .map(|route| match view {
                    View::All => route.definition.clone(),
                    View::Backend(_) => route.bare.clone(),
                })
                .collect();
            tools.extend(shown);
        }
        tools
    }

    /// Serves a `tools/call` of a gateway tool, in a view in search mode; elsewhere the name is an ordinary one.
    pub(super) async fn gateway_tool(
        &self,
        caller: &Caller,
        view: View<'_>,
        tool: GatewayTool,
        params: Value,
        relay: &Relay,
    ) -> Result<Found, RpcFailure> {
        if !self.routing.load().catalog.searching(view) {
            return self.call_tool(caller, view, params, relay).await;
        }
        match tool {
            GatewayTool::Search => Ok(Found::Built(self.search_tools(caller, view, &params))),
            GatewayTool::Call => match inner_call(params) {
                Ok(inner) => self.call_tool(caller, view, inner, relay).await,
                Err(refused) => Ok(Found::Built(refused)),
            },
        }
    }

    /// At most `limit` tool definitions of `view` best matching `query`, among those `principal`'s policies let
    /// it use (`None`: every tool, for the operator's `switchyard tools search`).
    pub fn find_tools(&self, principal: Option<&Principal>, view: View<'_>, query: &str, limit: usize) -> Vec<Value> {
        let routing = self.routing.load();
        let Some(principal) = principal else { return self.catalog.search_tools(view, query, limit, |_| true) };
        let grants = routing.policies.for_principal(principal);
        self.catalog.search_tools(view, query, limit, |name| grants.tool(name))
    }

    fn search_tools(&self, caller: &Caller, view: View<'_>, params: &Value) -> Value {
        let (query, limit) = match search_arguments(params.get("arguments")) {
            Ok(arguments) => arguments,
            Err(refused) => return answer::refused(&refused),
        };
        let hits = self.find_tools(Some(&caller.principal), view, query, limit);
        self.ledger.metrics.count_tool_search(!hits.is_empty());
        let routing = self.routing.load();
        let modes = &routing.catalog;
        if modes.expand && matches!(caller.session, SessionHolder::Agent(_)) {
            let names = hits.iter().filter_map(|hit| hit.get("name")?.as_str());
            if self.expansions.add(&caller.session, names, modes.expand_max) {
                // Nobody listening (no stream open) is fine.
                let _ = self.tool_changes.send(ToolsChanged::Session(caller.session.clone()));
            }
        }
        answer::found(query, &hits)
    }
}

/// The length of `value`'s JSON text, counted without keeping it (for `switchyard_tools_list_bytes`).
pub(super) fn json_size(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a tree to a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// The search's query and limit from the call's arguments.
fn search_arguments(arguments: Option<&Value>) -> Result<(&str, usize), String> {
    let query = arguments.and_then(|arguments| arguments.get("query")).and_then(Value::as_str).map(str::trim);
    let Some(query) = query.filter(|query| !query.is_empty()) else {
        return Err(format!("{SEARCH_TOOL} needs `query`: the task, in a few words (e.g. \"create a github issue\")"));
    };
    let limit = match arguments.and_then(|arguments| arguments.get("limit")) {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(limit) => limit.as_u64().filter(|limit| (1..=MAX_LIMIT).contains(limit)).ok_or_else(|| {
            format!("`limit` must be a whole number from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT}), not {limit}")
        })?,
    };
    Ok((query, usize::try_from(limit).unwrap_or(1)))
}

/// The `tools/call` params of the call `switchyard__call_tool` names: the outer params with its `name` and
/// `arguments` in place of the outer ones, so everything else the outer call carries — `_meta` (idempotency key,
/// progress token), a sessionless agent's `requestState` and `inputResponses` — covers the inner call; or the
/// refusal.
fn inner_call(mut params: Value) -> Result<Value, Value> {
    let mut arguments = match params.get_mut("arguments").map(Value::take) {
        Some(Value::Object(arguments)) => arguments,
        _ => Map::new(),
    };
    let Some(Value::String(name)) = arguments.remove("name") else {
        return Err(answer::refused(&format!(
            "{CALL_TOOL} needs `name`: a tool's name as {SEARCH_TOOL} gave it, and `arguments`: its arguments"
        )));
    };
    let inner_arguments = match arguments.remove("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(inner)) => Value::Object(inner),
        Some(_) => return Err(answer::refused(&format!("{CALL_TOOL}: `arguments` must be an object"))),
    };
    let Some(inner) = params.as_object_mut() else {
        return Err(answer::refused("tools/call params must be an object"));
    };
    inner.insert("name".into(), Value::String(name));
    inner.insert("arguments".into(), inner_arguments);
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_gateway_names_are_gateway_tools() {
        assert_eq!(GatewayTool::named(&json!({"name": SEARCH_TOOL})), Some(GatewayTool::Search));
        assert_eq!(GatewayTool::named(&json!({"name": CALL_TOOL})), Some(GatewayTool::Call));
        assert_eq!(GatewayTool::named(&json!({"name": "switchyard__other"})), None);
        assert_eq!(GatewayTool::named(&json!({"name": "demo__echo"})), None);
        assert_eq!(GatewayTool::named(&json!({})), None);
    }

    #[test]
    fn search_arguments_default_and_bound_the_limit() {
        assert_eq!(search_arguments(Some(&json!({"query": " echo "}))), Ok(("echo", 5)));
        assert_eq!(search_arguments(Some(&json!({"query": "echo", "limit": 20}))), Ok(("echo", 20)));
        for bad in [
            json!({"query": ""}),
            json!({"limit": 3}),
            json!({"query": "x", "limit": 0}),
            json!({"query": "x", "limit": 21}),
            json!({"query": "x", "limit": "5"}),
        ] {
            assert!(search_arguments(Some(&bad)).is_err(), "{bad}");
        }
        assert!(search_arguments(None).is_err());
    }

    #[test]
    fn the_inner_call_keeps_the_outer_meta_and_needs_a_name() {
        let outer = json!({"name": CALL_TOOL, "arguments": {"name": "demo__echo", "arguments": {"text": "hi"}},
                           "_meta": {"switchyard/idempotency-key": "k", "progressToken": 7}, "requestState": "s"});
        let inner = inner_call(outer).expect("valid");
        assert_eq!(
            inner,
            json!({"name": "demo__echo", "arguments": {"text": "hi"},
                   "_meta": {"switchyard/idempotency-key": "k", "progressToken": 7}, "requestState": "s"})
        );
        assert_eq!(inner_call(json!({"arguments": {"name": "x"}})).expect("valid")["arguments"], json!({}));
        for bad in [json!({}), json!({"arguments": {"name": 3}}), json!({"arguments": {"name": "x", "arguments": [1]}})]
        {
            assert_eq!(inner_call(bad.clone()).expect_err("refused")["isError"], true, "{bad}");
        }
    }
}
