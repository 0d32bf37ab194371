//! Tests of the sealed session id: round trips, tampering, malformed ids, expiry and size bounds.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use super::super::key::SECRET_LEN;
use super::*;

type HmacSha256 = Hmac<Sha256>;

const NOW: u64 = 1_760_000_000;
const TTL: Duration = Duration::from_secs(3600);

fn sealer(key_byte: u8) -> Sealer {
    Sealer::new(SessionSecret::from_bytes([key_byte; SECRET_LEN]), TTL)
}

fn session() -> AgentSession {
    AgentSession {
        id: SessionRef::random().unwrap(),
        principal: "alice@example.com".to_owned(),
        version: SUPPORTED_PROTOCOL_VERSIONS[1],
        issued_at: NOW,
        capabilities: json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}}),
    }
}

/// Replaces the character at `index` with another character of the base64url alphabet.
fn flip_char(token: &str, index: usize) -> String {
    let mut bytes = token.as_bytes().to_vec();
    bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[test]
fn round_trip_keeps_every_field() {
    let sealer = sealer(7);
    let original = session();
    let token = sealer.seal(&original).unwrap();
    assert_eq!(sealer.open(&token, NOW + 10).unwrap(), original);
}

#[test]
fn every_supported_version_round_trips() {
    let sealer = sealer(7);
    for version in SUPPORTED_PROTOCOL_VERSIONS {
        let original = AgentSession { version, ..session() };
        let token = sealer.seal(&original).unwrap();
        assert_eq!(sealer.open(&token, NOW).unwrap().version, version);
    }
}

#[test]
fn token_is_visible_ascii_and_bounded() {
    let token = sealer(7).seal(&session()).unwrap();
    assert!(token.bytes().all(|byte| (0x21..=0x7e).contains(&byte)), "{token}");
    assert!(token.len() <= MAX_TOKEN_LEN);
}

#[test]
fn two_sessions_get_different_ids() {
    let sealer = sealer(7);
    let first = sealer.seal(&session()).unwrap();
    let second = sealer.seal(&session()).unwrap();
    assert_ne!(first, second);
}

#[test]
fn tampered_payload_is_forged() {
    let sealer = sealer(7);
    let token = sealer.seal(&session()).unwrap();
    for index in [0, 5, token.find('.').unwrap() - 2] {
        assert_eq!(sealer.open(&flip_char(&token, index), NOW), Err(OpenError::Forged), "index {index}");
    }
}

#[test]
fn tampered_mac_is_forged() {
    let sealer = sealer(7);
    let token = sealer.seal(&session()).unwrap();
    let dot = token.find('.').unwrap();
    assert_eq!(sealer.open(&flip_char(&token, dot + 1), NOW), Err(OpenError::Forged));
}

#[test]
fn re_signed_principal_swap_is_forged() {
    // An attacker who rewrites the principal in the payload cannot produce the matching MAC.
    let sealer = sealer(7);
    let token = sealer.seal(&session()).unwrap();
    let (payload, mac) = token.split_once('.').unwrap();
    let mut bytes = URL_SAFE_NO_PAD.decode(payload).unwrap();
    let at = bytes.windows(5).position(|window| window == b"alice").unwrap();
    bytes[at..at + 5].copy_from_slice(b"mallo");
    let forged = format!("{}.{mac}", URL_SAFE_NO_PAD.encode(&bytes));
    assert_eq!(sealer.open(&forged, NOW), Err(OpenError::Forged));
}

#[test]
fn another_key_is_forged() {
    let token = sealer(7).seal(&session()).unwrap();
    assert_eq!(sealer(8).open(&token, NOW), Err(OpenError::Forged));
}

#[test]
fn padded_key_gives_the_plain_hmac() {
    let secret = [42u8; SECRET_LEN];
    let mut expected = <HmacSha256 as Mac>::new_from_slice(&secret).unwrap();
    expected.update(DOMAIN);
    for version in SUPPORTED_PROTOCOL_VERSIONS {
        expected.update(version.as_bytes());
        expected.update(b"\n");
    }
    expected.update(b"payload");
    let sealer = Sealer::new(SessionSecret::from_bytes(secret), TTL);
    let sealed = sealer.seal.seal(b"payload");
    let tag = URL_SAFE_NO_PAD.decode(sealed.split_once('.').unwrap().1).unwrap();
    assert_eq!(tag[..], expected.finalize().into_bytes()[..]);
}

#[test]
fn garbage_is_malformed() {
    let sealer = sealer(7);
    let token = sealer.seal(&session()).unwrap();
    let (payload, mac) = token.split_once('.').unwrap();
    let cases = [
        String::new(),
        "no-dot-at-all".to_owned(),
        token.replace('.', ""),
        ".".to_owned(),
        format!("{payload}.{mac}.{mac}"),
        format!("{payload}.{}", &mac[..TAG_TEXT_LEN - 1]),
        format!("{payload}=.{mac}"),
        format!("{payload}.{mac}="),
        format!("{payload} .{mac}"),
        format!("{}.{mac}", payload.replace(|_: char| true, "+")),
        "A".repeat(MAX_TOKEN_LEN + 1),
        format!("{}.{mac}", "A".repeat(MAX_TOKEN_LEN)),
    ];
    for case in cases {
        assert_eq!(sealer.open(&case, NOW), Err(OpenError::Malformed), "{case:.80}");
    }
}

#[test]
fn expires_after_ttl() {
    let sealer = sealer(7);
    let original = session();
    let token = sealer.seal(&original).unwrap();
    let last = original.issued_at + TTL.as_secs();
    assert_eq!(sealer.expires_at(&original), last);
    assert!(sealer.open(&token, last).is_ok());
    assert_eq!(sealer.open(&token, last + 1), Err(OpenError::Expired));
}

#[test]
fn expiry_does_not_overflow() {
    let sealer = sealer(7);
    let original = AgentSession { issued_at: u64::MAX - 1, ..session() };
    let token = sealer.seal(&original).unwrap();
    assert!(sealer.open(&token, u64::MAX).is_ok());
}

#[test]
fn session_is_bound_to_its_principal() {
    let sealer = sealer(7);
    let opened = sealer.open(&sealer.seal(&session()).unwrap(), NOW).unwrap();
    assert!(opened.belongs_to("alice@example.com"));
    assert!(!opened.belongs_to("mallory@example.com"));
    assert!(!opened.belongs_to("alice@example.co"));
    assert!(!opened.belongs_to(""));
}

#[test]
fn unsupported_version_is_not_sealed() {
    let original = AgentSession { version: "1999-01-01", ..session() };
    assert_eq!(sealer(7).seal(&original), Err(SealError::UnsupportedVersion { version: "1999-01-01" }));
}

#[test]
fn oversize_sessions_are_not_sealed() {
    let sealer = sealer(7);
    let big_capabilities =
        AgentSession { capabilities: json!({"experimental": "x".repeat(MAX_TOKEN_LEN)}), ..session() };
    assert!(matches!(sealer.seal(&big_capabilities), Err(SealError::TooLarge { .. })));
    let huge_principal = AgentSession { principal: "p".repeat(usize::from(u16::MAX) + 1), ..session() };
    assert!(matches!(sealer.seal(&huge_principal), Err(SealError::TooLarge { .. })));
}
