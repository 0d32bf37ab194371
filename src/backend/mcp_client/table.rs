//! The bounded table of backend sessions, one slot per (agent session, backend) pair.
//!
//! Rules:
//! - The table never holds more than `capacity` slots, and a slot in use (a caller holds its [`SlotGuard`]) is
//!   never evicted: when nothing is evictable the new caller is refused instead of growing the table.
//! - Every slot counts against its owner (the slot key's fairness key: the principal, or `anonymous@<address>`),
//!   so one owner cannot push every other owner's sessions out:
//!   - an owner holding `per_owner` slots recycles its own idle slot used longest ago, or is refused when all of
//!     its slots are in use — it never takes another owner's slot;
//!   - when the table is full, the owner holding the most slots (so the one furthest over its share) loses its
//!     idle slot used longest ago; an owner with fewer slots keeps its own while a larger holder has idle ones.
//! - Guards are taken under the table lock, so eviction and acquisition never race; so is a stdio process taken
//!   out of an idle slot to make room under a process cap ([`SessionTable::take_idle_session`]).
//! - A slot remembers when its last user left, for idle reaping ([`reap_when_idle`]: a stdio process whose slot
//!   has had no call for its backend's `idle_timeout` is stopped; its slot stays, and the next call starts a fresh
//!   process; a slot in use is never reaped), and wakes whoever waits for that moment ([`Slot::until_idle`]: a retired backend's session ends once its last call has).
//! - The per-owner cap may change while the table is in use (a configuration reload); slots already held above a
//!   lowered cap stay until they are recycled or evicted.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::endpoint::SlotKey;
use super::session::background::BackgroundStream;
use super::session::transport::BackendSession;
use crate::mcp::SessionHolder;

/// One (agent session, backend) slot. The async mutex is held while a handshake runs, so concurrent first
/// callers of one slot share a single handshake.
pub(super) struct Slot {
    pub(super) session: tokio::sync::Mutex<Option<BackendSession>>,
    users: AtomicUsize,
    /// When the last user left (or the slot was made).
    released: Mutex<Instant>,
    /// Notified (one stored permit) whenever the last user leaves.
    idle: Notify,
    /// The session's background stream (a standalone or resource stream), stopped when the slot goes.
    pub(super) background: BackgroundStream,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            session: tokio::sync::Mutex::default(),
            users: AtomicUsize::new(0),
            released: Mutex::new(Instant::now()),
            idle: Notify::new(),
            background: BackgroundStream::default(),
        }
    }
}

impl Slot {
    /// The session this slot holds, when nobody is handshaking on it right now.
    pub(super) fn take_session(&self) -> Option<BackendSession> {
        self.session.try_lock().ok().and_then(|mut session| session.take())
    }

    /// How long nobody has used the slot; `None` while it is in use.
    fn idle_for(&self) -> Option<Duration> {
        if self.users.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.released_lock().elapsed())
    }

    /// Returns once no call uses the slot (at once when none does).
    pub(super) async fn until_idle(&self) {
        while self.users.load(Ordering::Acquire) > 0 {
            self.idle.notified().await;
        }
    }

    /// Drops the slot's session if it is still the one of `generation` (stopping its process).
    fn take_session_of(&self, generation: u64) -> Reaped {
        let Ok(mut session) = self.session.try_lock() else { return Reaped::Busy };
        if session.as_ref().is_some_and(|held| held.generation == generation) {
            drop(session.take());
        }
        Reaped::Done
    }

    fn released_lock(&self) -> MutexGuard<'_, Instant> {
        self.released.lock()
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
            self.slot.idle.notify_one();
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
    per_owner: AtomicUsize,
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
        Self { slots: Mutex::default(), capacity: capacity.max(1), per_owner: AtomicUsize::new(per_owner.max(1)) }
    }

    /// Changes how many slots one owner may hold, for the next acquisitions.
    pub(super) fn set_per_owner(&self, per_owner: usize) {
        self.per_owner.store(per_owner.max(1), Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock()
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
        let per_owner = self.per_owner.load(Ordering::Relaxed);
        let evicted = if slots.held_by(&key.owner) >= per_owner {
            // At its cap, an owner recycles its own idle slot; it never takes another owner's.
            let own = slots.evict_idle(|entry| entry.owner == key.owner, |_, _| 0);
            Some(own.ok_or(TableFull::OwnerBusy { cap: per_owner })?)
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

    /// Removes every slot of one holder.
    pub(super) fn remove_holder(&self, holder: &SessionHolder) -> Vec<Arc<Slot>> {
        self.remove_where(|key| key.holder == *holder)
    }

    /// Removes every slot of one backend (every agent's, discovery's and the shared one).
    pub(super) fn remove_backend(&self, backend: &str) -> Vec<Arc<Slot>> {
        self.remove_where(|key| &*key.backend == backend)
    }

    fn remove_where(&self, matches: impl Fn(&SlotKey) -> bool) -> Vec<Arc<Slot>> {
        let mut slots = self.lock();
        let keys: Vec<SlotKey> = slots.map.keys().filter(|key| matches(key)).cloned().collect();
        keys.iter().filter_map(|key| slots.remove(key)).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// How many slots of each backend hold a live session. A slot whose handshake is running right now is not
    /// counted (its session does not exist yet); nothing waits for it.
    pub(super) fn live_sessions(&self) -> HashMap<Arc<str>, usize> {
        let slots = self.lock();
        let mut live: HashMap<Arc<str>, usize> = HashMap::new();
        for (key, entry) in &slots.map {
            let alive =
                entry.slot.session.try_lock().is_ok_and(|session| session.as_ref().is_some_and(|s| s.is_alive()));
            if alive {
                *live.entry(Arc::clone(&key.backend)).or_default() += 1;
            }
        }
        live
    }
}

fn guard(slot: &Arc<Slot>) -> SlotGuard {
    slot.users.fetch_add(1, Ordering::AcqRel);
    SlotGuard { slot: Arc::clone(slot) }
}

/// Stops the process of `slot`'s session of `generation` once the slot has been idle for `idle` (checked again
/// whenever it was used meanwhile); ends when the slot is gone or holds another session.
pub(super) fn reap_when_idle(slot: Weak<Slot>, generation: u64, idle: Duration) {
    tokio::spawn(async move {
        let mut wait = idle;
        loop {
            tokio::time::sleep(wait).await;
            let Some(slot) = slot.upgrade() else { return };
            wait = match slot.idle_for() {
                Some(quiet) if quiet >= idle => match slot.take_session_of(generation) {
                    Reaped::Done => return,
                    Reaped::Busy => idle,
                },
                Some(quiet) => idle - quiet,
                None => idle,
            };
        }
    });
}

/// What [`Slot::take_session_of`] found.
pub(super) enum Reaped {
    /// The session was taken, or the slot holds another one (whose own reaper watches it).
    Done,
    /// A handshake is running on the slot; try again later.
    Busy,
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
