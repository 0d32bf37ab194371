//! One server entry of an MCP client's file, read into what a `[[backends]]` table can say.
//!
//! Rules: the transport is the entry's `type` ("stdio"; "http", "streamable-http" or "streamableHttp"; "sse"),
//! else `command` means a process and `url` (or `serverUrl`) an HTTP server — "sse" when its path ends in `/sse`,
//! the convention of servers that speak only the older transport. An entry with both, neither, or a value of the
//! wrong type is refused with the key at fault; keys with no Switchyard equivalent are listed, never dropped
//! silently.

use serde_json::{Map, Value};

/// How the server is reached.
pub(super) enum Shape {
    Process { command: String, args: Vec<String>, env: Vec<(String, String)>, cwd: Option<String> },
    Http { url: String, sse: bool, headers: Vec<(String, String)> },
}

/// An entry as read.
pub(super) struct ClientServer {
    pub(super) shape: Shape,
    /// Keys the entry has that no backend key corresponds to.
    pub(super) ignored: Vec<String>,
    /// `"disabled": true` (Cursor, Cline): the client does not start it.
    pub(super) disabled: bool,
}

const PROCESS_KEYS: &[&str] = &["type", "command", "args", "env", "cwd", "disabled"];
const HTTP_KEYS: &[&str] = &["type", "url", "serverUrl", "headers", "disabled"];

pub(super) fn read(value: &Value) -> Result<ClientServer, String> {
    let entry = value.as_object().ok_or("expected an object with `command` (a process) or `url` (an HTTP server)")?;
    let kind = match entry.get("type") {
        Some(kind) => Some(kind.as_str().ok_or("`type` must be a string")?),
        None => None,
    };
    let url = entry.get("url").or_else(|| entry.get("serverUrl"));
    let process = match (kind, entry.contains_key("command"), url.is_some()) {
        (Some("stdio"), ..) | (None, true, false) => true,
        (Some("http" | "streamable-http" | "streamableHttp" | "sse"), ..) | (None, false, true) => false,
        (None, true, true) => return Err("has both `command` and `url`; keep the one the client uses".into()),
        (None, false, false) => return Err("has neither `command` (a process) nor `url` (an HTTP server)".into()),
        (Some(other), ..) => {
            return Err(format!(
                "`type` {other:?} is not a transport Switchyard speaks (\"stdio\", \"http\", \"sse\")"
            ));
        }
    };
    let shape = if process {
        Shape::Process {
            command: text(entry, "command")?.ok_or("`command` is missing (it is a stdio server)")?,
            args: strings(entry, "args")?,
            env: pairs(entry, "env")?,
            cwd: text(entry, "cwd")?,
        }
    } else {
        let url = url.and_then(Value::as_str).ok_or("`url` must be a string (it is an HTTP server)")?.to_owned();
        let sse = kind == Some("sse")
            || (kind.is_none()
                && url.split(['?', '#']).next().is_some_and(|path| path.trim_end_matches('/').ends_with("/sse")));
        Shape::Http { url, sse, headers: pairs(entry, "headers")? }
    };
    let known = if process { PROCESS_KEYS } else { HTTP_KEYS };
    let ignored = entry.keys().filter(|key| !known.contains(&key.as_str())).cloned().collect();
    let disabled = entry.get("disabled").and_then(Value::as_bool).unwrap_or(false);
    Ok(ClientServer { shape, ignored, disabled })
}

fn text(entry: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match entry.get(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

fn strings(entry: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    let Some(value) = entry.get(key) else { return Ok(Vec::new()) };
    let items = value.as_array().ok_or_else(|| format!("`{key}` must be an array of strings"))?;
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.as_str().map(str::to_owned).ok_or_else(|| format!("`{key}[{index}]` must be a string"))
        })
        .collect()
}

/// An object of strings (`env`, `headers`), in the file's order.
fn pairs(entry: &Map<String, Value>, key: &str) -> Result<Vec<(String, String)>, String> {
    let Some(value) = entry.get(key) else { return Ok(Vec::new()) };
    let object = value.as_object().ok_or_else(|| format!("`{key}` must be an object of strings"))?;
    object
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => Ok((name.clone(), text.clone())),
            _ => Err(format!("`{key}.{name}` must be a string")),
        })
        .collect()
}
