//! Settles nobody waits for: a call's completion is handed to the store's writer and the agent is answered at
//! once (see docs/ledger.md, *The completion is off the agent's path*), and it lingers there briefly so that it
//! commits together with the next job instead of costing a writer wake-up and a transaction of its own (see
//! *A completion lingers for the next job*).
//!
//! Rules:
//! - A queued settle is applied exactly as an awaited one would be, in the writer's next batch; the claim stays
//!   durably `in_flight` until then, so a duplicate waits for it (woken once it is durable) and a crash in the
//!   meantime leaves a claim that becomes `unknown`, never one that runs again.
//! - [`Parking`] holds the queued settles without waking the writer. The writer takes them, ahead of what woke
//!   it, whenever it wakes for any other job; otherwise a timer nudges it once the oldest has waited
//!   [`LINGER`]; the store nudges it at once when [`MAX_PARKED`] are waiting, before `orphan` (shutdown), and
//!   the writer takes what is left when the store is dropped. A duplicate's claim is such a job, so it finds
//!   the completion already committed.
//! - [`Pending`] counts the queued settles whose first attempt has not ended, so the shutdown's last step
//!   (`orphan`) applies them before it marks what is left `unknown`.
//! - A settle that failed because the store was unavailable is retried with backoff for [`RETRY_FOR`]; a settle
//!   the rules refuse is logged once (trying again cannot change the answer). Retries hold no [`Ticket`]: a
//!   shutdown does not wait for a store that is down.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::error::LedgerError;
use super::rules::OwnedSettle;
use super::types::{ClaimKey, Settlement};
use crate::telemetry::LogThrottle;

/// How long a settle that failed is retried; after that the claim stays `in_flight` until this instance's next
/// start marks it `unknown`.
const RETRY_FOR: Duration = Duration::from_secs(600);
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(10);
/// The longest a queued settle waits for another job to ride with before the writer is nudged for it alone.
pub(crate) const LINGER: Duration = Duration::from_millis(2);
/// The most settles that wait together; the next one nudges the writer at once.
pub(crate) const MAX_PARKED: usize = 256;

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
        *self.count.lock() += 1;
        Ticket(self.clone())
    }

    fn count(&self) -> usize {
        *self.count.lock()
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
        let mut count = self.0.count.lock();
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.0.drained.notify_waiters();
        }
    }
}

/// What a queued settle's first attempt ends with: nothing more on success; a retry on `runtime` when the store
/// was unavailable (and is still open); a log line when the rules refused it.
pub(crate) fn finished<S: Resettle>(
    store: Option<S>,
    runtime: Option<Handle>,
    ticket: Ticket,
    queued: Arc<QueuedSettle>,
    result: Result<(), LedgerError>,
) {
    drop(ticket);
    match (result, store.zip(runtime)) {
        (Ok(()), _) => {}
        (Err(error @ LedgerError::Unavailable { .. }), Some((store, runtime))) => {
            if let Some(left_out) = UNSETTLED.admit() {
                tracing::warn!(key = %queued.key, %error, left_out, "ledger: cannot settle a claim; retrying in the background");
            }
            runtime.spawn(retry(store, queued));
        }
        (Err(error), _) => refused(&queued.key, &error),
    }
}

/// The queued settles waiting for the writer's next wake-up, oldest first.
pub(crate) struct Parking<J> {
    state: Mutex<Waiting<J>>,
    /// Told when a settle parks with no deadline running, for the timer that waits for it.
    armed: Notify,
    linger: Duration,
}

struct Waiting<J> {
    jobs: Vec<J>,
    /// When the timer nudges the writer; `None` while nothing waits, or once a nudge is on its way (the writer
    /// then takes whatever parked until it wakes).
    deadline: Option<Instant>,
}

/// What the store does after parking a settle.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum Parked {
    /// It waits for the next job or the timer.
    Waits,
    /// [`MAX_PARKED`] are waiting: nudge the writer now.
    Full,
}

impl<J> std::fmt::Debug for Parking<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parking").field("parked", &self.state.lock().jobs.len()).finish_non_exhaustive()
    }
}

impl<J> Parking<J> {
    /// Settles wait at most `linger` ([`LINGER`] in service; tests choose).
    pub(crate) fn new(linger: Duration) -> Parking<J> {
        Parking { state: Mutex::new(Waiting { jobs: Vec::new(), deadline: None }), armed: Notify::new(), linger }
    }

    /// Parks `job` until the writer's next wake-up.
    pub(crate) fn park(&self, job: J) -> Parked {
        let mut state = self.state.lock();
        let first = state.jobs.is_empty();
        if first {
            state.deadline = Some(Instant::now() + self.linger);
        }
        state.jobs.push(job);
        if state.jobs.len() >= MAX_PARKED {
            state.deadline = None;
            return Parked::Full;
        }
        drop(state);
        if first {
            self.armed.notify_one();
        }
        Parked::Waits
    }

    /// Moves every parked job to the end of `batch` (the writer, on each wake-up, before what woke it).
    pub(crate) fn take_into(&self, batch: &mut Vec<J>) {
        let mut state = self.state.lock();
        state.deadline = None;
        batch.append(&mut state.jobs);
    }

    /// Calls `nudge` whenever parked jobs reach their deadline untaken; runs until aborted. Sleeps without a
    /// timer while nothing is parked.
    async fn nudge_when_due(&self, nudge: impl Fn()) {
        loop {
            let armed = self.armed.notified();
            tokio::pin!(armed);
            // Registered before the state is read, so a settle parked in between is not missed.
            armed.as_mut().enable();
            let Some(deadline) = self.state.lock().deadline else {
                armed.await;
                continue;
            };
            tokio::time::sleep_until(deadline).await;
            let due = {
                let mut state = self.state.lock();
                // Another deadline means the writer took those jobs meanwhile and newer ones wait.
                let due = state.deadline == Some(deadline);
                if due {
                    state.deadline = None;
                }
                due
            };
            if due {
                nudge();
            }
        }
    }
}

/// The task that nudges a store's writer for parked settles nobody else took in time; stops when dropped
/// (with its store).
#[derive(Debug)]
pub(crate) struct Nudger(AbortHandle);

impl Nudger {
    pub(crate) fn start<J: Send + 'static>(parking: Arc<Parking<J>>, nudge: impl Fn() + Send + 'static) -> Nudger {
        Nudger(tokio::spawn(async move { parking.nudge_when_due(nudge).await }).abort_handle())
    }
}

impl Drop for Nudger {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One line per interval ([`LogThrottle`]) for settles that failed for an unavailable store, and
/// for those that will not be applied.
static UNSETTLED: LogThrottle = LogThrottle::new();
static REFUSED: LogThrottle = LogThrottle::new();

/// Logs a settle that will not be applied.
pub(crate) fn refused(key: &ClaimKey, error: &LedgerError) {
    if let Some(left_out) = REFUSED.admit() {
        tracing::error!(%key, %error, left_out, "ledger: a claim could not be settled; it becomes `unknown` when its lease ends");
    }
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

    fn parked(parking: &Parking<usize>) -> Vec<usize> {
        let mut taken = Vec::new();
        parking.take_into(&mut taken);
        taken
    }

    /// Starts a nudger over `parking` that counts its nudges.
    fn counted(parking: &Arc<Parking<usize>>) -> (Nudger, Arc<AtomicUsize>) {
        let nudges = Arc::new(AtomicUsize::new(0));
        let counter = nudges.clone();
        (
            Nudger::start(parking.clone(), move || {
                counter.fetch_add(1, Ordering::SeqCst);
            }),
            nudges,
        )
    }

    async fn until_nudged(nudges: &AtomicUsize, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while nudges.load(Ordering::SeqCst) < count {
            assert!(Instant::now() < deadline, "a parked job was never nudged for");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn parked_jobs_go_with_the_next_wake_up_in_order() {
        let parking = Arc::new(Parking::new(Duration::from_secs(3600)));
        let (_nudger, nudges) = counted(&parking);
        assert_eq!(parking.park(1), Parked::Waits);
        assert_eq!(parking.park(2), Parked::Waits);
        assert_eq!(parked(&parking), [1, 2], "taken in the order parked, by the next job's wake-up");
        assert!(parked(&parking).is_empty());
        assert_eq!(nudges.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn jobs_nobody_takes_are_nudged_for_once_due() {
        let parking = Arc::new(Parking::new(Duration::from_millis(1)));
        let (_nudger, nudges) = counted(&parking);
        assert_eq!(parking.park(3), Parked::Waits);
        until_nudged(&nudges, 1).await;
        assert_eq!(parking.park(4), Parked::Waits, "parked before the nudged writer took the first");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(nudges.load(Ordering::SeqCst), 1, "the nudge on its way takes it too");
        assert_eq!(parked(&parking), [3, 4]);
        assert_eq!(parking.park(5), Parked::Waits);
        until_nudged(&nudges, 2).await;
    }

    #[test]
    fn a_full_parking_asks_for_a_nudge() {
        let parking = Parking::new(Duration::from_secs(3600));
        for job in 1..MAX_PARKED {
            assert_eq!(parking.park(job), Parked::Waits);
        }
        assert_eq!(parking.park(MAX_PARKED), Parked::Full);
        assert_eq!(parked(&parking).len(), MAX_PARKED);
        assert_eq!(parking.park(1), Parked::Waits, "empty again");
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
        finished(
            Some(store),
            Some(Handle::current()),
            pending.ticket(),
            queued(),
            Err(LedgerError::unavailable("down")),
        );
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
        finished(Some(store), Some(Handle::current()), pending.ticket(), queued(), refusal);
        tokio::time::sleep(FIRST_PAUSE * 2).await;
        assert_eq!(attempts.load(Ordering::SeqCst), 0, "a refusal is final");
    }
}
