//! Lowers `[telemetry]` (and the OpenTelemetry variables the configuration already applied) into the telemetry's
//! own settings, and starts the tracer when traces are on; lowers `[audit]` into the audit trail's settings.
//!
//! Rules: the resource describes this process — `service.name`, `service.version`, `service.instance.id` (the
//! ledger's instance id, so spans and claims name the same instance) and the `telemetry.sdk.*` attributes —
//! with `OTEL_RESOURCE_ATTRIBUTES` overriding any of them but `service.name` (which has its own precedence).

use std::time::Duration;

use crate::config::{AuditArguments, AuditConfig, SamplerKind, TracesConfig, TracesSampler};
use crate::telemetry::Metrics;
use crate::telemetry::audit::{Arguments, AuditSettings, FileSettings, OtlpSettings};
use crate::telemetry::trace::{Batch, Export, ExportSetupError, RootSampler, Sampler, TraceSettings, Tracer};

/// How long shutdown waits for the last spans to reach the collector.
pub(super) const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// The tracer `config` asks for (`None`: traces are off); `instance` is this gateway's instance id.
pub(super) fn tracer(
    config: &TracesConfig,
    instance: &str,
    metrics: &Metrics,
) -> Result<Option<Tracer>, ExportSetupError> {
    let Some(endpoint) = &config.endpoint else { return Ok(None) };
    let export = Export {
        endpoint: endpoint.clone(),
        headers: config.headers.clone(),
        timeout: config.timeout,
        resource: resource(config, instance),
        batch: Batch { delay: config.batch_delay, max_queue: config.max_queue, max_batch: config.max_batch },
    };
    let tracer = Tracer::start(TraceSettings { export, sampler: sampler(config.sampler) }, metrics.trace_counts())?;
    tracing::info!(%endpoint, service = %config.service_name, "exporting traces over OTLP/HTTP");
    Ok(Some(tracer))
}

/// `[audit]` lowered; its log records go to the traces' collector, at `…/v1/logs` instead of `…/v1/traces`.
pub(super) fn audit_settings(audit: &AuditConfig, traces: &TracesConfig, instance: &str) -> AuditSettings {
    let file = audit.file.as_ref().map(|file| FileSettings {
        path: file.path.clone(),
        max_size: file.max_size,
        keep: file.keep,
    });
    let otlp = traces.endpoint.as_ref().filter(|_| audit.otlp).map(|traces_url| {
        let mut endpoint = traces_url.clone();
        let base = endpoint.path().strip_suffix("/v1/traces").unwrap_or("").to_owned();
        endpoint.set_path(&format!("{base}/v1/logs"));
        OtlpSettings {
            endpoint,
            headers: traces.headers.clone(),
            timeout: traces.timeout,
            resource: resource(traces, instance),
        }
    });
    let arguments = match audit.arguments {
        AuditArguments::Digest => Arguments::Digest,
        AuditArguments::Redacted => Arguments::Redacted,
        AuditArguments::Full => Arguments::Full,
    };
    AuditSettings { file, otlp, arguments, redact: audit.redact.clone() }
}

fn resource(config: &TracesConfig, instance: &str) -> Vec<(String, String)> {
    let mut resource: Vec<(String, String)> = [
        ("service.name", config.service_name.as_str()),
        ("service.version", env!("CARGO_PKG_VERSION")),
        ("service.instance.id", instance),
        ("telemetry.sdk.name", "switchyard"),
        ("telemetry.sdk.language", "rust"),
        ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    for (key, value) in &config.resource_attributes {
        resource.retain(|(known, _)| known != key);
        resource.push((key.clone(), value.clone()));
    }
    resource
}

fn sampler(configured: TracesSampler) -> Sampler {
    let ratio = RootSampler::TraceIdRatio(configured.ratio);
    let (root, parent_based) = match configured.kind {
        SamplerKind::AlwaysOn => (RootSampler::AlwaysOn, false),
        SamplerKind::AlwaysOff => (RootSampler::AlwaysOff, false),
        SamplerKind::TraceIdRatio => (ratio, false),
        SamplerKind::ParentBasedAlwaysOn => (RootSampler::AlwaysOn, true),
        SamplerKind::ParentBasedAlwaysOff => (RootSampler::AlwaysOff, true),
        SamplerKind::ParentBasedTraceIdRatio => (ratio, true),
    };
    Sampler { root, parent_based }
}
