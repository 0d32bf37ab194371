//! Behaviour cases (run against every store by the suite) about approval requests: created once per key,
//! decided once, expired when nobody decided, listed newest first, and shared with a second instance.

use std::time::{Duration, SystemTime};

use super::{Harness, claim_of};
use crate::ledger::{
    Announced, ApprovalRequest, ApprovalRow, ApprovalState, ClaimKey, Decision, LedgerError, Resolution, Resolve,
};

fn decision(approve: bool, by: &str, note: Option<&str>) -> Decision {
    Decision { approve, by: by.into(), note: note.map(str::to_owned), at: SystemTime::now() }
}

const HOUR: Duration = Duration::from_secs(3600);

pub(super) async fn an_approval_is_requested_once_and_decided_once(h: &Harness) {
    let store = &h.store;
    let row = ApprovalRow::awaiting("k1", SystemTime::now(), HOUR);
    assert_eq!(store.request_approval(row.clone()).await.expect("request"), ApprovalRequest::Created(row.clone()));
    let again = ApprovalRow::awaiting("k1", SystemTime::now() + Duration::from_secs(5), HOUR);
    assert_eq!(store.request_approval(again).await.expect("retry"), ApprovalRequest::Existing(row.clone()));
    let approved = store.decide_approval(&row.key, &decision(true, "alice", Some("ok, once"))).await.expect("decide");
    assert_eq!(approved.state, ApprovalState::Approved);
    assert_eq!((approved.decided_by.as_deref(), approved.note.as_deref()), (Some("alice"), Some("ok, once")));
    assert!(approved.decided_at.is_some());
    let second = store.decide_approval(&row.key, &decision(false, "carol", None)).await;
    assert!(
        matches!(&second, Err(LedgerError::AlreadyDecided { state: ApprovalState::Approved, by, .. }) if by == "alice"),
        "{second:?}"
    );
    assert_eq!(store.approval(&row.key).await.expect("get"), Some(approved), "the first decision stands");
    let missing = store.decide_approval(&ClaimKey::idempotency("bot", "nope"), &decision(true, "alice", None)).await;
    assert!(matches!(missing, Err(LedgerError::NotFound { .. })), "{missing:?}");
}

pub(super) async fn concurrent_decisions_have_one_winner(h: &Harness) {
    let row = ApprovalRow::awaiting("race", SystemTime::now(), HOUR);
    h.store.request_approval(row.clone()).await.expect("request");
    let tasks: Vec<_> = (0..8)
        .map(|n| {
            let (store, key) = (h.store.clone(), row.key.clone());
            tokio::spawn(
                async move { store.decide_approval(&key, &decision(n % 2 == 0, &format!("a{n}"), None)).await },
            )
        })
        .collect();
    let mut winners = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => winners += 1,
            Err(LedgerError::AlreadyDecided { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(winners, 1);
}

pub(super) async fn an_undecided_request_expires_and_cannot_be_decided(h: &Harness) {
    let past = SystemTime::now() - 2 * HOUR;
    let row = ApprovalRow::awaiting("old", past, HOUR);
    h.store.request_approval(row.clone()).await.expect("request");
    let stored = h.store.approval(&row.key).await.expect("get").expect("present");
    assert_eq!(stored.state, ApprovalState::AwaitingApproval, "expiry is read, not written");
    assert_eq!(stored.state_at(SystemTime::now()), ApprovalState::Expired);
    assert_eq!(stored.state_at(past), ApprovalState::AwaitingApproval);
    let late = h.store.decide_approval(&row.key, &decision(true, "alice", None)).await;
    assert!(matches!(late, Err(LedgerError::AlreadyDecided { state: ApprovalState::Expired, .. })), "{late:?}");
}

pub(super) async fn approvals_are_listed_newest_first_by_state(h: &Harness) {
    let now = SystemTime::now();
    for (n, name) in ["a", "b", "c"].iter().enumerate() {
        h.store
            .request_approval(ApprovalRow::awaiting(name, now + Duration::from_secs(n as u64), HOUR))
            .await
            .expect("request");
    }
    h.store.decide_approval(&ClaimKey::idempotency("bot", "b"), &decision(false, "alice", None)).await.expect("deny");
    let names = |rows: Vec<ApprovalRow>| rows.into_iter().map(|row| row.key.to_string()).collect::<Vec<_>>();
    let pending = h.store.approvals(Some(ApprovalState::AwaitingApproval), 10).await.expect("list");
    assert_eq!(names(pending), ["idem:3:bot:c", "idem:3:bot:a"]);
    assert_eq!(names(h.store.approvals(None, 2).await.expect("list")), ["idem:3:bot:c", "idem:3:bot:b"]);
    let denied = h.store.approvals(Some(ApprovalState::Denied), 10).await.expect("list");
    assert_eq!(denied.len(), 1);
}

pub(super) async fn approvals_are_seen_by_a_second_instance(h: &Harness) {
    let row = ApprovalRow::awaiting("shared", SystemTime::now(), HOUR);
    h.store.request_approval(row.clone()).await.expect("request");
    let second = h.second().await;
    let decided = second.decide_approval(&row.key, &decision(true, "alice", None)).await.expect("decide");
    assert_eq!(h.store.approval(&row.key).await.expect("get"), Some(decided));
}

pub(super) async fn old_decided_and_expired_requests_are_purged(h: &Harness) {
    let now = SystemTime::now();
    let expired = ApprovalRow::awaiting("expired", now - 3 * HOUR, HOUR);
    let waiting = ApprovalRow::awaiting("waiting", now - 3 * HOUR, 10 * HOUR);
    let decided = ApprovalRow::awaiting("decided", now - 3 * HOUR, 10 * HOUR);
    for row in [&expired, &waiting, &decided] {
        h.store.request_approval(row.clone()).await.expect("request");
    }
    let old = Decision { at: now - 2 * HOUR, ..decision(true, "alice", None) };
    h.store.decide_approval(&decided.key, &old).await.expect("decided two hours ago");
    assert_eq!(h.store.purge_approvals(now - HOUR).await.expect("purge"), 2);
    let left = h.store.approvals(None, 10).await.expect("list");
    assert_eq!(left.iter().map(|row| row.key.clone()).collect::<Vec<_>>(), [waiting.key], "still awaiting");
}

pub(super) async fn malformed_requests_and_notes_are_refused(h: &Harness) {
    let mut decided = ApprovalRow::awaiting("bad", SystemTime::now(), HOUR);
    decided.state = ApprovalState::Approved;
    assert!(matches!(h.store.request_approval(decided).await, Err(LedgerError::InvalidApproval { .. })));
    let row = ApprovalRow::awaiting("note", SystemTime::now(), HOUR);
    h.store.request_approval(row.clone()).await.expect("request");
    let long = "x".repeat(crate::ledger::MAX_NOTE + 1);
    let refused = h.store.decide_approval(&row.key, &decision(true, "alice", Some(&long))).await;
    assert!(matches!(refused, Err(LedgerError::InvalidApproval { .. })), "{refused:?}");
}

pub(super) async fn decisions_are_read_back_by_time_and_announced_once(h: &Harness) {
    let before = SystemTime::now() - Duration::from_secs(1);
    let row = ApprovalRow::awaiting("feed", SystemTime::now(), HOUR);
    h.store.request_approval(row.clone()).await.expect("request");
    assert!(h.store.decided_approvals_since(before).await.expect("read").is_empty(), "undecided");
    let decided = h.store.decide_approval(&row.key, &decision(false, "alice", Some("no"))).await.expect("decide");
    assert_eq!(h.store.decided_approvals_since(before).await.expect("read"), std::slice::from_ref(&decided));
    let later = SystemTime::now() + Duration::from_secs(60);
    assert!(h.store.decided_approvals_since(later).await.expect("read").is_empty(), "decided before");

    let lost = claim_of("lost", "gw-1");
    h.store.claim(lost.clone()).await.expect("claim");
    h.store.mark_unknown(&lost.key, "gw-1", "dropped").await.expect("unknown");
    let resolve = Resolve { resolution: Resolution::Failed, by: "ann".into(), note: None };
    h.store.resolve(&lost.key, &resolve).await.expect("resolve");
    let resolved = h.store.resolutions_since(before).await.expect("read");
    assert_eq!(resolved.iter().map(|row| (&row.key, row.by.as_str())).collect::<Vec<_>>(), [(&lost.key, "ann")]);
    assert!(h.store.resolutions_since(later).await.expect("read").is_empty());

    let at = decided.decided_at.expect("decided at");
    let second = h.second().await;
    assert!(h.store.take_announcement(Announced::ApprovalDecision, row.key.as_str(), at).await.expect("take"));
    assert!(!second.take_announcement(Announced::ApprovalDecision, row.key.as_str(), at).await.expect("taken"), "once");
    assert!(second.take_announcement(Announced::Resolution, row.key.as_str(), at).await.expect("another kind"));
    assert_eq!(h.store.purge_announcements(at + Duration::from_millis(1)).await.expect("purge"), 2);
    assert!(h.store.take_announcement(Announced::ApprovalDecision, row.key.as_str(), at).await.expect("purged"));
}
