//! Tests of the revocation list: deletions, expiry and purging, the bound, the log and other replicas' records.

use super::*;
use tokio::sync::mpsc;

const NOW: u64 = 1_760_000_000;
/// Later than any test run: for entries that [`Revocations::start`] loads at the real time.
const FAR: u64 = 4_000_000_000;

fn id(n: u8) -> SessionRef {
    SessionRef::from_bytes([n; 16])
}

/// A log in memory that can be told to fail, with a feed the test drives.
#[derive(Default)]
struct FakeLog {
    entries: Mutex<Vec<LogEntry>>,
    failing: Mutex<bool>,
    feed: Mutex<Option<mpsc::UnboundedReceiver<LogChange>>>,
}

impl FakeLog {
    fn check(&self) -> Result<(), LogError> {
        if *self.failing.lock() { Err(LogError("the store is down".into())) } else { Ok(()) }
    }
}

impl RevocationLog for FakeLog {
    fn record(&self, entry: LogEntry) -> LogCall<'_, ()> {
        Box::pin(async move {
            self.check()?;
            self.entries.lock().push(entry);
            Ok(())
        })
    }

    fn unexpired(&self, now_unix: u64) -> LogCall<'_, Vec<LogEntry>> {
        Box::pin(async move {
            self.check()?;
            Ok(self.entries.lock().iter().filter(|entry| entry.expires_at >= now_unix).cloned().collect())
        })
    }

    fn follow(&self) -> Option<Box<dyn LogFeed>> {
        let receiver = self.feed.lock().take()?;
        Some(Box::new(Feed(receiver)))
    }
}

struct Feed(mpsc::UnboundedReceiver<LogChange>);

impl LogFeed for Feed {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Option<LogChange>> + Send + '_>> {
        Box::pin(self.0.recv())
    }
}

fn entry(n: u8, expires_at: u64) -> LogEntry {
    LogEntry { session: id(n).to_string(), expires_at }
}

#[tokio::test]
async fn revocation_holds_until_expiry_then_is_purged() {
    let revocations = Revocations::new(10);
    revocations.revoke(id(1), NOW + 100, NOW).await.unwrap();
    assert!(revocations.is_revoked(&id(1), NOW));
    assert!(revocations.is_revoked(&id(1), NOW + 100));
    assert!(!revocations.is_revoked(&id(2), NOW));
    assert!(!revocations.is_revoked(&id(1), NOW + 101));
    assert!(revocations.is_empty());
}

#[tokio::test]
async fn revoking_twice_keeps_the_later_expiry() {
    let revocations = Revocations::new(10);
    revocations.revoke(id(1), NOW + 100, NOW).await.unwrap();
    revocations.revoke(id(1), NOW + 50, NOW).await.unwrap();
    assert_eq!(revocations.len(), 1);
    assert!(revocations.is_revoked(&id(1), NOW + 100));
}

/// The old list dropped the soonest-expiring entries when full, reviving their sessions; now a full list
/// refuses the next deletion (and new sessions) and every recorded deletion holds.
#[tokio::test]
async fn a_full_list_refuses_instead_of_forgetting() {
    let revocations = Revocations::new(3);
    for (n, expiry) in [(1, 400), (2, 100), (3, 500)] {
        revocations.revoke(id(n), NOW + expiry, NOW).await.unwrap();
    }
    let refused = revocations.revoke(id(4), NOW + 300, NOW).await;
    assert_eq!(refused, Err(RevokeError::Full { capacity: 3, retry_after: 101 }));
    assert!(refused.unwrap_err().to_string().contains("server.max_revocations"));
    assert_eq!(revocations.room(NOW), Err(RevokeError::Full { capacity: 3, retry_after: 101 }));
    assert!([1, 2, 3].iter().all(|&n| revocations.is_revoked(&id(n), NOW)), "no deletion is forgotten");
    assert!(!revocations.is_revoked(&id(4), NOW));
    // Once the soonest entry expires there is room again.
    assert_eq!(revocations.room(NOW + 101), Ok(()));
    revocations.revoke(id(4), NOW + 300, NOW + 101).await.unwrap();
    assert!(revocations.is_revoked(&id(4), NOW + 101));
    assert!(revocations.is_revoked(&id(1), NOW + 101));
}

#[tokio::test]
async fn a_deletion_is_recorded_in_the_log_before_it_counts() {
    let log = Arc::new(FakeLog::default());
    let revocations = Revocations::shared(10, log.clone());
    revocations.revoke(id(1), NOW + 100, NOW).await.unwrap();
    assert_eq!(*log.entries.lock(), vec![entry(1, NOW + 100)]);

    *log.failing.lock() = true;
    let refused = revocations.revoke(id(2), NOW + 100, NOW).await;
    assert_eq!(refused, Err(RevokeError::Log(LogError("the store is down".into()))));
    assert!(!revocations.is_revoked(&id(2), NOW), "a deletion the log refused changed nothing");
}

#[tokio::test]
async fn start_loads_the_log_then_follows_it() {
    let log = Arc::new(FakeLog::default());
    log.entries.lock().extend([entry(1, FAR), entry(2, 5), LogEntry { session: "x".into(), expires_at: u64::MAX }]);
    let (changes, receiver) = mpsc::unbounded_channel();
    *log.feed.lock() = Some(receiver);
    // A bound of one: what the log holds is kept whatever the bound.
    let revocations = Arc::new(Revocations::shared(1, log.clone()));
    let follower = revocations.start().await.unwrap();
    assert!(revocations.is_revoked(&id(1), NOW));
    assert!(!revocations.is_revoked(&id(2), NOW), "expired entries are not loaded");
    assert_eq!(revocations.len(), 1, "ids this gateway never issues are ignored");

    changes.send(LogChange::Recorded(entry(3, FAR))).unwrap();
    log.entries.lock().push(entry(4, FAR));
    changes.send(LogChange::Missed).unwrap();
    drop(changes);
    follower.await.unwrap();
    assert!(revocations.is_revoked(&id(3), NOW), "an announced deletion is applied");
    assert!(revocations.is_revoked(&id(4), NOW), "a missed one is found by the reload");
}

#[tokio::test]
async fn a_log_that_cannot_load_fails_the_start() {
    let log = Arc::new(FakeLog::default());
    *log.failing.lock() = true;
    let revocations = Arc::new(Revocations::shared(10, log));
    assert!(revocations.start().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_is_shared_across_threads() {
    let revocations = Arc::new(Revocations::new(1000));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..4u8 {
        let revocations = Arc::clone(&revocations);
        tasks.spawn(async move {
            for m in 0..100u8 {
                let mut bytes = [0u8; 16];
                bytes[..2].copy_from_slice(&[n, m]);
                revocations.revoke(SessionRef::from_bytes(bytes), NOW, NOW).await.unwrap();
            }
        });
    }
    tasks.join_all().await;
    assert_eq!(revocations.len(), 400);
}
