//! Tests of security requirements: which credential each operation's request carries, where, and the refusals at
//! load.

use serde_json::{Value, json};

use super::*;
use crate::backend::openapi::Selection;

/// A document with every kind of scheme and an operation per requirement shape.
fn document() -> Value {
    let operation = |id: &str, security: Option<Value>| {
        let mut operation = json!({"operationId": id});
        if let Some(security) = security {
            operation["security"] = security;
        }
        operation
    };
    let document = json!({
        "openapi": "3.0.3",
        "security": [{"key_header": []}],
        "components": {"securitySchemes": {
            "key_header": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            "key_query": {"type": "apiKey", "in": "query", "name": "api key"},
            "key_cookie": {"type": "apiKey", "in": "cookie", "name": "sid"},
            "bearer": {"type": "http", "scheme": "Bearer"},
            "basic": {"type": "http", "scheme": "basic"},
            "oauth": {"type": "oauth2", "flows": {}},
            "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://example.com"},
            "tls": {"type": "mutualTLS"},
            "digest": {"type": "http", "scheme": "digest"}
        }},
        "paths": {
            "/inherited": {"get": operation("inherited", None)},
            "/public": {"get": operation("public", Some(json!([])))},
            "/query": {"get": operation("query", Some(json!([{"key_query": []}])))},
            "/either": {"get": operation("either", Some(json!([{"oauth": ["read"]}, {"key_cookie": []}])))},
            "/optional": {"get": operation("optional", Some(json!([{}, {"bearer": []}])))},
            "/basic": {"get": operation("basic", Some(json!([{"basic": []}])))},
            "/both": {"get": operation("both", Some(json!([{"key_query": [], "oidc": []}])))}
        }
    });
    document
}

fn secret(text: &str) -> Secret<HeaderValue> {
    Secret::new(HeaderValue::from_str(text).unwrap())
}

fn scheme_credential(name: &str, oauth: bool) -> Offer {
    Offer { credential: Some((CredentialPlace::Scheme(name.into()), secret("s3cret"))), oauth }
}

/// The document's operations named `names` (and their schemes).
fn only(names: &[&str]) -> Api {
    let allow = names.iter().map(|name| crate::glob::Glob::new(name).unwrap()).collect();
    let deny = match names.is_empty() {
        true => vec![crate::glob::Glob::new("*").unwrap()],
        false => Vec::new(),
    };
    Api::compile(&document(), &Selection { allow, deny }).unwrap()
}

/// The parts a call of `name` gets under `offer`: target, headers, and whether the OAuth token goes along.
fn placed(api: &Api, offer: Offer, name: &str) -> (String, Vec<(String, String)>, bool) {
    let access = Access::new(api, offer).unwrap();
    let operation = api.operations.iter().find(|operation| operation.name == name).unwrap();
    let plan = access.plan(operation);
    let mut parts = Parts { target: "/p?a=1".into(), ..Parts::default() };
    access.place(plan, &mut parts);
    let headers = parts.headers.iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned())).collect();
    (parts.target, headers, plan.oauth)
}

#[test]
fn a_scheme_credential_goes_where_its_scheme_says() {
    let query = placed(&only(&["query", "public"]), scheme_credential("key_query", false), "query");
    assert_eq!(query, ("/p?a=1&api%20key=s3cret".into(), vec![], false));
    let public = placed(&only(&["query", "public"]), scheme_credential("key_query", false), "public");
    assert_eq!(public, ("/p?a=1".into(), vec![], false), "security: [] carries nothing");
    let cookie = placed(&only(&["either"]), scheme_credential("key_cookie", false), "either");
    assert_eq!(cookie.1, [("cookie".into(), "sid=s3cret".into())], "the second alternative, which is filled");
    let basic = placed(&only(&["basic"]), scheme_credential("basic", false), "basic");
    assert_eq!(basic.1, [("authorization".into(), "Basic czNjcmV0".into())]);
    let bearer = placed(&only(&["optional"]), scheme_credential("bearer", false), "optional");
    assert_eq!(bearer.1, [("authorization".into(), "Bearer s3cret".into())], "a filled alternative before `{{}}`");
    let header = placed(&only(&["inherited"]), scheme_credential("key_header", false), "inherited");
    assert_eq!(header.1, [("x-api-key".into(), "s3cret".into())], "the document's requirement, inherited");
}

#[test]
fn oauth_fills_bearer_schemes_and_joins_a_credential() {
    let either = placed(&only(&["either", "optional"]), Offer { credential: None, oauth: true }, "either");
    assert_eq!(either, ("/p?a=1".into(), vec![], true));
    let both = placed(&only(&["both"]), scheme_credential("key_query", true), "both");
    assert_eq!(both, ("/p?a=1&api%20key=s3cret".into(), vec![], true), "an API key in the query and a token");
    let anonymous = placed(&only(&["optional"]), Offer { credential: None, oauth: false }, "optional");
    assert_eq!(anonymous, ("/p?a=1".into(), vec![], false), "`{{}}`: nothing is needed");
}

#[test]
fn a_header_credential_fills_the_scheme_of_its_header_as_configured() {
    let configured = |header: &str, value: &str| Offer {
        credential: Some((CredentialPlace::Header(HeaderName::from_bytes(header.as_bytes()).unwrap()), secret(value))),
        oauth: false,
    };
    let header = placed(&only(&["inherited", "public"]), configured("x-api-key", "k"), "inherited");
    assert_eq!(header.1, [("x-api-key".into(), "k".into())]);
    let bearer = placed(&only(&["optional"]), configured("authorization", "Token t"), "optional");
    assert_eq!(bearer.1, [("authorization".into(), "Token t".into())], "sent as configured");
    let error = Access::new(&only(&["query"]), configured("x-api-key", "k")).unwrap_err();
    assert_eq!(error.pointer, "/paths/~1query/get/security");
    assert!(error.problem.contains("operation `query` requires `key_query` (apiKey in query parameter `api key`)"));
}

#[test]
fn a_document_without_requirements_gets_the_credential_as_configured() {
    let document = json!({"openapi": "3.1.0", "paths": {"/a": {"post": {"operationId": "a"}}}});
    let api = Api::compile(&document, &Selection::default()).unwrap();
    let header =
        Offer { credential: Some((CredentialPlace::Header(header::AUTHORIZATION), secret("Bearer t"))), oauth: false };
    assert_eq!(placed(&api, header, "a").1, [("authorization".into(), "Bearer t".into())]);
    assert!(placed(&api, Offer { credential: None, oauth: true }, "a").2, "and the OAuth token");
}

#[test]
fn what_the_configuration_cannot_fill_is_refused_at_load_with_its_pointer() {
    let refused = |api: &Api, offer: Offer| Access::new(api, offer).unwrap_err();
    let missing = refused(&only(&[]), scheme_credential("nope", false));
    assert_eq!(missing.pointer, "/components/securitySchemes");
    assert!(missing.problem.contains("`credential.scheme` names `nope`, which the document does not define"));
    assert!(missing.problem.contains("`key_header`, `key_query`"), "{missing}");
    let tls = refused(&only(&[]), scheme_credential("tls", false));
    assert_eq!(tls.pointer, "/components/securitySchemes/tls");
    let digest = refused(&only(&[]), scheme_credential("digest", false));
    assert!(digest.problem.contains("only bearer and basic"), "{digest}");
    let clash = refused(&only(&[]), scheme_credential("bearer", true));
    assert!(clash.problem.contains("where the tokens of `[backends.oauth]` go"), "{clash}");
    let unfilled = refused(&only(&["either"]), Offer { credential: None, oauth: false });
    assert_eq!(unfilled.pointer, "/paths/~1either/get/security");
    let expected = "operation `either` requires one of `oauth` (oauth2: a bearer token), or `key_cookie` (apiKey in \
                    cookie `sid`), and the backend's configuration fills none";
    assert!(unfilled.problem.starts_with(expected), "{unfilled}");
    assert!(unfilled.problem.contains("operations = { deny = [\"either\"] }"), "{unfilled}");
    let document = json!({"openapi": "3.1.0", "security": {"a": []}, "paths": {}});
    let malformed = Api::compile(&document, &Selection::default()).unwrap_err();
    assert_eq!(malformed.pointer, "/security");
}
