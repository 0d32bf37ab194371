//! Who is asking: the caller of one request as the front hands it to the router (its backend sessions' holder,
//! its principal, the request's identity), and the fairness key it counts against in what all principals share.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::Value;

use super::idempotency::IdempotencyKey;
use crate::auth::Principal;
use crate::backend::mcp_client::{Audience, BackendTarget, CallContext, SlotKey};
use crate::mcp::SessionHolder;
use crate::secret::SubjectToken;
use crate::telemetry::RequestRecord;

/// Who is asking, and the identity of the request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Whom the caller's backend sessions are held for: its agent session, or for an agent without sessions
    /// (MCP 2026-07-28) its principal.
    pub session: SessionHolder,
    /// Who is calling (authenticated on this very request), with the groups policies match.
    pub principal: Principal,
    /// The verified JWT the agent presented, held opaquely for the backends that exchange it (RFC 8693); never
    /// stored, not even in a claim.
    pub subject_token: Option<SubjectToken>,
    /// The agent's JSON-RPC request id.
    pub request_id: Value,
    /// Where `request_id` names one request, for a call without an idempotency key: the agent session (ids are
    /// never reused within a session), or a scope of this request alone when the agent's ids may repeat (the
    /// front decides; see its era rules).
    pub request_scope: String,
    /// The `Idempotency-Key` HTTP header, if the agent sent one (checked by
    /// [`from_header`](super::idempotency::from_header)).
    pub idempotency_key: Option<IdempotencyKey>,
    /// The address the request came from, when the transport knows it.
    pub peer: Option<IpAddr>,
    /// What telemetry reports about the request; the router adds the tool, its backend and the outcome.
    pub record: Arc<RequestRecord>,
    /// An agent of the sessionless era (MCP 2026-07-28): it answers a backend's `input_required` itself, with
    /// a retry carrying the gateway's `requestState` ([`continuation`](super::continuation)).
    pub sessionless: bool,
    /// Who reads the caller's error texts: an operator (whoever may read the console) reads where a failing
    /// backend is; any other agent reads the same sentence without addresses, commands or stderr.
    pub audience: Audience,
}

impl Caller {
    /// Who the caller's backend sessions count against in the shared session table ([`fairness_key`]).
    pub fn fairness_key(&self) -> String {
        fairness_key(&self.principal, self.peer)
    }

    /// The caller's slot for `backend` in the backend client's session table, and the context of a call to
    /// `target` starting now on the caller's behalf: the principal's name is made shared once, for both.
    pub(super) fn on_backend(&self, backend: &Arc<str>, target: &BackendTarget) -> (SlotKey, CallContext<'static>) {
        let principal: Arc<str> = self.principal.name.as_str().into();
        let owner = match self.principal.name != Principal::ANONYMOUS {
            true => Arc::clone(&principal),
            false => self.fairness_key().into(),
        };
        let slot = SlotKey { holder: self.session.clone(), backend: Arc::clone(backend), owner };
        let context = CallContext::starting_now(target).for_principal(principal);
        (slot, context.with_subject_token(self.subject_token.clone()))
    }
}

/// Who a request counts against in what all principals share (backend sessions, the front's connections): the
/// principal, except that every unauthenticated agent is `anonymous`, so those are told apart by address
/// (`anonymous@<ip>`, `anonymous@unknown` when the address is not known).
pub fn fairness_key(principal: &Principal, peer: Option<IpAddr>) -> String {
    let name = &principal.name;
    if name != Principal::ANONYMOUS {
        return name.clone();
    }
    match peer {
        Some(ip) => format!("{name}@{ip}"),
        None => format!("{name}@unknown"),
    }
}
