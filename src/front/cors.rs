//! Cross-origin access for agents running in a browser page (Fetch standard §"CORS protocol"; MCP 2025-11-25
//! transports §"Security Warning"): the preflight (`OPTIONS`) of the MCP endpoint and of the metadata documents,
//! and the `Access-Control-*` headers of every answer those routes give an admitted origin.
//!
//! Rules:
//! - An origin is admitted by [`Admission`]'s rule, the one every request of the endpoint passes (loopback pages,
//!   `allowed_origins`); a preflight from any other origin (or to a `Host` that rule refuses) is 403, as the
//!   request itself would be.
//! - A preflight is 204 with `Access-Control-Allow-Origin: <the origin>` (never `*`, so `cors_credentials` can
//!   work), the route's methods, the request headers agents send — both eras' MCP headers, `Authorization`,
//!   `Idempotency-Key`, and any `Mcp-Param-*` the browser asks for (2026-07-28 transports §"Standard MCP Request
//!   Headers": their names come from the tools' schemas, so no fixed list can hold them) — and
//!   `Access-Control-Max-Age`. An `OPTIONS` without `Origin` is not a preflight: 204 with `Allow`.
//! - Every answer to an admitted origin, refusals included (a page must read a 401's `WWW-Authenticate` to find
//!   the authorization server), carries `Access-Control-Allow-Origin`, `Vary: Origin` and
//!   `Access-Control-Expose-Headers` for the headers a page must read (`Mcp-Session-Id`, `MCP-Protocol-Version`,
//!   `WWW-Authenticate`). `Access-Control-Allow-Credentials: true` only with `cors_credentials`.
//! - A request without `Origin` (every non-browser agent) gets none of these headers and costs one lookup.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Front;
use super::error::FrontError;
use super::guard::Admission;
use crate::mcp::modern::PARAM_HEADER_PREFIX;

/// The methods of `/mcp` and `/mcp/{backend}`.
pub(super) const MCP_METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// The methods of the metadata documents.
pub(super) const METADATA_METHODS: &str = "GET, OPTIONS";

/// The request headers the front reads from agents, in both eras.
const ALLOWED_HEADERS: &str = "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, \
     Last-Event-ID, Mcp-Method, Mcp-Name, Idempotency-Key";
/// The answer headers a page needs to read.
const EXPOSED_HEADERS: &str = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate";
/// Ten minutes: browsers cap it anyway (Chromium at two hours), and a reload that drops an origin is seen by
/// preflights within that time (the requests themselves are judged at once).
const MAX_AGE: &str = "600";

/// `OPTIONS` on `/mcp` or `/mcp/{backend}`.
pub(super) async fn preflight_mcp(State(front): State<Arc<Front>>, headers: HeaderMap) -> Result<Response, FrontError> {
    preflight(&front, &headers, MCP_METHODS)
}

/// `OPTIONS` on a metadata document.
pub(super) async fn preflight_metadata(
    State(front): State<Arc<Front>>,
    headers: HeaderMap,
) -> Result<Response, FrontError> {
    preflight(&front, &headers, METADATA_METHODS)
}

fn preflight(front: &Front, headers: &HeaderMap, methods: &'static str) -> Result<Response, FrontError> {
    let settings = front.settings.load();
    settings.admission.check_origin_and_host(headers)?;
    let mut response = StatusCode::NO_CONTENT.into_response();
    let answer = response.headers_mut();
    let methods = HeaderValue::from_static(methods);
    answer.insert(header::ALLOW, methods.clone());
    if headers.contains_key(header::ORIGIN) {
        answer.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
        answer.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allowed_headers(headers));
        answer.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
    }
    // The origin's own headers come from the layer ([`expose`]) every answer of these routes passes.
    Ok(response)
}

/// [`ALLOWED_HEADERS`] and the `Mcp-Param-*` names the browser asks to send.
fn allowed_headers(request: &HeaderMap) -> HeaderValue {
    let asked = request.get_all(header::ACCESS_CONTROL_REQUEST_HEADERS).iter();
    let params: Vec<&str> = asked
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|name| name.len() > PARAM_HEADER_PREFIX.len())
        .filter(|name| {
            name.get(..PARAM_HEADER_PREFIX.len()).is_some_and(|start| start.eq_ignore_ascii_case(PARAM_HEADER_PREFIX))
        })
        .filter(|name| HeaderName::from_bytes(name.as_bytes()).is_ok())
        .collect();
    if params.is_empty() {
        return HeaderValue::from_static(ALLOWED_HEADERS);
    }
    let list = format!("{ALLOWED_HEADERS}, {}", params.join(", "));
    // Every part is a valid header name, so the list is a valid value.
    HeaderValue::from_str(&list).unwrap_or(HeaderValue::from_static(ALLOWED_HEADERS))
}

/// Adds the origin's headers to every answer of the routes it wraps (the preflights and the metadata documents;
/// the MCP endpoint's own requests get them from their access record's middleware, [`super::access::record`], so
/// the hot path passes through one middleware, not two).
pub(super) async fn expose(State(front): State<Arc<Front>>, request: Request, next: Next) -> Response {
    let origin = request.headers().get(header::ORIGIN).cloned();
    let mut response = next.run(request).await;
    expose_to(&front, origin, &mut response);
    front.stopping.mark(&mut response);
    response
}

/// Adds to `response` the headers the page of `origin` (the request's `Origin`, if any) may read it with.
pub(super) fn expose_to(front: &Front, origin: Option<HeaderValue>, response: &mut Response) {
    let Some(origin) = origin else { return };
    let answer = response.headers_mut();
    answer.append(header::VARY, HeaderValue::from_static("Origin"));
    let settings = front.settings.load();
    if settings.admission.admits_origin(&origin) {
        allow(answer, origin, &settings.admission);
    }
}

fn allow(answer: &mut HeaderMap, origin: HeaderValue, admission: &Admission) {
    answer.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    answer.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
    if admission.cors_credentials {
        answer.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(list: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCESS_CONTROL_REQUEST_HEADERS, HeaderValue::from_static(list));
        headers
    }

    #[test]
    fn per_tool_headers_are_allowed_as_asked_and_nothing_else_is_added() {
        assert_eq!(allowed_headers(&HeaderMap::new()), ALLOWED_HEADERS);
        let asked = asking("content-type, mcp-param-region, X-Other, Mcp-Param-Zone, mcp-param-");
        let allowed = allowed_headers(&asked);
        assert_eq!(allowed.to_str().unwrap(), format!("{ALLOWED_HEADERS}, mcp-param-region, Mcp-Param-Zone"));
    }
}
