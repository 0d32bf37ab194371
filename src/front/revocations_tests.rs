//! Tests of the revocation list: deletions, expiry and purging, the bound, the log and other replicas' records.

use super::*;
use tokio::sync::mpsc;

const NOW: u64 = 1_760_000_000;
/// Later than any test run: for entries that [`Revocations::start`] loads at the real time.
const FAR: u64 = 4_000_000_000;
/// The owner of the deletions of tests about something else than shares.
const OWNER: &str = "alice";

fn id(n: u8) -> SessionRef {
    SessionRef::from_bytes([n; 16])
}

/// A log in memory that can be told to fail, with a feed the test drives.
#[derive(Default)]
struct FakeLog {
    entries: Mutex<Vec<LogEntry>>,
    failing: Mutex<bool>,
    /// Makes each record take a while, so concurrent deletions are all between their check and their insert.
    slow: Mutex<bool>,
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
            let slow = *self.slow.lock();
            if slow {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
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
    let revocations = Revocations::new(Bounds::whole(10));
    revocations.revoke(id(1), OWNER, NOW + 100, NOW).await.unwrap();
    assert!(revocations.is_revoked(&id(1), NOW));
    assert!(revocations.is_revoked(&id(1), NOW + 100));
    assert!(!revocations.is_revoked(&id(2), NOW));
    assert!(!revocations.is_revoked(&id(1), NOW + 101));
    assert!(revocations.is_empty());
}

#[tokio::test]
async fn revoking_twice_keeps_the_later_expiry() {
    let revocations = Revocations::new(Bounds::whole(10));
    revocations.revoke(id(1), OWNER, NOW + 100, NOW).await.unwrap();
    revocations.revoke(id(1), OWNER, NOW + 50, NOW).await.unwrap();
    assert_eq!(revocations.len(), 1);
    assert!(revocations.is_revoked(&id(1), NOW + 100));
}

/// The old list dropped the soonest-expiring entries when full, reviving their sessions; now a full list
/// refuses the next deletion (and new sessions) and every recorded deletion holds.
#[tokio::test]
async fn a_full_list_refuses_instead_of_forgetting() {
    let revocations = Revocations::new(Bounds::whole(3));
    for (n, expiry) in [(1, 400), (2, 100), (3, 500)] {
        revocations.revoke(id(n), OWNER, NOW + expiry, NOW).await.unwrap();
    }
    let refused = revocations.revoke(id(4), OWNER, NOW + 300, NOW).await;
    assert_eq!(refused, Err(RevokeError::Full { capacity: 3, retry_after: 101 }));
    assert!(refused.unwrap_err().to_string().contains("server.max_revocations"));
    assert_eq!(revocations.room(OWNER, NOW), Err(RevokeError::Full { capacity: 3, retry_after: 101 }));
    assert!([1, 2, 3].iter().all(|&n| revocations.is_revoked(&id(n), NOW)), "no deletion is forgotten");
    assert!(!revocations.is_revoked(&id(4), NOW));
    // Once the soonest entry expires there is room again.
    assert_eq!(revocations.room(OWNER, NOW + 101), Ok(()));
    revocations.revoke(id(4), OWNER, NOW + 300, NOW + 101).await.unwrap();
    assert!(revocations.is_revoked(&id(4), NOW + 101));
    assert!(revocations.is_revoked(&id(1), NOW + 101));
}

#[tokio::test]
async fn a_deletion_is_recorded_in_the_log_before_it_counts() {
    let log = Arc::new(FakeLog::default());
    let revocations = Revocations::shared(Bounds::whole(10), log.clone());
    revocations.revoke(id(1), OWNER, NOW + 100, NOW).await.unwrap();
    assert_eq!(*log.entries.lock(), vec![entry(1, NOW + 100)]);

    *log.failing.lock() = true;
    let refused = revocations.revoke(id(2), OWNER, NOW + 100, NOW).await;
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
    let revocations = Arc::new(Revocations::shared(Bounds::whole(1), log.clone()));
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
    let revocations = Arc::new(Revocations::shared(Bounds::whole(10), log));
    assert!(revocations.start().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_is_shared_across_threads() {
    let revocations = Arc::new(Revocations::new(Bounds::whole(1000)));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..4u8 {
        let revocations = Arc::clone(&revocations);
        let owner = format!("agent-{n}");
        tasks.spawn(async move {
            for m in 0..100u8 {
                let mut bytes = [0u8; 16];
                bytes[..2].copy_from_slice(&[n, m]);
                revocations.revoke(SessionRef::from_bytes(bytes), &owner, NOW, NOW).await.unwrap();
            }
        });
    }
    tasks.join_all().await;
    assert_eq!(revocations.len(), 400);
}

/// One client used to fill the whole list and so block every new session; now it fills only its share, and is
/// refused alone, with the time its own oldest entry expires.
#[tokio::test]
async fn a_full_share_refuses_only_its_owner() {
    let revocations = Revocations::new(Bounds { total: 8, per_owner: 2 });
    let flooder = "anonymous@127.0.0.1";
    revocations.revoke(id(1), flooder, NOW + 300, NOW).await.unwrap();
    revocations.revoke(id(2), flooder, NOW + 100, NOW).await.unwrap();
    let full = RevokeError::ShareFull { owner: flooder.into(), share: 2, retry_after: 101 };
    let refused = revocations.revoke(id(3), flooder, NOW + 300, NOW).await;
    assert_eq!(refused, Err(full.clone()));
    assert!(refused.unwrap_err().to_string().contains("server.max_revocations_per_owner"));
    assert_eq!(revocations.room(flooder, NOW), Err(full), "nor may it start a session");
    assert!(!revocations.is_revoked(&id(3), NOW), "the refused deletion changed nothing");

    assert_eq!(revocations.room("bob", NOW), Ok(()), "another owner may start a session");
    revocations.revoke(id(4), "bob", NOW + 300, NOW).await.unwrap();
    assert!(revocations.is_revoked(&id(4), NOW), "and delete one");
    assert_eq!(revocations.room("anonymous@192.0.2.7", NOW), Ok(()), "an anonymous client elsewhere too");

    // The owner's soonest entry expiring gives it room again; every deletion still holds until its own expiry.
    assert_eq!(revocations.room(flooder, NOW + 101), Ok(()));
    revocations.revoke(id(3), flooder, NOW + 300, NOW + 101).await.unwrap();
    assert!([1, 3, 4].iter().all(|&n| revocations.is_revoked(&id(n), NOW + 101)));
}

/// The total still bounds memory: owners within their shares are refused once the list is full.
#[tokio::test]
async fn the_total_bound_holds_over_every_share() {
    let revocations = Revocations::new(Bounds { total: 3, per_owner: 2 });
    for (n, owner) in [(1, "a"), (2, "a"), (3, "b")] {
        revocations.revoke(id(n), owner, NOW + 100, NOW).await.unwrap();
    }
    let full = Err(RevokeError::Full { capacity: 3, retry_after: 101 });
    assert_eq!(revocations.revoke(id(4), "c", NOW + 100, NOW).await, full);
    assert_eq!(revocations.room("b", NOW), full);
}

/// A place is taken before the log write, so deletions racing through a slow log cannot all pass the check:
/// exactly the bound is accepted, for the total as for one owner's share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_deletions_accept_exactly_the_bound() {
    for (bounds, owners) in [(Bounds { total: 7, per_owner: 7 }, 50), (Bounds { total: 100, per_owner: 5 }, 1)] {
        let log = Arc::new(FakeLog::default());
        *log.slow.lock() = true;
        let revocations = Arc::new(Revocations::shared(bounds, log.clone()));
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..50u8 {
            let revocations = Arc::clone(&revocations);
            let owner = format!("agent-{}", usize::from(n) % owners);
            tasks.spawn(async move { revocations.revoke(id(n), &owner, NOW + 100, NOW).await });
        }
        let results = tasks.join_all().await;
        let accepted = results.iter().filter(|result| result.is_ok()).count();
        let expected = bounds.total.min(bounds.per_owner * owners);
        assert_eq!(accepted, expected, "{bounds:?}: {results:?}");
        assert_eq!(revocations.len(), expected);
        assert_eq!(log.entries.lock().len(), expected, "nothing beyond the bound reached the log");
    }
}

/// A deletion the log refused gives its place back: the owner's share is not used up by failures.
#[tokio::test]
async fn a_deletion_the_log_refused_gives_its_place_back() {
    let log = Arc::new(FakeLog::default());
    let revocations = Revocations::shared(Bounds { total: 1, per_owner: 1 }, log.clone());
    *log.failing.lock() = true;
    for _ in 0..3 {
        assert!(matches!(revocations.revoke(id(1), OWNER, NOW + 100, NOW).await, Err(RevokeError::Log(_))));
    }
    assert_eq!(revocations.room(OWNER, NOW), Ok(()));
    *log.failing.lock() = false;
    revocations.revoke(id(1), OWNER, NOW + 100, NOW).await.unwrap();
    assert!(revocations.is_revoked(&id(1), NOW));
}

/// Entries heard from the log count toward the total but against nobody's share (a restart forgets the shares,
/// never the deletions); one's own deletion heard back before its write returned is still counted once, as its own.
#[tokio::test]
async fn log_entries_count_toward_the_total_only() {
    let log = Arc::new(FakeLog::default());
    log.entries.lock().extend([entry(1, FAR), entry(2, FAR)]);
    let revocations = Arc::new(Revocations::shared(Bounds { total: 3, per_owner: 1 }, log.clone()));
    revocations.start().await.unwrap().await.unwrap();
    assert_eq!(revocations.room(OWNER, NOW), Ok(()), "nobody owns what the log held");
    revocations.revoke(id(2), OWNER, FAR, NOW).await.unwrap();
    assert_eq!(revocations.len(), 2, "one entry per session");
    assert!(matches!(revocations.room(OWNER, NOW), Err(RevokeError::ShareFull { .. })), "now it is OWNER's");
    revocations.revoke(id(3), "bob", FAR, NOW).await.unwrap();
    assert_eq!(revocations.room("carol", NOW), Err(RevokeError::Full { capacity: 3, retry_after: FAR - NOW + 1 }));
}

/// A deletion abandoned during its log write (the client went away) gives its place back too.
#[tokio::test]
async fn an_abandoned_deletion_gives_its_place_back() {
    let log = Arc::new(FakeLog::default());
    *log.slow.lock() = true;
    let revocations = Revocations::shared(Bounds { total: 1, per_owner: 1 }, log.clone());
    let abandoned = tokio::time::timeout(Duration::from_millis(5), revocations.revoke(id(1), OWNER, FAR, NOW)).await;
    assert!(abandoned.is_err(), "the log write was still running");
    assert_eq!(revocations.room(OWNER, NOW), Ok(()));
}
