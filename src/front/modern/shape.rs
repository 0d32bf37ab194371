//! What a 2026-07-28 agent is answered: the router's results and failures in that era's shape (2026-07-28 basic
//! §"Results", server/utilities/caching, server/resources §"Error Handling", basic §"Error codes").
//!
//! Rules:
//! - Every result carries `resultType` (`"complete"` unless it says otherwise) and
//!   `_meta["io.modelcontextprotocol/serverInfo"]`.
//! - Cacheable results (`server/discover`, `tools/list`, `prompts/list`, `resources/list`,
//!   `resources/templates/list`, `resources/read`) carry the gateway's own hints, never a backend's as it sent
//!   them: `cacheScope` is always `"private"` (what an agent may see is decided per principal by the policies, so no
//!   answer is fit for a shared cache), and `ttlMs` is 0 — the gateway's lists are aggregated, filtered and
//!   renamed views whose changes it announces on `subscriptions/listen` — except that `resources/read` keeps the
//!   `ttlMs` of the one backend whose content it passes through (when it is a non-negative integer).
//! - Failures lose the session era's codes: an unknown resource (`-32002`) becomes `-32602` with the URI in
//!   `data`; "URL elicitation required" (`-32042`) becomes `-32603` keeping its message and data. The HTTP status
//!   of each failure is the error table's ([`crate::front::error`]).

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use crate::front::error::modern_error_status;
use crate::front::initialize::server_info;
use crate::mcp::method::Method;
use crate::mcp::{jsonrpc, meta};
use crate::router::RpcFailure;

/// Whether complete results of `method` must carry `ttlMs` and `cacheScope`.
fn cacheable(method: &Method) -> bool {
    matches!(
        method,
        Method::ServerDiscover
            | Method::ToolsList
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead
    )
}

/// The JSON-RPC response to request `id` of `method` (asked with `params`), and its HTTP status.
pub(super) fn answer(
    id: &Value,
    method: &Method,
    params: &Value,
    answer: Result<Value, RpcFailure>,
) -> (StatusCode, Value) {
    match answer {
        Ok(found) => (StatusCode::OK, jsonrpc::result(id, result(method, found))),
        Err(failure) => {
            let failure = era_failure(failure, params);
            (modern_error_status(failure.code), failure.into_message(id))
        }
    }
}

/// A result in the era's shape (see the module rules).
pub(super) fn result(method: &Method, mut result: Value) -> Value {
    let Some(object) = result.as_object_mut() else {
        return result;
    };
    object.entry("resultType").or_insert_with(|| json!("complete"));
    let complete = object.get("resultType").and_then(Value::as_str) == Some("complete");
    if complete && cacheable(method) {
        let backend_ttl = object.get("ttlMs").and_then(Value::as_u64).filter(|_| *method == Method::ResourcesRead);
        object.insert("ttlMs".into(), json!(backend_ttl.unwrap_or(0)));
        object.insert("cacheScope".into(), json!("private"));
    }
    with_server_info(object);
    result
}

fn with_server_info(object: &mut Map<String, Value>) {
    let result_meta = object.entry("_meta").or_insert_with(|| json!({}));
    if let Some(result_meta) = result_meta.as_object_mut() {
        result_meta.insert(meta::SERVER_INFO.into(), server_info());
    }
}

/// A failure in the era's codes (see the module rules).
fn era_failure(mut failure: RpcFailure, params: &Value) -> RpcFailure {
    match failure.code {
        jsonrpc::RESOURCE_NOT_FOUND => {
            failure.code = jsonrpc::INVALID_PARAMS;
            let uri = params.get("uri").cloned().unwrap_or(Value::Null);
            match failure.data.as_mut().and_then(Value::as_object_mut) {
                Some(data) => drop(data.entry("uri").or_insert(uri)),
                None => failure.data = Some(json!({"uri": uri})),
            }
        }
        jsonrpc::URL_ELICITATION_REQUIRED => failure.code = jsonrpc::INTERNAL_ERROR,
        _ => {}
    }
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_get_a_result_type_server_info_and_the_gateways_caching_hints() {
        let listed = result(&Method::ToolsList, json!({"tools": [], "ttlMs": 60000, "cacheScope": "public"}));
        assert_eq!(listed["resultType"], "complete");
        assert_eq!((listed["ttlMs"].clone(), listed["cacheScope"].clone()), (json!(0), json!("private")));
        assert_eq!(listed["_meta"][meta::SERVER_INFO]["name"], "switchyard");
        let read = result(&Method::ResourcesRead, json!({"contents": [], "ttlMs": 5000, "cacheScope": "public"}));
        assert_eq!((read["ttlMs"].clone(), read["cacheScope"].clone()), (json!(5000), json!("private")));
        let called = result(&Method::ToolsCall, json!({"content": [], "_meta": {"switchyard/replayed": true}}));
        assert!(called.get("ttlMs").is_none(), "a tool result is not cacheable");
        assert_eq!(called["_meta"]["switchyard/replayed"], true, "the result's own _meta is kept");
        let asking = result(&Method::ResourcesRead, json!({"resultType": "input_required", "requestState": "s"}));
        assert!(asking.get("ttlMs").is_none(), "an input_required result carries no caching hints");
    }

    #[test]
    fn session_era_codes_are_translated_and_statuses_follow_the_code() {
        let params = json!({"uri": "file:///missing"});
        let missing = RpcFailure::new(jsonrpc::RESOURCE_NOT_FOUND, "no backend offers the resource");
        let (status, message) = answer(&json!(4), &Method::ResourcesRead, &params, Err(missing));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(message["error"]["code"], jsonrpc::INVALID_PARAMS);
        assert_eq!(message["error"]["data"]["uri"], "file:///missing");
        assert_eq!(message["id"], 4);
        let capability = RpcFailure::new(jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY, "needs sampling");
        let (status, _) = answer(&json!(5), &Method::ToolsCall, &params, Err(capability));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let elicit = RpcFailure::new(jsonrpc::URL_ELICITATION_REQUIRED, "authorize first");
        let (_, message) = answer(&json!(6), &Method::ToolsCall, &params, Err(elicit));
        assert_eq!(message["error"]["code"], jsonrpc::INTERNAL_ERROR);
    }
}
