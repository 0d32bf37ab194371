//! Background WAL checkpoints, on a connection and thread of their own.
//!
//! Rules: a checkpoint copies the write-ahead log into the database file and syncs it, which takes milliseconds;
//! left to SQLite's automatic checkpoint it would run on the worker, inside some unlucky caller's claim. Here a
//! passive checkpoint (it never blocks readers or writers) runs at most every [`CHECKPOINT_EVERY`] while the
//! worker writes, and never while the store is idle: the thread sleeps on its channel until the worker reports
//! a batch ([`Checkpointer::wrote`]), then sleeps (parked, not receiving) until the checkpoint is due, so the
//! batches reported meanwhile fill the channel's one slot instead of waking it once each (at one connection that
//! was a wake-up per call). The worker's automatic checkpoint only remains as a bound on the log's size
//! should this thread fall behind. Failures are ignored: the next round tries again, and the worker reports
//! real problems. The thread ends once the worker has dropped its [`Checkpointer`] (which wakes it).

use std::path::PathBuf;
use std::sync::mpsc::{self, TryRecvError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// The shortest time between two checkpoints.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// The worker's handle on the checkpoint thread; dropping it stops the thread.
#[derive(Debug)]
pub(super) struct Checkpointer {
    /// Dropped first when the handle is, so the woken thread sees the channel closed.
    wrote: Option<mpsc::SyncSender<()>>,
    thread: Thread,
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
                let open = wait_until(Instant::now() + CHECKPOINT_EVERY, &writes);
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                if !open {
                    return;
                }
            }
        });
        spawned.ok().map(|handle| Checkpointer { wrote: Some(wrote), thread: handle.thread().clone() })
    }

    /// Reports that the worker ran a batch; never blocks.
    pub(super) fn wrote(&self) {
        if let Some(wrote) = &self.wrote {
            let _ = wrote.try_send(());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.wrote = None;
        self.thread.unpark();
    }
}

/// Sleeps until `due` without receiving (writes reported meanwhile are covered by the coming checkpoint and
/// wait in the slot); returns early, `false`, once the worker has gone, so a closing store gets it at once.
fn wait_until(due: Instant, writes: &mpsc::Receiver<()>) -> bool {
    loop {
        let now = Instant::now();
        if now >= due {
            // This checkpoint covers the write waiting in the slot.
            return !matches!(writes.try_recv(), Err(TryRecvError::Disconnected));
        }
        thread::park_timeout(due - now);
        // Woken early: by the closing handle, or spuriously.
        if let Err(TryRecvError::Disconnected) = writes.try_recv() {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::tests::scratch_dir;

    #[test]
    fn reported_writes_are_checkpointed_into_the_file() {
        let dir = scratch_dir("checkpoint");
        let path = dir.join("wal.db");
        let writer = Connection::open(&path).expect("open");
        let mode: String = writer.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).expect("wal");
        assert_eq!(mode, "wal");
        writer.pragma_update(None, "wal_autocheckpoint", 0).expect("no automatic checkpoint");
        let rows = "CREATE TABLE t (x); \
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) \
            INSERT INTO t SELECT randomblob(1000) FROM n;";
        writer.execute_batch(rows).expect("write");
        let file_size = || std::fs::metadata(&path).map_or(0, |meta| meta.len());
        // The rows (about 100 KB) are in the log only; a checkpoint copies them into the file.
        let before = file_size();
        assert!(before < 50_000, "the rows are not in the file yet: {before} bytes");
        let checkpointer = Checkpointer::start(path.clone()).expect("started");
        for _ in 0..100 {
            checkpointer.wrote();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while file_size() <= before {
            assert!(Instant::now() < deadline, "the log was never checkpointed into the file");
            thread::sleep(Duration::from_millis(10));
        }
        drop(checkpointer);
        let _ = std::fs::remove_dir_all(dir);
    }
}
