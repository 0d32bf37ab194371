//! The gateway as an OAuth protected resource: its Protected Resource Metadata documents (RFC 9728; MCP
//! 2025-11-25 authorization, "Authorization Server Location"), served at
//! `/.well-known/oauth-protected-resource` followed by a resource's path (`/mcp`, `/mcp/<backend>`, or nothing
//! for the root form).
//!
//! Rules: the documents are public (no credentials, no admission checks: they hold nothing but what any
//! challenge points to). Which path names which resource, and what each document says, is `auth::metadata`'s
//! rule (a `public_url` path prefix may be kept or stripped by a proxy). 404 for any other path, for a backend
//! that is not configured, and on a gateway without `[auth.jwt]`: with API keys only there is no authorization
//! server to point a client to, and a 404 tells an OAuth client not to try.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::{Front, http};
use crate::auth::{Endpoint, WELL_KNOWN_PREFIX};

/// The routes of the metadata documents: the root form and the path-inserted forms.
pub(super) const ROUTES: [&str; 2] = [WELL_KNOWN_PREFIX, "/.well-known/oauth-protected-resource/{*resource}"];

/// The metadata document the path asks for.
pub(super) async fn metadata(State(front): State<Arc<Front>>, uri: Uri) -> Response {
    let settings = front.settings.load();
    let Some(metadata) = settings.auth.metadata() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let suffix = uri.path().strip_prefix(WELL_KNOWN_PREFIX).unwrap_or_default();
    match metadata.endpoint_for_metadata_path(suffix) {
        Some(Endpoint::Backend(backend)) if !front.router.has_backend(backend) => StatusCode::NOT_FOUND.into_response(),
        Some(endpoint) => http::json(StatusCode::OK, &metadata.document(endpoint)),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
