//! The trace keys of `[telemetry]`, the OpenTelemetry variables, their precedence, and the errors for bad values.

use std::time::Duration;

use super::*;
use crate::config::Config;

fn load(text: &str, env: &[(&str, &str)]) -> Result<TracesConfig, String> {
    Config::from_toml_str(text, "t.toml", env.iter().copied())
        .map(|config| config.telemetry.traces)
        .map_err(|error| error.to_string())
}

fn endpoint(text: &str, env: &[(&str, &str)]) -> Option<String> {
    load(text, env).expect("valid").endpoint.map(String::from)
}

const FILE: &str = "[telemetry]\notlp_endpoint = \"http://collector:4318\"\n";

#[test]
fn traces_are_off_by_default() {
    let traces = load("", &[]).expect("valid");
    assert_eq!(traces, TracesConfig::default());
    assert_eq!(traces.endpoint, None);
    assert_eq!(traces.sampler, TracesSampler { kind: SamplerKind::ParentBasedAlwaysOn, ratio: 1.0 });
    assert_eq!(traces.service_name, "switchyard");
    let demo = Config::default_demo().with_env_overrides([("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]);
    assert_eq!(
        demo.expect("valid").telemetry.traces.endpoint.map(String::from).as_deref(),
        Some("http://c:4318/v1/traces")
    );
}

#[test]
fn the_file_keys_are_read() {
    assert_eq!(endpoint(FILE, &[]).as_deref(), Some("http://collector:4318/v1/traces"));
    let prefixed = "[telemetry]\notlp_endpoint = \"https://otel.example/ingest/\"\n";
    assert_eq!(endpoint(prefixed, &[]).as_deref(), Some("https://otel.example/ingest/v1/traces"));
    let text = "[telemetry]\nservice_name = \"gw-eu\"\ntraces_sampler = \"parentbased_traceidratio\"\ntraces_sampler_arg = 0.25\n";
    let traces = load(text, &[]).expect("valid");
    assert_eq!(traces.service_name, "gw-eu");
    assert_eq!(traces.sampler, TracesSampler { kind: SamplerKind::ParentBasedTraceIdRatio, ratio: 0.25 });
    let whole = load("[telemetry]\ntraces_sampler = \"traceidratio\"\ntraces_sampler_arg = 1\n", &[]).expect("valid");
    assert_eq!(whole.sampler, TracesSampler { kind: SamplerKind::TraceIdRatio, ratio: 1.0 });
    assert_eq!(
        load("[telemetry]\ntraces_sampler = \"ALWAYS_OFF\"\n", &[]).expect("valid").sampler.kind,
        SamplerKind::AlwaysOff
    );
}

#[test]
fn bad_file_values_name_the_key() {
    let cases = [
        (
            "otlp_endpoint = \"ftp://collector\"",
            "t.toml: telemetry.otlp_endpoint = \"ftp://collector\": expected an http or https URL",
        ),
        (
            "otlp_endpoint = \"collector:4318\"",
            "telemetry.otlp_endpoint = \"collector:4318\": expected an http or https URL",
        ),
        ("otlp_endpoint = \"http://c:4318/v1/traces\"", "so leave /v1/traces out"),
        ("service_name = \" \"", "telemetry.service_name = \" \": expected a service name"),
        (
            "traces_sampler = \"sometimes\"",
            "telemetry.traces_sampler = \"sometimes\": expected one of always_on, always_off, traceidratio",
        ),
        (
            "traces_sampler = \"traceidratio\"\ntraces_sampler_arg = 1.5",
            "telemetry.traces_sampler_arg = 1.5: expected a sampling ratio from 0.0 to 1.0",
        ),
        ("traces_sampler_arg = 0.5", "telemetry.traces_sampler_arg = 0.5: expected no traces_sampler_arg"),
        ("traces_sampler_arg = \"half\"", "telemetry.traces_sampler_arg: invalid type"),
        ("otlp_endpont = \"http://c\"", "unknown key telemetry.otlp_endpont"),
    ];
    for (keys, expected) in cases {
        let message = load(&format!("[telemetry]\n{keys}\n"), &[]).expect_err(keys);
        assert!(message.contains(expected), "{keys}: {message}");
    }
    let secret = load("[telemetry]\notlp_endpoint = \"http://user:hunter2@c:4318\"\n", &[]).expect_err("credentials");
    assert!(secret.contains("without credentials") && !secret.contains("hunter2"), "{secret}");
}

#[test]
fn environment_endpoints_override_the_file() {
    let base = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/")];
    assert_eq!(endpoint(FILE, &base).as_deref(), Some("http://env:4318/v1/traces"));
    let full = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/custom"),
    ];
    assert_eq!(endpoint(FILE, &full).as_deref(), Some("http://t:9/custom"), "the signal's own URL is used as given");
    assert_eq!(
        endpoint(FILE, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "")]).as_deref(),
        Some("http://collector:4318/v1/traces")
    );
    let message = load(FILE, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "nope")]).expect_err("bad URL");
    assert!(
        message.starts_with("environment variable OTEL_EXPORTER_OTLP_ENDPOINT = \"nope\" (overrides telemetry.otlp_endpoint): expected an http"),
        "{message}"
    );
    let secret =
        load("", &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://u:hunter2@c/v1/traces")]).expect_err("creds");
    assert!(!secret.contains("hunter2") && secret.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{secret}");
}

#[test]
fn traces_can_be_switched_off_or_on_by_the_standard_variables() {
    assert_eq!(endpoint(FILE, &[("OTEL_SDK_DISABLED", "true")]), None);
    assert_eq!(endpoint(FILE, &[("OTEL_SDK_DISABLED", "TRUE"), ("OTEL_TRACES_EXPORTER", "otlp")]), None);
    assert!(endpoint(FILE, &[("OTEL_SDK_DISABLED", "false")]).is_some());
    assert_eq!(endpoint(FILE, &[("OTEL_TRACES_EXPORTER", "none")]), None);
    assert_eq!(endpoint("", &[("OTEL_TRACES_EXPORTER", "otlp")]).as_deref(), Some("http://localhost:4318/v1/traces"));
    assert_eq!(endpoint(FILE, &[("OTEL_TRACES_EXPORTER", "otlp")]).as_deref(), Some("http://collector:4318/v1/traces"));
    let cases = [
        (
            "OTEL_SDK_DISABLED",
            "yes",
            "environment variable OTEL_SDK_DISABLED = \"yes\": expected \"true\" or \"false\"",
        ),
        ("OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER = \"zipkin\": expected \"otlp\" or \"none\""),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc",
            "OTEL_EXPORTER_OTLP_PROTOCOL = \"grpc\": expected \"http/json\" or \"http/protobuf\"",
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = \"http\""),
    ];
    for (var, value, expected) in cases {
        let message = load("", &[(var, value)]).expect_err(var);
        assert!(message.contains(expected), "{var}: {message}");
    }
    assert!(load(FILE, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]).is_ok());
}

#[test]
fn headers_timeouts_and_batches_come_from_the_environment() {
    let env = [
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s%3Dcret, x-team = a b ,"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-Team=traces"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16"),
    ];
    let traces = load(FILE, &env).expect("valid");
    let headers: Vec<(&str, &[u8])> =
        traces.headers.iter().map(|(name, value)| (name.as_str(), value.as_bytes())).collect();
    assert_eq!(headers, [("x-api-key", &b"s=cret"[..]), ("x-team", b"traces")]);
    assert!(traces.headers.iter().all(|(_, value)| value.is_sensitive()));
    assert_eq!(traces.timeout, Duration::from_millis(1500));
    assert_eq!((traces.batch_delay, traces.max_queue, traces.max_batch), (Duration::from_millis(100), 64, 16));
    let small_queue = load(FILE, &[("OTEL_BSP_MAX_QUEUE_SIZE", "100")]).expect("valid");
    assert_eq!(small_queue.max_batch, 100, "the default batch shrinks to the queue");
    let cases = [
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key", "item 1 has no `=`"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "bad name=hunter2", "header 1 has an invalid name"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "k=hunter2%0A", "the value of `k` is not a valid header value"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=%zz", "item 1 is not valid percent-encoded UTF-8"),
        (
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "10s",
            "OTEL_EXPORTER_OTLP_TIMEOUT = \"10s\": expected a whole number of milliseconds",
        ),
        ("OTEL_BSP_SCHEDULE_DELAY", "0", "OTEL_BSP_SCHEDULE_DELAY = \"0\": expected a whole number of milliseconds"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0", "OTEL_BSP_MAX_QUEUE_SIZE = \"0\": expected a whole number from 1"),
        (
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            "4096",
            "expected a whole number from 1 to 2048 spans (at most OTEL_BSP_MAX_QUEUE_SIZE)",
        ),
    ];
    for (var, value, expected) in cases {
        let message = load(FILE, &[(var, value)]).expect_err(value);
        assert!(message.contains(expected), "{var}={value}: {message}");
        assert!(!message.contains("hunter2"), "header values are never shown: {message}");
    }
}

#[test]
fn the_service_name_and_resource_attributes_follow_the_standard_precedence() {
    let file = "[telemetry]\nservice_name = \"from-file\"\n";
    assert_eq!(load(file, &[]).expect("valid").service_name, "from-file");
    let attributes =
        [("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.name=from-attributes,team=a%20b")];
    let traces = load(file, &attributes).expect("valid");
    assert_eq!(traces.service_name, "from-attributes");
    assert_eq!(
        traces.resource_attributes,
        [("deployment.environment".to_owned(), "prod".to_owned()), ("team".to_owned(), "a b".to_owned())]
    );
    let named = [attributes[0], ("OTEL_SERVICE_NAME", "from-name")];
    assert_eq!(load(file, &named).expect("valid").service_name, "from-name");
    let message = load("", &[("OTEL_RESOURCE_ATTRIBUTES", "=x")]).expect_err("empty key");
    assert!(
        message.contains(
            "OTEL_RESOURCE_ATTRIBUTES = \"=x\": expected comma-separated key=value pairs; item 1 has an empty key"
        ),
        "{message}"
    );
}

#[test]
fn the_sampler_variables_override_the_file() {
    let file = "[telemetry]\ntraces_sampler = \"traceidratio\"\ntraces_sampler_arg = 0.5\n";
    let sampler = |env: &[(&str, &str)]| load(file, env).expect("valid").sampler;
    assert_eq!(sampler(&[]), TracesSampler { kind: SamplerKind::TraceIdRatio, ratio: 0.5 });
    assert_eq!(sampler(&[("OTEL_TRACES_SAMPLER_ARG", "0.1")]).ratio, 0.1);
    assert_eq!(sampler(&[("OTEL_TRACES_SAMPLER", "always_on")]).kind, SamplerKind::AlwaysOn);
    assert_eq!(
        sampler(&[("OTEL_TRACES_SAMPLER", "always_on"), ("OTEL_TRACES_SAMPLER_ARG", "junk")]).kind,
        SamplerKind::AlwaysOn
    );
    let message = load(file, &[("OTEL_TRACES_SAMPLER_ARG", "2")]).expect_err("out of range");
    assert!(
        message.contains(
            "OTEL_TRACES_SAMPLER_ARG = \"2\" (overrides telemetry.traces_sampler_arg): expected a sampling ratio"
        ),
        "{message}"
    );
    let message = load("", &[("OTEL_TRACES_SAMPLER", "jaeger_remote")]).expect_err("unsupported");
    assert!(
        message
            .contains("OTEL_TRACES_SAMPLER = \"jaeger_remote\" (overrides telemetry.traces_sampler): expected one of"),
        "{message}"
    );
}

/// Every `[telemetry]` key the parser knows is documented in the example file (the keys come from the parser's
/// own list, so a key added later without its documentation fails here).
#[test]
fn every_telemetry_key_is_in_the_example() {
    let hint = load("[telemetry]\nno_such_key = 1\n", &[]).expect_err("unknown key");
    let keys: Vec<&str> = hint.split('`').skip(1).step_by(2).filter(|key| *key != "no_such_key").collect();
    assert!(keys.contains(&"otlp_endpoint") && keys.len() >= 4, "{hint}");
    let example = include_str!("../../switchyard.example.toml");
    let section = example.split("\n[telemetry]\n").nth(1).expect("a [telemetry] section");
    for key in keys {
        assert!(section.contains(&format!("\n{key} = ")) || section.contains(&format!("# {key} = ")), "{key}");
    }
    let example_config = crate::config::tests::parse_example();
    assert_eq!(example_config.telemetry.traces, TracesConfig::default(), "the example leaves traces off");
}
