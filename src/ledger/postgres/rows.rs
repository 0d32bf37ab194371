//! A batch's claims and completions as two multi-row statements (arrays passed as parameters and unnested):
//! one `INSERT` of every claim, one `UPDATE` of every completion. The server then plans, executes and answers
//! two statements per batch instead of several per call, which is most of what a call cost it (see
//! docs/ledger.md, *Batching in the SQL stores*).
//!
//! Rules:
//! - A claim whose id the `INSERT` returns is ours; a completion whose key the `UPDATE` returns applied. What
//!   they leave open — a key another call already holds (a retry: rare, so its row is not read in every batch),
//!   our own insert from an attempt whose answer was lost, a completion that changed nothing — is finished after
//!   the commit by the single operations, which read the row that won.
//! - A multi-row statement fails as a whole: when one fails on a value (SQLSTATE classes 22 and 23), the batch
//!   runs again with a statement per job, which tells the culprit from the others (see [`super::batch`]).
//! - The arrays keep the batch's key order, and `WITH ORDINALITY … ORDER BY` keeps it in the `INSERT`, so row
//!   locks are taken in key order as everywhere else.

use std::collections::HashSet;

use super::batch::Job;
use crate::ledger::rules::OwnedSettle;
use crate::ledger::types::to_millis;

/// The multi-row statements for one claims table.
#[derive(Debug, Clone)]
pub(super) struct RowsSql {
    /// Arrays: `$1` key … `$7` args_digest, `$8` now, `$9` owner, `$10` lease_until; returns the inserted ids.
    pub(super) claim: String,
    /// Arrays: `$1` key, `$2` owner, `$3` result, `$4` result_digest, `$5` now; returns the keys completed.
    pub(super) complete: String,
}

impl RowsSql {
    pub(super) fn new(table: &str) -> RowsSql {
        RowsSql {
            claim: format!(
                "INSERT INTO {table} (key, id, principal, agent_session, backend, tool, args_digest, state, \
                 created_at, updated_at, owner, lease_until) \
                 SELECT k, i, p, s, b, t, d, 'in_flight', n, n, o, l FROM unnest($1::text[], $2::text[], \
                 $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], \
                 $10::bigint[]) WITH ORDINALITY AS c(k, i, p, s, b, t, d, n, o, l, at) ORDER BY at \
                 ON CONFLICT (key) DO NOTHING RETURNING id"
            ),
            complete: format!(
                "UPDATE {table} AS claim SET state = 'completed', result = u.result, result_digest = u.digest, \
                 error = NULL, updated_at = u.now FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
                 $5::bigint[]) AS u(key, owner, result, digest, now) \
                 WHERE claim.key = u.key AND claim.owner = u.owner AND claim.state IN ('in_flight', 'unknown') \
                 RETURNING claim.key"
            ),
        }
    }
}

/// The parameters of the claims' `INSERT`, column by column.
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

/// The parameters of the completions' `UPDATE`, column by column.
#[derive(Default)]
pub(super) struct Completions<'a> {
    pub(super) keys: Vec<&'a str>,
    pub(super) owners: Vec<&'a str>,
    pub(super) results: Vec<Option<&'a str>>,
    pub(super) digests: Vec<Option<&'a str>>,
    pub(super) nows: Vec<i64>,
}

/// The batch's jobs sorted into the multi-row statements' columns; `single` are the jobs that keep a statement
/// of their own (other settles), by index.
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

/// What the multi-row statements returned.
#[derive(Default)]
pub(super) struct Decided {
    /// Ids of the claims inserted.
    pub(super) inserted: HashSet<String>,
    /// Keys of the completions applied.
    pub(super) completed: HashSet<String>,
}

impl Decided {
    /// How many rows `job` changed.
    pub(super) fn changed_by(&self, job: &Job) -> u64 {
        u64::from(match job {
            Job::Claim { id, .. } => self.inserted.contains(id.as_str()),
            Job::Settle { queued, .. } => self.completed.contains(queued.key.as_str()),
        })
    }
}
