//! Approvals: a `tools/call` of a tool a policy lists in `approve` waits for a person before it is claimed.
//!
//! Rules:
//! - The call's key is the agent's idempotency key, or one the gateway mints (and puts in the call's
//!   `_meta["switchyard/idempotency-key"]`) when the agent sent none; its approval request lives in the ledger
//!   under the call's claim key, with the arguments sealed under the gateway's token key ([`ApprovalGate`]).
//!   Nothing is sent to the backend and nothing is claimed until the request is approved.
//! - Once approved, the call goes on as an ordinary claim under the same key, so the ledger's at-most-once rules
//!   make it run once, however many retries and replicas ask. Denied or expired: it never runs under this key.
//! - The agent's request is held up to `[approvals] wait` for a decision (polling the shared ledger, so a
//!   decision made anywhere is seen; progress notifications when the agent sent a progress token; the agent's
//!   cancel ends the wait). Still undecided: a complete `isError` result with
//!   `_meta["switchyard/outcome"] = "awaiting_approval"` and the key to retry with.
//! - A request names one call: a retry under the key for another tool or other arguments is refused `-32602`.
//! - Decisions ([`decide`]) are an approver's (`[approvals] approvers`; any operator when none is listed), never
//!   the caller's own.
//! - A new request is announced through the gate's [`Announce`] (the composition root's `notify_url` hook), which
//!   must not block the call.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use thiserror::Error;
use tokio::time::Instant;

use super::idempotency::{self, IDEMPOTENCY_META, IdempotencyKey};
use super::outcome::CLAIM_META;
use super::{Caller, RpcFailure};
use crate::auth::{Principal, Subject};
use crate::backend::oauth::Vault;
use crate::catalog::Route;
use crate::ledger::{
    ApprovalRequest, ApprovalRow, ApprovalState, ClaimKey, Decision, LedgerError, LedgerStore, canonical_digest,
};
use crate::mcp::{OUTCOME_META, Outcome, Relay, jsonrpc};
use crate::telemetry::{Metrics, ToolOutcome};

/// How often a held request looks at the ledger for a decision.
const POLL: Duration = Duration::from_millis(200);
/// How often a held request tells an agent that sent a progress token that it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The approval settings of a running gateway (lowered from `[approvals]`).
#[derive(Debug)]
pub struct ApprovalGate {
    /// How long a request waits for a decision before it expires.
    pub timeout: Duration,
    /// How long the agent's request is held for a quick decision.
    pub wait: Duration,
    /// Seals the arguments kept with a request.
    pub vault: VaultFile,
    /// Where new requests are announced.
    pub notifier: Option<Arc<dyn Announce>>,
    pub metrics: Arc<Metrics>,
}

/// Tells someone that a new request awaits a decision (`notify_url`); returns at once.
pub trait Announce: Send + Sync + std::fmt::Debug {
    /// Announces `row`, whose tool agents know as `exposed`.
    fn announce(&self, row: &ApprovalRow, exposed: &str);
}

/// The gateway's token key file, read when first needed (a gateway without approvals never creates it).
#[derive(Debug)]
pub struct VaultFile {
    path: std::path::PathBuf,
    vault: parking_lot::Mutex<Option<Arc<Vault>>>,
}

impl VaultFile {
    pub fn new(path: std::path::PathBuf) -> VaultFile {
        VaultFile { path, vault: parking_lot::Mutex::default() }
    }

    /// The vault, loading (or creating) its key file the first time; a failure is tried again next time.
    pub fn get(&self) -> Result<Arc<Vault>, String> {
        let mut slot = self.vault.lock();
        if let Some(vault) = slot.as_ref() {
            return Ok(Arc::clone(vault));
        }
        let vault = Arc::new(Vault::load_or_create(&self.path).map_err(|error| error.to_string())?);
        *slot = Some(Arc::clone(&vault));
        Ok(vault)
    }
}

/// What the gate decided about a call.
pub(super) enum Gate {
    /// Approved: claim and run it as usual (its `params` now carry its key).
    Run,
    /// Not run: the agent's answer, and how the call ended.
    Answered(ToolOutcome, Result<Value, RpcFailure>),
}

impl ApprovalGate {
    /// Holds the call until it is approved, or answers it.
    pub(super) async fn admit(
        &self,
        store: &LedgerStore,
        caller: &Caller,
        route: &Route,
        params: &mut Value,
        relay: &Relay,
    ) -> Gate {
        let refused = |text: String| Gate::Answered(ToolOutcome::Denied, Err(invalid(text)));
        let key = match idempotency::of_call(params, caller.idempotency_key.as_ref()) {
            Ok(Some(key)) => key,
            Ok(None) => match mint_key(params) {
                Ok(key) => key,
                Err(text) => return refused(text),
            },
            Err(refusal) => return refused(refusal.to_string()),
        };
        let claim = ClaimKey::idempotency(&caller.principal.name, key.as_str());
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        let row = match self.request(store, caller, route, &claim, arguments).await {
            Ok(Some(row)) => row,
            // The call was claimed already (its request purged since): the claim answers it, or refuses it.
            Ok(None) => return Gate::Run,
            Err(error) => return unavailable(&error),
        };
        if row.backend != *route.backend || row.tool != route.name || row.args_digest != canonical_digest(arguments) {
            return refused(format!(
                "the idempotency key `{}` names a call of tool `{}` of backend `{}` waiting for approval, with other \
                 arguments or another tool than this call. A key names one call, so this call did not run; use a new \
                 key for a new call",
                key.as_str(),
                row.tool,
                row.backend
            ));
        }
        let row = match self.hold(store, row, params, relay).await {
            Ok(row) => row,
            Err(error) => return unavailable(&error),
        };
        match row.state_at(SystemTime::now()) {
            ApprovalState::Approved => Gate::Run,
            ApprovalState::AwaitingApproval => Gate::Answered(ToolOutcome::NotDelivered, Ok(pending(&key, &row))),
            state => Gate::Answered(ToolOutcome::Denied, Ok(denied(&key, &row, state))),
        }
    }

    /// The request under `claim`: the existing one, or a new one (announced); `None` when there is none but the
    /// call's claim exists (approved and claimed earlier, its request purged since).
    async fn request(
        &self,
        store: &LedgerStore,
        caller: &Caller,
        route: &Route,
        claim: &ClaimKey,
        arguments: &Value,
    ) -> Result<Option<ApprovalRow>, LedgerError> {
        if let Some(existing) = store.approval(claim).await? {
            return Ok(Some(existing));
        }
        if store.get(claim).await?.is_some() {
            return Ok(None);
        }
        let principal = &caller.principal.name;
        let sealed = self.vault.get().map(|vault| vault.seal_value(principal, claim.as_str(), arguments));
        let sealed_args = sealed
            .and_then(|sealed| sealed.map_err(|error| error.to_string()))
            .map_err(|error| LedgerError::unavailable(format!("cannot seal the arguments: {error}")))?;
        let now = SystemTime::now();
        let row = ApprovalRow {
            key: claim.clone(),
            principal: principal.clone(),
            backend: route.backend.to_string(),
            tool: route.name.clone(),
            args_digest: canonical_digest(arguments),
            sealed_args,
            state: ApprovalState::AwaitingApproval,
            requested_at: now,
            expires_at: now + self.timeout,
            decided_by: None,
            decided_at: None,
            note: None,
        };
        match store.request_approval(row).await? {
            ApprovalRequest::Created(row) => {
                self.metrics.count_approval("requested");
                tracing::info!(key = %row.key, principal = %row.principal, backend = %row.backend, tool = %row.tool,
                    "a tool call awaits approval");
                if let Some(notifier) = &self.notifier {
                    notifier.announce(&row, &route.exposed);
                }
                Ok(Some(row))
            }
            ApprovalRequest::Existing(row) => Ok(Some(row)),
        }
    }

    /// Waits up to `wait` (and no longer than the request's expiry) for `row` to be decided; returns it as last
    /// read. The agent's cancel ends the wait.
    async fn hold(
        &self,
        store: &LedgerStore,
        mut row: ApprovalRow,
        params: &Value,
        relay: &Relay,
    ) -> Result<ApprovalRow, LedgerError> {
        let started = Instant::now();
        let deadline = started + self.wait;
        let token = params.pointer("/_meta/progressToken").cloned();
        let mut next_progress = started;
        let cancelled = async {
            match relay.cancel() {
                Some(cancel) => cancel.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(cancelled);
        while row.state_at(SystemTime::now()) == ApprovalState::AwaitingApproval && Instant::now() < deadline {
            if let Some(token) = token.as_ref().filter(|_| Instant::now() >= next_progress) {
                relay.forward(progress(token, started.elapsed(), self.wait));
                next_progress += PROGRESS_EVERY;
            }
            let nap = POLL.min(deadline.saturating_duration_since(Instant::now()));
            tokio::select! {
                () = tokio::time::sleep(nap) => {}
                () = &mut cancelled => break,
            }
            row = store.approval(&row.key).await?.ok_or_else(|| LedgerError::NotFound { key: row.key.to_string() })?;
        }
        Ok(row)
    }
}

/// Mints a key for a call that came without one, and puts it in the call's `_meta` so the claim made once it is
/// approved uses it.
fn mint_key(params: &mut Value) -> Result<IdempotencyKey, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| format!("the gateway has no randomness ({error}); the call did not run"))?;
    let text = format!("approval-{}", crate::hex::encode(&bytes));
    let key = idempotency::from_header([text.as_bytes()]).ok().flatten().ok_or("minted an invalid key")?;
    let meta = params.as_object_mut().map(|params| params.entry("_meta").or_insert_with(|| json!({})));
    match meta.and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.insert(IDEMPOTENCY_META.into(), Value::String(text));
            Ok(key)
        }
        None => Err("`params._meta` must be an object; the call did not run".into()),
    }
}

/// The commands that approve and deny the call under `key`, as announcements and the console show them.
pub fn decision_commands(key: &ClaimKey) -> [String; 2] {
    ["approve", "deny"].map(|verb| format!("switchyard calls {verb} '{}'", key.as_str()))
}

fn invalid(text: String) -> RpcFailure {
    RpcFailure::new(jsonrpc::INVALID_PARAMS, text)
}

fn unavailable(error: &LedgerError) -> Gate {
    Gate::Answered(ToolOutcome::NotDelivered, Ok(super::outcome::ledger_unavailable(error)))
}

fn progress(token: &Value, waited: Duration, wait: Duration) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {
            "progressToken": token,
            "progress": waited.as_secs(),
            "total": wait.as_secs(),
            "message": "waiting for an operator's approval",
        },
    })
}

/// The answer for a call still awaiting a decision.
fn pending(key: &IdempotencyKey, row: &ApprovalRow) -> Value {
    let text = format!(
        "This call of `{}` needs an operator's approval before it runs; it has not run yet. It is awaiting approval \
         under the idempotency key `{}`. Retry the same call with `_meta[\"{IDEMPOTENCY_META}\"]` set to that key \
         to wait again and get its result once approved; do not send it without the key, which would ask for a new \
         approval.",
        row.tool,
        key.as_str()
    );
    result(Outcome::AwaitingApproval, &text, key, row)
}

/// The answer for a denied or expired call.
fn denied(key: &IdempotencyKey, row: &ApprovalRow, state: ApprovalState) -> Value {
    let why = match (state, &row.decided_by) {
        (ApprovalState::Denied, Some(by)) => format!("was denied by `{by}`"),
        _ => "was not approved in time (its approval request expired)".to_owned(),
    };
    let note = row.note.as_deref().map(|note| format!(" Note: {note}")).unwrap_or_default();
    let text = format!(
        "This call of `{}` {why}; it did not run and will not run under the idempotency key `{}`.{note}",
        row.tool,
        key.as_str()
    );
    result(Outcome::Denied, &text, key, row)
}

fn result(outcome: Outcome, text: &str, key: &IdempotencyKey, row: &ApprovalRow) -> Value {
    let mut meta = Map::new();
    meta.insert(OUTCOME_META.into(), outcome.into());
    meta.insert(IDEMPOTENCY_META.into(), key.as_str().into());
    meta.insert(CLAIM_META.into(), row.key.as_str().into());
    json!({"content": [{"type": "text", "text": text}], "isError": true, "_meta": meta})
}

/// Who may decide approval requests: `[approvals] approvers`, or (none listed) whoever reaches the ledger or
/// the console.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvers(Vec<Subject>);

impl Approvers {
    pub fn new(listed: Vec<Subject>) -> Approvers {
        Approvers(listed)
    }

    /// Whether `principal` is an approver.
    pub fn admits(&self, principal: &Principal) -> bool {
        self.is_open() || self.lists(principal)
    }

    /// Whether no approver is listed, so that whoever reaches the ledger or the console decides.
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `principal` is listed, by name or group.
    pub fn lists(&self, principal: &Principal) -> bool {
        self.0.iter().any(|subject| subject.matches(principal))
    }
}

/// Why a decision was refused.
#[derive(Debug, Error)]
pub enum DecisionRefused {
    #[error("`{0}` is not an approver (see `[approvals] approvers`)")]
    NotAnApprover(String),
    #[error("`{0}` made this call and may not approve or deny it; another approver must decide")]
    OwnCall(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Records `decider`'s decision on the request under `key` (the approver rules of the module doc).
pub async fn decide(
    store: &LedgerStore,
    metrics: Option<&Metrics>,
    approvers: &Approvers,
    decider: &Principal,
    key: &ClaimKey,
    approve: bool,
    note: Option<String>,
) -> Result<ApprovalRow, DecisionRefused> {
    let row = store.approval(key).await?.ok_or_else(|| LedgerError::NotFound { key: key.to_string() })?;
    if row.principal == decider.name {
        return Err(DecisionRefused::OwnCall(decider.name.clone()));
    }
    if !approvers.admits(decider) {
        return Err(DecisionRefused::NotAnApprover(decider.name.clone()));
    }
    let decision = Decision { approve, by: decider.name.clone(), note, at: SystemTime::now() };
    let decided = store.decide_approval(key, &decision).await?;
    if let Some(metrics) = metrics {
        super::announcements::announce_decision(store, metrics, &decided).await;
    }
    Ok(decided)
}

/// How a refused decision is answered (for the front's error table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// Not an approver, or the call's own principal.
    NotAllowed,
    /// No request under that key.
    NoSuchRequest,
    /// Decided already, or expired.
    AlreadyDecided,
    /// A malformed key or an overlong note.
    Invalid,
    /// The ledger cannot be reached.
    Unavailable,
}

impl DecisionRefused {
    pub fn kind(&self) -> RefusalKind {
        match self {
            DecisionRefused::NotAnApprover(_) | DecisionRefused::OwnCall(_) => RefusalKind::NotAllowed,
            DecisionRefused::Ledger(LedgerError::NotFound { .. }) => RefusalKind::NoSuchRequest,
            DecisionRefused::Ledger(LedgerError::AlreadyDecided { .. }) => RefusalKind::AlreadyDecided,
            DecisionRefused::Ledger(LedgerError::InvalidApproval { .. } | LedgerError::InvalidKey { .. }) => {
                RefusalKind::Invalid
            }
            DecisionRefused::Ledger(_) => RefusalKind::Unavailable,
        }
    }
}

/// A decision made elsewhere than the command line (the console).
#[derive(Debug)]
pub struct DecisionRequest<'a> {
    pub decider: &'a Principal,
    /// The claim key, as text.
    pub key: &'a str,
    pub approve: bool,
    pub note: Option<String>,
}

impl super::CallRouter {
    /// Records a decision on the call under its key ([`decide`]), counted in this gateway's metrics.
    pub async fn decide_call(
        &self,
        approvers: &Approvers,
        request: DecisionRequest<'_>,
    ) -> Result<ApprovalRow, DecisionRefused> {
        let key = ClaimKey::parse(request.key)?;
        let (store, metrics) = (&self.ledger.store, Some(&*self.ledger.metrics));
        decide(store, metrics, approvers, request.decider, &key, request.approve, request.note).await
    }
}

/// The arguments of `row`, opened with the gateway's token key.
pub fn arguments(vault: &Vault, row: &ApprovalRow) -> Option<Value> {
    vault.open_value(&row.principal, row.key.as_str(), &row.sealed_args).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: ApprovalState, by: Option<&str>, note: Option<&str>) -> ApprovalRow {
        let now = SystemTime::now();
        ApprovalRow {
            key: ClaimKey::idempotency("bob", "k"),
            principal: "bob".into(),
            backend: "pay".into(),
            tool: "send".into(),
            args_digest: "d".into(),
            sealed_args: Vec::new(),
            state,
            requested_at: now,
            expires_at: now + Duration::from_secs(60),
            decided_by: by.map(str::to_owned),
            decided_at: None,
            note: note.map(str::to_owned),
        }
    }

    fn key(text: &str) -> IdempotencyKey {
        idempotency::from_header([text.as_bytes()]).expect("valid").expect("a key")
    }

    #[test]
    fn a_minted_key_goes_into_the_calls_meta_which_must_be_an_object() {
        let mut params = json!({"name": "t", "_meta": {"progressToken": 1}});
        let minted = mint_key(&mut params).expect("minted");
        assert!(minted.as_str().starts_with("approval-") && minted.as_str().len() == 41, "{minted:?}");
        assert_eq!(params["_meta"][IDEMPOTENCY_META], minted.as_str());
        assert_eq!(params["_meta"]["progressToken"], 1, "the agent's own `_meta` stays");
        let mut bare = json!({"name": "t"});
        assert!(mint_key(&mut bare).is_ok() && bare["_meta"][IDEMPOTENCY_META].is_string());
        let refused = mint_key(&mut json!({"name": "t", "_meta": "x"})).expect_err("not an object");
        assert!(refused.contains("must be an object") && refused.contains("did not run"), "{refused}");
    }

    #[test]
    fn pending_and_denied_answers_say_what_happened_and_carry_the_key() {
        let waiting = pending(&key("k"), &row(ApprovalState::AwaitingApproval, None, None));
        assert_eq!(waiting["isError"], true);
        assert_eq!(waiting["_meta"][OUTCOME_META], "awaiting_approval");
        assert_eq!(waiting["_meta"][IDEMPOTENCY_META], "k");
        assert_eq!(waiting["_meta"][CLAIM_META], "idem:3:bob:k");
        let denied_row = row(ApprovalState::Denied, Some("alice"), Some("too much"));
        let refused = denied(&key("k"), &denied_row, ApprovalState::Denied);
        let text = refused["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("denied by `alice`") && text.contains("Note: too much"), "{text}");
        assert_eq!(refused["_meta"][OUTCOME_META], "denied");
        let expired = denied(&key("k"), &row(ApprovalState::AwaitingApproval, None, None), ApprovalState::Expired);
        assert!(expired["content"][0]["text"].as_str().unwrap_or_default().contains("expired"));
    }

    #[test]
    fn approvers_are_listed_names_and_groups_or_anyone_when_none_are_listed() {
        let principal = |name: &str, groups: &[&str]| Principal {
            name: name.into(),
            groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        };
        let listed = Approvers::new(vec![Subject::Principal("alice".into()), Subject::Group("oncall".into())]);
        assert!(listed.admits(&principal("alice", &[])) && listed.admits(&principal("olga", &["oncall"])));
        assert!(!listed.admits(&principal("mallory", &["ops"])));
        assert!(Approvers::default().admits(&principal("anyone", &[])));
    }
}
