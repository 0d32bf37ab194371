//! A webhook receiver on a loopback port: accepts POSTs to `/hook` and hands each accepted body over, after
//! refusing the first few with 500 when asked to (to see the sender retry). It serves until the test ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The hook's URL and the bodies it accepted; its first `refusals` POSTs are answered 500 and not handed over.
pub async fn hook(refusals: usize) -> (String, UnboundedReceiver<String>) {
    let (sender, received) = unbounded_channel();
    let hits = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let (hits, sender) = (hits.clone(), sender.clone());
            async move {
                if hits.fetch_add(1, Ordering::SeqCst) < refusals {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                let _ = sender.send(body);
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the hook");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the hook serves") });
    (url, received)
}
