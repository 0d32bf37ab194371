//! The memory store's claims and their indexes: everything that lives under the store's one lock.
//!
//! Rules:
//! - Every method does work bounded by what it is asked about, never by how many claims are stored: one claim
//!   costs a few B-tree steps (no rehash, see [`super::table`]); upkeep walks only the in-flight claims (as many
//!   as calls running, not as claims retained); the sweep and the listing take one bounded slice per call, and
//!   the store releases the lock between slices.
//! - `in_flight` holds exactly the keys of in-flight records and `settled` exactly `(updated_ms, key)` of the
//!   others; [`reindex`] is the one place that keeps both true when a record changes. A record never
//!   goes back to `in_flight`.
//! - The sweep takes the oldest settled records first, so it removes exactly those settled before the cutoff,
//!   whatever else changes between its slices.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use super::super::error::LedgerError;
use super::super::rules::{self, RESOLVED_NOTE, Settle, Verdict};
use super::super::types::{
    ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, ListFilter, NewClaim, OPERATOR, Resolution, to_millis,
};
use super::record::{Names, Stored};
use super::table::Table;
use crate::hex;

/// The claims of one memory store.
#[derive(Debug, Default)]
pub(super) struct Claims {
    table: Table<Stored>,
    in_flight: BTreeSet<Arc<str>>,
    settled: BTreeSet<(i64, Arc<str>)>,
    names: Names,
}

/// Where a record stands for the indexes.
#[derive(Debug, Clone, Copy)]
struct Place {
    state: ClaimState,
    updated_ms: i64,
}

impl Place {
    fn of(record: &Stored) -> Place {
        Place { state: record.state, updated_ms: record.updated_ms }
    }
}

impl Claims {
    pub(super) fn get(&self, key: &str) -> Option<ClaimRecord> {
        self.table.get(key).map(|(key, record)| record.to_record(key))
    }

    /// Claims `new.key` unless it is taken; `id` and `now` are the new claim's.
    pub(super) fn claim(&mut self, new: &NewClaim, id: [u8; 16], now: SystemTime) -> ClaimOutcome {
        if let Some(existing) = self.get(new.key.as_str()) {
            return ClaimOutcome::Existing(existing);
        }
        // Built as every store builds it, so the times are the ones the other stores would keep.
        let shown = ClaimRecord::claimed(new, hex::encode(&id), now);
        let times = (to_millis(shown.created_at), to_millis(shown.lease_until));
        let record = Stored::claimed(new, id, times, &mut self.names);
        let key: Arc<str> = new.key.as_str().into();
        self.in_flight.insert(key.clone());
        self.table.insert_new(key, record);
        ClaimOutcome::Claimed(shown)
    }

    /// Applies `change` to the claim at `now_ms` when the rules allow `operation`; `Ok(true)` when it changed.
    pub(super) fn settle(
        &mut self,
        key: &ClaimKey,
        owner: &str,
        operation: Settle<'_>,
        now_ms: i64,
        change: impl FnOnce(&mut Stored, &mut Names),
    ) -> Result<bool, LedgerError> {
        let Claims { table, in_flight, settled, names } = self;
        let found = table.get_mut(key.as_str());
        let current = found.as_ref().map(|(_, record)| record.current());
        if rules::decide(operation, key, owner, current)? == Verdict::AlreadyDone {
            return Ok(false);
        }
        // `decide` refuses every settle of an absent claim but a release, and releases do not come here.
        if let Some((key, record)) = found {
            let before = Place::of(record);
            change(record, names);
            record.updated_ms = now_ms;
            reindex(in_flight, settled, key, Some(before), Some(Place::of(record)));
        }
        Ok(true)
    }

    /// Deletes the owner's claim when the rules allow a release; `Ok(true)` when one was deleted.
    pub(super) fn release(&mut self, key: &ClaimKey, owner: &str) -> Result<bool, LedgerError> {
        let current = self.table.get(key.as_str()).map(|(_, record)| record.current());
        if rules::decide(Settle::Release, key, owner, current)? == Verdict::AlreadyDone {
            return Ok(false);
        }
        Ok(self.remove(key.as_str()))
    }

    /// An operator's resolve of an `unknown` claim at `now_ms` (see [`super::super::LedgerStore::resolve`]).
    /// Returns the claim as it was.
    pub(super) fn resolve(
        &mut self,
        key: &ClaimKey,
        resolution: Resolution,
        now_ms: i64,
    ) -> Result<ClaimRecord, LedgerError> {
        let before = self.get(key.as_str());
        rules::explain_resolve(key, before.as_ref())?;
        match resolution {
            Resolution::Failed => {
                self.remove(key.as_str());
            }
            Resolution::Completed => self.update(key.as_str(), |record, names| {
                record.state = ClaimState::Completed;
                let operator = names.intern(OPERATOR);
                names.release(std::mem::replace(&mut record.owner, operator));
                record.error = Some(RESOLVED_NOTE.into());
                record.updated_ms = now_ms;
            }),
        }
        before.ok_or_else(|| LedgerError::NotFound { key: key.to_string() })
    }

    /// Applies `change` to the record of `key` (if any) and reindexes it.
    fn update(&mut self, key: &str, change: impl FnOnce(&mut Stored, &mut Names)) {
        let Claims { table, in_flight, settled, names } = self;
        if let Some((key, record)) = table.get_mut(key) {
            let before = Place::of(record);
            change(record, names);
            reindex(in_flight, settled, key, Some(before), Some(Place::of(record)));
        }
    }

    fn remove(&mut self, key: &str) -> bool {
        let Some((key, record)) = self.table.remove(key) else {
            return false;
        };
        reindex(&mut self.in_flight, &mut self.settled, &key, Some(Place::of(&record)), None);
        record.forget(&mut self.names);
        true
    }

    /// Extends the lease of `owner`'s in-flight claims to `lease_ms`; returns how many.
    pub(super) fn renew(&mut self, owner: &str, lease_ms: i64) -> u64 {
        let mut renewed = 0;
        for key in &self.in_flight {
            if let Some((_, record)) = self.table.get_mut(key)
                && &*record.owner == owner
            {
                record.lease_ms = lease_ms;
                renewed += 1;
            }
        }
        renewed
    }

    /// Marks the in-flight claims `select` picks unknown with `note` at `now_ms`; returns their keys.
    pub(super) fn unknown_where(&mut self, select: impl Fn(&Stored) -> bool, note: &str, now_ms: i64) -> Vec<Arc<str>> {
        let picked: Vec<Arc<str>> = self
            .in_flight
            .iter()
            .filter(|key| self.table.get(key).is_some_and(|(_, record)| select(record)))
            .cloned()
            .collect();
        for key in &picked {
            self.update(key, |record, _| {
                record.state = ClaimState::Unknown;
                record.error = Some(note.into());
                record.updated_ms = now_ms;
            });
        }
        picked
    }

    /// Removes up to `limit` of the settled claims last changed before `cutoff_ms`, oldest first; returns how many,
    /// and whether more such claims remain.
    pub(super) fn sweep(&mut self, cutoff_ms: i64, limit: usize) -> (u64, bool) {
        let mut removed = 0;
        while let Some((updated_ms, key)) = self.settled.first()
            && *updated_ms < cutoff_ms
        {
            if removed == limit as u64 {
                return (removed, true);
            }
            let key = key.clone();
            self.remove(&key);
            removed += 1;
        }
        (removed, false)
    }

    /// Adds the claims matching `filter` among up to `limit` slots after `after` (see [`Table::slice_after`]) to
    /// `found`; returns where to resume, `None` at the end.
    pub(super) fn list_slice(
        &self,
        filter: &ListFilter,
        after: Option<u64>,
        limit: usize,
        found: &mut Vec<ClaimRecord>,
    ) -> Option<u64> {
        let since_ms = filter.since.map(to_millis);
        let (entries, resume) = self.table.slice_after(after, limit);
        let matching = entries.into_iter().filter(|(_, record)| {
            filter.state.is_none_or(|state| record.state == state)
                && filter.principal.as_deref().is_none_or(|principal| *record.principal == *principal)
                && filter.backend.as_deref().is_none_or(|backend| *record.backend == *backend)
                && filter.tool.as_deref().is_none_or(|tool| *record.tool == *tool)
                && since_ms.is_none_or(|since| record.created_ms >= since)
        });
        found.extend(matching.map(|(key, record)| record.to_record(key)));
        resume
    }

    #[cfg(test)]
    pub(super) fn counts(&self) -> (usize, usize, usize, usize) {
        (self.table.len(), self.in_flight.len(), self.settled.len(), self.names.len())
    }
}

/// Keeps `in_flight` and `settled` true of `key` moving from `before` to `after` (`None`: absent).
fn reindex(
    in_flight: &mut BTreeSet<Arc<str>>,
    settled: &mut BTreeSet<(i64, Arc<str>)>,
    key: &Arc<str>,
    before: Option<Place>,
    after: Option<Place>,
) {
    match before {
        Some(Place { state: ClaimState::InFlight, .. }) => {
            in_flight.remove(key);
        }
        Some(Place { updated_ms, .. }) => {
            settled.remove(&(updated_ms, key.clone()));
        }
        None => {}
    }
    match after {
        Some(Place { state: ClaimState::InFlight, .. }) => {
            in_flight.insert(key.clone());
        }
        Some(Place { updated_ms, .. }) => {
            settled.insert((updated_ms, key.clone()));
        }
        None => {}
    }
}
