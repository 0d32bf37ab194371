//! The policy model: one rule decides both what a principal sees in lists and what it may use.
//!
//! Rules:
//! - No policy at all: every principal may use everything (the configuration without `[[policies]]`).
//! - Otherwise a principal may use a tool or prompt (by its exposed name) only if some policy that applies to
//!   it allows the name and no policy that applies to it denies it: deny wins, and a principal no policy
//!   applies to may use nothing.
//! - Before a backend's tools are known (nobody has authorized it yet), a principal may be granted some of them
//!   when a policy that applies to it allows some name with the backend's prefix and none denies every such
//!   name ([`Grants::some_name_under`]).
//! - A backend's resources (and resource templates) are granted by a policy that applies to the principal and
//!   lists the backend (or `*`) in `backends`; there is no deny for resources.
//! - A tool call needs a person's approval when a policy that applies to the principal lists the tool's exposed
//!   name in `approve` ([`Grants::needs_approval`]); approving never grants: the tool must be usable first.
//!   Whether any policy has `approve` globs is worked out once, so a configuration without them pays nothing.
//! - A policy applies to a principal when one of its subjects is `*`, the principal's name, or a group of the
//!   principal. Names and groups compare exactly (case matters, as in the claims they come from).

use crate::glob::Glob;

use super::Principal;

/// Who a policy applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Anyone,
    Principal(String),
    Group(String),
}

impl Subject {
    /// Whether `principal` is this subject (by name, or by a group of this very request's credential).
    pub fn matches(&self, principal: &Principal) -> bool {
        match self {
            Subject::Anyone => true,
            Subject::Principal(name) => *name == principal.name,
            Subject::Group(group) => principal.groups.contains(group),
        }
    }
}

/// One policy, lowered from `[[policies]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub subjects: Vec<Subject>,
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
    /// Tools whose calls need an approval first.
    pub approve: Vec<Glob>,
    /// Backend names whose resources are granted; `*` grants every backend's.
    pub backends: Vec<String>,
}

impl Policy {
    fn applies_to(&self, principal: &Principal) -> bool {
        self.subjects.iter().any(|subject| subject.matches(principal))
    }
}

/// Every configured policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    policies: Vec<Policy>,
    /// Whether some policy has `approve` globs.
    approvals: bool,
}

impl Policies {
    pub fn new(policies: Vec<Policy>) -> Self {
        let approvals = policies.iter().any(|policy| !policy.approve.is_empty());
        Self { policies, approvals }
    }

    /// Whether some policy has `approve` globs (some call may wait for an approval).
    pub fn any_approvals(&self) -> bool {
        self.approvals
    }

    /// What `principal` may use; select once per request, then ask per name (list filtering).
    pub fn for_principal(&self, principal: &Principal) -> Grants<'_> {
        let applicable = if self.policies.is_empty() {
            None
        } else {
            Some(self.policies.iter().filter(|policy| policy.applies_to(principal)).collect())
        };
        Grants { applicable, approvals: self.approvals }
    }

    #[cfg(test)]
    pub fn may_use_tool(&self, principal: &Principal, exposed_name: &str) -> bool {
        self.for_principal(principal).tool(exposed_name)
    }

    #[cfg(test)]
    pub fn may_use_prompt(&self, principal: &Principal, exposed_name: &str) -> bool {
        self.for_principal(principal).prompt(exposed_name)
    }

    #[cfg(test)]
    pub fn may_use_backend_resources(&self, principal: &Principal, backend: &str) -> bool {
        self.for_principal(principal).backend_resources(backend)
    }
}

/// The policies that apply to one principal.
#[derive(Debug)]
pub struct Grants<'a> {
    /// `None` when no policy is configured at all (everything is allowed).
    applicable: Option<Vec<&'a Policy>>,
    /// Whether some policy (applicable or not) has `approve` globs: when none has, no call needs an approval.
    approvals: bool,
}

impl Grants<'_> {
    pub fn tool(&self, exposed_name: &str) -> bool {
        self.name(exposed_name)
    }

    /// Prompts obey the same allow and deny lists as tools (their exposed names follow the same rules).
    pub fn prompt(&self, exposed_name: &str) -> bool {
        self.name(exposed_name)
    }

    /// Whether a tool or prompt exposed as `<prefix>…` may be granted, its name not known yet (a backend nobody
    /// has listed): some policy allows some such name, and none denies them all.
    pub fn some_name_under(&self, prefix: &str) -> bool {
        let Some(applicable) = &self.applicable else {
            return true;
        };
        let globs = |pick: fn(&Policy) -> &[Glob]| applicable.iter().flat_map(move |policy| pick(policy));
        globs(|policy| &policy.allow).any(|glob| glob.matches_some_name_starting(prefix))
            && !globs(|policy| &policy.deny).any(|glob| glob.matches_every_name_starting(prefix))
    }

    /// Whether a call of the tool `exposed_name` needs a person's approval first: one flag test when no policy
    /// has `approve` globs.
    pub fn needs_approval(&self, exposed_name: &str) -> bool {
        if !self.approvals {
            return false;
        }
        let Some(applicable) = &self.applicable else {
            return false;
        };
        applicable.iter().any(|policy| policy.approve.iter().any(|glob| glob.matches(exposed_name)))
    }

    pub fn backend_resources(&self, backend: &str) -> bool {
        let Some(applicable) = &self.applicable else {
            return true;
        };
        applicable.iter().any(|policy| policy.backends.iter().any(|name| name == "*" || name == backend))
    }

    fn name(&self, name: &str) -> bool {
        let Some(applicable) = &self.applicable else {
            return true;
        };
        let matches = |globs: &[Glob]| globs.iter().any(|glob| glob.matches(name));
        applicable.iter().any(|policy| matches(&policy.allow)) && !applicable.iter().any(|policy| matches(&policy.deny))
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
