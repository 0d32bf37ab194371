//! The front's [`RevocationLog`] over the ledger's revocation API: the one place the two meet, so the front never
//! imports the ledger (the composition root wires parts together, no part reaches around another).
//! Only types are translated here; the behaviour is the ledger's and the front's.

use std::future::Future;
use std::pin::Pin;

use crate::front::revocations::{LogCall, LogChange, LogEntry, LogError, LogFeed, RevocationLog};
use crate::ledger::{LedgerError, LedgerStore, Revocation, RevocationEvent, RevocationFeed};

/// The ledger's store as the front's revocation log.
pub(super) struct LedgerLog(pub(super) LedgerStore);

fn log_error(error: LedgerError) -> LogError {
    LogError(error.to_string())
}

fn entry(revocation: Revocation) -> LogEntry {
    LogEntry { session: revocation.session, expires_at: revocation.expires_at }
}

impl RevocationLog for LedgerLog {
    fn record(&self, entry: LogEntry) -> LogCall<'_, ()> {
        let revocation = Revocation { session: entry.session, expires_at: entry.expires_at };
        Box::pin(async move { self.0.record_revocation(&revocation).await.map_err(log_error) })
    }

    fn unexpired(&self, now_unix: u64) -> LogCall<'_, Vec<LogEntry>> {
        Box::pin(async move {
            let revocations = self.0.unexpired_revocations(now_unix).await.map_err(log_error)?;
            Ok(revocations.into_iter().map(entry).collect())
        })
    }

    fn follow(&self) -> Option<Box<dyn LogFeed>> {
        self.0.revocation_feed().map(|feed| Box::new(LedgerFeed(feed)) as Box<dyn LogFeed>)
    }
}

struct LedgerFeed(RevocationFeed);

impl LogFeed for LedgerFeed {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Option<LogChange>> + Send + '_>> {
        Box::pin(async move {
            self.0.next().await.map(|event| match event {
                RevocationEvent::Recorded(revocation) => LogChange::Recorded(entry(revocation)),
                RevocationEvent::Missed => LogChange::Missed,
            })
        })
    }
}
