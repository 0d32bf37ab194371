//! The lifetime rules of stdio backend processes in the session table.
//!
//! Rules:
//! - Caps: at most `max_processes` live processes per backend and `max_stdio_processes` in the whole gateway.
//!   A session takes a [`ProcessPermit`] before its process starts and holds it until it is dropped. When a cap
//!   is reached, the idle slot of that backend (for the global cap: of any stdio backend) used longest ago gives
//!   up its process; when there is none the call is refused as `NotDelivered` — a busy process is never stopped.
//!
//! Which idle process gives up its place is the session table's to say (the caller passes it as `recycle`);
//! idle reaping is the table's too.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::backend::mcp_client::error::{McpError, NotDeliveredCause};
use crate::backend::stdio::StdioBackend;

/// Live processes, per backend and in all.
pub(crate) struct ProcessCounts {
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
pub(crate) enum Full {
    Backend(usize),
    Global(usize),
}

/// One live process counted against its caps; dropping it releases its place.
pub(crate) struct ProcessPermit {
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
    pub(crate) fn new(global_cap: usize) -> Arc<Self> {
        Arc::new(Self { global_cap: AtomicUsize::new(global_cap.max(1)), live: Mutex::default() })
    }

    pub(crate) fn set_global_cap(&self, cap: usize) {
        self.global_cap.store(cap.max(1), Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Live> {
        self.live.lock()
    }

    /// How many processes of each backend are live (started and not yet stopped).
    pub(crate) fn live(&self) -> HashMap<Arc<str>, usize> {
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

    /// A place for one more process of `backend`; when a cap is `Full`, `recycle` stops an idle process that
    /// counts against it (false: there is none).
    pub(crate) fn permit(
        self: &Arc<Self>,
        backend: &StdioBackend,
        recycle: &(dyn Fn(&Full) -> bool + Sync),
    ) -> Result<ProcessPermit, McpError> {
        loop {
            let full = match self.admit(&backend.name, backend.max_processes) {
                Ok(permit) => return Ok(permit),
                Err(full) => full,
            };
            if !recycle(&full) {
                let reason = match full {
                    Full::Backend(cap) => {
                        format!("all {cap} processes of backend `{}` are busy (max_processes)", backend.name)
                    }
                    Full::Global(cap) => format!("all {cap} stdio backend processes are busy (max_stdio_processes)"),
                };
                return Err(McpError::NotDelivered { cause: NotDeliveredCause::NoRoom, reason: reason.into() });
            }
        }
    }
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
