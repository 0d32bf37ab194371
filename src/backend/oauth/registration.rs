//! Who the gateway is at a backend's authorization server (MCP 2025-11-25 authorization, "Client
//! Registration Approaches"), in the spec's order of preference: a pre-registered client, a Client ID Metadata
//! Document (the client id is the document's URL, when the server advertises
//! `client_id_metadata_document_supported`), else Dynamic Client Registration (RFC 7591) at the server's
//! `registration_endpoint`.
//!
//! Rules:
//! - The token endpoint authentication method is the configured one, else the one a registration answer names,
//!   else chosen from the server's `token_endpoint_auth_methods_supported` ([`AuthMethod::choose`]).
//! - A pre-registered client with a `private_key` but no secret, at a server that does not list
//!   `private_key_jwt`, is refused ([`OAuthError::ClientAuthentication`]) rather than sent without credentials.
//! - A registration answer must carry a `client_id`; its `client_secret`, if any, is kept as a [`Secret`].
//! - A dynamic registration says `application_type: "web"` (SEP-837, OpenID Connect Dynamic Client Registration
//!   §2): the gateway is a server-side confidential client whose redirect URI is its own public URL, not an app on
//!   the user's device (docs/authorization.md, "Backend OAuth client").
//! - Registrations live in memory with the backend's discovery (a restart registers again) and belong to the
//!   issuer they were made at: a new issuer gets a new registration (`mod.rs`, SEP-2352).

use std::sync::Arc;

use reqwest::Url;
use serde_json::{Value, json};

use super::ClientIdentity;
use super::assertion::{AssertionSigner, SigningKey};
use super::discovery::ServerMetadata;
use super::error::OAuthError;
use super::http::Http;
use super::token::{AuthMethod, ClientAuth};
use crate::secret::Secret;

/// SEP-837's `application_type` for the gateway: a web application (never `native`: OIDC allows native clients
/// only custom-scheme or loopback redirect URIs, and the gateway's public URL is usually neither).
pub(super) const APPLICATION_TYPE: &str = "web";

/// The client to use with `server`.
pub(super) async fn register(
    http: &Http,
    identity: &ClientIdentity,
    configured_method: Option<AuthMethod>,
    server: &ServerMetadata,
    redirect_uri: &str,
    client_name: &str,
) -> Result<ClientAuth, OAuthError> {
    match identity {
        ClientIdentity::PreRegistered { client_id, client_secret, private_key } => {
            pre_registered(client_id, client_secret.as_ref(), private_key.as_ref(), configured_method, server)
        }
        ClientIdentity::MetadataDocument(url) if server.client_id_metadata_document_supported => {
            Ok(ClientAuth { client_id: url.to_string(), secret: None, method: AuthMethod::None, assertion: None })
        }
        ClientIdentity::MetadataDocument(_) | ClientIdentity::Dynamic => {
            let Some(endpoint) = &server.registration_endpoint else {
                let reason = match identity {
                    ClientIdentity::MetadataDocument(_) => {
                        "it does not accept client metadata documents and has no registration_endpoint"
                    }
                    _ => "no client_id is configured and it has no registration_endpoint",
                };
                return Err(OAuthError::NoRegistration { issuer: server.issuer.clone(), reason: reason.to_owned() });
            };
            register_dynamically(http, endpoint, configured_method, server, redirect_uri, client_name).await
        }
    }
}

/// RFC 7591 dynamic client registration at `endpoint`: the method is the configured one, else the one the
/// server answered, else one chosen from what it supports.
async fn register_dynamically(
    http: &Http,
    endpoint: &Url,
    configured_method: Option<AuthMethod>,
    server: &ServerMetadata,
    redirect_uri: &str,
    client_name: &str,
) -> Result<ClientAuth, OAuthError> {
    let supported = server.token_endpoint_auth_methods_supported.as_deref();
    let wanted = configured_method.unwrap_or_else(|| AuthMethod::choose(supported, true, false));
    let metadata = json!({
        "client_name": client_name,
        "application_type": APPLICATION_TYPE,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted.as_str(),
    });
    let request =
        http.post(endpoint).header(reqwest::header::CONTENT_TYPE, "application/json").body(metadata.to_string());
    let answer = http.send(request).await.map_err(|failed| failed.error("the registration endpoint", endpoint))?;
    let bad = |reason: String| OAuthError::BadDocument {
        what: "client registration answer",
        url: endpoint.to_string(),
        reason,
    };
    let Some(json) = answer.json.as_ref().filter(|_| answer.status.is_success()) else {
        return Err(bad(answer.describe()));
    };
    let client_id = json
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| bad("no `client_id`".to_owned()))?;
    let secret = json.get("client_secret").and_then(Value::as_str).filter(|s| !s.is_empty());
    let answered = json.get("token_endpoint_auth_method").and_then(Value::as_str).and_then(AuthMethod::parse);
    let method =
        configured_method.or(answered).unwrap_or_else(|| AuthMethod::choose(supported, secret.is_some(), false));
    Ok(ClientAuth {
        client_id: client_id.to_owned(),
        secret: secret.map(|secret| Secret::new(secret.to_owned())),
        method,
        assertion: None,
    })
}

/// A client the operator registered: its method (configured, else chosen) and, for `private_key_jwt`, its signer.
fn pre_registered(
    client_id: &str,
    secret: Option<&Secret>,
    key: Option<&Arc<SigningKey>>,
    configured_method: Option<AuthMethod>,
    server: &ServerMetadata,
) -> Result<ClientAuth, OAuthError> {
    let refuse = |reason: String| OAuthError::ClientAuthentication { issuer: server.issuer.clone(), reason };
    let supported = server.token_endpoint_auth_methods_supported.as_deref();
    let method = configured_method.unwrap_or_else(|| AuthMethod::choose(supported, secret.is_some(), key.is_some()));
    if configured_method.is_none() && method == AuthMethod::None && key.is_some() {
        let listed = supported.map_or_else(|| "absent: client_secret_basic only".to_owned(), |list| list.join(", "));
        return Err(refuse(format!(
            "the gateway has a private_key and no client_secret, but the server does not list private_key_jwt in \
             token_endpoint_auth_methods_supported ({listed})"
        )));
    }
    let assertion = match (method, key) {
        (AuthMethod::PrivateKeyJwt, Some(key)) => Some(AssertionSigner::for_server(Arc::clone(key), server)?),
        (AuthMethod::PrivateKeyJwt, None) => {
            return Err(refuse("private_key_jwt needs a private_key to sign with".to_owned()));
        }
        _ => None,
    };
    Ok(ClientAuth { client_id: client_id.to_owned(), secret: secret.cloned(), method, assertion })
}
