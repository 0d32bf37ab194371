//! The `[approvals]` section: who may approve the tool calls `[[policies]] approve` holds for a person, how
//! long a request stays open, how long the agent's request is held for a quick answer, and where new requests
//! are announced.
//!
//! Rules:
//! - `approvers` lists principal names and `group:NAME` entries (no `*`: approving is never everyone's). The
//!   caller itself never approves its own call, whatever the list says (the router and the CLI check that).
//! - `timeout` (default `1h`) and `wait` (default `30s`) are positive durations; a `wait` longer than `timeout`
//!   is refused as a mistake (the agent would be held past the request's expiry).
//! - `notify_url` is an http(s) URL without credentials, query or fragment; absent: nobody is notified.
//! - A policy with `approve` globs but no `[approvals]` section is valid: the defaults apply and any operator with
//!   the ledger (or the console) decides.

use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;

use super::fields::{Fault, KeyPath, list, optional, quoted};
use super::policy::{PolicySubject, parse_subject};
use super::values::{Expected, duration_text, parse_http_url, parse_positive_duration};

pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3600);
pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(30);

/// The validated `[approvals]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalsConfig {
    /// Who may decide: principals by name and groups (never [`PolicySubject::Anyone`]).
    pub approvers: Vec<PolicySubject>,
    /// How long a request waits for a decision before it expires (as denied).
    pub timeout: Duration,
    /// How long the agent's request is held open for a quick decision.
    pub wait: Duration,
    /// Where each new request is POSTed as JSON.
    pub notify_url: Option<Url>,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self { approvers: Vec::new(), timeout: DEFAULT_APPROVAL_TIMEOUT, wait: DEFAULT_APPROVAL_WAIT, notify_url: None }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawApprovals {
    approvers: Vec<String>,
    #[serde(deserialize_with = "duration_text")]
    timeout: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    wait: Option<String>,
    notify_url: Option<String>,
}

/// Validates the `[approvals]` section read from the file.
pub(super) fn build(raw: &RawApprovals) -> Result<ApprovalsConfig, Fault> {
    let section = KeyPath::root().key("approvals");
    let defaults = ApprovalsConfig::default();
    let config = ApprovalsConfig {
        approvers: list(&section.key("approvers"), &raw.approvers, parse_approver)?,
        timeout: optional(&section.key("timeout"), raw.timeout.as_deref(), parse_positive_duration)?
            .unwrap_or(defaults.timeout),
        wait: optional(&section.key("wait"), raw.wait.as_deref(), parse_positive_duration)?.unwrap_or(defaults.wait),
        notify_url: optional(&section.key("notify_url"), raw.notify_url.as_deref(), |text| {
            parse_http_url(text, "https://hooks.example.com/switchyard")
        })?,
    };
    if config.wait > config.timeout {
        return Err(Fault::invalid(
            &section.key("wait"),
            raw.wait.as_deref().map(quoted),
            "a duration no longer than `approvals.timeout` (the request would expire while the agent waits)".into(),
        ));
    }
    Ok(config)
}

fn parse_approver(text: &str) -> Result<PolicySubject, Expected> {
    match parse_subject(text) {
        Ok(PolicySubject::Anyone) | Err(_) => {
            Err("a principal name or \"group:NAME\" (not \"*\": approving is never everyone's)".into())
        }
        Ok(subject) => Ok(subject),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn load(text: &str) -> Result<Config, String> {
        Config::from_toml_str(text, "t.toml", Vec::<(String, String)>::new()).map_err(|error| error.to_string())
    }

    #[test]
    fn defaults_apply_without_the_section() {
        let config = load("").expect("valid");
        assert_eq!(config.approvals, ApprovalsConfig::default());
        assert_eq!(config.approvals.timeout, Duration::from_secs(3600));
        assert_eq!(config.approvals.wait, Duration::from_secs(30));
    }

    #[test]
    fn every_key_is_read() {
        let config = load(
            "[approvals]\napprovers = [\"alice\", \"group:oncall\"]\ntimeout = \"10m\"\nwait = \"5s\"\n\
             notify_url = \"https://hooks.example.com/x\"\n",
        )
        .expect("valid");
        let approvals = config.approvals;
        assert_eq!(
            approvals.approvers,
            vec![PolicySubject::Principal("alice".into()), PolicySubject::Group("oncall".into())]
        );
        assert_eq!((approvals.timeout, approvals.wait), (Duration::from_secs(600), Duration::from_secs(5)));
        assert_eq!(approvals.notify_url.map(String::from).as_deref(), Some("https://hooks.example.com/x"));
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        let cases = [
            ("approvers = [\"*\"]", "approvals.approvers[0]", "not \"*\""),
            ("timeout = \"0s\"", "approvals.timeout", "duration"),
            ("wait = \"2h\"", "approvals.wait", "no longer than `approvals.timeout`"),
            ("notify_url = \"ftp://x\"", "approvals.notify_url", "http or https URL"),
            ("notify_url = \"https://u:p@x\"", "approvals.notify_url", "without credentials"),
            ("approver = []", "approvals.approver", "expected one of `approvers`"),
        ];
        for (line, key, expected) in cases {
            let error = load(&format!("[approvals]\n{line}\n")).expect_err(line);
            assert!(error.contains(key) && error.contains(expected), "{line}: {error}");
        }
    }
}
