//! `${VAR}` references in the configuration file's string values, expanded from the environment before the file
//! is deserialized, so every key sees the value it would see had the operator written it out.
//!
//! Rules (docs/configuration.md, "Environment variables in values"):
//! - `${NAME}` is the variable's value (set but empty is empty); unset is an error naming the key path.
//! - `${NAME:-default}` is the value, or `default` when the variable is unset or empty; `default` is taken as
//!   written (it is not expanded again).
//! - `$${` is a literal `${`; any other `$` is itself. A `${` that is not a well-formed reference is an error.
//! - Values only, never keys; strings at any depth (tables, arrays, inline tables).
//! - Expanded values are ordinary configuration text: a secret belongs in `credential`/`{ env = "VAR" }`, which
//!   keeps it sensitive, rather than in a `${VAR}` that ends up in a plain header or argument.

use std::borrow::Cow;
use std::collections::HashMap;

use super::fields::{Fault, KeyPath};

/// Expands every string value of `table` in place; the first bad reference stops with its key path.
pub(super) fn expand_table(table: &mut toml::Table, env: &HashMap<String, String>) -> Result<(), Fault> {
    for (name, value) in table.iter_mut() {
        expand_value(value, &KeyPath::root().key(name), env)?;
    }
    Ok(())
}

/// Expands one value (and everything under it) at `key`.
pub(super) fn expand_value(value: &mut toml::Value, key: &KeyPath, env: &HashMap<String, String>) -> Result<(), Fault> {
    match value {
        toml::Value::String(text) => {
            if let Cow::Owned(expanded) =
                expand(text, env).map_err(|problem| Fault::Variable { key: key.clone(), problem })?
            {
                *text = expanded;
            }
            Ok(())
        }
        toml::Value::Array(items) => {
            items.iter_mut().enumerate().try_for_each(|(index, item)| expand_value(item, &key.index(index), env))
        }
        toml::Value::Table(table) => {
            table.iter_mut().try_for_each(|(name, item)| expand_value(item, &key.key(name), env))
        }
        _ => Ok(()),
    }
}

const SYNTAX: &str = "write ${NAME} or ${NAME:-default} (NAME: letters, digits and '_', not starting with a digit), \
                      or $${ for a literal ${";

/// `text` with its references replaced; borrowed when it has none.
fn expand<'a>(text: &'a str, env: &HashMap<String, String>) -> Result<Cow<'a, str>, String> {
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let (before, after) = (&rest[..at], &rest[at + 2..]);
        if let Some(escaped) = before.strip_suffix('$') {
            out.push_str(escaped);
            out.push_str("${");
            rest = after;
            continue;
        }
        out.push_str(before);
        let close = after.find('}').ok_or_else(|| format!("unterminated ${{ ({SYNTAX})"))?;
        out.push_str(resolve(&after[..close], env)?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

/// The value of one reference's body (`NAME` or `NAME:-default`).
fn resolve<'a>(body: &'a str, env: &'a HashMap<String, String>) -> Result<&'a str, String> {
    let (name, default) = match body.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (body, None),
    };
    if !is_variable_name(name) {
        return Err(format!("`${{{body}}}` is not a variable reference: {SYNTAX}"));
    }
    match (env.get(name).map(String::as_str), default) {
        (Some(value), None) => Ok(value),
        (Some(value), Some(_)) if !value.is_empty() => Ok(value),
        (_, Some(default)) => Ok(default),
        (None, None) => Err(format!("environment variable {name} is not set (or write ${{{name}:-default}})")),
    }
}

/// Whether `name` may be referenced as `${name}`: letters, digits and `_`, not starting with a digit.
pub(super) fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> HashMap<String, String> {
        [("HOST", "api.example.com"), ("EMPTY", ""), ("PORT", "8443")]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }

    fn expanded(text: &str) -> Result<String, String> {
        expand(text, &env()).map(Cow::into_owned)
    }

    #[test]
    fn references_and_defaults_expand() {
        assert_eq!(expanded("https://${HOST}:${PORT}/mcp").as_deref(), Ok("https://api.example.com:8443/mcp"));
        assert_eq!(expanded("${MISSING:-fallback}").as_deref(), Ok("fallback"));
        assert_eq!(expanded("${EMPTY:-fallback}").as_deref(), Ok("fallback"), "`:-` also replaces an empty value");
        assert_eq!(expanded("[${EMPTY}]").as_deref(), Ok("[]"), "set but empty is empty");
        assert_eq!(expanded("${HOST:-x}").as_deref(), Ok("api.example.com"));
        assert_eq!(expanded("${MISSING:-}").as_deref(), Ok(""));
        assert_eq!(expanded("${MISSING:-a:-b}").as_deref(), Ok("a:-b"), "the default is taken as written");
    }

    #[test]
    fn dollars_without_a_brace_and_escapes_stay_literal() {
        assert!(matches!(expand("no references", &env()), Ok(Cow::Borrowed(_))));
        assert_eq!(expanded("cost: $5 $HOST $").as_deref(), Ok("cost: $5 $HOST $"));
        assert_eq!(expanded("$${HOST} and ${HOST}").as_deref(), Ok("${HOST} and api.example.com"));
    }

    #[test]
    fn bad_references_say_how_to_write_them() {
        assert_eq!(
            expanded("${API_HOST}/mcp").unwrap_err(),
            "environment variable API_HOST is not set (or write ${API_HOST:-default})"
        );
        for bad in ["${}", "${1X}", "${A-B}", "${env:HOST}", "${HOST"] {
            let error = expanded(bad).expect_err(bad);
            assert!(error.contains("or $${ for a literal ${"), "{bad}: {error}");
        }
        assert!(expanded("${HOST").unwrap_err().starts_with("unterminated ${"));
    }

    #[test]
    fn every_string_at_any_depth_expands_and_errors_name_the_key() {
        let mut table: toml::Table =
            "a = \"${HOST}\"\nn = 5\n[[b]]\nlist = [\"x\", \"${PORT}\"]\nt = { k = \"${HOST}\" }\n".parse().unwrap();
        expand_table(&mut table, &env()).unwrap();
        assert_eq!(table["a"].as_str(), Some("api.example.com"));
        assert_eq!(table["b"][0]["list"][1].as_str(), Some("8443"));
        assert_eq!(table["b"][0]["t"]["k"].as_str(), Some("api.example.com"));
        let mut bad: toml::Table =
            "[[backends]]\nurl = \"x\"\n[[backends]]\nurl = \"https://${API_HOST}/\"\n".parse().unwrap();
        let error = expand_table(&mut bad, &env()).unwrap_err().in_file("f.toml").to_string();
        assert_eq!(
            error,
            "f.toml: backends[1].url: environment variable API_HOST is not set (or write ${API_HOST:-default})"
        );
    }
}
