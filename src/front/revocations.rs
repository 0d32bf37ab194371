//! Sessions ended before their ids expire (`DELETE /mcp`): later use
//! of that id gets 404, from a bounded, time-limited revocation list shared through the ledger store when shared.
//!
//! Owns: the in-memory list every request is checked against ([`Revocations`]), and the front's view of the
//! durable, shared log behind it ([`RevocationLog`], implemented over the ledger by the composition root).
//!
//! Rules:
//! - A deleted session never comes back. An entry lives until its session's own expiry (issue time +
//!   `session_ttl`), after which the id no longer opens anyway; only then is it purged. Nothing else removes one.
//! - The list is bounded by `server.max_revocations`, and each owner's part of it by
//!   `server.max_revocations_per_owner` (default a quarter of the list, at least one). The owner is the fairness
//!   key of the request that deleted (`router::fairness_key`: the principal, `anonymous@<address>` for agents
//!   without credentials), the same owner as the backend-session table's and the in-flight shares'. When the
//!   owner's share is full, that owner's new deletion is refused (the `DELETE` fails and says so; the session
//!   stays valid until it expires) and so is that owner's new session (`initialize`), until its entries expire;
//!   every other owner is served. When the whole list is full, everyone's are refused the same way — with the
//!   default share that takes at least four owners. Refusing is visible and temporary; forgetting a deletion
//!   would be silent and would revive a session its owner ended.
//! - The bounds are exact under concurrency: a deletion reserves its place (under the lock) before it is written
//!   to the log, and gives it back if the log refuses or the deletion is abandoned, so N concurrent deletions
//!   against room for B accept at most B.
//! - Entries heard from the log (a restart's load, other replicas) carry no owner: they are always kept, count
//!   toward the total but against no owner's share, so replicas with a smaller bound can hold more than theirs
//!   and a restart forgets the share counts, never the deletions. An owner refused by one replica may still
//!   delete on another, up to each replica's bound: the share is per replica, like the list.
//! - The hot path ([`Revocations::is_revoked`]) reads only memory. A deletion is written to the log first and
//!   to memory once the log has it, so a `DELETE` that answers success is durable and shared; one the log refused
//!   changed nothing.
//! - Other replicas' deletions arrive through the log's feed ([`Revocations::start`]) and reach this replica's
//!   list after the store's announcement delay (PostgreSQL `NOTIFY`: normally milliseconds). Whenever the feed
//!   says announcements were missed, the whole list is reloaded from the log.
//!
//! Must not know: the ledger, HTTP.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::now_unix;
use super::session::SessionRef;

/// How long a failed reload waits before it tries again, at first and at most.
const RELOAD_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(10));

/// A revoked session as the log keeps it: plain types, no sealed ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// The session's [`SessionRef`] in its hex form.
    pub session: String,
    /// The last unix second at which the session's id would still open.
    pub expires_at: u64,
}

/// What the log's feed reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogChange {
    /// A deletion was recorded (by any replica, this one included).
    Recorded(LogEntry),
    /// Changes may have been missed: reload everything.
    Missed,
}

/// The log could not do what was asked; the text says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LogError(pub String);

/// An operation on the log.
pub type LogCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, LogError>> + Send + 'a>>;

/// The durable log of deletions, shared by every replica that shares it.
pub trait RevocationLog: Send + Sync {
    /// Records `entry`; once this succeeds, a restart and every replica on the same log refuse the session.
    fn record(&self, entry: LogEntry) -> LogCall<'_, ()>;
    /// Every entry still in force at `now_unix`.
    fn unexpired(&self, now_unix: u64) -> LogCall<'_, Vec<LogEntry>>;
    /// The changes recorded from now on, or `None` when nobody else writes the log.
    fn follow(&self) -> Option<Box<dyn LogFeed>>;
}

/// Changes to the log, in the order they are announced.
pub trait LogFeed: Send {
    /// The next change, or `None` when the log has gone away.
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Option<LogChange>> + Send + '_>>;
}

/// Why a deletion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevokeError {
    #[error(
        "the gateway's list of deleted sessions is full ({capacity} entries, the `server.max_revocations` bound); \
         retry in {retry_after} s, when the oldest deleted sessions expire"
    )]
    Full { capacity: usize, retry_after: u64 },
    #[error(
        "`{owner}` holds its whole share of the gateway's list of deleted sessions ({share} entries, the \
         `server.max_revocations_per_owner` bound); retry in {retry_after} s, when its oldest deleted sessions expire"
    )]
    ShareFull { owner: String, share: usize, retry_after: u64 },
    #[error("the deletion could not be recorded: {0}")]
    Log(LogError),
}

impl RevokeError {
    /// Whole seconds after which retrying may succeed, when waiting is what it takes.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Full { retry_after, .. } | Self::ShareFull { retry_after, .. } => Some(*retry_after),
            Self::Log(_) => None,
        }
    }
}

/// How many entries the list may hold: in all, and per owner (see the module rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `server.max_revocations`.
    pub total: usize,
    /// `server.max_revocations_per_owner` (a value above `total` means the whole list).
    pub per_owner: usize,
}

impl Bounds {
    /// A list of `total` entries whose owners may each hold all of it (for tests of the total bound).
    #[cfg(test)]
    pub fn whole(total: usize) -> Self {
        Self { total, per_owner: total }
    }
}

/// The sessions deleted before their expiry; see the module rules.
pub struct Revocations {
    bounds: Bounds,
    revoked: Mutex<RevokedSet>,
    log: Option<Arc<dyn RevocationLog>>,
}

impl std::fmt::Debug for Revocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocations").field("bounds", &self.bounds).field("len", &self.len()).finish()
    }
}

/// One deleted session: until when, and whose share it counts against (`None`: heard from the log).
#[derive(Debug)]
struct Revoked {
    expires_at: u64,
    owner: Option<Arc<str>>,
}

/// One owner's part of the list: its recorded deletions by expiry, and those still being written to the log.
#[derive(Debug, Default)]
struct Share {
    by_expiry: BTreeSet<(u64, SessionRef)>,
    reserved: usize,
}

impl Share {
    fn held(&self) -> usize {
        self.by_expiry.len() + self.reserved
    }
}

#[derive(Debug, Default)]
struct RevokedSet {
    entries: HashMap<SessionRef, Revoked>,
    by_expiry: BTreeSet<(u64, SessionRef)>,
    /// Only owners holding an entry or a reservation, so the map stays as small as the list.
    shares: HashMap<Arc<str>, Share>,
    /// Deletions being written to the log: they count as entries, so concurrent ones cannot exceed the bounds.
    reserved: usize,
}

impl RevokedSet {
    /// Entries and reservations: what the total bound is checked against.
    fn held(&self) -> usize {
        self.entries.len() + self.reserved
    }

    /// Adds `id` (an entry heard from the log when `owner` is `None`). When `id` is already there it stays one
    /// entry: the later expiry is kept, and so is the owner it counts against; an entry heard from the log
    /// first (this replica's own deletion, announced back before its write returned) is taken by `owner`.
    fn insert(&mut self, id: SessionRef, expires_at: u64, owner: Option<&Arc<str>>) {
        let (expires_at, owner) = match self.entries.remove(&id) {
            Some(old) => {
                self.by_expiry.remove(&(old.expires_at, id));
                if let Some(share) = old.owner.as_ref().and_then(|name| self.shares.get_mut(name)) {
                    share.by_expiry.remove(&(old.expires_at, id));
                }
                (old.expires_at.max(expires_at), old.owner.or_else(|| owner.cloned()))
            }
            None => (expires_at, owner.cloned()),
        };
        if let Some(name) = &owner {
            self.shares.entry(Arc::clone(name)).or_default().by_expiry.insert((expires_at, id));
        }
        self.entries.insert(id, Revoked { expires_at, owner });
        self.by_expiry.insert((expires_at, id));
    }

    /// Takes a place for `owner`'s next deletion, if the total and `owner`'s share have room.
    fn reserve(&mut self, owner: &str, bounds: Bounds, now: u64) -> Result<(), RevokeError> {
        self.check(owner, bounds, now)?;
        self.reserved += 1;
        self.shares.entry(owner.into()).or_default().reserved += 1;
        Ok(())
    }

    /// Gives back a place [`RevokedSet::reserve`] took.
    fn release(&mut self, owner: &str) {
        self.reserved = self.reserved.saturating_sub(1);
        if let Some(share) = self.shares.get_mut(owner) {
            share.reserved = share.reserved.saturating_sub(1);
            if share.held() == 0 {
                self.shares.remove(owner);
            }
        }
    }

    /// `Ok` while the total and `owner`'s share have room for another entry.
    fn check(&mut self, owner: &str, bounds: Bounds, now: u64) -> Result<(), RevokeError> {
        self.purge_expired(now);
        if self.held() >= bounds.total {
            return Err(RevokeError::Full { capacity: bounds.total, retry_after: retry_after(&self.by_expiry, now) });
        }
        match self.shares.get(owner) {
            Some(share) if share.held() >= bounds.per_owner => Err(RevokeError::ShareFull {
                owner: owner.to_owned(),
                share: bounds.per_owner,
                retry_after: retry_after(&share.by_expiry, now),
            }),
            _ => Ok(()),
        }
    }

    fn purge_expired(&mut self, now: u64) {
        while let Some(&(expires_at, id)) = self.by_expiry.first()
            && expires_at < now
        {
            self.by_expiry.pop_first();
            let owner = self.entries.remove(&id).and_then(|revoked| revoked.owner);
            if let Some(name) = owner
                && let Some(share) = self.shares.get_mut(&name)
            {
                share.by_expiry.remove(&(expires_at, id));
                if share.held() == 0 {
                    self.shares.remove(&name);
                }
            }
        }
    }
}

/// A place taken by [`RevokedSet::reserve`], given back when dropped: when the log refuses, and also when the
/// deletion is abandoned during the log write (its client went away), so no place is lost for good.
struct Reservation<'a> {
    revocations: &'a Revocations,
    owner: &'a str,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.revocations.revoked.lock().release(self.owner);
    }
}

/// Whole seconds until the soonest of `by_expiry` expires and makes room (one when only reservations hold it:
/// they end with their log write).
fn retry_after(by_expiry: &BTreeSet<(u64, SessionRef)>, now: u64) -> u64 {
    by_expiry.first().map_or(1, |&(expires_at, _)| expires_at.saturating_sub(now) + 1)
}

impl Revocations {
    /// A list within `bounds` (each at least one), kept in this process only.
    pub fn new(bounds: Bounds) -> Self {
        let bounds = Bounds { total: bounds.total.max(1), per_owner: bounds.per_owner.max(1) };
        Self { bounds, revoked: Mutex::default(), log: None }
    }

    /// A list whose deletions are recorded in, and followed from, `log`.
    pub fn shared(bounds: Bounds, log: Arc<dyn RevocationLog>) -> Self {
        Self { log: Some(log), ..Self::new(bounds) }
    }

    /// Refuses `id` from now until `expires_at_unix` (see [`super::session::Sealer::expires_at`]), here and, once
    /// this returns, wherever the log is shared; the entry counts against `owner`'s share.
    pub async fn revoke(
        &self,
        id: SessionRef,
        owner: &str,
        expires_at_unix: u64,
        now_unix: u64,
    ) -> Result<(), RevokeError> {
        // The place is taken before the log write and given back if it fails, so concurrent deletions never
        // exceed the bounds (a check before and an insert after would let them all pass the check).
        self.revoked.lock().reserve(owner, self.bounds, now_unix)?;
        let reservation = Reservation { revocations: self, owner };
        if let Some(log) = &self.log {
            let entry = LogEntry { session: id.to_string(), expires_at: expires_at_unix };
            log.record(entry).await.map_err(RevokeError::Log)?;
        }
        // One lock for both: the entry takes the reservation's place with no moment in which neither counts.
        let mut revoked = self.revoked.lock();
        revoked.insert(id, expires_at_unix, Some(&owner.into()));
        revoked.release(owner);
        std::mem::forget(reservation);
        Ok(())
    }

    /// `Ok` while the list, and `owner`'s share of it, have room for another deletion, and so for another of
    /// `owner`'s sessions.
    pub fn room(&self, owner: &str, now_unix: u64) -> Result<(), RevokeError> {
        self.revoked.lock().check(owner, self.bounds, now_unix)
    }

    pub fn is_revoked(&self, id: &SessionRef, now_unix: u64) -> bool {
        let mut revoked = self.revoked.lock();
        revoked.purge_expired(now_unix);
        revoked.entries.contains_key(id)
    }

    /// The number of entries, expired ones not yet purged included.
    pub fn len(&self) -> usize {
        self.revoked.lock().entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Loads the log's unexpired entries, then follows its changes on a task of its own (when others write it).
    /// Meant for startup: a deleted session is refused from the first request on.
    pub async fn start(self: &Arc<Self>) -> Result<JoinHandle<()>, LogError> {
        // Subscribed before loading, so nothing recorded in between is missed.
        let feed = self.log.as_ref().and_then(|log| log.follow());
        self.load(now_unix()).await?;
        let revocations = Arc::clone(self);
        Ok(tokio::spawn(async move {
            if let Some(feed) = feed {
                revocations.follow(feed).await;
            }
        }))
    }

    async fn follow(&self, mut feed: Box<dyn LogFeed>) {
        while let Some(change) = feed.next().await {
            match change {
                LogChange::Recorded(entry) => self.apply(&entry),
                LogChange::Missed => self.reload().await,
            }
        }
    }

    /// Loads until the log answers, waiting longer after each failure.
    async fn reload(&self) {
        let mut backoff = RELOAD_BACKOFF.0;
        while let Err(error) = self.load(now_unix()).await {
            tracing::warn!(%error, "cannot reload the deleted sessions; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RELOAD_BACKOFF.1);
        }
    }

    /// Adds the log's unexpired entries; returns how many it had.
    async fn load(&self, now_unix: u64) -> Result<usize, LogError> {
        let Some(log) = &self.log else { return Ok(0) };
        let entries = log.unexpired(now_unix).await?;
        entries.iter().for_each(|entry| self.apply(entry));
        Ok(entries.len())
    }

    /// Keeps an entry heard from the log, whatever the bound (see the module rules).
    fn apply(&self, entry: &LogEntry) {
        match SessionRef::from_hex(&entry.session) {
            Some(id) => self.revoked.lock().insert(id, entry.expires_at, None),
            None => tracing::warn!(session = %entry.session, "ignored a revocation of an id this gateway never issues"),
        }
    }
}

#[cfg(test)]
#[path = "revocations_tests.rs"]
mod tests;
