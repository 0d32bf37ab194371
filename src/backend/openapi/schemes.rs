//! A document's security schemes (`components.securitySchemes`) and requirements (`security`), read into where
//! each scheme puts a credential. OpenAPI 3.0 §4.7.33 and 3.1 §4.8.27 (Security Scheme Object), §4.8.30 (Security
//! Requirement Object).
//!
//! Rules: a scheme the gateway cannot fill (`mutualTLS`, `http` other than `bearer` and `basic`, an entry it cannot
//! read) is kept as [`Scheme::Unusable`] with the reason, so only a backend that needs it is refused
//! ([`super::security`]); a malformed `security` list is a [`SpecError`] at its pointer.

use std::collections::BTreeMap;
use std::fmt;

use http::header::HeaderName;
use serde_json::Value;

use super::document::SpecError;

/// Where and how a security scheme puts a credential.
#[derive(Debug, Clone, PartialEq)]
pub enum Scheme {
    /// `apiKey` in a header, as written.
    Header(HeaderName),
    /// `apiKey` in a query parameter.
    Query(String),
    /// `apiKey` in a cookie.
    Cookie(String),
    /// `http` `bearer`, `oauth2`, `openIdConnect`: `Authorization: Bearer <token>`.
    Bearer(&'static str),
    /// `http` `basic`: `Authorization: Basic <base64 of user:password>`.
    Basic,
    /// One the gateway cannot fill (`mutualTLS`, `http` `digest`, an entry it cannot read): why.
    Unusable(String),
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheme::Header(name) => write!(f, "apiKey in header `{name}`"),
            Scheme::Query(name) => write!(f, "apiKey in query parameter `{name}`"),
            Scheme::Cookie(name) => write!(f, "apiKey in cookie `{name}`"),
            Scheme::Bearer(kind) => write!(f, "{kind}: a bearer token"),
            Scheme::Basic => write!(f, "http basic"),
            Scheme::Unusable(why) => write!(f, "{why}"),
        }
    }
}

/// An operation's (or the document's) `security`: alternatives of scheme names, and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirements {
    pub alternatives: Vec<Vec<String>>,
    pub pointer: String,
}

/// The document's security schemes, by name.
pub fn schemes(document: &Value) -> BTreeMap<String, Scheme> {
    let declared = document.pointer("/components/securitySchemes").and_then(Value::as_object);
    declared.into_iter().flatten().map(|(name, raw)| (name.clone(), scheme(raw))).collect()
}

fn scheme(raw: &Value) -> Scheme {
    let text = |key| raw.get(key).and_then(Value::as_str);
    match (text("type"), text("in"), text("name")) {
        (Some("apiKey"), Some("header"), Some(name)) => match HeaderName::from_bytes(name.as_bytes()) {
            Ok(header) => Scheme::Header(header),
            Err(_) => Scheme::Unusable(format!("apiKey in header `{name}`, which is no header name")),
        },
        (Some("apiKey"), Some("query"), Some(name)) => Scheme::Query(name.to_owned()),
        (Some("apiKey"), Some("cookie"), Some(name)) => Scheme::Cookie(name.to_owned()),
        (Some("apiKey"), place, name) => Scheme::Unusable(format!("apiKey with `in` {place:?} and `name` {name:?}")),
        (Some("http"), ..) => match text("scheme").map(str::to_ascii_lowercase).as_deref() {
            Some("bearer") => Scheme::Bearer("http bearer"),
            Some("basic") => Scheme::Basic,
            other => Scheme::Unusable(format!("http scheme {other:?} (only bearer and basic are filled)")),
        },
        (Some("oauth2"), ..) => Scheme::Bearer("oauth2"),
        (Some("openIdConnect"), ..) => Scheme::Bearer("openIdConnect"),
        (other, ..) => Scheme::Unusable(format!("type {other:?}, which the gateway cannot fill")),
    }
}

/// The `security` member of `holder` (at `pointer`), if it has one.
pub fn requirements(holder: &Value, pointer: &str) -> Result<Option<Requirements>, SpecError> {
    let Some(raw) = holder.get("security") else { return Ok(None) };
    let pointer = format!("{pointer}/security");
    let malformed = || SpecError::new(&pointer, "`security` must be a list of objects of scheme names");
    let alternatives = raw.as_array().ok_or_else(malformed)?;
    let alternatives = alternatives
        .iter()
        .map(|alternative| alternative.as_object().map(|names| names.keys().cloned().collect()).ok_or_else(malformed))
        .collect::<Result<_, _>>()?;
    Ok(Some(Requirements { alternatives, pointer }))
}
