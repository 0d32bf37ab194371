//! Wiring of the backend OAuth client: `[backends.oauth]` lowered into the client's own [`BackendOAuth`]
//! settings, the client built over the vault key in the data directory and the ledger's token table, and the front's
//! `/oauth/start` and `/oauth/callback` served through it. Types only, plus three rules: a `private_key` is parsed
//! here, before anything else is built, and an unusable one fails startup (and `switchyard check`) naming its key and
//! source; a completed authorization rediscovers its backend at once, so its tools appear without waiting for the next
//! refresh; and the pages never repeat what a token endpoint wrote beyond RFC 6749's registered error codes.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use super::GatewayError;
use super::token_store::LedgerTokens;
use crate::backend::oauth::{
    AuthMethod, BackendOAuth, ClientIdentity, Consent, ExchangeSettings, GrantKind, HttpLimits, OAuthClient,
    OAuthError, OAuthOptions, SigningKey, TOKEN_KEY_FILE_NAME, Vault,
};
use crate::config::{
    BackendConfig, Config, CredentialSource, Endpoint, OAuthClientIdentity, OAuthConfig, OAuthGrant, OAuthPrivateKey,
    TokenEndpointAuthMethod,
};
use crate::front::callback::{AuthorizationCallback, Authorized, CALLBACK_PATH, Completion, ConsentPage};
use crate::ledger::LedgerStore;
use crate::router::CallRouter;

/// How long an authorization URL stays usable.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// Authorizations waiting for their callback, at most.
const MAX_PENDING: usize = 1024;
/// Every request to an authorization server or metadata location, at most.
const OAUTH_HTTP_TIMEOUT: Duration = Duration::from_secs(15);
const OAUTH_MAX_BODY: usize = 1024 * 1024;

/// The OAuth client of every backend with `[backends.oauth]` (`None` when there is none).
pub(super) fn client(config: &Config, store: &LedgerStore) -> Result<Option<Arc<OAuthClient>>, GatewayError> {
    let backends: Vec<BackendOAuth> =
        config.backends.iter().filter_map(|backend| lower(backend).transpose()).collect::<Result<_, _>>()?;
    if backends.is_empty() {
        return Ok(None);
    }
    let vault =
        Vault::load_or_create(&config.server.data_dir.join(TOKEN_KEY_FILE_NAME)).map_err(GatewayError::TokenKey)?;
    let options = OAuthOptions {
        redirect_uri: redirect_uri(&config.server.public_url())?,
        client_name: "Switchyard".to_owned(),
        limits: HttpLimits { timeout: OAUTH_HTTP_TIMEOUT, max_body: OAUTH_MAX_BODY },
        pending_ttl: PENDING_TTL,
        max_pending: MAX_PENDING,
    };
    let store = Arc::new(LedgerTokens(store.clone()));
    let client =
        OAuthClient::new(backends, options, vault, store).map_err(|error| GatewayError::OAuth(error.to_string()))?;
    Ok(Some(Arc::new(client)))
}

/// `<public_url>/oauth/callback`.
pub(super) fn redirect_uri(public_url: &str) -> Result<Url, GatewayError> {
    Url::parse(&format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/')))
        .map_err(|error| GatewayError::OAuth(format!("the callback URL under `server.public_url` is invalid: {error}")))
}

fn lower(backend: &BackendConfig) -> Result<Option<BackendOAuth>, GatewayError> {
    let url = match &backend.endpoint {
        Endpoint::Url(url) => url,
        Endpoint::OpenApi(settings) => match &settings.url {
            Some(url) => url,
            None => return Ok(None),
        },
        Endpoint::Process(_) => return Ok(None),
    };
    let Some(oauth) = &backend.oauth else { return Ok(None) };
    Ok(Some(BackendOAuth {
        backend: backend.name.as_str().to_owned(),
        url: url.clone(),
        grant: match oauth.grant {
            OAuthGrant::ClientCredentials => GrantKind::ClientCredentials,
            OAuthGrant::AuthorizationCode => GrantKind::AuthorizationCode,
            OAuthGrant::TokenExchange => GrantKind::TokenExchange,
        },
        client: identity(backend.name.as_str(), oauth)?,
        scopes: oauth.scopes.clone(),
        authorization_server: oauth.authorization_server.clone(),
        auth_method: oauth.token_endpoint_auth_method.map(|method| match method {
            TokenEndpointAuthMethod::ClientSecretBasic => AuthMethod::ClientSecretBasic,
            TokenEndpointAuthMethod::ClientSecretPost => AuthMethod::ClientSecretPost,
            TokenEndpointAuthMethod::PrivateKeyJwt => AuthMethod::PrivateKeyJwt,
            TokenEndpointAuthMethod::None => AuthMethod::None,
        }),
        allow_internal: oauth.allow_internal,
        exchange: ExchangeSettings { audience: oauth.audience.clone(), actor: oauth.actor },
    }))
}

fn identity(backend: &str, oauth: &OAuthConfig) -> Result<ClientIdentity, GatewayError> {
    Ok(match &oauth.client {
        OAuthClientIdentity::PreRegistered { client_id, client_secret, private_key } => ClientIdentity::PreRegistered {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            private_key: private_key.as_ref().map(|key| signing_key(backend, key)).transpose()?,
        },
        OAuthClientIdentity::MetadataDocument(url) => ClientIdentity::MetadataDocument(url.clone()),
        OAuthClientIdentity::Dynamic => ClientIdentity::Dynamic,
    })
}

/// Parses `private_key`; an unusable one names its key, backend and source, never its text.
fn signing_key(backend: &str, key: &OAuthPrivateKey) -> Result<Arc<SigningKey>, GatewayError> {
    SigningKey::from_pem(key.pem.expose()).map(Arc::new).map_err(|error| {
        let source = match &key.source {
            CredentialSource::Env(var) => format!("environment variable {var}"),
            CredentialSource::File(path) => format!("file {}", path.display()),
        };
        GatewayError::OAuth(format!("{}: private key of backend `{backend}` (from {source}): {error}", key.key))
    })
}

/// The front's callback over the OAuth client; a completed authorization rediscovers its backend.
pub(super) struct Callback {
    pub(super) oauth: Arc<OAuthClient>,
    pub(super) router: Arc<CallRouter>,
}

impl AuthorizationCallback for Callback {
    fn serves_https(&self) -> bool {
        self.oauth.serves_https()
    }

    fn consent(&self, flow: &str) -> Result<ConsentPage, String> {
        let Consent { principal, backend, cookie, consent, expires_in } =
            self.oauth.consent(flow).map_err(|error| error.to_string())?;
        Ok(ConsentPage { principal, backend, cookie, consent, expires_in })
    }

    fn proceed(&self, flow: &str, consent: &str, cookies: &[String]) -> Result<String, String> {
        self.oauth.proceed(flow, consent, cookies).map_err(|error| error.to_string())
    }

    fn complete<'a>(
        &'a self,
        state: &'a str,
        code: &'a str,
        iss: Option<&'a str>,
        cookies: &'a [String],
    ) -> Completion<'a> {
        Box::pin(async move {
            let completed =
                self.oauth.complete(state, code, iss, cookies).await.map_err(|error| page_reason(&error))?;
            tracing::info!(backend = %completed.backend, principal = %completed.principal, "oauth: authorization completed");
            let (router, backend) = (Arc::clone(&self.router), completed.backend.clone());
            tokio::spawn(async move {
                if let Err(error) = router.discover(&backend).await {
                    tracing::warn!(%backend, %error, "discovery after an authorization failed");
                }
            });
            Ok(Authorized { backend: completed.backend, flow: completed.flow })
        })
    }
}

/// RFC 6749 §5.2: the error codes a token endpoint may answer.
const TOKEN_ERRORS: [&str; 6] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
];

/// The callback page's sentence for a failed completion: what the token endpoint answered is the authorization
/// server's own text, so the page names only a registered error code (the log keeps the rest).
fn page_reason(error: &OAuthError) -> String {
    match error {
        OAuthError::TokenRefused { error: code, .. } => {
            tracing::warn!(%error, "oauth: the token endpoint refused an authorization code");
            match TOKEN_ERRORS.contains(&code.as_str()) {
                true => format!("the token endpoint refused the code: {code}"),
                false => "the token endpoint refused the code".to_owned(),
            }
        }
        other => other.to_string(),
    }
}
