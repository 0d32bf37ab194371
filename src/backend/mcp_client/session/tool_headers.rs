//! `Mcp-Param-*` headers of `tools/call` requests to modern backends (MCP 2026-07-28
//! `basic/transports/streamable-http.mdx` §"Headers", `x-mcp-header`): which arguments a tool's input schema
//! mirrors into headers, learnt from the `tools/list` results the client passes on, and their values for one call.
//!
//! Rules:
//! - `x-mcp-header` names a non-empty header token, unique case-insensitively within the tool, on a `string`,
//!   `integer` or `boolean` property reachable from the schema's root through `properties` keys alone (never under
//!   `items`, a composition keyword, `if`/`then`/`else` or `$ref`). A tool that breaks a rule is dropped from the
//!   list (the spec asks clients to), with a warning naming the rule.
//! - A value is sent when the argument is present and not null: strings as [`encode_header_value`] gives them,
//!   integers in decimal, booleans as `true`/`false`.
//! - What is learnt is kept per backend and tool, bounded by [`MAX_TOOLS`] per backend (cleared when exceeded;
//!   the next listing fills it again).

use std::collections::HashMap;
use std::sync::Arc;

use http::header::{HeaderName, HeaderValue};
use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;

use crate::backend::mcp_client::MAX_TOOLS;
use crate::mcp::modern::{HEADER_KEYWORD, PARAM_HEADER_PREFIX, encode_header_value};

/// One argument a tool mirrors into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    header: HeaderName,
    /// The argument's place under `arguments`, one property name per level.
    path: Vec<String>,
}

/// The headers a tool's `inputSchema` declares, or why the tool is invalid.
pub(crate) fn param_headers(tool: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    if let Some(schema) = tool.get("inputSchema") {
        visit(schema, Some(Vec::new()), &mut found)?;
    }
    Ok(found)
}

/// Walks a schema; `path` is where it sits under `arguments` while reachable through `properties` alone.
fn visit(schema: &Value, path: Option<Vec<String>>, found: &mut Vec<ParamHeader>) -> Result<(), String> {
    match schema {
        Value::Object(members) => {
            if let Some(name) = members.get(HEADER_KEYWORD) {
                found.push(declared(members, name, path.as_deref(), found)?);
            }
            for (key, value) in members {
                match (key.as_str(), value) {
                    (HEADER_KEYWORD, _) => {}
                    ("properties", Value::Object(properties)) => {
                        for (property, schema) in properties {
                            let inner =
                                path.as_ref().map(|path| [path.as_slice(), std::slice::from_ref(property)].concat());
                            visit(schema, inner, found)?;
                        }
                    }
                    _ => visit(value, None, found)?,
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|item| visit(item, None, found)),
        _ => Ok(()),
    }
}

fn declared(
    members: &serde_json::Map<String, Value>,
    name: &Value,
    path: Option<&[String]>,
    found: &[ParamHeader],
) -> Result<ParamHeader, String> {
    let path = path.filter(|path| !path.is_empty()).ok_or_else(|| {
        format!("`{HEADER_KEYWORD}` {name} is not on a property reachable through `properties` alone")
    })?;
    let token = name
        .as_str()
        .filter(|token| !token.is_empty())
        .ok_or_else(|| format!("`{HEADER_KEYWORD}` must be a non-empty string, not {name}"))?;
    let header = HeaderName::from_bytes(format!("{PARAM_HEADER_PREFIX}{token}").as_bytes())
        .map_err(|_| format!("`{HEADER_KEYWORD}` {token:?} is not an HTTP header token"))?;
    let kind = members.get("type").and_then(Value::as_str);
    if !matches!(kind, Some("string" | "integer" | "boolean")) {
        return Err(format!("`{HEADER_KEYWORD}` {token:?} is on a property that is not a string, integer or boolean"));
    }
    if found.iter().any(|earlier| earlier.header == header) {
        return Err(format!("`{HEADER_KEYWORD}` {token:?} is declared twice"));
    }
    Ok(ParamHeader { header, path: path.to_vec() })
}

/// The headers of one call with these `arguments`.
pub(crate) fn header_values(specs: &[ParamHeader], arguments: Option<&Value>) -> Vec<(HeaderName, HeaderValue)> {
    specs
        .iter()
        .filter_map(|spec| {
            let value = spec.path.iter().try_fold(arguments?, |value, key| value.get(key))?;
            let text = match value {
                Value::String(text) => encode_header_value(text),
                Value::Bool(flag) => flag.to_string(),
                Value::Number(number) => integer(number)?,
                _ => return None,
            };
            Some((spec.header.clone(), HeaderValue::from_str(&text).ok()?))
        })
        .collect()
}

/// An integer in decimal; a float with no fraction counts (JSON does not tell `3` from `3.0`).
fn integer(number: &serde_json::Number) -> Option<String> {
    if number.is_i64() || number.is_u64() {
        return Some(number.to_string());
    }
    let float = number.as_f64()?;
    (float.fract() == 0.0 && float.abs() < 9.0e15).then(|| format!("{float:.0}"))
}

type Learnt = HashMap<Arc<str>, HashMap<String, Arc<[ParamHeader]>>>;

/// What the client learnt of each backend's tools.
#[derive(Default)]
pub(crate) struct ToolHeaders(Mutex<Learnt>);

impl ToolHeaders {
    fn lock(&self) -> MutexGuard<'_, Learnt> {
        self.0.lock()
    }

    /// Learns the tools of one `tools/list` result of `backend`, dropping the invalid ones from it.
    pub(crate) fn learn(&self, backend: &Arc<str>, result: &mut Value) {
        let Some(Value::Array(tools)) = result.get_mut("tools") else { return };
        let mut learnt = self.lock();
        let known = learnt.entry(Arc::clone(backend)).or_default();
        if known.len() + tools.len() > MAX_TOOLS {
            known.clear();
        }
        tools.retain(|tool| {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            match param_headers(tool) {
                Ok(specs) => {
                    if specs.is_empty() {
                        known.remove(name);
                    } else {
                        known.insert(name.to_owned(), specs.into());
                    }
                    true
                }
                Err(why) => {
                    tracing::warn!(%backend, tool = name, %why, "a backend's tool is invalid and is not listed");
                    known.remove(name);
                    false
                }
            }
        });
    }

    /// Forgets what was learnt of `backend`.
    pub(crate) fn clear(&self, backend: &str) {
        self.lock().remove(backend);
    }

    /// The headers `tool` of `backend` declared, as far as the client learnt.
    pub(crate) fn of(&self, backend: &str, tool: &str) -> Option<Arc<[ParamHeader]>> {
        self.lock().get(backend)?.get(tool).cloned()
    }
}

#[cfg(test)]
#[path = "tool_headers_tests.rs"]
mod tests;
