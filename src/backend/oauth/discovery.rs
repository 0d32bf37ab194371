//! Finding a backend's authorization server (MCP 2025-11-25 authorization, "Authorization Server Discovery"):
//! the Protected Resource Metadata (RFC 9728), then the authorization server's metadata (RFC 8414, OpenID Connect
//! Discovery 1.0).
//!
//! Rules:
//! - PRM locations, in order: the challenge's `resource_metadata`, then the path-inserted well-known URI
//!   (`/.well-known/oauth-protected-resource` + the backend URL's path, without a trailing slash), then the root
//!   one. The first that answers 200 with a JSON object is used.
//! - The PRM's `resource` must name the backend (RFC 9728 §3.3): same origin, and its path equal to the backend
//!   URL's path or a whole-segment prefix of it (servers that advertise their root); otherwise the document is
//!   refused. The `resource` value is what tokens are requested for (RFC 8707).
//! - AS metadata locations, in order: for an issuer with a path, RFC 8414 path-inserted, OIDC path-inserted, OIDC
//!   path-appended (never the root forms, which describe another issuer); for one without, the RFC 8414 and the
//!   OIDC root forms. The document's `issuer` must equal the issuer it was fetched for (RFC 8414 §3.3).
//! - Only what the gateway uses is read; endpoints must be http or https URLs.

use reqwest::Url;
use serde_json::{Map, Value};

use super::error::OAuthError;
use super::http::Http;

const PRM_PATH: &str = "/.well-known/oauth-protected-resource";
const RFC8414_PATH: &str = "/.well-known/oauth-authorization-server";
const OIDC_PATH: &str = "/.well-known/openid-configuration";

/// The parts of a Protected Resource Metadata document the gateway uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceMetadata {
    /// The resource identifier, as the document spells it (the RFC 8707 `resource` parameter).
    pub resource: String,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
}

/// The parts of an authorization server's metadata the gateway uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<Url>,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    pub code_challenge_methods_supported: Vec<String>,
    /// RFC 8414 §2: absent means `client_secret_basic`.
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// The JWS algorithms accepted for `private_key_jwt` assertions (`None`: not said).
    pub token_endpoint_auth_signing_alg_values_supported: Option<Vec<String>>,
    pub scopes_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
    /// RFC 9207: the server puts `iss` in every authorization response, so one without it is refused.
    pub authorization_response_iss_parameter_supported: bool,
}

impl ServerMetadata {
    pub fn supports_s256(&self) -> bool {
        self.code_challenge_methods_supported.iter().any(|method| method == "S256")
    }
}

/// Where to look for the backend's PRM, in order.
pub fn resource_metadata_urls(backend_url: &Url, from_challenge: Option<&str>) -> Vec<Url> {
    let mut urls: Vec<Url> = from_challenge.and_then(|text| http_url(text).ok()).into_iter().collect();
    let path = backend_url.path().trim_end_matches('/');
    if !path.is_empty() {
        urls.push(at_origin(backend_url, &format!("{PRM_PATH}{path}")));
    }
    urls.push(at_origin(backend_url, PRM_PATH));
    urls.dedup();
    urls
}

/// Where to look for the metadata of `issuer`, in order.
pub fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![at_origin(issuer, RFC8414_PATH), at_origin(issuer, OIDC_PATH)];
    }
    vec![
        at_origin(issuer, &format!("{RFC8414_PATH}{path}")),
        at_origin(issuer, &format!("{OIDC_PATH}{path}")),
        at_origin(issuer, &format!("{path}{OIDC_PATH}")),
    ]
}

fn at_origin(url: &Url, path: &str) -> Url {
    let mut url = url.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// Fetches and checks the backend's PRM.
pub(super) async fn fetch_resource_metadata(
    http: &Http,
    backend_url: &Url,
    from_challenge: Option<&str>,
) -> Result<ResourceMetadata, OAuthError> {
    let what = "protected resource metadata";
    let (url, document) = first_document(http, what, &resource_metadata_urls(backend_url, from_challenge)).await?;
    parse_resource_metadata(&document, backend_url, &url)
}

/// Fetches and checks the metadata of the authorization server `issuer`.
pub(super) async fn fetch_server_metadata(http: &Http, issuer: &str) -> Result<ServerMetadata, OAuthError> {
    let what = "authorization server metadata";
    let issuer_url = http_url(issuer).map_err(|reason| OAuthError::BadDocument {
        what: "authorization server",
        url: issuer.to_owned(),
        reason,
    })?;
    let (url, document) = first_document(http, what, &server_metadata_urls(&issuer_url)).await?;
    parse_server_metadata(&document, issuer, &url)
}

/// The first candidate that answers 200 with a JSON object. A candidate that cannot be reached at all, or is not
/// allowed, is what the error names when no later one answers either.
async fn first_document(
    http: &Http,
    what: &'static str,
    urls: &[Url],
) -> Result<(Url, Map<String, Value>), OAuthError> {
    let mut unreachable = None;
    for url in urls {
        match http.get(url).await {
            Ok(answer) if answer.status.is_success() => match answer.json {
                Some(document) => return Ok((url.clone(), document)),
                None => {
                    return Err(OAuthError::BadDocument { what, url: url.to_string(), reason: answer.describe() });
                }
            },
            Ok(_) => {}
            Err(failed) => {
                unreachable.get_or_insert(failed.error(what, url));
            }
        }
    }
    Err(unreachable.unwrap_or_else(|| OAuthError::NotFound {
        what,
        tried: urls.iter().map(Url::as_str).collect::<Vec<_>>().join(", "),
    }))
}

/// Reads a PRM document fetched from `url` and checks that it describes `backend_url`.
pub fn parse_resource_metadata(
    document: &Map<String, Value>,
    backend_url: &Url,
    url: &Url,
) -> Result<ResourceMetadata, OAuthError> {
    let bad =
        |reason: String| OAuthError::BadDocument { what: "protected resource metadata", url: url.to_string(), reason };
    let resource = string(document, "resource").map_err(bad)?.ok_or_else(|| bad("`resource` is missing".to_owned()))?;
    let resource_url = http_url(&resource).map_err(bad)?;
    if !names_backend(&resource_url, backend_url) {
        return Err(OAuthError::ResourceMismatch { backend_url: backend_url.to_string(), found: resource });
    }
    Ok(ResourceMetadata {
        resource,
        authorization_servers: strings(document, "authorization_servers").map_err(bad)?.unwrap_or_default(),
        scopes_supported: strings(document, "scopes_supported").map_err(bad)?,
    })
}

/// Same origin, and the resource's path is the backend's or a whole-segment prefix of it.
fn names_backend(resource: &Url, backend: &Url) -> bool {
    let resource_path = resource.path().trim_end_matches('/');
    let backend_path = backend.path().trim_end_matches('/');
    resource.origin() == backend.origin()
        && backend_path.strip_prefix(resource_path).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Reads AS metadata fetched from `url` for `issuer`.
pub fn parse_server_metadata(
    document: &Map<String, Value>,
    issuer: &str,
    url: &Url,
) -> Result<ServerMetadata, OAuthError> {
    let what = "authorization server metadata";
    let bad = |reason: String| OAuthError::BadDocument { what, url: url.to_string(), reason };
    let found = string(document, "issuer").map_err(bad)?.ok_or_else(|| bad("`issuer` is missing".to_owned()))?;
    if found.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(OAuthError::IssuerMismatch { url: url.to_string(), expected: issuer.to_owned(), found });
    }
    let endpoint = |name: &str| -> Result<Option<Url>, OAuthError> {
        string(document, name)
            .and_then(|text| text.map(|text| http_url(&text)).transpose())
            .map_err(|reason| bad(format!("`{name}`: {reason}")))
    };
    Ok(ServerMetadata {
        issuer: found,
        authorization_endpoint: endpoint("authorization_endpoint")?,
        token_endpoint: endpoint("token_endpoint")?.ok_or_else(|| bad("`token_endpoint` is missing".to_owned()))?,
        registration_endpoint: endpoint("registration_endpoint")?,
        code_challenge_methods_supported: strings(document, "code_challenge_methods_supported")
            .map_err(bad)?
            .unwrap_or_default(),
        token_endpoint_auth_methods_supported: strings(document, "token_endpoint_auth_methods_supported")
            .map_err(bad)?,
        token_endpoint_auth_signing_alg_values_supported: strings(
            document,
            "token_endpoint_auth_signing_alg_values_supported",
        )
        .map_err(bad)?,
        scopes_supported: strings(document, "scopes_supported").map_err(bad)?,
        client_id_metadata_document_supported: flag(document, "client_id_metadata_document_supported"),
        authorization_response_iss_parameter_supported: flag(
            document,
            "authorization_response_iss_parameter_supported",
        ),
    })
}

/// A boolean member; absent or not a boolean is `false` (RFC 8414 and RFC 9207 defaults).
fn flag(document: &Map<String, Value>, name: &str) -> bool {
    document.get(name).and_then(Value::as_bool).unwrap_or(false)
}

fn string(document: &Map<String, Value>, name: &str) -> Result<Option<String>, String> {
    match document.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("`{name}` is not a string")),
    }
}

fn strings(document: &Map<String, Value>, name: &str) -> Result<Option<Vec<String>>, String> {
    match document.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| format!("`{name}` holds a non-string")))
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(format!("`{name}` is not an array")),
    }
}

/// An absolute http or https URL without credentials.
pub(super) fn http_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|error| format!("{text:?} is not a URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{text:?} is not an http or https URL without credentials"));
    }
    Ok(url)
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
