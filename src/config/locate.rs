//! Which configuration file a command reads, and the one `init` and `import --write` write: `--config`, else the
//! file `SWITCHYARD_CONFIG` names, else `./switchyard.toml` (docs/configuration.md, "Which file").
//!
//! Rules: a file named by `--config` or `SWITCHYARD_CONFIG` must exist, and a missing one is reported with what
//! named it; an empty `SWITCHYARD_CONFIG` counts as unset; without either, a missing `./switchyard.toml` means no
//! file (the caller's demo).

use std::path::{Path, PathBuf};

use super::fields::KeyPath;
use super::server::{self, ServerConfig};
use super::{CONFIG_ENV, Config, ConfigError, DEFAULT_CONFIG_FILE, anchor, collect_env, expand, process_env, read};

impl Config {
    /// The configuration to run with, from the file [`Config::locate`] finds, or `None` (the caller falls back
    /// to [`Config::default_demo`]).
    pub fn find(explicit: Option<&Path>) -> Result<Option<(PathBuf, Config)>, ConfigError> {
        Config::locate(explicit)?.map(|path| Config::load(&path).map(|config| (path, config))).transpose()
    }

    /// The configuration file to use: `explicit` (`--config`), else the file `SWITCHYARD_CONFIG` names (either
    /// must exist), else `./switchyard.toml` if present, else `None`.
    pub fn locate(explicit: Option<&Path>) -> Result<Option<PathBuf>, ConfigError> {
        locate_in(explicit, std::env::var(CONFIG_ENV).ok().as_ref(), Path::new(DEFAULT_CONFIG_FILE))
    }

    /// The file `init` and `import --write` write to: `explicit`, else the file `SWITCHYARD_CONFIG` names, else
    /// `./switchyard.toml`; it need not exist.
    pub fn target(explicit: Option<&Path>) -> PathBuf {
        named(explicit, std::env::var(CONFIG_ENV).ok().as_ref())
            .map_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE), |(path, _)| path)
    }

    /// The `[server]` and `[ledger]` sections of the configuration [`Config::locate`] finds (else the defaults),
    /// with the `SWITCHYARD_*` overrides, validated: the commands that only read the ledger or settle a call in it
    /// need nothing else, so the rest of the file (and every backend's secret) is not read.
    pub fn find_ledger(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        Config::find_sections(explicit, &["server", "ledger"])
    }

    /// The top-level `sections` of the configuration [`Config::locate`] finds (else the defaults), with the
    /// `SWITCHYARD_*` overrides, validated as [`Config::find_ledger`] validates its two: for commands that need a
    /// few sections that do not depend on the rest (`[[backends]]` above all, whose secrets they do not need).
    pub fn find_sections(explicit: Option<&Path>, sections: &[&str]) -> Result<Config, ConfigError> {
        let env = collect_env(process_env());
        let Some(path) = locate_in(explicit, env.get(CONFIG_ENV), Path::new(DEFAULT_CONFIG_FILE))? else {
            return Config::default_demo().with_env_overrides(env);
        };
        let (file, text) = read(&path)?;
        let mut table: toml::Table = text.parse().map_err(|error| ConfigError::syntax(&file, &text, &error))?;
        table.retain(|section, _| sections.contains(&section));
        Config::parse(&table.to_string(), &file, path.parent(), env)
    }

    /// The data directory the configuration [`Config::locate`] finds names, with the `SWITCHYARD_*` overrides
    /// applied, read without validating the rest of the file: `switchyard reload` finds the running gateway by it
    /// and leaves judging the file to that gateway, whose environment resolves the credentials.
    pub fn locate_data_dir(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
        let env = collect_env(process_env());
        let mut server = ServerConfig::default();
        if let Some(path) = locate_in(explicit, env.get(CONFIG_ENV), Path::new(DEFAULT_CONFIG_FILE))? {
            let (file, text) = read(&path)?;
            let mut table: toml::Table = text.parse().map_err(|error| ConfigError::syntax(&file, &text, &error))?;
            if let Some(toml::Value::Table(section)) = table.get_mut("server")
                && let Some(dir) = section.get_mut("data_dir")
            {
                let key = KeyPath::root().key("server").key("data_dir");
                expand::expand_value(dir, &key, &env).map_err(|fault| fault.in_file(&file))?;
            }
            anchor::anchor(&mut table, path.parent().unwrap_or(Path::new("")));
            let configured = table.get("server").and_then(|server| server.get("data_dir")?.as_str());
            if let Some(dir) = configured {
                server.data_dir = PathBuf::from(dir);
            }
        }
        server::apply_env(&mut server, &env)?;
        Ok(server.data_dir)
    }
}

/// The file named by `explicit` or by `from_env` (the value of `SWITCHYARD_CONFIG`; empty counts as unset), and
/// what named it.
fn named(explicit: Option<&Path>, from_env: Option<&String>) -> Option<(PathBuf, &'static str)> {
    match (explicit, from_env.filter(|value| !value.is_empty())) {
        (Some(path), _) => Some((path.to_path_buf(), "--config")),
        (None, Some(path)) => Some((PathBuf::from(path), CONFIG_ENV)),
        (None, None) => None,
    }
}

pub(super) fn locate_in(
    explicit: Option<&Path>,
    from_env: Option<&String>,
    default_file: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    match named(explicit, from_env) {
        Some((path, named_by)) if !path.exists() => {
            Err(ConfigError::Missing { file: path.display().to_string(), named_by })
        }
        Some((path, _)) => Ok(Some(path)),
        None => Ok(default_file.is_file().then(|| default_file.to_path_buf())),
    }
}
