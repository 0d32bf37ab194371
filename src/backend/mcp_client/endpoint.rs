//! Where a backend is reached and which slot of the session table a call uses.
//!
//! Rules: a [`BackendTarget`] is built once per backend by the composition root and shared by every call (a
//! call's deadline and principal are its [`super::CallContext`]'s); it names the transport — Streamable HTTP ([`BackendEndpoint`]), a stdio process
//! ([`Launcher`]), a legacy HTTP+SSE stream ([`LegacySseBackend`]) or a REST API ([`RestTarget`]) — and nothing above the backend client
//! branches on it. A [`SlotKey`] is the (agent session, backend) pair; its owner only counts for fairness.
//! A target carries the revision of the configuration that made it ([`BackendTarget::with_revision`]): a session
//! started from an older revision of a backend is replaced before a newer target uses it (a reload replaced the
//! backend), never the other way round.

use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;

use super::sentence::Place;
use super::session::era::Era;
use super::wire::authorize::OAuthBinding;
use crate::backend::duplex::Sharing;
use crate::backend::http_client;
use crate::backend::legacy_sse::LegacySseBackend;
use crate::backend::openapi::{Access, Api, Idempotency};
use crate::backend::stdio::{Launcher, SpawnStatus};
use crate::mcp::SessionHolder;
use crate::telemetry::trace::Peer;

/// Where and how to send one exchange over Streamable HTTP: the backend's fixed [`Route`] (shared, so a copy of
/// an endpoint copies no URL or header) and how long a call may take.
#[derive(Debug, Clone)]
pub struct BackendEndpoint {
    route: Arc<Route>,
    /// How long a call may take, from when it starts ([`super::CallContext::starting_now`]).
    timeout: Duration,
    /// See [`BackendTarget::with_revision`].
    revision: u64,
}

/// What every request to one backend shares, built once per backend: the URL (and its `http::Uri`), the
/// credential (marked sensitive, so it is never printed), extra headers (such as an intent token), and the header
/// maps each kind of request starts from.
#[derive(Debug, Clone)]
struct Route {
    url: Url,
    /// `Err`: why the URL is no HTTP URI (every exchange then fails undelivered).
    uri: Result<Uri, String>,
    credential: Option<(HeaderName, HeaderValue)>,
    extra: Vec<(HeaderName, HeaderValue)>,
    /// `Accept-Encoding: identity`, the credential and the extra headers: what every request carries.
    common: HeaderMap,
    /// `common`, and what a `POST` of JSON-RPC adds (`Accept` of both answer kinds, `Content-Type`).
    post: HeaderMap,
    /// A protected backend's OAuth client (its tokens go in `Authorization`).
    oauth: Option<OAuthBinding>,
    /// Which protocol era to speak (probed by default).
    era: Era,
}

impl Route {
    fn new(url: Url) -> Self {
        let uri = http_client::uri_of(&url);
        let mut route = Self {
            url,
            uri,
            credential: None,
            extra: Vec::new(),
            common: HeaderMap::new(),
            post: HeaderMap::new(),
            oauth: None,
            era: Era::Auto,
        };
        route.build_headers();
        route
    }

    fn build_headers(&mut self) {
        let mut common = HeaderMap::new();
        common.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        for (name, value) in self.credential.iter().chain(&self.extra) {
            common.append(name, value.clone());
        }
        let mut post = common.clone();
        post.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        post.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        (self.common, self.post) = (common, post);
    }
}

impl BackendEndpoint {
    /// An endpoint whose calls may take `timeout` each.
    pub fn new(url: Url, timeout: Duration) -> Self {
        Self { route: Arc::new(Route::new(url)), timeout, revision: 0 }
    }

    /// Changes the route (only while the endpoint is configured, before any call shares it).
    fn with_route(mut self, change: impl FnOnce(&mut Route)) -> Self {
        let route = Arc::make_mut(&mut self.route);
        change(route);
        route.build_headers();
        self
    }

    pub fn with_credential(self, name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        self.with_route(|route| route.credential = Some((name, value)))
    }

    /// Sends the OAuth tokens `oauth` obtains for the backend.
    pub fn with_oauth(self, oauth: OAuthBinding) -> Self {
        self.with_route(|route| route.oauth = Some(oauth))
    }

    /// Speaks `era` to the backend instead of probing which one it speaks.
    pub fn with_era(self, era: Era) -> Self {
        self.with_route(|route| route.era = era)
    }

    pub fn with_header(self, name: HeaderName, value: HeaderValue) -> Self {
        self.with_route(|route| route.extra.push((name, value)))
    }

    pub fn url(&self) -> &Url {
        &self.route.url
    }

    /// The backend's URI, or why its URL has none.
    pub(super) fn uri(&self) -> Result<&Uri, &str> {
        self.route.uri.as_ref().map_err(String::as_str)
    }

    /// The headers every request to the backend carries.
    pub(super) fn common_headers(&self) -> &HeaderMap {
        &self.route.common
    }

    /// [`Self::common_headers`] and those of a JSON-RPC `POST`.
    pub(super) fn post_headers(&self) -> &HeaderMap {
        &self.route.post
    }

    pub(super) fn oauth(&self) -> Option<&OAuthBinding> {
        self.route.oauth.as_ref()
    }

    pub(super) fn era(&self) -> Era {
        self.route.era
    }

    /// The endpoint without per-call headers: where a session's `DELETE` and standalone stream go.
    pub(super) fn home(&self) -> Self {
        if self.route.extra.is_empty() {
            return self.clone();
        }
        self.clone().with_route(|route| route.extra.clear())
    }
}

/// One backend as the client reaches it.
// One target per backend, shared by its calls: boxing the HTTP variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum BackendTarget {
    /// Streamable HTTP.
    Http(BackendEndpoint),
    /// A session over a pair of message channels: a stdio process or a legacy SSE stream.
    Duplex(DuplexTarget),
    /// A REST API described by an OpenAPI document.
    Rest(RestTarget),
}

/// A REST API ([`crate::backend::openapi`]): its operations are the tools, and their requests go to the
/// endpoint's URL with its headers, within its timeout, carrying the credential and OAuth tokens as `access` plans
/// for each operation (the endpoint itself has no credential).
#[derive(Debug, Clone)]
pub struct RestTarget {
    pub(super) endpoint: BackendEndpoint,
    pub(super) api: Arc<Api>,
    pub(super) idempotency: Arc<Idempotency>,
    pub(super) access: Arc<Access>,
}

/// A backend reached through the shared session core ([`crate::backend::duplex`]).
#[derive(Debug, Clone)]
pub struct DuplexTarget {
    pub(super) transport: DuplexTransport,
    timeout: Duration,
    /// See [`BackendTarget::with_revision`].
    revision: u64,
}

#[derive(Clone)]
pub(super) enum DuplexTransport {
    Stdio(Arc<Launcher>),
    LegacySse(Arc<LegacySseBackend>),
}

impl std::fmt::Debug for DuplexTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DuplexTransport::Stdio(launcher) => f.debug_tuple("Stdio").field(launcher.backend()).finish(),
            DuplexTransport::LegacySse(backend) => f.debug_tuple("LegacySse").field(backend).finish(),
        }
    }
}

impl DuplexTransport {
    pub(super) fn sharing(&self) -> Sharing {
        match self {
            DuplexTransport::Stdio(launcher) => launcher.backend().sharing,
            DuplexTransport::LegacySse(backend) => backend.sharing,
        }
    }
}

impl From<BackendEndpoint> for BackendTarget {
    fn from(endpoint: BackendEndpoint) -> Self {
        BackendTarget::Http(endpoint)
    }
}

impl BackendTarget {
    /// A stdio backend whose processes `launcher` starts; each call may take `timeout`.
    pub fn stdio(launcher: Arc<Launcher>, timeout: Duration) -> Self {
        Self::duplex(DuplexTransport::Stdio(launcher), timeout)
    }

    /// A legacy HTTP+SSE backend; each call may take `timeout`.
    pub fn legacy_sse(backend: LegacySseBackend, timeout: Duration) -> Self {
        Self::duplex(DuplexTransport::LegacySse(Arc::new(backend)), timeout)
    }

    /// A REST API at `endpoint` whose operations `api` describes, authorized as `access` says.
    pub fn openapi(endpoint: BackendEndpoint, api: Arc<Api>, idempotency: Idempotency, access: Arc<Access>) -> Self {
        BackendTarget::Rest(RestTarget { endpoint, api, idempotency: Arc::new(idempotency), access })
    }

    fn duplex(transport: DuplexTransport, timeout: Duration) -> Self {
        BackendTarget::Duplex(DuplexTarget { transport, timeout, revision: 0 })
    }

    /// The same target, made by configuration revision `revision` (0 until a reload): sessions the slot holds
    /// from an older revision are replaced before this target is used.
    pub fn with_revision(self, revision: u64) -> Self {
        match self {
            BackendTarget::Http(endpoint) => BackendTarget::Http(BackendEndpoint { revision, ..endpoint }),
            BackendTarget::Duplex(target) => BackendTarget::Duplex(DuplexTarget { revision, ..target }),
            BackendTarget::Rest(target) => {
                BackendTarget::Rest(RestTarget { endpoint: BackendEndpoint { revision, ..target.endpoint }, ..target })
            }
        }
    }

    pub(super) fn revision(&self) -> u64 {
        match self {
            BackendTarget::Http(endpoint) | BackendTarget::Rest(RestTarget { endpoint, .. }) => endpoint.revision,
            BackendTarget::Duplex(target) => target.revision,
        }
    }

    /// A REST API's compiled document and base URL (`None` for an MCP backend).
    pub fn api(&self) -> Option<(&Arc<Api>, &Url)> {
        match self {
            BackendTarget::Rest(target) => Some((&target.api, target.endpoint.url())),
            BackendTarget::Http(_) | BackendTarget::Duplex(_) => None,
        }
    }

    /// How long one call may take.
    pub fn timeout(&self) -> Duration {
        match self {
            BackendTarget::Http(endpoint) | BackendTarget::Rest(RestTarget { endpoint, .. }) => endpoint.timeout,
            BackendTarget::Duplex(target) => target.timeout,
        }
    }

    /// Where the backend is, as a CLIENT span records it: `tcp` and the URL's host and port for the HTTP
    /// transports, `pipe` for stdio.
    pub fn peer(&self) -> Peer {
        let url = match self {
            BackendTarget::Http(endpoint) | BackendTarget::Rest(RestTarget { endpoint, .. }) => endpoint.url(),
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::LegacySse(backend), .. }) => &backend.url,
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::Stdio(_), .. }) => {
                return Peer { transport: "pipe", address: None, port: None };
            }
        };
        Peer { transport: "tcp", address: url.host_str().map(str::to_owned), port: url.port_or_known_default() }
    }

    /// Where the backend is, as the sentence of its failures names it ([`super::Failure`]).
    pub fn place(&self) -> Place {
        match self {
            BackendTarget::Http(endpoint) | BackendTarget::Rest(RestTarget { endpoint, .. }) => {
                Place::url(endpoint.url())
            }
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::LegacySse(backend), .. }) => {
                Place::url(&backend.url)
            }
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::Stdio(launcher), .. }) => launcher.place(),
        }
    }

    /// How long a stdio backend's process may sit idle before it is stopped (`None`: sessions are not reaped).
    pub(super) fn idle_timeout(&self) -> Option<Duration> {
        match self {
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::Stdio(launcher), .. }) => {
                Some(launcher.backend().idle_timeout)
            }
            _ => None,
        }
    }

    /// The transport as the configuration names it (`transport = "mcp" | "stdio" | "sse" | "openapi"`).
    pub fn transport(&self) -> &'static str {
        match self {
            BackendTarget::Http(_) => "mcp",
            BackendTarget::Rest(_) => "openapi",
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::Stdio(_), .. }) => "stdio",
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::LegacySse(_), .. }) => "sse",
        }
    }

    /// Whether a stdio backend's processes start (`None` for other transports): what `/readyz` reports.
    pub fn spawn_status(&self) -> Option<SpawnStatus> {
        match self {
            BackendTarget::Duplex(DuplexTarget { transport: DuplexTransport::Stdio(launcher), .. }) => {
                Some(launcher.status())
            }
            _ => None,
        }
    }
}

/// Identifies one slot of the session table: the (holder, backend) pair, and the owner the slot counts against
/// for fairness. The owner is not part of the slot's identity (equality and hashing ignore it): an agent session
/// may come back from another address, and must still find its backend session.
#[derive(Debug, Clone)]
pub struct SlotKey {
    pub holder: SessionHolder,
    pub backend: Arc<str>,
    /// Who the slot counts against: the principal, or `anonymous@<address>` (see the router's `Caller`).
    pub owner: Arc<str>,
}

impl SlotKey {
    /// A slot owned by its own holder.
    pub fn new(holder: SessionHolder, backend: &str) -> Self {
        Self { owner: holder.to_string().into(), holder, backend: backend.into() }
    }

    #[cfg(test)]
    pub fn owned_by(mut self, owner: &str) -> Self {
        self.owner = owner.into();
        self
    }
}

impl PartialEq for SlotKey {
    fn eq(&self, other: &Self) -> bool {
        self.holder == other.holder && self.backend == other.backend
    }
}

impl Eq for SlotKey {}

impl std::hash::Hash for SlotKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.holder.hash(state);
        self.backend.hash(state);
    }
}
