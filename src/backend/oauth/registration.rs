//! Who the gateway is at a backend's authorization server (MCP 2025-11-25 authorization, "Client
//! Registration Approaches"), in the spec's order of preference: a pre-registered client, a Client ID Metadata
//! Document (the client id is the document's URL, when the server advertises
//! `client_id_metadata_document_supported`), else Dynamic Client Registration (RFC 7591) at the server's
//! `registration_endpoint`.
//!
//! Rules:
//! - The token endpoint authentication method is the configured one, else the one a registration answer names,
//!   else chosen from the server's `token_endpoint_auth_methods_supported` ([`AuthMethod::choose`]).
//! - A registration answer must carry a `client_id`; its `client_secret`, if any, is kept as a [`Secret`].
//! - Registrations live in memory with the backend's discovery (a restart registers again).

use serde_json::{Value, json};

use super::discovery::ServerMetadata;
use super::error::OAuthError;
use super::http::Http;
use super::token::{AuthMethod, ClientAuth};
use super::{ClientIdentity, Secret};

/// The client to use with `server`.
pub(super) async fn register(
    http: &Http,
    identity: &ClientIdentity,
    configured_method: Option<AuthMethod>,
    server: &ServerMetadata,
    redirect_uri: &str,
    client_name: &str,
) -> Result<ClientAuth, OAuthError> {
    let supported = server.token_endpoint_auth_methods_supported.as_deref();
    match identity {
        ClientIdentity::PreRegistered { client_id, client_secret } => Ok(ClientAuth {
            client_id: client_id.clone(),
            secret: client_secret.clone(),
            method: configured_method.unwrap_or_else(|| AuthMethod::choose(supported, client_secret.is_some())),
        }),
        ClientIdentity::MetadataDocument(url) if server.client_id_metadata_document_supported => {
            Ok(ClientAuth { client_id: url.to_string(), secret: None, method: AuthMethod::None })
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
            let wanted = configured_method.unwrap_or_else(|| AuthMethod::choose(supported, true));
            let metadata = json!({
                "client_name": client_name,
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": wanted.as_str(),
            });
            let request = http
                .post(endpoint)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(metadata.to_string());
            let answer = http.send(request).await.map_err(|failed| OAuthError::Unreachable {
                what: "the registration endpoint",
                url: endpoint.to_string(),
                reason: failed.0,
            })?;
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
                configured_method.or(answered).unwrap_or_else(|| AuthMethod::choose(supported, secret.is_some()));
            Ok(ClientAuth {
                client_id: client_id.to_owned(),
                secret: secret.map(|secret| Secret::new(secret.to_owned())),
                method,
            })
        }
    }
}
