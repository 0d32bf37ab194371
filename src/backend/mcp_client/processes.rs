//! The lifetime rules of stdio backend processes in the session table.
//!
//! Rules:
//! - Caps: at most `max_processes` live processes per backend and `max_stdio_processes` in the whole gateway.
//!   A session takes a [`ProcessPermit`] before its process starts and holds it until it is dropped. When a cap
//!   is reached, the idle slot of that backend (for the global cap: of any stdio backend) used longest ago gives
//!   up its process; when there is none the call is refused as `NotDelivered` — a busy process is never stopped.
//! - Idle reaping: a process whose slot has had no call for `idle_timeout` is stopped (its slot stays, and the next
//!   call starts a fresh process); a slot in use is never reaped, whatever its age.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::NotDeliveredCause;
use super::table::Slot;
use super::{McpBackendClient, McpError};
use crate::backend::stdio::StdioBackend;

/// Live processes, per backend and in all.
pub(super) struct ProcessCounts {
    /// May change while processes run (a configuration reload); live ones above a lowered cap are not stopped.
    global_cap: AtomicUsize,
    live: Mutex<Live>,
}

#[derive(Default)]
struct Live {
    total: usize,
    per_backend: HashMap<Arc<str>, usize>,
}

/// Which cap is full.
#[derive(Debug, PartialEq, Eq)]
enum Full {
    Backend(usize),
    Global(usize),
}

/// One live process counted against its caps; dropping it releases its place.
pub(super) struct ProcessPermit {
    counts: Arc<ProcessCounts>,
    backend: Arc<str>,
}

impl Drop for ProcessPermit {
    fn drop(&mut self) {
        let mut live = self.counts.lock();
        live.total -= 1;
        if let Some(count) = live.per_backend.get_mut(&self.backend) {
            *count -= 1;
            if *count == 0 {
                live.per_backend.remove(&self.backend);
            }
        }
    }
}

impl ProcessCounts {
    pub(super) fn new(global_cap: usize) -> Arc<Self> {
        Arc::new(Self { global_cap: AtomicUsize::new(global_cap.max(1)), live: Mutex::default() })
    }

    pub(super) fn set_global_cap(&self, cap: usize) {
        self.global_cap.store(cap.max(1), Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Live> {
        // Every update is a few counter changes under the lock: a poisoned value is still consistent.
        self.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many processes of each backend are live (started and not yet stopped).
    pub(super) fn live(&self) -> HashMap<Arc<str>, usize> {
        self.lock().per_backend.clone()
    }

    fn admit(self: &Arc<Self>, backend: &Arc<str>, cap: usize) -> Result<ProcessPermit, Full> {
        let mut live = self.lock();
        if live.per_backend.get(backend).copied().unwrap_or(0) >= cap.max(1) {
            return Err(Full::Backend(cap));
        }
        let global_cap = self.global_cap.load(Ordering::Relaxed);
        if live.total >= global_cap {
            return Err(Full::Global(global_cap));
        }
        live.total += 1;
        *live.per_backend.entry(Arc::clone(backend)).or_default() += 1;
        Ok(ProcessPermit { counts: Arc::clone(self), backend: Arc::clone(backend) })
    }
}

impl McpBackendClient {
    /// A place for one more process of `backend`, recycling an idle process when a cap is full.
    pub(super) fn process_permit(&self, backend: &StdioBackend) -> Result<ProcessPermit, McpError> {
        loop {
            let full = match self.processes.admit(&backend.name, backend.max_processes) {
                Ok(permit) => return Ok(permit),
                Err(full) => full,
            };
            let recycled = match full {
                Full::Backend(_) => self.table.take_idle_session(|key, _| key.backend == backend.name),
                Full::Global(_) => self.table.take_idle_session(|_, session| session.process_id().is_some()),
            };
            // Dropped here, outside the table's lock: the process stops and its permit is released.
            if recycled.is_none() {
                let reason = match full {
                    Full::Backend(cap) => {
                        format!("all {cap} processes of backend `{}` are busy (max_processes)", backend.name)
                    }
                    Full::Global(cap) => format!("all {cap} stdio backend processes are busy (max_stdio_processes)"),
                };
                return Err(McpError::NotDelivered { cause: NotDeliveredCause::NoRoom, reason });
            }
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn caps_count_live_permits_per_backend_and_in_all() {
        let counts = ProcessCounts::new(3);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let first = counts.admit(&a, 2).expect("room");
        let second = counts.admit(&a, 2).expect("room");
        assert_eq!(counts.admit(&a, 2).err(), Some(Full::Backend(2)));
        let third = counts.admit(&b, 2).expect("another backend has room");
        assert_eq!(counts.admit(&b, 2).err(), Some(Full::Global(3)));
        drop(first);
        assert!(counts.admit(&b, 2).is_ok(), "a dropped permit frees its place");
        drop((second, third));
        assert_eq!(counts.lock().total, 0);
        assert!(counts.lock().per_backend.is_empty());
    }
}
