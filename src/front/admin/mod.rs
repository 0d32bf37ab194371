//! The operator's console (issue 13 deliverable 5, design §8): a read-only JSON API under `/admin/api/` and the
//! page at `/ui/` that shows it.
//!
//! Owns: the routes `GET /admin/api/backends` (health, transport, tools, live sessions and processes, latency
//! percentiles and samples), `/admin/api/catalog` (exposed tools, withheld names), `/admin/api/calls` (the
//! ledger's calls, filtered by `backend`, `tool`, `outcome`, `principal`, at most `limit`),
//! `/admin/api/calls/unknown` (calls whose outcome is unknown, with the `switchyard calls resolve` commands and
//! what each does), and the page's static files ([`ui`]).
//!
//! Rules: every API answer passes [`access::AdminCaller`] first (header checks, then this machine or an
//! administrator); the page itself holds no data and is served to anyone, so an administrator on another
//! machine can load it and give it a credential. Nothing here writes: the API has only `GET`s, and the
//! data comes from the router's read-only views (`router::inspect`). Answers are `no-store`; refusals are the
//! error table's.

mod access;
mod query;
mod ui;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::Front;
use super::error::FrontError;
use super::http;
use access::AdminCaller;

/// The console's routes, for [`super::app`].
pub(super) fn routes() -> Router<Arc<Front>> {
    Router::new()
        .route("/admin/api/backends", get(backends))
        .route("/admin/api/catalog", get(catalog))
        .route("/admin/api/calls", get(calls))
        .route("/admin/api/calls/unknown", get(unknown_calls))
        .route("/admin/api", get(no_such_resource))
        .route("/admin/api/", get(no_such_resource))
        .route("/admin/api/{*rest}", get(no_such_resource))
        .route(ui::ROOT, get(ui::to_page))
        .route(ui::PAGE, get(ui::page))
        .route(ui::ASSETS, get(ui::asset))
}

async fn backends(_: AdminCaller, State(front): State<Arc<Front>>) -> Result<Response, FrontError> {
    let backends = front.router.backend_views().await.map_err(FrontError::Inspect)?;
    Ok(answer(json!({ "backends": backends })))
}

async fn catalog(_: AdminCaller, State(front): State<Arc<Front>>) -> Response {
    answer(json!(front.router.catalog_view()))
}

async fn calls(_: AdminCaller, State(front): State<Arc<Front>>, uri: Uri) -> Result<Response, FrontError> {
    let query = query::call_query(uri.query())?;
    let calls = front.router.calls(&query).await.map_err(FrontError::Inspect)?;
    Ok(answer(json!({ "limit": query.limit, "calls": calls })))
}

async fn unknown_calls(_: AdminCaller, State(front): State<Arc<Front>>, uri: Uri) -> Result<Response, FrontError> {
    let limit = query::limit_query(uri.query())?;
    let calls = front.router.unknown_calls(limit).await.map_err(FrontError::Inspect)?;
    Ok(answer(json!({ "limit": limit, "calls": calls })))
}

async fn no_such_resource(_: AdminCaller) -> FrontError {
    FrontError::NoSuchAdminResource
}

/// A `200` JSON answer that no cache keeps (it is a snapshot, and may name principals).
fn answer(body: Value) -> Response {
    let mut response = http::json(StatusCode::OK, &body);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
