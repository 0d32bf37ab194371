//! The catalog: which tools exist, under which names, and which backend serves each (design §4).
//!
//! Rules: at `/mcp` a tool is exposed as `<prefix><name>`; at `/mcp/{backend}` under its bare name. An exposed
//! name must be 1–64 characters of `[A-Za-z0-9_-]` (LLM provider APIs reject others) or it is withheld, never
//! renamed. When two backends expose one name, the backend listed first in the configuration keeps it and the
//! later tool is withheld with both sources named. Tool definitions are kept as `serde_json::Value` and passed
//! through verbatim (schemas, annotations, icons, `_meta`); only `name` is rewritten. Each backend's list is
//! replaced as a whole when it is rediscovered, and a backend that failed keeps its last good list.
//!
//! Must not know: how tools are discovered or called (the router does that), agents, HTTP.

mod names;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

pub use names::is_valid_tool_name;

/// Which tools a request sees: all backends' (prefixed) or one backend's (bare names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View<'a> {
    All,
    Backend(&'a str),
}

/// What the catalog needs to know of a configured backend.
pub struct BackendSpec {
    pub name: Arc<str>,
    pub prefix: String,
    /// Whether a tool (by the backend's own name) is exposed at all (`tools.allow` / `tools.deny`).
    pub exposes: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

/// One exposed tool and where it goes.
#[derive(Debug)]
pub struct ToolRoute {
    pub backend: Arc<str>,
    /// The backend's own name for the tool.
    pub tool: String,
    /// The name agents see at `/mcp`.
    pub exposed: String,
    /// The definition as agents see it at `/mcp` (name rewritten; everything else verbatim).
    pub definition: Value,
    /// The definition as the backend sent it (agents see this at `/mcp/{backend}`).
    pub bare: Value,
}

/// A tool that is not exposed at `/mcp`, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub backend: Arc<str>,
    pub tool: String,
    pub reason: String,
}

/// Discovery state of one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendStatus {
    Pending,
    Discovered { tools: usize },
    Failed { error: String },
}

#[derive(Default)]
struct Snapshot {
    routes: Vec<Arc<ToolRoute>>,
    /// Index into `routes` by exposed name (only the routes exposed at `/mcp`).
    by_exposed: HashMap<String, usize>,
    /// Index into `routes` by (backend, bare name) for `/mcp/{backend}`.
    by_bare: HashMap<(Arc<str>, String), usize>,
    withheld: Vec<Withheld>,
}

/// Each backend's discovery status and last good tool list.
type Discovered = HashMap<Arc<str>, (BackendStatus, Arc<Vec<Value>>)>;

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

    /// Records a discovery result for one backend. A failure keeps the last good list. Returns whether the tools
    /// agents see changed.
    pub fn update(&self, backend: &str, listed: Result<Vec<Value>, String>) -> bool {
        let mut discovered = write(&self.discovered);
        let Some((status, tools)) = discovered.get_mut(backend) else { return false };
        match listed {
            Ok(listed) => {
                let changed = **tools != listed;
                *status = BackendStatus::Discovered { tools: listed.len() };
                *tools = Arc::new(listed);
                if !changed {
                    return false;
                }
            }
            Err(error) => {
                *status = BackendStatus::Failed { error };
                return false;
            }
        }
        let fresh = Arc::new(self.build(&discovered));
        drop(discovered);
        *write(&self.snapshot) = fresh;
        true
    }

    /// The tool definitions a view shows, in configuration order, then in each backend's order.
    pub fn tools(&self, view: View<'_>) -> Vec<Value> {
        let snapshot = self.snapshot();
        match view {
            View::All => snapshot
                .routes
                .iter()
                .filter(|route| snapshot.is_exposed(route))
                .map(|r| r.definition.clone())
                .collect(),
            View::Backend(backend) => {
                let shown = |route: &&Arc<ToolRoute>| &*route.backend == backend && is_valid_tool_name(&route.tool);
                snapshot.routes.iter().filter(shown).map(|route| route.bare.clone()).collect()
            }
        }
    }

    /// The route of a tool by the name the view shows it under.
    pub fn resolve(&self, view: View<'_>, name: &str) -> Option<Arc<ToolRoute>> {
        let snapshot = self.snapshot();
        let index = match view {
            View::All => snapshot.by_exposed.get(name),
            View::Backend(backend) => snapshot.by_bare.get(&(Arc::from(backend), name.to_owned())),
        };
        index.map(|&index| Arc::clone(&snapshot.routes[index]))
    }

    pub fn withheld(&self) -> Vec<Withheld> {
        self.snapshot().withheld.clone()
    }

    /// Every backend's discovery status, in configuration order.
    pub fn statuses(&self) -> Vec<(Arc<str>, BackendStatus)> {
        let discovered = read(&self.discovered);
        self.specs.iter().filter_map(|spec| Some((spec.name.clone(), discovered.get(&spec.name)?.0.clone()))).collect()
    }

    /// Exposed routes at `/mcp`, for `switchyard check` and `switchyard tools`.
    pub fn routes(&self) -> Vec<Arc<ToolRoute>> {
        let snapshot = self.snapshot();
        snapshot.routes.iter().filter(|route| snapshot.is_exposed(route)).cloned().collect()
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&read(&self.snapshot))
    }

    fn build(&self, discovered: &Discovered) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for spec in &self.specs {
            let Some((_, tools)) = discovered.get(&spec.name) else { continue };
            for definition in tools.iter() {
                snapshot.add(spec, definition);
            }
        }
        snapshot
    }
}

impl Snapshot {
    fn is_exposed(&self, route: &ToolRoute) -> bool {
        self.by_exposed.get(&route.exposed).is_some_and(|&index| std::ptr::eq(&*self.routes[index], route))
    }

    fn add(&mut self, spec: &BackendSpec, bare: &Value) {
        let Some(tool) = bare.get("name").and_then(Value::as_str) else {
            self.withhold(spec, "<unnamed>", "the backend listed a tool without a name".into());
            return;
        };
        if !(spec.exposes)(tool) {
            return;
        }
        let exposed = format!("{}{tool}", spec.prefix);
        let mut definition = bare.clone();
        definition["name"] = Value::String(exposed.clone());
        let route = Arc::new(ToolRoute {
            backend: spec.name.clone(),
            tool: tool.to_owned(),
            exposed,
            definition,
            bare: bare.clone(),
        });
        let index = self.routes.len();
        if is_valid_tool_name(tool) {
            self.by_bare.entry((spec.name.clone(), tool.to_owned())).or_insert(index);
        }
        if let Some(reason) = self.exposure_problem(&route) {
            self.withhold(spec, tool, reason);
        } else {
            self.by_exposed.insert(route.exposed.clone(), index);
        }
        self.routes.push(route);
    }

    fn exposure_problem(&self, route: &ToolRoute) -> Option<String> {
        if !is_valid_tool_name(&route.exposed) {
            return Some(format!(
                "exposed name `{}` is not 1–64 characters of A-Z, a-z, 0-9, '_' and '-'; set a shorter `prefix` or deny the tool",
                route.exposed
            ));
        }
        let &owner = self.by_exposed.get(&route.exposed)?;
        let first = &self.routes[owner];
        Some(format!(
            "exposed name `{}` is already taken by tool `{}` of backend `{}`; give one backend another `prefix` or deny one tool",
            route.exposed, first.tool, first.backend
        ))
    }

    fn withhold(&mut self, spec: &BackendSpec, tool: &str, reason: String) {
        tracing::warn!(backend = %spec.name, tool, %reason, "tool withheld");
        self.withheld.push(Withheld { backend: spec.name.clone(), tool: tool.to_owned(), reason });
    }
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
