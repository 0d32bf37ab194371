//! Tests of the gathering VFS: one write per commit, commits in the file when they return (as a crash would
//! leave it), and the paths that go straight through (a spilled transaction's rewrites, a restarted log).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use super::*;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sy-sqlite-log-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A connection through this VFS, set up as the ledger's writer is: WAL, `synchronous = NORMAL`, 2 KiB pages.
fn gathering(path: &Path) -> Connection {
    let conn =
        Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs().expect("registered")).expect("open");
    conn.execute_batch(
        "PRAGMA page_size = 2048; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, key TEXT UNIQUE, body TEXT)",
    )
    .expect("set up");
    conn
}

fn insert(conn: &Connection, from: i64, count: i64) {
    let tx = conn.unchecked_transaction().expect("begin");
    for id in from..from + count {
        tx.execute(
            "INSERT INTO t VALUES (?1, ?2, ?3)",
            params![id, format!("key-{}", id * 7919 % 10007), "x".repeat(300)],
        )
        .expect("insert");
    }
    tx.commit().expect("commit");
}

/// What a crash of this process would leave: the database and its log as the kernel holds them, without the
/// shared wal-index, so whoever opens the copy rebuilds it from the log's frames alone.
fn as_left_by_a_crash(path: &Path, dir: &Path) -> Connection {
    let copy = dir.join("copy.db");
    std::fs::copy(path, &copy).expect("copy the database");
    std::fs::copy(path.with_extension("db-wal"), dir.join("copy.db-wal")).expect("copy the log");
    let _ = std::fs::remove_file(dir.join("copy.db-shm"));
    Connection::open(&copy).expect("open the copy")
}

fn rows(conn: &Connection) -> (i64, String) {
    let count = conn.query_row("SELECT count(*) FROM t", [], |row| row.get(0)).expect("count");
    let check = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("check");
    (count, check)
}

#[test]
fn a_commit_of_many_pages_is_one_write_seen_at_once_by_another_connection() {
    let dir = scratch("one-write");
    let path = dir.join("ledger.db");
    let conn = gathering(&path);
    insert(&conn, 0, 1);
    let reader = Connection::open(&path).expect("a connection through the default VFS");
    assert_eq!(log_writes(&reader), None, "the default VFS's log is not ours");

    let before = log_writes(&conn).expect("the log is ours");
    insert(&conn, 1, 40);
    assert_eq!(log_writes(&conn).expect("ours") - before, 1, "about a dozen pages, one write");
    assert_eq!(rows(&reader), (41, "ok".to_owned()), "the commit is in the file when it returns");

    // Past what one write of the default VFS may carry, a commit takes several.
    let before = log_writes(&conn).expect("ours");
    insert(&conn, 41, 2000);
    let writes = log_writes(&conn).expect("ours") - before;
    assert!((2..100).contains(&writes), "about 1.3 MB of frames in runs of at most 64 KiB: {writes}");
    assert_eq!(rows(&reader), (2041, "ok".to_owned()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn committed_transactions_are_in_the_log_file_without_closing_the_connection() {
    let dir = scratch("crash");
    let path = dir.join("ledger.db");
    let conn = gathering(&path);
    for batch in 0..20 {
        insert(&conn, batch * 10, 10);
    }
    // Nothing is closed or flushed beyond what the commits did.
    assert_eq!(rows(&as_left_by_a_crash(&path, &dir)), (200, "ok".to_owned()));
    drop(conn);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn pages_rewritten_after_a_spill_and_a_restarted_log_leave_a_consistent_file() {
    let dir = scratch("spill");
    let path = dir.join("ledger.db");
    let conn = gathering(&path);
    insert(&conn, 0, 50);
    // A cache of a few pages spills a large transaction's pages to the log before its commit; updating the first
    // rows again rewrites frames of the same transaction in place, and SQLite then rewrites their checksums.
    conn.execute_batch("PRAGMA cache_size = 4").expect("small cache");
    let tx = conn.unchecked_transaction().expect("begin");
    for id in 50..450 {
        tx.execute("INSERT INTO t VALUES (?1, ?2, ?3)", params![id, format!("k{id}"), "y".repeat(200)])
            .expect("insert");
    }
    tx.execute("UPDATE t SET body = 'rewritten' WHERE id < 100", []).expect("rewrite early pages");
    tx.commit().expect("commit");
    let crashed = as_left_by_a_crash(&path, &dir);
    assert_eq!(rows(&crashed), (450, "ok".to_owned()));
    let rewritten: i64 =
        crashed.query_row("SELECT count(*) FROM t WHERE body = 'rewritten'", [], |row| row.get(0)).expect("count");
    assert_eq!(rewritten, 100);
    drop(crashed);

    // After a checkpoint that restarts it, the log is written again from its start over its old frames.
    let checkpointed: i64 = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| row.get(0)).expect("checkpoint");
    assert_eq!(checkpointed, 0, "not busy");
    insert(&conn, 1000, 30);
    insert(&conn, 2000, 1);
    assert_eq!(rows(&as_left_by_a_crash(&path, &dir)), (481, "ok".to_owned()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_writers_on_one_file_take_turns_without_losing_each_others_commits() {
    let dir = scratch("two-writers");
    let path = dir.join("ledger.db");
    let (first, second) = (gathering(&path), gathering(&path));
    for turn in 0..30 {
        let writer = if turn % 2 == 0 { &first } else { &second };
        insert(writer, turn * 5, 5);
    }
    assert_eq!(rows(&as_left_by_a_crash(&path, &dir)), (150, "ok".to_owned()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_log_that_cannot_be_opened_fails_the_statement_and_the_connection_recovers() {
    let dir = scratch("unopenable");
    let path = dir.join("ledger.db");
    insert(&gathering(&path), 0, 3);
    // The last connection closed removed the log; a directory in its place cannot be opened as a file.
    let log = path.with_extension("db-wal");
    std::fs::create_dir(&log).expect("a directory where the log goes");
    let conn = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), vfs().expect("registered"))
        .expect("the database itself opens");
    let refused = conn.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0));
    assert!(refused.is_err(), "no log, no read: {refused:?}");
    std::fs::remove_dir(&log).expect("the directory goes");
    assert_eq!(rows(&conn), (3, "ok".to_owned()), "the next statement opens the log");
    assert!(log_writes(&conn).is_some(), "through this VFS");
    let _ = std::fs::remove_dir_all(dir);
}
