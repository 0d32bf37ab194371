//! Tests of `backend::mcp_client::era`: probe verdicts, version choice, the remembered eras.

use serde_json::json;

use super::*;

fn modern(verdict: Verdict) -> ModernServer {
    match verdict {
        Verdict::Modern(server) => server,
        other => panic!("expected a modern verdict, got {other:?}"),
    }
}

#[test]
fn a_discover_result_naming_a_modern_version_is_modern() {
    let result = json!({"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {"tools": {}}});
    let server = modern(verdict_of_result(&result, LATEST_MODERN_VERSION));
    assert_eq!(server.version, "2026-07-28");
    assert_eq!(*server.capabilities, json!({"tools": {}}));
}

#[test]
fn a_discover_result_naming_only_older_versions_is_legacy() {
    let result = json!({"supportedVersions": ["2025-11-25"], "capabilities": {}});
    assert!(matches!(verdict_of_result(&result, LATEST_MODERN_VERSION), Verdict::Legacy));
    assert!(matches!(verdict_of_result(&json!({}), LATEST_MODERN_VERSION), Verdict::Legacy));
}

#[test]
fn modern_errors_prove_a_modern_backend_and_others_fall_back() {
    let sent = LATEST_MODERN_VERSION;
    let method_not_found = |status| verdict_of_error(-32601, "no", None, status, sent, false);
    assert_eq!(modern(method_not_found(Some(404))).version, sent, "404 + -32601 is a modern answer");
    assert!(matches!(method_not_found(Some(200)), Verdict::Legacy), "-32601 over 200 is a 2025 server");
    assert!(matches!(method_not_found(None), Verdict::Legacy), "-32601 over stdio is a 2025 server");
    for code in [-32020, -32021] {
        let verdict = verdict_of_error(code, "bad headers", None, Some(400), sent, false);
        assert!(matches!(verdict, Verdict::Refused(ref why) if why.contains("bad headers")), "{verdict:?}");
    }
    for code in [-32600, -32602, -32000, -32001] {
        assert!(matches!(verdict_of_error(code, "x", None, Some(400), sent, false), Verdict::Legacy), "{code}");
    }
}

#[test]
fn unsupported_version_falls_back_to_the_handshake_when_a_2025_version_is_shared() {
    let data = json!({"supported": ["2025-06-18"], "requested": "2026-07-28"});
    let verdict = verdict_of_error(-32022, "unsupported", Some(&data), Some(400), LATEST_MODERN_VERSION, false);
    assert!(matches!(verdict, Verdict::Legacy), "{verdict:?}");
}

#[test]
fn unsupported_version_with_nothing_in_common_is_refused_naming_both_sides() {
    let data = json!({"supported": ["2099-01-01"], "requested": "2026-07-28"});
    let verdict = verdict_of_error(-32022, "unsupported", Some(&data), Some(400), LATEST_MODERN_VERSION, false);
    let Verdict::Refused(why) = verdict else { panic!("{verdict:?}") };
    assert!(why.contains("2099-01-01") && why.contains("2026-07-28"), "{why}");
}

#[test]
fn a_shared_modern_version_other_than_the_refused_one_is_chosen_newest_first() {
    let ours = ["2027-03-01", "2026-07-28"];
    assert_eq!(choose_version(&["2026-07-28", "2025-11-25"], "2027-03-01", &ours), Some("2026-07-28"));
    assert_eq!(choose_version(&["2027-03-01", "2026-07-28"], "2099-01-01", &ours), Some("2027-03-01"));
    assert_eq!(choose_version(&["2027-03-01"], "2027-03-01", &ours), None, "never the version just refused");
    assert_eq!(choose_version(&[], "2026-07-28", &ours), None);
}

#[test]
fn a_forgotten_or_replaced_verdict_is_no_longer_current() {
    let eras = Eras::default();
    let backend: Arc<str> = "b".into();
    let first = eras.remember(&backend, Known::Legacy);
    assert!(eras.is_current("b", first));
    let second = eras.remember(&backend, Known::Legacy);
    assert!(!eras.is_current("b", first), "a newer verdict replaces the older");
    eras.forget("b", first);
    assert!(eras.is_current("b", second), "forgetting an old epoch keeps the newer verdict");
    eras.forget("b", second);
    assert!(eras.get("b").is_none());
}
