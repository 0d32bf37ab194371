//! The gateway's own `requestState` for a 2026-07-28 agent (2026-07-28 basic/patterns/mrtr: `requestState` is
//! attacker-controlled; a server that relies on it integrity-protects it, binds it to the principal, an expiry and
//! the call, and rejects what fails verification).
//!
//! Rules:
//! - The text is `sy1.` base64url(payload JSON) `.` base64url(HMAC-SHA256(key, domain ‖ payload)), sealed by
//!   [`crate::seal`] with the domain as the purpose. The MAC is checked in constant time before a byte of the
//!   payload is parsed; the text's length before it is decoded.
//! - The key is derived from the gateway's session secret ([`StateKey`]), so every replica and every restart that
//!   shares the secret opens what another sealed; the domain prefix keeps these MACs apart from session ids.
//! - A state binds: the principal, the backend, the method and the target (tool or prompt name, or URI, as the
//!   agent named it), a digest of the arguments, the ledger claim of a tool call and its round, an expiry, and the
//!   backend's own `requestState` (absent when the backend gave none), which goes back upstream untouched.
//! - It is signed, not encrypted: the agent can read what it binds; the backend's state was the agent's to hold
//!   anyway. Every refusal is a sentence for the agent saying that nothing was sent.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::seal::{KEY_LEN, Seal, Unsealed, derive_key};

/// How long an agent has to answer a backend's input requests.
pub const STATE_TTL: Duration = Duration::from_secs(10 * 60);
/// The longest state [`StateSealer::open`] decodes (an agent sends it).
const MAX_STATE_LEN: usize = 64 * 1024;
const PREFIX: &str = "sy1.";
/// Names what the MAC signs, so no other MAC made with this key passes for a request state.
const DOMAIN: &[u8] = b"switchyard/request-state/v1\n";

/// The key request states are sealed with.
#[derive(Clone)]
pub struct StateKey([u8; KEY_LEN]);

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl StateKey {
    /// The key derived from the gateway's session secret: HMAC-SHA256(secret, purpose label).
    pub fn derived_from(secret: &[u8; KEY_LEN]) -> StateKey {
        StateKey(derive_key(secret, b"switchyard/request-state-key/v1"))
    }

    /// A seal under this key for another `purpose` than request states (the purpose keeps their MACs apart).
    pub(super) fn seal_for(&self, purpose: &[u8]) -> Seal {
        Seal::new(&self.0, purpose)
    }

    /// A key of this process alone, until [`derived_from`](Self::derived_from)'s replaces it (the router exists
    /// before the front loads the session secret). A process without a random source cannot run safely at all.
    #[expect(clippy::expect_used, reason = "a process without a random source cannot run safely at all")]
    pub fn random() -> StateKey {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::fill(&mut bytes).expect("the operating system's random source");
        StateKey(bytes)
    }
}

/// What a sealed state binds (see the module rules).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    #[serde(rename = "p")]
    pub principal: String,
    #[serde(rename = "b")]
    pub backend: String,
    #[serde(rename = "m")]
    pub method: String,
    #[serde(rename = "n")]
    pub target: String,
    #[serde(rename = "a")]
    pub args_digest: String,
    /// The ledger claim of a tool call (none for prompts and resources, which the ledger does not guard).
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// Which input round of the call this state answers; only the latest is accepted.
    #[serde(rename = "r", default)]
    pub round: u32,
    /// Milliseconds since the Unix epoch after which the state is refused.
    #[serde(rename = "e")]
    pub expires_ms: u64,
    /// The backend's own `requestState`, returned to it untouched.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub backend_state: Option<String>,
}

/// The call a retry claims to continue, as the gateway sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallIdentity {
    pub principal: String,
    pub backend: String,
    pub method: String,
    pub target: String,
    pub args_digest: String,
}

/// Why a retry's `requestState` was refused; the message is the sentence the agent reads (`-32602`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateRefusal {
    #[error("`requestState` must be a string this gateway issued; {NOTHING_SENT}")]
    Malformed,
    #[error("`requestState` does not verify: it was altered or not issued by this gateway; {NOTHING_SENT}")]
    Forged,
    #[error("`requestState` expired (an input round lasts {} s); {NOTHING_SENT}. Send the request again without it", STATE_TTL.as_secs())]
    Expired,
    #[error("`requestState` was issued to another principal; {NOTHING_SENT}")]
    OtherPrincipal,
    #[error(
        "`requestState` belongs to another call ({method} of `{target}`); send it with the request it was issued for; {NOTHING_SENT}"
    )]
    OtherCall { method: String, target: String },
    #[error(
        "`requestState` answers an earlier input round of this call; answer the latest input requests with the latest `requestState`; {NOTHING_SENT}"
    )]
    Superseded,
    #[error(
        "another retry of this call is being answered; wait for its answer (it carries the next input requests or the result); {NOTHING_SENT}"
    )]
    Busy,
    #[error("the call this `requestState` continues is no longer waiting for input here ({why}); {NOTHING_SENT}")]
    NotWaiting { why: String },
}

const NOTHING_SENT: &str = "nothing was sent to the backend";

/// Seals and opens request states with one key.
#[derive(Clone)]
pub struct StateSealer {
    seal: Seal,
}

impl fmt::Debug for StateSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StateSealer(<redacted>)")
    }
}

impl StateSealer {
    pub fn new(key: &StateKey) -> StateSealer {
        StateSealer { seal: Seal::new(&key.0, DOMAIN) }
    }

    pub fn seal(&self, continuation: &Continuation) -> String {
        // A struct of strings and integers always serializes.
        let payload = serde_json::to_vec(continuation).unwrap_or_default();
        format!("{PREFIX}{}", self.seal.seal(&payload))
    }

    /// The continuation sealed in `text` if this key sealed it and it has not expired.
    pub fn open(&self, text: &str, now: SystemTime) -> Result<Continuation, StateRefusal> {
        if text.len() > MAX_STATE_LEN {
            return Err(StateRefusal::Malformed);
        }
        let sealed = text.strip_prefix(PREFIX).ok_or(StateRefusal::Malformed)?;
        let payload = self.seal.open(sealed).map_err(|unsealed| match unsealed {
            Unsealed::Malformed => StateRefusal::Malformed,
            Unsealed::Forged => StateRefusal::Forged,
        })?;
        let continuation: Continuation = serde_json::from_slice(&payload).map_err(|_| StateRefusal::Malformed)?;
        if millis(now) > continuation.expires_ms {
            return Err(StateRefusal::Expired);
        }
        Ok(continuation)
    }
}

impl Continuation {
    /// A state for a call that asked for input at `now`.
    pub fn issue(call: &CallIdentity, claim: Option<String>, round: u32, backend_state: Option<String>) -> Self {
        Continuation {
            principal: call.principal.clone(),
            backend: call.backend.clone(),
            method: call.method.clone(),
            target: call.target.clone(),
            args_digest: call.args_digest.clone(),
            claim,
            round,
            expires_ms: millis(SystemTime::now() + STATE_TTL),
            backend_state,
        }
    }

    /// Whether this state may continue `call`: same principal, and the same backend, method, target and arguments.
    pub fn check(&self, call: &CallIdentity) -> Result<(), StateRefusal> {
        if self.principal != call.principal {
            return Err(StateRefusal::OtherPrincipal);
        }
        let same = self.backend == call.backend
            && self.method == call.method
            && self.target == call.target
            && self.args_digest == call.args_digest;
        if !same {
            return Err(StateRefusal::OtherCall { method: self.method.clone(), target: self.target.clone() });
        }
        Ok(())
    }
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    use super::*;

    type HmacSha256 = Hmac<Sha256>;

    fn call() -> CallIdentity {
        CallIdentity {
            principal: "alice".into(),
            backend: "b".into(),
            method: "tools/call".into(),
            target: "b__pay".into(),
            args_digest: "d".into(),
        }
    }

    fn sealer() -> StateSealer {
        StateSealer::new(&StateKey::derived_from(&[7; 32]))
    }

    #[test]
    fn a_sealed_state_opens_with_what_it_binds() {
        let issued = Continuation::issue(&call(), Some("idem:1:a:k".into()), 2, Some("backend-state".into()));
        let text = sealer().seal(&issued);
        assert!(text.starts_with(PREFIX) && !text.contains("backend-state"), "base64, not the backend's: {text}");
        let opened = sealer().open(&text, SystemTime::now()).expect("opens");
        assert_eq!(opened, issued);
        assert_eq!(opened.check(&call()), Ok(()));
        let without = Continuation::issue(&call(), None, 0, None);
        let opened = sealer().open(&sealer().seal(&without), SystemTime::now()).expect("opens");
        assert_eq!((opened.backend_state, opened.claim), (None, None), "absent stays absent");
    }

    #[test]
    fn the_tag_is_the_documented_hmac_of_the_derived_key() {
        let secret = [9u8; 32];
        let text =
            StateSealer::new(&StateKey::derived_from(&secret)).seal(&Continuation::issue(&call(), None, 0, None));
        let mut derive = HmacSha256::new_from_slice(&secret).expect("any key length");
        derive.update(b"switchyard/request-state-key/v1");
        let mut expected = HmacSha256::new_from_slice(&derive.finalize().into_bytes()).expect("any key length");
        let (payload, tag) = text.strip_prefix(PREFIX).and_then(|sealed| sealed.split_once('.')).expect("sealed");
        expected.update(DOMAIN);
        expected.update(&URL_SAFE_NO_PAD.decode(payload).expect("base64url"));
        assert_eq!(URL_SAFE_NO_PAD.decode(tag).expect("base64url")[..], expected.finalize().into_bytes()[..]);
    }

    #[test]
    fn tampered_foreign_and_expired_states_are_refused() {
        let text = sealer().seal(&Continuation::issue(&call(), None, 0, Some("s".into())));
        let now = SystemTime::now();
        let other_key = StateSealer::new(&StateKey::derived_from(&[8; 32]));
        assert_eq!(other_key.open(&text, now), Err(StateRefusal::Forged));
        let (payload, tag) = text.strip_prefix(PREFIX).unwrap().split_once('.').unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(payload).unwrap();
        let position = bytes.iter().position(|byte| *byte == b'a').unwrap();
        bytes[position] = b'b';
        let altered = format!("{PREFIX}{}.{tag}", URL_SAFE_NO_PAD.encode(bytes));
        assert_eq!(sealer().open(&altered, now), Err(StateRefusal::Forged));
        for malformed in ["", "sy1.", "x.y.z", "sy1.!!.??", &"a".repeat(MAX_STATE_LEN + 1)] {
            assert_eq!(sealer().open(malformed, now), Err(StateRefusal::Malformed), "{malformed:.20}");
        }
        let later = now + STATE_TTL + Duration::from_secs(1);
        assert_eq!(sealer().open(&text, later), Err(StateRefusal::Expired));
    }

    #[test]
    fn a_state_continues_only_its_own_call() {
        let issued = Continuation::issue(&call(), None, 0, None);
        let bob = CallIdentity { principal: "bob".into(), ..call() };
        assert_eq!(issued.check(&bob), Err(StateRefusal::OtherPrincipal));
        for other in [
            CallIdentity { target: "b__refund".into(), ..call() },
            CallIdentity { backend: "c".into(), ..call() },
            CallIdentity { method: "prompts/get".into(), ..call() },
            CallIdentity { args_digest: "e".into(), ..call() },
        ] {
            let refused = issued.check(&other).unwrap_err();
            assert!(refused.to_string().contains("another call (tools/call of `b__pay`)"), "{refused}");
        }
    }

    #[test]
    fn refusals_say_nothing_was_sent() {
        for refusal in [StateRefusal::Forged, StateRefusal::Expired, StateRefusal::Busy, StateRefusal::Superseded] {
            assert!(refusal.to_string().contains(NOTHING_SENT), "{refusal}");
        }
    }
}
