//! The access record of every request of the MCP endpoint: a `telemetry::RequestRecord` is
//! started before the extractors run, handed to them and to the router through the request's extensions, and
//! given the answer's status; it writes the access line once the request is done.
//!
//! Rules: every `POST`, `GET` and `DELETE` of `/mcp` and `/mcp/{backend}` gets one record, refused ones included
//! (a refusal's JSON-RPC code travels from [`super::error`] as a response extension, [`RefusedWith`]); nothing
//! of the request's headers or body is copied into it but the principal's name, the session's id and labels.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Front;
use crate::telemetry::RequestRecord;

/// The JSON-RPC code of an error answer of the front, for its record.
#[derive(Clone, Copy)]
pub(super) struct RefusedWith(pub(super) i64);

/// Wraps one request of the MCP endpoint in its record, and gives a browser page's answer its CORS headers
/// ([`super::cors`]).
pub(super) async fn record(State(front): State<Arc<Front>>, mut request: Request, next: Next) -> Response {
    let verb = match *request.method() {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        _ => "other",
    };
    let record = RequestRecord::start(Arc::clone(&front.metrics), verb);
    request.extensions_mut().insert(Arc::clone(&record));
    let origin = request.headers().get(header::ORIGIN).cloned();
    let mut response = next.run(request).await;
    if let Some(RefusedWith(code)) = response.extensions().get::<RefusedWith>() {
        record.refused(*code);
    }
    record.responded(response.status().as_u16());
    super::cors::expose_to(&front, origin, &mut response);
    front.stopping.mark(&mut response);
    response
}

/// The request's record (one that reports nothing outside the MCP endpoint's routes).
pub(super) fn of(parts: &Parts) -> Arc<RequestRecord> {
    parts.extensions.get::<Arc<RequestRecord>>().cloned().unwrap_or_else(RequestRecord::unrecorded)
}
