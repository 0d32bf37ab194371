//! Raw JSON: a value kept as the exact text it arrived as, for what the gateway passes on or stores without
//! looking inside (docs/ledger.md, *Raw results*): a backend's `tools/call` result, from the backend client's
//! decoding through the ledger to the bytes the front splices into the agent's response.
//!
//! Rules: a [`RawJson`] is always one valid JSON value (checked when built, without building a tree); its bytes are
//! never re-encoded, so key order and number spelling survive; two are equal when their texts are. Code that must
//! look inside reads a small borrowing struct from [`RawJson::get`]'s text and builds a [`Value`] only on rare paths.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// One JSON value as text.
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// Checks that `text` is one JSON value and keeps it as it is.
    pub fn from_text(text: String) -> Result<RawJson, serde_json::Error> {
        RawValue::from_string(text).map(RawJson)
    }

    /// Writes `value` once; for values the gateway built itself.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> RawJson {
        // Serializing into a string only fails on non-string map keys, which no type written here has.
        RawJson(serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Reads the fields `T` names, borrowing from the text; the rest is skipped without being built.
    #[cfg(test)]
    pub fn peek<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    /// The value as a tree, for the rare paths that must edit it.
    pub fn to_value(&self) -> Value {
        // The text was checked when built, so it parses.
        serde_json::from_str(self.get()).unwrap_or(Value::Null)
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &RawJson) -> bool {
        self.get() == other.get()
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        out.write_str(self.get())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        out.write_str(self.get())
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RawJson, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(RawJson)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keeps_the_text_exactly() {
        let text = r#"{"z": 1.50, "a": [ true ]}"#;
        let raw = RawJson::from_text(text.to_owned()).expect("valid");
        assert_eq!(raw.get(), text);
        assert_eq!(serde_json::to_string(&[&raw]).expect("writes"), r#"[{"z": 1.50, "a": [ true ]}]"#);
    }

    #[test]
    fn refuses_what_is_not_one_json_value() {
        for text in ["", "{", "1 2", "{\"a\":}"] {
            assert!(RawJson::from_text(text.to_owned()).is_err(), "{text:?}");
        }
    }

    #[test]
    fn peeks_without_a_tree() {
        #[derive(Deserialize)]
        struct Flag {
            #[serde(rename = "isError", default)]
            is_error: bool,
        }
        let raw = RawJson::from_text(r#"{"content":[{"type":"text","text":"x"}],"isError":true}"#.into()).expect("ok");
        assert!(raw.peek::<Flag>().expect("peeks").is_error);
        assert_eq!(raw.to_value(), json!({"content": [{"type": "text", "text": "x"}], "isError": true}));
    }
}
