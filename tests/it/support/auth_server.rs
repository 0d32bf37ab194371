//! A small OAuth 2.1 authorization server on 127.0.0.1:0 for tests: RFC 8414 metadata, a JWKS of the committed
//! test keys (`tests/fixtures/`), dynamic client registration (RFC 7591, any client), `/authorize` with
//! automatic consent (302 to `redirect_uri` with `code` and `state`), and `/token` for `authorization_code` with
//! PKCE S256 verification and for `refresh_token` (rotated). It issues RS256 JWTs whose claims tests configure
//! ([`TokenClaims`]), and [`AuthServer::mint`] signs arbitrary claims. The JWKS can be made to fail
//! ([`JwksMode`]) and its fetches are counted, so tests can show what the gateway does when the issuer is down.
//!
//! For the gateway as an OAuth client (`backend_oauth.rs`) it also plays the protected backend's metadata side:
//! Protected Resource Metadata for `<issuer>/mcp` at the path-inserted well-known URI, the `client_credentials`
//! grant with client authentication checked against [`Behaviour::client`] (a secret) or [`Behaviour::client_key`]
//! (`private_key_jwt`, checked by `client_assertion.rs` for every grant), and misbehaviour on demand
//! ([`Behaviour`]: an issuer that lies, no PKCE S256, garbage from the token endpoint, refresh tokens that stop
//! working). Every authorization, registration and token request is recorded ([`AuthServer::requests`]).
//!
//! Token exchange (RFC 8693, `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`): the client must
//! authenticate (as [`Behaviour::client`] with a secret, or with a verified assertion); `subject_token` must be an
//! unexpired JWT this server signed, of type access token; `audience` is required and becomes the issued token's
//! `aud` (refused with `invalid_target` while [`Behaviour::refuse_target`]); an `actor_token`, when sent, must be a
//! token this server signed too, and its `sub` becomes the issued token's `act.sub`. The issued token carries the
//! subject's `sub`.
//!
//! Rules: loopback only; codes are single-use and bound to their `redirect_uri` and PKCE challenge; a `resource`
//! parameter (RFC 8707) becomes the token's `aud`, as real servers do. Not a real authorization server: no
//! consent screen, no expiry of codes.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use super::client_assertion::{self, ClientKey};

/// What the JWKS endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwksMode {
    Keys,
    /// 200 with a body that is not a JWKS.
    Garbage,
    /// 503.
    Down,
}

/// The claims of the tokens `/token` issues (besides `iss`, `iat`, `exp`, and `aud` from `resource`).
#[derive(Debug, Clone)]
pub struct TokenClaims {
    pub subject: String,
    pub groups: Vec<String>,
    pub scope: String,
    /// Used when the client sends no `resource`.
    pub audience: String,
    pub lifetime_secs: i64,
}

/// A grant waiting for its code to be redeemed, or for its refresh token.
#[derive(Debug, Clone)]
struct Grant {
    redirect_uri: String,
    challenge: String,
    resource: Option<String>,
    /// The scope asked for at `/authorize`.
    scope: Option<String>,
}

/// How the server behaves for the OAuth-client tests; the default is a well-behaved server.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// `token_endpoint_auth_methods_supported`, and what a dynamic registration is given.
    pub auth_methods: Vec<String>,
    /// Advertise `code_challenge_methods_supported: ["S256"]`.
    pub s256: bool,
    /// The `issuer` the metadata claims (`None`: the true one).
    pub claimed_issuer: Option<String>,
    pub cimd: bool,
    /// The token endpoint answers 200 with this (content type, body) instead of a token.
    pub token_garbage: Option<(&'static str, &'static str)>,
    /// The pre-registered client `client_credentials` requests must authenticate as.
    pub client: Option<(String, String)>,
    /// The client registered with a public key: a request authenticating with `private_key_jwt` must carry an
    /// assertion it signed (none registered: every assertion is refused).
    pub client_key: Option<ClientKey>,
    /// `token_endpoint_auth_signing_alg_values_supported` (`None`: not advertised).
    pub signing_algs: Option<Vec<String>>,
    /// The PRM's `scopes_supported`.
    pub prm_scopes: Option<Vec<String>>,
    /// Grant exactly this scope, whatever is asked (`None`: what was asked).
    pub granted_scope: Option<String>,
    /// The protected `/mcp` refuses every token with 401.
    pub reject_tokens: bool,
    /// Token exchange answers `invalid_target` (the audience is not one this server issues tokens for).
    pub refuse_target: bool,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            auth_methods: vec!["none".to_owned()],
            s256: true,
            claimed_issuer: None,
            cimd: false,
            token_garbage: None,
            client: None,
            client_key: None,
            signing_algs: None,
            prm_scopes: None,
            granted_scope: None,
            reject_tokens: false,
            refuse_target: false,
        }
    }
}

struct ServerState {
    issuer: String,
    behaviour: Mutex<Behaviour>,
    requests: Mutex<Vec<Value>>,
    /// (test key number, kid) of every published key; the last one signs.
    keys: Mutex<Vec<(u8, String)>>,
    claims: Mutex<TokenClaims>,
    jwks_mode: Mutex<JwksMode>,
    jwks_fetches: AtomicUsize,
    codes: Mutex<HashMap<String, Grant>>,
    refresh_tokens: Mutex<HashMap<String, Grant>>,
    /// The `jti` of every client assertion accepted so far.
    assertion_ids: Mutex<HashSet<String>>,
    counter: AtomicUsize,
}

/// A running authorization server; dropping it stops it.
pub struct AuthServer {
    /// The issuer (`http://127.0.0.1:<port>`), also the base of every endpoint.
    pub issuer: String,
    state: Arc<ServerState>,
    task: JoinHandle<()>,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The committed test RSA key `number` (1 or 2), PKCS#1 DER.
pub fn signing_key(number: u8) -> EncodingKey {
    EncodingKey::from_rsa_der(match number {
        1 => include_bytes!("../../fixtures/auth-rsa-1.der").as_slice(),
        _ => include_bytes!("../../fixtures/auth-rsa-2.der").as_slice(),
    })
}

pub fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("time fits")
}

/// The S256 PKCE challenge of `verifier` (RFC 7636 §4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

impl AuthServer {
    /// Starts a server publishing test key 1 as `k1`, issuing tokens for `audience`.
    pub async fn start(audience: &str) -> AuthServer {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("address"));
        let state = Arc::new(ServerState {
            issuer: issuer.clone(),
            behaviour: Mutex::default(),
            requests: Mutex::default(),
            keys: Mutex::new(vec![(1, "k1".to_owned())]),
            claims: Mutex::new(TokenClaims {
                subject: "alice".to_owned(),
                groups: Vec::new(),
                scope: "mcp:tools".to_owned(),
                audience: audience.to_owned(),
                lifetime_secs: 300,
            }),
            jwks_mode: Mutex::new(JwksMode::Keys),
            jwks_fetches: AtomicUsize::new(0),
            codes: Mutex::default(),
            refresh_tokens: Mutex::default(),
            assertion_ids: Mutex::default(),
            counter: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/.well-known/openid-configuration", get(metadata))
            .route("/.well-known/oauth-protected-resource/mcp", get(resource_metadata))
            .route("/jwks", get(jwks))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/mcp", post(protected_mcp))
            .with_state(Arc::clone(&state));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        AuthServer { issuer, state, task }
    }

    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    pub fn set_claims(&self, change: impl FnOnce(&mut TokenClaims)) {
        change(&mut self.state.claims.lock().expect("claims"));
    }

    pub fn behave(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.state.behaviour.lock().expect("behaviour"));
    }

    /// Every authorization, registration and token request so far, in order (`{"endpoint": ..., ...}`).
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().expect("requests").clone()
    }

    /// Makes every refresh token issued so far unusable.
    pub fn forget_refresh_tokens(&self) {
        self.state.refresh_tokens.lock().expect("refresh").clear();
    }

    pub fn set_jwks_mode(&self, mode: JwksMode) {
        *self.state.jwks_mode.lock().expect("mode") = mode;
    }

    /// Publishes test key `number` as `kid` and signs with it from now on (older keys stay published).
    pub fn rotate_to(&self, number: u8, kid: &str) {
        self.state.keys.lock().expect("keys").push((number, kid.to_owned()));
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    /// The claims `/token` would issue now, for `audience`.
    pub fn claims(&self, audience: &str) -> Value {
        token_claims(&self.issuer, &self.state.claims.lock().expect("claims"), audience)
    }

    /// Signs `claims` with the current key (RS256, its `kid` in the header).
    pub fn mint(&self, claims: &Value) -> String {
        let (number, kid) = self.state.keys.lock().expect("keys").last().cloned().expect("a key");
        mint_with(number, &kid, claims)
    }
}

fn token_claims(issuer: &str, claims: &TokenClaims, audience: &str) -> Value {
    json!({
        "iss": issuer,
        "aud": audience,
        "sub": claims.subject,
        "groups": claims.groups,
        "scope": claims.scope,
        "iat": now(),
        "exp": now() + claims.lifetime_secs,
    })
}

/// Signs `claims` with test key `number` under `kid`.
pub fn mint_with(number: u8, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &signing_key(number)).expect("signed")
}

async fn metadata(State(state): State<Arc<ServerState>>) -> Response {
    let issuer = &state.issuer;
    let behaviour = state.behaviour.lock().expect("behaviour").clone();
    let mut document = json!({
        "issuer": behaviour.claimed_issuer.as_deref().unwrap_or(issuer),
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported": behaviour.auth_methods,
        "scopes_supported": ["mcp:tools"],
        "client_id_metadata_document_supported": behaviour.cimd,
    });
    if behaviour.s256 {
        document["code_challenge_methods_supported"] = json!(["S256"]);
    }
    if let Some(algs) = &behaviour.signing_algs {
        document["token_endpoint_auth_signing_alg_values_supported"] = json!(algs);
    }
    axum::Json(document).into_response()
}

/// RFC 9728 metadata of the protected backend `<issuer>/mcp`.
async fn resource_metadata(State(state): State<Arc<ServerState>>) -> Response {
    let issuer = &state.issuer;
    let mut document = json!({"resource": format!("{issuer}/mcp"), "authorization_servers": [issuer]});
    if let Some(scopes) = &state.behaviour.lock().expect("behaviour").prm_scopes {
        document["scopes_supported"] = json!(scopes);
    }
    axum::Json(document).into_response()
}

/// The protected backend itself at `<issuer>/mcp`: a stateless MCP server whose one tool, `whoami`, answers with
/// the bearer token it was called with. No token → 401 with the RFC 9728 challenge; the token `Bearer rejected`
/// or any token while [`Behaviour::reject_tokens`] → 401. Every request is recorded as `{"mcp": method,
/// "authorization": …}`.
async fn protected_mcp(
    State(state): State<Arc<ServerState>>,
    headers: axum::http::HeaderMap,
    axum::Json(message): axum::Json<Value>,
) -> Response {
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    let authorization = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).map(str::to_owned);
    record(&state, json!({"mcp": method, "authorization": authorization}));
    let rejected = state.behaviour.lock().expect("behaviour").reject_tokens;
    let Some(token) = authorization.as_deref().and_then(|value| value.strip_prefix("Bearer ")).filter(|_| !rejected)
    else {
        let challenge =
            format!("Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"", state.issuer);
        return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)]).into_response();
    };
    let Some(id) = message.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
    let result = match method.as_str() {
        "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "protected", "version": "1"}}),
        "tools/list" => json!({"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}),
        "tools/call" => json!({"content": [{"type": "text", "text": token}]}),
        _ => json!({}),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

fn record(state: &ServerState, request: Value) {
    state.requests.lock().expect("requests").push(request);
}

async fn jwks(State(state): State<Arc<ServerState>>) -> Response {
    state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    match *state.jwks_mode.lock().expect("mode") {
        JwksMode::Down => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        JwksMode::Garbage => ([(header::CONTENT_TYPE, "text/html")], "<html>maintenance</html>").into_response(),
        JwksMode::Keys => {
            let keys = state.keys.lock().expect("keys").clone();
            let keys = keys
                .iter()
                .map(|(number, kid)| {
                    let mut jwk = Jwk::from_encoding_key(&signing_key(*number), Algorithm::RS256).expect("public part");
                    jwk.common.key_id = Some(kid.clone());
                    jwk
                })
                .collect();
            axum::Json(JwkSet { keys }).into_response()
        }
    }
}

async fn register(State(state): State<Arc<ServerState>>, body: String) -> Response {
    let mut client: Value = serde_json::from_str(&body).unwrap_or_else(|_| json!({}));
    record(&state, json!({"endpoint": "register", "metadata": client.clone()}));
    let number = state.counter.fetch_add(1, Ordering::SeqCst);
    client["client_id"] = json!(format!("client-{number}"));
    client["client_id_issued_at"] = json!(now());
    let method = state.behaviour.lock().expect("behaviour").auth_methods.first().cloned().unwrap_or_default();
    if method != "none" {
        client["client_secret"] = json!(format!("secret-{number}"));
    }
    client["token_endpoint_auth_method"] = json!(method);
    (StatusCode::CREATED, axum::Json(client)).into_response()
}

async fn authorize(State(state): State<Arc<ServerState>>, Query(query): Query<HashMap<String, String>>) -> Response {
    let (Some(redirect_uri), Some(challenge)) = (query.get("redirect_uri"), query.get("code_challenge")) else {
        return oauth_error("invalid_request", "redirect_uri and code_challenge are required");
    };
    if query.get("response_type").map(String::as_str) != Some("code")
        || query.get("code_challenge_method").map(String::as_str) != Some("S256")
    {
        return oauth_error("invalid_request", "response_type=code and code_challenge_method=S256 are required");
    }
    record(&state, json!({"endpoint": "authorize", "query": query}));
    let code = format!("code-{}", state.counter.fetch_add(1, Ordering::SeqCst));
    let grant = Grant {
        redirect_uri: redirect_uri.clone(),
        challenge: challenge.clone(),
        resource: query.get("resource").cloned(),
        scope: query.get("scope").cloned(),
    };
    state.codes.lock().expect("codes").insert(code.clone(), grant);
    let mut location = reqwest::Url::parse(redirect_uri).expect("redirect_uri is a URL");
    location.query_pairs_mut().append_pair("code", &code);
    if let Some(client_state) = query.get("state") {
        location.query_pairs_mut().append_pair("state", client_state);
    }
    (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
}

async fn token(State(state): State<Arc<ServerState>>, headers: axum::http::HeaderMap, body: String) -> Response {
    let form: HashMap<String, String> = reqwest::Url::parse(&format!("http://form/?{body}"))
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    let (method, client) = client_authentication(&headers, &form);
    let behaviour = state.behaviour.lock().expect("behaviour").clone();
    let assertion = (method == "private_key_jwt").then(|| match &behaviour.client_key {
        Some(key) => client_assertion::verify(&form, key, &state.issuer, &state.assertion_ids),
        None => Err("no client is registered with a key".to_owned()),
    });
    let checked = match &assertion {
        Some(Ok(claims)) => json!({"claims": claims}),
        Some(Err(reason)) => json!({"refused": reason}),
        None => Value::Null,
    };
    record(
        &state,
        json!({"endpoint": "token", "form": form, "auth_method": method, "client": client, "assertion": checked}),
    );
    if let Some((content_type, body)) = behaviour.token_garbage {
        return ([(header::CONTENT_TYPE, content_type)], body).into_response();
    }
    if let Some(Err(reason)) = assertion {
        let refusal = json!({"error": "invalid_client", "error_description": reason});
        return (StatusCode::UNAUTHORIZED, axum::Json(refusal)).into_response();
    }
    let grant = match field("grant_type") {
        "client_credentials" => {
            if method != "private_key_jwt"
                && behaviour.client.as_ref().is_some_and(|expected| Some(expected) != client.as_ref())
            {
                let refusal = json!({"error": "invalid_client", "error_description": "bad client credentials"});
                return (StatusCode::UNAUTHORIZED, axum::Json(refusal)).into_response();
            }
            let resource = form.get("resource").cloned();
            return issue(
                &state,
                Grant { redirect_uri: String::new(), challenge: String::new(), resource, scope: None },
                false,
                form.get("scope"),
            );
        }
        EXCHANGE_GRANT => return exchange(&state, &behaviour, &form, method, client.as_ref()),
        "authorization_code" => {
            let Some(grant) = state.codes.lock().expect("codes").remove(field("code")) else {
                return oauth_error("invalid_grant", "unknown or used code");
            };
            if grant.redirect_uri != field("redirect_uri") || grant.challenge != pkce_challenge(field("code_verifier"))
            {
                return oauth_error("invalid_grant", "redirect_uri or code_verifier does not match");
            }
            grant
        }
        "refresh_token" => match state.refresh_tokens.lock().expect("refresh").remove(field("refresh_token")) {
            Some(grant) => grant,
            None => return oauth_error("invalid_grant", "unknown or used refresh token"),
        },
        _ => return oauth_error("unsupported_grant_type", "authorization_code or refresh_token"),
    };
    issue(&state, grant, true, form.get("scope"))
}

const EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// RFC 8693 §2: checks the client, the subject token (and actor token) and the audience, then issues a token for
/// the audience carrying the subject's `sub` (and the actor's as `act.sub`).
fn exchange(
    state: &ServerState,
    behaviour: &Behaviour,
    form: &HashMap<String, String>,
    method: &str,
    client: Option<&(String, String)>,
) -> Response {
    let secret_ok = behaviour.client.as_ref().is_some_and(|expected| Some(expected) == client);
    if method != "private_key_jwt" && !secret_ok {
        let refusal =
            json!({"error": "invalid_client", "error_description": "token exchange needs client authentication"});
        return (StatusCode::UNAUTHORIZED, axum::Json(refusal)).into_response();
    }
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    if field("subject_token_type") != ACCESS_TOKEN_TYPE {
        return oauth_error("invalid_request", "subject_token_type must be an access token");
    }
    let Some(subject) = verify(state, field("subject_token")) else {
        return oauth_error("invalid_grant", "the subject_token is not a valid token of this issuer");
    };
    let audience = field("audience");
    if audience.is_empty() {
        return oauth_error("invalid_request", "audience is required");
    }
    if behaviour.refuse_target {
        return oauth_error("invalid_target", "this server issues no tokens for that audience");
    }
    let mut claims = token_claims(&state.issuer, &state.claims.lock().expect("claims"), audience);
    claims["sub"] = subject["sub"].clone();
    if let Some(actor_token) = form.get("actor_token") {
        let actor = verify(state, actor_token).filter(|_| field("actor_token_type") == ACCESS_TOKEN_TYPE);
        let Some(actor) = actor else { return oauth_error("invalid_request", "the actor_token is not valid") };
        claims["act"] = json!({"sub": actor["sub"]});
    }
    let (number, kid) = state.keys.lock().expect("keys").last().cloned().expect("a key");
    let lifetime = claims["exp"].as_i64().unwrap_or_default() - now();
    axum::Json(json!({
        "access_token": mint_with(number, &kid, &claims),
        "issued_token_type": ACCESS_TOKEN_TYPE,
        "token_type": "Bearer",
        "expires_in": lifetime,
    }))
    .into_response()
}

/// The claims of `token` when this server signed it with a published key and it has not expired.
fn verify(state: &ServerState, token: &str) -> Option<Value> {
    let kid = jsonwebtoken::decode_header(token).ok()?.kid?;
    let (number, _) = state.keys.lock().expect("keys").iter().find(|(_, known)| *known == kid).cloned()?;
    let jwk = Jwk::from_encoding_key(&signing_key(number), Algorithm::RS256).ok()?;
    let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
    validation.validate_aud = false;
    validation.set_issuer(&[&state.issuer]);
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).ok()?;
    jsonwebtoken::decode::<Value>(token, &key, &validation).ok().map(|data| data.claims)
}

/// How the client authenticated (`client_secret_basic`, `client_secret_post`, `private_key_jwt` or `none`) and as
/// whom (for `private_key_jwt`, the `client_id` it names; its assertion is checked by the caller).
fn client_authentication(
    headers: &axum::http::HeaderMap,
    form: &HashMap<String, String>,
) -> (&'static str, Option<(String, String)>) {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| base64::engine::general_purpose::STANDARD.decode(encoded).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok());
    if let Some(pair) = basic {
        let (id, secret) = pair.split_once(':').unwrap_or((&pair, ""));
        let decode = |text: &str| form_decode(text);
        return ("client_secret_basic", Some((decode(id), decode(secret))));
    }
    if form.contains_key("client_assertion") || form.contains_key("client_assertion_type") {
        return ("private_key_jwt", form.get("client_id").map(|id| (id.clone(), String::new())));
    }
    match (form.get("client_id"), form.get("client_secret")) {
        (Some(id), Some(secret)) => ("client_secret_post", Some((id.clone(), secret.clone()))),
        _ => ("none", None),
    }
}

fn form_decode(text: &str) -> String {
    reqwest::Url::parse(&format!("http://form/?v={text}"))
        .ok()
        .and_then(|url| url.query_pairs().next().map(|(_, value)| value.into_owned()))
        .unwrap_or_default()
}

fn issue(state: &ServerState, grant: Grant, refreshable: bool, asked_scope: Option<&String>) -> Response {
    let mut claims = state.claims.lock().expect("claims").clone();
    let granted = state.behaviour.lock().expect("behaviour").granted_scope.clone();
    claims.scope = granted.or_else(|| asked_scope.or(grant.scope.as_ref()).cloned()).unwrap_or(claims.scope);
    let audience = grant.resource.clone().unwrap_or_else(|| claims.audience.clone());
    let (number, kid) = state.keys.lock().expect("keys").last().cloned().expect("a key");
    let access_token = mint_with(number, &kid, &token_claims(&state.issuer, &claims, &audience));
    let mut answer = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": claims.lifetime_secs,
        "scope": claims.scope,
    });
    if refreshable {
        let refresh_token = format!("refresh-{}", state.counter.fetch_add(1, Ordering::SeqCst));
        state.refresh_tokens.lock().expect("refresh").insert(refresh_token.clone(), grant);
        answer["refresh_token"] = json!(refresh_token);
    }
    axum::Json(answer).into_response()
}

fn oauth_error(error: &str, description: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error, "error_description": description}))).into_response()
}
