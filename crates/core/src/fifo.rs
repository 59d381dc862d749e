//! Fifo acquisition as a state machine: a fair lock. Each resource has a queue, and waiters
//! are granted the resource in the order of their tickets; the ticket is the fencing token.
//!
//! Per resource there is a head item, key (resource, `"lock"`), shaped like a FailOpen lock
//! item (`owner`, `guid`, `fencingToken`, `leaseDurationMs`, `1` once released) plus three
//! counters: `ticketNext` (the last ticket issued), `queueNext` (the last queue position
//! issued) and `queueGranted` (the position of the last entry granted the lock). Mutual
//! exclusion and the rise of tokens live in the head item's conditional writes; the queue only
//! decides whose turn it is.
//!
//! - Uncontended: one `UpdateItem` on the head takes it if it is free and no ticket is out.
//! - Otherwise a waiter takes a ticket and a position (one `UpdateItem`), writes its queue
//!   entry at (resource, `"q#"` + position) and watches only the entry just ahead of it. When
//!   every entry between the holder and itself is finished, it is next in line and watches the
//!   head; it is granted the head (one conditional `UpdateItem`) once it is free, or once the
//!   holder's version has not changed for the holder's lease on the waiter's own clock.
//! - Queue entries are heartbeated by the scheduler of held locks. An entry whose `guid` has
//!   not changed for its lease is taken for dead: the waiter behind marks it finished
//!   (`leaseDurationMs` 1, new `guid`, so that its owner learns it). A position whose entry is
//!   still missing a lease after it was first seen missing (its owner died between taking the
//!   ticket and writing the entry) gets a finished entry written in its place.
//! - Several resources share one ticket, greater than every resource's `ticketNext`: every
//!   queue orders the same tickets the same way, so the smallest live ticket is first
//!   everywhere and two acquisitions of the same resources in any order cannot deadlock.
//! - A waiter that gives up (its wait ended, it was cancelled, or it may not wait at all)
//!   removes its entry and gives its ticket back if it is still the last one issued;
//!   otherwise a finished entry stays for the waiters behind to pass. A grant that may have
//!   landed unseen is released.
//! - A release in this client wakes this client's next waiter at once, without a poll.
//!
//! Queue positions, not tickets, key the entries: tickets of several resources skip numbers in
//! a queue, while positions leave no gap, so that a missing entry is always the one just ahead.
//!
//! The machine (`Acquire`) does no I/O and reads no clock: it asks its caller for requests
//! (`Request`, addressed to a resource's head or one of its entries), waits and effects on
//! this client's own state (`Act`), and is told the time (`Env`) and what this client knows
//! locally (`Here`: its own entries and held heads, which spare requests).

use std::time::Duration;

use crate::broken::{self, Broken};
use crate::item::{KeyValue, MAX_FENCING_TOKEN};
use crate::op::{self, Entry, Holder, Op, OpenFields, Record, Ttl};
use crate::request::{Answer, Attempts, Ended, Env, Policy, Purpose, Reply, Time};
use crate::settings::Lock;
use crate::waiting::Pace;

/// A queue entry's TTL attribute lies this far beyond its lease, and its waiter moves it on
/// every half of this: DynamoDB's TTL only removes entries left behind for an hour.
pub const ENTRY_TTL_MARGIN: Duration = Duration::from_secs(3600);

/// The TTL attribute a queue entry written at `unix_ms` carries, in seconds since the epoch:
/// `ENTRY_TTL_MARGIN` beyond its lease.
pub fn entry_ttl(s: &Lock, unix_ms: u64) -> u64 {
    unix_ms / 1000 + s.lease_duration_ms.div_ceil(1000) + ENTRY_TTL_MARGIN.as_secs()
}

/// The resources of one acquisition in the order every process queues them in (strings, then
/// numbers, then binary values, each by their bytes), once each: acquisitions of several
/// resources never wait for one another in a circle.
pub fn queue_order(resources: &mut Vec<KeyValue>) {
    fn order(v: &KeyValue) -> (u8, &[u8]) {
        match v {
            KeyValue::S(s) => (0, s.as_bytes()),
            KeyValue::N(n) => (1, n.as_bytes()),
            KeyValue::B(b) => (2, b.as_slice()),
        }
    }
    resources.sort_by(|a, b| order(a).cmp(&order(b)));
    resources.dedup();
}
/// Tickets an acquisition takes before it gives up: a new one is taken only when waiters
/// behind took this one for dead, or, for several resources, when another acquisition took a
/// higher ticket for one of them meanwhile.
pub const MAX_ROUNDS: u32 = 16;
/// The most holders of a semaphore one grant reclaims; more are reclaimed one by one first.
pub const MAX_RECLAIM: usize = 8;
/// The permits a ReadWriteLock's head counts: a shared hold takes one, an exclusive hold all.
/// More than a Semaphore may count (2^31 - 1), so that neither kind takes the other's head.
pub const READ_WRITE_PERMITS: u64 = 1 << 40;

/// One request of a Fifo acquisition, addressed to resource `resource` (an index into the
/// acquisition's resources): its head item, or its queue entry at `position`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Request<G, V> {
    /// A strongly consistent read of the head (`position` `None`) or of an entry.
    Get { resource: usize, position: Option<u64> },
    /// `Op::FifoTakeFree` on the head: the holder's fields with `guid`.
    TakeFree { resource: usize, guid: G },
    /// `Op::FifoTicket` on the head.
    Ticket { resource: usize },
    /// `Op::FifoReserve` on the head.
    Reserve { resource: usize, ticket: u64 },
    /// `Op::FifoUntake` on the head.
    Untake {
        resource: usize,
        ticket: u64,
        position: u64,
        previous: u64,
    },
    /// `Op::FifoPutEntry` at `position`: a live entry with the client's lease, or a finished
    /// one (`leaseDurationMs` 1); a semaphore's waiter names the `permits` it asks for.
    PutEntry {
        resource: usize,
        position: u64,
        guid: G,
        ticket: u64,
        finished: bool,
        permits: Option<u64>,
    },
    /// `Op::FifoGrant` on the head.
    Grant {
        resource: usize,
        guid: G,
        ticket: u64,
        position: u64,
        waited_out: Option<V>,
    },
    /// `Op::FifoFinishEntry` at `position`: if it still carries `seen`.
    FinishEntry {
        resource: usize,
        position: u64,
        seen: G,
        new_guid: G,
    },
    /// `Op::FifoTouchEntry` at `position`.
    TouchEntry { resource: usize, position: u64 },
    /// `Op::Release` of the head, if it carries `guid` (a grant that may have landed unseen).
    ReleaseHead { resource: usize, guid: G },
    /// `Op::DeleteIfGuid` of the entry at `position`.
    DeleteEntry {
        resource: usize,
        position: u64,
        guids: Vec<G>,
    },
    /// `Op::SemTake` on the head: a semaphore's uncontended take.
    SemTake { resource: usize, guid: G, sem: Sem },
    /// `Op::SemGrant` on the head.
    SemGrant {
        resource: usize,
        guid: G,
        sem: Sem,
        ticket: u64,
        position: u64,
        reclaim: Vec<Holder<G>>,
    },
    /// `Op::SemRelease` of holder `key` on the head (a take or grant that may have landed
    /// unseen, before any heartbeat of it).
    SemRelease { resource: usize, key: G, permits: u64 },
    /// `Op::SemRelease` of `holder`, still at the `guid` seen: it has not renewed for its
    /// lease.
    SemReclaim { resource: usize, holder: Holder<G> },
}

/// What a semaphore acquisition asks for: `permits` of the `limit` its resource counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sem {
    pub limit: u64,
    pub permits: u64,
}

impl<G, V> Request<G, V> {
    /// Why it is sent: a waiter's reads of what it watches and the upkeep of the queue ahead
    /// of it (dead entries finished, missing ones filled, its own entry's TTL moved on) are
    /// waiting; the rest (ticket, entry, grant, clean-up, giving up) is acquiring.
    pub fn purpose(&self) -> Purpose {
        match self {
            Request::Get { .. }
            | Request::FinishEntry { .. }
            | Request::SemReclaim { .. }
            | Request::TouchEntry { .. }
            | Request::PutEntry { finished: true, .. } => Purpose::Waiting,
            _ => Purpose::Acquiring,
        }
    }

    /// The resource it goes to, and the entry position (`None`: the head).
    pub fn place(&self) -> (usize, Option<u64>) {
        match self {
            Request::Get { resource, position } => (*resource, *position),
            Request::TakeFree { resource, .. }
            | Request::Ticket { resource }
            | Request::Reserve { resource, .. }
            | Request::Untake { resource, .. }
            | Request::Grant { resource, .. }
            | Request::ReleaseHead { resource, .. }
            | Request::SemTake { resource, .. }
            | Request::SemGrant { resource, .. }
            | Request::SemRelease { resource, .. }
            | Request::SemReclaim { resource, .. } => (*resource, None),
            Request::PutEntry { resource, position, .. }
            | Request::FinishEntry { resource, position, .. }
            | Request::TouchEntry { resource, position }
            | Request::DeleteEntry { resource, position, .. } => (*resource, Some(*position)),
        }
    }
}

/// What a Fifo client's settings add to its requests when they become operations
/// (`Request::op`): the holder's fields of a grant or take (owner, lease), and the TTL
/// attribute a queue entry carries.
#[derive(Clone, Debug)]
pub struct Adds<'a> {
    pub fields: OpenFields<'a>,
    pub entry_ttl: Ttl<'a>,
}

impl<G, V> Request<G, V> {
    /// The operation this request is, on the item `place` names, with what the caller adds:
    /// the one translation from this machine's requests to the store's operations.
    pub fn op<'a, R: Record<Guid = G, Version = V>>(&'a self, adds: &'a Adds<'a>) -> Op<'a, R> {
        match self {
            Request::Get { .. } => Op::Get,
            Request::TakeFree { guid, .. } => Op::FifoTakeFree {
                fields: &adds.fields,
                guid,
            },
            Request::Ticket { .. } => Op::FifoTicket,
            Request::Reserve { ticket, .. } => Op::FifoReserve { ticket: *ticket },
            Request::Untake {
                ticket,
                position,
                previous,
                ..
            } => Op::FifoUntake {
                ticket: *ticket,
                position: *position,
                previous_ticket: *previous,
            },
            Request::PutEntry {
                guid,
                ticket,
                finished,
                permits,
                ..
            } => Op::FifoPutEntry(Entry {
                owner: adds.fields.owner,
                guid,
                ticket: *ticket,
                permits: *permits,
                lease_duration_ms: match finished {
                    true => crate::item::RELEASED_LEASE_MS,
                    false => adds.fields.lease_duration_ms,
                },
                ttl: adds.entry_ttl,
            }),
            Request::Grant {
                guid,
                ticket,
                position,
                waited_out,
                ..
            } => Op::FifoGrant {
                fields: &adds.fields,
                guid,
                ticket: *ticket,
                position: *position,
                waited_out: waited_out.as_ref(),
            },
            Request::FinishEntry { seen, new_guid, .. } => Op::FifoFinishEntry {
                guids: std::slice::from_ref(seen),
                new_guid,
            },
            Request::TouchEntry { .. } => Op::FifoTouchEntry { ttl: adds.entry_ttl },
            Request::ReleaseHead { guid, .. } => Op::Release {
                guids: std::slice::from_ref(guid),
                lock_acquired_time_unix_ms: None,
                ttl: None,
            },
            Request::DeleteEntry { guids, .. } => Op::DeleteIfGuid { guids },
            Request::SemTake { guid, sem, .. } => Op::SemTake {
                fields: &adds.fields,
                guid,
                limit: sem.limit,
                permits: sem.permits,
            },
            Request::SemGrant {
                guid,
                sem,
                ticket,
                position,
                reclaim,
                ..
            } => Op::SemGrant(op::Grant {
                fields: &adds.fields,
                guid,
                limit: sem.limit,
                permits: sem.permits,
                ticket: *ticket,
                position: *position,
                reclaim,
            }),
            Request::SemRelease { key, permits, .. } => Op::SemRelease {
                key,
                guids: std::slice::from_ref(key),
                permits: *permits,
            },
            Request::SemReclaim { holder, .. } => Op::SemRelease {
                key: &holder.key,
                guids: std::slice::from_ref(&holder.guid),
                permits: holder.permits,
            },
        }
    }
}

/// What this client knows of one of its queue entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mine {
    Waiting,
    Finished,
    Granted(u64),
}

/// What the machine is told of the client it runs in, besides answers and time: state this
/// client keeps for all its acquisitions, and new `guid`s.
pub trait Here<G> {
    /// A new random `guid`.
    fn guid(&mut self) -> G;
    /// An acquisition of this client waits in `resource`'s queue, or a lock of this client
    /// holds its head.
    fn busy(&self, resource: usize) -> bool;
    /// What this client knows of the entry at `position` of `resource`'s queue.
    fn entry(&self, resource: usize, position: u64) -> Option<Mine>;
    /// Whether this client holds `resource`'s head with `token` (`Some(false)`: its release
    /// wakes the waiters) or released it just now (`Some(true)`).
    fn holder(&self, resource: usize, token: u64) -> Option<bool>;
    /// This acquisition's heartbeated entry in `resource`'s queue was found lost.
    fn entry_lost(&self, resource: usize) -> bool;
    /// Until when the lock this acquisition was granted on `resource` is held, as its
    /// heartbeats know it.
    fn held_until(&self, resource: usize) -> Option<Time>;
    /// How many locks of this client on `resource` were released so far: a semaphore's next
    /// in line reads the head at once when it changes. A client that keeps no count (the
    /// model checker's, whose clients hold one lock at a time) says 0.
    fn releases(&self, _resource: usize) -> u64 {
        0
    }
}

/// What the machine is stepped with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<R: Record, E> {
    /// An answer to the request the last `Act::Send` asked for.
    Answer(Answer<R, E>),
    /// The last wait ended (its time came, this client's queue state changed, or the
    /// acquisition was cancelled), or the last effect was carried out.
    Resume,
    /// Every `guid` the entry stopped by `Act::StopEntry` may carry.
    Guids(Vec<R::Guid>),
}

/// How an acquisition ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<E> {
    /// Every resource is held (`Act::Hold` named each lock).
    Granted,
    /// Waited as long as allowed (or not at all): `FailedToAcquireLock`.
    NotAcquired,
    Aborted,
    /// A grant was answered only after its whole lease: it is released, not held.
    Lost,
    /// The head of resource `resource` is refused (`Record::head_corrupt`, or no new ticket can
    /// rise from it: `Record::ticket_can_rise`): nothing is handed out from it, and a take of
    /// ours that landed on it is released. `Acquire::refused` holds the item as it was read.
    Corrupt {
        resource: usize,
    },
    /// The head is not one this acquisition may use: it counts `Some(n)` permits (a
    /// semaphore's of another number, or any semaphore's for a Fifo acquisition), or it is a
    /// Fifo lock's (`None`) and this a semaphore's.
    WrongKind {
        permits: Option<u64>,
    },
    Failed(E),
}

/// The queue entry at `position` of `resource`'s queue, carrying `guid`, written by a request
/// sent at `sent_at`, from when its lease counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry<G> {
    pub resource: usize,
    pub position: u64,
    pub guid: G,
    pub sent_at: Time,
}

/// What the caller does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act<G, V, E> {
    /// Send `req`, timing out at `timeout_at` (as `Step::Send`); step with its answer.
    Send {
        req: Request<G, V>,
        timeout_at: Time,
    },
    /// Step again (`Resume`) at `until`. `watch`: or as soon as this client's queue state
    /// changes (since the last `Arm`), or the acquisition is cancelled.
    Wait {
        until: Time,
        watch: bool,
    },
    /// Start noticing changes of this client's queue state, before the machine reads it.
    Arm,
    /// This acquisition waits at `position` in `resource`'s queue.
    Join {
        resource: usize,
        position: u64,
    },
    /// It no longer waits at `position`: the entry is `mine` now, or unknown (`None`).
    Leave {
        resource: usize,
        position: u64,
        mine: Option<Mine>,
    },
    /// A queue entry is written: heartbeat it.
    Entry(NewEntry<G>),
    /// Stop the entry's heartbeats; step with `Input::Guids`.
    StopEntry {
        resource: usize,
    },
    /// The head is held with `guid` and `token`, its lease counting from `sent_at`: a held
    /// lock, heartbeated. `leave`: the position this acquisition waited at, now granted.
    Hold {
        resource: usize,
        guid: G,
        token: u64,
        sent_at: Time,
        leave: Option<u64>,
    },
    /// Release the lock held on `resource` (as a held lock's release does), then resume.
    ReleaseHeld {
        resource: usize,
    },
    /// In the background: stop and remove the entries of `entries` (`DeleteIfGuid` with every
    /// `guid` they may carry) and the finished entries passed (`FifoDeleteFinished`).
    Cleanup {
        entries: Vec<usize>,
        passed: Vec<(usize, u64)>,
    },
    Done(Outcome<E>),
}

/// Why the waiting stopped short of a grant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Stop<E> {
    /// Others took this acquisition's place in a queue for dead: take a new ticket.
    Dead,
    End(Outcome<E>),
}

/// What a waiter watches, for the pace of its reads: the entry at a position, or the head
/// held with a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Watched {
    Entry(u64),
    Head(u64),
}

/// What a waiter has seen of the item it watches: the entry ahead with its `guid`, the entry
/// ahead missing, or the head held with a version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Watch<G, V> {
    Entry(Option<G>),
    Missing,
    Head(V),
}

/// What a waiter has seen of the item it watches, and since when on its own clock (`None`:
/// nothing yet, or it starts over).
type Seen<G, V> = Option<(Watch<G, V>, Time)>;

/// Where one resource's waiter is: the request it waits for, or the step of giving up.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum QPhase {
    Idle,
    /// Reading the entry at the cursor; `now` when the step began, `period` of re-reads.
    ReadEntry {
        now: Time,
        period: Duration,
    },
    FinishEntry {
        now: Time,
    },
    /// Reading the head after the entry at the cursor was missing.
    ReadHeadMissing {
        now: Time,
    },
    PutMarker {
        now: Time,
    },
    ReadHead {
        now: Time,
    },
    /// Removing a semaphore's holder that has not renewed for its lease.
    Reclaim,
    Grant,
    /// The grant's `Hold` was carried out.
    Granted,
    WriteEntry {
        guid_sent: Time,
    },
    /// Reading the entry back after a refused write that may have met our own.
    WriteEntrySettle {
        guid_sent: Time,
    },
    GiveUpHeld,
    GiveUpMaybeGranted,
    GiveUpStop,
    GiveUpDelete,
    GiveUpUntake,
    GiveUpMarker,
    GiveUpLeave,
}

/// One resource of an acquisition: its ticket and place in the queue, and what it has seen.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Queued<R: Record> {
    resource: usize,
    ticket: u64,
    position: u64,
    /// `ticketNext` before this ticket: what giving the ticket back restores.
    previous_ticket: u64,
    /// The `guid` the head is granted with.
    guid: R::Guid,
    /// A heartbeated queue entry was written (`Act::Entry`), and not stopped since.
    entry: bool,
    /// The `guid` of the entry being written.
    entry_guid: Option<R::Guid>,
    touch_at: Time,
    /// The position being looked at: everything between it and this one is finished.
    cursor: u64,
    /// The last granted position and token seen; everything up to it is finished or holds.
    granted_position: u64,
    head_token: u64,
    /// A head item read and not yet acted on.
    fresh_head: Option<Option<R>>,
    next_read: Time,
    /// The pace of this waiter's reads of what it watches: the entry ahead (its position) or
    /// the head's holder (its token).
    pace: Pace<Watched>,
    watch: Seen<R::Guid, R::Version>,
    /// A semaphore's holders as this waiter saw them, and since when on its own clock.
    holders_seen: Vec<(Holder<R::Guid>, Time)>,
    /// This client's releases on the resource when the head was last read (`Here::releases`).
    releases_seen: u64,
    /// The token of a local release already acted on without a read.
    local_release_tried: u64,
    /// Another entry was found at this waiter's position: the position is not given back.
    displaced: bool,
    /// Finished entries passed, deleted once the lock is granted.
    passed: Vec<u64>,
    /// When the last grant was sent, and whether one may have landed unseen.
    grant_sent_at: Time,
    maybe_granted: bool,
    granted: bool,
    /// Whether this client's registry still counts this entry as waiting.
    joined: bool,
    /// No grant is sent before this: a refused grant is not sent again at once, so that a
    /// head whose refusal this waiter cannot read is not written in a loop.
    grant_after: Time,
    /// Giving up: the position is settled already (not to be given back).
    settled: bool,
    phase: QPhase,
}

/// What a step of one waiter came to.
enum QStep {
    /// Nothing to do before this time (or before this client's queue state changes).
    Wait(Time),
}

/// A waiter's step: an act to hand out (the waiter waits for its answer), or where it got.
enum QRes<G, V, E> {
    Act(Act<G, V, E>),
    Step(QStep),
}

type QOut<R, E> = Result<Res<R, E>, Stop<E>>;

/// What comes after giving up every resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum After<E> {
    /// Enter again with this ticket (a higher one was issued for one of the resources).
    Reenter(u64),
    /// The acquisition's place was taken for dead: a new round, if the wait allows.
    Dead,
    End(Outcome<E>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase<E> {
    TakeFree,
    /// Reading the head after the uncontended take's failure (`Some`) or refusal (`None`).
    TakeFreeSettle(Option<E>),
    /// The uncontended take's `Hold` was carried out.
    TakeFreeHeld,
    /// Releasing the uncontended take, which landed on a refused head.
    TakeFreeUndo,
    /// Releasing a semaphore's take that landed unseen (its token is not known): then the
    /// queue.
    SemTakeUndo,
    /// Reading the head after a refused ticket whose refusal did not carry it.
    TicketRead,
    Ticket,
    Reserve,
    ReserveRead,
    /// The waiter just queued was joined.
    Joined,
    /// Giving up resource `usize` of every queued one.
    GiveUp(usize, After<E>),
    RunArm,
    /// Stepping waiter `usize`.
    Run(usize),
    /// Writing the entry of waiter `usize`; `Time`: when the waiters step next.
    Write(usize, Time),
    Touch(usize, Time),
    RunWait,
    Cleanup,
    /// Releasing the held lock of resource `usize`, then ending with the outcome.
    Release(usize, Outcome<E>),
    Over,
}

/// One Fifo acquisition of one or more resources (sorted, distinct), with one ticket.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire<R: Record, E> {
    s: Lock,
    /// A semaphore's acquisition: permits, not the whole head.
    sem: Option<Sem>,
    resources: usize,
    no_wait: bool,
    deadline: Option<Time>,
    /// Acquisition rounds started (tickets taken for dead included).
    rounds: u32,
    /// Rounds of taking a ticket for every resource within this acquisition round.
    enter_rounds: u32,
    ticket: Option<u64>,
    queued: Vec<Queued<R>>,
    /// The uncontended take: its `guid`, when it was sent, and the policy of its settling
    /// read.
    take_guid: Option<R::Guid>,
    take_sent_at: Time,
    settle: Policy,
    /// The waiters' next wake-up, and the first error of writing entries.
    wait: Time,
    write_error: Option<Stop<E>>,
    /// Whether the last failed attempt was transient (a read that failed for now).
    transient: bool,
    /// A request is pausing between attempts.
    retrying: bool,
    pending: Sent<R::Guid, R::Version>,
    /// The refused head an acquisition ended on (`Outcome::Corrupt`).
    refused: Option<R>,
    phase: Phase<E>,
}

type A<R, E> = Act<<R as Record>::Guid, <R as Record>::Version, E>;
/// The request in flight (or pausing between attempts), and its attempts.
type Sent<G, V> = Option<(Request<G, V>, Attempts)>;
type Res<R, E> = QRes<<R as Record>::Guid, <R as Record>::Version, E>;

impl<R, E> Acquire<R, E>
where
    R: Record,
    R::Guid: Clone + PartialEq,
    R::Version: Clone,
    E: Clone,
{
    /// Starts an acquisition of `resources` resources. `wait`: how long to wait for the turn
    /// (`None`: without end; zero: fail at once if anyone is ahead).
    pub fn start(
        s: Lock,
        resources: usize,
        wait: Option<Duration>,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> (Self, A<R, E>) {
        Self::start_with(s, None, resources, wait, env, here)
    }

    /// Starts a semaphore's acquisition of `sem.permits` permits of one resource.
    pub fn start_sem(
        s: Lock,
        sem: Sem,
        wait: Option<Duration>,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> (Self, A<R, E>) {
        Self::start_with(s, Some(sem), 1, wait, env, here)
    }

    fn start_with(
        s: Lock,
        sem: Option<Sem>,
        resources: usize,
        wait: Option<Duration>,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> (Self, A<R, E>) {
        let mut m = Acquire {
            s,
            sem,
            resources,
            no_wait: wait.is_some_and(|w| w.is_zero()),
            deadline: wait.and_then(|w| env.now.checked_add(w)),
            rounds: 0,
            enter_rounds: 0,
            ticket: None,
            queued: Vec::new(),
            take_guid: None,
            take_sent_at: env.now,
            settle: s.policy(s.max_attempts),
            wait: env.now,
            write_error: None,
            transient: false,
            retrying: false,
            pending: None,
            refused: None,
            phase: Phase::Over,
        };
        let act = m.begin(env, here);
        (m, act)
    }

    /// The head item an acquisition that ended with `Outcome::Corrupt` refused, as read.
    pub fn refused(&self) -> Option<&R> {
        self.refused.as_ref()
    }

    /// The outcome for head `head` of `resource`, refused.
    fn corrupt(&mut self, resource: usize, head: &R) -> Outcome<E> {
        self.refused = Some(head.clone());
        Outcome::Corrupt { resource }
    }

    /// The machine is over.
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over)
    }

    fn policy(&self) -> Policy {
        self.s.policy(self.s.max_attempts)
    }

    fn over(&mut self, o: Outcome<E>) -> A<R, E> {
        self.phase = Phase::Over;
        Act::Done(o)
    }

    /// Sends `req` under `policy`.
    fn send(&mut self, req: Request<R::Guid, R::Version>, policy: Policy, env: &Env) -> A<R, E> {
        let mut attempts = Attempts::new(policy);
        let timeout_at = attempts.send(env.now);
        self.pending = Some((req.clone(), attempts));
        self.retrying = false;
        Act::Send { req, timeout_at }
    }

    /// An answer to the pending request: how the request ended, or the act that retries it.
    fn ended(&mut self, a: Answer<R, E>, env: &Env) -> Result<Ended<R, E>, A<R, E>> {
        let Some((_, attempts)) = self.pending.as_mut() else {
            unreachable!("an answer without a request");
        };
        match a {
            Answer::Done(r) => Ok(Ended::Ok(r)),
            Answer::Refused(current) => Ok(Ended::Refused {
                current,
                ambiguous: attempts.ambiguous,
            }),
            Answer::Failed {
                error,
                transient,
                maybe_applied,
            } => {
                self.transient = transient;
                match attempts.failed(transient, maybe_applied, env.now, env.random) {
                    Some(until) => {
                        self.retrying = true;
                        Err(Act::Wait { until, watch: false })
                    }
                    None => Ok(Ended::Failed {
                        error,
                        ambiguous: attempts.ambiguous,
                    }),
                }
            }
        }
    }

    /// Steps the machine with `input`.
    pub fn step(&mut self, input: Input<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match input {
            Input::Answer(a) => match self.ended(a, env) {
                Err(act) => act,
                Ok(ended) => {
                    self.pending = None;
                    self.on_ended(ended, env, here)
                }
            },
            Input::Resume if self.retrying => {
                self.retrying = false;
                let Some((req, attempts)) = self.pending.as_mut() else {
                    unreachable!("a retry without a request");
                };
                let timeout_at = attempts.send(env.now);
                Act::Send {
                    req: req.clone(),
                    timeout_at,
                }
            }
            Input::Resume => self.on_resume(env, here),
            Input::Guids(guids) => match self.phase {
                Phase::GiveUp(i, _) if self.queued[i].phase == QPhase::GiveUpStop => {
                    let q = &mut self.queued[i];
                    q.phase = QPhase::GiveUpDelete;
                    let req = Request::DeleteEntry {
                        resource: q.resource,
                        position: q.position,
                        guids,
                    };
                    self.send(req, self.policy(), env)
                }
                _ => unreachable!("guids of an entry not stopped"),
            },
        }
    }

    fn begin(&mut self, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        // While this client itself waits for or holds the resource, the one-request path is
        // refused for sure: go to the queue at once.
        // A semaphore's take may succeed beside this client's own holds.
        if self.resources == 1 && (self.no_wait || self.sem.is_some() || !here.busy(0)) {
            let guid = here.guid();
            self.take_guid = Some(guid.clone());
            self.take_sent_at = env.now;
            let budget = self.s.budget(self.s.max_attempts, env.now);
            self.settle = budget.settle;
            self.phase = Phase::TakeFree;
            let req = match self.sem {
                Some(sem) => Request::SemTake { resource: 0, guid, sem },
                None => Request::TakeFree { resource: 0, guid },
            };
            return self.send(req, budget.writes, env);
        }
        self.round(env, here)
    }

    /// The uncontended take landed with `token`: a held lock.
    fn taken(&mut self, token: u64) -> A<R, E> {
        self.phase = Phase::TakeFreeHeld;
        let Some(guid) = self.take_guid.clone() else {
            unreachable!("a take without a guid");
        };
        Act::Hold {
            resource: 0,
            guid,
            token,
            sent_at: self.take_sent_at,
            leave: None,
        }
    }

    /// The uncontended take landed: the head `h` carries its `guid`. A head refused
    /// (`Record::head_corrupt`), or without a token, is given back, not held.
    fn landed(&mut self, h: &R, env: &Env) -> A<R, E> {
        if let Some(sem) = self.sem {
            // Its token is not on the head (later grants raise it): given back, and the
            // acquisition goes to the queue.
            let Some(key) = self.take_guid.clone() else {
                unreachable!("a take without a guid");
            };
            self.phase = Phase::SemTakeUndo;
            let req = Request::SemRelease {
                resource: 0,
                key,
                permits: sem.permits,
            };
            return self.send(req, self.s.policy(self.s.release_attempts()), env);
        }
        match h.fencing_token().filter(|_| !h.head_corrupt()) {
            Some(token) => self.taken(token),
            None => {
                self.refused = Some(h.clone());
                self.phase = Phase::TakeFreeUndo;
                let Some(guid) = self.take_guid.clone() else {
                    unreachable!("a take without a guid");
                };
                let req = Request::ReleaseHead { resource: 0, guid };
                self.send(req, self.s.policy(self.s.release_attempts()), env)
            }
        }
    }

    /// The uncontended take was refused by `current`.
    fn take_refused(&mut self, current: Option<R>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if let Some(h) = &current {
            if self.take_guid.as_ref().is_some_and(|g| self.holds(h, g)) {
                return self.landed(h, env);
            }
            if let Some(o) = self.wrong_kind(h) {
                return self.over(o);
            }
            // The take's condition excludes the heads it can: a refusal for the item, not for
            // contention, and not waited out.
            if h.head_corrupt() || !h.ticket_can_rise() {
                let o = self.corrupt(0, h);
                return self.over(o);
            }
            let free = match self.sem {
                Some(sem) => op::permits_fit(Some(h), sem.limit, sem.permits, &[]),
                None => op::free(Some(h)),
            };
            if self.no_wait && !free {
                return self.over(Outcome::NotAcquired);
            }
        }
        self.round(env, here)
    }

    /// The head `h` is held with `guid`: as the lock's `guid`, or as a semaphore's holder.
    fn holds(&self, h: &R, guid: &R::Guid) -> bool {
        match self.sem {
            Some(_) => op::holder(Some(h), guid).is_some(),
            None => h.carries(guid),
        }
    }

    /// How an acquisition ends on head `h`, if `h` is not one it may use: a semaphore's on a
    /// head of other permits or a Fifo lock's, a Fifo acquisition on a semaphore's.
    fn wrong_kind(&self, h: &R) -> Option<Outcome<E>> {
        match self.sem {
            Some(sem) => (!op::sem_head(Some(h), sem.limit)).then(|| Outcome::WrongKind {
                permits: h.permits().filter(|_| h.lease_duration_ms().is_none()),
            }),
            None => h.permits().map(|n| Outcome::WrongKind { permits: Some(n) }),
        }
    }

    /// A new round: a new ticket for every resource.
    fn round(&mut self, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if self.rounds >= MAX_ROUNDS {
            return self.over(Outcome::NotAcquired);
        }
        self.rounds += 1;
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        self.enter_rounds = 0;
        self.ticket = None;
        self.queued.clear();
        self.enter_round(env, here)
    }

    /// Takes the ticket and a queue position for every resource, from the first.
    fn enter_round(&mut self, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if self.enter_rounds >= MAX_ROUNDS {
            return self.stop(Stop::End(Outcome::NotAcquired), env, here);
        }
        self.enter_rounds += 1;
        self.enter_next(env)
    }

    fn enter_next(&mut self, env: &Env) -> A<R, E> {
        let resource = self.queued.len();
        if resource == self.resources {
            self.phase = Phase::RunArm;
            return Act::Arm;
        }
        match self.ticket {
            None => {
                self.phase = Phase::Ticket;
                self.send(Request::Ticket { resource }, self.policy(), env)
            }
            Some(ticket) => {
                self.phase = Phase::Reserve;
                self.send(Request::Reserve { resource, ticket }, self.policy(), env)
            }
        }
    }

    /// The next resource is queued with the ticket, after `before` (the head before).
    fn queue(&mut self, before: Option<R>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        let resource = self.queued.len();
        let refused = before.as_ref().filter(|h| h.head_corrupt()).cloned();
        let before = before.as_ref();
        let position = before.and_then(R::queue_next).unwrap_or(0) + 1;
        let q = Queued {
            resource,
            ticket: self.ticket.unwrap_or_default(),
            position,
            previous_ticket: op::last_ticket(before),
            guid: here.guid(),
            entry: false,
            entry_guid: None,
            touch_at: env.now,
            cursor: position - 1,
            granted_position: before.and_then(R::queue_granted).unwrap_or(0),
            head_token: before.and_then(R::fencing_token).unwrap_or(0),
            // Taking the ticket changed none of the holder's attributes.
            fresh_head: Some(before.cloned()),
            next_read: env.now,
            pace: Pace::new(env.now),
            watch: None,
            holders_seen: Vec::new(),
            releases_seen: 0,
            local_release_tried: 0,
            displaced: false,
            passed: Vec::new(),
            grant_sent_at: env.now,
            maybe_granted: false,
            granted: false,
            joined: true,
            settled: false,
            grant_after: env.now,
            phase: QPhase::Idle,
        };
        self.queued.push(q);
        if let Some(o) = before.and_then(|h| self.wrong_kind(h)) {
            self.queued[resource].joined = false;
            return self.stop(Stop::End(o), env, here);
        }
        // A ticket taken on a head whose refused form no condition excludes (a fraction): it
        // is given back, and nothing is handed out.
        if let Some(h) = refused {
            self.queued[resource].joined = false;
            let o = self.corrupt(resource, &h);
            return self.stop(Stop::End(o), env, here);
        }
        self.phase = Phase::Joined;
        Act::Join { resource, position }
    }

    /// A reservation was refused: a higher ticket was issued for this resource, and every
    /// resource takes one above it.
    fn reserve_refused(&mut self, current: Option<R>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        let t = self.ticket.unwrap_or_default();
        if let Some(h) = current.as_ref().filter(|h| h.head_corrupt() || !h.ticket_can_rise()) {
            let o = self.corrupt(self.queued.len(), h);
            return self.stop(Stop::End(o), env, here);
        }
        let next = op::last_ticket(current.as_ref()).max(t) + 1;
        if next > MAX_FENCING_TOKEN {
            // No ticket above the one issued can be a token: the head that issued it is refused.
            return match current {
                Some(h) => {
                    let o = self.corrupt(self.queued.len(), &h);
                    self.stop(Stop::End(o), env, here)
                }
                None => self.stop(Stop::End(Outcome::NotAcquired), env, here),
            };
        }
        self.give_up_all(After::Reenter(next), env, here)
    }

    fn on_ended(&mut self, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::TakeFree => self.take_free_answer(ended, env, here),
            Phase::TakeFreeSettle(failure) => self.take_settle_answer(failure, ended, env, here),
            // Released or not, the refusal stands (a release that failed lapses with the lease).
            Phase::TakeFreeUndo => self.over(Outcome::Corrupt { resource: 0 }),
            // Given back or not (a release that failed lapses with the holder's lease, and no
            // heartbeat renews it), the acquisition queues.
            Phase::SemTakeUndo => self.round(env, here),
            Phase::Ticket => self.ticket_answer(ended, env, here),
            Phase::TicketRead => match ended {
                Ended::Ok(Reply::Before(Some(h))) if h.head_corrupt() || !h.ticket_can_rise() => {
                    let o = self.corrupt(0, &h);
                    self.over(o)
                }
                Ended::Failed { error, .. } => self.over(Outcome::Failed(error)),
                _ => self.over(Outcome::NotAcquired),
            },
            Phase::Reserve => self.reserve_answer(ended, env, here),
            Phase::ReserveRead => match ended {
                Ended::Ok(Reply::Before(cur)) => self.reserve_refused(cur, env, here),
                Ended::Failed { error, .. } => self.stop(Stop::End(Outcome::Failed(error)), env, here),
                _ => self.stop(Stop::End(Outcome::NotAcquired), env, here),
            },
            Phase::Run(k) => {
                let res = self.q_answer(k, ended, env, here);
                self.run_res(k, res, env, here)
            }
            Phase::Write(w, until) => {
                self.wait = until;
                self.write_answer(w, ended, env, here)
            }
            Phase::Touch(t, until) => self.touch_answer(t, until, ended, env),
            Phase::GiveUp(i, after) => {
                self.phase = Phase::GiveUp(i, after.clone());
                let next = self.gu_answer(i, ended, env, here);
                self.gu_then(i, next, after, env, here)
            }
            _ => unreachable!("an answer the machine did not ask for"),
        }
    }

    /// The answer to the uncontended take.
    fn take_free_answer(&mut self, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match ended {
            Ended::Ok(r) => self.taken(match r {
                Reply::Token(t) => t,
                _ => 0,
            }),
            Ended::Refused { current: Some(cur), .. } => self.take_refused(cur, env, here),
            // An earlier attempt of this request may be what the condition met.
            Ended::Refused {
                current: None,
                ambiguous: true,
            } => self.settle_take(None, env),
            Ended::Refused { current: None, .. } => self.round(env, here),
            Ended::Failed { error, ambiguous: true } => self.settle_take(Some(error), env),
            Ended::Failed { error, .. } => self.over(Outcome::Failed(error)),
        }
    }

    /// Reads the head after the uncontended take's refusal (`failure` `None`) or failure, when
    /// an attempt of the take may have landed.
    fn settle_take(&mut self, failure: Option<E>, env: &Env) -> A<R, E> {
        self.phase = Phase::TakeFreeSettle(failure);
        let req = Request::Get {
            resource: 0,
            position: None,
        };
        self.send(req, self.settle, env)
    }

    /// The head read back after the uncontended take's refusal (`failure` `None`) or failure:
    /// an item that carries our `guid` is ours.
    fn take_settle_answer(
        &mut self,
        failure: Option<E>,
        ended: Ended<R, E>,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> A<R, E> {
        let item = match ended {
            Ended::Ok(Reply::Before(i)) => Some(i),
            _ => None,
        };
        match (failure, item) {
            (None, Some(cur)) => self.take_refused(cur, env, here),
            (None, None) => self.round(env, here),
            (Some(error), Some(Some(h))) => match self.take_guid.as_ref().is_some_and(|g| self.holds(&h, g)) {
                true => self.landed(&h, env),
                false => self.over(Outcome::Failed(error)),
            },
            (Some(error), _) => self.over(Outcome::Failed(error)),
        }
    }

    /// The answer to the ticket: the first resource is queued with it.
    fn ticket_answer(&mut self, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match ended {
            Ended::Ok(r) => {
                let before = match r {
                    Reply::Before(i) => i,
                    _ => None,
                };
                self.ticket = Some(op::last_ticket(before.as_ref()) + 1);
                self.queue(before, env, here)
            }
            // The ticket's condition is that one can rise: the head is refused.
            Ended::Refused {
                current: Some(Some(h)), ..
            } if h.head_corrupt() || !h.ticket_can_rise() => {
                let o = self.corrupt(0, &h);
                self.stop(Stop::End(o), env, here)
            }
            Ended::Refused { current: Some(_), .. } => self.stop(Stop::End(Outcome::NotAcquired), env, here),
            Ended::Refused { current: None, .. } => {
                self.phase = Phase::TicketRead;
                let req = Request::Get {
                    resource: 0,
                    position: None,
                };
                self.send(req, self.policy(), env)
            }
            Ended::Failed { error, .. } => self.stop(Stop::End(Outcome::Failed(error)), env, here),
        }
    }

    /// The answer to the ticket's reservation on the next resource: queued, or refused by a
    /// higher ticket (the head is read for it when the refusal did not carry it).
    fn reserve_answer(&mut self, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match ended {
            Ended::Ok(r) => {
                let before = match r {
                    Reply::Before(i) => i,
                    _ => None,
                };
                self.queue(before, env, here)
            }
            Ended::Refused { current: Some(cur), .. } => self.reserve_refused(cur, env, here),
            Ended::Refused { current: None, .. } => {
                self.phase = Phase::ReserveRead;
                let resource = self.queued.len();
                self.send(
                    Request::Get {
                        resource,
                        position: None,
                    },
                    self.policy(),
                    env,
                )
            }
            Ended::Failed { error, .. } => self.stop(Stop::End(Outcome::Failed(error)), env, here),
        }
    }

    /// The answer to moving waiter `t`'s entry TTL on; then the entries after it, and the
    /// waiters wait until `until` at the latest.
    fn touch_answer(&mut self, t: usize, until: Time, ended: Ended<R, E>, env: &Env) -> A<R, E> {
        let q = &mut self.queued[t];
        q.touch_at = match ended {
            // Refused: the entry was finished by others, which its heartbeat reports.
            Ended::Ok(_) | Ended::Refused { .. } => env.now + ENTRY_TTL_MARGIN / 2,
            Ended::Failed { .. } => env.now + self.s.later_waiter_reread,
        };
        let until = until.min(q.touch_at);
        self.touch_from(t + 1, until, env)
    }

    fn on_resume(&mut self, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::TakeFreeHeld | Phase::Cleanup => self.settle_held(env, here),
            Phase::Joined => self.enter_next(env),
            Phase::RunArm => {
                if env.cancelled {
                    return self.stop(Stop::End(Outcome::Aborted), env, here);
                }
                self.run_from(0, env, here)
            }
            Phase::Run(k) => {
                // The grant's `Hold` was carried out.
                self.queued[k].phase = QPhase::Idle;
                self.run_from(k + 1, env, here)
            }
            Phase::Write(w, until) => {
                self.wait = until;
                self.write_from(w + 1, env, here)
            }
            Phase::RunWait => {
                if env.cancelled {
                    return self.stop(Stop::End(Outcome::Aborted), env, here);
                }
                self.phase = Phase::RunArm;
                Act::Arm
            }
            Phase::GiveUp(i, after) => {
                // A held lock released, or the registry told: this resource is given up.
                self.queued[i].phase = QPhase::Idle;
                self.give_up_next(i + 1, after, env, here)
            }
            Phase::Release(r, outcome) => self.release_from(r + 1, outcome),
            _ => unreachable!("a resume the machine did not ask for"),
        }
    }

    /// Every resource is held: unless the acquisition was cancelled meanwhile, or a grant was
    /// answered only after its whole lease (the next in line may already have passed it by).
    fn settle_held(&mut self, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if env.cancelled {
            return self.release_from(0, Outcome::Aborted);
        }
        let late = (0..self.resources).any(|r| here.held_until(r).is_some_and(|at| at <= env.now));
        if late {
            return self.release_from(0, Outcome::Lost);
        }
        self.over(Outcome::Granted)
    }

    fn release_from(&mut self, resource: usize, outcome: Outcome<E>) -> A<R, E> {
        if resource >= self.resources {
            return self.over(outcome);
        }
        self.phase = Phase::Release(resource, outcome);
        Act::ReleaseHeld { resource }
    }

    // Waiting: every waiter steps in order until one has to wait.

    fn run_res(&mut self, k: usize, res: QOut<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        match res {
            Ok(QRes::Act(a)) => {
                self.phase = Phase::Run(k);
                a
            }
            Ok(QRes::Step(QStep::Wait(at))) => self.run_waiting(at, env, here),
            Err(stop) => self.stop(stop, env, here),
        }
    }

    fn run_from(&mut self, k: usize, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        let Some(k) = (k..self.queued.len()).find(|&k| !self.queued[k].granted) else {
            return self.finish();
        };
        let res = self.q_step(k, env, here);
        self.run_res(k, res, env, here)
    }

    /// A waiter waits until `at`: the entries are written, their TTLs moved on, then the
    /// acquisition waits.
    fn run_waiting(&mut self, at: Time, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if self.deadline.is_some_and(|d| env.now >= d) {
            return self.stop(Stop::End(Outcome::NotAcquired), env, here);
        }
        self.wait = at;
        self.write_error = None;
        self.write_from(0, env, here)
    }

    /// Writes the entries not written yet, from waiter `w` on.
    fn write_from(&mut self, w: usize, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        if let Some(w) = (w..self.queued.len()).find(|&w| !self.queued[w].entry && !self.queued[w].granted) {
            let guid = here.guid();
            let q = &mut self.queued[w];
            q.entry_guid = Some(guid.clone());
            q.phase = QPhase::WriteEntry { guid_sent: env.now };
            let req = Request::PutEntry {
                resource: q.resource,
                position: q.position,
                guid,
                ticket: q.ticket,
                finished: false,
                permits: self.sem.map(|s| s.permits),
            };
            self.phase = Phase::Write(w, self.wait);
            return self.send(req, self.policy(), env);
        }
        if let Some(e) = self.write_error.take() {
            return self.stop(e, env, here);
        }
        let until = self.wait;
        self.touch_from(0, until, env)
    }

    fn write_answer(&mut self, w: usize, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        let q = &mut self.queued[w];
        let (QPhase::WriteEntry { guid_sent } | QPhase::WriteEntrySettle { guid_sent }) = q.phase else {
            unreachable!("an entry write answer in {:?}", q.phase);
        };
        let settling = matches!(q.phase, QPhase::WriteEntrySettle { .. });
        let guid = q.entry_guid.clone();
        let carries = |cur: &Option<R>| {
            cur.as_ref()
                .is_some_and(|c| guid.as_ref().is_some_and(|g| c.carries(g)))
        };
        let written = match ended {
            Ended::Ok(Reply::Before(cur)) if settling => carries(&cur),
            Ended::Ok(_) if settling => false,
            Ended::Ok(_) => true,
            Ended::Refused { current: Some(cur), .. } => carries(&cur),
            Ended::Refused {
                current: None,
                ambiguous: true,
            } if !settling => {
                q.phase = QPhase::WriteEntrySettle { guid_sent };
                let req = Request::Get {
                    resource: q.resource,
                    position: Some(q.position),
                };
                self.phase = Phase::Write(w, self.wait);
                return self.send(req, self.policy(), env);
            }
            Ended::Refused { .. } => false,
            Ended::Failed { error, .. } => {
                q.phase = QPhase::Idle;
                self.write_error.get_or_insert(Stop::End(Outcome::Failed(error)));
                return self.write_from(w + 1, env, here);
            }
        };
        q.phase = QPhase::Idle;
        if !written {
            q.displaced = true;
            self.write_error.get_or_insert(Stop::Dead);
            return self.write_from(w + 1, env, here);
        }
        q.entry = true;
        q.touch_at = env.now + ENTRY_TTL_MARGIN / 2;
        self.phase = Phase::Write(w, self.wait);
        Act::Entry(NewEntry {
            resource: q.resource,
            position: q.position,
            guid: q
                .entry_guid
                .clone()
                .unwrap_or_else(|| unreachable!("an entry without a guid")),
            sent_at: guid_sent,
        })
    }

    /// Moves the entries' TTLs on where due, from waiter `t` on; then waits until `until`.
    fn touch_from(&mut self, t: usize, mut until: Time, env: &Env) -> A<R, E> {
        for t in t..self.queued.len() {
            let q = &self.queued[t];
            if !q.entry {
                until = until.min(env.now + ENTRY_TTL_MARGIN);
                continue;
            }
            if env.now >= q.touch_at {
                let req = Request::TouchEntry {
                    resource: q.resource,
                    position: q.position,
                };
                self.phase = Phase::Touch(t, until);
                return self.send(req, self.policy(), env);
            }
            until = until.min(q.touch_at);
        }
        if let Some(d) = self.deadline {
            until = until.min(d);
        }
        self.phase = Phase::RunWait;
        Act::Wait { until, watch: true }
    }

    /// Every resource is granted: the queue entries go, and the finished ones passed.
    fn finish(&mut self) -> A<R, E> {
        let mut entries = Vec::new();
        let mut passed = Vec::new();
        for q in &mut self.queued {
            if q.entry {
                q.entry = false;
                entries.push(q.resource);
            }
            passed.extend(q.passed.drain(..).map(|p| (q.resource, p)));
        }
        self.phase = Phase::Cleanup;
        Act::Cleanup { entries, passed }
    }

    // One waiter's step: it moves on as far as it can without waiting.

    fn q_step(&mut self, k: usize, env: &Env, here: &mut dyn Here<R::Guid>) -> QOut<R, E> {
        let s = self.s;
        loop {
            let q = &mut self.queued[k];
            if q.entry && here.entry_lost(q.resource) {
                return Err(Stop::Dead);
            }
            let now = env.now;
            if q.cursor > q.granted_position {
                match here.entry(q.resource, q.cursor) {
                    // Alive, as this process is: wait for it to change.
                    Some(Mine::Waiting) => return Ok(QRes::Step(QStep::Wait(now + s.lease()))),
                    Some(Mine::Finished) => {
                        q.pass(q.cursor, now);
                        continue;
                    }
                    Some(Mine::Granted(token)) => {
                        q.granted_position = q.cursor;
                        q.head_token = q.head_token.max(token);
                        q.watch = None;
                        continue;
                    }
                    None => {}
                }
                if now < q.next_read {
                    return Ok(QRes::Step(QStep::Wait(q.next_read)));
                }
                // The closer to the holder, the more often: the waiter whose entry ahead is
                // next in line reads every two `rereadPeriodMs`, the one behind it every three,
                // and so on up to the queue interval, so that each learns its turn is near
                // soon after the grant ahead of it. And the longer the same entry stays ahead,
                // the slower (the pace of `waiting`), so that a long wait costs a few reads a
                // minute.
                let distance = q.cursor.saturating_sub(q.granted_position).min(1 << 16) as u32;
                q.pace.seen(Watched::Entry(q.cursor), now);
                let period = s
                    .reread
                    .saturating_mul(distance + 1)
                    .min(s.later_waiter_reread.max(s.reread))
                    .max(q.pace.pause(&s, true));
                q.phase = QPhase::ReadEntry { now, period };
                let req = Request::Get {
                    resource: q.resource,
                    position: Some(q.cursor),
                };
                return Ok(QRes::Act(self.send(req, self.policy(), env)));
            }
            // Next in line: the holder, if any, has `head_token`.
            if q.head_token >= q.ticket || q.granted_position >= q.position {
                return Err(Stop::Dead);
            }
            let head = match q.fresh_head.take() {
                Some(h) => h,
                None => {
                    let local = match self.sem {
                        // Other holders may be anywhere: the head is read, at once after a
                        // release in this client.
                        Some(_) => {
                            let releases = here.releases(q.resource);
                            if releases != q.releases_seen {
                                q.releases_seen = releases;
                                q.next_read = now;
                            }
                            None
                        }
                        None => here.holder(q.resource, q.head_token),
                    };
                    match local {
                        // Held here: its release wakes this waiter. Looked at again every
                        // lease, without a request, in case the lock was lost.
                        Some(false) => return Ok(QRes::Step(QStep::Wait(now + s.lease()))),
                        // Released here just now: the head is free (once; a refusal is
                        // followed by reads).
                        Some(true) if q.local_release_tried < q.head_token => {
                            q.local_release_tried = q.head_token;
                            return Ok(QRes::Act(self.grant(k, None, Vec::new(), env)));
                        }
                        _ => {}
                    }
                    if now < q.next_read {
                        return Ok(QRes::Step(QStep::Wait(q.next_read)));
                    }
                    q.phase = QPhase::ReadHead { now };
                    let req = Request::Get {
                        resource: q.resource,
                        position: None,
                    };
                    return Ok(QRes::Act(self.send(req, self.policy(), env)));
                }
            };
            return self.q_head(k, head, now, env);
        }
    }

    /// A read while waiting: `None` when it failed for now (the next poll tries again).
    fn read(&self, ended: Ended<R, E>) -> Result<Option<Option<R>>, Stop<E>> {
        match ended {
            Ended::Ok(Reply::Before(i)) => Ok(Some(i)),
            Ended::Failed { error, .. } if !self.transient => Err(Stop::End(Outcome::Failed(error))),
            _ => Ok(None),
        }
    }

    /// Learns from a head item: the last grant, or that this waiter's own grant landed.
    fn observe_head(&mut self, k: usize, head: &Option<R>) -> Result<Option<Res<R, E>>, Stop<E>> {
        let sem = self.sem;
        let mine = head.as_ref().is_some_and(|h| self.holds(h, &self.queued[k].guid));
        let q = &mut self.queued[k];
        if let Some(h) = head.as_ref().filter(|h| h.head_corrupt()) {
            // A grant of ours that landed on it is released on the way out.
            q.maybe_granted |= mine;
            let resource = q.resource;
            return Err(Stop::End(self.corrupt(resource, h)));
        }
        if let Some(o) = head.as_ref().and_then(|h| self.wrong_kind(h)) {
            return Err(Stop::End(o));
        }
        let q = &mut self.queued[k];
        if let Some(h) = head {
            // A semaphore's holder is keyed by the `guid` of this waiter's round alone.
            if mine && (sem.is_some() || (h.fencing_token() == Some(q.ticket) && !op::released(Some(h)))) {
                return Ok(Some(self.granted(k)));
            }
            q.granted_position = q.granted_position.max(h.queue_granted().unwrap_or(0));
            q.head_token = q.head_token.max(h.fencing_token().unwrap_or(0));
        }
        match q.head_token >= q.ticket || q.granted_position >= q.position {
            true => Err(Stop::Dead),
            false => Ok(None),
        }
    }

    fn granted(&mut self, k: usize) -> Res<R, E> {
        let q = &mut self.queued[k];
        q.granted = true;
        q.maybe_granted = false;
        let leave = q.joined.then_some(q.position);
        q.joined = false;
        q.phase = QPhase::Granted;
        QRes::Act(Act::Hold {
            resource: q.resource,
            guid: q.guid.clone(),
            token: q.ticket,
            sent_at: q.grant_sent_at,
            leave,
        })
    }

    /// Next in line, with the head `head` read at `now`: granted if it is free, or once its
    /// holder's version has not changed for the holder's lease.
    fn q_head(&mut self, k: usize, head: Option<R>, now: Time, env: &Env) -> QOut<R, E> {
        if let Some(res) = self.observe_head(k, &head)? {
            return Ok(res);
        }
        let s = self.s;
        if let Some(sem) = self.sem {
            let q = &mut self.queued[k];
            let reclaim = match q.reclaim(head.as_ref(), sem, now, s.lease_duration_ms) {
                Ok(reclaim) => reclaim,
                Err(at) => return Ok(QRes::Step(QStep::Wait(at))),
            };
            if now < q.grant_after {
                q.next_read = q.next_read.max(q.grant_after);
                return Ok(QRes::Step(QStep::Wait(q.grant_after)));
            }
            if reclaim.len() > MAX_RECLAIM {
                // Too many for one grant's condition: one is removed, then the head is read.
                q.phase = QPhase::Reclaim;
                let req = Request::SemReclaim {
                    resource: q.resource,
                    holder: reclaim[0].clone(),
                };
                return Ok(QRes::Act(self.send(req, self.policy(), env)));
            }
            return Ok(QRes::Act(self.grant(k, None, reclaim, env)));
        }
        let q = &mut self.queued[k];
        let waited_out = match &head {
            h if op::free(h.as_ref()) => None,
            Some(h) => {
                let version = h.version();
                let lease = Duration::from_millis(h.lease_duration_ms().unwrap_or(s.lease_duration_ms));
                if let Some(at) = q.waiting_out(Watch::Head(version.clone()), lease, now) {
                    return Ok(QRes::Step(QStep::Wait(at)));
                }
                Some(version)
            }
            None => None,
        };
        if now < q.grant_after {
            // A grant was refused just now, and the head read since would take it again.
            q.next_read = q.next_read.max(q.grant_after);
            return Ok(QRes::Step(QStep::Wait(q.grant_after)));
        }
        Ok(QRes::Act(self.grant(k, waited_out, Vec::new(), env)))
    }

    /// One grant attempt on the head (a semaphore's, reclaiming the holders of `reclaim`).
    fn grant(&mut self, k: usize, waited_out: Option<R::Version>, reclaim: Vec<Holder<R::Guid>>, env: &Env) -> A<R, E> {
        let q = &mut self.queued[k];
        // The lease counts from the first send of a grant that may have landed: a grant sent
        // again (after a timeout, or on a release seen here) finds the head already ours and
        // leaves its version as it was, which waiters may have been waiting out since then.
        if !q.maybe_granted {
            q.grant_sent_at = env.now;
        }
        q.phase = QPhase::Grant;
        let req = match self.sem {
            Some(sem) => Request::SemGrant {
                resource: q.resource,
                guid: q.guid.clone(),
                sem,
                ticket: q.ticket,
                position: q.position,
                reclaim,
            },
            None => Request::Grant {
                resource: q.resource,
                guid: q.guid.clone(),
                ticket: q.ticket,
                position: q.position,
                waited_out,
            },
        };
        self.send(req, self.policy(), env)
    }

    /// The answer to waiter `k`'s request.
    fn q_answer(&mut self, k: usize, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> QOut<R, E> {
        match std::mem::replace(&mut self.queued[k].phase, QPhase::Idle) {
            QPhase::ReadEntry { now, period } => {
                let read = self.read(ended)?;
                let q = &mut self.queued[k];
                q.next_read = now + period;
                match read {
                    Some(entry) => self.q_entry(k, entry, now, env, here),
                    None => Ok(QRes::Step(QStep::Wait(q.next_read))),
                }
            }
            QPhase::FinishEntry { now } => {
                // No entry is left to finish: passed as well.
                let gone = matches!(
                    ended,
                    Ended::Refused {
                        current: Some(None),
                        ..
                    }
                );
                self.q_pass_answer(k, ended, gone, now, env, here)
            }
            QPhase::ReadHeadMissing { now } => self.q_missing(k, ended, now, env, here),
            QPhase::PutMarker { now } => self.q_pass_answer(k, ended, false, now, env, here),
            QPhase::ReadHead { now } => self.q_head_read(k, ended, now, env),
            QPhase::Grant => self.q_grant_answer(k, ended, env, here),
            QPhase::Reclaim => {
                let q = &mut self.queued[k];
                match ended {
                    Ended::Failed { error, .. } if !self.transient => return Err(Stop::End(Outcome::Failed(error))),
                    Ended::Refused { current: Some(h), .. } => q.fresh_head = Some(h),
                    _ => q.next_read = env.now,
                }
                self.q_step(k, env, here)
            }
            phase => unreachable!("a waiter's answer in {phase:?}"),
        }
    }

    /// The entry ahead, read at `now` (`None`: there is none): passed if it is finished,
    /// finished if its `guid` has not changed for its lease, looked up on the head if missing.
    fn q_entry(
        &mut self,
        k: usize,
        entry: Option<R>,
        now: Time,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> QOut<R, E> {
        let skip = self.sem.is_some() && broken::on(Broken::SemGrantIgnoresEarlier);
        let q = &mut self.queued[k];
        let e = match entry {
            Some(e) if op::released(Some(&e)) || skip => {
                q.pass(q.cursor, env.now);
                return self.q_step(k, env, here);
            }
            Some(e) => e,
            None => {
                // Granted and removed, or not written yet: the head says which.
                q.phase = QPhase::ReadHeadMissing { now };
                let req = Request::Get {
                    resource: q.resource,
                    position: None,
                };
                return Ok(QRes::Act(self.send(req, self.policy(), env)));
            }
        };
        let guid = e.guid();
        let lease = Duration::from_millis(e.lease_duration_ms().unwrap_or(self.s.lease_duration_ms));
        if let Some(at) = q.waiting_out(Watch::Entry(guid.clone()), lease, now) {
            return Ok(QRes::Step(QStep::Wait(at)));
        }
        // Not renewed for its lease: its owner is gone. Finished, for every waiter behind; a
        // new guid tells the owner, should it come back.
        let Some(seen) = guid else {
            q.pass(q.cursor, env.now);
            return self.q_step(k, env, here);
        };
        let new_guid = here.guid();
        let q = &mut self.queued[k];
        q.phase = QPhase::FinishEntry { now };
        let req = Request::FinishEntry {
            resource: q.resource,
            position: q.cursor,
            seen,
            new_guid,
        };
        Ok(QRes::Act(self.send(req, self.policy(), env)))
    }

    /// The head, read after the entry ahead was missing at `now`: the entry was granted and
    /// removed if the head's last grant is at or past it. Otherwise, once it has stayed missing
    /// for a lease, its owner died between taking the ticket and writing the entry: a finished
    /// entry takes its place, which also refuses the owner's entry should it come back.
    fn q_missing(
        &mut self,
        k: usize,
        ended: Ended<R, E>,
        now: Time,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> QOut<R, E> {
        let Some(head) = self.read(ended)? else {
            return Ok(QRes::Step(QStep::Wait(self.queued[k].next_read)));
        };
        if let Some(res) = self.observe_head(k, &head)? {
            return Ok(res);
        }
        let lease = self.s.lease();
        let q = &mut self.queued[k];
        if q.cursor <= q.granted_position {
            q.watch = None;
            q.fresh_head = Some(head);
            return self.q_step(k, env, here);
        }
        if let Some(at) = q.waiting_out(Watch::Missing, lease, now) {
            return Ok(QRes::Step(QStep::Wait(at)));
        }
        let marker = here.guid();
        let q = &mut self.queued[k];
        q.phase = QPhase::PutMarker { now };
        let req = Request::PutEntry {
            resource: q.resource,
            position: q.cursor,
            guid: marker,
            ticket: 0,
            finished: true,
            permits: None,
        };
        Ok(QRes::Act(self.send(req, self.policy(), env)))
    }

    /// The answer to a write that lets waiter `k` pass the entry ahead (finished as dead, or a
    /// finished one in place of a missing one), decided on a read at `now`: the entry is passed
    /// once written (or `gone`); refused, it changed meanwhile and is looked at again; failed,
    /// it is read again at the next poll.
    fn q_pass_answer(
        &mut self,
        k: usize,
        ended: Ended<R, E>,
        gone: bool,
        now: Time,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> QOut<R, E> {
        let q = &mut self.queued[k];
        match ended {
            Ended::Ok(_) => q.pass(q.cursor, env.now),
            Ended::Refused { .. } if gone => q.pass(q.cursor, env.now),
            Ended::Refused { .. } => {
                q.watch = None;
                q.next_read = now;
            }
            Ended::Failed { .. } => return Ok(QRes::Step(QStep::Wait(q.next_read))),
        }
        self.q_step(k, env, here)
    }

    /// The head, read at `now` by the next in line. The head's holder is its token: a
    /// heartbeat keeps the pace of the reads, a grant to another starts it over.
    fn q_head_read(&mut self, k: usize, ended: Ended<R, E>, now: Time, env: &Env) -> QOut<R, E> {
        let read = self.read(ended)?;
        let s = self.s;
        let q = &mut self.queued[k];
        match &read {
            Some(Some(h)) => q.pace.seen(Watched::Head(h.fencing_token().unwrap_or(0)), now),
            _ => q.pace.reading(now),
        }
        q.next_read = now + q.pace.pause(&s, true);
        let Some(head) = read else {
            return Ok(QRes::Step(QStep::Wait(q.next_read)));
        };
        self.q_head(k, head, now, env)
    }

    /// The answer to waiter `k`'s grant. One that may have landed unseen is remembered, to be
    /// released if the waiter gives up.
    fn q_grant_answer(&mut self, k: usize, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> QOut<R, E> {
        let s = self.s;
        let transient = self.transient;
        let q = &mut self.queued[k];
        match ended {
            Ended::Ok(_) => return Ok(self.granted(k)),
            Ended::Refused { current, ambiguous } => {
                q.maybe_granted |= ambiguous;
                q.grant_after = env.now + s.reread;
                match current {
                    Some(h) => q.fresh_head = Some(h),
                    None => q.next_read = env.now,
                }
                q.watch = None;
            }
            Ended::Failed { error, ambiguous } => {
                q.maybe_granted |= ambiguous;
                if !transient {
                    return Err(Stop::End(Outcome::Failed(error)));
                }
                // Tried through transient faults already: the next poll tries again, and a
                // grant that landed unseen shows on the head.
                q.next_read = env.now + s.reread;
                return Ok(QRes::Step(QStep::Wait(q.next_read)));
            }
        }
        self.q_step(k, env, here)
    }

    // Giving up: granted heads are released, entries removed or finished, tickets given back.

    fn stop(&mut self, stop: Stop<E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        let after = match stop {
            Stop::Dead => After::Dead,
            Stop::End(o) => After::End(o),
        };
        self.give_up_all(after, env, here)
    }

    fn give_up_all(&mut self, after: After<E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        for q in &mut self.queued {
            q.phase = QPhase::Idle;
        }
        self.give_up_next(0, after, env, here)
    }

    fn give_up_next(&mut self, from: usize, after: After<E>, env: &Env, here: &mut dyn Here<R::Guid>) -> A<R, E> {
        for i in from..self.queued.len() {
            if let Some(a) = self.gu_begin(i, env) {
                self.phase = Phase::GiveUp(i, after);
                return a;
            }
        }
        self.queued.clear();
        match after {
            After::Reenter(ticket) => {
                self.ticket = Some(ticket);
                self.enter_round(env, here)
            }
            After::Dead if self.deadline.is_some_and(|d| env.now >= d) => self.over(Outcome::NotAcquired),
            After::Dead => self.round(env, here),
            After::End(o) => self.over(o),
        }
    }

    fn gu_then(
        &mut self,
        i: usize,
        next: Option<A<R, E>>,
        after: After<E>,
        env: &Env,
        here: &mut dyn Here<R::Guid>,
    ) -> A<R, E> {
        match next {
            Some(a) => {
                self.phase = Phase::GiveUp(i, after);
                a
            }
            None => self.give_up_next(i + 1, after, env, here),
        }
    }

    /// Starts giving up waiter `i`; `None` when there is nothing to do.
    fn gu_begin(&mut self, i: usize, env: &Env) -> Option<A<R, E>> {
        let q = &mut self.queued[i];
        if q.granted {
            q.granted = false;
            q.phase = QPhase::GiveUpHeld;
            return Some(Act::ReleaseHeld { resource: q.resource });
        }
        if q.maybe_granted && !broken::on(Broken::FifoGiveUpKeepsGrant) {
            // A grant that may have landed unseen is released if it did.
            q.phase = QPhase::GiveUpMaybeGranted;
            let req = match self.sem {
                Some(sem) => Request::SemRelease {
                    resource: q.resource,
                    key: q.guid.clone(),
                    permits: sem.permits,
                },
                None => Request::ReleaseHead {
                    resource: q.resource,
                    guid: q.guid.clone(),
                },
            };
            return Some(self.send(req, self.s.policy(self.s.release_attempts()), env));
        }
        self.gu_entry(i, env)
    }

    /// Whether the position is settled already: another entry is there (a finished one
    /// written by waiters behind), or ours could not be removed and is left to expire. A
    /// position given back while an entry is there would refuse the next waiter's entry.
    fn gu_entry(&mut self, i: usize, env: &Env) -> Option<A<R, E>> {
        let q = &mut self.queued[i];
        q.settled = q.displaced;
        if q.entry {
            q.entry = false;
            q.phase = QPhase::GiveUpStop;
            return Some(Act::StopEntry { resource: q.resource });
        }
        self.gu_untake(i, env)
    }

    fn gu_untake(&mut self, i: usize, env: &Env) -> Option<A<R, E>> {
        let q = &mut self.queued[i];
        if !q.settled {
            q.phase = QPhase::GiveUpUntake;
            let req = Request::Untake {
                resource: q.resource,
                ticket: q.ticket,
                position: q.position,
                previous: q.previous_ticket,
            };
            return Some(self.send(req, self.policy(), env));
        }
        self.gu_leave(i)
    }

    fn gu_leave(&mut self, i: usize) -> Option<A<R, E>> {
        let q = &mut self.queued[i];
        if q.joined {
            q.joined = false;
            q.phase = QPhase::GiveUpLeave;
            return Some(Act::Leave {
                resource: q.resource,
                position: q.position,
                mine: Some(Mine::Finished),
            });
        }
        q.phase = QPhase::Idle;
        None
    }

    fn gu_answer(&mut self, i: usize, ended: Ended<R, E>, env: &Env, here: &mut dyn Here<R::Guid>) -> Option<A<R, E>> {
        let phase = std::mem::replace(&mut self.queued[i].phase, QPhase::Idle);
        match phase {
            QPhase::GiveUpMaybeGranted => self.gu_entry(i, env),
            QPhase::GiveUpDelete => {
                self.queued[i].settled = !matches!(ended, Ended::Ok(_));
                self.gu_untake(i, env)
            }
            QPhase::GiveUpUntake => {
                if matches!(ended, Ended::Ok(_)) {
                    return self.gu_leave(i);
                }
                let guid = here.guid();
                let q = &mut self.queued[i];
                q.phase = QPhase::GiveUpMarker;
                let req = Request::PutEntry {
                    resource: q.resource,
                    position: q.position,
                    guid,
                    ticket: q.ticket,
                    finished: true,
                    permits: None,
                };
                Some(self.send(req, self.policy(), env))
            }
            QPhase::GiveUpMarker => self.gu_leave(i),
            phase => unreachable!("a give-up answer in {phase:?}"),
        }
    }
}

impl<R: Record> Queued<R> {
    /// Passes the finished entry at `position`: the one before it is looked at next.
    fn pass(&mut self, position: u64, now: Time) {
        self.passed.push(position);
        self.cursor = position - 1;
        self.watch = None;
        self.next_read = now;
    }

    /// A semaphore's next in line, with the head `head` read at `now`: the holders to reclaim
    /// so that `sem.permits` fit (those whose `guid` has not changed for their lease on this
    /// waiter's clock; none when the permits fit as they are), or when to read the head next.
    fn reclaim(&mut self, head: Option<&R>, sem: Sem, now: Time, lease_ms: u64) -> Result<Vec<Holder<R::Guid>>, Time> {
        let holders = head.map_or_else(Vec::new, |h| h.holders());
        // A holder seen with the same `guid` keeps its time; any other starts its count.
        let seen = std::mem::take(&mut self.holders_seen);
        self.holders_seen = holders
            .into_iter()
            .map(|h| {
                let since = seen.iter().find(|(o, _)| *o == h).map_or(now, |(_, t)| *t);
                (h, since)
            })
            .collect();
        if op::permits_fit(head, sem.limit, sem.permits, &[]) {
            return Ok(Vec::new());
        }
        let lease = |h: &Holder<R::Guid>| {
            Duration::from_millis(match h.lease_duration_ms {
                0 => lease_ms,
                ms => ms,
            })
        };
        let stale: Vec<Holder<R::Guid>> = self
            .holders_seen
            .iter()
            .filter(|(h, since)| now.saturating_sub(*since) >= lease(h))
            .map(|(h, _)| h.clone())
            .collect();
        if !stale.is_empty() && op::permits_fit(head, sem.limit, sem.permits, &stale) {
            return Ok(stale);
        }
        // The next read is due when the next holder's lease has passed unrenewed, at the
        // latest, whatever the pace.
        if let Some(at) = self
            .holders_seen
            .iter()
            .map(|(h, since)| *since + lease(h))
            .filter(|at| *at > now)
            .min()
        {
            self.next_read = self.next_read.min(at);
        }
        Err(self.next_read)
    }

    /// Waits out what this waiter watches, `seen` as read at `now`: while it has not stayed the
    /// same for `lease` on this waiter's clock (a change starts the count over), when to read
    /// it next; `None` once it has.
    fn waiting_out(&mut self, seen: Watch<R::Guid, R::Version>, lease: Duration, now: Time) -> Option<Time>
    where
        R::Guid: PartialEq,
    {
        let since = match &self.watch {
            Some((watched, since)) if *watched == seen => *since,
            _ => {
                self.watch = Some((seen, now));
                return Some(self.next_read);
            }
        };
        if now.saturating_sub(since) < lease {
            // The next read is due at the deadline at the latest, whatever the pace.
            self.next_read = self.next_read.min(since + lease);
            return Some(self.next_read);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{Guid, LockRecord, QueueCounters};
    use crate::settings::Kind;

    type M = Acquire<LockRecord, &'static str>;
    type Out = Act<Guid, crate::item::Version, &'static str>;

    const LEASE: u64 = 1000;

    fn lock() -> Lock {
        Lock {
            kind: Kind::Fifo,
            retry_count: 1,
            acquire_period: Duration::ZERO,
            lease_duration_ms: LEASE,
            trust_local_time: false,
            heartbeat_period: Duration::ZERO,
            reread: crate::settings::reread(LEASE),
            later_waiter_reread: crate::settings::later_waiter_reread(LEASE, crate::settings::reread(LEASE)),
            request_timeout: Duration::from_millis(250),
            max_attempts: 4,
            base_backoff: crate::settings::RETRY_BASE_BACKOFF,
            max_backoff: crate::settings::RETRY_MAX_BACKOFF,
            danger_margin: crate::settings::DANGER_MARGIN,
        }
    }

    fn at(ms: u64) -> Env {
        Env {
            now: Duration::from_millis(ms),
            unix_ms: 1_000_000 + ms,
            cancelled: false,
            random: 0,
        }
    }

    /// A client with nothing of its own in the queues (but for a head it `released`).
    #[derive(Default)]
    struct Alone {
        guids: u8,
        held_until: Option<Time>,
        released: Option<u64>,
    }

    impl Here<Guid> for Alone {
        fn guid(&mut self) -> Guid {
            self.guids += 1;
            [self.guids; 64]
        }
        fn busy(&self, _: usize) -> bool {
            false
        }
        fn entry(&self, _: usize, _: u64) -> Option<Mine> {
            None
        }
        fn holder(&self, _: usize, token: u64) -> Option<bool> {
            (self.released == Some(token)).then_some(true)
        }
        fn entry_lost(&self, _: usize) -> bool {
            false
        }
        fn held_until(&self, _: usize) -> Option<Time> {
            self.held_until
        }
    }

    fn held_head(token: u64, guid: u8) -> LockRecord {
        LockRecord {
            owner: Some("other".into()),
            guid: Some(crate::item::GuidValue::B(vec![guid; 64])),
            fencing_token: Some(token),
            lease_duration_ms: Some(LEASE),
            queue: Some(Box::new(QueueCounters {
                ticket_next: Some(token),
                queue_next: Some(0),
                queue_granted: Some(0),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn item(r: Option<LockRecord>) -> Input<LockRecord, &'static str> {
        Input::Answer(Answer::Done(Reply::Before(r)))
    }

    fn done() -> Input<LockRecord, &'static str> {
        Input::Answer(Answer::Done(Reply::Done))
    }

    fn sent(a: &Out) -> Request<Guid, crate::item::Version> {
        match a {
            Act::Send { req, .. } => req.clone(),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    /// Steps through an uncontended take refused by `head`, the ticket, the join and the first
    /// look at the head: the waiter is queued first in line at `t` ms.
    fn queued_behind(head: &LockRecord, wait: Option<Duration>, here: &mut Alone) -> (M, Out) {
        let (mut m, a) = M::start(lock(), 1, wait, &at(0), here);
        assert!(matches!(sent(&a), Request::TakeFree { resource: 0, .. }));
        let a = m.step(Input::Answer(Answer::Refused(Some(Some(head.clone())))), &at(1), here);
        assert_eq!(sent(&a), Request::Ticket { resource: 0 });
        let a = m.step(item(Some(head.clone())), &at(2), here);
        assert_eq!(
            a,
            Act::Join {
                resource: 0,
                position: 1
            }
        );
        assert_eq!(m.step(Input::Resume, &at(2), here), Act::Arm);
        // Next in line at once (no entry ahead): the head as the ticket found it starts the
        // wait-out; the entry is written before the waiter waits.
        let a = m.step(Input::Resume, &at(2), here);
        let Request::PutEntry {
            position: 1,
            ticket,
            finished: false,
            ..
        } = sent(&a)
        else {
            panic!("{a:?}")
        };
        assert_eq!(ticket, head.fencing_token.unwrap() + 1);
        let a = m.step(done(), &at(3), here);
        assert!(matches!(a, Act::Entry(e) if e.position == 1 && e.sent_at == Duration::from_millis(2)));
        let a = m.step(Input::Resume, &at(3), here);
        (m, a)
    }

    /// A semaphore's head of `limit` permits with holders (key, guid, permits) of a lease of
    /// `LEASE`, the last ticket `token` granted.
    fn sem_head(limit: u64, token: u64, holders: &[(u8, u8, u64)]) -> LockRecord {
        LockRecord {
            fencing_token: Some(token),
            queue: Some(Box::new(QueueCounters {
                ticket_next: Some(token),
                queue_next: Some(0),
                queue_granted: Some(0),
                permits: Some(limit),
                permits_held: Some(holders.iter().map(|h| h.2).sum()),
                holders: holders
                    .iter()
                    .map(|&(k, g, p)| crate::item::SemHolder {
                        key: [k; 64],
                        guid: [g; 64],
                        permits: p,
                        lease_duration_ms: LEASE,
                        written_unix_ms: None,
                        owner: "other".into(),
                    })
                    .collect(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn sem(limit: u64, permits: u64) -> Sem {
        Sem { limit, permits }
    }

    #[test]
    fn resources_queue_in_one_order_everywhere_once_each_and_entries_outlive_their_lease() {
        use crate::item::KeyValue::{B, N, S};
        let mut r = vec![B(vec![1]), N("2".into()), S("b".into()), S("a".into()), N("2".into())];
        queue_order(&mut r);
        assert_eq!(r, vec![S("a".into()), S("b".into()), N("2".into()), B(vec![1])]);
        // A 1.5 s lease counts as 2 s; the hour's margin after it.
        let mut s = crate::testing::lock(crate::settings::Kind::Fifo);
        s.lease_duration_ms = 1500;
        assert_eq!(entry_ttl(&s, 10_999), 10 + 2 + 3600);
        let head = crate::item::head_key(&S("r".into()));
        assert_eq!(head.sort, Some(S("lock".into())));
        assert_eq!(
            crate::item::entry_key(&S("r".into()), 7).sort,
            Some(S(format!("q#{:020}", 7)))
        );
    }

    #[test]
    fn a_semaphores_uncontended_acquisition_is_one_request() {
        let mut here = Alone::default();
        let (mut m, a) = M::start_sem(lock(), sem(3, 2), None, &at(0), &mut here);
        assert_eq!(
            sent(&a),
            Request::SemTake {
                resource: 0,
                guid: [1; 64],
                sem: sem(3, 2)
            }
        );
        let a = m.step(Input::Answer(Answer::Done(Reply::Token(4))), &at(5), &mut here);
        assert!(matches!(a, Act::Hold { token: 4, .. }), "{a:?}");
        here.held_until = Some(Duration::from_millis(LEASE));
        assert_eq!(m.step(Input::Resume, &at(5), &mut here), Act::Done(Outcome::Granted));
    }

    #[test]
    fn a_semaphore_refuses_a_head_that_counts_other_permits_or_is_a_fifo_lock() {
        let mut here = Alone::default();
        let (mut m, _) = M::start_sem(lock(), sem(3, 1), None, &at(0), &mut here);
        let a = m.step(
            Input::Answer(Answer::Refused(Some(Some(sem_head(5, 2, &[(7, 7, 5)]))))),
            &at(1),
            &mut here,
        );
        assert_eq!(a, Act::Done(Outcome::WrongKind { permits: Some(5) }));
        let (mut m, _) = M::start_sem(lock(), sem(3, 1), None, &at(0), &mut here);
        let a = m.step(
            Input::Answer(Answer::Refused(Some(Some(held_head(3, 9))))),
            &at(1),
            &mut here,
        );
        assert_eq!(a, Act::Done(Outcome::WrongKind { permits: None }));
    }

    /// Two permits of three held by a holder that never renews: a request for two waits it out
    /// for its lease on the waiter's clock, then is granted reclaiming it in the same write;
    /// a request for one is granted at once.
    #[test]
    fn a_semaphore_waiter_reclaims_a_silent_holder_after_its_lease() {
        let mut here = Alone::default();
        let head = sem_head(3, 1, &[(9, 9, 2)]);
        let (mut m, _) = M::start_sem(lock(), sem(3, 1), None, &at(0), &mut here);
        // One permit is free: the take's refusal is for another reason (a ticket out), and
        // the queue's first look at the head grants it with nothing to reclaim.
        let a = m.step(
            Input::Answer(Answer::Refused(Some(Some(head.clone())))),
            &at(1),
            &mut here,
        );
        assert_eq!(sent(&a), Request::Ticket { resource: 0 });
        m.step(item(Some(head.clone())), &at(2), &mut here);
        m.step(Input::Resume, &at(2), &mut here);
        // Granted on the head the ticket found, before any entry is written.
        let a = m.step(Input::Resume, &at(2), &mut here);
        let Request::SemGrant { reclaim, ticket: 2, .. } = sent(&a) else {
            panic!("{a:?}")
        };
        assert!(reclaim.is_empty());

        let mut here = Alone::default();
        let (mut m, _) = M::start_sem(lock(), sem(3, 2), None, &at(0), &mut here);
        m.step(
            Input::Answer(Answer::Refused(Some(Some(head.clone())))),
            &at(1),
            &mut here,
        );
        m.step(item(Some(head.clone())), &at(2), &mut here);
        m.step(Input::Resume, &at(2), &mut here);
        let a = m.step(Input::Resume, &at(2), &mut here);
        assert!(matches!(sent(&a), Request::PutEntry { .. }));
        m.step(done(), &at(3), &mut here);
        let mut now = 3;
        let reclaim = loop {
            let a = m.step(Input::Resume, &at(now), &mut here);
            match a {
                Act::Wait { until, .. } => {
                    assert!(until <= Duration::from_millis(2 + LEASE), "{until:?}");
                    now = until.as_millis() as u64;
                    assert_eq!(m.step(Input::Resume, &at(now), &mut here), Act::Arm);
                    continue;
                }
                Act::Send {
                    req: Request::Get { position: None, .. },
                    ..
                } => {
                    let a = m.step(item(Some(head.clone())), &at(now), &mut here);
                    match a {
                        Act::Send {
                            req: Request::SemGrant { reclaim, .. },
                            ..
                        } => break reclaim,
                        Act::Wait { until, .. } => {
                            now = until.as_millis() as u64;
                            assert_eq!(m.step(Input::Resume, &at(now), &mut here), Act::Arm);
                        }
                        other => panic!("{other:?}"),
                    }
                }
                Act::Send {
                    req: Request::SemGrant { reclaim, .. },
                    ..
                } => break reclaim,
                other => panic!("{other:?}"),
            }
        };
        // Seen first at 2 ms: not reclaimed before a whole lease from then.
        assert!(now >= 2 + LEASE, "reclaimed at {now} ms");
        assert_eq!(
            reclaim,
            vec![Holder {
                key: [9; 64],
                guid: [9; 64],
                permits: 2,
                lease_duration_ms: LEASE
            }]
        );
    }

    #[test]
    fn an_uncontended_acquisition_is_one_request() {
        let mut here = Alone::default();
        let (mut m, a) = M::start(lock(), 1, None, &at(0), &mut here);
        assert!(matches!(sent(&a), Request::TakeFree { resource: 0, guid } if guid == [1; 64]));
        let a = m.step(Input::Answer(Answer::Done(Reply::Token(7))), &at(5), &mut here);
        assert_eq!(
            a,
            Act::Hold {
                resource: 0,
                guid: [1; 64],
                token: 7,
                sent_at: Duration::ZERO,
                leave: None
            }
        );
        here.held_until = Some(Duration::from_millis(LEASE));
        assert_eq!(m.step(Input::Resume, &at(5), &mut here), Act::Done(Outcome::Granted));
        assert!(m.is_over());
    }

    #[test]
    fn a_take_answered_after_its_lease_is_released_and_lost() {
        let mut here = Alone::default();
        let (mut m, _) = M::start(lock(), 1, None, &at(0), &mut here);
        m.step(Input::Answer(Answer::Done(Reply::Token(1))), &at(1500), &mut here);
        here.held_until = Some(Duration::from_millis(LEASE));
        assert_eq!(
            m.step(Input::Resume, &at(1500), &mut here),
            Act::ReleaseHeld { resource: 0 }
        );
        assert_eq!(m.step(Input::Resume, &at(1501), &mut here), Act::Done(Outcome::Lost));
    }

    #[test]
    fn wait_zero_fails_on_the_refusal_that_shows_a_holder() {
        let mut here = Alone::default();
        let (mut m, _) = M::start(lock(), 1, Some(Duration::ZERO), &at(0), &mut here);
        let a = m.step(
            Input::Answer(Answer::Refused(Some(Some(held_head(3, 9))))),
            &at(1),
            &mut here,
        );
        assert_eq!(a, Act::Done(Outcome::NotAcquired));
    }

    #[test]
    fn a_dead_holder_is_waited_out_for_its_lease_on_the_waiters_clock() {
        let mut here = Alone::default();
        let head = held_head(4, 9);
        let (mut m, a) = queued_behind(&head, None, &mut here);
        // Waits; every re-read that finds the same version keeps the wait from when it was
        // first seen (at 2 ms).
        assert_eq!(
            a,
            Act::Wait {
                until: Duration::from_millis(2),
                watch: true
            }
        );
        let mut now = 2;
        let mut reads = 0;
        let waited_out = loop {
            assert_eq!(m.step(Input::Resume, &at(now), &mut here), Act::Arm);
            let a = m.step(Input::Resume, &at(now), &mut here);
            match sent(&a) {
                Request::Get { position: None, .. } => reads += 1,
                Request::Grant {
                    ticket: 5,
                    position: 1,
                    waited_out,
                    ..
                } => break waited_out,
                other => panic!("{other:?}"),
            }
            let a = m.step(item(Some(head.clone())), &at(now), &mut here);
            let (Act::Wait { until, watch: true } | Act::Send { timeout_at: until, .. }) = a else {
                panic!("{a:?}")
            };
            if let Act::Send { req, .. } = &a {
                assert!(matches!(req, Request::Grant { .. }), "{req:?}");
                break match req {
                    Request::Grant { waited_out, .. } => waited_out.clone(),
                    _ => unreachable!(),
                };
            }
            assert!(until <= Duration::from_millis(2 + LEASE));
            now = until.as_millis() as u64;
        };
        assert_eq!(waited_out, Some(head.version()));
        assert!(now >= 2 + LEASE, "the grant went out at {now} ms");
        assert!(reads >= 10, "re-read at the re-read period: {reads}");
        let a = m.step(done(), &at(now + 1), &mut here);
        assert!(matches!(
            a,
            Act::Hold {
                token: 5,
                leave: Some(1),
                ..
            }
        ));
        let a = m.step(Input::Resume, &at(now + 1), &mut here);
        assert_eq!(
            a,
            Act::Cleanup {
                entries: vec![0],
                passed: vec![]
            }
        );
        assert_eq!(
            m.step(Input::Resume, &at(now + 1), &mut here),
            Act::Done(Outcome::Granted)
        );
    }

    #[test]
    fn a_finite_wait_removes_the_entry_and_gives_the_ticket_back() {
        let mut here = Alone::default();
        let head = held_head(4, 9);
        let (mut m, a) = queued_behind(&head, Some(Duration::from_millis(300)), &mut here);
        assert!(matches!(a, Act::Wait { watch: true, .. }));
        let mut now = 2;
        let a = loop {
            let a = m.step(Input::Resume, &at(now), &mut here);
            match a {
                Act::Arm => continue,
                Act::Send {
                    req: Request::Get { .. },
                    ..
                } => {
                    let a = m.step(item(Some(head.clone())), &at(now), &mut here);
                    match a {
                        Act::Wait { until, .. } => now = until.as_millis() as u64,
                        a => break a,
                    }
                }
                a => break a,
            }
        };
        assert!(now >= 300, "{now}");
        assert_eq!(a, Act::StopEntry { resource: 0 });
        let a = m.step(Input::Guids(vec![[3; 64]]), &at(now), &mut here);
        assert_eq!(
            sent(&a),
            Request::DeleteEntry {
                resource: 0,
                position: 1,
                guids: vec![[3; 64]]
            }
        );
        let a = m.step(
            Input::Answer(Answer::Done(Reply::WaitingMark(None))),
            &at(now),
            &mut here,
        );
        assert_eq!(
            sent(&a),
            Request::Untake {
                resource: 0,
                ticket: 5,
                position: 1,
                previous: 4
            }
        );
        let a = m.step(done(), &at(now), &mut here);
        assert_eq!(
            a,
            Act::Leave {
                resource: 0,
                position: 1,
                mine: Some(Mine::Finished)
            }
        );
        assert_eq!(
            m.step(Input::Resume, &at(now), &mut here),
            Act::Done(Outcome::NotAcquired)
        );
    }

    #[test]
    fn an_entry_ahead_unchanged_for_its_lease_is_marked_finished_and_passed() {
        let mut here = Alone::default();
        let mut head = held_head(4, 9);
        head.queue.as_mut().unwrap().ticket_next = Some(5);
        head.queue.as_mut().unwrap().queue_next = Some(1);
        let ahead = LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![7; 64])),
            fencing_token: Some(5),
            lease_duration_ms: Some(LEASE),
            ..Default::default()
        };
        let (mut m, _) = M::start(lock(), 1, None, &at(0), &mut here);
        m.step(
            Input::Answer(Answer::Refused(Some(Some(head.clone())))),
            &at(0),
            &mut here,
        );
        let a = m.step(item(Some(head.clone())), &at(0), &mut here);
        assert_eq!(
            a,
            Act::Join {
                resource: 0,
                position: 2
            }
        );
        m.step(Input::Resume, &at(0), &mut here);
        // Second in line: the entry ahead is read (position 1).
        let a = m.step(Input::Resume, &at(0), &mut here);
        assert_eq!(
            sent(&a),
            Request::Get {
                resource: 0,
                position: Some(1)
            }
        );
        let mut now = 0;
        let mut a = m.step(item(Some(ahead.clone())), &at(now), &mut here);
        let finish = loop {
            match a {
                Act::Send {
                    req: Request::PutEntry { .. },
                    ..
                } => a = m.step(done(), &at(now), &mut here),
                Act::Entry(_) | Act::Arm => a = m.step(Input::Resume, &at(now), &mut here),
                Act::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    a = m.step(Input::Resume, &at(now), &mut here);
                }
                Act::Send {
                    req: Request::Get { position: Some(1), .. },
                    ..
                } => a = m.step(item(Some(ahead.clone())), &at(now), &mut here),
                Act::Send {
                    req: req @ Request::FinishEntry { .. },
                    ..
                } => break req,
                other => panic!("{other:?}"),
            }
        };
        assert!(now >= LEASE, "taken for dead after its lease: {now}");
        assert!(matches!(finish, Request::FinishEntry { position: 1, seen, .. } if seen == [7; 64]));
        // Passed: next in line. The head as the ticket found it starts the wait-out, and the
        // head is read next.
        let mut a = m.step(done(), &at(now), &mut here);
        assert!(
            matches!(a, Act::Wait { until, .. } if until == Duration::from_millis(now)),
            "{a:?}"
        );
        while !matches!(a, Act::Send { .. }) {
            a = m.step(Input::Resume, &at(now), &mut here);
        }
        assert_eq!(
            sent(&a),
            Request::Get {
                resource: 0,
                position: None
            }
        );
    }

    /// Steps a waiter with a lease of 10 s for `end` ms: next in line behind a holder
    /// (`behind_entry` false) or second in line behind a live entry, both renewed every
    /// third of the lease (a new `guid`); the reads it sent.
    fn fifo_wait(behind_entry: bool, end: u64) -> u32 {
        let lease = 10_000;
        let mut s = lock();
        s.lease_duration_ms = lease;
        let mut here = Alone::default();
        let mut head = held_head(4, 9);
        head.lease_duration_ms = Some(lease);
        if behind_entry {
            head.queue.as_mut().unwrap().ticket_next = Some(5);
            head.queue.as_mut().unwrap().queue_next = Some(1);
        }
        let ahead = LockRecord {
            fencing_token: Some(5),
            lease_duration_ms: Some(lease),
            ..Default::default()
        };
        let renewed = |r: &LockRecord, now: u64| LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![(now / (lease / 3)) as u8; 64])),
            ..r.clone()
        };
        let (mut m, _) = M::start(s, 1, None, &at(0), &mut here);
        let mut a = m.step(
            Input::Answer(Answer::Refused(Some(Some(head.clone())))),
            &at(0),
            &mut here,
        );
        let (mut now, mut reads) = (0, 0);
        loop {
            a = match a {
                Act::Send {
                    req: Request::Ticket { .. },
                    ..
                } => m.step(item(Some(head.clone())), &at(now), &mut here),
                Act::Send {
                    req: Request::PutEntry { .. },
                    ..
                } => m.step(done(), &at(now), &mut here),
                Act::Send {
                    req: Request::Get { position, .. },
                    ..
                } => {
                    reads += 1;
                    let r = match position {
                        Some(_) => renewed(&ahead, now),
                        None => renewed(&head, now),
                    };
                    m.step(item(Some(r)), &at(now), &mut here)
                }
                Act::Join { .. } | Act::Entry(_) | Act::Arm => m.step(Input::Resume, &at(now), &mut here),
                Act::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    if now >= end {
                        return reads;
                    }
                    m.step(Input::Resume, &at(now), &mut here)
                }
                other => panic!("at {now}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_long_wait_behind_a_holder_or_an_entry_costs_a_few_reads_a_minute() {
        for behind_entry in [false, true] {
            let reads = fifo_wait(behind_entry, 60_000);
            assert!(reads <= 30, "at most 0.5 reads a second over a minute: {reads}");
            let reads = fifo_wait(behind_entry, 600_000);
            assert!(reads <= 150, "at most 0.25 reads a second over ten minutes: {reads}");
        }
    }

    /// A head as another writer left it: `held_head`'s attributes, then `attribute` as found.
    fn head_with(token: u64, released: bool, attribute: &str, found: crate::item::Found) -> LockRecord {
        let mut h = held_head(token, 9);
        if released {
            h.lease_duration_ms = Some(crate::item::RELEASED_LEASE_MS);
        }
        h.read(attribute, found);
        h
    }

    /// Steps `m` to its end, answering every request with what `answer` says (the give-up's
    /// clean-up with success), and returns the outcome and the requests sent.
    fn run_out(
        m: &mut M,
        mut a: Out,
        here: &mut Alone,
        mut now: u64,
        mut answer: impl FnMut(&Request<Guid, crate::item::Version>) -> Input<LockRecord, &'static str>,
    ) -> (Outcome<&'static str>, Vec<Request<Guid, crate::item::Version>>) {
        let mut sent = Vec::new();
        loop {
            assert!(
                sent.len() < 1000,
                "the acquisition loops: {:?}",
                &sent[sent.len() - 4..]
            );
            a = match a {
                Act::Done(o) => return (o, sent),
                Act::Send { req, .. } => {
                    sent.push(req.clone());
                    let input = answer(&req);
                    m.step(input, &at(now), here)
                }
                Act::Wait { until, .. } => {
                    now = now.max(until.as_millis() as u64);
                    m.step(Input::Resume, &at(now), here)
                }
                Act::StopEntry { .. } => m.step(Input::Guids(vec![]), &at(now), here),
                _ => m.step(Input::Resume, &at(now), here),
            };
        }
    }

    #[test]
    fn a_head_whose_token_is_not_a_number_is_refused_by_name_at_once() {
        use crate::item::{Found, FENCING_TOKEN};
        for released in [true, false] {
            let head = head_with(4, released, FENCING_TOKEN, Found::S("x".into()));
            let mut here = Alone::default();
            let (mut m, a) = M::start(lock(), 1, Some(Duration::from_millis(2000)), &at(0), &mut here);
            assert!(matches!(sent(&a), Request::TakeFree { .. }));
            let a = m.step(
                Input::Answer(Answer::Refused(Some(Some(head.clone())))),
                &at(1),
                &mut here,
            );
            assert_eq!(a, Act::Done(Outcome::Corrupt { resource: 0 }), "released {released}");
            assert_eq!(m.refused(), Some(&head));
            assert_eq!(head.head_refusal().map(|r| r.attribute), Some(FENCING_TOKEN));
        }
    }

    #[test]
    fn a_head_refused_while_queued_ends_the_wait_and_gives_the_ticket_back() {
        use crate::item::{Found, TICKET_NEXT};
        let mut here = Alone::default();
        let head = held_head(4, 9);
        let (mut m, a) = queued_behind(&head, Some(Duration::from_millis(60_000)), &mut here);
        let corrupt = head_with(4, false, TICKET_NEXT, Found::S("x".into()));
        let (outcome, sent) = run_out(&mut m, a, &mut here, 3, |req| match req {
            Request::Get { position: None, .. } => item(Some(corrupt.clone())),
            _ => done(),
        });
        assert_eq!(outcome, Outcome::Corrupt { resource: 0 });
        assert_eq!(
            m.refused().and_then(|h| h.head_refusal()).map(|r| r.attribute),
            Some(TICKET_NEXT)
        );
        assert!(!sent.iter().any(|r| matches!(r, Request::Grant { .. })), "{sent:?}");
        assert!(
            sent.iter().any(|r| matches!(r, Request::DeleteEntry { .. })),
            "{sent:?}"
        );
        assert!(sent.iter().any(|r| matches!(r, Request::Untake { .. })), "{sent:?}");
    }

    #[test]
    fn the_largest_token_is_handed_out_once_then_the_head_is_refused() {
        use crate::item::MAX_FENCING_TOKEN as MAX;
        let fields = OpenFields {
            owner: "me",
            lease_duration_ms: LEASE,
            lock_acquired_time_unix_ms: None,
            data: None,
            ttl: None,
            token_floor: 0,
            session: None,
        };
        let guid = [7; 64];
        let mut head = held_head(MAX - 1, 9);
        head.lease_duration_ms = Some(crate::item::RELEASED_LEASE_MS);
        let take = Op::FifoTakeFree {
            fields: &fields,
            guid: &guid,
        };
        let (after, reply) = op::apply(&take, Some(head));
        assert_eq!(reply, Reply::Token(MAX));
        let mut head = after.unwrap();
        head.lease_duration_ms = Some(crate::item::RELEASED_LEASE_MS);
        // Neither a take nor a ticket rises above it: no token at or below one handed out.
        assert!(matches!(op::apply(&take, Some(head.clone())).1, Reply::Refused(_)));
        assert!(matches!(
            op::apply(&Op::FifoTicket, Some(head.clone())).1,
            Reply::Refused(_)
        ));
        assert!(matches!(
            op::apply(&Op::FifoReserve { ticket: MAX + 1 }, Some(head.clone())).1,
            Reply::Refused(_)
        ));
        let mut here = Alone::default();
        let (mut m, _) = M::start(lock(), 1, Some(Duration::from_millis(2000)), &at(0), &mut here);
        let a = m.step(
            Input::Answer(Answer::Refused(Some(Some(head.clone())))),
            &at(1),
            &mut here,
        );
        assert_eq!(a, Act::Done(Outcome::Corrupt { resource: 0 }));
        assert_eq!(
            m.refused().and_then(|h| h.ticket_refusal()).map(|r| r.attribute),
            Some(crate::item::TICKET_NEXT)
        );
        // A ticket refused without the item (an engine that does not return it) reads it.
        let mut held = head.clone();
        held.lease_duration_ms = Some(LEASE);
        let mut here = Alone::default();
        let (mut m, _) = M::start(lock(), 1, None, &at(0), &mut here);
        let a = m.step(Input::Answer(Answer::Refused(None)), &at(1), &mut here);
        assert_eq!(sent(&a), Request::Ticket { resource: 0 });
        let a = m.step(Input::Answer(Answer::Refused(None)), &at(2), &mut here);
        assert_eq!(
            sent(&a),
            Request::Get {
                resource: 0,
                position: None
            }
        );
        let a = m.step(item(Some(held)), &at(3), &mut here);
        assert_eq!(a, Act::Done(Outcome::Corrupt { resource: 0 }));
    }

    #[test]
    fn a_take_that_landed_on_a_refused_head_is_released_not_held() {
        use crate::item::{Found, QUEUE_NEXT};
        let mut here = Alone::default();
        let (mut m, _) = M::start(lock(), 1, None, &at(0), &mut here);
        // The take's answer was lost; the head read back carries its guid and a queueNext
        // that no condition could tell apart.
        let a = m.step(
            Input::Answer(Answer::Failed {
                error: "timeout",
                transient: false,
                maybe_applied: true,
            }),
            &at(1),
            &mut here,
        );
        assert!(matches!(sent(&a), Request::Get { position: None, .. }));
        let mut ours = head_with(5, false, QUEUE_NEXT, Found::N("1.5".into()));
        ours.guid = Some(crate::item::GuidValue::B(vec![1; 64]));
        let a = m.step(item(Some(ours)), &at(2), &mut here);
        assert_eq!(
            sent(&a),
            Request::ReleaseHead {
                resource: 0,
                guid: [1; 64]
            }
        );
        let a = m.step(done(), &at(3), &mut here);
        assert_eq!(a, Act::Done(Outcome::Corrupt { resource: 0 }));
        assert_eq!(
            m.refused().and_then(|h| h.head_refusal()).map(|r| r.attribute),
            Some(QUEUE_NEXT)
        );
    }

    #[test]
    fn a_grant_refused_on_a_head_that_looks_free_is_not_sent_again_at_once_and_the_wait_ends() {
        // The store refuses every grant for a reason this waiter cannot read: it paces its
        // grants and gives up when its wait ends, instead of writing in a loop.
        let mut free = held_head(4, 9);
        free.lease_duration_ms = Some(crate::item::RELEASED_LEASE_MS);
        let mut taken = free.clone();
        taken.queue_mut().ticket_next = Some(5);
        let mut here = Alone::default();
        let (mut m, a) = M::start(lock(), 1, Some(Duration::from_millis(2000)), &at(0), &mut here);
        assert!(matches!(sent(&a), Request::TakeFree { .. }));
        let a = m.step(
            Input::Answer(Answer::Refused(Some(Some(taken.clone())))),
            &at(1),
            &mut here,
        );
        let (outcome, sent) = run_out(&mut m, a, &mut here, 1, |req| match req {
            Request::Ticket { .. } => item(Some(taken.clone())),
            Request::Grant { .. } => Input::Answer(Answer::Refused(Some(Some(taken.clone())))),
            Request::Get { position: None, .. } => item(Some(taken.clone())),
            _ => done(),
        });
        assert_eq!(outcome, Outcome::NotAcquired);
        let grants = sent.iter().filter(|r| matches!(r, Request::Grant { .. })).count();
        let most = 2000 / crate::settings::reread(LEASE).as_millis() as usize + 2;
        assert!(grants >= 2 && grants <= most, "{grants} grants in 2 s (at most {most})");
    }
    /// A grant whose attempts all failed after it may have landed, sent again when a release
    /// of the head is seen in this client: the head already carries it, unchanged since the
    /// first send, so the lease counts from that first send.
    #[test]
    fn a_grant_sent_again_counts_its_lease_from_the_first_send() {
        let mut here = Alone::default();
        let (mut m, mut a) = queued_behind(&held_head(1, 9), None, &mut here);
        let mut now = 3;
        let mut free = held_head(1, 9);
        free.lease_duration_ms = Some(crate::item::RELEASED_LEASE_MS);
        // Up to the first grant: the head is read and found released.
        let first = loop {
            a = match a {
                Act::Wait { until, .. } => {
                    now = now.max(until.as_millis() as u64);
                    m.step(Input::Resume, &at(now), &mut here)
                }
                Act::Send {
                    req: Request::Get { position: None, .. },
                    ..
                } => m.step(item(Some(free.clone())), &at(now), &mut here),
                Act::Send {
                    req: Request::Grant { .. },
                    ..
                } => break now,
                Act::Arm => m.step(Input::Resume, &at(now), &mut here),
                other => panic!("{other:?}"),
            };
        };
        // Every attempt fails after it may have landed (it did); meanwhile this client
        // releases the head it read (token 1). Once the attempts are spent, the grant is sent
        // again at once on that release, without a read.
        let lost = || {
            Input::Answer(Answer::Failed {
                error: "lost answer",
                transient: true,
                maybe_applied: true,
            })
        };
        here.released = Some(1);
        let mut grants = 1;
        a = m.step(lost(), &at(now), &mut here);
        loop {
            a = match a {
                Act::Send {
                    req: Request::Grant { ticket: 2, .. },
                    ..
                } if grants == lock().max_attempts => break,
                Act::Send {
                    req: Request::Grant { .. },
                    ..
                } => {
                    grants += 1;
                    m.step(lost(), &at(now), &mut here)
                }
                Act::Wait { until, .. } => {
                    now = now.max(until.as_millis() as u64);
                    m.step(Input::Resume, &at(now), &mut here)
                }
                Act::Arm => m.step(Input::Resume, &at(now), &mut here),
                other => panic!("{other:?}"),
            };
        }
        let a = m.step(done(), &at(now), &mut here);
        let Act::Hold { token: 2, sent_at, .. } = a else {
            panic!("{a:?}")
        };
        assert_eq!(
            sent_at,
            Duration::from_millis(first),
            "from the first send, not {sent_at:?}"
        );
    }
}
