//! Pinned tool definitions: on every discovery each tool's and prompt's definition (the fields of
//! [`PINNED_FIELDS`], canonical JSON, SHA-256) is compared with the pin the ledger holds for it, and the
//! backend's quarantined items are handed to the catalog.
//!
//! Rules (docs/governance.md, *Pinned tool definitions*):
//! - The first discovery of a backend with no pins trusts every item (a flagged one is held when
//!   `screen = "quarantine"`); later, a new item is trusted unless `pin_new = "quarantine"` or it is flagged.
//! - A definition that differs from its pin is recorded as offered and screened again: `pin = "strict"`
//!   quarantines the item, and so does `"warn"` when it is flagged and `screen = "quarantine"`; otherwise `"warn"`
//!   serves it. Both log it and count it (`switchyard_tool_definition_changes_total`). The pinned
//!   definition coming back withdraws the offer. `pin = "off"` neither records nor quarantines.
//! - What is quarantined is read back from the ledger, never decided locally, so every replica sharing the store
//!   serves the same tools: each instance polls the pins' revision ([`watch`], every [`POLL`]) off the call path,
//!   rediscovers a backend whose quarantine an approval or another replica changed (so it serves the approved
//!   definition, not the one it listed before), and tells agents whose tools changed
//!   (`notifications/tools/list_changed`).
//! - The poll costs nothing while there is nothing to watch: it reads the revision only while some backend with
//!   pinning on had pins when this instance last read them ([`PinnedBackends`]), and sleeps otherwise. Nothing is
//!   missed by it: an operator (the CLI, the console, another replica) can only approve or reject a pin that
//!   exists, and a backend whose pins this instance read as none serves nothing a pin could hold (its discovery
//!   records its pins before its listing is served, then reads them back); so when this instance next lists
//!   items that have pins, that discovery reads them, wakes the poll, and the next poll sees the revision every
//!   later decision raises. Turning pinning on by a reload rediscovers the backend, which reads its pins the same
//!   way.
//! - Fail closed: a discovery whose definitions cannot be checked against the ledger fails (the backend keeps its
//!   last good listing and is retried), and a failed poll keeps the quarantine in force as it was (logged,
//!   throttled).
//! - With the audit trail on, each approval a poll finds that this instance had not seen becomes a `pin_approval`
//!   event ([`AuditedApprovals`]), written by the one gateway sharing the ledger that takes its mark first (as
//!   operators' other decisions are, see [`super::announcements`]); the approvals already there when a backend's
//!   pins are first read are the starting point, not events.
//! - The call path pays nothing: only a name that fails to resolve is looked up among the quarantined
//!   ([`refusal`]), and the refusal is a `-32602` that names the tool and the operator's commands.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Map, Value};
use tokio::task::JoinHandle;

use super::{CallRouter, RpcFailure, ToolsChanged};
use crate::catalog::screen::screen;
use crate::catalog::{Listing, Quarantined, Route};
use crate::civil_date::unix_now;
use crate::ledger::PinKey;
use crate::ledger::{
    Announced, LedgerError, LedgerStore, PinOffer, PinRow, PinState, canonical_digest, canonical_json,
};
use crate::mcp::jsonrpc;
use crate::telemetry::LogThrottle;
use crate::telemetry::audit::{Audit, AuditEvent};

/// How often each instance looks for pins changed by another (an operator's approval, another replica).
pub const POLL: Duration = Duration::from_secs(2);

/// The fields of a definition that are pinned; everything else (`_meta`, icons) may change freely.
pub const PINNED_FIELDS: &[&str] =
    &["name", "title", "description", "inputSchema", "outputSchema", "annotations", "arguments"];

/// What a changed definition does (`pin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinMode {
    Strict,
    Warn,
    Off,
}

/// A backend's pinning rules, lowered from its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinRules {
    pub mode: PinMode,
    /// `pin_new = "quarantine"`.
    pub quarantine_new: bool,
    /// `screen = "quarantine"`.
    pub quarantine_flagged: bool,
    /// `max_description`, in bytes.
    pub max_description: usize,
}

/// The pinned fields of one definition, as the object whose canonical JSON is hashed.
pub fn pinned_fields(definition: &Value) -> Value {
    let pinned = PINNED_FIELDS.iter().filter_map(|&field| Some((field.to_owned(), definition.get(field)?.clone())));
    Value::Object(pinned.collect::<Map<_, _>>())
}

/// The `-32602` answer to a call of a quarantined tool or (`kind` = "prompt") a get of a quarantined prompt.
pub fn refusal(kind: &str, name: &str, route: &Route) -> RpcFailure {
    let item = format!("{}/{}", route.backend, route.name);
    let text = format!(
        "{kind} `{name}` changed since an operator approved it (or is new); an operator must approve the change \
         (`switchyard tools diff {item}`, then `switchyard tools approve {item}`) before it can be used"
    );
    RpcFailure::new(jsonrpc::INVALID_PARAMS, text)
}

static LEDGER_FAILURES: LogThrottle = LogThrottle::new();

fn log_ledger_failure(backend: &str, error: &LedgerError) {
    if let Some(left_out) = LEDGER_FAILURES.admit() {
        tracing::error!(%backend, %error, left_out, "pins: the ledger failed; the quarantine stays as it was");
    }
}

impl CallRouter {
    /// Records `listing`'s definitions against `backend`'s pins and applies its quarantine (before the listing
    /// itself is recorded, so a changed definition is never served in between). Returns whether the tools agents
    /// see of it changed, or, when the pins cannot be read or written, why the listing must not be served (the
    /// discovery then fails and the last good listing stays).
    pub(super) async fn judge_pins(&self, backend: &str, listing: &Listing) -> Result<bool, String> {
        let rules = self.routing.load().pins.get(backend).copied();
        if let Some(rules) = rules.filter(|rules| rules.mode != PinMode::Off) {
            let recorded = self.record_pins(backend, &rules, listing).await;
            recorded.map_err(|error| format!("the tool definitions of `{backend}` cannot be checked: {error}"))?;
        }
        Ok(self.apply_quarantine(backend).await)
    }

    async fn record_pins(&self, backend: &str, rules: &PinRules, listing: &Listing) -> Result<(), LedgerError> {
        let store = &self.ledger.store;
        let pins = store.pins(Some(backend)).await?;
        let first = pins.is_empty();
        let known: HashMap<(&str, &str), &PinRow> =
            pins.iter().map(|row| ((row.key.kind.as_str(), row.key.name.as_str()), row)).collect();
        let items =
            listing.tools.iter().map(|tool| ("tool", tool)).chain(listing.prompts.iter().map(|p| ("prompt", p)));
        let mut changes = 0;
        for (kind, definition) in items {
            let Some(name) = definition.get("name").and_then(Value::as_str) else { continue };
            let key = PinKey { backend: backend.to_owned(), kind: kind.to_owned(), name: name.to_owned() };
            let fields = pinned_fields(definition);
            let digest = canonical_digest(&fields);
            match known.get(&(kind, name)) {
                None => self.trust(&key, rules, definition, &fields, digest, first).await?,
                Some(row) if row.digest == digest && row.offered_digest.is_none() => {}
                Some(row) if row.offered_digest.as_deref() == Some(digest.as_str()) => {}
                Some(row) => {
                    let flagged = flag(&key, rules, definition);
                    let quarantine = rules.mode == PinMode::Strict || (flagged && rules.quarantine_flagged);
                    let offer = PinOffer { key, digest, definition: canonical_json(&fields), quarantine };
                    if store.offer_pin(&offer).await? && row.digest != offer.digest {
                        changes += 1;
                        let served = if quarantine { "quarantined until an operator approves it" } else { "served" };
                        tracing::warn!(%backend, kind, name, "the backend changed a pinned definition; {served}");
                    }
                }
            }
        }
        if changes > 0 {
            self.ledger.metrics.definitions_changed(backend, changes);
        }
        Ok(())
    }

    /// First trust of an item: pinned, or held for approval when it is new after the first discovery and
    /// `pin_new = "quarantine"`, or flagged by screening and `screen = "quarantine"`.
    async fn trust(
        &self,
        key: &PinKey,
        rules: &PinRules,
        definition: &Value,
        fields: &Value,
        digest: String,
        first: bool,
    ) -> Result<(), LedgerError> {
        let hold = (flag(key, rules, definition) && rules.quarantine_flagged) || (!first && rules.quarantine_new);
        let text = canonical_json(fields);
        let (digest, definition, state, offered_digest, offered) = match hold {
            true => (String::new(), String::new(), PinState::Quarantined, Some(digest), Some(text)),
            false => (digest, text, PinState::Pinned, None, None),
        };
        let row = PinRow {
            key: key.clone(),
            digest,
            definition,
            state,
            offered_digest,
            offered,
            first_seen: unix_now(),
            approved_by: None,
            approved_at: None,
        };
        if self.ledger.store.trust_pin(&row).await? && hold {
            tracing::warn!(backend = %key.backend, kind = %key.kind, name = %key.name, "quarantined until an operator approves it");
        }
        Ok(())
    }
}

/// Screens `definition` (logging each finding); whether it was flagged.
fn flag(key: &PinKey, rules: &PinRules, definition: &Value) -> bool {
    let findings = screen(definition, rules.max_description);
    for finding in &findings {
        tracing::warn!(backend = %key.backend, kind = %key.kind, name = %key.name, %finding, "suspicious definition");
    }
    !findings.is_empty()
}

/// One approval of a pin: (kind, name, approved at).
type Approval = (String, String, u64);

/// The pin approvals this instance has seen, per backend.
#[derive(Debug, Default)]
pub(super) struct AuditedApprovals(parking_lot::Mutex<HashMap<String, HashSet<Approval>>>);

impl AuditedApprovals {
    /// The approvals among `pins` not seen before (none the first time `backend`'s pins are read).
    fn unseen<'a>(&self, backend: &str, pins: &'a [PinRow]) -> Vec<&'a PinRow> {
        let mut seen = self.0.lock();
        let first = !seen.contains_key(backend);
        let known = seen.entry(backend.to_owned()).or_default();
        let mut fresh = Vec::new();
        for row in pins {
            let Some(at) = row.approved_at.filter(|_| row.approved_by.is_some()) else { continue };
            if known.insert((row.key.kind.clone(), row.key.name.clone(), at)) && !first {
                fresh.push(row);
            }
        }
        fresh
    }
}

/// Writes `row`'s `pin_approval` event unless another gateway sharing the ledger took its mark first (see
/// [`crate::ledger::Announced`]); one whose mark cannot be taken is written anyway (twice rather than never).
async fn announce_pin_approval(store: &LedgerStore, audit: &Audit, backend: &str, row: &PinRow) {
    let (Some(by), Some(at)) = (&row.approved_by, row.approved_at) else { return };
    let mark = format!("{backend}/{}/{}", row.key.kind, row.key.name);
    let when = UNIX_EPOCH + Duration::from_secs(at);
    match store.take_announcement(Announced::PinApproval, &mark, when).await {
        Ok(false) => return,
        Ok(true) => {}
        Err(error) => tracing::warn!(%error, %mark, "cannot mark a pin approval as announced; announcing it anyway"),
    }
    let event = AuditEvent::new("pin_approval")
        .field("backend", backend)
        .field("kind", row.key.kind.as_str())
        .field("name", row.key.name.as_str())
        .field("digest", row.digest.as_str())
        .field("by", by.as_str())
        .field("approved_at", at);
    audit.record(event);
}

/// The backends with pinning on whose pins this instance last read as some: what the poll of the revision watches.
#[derive(Debug)]
pub(super) struct PinnedBackends {
    backends: parking_lot::Mutex<HashSet<Arc<str>>>,
    /// Whether `backends` holds any; the poll waits on it.
    any: tokio::sync::watch::Sender<bool>,
}

impl Default for PinnedBackends {
    fn default() -> Self {
        Self { backends: parking_lot::Mutex::default(), any: tokio::sync::watch::Sender::new(false) }
    }
}

impl PinnedBackends {
    /// Notes whether `backend` has pins to watch.
    fn note(&self, backend: &str, pinned: bool) {
        let mut backends = self.backends.lock();
        if pinned && !backends.contains(backend) {
            backends.insert(Arc::from(backend));
        } else if !pinned {
            backends.remove(backend);
        }
        self.publish(!backends.is_empty());
    }

    /// Keeps only the backends `keep` accepts (pinning still on after a reload); whether any is left.
    fn retain(&self, keep: impl Fn(&str) -> bool) -> bool {
        let mut backends = self.backends.lock();
        backends.retain(|backend| keep(backend));
        self.publish(!backends.is_empty());
        !backends.is_empty()
    }

    fn publish(&self, any: bool) {
        self.any.send_if_modified(|was| std::mem::replace(was, any) != any);
    }

    /// Returns once some backend has pins to watch (at once when one has).
    async fn watched(&self) {
        // The sender lives as long as `self`: waiting cannot fail while this borrow lasts.
        let _ = self.any.subscribe().wait_for(|any| *any).await;
    }
}

impl CallRouter {
    /// Reads `backend`'s pins and hands its quarantined items to the catalog (none when `pin = "off"`); counts
    /// them. Returns whether the tools agents see of it changed.
    async fn apply_quarantine(&self, backend: &str) -> bool {
        let rules = self.routing.load().pins.get(backend).copied();
        if rules.is_none_or(|rules| rules.mode == PinMode::Off) {
            self.pinned.note(backend, false);
            return self.catalog.quarantine(backend, Quarantined::new());
        }
        let pins = match self.ledger.store.pins(Some(backend)).await {
            Ok(pins) => pins,
            Err(error) => {
                log_ledger_failure(backend, &error);
                return false;
            }
        };
        let quarantined: Quarantined = pins
            .iter()
            .filter(|row| row.state == PinState::Quarantined)
            .map(|row| (if row.key.kind == "prompt" { "prompt" } else { "tool" }, row.key.name.clone()))
            .collect();
        self.pinned.note(backend, !pins.is_empty());
        self.ledger.metrics.tool_pins(backend, pins.len() - quarantined.len(), quarantined.len());
        if let Some(audit) = self.ledger.metrics.audit() {
            for row in self.audited_approvals.unseen(backend, &pins) {
                announce_pin_approval(&self.ledger.store, audit, backend, row).await;
            }
        }
        self.catalog.quarantine(backend, quarantined)
    }

    /// Applies every backend's quarantine again; a backend whose quarantine changed is rediscovered (what another
    /// replica or an operator decided was about definitions this instance may not have listed yet) and agents
    /// whose tools changed are told.
    async fn reapply_quarantines(&self) {
        let backends: Vec<Arc<str>> = self.routing.load().targets.keys().cloned().collect();
        for backend in backends {
            if self.apply_quarantine(&backend).await {
                if let Err(error) = self.discover(&backend).await {
                    tracing::warn!(%backend, %error, "rediscovery after a change of pins failed");
                }
                // Nobody listening (no agent stream open) is fine.
                let _ = self.tool_changes.send(ToolsChanged::Backend(backend));
            }
        }
    }

    /// Whether some backend still has pins to watch: pinning on in the running configuration (a reload may have
    /// turned it off or removed the backend) and pins when last read.
    fn pins_watched(&self) -> bool {
        let routing = self.routing.load();
        self.pinned.retain(|backend| routing.pins.get(backend).is_some_and(|rules| rules.mode != PinMode::Off))
    }
}

/// Starts the task that polls the pins' revision every [`POLL`] while some backend has pins to watch, and applies
/// the quarantines again when it moved (an operator's approval, another replica's discovery). It runs until
/// aborted.
pub fn watch(router: &Arc<CallRouter>) -> JoinHandle<()> {
    let router = Arc::clone(router);
    tokio::spawn(async move {
        let mut seen = None;
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            router.pinned.watched().await;
            ticks.tick().await;
            if !router.pins_watched() {
                continue;
            }
            match router.ledger.store.pins_revision().await {
                Ok(revision) if seen != Some(revision) => {
                    seen = Some(revision);
                    router.reapply_quarantines().await;
                }
                Ok(_) => {}
                Err(error) => log_ledger_failure("*", &error),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_pinned_fields_count() {
        let tool = json!({"name": "t", "description": "d", "_meta": {"x": 1}, "icons": [], "inputSchema": {}});
        let same = json!({"inputSchema": {}, "description": "d", "name": "t", "_meta": {"x": 2}});
        assert_eq!(canonical_digest(&pinned_fields(&tool)), canonical_digest(&pinned_fields(&same)));
        let changed =
            json!({"name": "t", "description": "d", "inputSchema": {}, "annotations": {"readOnlyHint": false}});
        assert_ne!(canonical_digest(&pinned_fields(&tool)), canonical_digest(&pinned_fields(&changed)));
    }

    /// Whether the poll would run now (it waits while nothing is watched).
    async fn polls(pinned: &PinnedBackends) -> bool {
        tokio::time::timeout(Duration::from_millis(50), pinned.watched()).await.is_ok()
    }

    #[tokio::test]
    async fn the_poll_sleeps_while_no_backend_has_pins_and_wakes_when_one_has() {
        let pinned = Arc::new(PinnedBackends::default());
        assert!(!polls(&pinned).await, "nothing pinned: the poll sleeps");
        let waiting = tokio::spawn({
            let pinned = Arc::clone(&pinned);
            async move { pinned.watched().await }
        });
        pinned.note("a", true);
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("a sleeping poll wakes").expect("joined");
        pinned.note("b", true);
        pinned.note("a", false);
        assert!(polls(&pinned).await, "b still has pins");
        assert!(!pinned.retain(|backend| backend != "b"), "b's pinning was turned off by a reload");
        assert!(!polls(&pinned).await, "nothing left to watch: the poll sleeps again");
    }
}
