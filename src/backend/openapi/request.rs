//! A tool call's arguments as the parts of an HTTP request: the path with its placeholders filled, the query,
//! header and cookie parameters, and the body.
//!
//! Rules (OpenAPI 3.1 §4.8.12.4, "Style Values", and RFC 6570 for what they stand for):
//! - Path values are percent-encoded (everything but RFC 3986 unreserved characters); `simple` style joins an
//!   array's items with `,`, an object's keys and values with `,` (or `key=value` pairs when exploded).
//! - Query values: `form` (exploded: one `name=value` per item or per key; else one `name=a,b`),
//!   `spaceDelimited` and `pipeDelimited` (arrays, one value joined by `%20` or `|`), `deepObject`
//!   (`name[key]=value`). Names and values are percent-encoded.
//! - Headers take the `simple` style; cookies are `name=value` pairs in one `Cookie` header.
//! - The body is encoded by its media type ([`super::body`]).
//! - A missing required argument, an unknown argument, or a value that cannot be put in its place is an
//!   [`ArgumentError`]: nothing is sent.

use serde_json::{Map, Value};

use super::body;
pub use super::body::ArgumentError;
use super::operations::{Location, Operation, Style};

/// What the agent's arguments make of one request.
#[derive(Debug, Default, PartialEq)]
pub struct Parts {
    /// The path and query, to be appended to the base URL.
    pub target: String,
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// The body and its media type.
    pub body: Option<(String, Vec<u8>)>,
}

/// The request `operation` makes of `arguments` (an object, or nothing).
pub fn build(operation: &Operation, arguments: Option<&Value>) -> Result<Parts, ArgumentError> {
    let empty = Map::new();
    let arguments = match arguments {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Err(ArgumentError("`arguments` must be an object".into())),
    };
    let known =
        |name: &str| name == "body" && operation.body.is_some() || operation.parameters.iter().any(|p| p.name == name);
    if let Some(unknown) = arguments.keys().find(|name| !known(name)) {
        return Err(ArgumentError(format!("unknown argument `{unknown}`; the tool's inputSchema lists its arguments")));
    }
    let (mut path, mut query, mut cookies) = (operation.path.clone(), Vec::new(), Vec::new());
    let mut parts = Parts::default();
    for parameter in &operation.parameters {
        let Some(value) = arguments.get(&parameter.name).filter(|value| !value.is_null()) else {
            if parameter.required {
                return Err(ArgumentError(format!("the argument `{}` is required", parameter.name)));
            }
            continue;
        };
        let name = &parameter.name;
        match parameter.location {
            Location::Path => {
                let text = simple(value, parameter.explode, encode)?;
                path = path.replace(&format!("{{{name}}}"), &text);
            }
            Location::Query => query.extend(query_pairs(name, value, parameter.style, parameter.explode)?),
            Location::Header => {
                let text = simple(value, parameter.explode, str::to_owned)?;
                let header = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| ArgumentError(format!("`{name}` is not a header name")))?;
                let value = http::HeaderValue::from_str(&text)
                    .map_err(|_| ArgumentError(format!("the argument `{name}` is not a valid header value")))?;
                parts.headers.push((header, value));
            }
            Location::Cookie => cookies.push(format!("{name}={}", simple(value, false, encode)?)),
        }
    }
    if !cookies.is_empty() {
        let value = http::HeaderValue::from_str(&cookies.join("; "))
            .map_err(|_| ArgumentError("the cookie arguments make no valid `Cookie` header".into()))?;
        parts.headers.push((http::header::COOKIE, value));
    }
    parts.target = match query.is_empty() {
        true => path,
        false => format!("{path}?{}", query.join("&")),
    };
    parts.body = body(operation, arguments)?;
    Ok(parts)
}

fn body(operation: &Operation, arguments: &Map<String, Value>) -> Result<Option<(String, Vec<u8>)>, ArgumentError> {
    let Some(declared) = &operation.body else { return Ok(None) };
    let Some(value) = arguments.get("body").filter(|value| !value.is_null()) else {
        return match declared.required {
            true => Err(ArgumentError("the argument `body` is required".into())),
            false => Ok(None),
        };
    };
    body::encode(&declared.media_type, declared.encoding, value).map(Some)
}

/// A scalar's text: strings as they are, numbers and booleans as JSON writes them, `null` empty.
fn scalar(value: &Value) -> Result<String, ArgumentError> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Null => Ok(String::new()),
        Value::Array(_) | Value::Object(_) => {
            Err(ArgumentError("a nested array or object cannot be serialized here".into()))
        }
    }
}

/// The `simple` style: `a,b` for arrays, `k,v,k2,v2` (or exploded `k=v,k2=v2`) for objects; each text through
/// `escape`.
fn simple(value: &Value, explode: bool, escape: fn(&str) -> String) -> Result<String, ArgumentError> {
    Ok(match value {
        Value::Array(items) => {
            items.iter().map(|item| scalar(item).map(|text| escape(&text))).collect::<Result<Vec<_>, _>>()?.join(",")
        }
        Value::Object(members) => {
            let mut pieces = Vec::new();
            for (key, member) in members {
                let member = escape(&scalar(member)?);
                match explode {
                    true => pieces.push(format!("{}={member}", escape(key))),
                    false => pieces.extend([escape(key), member]),
                }
            }
            pieces.join(",")
        }
        scalar_value => escape(&scalar(scalar_value)?),
    })
}

/// The `name=value` pairs of one query parameter, encoded.
fn query_pairs(name: &str, value: &Value, style: Style, explode: bool) -> Result<Vec<String>, ArgumentError> {
    let name = encode(name);
    let pair = |text: String| format!("{name}={text}");
    Ok(match (value, style) {
        (Value::Object(members), Style::DeepObject) => {
            let mut pairs = Vec::new();
            for (key, member) in members {
                pairs.push(format!("{name}%5B{}%5D={}", encode(key), encode(&scalar(member)?)));
            }
            pairs
        }
        (Value::Array(items), Style::SpaceDelimited | Style::PipeDelimited) if !explode => {
            let separator = if style == Style::SpaceDelimited { "%20" } else { "%7C" };
            let texts =
                items.iter().map(|item| scalar(item).map(|text| encode(&text))).collect::<Result<Vec<_>, _>>()?;
            vec![pair(texts.join(separator))]
        }
        (Value::Array(items), _) if explode => {
            items.iter().map(|item| scalar(item).map(|text| pair(encode(&text)))).collect::<Result<_, _>>()?
        }
        (Value::Object(members), _) if explode => {
            let mut pairs = Vec::new();
            for (key, member) in members {
                pairs.push(format!("{}={}", encode(key), encode(&scalar(member)?)));
            }
            pairs
        }
        (value, _) => vec![pair(simple(value, false, encode)?)],
    })
}

/// Percent-encodes every byte but the unreserved characters of RFC 3986 §2.3.
pub fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => encoded.push(byte as char),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::openapi::body::Encoding;
    use crate::backend::openapi::operations::{Parameter, RequestBody};
    use serde_json::json;

    fn parameter(name: &str, location: Location, style: Style, explode: bool) -> Parameter {
        Parameter { name: name.into(), location, required: false, style, explode }
    }

    fn operation(parameters: Vec<Parameter>) -> Operation {
        let body =
            Some(RequestBody { media_type: "application/json".into(), encoding: Encoding::Json, required: false });
        Operation {
            name: "op".into(),
            method: http::Method::POST,
            path: "/items/{id}".into(),
            parameters,
            body,
            idempotency: None,
            security: None,
        }
    }

    #[test]
    fn every_style_is_serialized_as_openapi_says() {
        let mut id = parameter("id", Location::Path, Style::Simple, false);
        id.required = true;
        let op = operation(vec![
            id,
            parameter("tags", Location::Query, Style::Form, true),
            parameter("ids", Location::Query, Style::Form, false),
            parameter("sp", Location::Query, Style::SpaceDelimited, false),
            parameter("pipe", Location::Query, Style::PipeDelimited, false),
            parameter("filter", Location::Query, Style::DeepObject, true),
            parameter("point", Location::Query, Style::Form, true),
            parameter("X-Trace", Location::Header, Style::Simple, false),
            parameter("session", Location::Cookie, Style::Form, true),
        ]);
        let arguments = json!({
            "id": "a b/c", "tags": ["x", "y z"], "ids": [1, 2], "sp": ["a", "b"], "pipe": ["a", "b"],
            "filter": {"color": "red"}, "point": {"x": 1, "y": 2}, "X-Trace": ["t", "u"], "session": "s1",
            "body": {"name": "n"}
        });
        let parts = build(&op, Some(&arguments)).unwrap();
        assert_eq!(
            parts.target,
            "/items/a%20b%2Fc?tags=x&tags=y%20z&ids=1,2&sp=a%20b&pipe=a%7Cb&filter%5Bcolor%5D=red&x=1&y=2"
        );
        assert_eq!(parts.headers[0].1, "t,u");
        assert_eq!(parts.headers[1], (http::header::COOKIE, http::HeaderValue::from_static("session=s1")));
        assert_eq!(parts.body, Some(("application/json".into(), br#"{"name":"n"}"#.to_vec())));
    }

    #[test]
    fn bad_arguments_send_nothing() {
        let mut id = parameter("id", Location::Path, Style::Simple, false);
        id.required = true;
        let op = operation(vec![id]);
        assert_eq!(build(&op, None).unwrap_err().0, "the argument `id` is required");
        let unknown = build(&op, Some(&json!({"id": 1, "other": 2}))).unwrap_err();
        assert!(unknown.0.contains("unknown argument `other`"));
        assert!(build(&op, Some(&json!([1]))).is_err());
        assert!(build(&op, Some(&json!({"id": [[1]]}))).is_err());
    }
}
