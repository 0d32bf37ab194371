//! The keys of a `transport = "stdio"` backend: the command to start, its arguments, environment
//! and working directory, how its processes are shared, and how many may live.
//!
//! Rules:
//! - `command` is argv[0] and is never given to a shell. A name without `/` is looked up on `PATH` (of the
//!   gateway's environment, which the child also gets); a relative path was anchored to the file's directory
//!   ([`super::anchor`]) and is otherwise taken relative to the working directory. Either way it is resolved to
//!   an absolute path of an executable file at load, so a missing program fails startup (and `switchyard check`)
//!   rather than the first call.
//! - `env` values are plain strings or secrets written `{ env = "VAR" }` / `{ file = "/path" }`, resolved at
//!   load by the same code as `credential`; a secret's value is never shown (`Debug` prints `<redacted>`).
//! - These keys belong to stdio backends only; an HTTP backend that sets one is refused, naming the key, as a
//!   stdio backend that sets `url`, `headers` or `credential` is.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Visitor};

use super::credential::{CredentialSource, RawSecretRef, read_source};
use super::fields::{Count, Fault, KeyPath, list, optional, quoted, refuse_set};
use super::values::{Expected, parse_positive_duration};
use crate::secret::Secret;

/// A stdio backend process with nothing to do is stopped after this long.
pub const DEFAULT_PROCESS_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Live processes of one stdio backend, by default.
pub const DEFAULT_MAX_PROCESSES: usize = 32;
/// Live stdio backend processes of the whole gateway (`[server] max_stdio_processes`), by default.
pub const DEFAULT_MAX_STDIO_PROCESSES: usize = 128;
/// The largest process cap accepted: a larger number is almost certainly a typo.
pub const MAX_PROCESS_CAP: usize = 65_536;

/// Whether each agent session gets its own process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StdioSessions {
    /// One process per (agent session, backend): state never leaks between agents.
    #[default]
    PerAgent,
    /// One process for every agent session, for servers the operator knows to be stateless.
    Shared,
}

/// A validated stdio backend.
#[derive(Debug, Clone, PartialEq)]
pub struct StdioConfig {
    /// Absolute path of the executable.
    pub command: PathBuf,
    pub args: Vec<String>,
    /// In name order.
    pub env: Vec<(String, EnvValue)>,
    pub cwd: Option<PathBuf>,
    pub sessions: StdioSessions,
    pub idle_timeout: Duration,
    pub max_processes: usize,
}

/// One value of `env`.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    Plain(String),
    Secret { value: Secret, source: CredentialSource },
}

impl EnvValue {
    /// The value the child gets.
    pub fn value(&self) -> &str {
        match self {
            EnvValue::Plain(text) => text,
            EnvValue::Secret { value, .. } => value.expose(),
        }
    }
}

/// The stdio keys of a `[[backends]]` entry as written (the entry's raw type is the backend's, which lends them).
#[derive(Debug, Default)]
pub(super) struct StdioKeys<'a> {
    pub(super) command: Option<&'a str>,
    pub(super) args: Option<&'a [String]>,
    pub(super) env: Option<&'a BTreeMap<String, RawEnvValue>>,
    pub(super) cwd: Option<&'a str>,
    pub(super) sessions: Option<StdioSessions>,
    pub(super) idle_timeout: Option<&'a str>,
    pub(super) max_processes: Option<i64>,
}

/// A value of a stdio backend's `env` table: a plain string, or `{ env = "VAR" }` / `{ file = "/path" }` for a
/// secret (the same forms as `credential`).
#[derive(Debug)]
pub(super) enum RawEnvValue {
    Plain(String),
    Secret(RawSecretRef),
}

impl<'de> Deserialize<'de> for RawEnvValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EnvValueVisitor)
    }
}

struct EnvValueVisitor;

impl<'de> Visitor<'de> for EnvValueVisitor {
    type Value = RawEnvValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, or a secret written { env = \"VAR\" } or { file = \"/path\" }")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<RawEnvValue, E> {
        Ok(RawEnvValue::Plain(text.to_owned()))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawEnvValue, A::Error> {
        RawSecretRef::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawEnvValue::Secret)
    }
}

/// Validates the stdio keys of `backends[i]` (at `entry`) for the backend named `backend`.
pub(super) fn build(
    entry: &KeyPath,
    backend: &str,
    raw: &StdioKeys<'_>,
    env: &HashMap<String, String>,
) -> Result<StdioConfig, Fault> {
    let path = env.get("PATH").map(String::as_str);
    let command = match raw.command {
        Some(text) => {
            resolve_command(text, path).map_err(|e| Fault::invalid(&entry.key("command"), Some(quoted(text)), e))
        }
        None => Err(Fault::invalid(
            &entry.key("command"),
            None,
            format!("{COMMAND_EXPECTED} (required with transport = \"stdio\")").into(),
        )),
    }?;
    Ok(StdioConfig {
        command,
        args: list(&entry.key("args"), raw.args.unwrap_or_default(), parse_argument)?,
        env: build_env(&entry.key("env"), backend, raw, env)?,
        cwd: optional(&entry.key("cwd"), raw.cwd, parse_directory)?,
        sessions: raw.sessions.unwrap_or_default(),
        idle_timeout: optional(&entry.key("idle_timeout"), raw.idle_timeout, parse_positive_duration)?
            .unwrap_or(DEFAULT_PROCESS_IDLE_TIMEOUT),
        max_processes: PROCESSES
            .build(&entry.key("max_processes"), raw.max_processes)?
            .unwrap_or(DEFAULT_MAX_PROCESSES),
    })
}

/// Refuses the stdio keys on a backend of another transport.
pub(super) fn refuse_keys(entry: &KeyPath, raw: &StdioKeys<'_>) -> Result<(), Fault> {
    let present = [
        ("command", raw.command.is_some()),
        ("args", raw.args.is_some()),
        ("env", raw.env.is_some()),
        ("cwd", raw.cwd.is_some()),
        ("sessions", raw.sessions.is_some()),
        ("idle_timeout", raw.idle_timeout.is_some()),
        ("max_processes", raw.max_processes.is_some()),
    ];
    refuse_set(entry, &present, "no such key on this backend: it is only for transport = \"stdio\"")
}

/// A process cap (`max_processes`, `[server] max_stdio_processes`).
pub(super) const PROCESSES: Count = Count { max: MAX_PROCESS_CAP, unit: "processes" };

const COMMAND_EXPECTED: &str =
    "a program name found on PATH, such as \"npx\", or a path to an executable, such as \"./bin/server\"";

/// Resolves argv[0] to an absolute path of an executable file, searching `path` (the `PATH` variable) for a bare
/// name, as `execvp` would but at load.
fn resolve_command(text: &str, path: Option<&str>) -> Result<PathBuf, Expected> {
    if text.trim().is_empty() || text.contains('\0') {
        return Err(COMMAND_EXPECTED.into());
    }
    if text.contains('/') {
        let absolute = std::path::absolute(text).map_err(|error| Expected(format!("{COMMAND_EXPECTED} ({error})")))?;
        return match is_executable(&absolute) {
            true => Ok(absolute),
            false => Err(format!("a path to an executable file ({} is not one)", absolute.display()).into()),
        };
    }
    let Some(path) = path.filter(|path| !path.is_empty()) else {
        return Err(format!("{COMMAND_EXPECTED}; PATH is not set, so write the program's full path").into());
    };
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(text))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("a program found on PATH (no executable `{text}` in any directory of PATH)").into())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn parse_argument(text: &str) -> Result<String, Expected> {
    if text.contains('\0') {
        return Err("an argument without NUL characters".into());
    }
    Ok(text.to_owned())
}

fn parse_directory(text: &str) -> Result<PathBuf, Expected> {
    let dir = PathBuf::from(text);
    if text.trim().is_empty() || !dir.is_dir() {
        return Err("an existing directory".into());
    }
    Ok(dir)
}

fn build_env(
    key: &KeyPath,
    backend: &str,
    raw: &StdioKeys<'_>,
    env: &HashMap<String, String>,
) -> Result<Vec<(String, EnvValue)>, Fault> {
    let Some(table) = raw.env else { return Ok(Vec::new()) };
    let mut vars = Vec::with_capacity(table.len());
    for (name, value) in table {
        let key = key.key(name);
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(Fault::invalid(
                &key,
                Some(quoted(name)),
                "an environment variable name such as \"LOG_LEVEL\"".into(),
            ));
        }
        let value = match value {
            RawEnvValue::Plain(text) if text.contains('\0') => {
                return Err(Fault::invalid(&key, Some(quoted(text)), "a value without NUL characters".into()));
            }
            RawEnvValue::Plain(text) => EnvValue::Plain(text.clone()),
            RawEnvValue::Secret(secret) => {
                let (source, value, _) =
                    read_source(&key, backend, secret.env.as_deref(), secret.file.as_deref(), env)?;
                EnvValue::Secret { value: Secret::new(value), source }
            }
        };
        vars.push((name.clone(), value));
    }
    Ok(vars)
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
