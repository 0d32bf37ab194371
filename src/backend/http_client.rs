//! The one HTTP client of the backend layer's call paths (issue 14, design §6): hyper-util's pooled client over
//! hyper-rustls, HTTP/1.1 with keep-alive. Streamable HTTP exchanges (`POST`, the `GET` streams, `DELETE`) and
//! legacy SSE backends (their stream and their `POST`s) all go through it.
//!
//! Rules: no redirect is followed (a backend URL comes only from configuration; a redirect could carry its
//! credential anywhere) and no content encoding is decoded (requests ask for `identity`; the callers refuse
//! anything else); a request body is one [`Bytes`], serialized once and resent as is; a response body is read
//! one chunk at a time ([`next_chunk`]), so an event stream is never buffered whole; a send error tells whether
//! the request provably never left ([`SendError::is_connect`]). TLS trusts the platform's roots, verified with
//! rustls' `ring` provider; without any platform root an `https` backend fails its handshake (as before).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub use hyper_util::client::legacy::Error as SendError;

/// A request to a backend; its body is sent as one buffer.
pub type Request = http::Request<Full<Bytes>>;
/// A backend's response; its body is read with [`next_chunk`].
pub type Response = http::Response<Incoming>;

/// How often an idle connection (an event stream, a pooled connection) is probed, so a vanished peer is noticed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);
/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The client: cheap to clone (clones share the pool).
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HttpClient {
    /// Fails only when no TLS configuration can be made (rustls refuses its own defaults).
    pub fn new() -> Result<Self, String> {
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
        let connector = tls.https_or_http().enable_http1().wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Self { client })
    }

    /// Sends `request`; the response's body is still to be read.
    pub async fn send(&self, request: Request) -> Result<Response, SendError> {
        self.client.request(request).await
    }
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
pub async fn next_chunk(body: &mut Incoming) -> Result<Option<Bytes>, hyper::Error> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// The body's length when the response declared it.
pub fn content_length(response: &Response) -> Option<u64> {
    hyper::body::Body::size_hint(response.body()).exact()
}

/// The URI of a configured URL, or why it has none (hyper takes `http::Uri`; configuration parses `Url`s).
pub fn uri_of(url: &reqwest::Url) -> Result<Uri, String> {
    url.as_str().parse().map_err(|error| format!("the backend URL `{url}` is not a valid HTTP URI: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Answers one request on `listener` with `answer` and returns the request's bytes.
    async fn answer_once(listener: TcpListener, answer: String) -> Vec<u8> {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0; 4096];
        let read = socket.read(&mut request).await.unwrap();
        request.truncate(read);
        socket.write_all(answer.as_bytes()).await.unwrap();
        request
    }

    fn get(uri: &Uri) -> Request {
        request(Method::GET, uri, HeaderMap::new(), Bytes::new())
    }

    #[tokio::test]
    async fn a_redirect_is_returned_not_followed_and_a_body_arrives_as_sent() {
        let elsewhere = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        let answer = format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{}/mcp\r\nContent-Encoding: gzip\r\n\
             Content-Length: 5\r\n\r\nhello",
            elsewhere.local_addr().unwrap()
        );
        let server = tokio::spawn(answer_once(listener, answer));
        let mut response = HttpClient::new().unwrap().send(get(&uri)).await.unwrap();
        assert_eq!(response.status(), http::StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(content_length(&response), Some(5));
        assert_eq!(next_chunk(response.body_mut()).await.unwrap().as_deref(), Some(&b"hello"[..]), "not decoded");
        assert!(next_chunk(response.body_mut()).await.unwrap().is_none());
        assert!(String::from_utf8(server.await.unwrap()).unwrap().starts_with("GET /mcp HTTP/1.1\r\n"));
        let followed = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
        assert!(followed.is_err(), "the redirect must not be followed");
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        drop(listener);
        let error = HttpClient::new().unwrap().send(get(&uri)).await.unwrap_err();
        assert!(error.is_connect(), "{error:?}");
    }

    #[tokio::test]
    async fn a_connection_closed_after_the_request_is_not_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        let server = tokio::spawn(answer_once(listener, String::new()));
        let error = HttpClient::new().unwrap().send(get(&uri)).await.unwrap_err();
        assert!(!error.is_connect(), "{error:?}");
        assert!(!server.await.unwrap().is_empty(), "the request went out");
    }
}
