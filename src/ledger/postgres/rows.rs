//! A batch's claims and completions as one multi-row statement (arrays passed as parameters and unnested): an
//! `UPDATE` of every completion and an `INSERT` of every claim, as the data-modifying parts of one `WITH`. The
//! server then plans, executes and answers one statement per batch instead of several per call, which is most of
//! what a call cost it, and a batch of only claims and completions — every batch at one connection: a claim and
//! the previous call's completion — needs no `BEGIN` and `COMMIT` around it (see docs/ledger.md, *Batching in the
//! SQL stores*).
//!
//! Rules:
//! - A claim whose id the statement returns is ours; a completion whose key it returns applied. What it leaves
//!   open — a key another call already holds (a retry: rare, so its row is not read in every batch), our own
//!   insert from an attempt whose answer was lost, a completion that changed nothing — is finished after the
//!   commit by the single operations, which read the row that won.
//! - Both parts see the snapshot the statement started with. The completions' part runs first (the result is
//!   read from it first): a claim of a key completed in the same batch conflicts with the row either way and is
//!   decided after the commit, as it would have been in the order the jobs arrived.
//! - The statement fails as a whole: when it fails on a value (SQLSTATE classes 22 and 23), the batch runs again
//!   with a statement per job, which tells the culprit from the others (see [`super::batch`]).
//! - The arrays keep the batch's key order, and `WITH ORDINALITY … ORDER BY` keeps it in the `INSERT`, so row
//!   locks are taken in key order as everywhere else.

use std::collections::HashSet;

use tokio_postgres::Row;

use super::batch::Job;
use crate::ledger::rules::OwnedSettle;
use crate::ledger::types::to_millis;

/// The multi-row statement for the claims table `table`. Arrays: `$1` key … `$7` args_digest, `$8` now, `$9`
/// owner, `$10` lease_until of the claims; `$11` key, `$12` owner, `$13` result, `$14` result_digest, `$15` now of
/// the completions. Returns a row per completed key (`key`, `NULL`), then one per inserted claim (`NULL`, `id`).
pub(super) fn batch_sql(table: &str) -> String {
    format!(
        "WITH completed AS (UPDATE {table} AS claim SET state = 'completed', result = u.result, \
         result_digest = u.digest, error = NULL, updated_at = u.now FROM unnest($11::text[], $12::text[], \
         $13::text[], $14::text[], $15::bigint[]) AS u(key, owner, result, digest, now) \
         WHERE claim.key = u.key AND claim.owner = u.owner AND claim.state IN ('in_flight', 'unknown') \
         RETURNING claim.key), \
         inserted AS (INSERT INTO {table} (key, id, principal, agent_session, backend, tool, args_digest, state, \
         created_at, updated_at, owner, lease_until) \
         SELECT k, i, p, s, b, t, d, 'in_flight', n, n, o, l FROM unnest($1::text[], $2::text[], \
         $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], \
         $10::bigint[]) WITH ORDINALITY AS c(k, i, p, s, b, t, d, n, o, l, at) ORDER BY at \
         ON CONFLICT (key) DO NOTHING RETURNING id) \
         SELECT key, NULL::text FROM completed UNION ALL SELECT NULL::text, id FROM inserted"
    )
}

/// The parameters of the claims' part, column by column.
#[derive(Default)]
pub(super) struct Claims<'a> {
    pub(super) keys: Vec<&'a str>,
    pub(super) ids: Vec<&'a str>,
    pub(super) principals: Vec<&'a str>,
    pub(super) sessions: Vec<&'a str>,
    pub(super) backends: Vec<&'a str>,
    pub(super) tools: Vec<&'a str>,
    pub(super) digests: Vec<&'a str>,
    pub(super) nows: Vec<i64>,
    pub(super) owners: Vec<&'a str>,
    pub(super) leases: Vec<i64>,
}

/// The parameters of the completions' part, column by column.
#[derive(Default)]
pub(super) struct Completions<'a> {
    pub(super) keys: Vec<&'a str>,
    pub(super) owners: Vec<&'a str>,
    pub(super) results: Vec<Option<&'a str>>,
    pub(super) digests: Vec<Option<&'a str>>,
    pub(super) nows: Vec<i64>,
}

/// The batch's jobs sorted into the multi-row statement's columns; `single` are the jobs that keep a statement of
/// their own (other settles), by index.
#[derive(Default)]
pub(super) struct Gathered<'a> {
    pub(super) claims: Claims<'a>,
    pub(super) completions: Completions<'a>,
    pub(super) single: Vec<usize>,
}

/// Sorts `jobs` (already in key order) into columns.
pub(super) fn gather(jobs: &[Job]) -> Gathered<'_> {
    let mut gathered = Gathered::default();
    for (index, job) in jobs.iter().enumerate() {
        match job {
            Job::Claim { new, id, now, .. } => {
                let claims = &mut gathered.claims;
                claims.keys.push(new.key.as_str());
                claims.ids.push(id);
                claims.principals.push(&new.principal);
                claims.sessions.push(&new.session);
                claims.backends.push(&new.backend);
                claims.tools.push(&new.tool);
                claims.digests.push(&new.args_digest);
                claims.nows.push(to_millis(*now));
                claims.owners.push(&new.owner);
                claims.leases.push(to_millis(*now + new.lease));
            }
            Job::Settle { queued, now, .. } => match &queued.settle {
                OwnedSettle::Complete(stored) => {
                    let completions = &mut gathered.completions;
                    completions.keys.push(queued.key.as_str());
                    completions.owners.push(&queued.owner);
                    completions.results.push(stored.text.as_deref());
                    completions.digests.push(stored.digest.as_deref());
                    completions.nows.push(to_millis(*now));
                }
                OwnedSettle::MarkUnknown(_) | OwnedSettle::Release => gathered.single.push(index),
            },
        }
    }
    gathered
}

/// What the multi-row statement returned.
#[derive(Default)]
pub(super) struct Decided {
    /// Ids of the claims inserted.
    inserted: HashSet<String>,
    /// Keys of the completions applied.
    completed: HashSet<String>,
}

impl Decided {
    /// Reads the statement's rows (a value of another type is left out, so its job is decided after the commit).
    pub(super) fn read(rows: &[Row]) -> Decided {
        let mut decided = Decided::default();
        for row in rows {
            if let Ok(Some(key)) = row.try_get::<_, Option<String>>(0) {
                decided.completed.insert(key);
            } else if let Ok(Some(id)) = row.try_get::<_, Option<String>>(1) {
                decided.inserted.insert(id);
            }
        }
        decided
    }

    /// How many rows `job` changed.
    pub(super) fn changed_by(&self, job: &Job) -> u64 {
        u64::from(match job {
            Job::Claim { id, .. } => self.inserted.contains(id.as_str()),
            Job::Settle { queued, .. } => self.completed.contains(queued.key.as_str()),
        })
    }
}
