//! The token endpoint (OAuth 2.1 §3.2, RFC 6749 §5): the four grants the gateway uses (token exchange is
//! RFC 8693 §2), client authentication, and reading the answer.
//!
//! Rules:
//! - Every request carries `resource` (RFC 8707, MCP "Resource Parameter Implementation"): the backend's
//!   resource identifier, so a token is issued for that backend only.
//! - Client authentication as chosen ([`AuthMethod`]): `client_secret_basic` sends
//!   `Authorization: Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1), `client_secret_post`
//!   puts both in the body, `private_key_jwt` puts `client_id`, `client_assertion_type` and a fresh signed
//!   `client_assertion` in the body (RFC 7523 §2.2, see `assertion.rs`), `none` sends `client_id` only.
//! - The choice from the server's metadata: `private_key_jwt` when a key is configured and the server lists it;
//!   else with a secret `client_secret_basic`, else `client_secret_post`; else `none`.
//! - An answer is a token only when it is 2xx JSON with a non-empty `access_token` of visible ASCII (it becomes
//!   a header value) and, if present, `token_type` Bearer; an OAuth error object is [`OAuthError::TokenRefused`]
//!   (its `error` and `error_description` only when printable ASCII and bounded; an `error` that is not makes
//!   the answer garbage); anything else is [`OAuthError::BadTokenResponse`], described by status and
//!   size only. Token values never appear in errors.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Url;
use serde_json::{Map, Value};

use super::assertion::{ASSERTION_TYPE, AssertionSigner};
use super::error::OAuthError;
use super::http::{Answer, Http};
use super::unix_now;
use crate::secret::Secret;

/// RFC 8693 §3: `subject_token_type`, `actor_token_type` and `requested_token_type` of an OAuth access token.
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// RFC 8693 §2.1 `grant_type`.
const EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// How the gateway authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
    None,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
            Self::None => "none",
        }
    }

    /// A method a registration answer names that the gateway can use with what the answer gives it (a
    /// dynamically registered client has no key, so never `private_key_jwt`).
    pub(super) fn parse(text: &str) -> Option<AuthMethod> {
        [Self::ClientSecretBasic, Self::ClientSecretPost, Self::None].into_iter().find(|method| method.as_str() == text)
    }

    /// The method to use with the server's `token_endpoint_auth_methods_supported` (absent: basic, RFC 8414 §2),
    /// for a client with or without a secret and a key: `private_key_jwt` only when listed, else basic, else
    /// post, else none.
    pub(super) fn choose(supported: Option<&[String]>, has_secret: bool, has_key: bool) -> AuthMethod {
        let listed = |method: AuthMethod| supported.is_some_and(|list| list.iter().any(|m| m == method.as_str()));
        if has_key && listed(Self::PrivateKeyJwt) {
            return Self::PrivateKeyJwt;
        }
        if !has_secret {
            return Self::None;
        }
        let supports = |method: AuthMethod| supported.is_none() || listed(method);
        [Self::ClientSecretBasic, Self::ClientSecretPost].into_iter().find(|m| supports(*m)).unwrap_or(Self::None)
    }
}

/// The gateway as a client of one authorization server.
#[derive(Debug, Clone)]
pub(super) struct ClientAuth {
    pub(super) client_id: String,
    pub(super) secret: Option<Secret>,
    pub(super) method: AuthMethod,
    /// Set when `method` is `private_key_jwt`.
    pub(super) assertion: Option<AssertionSigner>,
}

/// What is asked of the token endpoint.
pub(super) enum Grant<'a> {
    AuthorizationCode {
        code: &'a str,
        redirect_uri: &'a str,
        verifier: &'a str,
    },
    Refresh {
        refresh_token: &'a str,
    },
    ClientCredentials,
    /// RFC 8693 §2.1: the agent's token for one meant for `audience`, with the gateway's own as the actor.
    TokenExchange {
        subject_token: &'a str,
        actor_token: Option<&'a str>,
        audience: &'a str,
    },
}

/// A token answer.
pub(super) struct Issued {
    pub(super) access_token: String,
    pub(super) refresh_token: Option<String>,
    pub(super) expires_at: Option<u64>,
    /// `None` when the server did not say (RFC 6749 §5.1: then as requested).
    pub(super) scopes: Option<Vec<String>>,
}

pub(super) async fn request(
    http: &Http,
    endpoint: &Url,
    client: &ClientAuth,
    grant: Grant<'_>,
    resource: &str,
    scopes: Option<&[String]>,
) -> Result<Issued, OAuthError> {
    let mut form: Vec<(&str, String)> = match grant {
        Grant::AuthorizationCode { code, redirect_uri, verifier } => vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", redirect_uri.to_owned()),
            ("code_verifier", verifier.to_owned()),
        ],
        Grant::Refresh { refresh_token } => {
            vec![("grant_type", "refresh_token".to_owned()), ("refresh_token", refresh_token.to_owned())]
        }
        Grant::ClientCredentials => vec![("grant_type", "client_credentials".to_owned())],
        Grant::TokenExchange { subject_token, actor_token, audience } => {
            exchange_form(subject_token, actor_token, audience)
        }
    };
    form.push(("resource", resource.to_owned()));
    if let Some(scopes) = scopes.filter(|scopes| !scopes.is_empty()) {
        form.push(("scope", scopes.join(" ")));
    }
    let mut request = http.post(endpoint);
    match (client.method, &client.secret, &client.assertion) {
        (AuthMethod::ClientSecretBasic, Some(secret), _) => {
            let pair = format!("{}:{}", form_encode(&client.client_id), form_encode(secret.expose()));
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
                .map_err(|_| OAuthError::Store("the client credentials are not header-safe".to_owned()))?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        (AuthMethod::ClientSecretPost, Some(secret), _) => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.expose().to_owned()));
        }
        (AuthMethod::PrivateKeyJwt, _, Some(signer)) => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_assertion_type", ASSERTION_TYPE.to_owned()));
            form.push(("client_assertion", signer.assertion(&client.client_id)?));
        }
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let body: String = form_urlencoded::Serializer::new(String::new()).extend_pairs(&form).finish();
    let request = request.header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
    let answer = http.send(request).await.map_err(|failed| failed.error("the token endpoint", endpoint))?;
    read_answer(&answer, endpoint)
}

fn exchange_form(subject_token: &str, actor_token: Option<&str>, audience: &str) -> Vec<(&'static str, String)> {
    let mut form = vec![
        ("grant_type", EXCHANGE_GRANT.to_owned()),
        ("subject_token", subject_token.to_owned()),
        ("subject_token_type", ACCESS_TOKEN_TYPE.to_owned()),
        ("requested_token_type", ACCESS_TOKEN_TYPE.to_owned()),
        ("audience", audience.to_owned()),
    ];
    if let Some(actor_token) = actor_token {
        form.push(("actor_token", actor_token.to_owned()));
        form.push(("actor_token_type", ACCESS_TOKEN_TYPE.to_owned()));
    }
    form
}

/// `application/x-www-form-urlencoded` of one value (RFC 6749 §2.3.1 asks it of Basic credentials too).
fn form_encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn read_answer(answer: &Answer, endpoint: &Url) -> Result<Issued, OAuthError> {
    let garbage = |reason: String| OAuthError::BadTokenResponse { url: endpoint.to_string(), reason };
    let Some(json) = &answer.json else { return Err(garbage(answer.describe())) };
    if !answer.status.is_success() {
        return match json.get("error").and_then(Value::as_str) {
            Some(error) if is_oauth_text(error, 64) => Err(OAuthError::TokenRefused {
                error: error.to_owned(),
                description: json
                    .get("error_description")
                    .and_then(Value::as_str)
                    .filter(|text| is_oauth_text(text, 300))
                    .map(str::to_owned),
            }),
            _ => Err(garbage(answer.describe())),
        };
    }
    parse_issued(json).map_err(garbage)
}

/// RFC 6749 §5.2 restricts `error` and `error_description` to printable ASCII (and excludes `"` and `\`, which
/// servers send anyway and which are harmless in a message): anything with another character, or longer than
/// `max` bytes, is not repeated into a message or the log.
fn is_oauth_text(text: &str, max: usize) -> bool {
    (1..=max).contains(&text.len()) && text.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

fn parse_issued(json: &Map<String, Value>) -> Result<Issued, String> {
    let access_token = json.get("access_token").and_then(Value::as_str).unwrap_or_default();
    if access_token.is_empty() || !access_token.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err("no usable `access_token`".to_owned());
    }
    match json.get("token_type") {
        None => {}
        Some(Value::String(kind)) if kind.eq_ignore_ascii_case("bearer") => {}
        Some(other) => return Err(format!("`token_type` {other} is not Bearer")),
    }
    let expires_in = match json.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
                .ok_or("`expires_in` is not a number of seconds")?,
        ),
    };
    let refresh_token = match json.get("refresh_token") {
        None | Some(Value::Null) => None,
        Some(Value::String(token)) if !token.is_empty() => Some(token.clone()),
        Some(_) => return Err("`refresh_token` is not a string".to_owned()),
    };
    let scopes = match json.get("scope") {
        None | Some(Value::Null) => None,
        Some(Value::String(scope)) => Some(scope.split_ascii_whitespace().map(str::to_owned).collect()),
        Some(_) => return Err("`scope` is not a string".to_owned()),
    };
    Ok(Issued {
        access_token: access_token.to_owned(),
        refresh_token,
        expires_at: expires_in.map(|seconds| unix_now().saturating_add(seconds)),
        scopes,
    })
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
