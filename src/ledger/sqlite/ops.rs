//! The ledger operations as SQLite statements, run on the worker thread.
//!
//! Rules: each operation is one statement (atomic by itself, also against other processes on the same file),
//! except that a statement which changed nothing is followed by a read to say why (see [`rules::explain`]);
//! statements come from the connection's prepared-statement cache.

use std::sync::LazyLock;
use std::time::SystemTime;

use rusqlite::{OptionalExtension, Row, params};

use super::worker::Db;
use crate::ledger::error::LedgerError;
use crate::ledger::resolutions::{self, Pick, RESOLUTIONS_TABLE, ResolutionRecord, ResolutionSql, Resolve};
use crate::ledger::rules::{self, RESOLVED_NOTE, Settle, Verdict};
use crate::ledger::sql::{CLAIMS_TABLE, Dialect, PURGE_SLICE, RACE_ATTEMPTS, RawRow};
use crate::ledger::types::{
    ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, ListFilter, NewClaim, OPERATOR, Resolution, to_millis,
};

pub(super) fn claim(db: &Db, new: &NewClaim, id: String, now: SystemTime) -> Result<ClaimOutcome, LedgerError> {
    let now_ms = to_millis(now);
    let lease_until = to_millis(now + new.lease);
    for _ in 0..RACE_ATTEMPTS {
        let inserted = db.conn.prepare_cached(&db.sql.insert)?.execute(params![
            new.key.as_str(),
            id,
            new.principal,
            new.session,
            new.backend,
            new.tool,
            new.args_digest,
            now_ms,
            new.owner,
            lease_until,
        ])?;
        if inserted == 1 {
            return Ok(ClaimOutcome::Claimed(ClaimRecord::claimed(new, id, now)));
        }
        // Present when the insert conflicted, unless it was released in between: then try again.
        if let Some(existing) = get(db, new.key.as_str())? {
            return Ok(ClaimOutcome::Existing(existing));
        }
    }
    Err(LedgerError::unavailable(format!("claim {} kept changing under concurrent updates", new.key)))
}

pub(super) fn get(db: &Db, key: &str) -> Result<Option<ClaimRecord>, LedgerError> {
    db.conn.prepare_cached(&db.sql.select)?.query_row([key], raw_row).optional()?.map(RawRow::into_record).transpose()
}

/// Applies an owner's settle; see [`rules`].
pub(super) fn settle(
    db: &Db,
    key: &ClaimKey,
    owner: &str,
    operation: Settle<'_>,
    now: SystemTime,
) -> Result<(), LedgerError> {
    let now = to_millis(now);
    for _ in 0..RACE_ATTEMPTS {
        let changed = match operation {
            Settle::Complete(stored) => db.conn.prepare_cached(&db.sql.complete)?.execute(params![
                key.as_str(),
                owner,
                stored.text,
                stored.digest,
                now
            ])?,
            Settle::MarkUnknown(error) => {
                db.conn.prepare_cached(&db.sql.mark_unknown)?.execute(params![key.as_str(), owner, error, now])?
            }
            Settle::Release => db.conn.prepare_cached(&db.sql.release)?.execute(params![key.as_str(), owner])?,
        };
        if changed > 0
            || rules::explain(operation, key, owner, get(db, key.as_str())?.as_ref())? == Verdict::AlreadyDone
        {
            return Ok(());
        }
    }
    Err(LedgerError::unavailable(format!("claim {key} kept changing under concurrent updates")))
}

pub(super) fn renew(db: &Db, owner: &str, lease_until: SystemTime) -> Result<u64, LedgerError> {
    Ok(db.conn.prepare_cached(&db.sql.renew)?.execute(params![owner, to_millis(lease_until)])? as u64)
}

pub(super) fn expire(db: &Db, now: SystemTime, note: &str) -> Result<Vec<String>, LedgerError> {
    keys_of(db, &db.sql.expire, params![to_millis(now), note])
}

pub(super) fn orphan(db: &Db, owner: &str, note: &str, now: SystemTime) -> Result<Vec<String>, LedgerError> {
    keys_of(db, &db.sql.orphan, params![owner, note, to_millis(now)])
}

fn keys_of(db: &Db, sql: &str, params: impl rusqlite::Params) -> Result<Vec<String>, LedgerError> {
    let mut statement = db.conn.prepare_cached(sql)?;
    let keys = statement.query_map(params, |row| row.get(0))?.collect::<Result<Vec<String>, _>>()?;
    Ok(keys)
}

/// Deletes up to [`PURGE_SLICE`] old settled claims.
pub(super) fn purge_slice(db: &Db, cutoff: SystemTime) -> Result<u64, LedgerError> {
    let slice = i64::try_from(PURGE_SLICE).unwrap_or(i64::MAX);
    Ok(db.conn.prepare_cached(&db.sql.purge)?.execute(params![to_millis(cutoff), slice])? as u64)
}

pub(super) fn list(db: &Db, filter: &ListFilter) -> Result<Vec<ClaimRecord>, LedgerError> {
    let mut statement = db.conn.prepare_cached(&db.sql.list)?;
    let rows = statement.query_map(
        params![
            filter.state.map(ClaimState::as_str),
            filter.principal,
            filter.backend,
            filter.tool,
            filter.since.map(to_millis),
            i64::try_from(filter.limit).unwrap_or(i64::MAX),
        ],
        raw_row,
    )?;
    rows.map(|row| row.map_err(LedgerError::from).and_then(RawRow::into_record)).collect()
}

/// Records the resolution and settles the claim in one transaction; nothing changes unless the claim is `unknown`.
pub(super) fn resolve(db: &mut Db, key: &ClaimKey, resolve: &Resolve, now: SystemTime) -> Result<(), LedgerError> {
    // A savepoint, not a transaction: in a batch the job already runs inside the batch's transaction.
    let tx = db.conn.savepoint()?;
    let (resolution, by, at, note) = resolutions::values(resolve, now);
    let recorded =
        tx.prepare_cached(&RESOLUTION_SQL.record)?.execute(params![key.as_str(), resolution, by, at, note])?;
    if recorded == 0 {
        drop(tx);
        return rules::explain_resolve(key, get(db, key.as_str())?.as_ref());
    }
    match resolve.resolution {
        Resolution::Completed => {
            tx.prepare_cached(&db.sql.resolve_completed)?.execute(params![key.as_str(), OPERATOR, RESOLVED_NOTE, at])?
        }
        Resolution::Failed => tx.prepare_cached(&db.sql.resolve_failed)?.execute([key.as_str()])?,
    };
    tx.commit()?;
    Ok(())
}

/// The resolutions `pick` selects, oldest first.
pub(super) fn resolutions(db: &Db, pick: &Pick) -> Result<Vec<ResolutionRecord>, LedgerError> {
    let mut statement = db.conn.prepare_cached(RESOLUTION_SQL.select_of(pick))?;
    let value: &dyn rusqlite::ToSql = match pick {
        Pick::Key(key) => key,
        Pick::Since(since) => since,
    };
    let rows = statement.query_map([value], |row| row.try_into())?;
    rows.map(|row| resolutions::from_columns(row?)).collect()
}

static RESOLUTION_SQL: LazyLock<ResolutionSql> =
    LazyLock::new(|| ResolutionSql::new(CLAIMS_TABLE, RESOLUTIONS_TABLE, Dialect::Sqlite));

/// Those of `keys` that are no longer in flight (settled or gone), for the cross-process poll.
pub(super) fn settled_among(db: &Db, keys: Vec<String>) -> Result<Vec<String>, LedgerError> {
    let mut settled = Vec::new();
    for key in keys {
        if get(db, &key)?.is_none_or(|record| record.state != ClaimState::InFlight) {
            settled.push(key);
        }
    }
    Ok(settled)
}

pub(super) fn ping(db: &Db) -> Result<(), LedgerError> {
    let version: i64 = db.conn.prepare_cached("PRAGMA user_version")?.query_row([], |row| row.get(0))?;
    if version > 0 { Ok(()) } else { Err(LedgerError::corrupt("the ledger's schema has disappeared")) }
}

fn raw_row(row: &Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        key: row.get(0)?,
        id: row.get(1)?,
        principal: row.get(2)?,
        session: row.get(3)?,
        backend: row.get(4)?,
        tool: row.get(5)?,
        args_digest: row.get(6)?,
        state: row.get(7)?,
        result: row.get(8)?,
        result_digest: row.get(9)?,
        error: row.get(10)?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
        owner: row.get(13)?,
        lease_until: row.get(14)?,
    })
}
