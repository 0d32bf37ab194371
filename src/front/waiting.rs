//! What the agent-facing listener answers while the gateway waits for a call ledger it cannot reach yet (a
//! PostgreSQL server that is still starting, or down): the gateway serves nothing it would have to claim, but a
//! load balancer, an orchestrator and an operator can see that it is alive and why it is not ready
//! (docs/operations.md, *Starting without the ledger*).
//!
//! Rules:
//! - `/healthz` answers as always (the process is up); `/readyz` answers 503 with the ledger's state: its store,
//!   how many attempts failed, when the next one is, and the last error — the error text only for a caller the
//!   console's rule exempts from a credential ([`exempt`]), since no credential can be judged before start-up
//!   completes.
//! - Every other request is refused from the front's error table ([`FrontError::LedgerNotOpen`]: 503, a JSON-RPC
//!   error, `Retry-After` the seconds until the next attempt). Nothing is claimed, so nothing may be run.
//! - Every answer closes its connection: once the ledger is open, the agent's next request reaches the gateway's
//!   real routes on a new connection.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::admin::{ConsoleAccess, exempt};
use super::error::FrontError;
use super::http;

/// Where opening the ledger stands (the composition root updates it after each attempt).
#[derive(Debug, Clone)]
pub struct LedgerWait {
    /// `"postgres"`, …: which store is waited for.
    pub store: &'static str,
    /// Attempts that failed so far.
    pub attempts: u32,
    /// The last attempt's error.
    pub error: String,
    /// When the next attempt starts.
    pub next_attempt: Instant,
}

/// The waiting listener's state: the wait, and who reads its error.
#[derive(Clone)]
struct Waiting {
    wait: watch::Receiver<LedgerWait>,
    console: ConsoleAccess,
}

/// The routes served while waiting (see the module rules).
pub fn app(wait: watch::Receiver<LedgerWait>, console: ConsoleAccess) -> Router {
    Router::new()
        .route("/healthz", get(http::healthz))
        .route("/readyz", get(readyz))
        .fallback(refuse)
        .with_state(Waiting { wait, console })
        .layer(axum::middleware::map_response(close_connection))
}

/// `/readyz` while waiting: not ready, and why.
#[derive(Debug, Serialize)]
struct WaitReport {
    ready: bool,
    ledger: LedgerReport,
}

#[derive(Debug, Serialize)]
struct LedgerReport {
    status: &'static str,
    store: &'static str,
    attempts: u32,
    retry_in_ms: u128,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

async fn readyz(
    State(waiting): State<Waiting>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Response {
    let wait = waiting.wait.borrow().clone();
    let reads_error = exempt(&waiting.console, peer.map(|Extension(ConnectInfo(address))| address.ip()), &headers);
    let ledger = LedgerReport {
        status: "unavailable",
        store: wait.store,
        attempts: wait.attempts,
        retry_in_ms: wait.next_attempt.saturating_duration_since(Instant::now()).as_millis(),
        error: reads_error.then_some(wait.error),
    };
    http::json(StatusCode::SERVICE_UNAVAILABLE, &WaitReport { ready: false, ledger })
}

async fn refuse(State(waiting): State<Waiting>) -> FrontError {
    let wait = waiting.wait.borrow();
    // Rounded up, and at least one second: `Retry-After: 0` would invite a client to hammer the listener.
    let retry_after = wait.next_attempt.saturating_duration_since(Instant::now()).as_millis().div_ceil(1000).max(1);
    let retry_after = u64::try_from(retry_after).unwrap_or(u64::MAX);
    FrontError::LedgerNotOpen { store: wait.store, retry_after }
}

async fn close_connection(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response.into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::Request;
    use tower_service::Service;

    use super::*;

    fn waiting(console: ConsoleAccess) -> Router {
        let wait = LedgerWait {
            store: "postgres",
            attempts: 3,
            error: "connection refused at 10.0.0.7:5432".into(),
            next_attempt: Instant::now() + Duration::from_secs(4),
        };
        app(watch::channel(wait).1, console)
    }

    async fn get(mut app: Router, path: &str, peer: &str, host: &str) -> (StatusCode, HeaderMap, serde_json::Value) {
        let mut request = Request::get(path).header(header::HOST, host).body(Body::empty()).unwrap();
        request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        let response = app.call(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        (parts.status, parts.headers, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
    }

    #[tokio::test]
    async fn readiness_says_the_ledger_is_waited_for_and_the_error_only_to_this_machine() {
        let (status, headers, local) =
            get(waiting(ConsoleAccess::ThisMachine), "/readyz", "127.0.0.1:5000", "127.0.0.1:8808").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[header::CONNECTION], "close");
        assert_eq!(local["ready"], false);
        assert_eq!(local["ledger"]["store"], "postgres");
        assert_eq!(local["ledger"]["attempts"], 3);
        assert!(local["ledger"]["retry_in_ms"].as_u64().is_some_and(|ms| ms > 3000 && ms <= 4000), "{local}");
        assert_eq!(local["ledger"]["error"], "connection refused at 10.0.0.7:5432");

        let remote = get(waiting(ConsoleAccess::ThisMachine), "/readyz", "192.0.2.9:5000", "gw.example:8808").await.2;
        assert_eq!(remote["ledger"]["status"], "unavailable");
        assert!(remote["ledger"].get("error").is_none(), "{remote}");
        let administrators = ConsoleAccess::Administrators { loopback: false };
        let local_with_auth = get(waiting(administrators), "/readyz", "127.0.0.1:5000", "127.0.0.1:8808").await.2;
        assert!(local_with_auth["ledger"].get("error").is_none(), "no credential can be judged yet");
    }

    #[tokio::test]
    async fn health_is_ok_and_every_other_request_is_refused_with_when_to_retry() {
        let (status, _, _) = get(waiting(ConsoleAccess::ThisMachine), "/healthz", "127.0.0.1:1", "localhost").await;
        assert_eq!(status, StatusCode::OK);
        let (status, headers, body) =
            get(waiting(ConsoleAccess::ThisMachine), "/mcp", "127.0.0.1:1", "localhost").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[header::RETRY_AFTER], "4", "the seconds until the next attempt, rounded up");
        assert_eq!(headers[header::CONNECTION], "close");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("cannot reach its call ledger (postgres)") && message.contains("runs nothing"),
            "{body}"
        );
    }
}
