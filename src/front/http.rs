//! Small HTTP answers shared by the front's handlers: JSON bodies and the fixed endpoints. (JSON-RPC errors
//! carried with an HTTP status are [`super::error`]'s.)

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::splice::JsonRpcReply;

pub(super) fn json(status: StatusCode, body: &(impl Serialize + ?Sized)) -> Response {
    json_text(status, serde_json::to_vec(body).unwrap_or_default())
}

/// A JSON answer whose text is already written (`text` must be one JSON value).
fn json_text(status: StatusCode, text: impl Into<axum::body::Body>) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], text.into()).into_response()
}

/// The JSON answer to a session-era request.
pub(super) fn reply(status: StatusCode, reply: JsonRpcReply) -> Response {
    match reply {
        JsonRpcReply::Tree(message) => json(status, &message),
        JsonRpcReply::Spliced { text, .. } => json_text(status, text),
    }
}

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}
