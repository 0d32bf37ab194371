//! [`SessionHolder`]: whom a backend session is held for. The front decides it per request, the router puts it in
//! the session table's key, and the backend client hands it back with every message a backend sends outside a
//! call, so the front knows where such a message goes.
//!
//! Rules: the four holders are told apart by their variant, never by the form of a string, so an agent's key can
//! never name the gateway's own sessions or another kind of holder. The text form ([`fmt::Display`]) is for logs
//! and for the ledger's `agent_session` column; nothing reads it back.

use std::fmt;
use std::sync::Arc;

/// Whom a backend session is held for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SessionHolder {
    /// An agent session of the session era, by its stable key (not its token).
    Agent(Arc<str>),
    /// An agent of the sessionless 2026-07-28 era, by its principal (for unauthenticated agents, told apart by
    /// address as the fairness rule does).
    Principal(Arc<str>),
    /// The gateway itself, discovering a backend's tools, resources and prompts.
    Catalog,
    /// Every agent at once: one session for a backend that is not to be opened per agent.
    Shared,
}

impl SessionHolder {
    /// An agent session's holder.
    pub fn agent(key: &str) -> SessionHolder {
        SessionHolder::Agent(key.into())
    }
}

impl fmt::Display for SessionHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionHolder::Agent(key) => f.write_str(key),
            SessionHolder::Principal(principal) => write!(f, "principal:{principal}"),
            SessionHolder::Catalog => f.write_str("switchyard/catalog"),
            SessionHolder::Shared => f.write_str("switchyard/shared"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_that_print_alike_are_still_different_keys() {
        let agent = SessionHolder::agent("switchyard/catalog");
        assert_eq!(agent.to_string(), SessionHolder::Catalog.to_string());
        assert_ne!(agent, SessionHolder::Catalog, "an agent's key cannot name the gateway's own session");
        assert_ne!(SessionHolder::agent("alice"), SessionHolder::Principal("alice".into()));
        assert_eq!(SessionHolder::Principal("alice".into()).to_string(), "principal:alice");
    }
}
