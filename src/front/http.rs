//! Small HTTP answers shared by the front's handlers: JSON bodies, JSON-RPC errors carried with an HTTP status,
//! and the fixed endpoints.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::mcp::jsonrpc;

pub(super) fn json(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response()
}

/// A JSON-RPC error as the body of an HTTP error (MCP transports: the body of a refused message MAY be a
/// JSON-RPC error with no id).
pub(super) fn error(status: StatusCode, id: Option<&Value>, code: i64, message: &str) -> Response {
    json(status, &jsonrpc::error(id, code, message))
}

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}
