//! The vocabulary shared by every validation step: where a value sits in the file ([`KeyPath`]), what a value
//! should have looked like ([`Expected`], from [`super::values`]), and the file-independent [`Fault`] a step reports.
//!
//! Rules: validation code never knows the file name (the caller attaches it once, in [`Fault::in_file`]); every
//! fault carries the dotted key path the operator has to edit; secrets never appear in a fault.

use std::collections::HashMap;
use std::fmt;

use super::error::ConfigError;
use super::values::{Expected, SIZE_EXPECTED, SizeInput, parse_byte_size};

/// A dotted key path such as `backends[1].tools.allow[0]`, spelled the way TOML would address it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct KeyPath(String);

impl KeyPath {
    pub(super) fn root() -> Self {
        Self::default()
    }

    /// The path of the child `name`; keys TOML could not write bare are quoted so the path stays unambiguous.
    pub(super) fn key(&self, name: &str) -> Self {
        let separator = if self.0.is_empty() { "" } else { "." };
        if is_bare_key(name) {
            Self(format!("{}{separator}{name}", self.0))
        } else {
            Self(format!("{}{separator}{name:?}", self.0))
        }
    }

    pub(super) fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() { f.write_str("<top level>") } else { f.write_str(&self.0) }
    }
}

fn is_bare_key(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A problem found while turning parsed TOML into a `Config`, before the file name is attached.
#[derive(Debug)]
pub(super) enum Fault {
    Invalid {
        key: KeyPath,
        /// The offending value as written in TOML (strings quoted), or `None` when the key is missing.
        value: Option<String>,
        expected: Expected,
    },
    Credential {
        key: KeyPath,
        backend: String,
        problem: String,
    },
    /// A `${VAR}` reference that cannot be expanded (unset, malformed).
    Variable {
        key: KeyPath,
        problem: String,
    },
}

impl Fault {
    pub(super) fn invalid(key: &KeyPath, value: Option<String>, expected: Expected) -> Self {
        Self::Invalid { key: key.clone(), value, expected }
    }

    pub(super) fn in_file(self, file: &str) -> ConfigError {
        match self {
            Self::Invalid { key, value, expected } => {
                ConfigError::Invalid { file: file.to_owned(), key: key.to_string(), value, expected: expected.0 }
            }
            Self::Credential { key, backend, problem } => {
                ConfigError::Credential { file: file.to_owned(), key: key.to_string(), backend, problem }
            }
            Self::Variable { key, problem } => {
                ConfigError::Variable { file: file.to_owned(), key: key.to_string(), problem }
            }
        }
    }
}

/// Renders a string value the way the message shows it: quoted, with escapes, so blanks and odd characters show.
pub(super) fn quoted(text: &str) -> String {
    format!("{text:?}")
}

/// Refuses the first key of `present` that is set, with `why` (a key of another kind of entry).
pub(super) fn refuse_set(entry: &KeyPath, present: &[(&str, bool)], why: &str) -> Result<(), Fault> {
    match present.iter().find(|(_, set)| *set) {
        Some((key, _)) => Err(Fault::invalid(&entry.key(key), None, why.to_owned().into())),
        None => Ok(()),
    }
}

/// Parses an optional string key; `Ok(None)` when absent, so the caller picks the default.
pub(super) fn optional<T>(
    key: &KeyPath,
    raw: Option<&str>,
    parse: impl Fn(&str) -> Result<T, Expected>,
) -> Result<Option<T>, Fault> {
    raw.map(|text| parse(text).map_err(|expected| Fault::invalid(key, Some(quoted(text)), expected))).transpose()
}

/// Parses a string key that has no default; a missing key is reported with what it should contain.
pub(super) fn required<T>(
    key: &KeyPath,
    raw: Option<&str>,
    parse: impl Fn(&str) -> Result<T, Expected>,
    expected_when_missing: &str,
) -> Result<T, Fault> {
    optional(key, raw, parse)?
        .ok_or_else(|| Fault::invalid(key, None, Expected(format!("{expected_when_missing} (this key is required)"))))
}

/// Parses every element of a string list, naming the failing element by its index.
pub(super) fn list<T>(
    key: &KeyPath,
    raw: &[String],
    parse: impl Fn(&str) -> Result<T, Expected>,
) -> Result<Vec<T>, Fault> {
    raw.iter()
        .enumerate()
        .map(|(index, text)| {
            parse(text).map_err(|expected| Fault::invalid(&key.index(index), Some(quoted(text)), expected))
        })
        .collect()
}

/// Parses an optional byte-size key (an integer of bytes or a string with a unit), then checks its range.
pub(super) fn optional_size(
    key: &KeyPath,
    raw: Option<&SizeInput>,
    check: impl Fn(u64) -> Result<usize, Expected>,
) -> Result<Option<usize>, Fault> {
    match raw {
        None => Ok(None),
        Some(SizeInput::Text(text)) => optional(key, Some(text), |text| parse_byte_size(text).and_then(&check)),
        Some(SizeInput::Bytes(bytes)) => u64::try_from(*bytes)
            .map_err(|_| Expected::from(SIZE_EXPECTED))
            .and_then(&check)
            .map(Some)
            .map_err(|expected| Fault::invalid(key, Some(bytes.to_string()), expected)),
    }
}

/// The `SWITCHYARD_*` variables of one section: an unset or empty variable leaves the file's value alone, a
/// variable that does not parse is an error naming it and the key it overrides.
pub(super) struct EnvLookup<'a> {
    env: &'a HashMap<String, String>,
    section: &'static str,
}

impl<'a> EnvLookup<'a> {
    pub(super) fn new(env: &'a HashMap<String, String>, section: &'static str) -> Self {
        Self { env, section }
    }

    /// The value of `var` parsed with `parse`; `key` is the overridden key within the section.
    pub(super) fn get<T>(
        &self,
        var: &str,
        key: &str,
        parse: impl Fn(&str) -> Result<T, Expected>,
    ) -> Result<Option<T>, ConfigError> {
        self.get_shown(var, key, parse, str::to_owned)
    }

    /// Overrides `field` with the value of `var` parsed with `parse`, when `var` is set ([`EnvLookup::get`]).
    pub(super) fn set<T>(
        &self,
        field: &mut T,
        var: &str,
        key: &str,
        parse: impl Fn(&str) -> Result<T, Expected>,
    ) -> Result<(), ConfigError> {
        if let Some(value) = self.get(var, key, parse)? {
            *field = value;
        }
        Ok(())
    }

    /// [`EnvLookup::get`] for a value that may hold a secret: an error shows `shown(value)` instead.
    pub(super) fn get_shown<T>(
        &self,
        var: &str,
        key: &str,
        parse: impl Fn(&str) -> Result<T, Expected>,
        shown: impl Fn(&str) -> String,
    ) -> Result<Option<T>, ConfigError> {
        let Some(text) = self.env.get(var).filter(|text| !text.is_empty()) else {
            return Ok(None);
        };
        parse(text).map(Some).map_err(|expected| ConfigError::Env {
            var: var.to_owned(),
            key: format!("{}.{key}", self.section),
            value: shown(text),
            expected: expected.0,
        })
    }
}

/// A standard variable that sets something no key of the file does (such as `OTEL_EXPORTER_OTLP_HEADERS`): unset
/// or empty is `None`; a value that does not parse is an error naming the variable and showing `shown(value)`.
pub(super) fn env_setting<T>(
    env: &HashMap<String, String>,
    var: &str,
    parse: impl Fn(&str) -> Result<T, Expected>,
    shown: impl Fn(&str) -> String,
) -> Result<Option<T>, ConfigError> {
    let Some(text) = env.get(var).filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    parse(text).map(Some).map_err(|expected| ConfigError::EnvSetting {
        var: var.to_owned(),
        value: shown(text),
        expected: expected.0,
    })
}

/// A whole-number key such as `max_connections` or `max_processes`: 1 to `max` of `unit`, with one parser shared
/// by the file and the environment.
pub(super) struct Count {
    pub(super) max: usize,
    pub(super) unit: &'static str,
}

impl Count {
    pub(super) fn build(&self, key: &KeyPath, raw: Option<i64>) -> Result<Option<usize>, Fault> {
        raw.map(|count| self.check(count).map_err(|expected| Fault::invalid(key, Some(count.to_string()), expected)))
            .transpose()
    }

    pub(super) fn parse(&self, text: &str) -> Result<usize, Expected> {
        text.trim().parse().map_err(|_| self.expected()).and_then(|count| self.check(count))
    }

    fn check(&self, count: i64) -> Result<usize, Expected> {
        usize::try_from(count).ok().filter(|count| (1..=self.max).contains(count)).ok_or_else(|| self.expected())
    }

    fn expected(&self) -> Expected {
        Expected(format!("a whole number from 1 to {} {}", self.max, self.unit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_read_like_toml() {
        let path = KeyPath::root().key("backends").index(1).key("name");
        assert_eq!(path.to_string(), "backends[1].name");
        let header = KeyPath::root().key("headers").key("X Team");
        assert_eq!(header.to_string(), "headers.\"X Team\"");
        assert_eq!(KeyPath::root().to_string(), "<top level>");
    }

    #[test]
    fn list_names_the_failing_element() {
        let key = KeyPath::root().key("items");
        let items = vec!["ok".to_owned(), String::new()];
        let fault = list(&key, &items, |text| if text.is_empty() { Err(Expected::from("something")) } else { Ok(()) })
            .expect_err("the empty element fails");
        let message = fault.in_file("f.toml").to_string();
        assert_eq!(message, "f.toml: items[1] = \"\": expected something");
    }

    #[test]
    fn required_reports_a_missing_key() {
        let key = KeyPath::root().key("url");
        let fault = required(&key, None, |_| Ok(()), "a URL").expect_err("missing");
        assert_eq!(fault.in_file("f.toml").to_string(), "f.toml: url: expected a URL (this key is required)");
    }
}
