//! The fleet bus on PostgreSQL (see [`crate::ledger::fleet`]): replicas send each other short messages through
//! the ledger's database, so no service but the ledger's is needed.
//!
//! Rules:
//! - Every message is a row of its receiver's mailbox (the mail table, one row per receiver), written in the
//!   same statement as a `NOTIFY` that only rings the receiver's doorbell: its own channel (the schema's prefix
//!   and a digest of its replica id) for a message to one replica, the fleet's (the prefix alone) for one to
//!   every other replica. The doorbell's payload is the sender, so a replica ignores its own fleet-wide rings.
//! - A message to the fleet is one row per replica in the replicas table but the sender. A replica enters that
//!   table whenever it empties its mailbox, and leaves it when a row of its mailbox has waited five minutes
//!   unread (it is gone; that row and every other as old are deleted by the next message sent).
//! - A receiver empties its whole mailbox in one statement (`DELETE … RETURNING`) after each doorbell (rings
//!   that arrive meanwhile are served by one more) and after each (re)`LISTEN` on its listening connection
//!   ([`super::listen`]), so a message sent while it was reconnecting is read once it listens again: delivery is
//!   at most once, and a message waits up to five minutes for its receiver. Before it first listens, a replica
//!   deletes what its mailbox holds: that was meant for an earlier run of it.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::PostgresStore;
use super::listen::{self, Hearing};
use crate::ledger::digest::sha256_hex;
use crate::ledger::error::LedgerError;
use crate::ledger::fleet::{Heard, StreamEvent};

pub(crate) const FLEET_MAIL_TABLE: &str = "switchyard_fleet_mail";
pub(crate) const FLEET_REPLICAS_TABLE: &str = "switchyard_fleet_replicas";
/// How long a failed read of the mailbox waits before it is tried again.
const RETRY_READ: Duration = Duration::from_secs(1);

pub(super) fn create_statements(mail: &str, replicas: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {mail} (id BIGSERIAL PRIMARY KEY, receiver TEXT NOT NULL, sender TEXT NOT NULL, \
         body TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now()); \
         CREATE TABLE IF NOT EXISTS {replicas} (replica TEXT PRIMARY KEY)"
    )
}

/// The channel `replica` listens on.
fn own_channel(prefix: &str, replica: &str) -> String {
    format!("{prefix}_{}", &sha256_hex(replica.as_bytes())[..12])
}

/// One replica's end of the bus; dropping it stops its listening connection.
pub(crate) struct PgBus {
    store: PostgresStore,
    replica: String,
    prefix: String,
    _stop: oneshot::Sender<()>,
}

impl std::fmt::Debug for PgBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBus").field("replica", &self.replica).finish_non_exhaustive()
    }
}

/// What the bus's listening connection hears: the doorbells of this replica's mailbox.
struct BusHearing {
    channels: [String; 2],
    replica: String,
    /// Each ring asks for one read of the mailbox.
    rings: mpsc::UnboundedSender<()>,
}

impl Hearing for BusHearing {
    fn channels(&self) -> Vec<String> {
        self.channels.to_vec()
    }

    fn hear(&self, _channel: &str, sender: &str) {
        if sender != self.replica {
            let _ = self.rings.send(());
        }
    }

    /// What was sent meanwhile waits in the mailbox.
    fn missed_some(&self) {
        let _ = self.rings.send(());
    }
}

impl PostgresStore {
    /// Starts listening as `replica`; what it hears arrives on the receiver, each mailbox's read oldest first.
    pub(crate) fn fleet_bus(&self, replica: &str) -> (PgBus, mpsc::UnboundedReceiver<Heard>) {
        let prefix = self.inner.fleet_channel.clone();
        let (rings, rung) = mpsc::unbounded_channel();
        let (heard, receiver) = mpsc::unbounded_channel();
        let hearing = BusHearing {
            channels: [prefix.clone(), own_channel(&prefix, replica)],
            replica: replica.to_owned(),
            rings,
        };
        let (stop, stopped) = oneshot::channel();
        // Named, so an operator can tell the bus's connection apart in `pg_stat_activity`.
        let mut config = self.inner.config.clone();
        config.application_name(format!("switchyard bus {replica}"));
        let listening = listen::run(config, hearing, stopped);
        tokio::spawn(collect(self.clone(), replica.to_owned(), listening, rung, heard));
        (PgBus { store: self.clone(), replica: replica.to_owned(), prefix, _stop: stop }, receiver)
    }
}

/// Clears the mailbox of what an earlier run of this replica left, starts `listening`, then empties the mailbox
/// whenever it rings, passing on what it held; ends with the listening task.
async fn collect(
    store: PostgresStore,
    replica: String,
    listening: impl Future<Output = ()> + Send + 'static,
    mut rings: mpsc::UnboundedReceiver<()>,
    heard: mpsc::UnboundedSender<Heard>,
) {
    if store.take_mail_until_read(&replica, &heard).await.is_none() {
        return;
    }
    tokio::spawn(listening);
    while rings.recv().await.is_some() {
        // Rings that arrived meanwhile are served by this one read.
        while rings.try_recv().is_ok() {}
        let Some(mail) = store.take_mail_until_read(&replica, &heard).await else { return };
        for message in mail {
            if heard.send(message).is_err() {
                return;
            }
        }
    }
}

impl PostgresStore {
    /// [`PostgresStore::take_mail`], tried again until it succeeds; `None` once nobody hears the bus.
    async fn take_mail_until_read(&self, replica: &str, heard: &mpsc::UnboundedSender<Heard>) -> Option<Vec<Heard>> {
        loop {
            match self.take_mail(replica).await {
                Ok(mail) => return Some(mail),
                Err(_) if heard.is_closed() => return None,
                Err(error) => tracing::warn!(%error, "fleet bus: cannot read this replica's mailbox; trying again"),
            }
            tokio::time::sleep(RETRY_READ).await;
        }
    }

    /// Deletes and returns what `replica`'s mailbox holds, oldest first, and (re)enters it among the replicas
    /// that receive the fleet's messages.
    async fn take_mail(&self, replica: &str) -> Result<Vec<Heard>, LedgerError> {
        let sql = format!(
            "WITH here AS (INSERT INTO {replicas} (replica) VALUES ($1) ON CONFLICT DO NOTHING) \
             DELETE FROM {mail} WHERE receiver = $1 \
             RETURNING id, sender, body, greatest(extract(epoch FROM now() - at), 0)::float8",
            replicas = self.inner.fleet_replicas,
            mail = self.inner.fleet_mail,
        );
        let sql = sql.as_str();
        let rows = self.inner.conn.run(|db| async move { Ok(db.client.query(sql, &[&replica]).await?) }).await?;
        let read = |row: &tokio_postgres::Row| -> Result<(i64, Heard), tokio_postgres::Error> {
            let age: f64 = row.try_get(3)?;
            Ok((row.try_get(0)?, Heard { from: row.try_get(1)?, body: row.try_get(2)?, age: seconds(age) }))
        };
        let mut mail = rows
            .iter()
            .map(read)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| LedgerError::corrupt(format!("unreadable fleet message: {error}")))?;
        mail.sort_unstable_by_key(|(id, _)| *id);
        Ok(mail.into_iter().map(|(_, heard)| heard).collect())
    }
}

fn seconds(age: f64) -> Duration {
    Duration::try_from_secs_f64(age).unwrap_or_default()
}

impl PgBus {
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// Sends `body` to `to`, or to every other replica (`None`); done once it is in the receivers' mailboxes.
    pub(crate) async fn send(&self, to: Option<&str>, body: &str) -> Result<(), LedgerError> {
        let channel = to.map_or_else(|| self.prefix.clone(), |to| own_channel(&self.prefix, to));
        let (channel, from) = (channel.as_str(), self.replica.as_str());
        let inner = &self.store.inner;
        let sql = format!(
            "WITH gone AS (DELETE FROM {mail} WHERE at < now() - interval '5 minutes' RETURNING receiver), \
             forgotten AS (DELETE FROM {replicas} WHERE replica IN (SELECT receiver FROM gone)), \
             posted AS (INSERT INTO {mail} (receiver, sender, body) \
                 SELECT replica, $2::text, $3::text FROM {replicas} WHERE $4::text IS NULL AND replica <> $2 \
                 UNION ALL SELECT $4, $2, $3 WHERE $4::text IS NOT NULL) \
             SELECT pg_notify($1::text, $2::text)",
            mail = inner.fleet_mail,
            replicas = inner.fleet_replicas,
        );
        let sql = sql.as_str();
        inner
            .conn
            .run(|db| async move { Ok(db.client.execute(sql, &[&channel, &from, &body, &to]).await?) })
            .await
            .map(drop)
    }
}

/// The shared stream events' table: per stream, the last events of an agent's SSE stream, so a resumption on
/// any replica replays them (see [`crate::ledger::fleet::StreamEvent`]).
pub(crate) const STREAM_EVENTS_TABLE: &str = "switchyard_stream_events";

pub(super) fn create_events_statement(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (stream TEXT NOT NULL, seq BIGINT NOT NULL, session TEXT NOT NULL, \
         event TEXT NOT NULL, done BOOLEAN NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (stream, seq))"
    )
}

impl PgBus {
    /// Keeps `events` (one statement), trims each of their streams to its last `keep` events, and drops
    /// events older than `kept_for`.
    pub(crate) async fn keep_events(
        &self,
        events: &[StreamEvent],
        keep: u32,
        kept_for: std::time::Duration,
    ) -> Result<(), LedgerError> {
        let table = &self.store.inner.stream_events;
        let column = |pick: fn(&StreamEvent) -> String| events.iter().map(pick).collect::<Vec<String>>();
        let (streams, sessions, texts) =
            (column(|e| e.stream.clone()), column(|e| e.session.clone()), column(|e| e.event.clone()));
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        let dones: Vec<bool> = events.iter().map(|e| e.done).collect();
        let (keep, seconds) = (i64::from(keep), kept_for.as_secs_f64());
        let sql = format!(
            "WITH kept AS (INSERT INTO {table} (stream, seq, session, event, done) \
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bool[]) \
                 ON CONFLICT DO NOTHING RETURNING stream, seq), \
             latest AS (SELECT stream, max(seq) AS seq FROM kept GROUP BY stream) \
             DELETE FROM {table} AS old USING latest \
             WHERE (old.stream = latest.stream AND old.seq <= latest.seq - $6) \
                OR old.at < now() - make_interval(secs => $7)"
        );
        let sql = sql.as_str();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
            [&streams, &seqs, &sessions, &texts, &dones, &keep, &seconds];
        self.store.inner.conn.run(|db| async move { Ok(db.client.execute(sql, &params).await?) }).await.map(drop)
    }

    /// The kept events of `stream` after `after`, if `session` opened it, in order.
    pub(crate) async fn events_after(
        &self,
        stream: &str,
        session: &str,
        after: i64,
    ) -> Result<Vec<StreamEvent>, LedgerError> {
        let sql = format!(
            "SELECT seq, event, done FROM {} WHERE stream = $1 AND session = $2 AND seq > $3 ORDER BY seq",
            self.store.inner.stream_events
        );
        let sql = sql.as_str();
        let rows = self
            .store
            .inner
            .conn
            .run(|db| async move { Ok(db.client.query(sql, &[&stream, &session, &after]).await?) })
            .await?;
        let read = |row: &tokio_postgres::Row| -> Result<StreamEvent, tokio_postgres::Error> {
            Ok(StreamEvent {
                stream: stream.to_owned(),
                seq: row.try_get(0)?,
                session: session.to_owned(),
                event: row.try_get(1)?,
                done: row.try_get(2)?,
            })
        };
        rows.iter()
            .map(read)
            .collect::<Result<_, _>>()
            .map_err(|error| LedgerError::corrupt(format!("unreadable stream event: {error}")))
    }
}
