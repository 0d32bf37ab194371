//! What one call carries down through the client's layers: its absolute deadline, whose tokens a protected
//! backend gets, and its CLIENT span — made once per call by the caller (and the span by the client), never
//! stamped into the backend's [`BackendTarget`], which describes the backend alone.
//!
//! Rules: the deadline bounds everything the call does, its handshake and its retry included; a context without
//! a principal is the gateway's own (discovery). The agent's subject token rides along only for the token
//! exchange of a backend that asks for it, and never outlives the call. A tool call carries its ledger claim's key,
//! borrowed: a REST backend derives the `Idempotency-Key` it sends from it, and no other transport reads it.
//! [`Destination`] is where a caller sends a request (slot, target, context); [`Call`] is one request as the layers
//! below the client see it.

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::endpoint::{BackendTarget, SlotKey};
use crate::mcp::Relay;
use crate::secret::SubjectToken;
use crate::telemetry::trace::ClientSpan;

/// One call's deadline, principal and trace span.
#[derive(Clone)]
pub struct CallContext<'a> {
    deadline: Instant,
    principal: Option<Arc<str>>,
    /// The agent's verified JWT, for a backend that exchanges it (RFC 8693); never stored.
    subject_token: Option<SubjectToken>,
    span: Option<&'a ClientSpan>,
    /// The key of the ledger claim a tool call runs under.
    claim: Option<&'a str>,
}

impl CallContext<'static> {
    /// A call of the gateway's own that may run until `deadline`.
    pub fn until(deadline: Instant) -> Self {
        Self { deadline, principal: None, subject_token: None, span: None, claim: None }
    }

    /// A call to `target` starting now: it may take the target's timeout.
    pub fn starting_now(target: &BackendTarget) -> Self {
        Self::until(Instant::now() + target.timeout())
    }
}

impl<'a> CallContext<'a> {
    /// The same call on behalf of `principal` (whose OAuth tokens a protected backend gets).
    pub fn for_principal(self, principal: Arc<str>) -> Self {
        Self { principal: Some(principal), ..self }
    }

    /// The same call carrying the agent's verified JWT (`None`: the agent presented none).
    pub fn with_subject_token(self, subject_token: Option<SubjectToken>) -> Self {
        Self { subject_token, ..self }
    }

    /// The same call, allowed `lasting` from now whatever the target's timeout (a stream held open on purpose).
    pub fn lasting(self, lasting: std::time::Duration) -> Self {
        Self { deadline: Instant::now() + lasting, ..self }
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    pub(crate) fn principal(&self) -> Option<&Arc<str>> {
        self.principal.as_ref()
    }

    pub(crate) fn subject_token(&self) -> Option<&SubjectToken> {
        self.subject_token.as_ref()
    }

    pub(crate) fn span(&self) -> Option<&'a ClientSpan> {
        self.span
    }

    /// The same call, run under the ledger claim `key` (moved, not copied: the call path pays nothing for it).
    pub fn claimed<'b>(self, key: &'b str) -> CallContext<'b>
    where
        'a: 'b,
    {
        CallContext { claim: Some(key), ..self }
    }

    pub(crate) fn claim(&self) -> Option<&'a str> {
        self.claim
    }

    /// The same call, recorded on `span`.
    pub(crate) fn traced<'b>(&self, span: &'b ClientSpan) -> CallContext<'b>
    where
        'a: 'b,
    {
        let (principal, subject_token) = (self.principal.clone(), self.subject_token.clone());
        CallContext { deadline: self.deadline, principal, subject_token, span: Some(span), claim: self.claim }
    }
}

/// Where a request goes: the backend session's slot, the backend as configured, and the call's context.
#[derive(Clone, Copy)]
pub struct Destination<'a> {
    pub slot: &'a SlotKey,
    pub target: &'a BackendTarget,
    pub context: &'a CallContext<'a>,
}

/// One request as the caller asked for it (its params are borrowed: a retry sends them again).
#[derive(Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) key: &'a SlotKey,
    pub(crate) method: &'a str,
    pub(crate) params: Option<&'a Value>,
    pub(crate) relay: &'a Relay,
    pub(crate) context: &'a CallContext<'a>,
}
