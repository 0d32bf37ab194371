//! An OpenAPI document's operations as MCP tools: which operations are selected, each one's name, definition and
//! what a call of it needs to build its request.
//!
//! Rules:
//! - Versions 3.0 and 3.1 only (`openapi: 3.0.x | 3.1.x`); the document must have been resolved
//!   ([`super::document::resolve`]).
//! - The tool name is the `operationId` with every character outside `[A-Za-z0-9_-]` replaced by `_`, or without
//!   one `<method>_<path>` made the same way; two operations with one name are refused (the second one's pointer).
//! - `inputSchema`: one property per parameter (path, query, header, cookie) under its own name, and the request
//!   body under `body` (its media type chosen by [`super::body::choose`]); a parameter named `body` beside a body
//!   is refused. `Accept`, `Content-Type` and
//!   `Authorization` header parameters are ignored (OpenAPI 3.1 §4.8.12.1).
//! - `outputSchema`: the JSON schema of the first 2xx response, when it is an object schema (MCP's rule).
//! - Each operation keeps its `security` requirements (its own, else the document's) and the [`Api`] the
//!   document's security schemes, matched with the configuration by [`super::security`] (read by [`super::schemes`]).
//! - Annotations from the method: `readOnlyHint` for GET and HEAD, `idempotentHint` for PUT and DELETE,
//!   `destructiveHint` for DELETE (true) and for every other non-safe method left to its default.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::body::{self, Encoding, first_media, is_json};
use super::document::{SpecError, escape};
use super::schemes::{self, Requirements, Scheme};
use crate::glob::Glob;

/// The methods an OpenAPI path item may hold, in the order tools are listed.
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
/// Longest tool name (the catalog's rule for exposed names).
const MAX_NAME: usize = 64;

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Path,
    Query,
    Header,
    Cookie,
}

/// How a parameter's value is serialized (OpenAPI `style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Simple,
    Form,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
}

/// One parameter of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub location: Location,
    pub required: bool,
    pub style: Style,
    pub explode: bool,
}

/// How an operation's request body is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestBody {
    pub media_type: String,
    pub encoding: Encoding,
    pub required: bool,
}

/// One selected operation: how to call it.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub name: String,
    pub method: http::Method,
    /// The path template as written (`/pets/{petId}`).
    pub path: String,
    pub parameters: Vec<Parameter>,
    pub body: Option<RequestBody>,
    /// `x-switchyard-idempotency`, when the document says.
    pub idempotency: Option<bool>,
    /// Its `security` (else the document's); `None` when neither declares any.
    pub security: Option<Requirements>,
}

impl Operation {
    /// Safe methods (RFC 9110 §9.2.1) never carry an idempotency key.
    pub fn is_safe(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "HEAD" | "OPTIONS" | "TRACE")
    }

    /// Idempotent methods (RFC 9110 §9.2.2).
    pub fn is_idempotent_method(&self) -> bool {
        self.is_safe() || matches!(self.method.as_str(), "PUT" | "DELETE")
    }
}

/// Which operations become tools (`operations = { allow, deny }`, globs over the tool name).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
}

impl Selection {
    fn selects(&self, name: &str) -> bool {
        let allowed = self.allow.is_empty() || self.allow.iter().any(|glob| glob.matches(name));
        allowed && !self.deny.iter().any(|glob| glob.matches(name))
    }
}

/// A document's selected operations, their tool definitions, and its first server's URL.
#[derive(Debug, Default, PartialEq)]
pub struct Api {
    pub operations: Vec<Operation>,
    by_name: HashMap<String, usize>,
    /// The `tools/list` result, made once.
    pub tools: Value,
    /// `servers[0].url` with its variables' defaults, as written (it may be relative).
    pub server: Option<String>,
    /// `components.securitySchemes`, by name.
    pub schemes: BTreeMap<String, Scheme>,
}

impl Api {
    /// The operations of the resolved `document` that `selection` selects.
    pub fn compile(document: &Value, selection: &Selection) -> Result<Api, SpecError> {
        check_version(document)?;
        let mut api = Api { server: first_server(document), schemes: schemes::schemes(document), ..Api::default() };
        let shared_security = schemes::requirements(document, "")?;
        let mut tools = Vec::new();
        let paths = document.get("paths").and_then(Value::as_object).into_iter().flatten();
        for (path, item) in paths {
            let item_pointer = format!("/paths/{}", escape(path));
            let shared = item.get("parameters");
            for method in METHODS {
                let Some(operation) = item.get(method) else { continue };
                let pointer = format!("{item_pointer}/{method}");
                let (mut operation, tool) = compile_operation(path, method, operation, shared, &pointer)?;
                if operation.security.is_none() {
                    operation.security.clone_from(&shared_security);
                }
                if !selection.selects(&operation.name) {
                    continue;
                }
                if api.by_name.insert(operation.name.clone(), api.operations.len()).is_some() {
                    let problem = format!("a second operation named `{}` (names must be unique)", operation.name);
                    return Err(SpecError::new(&pointer, problem));
                }
                api.operations.push(operation);
                tools.push(tool);
            }
        }
        api.tools = json!({ "tools": tools });
        Ok(api)
    }

    pub fn operation(&self, name: &str) -> Option<&Operation> {
        self.by_name.get(name).map(|&index| &self.operations[index])
    }
}

fn check_version(document: &Value) -> Result<(), SpecError> {
    match document.get("openapi").and_then(Value::as_str) {
        Some(version) if version.starts_with("3.0.") || version.starts_with("3.1.") => Ok(()),
        Some(version) => Err(SpecError::new("/openapi", format!("version `{version}`: only 3.0 and 3.1 are read"))),
        None => Err(SpecError::new("/openapi", "missing: not an OpenAPI 3.0 or 3.1 document")),
    }
}

fn first_server(document: &Value) -> Option<String> {
    let server = document.get("servers")?.get(0)?;
    let mut url = server.get("url")?.as_str()?.to_owned();
    for (name, variable) in server.get("variables").and_then(Value::as_object).into_iter().flatten() {
        if let Some(default) = variable.get("default").and_then(Value::as_str) {
            url = url.replace(&format!("{{{name}}}"), default);
        }
    }
    Some(url)
}

fn compile_operation(
    path: &str,
    method: &str,
    operation: &Value,
    shared: Option<&Value>,
    pointer: &str,
) -> Result<(Operation, Value), SpecError> {
    let name = tool_name(operation.get("operationId").and_then(Value::as_str), method, path);
    let (mut properties, mut required) = (Map::new(), Vec::new());
    let mut parameters: Vec<Parameter> = Vec::new();
    let lists = [
        (shared, format!("{}/parameters", parent(pointer))),
        (operation.get("parameters"), format!("{pointer}/parameters")),
    ];
    for (list, list_pointer) in lists {
        for (index, raw) in list.and_then(Value::as_array).into_iter().flatten().enumerate() {
            let here = format!("{list_pointer}/{index}");
            let Some((parameter, schema)) = compile_parameter(raw, &here)? else { continue };
            // An operation's parameter overrides the path item's of the same name and location.
            parameters
                .retain(|known| (known.name.as_str(), known.location) != (parameter.name.as_str(), parameter.location));
            required.retain(|known: &Value| known != parameter.name.as_str());
            if parameter.required {
                required.push(Value::String(parameter.name.clone()));
            }
            properties.insert(parameter.name.clone(), schema);
            parameters.push(parameter);
        }
    }
    for template in placeholders(path) {
        if !parameters.iter().any(|p| p.location == Location::Path && p.name == template) {
            let problem = format!("the path has `{{{template}}}` but the operation has no path parameter of that name");
            return Err(SpecError::new(&format!("{pointer}/parameters"), problem));
        }
    }
    let body = match operation.get("requestBody") {
        Some(raw) => Some(compile_body(raw, &format!("{pointer}/requestBody"), &mut properties, &mut required)?),
        None => None,
    };
    let mut input = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        input["required"] = Value::Array(required);
    }
    let mut tool = json!({"name": name, "inputSchema": input, "annotations": annotations(method)});
    if let Some(description) = describe(operation) {
        tool["description"] = Value::String(description);
    }
    if let Some(summary) = operation.get("summary").and_then(Value::as_str) {
        tool["title"] = Value::String(summary.to_owned());
    }
    if let Some(output) = output_schema(operation) {
        tool["outputSchema"] = output;
    }
    let idempotency = operation.get("x-switchyard-idempotency").and_then(Value::as_bool);
    let security = schemes::requirements(operation, pointer)?;
    let method = method.to_ascii_uppercase().parse().map_err(|_| SpecError::new(pointer, "not an HTTP method"))?;
    Ok((Operation { name, method, path: path.to_owned(), parameters, body, idempotency, security }, tool))
}

fn parent(pointer: &str) -> &str {
    pointer.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// The `{name}` placeholders of a path template.
pub(super) fn placeholders(path: &str) -> impl Iterator<Item = &str> {
    path.split('{').skip(1).filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

fn tool_name(operation_id: Option<&str>, method: &str, path: &str) -> String {
    let raw = match operation_id {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("{method}_{}", path.trim_matches('/')),
    };
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    name.truncate(MAX_NAME);
    name
}

fn describe(operation: &Value) -> Option<String> {
    let text = |key| operation.get(key).and_then(Value::as_str).filter(|text| !text.trim().is_empty());
    match (text("summary"), text("description")) {
        (Some(summary), Some(description)) => Some(format!("{summary}\n\n{description}")),
        (one, other) => one.or(other).map(str::to_owned),
    }
}

fn annotations(method: &str) -> Value {
    match method {
        "get" | "head" => json!({"readOnlyHint": true}),
        "put" => json!({"readOnlyHint": false, "idempotentHint": true}),
        "delete" => json!({"readOnlyHint": false, "idempotentHint": true, "destructiveHint": true}),
        "options" | "trace" => json!({"readOnlyHint": true}),
        _ => json!({"readOnlyHint": false}),
    }
}

/// A parameter and its schema, or `None` for one OpenAPI says to ignore.
fn compile_parameter(raw: &Value, pointer: &str) -> Result<Option<(Parameter, Value)>, SpecError> {
    let text = |key| raw.get(key).and_then(Value::as_str);
    let Some(name) = text("name") else { return Err(SpecError::new(pointer, "a parameter without `name`")) };
    let location = match text("in") {
        Some("path") => Location::Path,
        Some("query") => Location::Query,
        Some("header") => Location::Header,
        Some("cookie") => Location::Cookie,
        other => {
            let problem = format!("`in` is {other:?}: expected \"path\", \"query\", \"header\" or \"cookie\"");
            return Err(SpecError::new(pointer, problem));
        }
    };
    if location == Location::Header
        && ["accept", "content-type", "authorization"].contains(&&*name.to_ascii_lowercase())
    {
        return Ok(None);
    }
    if location == Location::Header && http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(SpecError::new(pointer, format!("`{name}` is not a valid header name")));
    }
    let style = match (text("style"), location) {
        (None, Location::Path | Location::Header) => Style::Simple,
        (None, Location::Query | Location::Cookie) => Style::Form,
        (Some("simple"), _) => Style::Simple,
        (Some("form"), _) => Style::Form,
        (Some("spaceDelimited"), Location::Query) => Style::SpaceDelimited,
        (Some("pipeDelimited"), Location::Query) => Style::PipeDelimited,
        (Some("deepObject"), Location::Query) => Style::DeepObject,
        (Some(style), _) => return Err(SpecError::new(pointer, format!("style `{style}` is not supported here"))),
    };
    let explode = raw.get("explode").and_then(Value::as_bool).unwrap_or(style == Style::Form);
    let required = location == Location::Path || raw.get("required").and_then(Value::as_bool).unwrap_or(false);
    let mut schema = raw
        .get("schema")
        .cloned()
        .or_else(|| first_media(raw.get("content")).and_then(|(_, media)| media.get("schema").cloned()))
        .unwrap_or_else(|| json!({}));
    if let (Some(description), Value::Object(schema)) = (text("description"), &mut schema) {
        schema.entry("description").or_insert_with(|| Value::String(description.to_owned()));
    }
    let parameter = Parameter { name: name.to_owned(), location, required, style, explode };
    Ok(Some((parameter, schema)))
}

fn compile_body(
    raw: &Value,
    pointer: &str,
    properties: &mut Map<String, Value>,
    required: &mut Vec<Value>,
) -> Result<RequestBody, SpecError> {
    if properties.contains_key("body") {
        return Err(SpecError::new(pointer, "a parameter is named `body`, the name the request body takes"));
    }
    let Some((media_type, media, encoding)) = body::choose(raw.get("content")) else {
        return Err(SpecError::new(pointer, "a request body without `content`"));
    };
    let mut schema = match encoding {
        Encoding::Json => media.get("schema").cloned().unwrap_or_else(|| json!({})),
        Encoding::Form | Encoding::Multipart => {
            media.get("schema").cloned().unwrap_or_else(|| json!({"type": "object"}))
        }
        Encoding::Text => json!({"type": "string", "description": format!("the request body, sent as {media_type}")}),
    };
    if let (Some(description), Value::Object(schema)) = (raw.get("description").and_then(Value::as_str), &mut schema) {
        schema.entry("description").or_insert_with(|| Value::String(description.to_owned()));
    }
    properties.insert("body".into(), schema);
    let body_required = raw.get("required").and_then(Value::as_bool).unwrap_or(false);
    if body_required {
        required.push(Value::String("body".into()));
    }
    Ok(RequestBody { media_type: media_type.clone(), encoding, required: body_required })
}

fn output_schema(operation: &Value) -> Option<Value> {
    let responses = operation.get("responses")?.as_object()?;
    let (_, success) = responses.iter().find(|(status, _)| status.starts_with('2'))?;
    let content = success.get("content")?.as_object()?;
    let (_, media) = content.iter().find(|(media_type, _)| is_json(media_type))?;
    let schema = media.get("schema")?;
    (schema.get("type").and_then(Value::as_str) == Some("object")).then(|| schema.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_valid_and_derived_when_missing() {
        assert_eq!(tool_name(Some("pets.list"), "get", "/pets"), "pets_list");
        assert_eq!(tool_name(None, "get", "/pets/{id}"), "get_pets__id_");
        assert_eq!(tool_name(Some(&"a".repeat(80)), "get", "/"), "a".repeat(64));
    }

    #[test]
    fn bad_documents_name_their_pointer() {
        let no_version = Api::compile(&json!({"paths": {}}), &Selection::default()).unwrap_err();
        assert_eq!(no_version.pointer, "/openapi");
        let missing_path_parameter = json!({"openapi": "3.1.0", "paths": {"/pets/{id}": {"get": {}}}});
        let error = Api::compile(&missing_path_parameter, &Selection::default()).unwrap_err();
        assert_eq!(error.pointer, "/paths/~1pets~1{id}/get/parameters");
        let bad_in =
            json!({"openapi": "3.0.3", "paths": {"/p": {"get": {"parameters": [{"name": "a", "in": "body"}]}}}});
        let error = Api::compile(&bad_in, &Selection::default()).unwrap_err();
        assert_eq!(error.pointer, "/paths/~1p/get/parameters/0");
        let twice = json!({"openapi": "3.0.3", "paths": {"/a": {"get": {"operationId": "x"}}, "/b": {"get": {"operationId": "x"}}}});
        assert_eq!(Api::compile(&twice, &Selection::default()).unwrap_err().pointer, "/paths/~1b/get");
    }
}
