//! At most once: every `tools/call` is claimed in the ledger before a byte goes to the backend, and
//! settled by what the backend client reports; a second call with the same key is answered from the claim.
//!
//! Rules:
//! - The key is the agent's idempotency key (`params._meta["switchyard/idempotency-key"]` or the
//!   `Idempotency-Key` header, checked by [`super::idempotency`] before anything is claimed), scoped to the
//!   principal; without one, (the caller's request scope, JSON-RPC request id): the agent session, or a scope of
//!   the request alone for agents whose ids may repeat ([`Caller::request_scope`]).
//! - A key names one call: backend, tool and arguments. The same key (or request id) for another tool or other
//!   arguments is the agent's mistake, answered `-32602` naming what differs; it never replays another call's
//!   result and never runs.
//! - Claim settles: a result (or a backend's JSON-RPC error) → `completed`, queued without waiting (the claim
//!   stays durably `in_flight` until it is written), the result stored as the backend's bytes; `McpError::NotDelivered` → released, the only proof that the
//!   tool did not run; anything else → `unknown`. Nothing is retried after delivery.
//! - A duplicate: `completed` → the stored answer, marked `_meta["switchyard/replayed"]`; `in_flight` → waits
//!   for the first call up to its own deadline, then `in_progress`; `unknown` → an error result saying so.
//! - Fail closed: when the claim cannot be written, the call is not sent and the agent hears `not_delivered`.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::continuation::Waiting;
use super::idempotency::{self, KeyRefusal};
use super::outcome;
use super::request_state::{Continuation, StateRefusal};
use super::{Caller, Found, Relayed, RpcFailure};
use crate::backend::mcp_client::{Audience, McpError};
use crate::catalog::Route;
use crate::ledger::{
    CallMismatch, ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, LedgerStore, NewClaim, Settlement, WaitOutcome,
};
use crate::mcp::jsonrpc;
use crate::raw_json::RawJson;
use crate::telemetry::{ClaimWrite, LogThrottle, Metrics, ToolOutcome};

/// Settles that failed while the ledger's store is unavailable are logged once per interval.
static SETTLE_FAILURES: LogThrottle = LogThrottle::new();

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
    /// Where the claims written are counted (and the router's own metrics go).
    pub metrics: Arc<Metrics>,
}

/// What the router asks the ledger to guard: one call of one tool.
pub(super) struct GuardedCall<'a> {
    pub caller: &'a Caller,
    pub route: &'a Route,
    pub params: &'a Value,
    /// The [`crate::ledger::canonical_digest`] of `params.arguments`, computed once per call.
    pub args_digest: &'a str,
    pub deadline: Instant,
}

/// What the router must do with a call.
pub(super) enum Admission {
    /// Send it; settle the claim with [`CallLedger::settle`] afterwards. With the input round it answers (0: the
    /// call's first request; see [`super::continuation`]).
    Run(ClaimKey, u32),
    /// Do not send it; this is the agent's answer, and how the call ended.
    Answered(ToolOutcome, Result<Value, RpcFailure>),
}

impl CallLedger {
    /// Claims the call, or answers it from an existing claim.
    pub(super) async fn admit(&self, call: &GuardedCall<'_>) -> Admission {
        let named = match claim_key(call.caller, call.params) {
            Ok(named) => named,
            Err(refusal) => {
                let refused = Err(RpcFailure::new(jsonrpc::INVALID_PARAMS, refusal.to_string()));
                return Admission::Answered(ToolOutcome::Denied, refused);
            }
        };
        let _waiting = self.metrics.waiting_on_ledger();
        let key = &named.key;
        let unavailable =
            |error| Admission::Answered(ToolOutcome::NotDelivered, Ok(outcome::ledger_unavailable(&error)));
        for _ in 0..MAX_RECLAIMS {
            // Each attempt builds its claim rather than cloning one kept for the rare comparison below.
            let existing = match self.store.claim(self.new_claim(call, key)).await {
                Ok(ClaimOutcome::Claimed(_)) => {
                    self.metrics.count_claims(ClaimWrite::InFlight, 1);
                    return Admission::Run(named.key, 0);
                }
                Ok(ClaimOutcome::Existing(existing)) => existing,
                Err(error) => return unavailable(error),
            };
            let new = self.new_claim(call, key);
            if let Some(mismatch) = existing.mismatch(&new) {
                return Admission::Answered(ToolOutcome::Denied, Err(named.conflict(&existing, &new, mismatch)));
            }
            if existing.state != ClaimState::InFlight {
                return Admission::Answered(ToolOutcome::Replayed, replay(&existing, call.caller.audience));
            }
            // Boxed: only a duplicate waits, and its future would otherwise size every call's.
            match Box::pin(self.store.wait_settled(key, call.deadline)).await {
                Ok(WaitOutcome::Settled(settled)) if settled.id == existing.id => {
                    return Admission::Answered(ToolOutcome::Replayed, replay(&settled, call.caller.audience));
                }
                Ok(WaitOutcome::TimedOut) => {
                    return Admission::Answered(ToolOutcome::Replayed, Ok(outcome::in_progress(&existing)));
                }
                // Released, or released and claimed again meanwhile (perhaps by another call): look again.
                Ok(WaitOutcome::Released | WaitOutcome::Settled(_)) => continue,
                Err(error) => return unavailable(error),
            }
        }
        Admission::Answered(ToolOutcome::Replayed, Ok(outcome::in_progress_unclaimed()))
    }

    /// The claim `call` makes under `key`.
    fn new_claim(&self, call: &GuardedCall<'_>, key: &ClaimKey) -> NewClaim {
        NewClaim {
            key: key.clone(),
            principal: call.caller.principal.name.clone(),
            session: call.caller.session.to_string(),
            backend: call.route.backend.to_string(),
            tool: call.route.name.clone(),
            args_digest: call.args_digest.to_owned(),
            owner: self.owner.clone(),
            lease: self.lease,
        }
    }

    /// Continues the call a retry's `requestState` names: the same claim, if this instance holds it waiting for
    /// this round's answers; else the ledger's answer for it (a settled call is replayed, never run again).
    pub(super) async fn resume(
        &self,
        call: &GuardedCall<'_>,
        continued: &Continuation,
        waiting: &Waiting,
    ) -> Admission {
        let refused = |text: String| {
            Admission::Answered(ToolOutcome::Denied, Err(RpcFailure::new(jsonrpc::INVALID_PARAMS, text)))
        };
        let Some(key) = continued.claim.clone().map(ClaimKey::from_stored) else {
            return refused(StateRefusal::Malformed.to_string());
        };
        match claim_key(call.caller, call.params) {
            Err(refusal) => return refused(refusal.to_string()),
            // A retry may leave the key out (the state names the claim), but not name another call's.
            Ok(named) if named.fresh == "key" && named.key != key => {
                return refused(format!(
                    "{} is not the key of the call this `requestState` continues; the idempotency key names the \
                     whole call, every retry included. Nothing was sent to the backend",
                    named.name
                ));
            }
            Ok(_) => {}
        }
        match waiting.take(&key, continued.round) {
            Ok(true) => return Admission::Run(key, continued.round),
            Ok(false) => {}
            Err(refusal) => return refused(refusal.to_string()),
        }
        let why = match self.store.get(&key).await {
            Ok(Some(record)) if record.state != ClaimState::InFlight => {
                return Admission::Answered(ToolOutcome::Replayed, replay(&record, call.caller.audience));
            }
            Ok(Some(_)) => "another gateway instance holds it",
            Ok(None) => "the ledger has no such call",
            Err(error) => {
                return Admission::Answered(ToolOutcome::NotDelivered, Ok(outcome::ledger_unavailable(&error)));
            }
        };
        refused(StateRefusal::NotWaiting { why: why.into() }.to_string())
    }

    /// Records how the call ended and returns the agent's answer. A completion is not awaited: the claim is
    /// already durable and stays `in_flight` until the completion is, which is all at most once needs (see
    /// docs/ledger.md, *The completion is off the agent's path*). A release or an `unknown` is awaited, so that
    /// "safe to retry" is true when the agent reads it.
    pub(super) async fn settle(
        &self,
        key: &ClaimKey,
        report: &outcome::Report<'_>,
        answer: Result<Relayed, McpError>,
    ) -> Result<Found, RpcFailure> {
        let settlement = settlement_of(&answer);
        let (awaited, state) = match &settlement {
            Settlement::Completed(_) => (None, ClaimWrite::Completed),
            Settlement::Released => (Some(self.store.release(key, &self.owner).await), ClaimWrite::Released),
            Settlement::Unknown(why) => {
                (Some(self.store.mark_unknown(key, &self.owner, why).await), ClaimWrite::Unknown)
            }
        };
        // A queued completion is counted when queued: it is retried until the store takes it.
        if !matches!(awaited, Some(Err(_))) {
            self.metrics.count_claims(state, 1);
        }
        match awaited {
            None => self.store.settle_soon(key, &self.owner, settlement, self.max_result),
            Some(Ok(())) => {}
            Some(Err(error)) => {
                // The agent still gets the real answer. The claim must not stay in flight (this instance keeps
                // renewing its leases), so settling is retried in the background until the store takes it.
                if let Some(left_out) = SETTLE_FAILURES.admit() {
                    tracing::error!(%key, %error, left_out, "ledger: cannot settle a claim; retrying in the background");
                }
                self.store.settle_soon(key, &self.owner, settlement, self.max_result);
            }
        }
        match answer {
            Ok(relayed) => Ok(Found::Relayed(relayed)),
            Err(McpError::Rpc { code, message, data }) => Err(RpcFailure { code, message, data }),
            Err(error) => Ok(Found::Built(outcome::failed_call(report, &error, Some(key)))),
        }
    }
}

/// How a sent call ended, by what the backend client reported (`switchyard_tool_calls_total`'s outcome).
pub(super) fn tool_outcome(answer: &Result<Relayed, McpError>) -> ToolOutcome {
    match answer {
        Ok(Relayed { flags, .. }) => match (flags.asks_input(), flags.is_error()) {
            (true, _) => ToolOutcome::InputRequired,
            (false, true) => ToolOutcome::ToolError,
            (false, false) => ToolOutcome::Completed,
        },
        Err(McpError::Rpc { .. }) => ToolOutcome::ToolError,
        Err(error) if error.proves_not_delivered() => ToolOutcome::NotDelivered,
        Err(_) => ToolOutcome::Unknown,
    }
}

/// How a claim is settled, by what the backend client reported: a result or the backend's JSON-RPC error is
/// completed, stored as `{"result": …}` or `{"error": …}` for replays. The result goes into the text the ledger
/// stores as the backend's bytes (copied once, never parsed or re-encoded); rows written by earlier versions,
/// which re-encoded it, have the same shape and replay alike.
fn settlement_of(answer: &Result<Relayed, McpError>) -> Settlement {
    match answer {
        Ok(Relayed { result, .. }) => Settlement::Completed(RawJson::of(&StoredAnswer::Result(result))),
        Err(McpError::Rpc { code, message, data }) => {
            Settlement::Completed(RawJson::of(&StoredAnswer::Error { code: *code, message, data }))
        }
        Err(error) if error.proves_not_delivered() => Settlement::Released,
        Err(McpError::Cancelled) => Settlement::Unknown("cancelled by the agent while it ran".into()),
        Err(error) => Settlement::Unknown(error.to_string()),
    }
}

/// A settled answer as the ledger stores it: `{"result": …}` or `{"error": {"code", "message", "data"}}`.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum StoredAnswer<'a> {
    Result(&'a RawJson),
    Error { code: i64, message: &'a str, data: &'a Option<Value> },
}

/// A claim key and what the agent knows it as, for the sentence that refuses a conflicting call.
struct NamedKey {
    key: ClaimKey,
    /// "the idempotency key `K`" or "the request id 7".
    name: String,
    /// What the agent should use for a new call.
    fresh: &'static str,
}

impl NamedKey {
    /// The `-32602` for `call`, which reuses the key of the other call `claimed`.
    fn conflict(&self, claimed: &ClaimRecord, call: &NewClaim, mismatch: CallMismatch) -> RpcFailure {
        let earlier = format!("tool `{}` of backend `{}`", claimed.tool, claimed.backend);
        let difference = match mismatch {
            CallMismatch::Tool => {
                format!("{earlier}, but this call is for tool `{}` of backend `{}`", call.tool, call.backend)
            }
            CallMismatch::Arguments => format!("{earlier} with other arguments"),
        };
        let text = format!(
            "{} was already used for a call of {difference}. A key names one call, so this call did not run; use a \
             new {} for a new call",
            self.name, self.fresh
        );
        RpcFailure::new(jsonrpc::INVALID_PARAMS, text)
    }
}

/// The claim key of a call (see the module rules).
fn claim_key(caller: &Caller, params: &Value) -> Result<NamedKey, KeyRefusal> {
    Ok(match idempotency::of_call(params, caller.idempotency_key.as_ref())? {
        Some(key) => NamedKey {
            key: ClaimKey::idempotency(&caller.principal.name, key.as_str()),
            name: format!("the idempotency key `{}`", key.as_str()),
            fresh: "key",
        },
        None => NamedKey {
            key: ClaimKey::request(&caller.request_scope, &caller.request_id),
            name: format!("the request id {}", caller.request_id),
            fresh: "request id",
        },
    })
}

/// The answer a settled claim gives to a duplicate; `audience` reads it.
fn replay(record: &ClaimRecord, audience: Audience) -> Result<Value, RpcFailure> {
    match (record.state, &record.result) {
        (ClaimState::Completed, Some(stored)) => replay_stored(&stored.to_value()),
        (ClaimState::Completed, None) => Ok(outcome::settled_without_result(record)),
        _ => Ok(outcome::unknown_duplicate(record, audience)),
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

    fn caller(header: Option<&str>) -> Caller {
        let header = header.map(|key| idempotency::from_header([key.as_bytes()]).expect("valid").expect("a key"));
        Caller {
            session: crate::mcp::SessionHolder::agent("s1"),
            principal: crate::auth::Principal { name: "alice".into(), groups: Vec::new() },
            subject_token: None,
            request_id: json!(7),
            request_scope: "s1".into(),
            idempotency_key: header,
            peer: None,
            record: crate::telemetry::RequestRecord::unrecorded(),
            sessionless: false,
            audience: crate::router::Audience::Agent,
        }
    }

    fn key_of(header: Option<&str>, params: &Value) -> ClaimKey {
        claim_key(&caller(header), params).map(|named| named.key).expect("a valid key")
    }

    #[test]
    fn the_key_is_the_idempotency_key_else_the_request_id() {
        let with_meta = json!({"_meta": {idempotency::IDEMPOTENCY_META: "k"}});
        assert_eq!(key_of(None, &with_meta), ClaimKey::idempotency("alice", "k"));
        assert_eq!(key_of(Some("k"), &with_meta), ClaimKey::idempotency("alice", "k"));
        assert_eq!(key_of(Some("k"), &json!({})), ClaimKey::idempotency("alice", "k"));
        assert_eq!(key_of(None, &json!({})), ClaimKey::request("s1", &json!(7)));
        assert!(claim_key(&caller(Some("other")), &with_meta).is_err(), "two different keys");
    }

    #[test]
    fn conflicts_name_the_key_and_what_differs() {
        let named = claim_key(&caller(None), &json!({})).expect("a request id key");
        let first = NewClaim {
            key: named.key.clone(),
            principal: "alice".into(),
            session: "s1".into(),
            backend: "b".into(),
            tool: "t".into(),
            args_digest: "d".into(),
            owner: "gw".into(),
            lease: Duration::from_secs(1),
        };
        let claimed = ClaimRecord::claimed(&first, "id".into(), std::time::SystemTime::now());
        let other_tool = NewClaim { tool: "other".into(), ..first.clone() };
        let refused = named.conflict(&claimed, &other_tool, CallMismatch::Tool);
        assert_eq!(refused.code, jsonrpc::INVALID_PARAMS);
        let text = refused.message;
        assert!(text.starts_with("the request id 7 was already used for a call of tool `t` of backend `b`, but"));
        assert!(text.contains("this call is for tool `other` of backend `b`"), "{text}");
        assert!(text.ends_with("did not run; use a new request id for a new call"), "{text}");
        let other_arguments = named.conflict(&claimed, &first, CallMismatch::Arguments).message;
        assert!(other_arguments.contains("tool `t` of backend `b` with other arguments"), "{other_arguments}");
    }

    #[test]
    fn replays_mark_results_and_restore_errors() {
        let replayed = replay_stored(&json!({"result": {"content": [], "_meta": {"x": 1}}})).unwrap();
        assert_eq!(replayed["_meta"], json!({"x": 1, REPLAYED_META: true}));
        let failure = replay_stored(&json!({"error": {"code": -32602, "message": "bad", "data": null}})).unwrap_err();
        assert_eq!(failure, RpcFailure { code: -32602, message: "bad".into(), data: None });
    }

    #[test]
    fn settled_answers_are_stored_as_written_and_replay() {
        let stored = |answer| match settlement_of(&answer) {
            Settlement::Completed(raw) => raw,
            other => panic!("not completed: {other:?}"),
        };
        let backend = RawJson::from_text(r#"{"z": 1.50, "a": [true], "isError": false}"#.into()).expect("JSON");
        let result = stored(Ok(Relayed::read(backend)));
        assert_eq!(result.get(), r#"{"result":{"z": 1.50, "a": [true], "isError": false}}"#, "the backend's bytes");
        assert_eq!(replay_stored(&result.to_value()).unwrap()["_meta"], json!({REPLAYED_META: true}));
        let rpc = |data| McpError::Rpc { code: -32000, message: "down".into(), data };
        let error = stored(Err(rpc(None)));
        assert_eq!(error.get(), r#"{"error":{"code":-32000,"message":"down","data":null}}"#);
        let failure = replay_stored(&stored(Err(rpc(Some(json!({"why": 1}))))).to_value()).unwrap_err();
        assert_eq!(failure, RpcFailure { code: -32000, message: "down".into(), data: Some(json!({"why": 1})) });
    }
}
