//! The ledger's vocabulary: claim keys, states, the claim a caller asks for and the record a store keeps.
//!
//! Rules:
//! - A [`ClaimKey`] is scoped: an idempotency key only ever matches calls of the same principal, a request id
//!   only calls of the same agent session. The principal/session part is length-prefixed, so no choice of
//!   characters in one part can make two different scopes produce the same key.
//! - Parts longer than [`MAX_KEY_PART`] bytes are replaced by their SHA-256, so keys (and Postgres notification
//!   payloads, limited to 8000 bytes) stay small whatever an agent sends.
//! - A claim key names one call: one backend, one tool, one set of arguments (their digest). A second call
//!   under the key is the same call only when all three match ([`ClaimRecord::mismatch`]); the stores keep the
//!   first claim's columns untouched, so the comparison needs no schema of its own.
//! - Times cross the API as [`SystemTime`] and are stored as whole milliseconds since the Unix epoch.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::counted_ids::CountedIds;
use crate::raw_json::RawJson;

use super::digest::sha256_hex;
use super::error::LedgerError;

/// Longest key part kept verbatim; longer parts are replaced by `#<sha256>`.
pub const MAX_KEY_PART: usize = 256;

/// Longest key [`ClaimKey::parse`] accepts (two parts of at most 256 bytes plus framing fit easily).
const MAX_KEY_LEN: usize = 1024;

const IDEMPOTENCY_PREFIX: &str = "idem:";
const REQUEST_PREFIX: &str = "req:";

/// The identity of one tool call in the ledger, in its string form (`idem:5:alice:order-42`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey(String);

impl ClaimKey {
    /// The key of a call carrying an idempotency key, scoped to the authenticated principal.
    pub fn idempotency(principal: &str, key: &str) -> ClaimKey {
        Self::scoped(IDEMPOTENCY_PREFIX, principal, key)
    }

    /// The key of a call without an idempotency key: the agent session and the JSON-RPC request id, as JSON
    /// (so the number `1` and the string `"1"` are different requests, as JSON-RPC says).
    pub fn request(agent_session: &str, request_id: &Value) -> ClaimKey {
        Self::scoped(REQUEST_PREFIX, agent_session, &request_id.to_string())
    }

    fn scoped(prefix: &str, scope: &str, key: &str) -> ClaimKey {
        let scope = bounded_part(scope);
        let key = bounded_part(key);
        ClaimKey(format!("{prefix}{}:{scope}:{key}", scope.len()))
    }

    /// A key as an operator typed it (`switchyard calls resolve KEY`); only the format is checked.
    pub fn parse(text: &str) -> Result<ClaimKey, LedgerError> {
        let known = text.starts_with(IDEMPOTENCY_PREFIX) || text.starts_with(REQUEST_PREFIX);
        if !known || text.len() > MAX_KEY_LEN {
            return Err(LedgerError::InvalidKey { key: text.chars().take(80).collect() });
        }
        Ok(ClaimKey(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Rebuilds a key read back from a store, where it was written by this module.
    pub(crate) fn from_stored(text: String) -> ClaimKey {
        ClaimKey(text)
    }
}

fn bounded_part(part: &str) -> String {
    if part.len() > MAX_KEY_PART { format!("#{}", sha256_hex(part.as_bytes())) } else { part.to_owned() }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClaimKey({:?})", self.0)
    }
}

/// Where a claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimState {
    /// The call was claimed and may be running.
    InFlight,
    /// The call finished; its result (or the result's digest) is stored.
    Completed,
    /// The call may or may not have run (failure after delivery, timeout, or its owner died); it is never
    /// repeated automatically.
    Unknown,
}

impl ClaimState {
    /// The spelling stored in the database and shown to operators.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InFlight => "in_flight",
            Self::Completed => "completed",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<ClaimState> {
        match text {
            "in_flight" => Some(Self::InFlight),
            "completed" => Some(Self::Completed),
            "unknown" => Some(Self::Unknown),
            _ => None,
        }
    }
}

impl fmt::Display for ClaimState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A claim a gateway instance asks for before it sends a call to a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClaim {
    pub key: ClaimKey,
    pub principal: String,
    pub session: String,
    pub backend: String,
    pub tool: String,
    /// [`super::canonical_digest`] of the call's arguments.
    pub args_digest: String,
    /// The claiming gateway instance; only it may settle the claim.
    pub owner: String,
    /// How long the claim stays `in_flight` without a renewal before it may be expired to `unknown`.
    pub lease: Duration,
}

/// Everything the ledger knows about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimRecord {
    pub key: ClaimKey,
    /// A random id unique to this claim (32 hex digits); usable as a `jti`, and how a store recognises its own
    /// insert when it retries a claim after a lost connection.
    pub id: String,
    pub principal: String,
    pub session: String,
    pub backend: String,
    pub tool: String,
    pub args_digest: String,
    pub state: ClaimState,
    /// The stored result, when completed and no larger than the store's `max_result`.
    pub result: Option<RawJson>,
    /// The result's [`super::canonical_digest`], when it was too large to keep.
    pub result_digest: Option<String>,
    /// Why the outcome is unknown, or an operator's note.
    pub error: Option<String>,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
    /// The gateway instance that claimed the call, or [`OPERATOR`] once an operator settled it.
    pub owner: String,
    pub lease_until: SystemTime,
}

/// How a call differs from the call a claim was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMismatch {
    /// Another tool, or a tool of another backend.
    Tool,
    /// The same tool with other arguments.
    Arguments,
}

impl ClaimRecord {
    /// How `call` differs from the call this claim was made for, or `None` when it is the same call.
    pub fn mismatch(&self, call: &NewClaim) -> Option<CallMismatch> {
        if self.backend != call.backend || self.tool != call.tool {
            Some(CallMismatch::Tool)
        } else if self.args_digest != call.args_digest {
            Some(CallMismatch::Arguments)
        } else {
            None
        }
    }
}

/// The owner recorded on claims an operator settled with [`super::LedgerStore::resolve`].
pub const OPERATOR: &str = "operator";

/// What [`super::LedgerStore::claim`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// The caller owns the new claim and may send the call.
    Claimed(ClaimRecord),
    /// Another call holds or held the key; the call must not be sent.
    Existing(ClaimRecord),
}

/// What [`super::LedgerStore::wait_settled`] saw.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// The claim left `in_flight` (completed or unknown).
    Settled(Box<ClaimRecord>),
    /// The claim is gone: the first call was not delivered (or an operator cleared it), so it may be claimed again.
    Released,
    /// The claim was still `in_flight` at the deadline.
    TimedOut,
}

/// How the owner settles its claim once the call ended (see [`super::LedgerStore::settle`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    /// The call ran; what duplicates are answered with (kept whole up to `max_result` bytes, else as a digest).
    Completed(RawJson),
    /// The call may have run; why its outcome is unknown.
    Unknown(String),
    /// The call provably never reached the backend (`McpError::NotDelivered`): the claim is deleted.
    Released,
}

/// How an operator settles an `unknown` claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The call did run: the claim becomes `completed` (without a result) so retries are answered, not run.
    Completed,
    /// The call did not run: the claim is deleted so a retry runs it (its history keeps the record).
    Failed,
}

impl Resolution {
    /// Both resolutions, in the order operators are offered them.
    pub const ALL: [Resolution; 2] = [Resolution::Completed, Resolution::Failed];

    /// How a resolution is recorded in the call's history (`resolved_completed`, `resolved_failed`).
    pub fn state(self) -> &'static str {
        match self {
            Self::Completed => "resolved_completed",
            Self::Failed => "resolved_failed",
        }
    }

    /// The resolution [`Resolution::state`] names.
    pub fn parse_state(text: &str) -> Option<Resolution> {
        Resolution::ALL.into_iter().find(|resolution| resolution.state() == text)
    }

    /// The flag of `switchyard calls resolve KEY` that chooses this resolution.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Completed => "--completed",
            Self::Failed => "--failed",
        }
    }

    /// What settling a claim this way does, for the operator deciding (the CLI and the console say the same).
    pub fn effect(self) -> &'static str {
        match self {
            Self::Completed => {
                "marks the call completed (without a result): a retry with the same key is answered, the tool does \
                 not run again"
            }
            Self::Failed => "deletes the claim: a retry with the same key runs the tool again",
        }
    }
}

/// Which claims [`super::LedgerStore::list`] returns; every set field must match. Newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListFilter {
    pub state: Option<ClaimState>,
    pub principal: Option<String>,
    pub backend: Option<String>,
    pub tool: Option<String>,
    /// Only claims created at or after this time.
    pub since: Option<SystemTime>,
    /// At most this many claims.
    pub limit: usize,
}

impl Default for ListFilter {
    fn default() -> Self {
        Self { state: None, principal: None, backend: None, tool: None, since: None, limit: 1000 }
    }
}

/// Milliseconds since the Unix epoch (0 for earlier times, saturating far in the future).
pub(crate) fn to_millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn from_millis(millis: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// A new claim id as hex (see [`new_claim_id_bytes`]).
pub(crate) fn new_claim_id() -> Result<String, LedgerError> {
    Ok(crate::hex::encode(&new_claim_id_bytes()?))
}

/// A new claim id's 16 bytes, for a store that keeps them as bytes (the memory store). An id only tells the claim
/// a caller made from another made of the same key (a retry's, another replica's), so it must be unique, not
/// secret: 8 random bytes drawn once per process and a count (`counted_ids`), not a system call per call.
pub(crate) fn new_claim_id_bytes() -> Result<[u8; 16], LedgerError> {
    static CLAIM_IDS: CountedIds<16> = CountedIds::new();
    CLAIM_IDS.next().map_err(|error| LedgerError::unavailable(format!("no randomness: {error}")))
}

impl ClaimRecord {
    /// The record of a claim just made from `new`.
    pub(crate) fn claimed(new: &NewClaim, id: String, now: SystemTime) -> ClaimRecord {
        ClaimRecord {
            key: new.key.clone(),
            id,
            principal: new.principal.clone(),
            session: new.session.clone(),
            backend: new.backend.clone(),
            tool: new.tool.clone(),
            args_digest: new.args_digest.clone(),
            state: ClaimState::InFlight,
            result: None,
            result_digest: None,
            error: None,
            created_at: truncate_to_millis(now),
            updated_at: truncate_to_millis(now),
            owner: new.owner.clone(),
            lease_until: truncate_to_millis(now + new.lease),
        }
    }
}

/// `time` as a store keeps it, so a record built in memory equals the one read back.
pub(crate) fn truncate_to_millis(time: SystemTime) -> SystemTime {
    from_millis(to_millis(time))
}

#[cfg(test)]
impl ClaimRecord {
    /// A fresh `in_flight` claim of key `idem:p:k` owned by `owner`, for unit tests.
    pub(crate) fn sample(owner: &str, lease: Duration) -> ClaimRecord {
        let new = NewClaim {
            key: ClaimKey::idempotency("p", "k"),
            principal: "p".into(),
            session: "s".into(),
            backend: "b".into(),
            tool: "t".into(),
            args_digest: "d".into(),
            owner: owner.into(),
            lease,
        };
        ClaimRecord::claimed(&new, "id".into(), SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_scoped_to_their_principal_or_session() {
        assert_eq!(ClaimKey::idempotency("alice", "order-42").as_str(), "idem:5:alice:order-42");
        assert_ne!(ClaimKey::idempotency("alice", "k"), ClaimKey::idempotency("bob", "k"));
        // Without the length prefix both would read "idem:a:b:c".
        assert_ne!(ClaimKey::idempotency("a:b", "c"), ClaimKey::idempotency("a", "b:c"));
        assert_ne!(ClaimKey::request("s", &json!(1)), ClaimKey::request("s", &json!("1")));
        assert_ne!(ClaimKey::request("s", &json!(1)), ClaimKey::idempotency("s", "1"));
    }

    #[test]
    fn long_parts_are_digested() {
        let long = "x".repeat(MAX_KEY_PART + 1);
        let key = ClaimKey::idempotency(&long, &long);
        assert!(key.as_str().len() < 200, "{key}");
        assert_ne!(key, ClaimKey::idempotency(&long, "y"));
        assert_eq!(ClaimKey::parse(key.as_str()).expect("parses"), key);
    }

    #[test]
    fn parse_checks_the_format() {
        assert!(ClaimKey::parse("idem:1:a:b").is_ok());
        assert!(ClaimKey::parse("req:1:s:1").is_ok());
        assert!(matches!(ClaimKey::parse("bogus"), Err(LedgerError::InvalidKey { .. })));
        assert!(ClaimKey::parse(&format!("idem:{}", "x".repeat(MAX_KEY_LEN))).is_err());
    }

    #[test]
    fn states_round_trip() {
        for state in [ClaimState::InFlight, ClaimState::Completed, ClaimState::Unknown] {
            assert_eq!(ClaimState::parse(state.as_str()), Some(state));
        }
        assert_eq!(ClaimState::parse("done"), None);
    }

    #[test]
    fn millis_round_trip() {
        let time = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(from_millis(to_millis(time)), time);
        assert_eq!(to_millis(UNIX_EPOCH - Duration::from_secs(1)), 0);
        assert_eq!(from_millis(-5), UNIX_EPOCH);
    }
}
