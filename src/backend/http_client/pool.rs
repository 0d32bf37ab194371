//! The idle connections of one client, by scheme and authority.
//!
//! Rules:
//! - The most recently used connection is taken first (its socket and buffers are warm); connections idle for
//!   longer than [`IDLE_FOR`] are dropped whenever their backend's list is touched, and by one sweep task per
//!   client every third of that ([`sweep_while_alive`]), so a backend nobody calls any more keeps no socket open.
//! - At most [`MAX_IDLE`] connections per backend are kept; one more is closed instead.
//! - Connections are dropped (closed) outside the lock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Uri;
use http::uri::{Authority, Scheme};
use parking_lot::Mutex;

use super::conn::Conn;

/// How long an idle connection is kept.
pub(super) const IDLE_FOR: Duration = Duration::from_secs(90);
/// The most idle connections kept per backend: more than any agent concurrency the gateway serves at once.
pub(super) const MAX_IDLE: usize = 1024;

/// Which connections can carry a request: same scheme, same authority.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) scheme: Scheme,
    pub(super) authority: Authority,
}

impl Key {
    /// A failure to connect to this key's host and port.
    pub(super) fn connect_error(&self, source: Box<dyn std::error::Error + Send + Sync>) -> super::SendError {
        super::SendError::Connect { address: self.authority.to_string(), source }
    }

    /// The key of an absolute URI; `None` for one without scheme or authority.
    pub(super) fn of(uri: &Uri) -> Option<Key> {
        Some(Key { scheme: uri.scheme()?.clone(), authority: uri.authority()?.clone() })
    }
}

struct Idle {
    conn: Box<Conn>,
    since: Instant,
}

/// The idle connections, newest at the back of each list.
pub(super) struct Pool {
    idle: Mutex<HashMap<Key, VecDeque<Idle>>>,
    /// How long an idle connection is kept ([`IDLE_FOR`], shorter in tests).
    idle_for: Duration,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::keeping_idle_for(IDLE_FOR)
    }
}

/// Sweeps `pool` every third of its idle time until the pool is dropped (nothing without a Tokio runtime).
pub(super) fn sweep_while_alive(pool: &Arc<Pool>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let (every, pool) = (pool.idle_for / 3, Arc::downgrade(pool));
    runtime.spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let Some(pool) = pool.upgrade() else { return };
            pool.sweep();
        }
    });
}

impl Pool {
    pub(super) fn keeping_idle_for(idle_for: Duration) -> Pool {
        Pool { idle: Mutex::default(), idle_for }
    }

    /// Drops the connections idle for too long, of every backend.
    fn sweep(&self) {
        let mut expired = Vec::new();
        {
            let mut idle = self.idle.lock();
            for list in idle.values_mut() {
                self.drain_expired(list, &mut expired);
            }
            idle.retain(|_, list| !list.is_empty());
        }
        drop(expired);
    }

    /// The most recently returned connection to `key`'s backend, if one is still fresh.
    pub(super) fn take(&self, key: &Key) -> Option<Box<Conn>> {
        let mut expired = Vec::new();
        let conn = {
            let mut idle = self.idle.lock();
            let list = idle.get_mut(key)?;
            self.drain_expired(list, &mut expired);
            list.pop_back().map(|idle| idle.conn)
        };
        drop(expired);
        conn
    }

    /// Keeps `conn` for the next request to `key`'s backend, unless it cannot carry one or the list is full.
    pub(super) fn put(&self, key: &Key, conn: Box<Conn>) {
        if !conn.reusable() {
            return;
        }
        let mut expired = Vec::new();
        let refused = {
            let mut idle = self.idle.lock();
            let list = match idle.get_mut(key) {
                Some(list) => list,
                None => idle.entry(key.clone()).or_default(),
            };
            self.drain_expired(list, &mut expired);
            if list.len() < MAX_IDLE {
                list.push_back(Idle { conn, since: Instant::now() });
                None
            } else {
                Some(conn)
            }
        };
        drop((expired, refused));
    }

    /// How many idle connections `key`'s backend has.
    #[cfg(test)]
    pub(super) fn idle(&self, key: &Key) -> usize {
        self.idle.lock().get(key).map_or(0, VecDeque::len)
    }
}

impl Pool {
    /// Moves the connections idle for too long (at the front: oldest first) into `expired`.
    fn drain_expired(&self, list: &mut VecDeque<Idle>, expired: &mut Vec<Idle>) {
        while list.front().is_some_and(|idle| idle.since.elapsed() > self.idle_for) {
            expired.extend(list.pop_front());
        }
    }
}
