//! Small HTTP answers shared by the front's handlers: JSON bodies and the fixed endpoints. (JSON-RPC errors
//! carried with an HTTP status are [`super::error`]'s.)

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

pub(super) fn json(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response()
}

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}
