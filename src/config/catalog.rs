//! The `[catalog]` section: how the tools are offered to agents — every definition in `tools/list` (`mode =
//! "full"`) or two gateway tools that search and call them (`mode = "search"`), which tools a search-mode list
//! still shows (`always`), and whether found tools join the agent session's list (`expand`, `expand_max`).
//! `[[backends]] catalog_mode` (parsed with the backend) overrides `mode` for that backend's own endpoint.
//!
//! Rules: `mode` is `"full"` (default) or `"search"`; `always` globs match exposed names (as policies do);
//! `expand` defaults to true and `expand_max` (default 32) is a whole number from 1 to 1000.

use serde::Deserialize;

use super::fields::{Fault, KeyPath, list};
use super::values::Expected;
use crate::glob::Glob;

/// The most tools a search may add to one session's list, by default.
pub const DEFAULT_EXPAND_MAX: usize = 32;
/// The largest `expand_max` accepted: a session's list grown past this defeats search mode's purpose.
const MAX_EXPAND_MAX: usize = 1000;

/// `mode` / `catalog_mode`: how `tools/list` offers the tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogMode {
    /// Every tool the agent may use is listed.
    #[default]
    Full,
    /// `switchyard__search_tools` and `switchyard__call_tool`, plus the `always` tools.
    Search,
}

/// The validated `[catalog]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogConfig {
    pub mode: CatalogMode,
    /// Exposed names a search-mode `tools/list` shows beside the gateway's two tools.
    pub always: Vec<Glob>,
    /// Whether the tools a search finds join the agent session's `tools/list`.
    pub expand: bool,
    /// The most tools a session's list gains that way (the oldest leaves first).
    pub expand_max: usize,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self { mode: CatalogMode::Full, always: Vec::new(), expand: true, expand_max: DEFAULT_EXPAND_MAX }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawCatalog {
    mode: Option<CatalogMode>,
    always: Vec<String>,
    expand: Option<bool>,
    expand_max: Option<i64>,
}

/// Validates the `[catalog]` section read from the file.
pub(super) fn build(raw: &RawCatalog) -> Result<CatalogConfig, Fault> {
    let section = KeyPath::root().key("catalog");
    let defaults = CatalogConfig::default();
    let expand_max = match raw.expand_max {
        None => defaults.expand_max,
        Some(max) => usize::try_from(max).ok().filter(|max| (1..=MAX_EXPAND_MAX).contains(max)).ok_or_else(|| {
            let expected = format!("a whole number from 1 to {MAX_EXPAND_MAX} (tools a session's list may gain)");
            Fault::invalid(&section.key("expand_max"), Some(max.to_string()), Expected(expected))
        })?,
    };
    Ok(CatalogConfig {
        mode: raw.mode.unwrap_or_default(),
        always: list(&section.key("always"), &raw.always, parse_exposed_glob)?,
        expand: raw.expand.unwrap_or(defaults.expand),
        expand_max,
    })
}

fn parse_exposed_glob(text: &str) -> Result<Glob, Expected> {
    Glob::new(text).map_err(|_| {
        "a non-empty glob pattern over exposed tool names, such as \"github__get_*\" (`*` matches any run of \
         characters, `?` one)"
            .into()
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{CatalogMode, Config};

    fn load(text: &str) -> Result<Config, String> {
        Config::from_toml_str(text, "t.toml", Vec::<(String, String)>::new()).map_err(|error| error.to_string())
    }

    #[test]
    fn defaults_to_full_mode_with_expansion() {
        let catalog = load("").expect("valid").catalog;
        assert_eq!((catalog.mode, catalog.expand, catalog.expand_max), (CatalogMode::Full, true, 32));
        assert!(catalog.always.is_empty());
    }

    #[test]
    fn reads_every_key_and_the_backend_override() {
        let text = "[catalog]\nmode = \"search\"\nalways = [\"demo__echo\"]\nexpand = false\nexpand_max = 5\n\
                    [[backends]]\nname = \"demo\"\nurl = \"http://127.0.0.1:1/mcp\"\ncatalog_mode = \"full\"\n";
        let config = load(text).expect("valid");
        assert_eq!(config.catalog.mode, CatalogMode::Search);
        assert_eq!(config.catalog.always[0].as_str(), "demo__echo");
        assert_eq!((config.catalog.expand, config.catalog.expand_max), (false, 5));
        assert_eq!(config.backends[0].catalog_mode, Some(CatalogMode::Full));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("[catalog]\nmode = \"lazy\"", "catalog.mode"),
            ("[catalog]\nexpand_max = 0", "catalog.expand_max"),
            ("[catalog]\nexpand_max = 5000", "catalog.expand_max"),
            ("[catalog]\nalways = [\"\"]", "catalog.always[0]"),
            ("[catalog]\nsearch = true", "search"),
            (
                "[[backends]]\nname = \"demo\"\nurl = \"http://127.0.0.1:1/mcp\"\ncatalog_mode = \"some\"",
                "backends[0].catalog_mode",
            ),
        ] {
            let error = load(text).expect_err(text);
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
