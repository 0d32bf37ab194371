//! The PostgreSQL server the shared-store tests use, and a schema of their own on it.
//!
//! Rules:
//! - The server is `SWITCHYARD_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`), the same
//!   variable the ledger's unit tests read.
//! - Each test gets a fresh schema ([`PgSchema`]); the gateway creates it (the store creates a missing schema) and
//!   dropping the `PgSchema` drops it, so parallel tests never see each other's rows.
//! - When the server is unreachable, [`PgSchema::create`] prints the `*** SKIPPED: ` line `scripts/test` counts
//!   and the test returns early — except under `CI=true`, where that is a setup bug and panics.

use std::net::{SocketAddr, ToSocketAddrs};

use tokio_postgres::{Client, NoTls};

use crate::support::interop::skip_unless_ci;
use crate::support::pg_proxy::TcpProxy;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The test server's URL.
fn server_url() -> String {
    std::env::var("SWITCHYARD_TEST_POSTGRES_URL").ok().filter(|url| !url.is_empty()).unwrap_or(DEFAULT_URL.into())
}

/// The server URL split around its `host[:port]`: `(scheme and user info, host and port, path and query)`.
fn split(url: &str) -> (&str, &str, &str) {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let authority_end = url[after_scheme..].find('/').map_or(url.len(), |at| after_scheme + at);
    let host_start = url[after_scheme..authority_end].rfind('@').map_or(after_scheme, |at| after_scheme + at + 1);
    (&url[..host_start], &url[host_start..authority_end], &url[authority_end..])
}

/// The server's address, for a [`TcpProxy`] in front of it.
pub fn address() -> SocketAddr {
    let url = server_url();
    let (_, host, _) = split(&url);
    let host = if host.contains(':') { host.to_owned() } else { format!("{host}:5432") };
    let mut addresses = host.to_socket_addrs().unwrap_or_else(|error| panic!("{url}: {error}"));
    addresses.next().unwrap_or_else(|| panic!("{url} names no address"))
}

/// A connection to the test database, driven on its own task.
pub async fn connect() -> Result<Client, tokio_postgres::Error> {
    let url = server_url();
    let separator = if url.contains('?') { '&' } else { '?' };
    let (client, connection) = tokio_postgres::connect(&format!("{url}{separator}connect_timeout=3"), NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A schema of its own in the test database; dropped with this value.
pub struct PgSchema {
    pub name: String,
}

impl PgSchema {
    /// A fresh schema name, or `None` after a counted `SKIPPED` line when the server is unreachable outside CI.
    pub async fn create() -> Option<PgSchema> {
        if let Err(error) = connect().await {
            let what = format!("PostgreSQL at {} is unreachable ({error})", server_url());
            return skip_unless_ci(&what, "start it, or set SWITCHYARD_TEST_POSTGRES_URL");
        }
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).expect("randomness");
        let name = format!("sy_{}", random.iter().map(|b| format!("{b:02x}")).collect::<String>());
        Some(PgSchema { name })
    }

    /// The ledger URL of this schema on the server.
    pub fn url(&self) -> String {
        self.with_schema(&server_url())
    }

    /// The ledger URL of this schema reached through `proxy` (which forwards to [`address`]).
    pub fn url_through(&self, proxy: &TcpProxy) -> String {
        let url = server_url();
        let (user, _, rest) = split(&url);
        self.with_schema(&format!("{user}{}{rest}", proxy.address()))
    }

    fn with_schema(&self, url: &str) -> String {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}schema={}", self.name)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs inside the test's runtime, so the cleanup gets a runtime (and thread) of its own.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                let dropped = async {
                    let client = connect().await?;
                    client
                        .batch_execute(&format!("SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .await
                };
                if let Err(error) = dropped.await {
                    eprintln!("could not drop the test schema {name}: {error}");
                }
            });
        });
        let _ = cleanup.join();
    }
}
