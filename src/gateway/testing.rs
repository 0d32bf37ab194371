//! Hooks for the integration tests (`tests/it`) only: the gateway lowers every backend itself when it starts or
//! reloads, so nothing in the crate needs one backend lowered on its own. Production code must not call these;
//! keeping them here, apart from the composition root's own API, keeps what the gateway uses visible to `dead_code`.

use crate::backend::legacy_sse::LegacySseBackend;
use crate::backend::stdio::StdioBackend;
use crate::config::{BackendConfig, Endpoint, Transport};

/// The stdio module's own description of a stdio backend (`None` for other transports).
pub fn stdio_backend(backend: &BackendConfig) -> Option<StdioBackend> {
    let Endpoint::Process(stdio) = &backend.endpoint else { return None };
    Some(super::backends::lower_stdio(backend, stdio))
}

/// The legacy SSE module's own description of an sse backend (`None` for other transports).
pub fn legacy_sse_backend(backend: &BackendConfig) -> Option<LegacySseBackend> {
    let (Transport::Sse, Endpoint::Url(url)) = (backend.transport, &backend.endpoint) else { return None };
    Some(super::backends::lower_legacy_sse(backend, url))
}
