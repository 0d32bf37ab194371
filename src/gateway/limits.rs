//! Lowers `[[limits]]` into the router's [`Limits`] (the same way at start and on reload; the router carries the
//! counters of unchanged limits over).

use std::sync::Arc;

use super::access::subject;
use crate::config::{Config, LimitConfig, LimitedCalls};
use crate::router::limits::{Calls, LimitSpec, Limits, Quota, Rate, Repeat};

/// Every configured limit, with fresh counters.
pub fn limits(config: &Config) -> Limits {
    Limits::new(config.limits.iter().map(spec).collect())
}

fn spec(limit: &LimitConfig) -> LimitSpec {
    LimitSpec {
        label: Arc::from(limit.label.as_str()),
        principals: limit.principals.iter().map(subject).collect(),
        calls: match &limit.calls {
            LimitedCalls::Tools(globs) => Calls::Tools(globs.clone()),
            LimitedCalls::Backends(names) => Calls::Backends(names.clone()),
            LimitedCalls::Every => Calls::Every,
        },
        rate: limit.rate.map(|rate| Rate { calls: rate.calls, per: rate.per, burst: rate.burst }),
        quota: limit.quota.map(|quota| Quota { calls: quota.calls, period: quota.period }),
        concurrency: limit.concurrency,
        repeat: limit.repeat.map(|repeat| Repeat { times: repeat.times, window: repeat.window }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_keeps_its_meaning() {
        let text = "[[limits]]\nname = \"search\"\nprincipals = [\"group:ops\"]\ntools = [\"docs__*\"]\n\
                    rate = \"5/s\"\nburst = 10\nquota = 7\nperiod = \"1h\"\nconcurrency = 2\nrepeat = 3\n";
        let config = Config::from_toml_str(text, "test.toml", std::iter::empty::<(String, String)>()).expect("valid");
        let spec = spec(&config.limits[0]);
        assert_eq!(&*spec.label, "search");
        assert_eq!(spec.rate.map(|rate| (rate.calls, rate.burst)), Some((5, 10)));
        assert_eq!(spec.quota.map(|quota| quota.calls), Some(7));
        assert_eq!((spec.concurrency, spec.repeat.map(|repeat| repeat.times)), (Some(2), Some(3)));
        assert!(matches!(spec.calls, Calls::Tools(globs) if globs[0].as_str() == "docs__*"));
    }
}
