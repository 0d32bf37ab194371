//! REST APIs described by OpenAPI 3.0 and 3.1 documents, offered as MCP tools: the document read and resolved
//! ([`document`]), its operations as tools ([`operations`]), a call's arguments as a request ([`request`], its
//! body by media type in [`body`]), the credential placed as the operation's security requirement says
//! ([`security`]), and the answer as a result ([`response`]). Pure: nothing here sends a request to the API; the backend client's
//! session layer does (`mcp_client/session/rest.rs`), with the same delivery classes as every transport.
//!
//! Rules: a document that cannot be used is a [`SpecError`] naming its JSON pointer, found when the gateway
//! starts, when it is checked and when it reloads — never at a call. What a call may retry is decided by
//! [`Idempotency`]: only a request that carried the claim's key (or an idempotent method, when the operator
//! allows it) is sent again after its answer was lost.

pub mod body;
pub mod document;
pub mod operations;
pub mod request;
pub mod response;
pub mod schemes;
pub mod security;

use reqwest::Url;

pub use document::{SpecError, SpecSource};
pub use operations::{Api, Operation, Selection};
pub use security::{Access, CredentialPlace, Offer};

use crate::glob::Glob;

/// How many times a request whose answer was lost is sent again, by default (`idempotent_retries`).
pub const DEFAULT_IDEMPOTENT_RETRIES: u32 = 2;

/// When a request carries the claim's key and when a lost answer is retried (`idempotency_header`,
/// `idempotent_operations`, `x-switchyard-idempotency`, `idempotent_retries`, `retry_idempotent_methods`).
#[derive(Debug, Clone, Default)]
pub struct Idempotency {
    /// The header the key goes in; `None`: no key is ever sent.
    pub header: Option<http::HeaderName>,
    /// The operations that carry it (empty: every non-safe one), unless the document says otherwise per operation.
    pub operations: Vec<Glob>,
    /// How many times a lost answer is retried.
    pub retries: u32,
    /// Whether GET, HEAD, OPTIONS, PUT and DELETE are retried without a key (RFC 9110 §9.2.2).
    pub retry_idempotent_methods: bool,
}

impl Idempotency {
    /// The header a call of `operation` puts the key in, if it carries one.
    pub fn header_for(&self, operation: &Operation) -> Option<&http::HeaderName> {
        let header = self.header.as_ref().filter(|_| !operation.is_safe())?;
        let selected = operation.idempotency.unwrap_or_else(|| {
            self.operations.is_empty() || self.operations.iter().any(|glob| glob.matches(&operation.name))
        });
        selected.then_some(header)
    }

    /// Whether a call of `operation` may be sent again after its answer was lost (`keyed`: it carries a key).
    pub fn may_retry(&self, operation: &Operation, keyed: bool) -> bool {
        self.retries > 0 && (keyed || self.retry_idempotent_methods && operation.is_idempotent_method())
    }
}

/// The document at `source`, its references resolved and the operations `selection` selects compiled.
pub async fn load(source: &SpecSource, selection: &Selection) -> Result<Api, SpecError> {
    let document = document::read(source).await?;
    Api::compile(&document::resolve(&document)?, selection)
}

/// The URL requests go to: `configured`, else the document's first server (relative to the document's own URL
/// when it was fetched).
pub fn base_url(configured: Option<&Url>, api: &Api, source: &SpecSource) -> Result<Url, SpecError> {
    if let Some(url) = configured {
        return Ok(url.clone());
    }
    let Some(server) = &api.server else {
        return Err(SpecError::new("/servers", "no server URL: set `url` in the backend's configuration"));
    };
    let parsed = match source {
        SpecSource::Url(document) => document.join(server),
        SpecSource::File(_) => Url::parse(server),
    };
    let url = parsed.map_err(|error| {
        SpecError::new(
            "/servers/0/url",
            format!("`{server}` is no absolute URL ({error}): set `url` in the configuration"),
        )
    })?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(SpecError::new("/servers/0/url", format!("a {other} URL: only http and https are served"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operation(method: http::Method, name: &str, idempotency: Option<bool>) -> Operation {
        let path = "/".into();
        Operation { name: name.into(), method, path, parameters: Vec::new(), body: None, idempotency, security: None }
    }

    #[test]
    fn which_requests_carry_the_key_and_which_are_retried() {
        let header = http::HeaderName::from_static("idempotency-key");
        let rules = Idempotency { header: Some(header.clone()), retries: 2, ..Idempotency::default() };
        let post = operation(http::Method::POST, "pay", None);
        assert_eq!(rules.header_for(&post), Some(&header), "every non-safe operation by default");
        assert_eq!(rules.header_for(&operation(http::Method::GET, "read", Some(true))), None, "never a safe one");
        assert_eq!(rules.header_for(&operation(http::Method::POST, "pay", Some(false))), None, "the document decides");
        let narrowed = Idempotency { operations: vec![Glob::new("create*").unwrap()], ..rules.clone() };
        assert_eq!(narrowed.header_for(&post), None);
        assert!(narrowed.header_for(&operation(http::Method::POST, "pay", Some(true))).is_some());
        assert!(narrowed.header_for(&operation(http::Method::PATCH, "createItem", None)).is_some());
        assert!(rules.may_retry(&post, true) && !rules.may_retry(&post, false));
        let put = operation(http::Method::PUT, "replace", None);
        assert!(!rules.may_retry(&put, false), "idempotent methods only when allowed");
        let methods = Idempotency { retry_idempotent_methods: true, ..rules.clone() };
        assert!(methods.may_retry(&put, false) && !methods.may_retry(&post, false));
        assert!(!Idempotency { retries: 0, ..rules }.may_retry(&post, true));
    }
}
