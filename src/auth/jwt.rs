//! JWT bearer tokens (OAuth 2.1 resource server, MCP 2025-11-25 authorization "Token Validation"; RFC 9068):
//! signature, issuer, audience, lifetime, scopes, and the principal and groups the claims name.
//!
//! Rules:
//! - The header is read first, by this module: an `alg` off the allowlist (`none`, every HMAC) is refused
//!   before any key is looked up, so a public key can never be used as an HMAC secret; a token with `crit`
//!   extensions is refused (none are understood, RFC 7515 §4.1.11).
//! - The algorithm must also be one the key may verify (its family, and its declared `alg` if any).
//! - `exp`, `iss` and `aud` are required; `exp` and `nbf` are checked with the configured leeway; `iss` must
//!   equal the configured issuer exactly; `aud` must contain an audience of the endpoint the token is presented
//!   at ([`Audiences`]): by default that endpoint's own resource identifier, so a token for `/mcp/<backend>` is
//!   no token for `/mcp`, nor the reverse (RFC 8707 §2; MCP 2025-11-25 authorization, "Token Validation").
//! - Scopes come from `scope` (space-separated, RFC 9068) or `scp` (a list or a string, common in IdPs); a
//!   validly signed token lacking a required scope is [`AuthError::InsufficientScope`] (403), not 401.
//! - The principal is the configured prefix (by default the issuer and `#`) followed by the configured claim (a
//!   string, or a number written out), so it never shares a name with an API key's principal; a name that comes
//!   out as `anonymous` is refused. Groups are the configured claim
//!   (a list of strings or one string), found by exact name first, then as a dotted path into objects. A
//!   missing groups claim leaves the principal without groups and is logged, so tools do not vanish silently.
//! - A verified token's claims are remembered ([`verified`]) for at most [`JwtSettings::verified_for`] and while
//!   the token is valid; the audience, scopes, principal and groups are still worked out from them on every
//!   request (the same token may be presented at several endpoints).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::error::{AuthError, AuthSetupError};
use super::jwks::{ALLOWED_ALGORITHMS, JwksCache, JwksSource};
use super::{Endpoint, MAX_NAME, Principal};
use verified::{Claims, Moment, VerifiedCache};

mod verified;

/// How long a verified token is taken on its digest before its signature is checked again: the longest a key
/// removed from the JWKS keeps working after the key set is reloaded.
pub const JWT_VERIFIED_FOR: Duration = Duration::from_secs(300);
/// How many verified tokens are remembered at most.
pub const JWT_VERIFIED_CAPACITY: usize = 10_000;

/// How `[auth.jwt]` is applied, lowered from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    pub issuer: String,
    pub audiences: Audiences,
    pub jwks: JwksSource,
    pub principal_claim: String,
    /// Put before the principal claim to make the principal's name (`<issuer>#` unless configured).
    pub principal_prefix: String,
    pub groups_claim: Option<String>,
    /// Advertised in the Protected Resource Metadata.
    pub scopes_supported: Vec<String>,
    /// Every token must carry all of these.
    pub required_scopes: Vec<String>,
    pub authorization_servers: Vec<String>,
    pub leeway: Duration,
    /// How often an unknown `kid` may reload the key set.
    pub refetch_interval: Duration,
    /// How long a verified token is accepted without checking its signature again ([`JWT_VERIFIED_FOR`]).
    pub verified_for: Duration,
    /// How many verified tokens are remembered at most ([`JWT_VERIFIED_CAPACITY`]).
    pub verified_capacity: usize,
}

/// Which `aud` a token must carry at each endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audiences {
    /// Each endpoint's own resource identifier, `public_url` (canonical, no trailing slash) + the endpoint's
    /// path, as its Protected Resource Metadata names it.
    PerEndpoint { public_url: String },
    /// Configured audiences, accepted at every endpoint: an issuer that mints one audience for the gateway
    /// whatever `resource` the client asked for leaves nothing to tell the endpoints apart by.
    Everywhere(Vec<String>),
}

impl Audiences {
    fn accepts(&self, audience: &str, endpoint: Endpoint<'_>) -> bool {
        match self {
            Self::PerEndpoint { public_url } => {
                audience.strip_prefix(public_url.as_str()).is_some_and(|path| path == endpoint.path())
            }
            Self::Everywhere(audiences) => audiences.iter().any(|accepted| accepted == audience),
        }
    }
}

/// Validates tokens of one issuer.
pub(super) struct JwtValidator {
    settings: JwtSettings,
    keys: JwksCache,
    verified: VerifiedCache,
}

/// The part of the JOSE header this module reads.
#[derive(serde::Deserialize)]
struct JoseHeader {
    alg: String,
    kid: Option<String>,
    crit: Option<Value>,
}

impl JwtValidator {
    pub(super) async fn new(settings: JwtSettings) -> Result<Self, AuthSetupError> {
        let keys = JwksCache::new(settings.jwks.clone(), settings.refetch_interval).await?;
        let verified = VerifiedCache::new(settings.verified_for, settings.verified_capacity, settings.leeway);
        Ok(Self { settings, keys, verified })
    }

    pub(super) fn readiness(&self) -> Result<(), String> {
        self.keys.readiness()
    }

    /// The principal of a token presented at `endpoint`.
    pub(super) async fn principal(&self, endpoint: Endpoint<'_>, token: &str) -> Result<Principal, AuthError> {
        let claims = self.verified_claims(token).await?;
        self.check_audience(&claims, endpoint)?;
        check_scopes(&claims, &self.settings.required_scopes)?;
        Ok(Principal { name: self.principal_name(&claims)?, groups: self.groups(&claims) })
    }

    /// The token's claims: remembered if it was verified recently, else verified in full and remembered.
    async fn verified_claims(&self, token: &str) -> Result<Claims, AuthError> {
        let digest = verified::digest(token);
        if let Some(claims) = self.verified.get(&digest, Moment::now()) {
            return Ok(claims);
        }
        let claims = Claims::new(self.verify(token).await?);
        self.verified.put(digest, claims.clone(), Moment::now());
        Ok(claims)
    }

    async fn verify(&self, token: &str) -> Result<Map<String, Value>, AuthError> {
        let (algorithm, kid) = read_header(token)?;
        let key = self.keys.key(kid.as_deref()).await?;
        if !key.accepts(algorithm) {
            return Err(AuthError::DisallowedAlg(format!("{algorithm:?}")));
        }
        jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &self.validation(algorithm))
            .map(|data| data.claims)
            .map_err(|error| classify(error.into_kind()))
    }

    /// Everything but the audience, which depends on the endpoint ([`Self::check_audience`]); `aud` must be
    /// present.
    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.settings.leeway.as_secs();
        validation.validate_nbf = true;
        validation.validate_aud = false;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation
    }

    /// `aud` (a string or a list of strings, RFC 7519 §4.1.3) names an audience of `endpoint`.
    fn check_audience(&self, claims: &Map<String, Value>, endpoint: Endpoint<'_>) -> Result<(), AuthError> {
        let accepted =
            |audience: &Value| audience.as_str().is_some_and(|a| self.settings.audiences.accepts(a, endpoint));
        let found = match claims.get("aud") {
            Some(Value::Array(audiences)) => audiences.iter().any(accepted),
            Some(audience) => accepted(audience),
            None => false,
        };
        found.then_some(()).ok_or(AuthError::WrongAudience)
    }

    fn principal_name(&self, claims: &Map<String, Value>) -> Result<String, AuthError> {
        let claim = &self.settings.principal_claim;
        let name = match find_claim(claims, claim) {
            Some(Value::String(name)) => name.clone(),
            Some(Value::Number(number)) => number.to_string(),
            Some(_) => return Err(AuthError::InvalidToken(format!("the `{claim}` claim is not a string"))),
            None => return Err(AuthError::InvalidToken(format!("no `{claim}` claim names the principal"))),
        };
        let valid = !name.is_empty() && name.chars().count() <= MAX_NAME && !name.chars().any(char::is_control);
        if !valid {
            return Err(AuthError::InvalidToken(format!("the `{claim}` claim is not a usable name")));
        }
        let principal = format!("{}{name}", self.settings.principal_prefix);
        if principal == Principal::ANONYMOUS {
            return Err(AuthError::InvalidToken(format!(
                "the `{claim}` claim makes the principal `anonymous`, the name of agents without credentials"
            )));
        }
        Ok(principal)
    }

    fn groups(&self, claims: &Map<String, Value>) -> Vec<String> {
        let Some(claim) = &self.settings.groups_claim else {
            return Vec::new();
        };
        let groups = match find_claim(claims, claim) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            Some(Value::String(group)) => vec![group.clone()],
            _ => {
                tracing::warn!(claim, "token has no usable groups claim: the principal gets no groups");
                Vec::new()
            }
        };
        groups.into_iter().filter(|group| !group.is_empty() && group.chars().count() <= MAX_NAME).collect()
    }
}

/// The allowlisted algorithm and `kid` of a token's header.
fn read_header(token: &str) -> Result<(Algorithm, Option<String>), AuthError> {
    let encoded = token.split('.').next().unwrap_or_default();
    let bytes = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_| AuthError::InvalidToken("the header is not base64url".to_owned()))?;
    let header: JoseHeader = serde_json::from_slice(&bytes)
        .map_err(|_| AuthError::InvalidToken("the header is not a JSON object with `alg`".to_owned()))?;
    if header.crit.is_some() {
        return Err(AuthError::InvalidToken("the header has critical extensions (`crit`)".to_owned()));
    }
    let algorithm = header
        .alg
        .parse::<Algorithm>()
        .ok()
        .filter(|algorithm| ALLOWED_ALGORITHMS.contains(algorithm))
        .ok_or_else(|| AuthError::DisallowedAlg(printable_alg(&header.alg)))?;
    Ok((algorithm, header.kid))
}

/// The `alg` as it may appear in a message: short and alphanumeric, or not at all.
fn printable_alg(alg: &str) -> String {
    let printable = alg.len() <= 16 && alg.bytes().all(|b| b.is_ascii_alphanumeric());
    if printable { alg.to_owned() } else { "(unprintable)".to_owned() }
}

fn classify(kind: ErrorKind) -> AuthError {
    match kind {
        ErrorKind::ExpiredSignature => AuthError::Expired,
        ErrorKind::ImmatureSignature => AuthError::NotYetValid,
        ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => AuthError::WrongIssuer,
        ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => AuthError::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) => AuthError::InvalidToken(format!("no `{claim}` claim")),
        ErrorKind::InvalidClaimFormat(claim) => AuthError::InvalidToken(format!("the `{claim}` claim is malformed")),
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey => AuthError::BadSignature,
        ErrorKind::InvalidAlgorithm => AuthError::DisallowedAlg("(not this key's)".to_owned()),
        _ => AuthError::InvalidToken("not three base64url parts of JSON".to_owned()),
    }
}

fn check_scopes(claims: &Map<String, Value>, required: &[String]) -> Result<(), AuthError> {
    if required.is_empty() {
        return Ok(());
    }
    let granted: Vec<&str> = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(scope)), _) | (None, Some(Value::String(scope))) => scope.split_whitespace().collect(),
        (None, Some(Value::Array(items))) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if required.iter().all(|scope| granted.contains(&scope.as_str())) {
        Ok(())
    } else {
        Err(AuthError::InsufficientScope(required.to_vec()))
    }
}

/// A claim by its exact name, else by a dotted path into nested objects (`realm_access.roles`).
fn find_claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(name) {
        return Some(value);
    }
    let mut parts = name.split('.');
    let first = claims.get(parts.next()?)?;
    parts.try_fold(first, |value, part| value.as_object()?.get(part))
}

#[cfg(test)]
mod tests;
