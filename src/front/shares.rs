//! Fair shares of the front's connections: how many requests and event streams of the MCP endpoint one principal
//! may have in flight at once (`[server] max_connections_per_principal`), and how many standalone `GET` streams
//! one agent session may hold open (`max_streams_per_session`, counted by [`super::standalone`]).
//!
//! Rules:
//! - A principal's share is counted in requests, not TCP connections: a connection belongs to nobody until a
//!   request on it has been authenticated, and HTTP/1.1 serves one request at a time, so the requests a
//!   principal has in flight are exactly the connections it keeps busy. A request counts from its authentication
//!   ([`super::admit::Admitted`]) until its answer has been sent or dropped, so an event stream (a standalone
//!   `GET`, a call's stream, a 2026-07-28 `subscriptions/listen`) counts for as long as it is open. An idle
//!   keep-alive connection holds no share: `idle_timeout` closes it, and `max_connections` bounds those of
//!   callers that never authenticate.
//! - Unauthenticated agents (`anonymous`) are counted per client address (`router::fairness_key`), as their
//!   backend sessions are.
//! - Over either cap the request is answered 429 by the error table, before any session, body or backend work.
//! - The caps are the front's [`super::Settings`], read at each request: a reload changes them for new requests
//!   and never cuts what is in flight.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::FrontError;
use parking_lot::Mutex;

/// The caps, lowered from `[server]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Requests and streams of the MCP endpoint one principal may have in flight.
    pub per_principal: usize,
    /// Standalone `GET` streams one agent session may hold open.
    pub streams_per_session: usize,
}

/// Every principal's requests in flight on this replica, by fairness key.
#[derive(Debug, Default)]
pub struct InFlight(Mutex<HashMap<String, usize>>);

/// One request's place in its principal's share, given back when dropped.
#[derive(Debug)]
pub(super) struct Share {
    table: Arc<InFlight>,
    owner: String,
}

impl InFlight {
    /// A place for one more request of `owner`, unless it already has `max` in flight.
    pub(super) fn take(self: &Arc<Self>, owner: String, max: usize) -> Result<Share, FrontError> {
        let mut held = self.0.lock();
        let count = held.entry(owner.clone()).or_default();
        if *count >= max {
            return Err(FrontError::TooManyRequests { max });
        }
        *count += 1;
        Ok(Share { table: Arc::clone(self), owner })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.table.0.lock();
        if let Some(count) = held.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.owner);
            }
        }
    }
}

/// Where the admission of a request leaves its share; the listener keeps it with the answer's body.
#[derive(Clone, Default)]
pub(super) struct ShareSlot(Arc<Mutex<Option<Share>>>);

impl ShareSlot {
    pub(super) fn keep(&self, share: Share) {
        *self.0.lock() = Some(share);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_given_back_when_dropped_and_owners_are_counted_apart() {
        let table = Arc::new(InFlight::default());
        let count = |owner: &str| table.0.lock().get(owner).copied();
        let first = table.take("alice".into(), 2).expect("room");
        let second = table.take("alice".into(), 2).expect("room");
        let refused = table.take("alice".into(), 2).expect_err("full");
        assert!(matches!(refused, FrontError::TooManyRequests { max: 2 }), "{refused:?}");
        let _bob = table.take("bob".into(), 2).expect("another principal's share is its own");
        assert_eq!(count("alice"), Some(2));
        drop(first);
        assert_eq!(count("alice"), Some(1));
        let third = table.take("alice".into(), 2).expect("room again");
        drop((second, third));
        assert_eq!(count("alice"), None, "an owner with nothing in flight is forgotten");
    }
}
