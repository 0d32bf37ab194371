//! The ledger's tables in PostgreSQL: names, creation, migration, and the trigger that announces settled claims.
//!
//! Rules:
//! - The schema version lives in `switchyard_meta` (`name = 'schema_version'`). Migration runs in one transaction
//!   under a transaction-level advisory lock, so replicas starting together migrate once and never see a
//!   half-created schema.
//! - A trigger on the claims table sends `NOTIFY <channel>, <key>` when a claim that some waiter marked
//!   (`waited`, set by [`super::ops::watch`] before the waiter reads the claim) leaves `in_flight` (settled or
//!   deleted), in the same transaction as the change, whichever replica (or operator) made it. A claim nobody
//!   waits for — nearly every one — is settled without a notification: no queue entry, no wake-up of every
//!   listening replica. Row locks order the mark and the settle: a settle that comes second sees the mark, a mark
//!   that comes second finds the claim settled and its waiter reads it (docs/ledger.md, *Batching in the SQL
//!   stores*). Lease renewals do not touch `state` and so do not fire it. The trigger's `WHEN` clause tests the
//!   old state, the mark and [`DEFER_NOTIFY`] (set by older versions' batches, which announce their settles
//!   themselves after the commit), so an unmarked settle neither calls the function nor queues an event. A schema
//!   made by an older version gets the column and the clause at the next start.
//! - Names are built only from constants and a validated schema name (see [`crate::ledger::url`]), so splicing
//!   them into SQL is safe.

use tokio_postgres::Client;

use super::bus::{FLEET_MAIL_TABLE, FLEET_REPLICAS_TABLE, STREAM_EVENTS_TABLE};
use super::conn::Failure;
use crate::ledger::announcements::{self, ANNOUNCEMENTS_TABLE};
use crate::ledger::approvals::{self, APPROVALS_TABLE};
use crate::ledger::backend_tokens::{self, BACKEND_TOKENS_TABLE};
use crate::ledger::digest::sha256_hex;
use crate::ledger::error::LedgerError;
use crate::ledger::limit_counters::{self, LIMIT_COUNTERS_TABLE};
use crate::ledger::pins::{self, PINS_TABLE};
use crate::ledger::resolutions::{self, RESOLUTIONS_TABLE};
use crate::ledger::revocations::{self, REVOCATIONS_TABLE};
use crate::ledger::sql::{CLAIMS_TABLE, Dialect, SCHEMA_VERSION, create_statements};

/// The session setting (a custom placeholder) under which the trigger leaves the `NOTIFY` to its transaction's
/// writer: `SET LOCAL switchyard.defer_notify = 'on'`, set by older versions' batches (this one does not).
pub(super) const DEFER_NOTIFY: &str = "switchyard.defer_notify";

/// The claims' column a waiter sets so that the claim's settle is announced (see the module rules).
pub(super) const WAITED: &str = "waited";

/// The settled-claims trigger's name.
const SETTLED_TRIGGER: &str = "switchyard_claims_settled";

/// Serialises migrations of every Switchyard ledger in a database ("SWLEDGER" in ASCII).
const MIGRATION_LOCK: i64 = 0x5357_4c45_4447_4552;

/// The qualified names of the ledger's objects.
#[derive(Debug, Clone)]
pub(super) struct Names {
    schema: Option<String>,
    pub(super) claims: String,
    meta: String,
    function: String,
    /// The `LISTEN`/`NOTIFY` channel; one per schema, so ledgers in different schemas do not wake each other.
    pub(super) channel: String,
    /// The revoked sessions' table, and the channel that announces them (one per schema, too).
    pub(super) revocations: String,
    pub(super) revoked_channel: String,
    /// The backend OAuth tokens' table.
    pub(super) backend_tokens: String,
    /// The approval requests' table.
    pub(super) approvals: String,
    /// The shared limit counters' table.
    pub(super) limit_counters: String,
    /// The pinned definitions' table.
    pub(super) pins: String,
    /// The tasks' table.
    pub(super) tasks: String,
    /// The fleet bus: its channels' common prefix (one per schema), the replicas' mailboxes and the replicas
    /// that receive the fleet's messages (see [`super::bus`]).
    pub(super) fleet_channel: String,
    pub(super) fleet_mail: String,
    pub(super) fleet_replicas: String,
    pub(super) stream_events: String,
    pub(super) resolutions: String,
    pub(super) announcements: String,
}

impl Names {
    pub(super) fn new(schema: Option<&str>) -> Names {
        let qualify = |name: &str| schema.map_or_else(|| name.to_owned(), |schema| format!("{schema}.{name}"));
        Names {
            schema: schema.map(str::to_owned),
            claims: qualify(CLAIMS_TABLE),
            meta: qualify("switchyard_meta"),
            function: qualify("switchyard_claim_settled"),
            channel: schema
                .map_or_else(|| "switchyard_settled".to_owned(), |schema| format!("switchyard_settled_{schema}")),
            revocations: qualify(REVOCATIONS_TABLE),
            revoked_channel: schema
                .map_or_else(|| "switchyard_revoked".to_owned(), |schema| format!("switchyard_revoked_{schema}")),
            backend_tokens: qualify(BACKEND_TOKENS_TABLE),
            approvals: qualify(APPROVALS_TABLE),
            limit_counters: qualify(LIMIT_COUNTERS_TABLE),
            pins: qualify(PINS_TABLE),
            tasks: qualify(crate::ledger::tasks::TASKS_TABLE),
            // A digest, so a long schema name cannot make a channel name longer than PostgreSQL's 63 bytes.
            fleet_channel: format!("switchyard_fleet_{}", &sha256_hex(schema.unwrap_or_default().as_bytes())[..12]),
            fleet_mail: qualify(FLEET_MAIL_TABLE),
            fleet_replicas: qualify(FLEET_REPLICAS_TABLE),
            stream_events: qualify(STREAM_EVENTS_TABLE),
            resolutions: qualify(RESOLUTIONS_TABLE),
            announcements: qualify(ANNOUNCEMENTS_TABLE),
        }
    }
}

/// Creates or checks the schema on `client`.
pub(super) async fn migrate(client: &mut Client, names: &Names) -> Result<(), Failure> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    if let Some(schema) = &names.schema {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}")).await?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {} (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        names.meta
    ))
    .await?;
    let select = format!("SELECT value FROM {} WHERE name = 'schema_version'", names.meta);
    let version = match tx.query_opt(&select, &[]).await? {
        None => None,
        Some(row) => Some(parse_version(&row.try_get::<_, String>(0)?)?),
    };
    match version {
        None => create(&tx, names).await?,
        Some(SCHEMA_VERSION) => announce_waited(&tx, names).await?,
        Some(found) if found > SCHEMA_VERSION => {
            return Err(LedgerError::SchemaTooNew { found, supported: SCHEMA_VERSION }.into());
        }
        Some(found) => return Err(LedgerError::corrupt(format!("impossible schema version {found}")).into()),
    }
    for statement in revocations::create_statements(&names.revocations, Dialect::Postgres) {
        tx.batch_execute(&statement).await?;
    }
    tx.batch_execute(&backend_tokens::create_statement(&names.backend_tokens, Dialect::Postgres)).await?;
    tx.batch_execute(&approvals::create_statement(&names.approvals, Dialect::Postgres)).await?;
    tx.batch_execute(&limit_counters::create_statement(&names.limit_counters)).await?;
    tx.batch_execute(&pins::create_statement(&names.pins)).await?;
    tx.batch_execute(&crate::ledger::tasks::create_statement(&names.tasks)).await?;
    tx.batch_execute(&super::bus::create_statements(&names.fleet_mail, &names.fleet_replicas)).await?;
    tx.batch_execute(&super::bus::create_events_statement(&names.stream_events)).await?;
    for statement in resolutions::create_statements(&names.resolutions) {
        tx.batch_execute(&statement).await?;
    }
    tx.batch_execute(&announcements::create_statement(&names.announcements)).await?;
    tx.commit().await?;
    Ok(())
}

/// The column a waiter marks, the trigger's function and the trigger, each made unless it is there as this version
/// makes it.
async fn announce_waited(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<(), Failure> {
    waited_column(tx, names).await?;
    announce_settled(tx, names).await?;
    trigger_settled(tx, names).await
}

/// Adds the `waited` mark to a claims table without it (a schema made by an older version; a constant default,
/// so the rows are not rewritten). A table that has it is not altered, so a role that does not own it can start.
async fn waited_column(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<(), Failure> {
    let present = format!(
        "SELECT count(*) > 0 FROM pg_attribute WHERE attrelid = to_regclass('{}') AND attname = '{WAITED}' \
         AND NOT attisdropped",
        names.claims
    );
    if tx.query_one(&present, &[]).await?.try_get::<_, bool>(0)? {
        return Ok(());
    }
    tx.batch_execute(&format!("ALTER TABLE {} ADD COLUMN {WAITED} BOOLEAN NOT NULL DEFAULT false", names.claims))
        .await?;
    Ok(())
}

/// Defines the trigger's function unless it already honours [`DEFER_NOTIFY`] (a schema made by an older version
/// gets the deferral at the next start; a current one is not rewritten, so a role that does not own it can
/// still start). A transaction that set it (an older version's batch) announces its settles itself after its commit.
async fn announce_settled(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<(), Failure> {
    let current = format!(
        "SELECT coalesce(bool_or(prosrc LIKE '%{DEFER_NOTIFY}%'), false) FROM pg_proc WHERE oid = to_regproc('{}')",
        names.function
    );
    if tx.query_one(&current, &[]).await?.try_get::<_, bool>(0)? {
        return Ok(());
    }
    tx.batch_execute(&format!(
        "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$
         BEGIN
             IF OLD.state = 'in_flight' AND (TG_OP = 'DELETE' OR NEW.state <> 'in_flight')
                 AND current_setting('{DEFER_NOTIFY}', true) IS DISTINCT FROM 'on' THEN
                 PERFORM pg_notify('{channel}', OLD.key);
             END IF;
             RETURN NULL;
         END
         $body$;",
        function = names.function,
        channel = names.channel,
    ))
    .await?;
    Ok(())
}

/// The trigger that runs [`announce_settled`]'s function for marked claims, unless it exists with this version's
/// `WHEN` clause (a trigger made by an older version, with no clause or one without the mark, is made again; a
/// current one is not touched, so a role that does not own the table can still start). The clause is evaluated
/// before the function is called or an event is queued: a settle nobody waits for costs the trigger nothing.
/// (`NEW` cannot appear in the clause of a trigger that also fires on `DELETE`; the function tests the new state.)
async fn trigger_settled(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<(), Failure> {
    let current = format!(
        "SELECT coalesce(bool_and(pg_get_triggerdef(oid) ILIKE '%old.{WAITED}%'), false) FROM pg_trigger \
         WHERE tgrelid = to_regclass('{claims}') AND tgname = '{SETTLED_TRIGGER}'",
        claims = names.claims
    );
    if tx.query_one(&current, &[]).await?.try_get::<_, bool>(0)? {
        return Ok(());
    }
    tx.batch_execute(&format!(
        "DROP TRIGGER IF EXISTS {SETTLED_TRIGGER} ON {claims};
         CREATE TRIGGER {SETTLED_TRIGGER} AFTER UPDATE OF state OR DELETE ON {claims} FOR EACH ROW
             WHEN (OLD.state = 'in_flight' AND OLD.{WAITED} \
                   AND current_setting('{DEFER_NOTIFY}', true) IS DISTINCT FROM 'on')
             EXECUTE PROCEDURE {function}();",
        function = names.function,
        claims = names.claims,
    ))
    .await?;
    Ok(())
}

fn parse_version(text: &str) -> Result<i64, LedgerError> {
    text.parse().map_err(|_| LedgerError::corrupt(format!("the schema version {text:?} is not a number")))
}

async fn create(tx: &tokio_postgres::Transaction<'_>, names: &Names) -> Result<(), Failure> {
    for statement in create_statements(&names.claims, Dialect::Postgres) {
        tx.batch_execute(&statement).await?;
    }
    announce_waited(tx, names).await?;
    tx.execute(
        &format!("INSERT INTO {} (name, value) VALUES ('schema_version', $1)", names.meta),
        &[&SCHEMA_VERSION.to_string()],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_qualified_by_the_schema() {
        let plain = Names::new(None);
        assert_eq!(plain.claims, "switchyard_claims");
        assert_eq!(plain.channel, "switchyard_settled");
        let scoped = Names::new(Some("sy"));
        assert_eq!(scoped.claims, "sy.switchyard_claims");
        assert_eq!(scoped.meta, "sy.switchyard_meta");
        assert_eq!(scoped.channel, "switchyard_settled_sy");
        assert_eq!(scoped.revocations, "sy.switchyard_revocations");
        assert_eq!(scoped.revoked_channel, "switchyard_revoked_sy");
        assert_eq!(scoped.backend_tokens, "sy.switchyard_backend_tokens");
        assert_eq!(scoped.fleet_mail, "sy.switchyard_fleet_mail");
        let long = Names::new(Some(&"s".repeat(63)));
        assert!(long.fleet_channel.len() < 40 && long.fleet_channel != plain.fleet_channel, "{}", long.fleet_channel);
    }
}
