//! The catalog: which tools and prompts exist, under which names, which backend serves each, and which backend
//! owns which resource templates.
//!
//! Rules: at `/mcp` a tool or prompt is exposed as `<prefix><name>`; at `/mcp/{backend}` under its bare name.
//! An exposed name must be 1–64 characters of `[A-Za-z0-9_-]` (LLM provider APIs reject others) or it is
//! withheld, never renamed. When two backends expose one name, the backend listed first in the configuration
//! keeps it and the later one is withheld with both sources named. Definitions are kept as `serde_json::Value`
//! and passed through verbatim (schemas, annotations, icons, `_meta`); only `name` is rewritten. Each backend's
//! listing is replaced as a whole when it is rediscovered, and a backend that failed keeps its last good one.
//! A configuration reload replaces the backends' specs ([`Catalog::reconfigure`]): a backend still configured
//! keeps its listing, seen through its new prefix and filters; readers see the old catalog or the new, never a mix.
//! Items the pinning rules quarantine are left out of listings and resolutions ([`quarantine`]); definitions are
//! screened for what is addressed to the model ([`screen`]).
//!
//! Must not know: how listings are discovered or requests routed (the router does that), agents, HTTP.

mod named;
mod names;
mod quarantine;
pub mod screen;
mod search;
mod starting;
mod template;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use serde_json::Value;

use crate::swap::Swap;
use named::Named;
pub use names::is_valid_tool_name;
pub use quarantine::Quarantined;
pub use template::UriTemplate;

/// Which items a request sees: all backends' (prefixed) or one backend's (bare names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View<'a> {
    All,
    Backend(&'a str),
}

impl View<'_> {
    pub fn shows(&self, backend: &str) -> bool {
        match self {
            View::All => true,
            View::Backend(shown) => *shown == backend,
        }
    }
}

/// What the catalog needs to know of a configured backend.
pub struct BackendSpec {
    pub name: Arc<str>,
    pub prefix: String,
    /// Whether a tool (by the backend's own name) is exposed at all (`tools.allow` / `tools.deny`).
    pub exposes: Box<dyn Fn(&str) -> bool + Send + Sync>,
    /// Put in front of the backend's resource URIs and templates, for URIs two backends share.
    pub resource_prefix: Option<String>,
}

/// One exposed tool or prompt and where it goes.
#[derive(Debug)]
pub struct Route {
    pub backend: Arc<str>,
    /// The backend's own name for it.
    pub name: String,
    /// The name agents see at `/mcp`.
    pub exposed: String,
    /// The definition as agents see it at `/mcp` (name rewritten; everything else verbatim).
    pub definition: Value,
    /// The definition as the backend sent it (agents see this at `/mcp/{backend}`).
    pub bare: Value,
}

/// A tool or prompt that is not exposed at `/mcp`, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub backend: Arc<str>,
    /// "tool" or "prompt".
    pub kind: &'static str,
    pub name: String,
    pub reason: String,
}

/// Discovery state of one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendStatus {
    Pending,
    Discovered,
    /// The last discovery failed; the last good listing, if any, is still served.
    Failed {
        error: String,
    },
}

/// One backend as [`Catalog::statuses`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendState {
    pub name: Arc<str>,
    pub status: BackendStatus,
    /// The tools agents see of it at `/mcp` (its tool filter applied, names withheld for a collision not
    /// counted): its last good listing's, also while its discovery fails.
    pub tools: usize,
}

/// What discovery found on one backend.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    /// The backend's `ServerCapabilities`.
    pub capabilities: Value,
    pub tools: Vec<Value>,
    pub prompts: Vec<Value>,
    pub templates: Vec<Value>,
}

impl Listing {
    #[cfg(test)]
    pub fn tools(tools: Vec<Value>) -> Listing {
        Listing { capabilities: serde_json::json!({"tools": {}}), tools, ..Listing::default() }
    }
}

#[derive(Default)]
struct Snapshot {
    tools: Named,
    prompts: Named,
    /// Resource templates in configuration order.
    templates: Vec<(Arc<str>, UriTemplate)>,
    withheld: Vec<Withheld>,
    /// Quarantined tools, findable only to say why a call is refused ([`quarantine`]).
    held: Named,
    /// Quarantined prompts, likewise.
    held_prompts: Named,
    /// The search index of `tools`, built on the first search of this snapshot ([`search`]).
    index: OnceLock<search::Index>,
}

/// Each backend's discovery status and last good listing.
type Discovered = HashMap<Arc<str>, (BackendStatus, Arc<Listing>)>;

/// The configured backends and what discovery found on each; changed under one lock, so a listing is always
/// recorded against the specs it belongs to.
struct State {
    specs: Vec<BackendSpec>,
    discovered: Discovered,
    /// Each backend's quarantined tools and prompts ([`quarantine`]).
    quarantined: HashMap<Arc<str>, Quarantined>,
}

pub struct Catalog {
    state: RwLock<State>,
    /// Built from `state` after every change; readers take it whole.
    snapshot: Swap<Snapshot>,
    /// See [`Catalog::changes`].
    changed: tokio::sync::watch::Sender<u64>,
}

impl Catalog {
    pub fn new(specs: Vec<BackendSpec>) -> Self {
        let discovered =
            specs.iter().map(|spec| (spec.name.clone(), (BackendStatus::Pending, Arc::default()))).collect();
        let changed = tokio::sync::watch::Sender::new(0);
        let quarantined = HashMap::new();
        Self { state: RwLock::new(State { specs, discovered, quarantined }), snapshot: Swap::default(), changed }
    }

    /// The configured backends, in configuration order.
    pub fn backend_names(&self) -> Vec<Arc<str>> {
        self.state.read().specs.iter().map(|spec| spec.name.clone()).collect()
    }

    /// Records a discovery result for one backend. A failure keeps the last good listing. Returns whether the
    /// tools agents see changed.
    pub fn update(&self, backend: &str, listed: Result<Listing, String>) -> bool {
        let changed = self.record(backend, listed);
        self.note_change();
        changed
    }

    fn record(&self, backend: &str, listed: Result<Listing, String>) -> bool {
        let mut state = self.state.write();
        let Some((status, last)) = state.discovered.get_mut(backend) else { return false };
        let listing = match listed {
            Ok(listing) => listing,
            Err(error) => {
                *status = BackendStatus::Failed { error };
                return false;
            }
        };
        *status = BackendStatus::Discovered;
        if **last == listing {
            return false;
        }
        let tools_changed = last.tools != listing.tools;
        *last = Arc::new(listing);
        // Stored under the state lock, so a snapshot never replaces a newer one.
        self.snapshot.store(build(&state));
        tools_changed
    }

    /// Replaces the configured backends (a configuration reload): a backend still configured keeps its status
    /// and last listing (seen through its new spec: prefix, filters), a new one is pending, a removed one is
    /// forgotten. Returns the backends whose tools agents see changed, in either view.
    pub fn reconfigure(&self, specs: Vec<BackendSpec>) -> Vec<Arc<str>> {
        let mut state = self.state.write();
        let mut names: Vec<Arc<str>> = state.specs.iter().map(|spec| spec.name.clone()).collect();
        let mut kept = std::mem::take(&mut state.discovered);
        state.discovered = specs
            .iter()
            .map(|spec| {
                let known = kept.remove(&spec.name).unwrap_or((BackendStatus::Pending, Arc::default()));
                (spec.name.clone(), known)
            })
            .collect();
        let added: Vec<Arc<str>> =
            specs.iter().map(|spec| spec.name.clone()).filter(|name| !names.contains(name)).collect();
        names.extend(added);
        state.quarantined.retain(|name, _| specs.iter().any(|spec| spec.name == *name));
        state.specs = specs;
        let (before, after) = (self.snapshot.load(), Arc::new(build(&state)));
        self.snapshot.store(Arc::clone(&after));
        drop(state);
        names.retain(|name| before.tools_of(name) != after.tools_of(name));
        self.note_change();
        names
    }

    /// Every tool definition a view shows.
    #[cfg(test)]
    pub fn tools(&self, view: View<'_>) -> Vec<Value> {
        self.usable_tools(view, |_| true)
    }

    /// The tool definitions a view shows, in configuration order, then in each backend's order, only those whose
    /// exposed name `usable` accepts (at `/mcp/{backend}` too, where the definitions carry their bare names).
    pub fn usable_tools(&self, view: View<'_>, usable: impl Fn(&str) -> bool) -> Vec<Value> {
        self.snapshot.load().tools.list(view, usable)
    }

    #[cfg(test)]
    pub fn prompts(&self, view: View<'_>) -> Vec<Value> {
        self.usable_prompts(view, |_| true)
    }

    /// At most `limit` tool definitions the view shows and `usable` accepts (by exposed name), best match for
    /// `query` first ([`search`]); what `usable` refuses takes no part in the ranking.
    pub fn search_tools(&self, view: View<'_>, query: &str, limit: usize, usable: impl Fn(&str) -> bool) -> Vec<Value> {
        let snapshot = self.snapshot.load();
        let index = snapshot.index.get_or_init(|| search::Index::build(snapshot.tools.routes()));
        let shown = |position: usize| snapshot.tools.shown(view, position, &usable).is_some();
        let found = index.search(query, limit, shown);
        found.into_iter().filter_map(|position| snapshot.tools.shown(view, position, &usable).cloned()).collect()
    }

    /// The prompt definitions a view shows whose exposed name `usable` accepts.
    pub fn usable_prompts(&self, view: View<'_>, usable: impl Fn(&str) -> bool) -> Vec<Value> {
        self.snapshot.load().prompts.list(view, usable)
    }

    /// The route of a tool by the name the view shows it under.
    pub fn resolve(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        self.snapshot.load().tools.resolve(view, name)
    }

    pub fn resolve_prompt(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        self.snapshot.load().prompts.resolve(view, name)
    }

    /// The backends (in the view) owning a resource template that matches `uri`, in configuration order.
    pub fn template_owners(&self, view: View<'_>, uri: &str) -> Vec<Arc<str>> {
        let snapshot = self.snapshot.load();
        let matching =
            snapshot.templates.iter().filter(|(backend, template)| view.shows(backend) && template.matches(uri));
        let mut owners: Vec<Arc<str>> = matching.map(|(backend, _)| backend.clone()).collect();
        owners.dedup();
        owners
    }

    /// The prefix of the backend's tool and prompt names at `/mcp` (`None`: not configured).
    pub fn prefix(&self, backend: &str) -> Option<String> {
        self.state.read().specs.iter().find(|spec| &*spec.name == backend).map(|spec| spec.prefix.clone())
    }

    /// The backend's resource prefix, if it has one.
    pub fn resource_prefix(&self, backend: &str) -> Option<String> {
        self.state.read().specs.iter().find(|spec| &*spec.name == backend)?.resource_prefix.clone()
    }

    /// The backend in the view whose resource prefix starts `uri` (the longest such prefix), and the URI as that
    /// backend knows it.
    pub fn split_resource_prefix<'u>(&self, view: View<'_>, uri: &'u str) -> Option<(Arc<str>, &'u str)> {
        let state = self.state.read();
        let shown = state.specs.iter().filter(|spec| view.shows(&spec.name));
        let matching = shown.filter_map(|spec| Some((spec, uri.strip_prefix(spec.resource_prefix.as_deref()?)?)));
        let (spec, rest) = matching.max_by_key(|(spec, _)| spec.resource_prefix.as_ref().map_or(0, String::len))?;
        Some((spec.name.clone(), rest))
    }

    /// The backends in the view whose server capabilities include `capability` (e.g. "resources"), in
    /// configuration order.
    pub fn backends_with(&self, view: View<'_>, capability: &str) -> Vec<Arc<str>> {
        let state = self.state.read();
        let has = |spec: &&BackendSpec| {
            state.discovered.get(&spec.name).is_some_and(|(_, listing)| listing.capabilities.get(capability).is_some())
        };
        state.specs.iter().filter(|spec| view.shows(&spec.name)).filter(has).map(|spec| spec.name.clone()).collect()
    }

    /// Whether `backend`'s server capabilities hold a value at the JSON `pointer` (e.g.
    /// "/tasks/requests/tools/call").
    pub fn declares(&self, backend: &str, pointer: &str) -> bool {
        let state = self.state.read();
        state.discovered.get(backend).is_some_and(|(_, listing)| listing.capabilities.pointer(pointer).is_some())
    }

    pub fn withheld(&self) -> Vec<Withheld> {
        self.snapshot.load().withheld.clone()
    }

    /// Every backend's discovery status and exposed tool count, in configuration order: the one count `/readyz`,
    /// the console and `switchyard check` show.
    pub fn statuses(&self) -> Vec<BackendState> {
        let state = self.state.read();
        let mut exposed: HashMap<Arc<str>, usize> = HashMap::new();
        for route in self.snapshot.load().tools.exposed() {
            *exposed.entry(Arc::clone(&route.backend)).or_default() += 1;
        }
        let status = |spec: &BackendSpec| {
            let status = state.discovered.get(&spec.name)?.0.clone();
            let tools = exposed.get(&spec.name).copied().unwrap_or_default();
            Some(BackendState { name: spec.name.clone(), status, tools })
        };
        state.specs.iter().filter_map(status).collect()
    }

    /// Exposed tool routes at `/mcp`, for `switchyard check` and `switchyard tools`.
    pub fn routes(&self) -> Vec<Arc<Route>> {
        self.snapshot.load().tools.exposed()
    }
}

fn build(state: &State) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for spec in &state.specs {
        let Some((_, listing)) = state.discovered.get(&spec.name) else { continue };
        let quarantined = state.quarantined.get(&spec.name);
        let held = |kind, item: &Value| {
            quarantined.is_some_and(|held| name_of(item).is_some_and(|name| held.contains(&(kind, name.to_owned()))))
        };
        for tool in listing.tools.iter().filter(|tool| name_of(tool).is_none_or(|name| (spec.exposes)(name))) {
            match held("tool", tool) {
                true => snapshot.held.add(spec, tool, "tool", &mut Vec::new()),
                false => snapshot.tools.add(spec, tool, "tool", &mut snapshot.withheld),
            }
        }
        for prompt in &listing.prompts {
            match held("prompt", prompt) {
                true => snapshot.held_prompts.add(spec, prompt, "prompt", &mut Vec::new()),
                false => snapshot.prompts.add(spec, prompt, "prompt", &mut snapshot.withheld),
            }
        }
        for template in listing.templates.iter().filter_map(|t| t.get("uriTemplate")?.as_str()) {
            snapshot.add_template(spec, template);
        }
    }
    snapshot
}

impl Snapshot {
    /// What agents see of one backend's tools: its definitions at `/mcp` and at `/mcp/{backend}`.
    fn tools_of(&self, backend: &str) -> (Vec<Value>, Vec<Value>) {
        let exposed = self.tools.exposed().into_iter().filter(|route| &*route.backend == backend);
        (exposed.map(|route| route.definition.clone()).collect(), self.tools.list(View::Backend(backend), |_| true))
    }

    /// Records a template under its exposed form; the same exposed template from a later backend is withheld:
    /// which backend a matching URI belongs to would be a guess.
    fn add_template(&mut self, spec: &BackendSpec, template: &str) {
        let exposed = format!("{}{template}", spec.resource_prefix.as_deref().unwrap_or_default());
        if let Some((first, _)) = self.templates.iter().find(|(_, known)| known.as_str() == exposed) {
            let reason = format!(
                "resource template `{exposed}` is also offered by backend `{first}`; set `resource_prefix` on one of them"
            );
            tracing::warn!(backend = %spec.name, %reason, "withheld");
            let name = template.to_owned();
            self.withheld.push(Withheld { backend: spec.name.clone(), kind: "resource template", name, reason });
            return;
        }
        self.templates.push((spec.name.clone(), UriTemplate::parse(&exposed)));
    }
}

fn name_of(definition: &Value) -> Option<&str> {
    definition.get("name").and_then(Value::as_str)
}

#[cfg(test)]
mod tests;
