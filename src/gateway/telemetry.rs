//! Lowers `[telemetry]` (and the OpenTelemetry variables the configuration already applied) into the telemetry's
//! own settings, and starts the tracer when traces are on.
//!
//! Rules: the resource describes this process — `service.name`, `service.version`, `service.instance.id` (the
//! ledger's instance id, so spans and claims name the same instance) and the `telemetry.sdk.*` attributes —
//! with `OTEL_RESOURCE_ATTRIBUTES` overriding any of them but `service.name` (which has its own precedence).

use std::time::Duration;

use crate::config::{SamplerKind, TracesConfig, TracesSampler};
use crate::telemetry::Metrics;
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
