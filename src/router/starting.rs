//! Tool calls while a backend is starting (docs/operations.md, *Calls during start-up*): a name the catalog does
//! not know may belong to a backend whose first discovery has not ended (the gateway just started, or a reload
//! added it). Such a call waits for that discovery up to `[server] discovery_wait`; if the tool is still not known
//! then, it is answered `not_delivered` with a sentence saying the backend is starting, never "unknown tool",
//! which an agent would read as permanent.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, timeout_at};

use super::CallRouter;
use crate::catalog::{Route, View};

/// What a tool's name resolved to.
pub(super) enum Resolved {
    Route(Arc<Route>),
    /// The name may belong to this backend, still being discovered when the wait ended.
    Starting(Arc<str>),
    Unknown,
}

impl CallRouter {
    /// The route of the tool `name`, waiting up to `wait` when it may belong to a backend still being discovered.
    pub(super) async fn resolve_tool(&self, view: View<'_>, name: &str, wait: Duration) -> Resolved {
        if let Some(route) = self.catalog.resolve(view, name) {
            return Resolved::Route(route);
        }
        let deadline = Instant::now() + wait;
        // Subscribed before looking, so a discovery that ends in between still wakes the wait.
        let mut changes = self.catalog.changes();
        loop {
            if let Some(route) = self.catalog.resolve(view, name) {
                return Resolved::Route(route);
            }
            let Some(backend) = self.catalog.starting_owner(view, name) else { return Resolved::Unknown };
            if !matches!(timeout_at(deadline, changes.changed()).await, Ok(Ok(()))) {
                return Resolved::Starting(backend);
            }
        }
    }
}
