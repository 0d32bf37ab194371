//! Tests of `assertion.rs`: each supported key signs assertions its public half verifies, with the claims RFC 7523
//! asks for; unusable PEMs are refused saying what they are; keys are never printed.

use std::collections::HashSet;

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{DecodingKey, Validation};
use reqwest::Url;

use super::*;

const P256_1: &str = include_str!("../../../tests/fixtures/client-ec-p256-1.pem");
const P256_2: &str = include_str!("../../../tests/fixtures/client-ec-p256-2.pem");
const P384: &str = include_str!("../../../tests/fixtures/client-ec-p384.pem");
const RSA: &str = include_str!("../../../tests/fixtures/client-rsa.pem");
const ISSUER: &str = "https://login.example.com/tenant";

fn server(signing_algs: Option<&[&str]>) -> ServerMetadata {
    ServerMetadata {
        issuer: ISSUER.to_owned(),
        authorization_endpoint: None,
        token_endpoint: Url::parse("https://login.example.com/tenant/token").expect("url"),
        registration_endpoint: None,
        code_challenge_methods_supported: Vec::new(),
        token_endpoint_auth_methods_supported: Some(vec!["private_key_jwt".to_owned()]),
        token_endpoint_auth_signing_alg_values_supported: signing_algs
            .map(|algs| algs.iter().map(|alg| (*alg).to_owned()).collect()),
        scopes_supported: None,
        client_id_metadata_document_supported: false,
        authorization_response_iss_parameter_supported: false,
    }
}

/// The public half of `pem`, as an authorization server holding the client's JWK would have it.
fn public(pem: &str) -> (Algorithm, DecodingKey) {
    let key = SigningKey::from_pem(pem).expect("usable");
    let jwk = Jwk::from_encoding_key(&key.key, key.algorithm).expect("public part");
    (key.algorithm, DecodingKey::from_jwk(&jwk).expect("decoding key"))
}

fn verify(assertion: &str, public: &(Algorithm, DecodingKey)) -> Result<Value, jsonwebtoken::errors::Error> {
    let mut validation = Validation::new(public.0);
    validation.set_audience(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
    jsonwebtoken::decode::<Value>(assertion, &public.1, &validation).map(|data| data.claims)
}

#[test]
fn each_supported_key_gets_its_algorithm_and_signs_verifiable_assertions() {
    for (pem, algorithm) in [(P256_1, "ES256"), (P384, "ES384"), (RSA, "RS256")] {
        let key = Arc::new(SigningKey::from_pem(pem).expect(algorithm));
        assert_eq!(key.algorithm_name(), algorithm);
        let signer = AssertionSigner::for_server(Arc::clone(&key), &server(None)).expect("signer");
        let assertion = signer.assertion("gw-client").expect("signed");
        let header = jsonwebtoken::decode_header(&assertion).expect("header");
        assert_eq!(format!("{:?}", header.alg), algorithm);
        let claims = verify(&assertion, &public(pem)).expect("the public key verifies it");
        assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("gw-client"), Some("gw-client")));
        assert_eq!(claims["aud"], ISSUER, "one string: the issuer identifier");
        let (iat, exp) = (claims["iat"].as_u64().expect("iat"), claims["exp"].as_u64().expect("exp"));
        assert!(iat.abs_diff(unix_now()) <= 2, "issued now: {iat}");
        assert_eq!(exp - iat, ASSERTION_LIFETIME.as_secs());
    }
}

#[test]
fn every_assertion_has_its_own_jti_and_only_its_key_verifies_it() {
    let signer = AssertionSigner::for_server(Arc::new(SigningKey::from_pem(P256_1).expect("key")), &server(None))
        .expect("signer");
    let jtis: HashSet<String> = (0..5)
        .map(|_| verify(&signer.assertion("gw").expect("signed"), &public(P256_1)).expect("valid"))
        .map(|claims| claims["jti"].as_str().expect("jti").to_owned())
        .collect();
    assert_eq!(jtis.len(), 5);
    assert!(jtis.iter().all(|jti| jti.len() >= 32), "{jtis:?}");
    let assertion = signer.assertion("gw").expect("signed");
    assert!(verify(&assertion, &public(P256_2)).is_err(), "another key's public half refuses it");
}

#[test]
fn a_server_that_lists_other_algorithms_is_refused_by_name() {
    let key = Arc::new(SigningKey::from_pem(RSA).expect("key"));
    let error = AssertionSigner::for_server(Arc::clone(&key), &server(Some(&["ES256", "ES384"]))).expect_err("refused");
    let message = error.to_string();
    assert!(matches!(error, OAuthError::ClientAuthentication { .. }), "{error:?}");
    assert!(
        message.contains(ISSUER) && message.contains("ES256, ES384") && message.contains("signs RS256"),
        "{message}"
    );
    AssertionSigner::for_server(key, &server(Some(&["RS256"]))).expect("listed");
}

#[test]
fn unusable_pems_say_what_they_are_and_how_to_fix_them() {
    let fixture = |name: &str| std::fs::read_to_string(format!("tests/fixtures/{name}")).expect(name);
    // A well-formed PEM labelled PRIVATE KEY whose DER is not PKCS#8 (the SEC1 structure inside the EC PEM).
    let sec1 = fixture("client-ec-p256-sec1.pem");
    let relabelled = sec1.replace("EC PRIVATE KEY", "PRIVATE KEY");
    let cases = [
        ("hello".to_owned(), "not a PEM document"),
        ("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n".to_owned(), "not a PEM document"),
        (sec1, "labelled \"EC PRIVATE KEY\"; expected an unencrypted PKCS#8 private key"),
        (fixture("client-ec-p256-encrypted.pem"), "takes no passphrase"),
        (fixture("client-ec-p256-1.pub.pem"), "this is the public half"),
        (relabelled, "does not hold a PKCS#8 private key"),
        (fixture("client-ec-k256.pem"), "an EC key on curve secp256k1 (1.3.132.0.10)"),
        (fixture("client-ed25519.pem"), "key algorithm Ed25519 (1.3.101.112)"),
    ];
    for (pem, expected) in cases {
        let message = SigningKey::from_pem(&pem).expect_err(expected).to_string();
        assert!(message.contains(expected), "{expected}: {message}");
    }
    let sec1 = SigningKey::from_pem(&fixture("client-ec-p256-sec1.pem")).expect_err("sec1").to_string();
    assert!(sec1.contains("openssl pkcs8 -topk8 -nocrypt"), "{sec1}");
}

#[test]
fn keys_are_never_printed() {
    let key = SigningKey::from_pem(P256_1).expect("key");
    let printed = format!("{key:?}");
    assert_eq!(printed, "SigningKey(ES256, <redacted>)");
    let body_line = P256_1.lines().nth(1).expect("a base64 line");
    assert!(!printed.contains(body_line));
}
