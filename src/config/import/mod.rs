//! `switchyard import`: the MCP servers of a client's configuration file as `[[backends]]` tables.
//!
//! Reads Claude Desktop and Cursor (`{"mcpServers": {NAME: {command, args, env} | {url, headers}}}`), `.mcp.json`
//! (the same, with `type`) and VS Code (`{"servers": {NAME: {type, …}}}` in `mcp.json`, `"mcp": {"servers": …}` in
//! `settings.json`; comments and trailing commas allowed).
//!
//! Rules:
//! - A secret is never written out: a secret `env` value becomes `{ env = "VAR" }`; the first secret header becomes
//!   the backend's `credential` (its scheme, such as "Bearer ", kept as `prefix`), any other one `"${VAR}"`. A
//!   value that already is one reference keeps its variable; an inline secret gets a variable named after it,
//!   and a note names each one (never the value).
//! - Client references (`${env:VAR}`, `${input:ID}`) are rewritten as `${VAR}` ([`client_syntax`]).
//! - Names are made valid backend names (a note says so); a name the configuration already has is refused.
//! - Bad JSON is reported with its line and column, an entry that is not a server with its name.

mod client_syntax;
mod jsonc;
mod render;
mod server;

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use self::client_syntax::{env_name, is_secret_env, is_secret_header, translate, whole_reference};
use self::render::{Table, env_reference, inline, string, strings};
use self::server::{ClientServer, Shape};
use super::ConfigError;
use super::backend::MAX_BACKEND_NAME;

/// The tables to append, and what the operator must be told about them.
#[derive(Debug)]
pub struct Imported {
    /// `[[backends]]` tables, as TOML text.
    pub toml: String,
    /// How many servers became tables.
    pub backends: usize,
    /// One line each: secrets moved to variables, renamed servers, skipped servers, ignored keys.
    pub notes: Vec<String>,
}

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}: not valid JSON at line {line}, column {column}: {message}")]
    Json { file: String, line: usize, column: usize, message: String },
    #[error(
        "{file}: no MCP servers: expected a top-level `mcpServers` object (Claude Desktop, Cursor, .mcp.json), \
         `servers` (VS Code mcp.json) or `mcp.servers` (VS Code settings.json)"
    )]
    NoServers { file: String },
    #[error("{file}: server {server:?}: {problem}")]
    Server { file: String, server: String, problem: String },
    #[error(
        "{file}: server {server:?} would be the backend `{name}`, which the configuration already has; rename or \
         remove one of them, then import again"
    )]
    Duplicate { file: String, server: String, name: String },
}

/// Converts the servers of `text` (the file `file`), given the backend names the configuration already has.
pub fn import_servers(text: &str, file: &str, existing: &[String]) -> Result<Imported, ImportError> {
    let document: Value = serde_json::from_str(&jsonc::strip(text)).map_err(|error| ImportError::Json {
        file: file.to_owned(),
        line: error.line(),
        column: error.column(),
        message: error.to_string().split(" at line ").next().unwrap_or_default().to_owned(),
    })?;
    let servers = servers_of(&document).ok_or_else(|| ImportError::NoServers { file: file.to_owned() })?;
    let mut importer =
        Importer { file, existing, taken: BTreeSet::new(), variables: HashMap::new(), notes: Vec::new() };
    let mut toml = String::new();
    let mut backends = 0;
    for (server, entry) in servers {
        let fault = |problem: String| ImportError::Server { file: file.to_owned(), server: server.clone(), problem };
        let client = server::read(entry).map_err(fault)?;
        if client.disabled {
            importer.notes.push(format!("server {server:?} is disabled in {file}; not imported"));
            continue;
        }
        let table = importer.table(server, client).map_err(|problem| match problem {
            Problem::Duplicate(name) => ImportError::Duplicate { file: file.to_owned(), server: server.clone(), name },
            Problem::Value(problem) => fault(problem),
        })?;
        toml.push_str(&format!("\n{}", table.render()));
        backends += 1;
    }
    Ok(Imported { toml, backends, notes: importer.notes })
}

/// The backend names a configuration file's text has, read without validating the rest (its credentials need
/// not be resolvable where the import runs).
pub fn configured_names(text: &str, file: &str) -> Result<Vec<String>, ConfigError> {
    let table: toml::Table = text.parse().map_err(|error| ConfigError::syntax(file, text, &error))?;
    let backends = table.get("backends").and_then(toml::Value::as_array).map_or(&[][..], Vec::as_slice);
    Ok(backends.iter().filter_map(|backend| backend.get("name")?.as_str().map(str::to_owned)).collect())
}

fn servers_of(document: &Value) -> Option<&serde_json::Map<String, Value>> {
    let nested = document.get("mcp").and_then(|mcp| mcp.get("servers"));
    document.get("mcpServers").or_else(|| document.get("servers")).or(nested)?.as_object()
}

enum Problem {
    Duplicate(String),
    Value(String),
}

impl From<String> for Problem {
    fn from(problem: String) -> Self {
        Problem::Value(problem)
    }
}

struct Importer<'a> {
    file: &'a str,
    existing: &'a [String],
    /// Names given in this import.
    taken: BTreeSet<String>,
    /// Variables chosen for inline secrets, and the secret each stands for (one variable, one value).
    variables: HashMap<String, String>,
    notes: Vec<String>,
}

impl Importer<'_> {
    fn table(&mut self, server: &str, client: ClientServer) -> Result<Table, Problem> {
        let name = self.name(server)?;
        let mut lines = vec![("name", string(&name))];
        match client.shape {
            Shape::Process { command, args, env, cwd } => {
                lines.extend([("transport", string("stdio")), ("command", string(&self.plain(server, &command)?))]);
                if !args.is_empty() {
                    let args = args.iter().map(|arg| self.plain(server, arg)).collect::<Result<Vec<_>, _>>()?;
                    lines.push(("args", strings(&args)));
                }
                if !env.is_empty() {
                    lines.push(("env", self.env(server, &name, &env)?));
                }
                if let Some(cwd) = cwd {
                    lines.push(("cwd", string(&self.plain(server, &cwd)?)));
                }
            }
            Shape::Http { url, sse, headers } => {
                lines.push(("url", string(&self.plain(server, &url)?)));
                if sse {
                    lines.push(("transport", string("sse")));
                }
                self.headers(server, &name, &headers, &mut lines)?;
            }
        }
        for key in client.ignored {
            self.notes.push(format!(
                "server {server:?}: key `{key}` is not imported (nothing in a backend of this kind takes it)"
            ));
        }
        Ok(Table { origin: format!("server {server:?} of {}", self.file), lines })
    }

    /// A valid backend name for `server`, unique in this import; a name the configuration has is refused.
    fn name(&mut self, server: &str) -> Result<String, Problem> {
        let base = backend_name(server);
        if self.existing.contains(&base) {
            return Err(Problem::Duplicate(base));
        }
        let mut name = base.clone();
        for counter in 2.. {
            if !self.taken.contains(&name) && !self.existing.contains(&name) {
                break;
            }
            let suffix = format!("-{counter}");
            name = format!("{}{suffix}", &base[..base.len().min(MAX_BACKEND_NAME - suffix.len())]);
        }
        if name != server {
            self.notes.push(format!(
                "server {server:?} is the backend `{name}` (names are 1–32 characters of a-z, 0-9 and '-', unique)"
            ));
        }
        self.taken.insert(name.clone());
        Ok(name)
    }

    /// A value that is not a secret, with its references rewritten.
    fn plain(&mut self, server: &str, value: &str) -> Result<String, String> {
        let translated = translate(value)?;
        self.notes.extend(translated.notes.into_iter().map(|note| format!("server {server:?}: {note}")));
        Ok(translated.text)
    }

    fn env(&mut self, server: &str, backend: &str, env: &[(String, String)]) -> Result<String, String> {
        let mut entries = Vec::with_capacity(env.len());
        for (variable, value) in env {
            let value = match is_secret_env(variable) {
                true => env_reference(&self.secret(server, backend, &format!("env {variable}"), variable, value)?),
                false => string(&self.plain(server, value)?),
            };
            entries.push((variable.clone(), value));
        }
        Ok(inline(&entries))
    }

    fn headers(
        &mut self,
        server: &str,
        backend: &str,
        headers: &[(String, String)],
        lines: &mut Vec<(&'static str, String)>,
    ) -> Result<(), String> {
        let credential = headers
            .iter()
            .position(|(name, _)| name.eq_ignore_ascii_case("authorization"))
            .or_else(|| headers.iter().position(|(name, _)| is_secret_header(name)));
        let mut plain = Vec::new();
        for (index, (header, value)) in headers.iter().enumerate() {
            let what = format!("header {header}");
            let preferred = format!("{backend}_{header}");
            if Some(index) == credential {
                let (prefix, secret) = split_scheme(value);
                let variable = self.secret(server, backend, &what, &preferred, secret)?;
                let mut entries = vec![("header".to_owned(), string(header)), ("env".to_owned(), string(&variable))];
                if !prefix.is_empty() {
                    entries.push(("prefix".to_owned(), string(prefix)));
                }
                lines.push(("credential", inline(&entries)));
            } else if is_secret_header(header) {
                let variable = self.secret(server, backend, &what, &preferred, value)?;
                plain.push((header.clone(), string(&format!("${{{variable}}}"))));
            } else {
                plain.push((header.clone(), string(&self.plain(server, value)?)));
            }
        }
        if !plain.is_empty() {
            lines.insert(lines.len() - usize::from(credential.is_some()), ("headers", inline(&plain)));
        }
        Ok(())
    }

    /// The variable the secret `value` (of `what`) is read from: the one it already references, or a new one
    /// named `preferred` (prefixed with the backend's name if another secret of this import has that name).
    fn secret(
        &mut self,
        server: &str,
        backend: &str,
        what: &str,
        preferred: &str,
        value: &str,
    ) -> Result<String, String> {
        let translated = translate(value)?;
        self.notes.extend(translated.notes.iter().map(|note| format!("server {server:?}: {note}")));
        if let Some(variable) = whole_reference(&translated.text) {
            return Ok(variable.to_owned());
        }
        let mut variable = env_name(preferred);
        if self.variables.get(&variable).is_some_and(|taken| taken != value) {
            variable = env_name(&format!("{backend}_{preferred}"));
        }
        self.variables.insert(variable.clone(), value.to_owned());
        self.notes.push(format!(
            "server {server:?}: {what} holds a secret, which is not copied: it is read from the environment variable \
             {variable}; set it where the gateway runs"
        ));
        Ok(variable)
    }
}

/// `"Bearer abc"` → (`"Bearer "`, `"abc"`): the scheme stays in the file, the secret goes to the variable.
fn split_scheme(value: &str) -> (&str, &str) {
    match value.split_once(' ') {
        Some((scheme, secret)) if !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphabetic()) => {
            (&value[..scheme.len() + 1], secret)
        }
        _ => ("", value),
    }
}

/// `server` as a backend name: lower case, runs of other characters as one '-', at most 32 characters.
fn backend_name(server: &str) -> String {
    let mut name = String::with_capacity(server.len());
    for c in server.chars().map(|c| c.to_ascii_lowercase()) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name[..name.len().min(MAX_BACKEND_NAME)].trim_end_matches('-');
    if name.is_empty() { "server".to_owned() } else { name.to_owned() }
}

#[cfg(test)]
mod tests;
