//! The bounded table of backend sessions, one slot per (agent session, backend) pair (design §2).
//!
//! Rules: the table never holds more than `capacity` slots; when full, the idle slot (no caller holds a
//! [`SlotGuard`]) used longest ago is evicted, and a slot in use is never evicted — when every slot is in use the
//! new caller is refused instead of growing the table. Guards are taken under the table lock, so eviction and
//! acquisition never race.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::AbortHandle;

use super::{BackendSession, SlotKey};

/// One (agent session, backend) slot. The async mutex is held while a handshake runs, so concurrent first
/// callers of one slot share a single handshake.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) session: tokio::sync::Mutex<Option<BackendSession>>,
    users: AtomicUsize,
    /// The listener on the session's standalone stream, with the generation of the session it listens to.
    listener: std::sync::Mutex<Option<(u64, AbortHandle)>>,
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
}

/// Marks a slot in use for as long as it lives.
pub(super) struct SlotGuard {
    slot: Arc<Slot>,
}

impl std::ops::Deref for SlotGuard {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        &self.slot
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.slot.users.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Entry {
    slot: Arc<Slot>,
    last_used: u64,
}

#[derive(Default)]
struct Slots {
    map: HashMap<SlotKey, Entry>,
    clock: u64,
}

pub(super) struct SessionTable {
    slots: Mutex<Slots>,
    capacity: usize,
}

/// Every slot is in use; the caller must not grow the table.
#[derive(Debug)]
pub(super) struct TableFull {
    pub(super) capacity: usize,
}

impl SessionTable {
    pub(super) fn new(capacity: usize) -> Self {
        Self { slots: Mutex::default(), capacity: capacity.max(1) }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding this lock cannot leave the map half-updated (every update is one call), so a
        // poisoned lock is still consistent.
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes (creating if needed) the slot for `key`. Returns the slot evicted to make room, if any, so that the
    /// caller can end its backend session.
    pub(super) fn acquire(&self, key: &SlotKey) -> Result<(SlotGuard, Option<Arc<Slot>>), TableFull> {
        let mut slots = self.lock();
        slots.clock += 1;
        let now = slots.clock;
        if let Some(entry) = slots.map.get_mut(key) {
            entry.last_used = now;
            return Ok((guard(&entry.slot), None));
        }
        let evicted = if slots.map.len() >= self.capacity {
            Some(evict_oldest_idle(&mut slots.map).ok_or(TableFull { capacity: self.capacity })?)
        } else {
            None
        };
        let slot = Arc::new(Slot::default());
        let acquired = guard(&slot);
        slots.map.insert(key.clone(), Entry { slot, last_used: now });
        Ok((acquired, evicted))
    }

    /// Removes every slot of one agent session.
    pub(super) fn remove_agent(&self, agent_session: &str) -> Vec<Arc<Slot>> {
        let mut slots = self.lock();
        let keys: Vec<SlotKey> = slots.map.keys().filter(|key| &*key.agent_session == agent_session).cloned().collect();
        keys.iter().filter_map(|key| slots.map.remove(key)).map(|entry| entry.slot).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.lock().map.len()
    }
}

fn guard(slot: &Arc<Slot>) -> SlotGuard {
    slot.users.fetch_add(1, Ordering::AcqRel);
    SlotGuard { slot: Arc::clone(slot) }
}

fn evict_oldest_idle(map: &mut HashMap<SlotKey, Entry>) -> Option<Arc<Slot>> {
    let oldest = map
        .iter()
        .filter(|(_, entry)| entry.slot.users.load(Ordering::Acquire) == 0)
        .min_by_key(|(_, entry)| entry.last_used)
        .map(|(key, _)| key.clone())?;
    map.remove(&oldest).map(|entry| entry.slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(agent: &str, backend: &str) -> SlotKey {
        SlotKey::new(agent, backend)
    }

    #[test]
    fn full_table_evicts_the_oldest_idle_slot() {
        let table = SessionTable::new(2);
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
        let table = SessionTable::new(1);
        let (held, _) = table.acquire(&key("a", "x")).unwrap();
        let refused = table.acquire(&key("b", "x"));
        assert!(matches!(refused, Err(TableFull { capacity: 1 })));
        drop(held);
        let (_b, evicted) = table.acquire(&key("b", "x")).unwrap();
        assert!(evicted.is_some());
    }

    #[test]
    fn remove_agent_drops_only_that_agents_slots() {
        let table = SessionTable::new(8);
        for (agent, backend) in [("a", "x"), ("a", "y"), ("b", "x")] {
            drop(table.acquire(&key(agent, backend)).unwrap());
        }
        assert_eq!(table.remove_agent("a").len(), 2);
        assert_eq!(table.len(), 1);
        assert_eq!(table.remove_agent("b").len(), 1);
    }
}
