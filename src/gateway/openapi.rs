//! The OpenAPI documents of `transport = "openapi"` backends, read, compiled and matched with each backend's
//! credential and OAuth client (which operation carries what) before their targets are built:
//! at start (so `serve` and `check` refuse a document that cannot be used, with its JSON pointer) and by every
//! reload (so a reload with such a document is refused and changes nothing, and an edited document replaces its
//! backend).

use std::collections::HashMap;
use std::sync::Arc;

use reqwest::Url;

use crate::backend::mcp_client::BackendTarget;
use crate::backend::openapi::{
    self, Access, Api, CredentialPlace, Idempotency, Offer, Selection, SpecError, SpecSource,
};
use crate::config::{BackendConfig, Config, CredentialTarget, Endpoint, OpenApiConfig, SpecLocation};

/// Each openapi backend's compiled document and base URL, by backend name.
#[derive(Default)]
pub(super) struct Apis(HashMap<String, LoadedApi>);

pub(super) struct LoadedApi {
    pub(super) api: Arc<Api>,
    pub(super) url: Url,
    /// What each operation's requests carry, from the document's security requirements and the configuration.
    pub(super) access: Arc<Access>,
}

/// A backend's document that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("backend `{backend}`: the OpenAPI document {source_name} cannot be used: {error}")]
pub struct ApiError {
    backend: String,
    source_name: String,
    error: SpecError,
}

impl Apis {
    /// Reads and compiles the document of every openapi backend of `config`.
    pub(super) async fn load(config: &Config) -> Result<Apis, ApiError> {
        let mut apis = HashMap::new();
        for backend in &config.backends {
            let Endpoint::OpenApi(settings) = &backend.endpoint else { continue };
            let source = source(&settings.spec);
            let failed = |error| ApiError { backend: backend.name.clone(), source_name: source.to_string(), error };
            let api = openapi::load(&source, &selection(settings)).await.map_err(failed)?;
            let url = openapi::base_url(settings.url.as_ref(), &api, &source).map_err(failed)?;
            let access = Access::new(&api, offer(backend)).map_err(failed)?;
            apis.insert(backend.name.clone(), LoadedApi { api: Arc::new(api), url, access: Arc::new(access) });
        }
        Ok(Apis(apis))
    }

    pub(super) fn get(&self, backend: &BackendConfig) -> Option<&LoadedApi> {
        self.0.get(&backend.name)
    }

    /// The backends whose loaded document or base URL differs from what their running target serves.
    pub(super) fn changed(&self, running: &HashMap<Arc<str>, BackendTarget>) -> Vec<String> {
        let differs = |name: &String, loaded: &LoadedApi| match running.get(name.as_str()).and_then(BackendTarget::api)
        {
            Some((api, url)) => **api != *loaded.api || *url != loaded.url,
            None => false,
        };
        self.0.iter().filter(|(name, loaded)| differs(name, loaded)).map(|(name, _)| name.clone()).collect()
    }
}

fn source(spec: &SpecLocation) -> SpecSource {
    match spec {
        SpecLocation::File(path) => SpecSource::File(path.clone()),
        SpecLocation::Url(url) => SpecSource::Url(url.clone()),
    }
}

fn selection(settings: &OpenApiConfig) -> Selection {
    Selection { allow: settings.allow.clone(), deny: settings.deny.clone() }
}

/// What `backend`'s configuration offers to fill the document's security schemes.
fn offer(backend: &BackendConfig) -> Offer {
    let credential = backend.credential.as_ref().map(|credential| {
        let place = match &credential.target {
            CredentialTarget::Header(header) => CredentialPlace::Header(header.clone()),
            CredentialTarget::Scheme(scheme) => CredentialPlace::Scheme(scheme.clone()),
        };
        (place, credential.value.clone())
    });
    Offer { credential, oauth: backend.oauth.is_some() }
}

/// When a backend's requests carry the claim's key, and when they are retried.
pub(super) fn idempotency(settings: &OpenApiConfig) -> Idempotency {
    Idempotency {
        header: settings.idempotency_header.clone(),
        operations: settings.idempotent_operations.clone(),
        retries: settings.idempotent_retries,
        retry_idempotent_methods: settings.retry_idempotent_methods,
    }
}
