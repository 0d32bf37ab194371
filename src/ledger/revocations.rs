//! The revocation log: agent sessions ended early (`DELETE /mcp`), kept in the ledger's store so that a restart
//! (SQLite) or another replica (PostgreSQL) refuses them too.
//!
//! Rules:
//! - Plain types only: a session is an opaque string (1–[`MAX_SESSION_LEN`] visible ASCII characters) and its
//!   expiry is in unix seconds. The ledger knows nothing of sealed ids; the front keeps the cache that is
//!   consulted on every request, this log is what the cache is loaded from and shared through.
//! - An entry lives until its session's own expiry; recording a session twice keeps the later expiry. Entries
//!   whose expiry has passed are purged by the upkeep task ([`super::maintain`]).
//! - The table is additive: it is created (`IF NOT EXISTS`) on every open, beside the claims table, and an older
//!   build simply ignores it, so it does not change the schema version.
//! - PostgreSQL announces every recorded revocation with `NOTIFY` on the schema's revocation channel, in the
//!   same statement as the write; [`RevocationFeed`] hands them to subscribers, and says [`RevocationEvent::Missed`]
//!   whenever announcements may have been lost (the listening connection was re-established, or the subscriber
//!   fell behind), so the subscriber reloads. SQLite and memory have no other writers to hear from (processes
//!   sharing one SQLite file see each other's revocations at start).

use tokio::sync::broadcast;

use super::LedgerStore;
use super::error::LedgerError;
use super::sql::Dialect;

/// The revocations table's name (in the configured schema on Postgres).
pub(crate) const REVOCATIONS_TABLE: &str = "switchyard_revocations";
/// The longest session string the log stores.
pub const MAX_SESSION_LEN: usize = 128;
/// How many announcements a slow subscriber may fall behind before it is told it missed some.
pub(crate) const FEED_CAPACITY: usize = 1024;

/// One revoked session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The session's identifier, as the caller spells it.
    pub session: String,
    /// The last unix second at which the session would still be valid; the entry is kept until then.
    pub expires_at: u64,
}

/// What a [`RevocationFeed`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevocationEvent {
    /// A revocation was recorded (by any replica, this one included).
    Recorded(Revocation),
    /// Announcements may have been lost: reload with [`LedgerStore::unexpired_revocations`].
    Missed,
}

/// Revocations as the store announces them.
#[derive(Debug)]
pub struct RevocationFeed(broadcast::Receiver<RevocationEvent>);

impl RevocationFeed {
    pub(crate) fn new(receiver: broadcast::Receiver<RevocationEvent>) -> Self {
        Self(receiver)
    }

    /// The next event, or `None` once the store is gone.
    pub async fn next(&mut self) -> Option<RevocationEvent> {
        match self.0.recv().await {
            Ok(event) => Some(event),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(RevocationEvent::Missed),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

impl Revocation {
    /// Checks the session's shape: what the stores may write and announce.
    fn check(&self) -> Result<(), LedgerError> {
        let visible = self.session.bytes().all(|byte| (0x21..=0x7e).contains(&byte));
        if self.session.is_empty() || self.session.len() > MAX_SESSION_LEN || !visible {
            return Err(LedgerError::InvalidSession { session: self.session.chars().take(80).collect() });
        }
        Ok(())
    }

    /// The expiry as the stores keep it (`BIGINT`); later than any real expiry when it does not fit.
    pub(crate) fn stored_expiry(&self) -> i64 {
        i64::try_from(self.expires_at).unwrap_or(i64::MAX)
    }

    /// A stored row, refused as corrupt when it cannot have been written here.
    pub(crate) fn from_row(session: String, expires_at: i64) -> Result<Revocation, LedgerError> {
        let expires_at = u64::try_from(expires_at)
            .map_err(|_| LedgerError::corrupt(format!("revocation of {session} has a negative expiry")))?;
        Ok(Revocation { session, expires_at })
    }

    /// The `NOTIFY` payload: `<session> <expires_at>` (the session holds no blank).
    pub(crate) fn from_announcement(payload: &str) -> Option<Revocation> {
        let (session, expires_at) = payload.split_once(' ')?;
        let expires_at = expires_at.parse().ok()?;
        (!session.is_empty()).then(|| Revocation { session: session.to_owned(), expires_at })
    }
}

/// The revocation statements for one table and dialect.
#[derive(Debug, Clone)]
pub(crate) struct RevocationSql {
    /// `$1` session, `$2` expires_at; keeps the later expiry. On Postgres it also announces the stored entry.
    pub(crate) record: String,
    /// `$1` now; the unexpired entries.
    pub(crate) unexpired: String,
    /// `$1` now; deletes the expired entries.
    pub(crate) purge: String,
}

impl RevocationSql {
    /// `channel`: where Postgres announces revocations (unused by SQLite).
    pub(crate) fn new(table: &str, dialect: Dialect, channel: &str) -> RevocationSql {
        let upsert = |later: &str| {
            format!(
                "INSERT INTO {table} AS r (session, expires_at) VALUES ($1, $2) \
                 ON CONFLICT (session) DO UPDATE SET expires_at = {later}(r.expires_at, excluded.expires_at)"
            )
        };
        let record = match dialect {
            Dialect::Sqlite => dialect.render(&upsert("MAX")),
            Dialect::Postgres => format!(
                "WITH recorded AS ({} RETURNING session, expires_at) \
                 SELECT pg_notify('{channel}', session || ' ' || expires_at) FROM recorded",
                upsert("GREATEST")
            ),
        };
        RevocationSql {
            record,
            unexpired: dialect.render(&format!("SELECT session, expires_at FROM {table} WHERE expires_at >= $1")),
            purge: dialect.render(&format!("DELETE FROM {table} WHERE expires_at < $1")),
        }
    }
}

/// The statements that create the revocations table if it is missing.
pub(crate) fn create_statements(table: &str, dialect: Dialect) -> [String; 2] {
    let clustered = dialect.clustered();
    [
        format!("CREATE TABLE IF NOT EXISTS {table} (session TEXT PRIMARY KEY, expires_at BIGINT NOT NULL){clustered}"),
        // Purging and loading go by expiry.
        format!("CREATE INDEX IF NOT EXISTS {REVOCATIONS_TABLE}_expiry ON {table} (expires_at)"),
    ]
}

impl LedgerStore {
    /// Records that `revocation.session` is refused until `revocation.expires_at`; durable once this returns.
    pub async fn record_revocation(&self, revocation: &Revocation) -> Result<(), LedgerError> {
        revocation.check()?;
        dispatch!(self.record_revocation(revocation))
    }

    /// Every revocation still in force at `now_unix` (expiring at or after it).
    pub async fn unexpired_revocations(&self, now_unix: u64) -> Result<Vec<Revocation>, LedgerError> {
        dispatch!(self.unexpired_revocations(now_unix))
    }

    /// Deletes the revocations that expired before `now_unix`; returns how many.
    pub async fn purge_revocations(&self, now_unix: u64) -> Result<u64, LedgerError> {
        dispatch!(self.purge_revocations(now_unix))
    }

    /// Revocations recorded from now on, by any replica; `None` when nothing but this process writes the store
    /// (memory, SQLite), so everything there is to know is in [`LedgerStore::unexpired_revocations`].
    pub fn revocation_feed(&self) -> Option<RevocationFeed> {
        match self {
            LedgerStore::Memory(_) | LedgerStore::Sqlite(_) => None,
            LedgerStore::Postgres(store) => Some(store.revocation_feed()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_statements_take_numbered_question_marks() {
        let sql = RevocationSql::new("t", Dialect::Sqlite, "unused");
        for statement in [&sql.record, &sql.unexpired, &sql.purge] {
            assert!(!statement.contains('$'), "{statement}");
        }
        assert!(sql.record.contains("MAX(r.expires_at, excluded.expires_at)"), "{}", sql.record);
        let postgres = RevocationSql::new("s.t", Dialect::Postgres, "chan");
        assert!(postgres.record.contains("pg_notify('chan'"), "{}", postgres.record);
        assert!(postgres.record.contains("GREATEST("), "{}", postgres.record);
    }

    #[test]
    fn announcements_round_trip_and_garbage_is_ignored() {
        let parsed = Revocation::from_announcement("abc123 1760000000");
        assert_eq!(parsed, Some(Revocation { session: "abc123".into(), expires_at: 1_760_000_000 }));
        for garbage in ["", "abc", "abc x", "abc -1", " 12"] {
            assert_eq!(Revocation::from_announcement(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn sessions_are_checked() {
        let of = |session: &str| Revocation { session: session.to_owned(), expires_at: 1 }.check();
        assert!(of("0123abcd").is_ok());
        assert!(of(&"a".repeat(MAX_SESSION_LEN)).is_ok());
        assert!(of("").unwrap_err().to_string().contains("1–128 visible ASCII characters"));
        for bad in [String::new(), "a".repeat(MAX_SESSION_LEN + 1), "a b".into(), "é".into(), "a\n".into()] {
            assert!(matches!(of(&bad), Err(LedgerError::InvalidSession { .. })), "{bad:?}");
        }
    }

    #[test]
    fn expiries_beyond_bigint_are_kept_forever_and_negative_rows_are_corrupt() {
        assert_eq!(Revocation { session: "s".into(), expires_at: u64::MAX }.stored_expiry(), i64::MAX);
        assert!(matches!(Revocation::from_row("s".into(), -1), Err(LedgerError::Corrupt { .. })));
        assert_eq!(Revocation::from_row("s".into(), 5).map(|r| r.expires_at).ok(), Some(5));
    }
}
