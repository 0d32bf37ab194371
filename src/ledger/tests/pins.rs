//! The pin rules every store must have (`ledger/pins.rs`): first trust once, offers recorded and withdrawn,
//! approvals and rejections only of the offer seen, the revision growing with every write, and a second instance
//! seeing it all.

use super::Harness;
use crate::ledger::{LedgerStore, PinKey, PinOffer, PinRow, PinState};

fn key(name: &str) -> PinKey {
    PinKey { backend: "docs".into(), kind: "tool".into(), name: name.into() }
}

fn trusted(name: &str, digest: &str) -> PinRow {
    PinRow {
        key: key(name),
        digest: digest.into(),
        definition: format!("{{\"d\":\"{digest}\"}}"),
        state: PinState::Pinned,
        offered_digest: None,
        offered: None,
        first_seen: 100,
        approved_by: None,
        approved_at: None,
    }
}

fn offer(name: &str, digest: &str, quarantine: bool) -> PinOffer {
    PinOffer { key: key(name), digest: digest.into(), definition: format!("{{\"d\":\"{digest}\"}}"), quarantine }
}

async fn row(store: &LedgerStore, name: &str) -> PinRow {
    let rows = store.pins(Some("docs")).await.expect("pins");
    rows.into_iter().find(|row| row.key.name == name).expect("a pin")
}

pub(super) async fn pins_are_trusted_once_then_offers_quarantine_until_approved(h: &Harness) {
    let store = &h.store;
    let start = store.pins_revision().await.expect("revision");
    assert!(store.trust_pin(&trusted("search", "a")).await.expect("trust"));
    assert!(!store.trust_pin(&trusted("search", "b")).await.expect("trust again"), "first trust wins");
    assert_eq!(row(store, "search").await, trusted("search", "a"));
    let after_trust = store.pins_revision().await.expect("revision");
    assert!(after_trust > start, "{after_trust} > {start}");

    assert!(!store.offer_pin(&offer("search", "a", true)).await.expect("same"), "the pinned definition is no offer");
    assert!(store.offer_pin(&offer("search", "b", true)).await.expect("offer"));
    assert!(!store.offer_pin(&offer("search", "b", true)).await.expect("again"), "an offer is recorded once");
    let quarantined = row(store, "search").await;
    assert_eq!(quarantined.state, PinState::Quarantined);
    assert_eq!((quarantined.digest.as_str(), quarantined.offered_digest.as_deref()), ("a", Some("b")));
    assert_eq!(quarantined.offered.as_deref(), Some("{\"d\":\"b\"}"));
    assert!(store.pins_revision().await.expect("revision") > after_trust);

    assert!(!store.approve_pin(&key("search"), "c", "op", 200).await.expect("approve"), "not the offer seen");
    assert!(store.approve_pin(&key("search"), "b", "op", 200).await.expect("approve"));
    let approved = row(store, "search").await;
    assert_eq!(
        (approved.state, approved.digest.as_str(), approved.definition.as_str()),
        (PinState::Pinned, "b", "{\"d\":\"b\"}")
    );
    assert_eq!((approved.approved_by.as_deref(), approved.approved_at), (Some("op"), Some(200)));
    assert_eq!((approved.offered_digest, approved.offered), (None, None));
    assert!(!store.approve_pin(&key("search"), "b", "op", 201).await.expect("twice"), "nothing offered any more");
}

pub(super) async fn warn_offers_keep_serving_and_the_pinned_definition_withdraws_an_offer(h: &Harness) {
    let store = &h.store;
    store.trust_pin(&trusted("read", "a")).await.expect("trust");
    assert!(store.offer_pin(&offer("read", "b", false)).await.expect("offer"));
    let warned = row(store, "read").await;
    assert_eq!((warned.state, warned.offered_digest.as_deref()), (PinState::Pinned, Some("b")));
    assert!(store.reject_pin(&key("read"), "b").await.expect("reject"));
    assert_eq!(row(store, "read").await.state, PinState::Quarantined, "a rejection quarantines under warn too");
    assert!(!store.reject_pin(&key("read"), "z").await.expect("reject"), "not the offer seen");
    assert!(store.offer_pin(&offer("read", "a", true)).await.expect("back"), "the backend went back");
    let back = row(store, "read").await;
    assert_eq!((back.state, back.offered_digest), (PinState::Pinned, None));

    let mut new = trusted("fresh", "");
    new.definition = String::new();
    new.state = PinState::Quarantined;
    (new.offered_digest, new.offered) = (Some("n".into()), Some("{}".into()));
    assert!(store.trust_pin(&new).await.expect("held"));
    assert!(store.approve_pin(&key("fresh"), "n", "op", 300).await.expect("approve"));
    assert_eq!(row(store, "fresh").await.digest, "n");
    assert_eq!(store.pins(Some("other")).await.expect("pins"), Vec::new());
    assert_eq!(store.pins(None).await.expect("pins").len(), 2);
}

pub(super) async fn pins_are_seen_by_a_second_instance(h: &Harness) {
    h.store.trust_pin(&trusted("search", "a")).await.expect("trust");
    let second = h.second().await;
    let before = second.pins_revision().await.expect("revision");
    assert_eq!(second.pins(None).await.expect("pins"), vec![trusted("search", "a")]);
    h.store.offer_pin(&offer("search", "b", true)).await.expect("offer");
    assert!(second.pins_revision().await.expect("revision") > before, "the other instance sees the write");
    assert!(second.approve_pin(&key("search"), "b", "op", 5).await.expect("approve"));
    assert_eq!(row(&h.store, "search").await.digest, "b");
}
