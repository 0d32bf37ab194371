//! The params the gateway's own requests carry on every transport: `initialize`'s (MCP 2025-11-25
//! `basic/lifecycle.mdx`: the latest version it speaks, the agent's declared client capabilities as its own, and its
//! client info), the `_meta` members every 2026-07-28 request carries (MCP 2026-07-28 §2), and what a
//! `subscriptions/listen` request asks for.
//!
//! Rules: the gateway declares no capability the agent did not (a shared session or the gateway's own: none). Pure
//! functions of JSON: every transport uses them, so this file imports nothing of the backend client.

use serde_json::{Map, Value, json};

use crate::mcp::LATEST_PROTOCOL_VERSION;
use crate::mcp::meta::{
    CLIENT_CAPABILITIES as META_CLIENT_CAPABILITIES, CLIENT_INFO as META_CLIENT_INFO, LOG_LEVEL as META_LOG_LEVEL,
    PROTOCOL_VERSION as META_PROTOCOL_VERSION,
};

/// The `initialize` params the gateway sends on every transport; `capabilities` are the agent's declared client
/// capabilities (`null`: none), offered as the gateway's own.
pub(crate) fn initialize_params(capabilities: &Value) -> Value {
    let capabilities = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    json!({
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `params` with the `_meta` members every modern request carries; `capabilities` of `null` declare none.
pub(crate) fn request_params(
    params: Option<Value>,
    version: &str,
    capabilities: &Value,
    log_level: Option<Value>,
) -> Value {
    let mut params = match params {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let capabilities = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    if let Value::Object(meta) = meta {
        meta.insert(META_PROTOCOL_VERSION.into(), json!(version));
        meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities);
        meta.insert(META_CLIENT_INFO.into(), json!({"name": "switchyard", "version": env!("CARGO_PKG_VERSION")}));
        if let Some(level) = log_level {
            meta.insert(META_LOG_LEVEL.into(), level);
        }
    }
    Value::Object(params)
}

/// What a `subscriptions/listen` request asks for: the changes of those `lists` ("tools", "prompts",
/// "resources") whose `listChanged` the backend's `capabilities` announce, and updates of the resources `uris`.
pub(crate) fn listen_interests(capabilities: &Value, lists: &[&str], uris: &[String]) -> Map<String, Value> {
    let announced = |list: &str| capabilities.get(list).and_then(|list| list.get("listChanged")) == Some(&json!(true));
    let mut interests: Map<String, Value> =
        lists.iter().filter(|list| announced(list)).map(|list| (format!("{list}ListChanged"), json!(true))).collect();
    if !uris.is_empty() {
        interests.insert("resourceSubscriptions".into(), json!(uris));
    }
    interests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_members_are_added_and_the_callers_kept() {
        let params =
            json!({"name": "t", "_meta": {"progressToken": 7, "io.modelcontextprotocol/protocolVersion": "x"}});
        let params = request_params(Some(params), "2026-07-28", &json!({"elicitation": {}}), Some(json!("debug")));
        let meta = &params["_meta"];
        assert_eq!(meta["progressToken"], 7, "the caller's token stays");
        assert_eq!(meta[META_PROTOCOL_VERSION], "2026-07-28", "the backend's version, not the caller's");
        assert_eq!(meta[META_CLIENT_CAPABILITIES], json!({"elicitation": {}}));
        assert_eq!(meta[META_CLIENT_INFO]["name"], "switchyard");
        assert_eq!(meta[META_LOG_LEVEL], "debug");
        let bare = request_params(None, "2026-07-28", &Value::Null, None);
        assert_eq!(bare["_meta"][META_CLIENT_CAPABILITIES], json!({}), "no capabilities is an empty object");
        assert!(bare["_meta"].get(META_LOG_LEVEL).is_none());
    }

    #[test]
    fn listen_asks_for_the_announced_lists_and_the_subscribed_resources() {
        let capabilities = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": false}, "resources": {}});
        let asked = listen_interests(&capabilities, &["tools", "prompts", "resources"], &[]);
        assert_eq!(Value::Object(asked), json!({"toolsListChanged": true}));
        let asked = listen_interests(&json!({"resources": {"listChanged": true}}), &["resources"], &["a://b".into()]);
        assert_eq!(Value::Object(asked), json!({"resourcesListChanged": true, "resourceSubscriptions": ["a://b"]}));
        assert!(listen_interests(&json!({"tools": {}}), &["tools"], &[]).is_empty());
    }
}
