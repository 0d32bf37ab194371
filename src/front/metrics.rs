//! `GET /metrics`: the Prometheus text exposition of `telemetry::Metrics`, on the main
//! listener, or — with `[telemetry] metrics_listen` — only on a listener of its own ([`app`]).
//!
//! Rules: no credentials are asked (scrapers do not send any); on the main listener it passes the same header
//! checks as `/readyz` (it names backends and tools), so a page in a browser cannot read it through a rebound
//! DNS name; the dedicated listener serves nothing else.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::Front;
use super::error::FrontError;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::CONTENT_TYPE;

pub const METRICS_PATH: &str = "/metrics";

/// `/metrics` on the main listener.
pub(super) async fn scrape(State(front): State<Arc<Front>>, headers: HeaderMap) -> Result<Response, FrontError> {
    front.settings.load().admission.check(&headers)?;
    Ok(exposition(&front.metrics))
}

/// The application of the dedicated metrics listener.
pub fn app(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(METRICS_PATH, get(|State(metrics): State<Arc<Metrics>>| async move { exposition(&metrics) }))
        .with_state(metrics)
}

fn exposition(metrics: &Metrics) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))], metrics.encode()).into_response()
}
