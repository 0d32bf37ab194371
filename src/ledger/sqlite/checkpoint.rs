//! Background WAL checkpoints, on a connection and thread of their own.
//!
//! Rules: a checkpoint copies the write-ahead log into the database file and syncs it, which takes milliseconds;
//! left to SQLite's automatic checkpoint it would run on the worker, inside some unlucky caller's claim. Here a
//! passive checkpoint (it never blocks readers or writers) runs at most every [`CHECKPOINT_EVERY`] while the
//! worker writes, and never while the store is idle: the thread sleeps on its channel until the worker reports
//! a batch ([`Checkpointer::wrote`]). The worker's automatic checkpoint only remains as a bound on the log's size
//! should this thread fall behind. Failures are ignored: the next round tries again, and the worker reports
//! real problems. The thread ends once the worker has dropped its [`Checkpointer`].

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// The shortest time between two checkpoints.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// The worker's handle on the checkpoint thread; dropping it stops the thread.
#[derive(Debug)]
pub(super) struct Checkpointer {
    wrote: mpsc::SyncSender<()>,
}

impl Checkpointer {
    /// Starts checkpointing `path`; `None` when no thread could be started (the worker then checkpoints alone).
    pub(super) fn start(path: PathBuf) -> Option<Checkpointer> {
        // One slot: a write reported while one is already due adds nothing.
        let (wrote, writes) = mpsc::sync_channel::<()>(1);
        let spawned = thread::Builder::new().name("switchyard-ledger-checkpoint".to_owned()).spawn(move || {
            let Ok(conn) = Connection::open(&path) else {
                return;
            };
            while writes.recv().is_ok() {
                let due = Instant::now() + CHECKPOINT_EVERY;
                // Writes reported meanwhile are covered by this checkpoint; a closing store gets it at once.
                loop {
                    match writes.recv_timeout(due.saturating_duration_since(Instant::now())) {
                        Ok(()) if Instant::now() < due => {}
                        Ok(()) | Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                    }
                }
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        });
        spawned.ok().map(|_| Checkpointer { wrote })
    }

    /// Reports that the worker ran a batch; never blocks.
    pub(super) fn wrote(&self) {
        let _ = self.wrote.try_send(());
    }
}
