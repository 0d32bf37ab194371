//! The demo server's sessions (MCP 2025-11-25 transports §Session Management, reference §A1.6): issuing ids,
//! remembering live ones in a bounded set, ending them, and the one piece of per-session state, the `counter`
//! tool's count.
//!
//! Rules:
//! - An id is 32 lowercase hex digits (128 bits), so it is visible ASCII (0x21–0x7E) as §A1.6 requires. It mixes a
//!   sequence number, the clock and std's randomly keyed `RandomState`: unique and unguessable enough for a demo,
//!   not cryptographically secure (the spec's SHOULD), which is acceptable because the demo guards nothing.
//! - Only the canonical spelling of an id names a session; anything else is simply unknown (the transport answers
//!   404, §A1.6 item 3).
//! - At most `capacity` sessions live at once; creating one more drops the oldest, so a client that never sends
//!   `DELETE` cannot grow the set without bound.
//! - The lock is held only for a map operation, never across an await.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// How many sessions the demo keeps before dropping the oldest.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// The number of hex digits in a session id.
const ID_DIGITS: usize = 32;

/// A live session's key: the id's 128 bits, so a lookup parses the header instead of allocating a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId(u128);

impl SessionId {
    /// Reads an id as the `Mcp-Session-Id` header spells it; `None` for anything this server never issued.
    pub fn parse(text: &str) -> Option<SessionId> {
        let canonical = text.len() == ID_DIGITS && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        // The digit check comes first because `from_str_radix` also accepts a sign and upper case, which would
        // let two spellings name one session.
        canonical.then(|| u128::from_str_radix(text, 16).ok().map(SessionId)).flatten()
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:0width$x}", self.0, width = ID_DIGITS)
    }
}

/// What the server remembers about one session.
struct Session {
    /// Creation order, the key of `Inner::by_age`.
    seq: u64,
    /// The `counter` tool's count.
    count: u64,
}

struct Inner {
    live: HashMap<SessionId, Session>,
    /// Live sessions by creation order, so the oldest is found without a scan.
    by_age: BTreeMap<u64, SessionId>,
    next_seq: u64,
}

/// The bounded set of live sessions.
pub struct Sessions {
    inner: Mutex<Inner>,
    capacity: usize,
    /// Keyed randomly once per process by std, which is what makes ids hard to guess.
    hasher: RandomState,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_capacity(DEFAULT_CAPACITY)
    }
}

impl Sessions {
    /// A set that keeps at most `capacity` sessions (at least one).
    pub fn with_capacity(capacity: usize) -> Sessions {
        let inner = Inner { live: HashMap::new(), by_age: BTreeMap::new(), next_seq: 0 };
        Sessions { inner: Mutex::new(inner), capacity: capacity.max(1), hasher: RandomState::new() }
    }

    /// Starts a session, dropping the oldest if the set is full, and returns its id.
    pub fn create(&self) -> SessionId {
        let mut inner = self.inner.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let id = self.fresh_id(seq);
        while inner.live.len() >= self.capacity {
            let Some((_, oldest)) = inner.by_age.pop_first() else { break };
            inner.live.remove(&oldest);
        }
        inner.live.insert(id, Session { seq, count: 0 });
        inner.by_age.insert(seq, id);
        id
    }

    pub fn contains(&self, id: SessionId) -> bool {
        self.inner.lock().live.contains_key(&id)
    }

    /// Ends a session; false if it was not live.
    pub fn end(&self, id: SessionId) -> bool {
        let mut inner = self.inner.lock();
        match inner.live.remove(&id) {
            Some(session) => {
                inner.by_age.remove(&session.seq);
                true
            }
            None => false,
        }
    }

    /// Adds one to the session's count and returns the new value; `None` if the session has ended meanwhile.
    pub fn increment(&self, id: SessionId) -> Option<u64> {
        let mut inner = self.inner.lock();
        let session = inner.live.get_mut(&id)?;
        session.count += 1;
        Some(session.count)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().live.len()
    }

    /// 128 bits from two keyed hashes of (sequence, clock). The sequence alone makes ids unique within the
    /// process (the hash of distinct inputs could collide, but with 128 bits that is not a practical concern).
    fn fresh_id(&self, seq: u64) -> SessionId {
        // A clock before 1970 only weakens the mix, never uniqueness, so it is read as zero.
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let half = |salt: u8| u128::from(self.hasher.hash_one((salt, seq, nanos)));
        SessionId(half(0) << 64 | half(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_only_canonical_spellings_parse() {
        let sessions = Sessions::default();
        let id = sessions.create();
        let text = id.to_string();
        assert_eq!(text.len(), ID_DIGITS);
        assert_eq!(SessionId::parse(&text), Some(id));
        assert!(SessionId::parse(&"a".repeat(ID_DIGITS)).is_some());
        assert_eq!(SessionId::parse(&"A".repeat(ID_DIGITS)), None);
        assert_eq!(SessionId::parse(&format!("+{}", &text[1..])), None);
        assert_eq!(SessionId::parse("abc"), None);
    }

    #[test]
    fn ids_are_unique() {
        let sessions = Sessions::default();
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| sessions.create()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn the_oldest_session_is_dropped_when_full() {
        let sessions = Sessions::with_capacity(2);
        let first = sessions.create();
        let second = sessions.create();
        let third = sessions.create();
        assert!(!sessions.contains(first));
        assert!(sessions.contains(second) && sessions.contains(third));
        assert_eq!(sessions.len(), 2);
    }

    #[test]
    fn ended_sessions_are_gone_and_free_their_slot() {
        let sessions = Sessions::with_capacity(2);
        let first = sessions.create();
        let second = sessions.create();
        assert!(sessions.end(second));
        assert!(!sessions.end(second));
        let third = sessions.create();
        assert!(sessions.contains(first) && sessions.contains(third));
        assert_eq!(sessions.increment(second), None);
    }

    #[test]
    fn counts_are_per_session() {
        let sessions = Sessions::default();
        let (a, b) = (sessions.create(), sessions.create());
        assert_eq!(sessions.increment(a), Some(1));
        assert_eq!(sessions.increment(a), Some(2));
        assert_eq!(sessions.increment(b), Some(1));
    }
}
