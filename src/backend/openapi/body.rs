//! Request bodies: which of an operation's media types is used, and how the `body` argument is encoded in it.
//!
//! Rules (OpenAPI 3.1 §4.8.13 Request Body Object, §4.8.14.4 and §4.8.15 Encoding Object, for form and multipart):
//! - Of the media types an operation lists, JSON is preferred (`application/json` or any `+json`), then
//!   `application/x-www-form-urlencoded`, then `multipart/form-data`, then `text/plain`; otherwise the first listed,
//!   whose body is the string the agent gives.
//! - JSON: the argument as JSON. Text: the argument must be a string. Form and multipart: the argument must be an
//!   object; a member that is a string, number or boolean is one field, an array of those one field per item,
//!   anything else (an object, an array holding objects) one field of its JSON text, as the Encoding Object's
//!   default content type for objects says; `null` members are left out. A multipart field of JSON text says
//!   `Content-Type: application/json`; the others are text. The boundary is derived from the fields' content, so it
//!   cannot occur in them and the same arguments make the same bytes.
//! - An argument that does not fit its media type is an [`ArgumentError`]: nothing is sent.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Why the arguments cannot make a request (said to the agent, which can fix them).
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ArgumentError(pub String);

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    /// `application/x-www-form-urlencoded`.
    Form,
    /// `multipart/form-data`.
    Multipart,
    /// A string, as it is (`text/plain`, or any other type).
    Text,
}

const FORM: &str = "application/x-www-form-urlencoded";
const MULTIPART: &str = "multipart/form-data";

/// The media type an operation's body is sent as, its media object, and its encoding (see the module rules).
pub fn choose(content: Option<&Value>) -> Option<(&String, &Value, Encoding)> {
    let media = content?.as_object()?;
    // `min_by_key` keeps the first of equals: among types of no known encoding, the first listed.
    let (media_type, object) = media.iter().min_by_key(|(media_type, _)| kind(media_type).0)?;
    Some((media_type, object, kind(media_type).1))
}

/// A media type's rank in the preference order, and its encoding.
fn kind(media_type: &str) -> (u8, Encoding) {
    match essence(media_type).as_str() {
        json if is_json(json) => (0, Encoding::Json),
        FORM => (1, Encoding::Form),
        MULTIPART => (2, Encoding::Multipart),
        "text/plain" => (3, Encoding::Text),
        _ => (4, Encoding::Text),
    }
}

/// The first media type of a `content` map.
pub(super) fn first_media(content: Option<&Value>) -> Option<(&String, &Value)> {
    content?.as_object()?.iter().next()
}

/// `application/json` and every `+json` type (RFC 6839 §3.1).
pub(super) fn is_json(media_type: &str) -> bool {
    let essence = essence(media_type);
    essence == "application/json" || essence.ends_with("+json")
}

/// A media type without its parameters, in lower case.
fn essence(media_type: &str) -> String {
    media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// The `Content-Type` and bytes of `value` sent as `media_type` with `encoding`.
pub fn encode(media_type: &str, encoding: Encoding, value: &Value) -> Result<(String, Vec<u8>), ArgumentError> {
    let object = || match value {
        Value::Object(members) => Ok(members),
        _ => Err(ArgumentError(format!("`body` must be an object: it is sent as {media_type}, one field per member"))),
    };
    match encoding {
        Encoding::Json => {
            let bytes = serde_json::to_vec(value).map_err(|error| ArgumentError(error.to_string()))?;
            Ok((media_type.to_owned(), bytes))
        }
        Encoding::Text => match value {
            Value::String(text) => Ok((media_type.to_owned(), text.clone().into_bytes())),
            _ => Err(ArgumentError(format!("`body` must be a string: it is sent as {media_type}"))),
        },
        Encoding::Form => {
            let mut form = form_urlencoded::Serializer::new(String::new());
            for (name, field) in fields(object()?) {
                form.append_pair(name, &field.text);
            }
            Ok((media_type.to_owned(), form.finish().into_bytes()))
        }
        Encoding::Multipart => Ok(multipart(&fields(object()?))),
    }
}

/// One field of a form or multipart body.
struct Field {
    text: String,
    /// Whether `text` is JSON (an object or an array holding one).
    json: bool,
}

/// The fields of an object argument, in order (see the module rules).
fn fields(members: &Map<String, Value>) -> Vec<(&str, Field)> {
    let mut fields = Vec::new();
    for (name, member) in members {
        match member {
            Value::Null => {}
            Value::Array(items) if items.iter().all(is_scalar) => {
                fields.extend(items.iter().filter(|item| !item.is_null()).map(|item| (name.as_str(), scalar(item))));
            }
            scalar_value if is_scalar(scalar_value) => fields.push((name.as_str(), scalar(scalar_value))),
            nested => fields.push((name.as_str(), Field { text: nested.to_string(), json: true })),
        }
    }
    fields
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

fn scalar(value: &Value) -> Field {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    Field { text, json: false }
}

/// A `multipart/form-data` body (RFC 7578) of `fields`, and its `Content-Type`.
fn multipart(fields: &[(&str, Field)]) -> (String, Vec<u8>) {
    let mut digest = Sha256::new();
    for (name, field) in fields {
        digest.update(name.as_bytes());
        digest.update(field.text.as_bytes());
    }
    let boundary = format!("switchyard-{:x}", digest.finalize());
    let mut body = Vec::new();
    for (name, field) in fields {
        // RFC 7578 §4.2: a name is a quoted string; quotes and line breaks in it are percent-encoded, as browsers do.
        let name = name.replace('"', "%22").replace('\r', "%0D").replace('\n', "%0A");
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
        );
        if field.json {
            body.extend_from_slice(b"Content-Type: application/json\r\n");
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(field.text.as_bytes());
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("{MULTIPART}; boundary={boundary}"), body)
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
