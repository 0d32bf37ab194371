//! An index of named items (tools or prompts) across backends: exposed names at `/mcp`, bare names per backend,
//! and the rules that withhold a name (invalid, or taken by a backend listed earlier).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{BackendSpec, Route, View, Withheld, is_valid_tool_name, name_of};

#[derive(Default)]
pub(super) struct Named {
    routes: Vec<Arc<Route>>,
    /// Index into `routes` by exposed name (only the routes exposed at `/mcp`).
    by_exposed: HashMap<String, usize>,
    /// Index into `routes` by (backend, bare name) for `/mcp/{backend}`.
    by_bare: HashMap<(Arc<str>, String), usize>,
    /// Whether each of `routes` is exposed at `/mcp` (decided when it is added: the first owner of a name keeps it).
    exposed: Vec<bool>,
}

impl Named {
    /// The definitions `view` shows whose exposed name `usable` accepts (the bare ones are judged by the name
    /// they have at `/mcp` too, so one policy language serves both views).
    pub(super) fn list(&self, view: View<'_>, usable: impl Fn(&str) -> bool) -> Vec<Value> {
        match view {
            View::All => self
                .exposed()
                .into_iter()
                .filter(|route| usable(&route.exposed))
                .map(|route| route.definition.clone())
                .collect(),
            View::Backend(backend) => {
                let shown = |route: &&Arc<Route>| {
                    &*route.backend == backend && is_valid_tool_name(&route.name) && usable(&route.exposed)
                };
                self.routes.iter().filter(shown).map(|route| route.bare.clone()).collect()
            }
        }
    }

    /// Every route in the order it was added (exposed or not), the search index's documents.
    pub(super) fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    /// The definition of the route at `index` as `view` shows it, when it shows it and `usable` accepts its
    /// exposed name ([`Named::list`]'s rule, for one route).
    pub(super) fn shown(&self, view: View<'_>, index: usize, usable: impl Fn(&str) -> bool) -> Option<&Value> {
        let route = self.routes.get(index)?;
        let definition = match view {
            View::All => self.exposed[index].then_some(&route.definition),
            View::Backend(backend) => {
                (&*route.backend == backend && is_valid_tool_name(&route.name)).then_some(&route.bare)
            }
        };
        definition.filter(|_| usable(&route.exposed))
    }

    pub(super) fn resolve(&self, view: View<'_>, name: &str) -> Option<Arc<Route>> {
        let index = match view {
            View::All => self.by_exposed.get(name),
            View::Backend(backend) => self.by_bare.get(&(Arc::from(backend), name.to_owned())),
        };
        index.map(|&index| Arc::clone(&self.routes[index]))
    }

    pub(super) fn exposed(&self) -> Vec<Arc<Route>> {
        self.routes
            .iter()
            .zip(&self.exposed)
            .filter(|(_, exposed)| **exposed)
            .map(|(route, _)| Arc::clone(route))
            .collect()
    }

    pub(super) fn add(&mut self, spec: &BackendSpec, bare: &Value, kind: &'static str, withheld: &mut Vec<Withheld>) {
        let mut withhold = |name: &str, reason: String| {
            tracing::warn!(backend = %spec.name, kind, name, %reason, "withheld");
            withheld.push(Withheld { backend: spec.name.clone(), kind, name: name.to_owned(), reason });
        };
        let Some(name) = name_of(bare) else {
            withhold("<unnamed>", format!("the backend listed a {kind} without a name"));
            return;
        };
        let exposed = format!("{}{name}", spec.prefix);
        let mut definition = bare.clone();
        definition["name"] = Value::String(exposed.clone());
        let route = Arc::new(Route {
            backend: spec.name.clone(),
            name: name.to_owned(),
            exposed,
            definition,
            bare: bare.clone(),
        });
        let index = self.routes.len();
        if is_valid_tool_name(name) {
            self.by_bare.entry((spec.name.clone(), name.to_owned())).or_insert(index);
        }
        let exposed = match self.exposure_problem(&route) {
            Some(reason) => {
                withhold(name, reason);
                false
            }
            None => {
                self.by_exposed.insert(route.exposed.clone(), index);
                true
            }
        };
        self.routes.push(route);
        self.exposed.push(exposed);
    }

    fn exposure_problem(&self, route: &Route) -> Option<String> {
        if !is_valid_tool_name(&route.exposed) {
            return Some(format!(
                "exposed name `{}` is not 1–64 characters of A-Z, a-z, 0-9, '_' and '-'; set a shorter `prefix` or deny it",
                route.exposed
            ));
        }
        let &owner = self.by_exposed.get(&route.exposed)?;
        let first = &self.routes[owner];
        Some(format!(
            "exposed name `{}` is already taken by `{}` of backend `{}`; give one backend another `prefix` or deny one",
            route.exposed, first.name, first.backend
        ))
    }
}
