//! A response body that carries its connection: reading the body drives the connection, and the connection goes
//! back to its pool once the body has ended.
//!
//! Rules: a body dropped before its end drops (closes) the connection, because the rest of its bytes would
//! otherwise be read as the next response.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Weak;

use bytes::Bytes;
use http_body::Body as _;
use hyper::body::Incoming;

use super::conn::Conn;
use super::pool::{Key, Pool};

/// A response body that drives its connection and returns it to the pool at its end.
pub struct Body {
    incoming: Incoming,
    conn: Option<Box<Conn>>,
    home: Home,
}

/// Where a body's connection goes back to.
pub(super) struct Home {
    pub(super) pool: Weak<Pool>,
    pub(super) key: Key,
}

impl Body {
    pub(super) fn new(incoming: Incoming, conn: Box<Conn>, home: Home) -> Body {
        let mut body = Body { incoming, conn: Some(conn), home };
        if body.incoming.is_end_stream() {
            body.release();
        }
        body
    }

    /// The next chunk of data; `Ok(None)` at the end (trailers are skipped).
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, hyper::Error> {
        loop {
            let frame = poll_fn(|cx| {
                if let Some(conn) = &mut self.conn {
                    conn.drive(cx);
                }
                Pin::new(&mut self.incoming).poll_frame(cx)
            })
            .await;
            let Some(frame) = frame else {
                self.release();
                return Ok(None);
            };
            if let Ok(data) = frame?.into_data() {
                if self.incoming.is_end_stream() {
                    self.release();
                }
                return Ok(Some(data));
            }
        }
    }

    /// The body's length when the response declared it.
    pub fn exact_length(&self) -> Option<u64> {
        self.incoming.size_hint().exact()
    }

    /// Gives the connection back once every byte of this body has arrived.
    fn release(&mut self) {
        if let Some(conn) = self.conn.take()
            && let Some(pool) = self.home.pool.upgrade()
        {
            pool.put(&self.home.key, conn);
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if self.incoming.is_end_stream() {
            self.release();
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body").field("connection", &self.conn.is_some()).finish_non_exhaustive()
    }
}
