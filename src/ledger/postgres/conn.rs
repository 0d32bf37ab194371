//! A few reconnecting PostgreSQL connections with the ledger's statements prepared on each.
//!
//! Rules:
//! - A dead connection never wedges the store: it is dropped as soon as an operation sees it closed (or an
//!   operation times out), and the next operation connects again. Only one task reconnects at a time; the
//!   others wait for its result instead of opening connections of their own.
//! - An operation that failed because the connection broke is run once more on a fresh connection. That is
//!   safe because every operation is idempotent for its caller: a claim retried with the same claim id
//!   recognises its own insert, and settles that already happened are accepted (see [`crate::ledger::rules`]).
//! - Every operation has a deadline ([`OPERATION_TIMEOUT`]); a store that does not answer is unavailable.
//! - Statements are prepared once per connection; operations go round-robin over [`GENERAL`] connections
//!   (opened on first use), and queries on one connection are pipelined by the driver. Each of the [`WRITERS`]
//!   batch writers (see [`super::batch`]) has a connection of its own, which nothing else uses: its
//!   transactions must not take in other operations. The writer's own task drives that connection
//!   ([`Connector::drive`]), so a batch and its answers cross no task; every other connection has a task of its
//!   own. A writer slot is used only inside `drive`: outside it, nothing would poll the connection.
//! - Every connection plans with `enable_seqscan = off` and no JIT compilation ([`PLANNER_OPTIONS`], before the
//!   URL's own `options`): prepared statements take their index whatever the table's size when they were
//!   planned. The writers' connections also plan each statement only once ([`WRITER_OPTIONS`]).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::schema::WAITED;
use crate::ledger::error::LedgerError;
use crate::ledger::sql::{Dialect, Statements};

/// How long one operation (including a reconnect) may take before the store reports itself unavailable.
pub(super) const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections for reads, upkeep and the operator's commands.
const GENERAL: usize = 2;
/// Batch writers, each with its own connection: while some wait for their commit's WAL flush, another gathers and
/// sends the next batch, and the server's flush covers every commit that reached it meanwhile (a batch's settles are
/// announced only when waited for, so no writer holds the notification lock across a flush in ordinary use; see
/// [`super::batch`]). Each is one more server process competing for the CPU, and fewer writers make bigger batches,
/// whose statements the server pays once: on two cores shared with the server, 2 writers carried 1.9× the calls of
/// 12 (the ledger alone) and, through the gateway, 1.2× those of 4 (docs/ledger.md, *Batching in the SQL stores*).
pub(super) const WRITERS: usize = 2;
/// How the ledger's connections plan (docs/ledger.md, *No sequential scans, no planning per batch*):
/// - `enable_seqscan=off`: every statement of the ledger finds its rows through an index, and prepared statements
///   keep the plan the server chose when the table was nearly empty: a fresh ledger's writers planned their
///   multi-row lookups as sequential scans and kept them as the claims grew. Off, the planner takes the index
///   whatever the size.
/// - `jit=off`: a query that cannot avoid a sequential scan (a small table without a fitting index) is costed
///   as disabled, far above `jit_above_cost`, and the server compiled it to machine code on every run: tens of
///   milliseconds for a read of a few rows.
const PLANNER_OPTIONS: &str = "-c enable_seqscan=off -c jit=off";
/// What the writers' connections add: `plan_cache_mode=force_generic_plan`, so the server plans each of their
/// statements once. Left to choose, it planned the batch statement afresh for every batch (its generic plan, made
/// without the arrays' lengths, looks costlier than a plan for a batch of two), which was half of the server's
/// time for a batch at one connection. The general connections keep the server's choice: their listings'
/// optional filters (`$1 IS NULL OR …`) are folded away only in a plan made for the values at hand.
const WRITER_OPTIONS: &str = "-c plan_cache_mode=force_generic_plan";
/// How long connecting may take, unless the URL sets `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an operation on a session failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The driver or the server refused; may mean the connection broke.
    Db(tokio_postgres::Error),
    /// A ledger rule or a malformed row; final.
    Ledger(LedgerError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Self {
        Failure::Db(error)
    }
}

impl From<LedgerError> for Failure {
    fn from(error: LedgerError) -> Self {
        Failure::Ledger(error)
    }
}

impl From<Failure> for LedgerError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Ledger(error) => error,
            Failure::Db(error) => classify(&error),
        }
    }
}

/// Maps a driver error to the ledger's kinds: the server's data-corruption codes are [`LedgerError::Corrupt`],
/// everything else means the ledger cannot be used right now.
pub(super) fn classify(error: &tokio_postgres::Error) -> LedgerError {
    let code = error.code().map(|state| state.code().to_owned()).unwrap_or_default();
    let message = error.as_db_error().map_or_else(|| error.to_string(), |db| db.message().to_owned());
    if matches!(code.as_str(), "XX001" | "XX002") {
        LedgerError::corrupt(format!("PostgreSQL: {message}"))
    } else if code.is_empty() {
        LedgerError::unavailable(format!("PostgreSQL: {message}"))
    } else {
        LedgerError::unavailable(format!("PostgreSQL ({code}): {message}"))
    }
}

/// A connected client and its prepared statements.
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) prepared: Prepared,
}

/// [`Statements`], prepared.
pub(super) struct Prepared {
    pub(super) insert: Statement,
    pub(super) select: Statement,
    pub(super) complete: Statement,
    pub(super) mark_unknown: Statement,
    pub(super) release: Statement,
    pub(super) renew: Statement,
    pub(super) expire: Statement,
    pub(super) orphan: Statement,
    pub(super) purge: Statement,
    pub(super) list: Statement,
    /// The multi-row statement of a batch's claims and completions (see [`super::rows`]).
    pub(super) batch: Statement,
    /// `$1` key: marks an in-flight claim waited for, so that its settle is announced (see [`super::schema`]).
    pub(super) watch: Statement,
}

/// Every statement the connections prepare.
struct Sql {
    one: Statements,
    batch: String,
    watch: String,
}

impl Prepared {
    async fn new(client: &Client, sql: &Sql) -> Result<Prepared, tokio_postgres::Error> {
        let (batch, watch, sql) = (&sql.batch, &sql.watch, &sql.one);
        // Prepared concurrently: the driver pipelines them into one round trip's worth of waiting.
        let (insert, select, complete, mark_unknown, release, renew) = tokio::try_join!(
            client.prepare(&sql.insert),
            client.prepare(&sql.select),
            client.prepare(&sql.complete),
            client.prepare(&sql.mark_unknown),
            client.prepare(&sql.release),
            client.prepare(&sql.renew),
        )?;
        let (expire, orphan, purge, list) = tokio::try_join!(
            client.prepare(&sql.expire),
            client.prepare(&sql.orphan),
            client.prepare(&sql.purge),
            client.prepare(&sql.list),
        )?;
        let (batch, watch) = tokio::try_join!(client.prepare(batch), client.prepare(watch))?;
        Ok(Prepared {
            insert,
            select,
            complete,
            mark_unknown,
            release,
            renew,
            expire,
            orphan,
            purge,
            list,
            batch,
            watch,
        })
    }
}

/// The driver configuration for `connect_url`, with Switchyard's defaults filled in.
pub(super) fn driver_config(connect_url: &str) -> Result<Config, LedgerError> {
    let mut config: Config = connect_url.parse().map_err(|_| LedgerError::InvalidUrl {
        url: crate::ledger_url::redact(connect_url),
        expected: "a libpq connection URL".to_owned(),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("switchyard");
    }
    Ok(with_options_first(config, PLANNER_OPTIONS))
}

/// `config` with `ours` before the options it has: the URL's own come last, so an operator's
/// `-c enable_seqscan=on` still wins.
fn with_options_first(mut config: Config, ours: &str) -> Config {
    let options = match config.get_options() {
        Some(theirs) => format!("{ours} {theirs}"),
        None => ours.to_owned(),
    };
    config.options(&options);
    config
}

/// Connects and spawns the task that drives the connection.
pub(super) async fn connect(config: &Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(driven(connection));
    Ok(client)
}

/// A connection's driving future, which logs how it ended.
fn driven(connection: impl Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static) -> Driven {
    Box::pin(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "ledger: PostgreSQL connection ended");
        }
    })
}

/// What moves a connection's requests and answers between its client and its socket.
type Driven = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The store's connections, each replaced whenever it dies.
pub(super) struct Connector {
    config: Config,
    /// `config` with [`WRITER_OPTIONS`], for the writers' slots.
    writer_config: Config,
    sql: Sql,
    slots: Vec<Slot>,
    /// Round-robin position: operations are spread over the slots.
    next: AtomicUsize,
}

/// One connection of the pool, opened on first use.
#[derive(Default)]
struct Slot {
    live: RwLock<Option<Arc<Session>>>,
    /// Held while connecting, so a broken connection causes one reconnect, not one per waiting task.
    connecting: tokio::sync::Mutex<()>,
    /// A writer's connection, driven by the writer's task ([`Connector::drive`]); general connections have a task
    /// of their own.
    driven: parking_lot::Mutex<Option<Driven>>,
}

impl Connector {
    /// A connector for the claims table `table` whose first session is `client` (already connected and migrated
    /// by the caller).
    pub(super) async fn new(config: Config, table: &str, client: Client) -> Result<Connector, LedgerError> {
        let watch =
            format!("UPDATE {table} SET {WAITED} = true WHERE key = $1 AND state = 'in_flight' AND NOT {WAITED}");
        let sql = Sql { one: Statements::new(table, Dialect::Postgres), batch: super::rows::batch_sql(table), watch };
        let prepared = Prepared::new(&client, &sql).await.map_err(|error| classify(&error))?;
        let slots: Vec<Slot> = (0..GENERAL + WRITERS).map(|_| Slot::default()).collect();
        if let Some(first) = slots.first() {
            *first.live.write() = Some(Arc::new(Session { client, prepared }));
        }
        let writer_config = with_options_first(config.clone(), WRITER_OPTIONS);
        Ok(Connector { config, writer_config, sql, slots, next: AtomicUsize::new(0) })
    }

    /// The slots of the batch writers, one each.
    pub(super) fn writer_slots(&self) -> std::ops::Range<usize> {
        GENERAL..GENERAL + WRITERS
    }

    async fn session(&self, index: usize) -> Result<Arc<Session>, Failure> {
        let slot = &self.slots[index];
        if let Some(session) = slot.current() {
            return Ok(session);
        }
        let _connecting = slot.connecting.lock().await;
        if let Some(session) = slot.current() {
            return Ok(session);
        }
        let client = if self.writer_slots().contains(&index) {
            let (client, connection) = self.writer_config.connect(NoTls).await?;
            *slot.driven.lock() = Some(driven(connection));
            client
        } else {
            connect(&self.config).await?
        };
        let prepared = Prepared::new(&client, &self.sql).await?;
        let session = Arc::new(Session { client, prepared });
        *slot.live.write() = Some(session.clone());
        Ok(session)
    }

    /// Runs `work` — which uses the writer connection of slot `index` — in the calling task, which drives that
    /// connection meanwhile: a writer's batch and its answers then cross no task, and a wake-up between them is
    /// another round of the same poll ([`crate::inline_wake`]). A connection opened during `work` is driven from
    /// the same round on.
    pub(super) async fn drive<F: Future>(&self, index: usize, work: F) -> F::Output {
        let mut work = pin!(work);
        let driven = &self.slots[index].driven;
        crate::inline_wake::run(poll_fn(|cx| {
            let outcome = work.as_mut().poll(cx);
            let mut connection = driven.lock();
            if let Some(running) = connection.as_mut()
                && running.as_mut().poll(cx).is_ready()
            {
                *connection = None;
            }
            outcome
        }))
        .await
    }

    /// Runs `operation` on a live general session, once more on a fresh one if the connection broke under it.
    pub(super) async fn run<T, F, Fut>(&self, operation: F) -> Result<T, LedgerError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        self.run_on(self.next.fetch_add(1, Ordering::Relaxed) % GENERAL, operation).await
    }

    /// [`Connector::run`] on the connection of slot `index` (a writer's own, from [`Connector::writer_slots`]).
    pub(super) async fn run_on<T, F, Fut>(&self, index: usize, operation: F) -> Result<T, LedgerError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let slot = &self.slots[index];
        let mut retried = false;
        loop {
            let session = within(self.session(index)).await??;
            match within(operation(session.clone())).await {
                Err(timed_out) => {
                    // A connection that stops answering is as good as dead.
                    slot.forget(&session);
                    return Err(timed_out);
                }
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(Failure::Db(error))) if connection_broke(&error, &session) => {
                    slot.forget(&session);
                    if retried {
                        return Err(classify(&error));
                    }
                    retried = true;
                }
                Ok(Err(failure)) => return Err(failure.into()),
            }
        }
    }
}

impl Slot {
    fn current(&self) -> Option<Arc<Session>> {
        let live = self.live.read();
        live.as_ref().filter(|session| !session.client.is_closed()).cloned()
    }

    /// Forgets `dead` unless another task already replaced it.
    fn forget(&self, dead: &Arc<Session>) {
        let mut live = self.live.write();
        if live.as_ref().is_some_and(|session| Arc::ptr_eq(session, dead)) {
            *live = None;
        }
    }
}

async fn within<T>(future: impl Future<Output = T>) -> Result<T, LedgerError> {
    tokio::time::timeout(OPERATION_TIMEOUT, future).await.map_err(|_| {
        LedgerError::unavailable(format!("PostgreSQL did not answer within {}s", OPERATION_TIMEOUT.as_secs()))
    })
}

/// Whether `error` means the connection is gone: closed under us, or the server said it is ending it
/// (connection exceptions, class 08; administrator or crash shutdown, 57P01–57P03) before closing it.
pub(super) fn connection_broke(error: &tokio_postgres::Error, session: &Session) -> bool {
    let ending = error
        .code()
        .map(|state| state.code())
        .is_some_and(|code| code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03"));
    ending || error.is_closed() || session.client.is_closed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planner_options_come_before_the_urls_own() {
        let plain = driver_config("postgres://postgres@127.0.0.1/test").unwrap();
        assert_eq!(plain.get_options(), Some(PLANNER_OPTIONS));
        let theirs = driver_config("postgres://postgres@127.0.0.1/test?options=-c%20synchronous_commit%3Doff").unwrap();
        assert_eq!(theirs.get_options(), Some(format!("{PLANNER_OPTIONS} -c synchronous_commit=off").as_str()));
    }

    #[tokio::test]
    async fn a_connection_plans_without_sequential_scans_or_jit_and_keeps_the_urls_options() {
        if crate::ledger::tests::postgres_admin().await.is_none() {
            return;
        }
        let base = crate::ledger::tests::postgres_admin_url();
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options=-c%20synchronous_commit%3Doff%20-c%20jit%3Don");
        let client = connect(&driver_config(&url).unwrap()).await.unwrap();
        let show = |name: &'static str| {
            let client = &client;
            async move { client.query_one(&format!("SHOW {name}"), &[]).await.unwrap().get::<_, String>(0) }
        };
        assert_eq!(show("enable_seqscan").await, "off");
        assert_eq!(show("synchronous_commit").await, "off");
        assert_eq!(show("jit").await, "on", "the URL's own options win");
        let plain = connect(&driver_config(&base).unwrap()).await.unwrap();
        assert_eq!(plain.query_one("SHOW jit", &[]).await.unwrap().get::<_, String>(0), "off");
    }
}
