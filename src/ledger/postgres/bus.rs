//! The fleet bus on PostgreSQL (see [`crate::ledger::fleet`]): replicas send each other short messages with
//! `NOTIFY`, so no service but the ledger's is needed.
//!
//! Rules:
//! - Each replica listens on a channel of its own (the schema's prefix and a digest of its replica id) and on the
//!   fleet's (the prefix alone), on a listening connection of its own ([`super::listen`]); a message sent to the
//!   fleet is not heard by its sender.
//! - A notification carries `<sender> =<body>`. A body too long for one (PostgreSQL takes under 8000 bytes) is
//!   written to the spill table in the same statement as the notification, which then carries `<sender> @<row>`;
//!   the receiver deletes the row as it reads it. Rows nobody read (their receiver was gone) are deleted by a
//!   later spill once older than five minutes.
//! - At most once: a message sent while its receiver was not listening is lost. What that costs is the
//!   caller's rule (a deadline that runs out, never a request run twice).

use tokio::sync::{mpsc, oneshot};

use super::PostgresStore;
use super::listen::{self, Hearing};
use crate::ledger::digest::sha256_hex;
use crate::ledger::error::LedgerError;
use crate::ledger::fleet::{Heard, StreamEvent};

pub(crate) const FLEET_SPILL_TABLE: &str = "switchyard_fleet_spill";
/// The longest notification payload sent as is; PostgreSQL refuses 8000 bytes and more.
const INLINE_MAX: usize = 7000;

pub(super) fn create_statement(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL, \
         at TIMESTAMPTZ NOT NULL DEFAULT now())"
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

/// What the bus's listening connection hears: `(sender, payload)` of the messages meant for this replica.
struct BusHearing {
    channels: [String; 2],
    replica: String,
    heard: mpsc::UnboundedSender<(String, String)>,
}

impl Hearing for BusHearing {
    fn channels(&self) -> Vec<String> {
        self.channels.to_vec()
    }

    fn hear(&self, _channel: &str, payload: &str) {
        let Some((from, body)) = payload.split_once(' ') else {
            return tracing::warn!(payload, "fleet bus: ignored a malformed message");
        };
        if from != self.replica {
            let _ = self.heard.send((from.to_owned(), body.to_owned()));
        }
    }

    fn missed_some(&self) {
        tracing::debug!("fleet bus: listening (again); messages sent meanwhile are lost");
    }
}

impl PostgresStore {
    /// Starts listening as `replica`; what it hears arrives on the receiver, in order.
    pub(crate) fn fleet_bus(&self, replica: &str) -> (PgBus, mpsc::UnboundedReceiver<Heard>) {
        let prefix = self.inner.fleet_channel.clone();
        let (raw, raw_heard) = mpsc::unbounded_channel();
        let (heard, receiver) = mpsc::unbounded_channel();
        let hearing = BusHearing {
            channels: [prefix.clone(), own_channel(&prefix, replica)],
            replica: replica.to_owned(),
            heard: raw,
        };
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(listen::run(self.inner.config.clone(), hearing, stopped));
        tokio::spawn(unspill(self.clone(), raw_heard, heard));
        (PgBus { store: self.clone(), replica: replica.to_owned(), prefix, _stop: stop }, receiver)
    }
}

/// Passes on what was heard, reading spilled bodies back (and deleting them); ends with the listening task.
async fn unspill(
    store: PostgresStore,
    mut raw: mpsc::UnboundedReceiver<(String, String)>,
    heard: mpsc::UnboundedSender<Heard>,
) {
    while let Some((from, payload)) = raw.recv().await {
        let body = match (payload.strip_prefix('='), payload.strip_prefix('@').and_then(|id| id.parse().ok())) {
            (Some(body), _) => body.to_owned(),
            (None, Some(id)) => match store.take_spilled(id).await {
                Ok(Some(body)) => body,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, "fleet bus: cannot read a long message; it is lost");
                    continue;
                }
            },
            (None, None) => {
                tracing::warn!(payload, "fleet bus: ignored a malformed message");
                continue;
            }
        };
        if heard.send(Heard { from, body }).is_err() {
            return;
        }
    }
}

impl PostgresStore {
    async fn take_spilled(&self, id: i64) -> Result<Option<String>, LedgerError> {
        let sql = format!("DELETE FROM {} WHERE id = $1 RETURNING body", self.inner.fleet_spill);
        let sql = sql.as_str();
        let row = self.inner.conn.run(|db| async move { Ok(db.client.query_opt(sql, &[&id]).await?) }).await?;
        row.map(|row| row.try_get(0))
            .transpose()
            .map_err(|error| LedgerError::corrupt(format!("unreadable fleet message: {error}")))
    }
}

impl PgBus {
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// Sends `body` to `to`, or to every other replica (`None`); done once PostgreSQL took the notification.
    pub(crate) async fn send(&self, to: Option<&str>, body: &str) -> Result<(), LedgerError> {
        let channel = to.map_or_else(|| self.prefix.clone(), |to| own_channel(&self.prefix, to));
        let (channel, from) = (channel.as_str(), self.replica.as_str());
        let inner = &self.store.inner;
        if body.len() + from.len() < INLINE_MAX {
            let payload = format!("{from} ={body}");
            let payload = payload.as_str();
            let notify = "SELECT pg_notify($1, $2)";
            return inner
                .conn
                .run(|db| async move { Ok(db.client.execute(notify, &[&channel, &payload]).await?) })
                .await
                .map(drop);
        }
        let spill = format!(
            "WITH gone AS (DELETE FROM {table} WHERE at < now() - interval '5 minutes'), \
             spilled AS (INSERT INTO {table} (body) VALUES ($2) RETURNING id) \
             SELECT pg_notify($1, $3 || ' @' || id) FROM spilled",
            table = inner.fleet_spill
        );
        let spill = spill.as_str();
        inner
            .conn
            .run(|db| async move { Ok(db.client.execute(spill, &[&channel, &body, &from]).await?) })
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
