//! The completion is off the agent's path (docs/ledger.md, *The completion is off the agent's path*): the agent
//! has its result before the completion is durable. In between, a duplicate gets the result (it waits for the
//! durable completion), and a crash leaves the call `unknown` — it is never run again.
//!
//! The window is held open from outside: after the claim is durable (the backend has the call), another
//! connection takes the write lock the completion needs — SQLite's lock on the file, PostgreSQL's lock on the
//! claim's row — as another process could. The memory store completes at once and has no window.

use std::path::Path;
use std::time::Duration;

use switchyard::ledger::ClaimKey;

use super::{
    Instance, Ledger, RAN, Store, assert_echo, assert_failure, call, eventually, outcome, post, post_on, replayed, text,
};
use crate::support::fault_backend::{FaultBackend, Script};
use crate::support::gateway::{Agent, ScratchDir};
use crate::support::postgres;
use crate::telemetry::{sample, scrape};

/// The gauge of tool calls waiting on the ledger (to claim, or for another call's claim to settle).
const LEDGER_WAITING: &str = "switchyard_ledger_calls_waiting";

/// The claims table's name (in the test's schema on PostgreSQL).
const CLAIMS: &str = "switchyard_claims";
/// The idempotency key the tests call with, and the claim it makes (an anonymous agent's).
const KEY: &str = "refund-12";

fn claim_key() -> String {
    ClaimKey::idempotency("anonymous", KEY).as_str().to_owned()
}

/// Another process's connection to a durable ledger, for what the wire does not show.
pub(super) enum Outside {
    Sqlite(rusqlite::Connection),
    Postgres { client: tokio_postgres::Client, table: String },
}

impl Outside {
    /// Connects to `ledger`, whose SQLite file (if it is one) is in `data_dir`; `None` for the memory store.
    pub(super) async fn open(ledger: &Ledger, data_dir: &Path) -> Option<Outside> {
        if let Some(schema) = &ledger._schema {
            let client = postgres::connect().await.expect("PostgreSQL answers");
            return Some(Outside::Postgres { client, table: format!("{}.{CLAIMS}", schema.name) });
        }
        if ledger.url == "memory" {
            return None;
        }
        let conn = rusqlite::Connection::open(data_dir.join("ledger.db")).expect("open the ledger file");
        conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
        Some(Outside::Sqlite(conn))
    }

    /// Takes the write lock a settle of `key` needs, inside a transaction of this connection.
    async fn lock(&self, key: &str) {
        match self {
            Outside::Sqlite(conn) => conn.execute_batch("BEGIN IMMEDIATE").expect("take the write lock"),
            Outside::Postgres { client, table } => {
                client.batch_execute("BEGIN").await.expect("begin");
                let sql = format!("SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE");
                assert_eq!(client.execute(&sql, &[&key]).await.expect("lock the row"), 1, "the claim is durable");
            }
        }
    }

    async fn unlock(&self) {
        match self {
            Outside::Sqlite(conn) => conn.execute_batch("ROLLBACK").expect("release the write lock"),
            Outside::Postgres { client, .. } => client.batch_execute("ROLLBACK").await.expect("release the row"),
        }
    }

    /// The committed state of the claim `key`.
    async fn state(&self, key: &str) -> Option<String> {
        match self {
            Outside::Sqlite(conn) => {
                conn.query_row(&format!("SELECT state FROM {CLAIMS} WHERE key = ?1"), [key], |row| row.get(0)).ok()
            }
            Outside::Postgres { client, table } => {
                let sql = format!("SELECT state FROM {table} WHERE key = $1");
                client.query_opt(&sql, &[&key]).await.expect("read").map(|row| row.get(0))
            }
        }
    }

    /// How many claims are durably `in_flight`.
    pub(super) async fn in_flight(&self) -> i64 {
        match self {
            Outside::Sqlite(conn) => conn
                .query_row(&format!("SELECT count(*) FROM {CLAIMS} WHERE state = 'in_flight'"), [], |row| row.get(0))
                .expect("count"),
            Outside::Postgres { client, table } => {
                let sql = format!("SELECT count(*) FROM {table} WHERE state = 'in_flight'");
                client.query_one(&sql, &[]).await.expect("count").get(0)
            }
        }
    }

    /// Waits until no claim is durably `in_flight` (the completions the agent already has are written).
    pub(super) async fn until_settled(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.in_flight().await > 0 {
            assert!(tokio::time::Instant::now() < deadline, "the completions never became durable");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A backend that holds the call until the test has taken the write lock (see `call_with_completion_held`).
async fn slow_backend() -> FaultBackend {
    FaultBackend::start(Script { hold_calls: true, ..Script::default() }).await
}

/// The first call, answered while another connection keeps its completion from being written; returns the
/// answer once the test has seen that the claim is still `in_flight` in the store.
async fn call_with_completion_held(agent: &Agent, backend: &FaultBackend, outside: Option<&Outside>) {
    let session = agent.session.clone().expect("a session");
    let first = tokio::spawn(post_on(agent.http.clone(), agent.url.clone(), session, call(1, "refund 12", Some(KEY))));
    eventually("the backend has the call", || async { backend.executions(RAN) == 1 }).await;
    if let Some(outside) = outside {
        outside.lock(&claim_key()).await;
    }
    backend.release_calls();
    let first = first.await.expect("the request task").unwrap_or_else(|error| panic!("the call failed: {error}"));
    assert_echo(&first, "refund 12");
    if let Some(outside) = outside {
        let state = outside.state(&claim_key()).await;
        assert_eq!(state.as_deref(), Some("in_flight"), "the agent has its result before the completion is durable");
    }
}

/// A duplicate sent while the completion is not yet durable gets the result (it waits for the completion) and
/// does not run the tool again.
pub(super) async fn a_duplicate_before_the_completion_is_durable_gets_the_result(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = slow_backend().await;
    let gateway = ledger.gateway(&backend.url()).await;
    let agent = Agent::connected(gateway.mcp()).await;
    let outside = Outside::open(&ledger, &gateway.data_dir).await;
    call_with_completion_held(&agent, &backend, outside.as_ref()).await;

    let session = agent.session.clone().expect("a session");
    let duplicate = tokio::spawn(post_on(agent.http.clone(), gateway.mcp(), session, call(2, "refund 12", Some(KEY))));
    if let Some(outside) = &outside {
        // The duplicate has reached the ledger: its claim is queued behind the held completion (SQLite's one
        // writer) or it waits for the claim to settle (PostgreSQL).
        let waiting = || async { sample(&scrape(&gateway.base).await, LEDGER_WAITING) == Some(1.0) };
        eventually("the duplicate waits on the ledger", waiting).await;
        assert!(!duplicate.is_finished(), "only the durable completion may answer the duplicate");
        outside.unlock().await;
    }
    let duplicate = duplicate.await.expect("the request task").unwrap_or_else(|error| panic!("failed: {error}"));
    assert!(replayed(&duplicate), "{duplicate}");
    assert_eq!(text(&duplicate), "refund 12");
    assert!(outcome(&duplicate).is_none(), "{duplicate}");
    assert_eq!(backend.executions(RAN), 1, "the duplicate did not run the tool again");
}

/// The gateway dies after answering but before the completion is durable: restarted as the same instance, it
/// finds the claim `in_flight`, marks it `unknown`, and a retry is told so — the tool does not run again.
pub(super) async fn a_crash_before_the_completion_is_durable_is_unknown_not_rerun(store: Store) {
    let Some(ledger) = Ledger::open(store).await else { return };
    let backend = slow_backend().await;
    let dir = ScratchDir::new("crash-window");
    // Named, so the test can end the killed gateway's PostgreSQL sessions (see below).
    let application = format!("sy_crash_{}", std::process::id());
    let url = match store {
        Store::Postgres => format!("{}&application_name={application}", ledger.url),
        _ => ledger.url.clone(),
    };
    let instance = Instance::new(dir.path(), "gw", &url, &backend.url(), &dir.path().join("session.key"));
    let gateway = instance.start().await;
    let mut agent = Agent::connected(gateway.mcp()).await;
    let outside = Outside::open(&ledger, &dir.path().join("gw")).await.expect("a durable store");
    call_with_completion_held(&agent, &backend, Some(&outside)).await;

    gateway.kill().await;
    if let Outside::Postgres { client, .. } = &outside {
        // The killed gateway's COMMIT may already sit in the server's socket buffer behind the blocked update;
        // ending its sessions makes sure the crash loses the completion, as a crash before sending it would.
        let ended = "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1";
        client.execute(ended, &[&application]).await.expect("end the killed gateway's sessions");
    }
    outside.unlock().await;
    assert_eq!(outside.state(&claim_key()).await.as_deref(), Some("in_flight"), "the crash lost the completion");

    let gateway = instance.start().await;
    agent.url = gateway.mcp();
    let retry = post(&agent, &call(2, "refund 12", Some(KEY)), &[]).await;
    assert_failure(&retry, "unknown", &["outcome is unknown", "restarted before it finished", "not repeated"]);
    assert_eq!(backend.executions(RAN), 1, "a call whose completion was lost is never run again");
}
