//! The `Store` trait: where the core's operations (`dynamodb_lock_core::op::Op`) meet a
//! carrier. A store has one method, `apply`: one operation on the item at one key, in one
//! request, answered as `op::apply` answers. `StoreOps` names each operation for the code that
//! sends it. `http.rs` is the one translation of every `Op` into DynamoDB's HTTP API, stating
//! `op::allowed` and `op::apply` as condition and update expressions (bodies in `json.rs`,
//! signatures in `sigv4.rs`, connections in `transport.rs`); `object.rs` carries the original
//! library's operations through a user's `dynamodb` object and refuses the others by name;
//! `memory.rs` (unit tests, and the agreement test on real engines) keeps items in a map,
//! applies each operation through `op::apply`, and injects faults. `attempt` wraps any
//! operation with per-attempt timeouts and bounded, jittered retries of transient failures,
//! and remembers whether a failed attempt may have been applied, so callers can resolve
//! ambiguous outcomes by reading.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use dynamodb_lock_core::request::{Attempts, Policy, Time};
use rand::Rng;
use tokio::time::Instant;

use crate::error::StoreError;
use crate::item::{Guid, LockData, LockKey, LockRecord, Version};

mod aws_env;
pub mod http;
pub(crate) mod json;
#[cfg(test)]
pub mod memory;
pub mod object;
mod sigv4;
mod transport;
pub use transport::{keep_connections_apart, MOST_HEARTBEAT_CONNECTIONS};

pub use dynamodb_lock_core::op::{Entry, Expect, Op, OpenFields, Reply, Ttl, WaitMark};

/// A put of the whole FailOpen item, as the original library writes it
/// (`dynamodb_lock_core::original`): an acquisition, a heartbeat or a release.
#[derive(Clone, Copy, Debug)]
pub struct WholeItem<'a> {
    pub owner: &'a str,
    pub guid: &'a Guid,
    pub fencing_token: u64,
    pub lease_duration_ms: u64,
    pub lock_acquired_time_unix_ms: Option<u64>,
    pub expect: &'a Expect<Guid, Version>,
}

/// A store of lock items: it applies one of the core's operations (`op::Op`) to the item at a
/// key, in one request, with the conditions `op::apply` states, and answers as `op::apply`
/// does. A refused condition is `StoreError::ConditionFailed`, carrying the item as it was when
/// the store returns it (never `Reply::Refused`). An operation the store cannot carry is
/// `NotSupported`.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    async fn apply(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Reply<LockRecord>, StoreError>;

    /// The error of a request that got no answer in time, naming where it went when the store
    /// knows (`timed_out` otherwise).
    fn timed_out(&self) -> StoreError {
        timed_out()
    }
}

/// Each operation by name: `Store::apply` of its `Op`, and the part of the reply it answers.
#[async_trait]
pub trait StoreOps: Store {
    /// Strongly consistent read of the lock item.
    async fn get(&self, key: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        self.apply(key, &Op::Get).await.and_then(before)
    }

    #[cfg(test)]
    /// FailClosed acquisition: write `{key, owner, guid}` (and the holder's data and the TTL
    /// attribute, when given) if no item exists.
    async fn put_if_absent(
        &self,
        key: &LockKey,
        owner: &str,
        guid: &Guid,
        data: Option<&LockData>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<(), StoreError> {
        let op = Op::PutIfAbsent { owner, guid, data, ttl };
        self.apply(key, &op).await.and_then(done)
    }

    /// FailClosed release: delete the item if its `guid` is one of `guids`. Returns the
    /// item's `lockWaitingUnixMs` as it was.
    async fn delete_if_guid(&self, key: &LockKey, guids: &[Guid]) -> Result<Option<u64>, StoreError> {
        self.apply(key, &Op::DeleteIfGuid { guids })
            .await
            .and_then(waiting_mark)
    }

    #[cfg(test)]
    /// FailOpen acquisition in one request: set owner, `guid`, lease and `fencingToken + 1`
    /// if the item is absent, released, or still carries `waited_out`. Returns the new token.
    /// `clear_mark` removes the waiting mark (the taker was the first waiter in line).
    async fn take(
        &self,
        key: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        waited_out: Option<&Version>,
        clear_mark: bool,
    ) -> Result<u64, StoreError> {
        let op = Op::Take {
            fields,
            guid,
            waited_out,
            clear_mark,
        };
        self.apply(key, &op).await.and_then(token)
    }

    #[cfg(test)]
    /// Hands a held lock from one acquisition of this client to the next: rotate `guid` to
    /// `new_guid` if it is one of `guids` and no waiter marked the item at or after
    /// `marks_fresh_since_unix_ms` (another process waits: it goes first). With `fields`
    /// (FailOpen) the write also sets the lease and raises `fencingToken` by one, and returns
    /// the new token; without (FailClosed) it only rotates `guid`. Either way the previous
    /// holder's data is removed and `ttl`, when given, is written (`fields.ttl` is not read).
    async fn hand_over(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: Option<&OpenFields<'_>>,
        marks_fresh_since_unix_ms: u64,
        ttl: Option<Ttl<'_>>,
    ) -> Result<Option<u64>, StoreError> {
        let op = Op::HandOver {
            guids,
            new_guid,
            fields,
            marks_fresh_since_unix_ms,
            ttl,
        };
        match self.apply(key, &op).await? {
            Reply::HandedOver(t) => Ok(t),
            other => Err(unexpected("HandOver", &other)),
        }
    }

    #[cfg(test)]
    /// A put of the whole FailOpen item on `item.expect` (the original's request sequence,
    /// for a store without `UpdateItem`). Only the user-object store carries it.
    async fn put_item(&self, key: &LockKey, w: &WholeItem<'_>) -> Result<(), StoreError> {
        let op = Op::PutItem {
            owner: w.owner,
            guid: w.guid,
            fencing_token: w.fencing_token,
            lease_duration_ms: w.lease_duration_ms,
            lock_acquired_time_unix_ms: w.lock_acquired_time_unix_ms,
            expect: w.expect,
        };
        self.apply(key, &op).await.and_then(done)
    }

    /// FailOpen heartbeat: rotate `guid` to `new_guid` if it is one of `guids` and held. A
    /// session's item answers with the `guid`s of its locks an operator revoked, if any.
    async fn renew(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: &OpenFields<'_>,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let op = Op::Renew {
            guids,
            new_guid,
            fields,
        };
        match self.apply(key, &op).await? {
            Reply::Revoked(guids) => Ok(guids),
            other => done(other).map(|()| Vec::new()),
        }
    }

    #[cfg(test)]
    /// FailOpen release: set `leaseDurationMs` to 1 if `guid` is one of `guids`; the item and
    /// its `fencingToken` stay (with `ttl`, until DynamoDB deletes it). Returns the item's
    /// `lockWaitingUnixMs` as it was.
    async fn release(
        &self,
        key: &LockKey,
        guids: &[Guid],
        lock_acquired_time_unix_ms: Option<u64>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<Option<u64>, StoreError> {
        let op = Op::Release {
            guids,
            lock_acquired_time_unix_ms,
            ttl,
        };
        self.apply(key, &op).await.and_then(waiting_mark)
    }

    /// `lock.update({ data })`: set (or, with `None`, remove) the holder's data if `guid` is
    /// one of `guids`; `guid` itself is not rotated. Writes `ttl` too, when given.
    async fn set_data(
        &self,
        key: &LockKey,
        guids: &[Guid],
        data: Option<&LockData>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<(), StoreError> {
        self.apply(key, &Op::SetData { guids, data, ttl }).await.and_then(done)
    }

    #[cfg(test)]
    /// A waiter puts itself first in line on the item, if there is one, and the place is
    /// free, stale, already its own, or held by a waiter that started waiting later. A failed
    /// condition means another waiter is first.
    async fn mark_waiting(&self, key: &LockKey, mark: &WaitMark<'_>) -> Result<(), StoreError> {
        self.apply(key, &Op::MarkWaiting(mark.clone())).await.and_then(done)
    }

    #[cfg(test)]
    /// Fifo, uncontended: take the head item if it is free (absent, or released) and no
    /// ticket is outstanding (`ticketNext` absent or equal to `fencingToken`). The ticket and
    /// the token become `ticketNext + 1` (from `fencingToken`, or 0, when absent), and
    /// `queueGranted` becomes `queueNext`. Returns the token.
    async fn fifo_take_free(&self, head: &LockKey, fields: &OpenFields<'_>, guid: &Guid) -> Result<u64, StoreError> {
        self.apply(head, &Op::FifoTakeFree { fields, guid })
            .await
            .and_then(token)
    }

    #[cfg(test)]
    /// Fifo: take the next ticket and queue position (`ticketNext + 1`, `queueNext + 1`),
    /// unconditionally. Returns the head item as it was before.
    async fn fifo_ticket(&self, head: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        self.apply(head, &Op::FifoTicket).await.and_then(before)
    }

    #[cfg(test)]
    /// Fifo, several resources: set `ticketNext` to `ticket` and take the next queue position,
    /// if every ticket issued for this resource is lower. Returns the head item as it was.
    async fn fifo_reserve(&self, head: &LockKey, ticket: u64) -> Result<Option<LockRecord>, StoreError> {
        self.apply(head, &Op::FifoReserve { ticket }).await.and_then(before)
    }

    #[cfg(test)]
    /// Fifo: give back ticket `ticket` at queue position `position`, if both are still the
    /// last issued: `ticketNext` becomes `previous_ticket`, `queueNext` `position - 1`.
    async fn fifo_untake(
        &self,
        head: &LockKey,
        ticket: u64,
        position: u64,
        previous_ticket: u64,
    ) -> Result<(), StoreError> {
        let op = Op::FifoUntake {
            ticket,
            position,
            previous_ticket,
        };
        self.apply(head, &op).await.and_then(done)
    }

    #[cfg(test)]
    /// Fifo: write a queue entry if there is none at `key`.
    async fn fifo_put_entry(&self, key: &LockKey, entry: &Entry<'_>) -> Result<(), StoreError> {
        self.apply(key, &Op::FifoPutEntry(entry.clone())).await.and_then(done)
    }

    #[cfg(test)]
    /// Fifo: grant the head item to `ticket` (queue position `position`): set owner, `guid`,
    /// lease, `fencingToken = ticket`, `queueGranted = position`, if the item is free (or
    /// still carries `waited_out`) and its `fencingToken` is lower than `ticket`.
    async fn fifo_grant(
        &self,
        head: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        ticket: u64,
        position: u64,
        waited_out: Option<&Version>,
    ) -> Result<(), StoreError> {
        let op = Op::FifoGrant {
            fields,
            guid,
            ticket,
            position,
            waited_out,
        };
        self.apply(head, &op).await.and_then(done)
    }

    #[cfg(test)]
    /// Fifo: mark a queue entry finished (`leaseDurationMs` 1, `guid` rotated to `new_guid`
    /// so that its owner's heartbeats fail) if its `guid` is one of `guids`.
    async fn fifo_finish_entry(&self, key: &LockKey, guids: &[Guid], new_guid: &Guid) -> Result<(), StoreError> {
        self.apply(key, &Op::FifoFinishEntry { guids, new_guid })
            .await
            .and_then(done)
    }

    /// Fifo: delete a queue entry if it is finished.
    async fn fifo_delete_finished(&self, key: &LockKey) -> Result<(), StoreError> {
        self.apply(key, &Op::FifoDeleteFinished).await.and_then(done)
    }

    #[cfg(test)]
    /// Fifo: move a live queue entry's TTL attribute to `ttl` (Unix seconds).
    async fn fifo_touch_entry(&self, key: &LockKey, ttl: Ttl<'_>) -> Result<(), StoreError> {
        self.apply(key, &Op::FifoTouchEntry { ttl }).await.and_then(done)
    }
}

impl<S: Store + ?Sized> StoreOps for S {}

/// A reply of another kind than the operation answers: a store that does not keep to
/// `op::apply`'s replies.
fn unexpected(op: &str, reply: &Reply<LockRecord>) -> StoreError {
    StoreError::Service {
        code: "InvalidResponse".into(),
        message: format!("the store answered {op} with {reply:?}"),
        transient: false,
        maybe_applied: true,
    }
}

fn done(r: Reply<LockRecord>) -> Result<(), StoreError> {
    match r {
        Reply::Done => Ok(()),
        other => Err(unexpected("a write", &other)),
    }
}

#[cfg(test)]
fn token(r: Reply<LockRecord>) -> Result<u64, StoreError> {
    match r {
        Reply::Token(t) => Ok(t),
        other => Err(unexpected("a write that raises the token", &other)),
    }
}

fn before(r: Reply<LockRecord>) -> Result<Option<LockRecord>, StoreError> {
    match r {
        Reply::Before(b) => Ok(b),
        other => Err(unexpected("a read", &other)),
    }
}

fn waiting_mark(r: Reply<LockRecord>) -> Result<Option<u64>, StoreError> {
    match r {
        Reply::WaitingMark(m) => Ok(m),
        other => Err(unexpected("a release", &other)),
    }
}

/// An operation a store cannot carry.
pub fn not_supported(message: String) -> StoreError {
    StoreError::Service {
        code: "NotSupported".into(),
        message,
        transient: false,
        maybe_applied: false,
    }
}

/// How hard to try one logical operation: the core's retry policy (`request::Policy`: the
/// attempts, their timeout, the jittered pauses, the deadline), anchored to the instant its
/// times count from.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub policy: Policy,
    origin: Instant,
}

impl RetryPolicy {
    /// `policy`, its times counted from now.
    pub fn new(policy: Policy) -> Self {
        RetryPolicy {
            policy,
            origin: Instant::now(),
        }
    }

    /// The same policy, with no attempt running past `deadline`.
    pub fn until(mut self, deadline: Instant) -> Self {
        self.policy = self.policy.until(self.time(deadline));
        self
    }

    /// `at` as the policy's time.
    pub fn time(&self, at: Instant) -> Time {
        at.saturating_duration_since(self.origin)
    }

    /// The policy's time `t` as an instant.
    pub fn instant(&self, t: Time) -> Instant {
        self.origin + t
    }

    /// The pause before attempt `n` (1-based, n >= 2), with fresh jitter.
    pub fn backoff(&self, n: u32) -> Duration {
        self.policy.backoff(n, rand::thread_rng().gen())
    }
}

/// Runs `op` until it succeeds, fails for good, or the policy runs out, as the core's
/// `request::Attempts` decides: each attempt gets a timeout; condition failures are returned
/// at once: they are answers, not faults. For operations whose outcome needs no settling
/// (reads, and writes whose repetition is harmless); the machines settle their own.
#[cfg_attr(not(test), allow(dead_code))]
pub async fn attempt<T, F, Fut>(retry: RetryPolicy, op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    attempt_with(timed_out, retry, op).await
}

/// `attempt` of an operation on `store`, whose timeouts name where the request went.
pub async fn attempt_on<T, F, Fut>(store: &dyn Store, retry: RetryPolicy, op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    attempt_with(|| store.timed_out(), retry, op).await
}

/// `attempt`, with `timed_out` making the error of an attempt that ran out of time.
async fn attempt_with<T, F, Fut>(
    timed_out: impl Fn() -> StoreError,
    retry: RetryPolicy,
    mut op: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut attempts = Attempts::new(retry.policy);
    loop {
        let timeout_at = retry.instant(attempts.send(retry.time(Instant::now())));
        let result = if timeout_at <= Instant::now() {
            Err(timed_out())
        } else {
            match tokio::time::timeout_at(timeout_at, op()).await {
                Ok(r) => r,
                Err(_) => Err(timed_out()),
            }
        };
        let error = match result {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let now = retry.time(Instant::now());
        let random = rand::thread_rng().gen();
        match attempts.failed(error.is_transient(), error.maybe_applied(), now, random) {
            Some(at) => tokio::time::sleep_until(retry.instant(at)).await,
            None => return Err(error),
        }
    }
}

pub fn timed_out() -> StoreError {
    StoreError::Io {
        code: "TimeoutError".into(),
        message: timed_out_message(""),
        maybe_applied: true,
    }
}

/// The message of a timeout; `destination` names where the request went (` (endpoint URL)`),
/// or is empty when the store has no endpoint to name.
pub fn timed_out_message(destination: &str) -> String {
    match destination {
        "" => "The request timed out before DynamoDB answered".into(),
        _ => format!(
            "The request timed out before DynamoDB answered{destination}: check that the endpoint is the right one, \
             reachable and answering"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn throttled() -> StoreError {
        StoreError::Service {
            code: "ProvisionedThroughputExceededException".into(),
            message: "slow down".into(),
            transient: true,
            maybe_applied: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_then_reported() {
        let calls = AtomicU32::new(0);
        let r: Result<(), StoreError> = attempt(RetryPolicy::new(Policy::new(3, Duration::from_secs(1))), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(throttled())
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(r.unwrap_err().code(), "ProvisionedThroughputExceededException");
    }

    #[tokio::test(start_paused = true)]
    async fn condition_failures_are_not_retried() {
        let calls = AtomicU32::new(0);
        let r: Result<(), StoreError> = attempt(RetryPolicy::new(Policy::new(5, Duration::from_secs(1))), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::condition_failed())
        })
        .await;
        assert!(matches!(r.unwrap_err(), StoreError::ConditionFailed { .. }));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_attempt_times_out_and_is_tried_again() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let r: Result<(), StoreError> =
            attempt(RetryPolicy::new(Policy::new(2, Duration::from_millis(100))), || async {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    std::future::pending::<()>().await;
                }
                Err(StoreError::condition_failed())
            })
            .await;
        assert!(matches!(r.unwrap_err(), StoreError::ConditionFailed { .. }));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(start.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_runs_past_the_deadline() {
        let start = Instant::now();
        let policy =
            RetryPolicy::new(Policy::new(100, Duration::from_secs(10))).until(start + Duration::from_millis(300));
        let r: Result<(), StoreError> = attempt(policy, || async {
            std::future::pending::<()>().await;
            Ok(())
        })
        .await;
        assert_eq!(r.unwrap_err().code(), "TimeoutError");
        assert!(start.elapsed() <= Duration::from_millis(300));
    }
}
