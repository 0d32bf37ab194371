//! At most once (design §5): every `tools/call` is claimed in the ledger before a byte goes to the backend, and
//! settled by what the backend client reports; a second call with the same key is answered from the claim.
//!
//! Rules:
//! - The key is the agent's idempotency key (`params._meta["switchyard/idempotency-key"]`, else the
//!   `Idempotency-Key` header), scoped to the principal; without one, (agent session, JSON-RPC request id).
//! - Claim settles: a result (or a backend's JSON-RPC error) → `completed`; `McpError::NotDelivered` → released,
//!   the only proof that the tool did not run; anything else → `unknown`. Nothing is retried after delivery.
//! - A duplicate: `completed` → the stored answer, marked `_meta["switchyard/replayed"]`; `in_flight` → waits
//!   for the first call up to its own deadline, then `in_progress`; `unknown` → an error result saying so; the
//!   same key with other arguments → `-32602`.
//! - Fail closed: when the claim cannot be written, the call is not sent and the agent hears `not_delivered`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::outcome;
use super::{Caller, RpcFailure};
use crate::backend::mcp_client::McpError;
use crate::catalog::Route;
use crate::jsonrpc;
use crate::ledger::{
    ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, LedgerError, LedgerStore, NewClaim, WaitOutcome, canonical_digest,
};

/// Where the agent may put its idempotency key inside the request.
pub const IDEMPOTENCY_META: &str = "switchyard/idempotency-key";
pub const REPLAYED_META: &str = "switchyard/replayed";
/// How many times a duplicate re-claims a key whose first call turned out not delivered.
const MAX_RECLAIMS: usize = 3;

/// This instance's ledger and its settings.
#[derive(Debug, Clone)]
pub struct CallLedger {
    pub store: LedgerStore,
    /// This instance's owner id; only it settles its claims.
    pub owner: String,
    pub lease: Duration,
    /// Results larger than this (JSON bytes) are kept as a digest only.
    pub max_result: usize,
}

/// What the router asks the ledger to guard: one call of one tool.
pub(super) struct GuardedCall<'a> {
    pub caller: &'a Caller,
    pub route: &'a Route,
    pub params: &'a Value,
    pub deadline: Instant,
}

/// What the router must do with a call.
pub(super) enum Admission {
    /// Send it; settle the claim with [`CallLedger::settle`] afterwards.
    Run(ClaimKey),
    /// Do not send it; this is the agent's answer.
    Answered(Result<Value, RpcFailure>),
}

impl CallLedger {
    /// Claims the call, or answers it from an existing claim.
    pub(super) async fn admit(&self, call: &GuardedCall<'_>) -> Admission {
        let key = claim_key(call.caller, call.params);
        let digest = canonical_digest(call.params.get("arguments").unwrap_or(&Value::Null));
        let new = NewClaim {
            key: key.clone(),
            principal: call.caller.principal.clone(),
            session: call.caller.session.clone(),
            backend: call.route.backend.to_string(),
            tool: call.route.name.clone(),
            args_digest: digest.clone(),
            owner: self.owner.clone(),
            lease: self.lease,
        };
        for _ in 0..MAX_RECLAIMS {
            let existing = match self.store.claim(new.clone()).await {
                Ok(ClaimOutcome::Claimed(_)) => return Admission::Run(key),
                Ok(ClaimOutcome::Existing(existing)) => existing,
                Err(error) => return Admission::Answered(Ok(outcome::ledger_unavailable(&error))),
            };
            if existing.args_digest != digest {
                let text = "this idempotency key was already used for a call with other arguments; use a new key";
                return Admission::Answered(Err(RpcFailure::new(jsonrpc::INVALID_PARAMS, text)));
            }
            if existing.state != ClaimState::InFlight {
                return Admission::Answered(replay(&existing));
            }
            match self.store.wait_settled(&key, call.deadline).await {
                Ok(WaitOutcome::Settled(settled)) => return Admission::Answered(replay(&settled)),
                Ok(WaitOutcome::TimedOut) => return Admission::Answered(Ok(outcome::in_progress(&existing))),
                Ok(WaitOutcome::Released) => continue,
                Err(error) => return Admission::Answered(Ok(outcome::ledger_unavailable(&error))),
            }
        }
        Admission::Answered(Ok(outcome::in_progress_unclaimed()))
    }

    /// Records how the call ended and returns the agent's answer.
    pub(super) async fn settle(
        &self,
        key: &ClaimKey,
        backend: &str,
        answer: Result<Value, McpError>,
    ) -> Result<Value, RpcFailure> {
        let settlement = Settlement::of(&answer);
        if let Err(error) = self.record(key, &settlement).await {
            // The agent still gets the real answer. The claim must not stay in flight (this instance keeps
            // renewing its leases), so settling is retried in the background until the store takes it.
            tracing::error!(%key, %error, "ledger: cannot settle a claim; retrying in the background");
            tokio::spawn(self.clone().settle_later(key.clone(), settlement));
        }
        match answer {
            Ok(result) => Ok(result),
            Err(McpError::Rpc { code, message, data }) => Err(RpcFailure { code, message, data }),
            Err(error) => Ok(outcome::failed_call(backend, &error, Some(key))),
        }
    }

    async fn record(&self, key: &ClaimKey, settlement: &Settlement) -> Result<(), LedgerError> {
        match settlement {
            Settlement::Completed(stored) => self.store.complete(key, &self.owner, stored, self.max_result).await,
            Settlement::Released => self.store.release(key, &self.owner).await,
            Settlement::Unknown(why) => self.store.mark_unknown(key, &self.owner, why).await,
        }
    }

    /// Retries a settle that failed, with backoff, for as long as [`SETTLE_RETRY_FOR`]; after that the claim
    /// waits for this instance's next start, which marks it `unknown`.
    async fn settle_later(self, key: ClaimKey, settlement: Settlement) {
        let give_up = Instant::now() + SETTLE_RETRY_FOR;
        let mut pause = Duration::from_millis(200);
        while Instant::now() < give_up {
            tokio::time::sleep(pause).await;
            if self.record(&key, &settlement).await.is_ok() {
                tracing::info!(%key, "ledger: claim settled after a retry");
                return;
            }
            pause = (pause * 2).min(Duration::from_secs(10));
        }
        tracing::error!(%key, "ledger: gave up settling a claim; it becomes `unknown` when this instance restarts");
    }
}

/// How a claim is settled, by what the backend client reported.
enum Settlement {
    /// A result or the backend's JSON-RPC error, stored as `{"result": …}` or `{"error": …}` for replays.
    Completed(Value),
    /// The call provably did not reach the backend.
    Released,
    /// The call may have run; why the outcome is unknown.
    Unknown(String),
}

impl Settlement {
    fn of(answer: &Result<Value, McpError>) -> Settlement {
        match answer {
            Ok(result) => Settlement::Completed(json!({ "result": result })),
            Err(McpError::Rpc { code, message, data }) => {
                Settlement::Completed(json!({ "error": { "code": code, "message": message, "data": data } }))
            }
            Err(error) if error.proves_not_delivered() => Settlement::Released,
            Err(McpError::Cancelled) => Settlement::Unknown("cancelled by the agent while it ran".into()),
            Err(error) => Settlement::Unknown(error.to_string()),
        }
    }
}

/// How long a failed settle is retried.
const SETTLE_RETRY_FOR: Duration = Duration::from_secs(600);

/// The claim key of a call (see the module rules).
fn claim_key(caller: &Caller, params: &Value) -> ClaimKey {
    let in_meta = params.pointer("/_meta").and_then(|meta| meta.get(IDEMPOTENCY_META)).and_then(Value::as_str);
    match in_meta.or(caller.idempotency_key.as_deref()) {
        Some(key) => ClaimKey::idempotency(&caller.principal, key),
        None => ClaimKey::request(&caller.session, &caller.request_id),
    }
}

/// The answer a settled claim gives to a duplicate.
fn replay(record: &ClaimRecord) -> Result<Value, RpcFailure> {
    match (record.state, &record.result) {
        (ClaimState::Completed, Some(stored)) => replay_stored(stored),
        (ClaimState::Completed, None) => Ok(outcome::settled_without_result(record)),
        _ => Ok(outcome::unknown_duplicate(record)),
    }
}

fn replay_stored(stored: &Value) -> Result<Value, RpcFailure> {
    if let Some(error) = stored.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(jsonrpc::INTERNAL_ERROR);
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        let data = error.get("data").filter(|data| !data.is_null()).cloned();
        return Err(RpcFailure { code, message, data });
    }
    let mut result = stored.get("result").cloned().unwrap_or_else(|| json!({}));
    if let Some(object) = result.as_object_mut() {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(REPLAYED_META.into(), Value::Bool(true));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(idempotency_key: Option<&str>) -> Caller {
        Caller {
            session: "s1".into(),
            principal: "alice".into(),
            request_id: json!(7),
            idempotency_key: idempotency_key.map(str::to_owned),
            peer: None,
        }
    }

    #[test]
    fn the_key_prefers_meta_then_header_then_request_id() {
        let with_meta = json!({"_meta": {IDEMPOTENCY_META: "from-meta"}});
        assert_eq!(claim_key(&caller(Some("hdr")), &with_meta), ClaimKey::idempotency("alice", "from-meta"));
        assert_eq!(claim_key(&caller(Some("hdr")), &json!({})), ClaimKey::idempotency("alice", "hdr"));
        assert_eq!(claim_key(&caller(None), &json!({})), ClaimKey::request("s1", &json!(7)));
    }

    #[test]
    fn replays_mark_results_and_restore_errors() {
        let replayed = replay_stored(&json!({"result": {"content": [], "_meta": {"x": 1}}})).unwrap();
        assert_eq!(replayed["_meta"], json!({"x": 1, REPLAYED_META: true}));
        let failure = replay_stored(&json!({"error": {"code": -32602, "message": "bad", "data": null}})).unwrap_err();
        assert_eq!(failure, RpcFailure { code: -32602, message: "bad".into(), data: None });
    }
}
