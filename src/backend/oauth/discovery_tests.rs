//! Tests of `backend::oauth::discovery`.

use serde_json::json;

use super::*;

fn url(text: &str) -> Url {
    Url::parse(text).expect("url")
}

fn strings_of(urls: Vec<Url>) -> Vec<String> {
    urls.into_iter().map(String::from).collect()
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("object")
}

#[test]
fn prm_locations_follow_the_spec_order() {
    let backend = url("http://localhost:3000/mcp");
    // metadata-default and metadata-var3: the challenge's URL first (var3's is a custom path).
    assert_eq!(
        strings_of(resource_metadata_urls(&backend, Some("http://localhost:3000/custom/metadata/location.json"))),
        [
            "http://localhost:3000/custom/metadata/location.json",
            "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
            "http://localhost:3000/.well-known/oauth-protected-resource",
        ]
    );
    // metadata-var1 and var2: no challenge URL, path-inserted before the root.
    assert_eq!(
        strings_of(resource_metadata_urls(&backend, None)),
        [
            "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
            "http://localhost:3000/.well-known/oauth-protected-resource",
        ]
    );
    let trailing = url("https://api.example.com/v1/mcp/?x=1");
    assert_eq!(
        strings_of(resource_metadata_urls(&trailing, Some("not a url"))),
        [
            "https://api.example.com/.well-known/oauth-protected-resource/v1/mcp",
            "https://api.example.com/.well-known/oauth-protected-resource",
        ]
    );
    assert_eq!(
        strings_of(resource_metadata_urls(&url("https://api.example.com/"), None)),
        ["https://api.example.com/.well-known/oauth-protected-resource"]
    );
}

#[test]
fn server_metadata_locations_follow_the_spec_order() {
    // metadata-default and var1: an issuer without a path, RFC 8414 then OIDC.
    assert_eq!(
        strings_of(server_metadata_urls(&url("http://localhost:4000"))),
        [
            "http://localhost:4000/.well-known/oauth-authorization-server",
            "http://localhost:4000/.well-known/openid-configuration",
        ]
    );
    // var2 (RFC 8414 path-inserted) and var3 (OIDC path-appended): never the root forms.
    assert_eq!(
        strings_of(server_metadata_urls(&url("http://localhost:4000/tenant1/"))),
        [
            "http://localhost:4000/.well-known/oauth-authorization-server/tenant1",
            "http://localhost:4000/.well-known/openid-configuration/tenant1",
            "http://localhost:4000/tenant1/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn prm_resource_must_name_the_backend() {
    let backend = url("http://localhost:3000/mcp");
    let at = url("http://localhost:3000/.well-known/oauth-protected-resource");
    let document = |resource: &str| object(json!({"resource": resource, "authorization_servers": ["http://as"]}));
    for good in
        ["http://localhost:3000/mcp", "http://localhost:3000", "http://localhost:3000/", "http://localhost:3000/mcp/"]
    {
        let parsed = parse_resource_metadata(&document(good), &backend, &at).expect(good);
        assert_eq!((parsed.resource.as_str(), parsed.authorization_servers.len()), (good, 1));
    }
    for bad in [
        "http://localhost:3001/mcp",
        "https://localhost:3000/mcp",
        "http://localhost:3000/mc",
        "http://localhost:3000/mcp/x",
        "http://evil/mcp",
    ] {
        let error = parse_resource_metadata(&document(bad), &backend, &at).expect_err(bad).to_string();
        assert!(error.contains("not the backend's URL"), "{error}");
    }
    let scoped = object(json!({"resource": "http://localhost:3000/mcp", "scopes_supported": ["a", "b"]}));
    assert_eq!(
        parse_resource_metadata(&scoped, &backend, &at).expect("valid").scopes_supported,
        Some(vec!["a".into(), "b".into()])
    );
    for (broken, expected) in [
        (json!({}), "`resource` is missing"),
        (json!({"resource": 5}), "`resource` is not a string"),
        (json!({"resource": "http://localhost:3000/mcp", "authorization_servers": "x"}), "not an array"),
        (json!({"resource": "http://localhost:3000/mcp", "scopes_supported": [1]}), "non-string"),
    ] {
        let error = parse_resource_metadata(&object(broken), &backend, &at).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn server_metadata_is_checked() {
    let at = url("http://localhost:4000/.well-known/oauth-authorization-server/tenant1");
    let full = object(json!({
        "issuer": "http://localhost:4000/tenant1",
        "authorization_endpoint": "http://localhost:4000/tenant1/authorize",
        "token_endpoint": "http://localhost:4000/tenant1/token",
        "registration_endpoint": "http://localhost:4000/tenant1/register",
        "code_challenge_methods_supported": ["plain", "S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
    }));
    let metadata = parse_server_metadata(&full, "http://localhost:4000/tenant1", &at).expect("valid");
    assert!(metadata.supports_s256() && metadata.client_id_metadata_document_supported);
    assert!(metadata.authorization_response_iss_parameter_supported);
    assert_eq!(metadata.token_endpoint.as_str(), "http://localhost:4000/tenant1/token");
    assert_eq!(metadata.token_endpoint_auth_methods_supported, Some(vec!["client_secret_post".to_owned()]));
    assert_eq!(metadata.token_endpoint_auth_signing_alg_values_supported, Some(vec!["ES256".to_owned()]));
    assert_eq!(metadata.scopes_supported, None);

    let mismatch = parse_server_metadata(&full, "http://localhost:4000/other", &at).expect_err("mismatch");
    assert!(matches!(mismatch, OAuthError::IssuerMismatch { .. }), "{mismatch}");
    assert!(mismatch.to_string().contains("names issuer \"http://localhost:4000/tenant1\""), "{mismatch}");
    let bare = object(json!({"issuer": "http://a", "token_endpoint": "http://a/token"}));
    let minimal = parse_server_metadata(&bare, "http://a/", &at).expect("a trailing slash is the same issuer");
    assert!(!minimal.supports_s256() && !minimal.client_id_metadata_document_supported);
    assert!(!minimal.authorization_response_iss_parameter_supported);
    assert_eq!(minimal.issuer, "http://a", "the issuer is kept as the document spells it (RFC 9207 compares it)");
    assert_eq!(minimal.token_endpoint_auth_signing_alg_values_supported, None);
    for (broken, expected) in [
        (json!({"token_endpoint": "http://a/t"}), "`issuer` is missing"),
        (json!({"issuer": "http://a"}), "`token_endpoint` is missing"),
        (
            json!({"issuer": "http://a", "token_endpoint": "ftp://a/t"}),
            "`token_endpoint`: \"ftp://a/t\" is not an http",
        ),
        (
            json!({"issuer": "http://a", "token_endpoint": "http://a/t", "code_challenge_methods_supported": 1}),
            "not an array",
        ),
    ] {
        let error = parse_server_metadata(&object(broken), "http://a", &at).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
}
