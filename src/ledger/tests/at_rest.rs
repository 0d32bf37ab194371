//! Results at rest in both SQL stores: with the vault key, a completed result is stored sealed (the raw row holds
//! no plaintext) and replays unchanged, through `get`, a duplicate's claim and `list`; a row written in the clear
//! before the key was given still replays; a store without the key refuses a sealed row instead of answering with
//! it.

use serde_json::json;
use tokio::time::{Duration, Instant};

use super::{Harness, claim_of};
use crate::ledger::sql::CLAIMS_TABLE;
use crate::ledger::{ClaimKey, ClaimOutcome, LedgerError, LedgerStore, ListFilter, Settlement, WaitOutcome};
use crate::raw_json::RawJson;

const VAULT_KEY: [u8; 32] = [11; 32];

fn result(text: &str) -> RawJson {
    RawJson::of(&json!({"content": [{"type": "text", "text": text}]}))
}

/// The `result` column of claim `name` as stored.
async fn raw_result(harness: &Harness, name: &str) -> String {
    let key = ClaimKey::idempotency("alice", name).as_str().to_owned();
    let sql = |table: &str, placeholder: &str| format!("SELECT result FROM {table} WHERE key = {placeholder}");
    match &harness.backing {
        super::Backing::Sqlite { dir } => {
            let conn = rusqlite::Connection::open(dir.join(crate::ledger::SQLITE_FILE_NAME)).expect("open");
            conn.query_row(&sql(CLAIMS_TABLE, "?1"), [&key], |row| row.get(0)).expect("a row")
        }
        super::Backing::Postgres { schema, .. } => {
            let admin = super::postgres_admin().await.expect("PostgreSQL was reachable a moment ago");
            let table = format!("{schema}.{CLAIMS_TABLE}");
            admin.query_one(&sql(&table, "$1"), &[&key]).await.expect("a row").get(0)
        }
        super::Backing::Memory => unreachable!("the memory store has no rows"),
    }
}

async fn completed(store: &LedgerStore, name: &str, text: &str) {
    assert!(matches!(store.claim(claim_of(name, "gw-a")).await, Ok(ClaimOutcome::Claimed(_))));
    store
        .complete(&ClaimKey::idempotency("alice", name), "gw-a", &result(text), super::MAX_RESULT)
        .await
        .expect("done");
}

async fn replayed(store: &LedgerStore, name: &str) -> Option<RawJson> {
    match store.claim(claim_of(name, "gw-b")).await.expect("claim") {
        ClaimOutcome::Existing(record) => record.result,
        ClaimOutcome::Claimed(_) => panic!("{name} was claimed again"),
    }
}

async fn sealed_results_replay_and_plaintext_rows_still_do(harness: Harness) {
    let store = &harness.store;
    completed(store, "old", "written in the clear").await;
    store.seal_results(&VAULT_KEY, true);
    completed(store, "new", "sealed words").await;
    assert!(matches!(store.claim(claim_of("soon", "gw-a")).await, Ok(ClaimOutcome::Claimed(_))));
    let soon = ClaimKey::idempotency("alice", "soon");
    store.settle_soon(&soon, "gw-a", Settlement::Completed(result("queued words")), super::MAX_RESULT);
    let settled = store.wait_settled(&soon, Instant::now() + Duration::from_secs(20)).await.expect("wait");
    assert!(matches!(&settled, WaitOutcome::Settled(record) if record.result == Some(result("queued words"))));

    for (name, text) in [("new", "sealed words"), ("soon", "queued words")] {
        let raw = raw_result(&harness, name).await;
        assert!(raw.starts_with("\"switchyard:sealed:v1:") && !raw.contains(text), "{name}: {raw}");
        assert_eq!(replayed(store, name).await, Some(result(text)), "{name} replays unchanged");
    }
    assert_eq!(raw_result(&harness, "old").await, result("written in the clear").get(), "the old row is untouched");
    assert_eq!(replayed(store, "old").await, Some(result("written in the clear")));
    let listed = store.list(&ListFilter::default()).await.expect("list");
    assert!(listed.iter().all(|record| record.result.as_ref().is_some_and(|r| !r.get().contains("sealed:v1"))));

    // Another instance without the key cannot answer from a sealed row, and says so; with it, it can.
    let keyless = harness.second().await;
    let refused = keyless.get(&ClaimKey::idempotency("alice", "new")).await.expect_err("sealed");
    assert!(matches!(&refused, LedgerError::Corrupt { .. }) && refused.to_string().contains("vault key"), "{refused}");
    keyless.seal_results(&VAULT_KEY, false);
    assert_eq!(replayed(&keyless, "new").await, Some(result("sealed words")));
    drop(keyless);
    harness.finish().await;
}

#[tokio::test]
async fn sqlite_sealed_results_replay_and_plaintext_rows_still_do() {
    sealed_results_replay_and_plaintext_rows_still_do(Harness::sqlite().await.expect("SQLite")).await;
}

#[tokio::test]
async fn postgres_sealed_results_replay_and_plaintext_rows_still_do() {
    if let Some(harness) = Harness::postgres().await {
        sealed_results_replay_and_plaintext_rows_still_do(harness).await;
    }
}
