//! The pinning keys of a `[[backends]]` entry: `pin`, `pin_new`, `screen`, `refresh` and `max_description` — how
//! the gateway treats a tool or prompt definition that changed since it was first trusted, one that is new, and
//! one that looks suspicious (docs/governance.md, *Pinned tool definitions*).
//!
//! Rules: the three modes are closed vocabularies (an unknown value is serde's "unknown variant" error naming the
//! key); `refresh` is a positive duration (periodic rediscovery, default 10 minutes); `max_description` a byte
//! size of at least 1 byte (default 4 KiB). Defaults: `pin = "strict"`, `pin_new = "accept"`, `screen = "warn"`.

use std::time::Duration;

use serde::Deserialize;

use super::fields::{Fault, KeyPath, optional, optional_size};
use super::values::{Expected, SizeInput, parse_positive_duration};

/// How often a discovered backend is rediscovered when nothing else asks for it.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(600);
/// The longest tool or prompt description accepted without a finding.
pub const DEFAULT_MAX_DESCRIPTION: usize = 4 * 1024;
/// The largest `max_description` accepted: beyond it the check means nothing.
const MAX_MAX_DESCRIPTION: u64 = 1024 * 1024;

/// `pin`: what a changed definition does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinMode {
    /// The changed tool is quarantined until an operator approves the change.
    #[default]
    Strict,
    /// The changed tool is served; the change is logged and counted.
    Warn,
    /// Definitions are not pinned.
    Off,
}

/// `pin_new`: what a tool that was not there before does (after the backend's first discovery).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinNew {
    #[default]
    Accept,
    Quarantine,
}

/// `screen`: what a definition flagged as suspicious at first trust does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScreenMode {
    #[default]
    Warn,
    Quarantine,
}

/// A backend's validated pinning keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinConfig {
    pub pin: PinMode,
    pub pin_new: PinNew,
    pub screen: ScreenMode,
    /// Periodic rediscovery.
    pub refresh: Duration,
    /// Longest description (bytes) before screening flags it.
    pub max_description: usize,
}

impl Default for PinConfig {
    fn default() -> Self {
        Self {
            pin: PinMode::default(),
            pin_new: PinNew::default(),
            screen: ScreenMode::default(),
            refresh: DEFAULT_REFRESH,
            max_description: DEFAULT_MAX_DESCRIPTION,
        }
    }
}

/// The pinning keys of a backend's raw table, as written.
pub(super) struct PinKeys<'a> {
    pub(super) pin: Option<PinMode>,
    pub(super) pin_new: Option<PinNew>,
    pub(super) screen: Option<ScreenMode>,
    pub(super) refresh: Option<&'a str>,
    pub(super) max_description: Option<&'a SizeInput>,
}

/// Validates the pinning keys of the backend entry at `entry`.
pub(super) fn build(entry: &KeyPath, raw: &PinKeys<'_>) -> Result<PinConfig, Fault> {
    let defaults = PinConfig::default();
    let refresh = optional(&entry.key("refresh"), raw.refresh, parse_positive_duration)?;
    let max_description = optional_size(&entry.key("max_description"), raw.max_description, check_max)?;
    Ok(PinConfig {
        pin: raw.pin.unwrap_or(defaults.pin),
        pin_new: raw.pin_new.unwrap_or(defaults.pin_new),
        screen: raw.screen.unwrap_or(defaults.screen),
        refresh: refresh.unwrap_or(defaults.refresh),
        max_description: max_description.unwrap_or(defaults.max_description),
    })
}

fn check_max(bytes: u64) -> Result<usize, Expected> {
    match bytes {
        1..=MAX_MAX_DESCRIPTION => usize::try_from(bytes).map_err(|_| "a smaller size".into()),
        _ => Err("a size from 1 byte to 1MiB such as \"4KiB\"".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_description_is_bounded() {
        assert_eq!(check_max(4096), Ok(4096));
        assert!(check_max(0).is_err());
        assert!(check_max(MAX_MAX_DESCRIPTION + 1).is_err());
    }
}
