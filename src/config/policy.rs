//! The `[[policies]]` list: which principals may use which tools, prompts and backends' resources.
//!
//! Rules:
//! - `principals` names who a policy applies to: a principal's name, `group:NAME`, or `*` (everyone, including
//!   `anonymous`); at least one entry.
//! - `allow` and `deny` are globs over exposed tool and prompt names (the names agents see at `/mcp`);
//!   `backends` lists backends whose resources the policy grants (`*` for all). A policy granting and denying
//!   nothing is refused as a mistake.
//! - `approve` globs (same form as `allow`) name the tools whose calls by the policy's principals wait for a
//!   person's approval (`[approvals]`); they grant nothing by themselves.
//! - `backends` entries must name configured backends, so a typo never silently grants nothing.
//! - How policies combine (no policy: everything allowed; deny wins) is the auth module's rule, not checked here.

use serde::Deserialize;

use super::backend::BackendConfig;
use super::fields::{Fault, KeyPath, list, quoted};
use super::values::{Expected, parse_principal};
use crate::glob::Glob;

/// Who a policy applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySubject {
    /// `*`: every principal.
    Anyone,
    /// A principal by name.
    Principal(String),
    /// `group:NAME`: every principal in the group.
    Group(String),
}

/// A validated `[[policies]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    pub principals: Vec<PolicySubject>,
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
    /// Tools whose calls need an approval first.
    pub approve: Vec<Glob>,
    /// Backend names, or `*` for every backend.
    pub backends: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawPolicy {
    principals: Vec<String>,
    allow: Vec<String>,
    deny: Vec<String>,
    approve: Vec<String>,
    backends: Vec<String>,
}

/// Validates `policies[index]` against the configured backends.
pub(super) fn build(index: usize, raw: &RawPolicy, backends: &[BackendConfig]) -> Result<PolicyConfig, Fault> {
    let entry = KeyPath::root().key("policies").index(index);
    if raw.principals.is_empty() {
        return Err(Fault::invalid(&entry.key("principals"), None, SUBJECT_EXPECTED_LIST.into()));
    }
    let policy = PolicyConfig {
        principals: list(&entry.key("principals"), &raw.principals, parse_subject)?,
        allow: list(&entry.key("allow"), &raw.allow, parse_name_glob)?,
        deny: list(&entry.key("deny"), &raw.deny, parse_name_glob)?,
        approve: list(&entry.key("approve"), &raw.approve, parse_name_glob)?,
        backends: list(&entry.key("backends"), &raw.backends, |name| parse_backend_ref(name, backends))?,
    };
    if policy.allow.is_empty() && policy.deny.is_empty() && policy.approve.is_empty() && policy.backends.is_empty() {
        return Err(Fault::invalid(
            &entry,
            None,
            "a policy with at least one of `allow`, `deny`, `approve` or `backends` (this one grants and denies nothing)"
                .into(),
        ));
    }
    Ok(policy)
}

const SUBJECT_EXPECTED: &str = "a principal name, \"group:NAME\" or \"*\" (everyone)";
const SUBJECT_EXPECTED_LIST: &str =
    "a list of principals the policy applies to: names, \"group:NAME\" or \"*\" (this key is required)";

pub(super) fn parse_subject(text: &str) -> Result<PolicySubject, Expected> {
    if text == "*" {
        return Ok(PolicySubject::Anyone);
    }
    let subject = match text.strip_prefix("group:") {
        Some(group) => parse_principal(group).map(PolicySubject::Group),
        None => parse_principal(text).map(PolicySubject::Principal),
    };
    subject.map_err(|_| SUBJECT_EXPECTED.into())
}

pub(super) fn parse_name_glob(text: &str) -> Result<Glob, Expected> {
    Glob::new(text).map_err(|_| {
        "a non-empty glob over exposed tool and prompt names (`*` matches any run of characters, `?` one)".into()
    })
}

pub(super) fn parse_backend_ref(text: &str, backends: &[BackendConfig]) -> Result<String, Expected> {
    if text == "*" || backends.iter().any(|backend| backend.name == text) {
        return Ok(text.to_owned());
    }
    let names: Vec<String> = backends.iter().map(|backend| quoted(&backend.name)).collect();
    Err(Expected(format!("the name of a configured backend ({}) or \"*\"", names.join(", "))))
}
