//! Starting a stdio backend's processes, with start-up health kept per backend.
//!
//! Rules:
//! - A start is the spawn and the handshake. When starts keep failing, the next attempt waits an exponentially
//!   growing delay ([`BACKOFF_BASE`] doubling up to [`BACKOFF_MAX`]) with jitter (a random point in the upper half
//!   of the delay), so a broken command is not re-run on every call; a call during the wait is refused at once
//!   as `NotDelivered`, naming the last error.
//! - One success resets the backoff. A process that crashes later is not a failed start: the next call simply
//!   starts a fresh one (the call that was in the crashed process is never replayed — that is the caller's rule).
//! - [`Launcher::status`] is what `/readyz` and `switchyard check` report.

use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::time::Instant;

use super::{StdioBackend, StdioConnection, StdioOptions};
use crate::backend::duplex::{Opening, Standing};
use crate::backend::mcp_client::{Audience, Failure, Fault, McpError, NotDeliveredCause, Place};

/// The wait after the first failed start.
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// The longest wait between failed starts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Whether a backend's processes start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnStatus {
    /// The last start succeeded, or none was tried yet.
    Ready,
    /// The last `failures` starts failed (`last_error`: the sentence of the last failure); the next is allowed in
    /// `retry_in`.
    Failing { failures: u32, last_error: String, retry_in: Duration },
}

/// Starts processes for one stdio backend.
pub struct Launcher {
    backend: StdioBackend,
    options: StdioOptions,
    health: Mutex<Health>,
}

/// Failed starts in a row, and the last one (`None` after a success).
#[derive(Default)]
struct Health {
    failures: u32,
    last: Option<LastFailure>,
}

struct LastFailure {
    fault: Fault,
    /// The failure's sentence ([`Failure`]).
    sentence: String,
    retry_at: Instant,
}

impl Launcher {
    pub fn new(backend: StdioBackend, options: StdioOptions) -> Self {
        Self { backend, options, health: Mutex::default() }
    }

    pub fn backend(&self) -> &StdioBackend {
        &self.backend
    }

    /// The command line, as the sentence of a failure names it.
    pub fn place(&self) -> Place {
        Place::command(&self.backend.command.program, &self.backend.command.args)
    }

    /// A new process with its session opened as `opening` says, unless starts are backing off.
    pub async fn connect(
        &self,
        capabilities: &Value,
        standing: Standing,
        opening: Opening,
        deadline: Instant,
    ) -> Result<StdioConnection, McpError> {
        self.check()?;
        let started =
            StdioConnection::connect(&self.backend, &self.options, capabilities, standing, opening, deadline).await;
        self.record(started.as_ref().err());
        started
    }

    pub fn status(&self) -> SpawnStatus {
        let health = self.health.lock();
        match &health.last {
            None => SpawnStatus::Ready,
            Some(last) => SpawnStatus::Failing {
                failures: health.failures,
                last_error: last.sentence.clone(),
                retry_in: last.retry_at.saturating_duration_since(Instant::now()),
            },
        }
    }

    fn check(&self) -> Result<(), McpError> {
        let health = self.health.lock();
        match &health.last {
            Some(last) if Instant::now() < last.retry_at => Err(McpError::NotDelivered {
                cause: NotDeliveredCause::ProcessStart,
                reason: Fault::BackingOff {
                    failures: health.failures,
                    retry_in: last.retry_at.saturating_duration_since(Instant::now()),
                    last: Box::new(last.fault.clone()),
                },
            }),
            _ => Ok(()),
        }
    }

    fn record(&self, error: Option<&McpError>) {
        let mut health = self.health.lock();
        let Some(error) = error else {
            *health = Health::default();
            return;
        };
        let place = self.place();
        let backend = &self.backend.name;
        let sentence = Failure { backend, place: &place, error, audience: Audience::Operator }.to_string();
        tracing::warn!(%backend, failures = health.failures + 1, error = %sentence, "stdio backend did not start");
        health.failures = health.failures.saturating_add(1);
        let retry_at = Instant::now() + backoff(health.failures, random_fraction());
        health.last = Some(LastFailure { fault: error.clone().into_fault(), sentence, retry_at });
    }
}

/// The wait after `failures` failed starts in a row; `fraction` in [0, 1) picks the point in the upper half.
fn backoff(failures: u32, fraction: f64) -> Duration {
    let doubled = BACKOFF_BASE.saturating_mul(1 << failures.saturating_sub(1).min(16));
    let ceiling = doubled.min(BACKOFF_MAX);
    ceiling / 2 + ceiling.mul_f64(fraction / 2.0)
}

fn random_fraction() -> f64 {
    // Jitter only spreads retries; without randomness the midpoint of the upper half still works.
    getrandom::u64().map_or(0.5, |bits| (bits >> 11) as f64 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_within_the_upper_half() {
        assert_eq!(backoff(1, 0.0), BACKOFF_BASE / 2);
        assert!(backoff(1, 0.999) < BACKOFF_BASE);
        assert_eq!(backoff(3, 0.0), BACKOFF_BASE * 2);
        for failures in [8, 20, u32::MAX] {
            assert_eq!(backoff(failures, 0.0), BACKOFF_MAX / 2, "{failures}");
            assert!(backoff(failures, 0.999) <= BACKOFF_MAX);
        }
    }
}
