//! Operators' decisions, wherever they were taken — an approval decision on a console or with `switchyard calls
//! approve|deny`, a resolution with `switchyard calls resolve` — announced once by one of the gateways sharing
//! the ledger: counted in `switchyard_approvals_total` and written to the audit trail as `approval_decision` and
//! `resolution` events (docs/operations.md, *Audit trail*).
//!
//! Rules:
//! - The command line writes only the ledger, so every gateway reads back the decisions of the last
//!   [`LOOKBACK`] ([`watch`], every [`POLL`]) and announces each one whose mark it takes first
//!   ([`LedgerStore::take_announcement`]). A console's decision takes its mark as it is made
//!   ([`announce_decision`]), so the gateway that made it announces it at once and the polls pass over it.
//! - A decision is looked for within [`LOOKBACK`] of its time on the decider's clock: one older than that when a
//!   gateway first reads it (every gateway was stopped longer, or the decider's clock is behind by more) is not
//!   announced; the ledger still holds it (`switchyard calls show`).
//! - A mark the ledger fails to take is asked for again at the next poll; a console's decision whose mark fails
//!   is announced anyway (twice rather than never).
//! - Resolutions are read only with the audit trail on (they are counted nowhere else), so gateways sharing a
//!   ledger are meant to share their `[audit]` too.
//! - Off the call path: one task per gateway, one or two reads per poll, and none while there is nothing to
//!   announce: decisions are read only while some policy has `approve` globs or the audit trail is on (a gateway
//!   with neither holds no request an operator could decide, and writes no event), resolutions only with the
//!   audit trail on.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::task::JoinHandle;

use super::CallRouter;
use crate::ledger::{Announced, ApprovalRow, ClaimKey, LedgerError, LedgerStore, ResolutionRecord};
use crate::telemetry::audit::AuditEvent;
use crate::telemetry::{LogThrottle, Metrics};

/// How often each gateway reads the decisions back.
pub const POLL: Duration = Duration::from_secs(2);
/// How far back each read looks.
pub const LOOKBACK: Duration = Duration::from_secs(600);

/// The decisions this gateway has already passed on (announced, or found taken by another), within the window.
type Seen = HashSet<(Announced, String, SystemTime)>;

static LEDGER_FAILURES: LogThrottle = LogThrottle::new();

/// Starts the task that reads decisions back every [`POLL`]. It runs until aborted.
pub fn watch(router: &Arc<CallRouter>) -> JoinHandle<()> {
    let router = Arc::clone(router);
    tokio::spawn(async move {
        let (store, metrics) = (&router.ledger.store, router.ledger.metrics.as_ref());
        let mut seen = Seen::new();
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let decisions = router.routing.load().policies.any_approvals() || metrics.audit().is_some();
            if let Err(error) = poll(store, metrics, decisions, &mut seen).await
                && let Some(left_out) = LEDGER_FAILURES.admit()
            {
                tracing::warn!(%error, left_out, "cannot read operators' decisions back from the ledger");
            }
        }
    })
}

/// Reads back and announces the approval decisions (when `decisions`) and the resolutions (with the audit trail
/// on) of the last [`LOOKBACK`].
async fn poll(store: &LedgerStore, metrics: &Metrics, decisions: bool, seen: &mut Seen) -> Result<(), LedgerError> {
    let since = SystemTime::now().checked_sub(LOOKBACK).unwrap_or(SystemTime::UNIX_EPOCH);
    seen.retain(|(_, _, at)| *at >= since);
    let decided = if decisions { store.decided_approvals_since(since).await? } else { Vec::new() };
    for row in decided {
        let Some(at) = row.decided_at else { continue };
        if first_to_take(store, seen, Announced::ApprovalDecision, &row.key, at).await? {
            announce_approval(metrics, &row);
        }
    }
    if let Some(audit) = metrics.audit() {
        for row in store.resolutions_since(since).await? {
            if first_to_take(store, seen, Announced::Resolution, &row.key, row.at).await? {
                audit.record(resolution_event(&row));
            }
        }
    }
    Ok(())
}

/// Whether this gateway announces the decision: it had not passed on it, and took its mark.
async fn first_to_take(
    store: &LedgerStore,
    seen: &mut Seen,
    kind: Announced,
    key: &ClaimKey,
    at: SystemTime,
) -> Result<bool, LedgerError> {
    let id = (kind, key.as_str().to_owned(), at);
    if seen.contains(&id) {
        return Ok(false);
    }
    let taken = store.take_announcement(kind, key.as_str(), at).await?;
    seen.insert(id);
    Ok(taken)
}

/// Announces `decided`, a decision just made through this gateway, unless a poll got to it first.
pub(super) async fn announce_decision(store: &LedgerStore, metrics: &Metrics, decided: &ApprovalRow) {
    let Some(at) = decided.decided_at else { return };
    match store.take_announcement(Announced::ApprovalDecision, decided.key.as_str(), at).await {
        Ok(false) => {}
        Ok(true) => announce_approval(metrics, decided),
        Err(error) => {
            tracing::warn!(%error, "cannot mark an approval decision as announced; announcing it anyway");
            announce_approval(metrics, decided);
        }
    }
}

/// Counts a decided request and writes its `approval_decision` event.
fn announce_approval(metrics: &Metrics, row: &ApprovalRow) {
    metrics.count_approval(row.state.as_str());
    if let Some(audit) = metrics.audit() {
        let event = AuditEvent::new("approval_decision")
            .field("key", row.key.as_str())
            .field("principal", row.principal.as_str())
            .field("backend", row.backend.as_str())
            .field("tool", row.tool.as_str())
            .field("decision", row.state.as_str())
            .field("by", text(row.decided_by.as_deref()))
            .time("decided_at", row.decided_at)
            .field("note", text(row.note.as_deref()));
        audit.record(event);
    }
}

/// The `resolution` event of an operator's resolution of an `unknown` call.
fn resolution_event(row: &ResolutionRecord) -> AuditEvent {
    AuditEvent::new("resolution")
        .field("key", row.key.as_str())
        .field("principal", row.principal.as_str())
        .field("backend", row.backend.as_str())
        .field("tool", row.tool.as_str())
        .field("resolution", row.resolution.state())
        .field("by", row.by.as_str())
        .time("resolved_at", Some(row.at))
        .field("note", text(row.note.as_deref()))
        .field("error", text(row.error.as_deref()))
}

fn text(value: Option<&str>) -> Value {
    value.map_or(Value::Null, Into::into)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ledger::{ApprovalRow, Decision};

    fn approvals_counted(metrics: &Metrics) -> bool {
        metrics.encode().lines().any(|line| line.starts_with("switchyard_approvals_total{decision=\"approved\"} 1"))
    }

    #[tokio::test]
    async fn decisions_are_read_back_only_while_something_can_be_announced() {
        let (store, metrics, now) = (LedgerStore::memory(), Metrics::new(), SystemTime::now());
        let row = ApprovalRow::awaiting("pay-1", now, Duration::from_secs(3600));
        store.request_approval(row.clone()).await.expect("request");
        let decision = Decision { approve: true, by: "ann".into(), note: None, at: now };
        store.decide_approval(&row.key, &decision).await.expect("decided with the command line");
        let mut seen = Seen::new();
        poll(&store, &metrics, false, &mut seen).await.expect("poll");
        assert!(!approvals_counted(&metrics), "no approve globs and no audit trail: nothing read, nothing counted");
        poll(&store, &metrics, true, &mut seen).await.expect("poll");
        assert!(approvals_counted(&metrics), "{}", metrics.encode());
    }
}
