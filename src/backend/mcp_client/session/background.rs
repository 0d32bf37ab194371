//! The one background stream a slot's session keeps open: a 2025-era session's standalone `GET` stream
//! ([`super::standalone`]) or a 2026-07-28 slot's resource `subscriptions/listen` stream
//! ([`super::subscriptions`]), tagged with the generation of the session it belongs to.
//!
//! Rules: a stream started for a session replaces (aborts) one of an older session; dropping the holder (the slot
//! left the table) aborts its stream.

use parking_lot::Mutex;
use tokio::task::AbortHandle;

#[derive(Default)]
pub(crate) struct BackgroundStream(Mutex<Option<(u64, AbortHandle)>>);

impl Drop for BackgroundStream {
    fn drop(&mut self) {
        self.stop();
    }
}

impl BackgroundStream {
    /// Starts a stream for the session of `generation` unless one is running for it.
    pub(crate) fn ensure(&self, generation: u64, start: impl FnOnce() -> AbortHandle) {
        let mut running = self.0.lock();
        if running.as_ref().is_some_and(|(of, handle)| *of == generation && !handle.is_finished()) {
            return;
        }
        install(&mut running, Some((generation, start())));
    }

    /// Starts a stream for the session of `generation` in place of any running one.
    pub(crate) fn replace(&self, generation: u64, start: impl FnOnce() -> AbortHandle) {
        install(&mut self.0.lock(), Some((generation, start())));
    }

    /// Stops the running stream, if any.
    pub(crate) fn stop(&self) {
        install(&mut self.0.lock(), None);
    }
}

/// Puts `new` in the running stream's place, stopping the one it replaces.
fn install(running: &mut Option<(u64, AbortHandle)>, new: Option<(u64, AbortHandle)>) {
    if let Some((_, old)) = std::mem::replace(running, new) {
        old.abort();
    }
}
