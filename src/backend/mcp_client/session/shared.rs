//! What every session operation needs of the client, in one place: the pooled HTTP client, the byte limit of an
//! exchange, the request ids and session generations, who hears what backends send outside calls, and the table
//! of stray responses. Shared (an `Arc`) with the background streams, which outlive the call that opened them.
//!
//! Rules: request ids are the client's own, unique across all its backend sessions (agents' ids never reach a
//! backend); a generation tells a session from the one that replaces it, even when a backend reuses ids.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::subscribers::Subscribers;
use crate::backend::http_client::HttpClient;
use crate::backend::mcp_client::context::CallContext;
use crate::backend::mcp_client::endpoint::BackendEndpoint;
use crate::backend::mcp_client::wire::exchange::{Exchange, Wire};
use crate::backend::mcp_client::wire::notifications::NotificationRoute;
use crate::backend::mcp_client::wire::strays::Strays;

pub(crate) struct Shared {
    /// Every HTTP request to backends (Streamable HTTP and legacy SSE) goes through this one pooled client.
    pub(crate) http: HttpClient,
    /// Bytes one exchange may read.
    pub(crate) limit: usize,
    pub(crate) subscribers: Subscribers,
    pub(crate) strays: Strays,
    ids: AtomicU64,
    generations: AtomicU64,
}

impl Shared {
    pub(crate) fn new(http: HttpClient, limit: usize) -> Self {
        Self {
            http,
            limit,
            subscribers: Subscribers::default(),
            strays: Strays::default(),
            ids: AtomicU64::new(1),
            generations: AtomicU64::new(1),
        }
    }

    /// A request id no other request of this client has.
    /// An exchange the session layer makes for itself within the call `context` (a handshake, an era probe): no
    /// agent stream takes its notifications, no other stream carries its response, and it has no span of its own.
    pub(crate) fn own_exchange<'a>(
        &'a self,
        endpoint: &'a BackendEndpoint,
        wire: Wire<'a>,
        context: &'a CallContext<'_>,
    ) -> Exchange<'a> {
        Exchange {
            http: &self.http,
            endpoint,
            wire,
            deadline: context.deadline(),
            principal: context.principal().map(|principal| &**principal),
            subject_token: context.subject_token(),
            limit: self.limit,
            notifications: NotificationRoute::default(),
            strays: None,
            span: None,
        }
    }

    pub(crate) fn next_id(&self) -> Value {
        Value::from(self.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// A generation no other session of this client has.
    pub(crate) fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed)
    }
}
