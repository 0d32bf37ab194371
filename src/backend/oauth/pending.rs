//! Authorizations waiting for their callback: the `state` handed out in an authorization URL, bound to the
//! principal and backend it was made for, with the PKCE verifier and what the token request will need — and bound
//! to the one browser that consented to it at the gateway's start page.
//!
//! Rules (OAuth 2.1 §7.5.2 CSRF protection; RFC 6749 §10.12 and RFC 9700 §4.7.1: the flow is bound to the user
//! agent that started it; MCP security best practices, "confused deputy"):
//! - An authorization has two random 32-byte identifiers: its `flow`, the one value in the gateway URL an agent
//!   is given (`/oauth/start?flow=…`), and its `state`, which only the authorization server's URL carries and
//!   which only the consenting browser is sent to.
//! - Opening the start page binds the flow to a new browser: a fresh cookie value and a fresh consent token
//!   (the page's form field); a later opening replaces the binding, so the last browser shown the consent page
//!   is the only one that may continue. Continuing needs the consent token and the cookie; the callback needs
//!   the cookie. Only their SHA-256 digests are kept, so the table holds nothing a browser could present.
//! - A callback whose browser does not present the cookie is refused and the authorization stays waiting: a
//!   stranger holding the `state` can neither complete nor spend it. With the cookie, the first callback takes
//!   the authorization out of the table, so it works once. An unknown state (forged or replayed) and an expired
//!   one are told apart.
//! - Fair shares: at most one live authorization per (principal, backend) — asked again for the same scopes
//!   from the same discovery, the waiting one is handed out again (the same URL); otherwise it is replaced — and
//!   at most [`MAX_PENDING_PER_PRINCIPAL`] per principal, so one principal cannot fill the table (`max` in all).
//! - Entries expire after the configured time to live; expired entries are dropped whenever one is added, and a
//!   full table refuses new authorizations rather than dropping a waiting one. Lookups by flow or by (principal,
//!   backend) scan the table, which `max` bounds, at the pace of people and `tools/list` probes.
//! - The table lives in this process: the start page and the callback must reach the replica that made the URL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use super::Discovered;
use super::error::OAuthError;
use super::pkce::random_token;

/// Authorizations one principal may have waiting at once (each backend needs at most one).
pub const MAX_PENDING_PER_PRINCIPAL: usize = 16;

/// One authorization in progress.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) request: Request,
    /// The authorization server's URL (it carries the `state`), revealed only to the consenting browser.
    authorization_url: String,
    pub(super) flow: String,
    browser: Option<Browser>,
    created: Instant,
}

/// The browser a flow is bound to: digests of its cookie and of its consent page's token.
#[derive(Debug)]
struct Browser {
    cookie: [u8; 32],
    consent: [u8; 32],
}

/// A flow just bound to a browser: what the start page shows and sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    pub principal: String,
    pub backend: String,
    /// The value of the browser's cookie for this flow.
    pub cookie: String,
    /// The token the consent page's form sends back.
    pub consent: String,
    /// How long the authorization stays usable.
    pub expires_in: Duration,
}

/// What a new authorization is made of (its identifiers are chosen by the table).
#[derive(Debug)]
pub(super) struct Request {
    pub(super) principal: String,
    pub(super) backend: String,
    pub(super) verifier: String,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) step_ups: u8,
    pub(super) discovered: Arc<Discovered>,
}

impl Pending {
    /// Whether this authorization asks for what `request` would: then it is handed out again.
    fn answers(&self, request: &Request) -> bool {
        let waiting = &self.request;
        waiting.scopes == request.scopes
            && waiting.step_ups == request.step_ups
            && Arc::ptr_eq(&waiting.discovered, &request.discovered)
    }

    fn of(&self, principal: &str, backend: &str) -> bool {
        self.request.principal == principal && self.request.backend == backend
    }

    fn presented_by(&self, cookies: &[String]) -> bool {
        self.browser.as_ref().is_some_and(|browser| cookies.iter().any(|cookie| digest(cookie) == browser.cookie))
    }
}

#[derive(Debug)]
pub(super) struct PendingTable {
    entries: Mutex<HashMap<String, Pending>>,
    ttl: Duration,
    max: usize,
}

impl PendingTable {
    pub(super) fn new(ttl: Duration, max: usize) -> PendingTable {
        PendingTable { entries: Mutex::default(), ttl, max }
    }

    /// The flow of the authorization waiting for `request`'s principal and backend, or of a new one whose
    /// authorization server URL `url` builds from its `state`.
    pub(super) fn admit(&self, request: Request, url: impl FnOnce(&str) -> String) -> Result<String, OAuthError> {
        let mut entries = self.entries.lock();
        entries.retain(|_, entry| entry.created.elapsed() < self.ttl);
        let waiting = entries.iter().find(|(_, entry)| entry.of(&request.principal, &request.backend));
        if let Some((state, entry)) = waiting {
            if entry.answers(&request) {
                return Ok(entry.flow.clone());
            }
            let superseded = state.clone();
            entries.remove(&superseded);
        }
        let principal_waits = entries.values().filter(|entry| entry.request.principal == request.principal).count();
        if principal_waits >= MAX_PENDING_PER_PRINCIPAL {
            return Err(OAuthError::TooManyPendingForPrincipal { max: MAX_PENDING_PER_PRINCIPAL });
        }
        if entries.len() >= self.max {
            return Err(OAuthError::TooManyPending);
        }
        let (state, flow) = (random_token()?, random_token()?);
        let authorization_url = url(&state);
        let pending =
            Pending { request, authorization_url, flow: flow.clone(), browser: None, created: Instant::now() };
        entries.insert(state, pending);
        Ok(flow)
    }

    /// Binds the authorization of `flow` to a new browser (the one opening the start page now).
    pub(super) fn bind(&self, flow: &str) -> Result<Consent, OAuthError> {
        let (cookie, consent) = (random_token()?, random_token()?);
        let mut entries = self.entries.lock();
        let entry = self.live_flow(&mut entries, flow)?;
        entry.browser = Some(Browser { cookie: digest(&cookie), consent: digest(&consent) });
        Ok(Consent {
            principal: entry.request.principal.clone(),
            backend: entry.request.backend.clone(),
            cookie,
            consent,
            expires_in: self.ttl.saturating_sub(entry.created.elapsed()),
        })
    }

    /// The authorization server URL of `flow`, for the browser it is bound to that sent its consent token.
    pub(super) fn proceed(&self, flow: &str, consent: &str, cookies: &[String]) -> Result<String, OAuthError> {
        let mut entries = self.entries.lock();
        let entry = self.live_flow(&mut entries, flow)?;
        let consented = entry.browser.as_ref().is_some_and(|browser| digest(consent) == browser.consent);
        if !consented || !entry.presented_by(cookies) {
            return Err(OAuthError::OtherBrowser);
        }
        Ok(entry.authorization_url.clone())
    }

    /// Takes the authorization of `state` out of the table when the browser presents its cookie (whatever
    /// happens next, it cannot be used again); another browser leaves it waiting.
    pub(super) fn take(&self, state: &str, cookies: &[String]) -> Result<Pending, OAuthError> {
        let mut entries = self.entries.lock();
        let entry = entries.get(state).ok_or(OAuthError::UnknownState)?;
        if !entry.presented_by(cookies) {
            return Err(OAuthError::OtherBrowser);
        }
        let pending = entries.remove(state).ok_or(OAuthError::UnknownState)?;
        if pending.created.elapsed() >= self.ttl {
            return Err(OAuthError::ExpiredState);
        }
        Ok(pending)
    }

    fn live_flow<'e>(
        &self,
        entries: &'e mut HashMap<String, Pending>,
        flow: &str,
    ) -> Result<&'e mut Pending, OAuthError> {
        let entry = entries.values_mut().find(|entry| entry.flow == flow).ok_or(OAuthError::UnknownFlow)?;
        if entry.created.elapsed() >= self.ttl {
            return Err(OAuthError::ExpiredState);
        }
        Ok(entry)
    }
}

/// Digests, not the values, are kept and compared: a comparison's timing says nothing about a cookie.
fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}
