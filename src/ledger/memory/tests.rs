//! What only the memory store has: its table, its indexes, its sliced sweep and listing, its shared names. The
//! behaviour every store shares is `ledger::tests`' suite.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::claims::Claims;
use super::record::Digest;
use super::table::Table;
use super::{MemoryStore, SLICE};
use crate::ledger::rules::Settle;
use crate::ledger::types::{ClaimKey, ClaimOutcome, ClaimState, ListFilter, NewClaim, Resolution};
use crate::raw_json::RawJson;

/// A hasher under which every key collides, to exercise the shared slots.
#[derive(Debug, Clone, Copy)]
struct Colliding;

impl BuildHasher for Colliding {
    type Hasher = ConstantHasher;

    fn build_hasher(&self) -> ConstantHasher {
        ConstantHasher
    }
}

struct ConstantHasher;

impl std::hash::Hasher for ConstantHasher {
    fn finish(&self) -> u64 {
        7
    }

    fn write(&mut self, _: &[u8]) {}
}

#[test]
fn colliding_keys_are_kept_apart() {
    let mut table = Table::with_hasher(Colliding);
    for name in ["a", "b", "c"] {
        table.insert_new(Arc::from(name), name.len());
    }
    assert_eq!(table.len(), 3);
    assert_eq!(table.get("b").map(|(key, _)| &**key), Some("b"));
    assert_eq!(table.remove("b").map(|(key, _)| key), Some(Arc::from("b")));
    assert!(table.remove("b").is_none(), "removed once");
    assert!(table.get("b").is_none());
    if let Some((_, value)) = table.get_mut("c") {
        *value = 9;
    }
    assert_eq!(table.get("c").map(|(_, value)| *value), Some(9));
    assert_eq!(table.remove("a").map(|(_, value)| value), Some(1));
    assert_eq!(table.remove("c").map(|(_, value)| value), Some(9));
    assert_eq!(table.len(), 0);
    assert!(table.get("c").is_none());
}

#[test]
fn a_sliced_walk_sees_every_entry_once() {
    let mut table = Table::default();
    for index in 0..1000 {
        table.insert_new(Arc::from(index.to_string()), index);
    }
    let (mut seen, mut resume, mut slices) = (Vec::new(), None, 0);
    loop {
        let (entries, next) = table.slice_after(resume, 64);
        assert!(entries.len() <= 64, "a slice is bounded");
        seen.extend(entries.into_iter().map(|(_, value)| *value));
        slices += 1;
        // Entries removed between slices do not disturb the walk.
        table.remove(&(1000 - slices).to_string());
        match next {
            Some(hash) => resume = Some(hash),
            None => break,
        }
    }
    let walked = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), walked, "no entry seen twice");
    assert!(walked >= 1000 - slices, "{walked} entries seen in {slices} slices");
    assert!(slices >= 1000 / 64, "{slices} slices");
}

#[test]
fn digests_round_trip() {
    let sha = crate::ledger::canonical_digest(&json!({"a": 1}));
    assert!(matches!(Digest::of(&sha), Digest::Sha256(_)));
    for text in [sha.as_str(), "d", &sha.to_uppercase(), &format!("{sha}0"), ""] {
        let record = stored_with_digest(text);
        assert_eq!(record.args_digest, text, "{text:?} comes back as it went in");
    }
}

fn stored_with_digest(digest: &str) -> crate::ledger::ClaimRecord {
    let mut claims = Claims::default();
    let new = NewClaim { args_digest: digest.to_owned(), ..call("k", "gw-a") };
    claims.claim(&new, [1; 16], SystemTime::now());
    claims.get(new.key.as_str()).expect("claimed")
}

fn call(name: &str, owner: &str) -> NewClaim {
    crate::ledger::tests::claim_of(name, owner)
}

fn key(name: &str) -> ClaimKey {
    ClaimKey::idempotency("alice", name)
}

/// Claims `name` for `gw-a` and completes it at `at_ms`.
fn settled_at(claims: &mut Claims, name: &str, at_ms: i64) {
    claims.claim(&call(name, "gw-a"), [0; 16], SystemTime::now());
    let stored = crate::ledger::digest::StoredResult::bound(&answer(name), 1 << 20);
    let changed = claims.settle(&key(name), "gw-a", Settle::Complete(&stored), at_ms, |record, _| {
        record.state = ClaimState::Completed;
        record.result = Some(answer(name));
    });
    assert!(changed.expect("completes"), "{name} completed");
}

fn answer(name: &str) -> RawJson {
    RawJson::of(&json!({ "content": [{ "type": "text", "text": name }] }))
}

#[test]
fn the_sweep_removes_exactly_the_expired_in_slices() {
    let mut claims = Claims::default();
    for at in 1..=10 {
        settled_at(&mut claims, &format!("done-{at}"), at);
    }
    claims.claim(&call("running", "gw-a"), [0; 16], SystemTime::now());
    // Settled at 2 and changed again at 8, so it is in retention at a cutoff of 6.
    claims.claim(&call("late", "gw-a"), [0; 16], SystemTime::now());
    claims
        .settle(&key("late"), "gw-a", Settle::MarkUnknown("timeout"), 2, |record, _| {
            record.state = ClaimState::Unknown;
        })
        .expect("unknown");
    claims
        .settle(&key("late"), "gw-a", Settle::Complete(&stored("late")), 8, |record, _| {
            record.state = ClaimState::Completed;
        })
        .expect("completed late");

    assert_eq!(claims.sweep(6, 2), (2, true), "a slice stops at its limit");
    assert_eq!(claims.sweep(6, 2), (2, true));
    assert_eq!(claims.sweep(6, 2), (1, false), "the last expired claim, and nothing in retention");
    assert_eq!(claims.sweep(6, 2), (0, false));
    for at in 1..=5 {
        assert!(claims.get(key(&format!("done-{at}")).as_str()).is_none(), "done-{at} expired");
    }
    for at in 6..=10 {
        assert!(claims.get(key(&format!("done-{at}")).as_str()).is_some(), "done-{at} is in retention");
    }
    assert_eq!(claims.get(key("late").as_str()).map(|record| record.state), Some(ClaimState::Completed));
    assert_eq!(claims.get(key("running").as_str()).map(|record| record.state), Some(ClaimState::InFlight));
    assert_eq!(claims.sweep(i64::MAX, 100), (6, false), "in-flight claims are never swept");
    assert_eq!(claims.counts().0, 1);
}

fn stored(name: &str) -> crate::ledger::digest::StoredResult {
    crate::ledger::digest::StoredResult::bound(&answer(name), 1 << 20)
}

#[test]
fn a_duplicate_gets_its_answer_after_a_sweep_slice() {
    let mut claims = Claims::default();
    for at in 1..=4 {
        settled_at(&mut claims, &format!("old-{at}"), at);
    }
    settled_at(&mut claims, "kept", 100);
    assert_eq!(claims.sweep(50, 2), (2, true));
    match claims.claim(&call("kept", "gw-b"), [2; 16], SystemTime::now()) {
        ClaimOutcome::Existing(record) => assert_eq!(record.result, Some(answer("kept"))),
        ClaimOutcome::Claimed(record) => panic!("a retained claim ran again: {record:?}"),
    }
    match claims.claim(&call("old-3", "gw-b"), [2; 16], SystemTime::now()) {
        ClaimOutcome::Existing(record) => assert_eq!(record.result, Some(answer("old-3")), "not swept yet"),
        ClaimOutcome::Claimed(record) => panic!("the sweep took more than its slice: {record:?}"),
    }
}

#[test]
fn names_are_shared_and_forgotten_with_their_last_claim() {
    let mut claims = Claims::default();
    for at in 1..=3 {
        settled_at(&mut claims, &format!("c{at}"), at);
    }
    // alice, session-1, docs, search, gw-a: one copy each for three claims.
    assert_eq!(claims.counts(), (3, 0, 3, 5));
    let other = NewClaim { session: "session-2".into(), ..call("c4", "gw-a") };
    claims.claim(&other, [0; 16], SystemTime::now());
    assert_eq!(claims.counts().3, 6);
    claims
        .settle(&key("c4"), "gw-a", Settle::MarkUnknown("lost"), 4, |record, _| {
            record.state = ClaimState::Unknown;
        })
        .expect("unknown");
    claims.resolve(&key("c4"), Resolution::Completed, 5).expect("resolved");
    assert_eq!(claims.counts().3, 7, "the operator joined the names");
    assert_eq!(claims.sweep(3, 10), (2, false));
    assert_eq!(claims.counts().3, 7, "names still in use stay");
    assert_eq!(claims.sweep(4, 10), (1, false));
    assert_eq!(claims.counts().3, 5, "gw-a and session-1 went with their last claim");
    assert_eq!(claims.get(key("c4").as_str()).map(|record| record.owner), Some("operator".to_owned()));
    assert_eq!(claims.sweep(6, 10), (1, false));
    assert_eq!(claims.counts(), (0, 0, 0, 0));
}

#[tokio::test]
async fn purging_and_listing_span_many_slices() {
    let store = MemoryStore::default();
    let count = 3 * SLICE + 7;
    for index in 0..count {
        store.claim(call(&format!("k{index}"), "gw-a")).await.expect("claim");
        if index % 3 != 0 {
            store.complete(&key(&format!("k{index}")), "gw-a", &answer("r"), 1 << 20).await.expect("complete");
        }
    }
    let all = store.list(&ListFilter { limit: usize::MAX, ..Default::default() }).await.expect("list");
    assert_eq!(all.len(), count);
    let newest = store.list(&ListFilter { limit: 5, ..Default::default() }).await.expect("list");
    assert_eq!(newest, all[..5], "a limited list is the head of the full one");
    let in_flight = ListFilter { state: Some(ClaimState::InFlight), limit: usize::MAX, ..Default::default() };
    assert_eq!(store.list(&in_flight).await.expect("list").len(), count.div_ceil(3));

    let purged = store.purge(SystemTime::now() + Duration::from_secs(1)).await.expect("purge");
    assert_eq!(purged as usize, count - count.div_ceil(3));
    let left = store.list(&ListFilter { limit: usize::MAX, ..Default::default() }).await.expect("list");
    assert!(left.iter().all(|record| record.state == ClaimState::InFlight), "only in-flight claims stay");
    assert_eq!(left.len(), count.div_ceil(3));
}
