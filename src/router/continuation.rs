//! Multi round-trip results for 2026-07-28 agents (2026-07-28 basic/patterns/mrtr): a backend's
//! `input_required` answer passes to the agent with the backend's `inputRequests` unchanged and a `requestState`
//! of the gateway's ([`super::request_state`]); the agent's retry continues the same logical call.
//!
//! Rules:
//! - Only `tools/call`, `prompts/get` and `resources/read` may answer `input_required`; from any other method it is
//!   the backend's protocol error ([`refuse_elsewhere`]). The result carries no cache hints.
//! - A retry's `requestState` is opened and checked before anything is sent (`-32602` otherwise); the backend's
//!   own state replaces it upstream, or is left out when the backend gave none. `inputResponses` go as sent. This
//!   holds for an agent of the session era too: it is never handed a backend's state (the gateway serves its
//!   rounds itself, `super::input_rounds`), so a `requestState` it sends is either one the gateway sealed or
//!   refused — never passed to a backend as the backend's own.
//! - A tool call keeps its one ledger claim across rounds: an `input_required` answer does not settle it; it stays
//!   `in_flight` (renewed by its owner like any claim) while this instance waits for the agent, in [`Waiting`].
//!   Each round has a number, and only the latest round's state is accepted, by one retry at a time: a second
//!   retry while one is being answered is refused ([`StateRefusal::Busy`]) rather than waiting, because its answer
//!   would be the first retry's (either the next round's input requests, which only one caller can answer, or the
//!   result, which the ledger replays to it afterwards). A retry of a call already settled is answered from the
//!   ledger, never run.
//! - A round nobody answers before its state expires settles the claim `unknown` (the backend may have done part
//!   of the work); a crash leaves it `in_flight`, which the next start marks `unknown` like any orphan: nothing is
//!   ever run again on the gateway's own initiative (see docs/protocol-eras.md, *Multi round-trip results*).
//! - On a fleet, a retry landing on another replica is served by the one holding the call ([`HeldElsewhere`],
//!   found from the claim's owner; the front forwards it); when that replica is gone the call is lost with it
//!   (`unknown`, [`HeldElsewhere::lost`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use serde_json::Value;

use super::outcome;
use super::request_state::{CallIdentity, Continuation, STATE_TTL, StateRefusal};
use super::{CallLedger, CallRouter, Caller, Relayed, RpcFailure};
use crate::backend::mcp_client::McpError;
use crate::ledger::{ClaimKey, ClaimState, canonical_digest};
use crate::mcp::{jsonrpc, method};
use crate::telemetry::ClaimWrite;

/// Why a claim whose agent never answered is `unknown`.
const UNANSWERED: &str = "the agent did not answer the backend's input requests before their requestState \
                          expired; the backend may have done part of the call";

/// The methods that may answer `input_required`.
pub const CONTINUABLE: [&str; 3] = [method::TOOLS_CALL, method::PROMPTS_GET, method::RESOURCES_READ];
pub const INPUT_REQUIRED: &str = "input_required";
/// The fields of the retry the gateway owns.
pub const REQUEST_STATE: &str = "requestState";

/// The tool calls of this instance waiting for their agents' input: claim → (round, phase).
#[derive(Debug, Default)]
pub(super) struct Waiting(Mutex<HashMap<ClaimKey, Round>>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Round {
    number: u32,
    /// Whether a retry of this round is being answered.
    answering: bool,
}

impl Waiting {
    /// The call now waits for the answers to round `number`.
    pub(super) fn wait(&self, claim: &ClaimKey, number: u32) {
        self.0.lock().insert(claim.clone(), Round { number, answering: false });
    }

    /// A retry of round `number` takes the call; `Ok(false)`: this instance holds no such call (the ledger knows).
    pub(super) fn take(&self, claim: &ClaimKey, number: u32) -> Result<bool, StateRefusal> {
        let mut waiting = self.0.lock();
        let Some(round) = waiting.get_mut(claim) else { return Ok(false) };
        if round.number != number {
            return Err(StateRefusal::Superseded);
        }
        if round.answering {
            return Err(StateRefusal::Busy);
        }
        round.answering = true;
        Ok(true)
    }

    /// Whether this instance holds the call.
    fn holds(&self, claim: &ClaimKey) -> bool {
        self.0.lock().contains_key(claim)
    }

    /// The call settled (or its retry failed before it was sent and it waits again).
    pub(super) fn forget(&self, claim: &ClaimKey) {
        self.0.lock().remove(claim);
    }

    /// Whether round `number` was still unanswered, and now no longer waits (its state expired).
    pub(super) fn expire(&self, claim: &ClaimKey, number: u32) -> bool {
        let mut waiting = self.0.lock();
        let expired = waiting.get(claim) == Some(&Round { number, answering: false });
        if expired {
            waiting.remove(claim);
        }
        expired
    }
}

/// A tool call another replica holds, waiting for the input a retry brings (see [`CallRouter::held_elsewhere`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldElsewhere {
    /// The replica (its instance id, the claim's owner).
    pub owner: String,
    pub claim: ClaimKey,
}

impl HeldElsewhere {
    /// The agent's answer when that replica is gone: the call is lost with it, never run again.
    pub fn lost(&self) -> Value {
        outcome::replica_gone(&self.claim)
    }
}

/// Whether `result` asks the agent for input.
pub fn asks_input(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some(INPUT_REQUIRED)
}

/// A backend's `input_required` answer to a method that may not ask for input is its protocol error.
pub(super) fn refuse_elsewhere(backend: &str, method: &str, result: Value) -> Result<Value, RpcFailure> {
    if !asks_input(&result) || CONTINUABLE.contains(&method) {
        return Ok(result);
    }
    let text = format!(
        "the backend `{backend}` answered {method} with input_required, which MCP allows only on tools/call, \
         prompts/get and resources/read (a protocol error of the backend)"
    );
    Err(RpcFailure::new(jsonrpc::INTERNAL_ERROR, text))
}

/// The `requestState` of a retry, taken out of `params`, whichever era the agent is of (see the module rules).
pub(super) fn take_state(params: &mut Value) -> Result<Option<String>, RpcFailure> {
    let Some(state) = params.as_object_mut().and_then(|params| params.remove(REQUEST_STATE)) else {
        return Ok(None);
    };
    match state {
        Value::String(text) => Ok(Some(text)),
        _ => Err(refusal(&StateRefusal::Malformed)),
    }
}

/// Puts the backend's own state (if any) where the agent's was.
pub(super) fn restore_backend_state(params: &mut Value, backend_state: Option<String>) {
    if let (Some(state), Some(params)) = (backend_state, params.as_object_mut()) {
        params.insert(REQUEST_STATE.into(), Value::String(state));
    }
}

/// The `input_required` result as the agent gets it: the gateway's sealed state instead of the backend's, no cache
/// hints. Returns the backend's state.
pub(super) fn hand_over(result: &mut Value, sealed: impl FnOnce(Option<String>) -> String) -> Option<String> {
    let object = result.as_object_mut()?;
    object.remove("ttlMs");
    object.remove("cacheScope");
    let backend_state = match object.remove(REQUEST_STATE) {
        Some(Value::String(text)) => Some(text),
        // A state that is not a string is not one the backend could expect back verbatim; drop it.
        _ => None,
    };
    object.insert(REQUEST_STATE.into(), Value::String(sealed(backend_state.clone())));
    backend_state
}

/// The agent's answer to a refused state.
pub(super) fn refusal(refused: &StateRefusal) -> RpcFailure {
    RpcFailure::new(jsonrpc::INVALID_PARAMS, refused.to_string())
}

impl CallIdentity {
    /// The call `caller` makes: `target` as the agent named it, `arguments` as it sent them.
    pub(super) fn of(caller: &Caller, backend: &str, method: &str, target: &str, arguments: Option<&Value>) -> Self {
        let args_digest = canonical_digest(arguments.unwrap_or(&Value::Null));
        CallIdentity::with_digest(caller, backend, method, target, &args_digest)
    }

    /// [`of`](Self::of) for arguments whose [`canonical_digest`] is `args_digest`.
    pub(super) fn with_digest(caller: &Caller, backend: &str, method: &str, target: &str, args_digest: &str) -> Self {
        CallIdentity {
            principal: caller.principal.name.clone(),
            backend: backend.to_owned(),
            method: method.to_owned(),
            target: target.to_owned(),
            args_digest: args_digest.to_owned(),
        }
    }
}

impl CallRouter {
    /// The continuation a retry's state names, if it may continue `call`.
    pub(super) fn open_state(&self, text: &str, call: &CallIdentity) -> Result<Continuation, RpcFailure> {
        let continued = self.states.load().open(text, SystemTime::now()).map_err(|refused| refusal(&refused))?;
        continued.check(call).map_err(|refused| refusal(&refused))?;
        Ok(continued)
    }

    /// The other replica holding the tool call a `tools/call` retry's `requestState` continues (`None`: this one,
    /// or none, and this replica answers the retry as always). The state is only opened here, to find the claim;
    /// the owner checks everything else when it serves the retry.
    pub async fn held_elsewhere(&self, params: &Value) -> Option<HeldElsewhere> {
        let text = params.get(REQUEST_STATE)?.as_str()?;
        let claim = ClaimKey::from_stored(self.states.load().open(text, SystemTime::now()).ok()?.claim?);
        if self.waiting.holds(&claim) {
            return None;
        }
        let record = self.ledger.store.get(&claim).await.ok()??;
        let elsewhere = record.state == ClaimState::InFlight && record.owner != self.ledger.owner;
        elsewhere.then_some(HeldElsewhere { owner: record.owner, claim })
    }

    /// A prompt's or resource's retry: its state checked against `call` and replaced by the backend's own.
    pub(super) fn continued(&self, call: &CallIdentity, params: &mut Value) -> Result<(), RpcFailure> {
        if let Some(text) = take_state(params)? {
            restore_backend_state(params, self.open_state(&text, call)?.backend_state);
        }
        Ok(())
    }

    /// A prompt's or resource's answer for the agent: an `input_required` one carries the gateway's state.
    pub(super) fn pass_input(&self, caller: &Caller, call: &CallIdentity, mut result: Value) -> Value {
        if caller.sessionless && asks_input(&result) {
            let sealer = self.states.load();
            hand_over(&mut result, |backend_state| sealer.seal(&Continuation::issue(call, None, 0, backend_state)));
        }
        result
    }

    /// What becomes of round `round`'s answer (0: the first request) to a tool call: `Err` is the agent's answer
    /// with the claim left open — the backend asked for input, or a retry did not reach it and may be sent again —
    /// and `Ok` goes on to settle the claim.
    pub(super) fn continue_call(
        &self,
        caller: &Caller,
        call: impl FnOnce() -> CallIdentity,
        report: &outcome::Report<'_>,
        claim: &ClaimKey,
        round: u32,
        answer: Result<Relayed, McpError>,
    ) -> Result<Result<Relayed, McpError>, Value> {
        match answer {
            Ok(relayed) if caller.sessionless && relayed.flags.asks_input() => {
                // The gateway's state replaces the backend's: this answer is edited, so it is a tree.
                let mut result = relayed.result.to_value();
                let (call, next) = (call(), round + 1);
                let sealer = self.states.load();
                hand_over(&mut result, |backend_state| {
                    sealer.seal(&Continuation::issue(&call, Some(claim.to_string()), next, backend_state))
                });
                self.waiting.wait(claim, next);
                self.expire_later(claim.clone(), next);
                Err(result)
            }
            Err(error) if round > 0 && error.proves_not_delivered() => {
                // Earlier rounds reached the backend, so the claim is not released; this round may be retried.
                self.waiting.wait(claim, round);
                Err(outcome::failed_call(report, &error, Some(claim)))
            }
            answer => {
                if round > 0 {
                    self.waiting.forget(claim);
                }
                Ok(answer)
            }
        }
    }

    /// Settles the claim `unknown` if round `round` is still unanswered when its state expires.
    fn expire_later(&self, claim: ClaimKey, round: u32) {
        let waiting = Arc::clone(&self.waiting);
        let ledger = self.ledger.clone();
        tokio::spawn(async move {
            tokio::time::sleep(STATE_TTL).await;
            settle_unanswered(&waiting, &ledger, &claim, round).await;
        });
    }
}

/// Marks the claim `unknown` if round `round` is still unanswered (see the module rules).
async fn settle_unanswered(waiting: &Waiting, ledger: &CallLedger, claim: &ClaimKey, round: u32) {
    if !waiting.expire(claim, round) {
        return;
    }
    match ledger.store.mark_unknown(claim, &ledger.owner, UNANSWERED).await {
        Ok(()) => ledger.metrics.count_claims(ClaimWrite::Unknown, 1),
        Err(error) => tracing::error!(%claim, %error, "ledger: cannot settle an unanswered call"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_latest_round_is_taken_and_by_one_retry() {
        let waiting = Waiting::default();
        let claim = ClaimKey::idempotency("p", "k");
        assert_eq!(waiting.take(&claim, 1), Ok(false), "nothing waits here");
        waiting.wait(&claim, 1);
        assert_eq!(waiting.take(&claim, 0), Err(StateRefusal::Superseded));
        assert_eq!(waiting.take(&claim, 1), Ok(true));
        assert_eq!(waiting.take(&claim, 1), Err(StateRefusal::Busy));
        assert!(!waiting.expire(&claim, 1), "a round being answered does not expire");
        waiting.wait(&claim, 2);
        assert!(waiting.expire(&claim, 2));
        assert_eq!(waiting.take(&claim, 2), Ok(false));
    }

    #[tokio::test]
    async fn a_round_nobody_answers_settles_the_claim_unknown() {
        let ledger = CallLedger {
            store: crate::ledger::LedgerStore::memory(),
            owner: "gw".into(),
            lease: std::time::Duration::from_secs(30),
            max_result: 1 << 20,
            metrics: Default::default(),
        };
        let waiting = Waiting::default();
        for name in ["unanswered", "answering"] {
            let claim = ClaimKey::idempotency("p", name);
            let new = crate::ledger::NewClaim {
                key: claim.clone(),
                principal: "p".into(),
                session: "s".into(),
                backend: "b".into(),
                tool: "t".into(),
                args_digest: "d".into(),
                owner: "gw".into(),
                lease: ledger.lease,
            };
            ledger.store.claim(new).await.expect("claimed");
            waiting.wait(&claim, 1);
        }
        let answering = ClaimKey::idempotency("p", "answering");
        assert_eq!(waiting.take(&answering, 1), Ok(true));
        for name in ["unanswered", "answering"] {
            settle_unanswered(&waiting, &ledger, &ClaimKey::idempotency("p", name), 1).await;
        }
        let unanswered = ledger.store.get(&ClaimKey::idempotency("p", "unanswered")).await.unwrap().unwrap();
        assert_eq!(unanswered.state, crate::ledger::ClaimState::Unknown);
        assert_eq!(unanswered.error.as_deref(), Some(UNANSWERED));
        let answered = ledger.store.get(&answering).await.unwrap().unwrap();
        assert_eq!(answered.state, crate::ledger::ClaimState::InFlight, "a retry is answering it");
    }

    #[test]
    fn input_required_is_a_protocol_error_outside_the_three_methods() {
        let asking = json!({"resultType": "input_required", "inputRequests": {}});
        assert!(refuse_elsewhere("b", method::PROMPTS_GET, asking.clone()).is_ok());
        let refused = refuse_elsewhere("b", method::COMPLETION_COMPLETE, asking).unwrap_err();
        assert_eq!(refused.code, jsonrpc::INTERNAL_ERROR);
        assert!(refused.message.contains("protocol error of the backend"), "{}", refused.message);
        assert!(refuse_elsewhere("b", method::COMPLETION_COMPLETE, json!({"completion": {}})).is_ok());
    }

    #[test]
    fn the_agent_gets_the_gateways_state_and_no_cache_hints() {
        let mut result = json!({"resultType": "input_required", "inputRequests": {"a": {}}, "requestState": "mine", "ttlMs": 5, "cacheScope": "public"});
        let backend = hand_over(&mut result, |backend| format!("sealed({})", backend.unwrap_or_default()));
        assert_eq!(backend.as_deref(), Some("mine"));
        assert_eq!(
            result,
            json!({"resultType": "input_required", "inputRequests": {"a": {}}, "requestState": "sealed(mine)"})
        );
        let mut params = json!({"name": "t"});
        restore_backend_state(&mut params, None);
        assert!(params.get(REQUEST_STATE).is_none(), "no backend state, none sent");
    }
}
