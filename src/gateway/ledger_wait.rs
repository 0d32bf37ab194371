//! Opening the call ledger at start-up. A PostgreSQL ledger that cannot be reached (the server still starting,
//! down, or the network not up yet) is waited for, with backoff, while the agent-facing listener says so
//! (`front::waiting`); any other failure — a SQLite file that cannot be opened, a schema from a newer Switchyard,
//! corrupt data — ends start-up at once, since waiting would not mend it (docs/operations.md, *Starting without
//! the ledger*).
//!
//! Rules: attempts start [`FIRST_RETRY`] apart and double up to [`LAST_RETRY`]; each failure is logged with its
//! cause and when the next attempt is; nothing else of the gateway starts until the ledger is open, so no call is
//! taken that could not be claimed.

use std::path::Path;
use std::time::Duration;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::front::ConsoleAccess;
use crate::front::listener::{self, ConnectionLimits};
use crate::front::tls::ServerTls;
use crate::front::waiting::{self, LedgerWait};
use crate::ledger::{LedgerError, LedgerStore, LedgerUrl};

/// The pause before the second attempt.
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest pause between attempts.
pub(super) const LAST_RETRY: Duration = Duration::from_secs(10);

/// Where the gateway answers while it waits, and by which rules.
pub(super) struct WaitingListener<'a> {
    pub listener: &'a TcpListener,
    pub limits: ConnectionLimits,
    pub console: ConsoleAccess,
    /// The TLS the gateway will serve with: the waiting answers use it too (never plain HTTP on a TLS port).
    pub tls: Option<Arc<ServerTls>>,
}

/// Opens the ledger `url` names; when it cannot be reached and `waiting` is given, answers there and tries again
/// until it opens (or another kind of failure ends the wait). `on_wait` runs once, when the wait starts.
pub(super) async fn open(
    url: &LedgerUrl,
    data_dir: &Path,
    waiting: Option<WaitingListener<'_>>,
    on_wait: impl FnOnce(&LedgerError),
) -> Result<LedgerStore, LedgerError> {
    let first = match LedgerStore::open_url(url, data_dir).await {
        Ok(store) => return Ok(store),
        Err(error) => error,
    };
    let Some(waiting) = waiting.filter(|_| worth_waiting(url, &first)) else { return Err(first) };
    on_wait(&first);
    let store = url.kind();
    let wait = LedgerWait { store, attempts: 1, error: first.to_string(), next_attempt: Instant::now() + FIRST_RETRY };
    log_failure(&wait);
    let (status, watched) = watch::channel(wait);
    let (opened, serve_until) = oneshot::channel::<()>();
    let (_limits, watched_limits) = watch::channel(waiting.limits);
    let app = waiting::app(watched, waiting.console);
    let answering = listener::serve(waiting.listener, app, watched_limits, waiting.tls, async {
        let _ = serve_until.await;
    });
    let retrying = async {
        let result = retry(url, data_dir, &status).await;
        let _ = opened.send(());
        result
    };
    let (result, ()) = tokio::join!(retrying, answering);
    if result.is_ok() {
        tracing::info!(store, "the call ledger is open; starting");
    }
    result
}

/// Whether a failure to open may mend by itself: only a network store's unavailability.
fn worth_waiting(url: &LedgerUrl, error: &LedgerError) -> bool {
    matches!(url, LedgerUrl::Postgres(_)) && matches!(error, LedgerError::Unavailable { .. })
}

/// Tries again, at the time `status` says, until the ledger opens or fails for another reason.
async fn retry(
    url: &LedgerUrl,
    data_dir: &Path,
    status: &watch::Sender<LedgerWait>,
) -> Result<LedgerStore, LedgerError> {
    let mut pause = FIRST_RETRY;
    loop {
        tokio::time::sleep_until(status.borrow().next_attempt).await;
        match LedgerStore::open_url(url, data_dir).await {
            Err(error) if worth_waiting(url, &error) => {
                pause = (pause * 2).min(LAST_RETRY);
                status.send_modify(|wait| {
                    wait.attempts += 1;
                    wait.error = error.to_string();
                    wait.next_attempt = Instant::now() + pause;
                });
                log_failure(&status.borrow());
            }
            opened => return opened,
        }
    }
}

fn log_failure(wait: &LedgerWait) {
    let retry_in_ms = wait.next_attempt.saturating_duration_since(Instant::now()).as_millis();
    tracing::warn!(
        store = wait.store,
        attempts = wait.attempts,
        retry_in_ms,
        error = %wait.error,
        "cannot open the call ledger; waiting for it before serving (`/readyz` says why)"
    );
}
