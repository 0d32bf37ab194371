//! Quarantined tools and prompts: items the pinning rules hold back until an operator approves their definition.
//!
//! Rules: a quarantined item is left out of every listing and every resolution, at `/mcp` and at
//! `/mcp/{backend}`, and takes no exposed name (it cannot withhold another backend's tool). It stays findable
//! through [`Catalog::quarantined_tool`], which only a failed resolution consults, so the agent can be told why
//! rather than that the tool does not exist; the call path pays nothing when a name resolves. Which items are
//! quarantined is decided by the router from the ledger's pins and replaced per backend, as a whole.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Catalog, Route, View, build};

/// The quarantined items of one backend: (`"tool"` or `"prompt"`, the backend's own name).
pub type Quarantined = HashSet<(&'static str, String)>;

impl Catalog {
    /// Replaces `backend`'s quarantined items; returns whether the tools agents see of it changed.
    pub fn quarantine(&self, backend: &str, items: Quarantined) -> bool {
        let mut state = self.state.write();
        let Some(spec) = state.specs.iter().find(|spec| &*spec.name == backend) else { return false };
        let name = Arc::clone(&spec.name);
        if state.quarantined.get(&name).map_or(items.is_empty(), |known| *known == items) {
            return false;
        }
        state.quarantined.insert(name, items);
        let (before, after) = (self.snapshot.load(), Arc::new(build(&state)));
        // Stored under the state lock, so a snapshot never replaces a newer one.
        self.snapshot.store(Arc::clone(&after));
        drop(state);
        self.note_change();
        before.tools_of(backend) != after.tools_of(backend)
    }

    /// The route of a quarantined tool by the name the view would show it under.
    pub fn quarantined_tool(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        self.snapshot.load().held.resolve(view, name)
    }

    /// The route of a quarantined prompt by the name the view would show it under.
    pub fn quarantined_prompt(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        self.snapshot.load().held_prompts.resolve(view, name)
    }

    /// Every quarantined tool's route (by its name at `/mcp`), for the console and `switchyard check`.
    pub fn quarantined_tools(&self) -> Vec<Arc<Route>> {
        self.snapshot.load().held.exposed()
    }
}
