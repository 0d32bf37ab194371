//! `[backends.oauth]`: the gateway as an OAuth 2.1 client of a protected backend (MCP 2025-11-25
//! authorization), validated into [`OAuthConfig`].
//!
//! Rules:
//! - `grant` is required: `"client_credentials"` (one machine identity for the backend),
//!   `"authorization_code"` (each principal authorizes once; its tokens are its own) or `"token_exchange"` (the
//!   agent's JWT is exchanged for the backend's token, RFC 8693). `token_exchange` needs a pre-registered
//!   `client_id` and `authorization_server` (and `[auth.jwt]`, checked with the agents' settings); `audience`
//!   (default: the backend's URL) and `actor` (send the gateway's own token as `actor_token`) belong to it alone.
//! - How the gateway is known to the authorization server: `client_id` (+ `client_secret` and/or `private_key`,
//!   secrets written `{ env = "VAR" }` or `{ file = "/path" }` and read at load by `credential`'s code) when
//!   pre-registered; else `client_metadata_url` (a Client ID Metadata Document the operator hosts, https); else
//!   neither, and the gateway registers itself (RFC 7591). `client_id` and `client_metadata_url` exclude each
//!   other; `client_secret` and `private_key` need `client_id`; `client_credentials` needs `client_id` (a machine
//!   identity is pre-registered).
//! - `private_key` is kept as opaque text here: the composition root parses the PEM (and names
//!   [`OAuthPrivateKey::key`] when it is unusable), because the key types belong to the OAuth client.
//! - `authorization_server` (optional) skips discovery; `token_endpoint_auth_method` (optional) overrides the
//!   choice made from the server's metadata; `"private_key_jwt"` needs `private_key`. Without
//!   `authorization_server`, a `client_id`'s credentials go only to an issuer on the backend's own host, which is
//!   then pinned (`backend/oauth/pin.rs`).
//! - `allow_internal` (default false): the OAuth exchanges may reach loopback and private addresses even when
//!   the backend's own host is not in that network (`backend/oauth/address.rs`).
//! - A backend with `oauth` sends `Authorization` itself: a `credential` or a `headers` entry for
//!   `Authorization` is refused, naming the key; stdio backends have no `oauth`.

use std::collections::HashMap;

use reqwest::Url;
use serde::Deserialize;

use super::credential::{CredentialSource, RawSecretRef, read_source};
use super::fields::{Fault, KeyPath, list, optional, quoted};
use super::values::Expected;
use crate::secret::Secret;

/// How the gateway obtains tokens for the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// One token for the gateway itself, used for every principal (OAuth 2.1 §4.2).
    ClientCredentials,
    /// Each principal authorizes in a browser; tokens are stored per principal.
    AuthorizationCode,
    /// The agent's JWT is exchanged for a token of the backend (RFC 8693); tokens are kept per principal.
    TokenExchange,
}

/// How the gateway authenticates at the token endpoint (RFC 7591 §2 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenEndpointAuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    /// A JWT signed with `private_key` (RFC 7523 §2.2).
    PrivateKeyJwt,
    None,
}

/// Who the gateway is at the authorization server.
#[derive(Debug, Clone, PartialEq)]
pub enum OAuthClientIdentity {
    /// A client registered by the operator.
    PreRegistered { client_id: String, client_secret: Option<Secret>, private_key: Option<OAuthPrivateKey> },
    /// A Client ID Metadata Document: its URL is the client id.
    MetadataDocument(Url),
    /// Dynamic Client Registration at the server's `registration_endpoint`.
    Dynamic,
}

/// `private_key`: the PEM text of the key client assertions are signed with, not parsed here.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthPrivateKey {
    pub pem: Secret,
    pub source: CredentialSource,
    /// The dotted key it came from (`backends[0].oauth.private_key.file`), to blame when the PEM is unusable.
    pub key: String,
}

/// A validated `[backends.oauth]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthConfig {
    pub grant: OAuthGrant,
    pub client: OAuthClientIdentity,
    /// Requested when the backend's challenge names no scope (before the resource metadata's `scopes_supported`).
    pub scopes: Vec<String>,
    pub authorization_server: Option<Url>,
    pub token_endpoint_auth_method: Option<TokenEndpointAuthMethod>,
    /// Whether its OAuth exchanges may reach loopback and private addresses when the backend itself is not in
    /// that network (link-local never).
    pub allow_internal: bool,
    /// `token_exchange` only: the `audience` asked for (`None`: the backend's URL).
    pub audience: Option<String>,
    /// `token_exchange` only: whether the gateway's own token goes as `actor_token`.
    pub actor: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawOAuth {
    grant: Option<OAuthGrant>,
    client_id: Option<String>,
    client_secret: Option<RawSecretRef>,
    private_key: Option<RawSecretRef>,
    client_metadata_url: Option<String>,
    scopes: Vec<String>,
    authorization_server: Option<String>,
    token_endpoint_auth_method: Option<TokenEndpointAuthMethod>,
    allow_internal: bool,
    audience: Option<String>,
    actor: bool,
}

/// Validates `backends[i].oauth` (at `key`) of the backend named `backend`.
pub(super) fn build(
    key: &KeyPath,
    backend: &str,
    raw: &RawOAuth,
    env: &HashMap<String, String>,
) -> Result<OAuthConfig, Fault> {
    let grant = raw.grant.ok_or_else(|| {
        Fault::invalid(
            &key.key("grant"),
            None,
            "\"client_credentials\", \"authorization_code\" or \"token_exchange\" (this key is required)".into(),
        )
    })?;
    let client = build_client(key, backend, raw, env)?;
    if grant != OAuthGrant::AuthorizationCode && !matches!(client, OAuthClientIdentity::PreRegistered { .. }) {
        let name = grant_name(grant);
        return Err(Fault::invalid(
            &key.key("client_id"),
            None,
            format!("a pre-registered `client_id` with grant = \"{name}\" (a machine identity cannot register itself)")
                .into(),
        ));
    }
    check_exchange_keys(key, grant, raw)?;
    let pre_registered_key = matches!(&client, OAuthClientIdentity::PreRegistered { private_key: Some(_), .. });
    if raw.token_endpoint_auth_method == Some(TokenEndpointAuthMethod::PrivateKeyJwt) && !pre_registered_key {
        return Err(Fault::invalid(
            &key.key("private_key"),
            None,
            "a key to sign with, { env = \"VAR\" } or { file = \"/path\" } holding a PKCS#8 PEM (required by \
             token_endpoint_auth_method = \"private_key_jwt\")"
                .into(),
        ));
    }
    Ok(OAuthConfig {
        grant,
        client,
        scopes: list(&key.key("scopes"), &raw.scopes, parse_scope)?,
        authorization_server: optional(
            &key.key("authorization_server"),
            raw.authorization_server.as_deref(),
            parse_server_url,
        )?,
        token_endpoint_auth_method: raw.token_endpoint_auth_method,
        allow_internal: raw.allow_internal,
        audience: optional(&key.key("audience"), raw.audience.as_deref(), parse_audience)?,
        actor: raw.actor,
    })
}

fn grant_name(grant: OAuthGrant) -> &'static str {
    match grant {
        OAuthGrant::ClientCredentials => "client_credentials",
        OAuthGrant::AuthorizationCode => "authorization_code",
        OAuthGrant::TokenExchange => "token_exchange",
    }
}

/// `token_exchange` needs `authorization_server`; `audience` and `actor` mean nothing to the other grants.
fn check_exchange_keys(key: &KeyPath, grant: OAuthGrant, raw: &RawOAuth) -> Result<(), Fault> {
    if grant == OAuthGrant::TokenExchange {
        if raw.authorization_server.is_none() {
            return Err(Fault::invalid(
                &key.key("authorization_server"),
                None,
                "the issuer URL of the authorization server that exchanges the agents' tokens (required by grant = \
                 \"token_exchange\")"
                    .into(),
            ));
        }
        return Ok(());
    }
    let stray = [("audience", raw.audience.is_some()), ("actor", raw.actor)].into_iter().find(|(_, set)| *set);
    match stray {
        Some((name, _)) => Err(Fault::invalid(
            &key.key(name),
            None,
            format!("no `{name}` with grant = \"{}\" (it belongs to grant = \"token_exchange\")", grant_name(grant))
                .into(),
        )),
        None => Ok(()),
    }
}

/// RFC 8693 §2.1: a logical name of the target service (a URI or any identifier the server knows).
fn parse_audience(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && text.len() <= 1024 && !text.chars().any(char::is_control);
    valid.then(|| text.to_owned()).ok_or_else(|| "an audience of 1–1024 characters without control characters".into())
}

fn build_client(
    key: &KeyPath,
    backend: &str,
    raw: &RawOAuth,
    env: &HashMap<String, String>,
) -> Result<OAuthClientIdentity, Fault> {
    let client_id = optional(&key.key("client_id"), raw.client_id.as_deref(), parse_client_id)?;
    let document = optional(&key.key("client_metadata_url"), raw.client_metadata_url.as_deref(), parse_document_url)?;
    let read = |name: &str, secret: &RawSecretRef| {
        read_source(&key.key(name), backend, secret.env.as_deref(), secret.file.as_deref(), env)
    };
    let client_secret = raw
        .client_secret
        .as_ref()
        .map(|secret| read("client_secret", secret))
        .transpose()?
        .map(|(_, value, _)| Secret::new(value));
    let private_key = raw.private_key.as_ref().map(|secret| read("private_key", secret)).transpose()?.map(
        |(source, pem, source_key)| OAuthPrivateKey { pem: Secret::new(pem), source, key: source_key.to_string() },
    );
    let secret_key = match (&client_secret, &private_key) {
        (Some(_), _) => Some("client_secret"),
        (None, Some(_)) => Some("private_key"),
        (None, None) => None,
    };
    match (client_id, document, secret_key) {
        (Some(_), Some(_), _) => Err(Fault::invalid(
            &key.key("client_metadata_url"),
            None,
            "either `client_id` (pre-registered) or `client_metadata_url`, not both".into(),
        )),
        (None, _, Some(name)) => Err(Fault::invalid(
            &key.key(name),
            None,
            format!("a `client_id` beside `{name}` (a credential of a pre-registered client)").into(),
        )),
        (Some(client_id), None, _) => Ok(OAuthClientIdentity::PreRegistered { client_id, client_secret, private_key }),
        (None, Some(url), None) => Ok(OAuthClientIdentity::MetadataDocument(url)),
        (None, None, None) => Ok(OAuthClientIdentity::Dynamic),
    }
}

/// Refuses what would compete with the tokens for `Authorization` on a backend with `oauth`.
pub(super) fn check_authorization_header(
    entry: &KeyPath,
    credential_header: Option<&http::HeaderName>,
    headers: &http::HeaderMap,
) -> Result<(), Fault> {
    let authorization = http::header::AUTHORIZATION;
    if credential_header == Some(&authorization) {
        return Err(Fault::invalid(
            &entry.key("credential").key("header"),
            Some(quoted(authorization.as_str())),
            "another header than Authorization: the `oauth` tokens of this backend are sent there".into(),
        ));
    }
    if headers.contains_key(&authorization) {
        return Err(Fault::invalid(
            &entry.key("headers").key("Authorization"),
            None,
            "no Authorization header: the `oauth` tokens of this backend are sent there".into(),
        ));
    }
    Ok(())
}

/// RFC 6749 §3.3: `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
fn parse_scope(text: &str) -> Result<String, Expected> {
    let valid =
        !text.is_empty() && text.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
    valid
        .then(|| text.to_owned())
        .ok_or_else(|| "a scope such as \"repo:read\" (visible ASCII without blanks, `\"` or `\\`)".into())
}

fn parse_client_id(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && text.len() <= 1024 && !text.chars().any(char::is_control);
    valid.then(|| text.to_owned()).ok_or_else(|| "a client id of 1–1024 characters without control characters".into())
}

fn parse_server_url(text: &str) -> Result<Url, Expected> {
    let url = Url::parse(text).map_err(|error| Expected(format!("an http or https issuer URL ({error})")))?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    plain.then_some(url).ok_or_else(|| "an http or https issuer URL without credentials, query or fragment".into())
}

/// A Client ID Metadata Document's URL is the client id: https with a path (draft-ietf-oauth-client-id-metadata-
/// document §3); plain http is allowed only for loopback test servers.
fn parse_document_url(text: &str) -> Result<Url, Expected> {
    let url = Url::parse(text).map_err(|error| Expected(format!("an https URL of the metadata document ({error})")))?;
    let loopback = url.scheme() == "http" && matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    let valid = (url.scheme() == "https" || loopback)
        && url.path() != "/"
        && url.username().is_empty()
        && url.password().is_none()
        && url.fragment().is_none();
    valid.then_some(url).ok_or_else(|| {
        "an https URL with a path, such as \"https://gw.example.com/oauth/client.json\" (no fragment, no \
         credentials)"
            .into()
    })
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
