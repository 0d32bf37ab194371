//! What the client has learnt of each configured backend's health from its own exchanges (docs/operations.md,
//! *Backend health*): `up` once an exchange got an answer — a result or a JSON-RPC error, either way the backend
//! spoke MCP — and `down` once connecting, starting its process or its handshake failed, or the connection or
//! process ended under an exchange, with the failure's sentence and since when. Discovery reports its own
//! failures through [`HealthBoard::set_down`], whatever their class.
//!
//! Rules:
//! - Only backends the router tracks ([`HealthBoard::track`]: the configured ones) have a health; an exchange of
//!   a backend a reload removed changes nothing, so its metric series, once dropped, stay dropped.
//! - An exchange that changes nothing costs a read lock, a map look-up and two atomics; only a transition takes
//!   the backend's lock, and it sets `switchyard_backend_up`, so the metric, `/readyz` and the console agree.
//! - An error that proves nothing about reachability (an HTTP status, an unusable answer, a cancellation) leaves
//!   the health as it was.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Mutex, RwLock};

use super::endpoint::BackendTarget;
use super::error::{AfterDeliveryCause, McpError, NotDeliveredCause};
use super::fault::Audience;
use super::sentence::Failure;
use crate::telemetry::Metrics;

/// One backend's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendHealth {
    /// No exchange has ended yet.
    Unknown,
    Up,
    Down {
        error: String,
        since: SystemTime,
    },
}

const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

struct Tracked {
    /// [`UNKNOWN`], [`UP`] or [`DOWN`]: what an exchange compares against without the lock.
    state: AtomicU8,
    /// Milliseconds from the board's start to the end of the last exchange.
    last_exchange: AtomicU64,
    health: Mutex<BackendHealth>,
}

/// Every tracked backend's health.
pub struct HealthBoard {
    backends: RwLock<HashMap<Arc<str>, Arc<Tracked>>>,
    metrics: Arc<Metrics>,
    started: Instant,
}

impl HealthBoard {
    pub fn new(metrics: Arc<Metrics>) -> HealthBoard {
        HealthBoard { backends: RwLock::default(), metrics, started: Instant::now() }
    }

    /// Tracks exactly `backends`: a new one starts unknown (and down in `switchyard_backend_up`), one no longer
    /// named is forgotten with its metric series.
    pub fn track(&self, backends: &[Arc<str>]) {
        let mut tracked = self.backends.write();
        tracked.retain(|name, _| {
            let kept = backends.contains(name);
            if !kept {
                self.metrics.forget_backend(name);
            }
            kept
        });
        for name in backends {
            tracked.entry(Arc::clone(name)).or_insert_with(|| {
                self.metrics.backend_up(name, false);
                Arc::new(Tracked {
                    state: AtomicU8::new(UNKNOWN),
                    last_exchange: AtomicU64::new(0),
                    health: Mutex::new(BackendHealth::Unknown),
                })
            });
        }
    }

    /// Learns from one exchange with `backend` (reached at `target`) that has ended.
    pub fn exchanged<T>(&self, backend: &str, target: &BackendTarget, answer: &Result<T, McpError>) {
        let Some(tracked) = self.backends.read().get(backend).cloned() else { return };
        tracked.last_exchange.store(self.elapsed_ms(), Ordering::Relaxed);
        match answer {
            Ok(_) | Err(McpError::Rpc { .. }) => self.set(backend, &tracked, BackendHealth::Up),
            Err(error) if unreachable(error) => {
                let place = target.place();
                let sentence = Failure { backend, place: &place, error, audience: Audience::Operator };
                self.set(backend, &tracked, down(sentence.to_string()));
            }
            Err(_) => {}
        }
    }

    /// Marks `backend` down for a reason the exchanges alone do not show (a discovery that failed).
    pub fn set_down(&self, backend: &str, error: String) {
        let Some(tracked) = self.backends.read().get(backend).cloned() else { return };
        self.set(backend, &tracked, down(error));
    }

    /// Every tracked backend's health.
    pub fn healths(&self) -> HashMap<Arc<str>, BackendHealth> {
        let tracked = self.backends.read();
        tracked.iter().map(|(name, tracked)| (Arc::clone(name), tracked.health.lock().clone())).collect()
    }

    /// Whether the health probe should ask `backend`: it is down, or no exchange has ended with it for `idle`.
    pub fn needs_probe(&self, backend: &str, idle: Duration) -> bool {
        let Some(tracked) = self.backends.read().get(backend).cloned() else { return false };
        let idle = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        let quiet = self.elapsed_ms().saturating_sub(tracked.last_exchange.load(Ordering::Relaxed));
        tracked.state.load(Ordering::Relaxed) == DOWN || quiet >= idle
    }

    fn set(&self, backend: &str, tracked: &Tracked, health: BackendHealth) {
        let state = match &health {
            BackendHealth::Unknown => UNKNOWN,
            BackendHealth::Up => UP,
            BackendHealth::Down { .. } => DOWN,
        };
        // A backend that stays down keeps the first failure's time, and the newest failure's words.
        if state == UP && tracked.state.load(Ordering::Relaxed) == UP {
            return;
        }
        let mut current = tracked.health.lock();
        let health = match (&*current, health) {
            (BackendHealth::Down { since, .. }, BackendHealth::Down { error, .. }) => {
                BackendHealth::Down { error, since: *since }
            }
            (_, health) => health,
        };
        if tracked.state.swap(state, Ordering::Relaxed) != state {
            self.metrics.backend_up(backend, state == UP);
            match &health {
                BackendHealth::Down { error, .. } => tracing::warn!(%backend, %error, "backend is down"),
                _ => tracing::info!(%backend, "backend is up"),
            }
        }
        *current = health;
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

fn down(error: String) -> BackendHealth {
    BackendHealth::Down { error, since: SystemTime::now() }
}

/// Whether a failure shows the backend cannot be reached: no connection, no process, no handshake, or the
/// connection or process gone under the exchange.
fn unreachable(error: &McpError) -> bool {
    use NotDeliveredCause::{Connect, Handshake, ProcessStart, SessionEnded};
    match error {
        McpError::NotDelivered { cause, .. } => matches!(cause, Connect | Handshake | ProcessStart | SessionEnded),
        McpError::AfterDelivery { cause, .. } => *cause == AfterDeliveryCause::Ended,
        _ => false,
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
