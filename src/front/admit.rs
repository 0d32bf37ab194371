//! The checks a request of the MCP endpoint passes before its handler runs, each written once as an axum
//! extractor: the backend the path names ([`Scope`]: unknown → 404), admission ([`Admitted`]:
//! [`super::guard`]'s header checks, then the principal the request acts for), and the agent session
//! ([`InSession`]: the `MCP-Session-Id` opened, its principal compared with the admitted one, the revocations
//! consulted). A handler lists them in that order, which is the order of the checks and so of the answers.
//!
//! Rules: admission comes before anything is read or opened; agent authentication (`auth::Authenticator`, on
//! every request, from the `Authorization` headers) comes right after the header checks and before any session
//! or backend work, and decides [`Admitted`]'s principal; a refused credential is 401/403/400 with a
//! `WWW-Authenticate` challenge naming this endpoint's resource metadata. An admitted request then takes its place
//! in its principal's share ([`super::shares`]; 429 over the cap). A session is usable only by the
//! principal admitted on this very request (MCP 2025-11-25 §A4.7; a foreign one is logged with both names);
//! every unusable session is 404 whatever the reason (§A1.6). A `GET` or `DELETE` without a session id that names a
//! 2026-07-28-era `MCP-Protocol-Version` is 405: that era has neither (its other requests keep the legacy answer).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};

use super::access;
use super::error::FrontError;
use super::guard::Admission;
use super::session::{AgentSession, OpenError};
use super::shares::ShareSlot;
use super::{Front, now_unix};
use crate::auth::{Authenticated, Endpoint, Principal};
use crate::mcp::SESSION_ID_HEADER;
use crate::router::fairness_key;
use crate::secret::SubjectToken;
use crate::telemetry::RequestRecord;
use crate::telemetry::audit::AuditEvent;

/// The backend of `/mcp/{backend}` (a configured one), or `None` for `/mcp`.
pub(super) struct Scope(pub(super) Option<String>);

impl FromRequestParts<Arc<Front>> for Scope {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, Response> {
        let path =
            <Option<Path<String>>>::from_request_parts(parts, front).await.map_err(IntoResponse::into_response)?;
        match path {
            Some(Path(backend)) if !front.router.has_backend(&backend) => {
                Err(FrontError::NoSuchBackend.into_response())
            }
            path => Ok(Scope(path.map(|Path(backend)| backend))),
        }
    }
}

/// A request that passed admission, the principal it acts for, and its access record.
pub(super) struct Admitted {
    pub(super) principal: Principal,
    /// The verified JWT the request presented, kept only for the backends that exchange it (RFC 8693).
    pub(super) subject_token: Option<SubjectToken>,
    /// The client's address, when the server records it.
    peer: Option<IpAddr>,
    pub(super) record: Arc<RequestRecord>,
}

impl FromRequestParts<Arc<Front>> for Admitted {
    type Rejection = FrontError;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, FrontError> {
        let settings = front.settings.load();
        settings.admission.check_origin_and_host(&parts.headers)?;
        // The body decides a POST's era, and with it the answer to an unsupported version (`post.rs`).
        if parts.method != Method::POST {
            if !parts.headers.contains_key(SESSION_ID_HEADER) && super::modern::names_modern_version(&parts.headers) {
                // The sessionless era has no GET stream and nothing to DELETE (2026-07-28 transports).
                return Err(FrontError::NoStreamsWithoutSessions);
            }
            Admission::check_version(&parts.headers)?;
        }
        let authorization = parts.headers.get_all(header::AUTHORIZATION).iter().map(HeaderValue::as_bytes);
        let endpoint = endpoint(parts.uri.path());
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(address)| address.ip());
        match settings.auth.authenticate(endpoint, authorization).await {
            Ok(Authenticated { principal, subject_token }) => {
                let record = access::of(parts);
                record.principal(&principal.name);
                let share = front.in_flight.take(fairness_key(&principal, peer), settings.shares.per_principal)?;
                if let Some(slot) = parts.extensions.get::<ShareSlot>() {
                    slot.keep(share);
                }
                Ok(Admitted { principal, subject_token, peer, record })
            }
            Err(error) => {
                front.metrics.auth_failure(error.reason());
                if let Some(audit) = front.metrics.audit() {
                    let event = AuditEvent::new("auth_failure")
                        .field("reason", error.reason())
                        .field("path", parts.uri.path())
                        .field("peer", peer.map_or(serde_json::Value::Null, |peer| peer.to_string().into()));
                    audit.record(event);
                }
                let challenge = settings.auth.challenge(endpoint, &error);
                Err(FrontError::Unauthenticated { error, challenge })
            }
        }
    }
}

/// The protected resource a request's path names (`/mcp` or `/mcp/<backend>`): the audience its token must
/// have, and the metadata its challenge names.
fn endpoint(path: &str) -> Endpoint<'_> {
    match path.strip_prefix("/mcp/") {
        Some(backend) if !backend.is_empty() => Endpoint::Backend(backend),
        _ => Endpoint::Mcp,
    }
}

impl Admitted {
    /// Whose shares the request counts against ([`fairness_key`]: the principal, or `anonymous@<address>`);
    /// derived when asked, so the requests that need no owner of their own make no string for it.
    pub(super) fn owner(&self) -> String {
        fairness_key(&self.principal, self.peer)
    }

    /// The session whose id `headers` carry, if this request's principal may use it now.
    pub(super) fn open_session(&self, front: &Front, headers: &HeaderMap) -> Result<AgentSession, FrontError> {
        let token = headers.get(SESSION_ID_HEADER).ok_or(FrontError::NoSession)?;
        let token = token.to_str().map_err(|_| FrontError::UnusableSession("id is malformed"))?;
        let now = now_unix();
        let session = front.sealer.open(token, now).map_err(|error| {
            FrontError::UnusableSession(match error {
                OpenError::Malformed => "id is malformed",
                OpenError::Forged => "id was not issued by this gateway",
                OpenError::Expired => "has expired; initialize a new one",
            })
        })?;
        if !session.belongs_to(&self.principal.name) {
            tracing::warn!(
                session_principal = %session.principal,
                request_principal = %self.principal.name,
                "a session id was presented with another principal's credentials"
            );
            return Err(FrontError::UnusableSession("belongs to another principal"));
        }
        if front.revocations.is_revoked(&session.id, now) {
            return Err(FrontError::UnusableSession("was deleted; initialize a new one"));
        }
        self.record.session(&session.id);
        Ok(session)
    }
}

/// An admitted request in a usable agent session (`GET` and `DELETE`; a `POST` opens its session only once its
/// body shows it is not an `initialize`, through [`Admitted::open_session`]), with its admission.
pub(super) struct InSession(pub(super) AgentSession, pub(super) Admitted);

impl FromRequestParts<Arc<Front>> for InSession {
    type Rejection = FrontError;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, FrontError> {
        let admitted = Admitted::from_request_parts(parts, front).await?;
        let session = admitted.open_session(front, &parts.headers)?;
        Ok(InSession(session, admitted))
    }
}
