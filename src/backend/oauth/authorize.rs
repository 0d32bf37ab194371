//! The authorization code flow of one (principal, backend): the gateway's start page for it, the browser's
//! consent there, and the callback that completes it (MCP 2025-11-25 authorization; RFC 9700 §4.7.1 for the
//! binding to the consenting browser, RFC 9207 for `iss`).
//!
//! Rules:
//! - PKCE S256 always; the authorization server's URL (with its `state`) is revealed only to the browser that
//!   consented at the start page, and only it can complete the flow (`pending.rs`).
//! - The authorization response's `iss` must equal the issuer the request went to, by simple string comparison
//!   (no URL normalization: a trailing slash is a mismatch); it must be present when the server advertises
//!   `authorization_response_iss_parameter_supported`. Otherwise the code is not exchanged and the state is
//!   spent.

use std::sync::Arc;

use super::pending::Request;
use super::token::{self, Grant};
use super::{
    Completed, Consent, Discovered, OAuthClient, OAuthError, START_FLOW_PARAM, ServerMetadata, pkce, token_set,
};

impl OAuthClient {
    /// The start page of `flow` is being shown to a browser: the authorization is bound to that browser from now
    /// on (the cookie and consent token returned), and no other may continue or complete it.
    pub fn consent(&self, flow: &str) -> Result<Consent, OAuthError> {
        self.pending.bind(flow)
    }

    /// The user consented on the start page: the authorization server URL to send the browser to, when it
    /// presents the flow's `consent` token and one of its `cookies`.
    pub fn proceed(&self, flow: &str, consent: &str, cookies: &[String]) -> Result<String, OAuthError> {
        self.pending.proceed(flow, consent, cookies)
    }

    /// Completes the authorization of `state` with the `code` (and the `iss`, RFC 9207) the authorization server
    /// sent to the callback, when the browser presents the cookie of the browser that consented (among
    /// `cookies`); another browser is refused and leaves the authorization waiting.
    pub async fn complete(
        &self,
        state: &str,
        code: &str,
        iss: Option<&str>,
        cookies: &[String],
    ) -> Result<Completed, OAuthError> {
        let pending = self.pending.take(state, cookies)?;
        let request = &pending.request;
        let backend = self.backends.get(&request.backend);
        let http = &backend.ok_or_else(|| OAuthError::UnknownBackend(request.backend.clone()))?.http;
        let discovered = &request.discovered;
        check_iss(&discovered.server, iss)?;
        let redirect_uri = self.redirect_uri();
        let grant = Grant::AuthorizationCode { code, redirect_uri: &redirect_uri, verifier: &request.verifier };
        let issued = token::request(
            http,
            &discovered.server.token_endpoint,
            &discovered.client,
            grant,
            &discovered.resource,
            None,
        )
        .await?;
        let tokens = token_set(issued, request.scopes.clone().unwrap_or_default(), discovered, None, request.step_ups);
        self.save(&request.principal, &request.backend, &tokens).await?;
        let Request { principal, backend, .. } = pending.request;
        Ok(Completed { principal, backend, flow: pending.flow })
    }

    /// The gateway's start page for an authorization of (`owner`, `backend`): the one waiting, or a new one.
    /// The authorization server's URL (with its `state`) is revealed only by [`OAuthClient::proceed`].
    pub(super) fn authorization_url(
        &self,
        owner: &str,
        backend: &str,
        discovered: Arc<Discovered>,
        scopes: Option<Vec<String>>,
        step_ups: u8,
    ) -> Result<String, OAuthError> {
        let server = &discovered.server;
        let endpoint = server.authorization_endpoint.clone().ok_or_else(|| OAuthError::BadDocument {
            what: "authorization server metadata",
            url: server.issuer.clone(),
            reason: "`authorization_endpoint` is missing".to_owned(),
        })?;
        let verifier = pkce::random_token()?;
        let (challenge, redirect_uri) = (pkce::s256_challenge(&verifier), self.redirect_uri());
        let (client_id, resource) = (discovered.client.client_id.clone(), discovered.resource.clone());
        let scope = scopes.as_ref().filter(|scopes| !scopes.is_empty()).map(|scopes| scopes.join(" "));
        let url = move |state: &str| {
            let mut url = endpoint;
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("state", state)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", &resource);
            if let Some(scope) = &scope {
                query.append_pair("scope", scope);
            }
            drop(query);
            url.to_string()
        };
        let request = Request {
            principal: owner.to_owned(),
            backend: backend.to_owned(),
            verifier,
            scopes,
            step_ups,
            discovered: Arc::clone(&discovered),
        };
        let flow = self.pending.admit(request, url)?;
        let mut start = self.start_uri();
        start.query_pairs_mut().append_pair(START_FLOW_PARAM, &flow);
        Ok(start.to_string())
    }
}

/// RFC 9207 §2.4: `iss`, when present, is the issuer exactly; a server that advertises it must send it.
pub(super) fn check_iss(server: &ServerMetadata, iss: Option<&str>) -> Result<(), OAuthError> {
    match iss {
        Some(found) if found != server.issuer => {
            Err(OAuthError::IssMismatch { expected: server.issuer.clone(), found: found.to_owned() })
        }
        None if server.authorization_response_iss_parameter_supported => {
            Err(OAuthError::IssMissing { issuer: server.issuer.clone() })
        }
        _ => Ok(()),
    }
}
