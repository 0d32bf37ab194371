//! What `/readyz` reports of the router: the ledger's health and each backend's discovery state, its health (up or
//! down, as the backend client's exchanges and probes showed; docs/operations.md, *Backend health*) and, for a
//! stdio backend whose processes keep failing to start, why; as plain types the front serializes. Tool counts
//! are those agents see at `/mcp` (after each backend's tool filter, before policies).
//!
//! Rules: ready once every backend's discovery has been tried at least once and the ledger answers. Error texts
//! are backends' (and the ledger's) own words and may name internal hosts: every one sits in an `error` member
//! that [`Readiness::without_errors`] removes, for callers that may not read them; the states stay.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use serde::{Serialize, Serializer};

use super::CallRouter;
use super::inspect::ProcessStart;
use crate::backend::mcp_client::BackendHealth;
use crate::catalog::{BackendState, BackendStatus};

/// Whether one part the gateway depends on works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Unavailable,
}

/// One part's health: its status, which store it is (the ledger's), and why it is unavailable.
#[derive(Debug, Serialize)]
pub struct Health {
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Health {
    /// `Ok`, or unavailable for the reason given.
    pub fn of(answer: Result<(), String>) -> Health {
        match answer {
            Ok(()) => Health { status: Status::Ok, store: None, error: None },
            Err(error) => Health { status: Status::Unavailable, store: None, error: Some(error) },
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

/// A backend's discovery state.
#[derive(Debug, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Discovery {
    /// Not tried yet.
    Pending,
    Discovered {
        tools: usize,
    },
    Failed {
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// A backend's health as `/readyz` and the console show it (docs/operations.md, *Backend health*).
#[derive(Debug, Serialize)]
pub struct HealthReport {
    /// "up", "down", or "unknown" while no exchange with the backend has ended.
    pub state: &'static str,
    /// When it went down, in milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_since_ms: Option<u128>,
    /// Why it is down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HealthReport {
    pub(super) fn of(health: Option<BackendHealth>) -> HealthReport {
        let report = |state| HealthReport { state, down_since_ms: None, error: None };
        match health {
            None | Some(BackendHealth::Unknown) => report("unknown"),
            Some(BackendHealth::Up) => report("up"),
            Some(BackendHealth::Down { error, since }) => HealthReport {
                down_since_ms: since.duration_since(UNIX_EPOCH).ok().map(|since| since.as_millis()),
                error: Some(error),
                ..report("down")
            },
        }
    }
}

/// One backend's readiness.
#[derive(Debug, Serialize)]
pub struct BackendReadiness {
    #[serde(flatten)]
    pub discovery: Discovery,
    pub health: HealthReport,
    /// A stdio backend whose processes keep failing to start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_start: Option<ProcessStart>,
}

/// What the router reports to `/readyz`.
#[derive(Debug, Serialize)]
pub struct Readiness {
    pub ready: bool,
    pub ledger: Health,
    /// In configuration order, serialized as an object keyed by backend name.
    #[serde(serialize_with = "by_name")]
    pub backends: Vec<(Arc<str>, BackendReadiness)>,
}

impl Readiness {
    /// The report without its error texts (see the module rules).
    pub fn without_errors(mut self) -> Readiness {
        self.ledger.error = None;
        for (_, backend) in &mut self.backends {
            if let Discovery::Failed { error } = &mut backend.discovery {
                *error = None;
            }
            backend.health.error = None;
            if let Some(start) = &mut backend.process_start {
                start.error = None;
            }
        }
        self
    }
}

fn by_name<S: Serializer>(backends: &[(Arc<str>, BackendReadiness)], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_map(backends.iter().map(|(name, backend)| (name.as_ref(), backend)))
}

impl CallRouter {
    /// Every configured backend's health, by name.
    pub(super) fn health_reports(&self) -> HashMap<Arc<str>, HealthReport> {
        let healths = self.client.health().healths().into_iter();
        healths.map(|(name, health)| (name, HealthReport::of(Some(health)))).collect()
    }

    /// Ready once every backend's discovery has been tried at least once and the ledger answers.
    pub async fn readiness(&self) -> Readiness {
        let ledger = self.ledger.store.ping().await.map_err(|error| error.to_string());
        let ledger = Health { store: Some(self.ledger.store.kind()), ..Health::of(ledger) };
        let mut failing = self.process_starts();
        let mut healths = self.health_reports();
        let backends: Vec<_> = self
            .catalog
            .statuses()
            .into_iter()
            .map(|BackendState { name, status, tools }| {
                let discovery = match status {
                    BackendStatus::Pending => Discovery::Pending,
                    BackendStatus::Discovered => Discovery::Discovered { tools },
                    BackendStatus::Failed { error } => Discovery::Failed { error: Some(error) },
                };
                let process_start = failing.remove(&name);
                let health = healths.remove(&name).unwrap_or_else(|| HealthReport::of(None));
                (name, BackendReadiness { discovery, health, process_start })
            })
            .collect();
        let discovered = backends.iter().all(|(_, backend)| !matches!(backend.discovery, Discovery::Pending));
        Readiness { ready: ledger.is_ok() && discovered, ledger, backends }
    }
}
