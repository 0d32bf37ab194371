//! Tests of the `[[limits]]` section: what each key means once validated, and the message of each bad value.

use std::time::Duration;

use super::super::{Config, ConfigError};
use super::*;

const FILE: &str = "test.toml";
const BACKEND: &str = "[[backends]]\nname = \"docs\"\nurl = \"http://127.0.0.1:9000/mcp\"\n";

fn parse(limit: &str) -> Result<Config, ConfigError> {
    let text = format!("{BACKEND}[[limits]]\nprincipals = [\"*\"]\n{limit}");
    Config::from_toml_str(&text, FILE, std::iter::empty::<(String, String)>())
}

fn limit(text: &str) -> LimitConfig {
    parse(text).expect("a valid limit").limits.remove(0)
}

/// The message of a refused limit, after checking it names the file, `key` and `expected`.
fn refused(text: &str, key: &str, expected: &str) {
    let message = parse(text).expect_err("the limit should be refused").to_string();
    assert!(message.contains(FILE) && message.contains(key), "names {FILE} and {key}: {message}");
    assert!(message.contains(expected), "says {expected:?}: {message}");
}

#[test]
fn a_rate_defaults_its_burst_to_the_rate() {
    let rate = limit("rate = \"5/s\"\n").rate.expect("a rate");
    assert_eq!(rate, RateConfig { calls: 5, per: Duration::from_secs(1), burst: 5 });
    let rate = limit("rate = \"100/m\"\nburst = 20\n").rate.expect("a rate");
    assert_eq!(rate, RateConfig { calls: 100, per: Duration::from_secs(60), burst: 20 });
    assert_eq!(limit("rate = \"7 / h\"\n").rate.expect("a rate").per, Duration::from_secs(3_600));
}

#[test]
fn defaults_name_the_index_count_every_tool_and_fill_periods() {
    let limit = limit("quota = 100\nrepeat = 3\n");
    assert_eq!(limit.label, "limits[0]");
    assert_eq!(limit.calls, LimitedCalls::Tools(vec![Glob::new("*").unwrap()]));
    assert_eq!(limit.quota, Some(QuotaConfig { calls: 100, period: Duration::from_secs(86_400) }));
    assert_eq!(limit.repeat, Some(RepeatConfig { times: 3, window: Duration::from_secs(600) }));
    assert_eq!((limit.rate, limit.concurrency), (None, None));
}

#[test]
fn every_key_is_read() {
    let limit = limit(
        "name = \"paid-api\"\nbackends = [\"docs\"]\nquota = 1000\nperiod = \"30d\"\nconcurrency = 2\n\
         repeat = 3\nrepeat_window = \"1h\"\n",
    );
    assert_eq!(limit.label, "paid-api");
    assert_eq!(limit.calls, LimitedCalls::Backends(vec!["docs".into()]));
    assert_eq!(limit.quota.map(|quota| quota.period), Some(Duration::from_secs(30 * 86_400)));
    assert_eq!(limit.concurrency, Some(2));
    assert_eq!(limit.repeat.map(|repeat| repeat.window), Some(Duration::from_secs(3_600)));
    assert_eq!(self::limit("rate = \"1/s\"\nmethods = [\"*\"]\n").calls, LimitedCalls::Every);
    assert!(matches!(self::limit("rate = \"1/s\"\nmethods = [\"tools/call\"]\n").calls, LimitedCalls::Tools(_)));
}

#[test]
fn bad_rates_and_counts_are_refused_with_the_expected_form() {
    for rate in ["5", "0/s", "5/d", "-1/s", "five/s"] {
        refused(&format!("rate = \"{rate}\"\n"), "limits[0].rate", "a rate such as \"5/s\"");
    }
    refused("rate = \"5/s\"\nburst = 0\n", "limits[0].burst", "a whole number from 1");
    refused("concurrency = -2\n", "limits[0].concurrency", "a whole number from 1");
    refused("quota = 0\n", "limits[0].quota", "a whole number from 1");
    refused("repeat = 3\nrepeat_window = \"500ms\"\n", "limits[0].repeat_window", "at least one second");
    for period in ["30m", "90m", "367d", "soon"] {
        refused(&format!("quota = 5\nperiod = \"{period}\"\n"), "limits[0].period", "whole hours");
    }
}

#[test]
fn a_refinement_without_what_it_refines_is_refused() {
    refused("burst = 5\nconcurrency = 1\n", "limits[0].burst", "only with `rate`");
    refused("period = \"1d\"\nconcurrency = 1\n", "limits[0].period", "only with `quota`");
    refused("repeat_window = \"1m\"\nconcurrency = 1\n", "limits[0].repeat_window", "only with `repeat`");
    refused("name = \"empty\"\n", "limits[0]", "limits nothing");
}

#[test]
fn what_is_counted_must_be_one_clear_set() {
    refused("tools = [\"*\"]\nbackends = [\"docs\"]\nrate = \"1/s\"\n", "limits[0].backends", "not both");
    refused("backends = [\"wiki\"]\nrate = \"1/s\"\n", "limits[0].backends[0]", "a configured backend");
    refused("tools = [\"\"]\nrate = \"1/s\"\n", "limits[0].tools[0]", "glob");
    refused("methods = [\"*\"]\ntools = [\"a\"]\nrate = \"1/s\"\n", "limits[0].tools", "every request");
    refused("methods = [\"tools/list\"]\nrate = \"1/s\"\n", "limits[0].methods", "[\"*\"]");
}

#[test]
fn principals_and_names_follow_their_rules() {
    let text = format!("{BACKEND}[[limits]]\nrate = \"1/s\"\n");
    let message = Config::from_toml_str(&text, FILE, std::iter::empty::<(String, String)>()).unwrap_err();
    assert!(message.to_string().contains("limits[0].principals: expected a list of principals"), "{message}");
    let group = format!("{BACKEND}[[limits]]\nprincipals = [\"group:\"]\nrate = \"1/s\"\n");
    let message = Config::from_toml_str(&group, FILE, std::iter::empty::<(String, String)>()).unwrap_err();
    assert!(message.to_string().contains("limits[0].principals[0] = \"group:\""), "{message}");
    refused("name = \"a b\"\nrate = \"1/s\"\n", "limits[0].name", "letters, digits");
    let twice = format!(
        "{BACKEND}[[limits]]\nname = \"x\"\nprincipals = [\"*\"]\nrate = \"1/s\"\n\
         [[limits]]\nname = \"x\"\nprincipals = [\"*\"]\nquota = 1\n"
    );
    let message = Config::from_toml_str(&twice, FILE, std::iter::empty::<(String, String)>()).unwrap_err();
    assert!(message.to_string().contains("limits[1].name = \"x\": expected a name no other limit uses"), "{message}");
    let unknown = parse("rate = \"1/s\"\nrates = 2\n").unwrap_err().to_string();
    assert!(unknown.contains("rates"), "an unknown key is named: {unknown}");
}
