//! One configured limit at run time: its spec ([`LimitSpec`], lowered by the composition root), which calls it
//! counts, and each principal's [`Usage`] and recent identical calls.
//!
//! Rules: a limit counts a call when one of its subjects is the principal and the call is one it selects
//! ([`Calls`]); each principal (each address, for `anonymous`) has its own counters. The maps are forgotten
//! entry by entry once an entry can no longer change a decision, swept when a map doubles, so an agent that
//! cycles through addresses or arguments cannot grow them without bound.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

use super::clock::nanos;
use super::counters::{Bucket, Repeats, Usage};
use crate::auth::{Principal, Subject};
use crate::glob::Glob;
use crate::ledger::canonical_digest;

/// A limit as the router runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSpec {
    /// How refusals, metrics and listings name it.
    pub label: Arc<str>,
    pub principals: Vec<Subject>,
    pub calls: Calls,
    pub rate: Option<Rate>,
    pub quota: Option<Quota>,
    pub concurrency: Option<u32>,
    pub repeat: Option<Repeat>,
}

/// Which requests a limit counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calls {
    /// Tool calls whose exposed name matches a glob.
    Tools(Vec<Glob>),
    /// Tool calls of these backends (`*`: any).
    Backends(Vec<String>),
    /// Every request (refused with HTTP 429 when it is not a tool call).
    Every,
}

/// `calls` per `per`, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub calls: u32,
    pub per: Duration,
    pub burst: u32,
}

/// `calls` per fixed window of `period`, windows aligned on the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub calls: u64,
    pub period: Duration,
}

/// At most `times` identical calls within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    pub times: u32,
    pub window: Duration,
}

impl Rate {
    pub fn bucket(&self) -> Bucket {
        Bucket { interval: (nanos(self.per) / u64::from(self.calls)).max(1), burst: u64::from(self.burst) }
    }
}

/// What a request is, as limits see it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub principal: &'a Principal,
    /// Who the request counts against ([`crate::router::fairness_key`]).
    pub key: &'a str,
    /// The exposed tool and its backend; `None`: a request other than `tools/call`.
    pub tool: Option<(&'a str, &'a str)>,
}

/// A limit and its counters.
#[derive(Debug)]
pub struct Limit {
    pub spec: LimitSpec,
    /// Its row key in the shared counters: the label and a digest of the spec, so a changed limit starts afresh
    /// there too, and replicas with the same configuration share it.
    pub shared_key: Box<str>,
    pub usage: Mutex<Swept<Usage>>,
    pub repeats: Mutex<Swept<Repeats>>,
    /// Held while this gateway changes a lease of shared permits, so each change replaces the one stored.
    pub permits: tokio::sync::Mutex<()>,
}

impl Limit {
    pub fn new(spec: LimitSpec) -> Limit {
        let digest = canonical_digest(&Value::String(format!("{spec:?}")));
        let shared_key = format!("{}#{}", spec.label, &digest[..16]).into();
        let permits = tokio::sync::Mutex::new(());
        Limit { spec, shared_key, usage: Mutex::default(), repeats: Mutex::default(), permits }
    }

    /// Whether this limit counts `request`.
    pub fn counts(&self, request: &Request<'_>) -> bool {
        let calls = match (&self.spec.calls, request.tool) {
            (Calls::Every, _) => true,
            (_, None) => false,
            (Calls::Tools(globs), Some((tool, _))) => globs.iter().any(|glob| glob.matches(tool)),
            (Calls::Backends(names), Some((_, backend))) => names.iter().any(|name| name == "*" || name == backend),
        };
        calls && self.spec.principals.iter().any(|subject| subject.matches(request.principal))
    }

    /// The quota's period in ns, when there is a quota.
    pub fn period(&self) -> Option<u64> {
        self.spec.quota.map(|quota| nanos(quota.period).max(1))
    }
}

/// A map whose idle entries are dropped whenever it has doubled since the last sweep.
#[derive(Debug)]
pub struct Swept<T> {
    pub entries: HashMap<Box<str>, T>,
    next_sweep: usize,
}

const FIRST_SWEEP: usize = 1_024;

impl<T> Default for Swept<T> {
    fn default() -> Self {
        Swept { entries: HashMap::new(), next_sweep: FIRST_SWEEP }
    }
}

impl<T: Default> Swept<T> {
    /// The entry of `key`, created empty; sweeps first (keeping what `keep` says) when the map has grown.
    pub fn entry(&mut self, key: &str, keep: impl FnMut(&mut T) -> bool) -> &mut T {
        if self.entries.len() >= self.next_sweep {
            let mut keep = keep;
            self.entries.retain(|_, entry| keep(entry));
            self.next_sweep = (self.entries.len() * 2).max(FIRST_SWEEP);
        }
        self.entries.entry(key.into()).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swept_map_drops_idle_entries_once_it_doubles() {
        let mut map: Swept<u32> = Swept::default();
        for n in 0..FIRST_SWEEP {
            *map.entry(&n.to_string(), |_| true) = u32::try_from(n % 2).unwrap();
        }
        map.entry("new", |busy| *busy == 1);
        assert_eq!(map.entries.len(), FIRST_SWEEP / 2 + 1, "the idle half is gone, the new entry is there");
    }
}
