//! What only one store can show: SQLite files that are read-only, corrupt, newer or reopened; PostgreSQL
//! connections that die; opening by URL; the upkeep task.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{Harness, claim_of, postgres_admin, scratch_dir};
use crate::ledger::{
    ClaimKey, ClaimOutcome, ClaimState, LedgerError, LedgerStore, Maintenance, Revocation, RevocationEvent,
    RevocationFeed, WaitOutcome, maintain,
};
use crate::raw_json::RawJson;

fn key(name: &str) -> ClaimKey {
    ClaimKey::idempotency("alice", name)
}

/// Makes a file read-only even for root (`chattr +i`), or with permissions otherwise; undone on drop.
struct ReadOnly {
    path: PathBuf,
    immutable: bool,
}

impl ReadOnly {
    fn make(path: &Path) -> ReadOnly {
        let immutable = Command::new("chattr").arg("+i").arg(path).output().is_ok_and(|out| out.status.success());
        if !immutable {
            let mut permissions = std::fs::metadata(path).expect("metadata").permissions();
            permissions.set_readonly(true);
            std::fs::set_permissions(path, permissions).expect("chmod");
        }
        ReadOnly { path: path.to_path_buf(), immutable }
    }

    fn effective(&self) -> bool {
        std::fs::OpenOptions::new().append(true).open(&self.path).is_err()
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.immutable {
            let _ = Command::new("chattr").arg("-i").arg(&self.path).output();
        }
    }
}

#[tokio::test]
async fn sqlite_read_only_file_is_unavailable() {
    let dir = scratch_dir("read-only");
    drop(LedgerStore::open("sqlite", &dir).await.expect("create the file"));
    // Give the closed store's thread a moment to close the connection (it checkpoints and removes the WAL).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read_only = ReadOnly::make(&dir.join("ledger.db"));
    if !read_only.effective() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "cannot make a read-only file in CI");
        eprintln!("SKIPPED: cannot make a file read-only here (no chattr and running as root)");
        return;
    }
    let failure = match LedgerStore::open("sqlite", &dir).await {
        Err(error) => error,
        Ok(store) => store.claim(claim_of("k", "gw-a")).await.expect_err("a read-only ledger refuses claims"),
    };
    assert!(matches!(failure, LedgerError::Unavailable { .. }), "{failure:?}");
    assert!(failure.to_string().contains("ledger.db") || failure.to_string().contains("read"), "{failure}");
    drop(read_only);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sqlite_garbage_file_is_corrupt() {
    let dir = scratch_dir("corrupt");
    std::fs::write(dir.join("ledger.db"), vec![0x5a; 8192]).expect("write garbage");
    let error = LedgerStore::open("sqlite", &dir).await.expect_err("garbage is not a ledger");
    assert!(matches!(error, LedgerError::Corrupt { .. }), "{error:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sqlite_newer_schema_is_refused() {
    let dir = scratch_dir("newer");
    let connection = rusqlite::Connection::open(dir.join("ledger.db")).expect("open");
    connection.pragma_update(None, "user_version", 99).expect("set version");
    drop(connection);
    let error = LedgerStore::open("sqlite", &dir).await.expect_err("newer schema");
    assert!(matches!(error, LedgerError::SchemaTooNew { found: 99, supported: 1 }), "{error:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sqlite_reopen_keeps_claims_and_creates_directories() {
    let dir = scratch_dir("reopen").join("nested").join("data");
    let store = LedgerStore::open("sqlite", &dir).await.expect("open");
    assert!(dir.join("ledger.db").is_file());
    assert!(matches!(store.claim(claim_of("k", "gw-a")).await, Ok(ClaimOutcome::Claimed(_))));
    drop(store);
    let path = dir.join("ledger.db");
    let reopened =
        LedgerStore::open(&format!("sqlite://{}", path.display()), Path::new("/unused")).await.expect("reopen");
    assert!(matches!(reopened.claim(claim_of("k", "gw-b")).await, Ok(ClaimOutcome::Existing(_))));
    assert_eq!(reopened.orphan("gw-a").await.expect("orphan"), 1, "the previous run's claim is left over");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn opening_by_url() {
    assert_eq!(LedgerStore::open("memory", Path::new("/unused")).await.expect("memory").kind(), "memory");
    let bad = LedgerStore::open("redis://localhost", Path::new("/unused")).await.expect_err("unknown scheme");
    assert!(matches!(bad, LedgerError::InvalidUrl { .. }), "{bad:?}");
    // Nothing listens on port 1: the store must say it is unavailable, quickly and without panicking.
    let unreachable = LedgerStore::open("postgres://postgres@127.0.0.1:1/test", Path::new("/unused")).await;
    assert!(matches!(unreachable, Err(LedgerError::Unavailable { .. })), "{unreachable:?}");
}

/// A PostgreSQL harness, an admin connection beside it, and the harness's schema (also its connections'
/// `application_name`); `None` when there is no server (outside CI).
async fn postgres_with_admin() -> Option<(Harness, tokio_postgres::Client, String)> {
    let harness = Harness::postgres().await?;
    let admin = postgres_admin().await?;
    let schema = harness.postgres_application().expect("a postgres harness").to_owned();
    Some((harness, admin, schema))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reconnects_after_its_connections_die() {
    let Some((harness, admin, application)) = postgres_with_admin().await else {
        return;
    };
    let second = harness.second().await;
    assert!(matches!(harness.store.claim(claim_of("k", "gw-a")).await, Ok(ClaimOutcome::Claimed(_))));
    // The listeners connect in the background; let them, so their death is part of the test.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let killed = admin
        .execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", &[&application])
        .await
        .expect("terminate");
    assert!(killed >= 4, "both stores' query and LISTEN connections, killed {killed}");

    // The next operations reconnect instead of failing or hanging.
    let after = second.claim(claim_of("k", "gw-b")).await;
    assert!(matches!(after, Ok(ClaimOutcome::Existing(_))), "{after:?}");
    // The second store's listener reconnects on its own and still wakes its waiters.
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move { second.wait_settled(&key("k"), Instant::now() + Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    harness
        .store
        .complete(&key("k"), "gw-a", &RawJson::of(&json!({"ok": true})), super::MAX_RESULT)
        .await
        .expect("complete");
    assert!(matches!(waiter.await.expect("waiter"), Ok(WaitOutcome::Settled(_))));
    assert!(started.elapsed() < Duration::from_secs(3), "woken after {:?}", started.elapsed());
    drop(second);
    harness.finish().await;
}

/// The next event of `feed` that `wanted` accepts, within 10 s.
async fn heard(feed: &mut RevocationFeed, wanted: impl Fn(&RevocationEvent) -> bool) -> RevocationEvent {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let next = tokio::time::timeout_at(deadline, feed.next()).await.expect("announced within 10 s");
        let event = next.expect("the feed is open while the store lives");
        if wanted(&event) {
            return event;
        }
    }
}

/// A revocation recorded by one replica reaches the other's feed; when the other's listening connection dies, it
/// is told it may have missed some (and reloads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_announces_revocations_to_other_replicas() {
    let Some((harness, admin, application)) = postgres_with_admin().await else {
        return;
    };
    let second = harness.second().await;
    let mut feed = second.revocation_feed().expect("PostgreSQL announces revocations");
    // The other replica listens from a moment after it opened; recorded until it hears one.
    let recorder = {
        let store = harness.store.clone();
        tokio::spawn(async move {
            for expires_at in 4_000_000_000u64.. {
                store.record_revocation(&Revocation { session: "gone".into(), expires_at }).await.expect("record");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let event = heard(&mut feed, |event| matches!(event, RevocationEvent::Recorded(_))).await;
    recorder.abort();
    let RevocationEvent::Recorded(revocation) = event else { unreachable!() };
    assert_eq!(revocation.session, "gone");
    assert!(revocation.expires_at >= 4_000_000_000, "{revocation:?}");

    admin
        .execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", &[&application])
        .await
        .expect("terminate");
    heard(&mut feed, |event| *event == RevocationEvent::Missed).await;
    drop(second);
    harness.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upkeep_renews_own_leases_and_expires_dead_ones() {
    let store = LedgerStore::memory();
    let mut mine = claim_of("mine", "gw-a");
    mine.lease = Duration::from_millis(300);
    let mut dead = claim_of("dead", "gw-dead");
    dead.lease = Duration::from_millis(300);
    store.claim(mine).await.expect("claim");
    store.claim(dead).await.expect("claim");
    let settings =
        Maintenance { owner: "gw-a".into(), lease: Duration::from_millis(300), retention: Duration::from_secs(3600) };
    let upkeep = tokio::spawn(maintain(store.clone(), settings));
    tokio::time::sleep(Duration::from_millis(900)).await;
    upkeep.abort();
    let state = |name: &'static str| {
        let store = store.clone();
        async move { store.get(&key(name)).await.expect("get").expect("exists").state }
    };
    assert_eq!(state("mine").await, ClaimState::InFlight);
    assert_eq!(state("dead").await, ClaimState::Unknown);
}

/// A new schema's claim keys compare byte by byte (`COLLATE "C"`), as the writers sort them, whatever the
/// database's collation; claims whose keys differ only in case or accents stay apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_new_schema_compares_claim_keys_byte_by_byte() {
    let Some((harness, admin, schema)) = postgres_with_admin().await else {
        return;
    };
    let sql = "SELECT collation_name FROM information_schema.columns \
               WHERE table_schema = $1 AND table_name = 'switchyard_claims' AND column_name = 'key'";
    let collation: Option<String> = admin.query_one(sql, &[&schema]).await.expect("the key column").get(0);
    assert_eq!(collation.as_deref(), Some("C"));
    for name in ["Straße", "strasse", "STRASSE"] {
        let outcome = harness.store.claim(claim_of(name, "gw-a")).await.expect("claim");
        assert!(matches!(outcome, ClaimOutcome::Claimed(_)), "{name}: a key of its own");
    }
    harness.finish().await;
}

/// A schema made before settles were announced only when waited for gets the `waited` column, the function that
/// honours older batches' deferral and the trigger whose `WHEN` clause tests the mark at the next start; a current
/// one is left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_older_schemas_trigger_learns_to_announce_only_waited_claims() {
    let Some((harness, admin, schema)) = postgres_with_admin().await else {
        return;
    };
    let function = format!("{schema}.switchyard_claim_settled");
    let defers = || async {
        let sql = "SELECT prosrc LIKE '%switchyard.defer_notify%' FROM pg_proc WHERE oid = to_regproc($1)";
        admin.query_one(sql, &[&function]).await.expect("the function exists").get::<_, bool>(0)
    };
    let claims = format!("{schema}.switchyard_claims");
    let guarded = || async {
        let sql = "SELECT pg_get_triggerdef(oid) ILIKE '%WHEN%old.waited%' FROM pg_trigger \
                   WHERE tgrelid = to_regclass($1) AND tgname = 'switchyard_claims_settled'";
        admin.query_one(sql, &[&claims]).await.expect("the trigger exists").get::<_, bool>(0)
    };
    let marked = || async {
        let sql = "SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'waited' \
                   AND NOT attisdropped";
        admin.query_one(sql, &[&claims]).await.expect("the catalog").get::<_, i64>(0) == 1
    };
    assert!(defers().await, "a new schema's trigger defers");
    assert!(guarded().await, "a new schema's trigger tests the mark in its WHEN clause");
    assert!(marked().await, "a new schema's claims have the mark");
    // The trigger and the function as older versions defined them: no clause, and it always notifies.
    admin
        .batch_execute(&format!(
            "DROP TRIGGER switchyard_claims_settled ON {schema}.switchyard_claims;
             CREATE TRIGGER switchyard_claims_settled AFTER UPDATE OF state OR DELETE ON {schema}.switchyard_claims
                 FOR EACH ROW EXECUTE PROCEDURE {function}();
             ALTER TABLE {schema}.switchyard_claims DROP COLUMN waited;"
        ))
        .await
        .expect("the older trigger and table");
    admin
        .batch_execute(&format!(
            "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$
             BEGIN
                 IF OLD.state = 'in_flight' AND (TG_OP = 'DELETE' OR NEW.state <> 'in_flight') THEN
                     PERFORM pg_notify('switchyard_settled_{schema}', OLD.key);
                 END IF;
                 RETURN NULL;
             END
             $body$;"
        ))
        .await
        .expect("the older function");
    assert!(!defers().await && !guarded().await && !marked().await);
    let second = harness.second().await;
    assert!(defers().await, "the next start redefined it");
    assert!(guarded().await, "the next start gave the trigger its WHEN clause");
    assert!(marked().await, "the next start added the mark");
    // The older rows, unmarked, still settle.
    assert!(matches!(second.claim(claim_of("after", "gw-b")).await, Ok(ClaimOutcome::Claimed(_))));
    second
        .complete(&key("after"), "gw-b", &RawJson::of(&json!({"ok": true})), super::MAX_RESULT)
        .await
        .expect("settle");
    drop(second);
    harness.finish().await;
}

/// The settled-claims channel carries only the settles some replica waits for: a claim nobody waits for settles
/// without a notification, one another replica waits for is announced (and wakes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_announces_only_the_settles_a_replica_waits_for() {
    let Some((harness, admin, schema)) = postgres_with_admin().await else {
        return;
    };
    let (_listening, mut heard) = listen(&format!("switchyard_settled_{schema}")).await;
    for name in ["quiet", "watched"] {
        assert!(matches!(harness.store.claim(claim_of(name, "gw-a")).await, Ok(ClaimOutcome::Claimed(_))));
    }
    let second = harness.second().await;
    let waiter = {
        let second = second.clone();
        tokio::spawn(
            async move { second.wait_settled(&key("watched"), Instant::now() + Duration::from_secs(20)).await },
        )
    };
    let sql = format!("SELECT waited FROM {schema}.switchyard_claims WHERE key = $1");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !admin.query_one(&sql, &[&key("watched").as_str()]).await.expect("the claim").get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "the waiter never marked its claim");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let unmarked: bool = admin.query_one(&sql, &[&key("quiet").as_str()]).await.expect("the claim").get(0);
    assert!(!unmarked, "nobody waits for the quiet claim");

    let result = RawJson::of(&json!({"ok": true}));
    // Settled one after the other, so a notification of the first would come before the second's.
    harness.store.complete(&key("quiet"), "gw-a", &result, super::MAX_RESULT).await.expect("complete");
    harness.store.complete(&key("watched"), "gw-a", &result, super::MAX_RESULT).await.expect("complete");
    let first = tokio::time::timeout(Duration::from_secs(10), heard.recv()).await.expect("announced").expect("open");
    assert_eq!(first, key("watched").as_str(), "the quiet settle was announced too");
    assert!(matches!(waiter.await.expect("waiter"), Ok(WaitOutcome::Settled(_))));
    drop(second);
    harness.finish().await;
}

/// The payloads of `channel`'s notifications, on a connection of its own (open while the client lives).
async fn listen(channel: &str) -> (tokio_postgres::Client, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (client, mut connection) =
        tokio_postgres::connect(&super::postgres_admin_url(), tokio_postgres::NoTls).await.expect("connect");
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let tokio_postgres::AsyncMessage::Notification(note) = message {
                drop(sender.send(note.payload().to_owned()));
            }
        }
    });
    client.batch_execute(&format!("LISTEN \"{channel}\"")).await.expect("listen");
    (client, receiver)
}
