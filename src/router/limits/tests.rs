//! Tests of admitting requests against several limits: who is counted, all or nothing, permits, repeats, reloads.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::*;
use crate::auth::{Principal, Subject};
use crate::glob::Glob;

fn spec(label: &str) -> LimitSpec {
    LimitSpec {
        label: label.into(),
        principals: vec![Subject::Anyone],
        calls: Calls::Tools(vec![Glob::new("*").unwrap()]),
        rate: None,
        quota: None,
        concurrency: None,
        repeat: None,
    }
}

fn request<'a>(principal: &'a Principal, tool: &'a str) -> Request<'a> {
    Request { principal, key: &principal.name, tool: Some((tool, "docs")) }
}

fn paused(specs: Vec<LimitSpec>) -> Limits {
    let limits = Limits::new(specs);
    limits.clock().pause_at(UNIX_EPOCH + Duration::from_secs(1_000_000));
    limits
}

fn alice() -> Principal {
    Principal { name: "alice".into(), groups: vec!["ops".into()] }
}

#[tokio::test]
async fn no_limit_admits_everything_and_holds_nothing() {
    let held = Limits::default().admit(&request(&alice(), "docs__search"), None).await.expect("admitted");
    assert!(held.taken.is_empty() && held.clock.is_none());
}

#[tokio::test]
async fn a_refusal_by_one_limit_gives_back_what_the_others_took() {
    let quota = LimitSpec { quota: Some(Quota { calls: 2, period: Duration::from_secs(3_600) }), ..spec("q") };
    let rate = LimitSpec { rate: Some(Rate { calls: 1, per: Duration::from_secs(1), burst: 1 }), ..spec("r") };
    let limits = paused(vec![quota, rate]);
    let alice = alice();
    drop(limits.admit(&request(&alice, "a"), None).await.expect("first"));
    let refusal = limits.admit(&request(&alice, "a"), None).await.expect_err("the rate refuses");
    assert_eq!((&*refusal.label, refusal.violated, refusal.retry_after), ("r", Violated::Rate, 1));
    assert!(refusal.to_string().contains("limit `r`, which allows 1 calls per 1s"), "{refusal}");
    limits.clock().advance(Duration::from_secs(1));
    limits.admit(&request(&alice, "a"), None).await.expect("the quota's second call was given back");
}

#[tokio::test]
async fn limits_count_only_their_principals_and_calls_each_on_its_own() {
    let only_ops = LimitSpec {
        principals: vec![Subject::Group("ops".into())],
        calls: Calls::Backends(vec!["docs".into()]),
        concurrency: Some(1),
        ..spec("ops")
    };
    let limits = paused(vec![only_ops]);
    let (alice, bob) = (alice(), Principal { name: "bob".into(), groups: vec!["ops".into()] });
    let held = limits.admit(&request(&alice, "a"), None).await.expect("alice's one call");
    limits.admit(&request(&alice, "b"), None).await.expect_err("alice's second at once");
    let _bob = limits.admit(&request(&bob, "a"), None).await.expect("bob counts on his own");
    let eve = Principal { name: "eve".into(), groups: vec![] };
    let _eve = limits.admit(&request(&eve, "a"), None).await.expect("not in the group");
    let _tools_list =
        limits.admit(&Request { tool: None, ..request(&alice, "a") }, None).await.expect("not a tool call");
    drop(held);
    limits.admit(&request(&alice, "b"), None).await.expect("the permit came back when the call ended");
}

#[tokio::test]
async fn the_loop_guard_counts_calls_that_ran_with_the_same_arguments() {
    let repeat = LimitSpec { repeat: Some(Repeat { times: 2, window: Duration::from_secs(60) }), ..spec("loop") };
    let limits = paused(vec![repeat]);
    let alice = alice();
    let same = json!({"q": 1, "page": 2});
    limits.admit(&request(&alice, "a"), Some(&same)).await.expect("the first").ran();
    for _ in 0..3 {
        drop(limits.admit(&request(&alice, "a"), Some(&same)).await.expect("answered from the ledger: does not count"));
    }
    limits.admit(&request(&alice, "a"), Some(&same)).await.expect("the second").ran();
    let reordered = json!({"page": 2, "q": 1});
    let refusal = limits.admit(&request(&alice, "a"), Some(&reordered)).await.expect_err("the same arguments");
    assert_eq!((refusal.violated, refusal.retry_after), (Violated::Repeat, 60));
    limits.admit(&request(&alice, "a"), Some(&json!({"q": 2}))).await.expect("other arguments");
    limits.admit(&request(&alice, "b"), Some(&same)).await.expect("another tool");
}

#[tokio::test]
async fn a_reload_keeps_the_counters_of_unchanged_limits_only() {
    let rate =
        |calls| LimitSpec { rate: Some(Rate { calls, per: Duration::from_secs(60), burst: calls }), ..spec("r") };
    let kept = LimitSpec { quota: Some(Quota { calls: 1, period: Duration::from_secs(3_600) }), ..spec("q") };
    let running = paused(vec![rate(1), kept.clone()]);
    let alice = alice();
    drop(running.admit(&request(&alice, "a"), None).await.expect("first"));
    let reloaded = Limits::new(vec![rate(2), kept]).carried_from(&running);
    assert!(Arc::ptr_eq(reloaded.clock(), running.clock()), "the clock is kept");
    let refusal = reloaded.admit(&request(&alice, "a"), None).await.expect_err("the unchanged quota remembers");
    assert_eq!(&*refusal.label, "q");
    let rate_only = Limits::new(vec![rate(2)]).carried_from(&reloaded);
    rate_only.admit(&request(&alice, "a"), None).await.expect("the changed rate starts afresh");
}

#[tokio::test]
async fn usage_lists_each_busy_principal_of_each_limit() {
    let both = LimitSpec {
        rate: Some(Rate { calls: 5, per: Duration::from_secs(1), burst: 5 }),
        quota: Some(Quota { calls: 10, period: Duration::from_secs(3_600) }),
        concurrency: Some(2),
        ..spec("both")
    };
    let limits = paused(vec![both]);
    let alice = alice();
    let _running = limits.admit(&request(&alice, "a"), None).await.expect("admitted");
    drop(limits.admit(&request(&alice, "a"), None).await.expect("admitted"));
    let rows = limits.usage().await.expect("local counters");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!((row.limit.as_str(), row.principal.as_str()), ("both", "alice"));
    assert_eq!((row.tokens, row.burst, row.used, row.quota), (Some(3), Some(5), Some(2), Some(10)));
    assert_eq!((row.in_flight, row.concurrency), (Some(1), Some(2)));
}

/// Two gateways sharing one store's counters (the memory store stands in for PostgreSQL here).
fn replicas(specs: &[LimitSpec]) -> [Limits; 2] {
    let store = crate::ledger::LedgerStore::memory();
    [0, 1].map(|_| {
        let mut limits = paused(specs.to_vec());
        limits.share_in(store.clone());
        limits
    })
}

#[tokio::test]
async fn replicas_lease_from_one_bucket_and_return_what_they_did_not_spend() {
    let rate = LimitSpec { rate: Some(Rate { calls: 8, per: Duration::from_secs(60), burst: 8 }), ..spec("fleet") };
    let [a, b] = replicas(&[rate]);
    let alice = alice();
    let mut admitted = 0;
    for _ in 0..10 {
        for replica in [&a, &b] {
            admitted += usize::from(replica.admit(&request(&alice, "t"), None).await.is_ok());
        }
    }
    assert_eq!(admitted, 8, "the fleet spends the one shared burst");
    let refusal = a.admit(&request(&alice, "t"), None).await.expect_err("empty");
    assert_eq!((refusal.violated, refusal.retry_after), (Violated::Rate, 8), "a token every 7.5 s");

    let [a, b] = replicas(&[LimitSpec {
        rate: Some(Rate { calls: 4, per: Duration::from_secs(3_600), burst: 4 }),
        ..spec("slow")
    }]);
    drop(a.admit(&request(&alice, "t"), None).await.expect("a leases its batch of one"));
    for _ in 0..3 {
        drop(b.admit(&request(&alice, "t"), None).await.expect("b takes the rest, one lease at a time"));
    }
    b.admit(&request(&alice, "t"), None).await.expect_err("the bucket is empty");
    let quota = LimitSpec { quota: Some(Quota { calls: 300, period: Duration::from_secs(3_600) }), ..spec("q") };
    let [a, b] = replicas(&[quota]);
    drop(a.admit(&request(&alice, "t"), None).await.expect("a leases 3 calls and spends one"));
    a.clock().advance(shared::LEASE_FOR);
    drop(a.admit(&request(&alice, "t"), None).await.expect("the expired lease goes back, a new one comes"));
    let used = b.usage().await.expect("the shared counters");
    assert_eq!(used[0].used, Some(4), "the first call, then a fresh batch of three: the two left over came back");
}
