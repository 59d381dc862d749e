//! The operations the lock protocol sends to the store, as data (`Op`), their answers
//! (`Reply`), and `apply`: what one operation does to one item, applied atomically (DynamoDB's
//! conditional writes are linearizable per item).
//!
//! Every condition is a named function below, written once: `apply` checks the operation's
//! condition, then writes. A failed condition changes nothing and answers with the item as it
//! was (`ReturnValuesOnConditionCheckFailure: ALL_OLD`). The store has no clock: every time a
//! condition compares is a value the client put into the operation, from its own clock.
//!
//! `apply` works on any `Record`: the decoded `LockRecord` (the addon's in-memory store), or a
//! smaller abstraction of it that keeps only what conditions read (the model checker's item).
//! The HTTP store states the same conditions as DynamoDB condition expressions.

use crate::broken::{self, Broken};
use crate::item::{
    Guid, GuidValue, LockData, LockRecord, SemHolder, Version, FENCING_TOKEN, MAX_FENCING_TOKEN, RELEASED_LEASE_MS,
};

/// A TTL attribute's name and value (Unix seconds after which DynamoDB may delete the item).
pub type Ttl<'a> = (&'a str, u64);

/// Fields a FailOpen write sets besides the key and `guid`.
#[derive(Clone, Debug)]
pub struct OpenFields<'a> {
    pub owner: &'a str,
    pub lease_duration_ms: u64,
    /// `Some(now)`: the writer's wall clock, from which the original with `trustLocalTime`
    /// counts the lease (an item without it would be taken at once); `None` removes it.
    pub lock_acquired_time_unix_ms: Option<u64>,
    /// The holder's data: set by an acquisition (`None` removes a previous holder's), left
    /// alone by a heartbeat.
    pub data: Option<&'a LockData>,
    /// The TTL attribute's name and value (Unix seconds), written with every write when set.
    pub ttl: Option<Ttl<'a>>,
    /// The fencing token an absent item counts from (`if_not_exists(fencingToken, floor) + 1`):
    /// 0, or `item::token_floor` where TTL may have deleted the item.
    pub token_floor: u64,
    /// The session the holder holds the lock through (`lockSession`), written by an
    /// acquisition and a hand-over; `None` removes it. A heartbeat leaves it alone (a Fifo
    /// write too: Fifo locks are not held through sessions).
    pub session: Option<&'a str>,
}

impl<'a> OpenFields<'a> {
    /// The fields of a lock held through session `id`, written at `now_unix_ms`: the session
    /// lock's lease (`item::SESSION_LOCK_LEASE_MS`), which the session's own lease stands for,
    /// and the time of acquisition the original counts it from.
    pub fn in_session(self, id: &'a str, now_unix_ms: u64) -> Self {
        OpenFields {
            session: Some(id),
            lease_duration_ms: crate::item::SESSION_LOCK_LEASE_MS,
            lock_acquired_time_unix_ms: Some(now_unix_ms),
            ..self
        }
    }
}

/// A Fifo queue entry as it is written: a waiter's row, or a finished one
/// (`lease_duration_ms` 1) that waiters behind it pass at once.
#[derive(Clone, Debug)]
pub struct Entry<'a, G = Guid> {
    pub owner: &'a str,
    pub guid: &'a G,
    /// The ticket: the fencing token the waiter is granted with.
    pub ticket: u64,
    /// The permits a semaphore's waiter asks for (`permits`, for people only).
    pub permits: Option<u64>,
    pub lease_duration_ms: u64,
    /// The TTL attribute's name and value (Unix seconds), for DynamoDB to remove leftovers.
    pub ttl: Ttl<'a>,
}

/// A waiter's claim to be first in line.
#[derive(Clone, Debug)]
pub struct WaitMark<'a> {
    pub waiter: &'a str,
    /// The waiter's `owner`, written beside its mark for people (`lockWaiterOwner`).
    pub owner: &'a str,
    pub since_unix_ms: u64,
    pub now_unix_ms: u64,
    /// A mark written before this (by a waiter that stopped renewing it) is free to take.
    pub stale_before_unix_ms: u64,
}

/// The first-in-line mark as an item carries it: `lockWaitingUnixMs`, `lockWaiter`,
/// `lockWaitingSinceUnixMs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    pub waiting_unix_ms: Option<u64>,
    pub waiter: Option<String>,
    pub waiting_since_unix_ms: Option<u64>,
}

/// One holder of a semaphore's permits, as its head item carries it (`item::HOLDER_PREFIX`):
/// `key` is the `guid` it was granted with, `guid` the one its last heartbeat wrote.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder<G> {
    pub key: G,
    pub guid: G,
    pub permits: u64,
    pub lease_duration_ms: u64,
}

/// A semaphore's grant: `permits` of the head's `limit` to `ticket` at `position` as holder
/// `guid`, if the head counts `limit` permits (or none yet), is no Fifo head, its token is
/// below `ticket`, every holder of `reclaim` still carries the `guid` and permits seen, and the
/// permits fit once those are removed.
#[derive(Debug)]
pub struct Grant<'a, G> {
    pub fields: &'a OpenFields<'a>,
    pub guid: &'a G,
    pub limit: u64,
    pub permits: u64,
    pub ticket: u64,
    pub position: u64,
    pub reclaim: &'a [Holder<G>],
}

/// What `apply` reads and writes of an item. A record may keep less than the whole item (the
/// model checker's does): what it does not keep, it reads as absent and ignores when written.
pub trait Record: Clone {
    /// A `guid` as operations name it.
    type Guid: Clone + Eq + std::hash::Hash + std::fmt::Debug;
    /// What identifies one holder's tenure (`item::Version`).
    type Version: Clone + Eq + std::hash::Hash + std::fmt::Debug;

    /// An item with no attributes besides its key.
    fn empty() -> Self;
    fn carries(&self, guid: &Self::Guid) -> bool;
    fn version(&self) -> Self::Version;
    fn fencing_token(&self) -> Option<u64>;
    fn lease_duration_ms(&self) -> Option<u64>;
    /// `lockAcquiredTimeUnixMs`: the holder's wall clock when it sent its write
    /// (`trustLocalTime`).
    fn lock_acquired_time_unix_ms(&self) -> Option<u64>;
    fn ticket_next(&self) -> Option<u64>;
    fn queue_next(&self) -> Option<u64>;
    /// `queueGranted`: the queue position of the last entry granted a Fifo head.
    fn queue_granted(&self) -> Option<u64>;
    /// The `guid`, if the item carries one that the protocol can write back.
    fn guid(&self) -> Option<Self::Guid>;
    fn lock_waiting_unix_ms(&self) -> Option<u64>;
    fn lock_waiter(&self) -> Option<&str>;
    fn lock_waiting_since_unix_ms(&self) -> Option<u64>;
    fn mark(&self) -> Mark;
    /// `lockSession`: the session the lock is held through. A record that keeps none (an
    /// abstraction without sessions) reads none.
    fn session(&self) -> Option<&str> {
        None
    }
    /// The item is refused (`LockRecord::refusal`): an attribute in a form the protocol cannot
    /// act on, or a token that cannot rise. A record no reply was decoded into (the model
    /// checker's) never is.
    fn corrupt(&self) -> bool {
        false
    }
    /// See `token_can_rise`.
    fn token_can_rise(&self) -> bool {
        true
    }
    /// The item is refused as a Fifo head (`LockRecord::head_refusal`): no token is handed
    /// out from it. A record no reply was decoded into never is.
    fn head_corrupt(&self) -> bool {
        false
    }
    /// See `ticket_can_rise`.
    fn ticket_can_rise(&self) -> bool {
        true
    }

    fn set_owner(&mut self, owner: &str);
    fn set_guid(&mut self, guid: &Self::Guid);
    fn set_fencing_token(&mut self, token: u64);
    fn set_lease_duration_ms(&mut self, ms: u64);
    fn set_lock_acquired_time_unix_ms(&mut self, ms: Option<u64>);
    fn set_data(&mut self, data: Option<&LockData>);
    fn set_mark(&mut self, mark: Mark);
    fn set_session(&mut self, _session: Option<&str>) {}
    fn set_ticket_next(&mut self, ticket: u64);
    fn set_queue_next(&mut self, position: u64);
    fn set_queue_granted(&mut self, position: u64);

    /// `permits`: how many permits a semaphore's head counts (`None`: nobody used it as one).
    fn permits(&self) -> Option<u64>;
    /// `permitsHeld`: the permits the holders hold together.
    fn permits_held(&self) -> u64;
    /// The semaphore's holders.
    fn holders(&self) -> Vec<Holder<Self::Guid>>;
    fn set_permits(&mut self, n: u64);
    fn set_permits_held(&mut self, held: u64);
    /// Sets holder `key` (`Some`, with `owner` beside it) or removes it (`None`).
    fn set_holder(&mut self, key: &Self::Guid, holder: Option<&Holder<Self::Guid>>, owner: &str);

    /// `owner`, where the record keeps it (the model checker's does not).
    fn owner(&self) -> Option<&str> {
        None
    }
    /// The version read can be named in a condition: the fencing token is absent or a whole
    /// number.
    fn names_its_version(&self) -> bool {
        true
    }
    /// The item carries a `guid`, of whatever type.
    fn has_guid(&self) -> bool {
        self.guid().is_some()
    }
    /// A session item's `lockRevoked`: the `guid`s of its locks an operator revoked, in byte
    /// order. A record that keeps none (an abstraction without revocations) reads none.
    fn revoked(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }
    /// Adds `guid` to `lockRevoked`.
    fn add_revoked(&mut self, _guid: &Self::Guid) {}
    /// Takes the `lockRevoked` of `old`: a write that takes an item over in place
    /// (`Op::Take`) leaves what it does not set.
    fn keep_revoked(&mut self, _old: &Self) {}
}

/// One operation on one item: the `Store` trait's methods (src/store/mod.rs) as data, with the
/// same arguments, less the key.
#[derive(Debug)]
pub enum Op<'a, R: Record> {
    /// Strongly consistent read.
    Get,
    /// FailClosed acquisition: write `{owner, guid}` (and the holder's data) if no item exists.
    PutIfAbsent {
        owner: &'a str,
        guid: &'a R::Guid,
        data: Option<&'a LockData>,
        ttl: Option<Ttl<'a>>,
    },
    /// FailClosed release: delete the item if it is ours.
    DeleteIfGuid { guids: &'a [R::Guid] },
    /// FailOpen acquisition: set the holder's fields and `fencingToken + 1` if the item is
    /// absent, released, or still at `waited_out`. `clear_mark` removes the first-in-line mark
    /// (the taker was the first waiter in line).
    Take {
        fields: &'a OpenFields<'a>,
        guid: &'a R::Guid,
        waited_out: Option<&'a R::Version>,
        clear_mark: bool,
    },
    /// Hand a held lock to the next acquisition of the same client: rotate `guid` if it is
    /// ours and no waiter marked the item at or after `marks_fresh_since_unix_ms`. With
    /// `fields` (FailOpen) it also sets the lease and raises `fencingToken` by one. The
    /// previous holder's data is removed.
    HandOver {
        guids: &'a [R::Guid],
        new_guid: &'a R::Guid,
        fields: Option<&'a OpenFields<'a>>,
        marks_fresh_since_unix_ms: u64,
        ttl: Option<Ttl<'a>>,
    },
    /// FailOpen heartbeat: rotate `guid` to `new_guid` if it is ours and held (not released).
    Renew {
        guids: &'a [R::Guid],
        new_guid: &'a R::Guid,
        fields: &'a OpenFields<'a>,
    },
    /// The original library's write (`original`): the whole FailOpen item, in place of
    /// whatever was there, if `expect` holds.
    PutItem {
        owner: &'a str,
        guid: &'a R::Guid,
        fencing_token: u64,
        lease_duration_ms: u64,
        lock_acquired_time_unix_ms: Option<u64>,
        expect: &'a Expect<R::Guid, R::Version>,
    },
    /// FailOpen release: `leaseDurationMs` 1 if it is ours; the item and its token stay.
    Release {
        guids: &'a [R::Guid],
        lock_acquired_time_unix_ms: Option<u64>,
        ttl: Option<Ttl<'a>>,
    },
    /// `lock.update({ data })`: set or remove the holder's data if it is ours.
    SetData {
        guids: &'a [R::Guid],
        data: Option<&'a LockData>,
        ttl: Option<Ttl<'a>>,
    },
    /// A waiter puts itself first in line on an existing item, if the place is open to it.
    MarkWaiting(WaitMark<'a>),
    /// Fifo, uncontended: take the head if it is free and no ticket is out.
    FifoTakeFree {
        fields: &'a OpenFields<'a>,
        guid: &'a R::Guid,
    },
    /// Fifo: take the next ticket and queue position, unconditionally.
    FifoTicket,
    /// Fifo, several resources: set `ticketNext` to `ticket` and take the next queue position,
    /// if every ticket issued is lower.
    FifoReserve { ticket: u64 },
    /// Fifo: give back `ticket` at `position` if both are still the last issued.
    FifoUntake {
        ticket: u64,
        position: u64,
        previous_ticket: u64,
    },
    /// Fifo: write a queue entry if there is none.
    FifoPutEntry(Entry<'a, R::Guid>),
    /// Fifo: grant the head to `ticket` at `position` if it is free (or still at
    /// `waited_out`) and its token is lower than `ticket`.
    FifoGrant {
        fields: &'a OpenFields<'a>,
        guid: &'a R::Guid,
        ticket: u64,
        position: u64,
        waited_out: Option<&'a R::Version>,
    },
    /// Fifo: mark a queue entry finished (released, `guid` rotated to `new_guid`) if it is ours.
    FifoFinishEntry {
        guids: &'a [R::Guid],
        new_guid: &'a R::Guid,
    },
    /// Fifo: delete a queue entry if it is finished.
    FifoDeleteFinished,
    /// Fifo: move a live queue entry's TTL attribute.
    FifoTouchEntry { ttl: Ttl<'a> },
    /// Semaphore, uncontended: hold `permits` of the head's `limit` as holder `guid`, with the
    /// next ticket as the token, if that many are free, the head counts `limit` permits (or
    /// none yet), is no Fifo head, has no holder `guid` yet, and no ticket is out. `permits` is from 1 to `limit`, in
    /// this operation and the next.
    SemTake {
        fields: &'a OpenFields<'a>,
        guid: &'a R::Guid,
        limit: u64,
        permits: u64,
    },
    /// Semaphore: grant permits to a waiter (`Grant`).
    SemGrant(Grant<'a, R::Guid>),
    /// Semaphore heartbeat: holder `key` (holding `permits`) writes `new_guid`, if it carries
    /// one of `guids` and those permits.
    SemRenew {
        key: &'a R::Guid,
        guids: &'a [R::Guid],
        new_guid: &'a R::Guid,
        permits: u64,
        fields: &'a OpenFields<'a>,
    },
    /// Semaphore release: holder `key` removed and its `permits` given back, if it carries one
    /// of `guids` and those permits.
    SemRelease {
        key: &'a R::Guid,
        guids: &'a [R::Guid],
        permits: u64,
    },
    /// An operator frees the lock at once (`forceRelease` with `now`), if the item is still at
    /// the version `read`: deleted with `delete` (a FailClosed item), else released
    /// (`leaseDurationMs` 1) under `new_guid`, its acquisition time `now_unix_ms`.
    ForceFree {
        read: &'a R::Version,
        new_guid: &'a R::Guid,
        now_unix_ms: u64,
        delete: bool,
    },
    /// An operator revokes a held lock (`forceRelease`), if the item is still at the version
    /// `read`, is held and, with `session`, is held through that session: it gets `new_guid`,
    /// and its acquisition and revocation times are `now_unix_ms`. With `session` (its id and
    /// the lease of its item), the lock leaves the session and carries that lease. A waiter
    /// waits out the new version for that lease, on its own clock.
    Revoke {
        read: &'a R::Version,
        new_guid: &'a R::Guid,
        now_unix_ms: u64,
        session: Option<(&'a str, u64)>,
    },
    /// On a session's item: names `guid` among the locks an operator revoked
    /// (`item::LOCK_REVOKED`), if the item carries a `guid` and is held. The session's next
    /// renewal reads it back (`Reply::Revoked`).
    MarkRevoked { guid: &'a R::Guid },
    /// An operator deletes an item nobody holds (`pruneLocks`), if it is still at the version
    /// `read` with the Fifo ticket `ticket_next` (`None`: none issued): a released lock, Fifo
    /// head or session item; with `permits`, a semaphore's head that nobody holds permits of
    /// (no `leaseDurationMs`, no permits held).
    Prune {
        read: &'a R::Version,
        ticket_next: Option<u64>,
        permits: bool,
    },
}

impl<R: Record> Op<'_, R> {
    /// The TTL attribute this operation writes when it applies. A Fifo head carries none.
    pub fn ttl(&self) -> Option<Ttl<'_>> {
        match self {
            Op::PutIfAbsent { ttl, .. }
            | Op::HandOver { ttl, .. }
            | Op::Release { ttl, .. }
            | Op::SetData { ttl, .. } => *ttl,
            Op::Take { fields, .. } | Op::Renew { fields, .. } => fields.ttl,
            Op::FifoPutEntry(e) => Some(e.ttl),
            Op::FifoTouchEntry { ttl } => Some(*ttl),
            _ => None,
        }
    }
}

/// What a whole-item put (`Op::PutItem`, `request::Req::PutItem`) is conditioned on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expect<G, V> {
    /// No item exists.
    Absent,
    /// No item exists, or it still carries this version (`guid` and `fencingToken`).
    AbsentOr(V),
    /// The item exists and carries this `guid` (a heartbeat, a release).
    Guid(G),
}

/// The answer to an operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply<R> {
    /// Applied.
    Done,
    /// Applied; the fencing token it wrote (`Take`, `FifoTakeFree`).
    Token(u64),
    /// The item as it was before (`Get`, `FifoTicket`, `FifoReserve`).
    Before(Option<R>),
    /// Applied; the item's `lockWaitingUnixMs` as it was (`DeleteIfGuid`, `Release`).
    WaitingMark(Option<u64>),
    /// Applied; with `fields`, the new fencing token (`HandOver`).
    HandedOver(Option<u64>),
    /// Applied (`Renew` of a session's item, through a store that reads it back): the
    /// `guid`s of the locks held through the session that an operator revoked
    /// (`item::LOCK_REVOKED`).
    Revoked(Vec<Vec<u8>>),
    /// The condition failed: nothing changed. The item as it was.
    Refused(Option<R>),
}

// The conditions. Each takes the item as it is (`None`: there is none).

/// There is no item.
pub fn absent<R: Record>(item: Option<&R>) -> bool {
    item.is_none()
}

/// The item is a released FailOpen lock or a finished Fifo entry: `leaseDurationMs` is 1.
pub fn released<R: Record>(item: Option<&R>) -> bool {
    item.is_some_and(|r| r.lease_duration_ms() == Some(RELEASED_LEASE_MS))
}

/// Nobody holds the item: there is none, nobody was ever granted it (no `leaseDurationMs`, as
/// on a Fifo head nobody took yet), or it is released. A Fifo head is granted only when free;
/// `getLock` reports a free Fifo head as not held.
pub fn free<R: Record>(item: Option<&R>) -> bool {
    item.is_none_or(|r| r.lease_duration_ms().is_none_or(|l| l == RELEASED_LEASE_MS))
}

/// The item still carries the version a waiter waited out: its holder neither renewed nor
/// changed since.
pub fn still_version<R: Record>(item: Option<&R>, waited_out: Option<&R::Version>) -> bool {
    item.is_some_and(|r| waited_out.is_some_and(|v| r.version() == *v))
}

/// The item's `fencingToken`, if it has one, can rise by one and stay a token: an N from 0 to
/// `MAX_FENCING_TOKEN - 1`. A fraction is the one refused token this cannot exclude on
/// DynamoDB (no condition tells it from an integer): the HTTP store's take lands on it, and
/// the acquisition refuses the token it reads back. A record that keeps no such value (the
/// model checker's) always can.
pub fn token_can_rise<R: Record>(item: Option<&R>) -> bool {
    item.is_none_or(|r| r.token_can_rise())
}

/// The item carries one of our `guid`s (a write of ours, or a heartbeat of ours that may have
/// landed).
pub fn ours<R: Record>(item: Option<&R>, guids: &[R::Guid]) -> bool {
    item.is_some_and(|r| guids.iter().any(|g| r.carries(g)))
}

/// A waiter marked the item first in line at or after `since_unix_ms`: another process waits.
pub fn marked_since<R: Record>(item: Option<&R>, since_unix_ms: u64) -> bool {
    item.and_then(R::lock_waiting_unix_ms)
        .is_some_and(|w| w >= since_unix_ms)
}

/// The first place in line is open to `mark` on an existing item: nobody marked it lately, or
/// the mark is the waiter's own, or its holder started waiting later.
pub fn place_open<R: Record>(item: Option<&R>, mark: &WaitMark<'_>) -> bool {
    item.is_some_and(|r| {
        r.lock_waiting_unix_ms().is_none_or(|w| w < mark.stale_before_unix_ms)
            || r.lock_waiter() == Some(mark.waiter)
            || r.lock_waiting_since_unix_ms().is_some_and(|s| s > mark.since_unix_ms)
    })
}

/// A new Fifo ticket and queue position can be taken on the head: it is not refused
/// (`LockRecord::ticket_refusal`: counters and token integers from 0 to `MAX_FENCING_TOKEN`)
/// and neither the last ticket, the token nor the last
/// position is `MAX_FENCING_TOKEN` already. A record that keeps no such value (the model
/// checker's) always can.
pub fn ticket_can_rise<R: Record>(head: Option<&R>) -> bool {
    head.is_none_or(|h| h.ticket_can_rise())
}

/// The ticket after which a Fifo head's next one comes: `ticketNext`, else `fencingToken`.
pub fn last_ticket<R: Record>(head: Option<&R>) -> u64 {
    head.and_then(|h| h.ticket_next().or(h.fencing_token())).unwrap_or(0)
}

/// No Fifo ticket is outstanding: none was issued, or the last was granted.
pub fn no_ticket_out<R: Record>(head: Option<&R>) -> bool {
    head.is_none_or(|h| h.ticket_next().is_none() || h.ticket_next() == Some(h.fencing_token().unwrap_or(0)))
}

/// Every ticket issued for the head is lower than `ticket`.
pub fn tickets_below<R: Record>(head: Option<&R>, ticket: u64) -> bool {
    head.is_none_or(|h| match h.ticket_next() {
        Some(tn) => tn < ticket,
        None => h.fencing_token().is_none_or(|ft| ft < ticket),
    })
}

/// `ticket` at `position` are still the last ticket and position issued, and `ticket` was
/// never granted (a grant that landed unseen keeps its ticket: given back, it would let the
/// next ticket repeat a fencing token).
pub fn last_issued<R: Record>(head: Option<&R>, ticket: u64, position: u64) -> bool {
    head.is_some_and(|h| h.queue_next() == Some(position) && h.ticket_next() == Some(ticket))
        && token_below(head, ticket)
}

/// The head's fencing token is lower than `ticket` (or absent): grants go in ticket order.
pub fn token_below<R: Record>(head: Option<&R>, ticket: u64) -> bool {
    head.is_none_or(|h| h.fencing_token().is_none_or(|ft| ft < ticket))
}

/// The head is no semaphore's: a Fifo lock is never granted beside permits.
pub fn not_sem<R: Record>(head: Option<&R>) -> bool {
    head.is_none_or(|h| h.permits().is_none())
}

/// The semaphore holder `key` of `head`, if it holds.
pub fn holder<R: Record>(head: Option<&R>, key: &R::Guid) -> Option<Holder<R::Guid>> {
    head.and_then(|h| h.holders().into_iter().find(|x| x.key == *key))
}

/// The semaphore holder `key` carries one of `guids` (a write of its own may have landed). Its
/// operations also name the permits it holds, which must be the ones it carries.
pub fn holder_ours<R: Record>(head: Option<&R>, key: &R::Guid, guids: &[R::Guid]) -> bool {
    holder(head, key).is_some_and(|h| guids.contains(&h.guid))
}

/// The head may serve a semaphore of `limit` permits: it is no Fifo head (one granted as a
/// lock carries `leaseDurationMs`), and counts `limit` permits or none yet.
pub fn sem_head<R: Record>(head: Option<&R>, limit: u64) -> bool {
    head.is_none_or(|h| h.lease_duration_ms().is_none() && h.permits().is_none_or(|n| n == limit))
}

/// `permits` more fit under `limit` once the permits of `reclaim` are given back.
pub fn permits_fit<R: Record>(head: Option<&R>, limit: u64, permits: u64, reclaim: &[Holder<R::Guid>]) -> bool {
    let held = head.map_or(0, |h| h.permits_held());
    let freed: u64 = reclaim.iter().map(|r| r.permits).sum();
    held.saturating_sub(freed).saturating_add(permits) <= limit || broken::on(Broken::SemGrantIgnoresHeld)
}

/// Every holder of `reclaim` still carries the `guid` it was seen with.
pub fn reclaimable<R: Record>(head: Option<&R>, reclaim: &[Holder<R::Guid>]) -> bool {
    reclaim
        .iter()
        .all(|r| holder(head, &r.key).is_some_and(|h| h.guid == r.guid && h.permits == r.permits))
}

/// What a held semaphore's permits send in place of a held lock's operation (its heartbeat's
/// and its release machine's, `ending`): a read as it is, a renewal as holder `key`'s, a
/// release as the removal of holder `key`. Any other comes back as the error: nothing else is
/// sent for permits.
pub fn permit_op<'a, R: Record>(op: Op<'a, R>, key: &'a R::Guid, permits: u64) -> Result<Op<'a, R>, Op<'a, R>> {
    match op {
        Op::Get => Ok(Op::Get),
        Op::Release { guids, .. } => Ok(Op::SemRelease { key, guids, permits }),
        Op::Renew {
            guids,
            new_guid,
            fields,
        } => Ok(Op::SemRenew {
            key,
            guids,
            new_guid,
            permits,
            fields,
        }),
        other => Err(other),
    }
}

/// A semaphore's head as holder `key`'s lock item, for the release machine to judge as a
/// FailOpen item: the holder's `guid` and lease while it is on the head, else released.
pub fn permit_view<R: Record>(head: Option<R>, key: &R::Guid) -> Option<R> {
    head.map(|mut r| {
        match holder(Some(&r), key) {
            Some(h) => {
                r.set_guid(&h.guid);
                r.set_lease_duration_ms(h.lease_duration_ms);
            }
            None => r.set_lease_duration_ms(RELEASED_LEASE_MS),
        }
        r
    })
}

/// The operation's condition holds on `item`.
pub fn allowed<R: Record>(op: &Op<'_, R>, item: Option<&R>) -> bool {
    match op {
        Op::Get => true,
        Op::FifoTicket => ticket_can_rise(item),
        Op::PutIfAbsent { .. } | Op::FifoPutEntry(_) => absent(item),
        // A heartbeat written before a release and landing after it must not take the lock
        // back: the release is final. So is the end of a session by a waiter (a release on
        // the `guid` it waited out): no late renewal of the session undoes it.
        Op::Renew { guids, .. } => ours(item, guids) && (!free(item) || broken::on(Broken::RenewRevivesEnded)),
        Op::DeleteIfGuid { guids }
        | Op::Release { guids, .. }
        | Op::SetData { guids, .. }
        | Op::FifoFinishEntry { guids, .. } => ours(item, guids),
        Op::Take { waited_out, .. } => {
            (absent(item) || released(item) || still_version(item, *waited_out)) && token_can_rise(item)
        }
        Op::PutItem { expect, .. } => match expect {
            Expect::Absent => absent(item),
            Expect::AbsentOr(seen) => absent(item) || still_version(item, Some(seen)),
            Expect::Guid(g) => ours(item, std::slice::from_ref(g)),
        },
        Op::HandOver {
            guids,
            fields,
            marks_fresh_since_unix_ms,
            ..
        } => {
            ours(item, guids)
                && !marked_since(item, *marks_fresh_since_unix_ms)
                && (fields.is_none() || token_can_rise(item))
        }
        Op::MarkWaiting(mark) => place_open(item, mark),
        Op::FifoTakeFree { .. } => free(item) && no_ticket_out(item) && ticket_can_rise(item) && not_sem(item),
        Op::FifoReserve { ticket } => {
            tickets_below(item, *ticket) && *ticket <= MAX_FENCING_TOKEN && ticket_can_rise(item)
        }
        Op::FifoUntake { ticket, position, .. } => last_issued(item, *ticket, *position),
        Op::FifoGrant { ticket, waited_out, .. } => {
            (free(item) || still_version(item, *waited_out))
                && (token_below(item, *ticket) || broken::on(Broken::FifoGrantIgnoresToken))
                && not_sem(item)
        }
        Op::FifoDeleteFinished => released(item),
        Op::FifoTouchEntry { .. } => item.is_some() && !released(item),
        Op::SemTake {
            guid, limit, permits, ..
        } => {
            sem_head(item, *limit)
                // An earlier attempt that landed made it a holder: not counted twice.
                && (holder(item, guid).is_none() || broken::on(Broken::SemTakeRepeats))
                && permits_fit(item, *limit, *permits, &[])
                && (no_ticket_out(item) || broken::on(Broken::SemTakePastWaiter))
                && ticket_can_rise(item)
        }
        Op::SemGrant(g) => {
            sem_head(item, g.limit)
                && token_below(item, g.ticket)
                && reclaimable(item, g.reclaim)
                && permits_fit(item, g.limit, g.permits, g.reclaim)
        }
        Op::SemRenew {
            key, guids, permits, ..
        }
        | Op::SemRelease {
            key, guids, permits, ..
        } => holder_ours(item, key, guids) && holder(item, key).is_some_and(|h| h.permits == *permits),
        Op::ForceFree { read, .. } => still_version(item, Some(read)),
        Op::Revoke { read, session, .. } => {
            still_version(item, Some(read))
                && !free(item)
                && session.is_none_or(|(id, _)| item.and_then(|r| r.session()) == Some(id))
        }
        Op::MarkRevoked { .. } => item.is_some_and(|r| r.has_guid()) && !free(item),
        Op::Prune {
            read,
            ticket_next,
            permits,
        } => {
            still_version(item, Some(read))
                && item.is_some_and(|r| r.ticket_next() == *ticket_next)
                && match permits {
                    true => item.is_some_and(|r| r.lease_duration_ms().is_none() && r.permits_held() == 0),
                    false => released(item),
                }
        }
    }
}

/// The holder's fields of a FailOpen write (acquisition, heartbeat, hand-over, Fifo grant).
fn hold<R: Record>(r: &mut R, fields: &OpenFields<'_>, guid: &R::Guid) {
    r.set_owner(fields.owner);
    r.set_guid(guid);
    r.set_lease_duration_ms(fields.lease_duration_ms);
    r.set_lock_acquired_time_unix_ms(fields.lock_acquired_time_unix_ms);
}

/// Applies `op` to `item`: the item after it, and the reply.
pub fn apply<R: Record>(op: &Op<'_, R>, item: Option<R>) -> (Option<R>, Reply<R>) {
    if !allowed(op, item.as_ref()) {
        return (item.clone(), Reply::Refused(item));
    }
    match *op {
        Op::Get => (item.clone(), Reply::Before(item)),
        Op::PutIfAbsent { owner, guid, data, .. } => put_if_absent(owner, guid, data),
        Op::DeleteIfGuid { .. } => (None, Reply::WaitingMark(item.and_then(|r| r.lock_waiting_unix_ms()))),
        Op::Take {
            fields,
            guid,
            clear_mark,
            ..
        } => take(item, fields, guid, clear_mark),
        Op::HandOver { new_guid, fields, .. } => hand_over(item, new_guid, fields),
        Op::PutItem {
            owner,
            guid,
            fencing_token,
            lease_duration_ms,
            lock_acquired_time_unix_ms,
            ..
        } => put_item(
            owner,
            guid,
            fencing_token,
            lease_duration_ms,
            lock_acquired_time_unix_ms,
        ),
        Op::Renew { new_guid, fields, .. } => {
            let item = changed(item, |r| hold(r, fields, new_guid));
            // A session's item names the locks an operator revoked.
            let revoked = item.as_ref().map(R::revoked).unwrap_or_default();
            let reply = if revoked.is_empty() {
                Reply::Done
            } else {
                Reply::Revoked(revoked)
            };
            (item, reply)
        }
        Op::Release {
            lock_acquired_time_unix_ms,
            ..
        } => release(item, lock_acquired_time_unix_ms),
        Op::SetData { data, .. } => (changed(item, |r| r.set_data(data)), Reply::Done),
        Op::MarkWaiting(ref mark) => mark_waiting(item, mark),
        Op::FifoTakeFree { fields, guid } => take_next_ticket(item, |r| hold(r, fields, guid)),
        Op::FifoTicket => {
            let ticket = last_ticket(item.as_ref()) + 1;
            fifo_issue(item, ticket)
        }
        Op::FifoReserve { ticket } => fifo_issue(item, ticket),
        Op::FifoUntake {
            position,
            previous_ticket,
            ..
        } => fifo_untake(item, position, previous_ticket),
        Op::FifoPutEntry(ref e) => fifo_put_entry(e),
        Op::FifoGrant {
            fields,
            guid,
            ticket,
            position,
            ..
        } => fifo_grant(item, fields, guid, ticket, position),
        Op::FifoFinishEntry { new_guid, .. } => fifo_finish_entry(item, new_guid),
        Op::FifoDeleteFinished => (None, Reply::Done),
        Op::FifoTouchEntry { .. } => (item, Reply::Done),
        Op::SemTake {
            fields,
            guid,
            limit,
            permits,
        } => take_next_ticket(item, |r| sem_hold(r, fields, guid, limit, permits, &[])),
        Op::SemGrant(ref g) => sem_grant(item, g),
        Op::SemRenew {
            key,
            new_guid,
            permits,
            fields,
            ..
        } => {
            let holder = Holder {
                key: key.clone(),
                guid: new_guid.clone(),
                permits,
                lease_duration_ms: fields.lease_duration_ms,
            };
            (
                changed(item, |r| r.set_holder(key, Some(&holder), fields.owner)),
                Reply::Done,
            )
        }
        Op::SemRelease { key, permits, .. } => {
            let item = changed(item, |r| {
                r.set_holder(key, None, "");
                r.set_permits_held(r.permits_held().saturating_sub(permits));
            });
            // Answered as a release is (no first-in-line mark on a semaphore's head).
            (item, Reply::WaitingMark(None))
        }
        Op::ForceFree { delete: true, .. } => (None, Reply::Done),
        Op::ForceFree {
            new_guid, now_unix_ms, ..
        } => {
            let item = changed(item, |r| {
                r.set_lease_duration_ms(RELEASED_LEASE_MS);
                r.set_guid(new_guid);
                r.set_lock_acquired_time_unix_ms(Some(now_unix_ms));
            });
            (item, Reply::Done)
        }
        Op::Revoke {
            new_guid,
            now_unix_ms,
            session,
            ..
        } => {
            let item = changed(item, |r| {
                r.set_guid(new_guid);
                r.set_lock_acquired_time_unix_ms(Some(now_unix_ms));
                if let Some((_, lease)) = session {
                    r.set_session(None);
                    r.set_lease_duration_ms(lease);
                }
            });
            (item, Reply::Done)
        }
        Op::MarkRevoked { guid } => (changed(item, |r| r.add_revoked(guid)), Reply::Done),
        Op::Prune { .. } => (None, Reply::Done),
    }
}

/// `SemGrant`: the holders of `reclaim` removed, holder `guid` added with `permits`, `ticket`
/// the token, `position` the last granted.
fn sem_grant<R: Record>(item: Option<R>, g: &Grant<'_, R::Guid>) -> Applied<R> {
    let mut r = item.unwrap_or_else(R::empty);
    sem_hold(&mut r, g.fields, g.guid, g.limit, g.permits, g.reclaim);
    r.set_fencing_token(g.ticket);
    r.set_queue_granted(g.position);
    (Some(r), Reply::Done)
}

/// A semaphore's head with the holders of `reclaim` removed and holder `guid` added.
fn sem_hold<R: Record>(
    r: &mut R,
    fields: &OpenFields<'_>,
    guid: &R::Guid,
    limit: u64,
    permits: u64,
    reclaim: &[Holder<R::Guid>],
) {
    let freed: u64 = reclaim.iter().map(|x| x.permits).sum();
    for x in reclaim {
        r.set_holder(&x.key, None, "");
    }
    let holder = Holder {
        key: guid.clone(),
        guid: guid.clone(),
        permits,
        lease_duration_ms: fields.lease_duration_ms,
    };
    r.set_holder(guid, Some(&holder), fields.owner);
    r.set_permits(limit);
    r.set_permits_held(r.permits_held().saturating_sub(freed) + permits);
}

// What each operation writes once its condition holds, and its reply. An operation whose
// condition requires the item changes it (`changed`); a Fifo head's writes change the head or
// create it; the others write a new item in place of whatever was there.

/// The item after an operation, and the reply (as `apply` answers).
type Applied<R> = (Option<R>, Reply<R>);

/// The item with `change` made to it, for an operation whose condition requires an item.
fn changed<R: Record>(item: Option<R>, change: impl FnOnce(&mut R)) -> Option<R> {
    item.map(|mut r| {
        change(&mut r);
        r
    })
}

/// `PutIfAbsent`: the FailClosed item, `{owner, guid}` and the holder's data.
fn put_if_absent<R: Record>(owner: &str, guid: &R::Guid, data: Option<&LockData>) -> Applied<R> {
    let mut r = R::empty();
    r.set_owner(owner);
    r.set_guid(guid);
    r.set_data(data);
    (Some(r), Reply::Done)
}

/// `Take`: the holder's fields and data on a new item, with the token one above the item's
/// (or the floor's), which the reply carries; the first-in-line mark stays unless
/// `clear_mark`.
fn take<R: Record>(item: Option<R>, fields: &OpenFields<'_>, guid: &R::Guid, clear_mark: bool) -> Applied<R> {
    let token = item.as_ref().and_then(R::fencing_token).unwrap_or(fields.token_floor) + 1;
    let mut r = R::empty();
    if let Some(old) = item.as_ref() {
        r.keep_revoked(old);
        if !clear_mark {
            r.set_mark(old.mark());
        }
    }
    hold(&mut r, fields, guid);
    r.set_session(fields.session);
    r.set_fencing_token(token);
    r.set_data(fields.data);
    (Some(r), Reply::Token(token))
}

/// `HandOver`: `new_guid` and no data; with `fields` (FailOpen), the holder's fields and the
/// token one up, which the reply carries.
fn hand_over<R: Record>(item: Option<R>, new_guid: &R::Guid, fields: Option<&OpenFields<'_>>) -> Applied<R> {
    let mut token = None;
    let item = changed(item, |r| {
        r.set_guid(new_guid);
        r.set_data(None);
        if let Some(f) = fields {
            hold(r, f, new_guid);
            r.set_session(f.session);
            let t = r.fencing_token().unwrap_or(0) + 1;
            r.set_fencing_token(t);
            token = Some(t);
        }
    });
    (item, Reply::HandedOver(token))
}

/// `PutItem`: the whole FailOpen item as the original library writes it.
fn put_item<R: Record>(
    owner: &str,
    guid: &R::Guid,
    fencing_token: u64,
    lease_duration_ms: u64,
    lock_acquired_time_unix_ms: Option<u64>,
) -> Applied<R> {
    let mut r = R::empty();
    r.set_owner(owner);
    r.set_guid(guid);
    r.set_fencing_token(fencing_token);
    r.set_lease_duration_ms(lease_duration_ms);
    r.set_lock_acquired_time_unix_ms(lock_acquired_time_unix_ms);
    (Some(r), Reply::Done)
}

/// `Release`: the lease set to 1; the reply carries the item's `lockWaitingUnixMs` as it was.
fn release<R: Record>(item: Option<R>, lock_acquired_time_unix_ms: Option<u64>) -> Applied<R> {
    let mark = item.as_ref().and_then(R::lock_waiting_unix_ms);
    let item = changed(item, |r| {
        r.set_lease_duration_ms(RELEASED_LEASE_MS);
        r.set_lock_acquired_time_unix_ms(lock_acquired_time_unix_ms);
    });
    (item, Reply::WaitingMark(mark))
}

/// `MarkWaiting`: the waiter's first-in-line mark.
fn mark_waiting<R: Record>(item: Option<R>, mark: &WaitMark<'_>) -> Applied<R> {
    let item = changed(item, |r| {
        r.set_mark(Mark {
            waiting_unix_ms: Some(mark.now_unix_ms),
            waiter: Some(mark.waiter.into()),
            waiting_since_unix_ms: Some(mark.since_unix_ms),
        })
    });
    (item, Reply::Done)
}

/// `FifoTakeFree`, `SemTake`: the head held (`hold`: the lock's fields, or a semaphore's
/// holder) with the next ticket as its token, issued and granted at once (the last position
/// issued is the last granted); the reply carries the token.
fn take_next_ticket<R: Record>(item: Option<R>, hold: impl FnOnce(&mut R)) -> Applied<R> {
    let token = last_ticket(item.as_ref()) + 1;
    let mut r = item.unwrap_or_else(R::empty);
    hold(&mut r);
    r.set_fencing_token(token);
    r.set_ticket_next(token);
    r.set_queue_granted(r.queue_next().unwrap_or(0));
    (Some(r), Reply::Token(token))
}

/// `FifoTicket`, `FifoReserve`: `ticket` issued, and the next queue position with it; the
/// reply carries the head as it was.
fn fifo_issue<R: Record>(item: Option<R>, ticket: u64) -> Applied<R> {
    let mut r = item.clone().unwrap_or_else(R::empty);
    r.set_ticket_next(ticket);
    r.set_queue_next(r.queue_next().unwrap_or(0) + 1);
    (Some(r), Reply::Before(item))
}

/// `FifoUntake`: the last ticket and `position` given back, the counters where they were.
fn fifo_untake<R: Record>(item: Option<R>, position: u64, previous_ticket: u64) -> Applied<R> {
    let item = changed(item, |r| {
        r.set_ticket_next(previous_ticket);
        r.set_queue_next(position.saturating_sub(1));
    });
    (item, Reply::Done)
}

/// `FifoPutEntry`: a queue entry.
fn fifo_put_entry<R: Record>(e: &Entry<'_, R::Guid>) -> Applied<R> {
    let mut r = R::empty();
    r.set_owner(e.owner);
    r.set_guid(e.guid);
    r.set_fencing_token(e.ticket);
    r.set_lease_duration_ms(e.lease_duration_ms);
    if let Some(p) = e.permits {
        r.set_permits(p);
    }
    (Some(r), Reply::Done)
}

/// `FifoGrant`: the head held by the waiter at `position`, with its `ticket` as the token.
fn fifo_grant<R: Record>(
    item: Option<R>,
    fields: &OpenFields<'_>,
    guid: &R::Guid,
    ticket: u64,
    position: u64,
) -> Applied<R> {
    let mut r = item.unwrap_or_else(R::empty);
    hold(&mut r, fields, guid);
    r.set_fencing_token(ticket);
    r.set_queue_granted(position);
    (Some(r), Reply::Done)
}

/// `FifoFinishEntry`: the entry finished (released), its `guid` rotated to `new_guid` so that
/// its owner learns it.
fn fifo_finish_entry<R: Record>(item: Option<R>, new_guid: &R::Guid) -> Applied<R> {
    let item = changed(item, |r| {
        r.set_lease_duration_ms(RELEASED_LEASE_MS);
        r.set_guid(new_guid);
    });
    (item, Reply::Done)
}

/// The whole decoded item: what the addon's in-memory store keeps.
impl Record for LockRecord {
    type Guid = Guid;
    type Version = Version;

    fn empty() -> Self {
        LockRecord::default()
    }
    fn carries(&self, guid: &Guid) -> bool {
        LockRecord::carries(self, guid)
    }
    fn version(&self) -> Version {
        LockRecord::version(self)
    }
    fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }
    fn lock_acquired_time_unix_ms(&self) -> Option<u64> {
        self.lock_acquired_time_unix_ms
    }
    fn lease_duration_ms(&self) -> Option<u64> {
        self.lease_duration_ms
    }
    fn ticket_next(&self) -> Option<u64> {
        LockRecord::ticket_next(self)
    }
    fn queue_next(&self) -> Option<u64> {
        LockRecord::queue_next(self)
    }
    fn queue_granted(&self) -> Option<u64> {
        LockRecord::queue_granted(self)
    }
    fn guid(&self) -> Option<Guid> {
        match &self.guid {
            Some(GuidValue::B(g)) => Guid::try_from(g.as_slice()).ok(),
            _ => None,
        }
    }
    fn lock_waiting_unix_ms(&self) -> Option<u64> {
        self.lock_waiting_unix_ms
    }
    fn lock_waiter(&self) -> Option<&str> {
        self.lock_waiter.as_deref()
    }
    fn lock_waiting_since_unix_ms(&self) -> Option<u64> {
        self.lock_waiting_since_unix_ms
    }
    fn mark(&self) -> Mark {
        Mark {
            waiting_unix_ms: self.lock_waiting_unix_ms,
            waiter: self.lock_waiter.clone(),
            waiting_since_unix_ms: self.lock_waiting_since_unix_ms,
        }
    }
    fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }
    fn has_guid(&self) -> bool {
        self.guid.is_some()
    }
    fn revoked(&self) -> Vec<Vec<u8>> {
        self.revoked.clone()
    }
    fn add_revoked(&mut self, guid: &Guid) {
        if let Err(at) = self.revoked.binary_search_by(|g| g.as_slice().cmp(guid)) {
            self.revoked.insert(at, guid.to_vec());
        }
    }
    fn keep_revoked(&mut self, old: &Self) {
        self.revoked = old.revoked.clone();
    }
    fn corrupt(&self) -> bool {
        self.refusal().is_some()
    }
    fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }
    fn names_its_version(&self) -> bool {
        self.malformed.as_ref().is_none_or(|m| m.attribute != FENCING_TOKEN)
    }
    fn token_can_rise(&self) -> bool {
        self.fencing_token.is_none_or(|t| t < MAX_FENCING_TOKEN)
            && self.malformed.as_ref().is_none_or(|m| m.attribute != FENCING_TOKEN)
    }
    fn head_corrupt(&self) -> bool {
        self.head_refusal().is_some()
    }
    fn ticket_can_rise(&self) -> bool {
        self.ticket_refusal().is_none()
    }

    fn set_owner(&mut self, owner: &str) {
        self.owner = Some(owner.into());
    }
    fn set_guid(&mut self, guid: &Guid) {
        self.guid = Some(GuidValue::B(guid.to_vec()));
    }
    fn set_fencing_token(&mut self, token: u64) {
        self.fencing_token = Some(token);
    }
    fn set_lease_duration_ms(&mut self, ms: u64) {
        self.lease_duration_ms = Some(ms);
    }
    fn set_lock_acquired_time_unix_ms(&mut self, ms: Option<u64>) {
        self.lock_acquired_time_unix_ms = ms;
    }
    fn set_data(&mut self, data: Option<&LockData>) {
        self.data = data.cloned().map(Box::new);
    }
    fn set_session(&mut self, session: Option<&str>) {
        self.session = session.map(Into::into);
    }
    fn set_mark(&mut self, mark: Mark) {
        self.lock_waiting_unix_ms = mark.waiting_unix_ms;
        self.lock_waiter = mark.waiter;
        self.lock_waiting_since_unix_ms = mark.waiting_since_unix_ms;
    }
    fn set_ticket_next(&mut self, ticket: u64) {
        self.queue_mut().ticket_next = Some(ticket);
    }
    fn set_queue_next(&mut self, position: u64) {
        self.queue_mut().queue_next = Some(position);
    }
    fn set_queue_granted(&mut self, position: u64) {
        self.queue_mut().queue_granted = Some(position);
    }
    fn permits(&self) -> Option<u64> {
        self.queue.as_ref().and_then(|q| q.permits)
    }
    fn permits_held(&self) -> u64 {
        self.queue.as_ref().and_then(|q| q.permits_held).unwrap_or(0)
    }
    fn holders(&self) -> Vec<Holder<Guid>> {
        self.queue.as_ref().map_or_else(Vec::new, |q| {
            q.holders
                .iter()
                .map(|h| Holder {
                    key: h.key,
                    guid: h.guid,
                    permits: h.permits,
                    lease_duration_ms: h.lease_duration_ms,
                })
                .collect()
        })
    }
    fn set_permits(&mut self, n: u64) {
        self.queue_mut().permits = Some(n);
    }
    fn set_permits_held(&mut self, held: u64) {
        self.queue_mut().permits_held = Some(held);
    }
    fn set_holder(&mut self, key: &Guid, holder: Option<&Holder<Guid>>, owner: &str) {
        let q = self.queue_mut();
        let at = q.holders.iter().position(|h| h.key == *key);
        match (holder, at) {
            (Some(h), at) => {
                let h = SemHolder {
                    key: *key,
                    guid: h.guid,
                    permits: h.permits,
                    lease_duration_ms: h.lease_duration_ms,
                    written_unix_ms: None,
                    owner: owner.into(),
                };
                match at {
                    Some(i) => q.holders[i] = h,
                    None => q.holders.push(h),
                }
            }
            (None, Some(i)) => {
                q.holders.remove(i);
            }
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::QueueCounters;

    fn held(guid: u8, token: u64) -> LockRecord {
        LockRecord {
            owner: Some("o".into()),
            guid: Some(crate::item::GuidValue::B(vec![guid; crate::item::GUID_LEN])),
            fencing_token: Some(token),
            lease_duration_ms: Some(1000),
            ..Default::default()
        }
    }

    fn fields() -> OpenFields<'static> {
        crate::testing::fields("me", 500)
    }

    /// A take of `permits` of 3 as holder `guid`.
    fn take<'a>(f: &'a OpenFields<'a>, guid: &'a [u8; crate::item::GUID_LEN], permits: u64) -> Op<'a, LockRecord> {
        Op::SemTake {
            fields: f,
            guid,
            limit: 3,
            permits,
        }
    }

    #[test]
    fn a_take_of_permits_sent_again_after_it_landed_is_refused_and_counts_them_once() {
        let (f, guid, other) = (fields(), [1u8; crate::item::GUID_LEN], [2u8; crate::item::GUID_LEN]);
        assert!(allowed(&take(&f, &guid, 1), None::<&LockRecord>));
        let (head, _) = apply(&take(&f, &guid, 1), None::<LockRecord>);
        assert_eq!(head.as_ref().map(Record::permits_held), Some(1));
        assert!(
            !allowed(&take(&f, &guid, 1), head.as_ref()),
            "its holder is on the head already"
        );
        assert!(
            allowed(&take(&f, &other, 1), head.as_ref()),
            "another holder's take fits beside it"
        );
    }

    #[test]
    fn a_heartbeat_of_permits_renews_its_own_holder_on_the_head() {
        let key = [1u8; crate::item::GUID_LEN];
        let next = [2u8; crate::item::GUID_LEN];
        let f = fields();
        let (head, _) = apply(&take(&f, &key, 2), None::<LockRecord>);
        let renewal = crate::request::Req::<_, <LockRecord as Record>::Version>::Renew {
            guids: [key, key],
            new_guid: next,
        };
        let adds = crate::request::Adds {
            fields: f.clone(),
            ttl_released: None,
        };
        let parts = renewal.parts(&adds);
        let op = permit_op(renewal.op::<LockRecord>(&adds, &parts), &key, 2).expect("a renewal of permits");
        assert!(matches!(op, Op::SemRenew { permits: 2, .. }), "{op:?}");
        assert!(allowed(&op, head.as_ref()));
        let (renewed, _) = apply(&op, head);
        let h = holder(renewed.as_ref(), &key).expect("still a holder");
        assert_eq!((h.guid, h.permits), (next, 2));
        assert_eq!(renewed.as_ref().map(Record::permits_held), Some(2));
    }

    #[test]
    fn a_session_ended_by_a_waiter_is_never_renewed_again() {
        let g = [3u8; crate::item::GUID_LEN];
        let new = [4u8; crate::item::GUID_LEN];
        let mut session = held(3, 1);
        session.guid = Some(GuidValue::B(g.to_vec()));
        let f = fields();
        // A waiter ends the session on the guid it waited out.
        let end = Op::Release {
            guids: std::slice::from_ref(&g),
            lock_acquired_time_unix_ms: None,
            ttl: None,
        };
        let (ended, _) = apply(&end, Some(session));
        // A renewal sent before and landing after finds it ended, though it names that guid.
        let renew = Op::Renew {
            guids: std::slice::from_ref(&g),
            new_guid: &new,
            fields: &f,
        };
        assert!(matches!(apply(&renew, ended).1, Reply::Refused(_)));
    }

    #[test]
    fn an_operators_writes_act_only_on_the_version_read() {
        let new = [9u8; crate::item::GUID_LEN];
        let lock = held(1, 4);
        let read = lock.version();
        let renewed = Some(held(2, 4));
        for delete in [false, true] {
            let free = Op::ForceFree {
                read: &read,
                new_guid: &new,
                now_unix_ms: 77,
                delete,
            };
            assert!(
                matches!(apply(&free, renewed.clone()).1, Reply::Refused(_)),
                "a heartbeat since"
            );
            assert!(matches!(apply(&free, None).1, Reply::Refused(None)), "no item");
            let (after, reply) = apply(&free, Some(lock.clone()));
            assert_eq!(reply, Reply::Done);
            match after {
                None => assert!(delete),
                Some(r) => {
                    assert!(!delete);
                    assert!(released(Some(&r)) && r.carries(&new), "{r:?}");
                    assert_eq!((r.fencing_token, r.lock_acquired_time_unix_ms), (Some(4), Some(77)));
                }
            }
        }
        let revoke = Op::Revoke {
            read: &read,
            new_guid: &new,
            now_unix_ms: 77,
            session: None,
        };
        let (revoked, _) = apply(&revoke, Some(lock.clone()));
        let r = revoked.expect("the item stays");
        assert!(r.carries(&new) && !free(Some(&r)), "held, under a new guid: {r:?}");
        assert_eq!((r.lease_duration_ms, r.fencing_token), (Some(1000), Some(4)));
        let mut released_since = lock.clone();
        released_since.lease_duration_ms = Some(RELEASED_LEASE_MS);
        assert!(
            matches!(apply(&revoke, Some(released_since)).1, Reply::Refused(_)),
            "nothing to revoke on a released lock"
        );
    }

    #[test]
    fn a_prune_deletes_only_an_item_nobody_holds_at_the_version_and_ticket_read() {
        let mut released_lock = held(1, 4);
        released_lock.lease_duration_ms = Some(RELEASED_LEASE_MS);
        let read = released_lock.version();
        let prune = |ticket_next, permits| Op::Prune {
            read: &read,
            ticket_next,
            permits,
        };
        assert_eq!(
            apply(&prune(None, false), Some(released_lock.clone())),
            (None, Reply::Done)
        );
        assert!(
            matches!(
                apply(&prune(Some(4), false), Some(released_lock.clone())).1,
                Reply::Refused(_)
            ),
            "a ticket issued since"
        );
        assert!(
            matches!(apply(&prune(None, false), Some(held(1, 4))).1, Reply::Refused(_)),
            "held"
        );
        assert!(
            matches!(apply(&prune(None, false), Some(held(2, 5))).1, Reply::Refused(_)),
            "taken since"
        );
        // A semaphore's head: no lease and no permits held.
        let mut head = released_lock;
        head.lease_duration_ms = None;
        head.queue = Some(Box::new(QueueCounters {
            permits: Some(3),
            permits_held: Some(0),
            ..Default::default()
        }));
        assert_eq!(apply(&prune(None, true), Some(head.clone())).1, Reply::Done);
        head.queue.as_mut().unwrap().permits_held = Some(1);
        assert!(
            matches!(apply(&prune(None, true), Some(head)).1, Reply::Refused(_)),
            "permits held"
        );
    }

    #[test]
    fn a_revocation_through_a_session_leaves_it_and_its_next_renewal_names_the_lock() {
        let (lock_guid, new) = ([1u8; crate::item::GUID_LEN], [9u8; crate::item::GUID_LEN]);
        let mut lock = held(1, 4);
        lock.session = Some("s1".into());
        let read = lock.version();
        let revoke = |session| Op::Revoke {
            read: &read,
            new_guid: &new,
            now_unix_ms: 77,
            session: Some((session, 60_000)),
        };
        assert!(
            matches!(apply(&revoke("s2"), Some(lock.clone())).1, Reply::Refused(_)),
            "held through another session"
        );
        let (after, _) = apply(&revoke("s1"), Some(lock));
        let r = after.expect("the item stays");
        assert_eq!((r.session, r.lease_duration_ms), (None, Some(60_000)));
        // The session's item: named there while held, then read back by its renewal.
        let (s_guid, s_next) = ([3u8; crate::item::GUID_LEN], [4u8; crate::item::GUID_LEN]);
        let session = held(3, 1);
        let mark = Op::MarkRevoked { guid: &lock_guid };
        let (marked, reply) = apply(&mark, Some(session.clone()));
        assert_eq!(reply, Reply::Done);
        let f = fields();
        let renew = Op::Renew {
            guids: std::slice::from_ref(&s_guid),
            new_guid: &s_next,
            fields: &f,
        };
        assert_eq!(apply(&renew, marked).1, Reply::Revoked(vec![lock_guid.to_vec()]));
        assert_eq!(apply(&renew, Some(session.clone())).1, Reply::Done, "none revoked");
        let mut ended = session;
        ended.lease_duration_ms = Some(RELEASED_LEASE_MS);
        assert!(
            matches!(apply(&mark, Some(ended)).1, Reply::Refused(_)),
            "an ended session"
        );
    }

    #[test]
    fn a_take_and_a_hand_over_name_the_session_and_a_heartbeat_keeps_it() {
        let g = [1u8; crate::item::GUID_LEN];
        let next = [2u8; crate::item::GUID_LEN];
        let f = OpenFields {
            session: Some("s1"),
            ..fields()
        };
        let take = Op::Take {
            fields: &f,
            guid: &g,
            waited_out: None,
            clear_mark: false,
        };
        let (taken, _) = apply(&take, None::<LockRecord>);
        assert_eq!(taken.as_ref().and_then(|r| r.session.as_deref()), Some("s1"));
        let plain = fields();
        let renew = Op::Renew {
            guids: std::slice::from_ref(&g),
            new_guid: &next,
            fields: &plain,
        };
        let (renewed, _) = apply(&renew, taken);
        assert_eq!(renewed.as_ref().and_then(|r| r.session.as_deref()), Some("s1"));
        let hand = Op::HandOver {
            guids: std::slice::from_ref(&next),
            new_guid: &g,
            fields: Some(&plain),
            marks_fresh_since_unix_ms: 0,
            ttl: None,
        };
        let (handed, _) = apply(&hand, renewed);
        assert_eq!(
            handed.and_then(|r| r.session),
            None,
            "a holder without a session removes it"
        );
    }

    #[test]
    fn a_take_raises_only_a_token_that_can_rise() {
        let g = [1u8; crate::item::GUID_LEN];
        let f = fields();
        let take = Op::Take {
            fields: &f,
            guid: &g,
            waited_out: None,
            clear_mark: false,
        };
        let released = |token: crate::item::Found| {
            let mut r = held(2, 0);
            r.fencing_token = None;
            r.lease_duration_ms = Some(RELEASED_LEASE_MS);
            r.read(FENCING_TOKEN, token);
            r
        };
        for bad in ["-5", "9007199254740991", "9007199254740992"] {
            let item = released(crate::item::Found::N(bad.into()));
            assert!(!allowed(&take, Some(&item)), "{bad}");
        }
        assert!(!allowed(&take, Some(&released(crate::item::Found::S("7".into())))));
        let below = released(crate::item::Found::N("9007199254740990".into()));
        let (after, reply) = apply(&take, Some(below));
        assert_eq!(reply, Reply::Token(MAX_FENCING_TOKEN));
        // The holder at the top hands over to no one: the next token would not be one.
        let next = [3u8; crate::item::GUID_LEN];
        let hand_over = |fields| Op::HandOver {
            guids: std::slice::from_ref(&g),
            new_guid: &next,
            fields,
            marks_fresh_since_unix_ms: 0,
            ttl: None,
        };
        assert!(!allowed(&hand_over(Some(&f)), after.as_ref()));
        assert!(
            allowed(&hand_over(None), after.as_ref()),
            "a FailClosed hand-over raises no token"
        );
    }

    #[test]
    fn a_whole_item_put_replaces_the_item_on_its_condition_only() {
        const G: Guid = [7u8; crate::item::GUID_LEN];
        let g = G;
        fn put(expect: Expect<Guid, Version>) -> Op<'static, LockRecord> {
            Op::PutItem {
                owner: "me",
                guid: &G,
                fencing_token: 4,
                lease_duration_ms: 500,
                lock_acquired_time_unix_ms: None,
                expect: Box::leak(Box::new(expect)),
            }
        }
        let mut marked = held(2, 3);
        marked.lock_waiting_unix_ms = Some(9);
        marked.data = Some(Box::new(LockData::S("d".into())));
        // Absent: only where there is no item.
        assert!(matches!(
            apply(&put(Expect::Absent), Some(held(2, 3))).1,
            Reply::Refused(_)
        ));
        let (after, reply) = apply(&put(Expect::Absent), None);
        assert_eq!(reply, Reply::Done);
        let after = after.unwrap();
        assert_eq!((after.fencing_token, after.lease_duration_ms), (Some(4), Some(500)));
        // On the version waited out; a holder that renewed since keeps its lock.
        let (after, _) = apply(&put(Expect::AbsentOr(marked.version())), Some(marked.clone()));
        let after = after.unwrap();
        assert!(after.carries(&g));
        assert_eq!(after.lock_waiting_unix_ms, None, "the whole item replaces the old one");
        assert_eq!(after.data, None);
        let seen = held(1, 3).version();
        assert!(matches!(
            apply(&put(Expect::AbsentOr(seen)), Some(held(2, 3))).1,
            Reply::Refused(_)
        ));
        // A heartbeat or release: only if the item carries the holder's guid.
        let holder = held(2, 3);
        let mine = [2u8; crate::item::GUID_LEN];
        assert_eq!(apply(&put(Expect::Guid(mine)), Some(holder.clone())).1, Reply::Done);
        assert!(matches!(
            apply(&put(Expect::Guid(g)), Some(holder)).1,
            Reply::Refused(_)
        ));
        assert!(matches!(apply(&put(Expect::Guid(mine)), None).1, Reply::Refused(_)));
    }

    #[test]
    fn a_refused_operation_changes_nothing_and_returns_the_item() {
        let item = held(1, 7);
        let f = fields();
        let g = [2; crate::item::GUID_LEN];
        let (after, reply) = apply(
            &Op::Take {
                fields: &f,
                guid: &g,
                waited_out: None,
                clear_mark: false,
            },
            Some(item.clone()),
        );
        assert_eq!(after, Some(item.clone()));
        assert_eq!(reply, Reply::Refused(Some(item)));
    }

    #[test]
    fn a_released_or_absent_lock_is_taken_at_once_and_its_token_counts_on() {
        let f = OpenFields {
            token_floor: 5,
            ..fields()
        };
        let g = [2; crate::item::GUID_LEN];
        let take = Op::Take {
            fields: &f,
            guid: &g,
            waited_out: None,
            clear_mark: false,
        };
        assert_eq!(
            apply(&take, None).1,
            Reply::Token(6),
            "an absent item counts from the floor"
        );
        let mut released_lock = held(1, 7);
        released_lock.lease_duration_ms = Some(RELEASED_LEASE_MS);
        let (after, reply) = apply(&take, Some(released_lock));
        assert_eq!(reply, Reply::Token(8));
        assert!(after.is_some_and(|r| r.carries(&g) && !r.is_released()));
    }

    #[test]
    fn a_take_over_a_waited_out_version_raises_the_token_and_keeps_the_mark() {
        let mut item = held(1, 7);
        item.lock_waiter = Some("w".into());
        item.lock_waiting_unix_ms = Some(5);
        item.data = Some(Box::new(LockData::S("old".into())));
        let v = item.version();
        let f = fields();
        let g = [2; crate::item::GUID_LEN];
        let take = |clear_mark| Op::Take {
            fields: &f,
            guid: &g,
            waited_out: Some(&v),
            clear_mark,
        };
        let (after, reply) = apply(&take(false), Some(item.clone()));
        let after = after.unwrap();
        assert_eq!(reply, Reply::Token(8));
        assert!(after.carries(&g) && after.lease_duration_ms == Some(500));
        assert_eq!((after.lock_waiter.as_deref(), after.data), (Some("w"), None));
        let (after, _) = apply(&take(true), Some(item));
        assert_eq!(after.unwrap().lock_waiter, None);
    }

    #[test]
    fn a_heartbeat_that_lands_after_the_release_is_refused() {
        let f = fields();
        let (old, new) = ([1; crate::item::GUID_LEN], [2; crate::item::GUID_LEN]);
        let guids = [old, new];
        let renew = Op::Renew {
            guids: &guids,
            new_guid: &new,
            fields: &f,
        };
        let (after, reply) = apply(&renew, Some(held(1, 3)));
        assert_eq!(reply, Reply::Done, "a held lock is renewed");
        assert!(after.is_some_and(|r| r.carries(&new)));
        let release = Op::Release {
            guids: &guids,
            lock_acquired_time_unix_ms: None,
            ttl: None,
        };
        let (released_lock, _) = apply(&release, Some(held(1, 3)));
        let (after, reply) = apply(&renew, released_lock.clone());
        assert_eq!(reply, Reply::Refused(released_lock.clone()));
        assert_eq!(after, released_lock, "the release stands");
    }

    #[test]
    fn free_released_and_absent_differ_on_a_lock_without_a_lease() {
        let failclosed = LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![1])),
            ..Default::default()
        };
        let mut released_lock = held(1, 3);
        released_lock.lease_duration_ms = Some(RELEASED_LEASE_MS);
        assert!(free(Some(&failclosed)) && !released(Some(&failclosed)) && !absent(Some(&failclosed)));
        assert!(free(Some(&released_lock)) && released(Some(&released_lock)));
        assert!(!free(Some(&held(1, 3))) && free::<LockRecord>(None) && absent::<LockRecord>(None));
    }

    #[test]
    fn fifo_tickets_count_from_the_token_and_give_back_only_the_last() {
        let head = held(1, 4);
        let (head, reply) = apply(&Op::FifoTicket, Some(head));
        assert_eq!(reply, Reply::Before(Some(held(1, 4))));
        let head = head.unwrap();
        assert_eq!((head.ticket_next(), head.queue_next()), (Some(5), Some(1)));
        assert!(matches!(
            apply(&Op::FifoReserve { ticket: 5 }, Some(head.clone())).1,
            Reply::Refused(_)
        ));
        let untake = |ticket| Op::FifoUntake {
            ticket,
            position: 1,
            previous_ticket: 4,
        };
        assert!(matches!(apply(&untake(4), Some(head.clone())).1, Reply::Refused(_)));
        let (back, reply) = apply(&untake(5), Some(head));
        assert_eq!(reply, Reply::Done);
        assert_eq!(
            back.unwrap().queue.map(|q| *q),
            Some(QueueCounters {
                ticket_next: Some(4),
                queue_next: Some(0),
                queue_granted: None,
                ..Default::default()
            })
        );
    }

    #[test]
    fn a_granted_ticket_is_never_given_back() {
        let (head, _) = apply(&Op::FifoTicket, Some(held(1, 4)));
        let fields = crate::testing::fields("w", 1000);
        let released = LockRecord {
            lease_duration_ms: Some(RELEASED_LEASE_MS),
            ..head.unwrap()
        };
        // The grant lands (its answer is lost) and the waiter releases it as it gives up.
        let grant = Op::FifoGrant {
            fields: &fields,
            guid: &[7; 64],
            ticket: 5,
            position: 1,
            waited_out: None,
        };
        let (granted, reply) = apply(&grant, Some(released));
        assert_eq!(reply, Reply::Done);
        let untake = Op::FifoUntake {
            ticket: 5,
            position: 1,
            previous_ticket: 4,
        };
        let (after, reply) = apply(&untake, granted.clone());
        assert!(matches!(reply, Reply::Refused(_)), "{reply:?}");
        assert_eq!(after, granted);
        // So the next ticket is above the token: no ticket repeats a token, and none is out.
        assert_eq!(last_ticket(after.as_ref()), 5);
        assert!(no_ticket_out(after.as_ref()));
    }
}
