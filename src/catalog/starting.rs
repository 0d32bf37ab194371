//! Backends whose first discovery has not ended, for a tool call that names no known tool: the router asks
//! whether the name may belong to one ([`Catalog::starting_owner`]) and waits for the catalog to change
//! ([`Catalog::changes`]) rather than call the tool unknown while the gateway is starting (docs/operations.md,
//! *Calls during start-up*).

use std::sync::Arc;

use tokio::sync::watch;

use super::{BackendStatus, Catalog, View};

impl Catalog {
    /// The backend in the view whose first discovery has not ended and under whose prefix `name` falls (at
    /// `/mcp/{backend}`, that backend's, whatever the name).
    pub fn starting_owner(&self, view: View<'_>, name: &str) -> Option<Arc<str>> {
        let state = self.state.read();
        let pending = |spec: &&super::BackendSpec| {
            state.discovered.get(&spec.name).is_some_and(|(status, _)| *status == BackendStatus::Pending)
        };
        let owns = |spec: &&super::BackendSpec| view != View::All || name.starts_with(spec.prefix.as_str());
        let shown = state.specs.iter().filter(|spec| view.shows(&spec.name));
        shown.filter(pending).find(owns).map(|spec| Arc::clone(&spec.name))
    }

    /// Ticks whenever a discovery's result is recorded or the backends are reconfigured.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub(super) fn note_change(&self) {
        self.changed.send_modify(|count| *count = count.wrapping_add(1));
    }
}
