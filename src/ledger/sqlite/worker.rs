//! The thread that writes to the SQLite connection: it opens and migrates the file, then sleeps on its queue and
//! runs the jobs the async side sends it (committing those that queue up together at once, see
//! [`batch`](super::batch)), answering each once its transaction committed.
//!
//! Rules:
//! - Completions nobody waits for are parked beside the queue without waking the thread
//!   ([`Worker::park`], see [`crate::ledger::background`]); the thread takes them with the next job it wakes
//!   for, or when [`Nudger`] or the store nudges it (a `None` on the queue).
//! - SQLite calls block, so they run on this thread, not the async runtime; one dedicated thread (rather than
//!   `spawn_blocking` per call) keeps the connection, its prepared-statement cache and its page cache warm, and
//!   costs one channel hop each way. The one exception is a caller alone, which commits its own small
//!   transaction when the connection and the file's write lock are free at once ([`alone`](super::alone)).
//! - A missing file (and its directory) is created private, 0600 (0700): [`crate::private_files`].
//! - A file this store creates has pages of [`NEW_FILE_PAGE_SIZE`]; one that exists keeps its own.
//! - The file is opened in WAL mode with `synchronous = NORMAL` (a commit survives a process crash; a power loss
//!   may lose the last commits but never corrupts the file) and a busy timeout, so several processes can share it;
//!   through [`crate::sys::sqlite_log`], which writes a commit's log frames in one system call.
//! - The schema version is `PRAGMA user_version`, checked and migrated inside one `BEGIN IMMEDIATE` transaction
//!   so two processes opening a new file at once do not both create it; the same transaction makes the
//!   definition changes that leave the stored bytes alone ([`schema`](super::schema)).
//! - WAL checkpoints run on a thread of their own ([`Checkpointer`]), off the callers' path, started and stopped
//!   by this thread; only the short tail of the log that rewinds it is checkpointed here, between two batches
//!   (see [`checkpoint`](super::checkpoint)).
//! - When the store is dropped the job channel closes and the thread ends, after applying what is still parked,
//!   closing the connection.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};
use tokio::sync::oneshot;

use super::alone::{self, Solitude};
use super::batch::{Job, Ran, Reply, Served, Writes, serve};
use super::checkpoint::Checkpointer;
use super::schema;
use crate::ledger::announcements;
use crate::ledger::approvals::{self, APPROVALS_TABLE};
use crate::ledger::backend_tokens::{self, BACKEND_TOKENS_TABLE};
use crate::ledger::background::{Nudger, Parked, Parking};
use crate::ledger::error::LedgerError;
use crate::ledger::limit_counters::{self, LIMIT_COUNTERS_TABLE};
use crate::ledger::pins::{self, PINS_TABLE};
use crate::ledger::resolutions;
use crate::ledger::revocations::{self, REVOCATIONS_TABLE};
use crate::ledger::sql::{CLAIMS_TABLE, Dialect, SCHEMA_VERSION, Statements, create_statements};
use crate::ledger::stats::WriterStats;

/// How long a statement waits for another process's write lock before the store reports it unavailable.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// The log size at which the worker checkpoints itself: only reached if [`Checkpointer`] falls behind. SQLite
/// counts it in pages, so it is divided by the file's page size (32 MiB whatever size the file has).
const AUTOCHECKPOINT_BYTES: u32 = 32 << 20;
/// The page size of a file this store creates. Every commit writes each page it dirtied (a claim's row, its
/// key's index leaf and two more index leaves) whole to the log, checksummed and copied, so halving the default
/// 4 KiB cuts a claim's commit cost. 1 KiB writes less still per commit, but on a table of millions of claims
/// its deeper trees cost the writer more than that saves (BENCHMARKS.md, *PostgreSQL: the trigger's WHEN clause
/// and the key's collation*, where the trial is recorded). A file that exists keeps its page size (SQLite only
/// applies it to an empty file, and never in WAL mode).
pub(super) const NEW_FILE_PAGE_SIZE: u32 = 2048;

/// The connection and the statements it runs.
pub(super) struct Db {
    pub(super) conn: Connection,
    pub(super) sql: Statements,
}

/// The async side's handle on the thread.
pub(super) struct Worker {
    queue: Queue,
    served: Arc<Served>,
    _nudger: Nudger,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("parking", &self.served.parking).finish_non_exhaustive()
    }
}

/// Where jobs are sent; cheap to clone and usable from any thread, with or without a runtime. `None` nudges the
/// thread to take the parked jobs.
#[derive(Debug, Clone)]
pub(super) struct Queue {
    jobs: mpsc::Sender<Option<Job>>,
}

impl Worker {
    /// Starts the thread and waits until the file is open and migrated; parked jobs wait at most `linger`.
    pub(super) async fn start(path: PathBuf, linger: Duration) -> Result<Worker, LedgerError> {
        let (jobs, queue) = mpsc::channel();
        let (ready, opened) = oneshot::channel();
        let parking = Arc::new(Parking::new(linger));
        let parked = parking.clone();
        thread::Builder::new()
            .name("switchyard-ledger".to_owned())
            .spawn(move || match open(&path) {
                Ok(db) => {
                    let served = Arc::new(Served {
                        db: Mutex::new(db),
                        parking: parked,
                        counters: Arc::default(),
                        checkpointer: Checkpointer::start(path),
                        solitude: Solitude::default(),
                    });
                    // The opener may have given up waiting; then there is nobody to serve.
                    if ready.send(Ok(served.clone())).is_ok() {
                        serve(&queue, &served);
                    }
                }
                Err(error) => {
                    let _ = ready.send(Err(error));
                }
            })
            .map_err(|error| LedgerError::unavailable(format!("cannot start the SQLite thread: {error}")))?;
        let served =
            opened.await.map_err(|_| LedgerError::unavailable("the SQLite thread stopped while opening"))??;
        let queue = Queue { jobs };
        let _nudger = {
            let queue = queue.clone();
            Nudger::start(parking.clone(), move || queue.nudge(&parking))
        };
        Ok(Worker { queue, served, _nudger })
    }

    pub(super) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Parks `job` (see [`crate::ledger::background`]): it runs with the next job the thread wakes for, within
    /// the linger at the latest; `answer` gets its outcome once its transaction committed.
    pub(super) fn park<F, A>(&self, job: F, answer: A)
    where
        F: FnOnce(&mut Db) -> Result<(), LedgerError> + Send + 'static,
        A: FnOnce(Result<(), LedgerError>) + Send + 'static,
    {
        if self.served.parking.park(Queue::job(Writes::One, job, answer)) == Parked::Full {
            self.nudge();
        }
    }

    /// Has the thread apply the parked jobs now.
    pub(super) fn nudge(&self) {
        self.queue.nudge(&self.served.parking);
    }

    /// What the thread did so far (see [`crate::ledger::stats`]).
    pub(super) fn stats(&self) -> WriterStats {
        self.served.counters.snapshot()
    }

    /// Runs `job` on the connection and returns its answer once its transaction committed.
    pub(super) async fn run<T, F>(&self, job: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
    {
        self.run_writing(Writes::Several, job).await
    }

    /// [`Worker::run`] for a job that writes at most one statement and fails only when it changed nothing (see
    /// [`Writes::One`]): claims and settles.
    pub(super) async fn run_one<T, F>(&self, job: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
    {
        self.run_writing(Writes::One, job).await
    }

    async fn run_writing<T, F>(&self, writes: Writes, job: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        // The caller may have been cancelled; its answer is then not needed.
        let job = Queue::job(writes, job, move |outcome| drop(reply.send(outcome)));
        // Counted until answered, so callers arriving meanwhile are not alone.
        let arrival = self.served.solitude.arrive();
        // Only claims and settles (one statement each); purges, lists and renewals can take longer.
        let left =
            if writes == Writes::One && arrival.alone() { alone::run_here(&self.served, job) } else { Some(job) };
        if let Some(job) = left {
            self.queue.send(job)?;
        }
        answer.await.map_err(|_| LedgerError::unavailable("the SQLite thread stopped during the operation"))?
    }
}

impl Queue {
    /// Queues `job`; `answer` gets its outcome once its transaction committed (or failed). Once queued, the job
    /// runs whether or not anyone still waits for it.
    pub(super) fn submit<T, F, A>(&self, job: F, answer: A) -> Result<(), LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
        A: FnOnce(Result<T, LedgerError>) + Send + 'static,
    {
        self.send(Self::job(Writes::Several, job, answer))
    }

    fn send(&self, job: Job) -> Result<(), LedgerError> {
        self.jobs.send(Some(job)).map_err(|_| LedgerError::unavailable("the SQLite thread has stopped"))
    }

    fn job<T, F, A>(writes: Writes, job: F, answer: A) -> Job
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
        A: FnOnce(Result<T, LedgerError>) + Send + 'static,
    {
        let run = Box::new(move |db: &mut Db| {
            let outcome = job(db);
            let failed = outcome.is_err();
            let reply: Reply = Box::new(move |committed: Result<(), LedgerError>| answer(committed.and(outcome)));
            Ran { failed, reply }
        });
        Job { queued: Instant::now(), writes, run }
    }

    /// Wakes the thread to take what is parked; if it has stopped, the parked jobs are dropped unanswered (their
    /// claims stay `in_flight`, to become `unknown`), so nobody waits for them.
    fn nudge(&self, parking: &Parking<Job>) {
        if self.jobs.send(None).is_err() {
            let mut lost = Vec::new();
            parking.take_into(&mut lost);
            if !lost.is_empty() {
                tracing::error!(settles = lost.len(), "ledger: the SQLite thread has stopped; queued settles are lost");
            }
        }
    }
}

/// Opens and migrates the file; errors name it.
fn open(path: &Path) -> Result<Db, LedgerError> {
    open_unnamed(path).map_err(|error| match error {
        LedgerError::Unavailable { cause } => {
            LedgerError::Unavailable { cause: format!("{}: {cause}", path.display()) }
        }
        LedgerError::Corrupt { cause } => LedgerError::Corrupt { cause: format!("{}: {cause}", path.display()) },
        other => other,
    })
}

fn open_unnamed(path: &Path) -> Result<Db, LedgerError> {
    create_parent(path)?;
    // SQLite would create the file 0644 (less the umask); made here first, 0600, it is private from the start, and
    // SQLite gives the `-wal` and `-shm` files it creates later the main file's mode.
    crate::private_files::create_file(path)
        .map_err(|error| LedgerError::unavailable(format!("cannot create the file: {error}")))?;
    let mut conn = match crate::sys::sqlite_log::vfs() {
        Some(vfs) => Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)?,
        None => Connection::open(path)?,
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // The gathering VFS's rule: a transaction's frames reach the log only at its commit (a batch's pages are few).
    conn.pragma_update(None, "cache_spill", false)?;
    // Before WAL mode is set: switching an empty file to WAL writes its first page, fixing the page size.
    conn.pragma_update(None, "page_size", NEW_FILE_PAGE_SIZE)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(LedgerError::unavailable(format!("cannot use WAL journaling (got {mode})")));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let page_size: u32 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    conn.pragma_update(None, "wal_autocheckpoint", AUTOCHECKPOINT_BYTES / page_size.max(512))?;
    conn.set_prepared_statement_cache_capacity(32);
    migrate(&mut conn)?;
    Ok(Db { conn, sql: Statements::new(CLAIMS_TABLE, Dialect::Sqlite) })
}

fn create_parent(path: &Path) -> Result<(), LedgerError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => crate::private_files::create_dir(parent).map_err(|error| {
            LedgerError::unavailable(format!("cannot create the directory {}: {error}", parent.display()))
        }),
        _ => Ok(()),
    }
}

fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    match version {
        0 => {
            for statement in create_statements(CLAIMS_TABLE, Dialect::Sqlite) {
                tx.execute_batch(&statement)?;
            }
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        SCHEMA_VERSION => {}
        found if found > SCHEMA_VERSION => {
            return Err(LedgerError::SchemaTooNew { found, supported: SCHEMA_VERSION });
        }
        found => return Err(LedgerError::corrupt(format!("impossible schema version {found}"))),
    }
    // Only speed depends on it: a file it cannot rewrite (a defensive build of SQLite, say) works as before.
    if let Err(error) = schema::rewrite_state_check(&tx) {
        tracing::warn!(%error, "ledger: cannot respell the claims' state constraint; claims stay slower to write");
    }
    for statement in revocations::create_statements(REVOCATIONS_TABLE, Dialect::Sqlite) {
        tx.execute_batch(&statement)?;
    }
    tx.execute_batch(&backend_tokens::create_statement(BACKEND_TOKENS_TABLE, Dialect::Sqlite))?;
    tx.execute_batch(&approvals::create_statement(APPROVALS_TABLE, Dialect::Sqlite))?;
    tx.execute_batch(&limit_counters::create_statement(LIMIT_COUNTERS_TABLE))?;
    tx.execute_batch(&pins::create_statement(PINS_TABLE))?;
    tx.execute_batch(&crate::ledger::tasks::create_statement(crate::ledger::tasks::TASKS_TABLE))?;
    for statement in resolutions::create_statements(resolutions::RESOLUTIONS_TABLE) {
        tx.execute_batch(&statement)?;
    }
    tx.execute_batch(&announcements::create_statement(announcements::ANNOUNCEMENTS_TABLE))?;
    tx.commit()?;
    Ok(())
}

impl From<rusqlite::Error> for LedgerError {
    fn from(error: rusqlite::Error) -> Self {
        let corrupt_file =
            matches!(error.sqlite_error_code(), Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase));
        let bad_value = matches!(
            error,
            rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
                | rusqlite::Error::Utf8Error(..)
        );
        if corrupt_file || bad_value {
            LedgerError::corrupt(format!("SQLite: {error}"))
        } else {
            LedgerError::unavailable(format!("SQLite: {error}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::tests::scratch_dir;

    #[test]
    fn the_writer_writes_a_commits_log_frames_at_once() {
        let dir = scratch_dir("gathered-log");
        let db = open(&dir.join("ledger.db")).expect("opens");
        let before = crate::sys::sqlite_log::log_writes(&db.conn).expect("its log goes through the gathering VFS");
        let spills: bool = db.conn.query_row("PRAGMA cache_spill", [], |row| row.get(0)).expect("cache_spill");
        assert!(!spills, "a transaction's frames are written at its commit only, as the VFS requires");
        // The first claim touches the table and each of its three indexes: four pages, eight writes without it.
        db.conn
            .execute(
                &format!(
                    "INSERT INTO {CLAIMS_TABLE} VALUES ('k', 'i', 'p', 's', 'b', 't', 'd', 'in_flight', NULL, NULL, \
                     NULL, 1, 2, 'gw', 3)"
                ),
                [],
            )
            .expect("a claim");
        let after = crate::sys::sqlite_log::log_writes(&db.conn).expect("still ours");
        assert_eq!(after - before, 1);
        let _ = std::fs::remove_dir_all(dir);
    }
}
