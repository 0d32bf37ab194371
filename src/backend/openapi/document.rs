//! Reading an OpenAPI document: from a file or an `https` URL, JSON or YAML, into one tree whose local `$ref`s
//! are replaced by what they point to.
//!
//! Rules:
//! - JSON when the text starts with `{` (after whitespace), YAML otherwise (YAML 1.2 is a superset of JSON, but
//!   JSON's own parser is exact about numbers and faster).
//! - Only local references (`#/...`, RFC 6901 pointers) are followed; another document, a missing target or a
//!   cycle is a [`SpecError`] naming the JSON pointer where the `$ref` stands.
//! - The resolved tree is bounded ([`MAX_NODES`]): references that fan out can make a small document huge.
//! - Every problem names where it is with a JSON pointer, so `switchyard check` can show the operator the spot.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use reqwest::Url;
use serde_json::{Map, Value};

use crate::backend::http_client::{self, HttpClient};

/// The most bytes a document may have.
const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;
/// The most JSON nodes the document may have once its references are resolved.
const MAX_NODES: usize = 2_000_000;
/// How long fetching a document by URL may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a document is: a file or a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecSource {
    File(PathBuf),
    Url(Url),
}

impl std::fmt::Display for SpecSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecSource::File(path) => write!(f, "{}", path.display()),
            SpecSource::Url(url) => write!(f, "{url}"),
        }
    }
}

/// Why a document cannot be used: `pointer` (a JSON pointer, `""` for the whole document) says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", at(pointer))]
pub struct SpecError {
    pub pointer: String,
    pub problem: String,
}

fn at(pointer: &str) -> String {
    match pointer.is_empty() {
        true => String::new(),
        false => format!("at `#{pointer}`: "),
    }
}

impl SpecError {
    pub(crate) fn new(pointer: &str, problem: impl Into<String>) -> Self {
        Self { pointer: pointer.to_owned(), problem: problem.into() }
    }
}

/// The document at `source`, read and parsed (references not yet resolved).
pub async fn read(source: &SpecSource) -> Result<Value, SpecError> {
    let bytes = match source {
        SpecSource::File(path) => tokio::fs::read(path)
            .await
            .map_err(|error| SpecError::new("", format!("cannot read {}: {error}", path.display())))?,
        SpecSource::Url(url) => tokio::time::timeout(FETCH_TIMEOUT, fetch(url))
            .await
            .map_err(|_| SpecError::new("", format!("fetching {url} took longer than {FETCH_TIMEOUT:?}")))??,
    };
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(SpecError::new("", format!("the document is larger than {MAX_DOCUMENT_BYTES} bytes")));
    }
    parse(&bytes)
}

/// JSON or YAML text as a tree.
pub fn parse(bytes: &[u8]) -> Result<Value, SpecError> {
    let json = bytes.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{');
    let parsed = match json {
        true => serde_json::from_slice(bytes).map_err(|error| format!("not valid JSON: {error}")),
        false => serde_norway::from_slice(bytes).map_err(|error| format!("not valid YAML: {error}")),
    };
    parsed.map_err(|problem| SpecError::new("", problem))
}

/// The body of a `GET` of `url` (no redirect is followed, as for every backend request).
async fn fetch(url: &Url) -> Result<Vec<u8>, SpecError> {
    let failed = |problem: String| SpecError::new("", format!("cannot fetch {url}: {problem}"));
    let uri = http_client::uri_of(url).map_err(failed)?;
    let client = HttpClient::new().map_err(failed)?;
    let request = http_client::request(Method::GET, &uri, HeaderMap::new(), Bytes::new());
    let mut response = client.send(request).await.map_err(|error| failed(error.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = http_client::next_chunk(response.body_mut()).await.map_err(|e| failed(e.to_string()))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(failed(format!("the document is larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
    }
    Ok(body)
}

/// `document` with every local `$ref` replaced by a copy of its target (see the module rules).
pub fn resolve(document: &Value) -> Result<Value, SpecError> {
    let mut resolver = Resolver { document, stack: Vec::new(), nodes: 0 };
    resolver.copy(document, &mut String::new())
}

struct Resolver<'a> {
    document: &'a Value,
    /// The targets being copied, outermost first: a target met again inside itself is a cycle.
    stack: Vec<String>,
    nodes: usize,
}

impl Resolver<'_> {
    /// A resolved copy of `value`, which stands at `pointer` in the document as written.
    fn copy(&mut self, value: &Value, pointer: &mut String) -> Result<Value, SpecError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(SpecError::new(pointer, format!("resolving `$ref`s makes more than {MAX_NODES} nodes")));
        }
        match value {
            Value::Object(object) => match object.get("$ref") {
                Some(Value::String(target)) => self.follow(target, object, pointer),
                _ => {
                    let mut copy = Map::with_capacity(object.len());
                    for (key, member) in object {
                        let mark = pointer.len();
                        pointer.push('/');
                        pointer.push_str(&escape(key));
                        copy.insert(key.clone(), self.copy(member, pointer)?);
                        pointer.truncate(mark);
                    }
                    Ok(Value::Object(copy))
                }
            },
            Value::Array(items) => {
                let mut copy = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let mark = pointer.len();
                    pointer.push_str(&format!("/{index}"));
                    copy.push(self.copy(item, pointer)?);
                    pointer.truncate(mark);
                }
                Ok(Value::Array(copy))
            }
            other => Ok(other.clone()),
        }
    }

    /// The copy of the `$ref` object `object` at `pointer`, which names `target`; its other members (a
    /// `description`, a `summary`, as OpenAPI 3.1 allows) override the target's.
    fn follow(&mut self, target: &str, object: &Map<String, Value>, pointer: &str) -> Result<Value, SpecError> {
        let here = format!("{pointer}/$ref");
        let Some(local) = target.strip_prefix('#') else {
            return Err(SpecError::new(&here, format!("`{target}` is not a local reference (`#/...`)")));
        };
        if self.stack.iter().any(|open| open == local) {
            return Err(SpecError::new(&here, format!("`{target}` refers to itself through a cycle of `$ref`s")));
        }
        let Some(found) = self.document.pointer(local) else {
            return Err(SpecError::new(&here, format!("`{target}` points to nothing in the document")));
        };
        self.stack.push(local.to_owned());
        let resolved = self.copy(found, &mut local.to_owned());
        self.stack.pop();
        let mut resolved = resolved?;
        if let Value::Object(resolved) = &mut resolved {
            for (key, member) in object.iter().filter(|(key, _)| *key != "$ref") {
                resolved.insert(key.clone(), member.clone());
            }
        }
        Ok(resolved)
    }
}

/// A key as a JSON pointer token (RFC 6901 §3).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_and_json_read_alike() {
        let yaml = parse(
            b"openapi: 3.1.0\npaths:\n  /a:\n    get:\n      responses:\n        200:\n          description: ok\n",
        );
        let json =
            parse(br#" {"openapi": "3.1.0", "paths": {"/a": {"get": {"responses": {"200": {"description": "ok"}}}}}}"#);
        assert_eq!(yaml.unwrap(), json.unwrap());
        assert!(parse(b"{ not json").unwrap_err().problem.starts_with("not valid JSON"));
        assert!(parse(b"a: [").unwrap_err().problem.starts_with("not valid YAML"));
    }

    #[test]
    fn references_are_replaced_and_siblings_kept() {
        let document = json!({
            "components": {"schemas": {"Id": {"type": "integer", "description": "an id"}}},
            "paths": {"/a": {"x": {"$ref": "#/components/schemas/Id", "description": "the pet"}}}
        });
        let resolved = resolve(&document).unwrap();
        assert_eq!(resolved["paths"]["/a"]["x"], json!({"type": "integer", "description": "the pet"}));
    }

    #[test]
    fn cycles_missing_and_remote_references_name_their_pointer() {
        let cycle = json!({"components": {"schemas": {"Node": {"properties": {"next": {"$ref": "#/components/schemas/Node"}}}}},
            "paths": {"/a~b": {"$ref": "#/components/schemas/Node"}}});
        let error = resolve(&cycle).unwrap_err();
        assert_eq!(error.pointer, "/components/schemas/Node/properties/next/$ref");
        assert!(error.problem.contains("cycle"), "{error}");
        let missing = json!({"paths": {"/a/b": {"$ref": "#/nowhere"}}});
        assert_eq!(resolve(&missing).unwrap_err().pointer, "/paths/~1a~1b/$ref");
        let remote = json!({"x": [{"$ref": "other.yaml#/a"}]});
        let error = resolve(&remote).unwrap_err();
        assert_eq!(error.to_string(), "at `#/x/0/$ref`: `other.yaml#/a` is not a local reference (`#/...`)");
    }
}
