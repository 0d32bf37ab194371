//! Sessions ended before their ids expire (`DELETE /mcp`): later use
//! of that id gets 404, from a bounded, time-limited revocation list shared through the ledger store when shared.
//!
//! Owns: the in-memory list every request is checked against ([`Revocations`]), and the front's view of the
//! durable, shared log behind it ([`RevocationLog`], implemented over the ledger by the composition root).
//!
//! Rules:
//! - A deleted session never comes back. An entry lives until its session's own expiry (issue time +
//!   `session_ttl`), after which the id no longer opens anyway; only then is it purged. Nothing else removes one.
//! - The list is bounded by `server.max_revocations`. When it is full, a new deletion is refused (the `DELETE`
//!   fails and says so; the session stays valid until it expires) and so is a new session (`initialize`), until
//!   entries expire: refusing is visible and temporary, forgetting a deletion would be silent and would revive a
//!   session its owner ended. Entries heard from the log (a restart's load, other replicas) are always kept, so
//!   replicas with a smaller bound can hold more than theirs.
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
    #[error("the deletion could not be recorded: {0}")]
    Log(LogError),
}

/// The sessions deleted before their expiry; see the module rules.
pub struct Revocations {
    capacity: usize,
    revoked: Mutex<RevokedSet>,
    log: Option<Arc<dyn RevocationLog>>,
}

impl std::fmt::Debug for Revocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocations").field("capacity", &self.capacity).field("len", &self.len()).finish()
    }
}

#[derive(Debug, Default)]
struct RevokedSet {
    expiry_of: HashMap<SessionRef, u64>,
    by_expiry: BTreeSet<(u64, SessionRef)>,
}

impl RevokedSet {
    /// Keeps the later expiry when `id` is already there.
    fn insert(&mut self, id: SessionRef, expires_at: u64) {
        let expires_at = match self.expiry_of.get(&id) {
            Some(&old) => {
                self.by_expiry.remove(&(old, id));
                old.max(expires_at)
            }
            None => expires_at,
        };
        self.expiry_of.insert(id, expires_at);
        self.by_expiry.insert((expires_at, id));
    }

    fn purge_expired(&mut self, now: u64) {
        while let Some(&(expires_at, id)) = self.by_expiry.first()
            && expires_at < now
        {
            self.by_expiry.pop_first();
            self.expiry_of.remove(&id);
        }
    }

    /// Whole seconds until the soonest entry expires and makes room.
    fn retry_after(&self, now: u64) -> u64 {
        self.by_expiry.first().map_or(1, |&(expires_at, _)| expires_at.saturating_sub(now) + 1)
    }
}

impl Revocations {
    /// A list of at most `capacity` own deletions (at least one), kept in this process only.
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), revoked: Mutex::default(), log: None }
    }

    /// A list whose deletions are recorded in, and followed from, `log`.
    pub fn shared(capacity: usize, log: Arc<dyn RevocationLog>) -> Self {
        Self { log: Some(log), ..Self::new(capacity) }
    }

    /// Refuses `id` from now until `expires_at_unix` (see [`super::session::Sealer::expires_at`]), here and, once
    /// this returns, wherever the log is shared.
    pub async fn revoke(&self, id: SessionRef, expires_at_unix: u64, now_unix: u64) -> Result<(), RevokeError> {
        self.room(now_unix)?;
        if let Some(log) = &self.log {
            let entry = LogEntry { session: id.to_string(), expires_at: expires_at_unix };
            log.record(entry).await.map_err(RevokeError::Log)?;
        }
        self.revoked.lock().insert(id, expires_at_unix);
        Ok(())
    }

    /// `Ok` while the list has room for another deletion, and so for another session.
    pub fn room(&self, now_unix: u64) -> Result<(), RevokeError> {
        let mut revoked = self.revoked.lock();
        revoked.purge_expired(now_unix);
        if revoked.expiry_of.len() < self.capacity {
            return Ok(());
        }
        Err(RevokeError::Full { capacity: self.capacity, retry_after: revoked.retry_after(now_unix) })
    }

    pub fn is_revoked(&self, id: &SessionRef, now_unix: u64) -> bool {
        let mut revoked = self.revoked.lock();
        revoked.purge_expired(now_unix);
        revoked.expiry_of.contains_key(id)
    }

    /// The number of entries, expired ones not yet purged included.
    pub fn len(&self) -> usize {
        self.revoked.lock().expiry_of.len()
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
            Some(id) => self.revoked.lock().insert(id, entry.expires_at),
            None => tracing::warn!(session = %entry.session, "ignored a revocation of an id this gateway never issues"),
        }
    }
}

#[cfg(test)]
#[path = "revocations_tests.rs"]
mod tests;
