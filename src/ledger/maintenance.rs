//! The ledger's background upkeep for one gateway instance: renewing its leases, expiring other instances'
//! dead leases, and purging old claims and expired revocations.
//!
//! Rules:
//! - Leases are renewed every third of their length, so two renewals can fail before a live instance's claims
//!   look dead.
//! - Every instance expires every instance's overdue leases (whoever notices first; the statement is
//!   idempotent), so a dead replica's claims become `unknown` even if it never comes back; on PostgreSQL its
//!   `working` tasks fail with them (see the Postgres store's tasks).
//! - Purging runs at most once per [`PURGE_EVERY`]; it deletes only settled claims older than the retention,
//!   approval requests decided (or expired undecided) before it, and revocations whose session has expired (an
//!   expired session id is refused without them).
//! - Errors are logged and the next round tries again; upkeep never stops the gateway.

use std::time::{Duration, SystemTime};

use super::LedgerStore;

/// How often old claims are purged.
pub const PURGE_EVERY: Duration = Duration::from_secs(60);

/// What [`maintain`] keeps up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maintenance {
    /// This instance's owner id (see [`super::instance_id`]).
    pub owner: String,
    /// The lease its claims are made with.
    pub lease: Duration,
    /// How long settled claims are kept.
    pub retention: Duration,
}

/// Runs the upkeep until the task is dropped or aborted; spawn it once per instance.
pub async fn maintain(store: LedgerStore, settings: Maintenance) {
    let mut ticks = tokio::time::interval((settings.lease / 3).max(Duration::from_millis(10)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_purge: Option<tokio::time::Instant> = None;
    loop {
        ticks.tick().await;
        let now = SystemTime::now();
        if let Err(error) = store.renew_leases(&settings.owner, now + settings.lease).await {
            tracing::warn!(%error, "ledger: cannot renew this instance's leases");
        }
        match store.expire_leases(now).await {
            Ok(0) => {}
            Ok(expired) => tracing::warn!(expired, "ledger: in-flight calls of a stopped instance marked unknown"),
            Err(error) => tracing::warn!(%error, "ledger: cannot expire leases"),
        }
        if last_purge.is_none_or(|at| at.elapsed() >= PURGE_EVERY) {
            last_purge = Some(tokio::time::Instant::now());
            let cutoff = now.checked_sub(settings.retention).unwrap_or(SystemTime::UNIX_EPOCH);
            match store.purge(cutoff).await {
                Ok(purged) => tracing::debug!(purged, "ledger: old claims purged"),
                Err(error) => tracing::warn!(%error, "ledger: cannot purge old claims"),
            }
            let now_unix = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_secs());
            if let Err(error) = store.purge_revocations(now_unix).await {
                tracing::warn!(%error, "ledger: cannot purge expired revocations");
            }
            if let Err(error) = store.purge_approvals(cutoff).await {
                tracing::warn!(%error, "ledger: cannot purge old approval requests");
            }
            if let Err(error) = store.purge_announcements(cutoff).await {
                tracing::warn!(%error, "ledger: cannot purge old announcement marks");
            }
            let now_ms = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64);
            if let Err(error) = store.purge_tasks(now_ms).await {
                tracing::warn!(%error, "ledger: cannot purge expired tasks");
            }
        }
    }
}
