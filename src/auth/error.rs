//! [`AuthError`]: why a request's credentials were refused, carrying what the front needs to answer it
//! (the HTTP status and the RFC 6750 §3.1 `error` code); and [`AuthSetupError`], why authentication could not
//! start.
//!
//! Rules: messages are the `error_description` an agent sees, so they say what is wrong with the credential in
//! a sentence it can act on and never echo the credential (nor anything else the agent sent, beyond a short
//! algorithm name); a missing credential carries no error code (RFC 6750 §3.1); a malformed request is 400
//! `invalid_request`, a token lacking scopes 403 `insufficient_scope`, every other refusal 401 `invalid_token`
//! (MCP 2025-11-25 authorization, "Error Handling").

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("this endpoint requires credentials: send `Authorization: Bearer <token>`")]
    Missing,
    #[error("the Authorization header is malformed: {0}")]
    Malformed(&'static str),
    #[error("the bearer token is larger than 16 KiB")]
    TooLarge,
    #[error("the API key is not known to this gateway")]
    UnknownKey,
    #[error("the API key has expired; ask the gateway's operator for a new one")]
    ExpiredKey,
    #[error("the token is not a valid JWT: {0}")]
    InvalidToken(String),
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (`nbf` is in the future)")]
    NotYetValid,
    #[error("the token was issued by an issuer this gateway does not trust")]
    WrongIssuer,
    #[error("the token was issued for another audience, not for this endpoint of the gateway")]
    WrongAudience,
    #[error("the token was signed with a key (`kid`) the issuer does not publish")]
    UnknownKid,
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token's signing algorithm `{0}` is not accepted (only RS*, PS*, ES256, ES384 and EdDSA are)")]
    DisallowedAlg(String),
    #[error("the token lacks a required scope (required: {})", .0.join(" "))]
    InsufficientScope(Vec<String>),
    #[error("the issuer's signing keys cannot be loaded right now, so no token can be checked")]
    JwksUnavailable,
}

impl AuthError {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        match self {
            Self::Malformed(_) => 400,
            Self::InsufficientScope(_) => 403,
            _ => 401,
        }
    }

    /// Why, in one word of a fixed list (the `reason` label of `switchyard_auth_failures_total`); never
    /// anything of the credential.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed(_) => "malformed",
            Self::TooLarge => "too_large",
            Self::UnknownKey => "unknown_key",
            Self::ExpiredKey => "expired_key",
            Self::InvalidToken(_) => "invalid_token",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::WrongIssuer => "wrong_issuer",
            Self::WrongAudience => "wrong_audience",
            Self::UnknownKid => "unknown_kid",
            Self::BadSignature => "bad_signature",
            Self::DisallowedAlg(_) => "disallowed_alg",
            Self::InsufficientScope(_) => "insufficient_scope",
            Self::JwksUnavailable => "jwks_unavailable",
        }
    }

    /// The `error` parameter of the `WWW-Authenticate` challenge, if any.
    pub fn error_code(&self) -> Option<&'static str> {
        match self {
            Self::Missing => None,
            Self::Malformed(_) => Some("invalid_request"),
            Self::InsufficientScope(_) => Some("insufficient_scope"),
            _ => Some("invalid_token"),
        }
    }
}

/// Why authentication could not be set up (the gateway does not start).
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("JWKS {location}: {problem}")]
    Jwks { location: String, problem: String },
    #[error("cannot build the HTTP client for the JWKS: {0}")]
    HttpClient(reqwest::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_maps_to_its_status_and_code() {
        assert_eq!((AuthError::Missing.status(), AuthError::Missing.error_code()), (401, None));
        let malformed = AuthError::Malformed("x");
        assert_eq!((malformed.status(), malformed.error_code()), (400, Some("invalid_request")));
        let scope = AuthError::InsufficientScope(vec!["a".into(), "b".into()]);
        assert_eq!((scope.status(), scope.error_code()), (403, Some("insufficient_scope")));
        assert!(scope.to_string().ends_with("(required: a b)"));
        for error in [AuthError::Expired, AuthError::UnknownKey, AuthError::JwksUnavailable, AuthError::TooLarge] {
            assert_eq!((error.status(), error.error_code()), (401, Some("invalid_token")), "{error}");
        }
        assert_eq!(AuthError::InvalidToken("secret-looking text".into()).reason(), "invalid_token");
        assert_eq!(scope.reason(), "insufficient_scope");
    }
}
