//! The claim state machine, written once for every store.
//!
//! Rules:
//! - `in_flight` → `completed` | `unknown` | released (deleted); `unknown` → `completed` | released as well,
//!   because an owner that learns the real outcome late (its lease had expired) knows more than `unknown` says;
//!   `completed` is final.
//! - Only the owner settles its claim. Settling is idempotent for the owner (completing again with the same
//!   result, releasing a claim that is already gone), so a store may repeat a settle whose reply was lost.
//! - An operator resolves only `unknown` claims.
//! - SQL stores express each rule as the `WHERE` clause of one conditional statement (so it holds across
//!   processes) and call [`explain`] only when that statement changed nothing, to say why. The memory store
//!   calls [`explain`] first and applies the change when it answers [`Verdict::Apply`].

use super::digest::StoredResult;
use super::error::LedgerError;
use super::types::{ClaimKey, ClaimRecord, ClaimState, Settlement};

/// The states an owner may settle from.
pub(crate) const SETTLE_FROM: [ClaimState; 2] = [ClaimState::InFlight, ClaimState::Unknown];

/// The error text of claims whose lease expired.
pub(crate) const EXPIRED_NOTE: &str =
    "the gateway instance running the call stopped renewing its lease; the call may have run";
/// The message of tasks failed because the instance running their call stopped renewing its leases.
pub(crate) const ABANDONED_TASK_NOTE: &str =
    "the gateway replica running the call stopped (its lease expired): it may have run; it was not repeated";
/// The error text of claims an instance found left over from its previous run.
pub(crate) const ORPHANED_NOTE: &str =
    "the gateway instance running the call restarted before it finished; the call may have run";
/// The error text of claims an operator resolved as completed.
pub(crate) const RESOLVED_NOTE: &str = "an operator settled this call as completed; its result was not recorded";

/// An owner's settle operation.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Settle<'a> {
    Complete(&'a StoredResult),
    /// With the error text to record.
    MarkUnknown(&'a str),
    Release,
}

/// A [`Settle`] that owns its data, for settles queued to run on a store's writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnedSettle {
    Complete(StoredResult),
    MarkUnknown(String),
    Release,
}

impl OwnedSettle {
    /// The settle `settlement` asks for, its result bounded by `max_result` bytes.
    pub(crate) fn of(settlement: &Settlement, max_result: usize) -> OwnedSettle {
        match settlement {
            Settlement::Completed(result) => OwnedSettle::Complete(StoredResult::bound(result, max_result)),
            Settlement::Unknown(why) => OwnedSettle::MarkUnknown(why.clone()),
            Settlement::Released => OwnedSettle::Release,
        }
    }

    pub(crate) fn as_settle(&self) -> Settle<'_> {
        match self {
            OwnedSettle::Complete(stored) => Settle::Complete(stored),
            OwnedSettle::MarkUnknown(error) => Settle::MarkUnknown(error),
            OwnedSettle::Release => Settle::Release,
        }
    }
}

impl Settle<'_> {
    fn name(self) -> &'static str {
        match self {
            Settle::Complete(_) => "completing it",
            Settle::MarkUnknown(_) => "marking it unknown",
            Settle::Release => "releasing it",
        }
    }
}

/// What to do with a settle, given the claim as it is now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The claim may change as asked.
    Apply,
    /// The claim already is what the operation asks for.
    AlreadyDone,
}

/// What the rules read of a stored claim; borrowed, so a store need not build a [`ClaimRecord`] to ask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Current<'a> {
    pub(crate) owner: &'a str,
    pub(crate) state: ClaimState,
    pub(crate) result: Option<&'a str>,
    pub(crate) result_digest: Option<&'a str>,
}

impl<'a> From<&'a ClaimRecord> for Current<'a> {
    fn from(record: &'a ClaimRecord) -> Self {
        Current {
            owner: &record.owner,
            state: record.state,
            result: record.result.as_ref().map(|result| result.get()),
            result_digest: record.result_digest.as_deref(),
        }
    }
}

/// Decides a settle by `caller` on `current` (the claim as stored, `None` when absent).
pub(crate) fn explain(
    operation: Settle<'_>,
    key: &ClaimKey,
    caller: &str,
    current: Option<&ClaimRecord>,
) -> Result<Verdict, LedgerError> {
    decide(operation, key, caller, current.map(Current::from))
}

/// [`explain`] on what the rules read of the claim.
pub(crate) fn decide(
    operation: Settle<'_>,
    key: &ClaimKey,
    caller: &str,
    current: Option<Current<'_>>,
) -> Result<Verdict, LedgerError> {
    let Some(current) = current else {
        return match operation {
            Settle::Release => Ok(Verdict::AlreadyDone),
            _ => Err(LedgerError::NotFound { key: key.to_string() }),
        };
    };
    if current.owner != caller {
        return Err(LedgerError::NotOwner {
            key: key.to_string(),
            owner: current.owner.to_owned(),
            caller: caller.to_owned(),
        });
    }
    if SETTLE_FROM.contains(&current.state) {
        return Ok(Verdict::Apply);
    }
    match operation {
        Settle::Complete(stored)
            if stored.text.as_deref() == current.result && stored.digest.as_deref() == current.result_digest =>
        {
            Ok(Verdict::AlreadyDone)
        }
        _ => Err(LedgerError::WrongState { key: key.to_string(), state: current.state, operation: operation.name() }),
    }
}

/// Decides an operator's resolve of `current`.
pub(crate) fn explain_resolve(key: &ClaimKey, current: Option<&ClaimRecord>) -> Result<(), LedgerError> {
    decide_resolve(key, current.map(|record| record.state))
}

/// [`explain_resolve`] on the state of the claim (`None` when absent).
pub(crate) fn decide_resolve(key: &ClaimKey, state: Option<ClaimState>) -> Result<(), LedgerError> {
    match state {
        None => Err(LedgerError::NotFound { key: key.to_string() }),
        Some(ClaimState::Unknown) => Ok(()),
        Some(state) => Err(LedgerError::WrongState { key: key.to_string(), state, operation: "resolving it" }),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::raw_json::RawJson;

    use super::*;

    fn record(state: ClaimState) -> ClaimRecord {
        ClaimRecord { state, ..ClaimRecord::sample("me", Duration::from_secs(30)) }
    }

    #[test]
    fn owners_settle_unsettled_claims() {
        let key = ClaimKey::idempotency("p", "k");
        let stored = StoredResult::bound(&RawJson::of(&json!(1)), 10);
        for state in SETTLE_FROM {
            for operation in [Settle::Complete(&stored), Settle::MarkUnknown("e"), Settle::Release] {
                assert_eq!(explain(operation, &key, "me", Some(&record(state))).expect("allowed"), Verdict::Apply);
            }
        }
        let other = explain(Settle::MarkUnknown("e"), &key, "you", Some(&record(ClaimState::InFlight)));
        assert!(matches!(other, Err(LedgerError::NotOwner { .. })));
    }

    #[test]
    fn completed_is_final_but_repeats_are_accepted() {
        let key = ClaimKey::idempotency("p", "k");
        let done = ClaimRecord { result: Some(RawJson::of(&json!({"ok": 1}))), ..record(ClaimState::Completed) };
        let same = StoredResult::bound(&RawJson::of(&json!({"ok": 1})), 100);
        let different = StoredResult::bound(&RawJson::of(&json!({"ok": 2})), 100);
        assert_eq!(explain(Settle::Complete(&same), &key, "me", Some(&done)).expect("repeat"), Verdict::AlreadyDone);
        assert!(matches!(
            explain(Settle::Complete(&different), &key, "me", Some(&done)),
            Err(LedgerError::WrongState { state: ClaimState::Completed, .. })
        ));
        assert!(explain(Settle::MarkUnknown("e"), &key, "me", Some(&done)).is_err());
        assert!(explain(Settle::Release, &key, "me", Some(&done)).is_err());
    }

    #[test]
    fn absent_claims() {
        let key = ClaimKey::idempotency("p", "k");
        assert_eq!(explain(Settle::Release, &key, "me", None).expect("gone is released"), Verdict::AlreadyDone);
        assert!(matches!(explain(Settle::MarkUnknown("e"), &key, "me", None), Err(LedgerError::NotFound { .. })));
        assert!(matches!(explain_resolve(&key, None), Err(LedgerError::NotFound { .. })));
        assert!(explain_resolve(&key, Some(&record(ClaimState::Unknown))).is_ok());
        assert!(explain_resolve(&key, Some(&record(ClaimState::InFlight))).is_err());
    }
}
