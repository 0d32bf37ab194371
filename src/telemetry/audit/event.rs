//! One audit event: its kind, when it happened and its fields, and how it becomes the line the chain hashes.
//!
//! Rules:
//! - A line is one JSON object, in this order: `seq`, `time` (RFC 3339, UTC, microseconds), `event`, the event's
//!   fields in the order they were added, then `prev` ([`super::chain`]). Values are written by `serde_json`, so
//!   whatever an agent or a backend chose (names, arguments) is escaped.
//! - Arguments are shown as the configured [`Arguments`] mode says: `digest` (the ledger's SHA-256 of their
//!   canonical JSON), `redacted` (every value under a key that matches a redaction glob, compared in lowercase at
//!   any depth, becomes [`REDACTED`]) or `full`.

use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::glob::Glob;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// How a tool call's arguments appear in its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arguments {
    Digest,
    Redacted,
    Full,
}

/// One security-relevant act.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub(super) at: SystemTime,
    pub(super) kind: &'static str,
    pub(super) fields: Vec<(&'static str, Value)>,
}

impl AuditEvent {
    /// An event of `kind` happening now.
    pub fn new(kind: &'static str) -> AuditEvent {
        AuditEvent { at: SystemTime::now(), kind, fields: Vec::new() }
    }

    /// Adds a field (its name a constant of the event's kind).
    pub fn field(mut self, name: &'static str, value: impl Into<Value>) -> AuditEvent {
        self.fields.push((name, value.into()));
        self
    }

    /// Adds a time field, written as `time` is (`null` when `at` is `None`).
    pub fn time(self, name: &'static str, at: Option<SystemTime>) -> AuditEvent {
        self.field(name, at.map_or(Value::Null, rfc3339))
    }

    /// The line of this event, numbered `seq`, linked to `prev`.
    pub(super) fn line(&self, seq: u64, prev: &str) -> String {
        let mut object = Map::new();
        object.insert("seq".into(), seq.into());
        object.insert("time".into(), rfc3339(self.at));
        object.insert("event".into(), self.kind.into());
        for (name, value) in &self.fields {
            object.insert((*name).into(), value.clone());
        }
        object.insert("prev".into(), prev.into());
        Value::Object(object).to_string()
    }
}

/// `at` in RFC 3339, UTC, microseconds.
fn rfc3339(at: SystemTime) -> Value {
    let mut time = Vec::with_capacity(32);
    super::super::access_line::timestamp(&mut time, at);
    String::from_utf8_lossy(&time).into_owned().into()
}

/// `arguments` as `mode` shows them; `digest` computes the ledger's digest (only called in `digest` mode).
pub(super) fn render(
    mode: Arguments,
    redact: &[Glob],
    arguments: &Value,
    digest: impl FnOnce(&Value) -> String,
) -> Value {
    match mode {
        Arguments::Digest => Value::String(digest(arguments)),
        Arguments::Full => arguments.clone(),
        Arguments::Redacted => redacted(arguments, redact),
    }
}

fn redacted(value: &Value, redact: &[Glob]) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(key, value)| {
                    let lower = key.to_lowercase();
                    let hidden = redact.iter().any(|glob| glob.matches(&lower));
                    (key.clone(), if hidden { Value::String(REDACTED.into()) } else { redacted(value, redact) })
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|item| redacted(item, redact)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn globs(patterns: &[&str]) -> Vec<Glob> {
        patterns.iter().map(|pattern| Glob::new(pattern).expect("glob")).collect()
    }

    #[test]
    fn a_line_keeps_its_field_order_and_ends_with_prev() {
        let line = AuditEvent::new("reload").field("changes", json!(["a"])).line(7, "ab");
        assert!(line.starts_with("{\"seq\":7,\"time\":\""), "{line}");
        assert!(line.ends_with(",\"event\":\"reload\",\"changes\":[\"a\"],\"prev\":\"ab\"}"), "{line}");
    }

    #[test]
    fn redaction_hides_matching_keys_at_any_depth_whatever_their_case() {
        let arguments = json!({"user": "ann", "Password": "p", "nested": [{"api_key": "k", "n": 1}]});
        let shown = render(Arguments::Redacted, &globs(&["*password*", "*api_key*"]), &arguments, |_| unreachable!());
        assert_eq!(shown, json!({"user": "ann", "Password": REDACTED, "nested": [{"api_key": REDACTED, "n": 1}]}));
    }

    #[test]
    fn digest_and_full_modes() {
        let arguments = json!({"token": "t"});
        assert_eq!(render(Arguments::Full, &[], &arguments, |_| unreachable!()), arguments);
        assert_eq!(render(Arguments::Digest, &[], &arguments, |_| "d1".into()), json!("d1"));
    }
}
