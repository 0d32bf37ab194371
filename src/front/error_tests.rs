//! Tests of the error table: what the agent is sent for each kind of refusal.

use super::*;

async fn body_of(response: Response) -> Value {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn an_answer_carries_status_code_id_message_and_header() {
    let full = RevokeError::Full { capacity: 2, retry_after: 7 };
    let response = FrontError::NoRoomForSession { id: Value::from(3), cause: full }.into_response();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "7");
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let body = body_of(response).await;
    assert_eq!(body["id"], 3);
    assert_eq!(body["error"]["code"], jsonrpc::INTERNAL_ERROR);
    assert!(body["error"]["message"].as_str().unwrap().starts_with("cannot start a session: "), "{body}");
}

#[tokio::test]
async fn a_full_share_of_the_revocation_list_says_when_to_retry() {
    let full = RevokeError::ShareFull { owner: "anonymous@127.0.0.1".into(), share: 2, retry_after: 9 };
    let response = FrontError::NotDeleted(full).into_response();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "9");
    let message = body_of(response).await["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.starts_with("the session was not deleted: "), "{message}");
    assert!(message.contains("`anonymous@127.0.0.1`") && message.contains("max_revocations_per_owner"), "{message}");
}

#[tokio::test]
async fn refused_credentials_carry_their_status_and_challenge() {
    let challenge = "Bearer error=\"insufficient_scope\"".to_owned();
    let error = AuthError::InsufficientScope(vec!["mcp:tools".into()]);
    let response = FrontError::Unauthenticated { error, challenge }.into_response();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer error=\"insufficient_scope\"");
    let body = body_of(response).await;
    assert!(body["error"]["message"].as_str().unwrap().contains("mcp:tools"), "{body}");
    let odd = FrontError::Unauthenticated { error: AuthError::Missing, challenge: "Bearer\n".into() };
    assert_eq!(odd.into_response().headers()[header::WWW_AUTHENTICATE], "Bearer");
}

#[tokio::test]
async fn the_sessionless_eras_refusals_carry_its_codes_data_and_headers() {
    let unsupported = FrontError::UnsupportedVersion { id: Value::from(8), requested: "2099-01-01".into() };
    let response = unsupported.into_response();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body = body_of(response).await;
    assert_eq!((body["id"].clone(), body["error"]["code"].clone()), (json!(8), json!(-32022)));
    assert_eq!(body["error"]["data"], json!({"supported": ["2026-07-28"], "requested": "2099-01-01"}));
    let no_streams = FrontError::NoStreamsWithoutSessions.into_response();
    assert_eq!(no_streams.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(no_streams.headers()[header::ALLOW], "POST");
    let removed = FrontError::NoSuchMethod { id: Some(json!("a")), method: "ping".into() }.into_response();
    assert_eq!(removed.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_of(removed).await["error"]["code"], jsonrpc::METHOD_NOT_FOUND);
    assert_eq!(modern_error_status(jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY), StatusCode::BAD_REQUEST);
    assert_eq!(modern_error_status(jsonrpc::INVALID_PARAMS), StatusCode::OK, "a normal JSON-RPC answer");
}

#[tokio::test]
async fn refusals_without_a_known_id_answer_with_a_null_id() {
    let response = FrontError::UnusableSession("has expired; initialize a new one").into_response();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(response.headers().get(header::CONNECTION).is_none());
    let body = body_of(response).await;
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["message"], "session has expired; initialize a new one");
    let log = RevokeError::Log(super::super::revocations::LogError("disk full".into()));
    let not_deleted = FrontError::NotDeleted(log).into_response();
    assert_eq!(not_deleted.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(not_deleted.headers().get(header::RETRY_AFTER).is_none(), "only a full list says when to retry");
}

#[tokio::test]
async fn the_fair_share_caps_are_429_naming_their_key() {
    for (error, key) in [
        (FrontError::TooManyRequests { max: 3 }, "max_connections_per_principal = 3"),
        (FrontError::TooManyStreams { max: 4 }, "max_streams_per_session = 4"),
    ] {
        let response = error.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let body = body_of(response).await;
        assert_eq!(body["error"]["code"], jsonrpc::INVALID_REQUEST);
        assert!(body["error"]["message"].as_str().unwrap().contains(key), "{body}");
    }
}
