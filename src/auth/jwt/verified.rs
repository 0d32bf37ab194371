//! The claims of tokens whose signature was already verified, so a token an agent presents on every request costs one
//! signature check per bound instead of one per request.
//!
//! Rules:
//! - Keyed by the SHA-256 of the whole token, never the token itself: a token with the same claims and another
//!   signature has another digest and is verified in full.
//! - Only claims that passed full validation (signature, issuer, audience, lifetime) are stored.
//! - An entry is used only while the token's own lifetime (`nbf`/`exp` with the leeway) holds at that moment, and
//!   never longer than the bound after it was verified, so a key removed from the JWKS stops working within the
//!   JWKS reload plus that bound. A miss verifies the token in full and gives the precise refusal.
//! - At most `capacity` entries: the oldest verified one goes first (with one bound for all, it is also the first to
//!   time out). Whatever depends on configuration or policy (scopes, principal, groups) is worked out from the
//!   claims on every use, not stored.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// The SHA-256 of a token.
pub(super) type TokenDigest = [u8; 32];

/// Verified claims, shared by every request presenting the token.
pub(super) type Claims = Arc<Map<String, Value>>;

pub(super) fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// A moment on both clocks: the monotonic one for the bound, the wall clock (Unix seconds) for `nbf`/`exp`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Moment {
    pub(super) instant: Instant,
    pub(super) unix: u64,
}

impl Moment {
    pub(super) fn now() -> Self {
        Self { instant: Instant::now(), unix: jsonwebtoken::get_current_timestamp() }
    }
}

struct Entry {
    claims: Claims,
    verified_at: Instant,
    /// Unix seconds, leeway included, between which the token itself is valid.
    valid_from: u64,
    valid_until: u64,
}

#[derive(Default)]
struct Entries {
    by_digest: HashMap<TokenDigest, Entry>,
    /// Digests in the order they were verified; an item whose entry was replaced or dropped since is stale.
    order: VecDeque<(TokenDigest, Instant)>,
}

pub(super) struct VerifiedCache {
    bound: Duration,
    capacity: usize,
    leeway: u64,
    entries: Mutex<Entries>,
}

impl VerifiedCache {
    pub(super) fn new(bound: Duration, capacity: usize, leeway: Duration) -> Self {
        Self { bound, capacity, leeway: leeway.as_secs(), entries: Mutex::default() }
    }

    /// The claims of the token with `digest` if it was verified less than the bound ago and is valid at `at`.
    pub(super) fn get(&self, digest: &TokenDigest, at: Moment) -> Option<Claims> {
        let mut entries = self.entries.lock();
        let entry = entries.by_digest.get(digest)?;
        let usable = at.instant.saturating_duration_since(entry.verified_at) < self.bound
            && (entry.valid_from..=entry.valid_until).contains(&at.unix);
        if usable {
            return Some(entry.claims.clone());
        }
        entries.by_digest.remove(digest);
        None
    }

    /// Remembers the claims of a token verified at `at`; a token without a numeric `exp` is not remembered.
    pub(super) fn put(&self, digest: TokenDigest, claims: Claims, at: Moment) {
        let Some(exp) = claims.get("exp").and_then(Value::as_u64) else {
            return;
        };
        if self.capacity == 0 || self.bound.is_zero() {
            return;
        }
        let valid_from = claims.get("nbf").and_then(Value::as_u64).map_or(0, |nbf| nbf.saturating_sub(self.leeway));
        let entry = Entry { claims, verified_at: at.instant, valid_from, valid_until: exp.saturating_add(self.leeway) };
        let mut entries = self.entries.lock();
        while entries.by_digest.len() >= self.capacity || entries.order.len() >= self.capacity {
            entries.evict_oldest();
        }
        entries.order.push_back((digest, at.instant));
        entries.by_digest.insert(digest, entry);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.lock().by_digest.len()
    }
}

impl Entries {
    fn evict_oldest(&mut self) {
        let Some((digest, verified_at)) = self.order.pop_front() else {
            return;
        };
        if self.by_digest.get(&digest).is_some_and(|entry| entry.verified_at == verified_at) {
            self.by_digest.remove(&digest);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const T0: u64 = 1_800_000_000;

    fn claims(exp: u64, nbf: Option<u64>) -> Claims {
        let mut claims = json!({"sub": "alice", "exp": exp});
        if let Some(nbf) = nbf {
            claims["nbf"] = json!(nbf);
        }
        Arc::new(claims.as_object().expect("object").clone())
    }

    fn later(moment: Moment, seconds: u64) -> Moment {
        Moment { instant: moment.instant + Duration::from_secs(seconds), unix: moment.unix + seconds }
    }

    #[test]
    fn an_entry_lives_until_the_token_expires_or_the_bound_passes() {
        let start = Moment { instant: Instant::now(), unix: T0 };
        let cache = VerifiedCache::new(Duration::from_secs(300), 10, Duration::from_secs(5));
        cache.put(digest("short"), claims(T0 + 60, None), start);
        cache.put(digest("long"), claims(T0 + 3600, Some(T0 - 10)), start);
        assert!(cache.get(&digest("short"), later(start, 65)).is_some(), "within exp + leeway");
        assert!(cache.get(&digest("short"), later(start, 66)).is_none(), "past exp + leeway");
        assert!(cache.get(&digest("short"), later(start, 10)).is_none(), "an expired entry is dropped, not kept");
        assert!(cache.get(&digest("long"), later(start, 299)).is_some());
        assert!(cache.get(&digest("long"), later(start, 300)).is_none(), "never past the bound");
        assert!(cache.get(&digest("other"), start).is_none());
    }

    #[test]
    fn nbf_is_checked_at_every_use() {
        let start = Moment { instant: Instant::now(), unix: T0 };
        let cache = VerifiedCache::new(Duration::from_secs(300), 10, Duration::from_secs(5));
        cache.put(digest("t"), claims(T0 + 60, Some(T0 + 20)), start);
        let clock_stepped_back = Moment { instant: start.instant, unix: T0 + 14 };
        assert!(cache.get(&digest("t"), clock_stepped_back).is_none(), "before nbf - leeway");
    }

    #[test]
    fn the_size_bound_evicts_the_oldest_first() {
        let start = Moment { instant: Instant::now(), unix: T0 };
        let cache = VerifiedCache::new(Duration::from_secs(300), 3, Duration::ZERO);
        for (second, token) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            cache.put(digest(token), claims(T0 + 600, None), later(start, second as u64));
            assert!(cache.len() <= 3);
        }
        let now = later(start, 10);
        assert!(cache.get(&digest("a"), now).is_none() && cache.get(&digest("b"), now).is_none());
        assert!(["c", "d", "e"].iter().all(|token| cache.get(&digest(token), now).is_some()));
        for round in 0..20 {
            cache.put(digest("again"), claims(T0 + 600, None), later(start, 20 + round));
        }
        assert!(
            cache.len() <= 3 && cache.entries.lock().order.len() <= 3,
            "re-verifying one token does not grow the queue"
        );
    }

    #[test]
    fn a_token_without_numeric_exp_or_a_zero_bound_is_not_remembered() {
        let start = Moment { instant: Instant::now(), unix: T0 };
        let cache = VerifiedCache::new(Duration::from_secs(300), 10, Duration::ZERO);
        let text_exp = Arc::new(json!({"exp": "soon"}).as_object().expect("object").clone());
        cache.put(digest("t"), text_exp, start);
        assert_eq!(cache.len(), 0);
        let disabled = VerifiedCache::new(Duration::ZERO, 10, Duration::ZERO);
        disabled.put(digest("t"), claims(T0 + 60, None), start);
        assert!(disabled.get(&digest("t"), start).is_none());
    }
}
