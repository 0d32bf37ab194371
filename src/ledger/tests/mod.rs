//! The ledger's tests: one behaviour suite ([`behaviour`], [`completion`], [`approvals`], [`pins`]) run against
//! every store, the lingering completions of the SQL stores ([`linger`]), plus what only one store can show
//! ([`stores`]).
//!
//! Rules:
//! - Each test gets a store of its own: a fresh map, a fresh SQLite file in its own temporary directory, or a
//!   fresh PostgreSQL schema (`sy_test_<pid>_<n>_<nanos>`), so tests run in parallel without seeing each other.
//! - PostgreSQL is found at `SWITCHYARD_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`).
//!   When it is unreachable the PostgreSQL runs print a `*** SKIPPED: ` line (counted by `scripts/test`) and
//!   pass, unless `CI=true`: then they fail, so CI never passes without having tested the shared store.

mod approvals;
mod at_rest;
mod behaviour;
mod completion;
mod linger;
mod pins;
mod stores;
mod tasks;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A bound on stored results large enough for every answer these tests store.
const MAX_RESULT: usize = 1 << 20;

use tokio_postgres::NoTls;

use super::{ClaimKey, ClaimOutcome, ClaimRecord, LedgerStore, LedgerUrl, NewClaim, PostgresStore, SqliteStore};

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A store under test and what it takes to open a second instance on the same data or to clean up.
pub(super) struct Harness {
    pub(super) store: LedgerStore,
    backing: Backing,
}

enum Backing {
    Memory,
    Sqlite { dir: PathBuf },
    Postgres { url: String, schema: String },
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name unique to this test in this run, and across runs.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.subsec_nanos());
    format!("{prefix}_{}_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), nanos % 1_000_000)
}

/// A fresh, empty directory.
pub(super) fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(&format!("switchyard-ledger-{name}")));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

pub(super) fn postgres_admin_url() -> String {
    std::env::var("SWITCHYARD_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

/// An admin connection to the test database, or `None` (after saying so loudly) when there is none outside CI.
pub(super) async fn postgres_admin() -> Option<tokio_postgres::Client> {
    let url = postgres_admin_url();
    let connecting = tokio::time::timeout(Duration::from_secs(3), tokio_postgres::connect(&url, NoTls)).await;
    match connecting {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            Some(client)
        }
        failed => {
            let reason = match failed {
                Ok(Err(error)) => error.to_string(),
                _ => "connection timed out".to_owned(),
            };
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("PostgreSQL at {url} is required in CI: {reason}");
            }
            // Straight to stderr, past libtest's capture of `eprintln!`, in the form `scripts/test` counts.
            let skipped = format!("\n*** SKIPPED: PostgreSQL ledger test: {url} is unreachable ({reason}) ***\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), skipped.as_bytes());
            None
        }
    }
}

impl Harness {
    pub(super) async fn memory() -> Option<Harness> {
        Some(Harness { store: LedgerStore::memory(), backing: Backing::Memory })
    }

    pub(super) async fn sqlite() -> Option<Harness> {
        let dir = scratch_dir("suite");
        let store = LedgerStore::open("sqlite", &dir).await.expect("open SQLite store");
        Some(Harness { store, backing: Backing::Sqlite { dir } })
    }

    pub(super) async fn postgres() -> Option<Harness> {
        postgres_admin().await?;
        let schema = unique("sy_test");
        let base = postgres_admin_url();
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}application_name={schema}&schema={schema}");
        let store = LedgerStore::open(&url, &std::env::temp_dir()).await.expect("open PostgreSQL store");
        Some(Harness { store, backing: Backing::Postgres { url, schema } })
    }

    /// Another store instance on the same data (another connection or file handle, as another process would
    /// have); the memory store can only share itself.
    pub(super) async fn second(&self) -> LedgerStore {
        match &self.backing {
            Backing::Memory => self.store.clone(),
            Backing::Sqlite { dir } => LedgerStore::open("sqlite", dir).await.expect("second SQLite store"),
            Backing::Postgres { url, .. } => {
                LedgerStore::open(url, &std::env::temp_dir()).await.expect("second PostgreSQL store")
            }
        }
    }

    /// Another SQL store instance on the same data whose queued completions wait at most `linger` for another job.
    pub(super) async fn lingering(&self, linger: Duration) -> LedgerStore {
        match &self.backing {
            Backing::Memory => panic!("the memory store does not linger"),
            Backing::Sqlite { dir } => {
                let path = dir.join(super::SQLITE_FILE_NAME);
                LedgerStore::Sqlite(SqliteStore::open_lingering(&path, linger).await.expect("lingering SQLite store"))
            }
            Backing::Postgres { url, .. } => {
                let Ok(LedgerUrl::Postgres(url)) = LedgerUrl::parse(url) else { panic!("not a PostgreSQL URL: {url}") };
                let store = PostgresStore::open_lingering(&url, linger).await.expect("lingering PostgreSQL store");
                LedgerStore::Postgres(store)
            }
        }
    }

    /// The PostgreSQL `application_name` of this harness's connections, to find (and kill) them.
    pub(super) fn postgres_application(&self) -> Option<&str> {
        match &self.backing {
            Backing::Postgres { schema, .. } => Some(schema),
            _ => None,
        }
    }

    /// Holds the write lock another process would, over the claim `name` (PostgreSQL: its row; SQLite: the
    /// file), so that the store's settle of it waits; the memory store has nothing to hold.
    pub(super) async fn hold_writes(&self, name: &str) -> Option<Hold> {
        let key = ClaimKey::idempotency("alice", name).as_str().to_owned();
        match &self.backing {
            Backing::Memory => None,
            Backing::Sqlite { dir } => {
                let conn = rusqlite::Connection::open(dir.join(crate::ledger::SQLITE_FILE_NAME)).expect("open");
                conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
                conn.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
                Some(Hold::Sqlite(conn))
            }
            Backing::Postgres { schema, .. } => {
                let admin = postgres_admin().await.expect("PostgreSQL was reachable a moment ago");
                let table = format!("{schema}.{}", crate::ledger::sql::CLAIMS_TABLE);
                admin.batch_execute("BEGIN").await.expect("begin");
                let sql = format!("SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE");
                assert_eq!(admin.execute(&sql, &[&key]).await.expect("lock the row"), 1, "{key} exists");
                Some(Hold::Postgres { admin, table })
            }
        }
    }

    pub(super) async fn finish(self) {
        drop(self.store);
        match self.backing {
            Backing::Memory => {}
            Backing::Sqlite { dir } => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Backing::Postgres { schema, .. } => {
                if let Some(admin) = postgres_admin().await {
                    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
                }
            }
        }
    }
}

/// A write lock held from outside the store (see [`Harness::hold_writes`]).
pub(super) enum Hold {
    Sqlite(rusqlite::Connection),
    Postgres { admin: tokio_postgres::Client, table: String },
}

impl Hold {
    /// The committed state of the claim `name`, read through the holding connection.
    pub(super) async fn state(&self, name: &str) -> Option<String> {
        let key = ClaimKey::idempotency("alice", name).as_str().to_owned();
        match self {
            Hold::Sqlite(conn) => {
                let sql = format!("SELECT state FROM {} WHERE key = ?1", crate::ledger::sql::CLAIMS_TABLE);
                conn.query_row(&sql, [&key], |row| row.get(0)).ok()
            }
            Hold::Postgres { admin, table } => {
                let sql = format!("SELECT state FROM {table} WHERE key = $1");
                admin.query_opt(&sql, &[&key]).await.expect("read").map(|row| row.get(0))
            }
        }
    }

    pub(super) async fn release(self) {
        match self {
            Hold::Sqlite(conn) => conn.execute_batch("ROLLBACK").expect("release the write lock"),
            Hold::Postgres { admin, .. } => admin.batch_execute("ROLLBACK").await.expect("release the row"),
        }
    }
}

/// A claim of `key` (an idempotency key of principal `alice`) by `owner`, calling `docs.search`.
pub(super) fn claim_of(key: &str, owner: &str) -> NewClaim {
    NewClaim {
        key: ClaimKey::idempotency("alice", key),
        principal: "alice".to_owned(),
        session: "session-1".to_owned(),
        backend: "docs".to_owned(),
        tool: "search".to_owned(),
        args_digest: super::canonical_digest(&serde_json::json!({ "query": key })),
        owner: owner.to_owned(),
        lease: Duration::from_secs(30),
    }
}

/// The claims that won and those that found another's, in order.
pub(super) fn winners_and_losers(
    outcomes: impl IntoIterator<Item = ClaimOutcome>,
) -> (Vec<ClaimRecord>, Vec<ClaimRecord>) {
    let (mut winners, mut losers) = (Vec::new(), Vec::new());
    for outcome in outcomes {
        match outcome {
            ClaimOutcome::Claimed(record) => winners.push(record),
            ClaimOutcome::Existing(record) => losers.push(record),
        }
    }
    (winners, losers)
}

/// Runs one case of `$suite` against each store, as one test per (store, case).
macro_rules! behaviour_suite {
    ($store:ident: $($case:ident),* $(,)?) => {
        behaviour_suite!($store in $store, behaviour: $($case),*);
    };
    ($module:ident in $store:ident, $suite:ident: $($case:ident),* $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(harness) = super::Harness::$store().await else {
                        return;
                    };
                    super::$suite::$case(&harness).await;
                    harness.finish().await;
                }
            )*
        }
    };
}

macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        behaviour_suite!(memory: $($case),*);
        behaviour_suite!(sqlite: $($case),*);
        behaviour_suite!(postgres: $($case),*);
    };
}

on_every_store!(
    claim_once_then_existing,
    a_key_names_one_call,
    concurrent_claims_have_one_winner,
    complete_then_replay,
    oversize_result_is_kept_as_digest,
    mark_unknown_records_the_error,
    release_lets_the_call_run_again,
    only_the_owner_settles,
    expired_leases_become_unknown,
    orphan_marks_leftovers_unknown,
    a_call_waiting_for_input_stays_open_until_settled_once,
    purge_removes_old_settled_claims,
    purge_goes_on_slice_after_slice_until_nothing_old_is_left,
    list_filters,
    resolve_settles_unknown_claims,
    wait_settled_wakes_and_times_out,
    many_waiters_on_one_key,
    second_instance_shares_claims_and_wakeups,
    ping_answers,
    revocations_last_until_expiry_then_are_purged,
    malformed_revocations_are_refused,
    revocations_are_seen_by_a_second_instance,
    abandoned_claims_are_released,
    settles_finish_when_their_caller_leaves,
    many_concurrent_claims_are_each_answered_and_durable,
    a_duplicate_before_the_completion_is_durable_gets_its_result,
    queued_settles_are_applied_before_orphaning,
    backend_tokens_are_put_replaced_listed_and_deleted,
    backend_tokens_are_seen_by_a_second_instance,
    limit_counters_are_replaced_only_when_unchanged,
);

/// Runs every approval case against each store.
macro_rules! approvals_on_every_store {
    ($($case:ident),* $(,)?) => {
        behaviour_suite!(memory_approvals in memory, approvals: $($case),*);
        behaviour_suite!(sqlite_approvals in sqlite, approvals: $($case),*);
        behaviour_suite!(postgres_approvals in postgres, approvals: $($case),*);
    };
}

approvals_on_every_store!(
    an_approval_is_requested_once_and_decided_once,
    concurrent_decisions_have_one_winner,
    an_undecided_request_expires_and_cannot_be_decided,
    approvals_are_listed_newest_first_by_state,
    approvals_are_seen_by_a_second_instance,
    old_decided_and_expired_requests_are_purged,
    malformed_requests_and_notes_are_refused,
    decisions_are_read_back_by_time_and_announced_once,
);

macro_rules! pins_on_every_store {
    ($($case:ident),* $(,)?) => {
        behaviour_suite!(memory_pins in memory, pins: $($case),*);
        behaviour_suite!(sqlite_pins in sqlite, pins: $($case),*);
        behaviour_suite!(postgres_pins in postgres, pins: $($case),*);
    };
}

macro_rules! tasks_on_every_store {
    ($($case:ident),* $(,)?) => {
        behaviour_suite!(memory_tasks in memory, tasks: $($case),*);
        behaviour_suite!(sqlite_tasks in sqlite, tasks: $($case),*);
        behaviour_suite!(postgres_tasks in postgres, tasks: $($case),*);
    };
}

tasks_on_every_store!(
    a_call_key_has_one_task,
    a_terminal_task_never_changes,
    a_step_needs_the_status_and_time_it_read,
    orphaned_tasks_fail_as_unknown_and_are_shared,
    tasks_are_listed_in_pages_and_purged_after_their_ttl,
);

pins_on_every_store!(
    pins_are_trusted_once_then_offers_quarantine_until_approved,
    warn_offers_keep_serving_and_the_pinned_definition_withdraws_an_offer,
    pins_are_seen_by_a_second_instance,
);

behaviour_suite!(sqlite_linger in sqlite, linger:
    a_completion_rides_with_the_next_claim,
    a_lone_completion_lands_within_its_linger,
    shutdown_applies_a_lingering_completion_at_once,
    dropping_the_store_applies_lingering_completions,
    a_full_parking_is_applied_at_once,
);
behaviour_suite!(postgres_linger in postgres, linger:
    a_completion_rides_with_the_next_claim,
    a_lone_completion_lands_within_its_linger,
    shutdown_applies_a_lingering_completion_at_once,
    dropping_the_store_applies_lingering_completions,
    a_full_parking_is_applied_at_once,
);
