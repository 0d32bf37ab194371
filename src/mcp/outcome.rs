//! The values of `_meta["switchyard/outcome"]` on a tool call that did not simply succeed: what an
//! agent may conclude about whether the tool ran.

use std::fmt;

/// The `_meta` member of a `CallToolResult` that carries the [`Outcome`].
pub const OUTCOME_META: &str = "switchyard/outcome";

/// Whether a failed or duplicate tool call ran, as the agent is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The call provably did not run; it is safe to retry.
    NotDelivered,
    /// The call may have run; its effects must be checked.
    Unknown,
    /// The same call is still running.
    InProgress,
    /// The same call completed earlier.
    Completed,
    /// The call waits for a person's approval; it has not run. A retry with its idempotency key gets its result
    /// once approved (and run), or the denial.
    AwaitingApproval,
    /// A person denied the call, or nobody approved it in time; it did not run and never will under this key.
    Denied,
}

impl Outcome {
    /// The value as written in `_meta["switchyard/outcome"]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NotDelivered => "not_delivered",
            Outcome::Unknown => "unknown",
            Outcome::InProgress => "in_progress",
            Outcome::Completed => "completed",
            Outcome::AwaitingApproval => "awaiting_approval",
            Outcome::Denied => "denied",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl From<Outcome> for serde_json::Value {
    fn from(outcome: Outcome) -> Self {
        serde_json::Value::from(outcome.as_str())
    }
}
