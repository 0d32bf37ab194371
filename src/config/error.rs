//! [`ConfigError`]: everything that can be wrong with a configuration, phrased for the operator who has to fix it.
//!
//! Rules: every message names where the problem is (the file and the dotted key, or the environment variable)
//! and what was expected; TOML syntax errors keep the parser's line and column; no message ever contains a
//! credential's value.

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all. The I/O error is part of the message, not a source, so a report of
    /// the error's chain says it once.
    #[error("{file}: cannot read the configuration file: {error}")]
    Read { file: String, error: std::io::Error },

    /// `--config` or `SWITCHYARD_CONFIG` names a file that does not exist.
    #[error("{file}: no such configuration file (named by {named_by})")]
    Missing {
        file: String,
        /// `--config` or `SWITCHYARD_CONFIG`.
        named_by: &'static str,
    },

    /// A `${VAR}` reference in a string value that cannot be expanded.
    #[error("{file}: {key}: {problem}")]
    Variable { file: String, key: String, problem: String },

    /// The text is not valid TOML.
    #[error("{file}: TOML syntax error at line {line}, column {column}: {message}")]
    Syntax { file: String, line: usize, column: usize, message: String },

    /// A key this version of Switchyard does not know (often a typo).
    #[error("{file}: unknown key {key}: {expected}")]
    UnknownKey { file: String, key: String, expected: String },

    /// A value of the wrong TOML type (a number where a string belongs, an unknown enum variant, ...).
    #[error("{file}: {key}: {message}")]
    WrongType { file: String, key: String, message: String },

    /// A value of the right type that breaks a rule (a bad name, URL, duration, a duplicate, a missing key, ...).
    #[error("{file}: {key}{}: expected {expected}", shown_value(.value))]
    Invalid {
        file: String,
        key: String,
        /// The value as written (strings quoted), or `None` when the key is missing.
        value: Option<String>,
        expected: String,
    },

    /// A backend credential that could not be resolved (unset variable, unreadable file, unusable value).
    #[error("{file}: {key}: credential of backend `{backend}`: {problem}")]
    Credential { file: String, key: String, backend: String, problem: String },

    /// A `SWITCHYARD_*` environment override with an unusable value.
    #[error("environment variable {var} = {value:?} (overrides {key}): expected {expected}")]
    Env {
        var: String,
        /// The dotted key overridden, such as `server.listen`.
        key: String,
        /// As given, except that a password in a URL is shown as `***`.
        value: String,
        expected: String,
    },

    /// A standard environment variable (such as `OTEL_EXPORTER_OTLP_HEADERS`) with an unusable value.
    #[error("environment variable {var} = {value:?}: expected {expected}")]
    EnvSetting {
        var: String,
        /// As given, or a placeholder when the value may hold a secret.
        value: String,
        expected: String,
    },

    /// `serve` on an address other machines can reach, with no way to authenticate agents.
    #[error(
        "refusing to serve on {listen}, which other machines can reach, without agent authentication: add \
         `[[auth.api_keys]]` (`switchyard keys new` prints one) or `[auth.jwt]`, or set `[auth] anonymous = true` \
         to serve unauthenticated agents on purpose"
    )]
    Unprotected { listen: std::net::SocketAddr },

    /// A JWT resource server on a wildcard address cannot guess the URL its agents use.
    #[error(
        "`server.public_url` (or SWITCHYARD_PUBLIC_URL) is required with `[auth.jwt]` when listening on {listen}: \
         it is the URL agents use, and the audience their tokens must carry"
    )]
    NoPublicUrl { listen: std::net::SocketAddr },
}

fn shown_value(value: &Option<String>) -> String {
    value.as_ref().map(|value| format!(" = {value}")).unwrap_or_default()
}

impl ConfigError {
    /// Builds a [`ConfigError::Syntax`] from the TOML parser's error, turning its byte span into a line and column.
    pub(super) fn syntax(file: &str, text: &str, error: &toml::de::Error) -> Self {
        let offset = error.span().map_or(0, |span| span.start);
        let (line, column) = line_and_column(text, offset);
        Self::Syntax {
            file: file.to_owned(),
            line,
            column,
            // The parser's message can span lines ("invalid table header\nexpected ..."); one line reads better.
            message: error.message().trim().replace('\n', "; "),
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        assert_eq!(line_and_column("abc", 0), (1, 1));
        assert_eq!(line_and_column("a\nbcd", 4), (2, 3));
        assert_eq!(line_and_column("é\nx", 3), (2, 1));
    }

    #[test]
    fn invalid_shows_the_value_only_when_present() {
        let with = ConfigError::Invalid {
            file: "f.toml".into(),
            key: "a.b".into(),
            value: Some("\"x\"".into()),
            expected: "y".into(),
        };
        assert_eq!(with.to_string(), "f.toml: a.b = \"x\": expected y");
        let without =
            ConfigError::Invalid { file: "f.toml".into(), key: "a.b".into(), value: None, expected: "y".into() };
        assert_eq!(without.to_string(), "f.toml: a.b: expected y");
    }
}
