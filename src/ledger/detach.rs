//! Cancellation safety: a caller that stops waiting (its HTTP request was dropped, its deadline passed) must not
//! leave the ledger half-told.
//!
//! Rules:
//! - A claim whose caller went away before it learned that it holds the claim is released: that caller cannot
//!   have sent the call, and a claim nobody settles would otherwise stay `in_flight` (renewed by its live
//!   owner) and make every retry wait. [`Delivery`] carries a `Claimed` outcome to the caller and releases the
//!   claim if it is dropped on the way, wherever that happens (a failed send, a dropped receiver).
//! - Settles that talk to a server run on a task of their own ([`detached`]), so they finish once started even
//!   if their caller is dropped. (SQLite jobs need no task: once queued, the worker runs them regardless.)

use std::future::Future;

use super::error::LedgerError;
use super::types::{ClaimOutcome, ClaimRecord};

/// What to do with a claim nobody received.
pub(crate) type Abandon = Box<dyn FnOnce(ClaimRecord) + Send>;

/// A claim outcome on its way to the caller.
pub(crate) struct Delivery {
    outcome: Option<ClaimOutcome>,
    abandon: Option<Abandon>,
}

impl Delivery {
    pub(crate) fn new(outcome: ClaimOutcome, abandon: Abandon) -> Delivery {
        Delivery { outcome: Some(outcome), abandon: Some(abandon) }
    }

    /// The outcome, now in the caller's hands.
    pub(crate) fn take(mut self) -> Result<ClaimOutcome, LedgerError> {
        self.abandon = None;
        self.outcome.take().ok_or_else(|| LedgerError::unavailable("a claim outcome was delivered twice"))
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let (Some(ClaimOutcome::Claimed(record)), Some(abandon)) = (self.outcome.take(), self.abandon.take()) {
            abandon(record);
        }
    }
}

/// Runs `operation` on its own task and waits for it; dropping the wait does not stop the operation.
pub(crate) async fn detached<T, F>(operation: F) -> Result<T, LedgerError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, LedgerError>> + Send + 'static,
{
    tokio::spawn(operation).await.map_err(|error| LedgerError::unavailable(format!("a ledger task failed: {error}")))?
}

/// Spawns `release` on the current runtime, if there is one (a claim abandoned while the runtime shuts down is
/// left to lease expiry or to the next start's orphaning).
pub(crate) fn spawn_release<F>(release: F)
where
    F: Future<Output = Result<(), LedgerError>> + Send + 'static,
{
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            if let Err(error) = release.await {
                tracing::warn!(%error, "ledger: cannot release a claim whose caller went away");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    fn record() -> ClaimRecord {
        ClaimRecord::sample("o", Duration::from_secs(1))
    }

    fn recording() -> (Arc<Mutex<Vec<String>>>, Abandon) {
        let abandoned = Arc::new(Mutex::new(Vec::new()));
        let log = abandoned.clone();
        (abandoned, Box::new(move |record: ClaimRecord| log.lock().expect("lock").push(record.id)))
    }

    #[test]
    fn dropped_claims_are_abandoned_and_taken_ones_are_not() {
        let (abandoned, abandon) = recording();
        drop(Delivery::new(ClaimOutcome::Claimed(record()), abandon));
        assert_eq!(*abandoned.lock().expect("lock"), ["id"]);

        let (abandoned, abandon) = recording();
        let outcome = Delivery::new(ClaimOutcome::Claimed(record()), abandon).take().expect("delivered");
        assert!(matches!(outcome, ClaimOutcome::Claimed(_)));
        let (existing, abandon) = recording();
        drop(Delivery::new(ClaimOutcome::Existing(record()), abandon));
        assert!(abandoned.lock().expect("lock").is_empty());
        assert!(existing.lock().expect("lock").is_empty(), "another's claim is never released");
    }
}
