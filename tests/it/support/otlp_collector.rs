//! A fake OpenTelemetry collector on 127.0.0.1:0 (axum over hyper's HTTP/1.1 connections): it records every
//! OTLP/HTTP export it receives — path, headers and the JSON body — and answers 200, or (stalled) records the
//! export and never answers, like a collector that hangs. Connections are served by the fault backend's accept
//! loop, so dropping the collector stops the server and every connection, stalled ones included.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::post;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::fault_backend::accept_loop;

/// One export as the collector received it.
#[derive(Clone, Debug)]
pub struct Export {
    pub path: String,
    pub headers: HeaderMap,
    /// The body parsed as JSON (`Null` when it was not JSON).
    pub body: Value,
}

#[derive(Clone, Default)]
struct Shared {
    exports: Arc<Mutex<Vec<Export>>>,
    stall: bool,
}

pub struct Collector {
    /// `http://127.0.0.1:PORT`, the base URL a gateway exports to.
    pub base: String,
    shared: Shared,
    server: JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Collector {
    /// A collector that accepts every export.
    pub async fn start() -> Collector {
        Collector::serve(false).await
    }

    /// A collector that records every export and never answers.
    pub async fn stalled() -> Collector {
        Collector::serve(true).await
    }

    async fn serve(stall: bool) -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the collector");
        let base = format!("http://{}", listener.local_addr().expect("collector address"));
        let shared = Shared { stall, ..Shared::default() };
        let app = Router::new().fallback(post(receive)).with_state(shared.clone());
        let server = tokio::spawn(accept_loop(listener, move |stream| {
            let service = TowerToHyperService::new(app.clone());
            async move {
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            }
        }));
        Collector { base, shared, server }
    }

    pub fn exports(&self) -> Vec<Export> {
        self.shared.exports.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Every span of every export, in arrival order.
    pub fn spans(&self) -> Vec<Value> {
        self.exports().iter().flat_map(|export| spans_of(&export.body)).collect()
    }

    /// Waits (up to 10 s) until the spans received satisfy `ready`, and returns them; panics naming `what`.
    pub async fn wait_for(&self, what: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        for _ in 0..400 {
            let spans = self.spans();
            if ready(&spans) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the collector never received {what}; it has: {:#?}", self.spans());
    }

    /// Waits (up to 10 s) until at least one export arrived.
    pub async fn wait_for_export(&self) -> Export {
        for _ in 0..400 {
            if let Some(export) = self.exports().into_iter().next() {
                return export;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the collector received no export");
    }
}

async fn receive(State(shared): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let export = Export { path: uri.path().to_owned(), headers, body };
    shared.exports.lock().unwrap_or_else(PoisonError::into_inner).push(export);
    if shared.stall {
        std::future::pending::<()>().await;
    }
    StatusCode::OK
}

/// The spans of one `ExportTraceServiceRequest`.
pub fn spans_of(body: &Value) -> Vec<Value> {
    let resources = body["resourceSpans"].as_array().cloned().unwrap_or_default();
    let scopes = resources.iter().flat_map(|resource| resource["scopeSpans"].as_array().cloned().unwrap_or_default());
    scopes.flat_map(|scope| scope["spans"].as_array().cloned().unwrap_or_default()).collect()
}

/// The value of a span's (or event's) attribute `key`: the string, the integer (OTLP writes it as a string) or
/// the boolean, as JSON.
pub fn attribute(span: &Value, key: &str) -> Option<Value> {
    let attributes = span["attributes"].as_array()?;
    let value = &attributes.iter().find(|attribute| attribute["key"] == key)?["value"];
    ["stringValue", "intValue", "boolValue"].iter().find_map(|kind| value.get(*kind).cloned())
}

/// The value of a resource attribute of an export.
pub fn resource_attribute(body: &Value, key: &str) -> Option<Value> {
    attribute(&body["resourceSpans"][0]["resource"], key)
}
