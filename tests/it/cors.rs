//! Browser agents from other origins: the `OPTIONS` preflight of `/mcp`, `/mcp/<backend>` and the metadata
//! documents for loopback and listed origins, 403 for any other, the `Access-Control-*` headers of answers
//! (refusals included: a page must read a 401's `WWW-Authenticate`), `cors_credentials`, and a real page in
//! headless Chromium ([`browser`]).

mod browser;

use std::net::SocketAddr;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::json;

use crate::agent_auth::api_keys;
use crate::support::gateway::{Agent, Reply, TestGateway, backend_toml};

const LISTED: &str = "https://app.example.com";
const LOOPBACK_PAGE: &str = "http://localhost:6274";

/// A gateway in front of the demo backend that lists [`LISTED`] (plus `server_keys`), with `sections`.
async fn gateway(server_keys: &str, sections: &str) -> (TestGateway, tokio::task::JoinHandle<()>) {
    let (address, demo) = switchyard::demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let backends = backend_toml("demo", &format!("http://{address}/mcp"), "");
    let server = format!("allowed_origins = [{LISTED:?}]\n{server_keys}");
    (TestGateway::start_with(&server, sections, &backends).await, demo)
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers.get(name).map_or("", |value| value.to_str().unwrap())
}

async fn preflight(url: &str, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type, mcp-session-id, authorization, mcp-param-region")
        .send()
        .await
        .unwrap()
}

async fn initialize(url: &str, origin: Option<&str>) -> Reply {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}});
    let origin: Vec<(&str, &str)> = origin.map(|origin| ("origin", origin)).into_iter().collect();
    Agent::new(url.to_owned()).post_raw(message.to_string().into_bytes(), &origin).await
}

/// The headers every answer to an admitted origin carries.
fn assert_exposed(headers: &HeaderMap, origin: &str) {
    assert_eq!(header(headers, "access-control-allow-origin"), origin, "{headers:?}");
    assert!(headers.get_all("vary").iter().any(|vary| vary == "Origin"), "{headers:?}");
    let exposed = header(headers, "access-control-expose-headers");
    assert_eq!(exposed, "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate", "{headers:?}");
    assert!(headers.get("access-control-allow-credentials").is_none(), "off unless configured: {headers:?}");
}

#[tokio::test]
async fn every_route_kind_answers_the_preflight_of_loopback_and_listed_origins() {
    let (gateway, _demo) = gateway("", "").await;
    let routes = [
        ("/mcp", "GET, POST, DELETE, OPTIONS"),
        ("/mcp/demo", "GET, POST, DELETE, OPTIONS"),
        ("/.well-known/oauth-protected-resource", "GET, OPTIONS"),
        ("/.well-known/oauth-protected-resource/mcp", "GET, OPTIONS"),
    ];
    for (path, methods) in routes {
        for origin in [LOOPBACK_PAGE, LISTED, "http://127.0.0.1:9"] {
            let answer = preflight(&format!("{}{path}", gateway.base), origin).await;
            assert_eq!(answer.status(), StatusCode::NO_CONTENT, "{path} from {origin}");
            let headers = answer.headers();
            assert_exposed(headers, origin);
            assert_eq!(header(headers, "access-control-allow-methods"), methods, "{path}");
            let allowed = header(headers, "access-control-allow-headers").to_ascii_lowercase();
            for needed in [
                "mcp-session-id",
                "mcp-protocol-version",
                "last-event-id",
                "content-type",
                "accept",
                "authorization",
                "mcp-method",
                "mcp-name",
                "idempotency-key",
                "mcp-param-region",
            ] {
                assert!(allowed.split(", ").any(|name| name == needed), "{needed} on {path}: {allowed}");
            }
            assert_eq!(header(headers, "access-control-max-age"), "600");
        }
    }
    let plain = reqwest::Client::new().request(reqwest::Method::OPTIONS, gateway.mcp()).send().await.unwrap();
    assert_eq!(plain.status(), StatusCode::NO_CONTENT, "an OPTIONS without Origin is not a preflight");
    assert_eq!(header(plain.headers(), "allow"), "GET, POST, DELETE, OPTIONS");
    assert!(plain.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn a_foreign_origin_is_refused_preflight_and_request_alike() {
    let (gateway, _demo) = gateway("", "").await;
    for path in ["/mcp", "/mcp/demo", "/.well-known/oauth-protected-resource/mcp"] {
        let refused = preflight(&format!("{}{path}", gateway.base), "https://evil.example").await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{path}");
        assert!(refused.headers().get("access-control-allow-origin").is_none(), "{path}");
        let body: serde_json::Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
        assert_eq!(body["error"]["message"], "Origin `https://evil.example` is not allowed", "{body}");
    }
    let refused = initialize(&gateway.mcp(), Some("https://evil.example")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.headers.get("access-control-allow-origin").is_none());
    let rebound = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, gateway.mcp())
        .header("origin", LOOPBACK_PAGE)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN, "the Host check applies to preflights too");
}

#[tokio::test]
async fn answers_to_an_admitted_origin_expose_the_session_header() {
    let (gateway, _demo) = gateway("", "").await;
    let answer = initialize(&gateway.mcp(), Some(LISTED)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_exposed(&answer.headers, LISTED);
    assert!(answer.headers.contains_key("mcp-session-id"));
    let scoped = initialize(&format!("{}/mcp/demo", gateway.base), Some(LOOPBACK_PAGE)).await;
    assert_exposed(&scoped.headers, LOOPBACK_PAGE);
    let unknown = initialize(&format!("{}/mcp/nope", gateway.base), Some(LISTED)).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_exposed(&unknown.headers, LISTED);
    let agent = initialize(&gateway.mcp(), None).await;
    assert_eq!(agent.status, StatusCode::OK);
    for name in ["access-control-allow-origin", "access-control-expose-headers", "vary"] {
        assert!(agent.headers.get(name).is_none(), "no {name} without Origin: {:?}", agent.headers);
    }
}

#[tokio::test]
async fn a_refused_credential_is_readable_by_the_page() {
    let (gateway, _demo) = gateway("", &api_keys()).await;
    let refused = initialize(&gateway.mcp(), Some(LISTED)).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_exposed(&refused.headers, LISTED);
    assert!(header(&refused.headers, "www-authenticate").starts_with("Bearer"), "{:?}", refused.headers);
}

#[tokio::test]
async fn cors_credentials_allows_the_browsers_credentials() {
    let (gateway, _demo) = gateway("cors_credentials = true\n", "").await;
    let answer = preflight(&gateway.mcp(), LISTED).await;
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
    assert_eq!(header(answer.headers(), "access-control-allow-credentials"), "true");
    let answer = initialize(&gateway.mcp(), Some(LISTED)).await;
    assert_eq!(header(&answer.headers, "access-control-allow-origin"), LISTED);
    assert_eq!(header(&answer.headers, "access-control-allow-credentials"), "true");
}
