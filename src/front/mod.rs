//! The agent-facing MCP server: Streamable HTTP, protocol 2025-11-25, also accepting 2025-06-18 and 2025-03-26
//! clients (MCP transports §"Streamable HTTP", lifecycle §"Initialization").
//!
//! Owns: the HTTP surface (`POST`/`DELETE`/`GET` on `/mcp` and `/mcp/{backend}`, each wrapped in its access
//! record by [`access`]; their `OPTIONS` preflights and cross-origin headers, and the metadata documents', by
//! [`cors`]; `/healthz`, `/readyz`, `/metrics` of [`metrics`], the backend OAuth `/oauth/start` of
//! [`start`] and `/oauth/callback` of [`callback`], the operator's console `/ui/` and `/admin/api/…` of
//! [`admin`]; before the gateway's ledger is open, the few answers of [`waiting`]). This file holds the routes and handlers that delegate: the checks before a handler are [`admit`]'s extractors
//! (over [`guard`]'s admission rules and [`session`]'s sealed ids), every refusal's answer is [`error`]'s table,
//! and a `POST`'s message is mapped to router calls by [`post`] — or, for an MCP 2026-07-28 agent (no sessions), by
//! [`modern`]. Rules: a body that is not JSON → 400/-32700; a batch → 400 (batches were removed in 2025-06-18); a
//! message without `"jsonrpc": "2.0"` → 400/-32600; a non-`initialize` request without a session id → 400; an
//! id that is forged, expired, revoked or another principal's → 404; notifications and responses → 202 without
//! a body; `/mcp/{backend}` for an unknown backend → 404 for every method; a `DELETE` or `initialize` the
//! revocation list, or the caller's share of it, cannot take ([`revocations`]) → 503 with a JSON-RPC error; a malformed `Idempotency-Key`
//! header on a request → 400/-32602 (the key rules are `router::idempotency`'s). How a body is read (415, 413,
//! 408) is [`body`]'s rule, how connections are accepted and timed out [`listener`]'s. `/readyz` passes the same
//! header checks as `/mcp` (it names the backends) but needs no credentials, is not ready while tokens cannot be
//! checked, and gives its error texts only to callers the console admits (the states to anyone); every request
//! naming two hosts is refused before routing ([`guard::check_target`]); a principal's requests in flight and a
//! session's standalone streams are capped ([`shares`]); `/healthz` says only "ok" and passes none; the OAuth metadata documents are [`resource`]'s.
//!
//! A configuration reload replaces the front's [`Settings`] (admission rules, authenticator, body limits, the
//! OAuth callback) as one snapshot; each request reads it once, so a request is judged by one configuration.
//!
//! Must not know: backends' wire formats, backend sessions, how a tool call is executed. It hands the router
//! the caller and the method, and writes back what the router answers.

mod access;
mod admin;
mod admit;
mod body;
pub mod callback;
mod caller;
pub mod cancels;
mod cors;
pub mod cutoff;
mod error;
pub mod fleet;
pub mod guard;
mod http;
mod initialize;
mod limited;
pub mod listener;
pub mod metrics;
pub mod modern;
pub mod pending;
mod polled;
mod post;
pub mod replay;
mod resource;
pub mod revocations;
pub mod session;
pub mod shares;
mod splice;
pub mod standalone;
pub mod start;
pub mod stopping;
mod stream;
pub mod tls;
pub mod waiting;

use crate::civil_date::unix_now as now_unix;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::Response;
use axum::routing::{get, options, post};
use serde::Serialize;

use crate::auth::{Admins, Authenticator};
use crate::mcp::{SessionHolder, SessionMessage};
use crate::router::{Approvers, CallRouter, Health, Readiness, TaskEar};
use crate::swap::Swap;
use crate::telemetry::Metrics;
use crate::telemetry::trace::Tracer;
pub use admin::{ConsoleAccess, ConsoleTickets};
use admit::{Admitted, InSession, Scope};
use error::FrontError;
use guard::Admission;
use revocations::Revocations;
use session::Sealer;

/// What a configuration reload may replace in the front.
pub struct Settings {
    pub admission: Admission,
    /// Turns each request's credentials into its principal.
    pub auth: Arc<Authenticator>,
    /// Who may read the operator's console.
    pub admins: Admins,
    /// Whether callers on this machine may read it without an administrator's credential.
    pub console: ConsoleAccess,
    /// Who may decide the calls awaiting approval (`[approvals] approvers`).
    pub approvers: Approvers,
    /// How much of the front one principal, and one agent session, may hold.
    pub shares: shares::Shares,
    pub max_body: usize,
    /// How long a request's body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// Serves backend OAuth authorizations at `/oauth/start` and `/oauth/callback` (`None`: no backend uses OAuth).
    pub authorization: Option<Arc<dyn callback::AuthorizationCallback>>,
}

/// Everything the front needs to serve requests.
pub struct Front {
    /// Read once per request; replaced whole by a reload.
    pub settings: Swap<Settings>,
    pub sealer: Sealer,
    /// The approvals page's form tokens and link tickets.
    pub tickets: ConsoleTickets,
    pub revocations: Arc<Revocations>,
    pub router: Arc<CallRouter>,
    /// The standalone `GET` streams open on this replica.
    pub streams: Arc<standalone::Streams>,
    /// Each principal's requests and streams of the MCP endpoint in flight on this replica.
    pub in_flight: Arc<shares::InFlight>,
    /// Server-to-client requests relayed to agents, waiting for their answers.
    pub pending: Arc<pending::PendingRequests>,
    /// Agents' requests that are running and may be cancelled.
    pub cancels: Arc<cancels::Cancels>,
    /// Call streams kept for resumption with `Last-Event-ID`.
    pub replays: Arc<replay::Replays>,
    /// Where agent requests, sessions and refused credentials are counted.
    pub metrics: Arc<Metrics>,
    /// Whether `/metrics` is served here (not when it has a listener of its own).
    pub serve_metrics: bool,
    /// Records a SERVER span per agent request when traces are on (`None`: off, and nothing is recorded).
    pub tracer: Option<Tracer>,
    /// The 2026-07-28 `subscriptions/listen` streams open on this replica.
    pub listens: Arc<modern::listen::Listens>,
    /// Cut by the composition root when a graceful shutdown's drain runs out: running requests are answered then.
    pub cutoff: cutoff::Cutoff,
    /// Set by the composition root when the stop signal comes: not ready, connections closed after each answer.
    pub stopping: stopping::Stopping,
    /// The other replicas sharing the ledger (`None`: this replica is alone).
    pub fleet: Option<Arc<fleet::Fleet>>,
}

/// The HTTP application. `/mcp/{backend}` is served by the same handlers as `/mcp`; [`Scope`] tells them apart.
pub fn app(front: Arc<Front>) -> Router {
    let recorded = middleware::from_fn_with_state(Arc::clone(&front), access::record);
    let cross_origin = middleware::from_fn_with_state(Arc::clone(&front), cors::expose);
    // A preflight is not an MCP request, so it is not recorded as one.
    let mcp = Router::new()
        .route("/mcp", post(post_message).delete(delete_session).get(open_stream))
        .route("/mcp/{backend}", post(post_message).delete(delete_session).get(open_stream))
        .route_layer(recorded);
    let browsers = Router::new()
        .route("/mcp", options(cors::preflight_mcp))
        .route("/mcp/{backend}", options(cors::preflight_mcp))
        .route(resource::ROUTES[0], get(resource::metadata).options(cors::preflight_metadata))
        .route(resource::ROUTES[1], get(resource::metadata).options(cors::preflight_metadata))
        .route_layer(cross_origin)
        .merge(mcp);
    let others = Router::new()
        .route("/healthz", get(http::healthz))
        .route("/readyz", get(readyz))
        .route(start::START_PATH, get(start::show).post(start::proceed))
        .route(callback::CALLBACK_PATH, get(callback::complete))
        .merge(admin::routes());
    let others = if front.serve_metrics { others.route(metrics::METRICS_PATH, get(metrics::scrape)) } else { others };
    // The MCP endpoint's and the browser routes' middlewares say `Connection: close` themselves ([`stopping`]).
    let closing = middleware::from_fn_with_state(Arc::clone(&front), stopping::close_connections);
    Router::new().merge(browsers).merge(others.route_layer(closing)).with_state(front)
}

/// The agent's address, when the server was built to record it (`ConnectInfo`); it tells anonymous agents apart
/// in the backend session table.
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

async fn post_message(
    State(front): State<Arc<Front>>,
    Scope(backend): Scope,
    admitted: Admitted,
    peer: Peer,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, FrontError> {
    let peer = peer.map(|Extension(ConnectInfo(address))| address.ip());
    front.serve_post(backend, &admitted, peer, &headers, body).await
}

/// The agent's standalone stream, or the rest of a call stream when `Last-Event-ID` names one.
async fn open_stream(
    State(front): State<Arc<Front>>,
    Scope(backend): Scope,
    InSession(session, _): InSession,
    headers: HeaderMap,
) -> Result<Response, FrontError> {
    let session = session.id.to_string();
    let Some(last_event_id) = headers.get("last-event-id").and_then(|id| id.to_str().ok()) else {
        let changes = front.router.tool_changes();
        let max = front.settings.load().shares.streams_per_session;
        let hearing = front.router.hear_tasks(TaskEar::Session(session.clone()));
        return standalone::open(&front.streams, session, max, backend, changes, hearing);
    };
    let resumed = match front.replays.resume(&session, last_event_id) {
        Some(resumed) => Some(resumed),
        None => front.replays.resume_elsewhere(&session, last_event_id).await,
    };
    resumed.map(stream::sse_body).ok_or(FrontError::NoSuchStream)
}

/// Ends the session: 200 only once the revocation is recorded (against the share of the request's owner).
async fn delete_session(
    State(front): State<Arc<Front>>,
    _scope: Scope,
    InSession(session, admitted): InSession,
) -> Result<StatusCode, FrontError> {
    let expires_at = front.sealer.expires_at(&session);
    let revoked = front.revocations.revoke(session.id, &admitted.owner(), expires_at, now_unix()).await;
    revoked.map_err(FrontError::NotDeleted)?;
    front.router.forget_session(&session.id.to_string());
    front.metrics.agent_session_deleted();
    Ok(StatusCode::OK)
}

/// What `/readyz` answers: the router's report (its `ready` made the whole gateway's), whether tokens can be
/// checked, and whether the gateway is stopping (only said when it is).
#[derive(Serialize)]
struct ReadyzReport {
    #[serde(flatten)]
    router: Readiness,
    auth: Health,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stopping: bool,
}

/// Ready when the router is, tokens can be checked (the issuer's keys are loaded) and the gateway is not stopping
/// ([`stopping`]); needs no credentials, so a
/// load balancer can ask. Only those who may read the console get the error texts: they are backends' (and
/// issuers') own words, and may name internal hosts.
async fn readyz(State(front): State<Arc<Front>>, peer: Peer, headers: HeaderMap) -> Result<Response, FrontError> {
    let settings = front.settings.load();
    settings.admission.check(&headers)?;
    let mut report = front.router.readiness().await;
    let mut auth = Health::of(settings.auth.readiness());
    let peer = peer.map(|Extension(ConnectInfo(address))| address);
    if admin::admits(&settings, peer, &headers).await.is_err() {
        report = report.without_errors();
        auth.error = None;
    }
    let stopping = front.stopping.is_set();
    report.ready &= auth.is_ok() && !stopping;
    let status = if report.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    Ok(http::json(status, &ReadyzReport { router: report, auth, stopping }))
}

impl Front {
    /// Delivers what a backend sent on its standalone stream to the agent's standalone stream (a sessionless
    /// agent's: to its listen streams), here or on the replica that holds one ([`fleet`]). With none open, the
    /// message is dropped (a request then fails at the backend instead of waiting).
    pub fn deliver_session_message(&self, message: SessionMessage) {
        let Some(message) = self.listens.take(message) else { return };
        let SessionHolder::Agent(session) = message.holder else { return };
        let here = self.streams.has(&session);
        if !here && self.fleet.is_none() {
            return;
        }
        let Some(prepared) = self.pending.prepare(&session, message.message) else { return };
        if here {
            self.streams.deliver(&session, prepared);
        } else if let Some(fleet) = &self.fleet {
            fleet.deliver_elsewhere(session.to_string(), prepared, &self.pending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `handler` returns, found without calling it.
    fn future_size<H, A, B, C, D, E, G, F>(_: &H) -> usize
    where
        H: FnOnce(A, B, C, D, E, G) -> F,
    {
        std::mem::size_of::<F>()
    }

    #[test]
    fn the_message_handlers_future_stays_small() {
        // axum moves the handler's future to the heap whole, at its type's size, on every request; a branch an
        // ordinary request does not take is boxed where it is awaited (docs/decisions.md, *The call path*).
        let size = future_size(&post_message);
        assert!(size <= 4096, "post_message's future is {size} bytes: box the branch that made it grow");
    }
}
