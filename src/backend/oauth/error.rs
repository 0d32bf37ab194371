//! [`OAuthError`]: why the gateway could not obtain a token for a backend, phrased for the agent and the operator
//! (each answer names what failed and where).
//!
//! Rules: a message names the URL or the parameter at fault but never a token, a code, a client secret or a PKCE
//! verifier; every variant is something a caller may branch on (retry later, tell the user, give up).

/// Why a token could not be obtained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// The backend has no `[backends.oauth]` here.
    #[error("backend `{0}` is not configured for OAuth")]
    UnknownBackend(String),
    /// A metadata document, the registration or the token endpoint could not be reached.
    #[error("{what} at {url} is unreachable: {reason}")]
    Unreachable { what: &'static str, url: String, reason: String },
    /// The URL's scheme or address is not allowed (`address.rs`); nothing was sent to it.
    #[error("{what} at {url} is not allowed: {reason}; nothing was sent")]
    NotAllowed { what: &'static str, url: String, reason: String },
    /// No candidate location served the document.
    #[error("no {what} found (tried {tried})")]
    NotFound { what: &'static str, tried: String },
    /// A document was fetched but is not what the spec requires.
    #[error("the {what} at {url} is unusable: {reason}")]
    BadDocument { what: &'static str, url: String, reason: String },
    /// RFC 8414 §3.3: the metadata's `issuer` is not the issuer it was fetched for.
    #[error("the authorization server metadata at {url} names issuer {found:?}, not {expected:?}")]
    IssuerMismatch { url: String, expected: String, found: String },
    /// RFC 9728 §3.3: the resource metadata describes another resource than the backend.
    #[error("the protected resource metadata names resource {found:?}, which is not the backend's URL {backend_url}")]
    ResourceMismatch { backend_url: String, found: String },
    /// MCP 2025-11-25 "Authorization Code Protection": no PKCE S256, no authorization.
    #[error("the authorization server {issuer} does not advertise PKCE S256 (code_challenge_methods_supported)")]
    NoPkce { issuer: String },
    /// Neither pre-registered, nor a metadata document the server accepts, nor dynamic registration.
    #[error("the authorization server {issuer} offers no way to register the gateway: {reason}")]
    NoRegistration { issuer: String, reason: String },
    /// The gateway cannot authenticate itself at the token endpoint as configured (RFC 7523 `private_key_jwt`).
    #[error("cannot authenticate to the authorization server {issuer}: {reason}")]
    ClientAuthentication { issuer: String, reason: String },
    /// The token endpoint answered with an OAuth error (RFC 6749 §5.2): its `error` code and
    /// `error_description`, each only when it is in the RFC's character set (no control characters).
    #[error("the token endpoint refused the request: {error}{}", describe(.description))]
    TokenRefused { error: String, description: Option<String> },
    /// The token endpoint answered something that is not a token response.
    #[error("the token endpoint {url} answered garbage: {reason}")]
    BadTokenResponse { url: String, reason: String },
    /// The callback's `state` is not one this gateway handed out, or was already used.
    #[error("unknown or already used authorization state")]
    UnknownState,
    /// RFC 9207 §2.4: the server promised `iss` in its authorization responses and this one has none; the code
    /// is not exchanged.
    #[error(
        "the authorization response carries no `iss`, but the authorization server {issuer} advertises \
         authorization_response_iss_parameter_supported; the code was not used (RFC 9207)"
    )]
    IssMissing { issuer: String },
    /// RFC 9207 §2.4: the response's `iss` is not, character for character, the issuer the request went to (a
    /// mix-up attack, or a server naming itself differently); the code is not exchanged.
    #[error(
        "the authorization response names issuer {found:?}, not {expected:?} where the request was sent; the code \
         was not used (RFC 9207)"
    )]
    IssMismatch { expected: String, found: String },
    /// A refresh token is only ever sent to the issuer that granted it (SEP-2352).
    #[error("the tokens were issued by {granted_by:?}, and the backend's authorization server is now {current:?}")]
    IssuerChanged { granted_by: String, current: String },
    /// A pre-registered client's credentials go only to the authorization server pinned for the backend.
    #[error(
        "backend `{backend}` now names the authorization server {named:?}, but its client credentials belong to \
         {pinned:?}; nothing was sent to {named:?}. If the change is intended, run `switchyard auth revoke \
         --backend {backend}` (or set `authorization_server` in its [backends.oauth])"
    )]
    IssuerPinned { backend: String, pinned: String, named: String },
    /// Before a pin exists, a pre-registered client's credentials go only to an issuer on the backend's own host.
    #[error(
        "backend `{backend}` names the authorization server {named:?}, which is not on the backend's host {host}; \
         its client credentials are not sent there. If it is the right server, set `authorization_server = \
         {named:?}` in the backend's [backends.oauth]"
    )]
    ForeignIssuer { backend: String, named: String, host: String },
    /// The backend's discovery failed recently and is not tried again before its back-off ends.
    #[error("{error} (backend `{backend}`: not tried again for {retry_in_secs} s)")]
    Backoff { backend: String, retry_in_secs: u64, error: Box<OAuthError> },
    /// The callback came after the authorization expired.
    #[error("the authorization request expired; start again from the agent")]
    ExpiredState,
    /// Too many authorizations are waiting for their callback.
    #[error("too many authorizations are pending; try again later")]
    TooManyPending,
    /// This principal already has its share of the authorizations waiting for their callback.
    #[error("{max} authorizations of this principal are already waiting; finish one, or try again when they expire")]
    TooManyPendingForPrincipal { max: usize },
    /// The start page's `flow` is not one this gateway handed out, or its authorization was completed.
    #[error("unknown or already completed authorization; start again from the agent")]
    UnknownFlow,
    /// The browser did not present the cookie (or the consent token) of the browser the authorization is bound
    /// to: it was started elsewhere. Nothing is exchanged, and the authorization stays waiting.
    #[error(
        "this browser did not start this authorization (open the link your agent gave you, in this browser, and \
         continue from its page)"
    )]
    OtherBrowser,
    /// The backend asks for scopes the authorization server did not grant, or keeps asking for more.
    #[error("backend `{backend}` still refuses with insufficient_scope ({scope}); re-authorizing cannot help")]
    ScopeNotGranted { backend: String, scope: String },
    /// A token-exchange backend needs the agent's JWT as the subject token (RFC 8693), and this agent has none.
    #[error(
        "backend `{backend}` is called as each user through OAuth token exchange (RFC 8693), which needs the JWT \
         the agent authenticated with; {how}, so nothing was sent"
    )]
    NoSubjectToken { backend: String, how: &'static str },
    /// The token store failed.
    #[error("the token store failed: {0}")]
    Store(String),
    /// A stored token could not be decrypted (wrong key, or a row moved to another principal or backend).
    #[error("a stored token of backend `{backend}` cannot be decrypted with this gateway's token key")]
    Undecryptable { backend: String },
    /// The operating system's secure random source failed.
    #[error("the operating system's secure random source failed")]
    Random,
}

fn describe(description: &Option<String>) -> String {
    description.as_ref().map(|text| format!(" ({text})")).unwrap_or_default()
}
