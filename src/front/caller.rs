//! The router's [`Caller`] for a request of either era: who asks (the principal authenticated on this request,
//! its address, its access record), the request's id and idempotency key, and where its backend sessions and
//! its id live.
//!
//! Rules:
//! - The `Idempotency-Key` header is read here for both eras, by `router::idempotency`'s rules; a malformed one
//!   refuses the request (400/`-32602`) before the router sees it. A key in `params._meta` is the router's to read.
//! - A session-era request's backend sessions and id belong to its agent session. A 2026-07-28 request's backend
//!   sessions belong to its principal ([`SessionHolder::Principal`]), and its id to a scope of its own, since that era's
//!   ids are unique only among one sender's requests in flight (see docs/protocol-eras.md, "Agents without
//!   sessions").

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue};
use serde_json::Value;

use super::admit::Admitted;
use super::error::FrontError;
use super::session::SessionRef;
use crate::auth::Principal;
use crate::mcp::SessionHolder;
use crate::router::{Audience, Caller, IdempotencyKey, fairness_key, idempotency};
use crate::secret::SubjectToken;
use crate::telemetry::RequestRecord;

/// Who sent a request, as admitted.
pub(super) struct Requester<'a> {
    pub(super) principal: &'a Principal,
    /// The verified JWT it presented, for the backends that exchange it.
    pub(super) subject_token: Option<&'a SubjectToken>,
    /// This request's access record (`front/access.rs`).
    pub(super) record: &'a Arc<RequestRecord>,
    pub(super) peer: Option<IpAddr>,
    pub(super) headers: &'a HeaderMap,
    /// Who reads its error texts ([`super::admin::audience`]).
    pub(super) audience: Audience,
}

/// Where a request's backend sessions and id live (see the module rules).
pub(super) enum CallerScope {
    /// The agent session's key.
    Session(String),
    /// A 2026-07-28 request: no session.
    Sessionless,
}

impl<'a> Requester<'a> {
    /// The requester `admitted` on this request.
    pub(super) fn of(admitted: &'a Admitted, peer: Option<IpAddr>, headers: &'a HeaderMap, audience: Audience) -> Self {
        let (principal, subject_token) = (&admitted.principal, admitted.subject_token.as_ref());
        Requester { principal, subject_token, record: &admitted.record, peer, headers, audience }
    }

    /// The caller of request `id`.
    pub(super) fn caller(&self, id: &Value, scope: CallerScope) -> Result<Caller, FrontError> {
        let idempotency_key = self.idempotency_key(id)?;
        let sessionless = matches!(scope, CallerScope::Sessionless);
        let (session, request_scope) = match scope {
            CallerScope::Session(key) => (SessionHolder::agent(&key), key),
            CallerScope::Sessionless => {
                let request_scope = SessionRef::random().map_err(|_| FrontError::NoRandom { id: id.clone() })?;
                let principal = fairness_key(self.principal, self.peer);
                (SessionHolder::Principal(principal.into()), format!("request:{request_scope}"))
            }
        };
        Ok(Caller {
            session,
            principal: self.principal.clone(),
            subject_token: self.subject_token.cloned(),
            request_id: id.clone(),
            request_scope,
            idempotency_key,
            peer: self.peer,
            record: Arc::clone(self.record),
            sessionless,
            audience: self.audience,
        })
    }

    /// The key of the request's `Idempotency-Key` header, if it sent one.
    fn idempotency_key(&self, id: &Value) -> Result<Option<IdempotencyKey>, FrontError> {
        let values = self.headers.get_all(idempotency::IDEMPOTENCY_HEADER).iter().map(HeaderValue::as_bytes);
        idempotency::from_header(values).map_err(|refusal| FrontError::BadIdempotencyKey { id: id.clone(), refusal })
    }
}
