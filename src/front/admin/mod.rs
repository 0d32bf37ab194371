//! The operator's console: a JSON API under `/admin/api/` and the page at `/ui/` that shows it.
//!
//! Owns: the routes `GET /admin/api/backends` (health, transport, tools, live sessions and processes, latency
//! percentiles and samples), `/admin/api/catalog` (exposed tools, withheld names), `/admin/api/calls` (the
//! ledger's calls, filtered by `backend`, `tool`, `outcome`, `principal`, at most `limit`),
//! `/admin/api/calls/unknown` (calls whose outcome is unknown, with the `switchyard calls resolve` commands and
//! what each does), `/admin/api/approvals` (calls awaiting approval, with the `switchyard calls approve` and
//! `deny` commands; deciding them is [`approvals`]'), `/admin/api/tasks` (tasks running now), `/admin/api/limits` (each principal's use of each `[[limits]]` entry), `/admin/api/pins`
//! (pinned tool definitions; for a changed one both definitions and the commands that approve or reject it), and
//! the page's static files ([`ui`]).
//!
//! Rules: every API answer passes [`access::AdminCaller`] first (header checks, then an administrator's
//! credential, or this machine where `[auth]` allows it); the page itself holds no data and is served to anyone,
//! so an administrator can load it and give it a credential, which its script sends as `Authorization: Bearer`
//! to the API (kept in the tab's `sessionStorage`; the API never reads cookies, so no other page can make a
//! browser send it). One thing writes: an approver's decision on a call awaiting approval ([`approvals`], with a
//! form token); everything else is a `GET` of the router's read-only views (`router::inspect`). Every API answer, refusals (the error table's) included, is `no-store`
//! and `nosniff`.

mod access;
mod approvals;
mod query;
mod tickets;
mod ui;

pub use access::ConsoleAccess;
pub(super) use access::{admits, audience, exempt};
pub use tickets::ConsoleTickets;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware;
use axum::response::Response;
use axum::routing::{get, post};
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
        .route("/admin/api/approvals", get(approvals::pending))
        .route("/admin/api/approvals/decisions", post(approvals::decide))
        .route("/admin/api/approvals/link", get(approvals::link))
        .route("/admin/api/tasks", get(running_tasks))
        .route("/admin/api/limits", get(limits))
        .route("/admin/api/pins", get(pins))
        .route("/admin/api", get(no_such_resource))
        .route("/admin/api/", get(no_such_resource))
        .route("/admin/api/{*rest}", get(no_such_resource))
        .route_layer(middleware::map_response(api_headers))
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

async fn running_tasks(_: AdminCaller, State(front): State<Arc<Front>>, uri: Uri) -> Result<Response, FrontError> {
    let limit = query::limit_query(uri.query())?;
    let tasks = front.router.running_tasks(limit).await.map_err(FrontError::Inspect)?;
    Ok(answer(json!({ "limit": limit, "tasks": tasks })))
}

async fn limits(_: AdminCaller, State(front): State<Arc<Front>>) -> Result<Response, FrontError> {
    let limits = front.router.routing().limits.usage().await.map_err(|error| FrontError::Inspect(error.into()))?;
    Ok(answer(json!({ "limits": limits })))
}

async fn pins(_: AdminCaller, State(front): State<Arc<Front>>) -> Result<Response, FrontError> {
    let pins = front.router.pin_views().await.map_err(FrontError::Inspect)?;
    Ok(answer(json!({ "pins": pins })))
}

async fn no_such_resource(_: AdminCaller) -> FrontError {
    FrontError::NoSuchAdminResource
}

fn answer(body: Value) -> Response {
    http::json(StatusCode::OK, &body)
}

/// No cache keeps an API answer (it is a snapshot, and may name principals), and no browser reads it as anything
/// but JSON.
async fn api_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
