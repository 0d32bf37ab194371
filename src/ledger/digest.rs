//! Digests the ledger records: of call arguments (to tell a retry from a different call under the same key) and
//! of results too large to keep.
//!
//! Rules: a digest is the lowercase hex SHA-256 of the value's canonical JSON: object keys sorted (by their
//! UTF-8 bytes) at every depth, no insignificant blanks, strings and numbers written as `serde_json` writes
//! them. The canonical text is streamed into the hasher, never built in memory.

use std::io::{self, Write};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::hex;
use crate::raw_json::RawJson;

/// Hex SHA-256 of `value`'s canonical JSON; equal for equal values whatever their key order.
pub fn canonical_digest(value: &Value) -> String {
    let mut sink = HashSink(Sha256::new());
    // Writing into a hasher cannot fail, and serde_json only fails on non-string map keys, which `Value` has none of.
    let _ = write_canonical(&mut sink, value);
    hex::encode(&sink.0.finalize())
}

/// `value`'s canonical JSON text (what [`canonical_digest`] hashes), for storing a definition to compare later.
pub fn canonical_json(value: &Value) -> String {
    let mut text = Vec::new();
    // Writing into a Vec cannot fail, nor can serializing a `Value`.
    let _ = write_canonical(&mut text, value);
    String::from_utf8(text).unwrap_or_default()
}

/// Hex SHA-256 of raw bytes.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes))
}

struct HashSink(Sha256);

impl Write for HashSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn write_canonical(out: &mut impl Write, value: &Value) -> io::Result<()> {
    match value {
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(out, item)?;
            }
            out.write_all(b"]")
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|(a, _), (b, _)| a.as_bytes().cmp(b.as_bytes()));
            out.write_all(b"{")?;
            for (index, (name, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, name)?;
                out.write_all(b":")?;
                write_canonical(out, item)?;
            }
            out.write_all(b"}")
        }
        scalar => serde_json::to_writer(out, scalar).map_err(io::Error::other),
    }
}

/// A result as a store keeps it: the JSON text when small enough, else only its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredResult {
    pub(crate) text: Option<String>,
    pub(crate) digest: Option<String>,
}

impl StoredResult {
    /// Keeps `result` when its JSON text is at most `max_result` bytes, else its canonical digest.
    /// Only an oversize result is parsed, to digest it.
    pub(crate) fn bound(result: &RawJson, max_result: usize) -> StoredResult {
        let text = result.get();
        if text.len() <= max_result {
            StoredResult { text: Some(text.to_owned()), digest: None }
        } else {
            StoredResult { text: None, digest: Some(canonical_digest(&result.to_value())) }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn canonical_text(value: &Value) -> String {
        let mut out = Vec::new();
        write_canonical(&mut out, value).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn keys_are_sorted_at_every_depth() {
        let value = json!({"b": [1, {"z": null, "a": "x"}], "a": {"d": true, "c": 1.5}});
        assert_eq!(canonical_text(&value), r#"{"a":{"c":1.5,"d":true},"b":[1,{"a":"x","z":null}]}"#);
    }

    #[test]
    fn digest_ignores_key_order_but_not_values() {
        let one = canonical_digest(&json!({"a": 1, "b": "two"}));
        assert_eq!(one, canonical_digest(&json!({"b": "two", "a": 1})));
        assert_ne!(one, canonical_digest(&json!({"a": 1, "b": "three"})));
        assert_ne!(canonical_digest(&json!(1)), canonical_digest(&json!("1")));
        assert_eq!(one.len(), 64);
    }

    #[test]
    fn digest_of_empty_object_is_sha256_of_braces() {
        assert_eq!(canonical_digest(&json!({})), sha256_hex(b"{}"));
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "the empty string's SHA-256"
        );
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(canonical_text(&json!({"k\"": "line\n"})), r#"{"k\"":"line\n"}"#);
    }

    #[test]
    fn results_are_kept_up_to_the_bound() {
        let result = json!({"content": [{"type": "text", "text": "hi"}]});
        let size = result.to_string().len();
        let raw = RawJson::of(&result);
        let kept = StoredResult::bound(&raw, size);
        assert_eq!(kept.text.as_deref(), Some(result.to_string().as_str()));
        assert_eq!(kept.digest, None);
        let digested = StoredResult::bound(&raw, size - 1);
        assert_eq!(digested, StoredResult { text: None, digest: Some(canonical_digest(&result)) });
    }
}
