//! What a refused request is told: which limit refused it, which part of it, and when to retry.
//!
//! Rules: the sentence names the limit by its label (its `name`, else `limits[INDEX]`) and what it allows, says
//! the call was not sent, and gives the wait in whole seconds, rounded up (at least one: a concurrency limit
//! cannot know when a running call ends).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::limit::LimitSpec;

/// Which part of a limit refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violated {
    Rate,
    Quota,
    Concurrency,
    Repeat,
}

/// A request a limit refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub label: Arc<str>,
    pub violated: Violated,
    /// What the refusing part allows, in words.
    allows: String,
    /// Whole seconds until a retry may succeed (at least 1).
    pub retry_after: u64,
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

impl Refusal {
    pub fn new(spec: &LimitSpec, violated: Violated, wait_ns: u64) -> Refusal {
        let allows = match violated {
            Violated::Rate => spec
                .rate
                .map(|rate| format!("{} calls per {} with bursts of {}", rate.calls, seconds(rate.per), rate.burst)),
            Violated::Quota => spec.quota.map(|quota| format!("{} calls per {}", quota.calls, seconds(quota.period))),
            Violated::Concurrency => spec.concurrency.map(|max| format!("{max} calls in flight at once")),
            Violated::Repeat => spec.repeat.map(|repeat| {
                format!(
                    "the same call with the same arguments {} times within {}",
                    repeat.times,
                    seconds(repeat.window)
                )
            }),
        };
        Refusal {
            label: Arc::clone(&spec.label),
            violated,
            allows: allows.unwrap_or_default(),
            retry_after: wait_ns.div_ceil(NANOS_PER_SECOND).max(1),
        }
    }
}

/// `duration` in its largest whole unit, as the configuration writes it (`1d`, `10m`, `90s`).
fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs();
    let unit =
        [(86_400, "d"), (3_600, "h"), (60, "m")].into_iter().find(|(size, _)| secs > 0 && secs.is_multiple_of(*size));
    match unit {
        Some((size, name)) => format!("{}{name}", secs / size),
        None => format!("{secs}s"),
    }
}

impl fmt::Display for Refusal {
    /// The sentence an agent reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Refusal { label, allows, retry_after, .. } = self;
        let part = match self.violated {
            Violated::Rate => "rate limit",
            Violated::Quota => "quota",
            Violated::Concurrency => "concurrency limit",
            Violated::Repeat => "loop guard",
        };
        write!(
            f,
            "The call was not sent (it did not run): it would exceed the {part} of the gateway's limit `{label}`, \
             which allows {allows}. Retry in {retry_after} seconds."
        )?;
        if self.violated == Violated::Repeat {
            f.write_str(" Repeating it unchanged will not give a different result; change the arguments or stop.")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_read_as_the_configuration_writes_them() {
        let read = |secs| seconds(Duration::from_secs(secs));
        assert_eq!([read(1), read(90), read(600), read(3_600), read(86_400 * 30)], ["1s", "90s", "10m", "1h", "30d"]);
    }
}
