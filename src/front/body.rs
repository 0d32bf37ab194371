//! Reading a `POST`'s body (MCP transports §"Sending Messages to the Server": the body is one JSON-RPC message).
//!
//! Rules: the body must be declared `Content-Type: application/json` (parameters such as `charset` allowed),
//! else 415 before anything is read — this also keeps browsers' form and `text/plain` posts out; a body larger
//! than `max_body` → 413 (at once when `Content-Length` says so); a body not complete within `body_timeout` of
//! the end of the header → 408 (the answers, closing the connection after 408 and 413, are
//! [`super::error`]'s). So an unfinished body holds at most `max_body` bytes for at most `body_timeout`.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body::Body as _;

use super::error::FrontError;

/// How a body must look and arrive.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimits {
    pub(super) max_body: usize,
    pub(super) body_timeout: Duration,
}

/// The body of a `POST` whose headers are `headers`, or the answer refusing it.
pub(super) async fn read_json(headers: &HeaderMap, body: Body, limits: BodyLimits) -> Result<Bytes, FrontError> {
    let read = async {
        if !declares_json(headers) {
            return Err(FrontError::BodyNotJson);
        }
        if declared_length(headers).is_some_and(|length| length > limits.max_body) {
            return Err(FrontError::BodyTooLarge { max_body: limits.max_body });
        }
        collect(body, limits.max_body).await
    };
    let incomplete = FrontError::BodyIncomplete { body_timeout: limits.body_timeout };
    tokio::time::timeout(limits.body_timeout, read).await.unwrap_or(Err(incomplete))
}

fn declares_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    let media_type = value.split(';').next().unwrap_or_default().trim();
    media_type.eq_ignore_ascii_case("application/json")
}

fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// The whole body, refused as soon as it grows past `max_body`. A body that came in one piece (the usual case)
/// is not copied.
async fn collect(mut body: Body, max_body: usize) -> Result<Bytes, FrontError> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut size = 0;
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame.map_err(FrontError::BodyUnreadable)?.into_data() else {
            continue;
        };
        size += data.len();
        if size > max_body {
            return Err(FrontError::BodyTooLarge { max_body });
        }
        chunks.push(data);
    }
    Ok(match chunks.as_slice() {
        [one] => one.clone(),
        _ => Bytes::from(chunks.concat()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, StatusCode};
    use axum::response::IntoResponse;

    fn headers(content_type: Option<&'static str>, length: Option<&'static str>) -> HeaderMap {
        let mut map = HeaderMap::new();
        if let Some(kind) = content_type {
            map.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
        }
        if let Some(length) = length {
            map.insert(header::CONTENT_LENGTH, HeaderValue::from_static(length));
        }
        map
    }

    const LIMITS: BodyLimits = BodyLimits { max_body: 8, body_timeout: Duration::from_secs(5) };

    #[test]
    fn only_json_media_types_are_declared_json() {
        for kind in ["application/json", "Application/JSON", "application/json; charset=utf-8"] {
            assert!(declares_json(&headers(Some(kind), None)), "{kind}");
        }
        for kind in [Some("text/plain"), Some("application/jsonl"), Some("multipart/form-data"), None] {
            assert!(!declares_json(&headers(kind, None)), "{kind:?}");
        }
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_max_body() {
        let json = headers(Some("application/json"), None);
        let read = read_json(&json, Body::from("12345678"), LIMITS).await.expect("within the limit");
        assert_eq!(&read[..], b"12345678");
        let (sender, pieces) = tokio::sync::mpsc::channel(3);
        for piece in ["123", "45", "678"] {
            sender.send(Ok(http_body::Frame::data(Bytes::from(piece)))).await.unwrap();
        }
        drop(sender);
        let joined = read_json(&json, Body::new(ChannelBody(pieces)), LIMITS).await.expect("in pieces");
        assert_eq!(&joined[..], b"12345678");
        let over = read_json(&json, Body::from("123456789"), LIMITS).await.expect_err("over the limit").into_response();
        assert_eq!(over.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(over.headers()[header::CONNECTION], "close");
        let announced = headers(Some("application/json"), Some("9"));
        let early =
            read_json(&announced, Body::empty(), LIMITS).await.expect_err("announced over the limit").into_response();
        assert_eq!(early.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let plain = read_json(&headers(Some("text/plain"), None), Body::from("{}"), LIMITS).await;
        assert_eq!(plain.expect_err("not JSON").into_response().status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[tokio::test]
    async fn a_body_that_never_ends_times_out() {
        let (_sender, stalled) = tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, axum::Error>>(1);
        let body = Body::new(ChannelBody(stalled));
        let limits = BodyLimits { body_timeout: Duration::from_millis(50), ..LIMITS };
        let refused = read_json(&headers(Some("application/json"), None), body, limits)
            .await
            .expect_err("stalled")
            .into_response();
        assert_eq!(refused.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(refused.headers()[header::CONNECTION], "close");
    }

    #[tokio::test]
    async fn a_body_that_breaks_off_is_a_bad_request() {
        let (sender, broken) = tokio::sync::mpsc::channel(2);
        sender.send(Ok(http_body::Frame::data(Bytes::from("{")))).await.unwrap();
        sender.send(Err(axum::Error::new("invalid chunk size"))).await.unwrap();
        let body = Body::new(ChannelBody(broken));
        let refused = read_json(&headers(Some("application/json"), None), body, LIMITS)
            .await
            .expect_err("broken")
            .into_response();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    }

    /// A body whose frames come from a channel, so a test can send it in pieces or stop sending.
    struct ChannelBody(tokio::sync::mpsc::Receiver<Result<http_body::Frame<Bytes>, axum::Error>>);

    impl http_body::Body for ChannelBody {
        type Data = Bytes;
        type Error = axum::Error;

        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
            self.get_mut().0.poll_recv(cx)
        }
    }
}
