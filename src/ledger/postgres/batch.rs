//! Group commit on PostgreSQL: the claims and settles that queue up while the writers are busy go to the server as one
//! pipelined transaction — `BEGIN`, the batch's statements, `COMMIT`, sent together without waiting for each other's
//! answers — so a batch costs one round trip and one WAL flush, however many calls it carries. Its claims and
//! completions go as one multi-row statement ([`super::rows`]), so the server's work per statement is paid per batch,
//! not per call.
//!
//! Rules:
//! - [`WRITERS`](super::conn::WRITERS) tasks, each on a connection of its own that it drives itself
//!   ([`Connector::drive`](super::conn::Connector::drive)), take everything queued when they are free (at most
//!   [`MAX_BATCH`] jobs), after the completions parked until then (see [`crate::ledger::background`]): a quiet
//!   call's completion and the next call's claim share one round trip.
//!   An idle writer sleeps on the queue; nothing polls. A lone job, or a batch that is one statement (claims
//!   and completions only), is sent without `BEGIN`/`COMMIT`, in autocommit: a statement is atomic alone.
//! - A batch announces nothing itself: the claims trigger notifies, inside the transaction, the settles of
//!   claims a waiter marked (see [`super::schema`]), which are rare. A notifying transaction holds the server's
//!   notification lock from its commit until its WAL flush ends, so such a batch makes the next one that notifies
//!   wait for its flush; the batches of settles nobody waits for share the server's flushes.
//! - A batch runs its jobs in key order, and every statement elsewhere that locks several claims takes them in
//!   key order too (`sql::Dialect::bulk_update`), so two transactions never wait for each other in a cycle.
//! - A claim is `INSERT … ON CONFLICT DO NOTHING` (the batch's claims in one part of the multi-row statement; in
//!   the per-job form, each followed by a `SELECT`, which under READ COMMITTED sees the row that won, ours or one
//!   committed by another replica the insert waited for). A settle is one conditional statement (the
//!   completions' one `UPDATE`). What the pipeline does not decide — a claim whose key was taken (a retry), a
//!   settle that changed nothing, a claim whose row vanished in between — is done after the commit by the single
//!   operations of [`super::ops`], which read, explain or retry it.
//! - Every job is answered after the commit. A statement that fails for its own values (SQLSTATE classes 22 and
//!   23: data and integrity errors) is answered with its error and the batch runs again without it (when the
//!   statement was a multi-row one, the batch first runs again in the per-job form, to find the job); a deadlock
//!   or serialization failure runs the batch again; any other failure is the batch's, and all its jobs get it. A
//!   broken connection runs the batch once more on a fresh one (see [`super::conn`]): every job is idempotent
//!   for its caller (a claim recognises its own insert by its id; a repeated settle is accepted).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex as SyncMutex;
use tokio::sync::{Mutex, mpsc};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::conn::{self, Connector, Failure, Session};
use super::ops;
use super::rows;
use crate::ledger::background::{Nudger, Parked, Parking, QueuedSettle};
use crate::ledger::error::LedgerError;
use crate::ledger::rules::Settle;
use crate::ledger::sql::RACE_ATTEMPTS;
use crate::ledger::stats::{Batch, WriterCounters, WriterStats};
use crate::ledger::types::{ClaimOutcome, ClaimRecord, NewClaim, to_millis};

/// The most jobs committed together.
const MAX_BATCH: usize = 256;

pub(super) type ClaimReply = Box<dyn FnOnce(Result<ClaimOutcome, LedgerError>) + Send>;
pub(super) type SettleReply = Box<dyn FnOnce(Result<(), LedgerError>) + Send>;

/// One claim or settle, and how to answer it once its batch committed.
pub(super) enum Job {
    Claim { new: NewClaim, id: String, now: SystemTime, reply: Answer<ClaimReply> },
    Settle { queued: Arc<QueuedSettle>, now: SystemTime, reply: Answer<SettleReply> },
}

/// A reply, held so that a batch can borrow its jobs across `.await`s on any thread: the mutex is never locked,
/// only taken apart by the one owner that answers.
pub(super) struct Answer<R>(SyncMutex<R>);

impl<R> Answer<R> {
    pub(super) fn new(reply: R) -> Answer<R> {
        Answer(SyncMutex::new(reply))
    }

    fn take(self) -> R {
        self.0.into_inner()
    }
}

impl Job {
    fn key(&self) -> &str {
        match self {
            Job::Claim { new, .. } => new.key.as_str(),
            Job::Settle { queued, .. } => queued.key.as_str(),
        }
    }

    /// When the job was made (its caller's clock reading).
    fn made(&self) -> SystemTime {
        match self {
            Job::Claim { now, .. } | Job::Settle { now, .. } => *now,
        }
    }

    fn fail(self, error: LedgerError) {
        match self {
            Job::Claim { reply, .. } => reply.take()(Err(error)),
            Job::Settle { reply, .. } => reply.take()(Err(error)),
        }
    }
}

/// The writers' queue (`None` nudges a writer to take the parked jobs). Once queued or parked, a job runs
/// whether or not its caller still waits; the writers end when the store (and with it this queue) is dropped and
/// they have run what was queued and parked.
pub(super) struct Writers {
    queue: Queue,
    parking: Arc<Parking<Job>>,
    counters: Arc<WriterCounters>,
    _nudger: Nudger,
}

#[derive(Clone)]
struct Queue(mpsc::UnboundedSender<Option<Job>>);

/// What the writers share besides their queue.
struct Shared {
    conn: Arc<Connector>,
    jobs: Mutex<mpsc::UnboundedReceiver<Option<Job>>>,
    parking: Arc<Parking<Job>>,
    counters: Arc<WriterCounters>,
}

impl Writers {
    /// Starts the writer tasks; parked jobs wait at most `linger`.
    pub(super) fn start(conn: Arc<Connector>, linger: Duration) -> Writers {
        let (queue, jobs) = mpsc::unbounded_channel();
        let (queue, parking, counters) = (Queue(queue), Arc::new(Parking::new(linger)), Arc::default());
        let slots = conn.writer_slots();
        let shared = Arc::new(Shared {
            conn,
            jobs: Mutex::new(jobs),
            parking: parking.clone(),
            counters: Arc::clone(&counters),
        });
        for slot in slots {
            tokio::spawn(write(shared.clone(), slot));
        }
        let _nudger = {
            let (queue, parked) = (queue.clone(), parking.clone());
            Nudger::start(parking.clone(), move || queue.nudge(&parked))
        };
        Writers { queue, parking, counters, _nudger }
    }

    pub(super) fn submit(&self, job: Job) {
        if let Err(mpsc::error::SendError(Some(job))) = self.queue.0.send(Some(job)) {
            job.fail(stopped());
        }
    }

    /// Parks `job` for the next batch (see [`crate::ledger::background`]).
    pub(super) fn park(&self, job: Job) {
        if self.parking.park(job) == Parked::Full {
            self.nudge();
        }
    }

    /// Has a writer apply the parked jobs now.
    pub(super) fn nudge(&self) {
        self.queue.nudge(&self.parking);
    }

    /// What the writers did so far (see [`crate::ledger::stats`]).
    pub(super) fn stats(&self) -> WriterStats {
        self.counters.snapshot()
    }
}

impl Queue {
    fn nudge(&self, parking: &Parking<Job>) {
        if self.0.send(None).is_err() {
            let mut lost = Vec::new();
            parking.take_into(&mut lost);
            lost.into_iter().for_each(|job| job.fail(stopped()));
        }
    }
}

fn stopped() -> LedgerError {
    LedgerError::unavailable("the PostgreSQL ledger's writers have stopped")
}

async fn write(shared: Arc<Shared>, slot: usize) {
    shared.conn.drive(slot, take_and_run(&shared, slot)).await;
}

/// Takes what is queued and parked and runs it, until the queue closes.
async fn take_and_run(shared: &Shared, slot: usize) {
    let mut received = Vec::new();
    // One free writer at a time waits on the queue, the others behind it; whoever wakes takes all that is there.
    while shared.jobs.lock().await.recv_many(&mut received, MAX_BATCH).await > 0 {
        let mut batch = Vec::new();
        shared.parking.take_into(&mut batch);
        let parked = batch.len();
        batch.extend(received.drain(..).flatten());
        run_counted(shared, slot, batch, parked).await;
    }
    let mut rest = Vec::new();
    shared.parking.take_into(&mut rest);
    let parked = rest.len();
    run_counted(shared, slot, rest, parked).await;
}

/// Runs `batch`, whose first `parked` jobs were parked (nobody waits for them), and records it.
async fn run_counted(shared: &Shared, slot: usize, batch: Vec<Job>, parked: usize) {
    // A nudge whose jobs an earlier wake-up took finds nothing.
    if batch.is_empty() {
        return;
    }
    let (started, wall) = (Instant::now(), SystemTime::now());
    let waited = batch[parked..].iter().map(|job| wall.duration_since(job.made()).unwrap_or_default()).sum();
    let record = Batch { jobs: batch.len(), awaited: batch.len() - parked, waited, ..Batch::default() };
    run(&shared.conn, slot, batch, &shared.counters, |commit| {
        // Recorded before its jobs are answered, so an answered caller sees it.
        shared.counters.record(&Batch { commit, busy: started.elapsed(), ..record });
    })
    .await;
}

/// Runs `jobs` as one transaction on the writer connection `slot` and answers each; `committed` is told how
/// long the pipelined round trip took before any job is answered.
pub(super) async fn run(
    conn: &Connector,
    slot: usize,
    mut jobs: Vec<Job>,
    counters: &WriterCounters,
    committed: impl FnOnce(Duration),
) {
    // Stable: two jobs of one key keep their order of arrival.
    jobs.sort_by(|a, b| a.key().cmp(b.key()));
    let mut conflicts = 0;
    let mut committed = Some(committed);
    let mut form = Form::Rows;
    while !jobs.is_empty() {
        let sent = Instant::now();
        let tried = conn
            .run_on(slot, |session| {
                let jobs = &jobs;
                async move { attempt(&session, jobs, form).await }
            })
            .await;
        if let Ok(Attempt::Committed(_)) = &tried
            && let Some(committed) = committed.take()
        {
            committed(sent.elapsed());
        }
        match tried {
            Ok(Attempt::Committed(steps)) => return finish(conn, slot, jobs, steps, counters).await,
            Ok(Attempt::Refused { index, error }) => jobs.remove(index).fail(error),
            Ok(Attempt::Regroup) => form = Form::PerJob,
            Ok(Attempt::Conflict(_)) if conflicts < RACE_ATTEMPTS => conflicts += 1,
            Ok(Attempt::Conflict(error) | Attempt::Failed(error)) | Err(error) => {
                if let Some(committed) = committed.take() {
                    committed(Duration::ZERO);
                }
                return jobs.into_iter().for_each(|job| job.fail(error.clone()));
            }
        }
    }
}

/// What one attempt at a batch came to.
enum Attempt {
    /// Committed; one [`Step`] per job, in order.
    Committed(Vec<Step>),
    /// Rolled back because the job at `index` failed on its own values.
    Refused { index: usize, error: LedgerError },
    /// Rolled back because a multi-row statement failed on some job's values: try again with a statement per job.
    Regroup,
    /// Rolled back as a deadlock or serialization victim; worth running again.
    Conflict(LedgerError),
    /// Rolled back for a reason every job shares.
    Failed(LedgerError),
}

/// What a job's statements returned: rows inserted or changed, and (claims, in the per-job form only) the row
/// that holds its key, whoever's it is.
#[derive(Default)]
struct Step {
    changed: u64,
    row: Option<Row>,
}

/// What one pipelined statement returned.
enum Returned {
    Done,
    Changed(u64),
    Row(Option<Row>),
    Rows(Vec<Row>),
}

/// How a batch's jobs become statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Claims and completions in one multi-row statement, other settles one each (see [`super::rows`]).
    Rows,
    /// A statement (or two) per job, so that a failure names its job.
    PerJob,
}

/// Whose a pipelined statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// `BEGIN`, `COMMIT`.
    Batch,
    /// The job at this index.
    Job(usize),
    /// The multi-row statement: the completed keys and the inserted claims' ids.
    Rows,
}

type Pipelined<'a> = Pin<Box<dyn Future<Output = Result<Returned, tokio_postgres::Error>> + Send + 'a>>;

async fn attempt(session: &Session, jobs: &[Job], form: Form) -> Result<Attempt, Failure> {
    let gathered = if jobs.len() > 1 && form == Form::Rows { Some(rows::gather(jobs)) } else { None };
    let mut statements: Vec<(Owner, Pipelined<'_>)> = Vec::with_capacity(2 * jobs.len() + 2);
    match &gathered {
        Some(gathered) => {
            statements.extend(rows_statement(session, gathered).map(|rows| (Owner::Rows, rows)));
            for &index in &gathered.single {
                statements.extend(statements_of(session, &jobs[index]).into_iter().map(|one| (Owner::Job(index), one)));
            }
        }
        None => {
            for (index, job) in jobs.iter().enumerate() {
                statements.extend(statements_of(session, job).into_iter().map(|one| (Owner::Job(index), one)));
            }
        }
    }
    // A lone job needs no transaction: each of its statements is atomic alone, and a claim's select reads after
    // its insert either way; nor does a batch that is one statement.
    if jobs.len() > 1 && statements.len() > 1 {
        statements.insert(0, (Owner::Batch, simple(session, "BEGIN")));
        statements.push((Owner::Batch, simple(session, "COMMIT")));
    }
    let (owners, statements): (Vec<Owner>, Vec<Pipelined<'_>>) = statements.into_iter().unzip();
    let answers = in_order(statements).await;
    judge(session, answers, &owners, jobs)
}

/// The multi-row statement of `gathered`, unless it has neither claims nor completions.
fn rows_statement<'a>(session: &'a Session, gathered: &'a rows::Gathered<'a>) -> Option<Pipelined<'a>> {
    let (claims, completions) = (&gathered.claims, &gathered.completions);
    if claims.keys.is_empty() && completions.keys.is_empty() {
        return None;
    }
    let statement = async move {
        let values: [&(dyn ToSql + Sync); 15] = [
            &claims.keys,
            &claims.ids,
            &claims.principals,
            &claims.sessions,
            &claims.backends,
            &claims.tools,
            &claims.digests,
            &claims.nows,
            &claims.owners,
            &claims.leases,
            &completions.keys,
            &completions.owners,
            &completions.results,
            &completions.digests,
            &completions.nows,
        ];
        session.client.query(&session.prepared.batch, &values).await.map(Returned::Rows)
    };
    Some(Box::pin(statement))
}

fn simple<'a>(session: &'a Session, command: &'static str) -> Pipelined<'a> {
    Box::pin(async move { session.client.batch_execute(command).await.map(|()| Returned::Done) })
}

fn statements_of<'a>(session: &'a Session, job: &'a Job) -> Vec<Pipelined<'a>> {
    let (client, prepared) = (&session.client, &session.prepared);
    match job {
        Job::Claim { new, id, now, .. } => {
            let (now, lease_until, key) = (to_millis(*now), to_millis(*now + new.lease), new.key.as_str());
            let insert = async move {
                let values: [&(dyn ToSql + Sync); 10] = [
                    &key,
                    id,
                    &new.principal,
                    &new.session,
                    &new.backend,
                    &new.tool,
                    &new.args_digest,
                    &now,
                    &new.owner,
                    &lease_until,
                ];
                client.execute(&prepared.insert, &values).await.map(Returned::Changed)
            };
            let select = async move { client.query_opt(&prepared.select, &[&key]).await.map(Returned::Row) };
            vec![Box::pin(insert), Box::pin(select)]
        }
        Job::Settle { queued, now, .. } => {
            let settle = async move {
                let (key, owner, now) = (queued.key.as_str(), queued.owner.as_str(), to_millis(*now));
                let changed = match queued.settle.as_settle() {
                    Settle::Complete(stored) => {
                        client.execute(&prepared.complete, &[&key, &owner, &stored.text, &stored.digest, &now]).await
                    }
                    Settle::MarkUnknown(error) => {
                        client.execute(&prepared.mark_unknown, &[&key, &owner, &error, &now]).await
                    }
                    Settle::Release => client.execute(&prepared.release, &[&key, &owner]).await,
                };
                changed.map(Returned::Changed)
            };
            vec![Box::pin(settle)]
        }
    }
}

/// Polls every future, always in the vector's order, until all are done. Each request is sent on its future's
/// first poll, so they leave in this order, and the connection pipelines them: the batch is one round trip.
async fn in_order(mut pending: Vec<Pipelined<'_>>) -> Vec<Result<Returned, tokio_postgres::Error>> {
    let mut answers: Vec<Option<Result<Returned, tokio_postgres::Error>>> = pending.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut done = true;
        for (future, answer) in pending.iter_mut().zip(answers.iter_mut()) {
            if answer.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(ready) => *answer = Some(ready),
                    Poll::Pending => done = false,
                }
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    answers.into_iter().flatten().collect()
}

/// Reads a batch's answers: a broken connection is the connector's to handle; otherwise the first failure decides.
fn judge(
    session: &Session,
    answers: Vec<Result<Returned, tokio_postgres::Error>>,
    owners: &[Owner],
    jobs: &[Job],
) -> Result<Attempt, Failure> {
    if answers.iter().all(Result::is_ok) {
        return Ok(Attempt::Committed(steps(answers, owners, jobs)));
    }
    let mut errors: Vec<(usize, tokio_postgres::Error)> =
        answers.into_iter().enumerate().filter_map(|(at, answer)| answer.err().map(|error| (at, error))).collect();
    if let Some(broken) = errors.iter().position(|(_, error)| conn::connection_broke(error, session)) {
        return Err(Failure::Db(errors.swap_remove(broken).1));
    }
    // Statements after a failure only say that the transaction was aborted (class 25); the first other is why.
    let cause = errors.iter().position(|(_, error)| sqlstate_class(error) != Some("25")).unwrap_or(0);
    let (at, error) = errors.swap_remove(cause);
    Ok(match (sqlstate_class(&error), owners.get(at).copied().unwrap_or(Owner::Batch)) {
        (Some("40"), _) => Attempt::Conflict(conn::classify(&error)),
        (Some("22" | "23"), Owner::Job(index)) => Attempt::Refused { index, error: conn::classify(&error) },
        (Some("22" | "23"), Owner::Rows) => Attempt::Regroup,
        _ => Attempt::Failed(conn::classify(&error)),
    })
}

/// The steps of a batch whose every statement succeeded, one per job.
fn steps(answers: Vec<Result<Returned, tokio_postgres::Error>>, owners: &[Owner], jobs: &[Job]) -> Vec<Step> {
    let mut steps: Vec<Step> = jobs.iter().map(|_| Step::default()).collect();
    let mut own_statement = vec![false; jobs.len()];
    let mut decided = rows::Decided::default();
    for (answer, owner) in answers.into_iter().flatten().zip(owners) {
        match (owner, answer) {
            (Owner::Job(index), Returned::Changed(changed)) => {
                steps[*index].changed = changed;
                own_statement[*index] = true;
            }
            // A claim's select follows its insert.
            (Owner::Job(index), Returned::Row(row)) => steps[*index].row = row,
            (Owner::Rows, Returned::Rows(rows)) => decided = rows::Decided::read(&rows),
            _ => {}
        }
    }
    for ((step, job), own) in steps.iter_mut().zip(jobs).zip(own_statement) {
        if !own {
            step.changed = decided.changed_by(job);
        }
    }
    steps
}

fn sqlstate_class(error: &tokio_postgres::Error) -> Option<&str> {
    error.code().and_then(|state| state.code().get(..2))
}

/// Answers every job of a committed batch, finishing on the writer's connection what the pipeline left open.
async fn finish(conn: &Connector, slot: usize, jobs: Vec<Job>, steps: Vec<Step>, counters: &WriterCounters) {
    for (job, step) in jobs.into_iter().zip(steps) {
        match job {
            Job::Claim { new, id, now, reply } => {
                let outcome = match decided_claim(&new, &id, now, step) {
                    Some(decided) => decided,
                    None => {
                        counters.after_commit();
                        let (new, id) = (&new, id.as_str());
                        conn.run_on(slot, |session| async move { ops::claim(&session, new, id, now).await }).await
                    }
                };
                reply.take()(outcome);
            }
            Job::Settle { queued, now, reply } => {
                let outcome = if step.changed > 0 {
                    Ok(())
                } else {
                    counters.after_commit();
                    let queued = &queued;
                    conn.run_on(slot, |session| async move {
                        ops::settle(&session, &queued.key, &queued.owner, queued.settle.as_settle(), now).await
                    })
                    .await
                };
                reply.take()(outcome);
            }
        }
    }
}

/// A claim's outcome from its insert (and, in the per-job form, its select), or `None` when the batch did not
/// read the row that holds its key, or it vanished in between (then the claim runs again alone).
fn decided_claim(new: &NewClaim, id: &str, now: SystemTime, step: Step) -> Option<Result<ClaimOutcome, LedgerError>> {
    if step.changed == 1 {
        return Some(Ok(ClaimOutcome::Claimed(ClaimRecord::claimed(new, id.to_owned(), now))));
    }
    let found = ops::record(&step.row?).map_err(LedgerError::from);
    // Our own insert, committed by an attempt whose answer the broken connection lost.
    Some(found.map(|row| if row.id == id { ClaimOutcome::Claimed(row) } else { ClaimOutcome::Existing(row) }))
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
