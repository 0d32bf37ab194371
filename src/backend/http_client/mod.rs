//! The one HTTP client of the backend layer's call paths: HTTP/1.1 with keep-alive on
//! hyper's connection API, over hyper-rustls' connector. Streamable HTTP exchanges (`POST`, the `GET` streams,
//! `DELETE`) and legacy SSE backends (their stream and their `POST`s) all go through it.
//!
//! Rules:
//! - A call's exchange runs in the call's own task: the connection is driven by whoever sends on it or reads
//!   its body ([`conn`]), pooled per backend between requests ([`pool`]); no connection task is spawned.
//! - No redirect is followed (a backend URL comes only from configuration; a redirect could carry its
//!   credential anywhere) and no content encoding is decoded (requests ask for `identity`; the callers refuse
//!   anything else).
//! - A request body is one [`Bytes`], serialized once; a response body is read one chunk at a time
//!   ([`next_chunk`]), so an event stream is never buffered whole.
//! - A request is resent only when provably nothing of it left: an idle connection the backend had closed gives
//!   it back unsent, and it goes out on another. A send error says whether the request never left
//!   ([`SendError::never_sent`]).
//! - TLS trusts the platform's roots, verified with rustls' `ring` provider; without any platform root an
//!   `https` backend fails its handshake.

mod body;
mod conn;
mod pool;

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Method, Uri, header};
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

pub use body::Body;
use body::Home;
use conn::Conn;
use pool::{Key, Pool, sweep_while_alive};

/// A request to a backend; its body is sent as one buffer.
pub type Request = http::Request<Full<Bytes>>;
/// A backend's response; its body is read with [`next_chunk`].
pub type Response = http::Response<Body>;

/// How often an idle connection (an event stream, a pooled connection) is probed, so a vanished peer is noticed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("the request URI `{0}` names no scheme and host")]
    NotAbsolute(Uri),
    /// No connection to `address` (the URI's host and port) could be made.
    #[error("could not connect to {address}")]
    Connect {
        address: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the connection closed before the request was sent")]
    NotSent(#[source] hyper::Error),
    #[error("the exchange failed")]
    Exchange(#[source] hyper::Error),
}

impl SendError {
    /// The request provably never left this process: nothing of it reached the backend.
    pub fn never_sent(&self) -> bool {
        !matches!(self, SendError::Exchange(_))
    }
}

/// The client: cheap to clone (clones share the pool).
#[derive(Clone)]
pub struct HttpClient {
    connector: HttpsConnector<HttpConnector>,
    pool: Arc<Pool>,
}

/// The TCP and TLS connector every connection is made with.
fn connector() -> Result<HttpsConnector<HttpConnector>, String> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false); // the TLS layer takes `https` URIs
    tcp.set_nodelay(true); // a request is written whole; waiting for more only adds latency
    tcp.set_keepalive(Some(TCP_KEEPALIVE));
    let builder = HttpsConnectorBuilder::new();
    let provider = rustls::crypto::ring::default_provider();
    let tls = match builder.with_provider_and_native_roots(provider) {
        Ok(builder) => builder,
        Err(error) => {
            tracing::warn!(%error, "no platform TLS roots: https backends will fail their TLS handshake");
            HttpsConnectorBuilder::new().with_tls_config(without_roots()?)
        }
    };
    Ok(tls.https_or_http().enable_http1().wrap_connector(tcp))
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

impl HttpClient {
    /// Fails only when no TLS configuration can be made (rustls refuses its own defaults).
    pub fn new() -> Result<Self, String> {
        Ok(Self::with_pool(connector()?, Pool::default()))
    }

    fn with_pool(connector: HttpsConnector<HttpConnector>, pool: Pool) -> Self {
        let pool = Arc::new(pool);
        sweep_while_alive(&pool);
        Self { connector, pool }
    }

    /// Sends `request` (its URI absolute) on an idle connection to its backend or a new one; the response's body
    /// is still to be read. A request that an idle connection gives back unsent (the backend had closed it) is
    /// sent again on another; nothing else is ever resent.
    pub async fn send(&self, request: Request) -> Result<Response, SendError> {
        let key = Key::of(request.uri()).ok_or_else(|| SendError::NotAbsolute(request.uri().clone()))?;
        let mut request = on_the_wire(request, &key);
        loop {
            let (mut conn, reused) = match self.pool.take(&key) {
                Some(conn) => (conn, true),
                None => (Box::pin(self.connect(&key)).await?, false),
            };
            if let Err(error) = conn.ready().await {
                if reused {
                    continue;
                }
                return Err(key.connect_error(error.into()));
            }
            match conn.exchange(request).await {
                Ok(response) => {
                    let home = Home { pool: Arc::downgrade(&self.pool), key };
                    return Ok(response.map(|incoming| Body::new(incoming, conn, home)));
                }
                Err(mut refused) => match refused.take_message() {
                    Some(unsent) if reused => request = unsent,
                    Some(_) => return Err(SendError::NotSent(refused.into_error())),
                    None => return Err(SendError::Exchange(refused.into_error())),
                },
            }
        }
    }

    /// A new connection to `key`'s backend (TCP, then TLS for `https`).
    async fn connect(&self, key: &Key) -> Result<Box<Conn>, SendError> {
        let target = Uri::builder()
            .scheme(key.scheme.clone())
            .authority(key.authority.clone())
            .path_and_query(PathAndQuery::from_static("/"))
            .build()
            .map_err(|error| key.connect_error(error.into()))?;
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx)).await.map_err(|error| key.connect_error(error))?;
        let io = connector.call(target).await.map_err(|error| key.connect_error(error))?;
        Conn::open(io).await.map_err(|error| key.connect_error(error.into()))
    }
}

/// `request` as HTTP/1.1 sends it to an origin server: the URI in origin form, the authority in `Host`.
fn on_the_wire(mut request: Request, key: &Key) -> Request {
    if !request.headers().contains_key(header::HOST)
        && let Some(host) = host_header(key)
    {
        request.headers_mut().insert(header::HOST, host);
    }
    let path = request.uri().path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
    *request.uri_mut() = Uri::from(path);
    request
}

/// The `Host` value for `key`: the authority without user info, and without the scheme's default port.
fn host_header(key: &Key) -> Option<HeaderValue> {
    let default_port = if key.scheme == http::uri::Scheme::HTTPS { 443 } else { 80 };
    let host = key.authority.host();
    let value = match key.authority.port_u16() {
        Some(port) if port != default_port => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    HeaderValue::from_str(&value).ok()
}

/// A TLS configuration that trusts nothing: every `https` handshake fails, with an error that says why.
fn without_roots() -> Result<rustls::ClientConfig, String> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("cannot configure TLS: {error}"))?;
    Ok(config.with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth())
}

/// A request with `headers` (usually a clone of a per-backend template) and `body`.
pub fn request(method: Method, uri: &Uri, headers: HeaderMap, body: Bytes) -> Request {
    let mut request = http::Request::new(Full::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = uri.clone();
    *request.headers_mut() = headers;
    request
}

/// The next chunk of a response body; `Ok(None)` at its end (trailers are skipped).
pub async fn next_chunk(body: &mut Body) -> Result<Option<Bytes>, hyper::Error> {
    body.next_chunk().await
}

/// The body's length when the response declared it.
pub fn content_length(response: &Response) -> Option<u64> {
    response.body().exact_length()
}

/// The URI of a configured URL, or why it has none (hyper takes `http::Uri`; configuration parses `Url`s).
pub fn uri_of(url: &reqwest::Url) -> Result<Uri, String> {
    url.as_str().parse().map_err(|error| format!("the backend URL `{url}` is not a valid HTTP URI: {error}"))
}

#[cfg(test)]
mod tests;
