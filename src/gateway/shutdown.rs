//! The end of serving: the grace during which a stopping gateway still answers (not ready), the drain deadline
//! after which the requests still running are cut, and what is settled after the last request (calls left running
//! marked `unknown`, orphaned tasks failed, spans and audit events flushed, stdio processes stopped).
//!
//! Rules: `shutdown_grace` and `shutdown_drain` are read when the signal comes, so a reload before it applies;
//! every flush waits at most `FLUSH_WAIT`, so a dead collector cannot hold the process.

use std::time::Duration;

use super::{Gateway, telemetry};
use crate::front::Front;
use crate::swap::Swap;
use crate::telemetry::ClaimWrite;

/// How much longer than its steps stopping the stdio processes at shutdown may take.
const STOP_MARGIN: Duration = Duration::from_secs(1);
/// How long the answers of the requests cut at the end of the drain get to be written before their connections
/// are dropped.
pub(super) const CUT_GRACE: Duration = Duration::from_secs(2);

impl Gateway {
    /// After the last request: what this process leaves is settled (its running calls `unknown`, its tasks
    /// failed), and the spans and audit events still queued are flushed, each for at most `FLUSH_WAIT`.
    pub(super) async fn settle_leftovers(&self) {
        // Calls still running now will not be settled by this process: their outcome is unknown.
        let ledger = self.router.ledger();
        match ledger.store.orphan(&ledger.owner).await {
            Ok(0) => {}
            Ok(left) => {
                tracing::warn!(left, "calls still running at shutdown are marked `unknown`");
                self.metrics().count_claims(ClaimWrite::Unknown, left);
            }
            Err(error) => tracing::error!(%error, "ledger: cannot mark the calls still running at shutdown"),
        }
        crate::router::fail_orphaned_tasks(&ledger.store, &ledger.owner).await;
        if let Some(tracer) = &self.tracer
            && tokio::time::timeout(telemetry::FLUSH_WAIT, tracer.flush()).await.is_err()
        {
            tracing::warn!("the last spans did not reach the collector before shutdown");
        }
        if let Some(audit) = self.metrics().audit()
            && tokio::time::timeout(telemetry::FLUSH_WAIT, audit.flush()).await.is_err()
        {
            tracing::warn!("the last audit events were not written before shutdown");
        }
    }

    /// Stops every stdio backend process this gateway started, each with its process group (stdin closed,
    /// SIGTERM, SIGKILL), and waits until they are stopped; `serve` does it at shutdown, `check` and `tools` after
    /// discovering.
    pub async fn stop_processes(&self) {
        // Every step of stopping a process may take the grace period.
        self.stdio.groups.stop_all(self.stdio.grace * 3 + STOP_MARGIN).await;
    }
}

/// The first phase of a graceful shutdown: `front` says it is stopping (not ready, connections closed after each
/// answer) and keeps serving for `grace` (as configured when the signal comes), so that load balancers stop
/// sending before the listener stops accepting.
pub(super) async fn stop_after_grace(front: &Front, grace: &Swap<Duration>) {
    front.stopping.begin();
    let grace = *grace.load();
    tracing::info!(
        grace_ms = grace.as_millis(),
        "stopping: /readyz answers 503; serving until shutdown_grace ends, then draining"
    );
    tokio::time::sleep(grace).await;
}

/// Completes `drain` (as configured when the signal comes) after the shutdown signal (never, if there is none).
pub(super) async fn drain_deadline(stop: tokio::sync::oneshot::Receiver<()>, drain: &Swap<Duration>) {
    if stop.await.is_ok() {
        tokio::time::sleep(*drain.load()).await;
    } else {
        std::future::pending::<()>().await;
    }
}
