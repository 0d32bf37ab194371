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
//!
//! A passive checkpoint never catches up with a writer that keeps appending, and a log is only rewound (started
//! again from its beginning) by a write that began its transaction with all of it checkpointed. SQLite's automatic
//! checkpoint, which does that, ran on the worker's path with up to a round's worth of log left to copy, and every
//! caller waited for it (docs/ledger.md, *The log is rewound between batches*). So the thread checkpoints again and
//! again, each time copying what was appended during the last, until one had at most [`REWIND_TAIL_BYTES`] to
//! copy; it then marks a rewind due, and the worker, between two batches, checkpoints the short tail appended
//! since ([`rewind`]), so that its next write starts the log again.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// The shortest time between two checkpoints.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// About the most of the log the worker is left to checkpoint when it rewinds it: a hundred-odd pages, a
/// millisecond or two of the worker's time with the two `fsync`s.
const REWIND_TAIL_BYTES: i64 = 256 << 10;
/// The most passive checkpoints run back to back, each copying what was appended during the one before, to bring
/// that under [`REWIND_TAIL_BYTES`].
const CATCH_UP_ROUNDS: usize = 16;

/// The worker's handle on the checkpoint thread; dropping it stops the thread.
#[derive(Debug)]
pub(super) struct Checkpointer {
    /// Dropped first when the handle is, so the woken thread sees the channel closed.
    wrote: Option<mpsc::SyncSender<()>>,
    thread: Thread,
    /// Set by the thread when the log's unchecked tail is short; taken by the worker.
    rewind_due: Arc<AtomicBool>,
}

impl Checkpointer {
    /// Starts checkpointing `path`; `None` when no thread could be started (the worker then checkpoints alone).
    pub(super) fn start(path: PathBuf) -> Option<Checkpointer> {
        // One slot: a write reported while one is already due adds nothing.
        let (wrote, writes) = mpsc::sync_channel::<()>(1);
        let rewind_due = Arc::new(AtomicBool::new(false));
        let due = rewind_due.clone();
        let spawned = thread::Builder::new().name("switchyard-ledger-checkpoint".to_owned()).spawn(move || {
            let Ok(conn) = Connection::open(&path) else {
                return;
            };
            let page_size: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0)).unwrap_or(4096);
            let tail = REWIND_TAIL_BYTES / page_size.max(512);
            while writes.recv().is_ok() {
                let open = wait_until(Instant::now() + CHECKPOINT_EVERY, &writes);
                if catch_up(&conn, tail) {
                    due.store(true, Ordering::Release);
                }
                if !open {
                    return;
                }
            }
        });
        spawned.ok().map(|handle| Checkpointer { wrote: Some(wrote), thread: handle.thread().clone(), rewind_due })
    }

    /// Whether the thread left only a short tail of the log unchecked since this was last asked: then the worker
    /// should [`rewind`] it.
    pub(super) fn take_rewind(&self) -> bool {
        self.rewind_due.load(Ordering::Relaxed) && self.rewind_due.swap(false, Ordering::Acquire)
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

/// On the worker, between batches: checkpoints the log's tail on `conn`, the writer's connection, so that nothing
/// is appended meanwhile and the next write starts the log again. Failures are ignored, as the thread's are.
pub(super) fn rewind(conn: &Connection) {
    let _ = passive_checkpoint(conn);
}

/// Runs passive checkpoints back to back, at most [`CATCH_UP_ROUNDS`] of them, until one had at most `tail`
/// frames to copy: it was short, so the worker has about as few left. Returns whether the worker should now rewind
/// the log; it should even when nothing is left, since the worker, writing batch after batch, has nearly always
/// begun its next transaction before a checkpoint ends.
fn catch_up(conn: &Connection, tail: i64) -> bool {
    let mut copied_to = None;
    for _ in 0..CATCH_UP_ROUNDS {
        let Ok((log, checkpointed)) = passive_checkpoint(conn) else {
            return false;
        };
        // A log shorter than the last round saw was started again meanwhile, and this round copied all of it.
        let short = copied_to.is_some_and(|previous: i64| log - previous <= tail);
        if log > 0 && checkpointed == log && short {
            return true;
        }
        copied_to = Some(log);
    }
    false
}

/// A passive checkpoint: the frames in the log and how many of them are now in the file (both -1 when the file
/// is not in WAL mode).
fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| Ok((row.get(1)?, row.get(2)?)))
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

    /// A connection to a new file at `path` in WAL mode, without SQLite's automatic checkpoint: its log is copied
    /// into the file only when a test checkpoints it.
    fn wal_writer(path: &std::path::Path) -> Connection {
        let writer = Connection::open(path).expect("open");
        let mode: String = writer.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).expect("wal");
        assert_eq!(mode, "wal");
        writer.pragma_update(None, "wal_autocheckpoint", 0).expect("no automatic checkpoint");
        writer
    }

    #[test]
    fn reported_writes_are_checkpointed_into_the_file() {
        let dir = scratch_dir("checkpoint");
        let path = dir.join("wal.db");
        let writer = wal_writer(&path);
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
        // Nothing was appended during its second round, so a rewind is due.
        while !checkpointer.take_rewind() {
            assert!(Instant::now() < deadline, "no rewind was marked due");
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!checkpointer.take_rewind(), "taken once");
        drop(checkpointer);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The log's salt, which SQLite changes whenever it starts the log again from its beginning.
    fn log_salt(path: &std::path::Path) -> Vec<u8> {
        let header = std::fs::read(path.with_extension("db-wal")).expect("the log");
        header[16..24].to_vec()
    }

    #[test]
    fn a_writer_that_began_before_the_catch_up_keeps_appending_until_it_rewinds() {
        let dir = scratch_dir("rewind");
        let path = dir.join("wal.db");
        let writer = wal_writer(&path);
        writer.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (randomblob(5000))").expect("write");
        let insert = "INSERT INTO t VALUES (randomblob(100))";

        // The worker has begun its next transaction when the thread catches up, as it nearly always has.
        writer.execute_batch("BEGIN IMMEDIATE").expect("begin");
        let checkpointer = Connection::open(&path).expect("open");
        assert!(catch_up(&checkpointer, 0), "a second round found nothing new: a rewind is due");
        let salt = log_salt(&path);
        writer.execute_batch(&format!("{insert}; COMMIT")).expect("commit");
        writer.execute(insert, []).expect("write");
        assert_eq!(log_salt(&path), salt, "the log was not started again: the writer began before it was copied");

        rewind(&writer);
        writer.execute(insert, []).expect("write");
        assert_ne!(log_salt(&path), salt, "the write after the rewind started the log again");
        let rows: i64 = checkpointer.query_row("SELECT count(*) FROM t", [], |row| row.get(0)).expect("count");
        assert_eq!(rows, 4, "every row is kept");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn no_rewind_is_due_for_a_file_without_a_log() {
        let dir = scratch_dir("rewind-no-log");
        let conn = Connection::open(dir.join("plain.db")).expect("open");
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1)").expect("write");
        assert!(!catch_up(&conn, 0), "a rollback-journal file has no log to rewind");
        let _ = std::fs::remove_dir_all(dir);
    }
}
