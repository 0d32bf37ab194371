//! Authorizations waiting for their callback: the `state` handed out in an authorization URL, bound to the
//! principal and backend it was made for, with the PKCE verifier and what the token request will need.
//!
//! Rules (OAuth 2.1 §7.5.2 CSRF protection; issue 12 "state bound to the principal and backend, single use,
//! expiring"):
//! - A state is 32 random bytes; it is taken out of the table by the first callback that presents it, so it
//!   works once. An unknown state (forged or replayed) and an expired one are told apart.
//! - Entries expire after the configured time to live; at most `max` wait at once. Expired entries are dropped
//!   whenever one is added, and a full table refuses new authorizations rather than dropping a waiting one.
//! - The table lives in this process: the callback must reach the replica that made the URL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::Discovered;
use super::error::OAuthError;

/// One authorization in progress.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) principal: String,
    pub(super) backend: String,
    pub(super) verifier: String,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) step_ups: u8,
    pub(super) discovered: Arc<Discovered>,
    created: Instant,
}

impl Pending {
    pub(super) fn new(
        principal: &str,
        backend: &str,
        verifier: String,
        scopes: Option<Vec<String>>,
        step_ups: u8,
        discovered: Arc<Discovered>,
    ) -> Pending {
        Pending {
            principal: principal.to_owned(),
            backend: backend.to_owned(),
            verifier,
            scopes,
            step_ups,
            discovered,
            created: Instant::now(),
        }
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

    pub(super) fn insert(&self, state: String, pending: Pending) -> Result<(), OAuthError> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, entry| entry.created.elapsed() < self.ttl);
        if entries.len() >= self.max {
            return Err(OAuthError::TooManyPending);
        }
        entries.insert(state, pending);
        Ok(())
    }

    /// Takes the authorization of `state` out of the table (whatever happens next, it cannot be used again).
    pub(super) fn take(&self, state: &str) -> Result<Pending, OAuthError> {
        let pending = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(state)
            .ok_or(OAuthError::UnknownState)?;
        if pending.created.elapsed() >= self.ttl {
            return Err(OAuthError::ExpiredState);
        }
        Ok(pending)
    }
}
