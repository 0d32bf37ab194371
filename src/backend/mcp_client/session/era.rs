//! Which protocol era a backend speaks (MCP 2026-07-28 §8 "Backward compatibility"):
//! the operator's choice ([`Era`]), what a `server/discover` probe's answer means ([`verdict_of_result`],
//! [`verdict_of_error`]), and what the client remembers per backend ([`Eras`]).
//!
//! Rules:
//! - A probe is a modern `server/discover` sent at [`LATEST_MODERN_VERSION`]. A result naming a modern version the
//!   gateway speaks, or a modern error (`-32020`, `-32021`, `-32022`, or `-32601` with HTTP 404) proves a modern
//!   backend; anything else the backend answered (an empty or unrecognised 4xx, another JSON-RPC error, a result
//!   naming only older versions) means "fall back to `initialize`". A failure to reach the backend is no verdict.
//! - `-32022` names the versions the backend serves: the newest modern one both sides speak is tried once; with
//!   none, a 2025-era version both speak means the legacy handshake; with neither, the backend cannot be served.
//! - The verdict is remembered per backend, with an epoch: sessions made from one verdict are replaced once it is
//!   forgotten (a request or handshake that later fails as if the backend were of the other era) or replaced.
//!   One probe runs at a time per backend, so concurrent first callers do not probe twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use serde_json::{Value, json};

use crate::mcp::jsonrpc;
use crate::mcp::{MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS, is_supported_version};

pub use crate::mcp::modern::LATEST_MODERN_VERSION;

/// Which era the gateway speaks to a backend (`[[backends]] era`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Era {
    /// Probe with `server/discover`; fall back to `initialize`.
    #[default]
    Auto,
    /// 2026-07-28 only: a backend that does not answer the probe as a modern server is refused.
    Modern,
    /// 2025-11-25 and earlier only: `initialize`, never a probe.
    Legacy,
}

/// What a modern backend said about itself in `server/discover`.
#[derive(Debug, Clone)]
pub(crate) struct ModernServer {
    /// The version every request carries.
    pub(crate) version: &'static str,
    pub(crate) capabilities: Arc<Value>,
}

/// What is known of a backend.
#[derive(Debug, Clone)]
pub(crate) enum Known {
    Modern(ModernServer),
    Legacy,
}

/// What a probe's answer means.
#[derive(Debug)]
pub(crate) enum Verdict {
    Modern(ModernServer),
    /// Fall back to `initialize`.
    Legacy,
    /// Probe once more at this version (the backend named it in `-32022`).
    Retry(&'static str),
    /// A modern backend that cannot be served; why.
    Refused(String),
}

/// The verdict of a `server/discover` result answered at `sent`.
pub(crate) fn verdict_of_result(result: &Value, sent: &'static str) -> Verdict {
    let offered = strings(result.get("supportedVersions"));
    let Some(newest) = MODERN_PROTOCOL_VERSIONS.iter().copied().find(|ours| offered.contains(ours)) else {
        // A discover answer that names no modern version advertises the handshake era.
        return Verdict::Legacy;
    };
    let version = if offered.contains(&sent) { sent } else { newest };
    let capabilities = result.get("capabilities").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}));
    Verdict::Modern(ModernServer { version, capabilities: Arc::new(capabilities) })
}

/// The verdict of a JSON-RPC error answering a probe sent at `sent`; `status` is the HTTP status it came with
/// (`None` over stdio). `retried`: this probe was already the second.
pub(crate) fn verdict_of_error(
    code: i64,
    message: &str,
    data: Option<&Value>,
    status: Option<u16>,
    sent: &'static str,
    retried: bool,
) -> Verdict {
    match code {
        jsonrpc::UNSUPPORTED_PROTOCOL_VERSION => {
            let supported = strings(data.and_then(|data| data.get("supported")));
            match choose_version(&supported, sent, &MODERN_PROTOCOL_VERSIONS) {
                Some(version) if !retried => Verdict::Retry(version),
                _ if supported.iter().any(|version| is_supported_version(version)) => Verdict::Legacy,
                _ => Verdict::Refused(format!(
                    "the backend serves only protocol versions {supported:?}; the gateway speaks \
                     {MODERN_PROTOCOL_VERSIONS:?} and {SUPPORTED_PROTOCOL_VERSIONS:?}"
                )),
            }
        }
        jsonrpc::HEADER_MISMATCH | jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY => {
            Verdict::Refused(format!("the backend refused server/discover with error {code}: {message}"))
        }
        // A modern server without `server/discover` (it is mandatory, so it has nothing to say about itself).
        jsonrpc::METHOD_NOT_FOUND if status == Some(404) => {
            Verdict::Modern(ModernServer { version: sent, capabilities: Arc::new(json!({})) })
        }
        _ => Verdict::Legacy,
    }
}

/// The newest of `ours` that the backend `supported`, other than the one it just refused (`sent`).
pub(crate) fn choose_version(supported: &[&str], sent: &str, ours: &[&'static str]) -> Option<&'static str> {
    ours.iter().copied().find(|version| *version != sent && supported.contains(version))
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value.and_then(Value::as_array).map(|items| items.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// What the client knows of each backend's era, by backend name.
#[derive(Default)]
pub(crate) struct Eras {
    known: Mutex<HashMap<Arc<str>, (Known, u64)>>,
    probes: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    next_epoch: AtomicU64,
}

impl Eras {
    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, (Known, u64)>> {
        self.known.lock()
    }

    /// What is known of `backend`, with the epoch of that knowledge.
    pub(crate) fn get(&self, backend: &str) -> Option<(Known, u64)> {
        self.lock().get(backend).cloned()
    }

    /// Remembers a verdict; returns its epoch.
    pub(crate) fn remember(&self, backend: &Arc<str>, known: Known) -> u64 {
        let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(%backend, era = known_name(&known), "backend protocol era decided");
        self.lock().insert(Arc::clone(backend), (known, epoch));
        epoch
    }

    /// Forgets the verdict of `epoch` (a newer one stays), so that the next session probes again.
    pub(crate) fn forget(&self, backend: &str, epoch: u64) {
        let mut known = self.lock();
        if known.get(backend).is_some_and(|(_, current)| *current == epoch) {
            tracing::info!(%backend, "backend protocol era forgotten; the next session probes again");
            known.remove(backend);
        }
    }

    /// Forgets whatever verdict `backend` had.
    pub(crate) fn clear(&self, backend: &str) {
        self.lock().remove(backend);
    }

    /// Whether sessions made from the verdict of `epoch` are still current.
    pub(crate) fn is_current(&self, backend: &str, epoch: u64) -> bool {
        self.lock().get(backend).is_some_and(|(_, current)| *current == epoch)
    }

    /// Serializes probes of one backend.
    pub(crate) async fn probing(&self, backend: &Arc<str>) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut probes = self.probes.lock();
            Arc::clone(probes.entry(Arc::clone(backend)).or_default())
        };
        lock.lock_owned().await
    }
}

fn known_name(known: &Known) -> &'static str {
    match known {
        Known::Modern(server) => server.version,
        Known::Legacy => "legacy",
    }
}

#[cfg(test)]
#[path = "era_tests.rs"]
mod tests;
