//! Lowering of `[[backends]]` into the parts' own types: the catalog's [`BackendSpec`] (names, prefixes,
//! filters) and the backend client's [`BackendTarget`] (an HTTP endpoint template, a stdio launcher, a legacy
//! SSE backend or a REST API with its loaded document), the router's pinning rules, catalog modes and task backends. Types only; used at start and by every reload, so both build backends the same way.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use http::{HeaderName, HeaderValue};

use super::openapi::{self, Apis};
use crate::backend::legacy_sse::LegacySseBackend;
use crate::backend::mcp_client::{BackendEndpoint, BackendTarget, Era, OAuthBinding};
use crate::backend::oauth::OAuthClient;
use crate::backend::stdio::{Launcher, Sharing, StdioBackend, StdioCommand, StdioOptions};
use crate::catalog::BackendSpec;
use crate::config::{
    BackendConfig, BackendCredential, CatalogMode, Config, Endpoint, OAuthGrant, PinMode, PinNew, ProtocolEra,
    ScreenMode, StdioConfig, StdioSessions, TaskMode, Transport,
};
use crate::router::pins::{self, PinRules};
use crate::router::{CatalogModes, TaskBackends};

pub(super) fn catalog_spec(backend: &BackendConfig) -> BackendSpec {
    let filter = backend.tools.clone();
    BackendSpec {
        name: backend.name.as_str().into(),
        prefix: backend.prefix.clone(),
        exposes: Box::new(move |tool| filter.exposes(tool)),
        resource_prefix: backend.resource_prefix.clone(),
    }
}

/// Each backend's pinning rules (`pin`, `pin_new`, `screen`, `max_description`).
pub(super) fn pin_rules(config: &Config) -> HashMap<Arc<str>, PinRules> {
    let rules = |backend: &BackendConfig| PinRules {
        mode: match backend.pins.pin {
            PinMode::Strict => pins::PinMode::Strict,
            PinMode::Warn => pins::PinMode::Warn,
            PinMode::Off => pins::PinMode::Off,
        },
        quarantine_new: backend.pins.pin_new == PinNew::Quarantine,
        quarantine_flagged: backend.pins.screen == ScreenMode::Quarantine,
        max_description: backend.pins.max_description,
    };
    config.backends.iter().map(|backend| (Arc::from(backend.name.as_str()), rules(backend))).collect()
}

/// How each view offers its tools: `[catalog]` for `/mcp`, and each backend's `catalog_mode` (or `[catalog] mode`)
/// for `/mcp/<backend>`.
pub(super) fn catalog_modes(config: &Config) -> CatalogModes {
    let search = |mode: CatalogMode| mode == CatalogMode::Search;
    let catalog = &config.catalog;
    let backends = config
        .backends
        .iter()
        .filter_map(|backend| Some((backend.name.as_str().into(), search(backend.catalog_mode?))));
    CatalogModes {
        search: search(catalog.mode),
        backends: backends.collect(),
        always: catalog.always.clone(),
        expand: catalog.expand,
        expand_max: catalog.expand_max,
    }
}

/// The backends whose tool calls may run as tasks, by who runs them (`tasks = "gateway"`, `"passthrough"`).
pub(super) fn task_backends(config: &Config) -> TaskBackends {
    let with = |mode: TaskMode| -> HashSet<Arc<str>> {
        let named = config.backends.iter().filter(|backend| backend.tasks == mode);
        named.map(|backend| Arc::from(backend.name.as_str())).collect()
    };
    TaskBackends { gateway: with(TaskMode::Gateway), passthrough: with(TaskMode::Passthrough) }
}

/// How a backend is reached, by its transport: the endpoint template of an HTTP backend (URL, timeout, credential,
/// configured headers), the launcher of a stdio backend's processes (`stdio_options`: one registry of process
/// groups for the whole gateway), or a legacy SSE backend's stream. `anonymous_is_one_user` (no `[auth]`) lets
/// `anonymous` authorize an `authorization_code` backend for itself; otherwise it is every agent without
/// credentials, and refused.
/// (`apis`: the documents of the openapi backends, loaded before; `None` only for an openapi backend whose document
/// was not.)
pub(super) fn target(
    backend: &BackendConfig,
    oauth: Option<&Arc<OAuthClient>>,
    stdio_options: &StdioOptions,
    anonymous_is_one_user: bool,
    apis: &Apis,
) -> Option<BackendTarget> {
    Some(match (&backend.endpoint, backend.transport) {
        (Endpoint::Process(stdio), _) => {
            let launcher = Launcher::new(lower_stdio(backend, stdio), stdio_options.clone());
            BackendTarget::stdio(Arc::new(launcher), backend.timeout)
        }
        (Endpoint::Url(url), Transport::Sse) => {
            BackendTarget::legacy_sse(lower_legacy_sse(backend, url), backend.timeout)
        }
        (Endpoint::Url(url), _) => {
            let mut endpoint = BackendEndpoint::new(url.clone(), backend.timeout).with_era(era(backend.era));
            if let Some((header, value)) = backend.credential.as_ref().and_then(credential_header) {
                endpoint = endpoint.with_credential(header, value);
            }
            BackendTarget::Http(http_endpoint(backend, endpoint, oauth, anonymous_is_one_user))
        }
        (Endpoint::OpenApi(settings), _) => {
            // The credential is placed per operation, as the document's security requirements say.
            let loaded = apis.get(backend)?;
            let endpoint = BackendEndpoint::new(loaded.url.clone(), backend.timeout);
            let endpoint = http_endpoint(backend, endpoint, oauth, anonymous_is_one_user);
            let (api, access) = (Arc::clone(&loaded.api), Arc::clone(&loaded.access));
            BackendTarget::openapi(endpoint, api, openapi::idempotency(settings), access)
        }
    })
}

/// The header and value of a credential configured with `header` (the only kind an MCP backend takes).
fn credential_header(credential: &BackendCredential) -> Option<(HeaderName, HeaderValue)> {
    credential.header().map(|header| (header.clone(), credential.value.expose().clone()))
}

/// `endpoint` with the backend's configured headers and OAuth client.
fn http_endpoint(
    backend: &BackendConfig,
    mut endpoint: BackendEndpoint,
    oauth: Option<&Arc<OAuthClient>>,
    anonymous_is_one_user: bool,
) -> BackendEndpoint {
    for (name, value) in &backend.headers {
        endpoint = endpoint.with_header(name.clone(), value.clone());
    }
    if let (Some(oauth), Some(settings)) = (oauth, &backend.oauth) {
        let binding = OAuthBinding::new(Arc::clone(oauth), &backend.name);
        let shared = settings.grant == OAuthGrant::AuthorizationCode && !anonymous_is_one_user;
        endpoint = endpoint.with_oauth(if shared { binding.refusing_anonymous() } else { binding });
    }
    endpoint
}

pub(super) fn lower_stdio(backend: &BackendConfig, stdio: &StdioConfig) -> StdioBackend {
    let command = StdioCommand {
        program: stdio.command.clone(),
        args: stdio.args.clone(),
        env: stdio.env.iter().map(|(name, value)| (name.clone(), value.value().to_owned())).collect(),
        cwd: stdio.cwd.clone(),
    };
    let sharing = match stdio.sessions {
        StdioSessions::PerAgent => Sharing::PerAgent,
        StdioSessions::Shared => Sharing::Shared,
    };
    StdioBackend {
        name: backend.name.as_str().into(),
        command,
        sharing,
        idle_timeout: stdio.idle_timeout,
        max_processes: stdio.max_processes,
        era: era(backend.era),
    }
}

fn era(era: ProtocolEra) -> Era {
    match era {
        ProtocolEra::Auto => Era::Auto,
        ProtocolEra::Modern => Era::Modern,
        ProtocolEra::Legacy => Era::Legacy,
    }
}

pub(super) fn lower_legacy_sse(backend: &BackendConfig, url: &reqwest::Url) -> LegacySseBackend {
    LegacySseBackend {
        name: backend.name.as_str().into(),
        url: url.clone(),
        credential: backend.credential.as_ref().and_then(credential_header),
        headers: backend.headers.iter().map(|(name, value)| (name.clone(), value.clone())).collect(),
        sharing: Sharing::PerAgent,
    }
}
