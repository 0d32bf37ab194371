//! What the gateway decides by in a result it otherwise passes on unread (docs/ledger.md, *Raw results*):
//! `isError` (a tool's failure, MCP 2025-11-25 server/tools §"Error Handling") and `resultType` (2026-07-28
//! `input_required`), read from the result's text without building a tree of the rest.
//!
//! Rules: the same answers as reading the members of a parsed result — `isError` counts only when it is `true`,
//! `resultType` only when it is a string; a result that is not an object, or not readable, has neither.

use serde::Deserialize;
use serde_json::Value;

use super::modern::INPUT_REQUIRED;

/// The two members of a result the gateway branches on.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct ResultFlags {
    #[serde(rename = "isError", default)]
    is_error: Option<Value>,
    #[serde(rename = "resultType", default)]
    result_type: Option<Value>,
}

impl ResultFlags {
    /// The flags of the result whose JSON text is `text`; other members are skipped, not built.
    pub fn read(text: &str) -> ResultFlags {
        // A struct would also be read from an array, by position: only an object has members.
        if !text.trim_start().starts_with('{') {
            return ResultFlags::default();
        }
        serde_json::from_str(text).unwrap_or_default()
    }

    /// Whether the result is a tool's failure (`"isError": true`).
    pub fn is_error(&self) -> bool {
        self.is_error == Some(Value::Bool(true))
    }

    /// Whether the result has a `resultType`, a member only the 2026-07-28 revision defines (so only a backend of
    /// that era writes it).
    pub fn has_result_type(&self) -> bool {
        self.result_type.as_ref().is_some_and(Value::is_string)
    }

    /// Whether the result asks the client for input (`"resultType": "input_required"`).
    pub fn asks_input(&self) -> bool {
        self.result_type.as_ref().and_then(Value::as_str) == Some(INPUT_REQUIRED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_flags_as_a_parsed_result_would() {
        let flags = ResultFlags::read(r#"{"content":[{"type":"text","text":"\"isError\":true"}],"isError":true}"#);
        assert!(flags.is_error() && !flags.asks_input());
        let asking = ResultFlags::read(r#" {"resultType":"input_required","inputRequests":{}}"#);
        assert!(asking.asks_input() && asking.has_result_type() && !asking.is_error());
        assert!(ResultFlags::read(r#"{"resultType":"complete"}"#).has_result_type());
        for text in [r#"{"isError":"true","resultType":1}"#, r#"[true,"input_required"]"#, "null", "{"] {
            let flags = ResultFlags::read(text);
            assert!(!flags.is_error() && !flags.asks_input() && !flags.has_result_type(), "{text}");
        }
    }
}
