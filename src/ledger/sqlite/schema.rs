//! Changes to the claims table's definition that leave every stored byte as it is, made in place when a file
//! opens.
//!
//! Rules:
//! - Files made before declared the state constraint as `state IN (…)`, which SQLite checks by building a
//!   temporary table on every claim and every settle; it is rewritten to the `OR` spelling
//!   ([`Dialect::state_check`](crate::ledger::sql::Dialect::state_check)), which accepts exactly the same rows.
//! - A constraint is no part of the file's format, so the change edits the table's text in `sqlite_schema`, the
//!   procedure SQLite documents for changing `CHECK` constraints (<https://sqlite.org/lang_altertable.html>,
//!   *Making Other Kinds Of Table Schema Changes*), inside the transaction that opens the file, and bumps the
//!   schema cookie so every connection re-reads the definition. The schema version (`user_version`) stays: a
//!   build from before opens the file as it always did. Only speed depends on the rewrite, so a file where it
//!   fails is opened all the same (with a warning).

use rusqlite::{OptionalExtension, Transaction, params};

use crate::ledger::error::LedgerError;
use crate::ledger::sql::{CLAIMS_TABLE, STATE_CHECK, STATE_CHECK_IN};

/// Rewrites the claims table's state constraint to the `OR` spelling if it still has the `IN` one; returns
/// whether it did.
pub(super) fn rewrite_state_check(tx: &Transaction<'_>) -> Result<bool, LedgerError> {
    let defined = "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1";
    let sql: Option<String> = tx.query_row(defined, [CLAIMS_TABLE], |row| row.get(0)).optional()?;
    let Some(sql) = sql.filter(|sql| sql.contains(STATE_CHECK_IN)) else {
        return Ok(false);
    };
    let cookie: i64 = tx.query_row("PRAGMA schema_version", [], |row| row.get(0))?;
    tx.pragma_update(None, "writable_schema", true)?;
    let rewritten = tx.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = ?2",
        params![sql.replace(STATE_CHECK_IN, STATE_CHECK), CLAIMS_TABLE],
    );
    let bumped = tx.pragma_update(None, "schema_version", cookie + 1);
    tx.pragma_update(None, "writable_schema", false)?;
    rewritten?;
    bumped?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::ledger::sql::{Dialect, create_statements};
    use crate::ledger::sqlite::SqliteStore;
    use crate::ledger::sqlite::worker::NEW_FILE_PAGE_SIZE;
    use crate::ledger::tests::{claim_of, scratch_dir};
    use crate::ledger::types::{ClaimKey, ClaimOutcome, ClaimState};
    use crate::raw_json::RawJson;

    /// A file whose claims table was made with the `IN` spelling, holding one completed claim; `clustered`: the
    /// table is clustered on its key (`WITHOUT ROWID`), as files were made before they stored claims in
    /// insertion order.
    fn file_from_before(path: &std::path::Path, clustered: bool) {
        let conn = Connection::open(path).expect("open");
        for statement in create_statements(CLAIMS_TABLE, Dialect::Sqlite) {
            let layout = if clustered && statement.starts_with("CREATE TABLE") { " WITHOUT ROWID" } else { "" };
            conn.execute_batch(&format!("{}{layout}", statement.replace(STATE_CHECK, STATE_CHECK_IN))).expect("create");
        }
        conn.execute_batch(&format!(
            "INSERT INTO {CLAIMS_TABLE} VALUES ('k', 'i', 'p', 's', 'b', 't', 'd', 'completed', '{{}}', NULL, NULL, \
             1, 2, 'gw', 3); PRAGMA user_version = 1"
        ))
        .expect("a row");
    }

    fn definition(conn: &Connection) -> String {
        let defined = "SELECT sql FROM sqlite_schema WHERE name = ?1";
        conn.query_row(defined, [CLAIMS_TABLE], |row| row.get(0)).expect("the table")
    }

    #[test]
    fn an_old_state_check_is_rewritten_once_and_still_refuses_unknown_states() {
        let dir = scratch_dir("state-check");
        let path = dir.join("ledger.db");
        file_from_before(&path, false);
        let mut conn = Connection::open(&path).expect("open");
        let tx = conn.transaction().expect("tx");
        assert!(rewrite_state_check(&tx).expect("rewrites"));
        assert!(!rewrite_state_check(&tx).expect("nothing left"), "a second pass finds the new spelling");
        tx.commit().expect("commit");
        assert!(definition(&conn).contains(STATE_CHECK) && !definition(&conn).contains(STATE_CHECK_IN));
        drop(conn);

        // Another connection reads the new definition; the row is intact and the constraint still holds.
        let conn = Connection::open(&path).expect("reopen");
        let state: String = conn
            .query_row(&format!("SELECT state FROM {CLAIMS_TABLE} WHERE key = 'k'"), [], |row| row.get(0))
            .expect("row");
        assert_eq!(state, "completed");
        let bogus = conn.execute(&format!("UPDATE {CLAIMS_TABLE} SET state = 'done' WHERE key = 'k'"), []);
        assert!(bogus.is_err(), "a state outside the three is refused");
        conn.execute(&format!("UPDATE {CLAIMS_TABLE} SET state = 'unknown' WHERE key = 'k'"), []).expect("a known one");
        let check: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("check");
        assert_eq!(check, "ok");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_store_opens_a_file_from_before_and_keeps_its_claims() {
        for clustered in [false, true] {
            let dir = scratch_dir("state-check-store");
            let path = dir.join("ledger.db");
            file_from_before(&path, clustered);
            let store = SqliteStore::open(&path).await.expect("opens");
            let old = store.get(&ClaimKey::from_stored("k".into())).await.expect("read").expect("kept");
            assert_eq!(old.state, ClaimState::Completed);
            claim_and_complete(&store, "fresh").await;
            drop(store);
            let conn = Connection::open(&path).expect("reopen");
            assert!(definition(&conn).contains(STATE_CHECK), "rewritten by the store's opening");
            assert_eq!(definition(&conn).contains("WITHOUT ROWID"), clustered, "a file keeps its layout");
            assert_eq!(page_size(&conn), 4096, "a file that exists keeps its page size");
            let check: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("check");
            assert_eq!(check, "ok");
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Claims `name`, finds a second claim of it refused, completes it and reads it back completed.
    async fn claim_and_complete(store: &SqliteStore, name: &str) {
        let new = claim_of(name, "gw");
        let key = new.key.clone();
        assert!(matches!(store.claim(new.clone()).await.expect("claims"), ClaimOutcome::Claimed(_)));
        assert!(matches!(store.claim(new).await.expect("answers"), ClaimOutcome::Existing(_)), "the key is unique");
        store.complete(&key, "gw", &RawJson::of(&serde_json::json!({"ok": 1})), 1 << 20).await.expect("completes");
        assert_eq!(store.get(&key).await.expect("read").expect("there").state, ClaimState::Completed);
    }

    #[tokio::test]
    async fn a_new_file_stores_claims_in_insertion_order_under_a_unique_key_that_cannot_be_null() {
        let dir = scratch_dir("rowid");
        let path = dir.join("ledger.db");
        let store = SqliteStore::open(&path).await.expect("creates");
        claim_and_complete(&store, "ordered").await;
        drop(store);
        let conn = Connection::open(&path).expect("reopen");
        assert!(!definition(&conn).contains("WITHOUT ROWID"), "a rowid table: {}", definition(&conn));
        // A rowid table's primary key would take NULL unless declared NOT NULL.
        let null_key = conn.execute(
            &format!(
                "INSERT INTO {CLAIMS_TABLE} VALUES (NULL, 'i', 'p', 's', 'b', 't', 'd', 'completed', '{{}}', NULL, \
                 NULL, 1, 2, 'gw', 3)"
            ),
            [],
        );
        let refused = null_key.expect_err("a claim without a key is refused").to_string();
        assert!(refused.contains("NOT NULL"), "refused for its missing key: {refused}");
        let _ = std::fs::remove_dir_all(dir);
    }

    fn page_size(conn: &Connection) -> u32 {
        conn.query_row("PRAGMA page_size", [], |row| row.get(0)).expect("page size")
    }

    #[tokio::test]
    async fn a_new_file_gets_the_smaller_pages_and_reopens_with_them() {
        let dir = scratch_dir("page-size");
        let path = dir.join("ledger.db");
        let key = {
            let store = SqliteStore::open(&path).await.expect("creates");
            let new = claim_of("paged", "gw");
            let key = new.key.clone();
            assert!(matches!(store.claim(new).await.expect("claims"), ClaimOutcome::Claimed(_)));
            key
        };
        let conn = Connection::open(&path).expect("reopen");
        assert_eq!(page_size(&conn), NEW_FILE_PAGE_SIZE);
        drop(conn);
        let store = SqliteStore::open(&path).await.expect("reopens");
        assert_eq!(store.get(&key).await.expect("read").expect("kept").state, ClaimState::InFlight);
        let _ = std::fs::remove_dir_all(dir);
    }
}
