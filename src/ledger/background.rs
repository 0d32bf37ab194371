//! Settles nobody waits for: a call's completion is handed to the store's writer and the agent is answered at
//! once (see ARCHITECTURE.md, *The completion is off the agent's path*).
//!
//! Rules:
//! - A queued settle is applied exactly as an awaited one would be, in the writer's next batch; the claim stays
//!   durably `in_flight` until then, so a duplicate waits for it (woken once it is durable) and a crash in the
//!   meantime leaves a claim that becomes `unknown`, never one that runs again.
//! - [`Pending`] counts the queued settles whose first attempt has not ended, so the shutdown's last step
//!   (`orphan`) applies them before it marks what is left `unknown`.
//! - A settle that failed because the store was unavailable is retried with backoff for [`RETRY_FOR`]; a settle
//!   the rules refuse is logged once (trying again cannot change the answer). Retries hold no [`Ticket`]: a
//!   shutdown does not wait for a store that is down.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::error::LedgerError;
use super::rules::OwnedSettle;
use super::types::{ClaimKey, Settlement};

/// How long a settle that failed is retried; after that the claim stays `in_flight` until this instance's next
/// start marks it `unknown`.
const RETRY_FOR: Duration = Duration::from_secs(600);
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// An owner's settle of one claim, queued for the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedSettle {
    pub(crate) key: ClaimKey,
    pub(crate) owner: String,
    pub(crate) settle: OwnedSettle,
}

impl QueuedSettle {
    pub(crate) fn new(key: &ClaimKey, owner: &str, settlement: &Settlement, max_result: usize) -> QueuedSettle {
        QueuedSettle { key: key.clone(), owner: owner.to_owned(), settle: OwnedSettle::of(settlement, max_result) }
    }
}

/// A store that can apply a queued settle and wait for the answer (for retries).
pub(crate) trait Resettle: Send + Sync + 'static {
    fn settle_queued(&self, queued: &QueuedSettle) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// The queued settles of one store whose first attempt has not ended.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    count: Mutex<usize>,
    drained: Notify,
}

/// One queued settle, counted in [`Pending`] until dropped.
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Pending>);

impl Pending {
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Ticket(self.clone())
    }

    fn count(&self) -> usize {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns once every settle queued so far has had its first attempt.
    pub(crate) async fn flushed(&self) {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Registered before the count is read, so a ticket dropped in between is not missed.
            drained.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            drained.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut count = self.0.count.lock().unwrap_or_else(PoisonError::into_inner);
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.0.drained.notify_waiters();
        }
    }
}

/// What a queued settle's first attempt ends with: nothing more on success; a retry on `runtime` when the store
/// was unavailable; a log line when the rules refused it.
pub(crate) fn finished<S: Resettle>(
    store: S,
    runtime: Option<Handle>,
    ticket: Ticket,
    queued: Arc<QueuedSettle>,
    result: Result<(), LedgerError>,
) {
    drop(ticket);
    match (result, runtime) {
        (Ok(()), _) => {}
        (Err(error @ LedgerError::Unavailable { .. }), Some(runtime)) => {
            tracing::warn!(key = %queued.key, %error, "ledger: cannot settle a claim; retrying in the background");
            runtime.spawn(retry(store, queued));
        }
        (Err(error), _) => refused(&queued.key, &error),
    }
}

/// Logs a settle that will not be applied.
pub(crate) fn refused(key: &ClaimKey, error: &LedgerError) {
    tracing::error!(%key, %error, "ledger: a claim could not be settled; it becomes `unknown` when its lease ends");
}

async fn retry<S: Resettle>(store: S, queued: Arc<QueuedSettle>) {
    let give_up = Instant::now() + RETRY_FOR;
    let mut pause = FIRST_PAUSE;
    while Instant::now() < give_up {
        tokio::time::sleep(pause).await;
        match store.settle_queued(&queued).await {
            Ok(()) => return tracing::info!(key = %queued.key, "ledger: claim settled after a retry"),
            Err(LedgerError::Unavailable { .. }) => {}
            Err(error) => return refused(&queued.key, &error),
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
    tracing::error!(key = %queued.key, "ledger: gave up settling a claim; it becomes `unknown` when this instance restarts");
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use crate::raw_json::RawJson;

    use super::*;

    #[tokio::test]
    async fn flushed_waits_for_every_ticket() {
        let pending = Arc::new(Pending::default());
        pending.flushed().await;
        let (first, second) = (pending.ticket(), pending.ticket());
        let waiting = {
            let pending = pending.clone();
            tokio::spawn(async move { pending.flushed().await })
        };
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one settle is still queued");
        drop(second);
        waiting.await.expect("flushed once both are done");
    }

    /// Fails with `Unavailable` `failures` times, then succeeds; counts its attempts.
    struct Flaky {
        failures: usize,
        attempts: Arc<AtomicUsize>,
    }

    impl Resettle for Flaky {
        async fn settle_queued(&self, _: &QueuedSettle) -> Result<(), LedgerError> {
            let attempt = self.attempts.fetch_add(1, Ordering::SeqCst);
            if attempt < self.failures { Err(LedgerError::unavailable("down")) } else { Ok(()) }
        }
    }

    fn queued() -> Arc<QueuedSettle> {
        let completed = Settlement::Completed(RawJson::of(&json!({"ok": 1})));
        Arc::new(QueuedSettle::new(&ClaimKey::idempotency("p", "k"), "gw", &completed, 100))
    }

    #[tokio::test]
    async fn unavailable_stores_are_retried_and_refusals_are_not() {
        let attempts = Arc::new(AtomicUsize::new(0));
        let pending = Arc::new(Pending::default());
        let store = Flaky { failures: 1, attempts: attempts.clone() };
        finished(store, Some(Handle::current()), pending.ticket(), queued(), Err(LedgerError::unavailable("down")));
        pending.flushed().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while attempts.load(Ordering::SeqCst) < 2 {
            assert!(Instant::now() < deadline, "the settle was not retried until it worked");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(FIRST_PAUSE * 3).await;
        assert_eq!(attempts.load(Ordering::SeqCst), 2, "one more failure, then the retry that worked, then no more");

        let attempts = Arc::new(AtomicUsize::new(0));
        let store = Flaky { failures: 0, attempts: attempts.clone() };
        let refusal = Err(LedgerError::NotFound { key: "k".into() });
        finished(store, Some(Handle::current()), pending.ticket(), queued(), refusal);
        tokio::time::sleep(FIRST_PAUSE * 2).await;
        assert_eq!(attempts.load(Ordering::SeqCst), 0, "a refusal is final");
    }
}
