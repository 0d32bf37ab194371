//! The agent's idempotency key: where it may be sent and what it may be.
//!
//! Rules, written once here for both forms:
//! - A key is a string of 1–[`MAX_KEY_LEN`] printable ASCII characters (space to `~`, 0x20–0x7E), sent in
//!   `params._meta["switchyard/idempotency-key"]` or in one `Idempotency-Key` HTTP header.
//! - Anything else is refused, never ignored: an agent that sent a key believes its call is protected by it, so
//!   running the call without it would break at most once silently. That covers a `_meta` value that is not a
//!   string (number, object, `null`), an empty or too long key, a non-ASCII or control character, more than one
//!   header, and a header and a `_meta` key that differ. The same key in both places is one key.
//! - Refusals are sentences that say what is wrong, how to fix it and that the call did not run. The front
//!   answers a bad header with HTTP 400 before the request reaches the router; a bad `_meta` key (or a
//!   disagreement) is the JSON-RPC error `-32602` of an ordinary answer. Either way no claim is made.

use std::fmt;

use serde_json::Value;
use thiserror::Error;

/// Where the agent may put its idempotency key inside the request.
pub const IDEMPOTENCY_META: &str = "switchyard/idempotency-key";
/// The HTTP header an agent may send its idempotency key in (lowercase, as header maps compare).
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// The longest idempotency key, in characters (= bytes: keys are ASCII).
pub const MAX_KEY_LEN: usize = 255;

/// A valid idempotency key (see the module rules).
#[derive(Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Checks `bytes` against the key rules; `place` names where they came from, for the refusal.
    fn parse(bytes: &[u8], place: KeyPlace) -> Result<IdempotencyKey, KeyRefusal> {
        let flaw = if bytes.is_empty() {
            KeyFlaw::Empty
        } else if bytes.len() > MAX_KEY_LEN {
            KeyFlaw::TooLong(bytes.len())
        } else if !bytes.iter().all(|byte| (b' '..=b'~').contains(byte)) {
            KeyFlaw::NotPrintableAscii
        } else {
            // Printable ASCII is UTF-8 as it is, so nothing is replaced.
            return Ok(IdempotencyKey(String::from_utf8_lossy(bytes).into_owned()));
        };
        Err(KeyRefusal::Malformed { place, flaw })
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({:?})", self.0)
    }
}

/// Where a key was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlace {
    Header,
    Meta,
}

impl fmt::Display for KeyPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPlace::Header => f.write_str("the Idempotency-Key header"),
            KeyPlace::Meta => write!(f, "the idempotency key in `_meta[\"{IDEMPOTENCY_META}\"]`"),
        }
    }
}

/// What is wrong with a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFlaw {
    /// A `_meta` value that is not a JSON string; names its JSON type.
    NotAString(&'static str),
    Empty,
    /// With the length sent.
    TooLong(usize),
    NotPrintableAscii,
}

impl fmt::Display for KeyFlaw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFlaw::NotAString(kind) => write!(f, "is {kind}, but it must be a string"),
            KeyFlaw::Empty => f.write_str("is empty"),
            KeyFlaw::TooLong(length) => write!(f, "is {length} characters long, more than the {MAX_KEY_LEN} allowed"),
            KeyFlaw::NotPrintableAscii => {
                f.write_str("contains a character that is not printable ASCII (only space to `~` are allowed)")
            }
        }
    }
}

/// Why an agent's idempotency key was refused; the message is the sentence the agent reads.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyRefusal {
    #[error(
        "{place} {flaw}; an idempotency key is a string of 1 to {MAX_KEY_LEN} printable ASCII characters. The \
         call did not run; send it again with a valid key"
    )]
    Malformed { place: KeyPlace, flaw: KeyFlaw },
    #[error(
        "the request has more than one Idempotency-Key header; send one key. The call did not run; send it again \
         with a single key"
    )]
    SeveralHeaders,
    #[error(
        "the Idempotency-Key header and the key in `_meta[\"{IDEMPOTENCY_META}\"]` differ; send one key, or the \
         same key in both. The call did not run; send it again with a single key"
    )]
    Disagree,
}

/// The key of the `Idempotency-Key` header(s): `values` are the raw bytes of every such header of the request.
pub fn from_header<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<IdempotencyKey>, KeyRefusal> {
    let mut values = values.into_iter();
    let Some(first) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(KeyRefusal::SeveralHeaders);
    }
    IdempotencyKey::parse(first, KeyPlace::Header).map(Some)
}

/// The key of a call: the one in `params._meta`, the header's (already checked by [`from_header`]), or none.
pub(super) fn of_call(params: &Value, header: Option<&IdempotencyKey>) -> Result<Option<IdempotencyKey>, KeyRefusal> {
    let in_meta = match params.pointer("/_meta").and_then(|meta| meta.get(IDEMPOTENCY_META)) {
        None => None,
        Some(Value::String(text)) => Some(IdempotencyKey::parse(text.as_bytes(), KeyPlace::Meta)?),
        Some(other) => return Err(KeyRefusal::Malformed { place: KeyPlace::Meta, flaw: not_a_string(other) }),
    };
    match (in_meta, header) {
        (Some(meta), Some(header)) if meta != *header => Err(KeyRefusal::Disagree),
        (Some(meta), _) => Ok(Some(meta)),
        (None, header) => Ok(header.cloned()),
    }
}

fn not_a_string(value: &Value) -> KeyFlaw {
    KeyFlaw::NotAString(match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
        Value::String(_) => "a string",
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(key: Value) -> Value {
        json!({"_meta": {IDEMPOTENCY_META: key}})
    }

    fn header(text: &str) -> IdempotencyKey {
        from_header([text.as_bytes()]).expect("valid").expect("present")
    }

    fn flaw_of(params: &Value) -> KeyFlaw {
        match of_call(params, None) {
            Err(KeyRefusal::Malformed { place: KeyPlace::Meta, flaw }) => flaw,
            other => panic!("not refused as malformed: {other:?}"),
        }
    }

    #[test]
    fn keys_are_printable_ascii_of_1_to_255_characters() {
        for valid in ["k", " ", "~", &"x".repeat(MAX_KEY_LEN), "order 42/#?"] {
            assert_eq!(of_call(&meta(json!(valid)), None).expect("valid").expect("a key").as_str(), valid);
        }
        assert_eq!(flaw_of(&meta(json!(""))), KeyFlaw::Empty);
        assert_eq!(flaw_of(&meta(json!("x".repeat(MAX_KEY_LEN + 1)))), KeyFlaw::TooLong(256));
        for invalid in ["café", "a\u{7f}", "a\tb", "a\nb", "\u{0}"] {
            assert_eq!(flaw_of(&meta(json!(invalid))), KeyFlaw::NotPrintableAscii, "{invalid:?}");
        }
    }

    #[test]
    fn meta_keys_must_be_strings() {
        for (value, kind) in [(json!(12345), "a number"), (json!({}), "an object"), (json!(null), "null")] {
            assert_eq!(flaw_of(&meta(value)), KeyFlaw::NotAString(kind));
        }
        assert_eq!(of_call(&json!({"_meta": {}}), None), Ok(None), "no key at all is fine");
    }

    #[test]
    fn headers_are_checked_byte_by_byte() {
        assert_eq!(from_header([]), Ok(None));
        assert_eq!(header("K").as_str(), "K");
        let non_ascii = from_header(["café".as_bytes()]);
        assert_eq!(non_ascii, Err(KeyRefusal::Malformed { place: KeyPlace::Header, flaw: KeyFlaw::NotPrintableAscii }));
        let refused = from_header([&b"\xff"[..]]).unwrap_err().to_string();
        assert!(refused.starts_with("the Idempotency-Key header contains a character that is not"), "{refused}");
        assert_eq!(from_header([&b"a"[..], &b"a"[..]]), Err(KeyRefusal::SeveralHeaders));
    }

    #[test]
    fn meta_and_header_must_agree() {
        assert_eq!(of_call(&json!({}), Some(&header("K"))), Ok(Some(header("K"))));
        assert_eq!(of_call(&meta(json!("K")), Some(&header("K"))), Ok(Some(header("K"))));
        assert_eq!(of_call(&meta(json!("K")), Some(&header("L"))), Err(KeyRefusal::Disagree));
        let malformed_meta = of_call(&meta(json!(1)), Some(&header("K")));
        assert!(matches!(malformed_meta, Err(KeyRefusal::Malformed { place: KeyPlace::Meta, .. })));
    }

    #[test]
    fn refusals_say_why_and_that_nothing_ran() {
        let text = KeyRefusal::Malformed { place: KeyPlace::Meta, flaw: KeyFlaw::NotAString("a number") }.to_string();
        assert!(text.starts_with("the idempotency key in `_meta[\"switchyard/idempotency-key\"]` is a number"));
        assert!(text.contains("did not run"), "{text}");
    }
}
