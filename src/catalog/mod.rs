//! The catalog: which tools and prompts exist, under which names, which backend serves each, and which backend
//! owns which resource templates (design §4).
//!
//! Rules: at `/mcp` a tool or prompt is exposed as `<prefix><name>`; at `/mcp/{backend}` under its bare name.
//! An exposed name must be 1–64 characters of `[A-Za-z0-9_-]` (LLM provider APIs reject others) or it is
//! withheld, never renamed. When two backends expose one name, the backend listed first in the configuration
//! keeps it and the later one is withheld with both sources named. Definitions are kept as `serde_json::Value`
//! and passed through verbatim (schemas, annotations, icons, `_meta`); only `name` is rewritten. Each backend's
//! listing is replaced as a whole when it is rediscovered, and a backend that failed keeps its last good one.
//!
//! Must not know: how listings are discovered or requests routed (the router does that), agents, HTTP.

mod named;
mod names;
mod template;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use named::Named;
pub use names::is_valid_tool_name;
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
    Discovered { tools: usize },
    Failed { error: String },
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
}

/// Each backend's discovery status and last good listing.
type Discovered = HashMap<Arc<str>, (BackendStatus, Arc<Listing>)>;

pub struct Catalog {
    specs: Vec<BackendSpec>,
    discovered: RwLock<Discovered>,
    snapshot: RwLock<Arc<Snapshot>>,
}

impl Catalog {
    pub fn new(specs: Vec<BackendSpec>) -> Self {
        let discovered =
            specs.iter().map(|spec| (spec.name.clone(), (BackendStatus::Pending, Arc::default()))).collect();
        Self { specs, discovered: RwLock::new(discovered), snapshot: RwLock::default() }
    }

    pub fn backend_names(&self) -> impl Iterator<Item = &str> {
        self.specs.iter().map(|spec| &*spec.name)
    }

    pub fn has_backend(&self, name: &str) -> bool {
        self.specs.iter().any(|spec| &*spec.name == name)
    }

    /// Records a discovery result for one backend. A failure keeps the last good listing. Returns whether the
    /// tools agents see changed.
    pub fn update(&self, backend: &str, listed: Result<Listing, String>) -> bool {
        let mut discovered = write(&self.discovered);
        let Some((status, last)) = discovered.get_mut(backend) else { return false };
        let listing = match listed {
            Ok(listing) => listing,
            Err(error) => {
                *status = BackendStatus::Failed { error };
                return false;
            }
        };
        *status = BackendStatus::Discovered { tools: listing.tools.len() };
        if **last == listing {
            return false;
        }
        let tools_changed = last.tools != listing.tools;
        *last = Arc::new(listing);
        let fresh = Arc::new(self.build(&discovered));
        drop(discovered);
        *write(&self.snapshot) = fresh;
        tools_changed
    }

    /// The tool definitions a view shows, in configuration order, then in each backend's order.
    pub fn tools(&self, view: View<'_>) -> Vec<Value> {
        self.usable_tools(view, |_| true)
    }

    /// [`Catalog::tools`], only those whose exposed name `usable` accepts (at `/mcp/{backend}` too, where the
    /// definitions carry their bare names).
    pub fn usable_tools(&self, view: View<'_>, usable: impl Fn(&str) -> bool) -> Vec<Value> {
        self.snapshot().tools.list(view, usable)
    }

    pub fn prompts(&self, view: View<'_>) -> Vec<Value> {
        self.usable_prompts(view, |_| true)
    }

    /// The prompt definitions a view shows whose exposed name `usable` accepts.
    pub fn usable_prompts(&self, view: View<'_>, usable: impl Fn(&str) -> bool) -> Vec<Value> {
        self.snapshot().prompts.list(view, usable)
    }

    /// The route of a tool by the name the view shows it under.
    pub fn resolve(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        self.snapshot().tools.resolve(view, name)
    }

    pub fn resolve_prompt(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        self.snapshot().prompts.resolve(view, name)
    }

    /// The backends (in the view) owning a resource template that matches `uri`, in configuration order.
    pub fn template_owners(&self, view: View<'_>, uri: &str) -> Vec<Arc<str>> {
        let snapshot = self.snapshot();
        let matching =
            snapshot.templates.iter().filter(|(backend, template)| view.shows(backend) && template.matches(uri));
        let mut owners: Vec<Arc<str>> = matching.map(|(backend, _)| backend.clone()).collect();
        owners.dedup();
        owners
    }

    /// The backend's resource prefix, if it has one.
    pub fn resource_prefix(&self, backend: &str) -> Option<&str> {
        self.specs.iter().find(|spec| &*spec.name == backend)?.resource_prefix.as_deref()
    }

    /// The backend in the view whose resource prefix starts `uri` (the longest such prefix), and the URI as that
    /// backend knows it.
    pub fn split_resource_prefix<'u>(&self, view: View<'_>, uri: &'u str) -> Option<(Arc<str>, &'u str)> {
        let shown = self.specs.iter().filter(|spec| view.shows(&spec.name));
        let matching = shown.filter_map(|spec| Some((spec, uri.strip_prefix(spec.resource_prefix.as_deref()?)?)));
        let (spec, rest) = matching.max_by_key(|(spec, _)| spec.resource_prefix.as_ref().map_or(0, String::len))?;
        Some((spec.name.clone(), rest))
    }

    /// The backends in the view whose server capabilities include `capability` (e.g. "resources"), in
    /// configuration order.
    pub fn backends_with(&self, view: View<'_>, capability: &str) -> Vec<Arc<str>> {
        let discovered = read(&self.discovered);
        let has = |spec: &&BackendSpec| {
            discovered.get(&spec.name).is_some_and(|(_, listing)| listing.capabilities.get(capability).is_some())
        };
        self.specs.iter().filter(|spec| view.shows(&spec.name)).filter(has).map(|spec| spec.name.clone()).collect()
    }

    pub fn withheld(&self) -> Vec<Withheld> {
        self.snapshot().withheld.clone()
    }

    /// Every backend's discovery status, in configuration order.
    pub fn statuses(&self) -> Vec<(Arc<str>, BackendStatus)> {
        let discovered = read(&self.discovered);
        let status = |spec: &BackendSpec| Some((spec.name.clone(), discovered.get(&spec.name)?.0.clone()));
        self.specs.iter().filter_map(status).collect()
    }

    /// Exposed tool routes at `/mcp`, for `switchyard check` and `switchyard tools`.
    pub fn routes(&self) -> Vec<Arc<Route>> {
        self.snapshot().tools.exposed()
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&read(&self.snapshot))
    }

    fn build(&self, discovered: &Discovered) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for spec in &self.specs {
            let Some((_, listing)) = discovered.get(&spec.name) else { continue };
            for tool in listing.tools.iter().filter(|tool| name_of(tool).is_none_or(|name| (spec.exposes)(name))) {
                snapshot.tools.add(spec, tool, "tool", &mut snapshot.withheld);
            }
            for prompt in &listing.prompts {
                snapshot.prompts.add(spec, prompt, "prompt", &mut snapshot.withheld);
            }
            for template in listing.templates.iter().filter_map(|t| t.get("uriTemplate")?.as_str()) {
                snapshot.add_template(spec, template);
            }
        }
        snapshot
    }
}

impl Snapshot {
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

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // Every write replaces whole values, so a poisoned lock still holds a consistent value.
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
