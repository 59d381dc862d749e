//! The `Store` trait: where the core's operations (`dynamodb_lock_core::op::Op`) meet a
//! carrier. A store has one method, `apply`: one operation on the item at one key, in one
//! request, answered as `op::apply` answers. The product sends `Op`s only, and every retry is
//! a machine's (`request::Once` for a request that needs no settling); `StoreOps` names each
//! operation for tests. `http.rs` sends each `Op` to DynamoDB's HTTP API as
//! `dynamodb_lock_wire` writes it (the one translation, stating `op::allowed` and `op::apply`
//! as condition and update expressions) and reads the reply back through it; signatures are
//! in `sigv4.rs`, connections in `transport.rs`. `object.rs` carries the
//! original library's operations through a user's `dynamodb` object and refuses the others by
//! name; `src/tests/memory.rs` (unit tests, and the agreement test on real engines) keeps
//! items in a map, applies each operation through `op::apply`, and injects faults.

use async_trait::async_trait;

use crate::error::StoreError;
#[cfg(test)]
use crate::item::LockData;
use crate::item::{Guid, LockKey, LockRecord, Version};
use crate::stats::Outcome;

mod aws_env;
pub mod http;
#[cfg(test)]
#[path = "../tests/memory.rs"]
pub mod memory;
pub mod object;
mod sigv4;
mod transport;
pub use transport::{keep_connections_apart, MOST_HEARTBEAT_CONNECTIONS};

#[cfg(test)]
pub use dynamodb_lock_core::op::{Entry, WaitMark};
pub use dynamodb_lock_core::op::{Expect, Op, OpenFields, Reply, Ttl};

tokio::task_local! {
    /// The instant the request being sent is given up on (`send::within`).
    static DEADLINE: tokio::time::Instant;
}

/// Runs `send`, the sending of one request, until its deadline `at`, which the store reads
/// (`deadline`); `Err` when `at` passed first.
pub async fn until<F: std::future::Future>(
    at: tokio::time::Instant,
    send: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout_at(at, DEADLINE.scope(at, send)).await
}

/// The deadline of the request being sent, for a store whose work before it sends (loading its
/// configuration, fetching credentials) must end by then: a request given up on before it
/// was sent is known not to have landed.
pub fn deadline() -> Option<tokio::time::Instant> {
    DEADLINE.try_with(|at| *at).ok()
}

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

/// Each operation by name, for tests: `Store::apply` of its `Op`, and the part of the reply it
/// answers. The product sends `Op`s only.
#[cfg(test)]
#[async_trait]
pub trait StoreOps: Store {
    /// Strongly consistent read of the lock item.
    async fn get(&self, key: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        self.apply(key, &Op::Get).await.and_then(before)
    }

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

    /// A waiter puts itself first in line on the item, if there is one, and the place is
    /// free, stale, already its own, or held by a waiter that started waiting later. A failed
    /// condition means another waiter is first.
    async fn mark_waiting(&self, key: &LockKey, mark: &WaitMark<'_>) -> Result<(), StoreError> {
        self.apply(key, &Op::MarkWaiting(mark.clone())).await.and_then(done)
    }

    /// Fifo, uncontended: take the head item if it is free (absent, or released) and no
    /// ticket is outstanding (`ticketNext` absent or equal to `fencingToken`). The ticket and
    /// the token become `ticketNext + 1` (from `fencingToken`, or 0, when absent), and
    /// `queueGranted` becomes `queueNext`. Returns the token.
    async fn fifo_take_free(&self, head: &LockKey, fields: &OpenFields<'_>, guid: &Guid) -> Result<u64, StoreError> {
        self.apply(head, &Op::FifoTakeFree { fields, guid })
            .await
            .and_then(token)
    }

    /// Fifo: take the next ticket and queue position (`ticketNext + 1`, `queueNext + 1`),
    /// unconditionally. Returns the head item as it was before.
    async fn fifo_ticket(&self, head: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        self.apply(head, &Op::FifoTicket).await.and_then(before)
    }

    /// Fifo, several resources: set `ticketNext` to `ticket` and take the next queue position,
    /// if every ticket issued for this resource is lower. Returns the head item as it was.
    async fn fifo_reserve(&self, head: &LockKey, ticket: u64) -> Result<Option<LockRecord>, StoreError> {
        self.apply(head, &Op::FifoReserve { ticket }).await.and_then(before)
    }

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

    /// Fifo: write a queue entry if there is none at `key`.
    async fn fifo_put_entry(&self, key: &LockKey, entry: &Entry<'_>) -> Result<(), StoreError> {
        self.apply(key, &Op::FifoPutEntry(entry.clone())).await.and_then(done)
    }

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

    /// Fifo: move a live queue entry's TTL attribute to `ttl` (Unix seconds).
    async fn fifo_touch_entry(&self, key: &LockKey, ttl: Ttl<'_>) -> Result<(), StoreError> {
        self.apply(key, &Op::FifoTouchEntry { ttl }).await.and_then(done)
    }
}

#[cfg(test)]
impl<S: Store + ?Sized> StoreOps for S {}

/// A reply of another kind than the operation answers: a store that does not keep to
/// `op::apply`'s replies.
fn unexpected(op: &str, reply: &Reply<LockRecord>) -> StoreError {
    invalid_response(&format!("the store answered {op} with {reply:?}"))
}

/// A lock item as DynamoDB's JSON gives it (an `Item` of GetItem, as text), decoded as every
/// reply is (`null`: no item).
pub fn decode_item(item: &str) -> Result<Option<LockRecord>, StoreError> {
    dynamodb_lock_wire::decode_item(item).map_err(wire_error)
}

/// A request the translation into DynamoDB's JSON could not write, or a reply it could not
/// read.
pub(crate) fn wire_error(e: dynamodb_lock_wire::Error) -> StoreError {
    use dynamodb_lock_wire::Error;
    match e {
        Error::Config(message) => lasting("ConfigError", message, false),
        Error::NotSupported(message) => not_supported(message),
        Error::Invalid(message) => invalid_response(&message),
    }
}

/// A reply that cannot be read as an answer; the request may have been applied.
pub(crate) fn invalid_response(message: &str) -> StoreError {
    lasting("InvalidResponse", message.into(), true)
}

/// An error that a retry would meet again.
fn lasting(code: &str, message: String, maybe_applied: bool) -> StoreError {
    StoreError::Service {
        code: code.into(),
        message,
        transient: false,
        maybe_applied,
    }
}

/// How a request ended, as `metrics()` counts it.
fn outcome<T>(result: &Result<T, StoreError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(e) if e.is_condition_failed() => Outcome::ConditionFailed,
        Err(e) if dynamodb_lock_wire::is_throttle(e.code()) => Outcome::Throttled,
        Err(_) => Outcome::Error,
    }
}

/// A renewal's reply: the `guid`s of the locks an operator revoked, when the item renewed is
/// a session's.
pub fn revoked(r: Reply<LockRecord>) -> Result<Vec<Vec<u8>>, StoreError> {
    match r {
        Reply::Revoked(guids) => Ok(guids),
        Reply::Done => Ok(Vec::new()),
        other => Err(unexpected("a renewal", &other)),
    }
}

#[cfg(test)]
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

#[cfg(test)]
fn before(r: Reply<LockRecord>) -> Result<Option<LockRecord>, StoreError> {
    match r {
        Reply::Before(b) => Ok(b),
        other => Err(unexpected("a read", &other)),
    }
}

#[cfg(test)]
fn waiting_mark(r: Reply<LockRecord>) -> Result<Option<u64>, StoreError> {
    match r {
        Reply::WaitingMark(m) => Ok(m),
        other => Err(unexpected("a release", &other)),
    }
}

/// An operation a store cannot carry.
pub fn not_supported(message: String) -> StoreError {
    lasting("NotSupported", message, false)
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
