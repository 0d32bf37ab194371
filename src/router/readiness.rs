//! What `/readyz` reports of the router: the ledger's health and each backend's discovery state (and, for a stdio
//! backend whose processes keep failing to start, why), as plain types the front serializes.
//!
//! Rules: ready once every backend's discovery has been tried at least once and the ledger answers. Error texts
//! are backends' (and the ledger's) own words and may name internal hosts: every one sits in an `error` member
//! that [`Readiness::without_errors`] removes, for callers that may not read them; the states stay.

use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::CallRouter;
use super::inspect::ProcessStart;
use crate::catalog::BackendStatus;

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

/// One backend's readiness.
#[derive(Debug, Serialize)]
pub struct BackendReadiness {
    #[serde(flatten)]
    pub discovery: Discovery,
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
    /// Ready once every backend's discovery has been tried at least once and the ledger answers.
    pub async fn readiness(&self) -> Readiness {
        let ledger = self.ledger.store.ping().await.map_err(|error| error.to_string());
        let ledger = Health { store: Some(self.ledger.store.kind()), ..Health::of(ledger) };
        let mut failing = self.process_starts();
        let backends: Vec<_> = self
            .catalog
            .statuses()
            .into_iter()
            .map(|(name, status)| {
                let discovery = match status {
                    BackendStatus::Pending => Discovery::Pending,
                    BackendStatus::Discovered { tools } => Discovery::Discovered { tools },
                    BackendStatus::Failed { error } => Discovery::Failed { error: Some(error) },
                };
                let process_start = failing.remove(&name);
                (name, BackendReadiness { discovery, process_start })
            })
            .collect();
        let discovered = backends.iter().all(|(_, backend)| !matches!(backend.discovery, Discovery::Pending));
        Readiness { ready: ledger.is_ok() && discovered, ledger, backends }
    }
}
