//! How the gateway writes its log: lines of text for people, or one JSON object per line for
//! collectors, on stderr, filtered by `SWITCHYARD_LOG` (default `switchyard=info`).
//!
//! Rules: ANSI colours only when the log goes to a terminal (never into files or pipes); a JSON line is one
//! object with `timestamp`, `level`, `target` and the event's fields at the top level (`message` included); the
//! subscriber is a registry with layers, so other layers (traces) can join it. Access lines keep these shapes but
//! are written by [`super::access_line`], not by the subscriber's formatter (they are the hot path).

use std::io::IsTerminal;

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The variable holding the log filter (`tracing_subscriber`'s `EnvFilter` syntax).
pub const FILTER_VAR: &str = "SWITCHYARD_LOG";
pub const DEFAULT_FILTER: &str = "switchyard=info";

/// How each log line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the process's log subscriber: `format` on stderr, filtered by [`FILTER_VAR`]. A second call does
/// nothing (the first subscriber stays).
pub fn install(format: LogFormat) {
    let filter = EnvFilter::try_from_env(FILTER_VAR).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let ansi = std::io::stderr().is_terminal();
    let _ = tracing_subscriber::registry().with(layer(format, std::io::stderr, ansi).with_filter(filter)).try_init();
    super::access_line::install(format, ansi);
}

/// Writes what the log still holds (access lines are written by a thread of their own); call it before exiting.
pub fn flush() {
    super::access_line::flush();
}

/// The formatting layer of `format`, writing to `writer`; `ansi`: colour the text format.
pub fn layer<S, W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Text => layer.with_ansi(ansi).boxed(),
        LogFormat::Json => layer.json().flatten_event(true).boxed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer that keeps what was written.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(format: LogFormat, ansi: bool) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::registry().with(layer(format, move || writer.clone(), ansi));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "switchyard::access", principal = "alice", status = 200u16, "request");
            tracing::warn!(backend = "b", "tool discovery failed");
        });
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn json_lines_are_one_object_each_with_the_fields_on_top() {
        let text = logged(LogFormat::Json, false);
        let lines: Vec<serde_json::Value> =
            text.lines().map(|line| serde_json::from_str(line).expect("a JSON object per line")).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["target"], "switchyard::access");
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["principal"], "alice");
        assert_eq!(lines[0]["status"], 200);
        assert_eq!(lines[0]["message"], "request");
        assert_eq!(lines[1]["backend"], "b");
        assert!(lines[1]["timestamp"].is_string());
    }

    #[test]
    fn colours_only_when_asked() {
        let plain = logged(LogFormat::Text, false);
        assert!(!plain.contains('\u{1b}'), "{plain:?}");
        assert!(plain.contains("principal=\"alice\"") || plain.contains("principal=alice"), "{plain}");
        assert!(logged(LogFormat::Text, true).contains("\u{1b}["), "a terminal gets colours");
        assert!(!logged(LogFormat::Json, true).contains('\u{1b}'), "JSON never has escape codes");
    }
}
