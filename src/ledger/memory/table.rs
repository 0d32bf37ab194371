//! A map from string keys that never rebuilds itself: a B-tree ordered by a keyed 64-bit hash of the key.
//!
//! Rules:
//! - No operation touches more than a few nodes: a B-tree insert or remove splits or merges at most one node per
//!   level, so no single call copies or rehashes the whole map (a `HashMap` that doubles moves every entry at once,
//!   and one that fills with tombstones rehashes in place; either stalls every caller waiting on the store's lock).
//! - Ordering by hash, not by key, keeps comparisons to integers; the hash is keyed per table (`RandomState`), so
//!   no caller can choose keys that collide, and keys that do collide share a [`Slot`] and are told apart there.
//! - The hash order is stable while the map changes, so a walk can stop after a slice and resume later from the
//!   next hash ([`Table::slice_after`]), without holding anything in between.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::Arc;

/// The entries whose keys hash alike: almost always one, boxed so a B-tree node stays small.
#[derive(Debug)]
enum Slot<V> {
    One(Box<(Arc<str>, V)>),
    Many(Vec<(Arc<str>, V)>),
}

impl<V> Slot<V> {
    fn entries(&self) -> &[(Arc<str>, V)] {
        match self {
            Slot::One(entry) => std::slice::from_ref(&**entry),
            Slot::Many(entries) => entries,
        }
    }

    fn entries_mut(&mut self) -> &mut [(Arc<str>, V)] {
        match self {
            Slot::One(entry) => std::slice::from_mut(&mut **entry),
            Slot::Many(entries) => entries,
        }
    }
}

/// A map from `Arc<str>` keys to `V`, looked up by `&str`.
#[derive(Debug)]
pub(super) struct Table<V, S = std::collections::hash_map::RandomState> {
    slots: BTreeMap<u64, Slot<V>>,
    hasher: S,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Self::with_hasher(Default::default())
    }
}

impl<V, S: BuildHasher> Table<V, S> {
    pub(super) fn with_hasher(hasher: S) -> Self {
        Self { slots: BTreeMap::new(), hasher }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.values().map(|slot| slot.entries().len()).sum()
    }

    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    pub(super) fn get(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        let slot = self.slots.get(&self.hash(key))?;
        slot.entries().iter().find(|(stored, _)| &**stored == key).map(|(stored, value)| (stored, value))
    }

    pub(super) fn get_mut(&mut self, key: &str) -> Option<(&Arc<str>, &mut V)> {
        let hash = self.hash(key);
        let slot = self.slots.get_mut(&hash)?;
        slot.entries_mut().iter_mut().find(|(stored, _)| &**stored == key).map(|(stored, value)| (&*stored, value))
    }

    /// Inserts `value` under `key`, which must not be in the table (callers look it up first, under one lock).
    pub(super) fn insert_new(&mut self, key: Arc<str>, value: V) {
        debug_assert!(self.get(&key).is_none(), "{key} is already in the table");
        match self.slots.entry(self.hasher.hash_one(&*key)) {
            Entry::Vacant(vacant) => {
                vacant.insert(Slot::One(Box::new((key, value))));
            }
            Entry::Occupied(mut occupied) => {
                // An empty `Many` holds the place without allocating while the slot is rebuilt.
                let entries = match std::mem::replace(occupied.get_mut(), Slot::Many(Vec::new())) {
                    Slot::One(first) => vec![*first, (key, value)],
                    Slot::Many(mut entries) => {
                        entries.push((key, value));
                        entries
                    }
                };
                *occupied.get_mut() = Slot::Many(entries);
            }
        }
    }

    pub(super) fn remove(&mut self, key: &str) -> Option<(Arc<str>, V)> {
        let hash = self.hash(key);
        match self.slots.remove(&hash)? {
            Slot::One(entry) if &*entry.0 == key => Some(*entry),
            one @ Slot::One(_) => {
                self.slots.insert(hash, one);
                None
            }
            Slot::Many(mut entries) => {
                let found = entries.iter().position(|(stored, _)| &**stored == key).map(|at| entries.remove(at));
                let rest = match entries.len() {
                    1 => entries.pop().map(|entry| Slot::One(Box::new(entry))),
                    _ => Some(Slot::Many(entries)),
                };
                if let Some(rest) = rest {
                    self.slots.insert(hash, rest);
                }
                found
            }
        }
    }

    /// Up to `limit` slots' entries in hash order, starting after the hash `after` (`None`: from the start),
    /// and the hash to resume after (`None` once the walk reached the end).
    pub(super) fn slice_after(&self, after: Option<u64>, limit: usize) -> (Vec<&(Arc<str>, V)>, Option<u64>) {
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let (mut taken, mut last, mut entries) = (0, None, Vec::new());
        for (hash, slot) in self.slots.range((from, Bound::Unbounded)).take(limit) {
            entries.extend(slot.entries());
            (taken, last) = (taken + 1, Some(*hash));
        }
        // Fewer slots than asked for means the walk reached the end.
        let resume = if taken == limit { last } else { None };
        (entries, resume)
    }
}
