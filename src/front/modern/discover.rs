//! `server/discover` (2026-07-28 server/discover, basic §"Versioning"): what the gateway offers, asked without a
//! session.
//!
//! Rules: the capabilities are the gateway's own, the same the session era's `initialize` declares
//! ([`crate::front::initialize::capabilities`]), with the tasks extension instead of the `tasks` capability; `supportedVersions` lists every version the gateway serves to
//! agents — this era's and the session era's. The gateway ends the protocol at the front and speaks to each
//! backend through its backend client, so which versions agents may use does not depend on what the backends
//! speak (see docs/protocol-eras.md, "Both eras on one endpoint"). The result is shaped like every other
//! ([`super::shape`]): `resultType`, the gateway's caching hints, `serverInfo` in `_meta`.

use serde_json::{Value, json};

use super::shape;
use crate::front::Front;
use crate::front::initialize::capabilities;
use crate::mcp::method::Method;
use crate::mcp::{MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS};
use crate::router::TASKS_EXTENSION;

/// Every version agents may use, newest first.
fn supported_versions() -> Vec<&'static str> {
    MODERN_PROTOCOL_VERSIONS.into_iter().chain(SUPPORTED_PROTOCOL_VERSIONS).collect()
}

impl Front {
    /// The `DiscoverResult`.
    pub(super) fn discover(&self) -> Value {
        let mut capabilities = capabilities();
        if self.router.offers_tasks() {
            capabilities["extensions"] = json!({ TASKS_EXTENSION: {} });
        }
        let found = json!({
            "supportedVersions": supported_versions(),
            "capabilities": capabilities,
            "instructions": self.router.instructions(),
        });
        shape::result(&Method::ServerDiscover, found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_version_is_offered_newest_first() {
        assert_eq!(supported_versions(), ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
    }
}
