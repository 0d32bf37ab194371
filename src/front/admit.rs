//! The checks a request of the MCP endpoint passes before its handler runs, each written once as an axum
//! extractor (design §3, §6): the backend the path names ([`Scope`]: unknown → 404), admission ([`Admitted`]:
//! [`super::guard`]'s header checks, then the principal the request acts for), and the agent session
//! ([`InSession`]: the `MCP-Session-Id` opened, its principal compared with the admitted one, the revocations
//! consulted). A handler lists them in that order, which is the order of the checks and so of the answers.
//!
//! Rules: admission comes before anything is read or opened; a session is usable only by the principal admitted
//! on this very request (MCP 2025-11-25 §A4.7); every unusable session is 404 whatever the reason (§A1.6).
//! Agent authentication belongs between admission and the session: it decides [`Admitted`]'s principal.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use super::error::FrontError;
use super::session::{AgentSession, OpenError};
use super::{Front, now_unix};
use crate::mcp::ANONYMOUS;
use crate::mcp::SESSION_ID_HEADER;

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

/// A request that passed admission, and the principal it acts for.
pub(super) struct Admitted {
    pub(super) principal: String,
}

impl FromRequestParts<Arc<Front>> for Admitted {
    type Rejection = FrontError;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, FrontError> {
        front.admission.check(&parts.headers)?;
        Ok(Admitted { principal: ANONYMOUS.to_owned() })
    }
}

impl Admitted {
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
        if !session.belongs_to(&self.principal) {
            return Err(FrontError::UnusableSession("belongs to another principal"));
        }
        if front.revocations.is_revoked(&session.id, now) {
            return Err(FrontError::UnusableSession("was deleted; initialize a new one"));
        }
        Ok(session)
    }
}

/// An admitted request in a usable agent session (`GET` and `DELETE`; a `POST` opens its session only once its
/// body shows it is not an `initialize`, through [`Admitted::open_session`]).
pub(super) struct InSession(pub(super) AgentSession);

impl FromRequestParts<Arc<Front>> for InSession {
    type Rejection = FrontError;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Self, FrontError> {
        let admitted = Admitted::from_request_parts(parts, front).await?;
        admitted.open_session(front, &parts.headers).map(InSession)
    }
}
