//! OAuth tokens on a protected backend's Streamable HTTP exchanges (MCP 2025-11-25 authorization): which
//! token goes on a request, and what a 401 or a 403 `insufficient_scope` answer leads to.
//!
//! Rules:
//! - Before a request the stored token of the caller's principal is sent (renewed when it is about to expire);
//!   with none stored the request goes without one, so that the backend's challenge (`resource_metadata`,
//!   `scope`) drives discovery.
//! - A 401, or a 403 with `error="insufficient_scope"`, is a refusal the backend did not process (see
//!   [`super::refusal`]): the OAuth client is asked for a token with that refusal and the request is sent again,
//!   ONCE. A second refusal, an authorization the principal must give, or a failure of the OAuth client is
//!   `NotDelivered`-class (the last as [`McpError::AuthorizationRequired`]).
//! - The gateway's own discovery (no principal) uses the client-credentials token or the token of a principal
//!   that authorized the backend; with neither it sends nothing.
//! - A binding [`refusing_anonymous`](OAuthBinding::refusing_anonymous) (a per-principal backend where
//!   `anonymous` is every agent without credentials, not one user) sends nothing on behalf of `anonymous`: one
//!   authorization would act for every such agent (MCP security best practices, "Confused Deputy").
//! - A token-exchange backend gets the token exchanged for the caller's JWT (`oauth/exchange.rs`), before the
//!   request and again after a 401; a caller without a JWT is refused there, naming why.
//! - A token is sent only to the backend it was issued for: a token naming another backend is refused here.

use std::sync::Arc;

use http::StatusCode;
use http::header::{self, HeaderMap};

use crate::backend::http_client::Response;
use crate::backend::mcp_client::error::{McpError, NotDeliveredCause};
use crate::backend::oauth::{AccessToken, BearerChallenge, GrantKind, OAuthClient, OAuthNeed, Refusal};
use crate::mcp::ANONYMOUS;
use crate::secret::SubjectToken;

/// A backend's OAuth client binding: the client and the backend name its tokens are issued for.
#[derive(Clone)]
pub struct OAuthBinding {
    client: Arc<OAuthClient>,
    backend: Arc<str>,
    refuses_anonymous: bool,
}

impl std::fmt::Debug for OAuthBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OAuthBinding").field(&self.backend).finish()
    }
}

/// What a refused answer says, kept after the response is consumed.
pub(in crate::backend::mcp_client) struct Refused {
    status: StatusCode,
    challenge: Option<BearerChallenge>,
}

impl OAuthBinding {
    pub fn new(client: Arc<OAuthClient>, backend: &str) -> Self {
        Self { client, backend: backend.into(), refuses_anonymous: false }
    }

    /// The same binding, refusing every request on behalf of the principal `anonymous`.
    pub fn refusing_anonymous(self) -> Self {
        Self { refuses_anonymous: true, ..self }
    }

    /// The principal whose tokens a request uses: the caller's, or for discovery (`None`) whoever may.
    pub(in crate::backend::mcp_client) async fn principal(&self, caller: Option<&str>) -> Result<String, McpError> {
        if let Some(caller) = caller {
            if self.refuses_anonymous && caller == ANONYMOUS {
                return Err(McpError::NotDelivered {
                    cause: NotDeliveredCause::Authorization,
                    reason: format!(
                        "backend `{}` is authorized by each principal for itself, and agents without credentials \
                         all share the principal `anonymous`: this agent needs a credential of its own (an API key \
                         or a token the gateway accepts) to use it",
                        self.backend
                    )
                    .into(),
                });
            }
            return Ok(caller.to_owned());
        }
        match self.client.discovery_principal(&self.backend).await {
            Ok(Some(principal)) => Ok(principal),
            Ok(None) => Err(McpError::AuthorizationRequired { backend: self.backend.to_string(), url: None }),
            Err(error) => Err(self.failed(OAuthNeed::Failed(error))),
        }
    }

    /// The token to send first: if one is stored, or (token exchange) the one exchanged for `subject`.
    pub(in crate::backend::mcp_client) async fn before(
        &self,
        principal: &str,
        subject: Option<&SubjectToken>,
    ) -> Result<Option<AccessToken>, McpError> {
        // Boxed here and below: a token may need a round trip to the authorization server, whose future, inline,
        // would size the future of every call to this backend.
        let token = match self.exchanges() {
            true => Box::pin(self.client.exchanged_token(&self.backend, principal, subject, None)).await.map(Some),
            false => Box::pin(self.client.stored_token(&self.backend, principal)).await,
        };
        token.map_err(|need| self.failed(need))?.map(|token| self.checked(token)).transpose()
    }

    /// The token to send again after `refused`, when `sent` was refused.
    pub(in crate::backend::mcp_client) async fn after(
        &self,
        principal: &str,
        subject: Option<&SubjectToken>,
        refused: &Refused,
        sent: Option<&AccessToken>,
    ) -> Result<AccessToken, McpError> {
        if self.exchanges() {
            let token = Box::pin(self.client.exchanged_token(&self.backend, principal, subject, sent)).await;
            return self.checked(token.map_err(|need| self.failed(need))?);
        }
        let refusal = match (&refused.challenge, refused.status) {
            (Some(challenge), StatusCode::FORBIDDEN) => Refusal::InsufficientScope { challenge, sent },
            (challenge, _) => Refusal::Unauthorized { challenge: challenge.as_ref(), sent },
        };
        let token = Box::pin(self.client.token_for(&self.backend, principal, Some(refusal))).await;
        self.checked(token.map_err(|need| self.failed(need))?)
    }

    /// Whether the backend's tokens are exchanged for the agent's (RFC 8693).
    fn exchanges(&self) -> bool {
        self.client.grant(&self.backend) == Some(GrantKind::TokenExchange)
    }

    fn checked(&self, token: AccessToken) -> Result<AccessToken, McpError> {
        if token.backend() != &*self.backend {
            return Err(McpError::NotDelivered {
                cause: NotDeliveredCause::Authorization,
                reason: format!("an OAuth token of backend `{}` was about to be sent elsewhere", token.backend())
                    .into(),
            });
        }
        Ok(token)
    }

    fn failed(&self, need: OAuthNeed) -> McpError {
        match need {
            OAuthNeed::AuthorizationRequired { backend, url } => {
                McpError::AuthorizationRequired { backend, url: Some(url) }
            }
            OAuthNeed::Failed(error) => McpError::NotDelivered {
                cause: NotDeliveredCause::Authorization,
                reason: format!("no OAuth token could be obtained for backend `{}`: {error}", self.backend).into(),
            },
        }
    }
}

impl Refused {
    /// The refusal an answer carries when it is one the OAuth client can act on: 401, or 403 with
    /// `error="insufficient_scope"`.
    pub(in crate::backend::mcp_client) fn of(response: &Response) -> Option<Refused> {
        let status = response.status();
        let challenge = challenge(response.headers());
        match status {
            StatusCode::UNAUTHORIZED => Some(Refused { status, challenge }),
            StatusCode::FORBIDDEN if challenge.as_ref().is_some_and(BearerChallenge::insufficient_scope) => {
                Some(Refused { status, challenge })
            }
            _ => None,
        }
    }
}

fn challenge(headers: &HeaderMap) -> Option<BearerChallenge> {
    BearerChallenge::parse(headers.get_all(header::WWW_AUTHENTICATE).iter().filter_map(|value| value.to_str().ok()))
}
