//! The bounded table of backend sessions, one slot per (agent session, backend) pair (design §2).
//!
//! Rules:
//! - The table never holds more than `capacity` slots, and a slot in use (a caller holds its [`SlotGuard`]) is
//!   never evicted: when nothing is evictable the new caller is refused instead of growing the table.
//! - Every slot counts against its owner (the slot key's fairness key: the principal, or `anonymous@<address>`),
//!   so one owner cannot push every other owner's sessions out (issue 8):
//!   - an owner holding `per_owner` slots recycles its own idle slot used longest ago, or is refused when all of
//!     its slots are in use — it never takes another owner's slot;
//!   - when the table is full, the owner holding the most slots (so the one furthest over its share) loses its
//!     idle slot used longest ago; an owner with fewer slots keeps its own while a larger holder has idle ones.
//! - Guards are taken under the table lock, so eviction and acquisition never race; so is a stdio process taken
//!   out of an idle slot to make room under a process cap ([`SessionTable::take_idle_session`]).
//! - A slot remembers when its last user left, for idle reaping ([`super::processes`]).

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::processes::Reaped;
use super::{BackendSession, SlotKey};

/// One (agent session, backend) slot. The async mutex is held while a handshake runs, so concurrent first
/// callers of one slot share a single handshake.
pub(super) struct Slot {
    pub(super) session: tokio::sync::Mutex<Option<BackendSession>>,
    users: AtomicUsize,
    /// When the last user left (or the slot was made).
    released: std::sync::Mutex<Instant>,
    /// The listener on the session's standalone stream, with the generation of the session it listens to.
    listener: std::sync::Mutex<Option<(u64, AbortHandle)>>,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            session: tokio::sync::Mutex::default(),
            users: AtomicUsize::new(0),
            released: std::sync::Mutex::new(Instant::now()),
            listener: std::sync::Mutex::default(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((_, listener)) = self.listener_lock().take() {
            listener.abort();
        }
    }
}

impl Slot {
    fn listener_lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, AbortHandle)>> {
        // One assignment per update: a poisoned value is still consistent.
        self.listener.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a listener for the session of `generation` unless one is running for it; a listener of an older
    /// session is aborted.
    pub(super) fn ensure_listener(&self, generation: u64, start: impl FnOnce() -> AbortHandle) {
        let mut listener = self.listener_lock();
        if listener.as_ref().is_some_and(|(running, handle)| *running == generation && !handle.is_finished()) {
            return;
        }
        if let Some((_, old)) = listener.replace((generation, start())) {
            old.abort();
        }
    }

    /// The session this slot holds, when nobody is handshaking on it right now.
    pub(super) fn take_session(&self) -> Option<BackendSession> {
        self.session.try_lock().ok().and_then(|mut session| session.take())
    }

    /// How long nobody has used the slot; `None` while it is in use.
    pub(super) fn idle_for(&self) -> Option<std::time::Duration> {
        if self.users.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.released_lock().elapsed())
    }

    /// Drops the slot's session if it is still the one of `generation` (stopping its process).
    pub(super) fn take_session_of(&self, generation: u64) -> Reaped {
        let Ok(mut session) = self.session.try_lock() else { return Reaped::Busy };
        if session.as_ref().is_some_and(|held| held.generation == generation) {
            drop(session.take());
        }
        Reaped::Done
    }

    fn released_lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        // One assignment per update: a poisoned value is still consistent.
        self.released.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Marks a slot in use for as long as it lives.
pub(super) struct SlotGuard {
    slot: Arc<Slot>,
}

impl SlotGuard {
    pub(super) fn arc(&self) -> &Arc<Slot> {
        &self.slot
    }
}

impl std::ops::Deref for SlotGuard {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        &self.slot
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if self.slot.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.slot.released_lock() = Instant::now();
        }
    }
}

struct Entry {
    slot: Arc<Slot>,
    last_used: u64,
    owner: Arc<str>,
}

#[derive(Default)]
struct Slots {
    map: HashMap<SlotKey, Entry>,
    clock: u64,
    /// How many slots each owner holds.
    held: HashMap<Arc<str>, usize>,
}

impl Slots {
    fn held_by(&self, owner: &str) -> usize {
        self.held.get(owner).copied().unwrap_or(0)
    }

    fn insert(&mut self, key: &SlotKey, slot: Arc<Slot>, now: u64) {
        *self.held.entry(Arc::clone(&key.owner)).or_default() += 1;
        self.map.insert(key.clone(), Entry { slot, last_used: now, owner: Arc::clone(&key.owner) });
    }

    fn remove(&mut self, key: &SlotKey) -> Option<Arc<Slot>> {
        let entry = self.map.remove(key)?;
        if let Some(count) = self.held.get_mut(&entry.owner) {
            *count -= 1;
            if *count == 0 {
                self.held.remove(&entry.owner);
            }
        }
        Some(entry.slot)
    }

    /// Evicts the `eligible` idle slot that ranks highest by `rank` (ties: the one used longest ago).
    fn evict_idle(
        &mut self,
        eligible: impl Fn(&Entry) -> bool,
        rank: impl Fn(&Entry, &HashMap<Arc<str>, usize>) -> usize,
    ) -> Option<Arc<Slot>> {
        let victim = self
            .map
            .iter()
            .filter(|(_, entry)| entry.slot.users.load(Ordering::Acquire) == 0 && eligible(entry))
            .max_by_key(|(_, entry)| (rank(entry, &self.held), Reverse(entry.last_used)))
            .map(|(key, _)| key.clone())?;
        self.remove(&victim)
    }
}

pub(super) struct SessionTable {
    slots: Mutex<Slots>,
    capacity: usize,
    per_owner: usize,
}

/// Why no slot could be had; the caller must not grow the table.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TableFull {
    /// Every slot is in use.
    Busy { capacity: usize },
    /// The owner holds its cap of slots and every one of them is in use.
    OwnerBusy { cap: usize },
}

impl SessionTable {
    /// A table of `capacity` slots of which one owner may hold at most `per_owner`.
    pub(super) fn new(capacity: usize, per_owner: usize) -> Self {
        Self { slots: Mutex::default(), capacity: capacity.max(1), per_owner: per_owner.max(1) }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding this lock cannot leave the map half-updated (every update is one call), so a
        // poisoned lock is still consistent.
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes (creating if needed) the slot for `key`, counted against `key.owner`. Returns the slot evicted to
    /// make room, if any, so that the caller can end its backend session.
    pub(super) fn acquire(&self, key: &SlotKey) -> Result<(SlotGuard, Option<Arc<Slot>>), TableFull> {
        let mut slots = self.lock();
        slots.clock += 1;
        let now = slots.clock;
        if let Some(entry) = slots.map.get_mut(key) {
            entry.last_used = now;
            return Ok((guard(&entry.slot), None));
        }
        let evicted = if slots.held_by(&key.owner) >= self.per_owner {
            // At its cap, an owner recycles its own idle slot; it never takes another owner's.
            let own = slots.evict_idle(|entry| entry.owner == key.owner, |_, _| 0);
            Some(own.ok_or(TableFull::OwnerBusy { cap: self.per_owner })?)
        } else if slots.map.len() >= self.capacity {
            // The owner holding the most slots (the one most over its share) loses its idle slot used longest ago.
            let largest_holder_first =
                |entry: &Entry, held: &HashMap<Arc<str>, usize>| held.get(&entry.owner).copied().unwrap_or_default();
            let victim = slots.evict_idle(|_| true, largest_holder_first);
            Some(victim.ok_or(TableFull::Busy { capacity: self.capacity })?)
        } else {
            None
        };
        let slot = Arc::new(Slot::default());
        let acquired = guard(&slot);
        slots.insert(key, slot, now);
        Ok((acquired, evicted))
    }
    /// Takes the session out of the idle slot used longest ago whose session `eligible` accepts (the slot stays,
    /// and its next call starts a new session). A slot in use is never touched.
    pub(super) fn take_idle_session(
        &self,
        eligible: impl Fn(&SlotKey, &BackendSession) -> bool,
    ) -> Option<BackendSession> {
        let slots = self.lock();
        let mut idle: Vec<(&SlotKey, &Entry)> =
            slots.map.iter().filter(|(_, entry)| entry.slot.users.load(Ordering::Acquire) == 0).collect();
        idle.sort_by_key(|(_, entry)| entry.last_used);
        idle.into_iter().find_map(|(key, entry)| {
            let mut session = entry.slot.session.try_lock().ok()?;
            session.as_ref().is_some_and(|held| eligible(key, held)).then(|| session.take()).flatten()
        })
    }

    /// Removes every slot of one agent session.
    pub(super) fn remove_agent(&self, agent_session: &str) -> Vec<Arc<Slot>> {
        let mut slots = self.lock();
        let keys: Vec<SlotKey> = slots.map.keys().filter(|key| &*key.agent_session == agent_session).cloned().collect();
        keys.iter().filter_map(|key| slots.remove(key)).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.lock().map.len()
    }
}

fn guard(slot: &Arc<Slot>) -> SlotGuard {
    slot.users.fetch_add(1, Ordering::AcqRel);
    SlotGuard { slot: Arc::clone(slot) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(agent: &str, backend: &str) -> SlotKey {
        SlotKey::new(agent, backend)
    }

    /// A slot of `owner` (agent sessions are named after their owner and a number).
    fn owned(owner: &str, n: usize) -> SlotKey {
        SlotKey::new(&format!("{owner}-{n}"), "x").owned_by(owner)
    }

    fn holds(table: &SessionTable, owner: &str) -> usize {
        table.lock().held_by(owner)
    }

    #[test]
    fn full_table_evicts_the_oldest_idle_slot() {
        let table = SessionTable::new(2, 2);
        drop(table.acquire(&key("a", "x")).unwrap());
        drop(table.acquire(&key("b", "x")).unwrap());
        drop(table.acquire(&key("a", "x")).unwrap()); // "a" is now the most recent
        let (_c, evicted) = table.acquire(&key("c", "x")).unwrap();
        assert!(evicted.is_some());
        assert_eq!(table.len(), 2);
        assert_eq!(table.remove_agent("b").len(), 0, "b was the oldest idle slot and is gone");
        assert_eq!(table.remove_agent("a").len(), 1);
    }

    #[test]
    fn a_slot_in_use_is_never_evicted() {
        let table = SessionTable::new(1, 1);
        let (held, _) = table.acquire(&key("a", "x")).unwrap();
        let refused = table.acquire(&key("b", "x"));
        assert_eq!(refused.err(), Some(TableFull::Busy { capacity: 1 }));
        drop(held);
        let (_b, evicted) = table.acquire(&key("b", "x")).unwrap();
        assert!(evicted.is_some());
    }

    #[test]
    fn remove_agent_drops_only_that_agents_slots() {
        let table = SessionTable::new(8, 8);
        for (agent, backend) in [("a", "x"), ("a", "y"), ("b", "x")] {
            drop(table.acquire(&key(agent, backend)).unwrap());
        }
        assert_eq!(table.remove_agent("a").len(), 2);
        assert_eq!(table.len(), 1);
        assert_eq!(table.remove_agent("b").len(), 1);
        assert!(table.lock().held.is_empty(), "removed slots no longer count against their owners");
    }

    /// A hog that filled the table loses its own idle slots, even its most recent ones, before anyone else loses
    /// an older one.
    #[test]
    fn the_largest_holder_loses_its_idle_slots_first() {
        let table = SessionTable::new(10, 10);
        for n in 0..2 {
            drop(table.acquire(&owned("alice", n)).unwrap());
        }
        for n in 0..8 {
            drop(table.acquire(&owned("hog", n)).unwrap());
        }
        for n in 0..3 {
            let (_bob, evicted) = table.acquire(&owned("bob", n)).unwrap();
            assert!(evicted.is_some());
        }
        assert_eq!((holds(&table, "alice"), holds(&table, "bob"), holds(&table, "hog")), (2, 3, 5));
        assert_eq!(table.remove_agent("hog-0").len(), 0, "the hog's oldest slots went first");
        assert_eq!(table.remove_agent("hog-3").len(), 1);
    }

    /// The largest holder's slots in use are safe; then the next largest holder with an idle slot pays.
    #[test]
    fn a_busy_hog_is_skipped_and_a_full_busy_table_refuses() {
        let table = SessionTable::new(4, 4);
        let hog: Vec<_> = (0..3).map(|n| table.acquire(&owned("hog", n)).unwrap()).collect();
        drop(table.acquire(&owned("alice", 0)).unwrap());
        let (bob, evicted) = table.acquire(&owned("bob", 0)).unwrap();
        assert!(evicted.is_some(), "alice's idle slot made room");
        assert_eq!(holds(&table, "alice"), 0);
        assert_eq!(holds(&table, "hog"), 3, "slots in use are never evicted");
        assert_eq!(table.acquire(&owned("carol", 0)).err(), Some(TableFull::Busy { capacity: 4 }));
        drop((hog, bob));
    }

    /// At its cap an owner recycles its own oldest idle slot, even with room in the table; others keep theirs.
    #[test]
    fn an_owner_at_its_cap_recycles_its_own_oldest_idle_slot() {
        let table = SessionTable::new(100, 3);
        drop(table.acquire(&owned("alice", 0)).unwrap());
        for n in 0..3 {
            drop(table.acquire(&owned("hog", n)).unwrap());
        }
        let (_fourth, evicted) = table.acquire(&owned("hog", 3)).unwrap();
        assert!(evicted.is_some());
        assert_eq!(holds(&table, "hog"), 3);
        assert_eq!(table.remove_agent("hog-0").len(), 0, "its oldest slot was recycled");
        assert_eq!(holds(&table, "alice"), 1, "another owner keeps its slot");
    }

    /// At its cap with every slot in use, an owner is refused; it never takes another owner's slot.
    #[test]
    fn an_owner_at_its_cap_with_all_slots_busy_is_refused() {
        let table = SessionTable::new(100, 2);
        drop(table.acquire(&owned("alice", 0)).unwrap());
        let busy: Vec<_> = (0..2).map(|n| table.acquire(&owned("hog", n)).unwrap()).collect();
        assert_eq!(table.acquire(&owned("hog", 2)).err(), Some(TableFull::OwnerBusy { cap: 2 }));
        assert_eq!((holds(&table, "alice"), table.len()), (1, 3));
        drop(busy);
        assert!(table.acquire(&owned("hog", 2)).is_ok(), "once idle, its own slot is recycled");
    }

    fn http_session(generation: u64) -> BackendSession {
        let home =
            super::super::BackendEndpoint::new("http://127.0.0.1:9/mcp".parse().unwrap(), Duration::from_secs(1));
        BackendSession {
            id: None,
            version: "2025-11-25",
            capabilities: Arc::default(),
            generation,
            carrier: super::super::transport::Carrier::Http { home: Arc::new(home) },
        }
    }

    fn hold(table: &SessionTable, agent: &str, generation: u64) -> SlotGuard {
        let (guard, _) = table.acquire(&key(agent, "x")).unwrap();
        *guard.session.try_lock().unwrap() = Some(http_session(generation));
        guard
    }

    /// A cap takes the session of the idle slot used longest ago that is eligible; a slot in use never gives its
    /// session up, and the slot itself stays.
    #[test]
    fn take_idle_session_takes_the_oldest_eligible_idle_session_only() {
        let table = SessionTable::new(8, 8);
        let busy = hold(&table, "busy", 1);
        drop(hold(&table, "old", 2));
        drop(hold(&table, "new", 3));
        let taken = table.take_idle_session(|_, _| true).expect("an idle session");
        assert_eq!(taken.generation, 2, "the idle slot used longest ago");
        let taken = table.take_idle_session(|key, _| &*key.agent_session != "new");
        assert!(taken.is_none(), "only `new` holds an idle session, and it is not eligible");
        assert_eq!(table.take_idle_session(|_, _| true).map(|s| s.generation), Some(3));
        assert!(table.take_idle_session(|_, _| true).is_none(), "the busy slot keeps its session");
        assert_eq!(table.len(), 3, "slots stay; only their sessions went");
        assert!(busy.session.try_lock().unwrap().is_some());
    }

    #[test]
    fn a_slot_is_idle_only_without_users_and_a_reaper_takes_only_its_own_generation() {
        let table = SessionTable::new(8, 8);
        let guard = hold(&table, "a", 7);
        assert_eq!(guard.idle_for(), None, "in use");
        let slot = Arc::clone(guard.arc());
        drop(guard);
        assert!(slot.idle_for().is_some_and(|quiet| quiet < Duration::from_secs(5)));
        assert!(matches!(slot.take_session_of(6), Reaped::Done));
        assert!(slot.session.try_lock().unwrap().is_some(), "another generation's reaper leaves it");
        assert!(matches!(slot.take_session_of(7), Reaped::Done));
        assert!(slot.session.try_lock().unwrap().is_none());
    }

    /// The owner is not part of a slot's identity: the same agent session from another address keeps its slot.
    #[test]
    fn a_slot_is_found_whatever_owner_asks_for_it() {
        let table = SessionTable::new(4, 4);
        drop(table.acquire(&key("a", "x").owned_by("anonymous@10.0.0.1")).unwrap());
        let (_again, evicted) = table.acquire(&key("a", "x").owned_by("anonymous@10.0.0.2")).unwrap();
        assert!(evicted.is_none());
        assert_eq!((table.len(), holds(&table, "anonymous@10.0.0.1")), (1, 1));
    }
}
