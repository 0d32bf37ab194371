//! The issuer's signing keys (a JWKS, RFC 7517), loaded from a file or a URL and cached by `kid`.
//!
//! Rules:
//! - Fail closed: with no key set loaded, every token is refused ([`AuthError::JwksUnavailable`]); a key set
//!   that is not a JWKS or has no usable signing key counts as not loaded.
//! - A token whose `kid` is unknown, or a key set older than [`JWKS_MAX_AGE`] (so removed keys stop working),
//!   triggers a reload, at most once per refetch interval (30 s by default) however many tokens ask: an
//!   attacker sending random `kid`s cannot make the gateway hammer the issuer. A failed reload keeps the keys
//!   already loaded (they still verify exactly what they verified before) and is reported by
//!   [`JwksCache::readiness`].
//! - Only signing keys are kept: `use: enc` keys, symmetric (`oct`) keys and keys whose `alg` is not on the
//!   allowlist are skipped, so an HMAC secret can never be derived from a published key.
//! - Over HTTP: no redirects followed, a 10 s deadline, at most 1 MiB read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use parking_lot::{Mutex, RwLock};
use reqwest::Url;

use super::error::{AuthError, AuthSetupError};

/// How often an unknown `kid` may trigger a reload, by default.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// How long a loaded key set is used before it is reloaded.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
/// The largest JWKS read; real ones are a few KiB.
pub const MAX_JWKS_BYTES: usize = 1 << 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The asymmetric algorithms accepted for tokens; never `none`, never HMAC.
pub const ALLOWED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Where the key set is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    Url(Url),
    File(PathBuf),
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Url(url) => write!(f, "{url}"),
            Self::File(path) => write!(f, "file {}", path.display()),
        }
    }
}

/// One usable signing key and the algorithms it may verify.
pub(super) struct SigningKey {
    pub(super) key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

impl SigningKey {
    pub(super) fn accepts(&self, algorithm: Algorithm) -> bool {
        self.algorithms.contains(&algorithm)
    }
}

/// A loaded key set.
struct KeyRing {
    keys: Vec<(Option<String>, Arc<SigningKey>)>,
    loaded_at: Instant,
}

impl KeyRing {
    /// The key named `kid`; a token without `kid` may use the only key of a one-key set.
    fn find(&self, kid: Option<&str>) -> Option<Arc<SigningKey>> {
        match kid {
            Some(kid) => self.keys.iter().find(|(id, _)| id.as_deref() == Some(kid)).map(|(_, key)| key.clone()),
            None if self.keys.len() == 1 => Some(self.keys[0].1.clone()),
            None => None,
        }
    }
}

/// The cache.
pub(super) struct JwksCache {
    source: JwksSource,
    client: reqwest::Client,
    refetch_interval: Duration,
    ring: RwLock<Option<Arc<KeyRing>>>,
    /// Held while loading, so concurrent misses wait for one load; remembers when the last one started.
    last_attempt: tokio::sync::Mutex<Option<Instant>>,
    last_error: Mutex<Option<String>>,
}

impl JwksCache {
    /// Loads the key set once. A file that cannot be read or is not a JWKS stops startup (a configuration
    /// mistake); an issuer that cannot be reached does not (it may come back), the gateway then refuses tokens
    /// until it does.
    pub(super) async fn new(source: JwksSource, refetch_interval: Duration) -> Result<Self, AuthSetupError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(AuthSetupError::HttpClient)?;
        let cache = Self {
            source,
            client,
            refetch_interval,
            ring: RwLock::new(None),
            last_attempt: tokio::sync::Mutex::new(None),
            last_error: Mutex::new(None),
        };
        cache.reload(true).await;
        if let (JwksSource::File(_), Some(problem)) = (&cache.source, cache.last_error()) {
            return Err(AuthSetupError::Jwks { location: cache.source.to_string(), problem });
        }
        Ok(cache)
    }

    /// The key to verify a token whose header names `kid`.
    pub(super) async fn key(&self, kid: Option<&str>) -> Result<Arc<SigningKey>, AuthError> {
        let fresh = self.current().filter(|ring| ring.loaded_at.elapsed() < JWKS_MAX_AGE);
        if let Some(key) = fresh.and_then(|ring| ring.find(kid)) {
            return Ok(key);
        }
        self.reload(false).await;
        match self.current() {
            None => Err(AuthError::JwksUnavailable),
            Some(ring) => ring.find(kid).ok_or(AuthError::UnknownKid),
        }
    }

    /// `Err` with the reason while no key set is loaded (for `/readyz`).
    pub(super) fn readiness(&self) -> Result<(), String> {
        match (self.current(), self.last_error()) {
            (Some(_), _) => Ok(()),
            (None, problem) => Err(format!(
                "JWKS {}: {}; every token is refused until it loads",
                self.source,
                problem.unwrap_or_else(|| "not loaded yet".to_owned())
            )),
        }
    }

    fn current(&self) -> Option<Arc<KeyRing>> {
        self.ring.read().clone()
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// Loads the key set unless another load started less than the refetch interval ago (`force` ignores that).
    async fn reload(&self, force: bool) {
        let mut last_attempt = self.last_attempt.lock().await;
        if !force && last_attempt.is_some_and(|at| at.elapsed() < self.refetch_interval) {
            return;
        }
        *last_attempt = Some(Instant::now());
        let outcome = match self.read().await {
            Ok(bytes) => parse_key_set(&bytes),
            Err(problem) => Err(problem),
        };
        let mut last_error = self.last_error.lock();
        match outcome {
            Ok(ring) => {
                *self.ring.write() = Some(Arc::new(ring));
                *last_error = None;
            }
            Err(problem) => {
                tracing::warn!(jwks = %self.source, %problem, "cannot load the issuer's signing keys");
                *last_error = Some(problem);
            }
        }
    }

    async fn read(&self) -> Result<Vec<u8>, String> {
        match &self.source {
            JwksSource::File(path) => read_file(path).await,
            JwksSource::Url(url) => self.fetch(url.clone()).await,
        }
    }

    async fn fetch(&self, url: Url) -> Result<Vec<u8>, String> {
        let mut response = self.client.get(url).send().await.map_err(|error| format!("cannot fetch: {error}"))?;
        if !response.status().is_success() {
            return Err(format!("answered HTTP {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| format!("cannot read the answer: {error}"))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err("answered more than 1 MiB".to_owned());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

async fn read_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let bytes = tokio::fs::read(path).await.map_err(|error| format!("cannot read: {error}"))?;
    if bytes.len() > MAX_JWKS_BYTES {
        return Err("larger than 1 MiB".to_owned());
    }
    Ok(bytes)
}

#[derive(serde::Deserialize)]
struct RawKeySet {
    keys: Vec<serde_json::Value>,
}

/// The usable signing keys of a JWKS document.
fn parse_key_set(bytes: &[u8]) -> Result<KeyRing, String> {
    let raw: RawKeySet =
        serde_json::from_slice(bytes).map_err(|error| format!("not a JWKS (a JSON object with `keys`): {error}"))?;
    let keys: Vec<_> = raw.keys.into_iter().filter_map(signing_key).collect();
    if keys.is_empty() {
        return Err("the JWKS has no usable signing key (RSA, EC P-256/P-384 or Ed25519)".to_owned());
    }
    Ok(KeyRing { keys, loaded_at: Instant::now() })
}

fn signing_key(value: serde_json::Value) -> Option<(Option<String>, Arc<SigningKey>)> {
    let jwk: Jwk = serde_json::from_value(value).ok()?;
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let family_algorithms: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &ALLOWED_ALGORITHMS[..6],
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => &[Algorithm::EdDSA],
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => family_algorithms.to_vec(),
        Some(declared) => {
            let declared: Algorithm = declared.to_string().parse().ok()?;
            family_algorithms.contains(&declared).then(|| vec![declared])?
        }
    };
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some((jwk.common.key_id.clone(), Arc::new(SigningKey { key, algorithms })))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Test key 1 as an RSA signing key named `kid`.
    fn rsa(kid: &str) -> serde_json::Value {
        let mut key = crate::auth::test_tokens::jwks(&[(1, kid)])["keys"][0].clone();
        key["use"] = json!("sig");
        key
    }

    fn parsed(set: serde_json::Value) -> Result<KeyRing, String> {
        parse_key_set(set.to_string().as_bytes())
    }

    #[test]
    fn signing_keys_are_found_by_kid() {
        let ring = parsed(json!({"keys": [rsa("a"), rsa("b")]})).expect("valid");
        assert!(ring.find(Some("b")).is_some_and(|key| key.accepts(Algorithm::PS256) && key.accepts(Algorithm::RS256)));
        assert!(ring.find(Some("c")).is_none());
        assert!(ring.find(None).is_none(), "two keys: a token must say which");
        let single = parsed(json!({"keys": [rsa("only")]})).expect("valid");
        assert!(single.find(None).is_some());
    }

    #[test]
    fn a_declared_alg_narrows_what_a_key_verifies() {
        let mut key = rsa("a");
        key["alg"] = json!("RS384");
        let ring = parsed(json!({"keys": [key]})).expect("valid");
        let key = ring.find(Some("a")).expect("key");
        assert!(key.accepts(Algorithm::RS384) && !key.accepts(Algorithm::RS256));
    }

    #[test]
    fn symmetric_encryption_and_mismatched_keys_are_skipped() {
        let hmac = json!({"kty": "oct", "kid": "h", "k": "c2VjcmV0", "alg": "HS256"});
        let mut encryption = rsa("e");
        encryption["use"] = json!("enc");
        let mut mislabelled = rsa("m");
        mislabelled["alg"] = json!("HS256");
        let ring = parsed(json!({"keys": [hmac, encryption, mislabelled, {"kty": "weird"}, rsa("ok")]})).expect("one");
        assert_eq!(ring.keys.len(), 1);
        assert!(ring.find(Some("ok")).is_some());
        assert!(ring.find(Some("h")).is_none());
    }

    #[test]
    fn garbage_is_not_a_key_set() {
        for garbage in ["", "<html>", "{}", "{\"keys\": 5}", "[1,2]"] {
            assert!(parse_key_set(garbage.as_bytes()).is_err_and(|e| e.contains("not a JWKS")), "{garbage:?}");
        }
        let empty = parsed(json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}));
        assert!(empty.is_err_and(|e| e.contains("no usable signing key")));
    }
}
