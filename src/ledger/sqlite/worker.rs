//! The thread that owns the SQLite connection: it opens and migrates the file, then runs the jobs the async side
//! sends it (committing those that queue up together at once, see [`batch`](super::batch)) and answers each
//! through a oneshot channel.
//!
//! Rules:
//! - SQLite calls block, so none runs on the async runtime; one dedicated thread (rather than `spawn_blocking`
//!   per call) keeps the connection, its prepared-statement cache and its page cache warm, and costs one
//!   channel hop each way.
//! - The file is opened in WAL mode with `synchronous = NORMAL` (a commit survives a process crash; a power loss
//!   may lose the last commits but never corrupts the file) and a busy timeout, so several processes can share it.
//! - The schema version is `PRAGMA user_version`, checked and migrated inside one `BEGIN IMMEDIATE` transaction
//!   so two processes opening a new file at once do not both create it.
//! - WAL checkpoints run on a thread of their own ([`Checkpointer`]), off the callers' path.
//! - When the store is dropped the job channel closes and the thread ends, closing the connection.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};
use tokio::sync::oneshot;

use super::batch::{Job, serve};
use super::checkpoint::Checkpointer;
use crate::ledger::backend_tokens::{self, BACKEND_TOKENS_TABLE};
use crate::ledger::error::LedgerError;
use crate::ledger::revocations::{self, REVOCATIONS_TABLE};
use crate::ledger::sql::{CLAIMS_TABLE, Dialect, SCHEMA_VERSION, Statements, create_statements};

/// How long a statement waits for another process's write lock before the store reports it unavailable.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// The log size (in pages) at which the worker checkpoints itself: only reached if [`Checkpointer`] falls behind.
const AUTOCHECKPOINT_PAGES: u32 = 8192;

/// The connection and the statements it runs.
pub(super) struct Db {
    pub(super) conn: Connection,
    pub(super) sql: Statements,
}

/// A job nobody waits for.
pub(super) type Chore = Box<dyn FnOnce(&mut Db) + Send>;

/// The async side's handle on the thread.
#[derive(Debug)]
pub(super) struct Worker {
    jobs: mpsc::Sender<Job>,
    _checkpointer: Option<Checkpointer>,
}

impl Worker {
    /// Starts the thread and waits until the file is open and migrated.
    pub(super) async fn start(path: PathBuf) -> Result<Worker, LedgerError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, opened) = oneshot::channel();
        let checkpointed = path.clone();
        thread::Builder::new()
            .name("switchyard-ledger".to_owned())
            .spawn(move || match open(&path) {
                Ok(db) => {
                    // The opener may have given up waiting; then there is nobody to serve.
                    if ready.send(Ok(())).is_ok() {
                        serve(db, &queue);
                    }
                }
                Err(error) => {
                    let _ = ready.send(Err(error));
                }
            })
            .map_err(|error| LedgerError::unavailable(format!("cannot start the SQLite thread: {error}")))?;
        opened.await.map_err(|_| LedgerError::unavailable("the SQLite thread stopped while opening"))??;
        Ok(Worker { jobs, _checkpointer: Checkpointer::start(checkpointed) })
    }

    /// Queues `job` without waiting for it; usable from any thread, with or without a runtime.
    pub(super) fn queue(&self) -> impl Fn(Chore) + Send + 'static {
        let jobs = self.jobs.clone();
        move |job| {
            let job: Job = Box::new(move |db| {
                job(db);
                Box::new(|_| {})
            });
            // A stopped worker has nothing left to do the job on; the claim then expires with its lease.
            let _ = jobs.send(job);
        }
    }

    /// Runs `job` on the connection and returns its answer.
    pub(super) async fn run<T, F>(&self, job: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, LedgerError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |db| {
            let outcome = job(db);
            Box::new(move |committed: Result<(), LedgerError>| {
                // The caller may have been cancelled; its answer is then not needed.
                let _ = reply.send(committed.and(outcome));
            })
        });
        self.jobs.send(job).map_err(|_| LedgerError::unavailable("the SQLite thread has stopped"))?;
        answer.await.map_err(|_| LedgerError::unavailable("the SQLite thread stopped during the operation"))?
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
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(LedgerError::unavailable(format!("cannot use WAL journaling (got {mode})")));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", AUTOCHECKPOINT_PAGES)?;
    conn.set_prepared_statement_cache_capacity(32);
    migrate(&mut conn)?;
    Ok(Db { conn, sql: Statements::new(CLAIMS_TABLE, Dialect::Sqlite) })
}

fn create_parent(path: &Path) -> Result<(), LedgerError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => std::fs::create_dir_all(parent).map_err(|error| {
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
    for statement in revocations::create_statements(REVOCATIONS_TABLE, Dialect::Sqlite) {
        tx.execute_batch(&statement)?;
    }
    tx.execute_batch(&backend_tokens::create_statement(BACKEND_TOKENS_TABLE, Dialect::Sqlite))?;
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
