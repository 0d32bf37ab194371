//! Background WAL checkpoints, on a connection and thread of their own.
//!
//! Rules: a checkpoint copies the write-ahead log into the database file and syncs it, which takes milliseconds;
//! left to SQLite's automatic checkpoint it would run on the worker, inside some unlucky caller's claim. Here a
//! passive checkpoint (it never blocks readers or writers) runs every [`CHECKPOINT_EVERY`] instead, and the
//! worker's automatic checkpoint only remains as a bound on the log's size should this thread fall behind.
//! Failures are ignored: the next round tries again, and the worker reports real problems. The thread ends when
//! the store is dropped (its stop channel disconnects).

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use rusqlite::Connection;

/// How often the log is checkpointed.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// Dropping it stops the checkpoint thread.
#[derive(Debug)]
pub(super) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing `path`; `None` when no thread could be started (the worker then checkpoints alone).
    pub(super) fn start(path: PathBuf) -> Option<Checkpointer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = thread::Builder::new().name("switchyard-ledger-checkpoint".to_owned()).spawn(move || {
            let Ok(conn) = Connection::open(&path) else {
                return;
            };
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY) {
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        });
        spawned.ok().map(|_| Checkpointer { _stop: stop })
    }
}
