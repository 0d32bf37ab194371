//! The ledger operations as prepared PostgreSQL statements on one [`Session`].
//!
//! Rules: each operation is one statement, atomic under PostgreSQL's row locks and `ON CONFLICT` (a concurrent
//! insert of the same key waits for the first to commit, then does nothing); a statement that changed nothing
//! is followed by a read to say why (see [`rules::explain`]). Statements run in autocommit, so the trigger's
//! notification is sent as soon as the change is visible.

use std::time::SystemTime;

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::conn::{Failure, Session};
use crate::ledger::error::LedgerError;
use crate::ledger::resolutions::{self, Columns, Pick, ResolutionRecord, ResolutionSql, Resolve};
use crate::ledger::rules::{self, RESOLVED_NOTE, Settle, Verdict};
use crate::ledger::sql::{PURGE_SLICE, RACE_ATTEMPTS, RawRow};
use crate::ledger::types::{
    ClaimKey, ClaimOutcome, ClaimRecord, ClaimState, ListFilter, NewClaim, OPERATOR, Resolution, to_millis,
};

pub(super) async fn claim(
    session: &Session,
    new: &NewClaim,
    id: &str,
    now: SystemTime,
) -> Result<ClaimOutcome, Failure> {
    let (now_ms, lease_until) = (to_millis(now), to_millis(now + new.lease));
    for _ in 0..RACE_ATTEMPTS {
        let inserted = session
            .client
            .execute(
                &session.prepared.insert,
                &[
                    &new.key.as_str(),
                    &id,
                    &new.principal,
                    &new.session,
                    &new.backend,
                    &new.tool,
                    &new.args_digest,
                    &now_ms,
                    &new.owner,
                    &lease_until,
                ],
            )
            .await?;
        if inserted == 1 {
            return Ok(ClaimOutcome::Claimed(ClaimRecord::claimed(new, id.to_owned(), now)));
        }
        match get(session, new.key.as_str()).await? {
            // Our own insert, committed before the connection broke and retried now.
            Some(existing) if existing.id == id => return Ok(ClaimOutcome::Claimed(existing)),
            Some(existing) => return Ok(ClaimOutcome::Existing(existing)),
            // Released between the insert and the read: try again.
            None => {}
        }
    }
    Err(LedgerError::unavailable(format!("claim {} kept changing under concurrent updates", new.key)).into())
}

pub(super) async fn get(session: &Session, key: &str) -> Result<Option<ClaimRecord>, Failure> {
    match session.client.query_opt(&session.prepared.select, &[&key]).await? {
        Some(row) => Ok(Some(record(&row)?)),
        None => Ok(None),
    }
}

/// Marks the in-flight claim `key` waited for (nothing when it is settled, gone or marked already).
pub(super) async fn watch(session: &Session, key: &str) -> Result<(), Failure> {
    session.client.execute(&session.prepared.watch, &[&key]).await?;
    Ok(())
}

/// Applies an owner's settle; see [`rules`].
pub(super) async fn settle(
    session: &Session,
    key: &ClaimKey,
    owner: &str,
    operation: Settle<'_>,
    now: SystemTime,
) -> Result<(), Failure> {
    let (client, prepared, now) = (&session.client, &session.prepared, to_millis(now));
    for _ in 0..RACE_ATTEMPTS {
        let changed = match operation {
            Settle::Complete(stored) => {
                client.execute(&prepared.complete, &[&key.as_str(), &owner, &stored.text, &stored.digest, &now]).await?
            }
            Settle::MarkUnknown(error) => {
                client.execute(&prepared.mark_unknown, &[&key.as_str(), &owner, &error, &now]).await?
            }
            Settle::Release => client.execute(&prepared.release, &[&key.as_str(), &owner]).await?,
        };
        if changed > 0 {
            return Ok(());
        }
        let current = get(session, key.as_str()).await?;
        if rules::explain(operation, key, owner, current.as_ref())? == Verdict::AlreadyDone {
            return Ok(());
        }
    }
    Err(LedgerError::unavailable(format!("claim {key} kept changing under concurrent updates")).into())
}

pub(super) async fn renew(session: &Session, owner: &str, lease_until: SystemTime) -> Result<u64, Failure> {
    Ok(session.client.execute(&session.prepared.renew, &[&owner, &to_millis(lease_until)]).await?)
}

pub(super) async fn expire(session: &Session, now: SystemTime, note: &str) -> Result<Vec<String>, Failure> {
    let rows = session.client.query(&session.prepared.expire, &[&to_millis(now), &note]).await?;
    keys(&rows)
}

pub(super) async fn orphan(
    session: &Session,
    owner: &str,
    note: &str,
    now: SystemTime,
) -> Result<Vec<String>, Failure> {
    let rows = session.client.query(&session.prepared.orphan, &[&owner, &note, &to_millis(now)]).await?;
    keys(&rows)
}

fn keys(rows: &[Row]) -> Result<Vec<String>, Failure> {
    rows.iter().map(|row| row.try_get(0).map_err(corrupt_row)).collect()
}

/// Deletes up to [`PURGE_SLICE`] old settled claims.
pub(super) async fn purge_slice(session: &Session, cutoff: SystemTime) -> Result<u64, Failure> {
    let slice = i64::try_from(PURGE_SLICE).unwrap_or(i64::MAX);
    Ok(session.client.execute(&session.prepared.purge, &[&to_millis(cutoff), &slice]).await?)
}

pub(super) async fn list(session: &Session, filter: &ListFilter) -> Result<Vec<ClaimRecord>, Failure> {
    let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
    let rows = session
        .client
        .query(
            &session.prepared.list,
            &[
                &filter.state.map(ClaimState::as_str),
                &filter.principal,
                &filter.backend,
                &filter.tool,
                &filter.since.map(to_millis),
                &limit,
            ],
        )
        .await?;
    rows.iter().map(record).collect()
}

/// Records the resolution and settles the claim in one statement ([`ResolutionSql`]); nothing changes unless the
/// claim is `unknown`.
pub(super) async fn resolve(
    session: &Session,
    sql: &ResolutionSql,
    key: &ClaimKey,
    resolve: &Resolve,
    now: SystemTime,
) -> Result<(), Failure> {
    let (resolution, by, at, note) = resolutions::values(resolve, now);
    let key_text = key.as_str();
    let recorded = match resolve.resolution {
        Resolution::Completed => {
            let values: [&(dyn ToSql + Sync); 7] = [&key_text, &resolution, &by, &at, &note, &OPERATOR, &RESOLVED_NOTE];
            session.client.execute(sql.complete.as_str(), &values).await?
        }
        Resolution::Failed => {
            let values: [&(dyn ToSql + Sync); 5] = [&key_text, &resolution, &by, &at, &note];
            session.client.execute(sql.delete.as_str(), &values).await?
        }
    };
    if recorded > 0 {
        return Ok(());
    }
    let current = get(session, key_text).await?;
    Ok(rules::explain_resolve(key, current.as_ref())?)
}

/// The resolutions `pick` selects, oldest first.
pub(super) async fn resolutions(
    session: &Session,
    sql: &ResolutionSql,
    pick: &Pick,
) -> Result<Vec<ResolutionRecord>, Failure> {
    let statement = sql.select_of(pick);
    let value: &(dyn tokio_postgres::types::ToSql + Sync) = match pick {
        Pick::Key(key) => key,
        Pick::Since(since) => since,
    };
    let rows = session.client.query(statement, &[value]).await?;
    let read = |row: &Row| -> Result<ResolutionRecord, LedgerError> {
        let columns: Columns = row_columns!(row, "resolution", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
        resolutions::from_columns(columns)
    };
    Ok(rows.iter().map(read).collect::<Result<_, _>>()?)
}

pub(super) async fn ping(session: &Session) -> Result<(), Failure> {
    session.client.simple_query("SELECT 1").await?;
    Ok(())
}

pub(super) fn record(row: &Row) -> Result<ClaimRecord, Failure> {
    Ok(raw_row(row).map_err(corrupt_row)?.into_record()?)
}

fn raw_row(row: &Row) -> Result<RawRow, tokio_postgres::Error> {
    Ok(RawRow {
        key: row.try_get(0)?,
        id: row.try_get(1)?,
        principal: row.try_get(2)?,
        session: row.try_get(3)?,
        backend: row.try_get(4)?,
        tool: row.try_get(5)?,
        args_digest: row.try_get(6)?,
        state: row.try_get(7)?,
        result: row.try_get(8)?,
        result_digest: row.try_get(9)?,
        error: row.try_get(10)?,
        created_at: row.try_get(11)?,
        updated_at: row.try_get(12)?,
        owner: row.try_get(13)?,
        lease_until: row.try_get(14)?,
    })
}

/// A row whose columns do not have the ledger's types was not written by this schema.
fn corrupt_row(error: tokio_postgres::Error) -> Failure {
    Failure::Ledger(LedgerError::corrupt(format!("unreadable claim row: {error}")))
}
