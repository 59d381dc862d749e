//! Fifo: a fair lock. Each resource has a queue, and waiters are granted the resource in the
//! order of their tickets; the ticket is the fencing token.
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
//! - A release in this client wakes this client's next waiter at once, without a poll.
//!
//! Queue positions, not tickets, key the entries: tickets of several resources skip numbers in
//! a queue, while positions leave no gap, so that a missing entry is always the one just ahead.

use std::sync::Arc;
use std::time::Duration;

use dynamodb_lock_core::op;
use futures_util::future::join_all;
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::error::{LockError, LostReason, StoreError};
use crate::heartbeat::LazyHeartbeats;
use crate::item::{new_guid, Guid, KeyValue, LockKey, LockRecord, Version};
use crate::lock::{EventSink, HeldLock, LockEvent, Shared};
use crate::queues::{Mine, Queues};
use crate::store::{attempt, Entry, Failed, OpenFields};

/// The sort key value of a resource's head item.
pub const HEAD_SORT_VALUE: &str = "lock";
/// The sort key prefix of queue entries, followed by the 20-digit position.
pub const ENTRY_PREFIX: &str = "q#";
/// A queue entry's TTL attribute lies this far beyond its lease, and its waiter moves it on
/// every half of this: DynamoDB's TTL only removes entries left behind for an hour.
pub const ENTRY_TTL_MARGIN: Duration = Duration::from_secs(3600);
/// Tickets an acquisition takes before it gives up: a new one is taken only when waiters
/// behind took this one for dead, or, for several resources, when another acquisition took a
/// higher ticket for one of them meanwhile.
const MAX_ROUNDS: u32 = 16;

pub fn head_key(resource: &KeyValue) -> LockKey {
    LockKey {
        partition: resource.clone(),
        sort: Some(KeyValue::S(HEAD_SORT_VALUE.into())),
    }
}

pub fn entry_key(resource: &KeyValue, position: u64) -> LockKey {
    LockKey {
        partition: resource.clone(),
        sort: Some(KeyValue::S(format!("{ENTRY_PREFIX}{position:020}"))),
    }
}

/// Every `guid` a queue entry may carry, once its heartbeat in flight (if any) has answered:
/// the scheduler is asked to take that reply at once rather than with its next group.
async fn entry_guids(entry: &HeldLock) -> Vec<Guid> {
    if let Ok(st) = entry.state.try_lock() {
        return st.guids();
    }
    let _hurry = entry.client.heartbeats.hurry();
    entry.state.lock().await.guids()
}

/// What the locks that are `c`'s queue entries share: `c`'s store and settings, the
/// process-wide scheduler, no events.
fn entries_client(c: &Shared) -> Arc<Shared> {
    c.entries
        .get_or_init(|| {
            Arc::new(Shared::new(
                c.store.clone(),
                c.settings.clone(),
                Arc::new(Quiet),
                Box::new(LazyHeartbeats::new(None)),
                Queues::default(),
            ))
        })
        .clone()
}

struct Quiet;

impl EventSink for Quiet {
    fn emit(&self, _: u64, _: LockEvent) {}
}

fn fields(c: &Shared) -> OpenFields<'_> {
    OpenFields {
        owner: &c.settings.owner,
        lease_duration_ms: c.settings.lease_duration_ms,
        lock_acquired_time_unix_ms: None,
        data: None,
        ttl: None,
        token_floor: 0,
    }
}

fn failed_to_acquire() -> LockError {
    LockError::FailedToAcquireLock {
        original: StoreError::condition_failed(),
    }
}

fn unix_now_s() -> u64 {
    crate::item::unix_now_ms() / 1000
}

fn entry_ttl(c: &Shared) -> u64 {
    unix_now_s() + c.settings.lease_duration_ms.div_ceil(1000) + ENTRY_TTL_MARGIN.as_secs()
}

/// A readable message for DynamoDB's refusal of Fifo's keys (a table without a string sort
/// key, or lock ids of the wrong type).
fn explain(c: &Shared, e: LockError) -> LockError {
    c.fifo.names.explain_keys(e, "Fifo locks", |n| {
        format!(
            "they need its partition key \"{}\" to have the lock ids' type and its sort key \"{}\" to be a string (S)",
            n.partition_key, n.sort_key
        )
    })
}

async fn read(c: &Shared, key: &LockKey) -> Result<Option<LockRecord>, Failed> {
    attempt(c.settings.policy(), || c.store.get(key)).await
}

/// Acquires every resource in `resources` with one ticket. `wait`: how long to wait for the
/// turn (`None`: without end; zero: fail at once if anyone is ahead). A cancelled or timed
/// out acquisition leaves neither a lock nor a live queue entry behind.
pub async fn acquire(
    c: &Arc<Shared>,
    mut resources: Vec<KeyValue>,
    wait: Option<Duration>,
    cancel: &Cancel,
) -> Result<Vec<Arc<HeldLock>>, LockError> {
    resources.sort_by(|a, b| order(a).cmp(&order(b)));
    resources.dedup();
    if resources.is_empty() {
        return Err(LockError::Internal("a Fifo acquisition needs a resource".into()));
    }
    let deadline = wait.and_then(|w| Instant::now().checked_add(w));
    let locks = acquire_sorted(c, &resources, wait.is_some_and(|w| w.is_zero()), deadline, cancel)
        .await
        .map_err(|e| explain(c, e))?;
    if cancel.is_cancelled() {
        for l in &locks {
            // Best effort: the release retries through transient faults on its own.
            let _ = l.release().await;
        }
        return Err(LockError::Aborted);
    }
    // A lease counts from when its write was sent: a grant answered only after its whole lease
    // is not held (the next in line may already have passed it by).
    let now = Instant::now();
    let mut late = false;
    for l in &locks {
        late |= l.lease.until().is_some_and(|at| at <= now);
    }
    if late {
        for l in &locks {
            let _ = l.release().await;
        }
        return Err(LockError::Lost(LostReason::LeaseExpired));
    }
    Ok(locks)
}

/// The order resources are queued in: the same in every process.
fn order(v: &KeyValue) -> (u8, &[u8]) {
    match v {
        KeyValue::S(s) => (0, s.as_bytes()),
        KeyValue::N(n) => (1, n.as_bytes()),
        KeyValue::B(b) => (2, b.as_slice()),
    }
}

async fn acquire_sorted(
    c: &Arc<Shared>,
    resources: &[KeyValue],
    no_wait: bool,
    deadline: Option<Instant>,
    cancel: &Cancel,
) -> Result<Vec<Arc<HeldLock>>, LockError> {
    cancel.check()?;
    if let [r] = resources {
        // While this client itself waits for or holds the resource, the one-request path is
        // refused for sure: go to the queue at once.
        if no_wait || !c.fifo.busy_here(r) {
            if let Some(lock) = take_free(c, r, no_wait).await? {
                return Ok(vec![lock]);
            }
        }
    }
    for _ in 0..MAX_ROUNDS {
        cancel.check()?;
        let mut a = Acquisition {
            c: c.clone(),
            queued: Vec::with_capacity(resources.len()),
        };
        let outcome = match a.enter(resources).await {
            Ok(()) => a.run(deadline, cancel).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => return Ok(a.finish().await),
            Err(Stop::Dead) => {
                a.give_up().await;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(failed_to_acquire());
                }
            }
            Err(Stop::Error(e)) => {
                a.give_up().await;
                return Err(e);
            }
        }
    }
    Err(failed_to_acquire())
}

/// The uncontended path: one request. `None` when the head is held or tickets are out.
async fn take_free(c: &Arc<Shared>, r: &KeyValue, no_wait: bool) -> Result<Option<Arc<HeldLock>>, LockError> {
    let head = head_key(r);
    let guid = new_guid();
    let f = fields(c);
    let sent_at = Instant::now();
    let budget = c.settings.budget();
    match attempt(budget.writes, || c.store.fifo_take_free(&head, &f, &guid)).await {
        Ok(token) => Ok(Some(hold(c, head, guid, token, sent_at))),
        Err(Failed {
            error: StoreError::ConditionFailed { current },
            ambiguous,
        }) => {
            let current = match current {
                Some(cur) => Some(cur.map(|r| *r)),
                // An earlier attempt of this request may be what the condition met.
                None if ambiguous => attempt(budget.settle, || c.store.get(&head)).await.ok(),
                None => None,
            };
            if let Some(Some(h)) = &current {
                if h.carries(&guid) {
                    return Ok(Some(hold(c, head, guid, h.fencing_token.unwrap_or(0), sent_at)));
                }
                if no_wait && !op::free(Some(h)) {
                    return Err(failed_to_acquire());
                }
            }
            Ok(None)
        }
        Err(Failed { error, ambiguous }) => {
            if ambiguous {
                if let Ok(Some(h)) = attempt(budget.settle, || c.store.get(&head)).await {
                    if h.carries(&guid) {
                        return Ok(Some(hold(c, head, guid, h.fencing_token.unwrap_or(0), sent_at)));
                    }
                }
            }
            Err(LockError::Store(error))
        }
    }
}

/// A head item taken with `token`: a held lock, heartbeated like a FailOpen lock.
fn hold(c: &Arc<Shared>, head: LockKey, guid: Guid, token: u64, sent_at: Instant) -> Arc<HeldLock> {
    let resource = head.partition.clone();
    let lock = Arc::new(HeldLock::new(
        c.clone(),
        head,
        guid,
        Some(token),
        Some(sent_at + c.settings.lease()),
    ));
    schedule(c, &lock);
    c.fifo.hold(&resource, token, &lock);
    lock
}

fn schedule(c: &Shared, lock: &Arc<HeldLock>) {
    match c.settings.heartbeat_period {
        Some(period) => c.heartbeats.schedule_first(lock, period),
        None => {
            if let Some(at) = lock.lease.until() {
                c.heartbeats.schedule_lapse(lock, at);
            }
        }
    }
}

enum Stop {
    /// Others took this acquisition's place in a queue for dead: take a new ticket.
    Dead,
    Error(LockError),
}

impl From<LockError> for Stop {
    fn from(e: LockError) -> Self {
        Stop::Error(e)
    }
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Error(LockError::Store(e))
    }
}

enum Step {
    Granted,
    /// Nothing to do before `at` (or before this client's queue state changes).
    Wait(Instant),
    Dead,
}

/// What a waiter has seen of the item it watches, and since when on its own clock.
#[derive(Clone, Debug)]
enum Watch {
    Nothing,
    Entry { guid: Vec<u8>, since: Instant },
    Missing { since: Instant },
    Head { version: Version, since: Instant },
}

/// One resource of an acquisition: its ticket and place in the queue, and what it has seen.
struct Queued {
    c: Arc<Shared>,
    resource: KeyValue,
    head: LockKey,
    ticket: u64,
    position: u64,
    /// `ticketNext` before this ticket: what giving the ticket back restores.
    previous_ticket: u64,
    /// The `guid` the head is granted with.
    guid: Guid,
    /// The heartbeated queue entry, once written.
    entry: Option<Arc<HeldLock>>,
    touch_at: Instant,
    /// The position being looked at: everything between it and this one is finished.
    cursor: u64,
    /// The last granted position and token seen; everything up to it is finished or holds.
    granted_position: u64,
    head_token: u64,
    /// A head item read and not yet acted on.
    fresh_head: Option<Option<LockRecord>>,
    next_read: Instant,
    watch: Watch,
    /// The token of a local release already acted on without a read.
    local_release_tried: u64,
    /// Another entry was found at this waiter's position: the position is not given back.
    displaced: bool,
    /// Finished entries passed, deleted once the lock is granted.
    passed: Vec<u64>,
    /// When the last grant was sent, and whether one may have landed unseen.
    grant_sent_at: Instant,
    maybe_granted: bool,
    granted: Option<Arc<HeldLock>>,
    /// Whether this client's registry still counts this entry as waiting.
    joined: bool,
}

impl Drop for Queued {
    fn drop(&mut self) {
        // An acquisition dropped midway: waiters behind read the store from now on.
        if self.joined {
            self.c.fifo.leave(&self.resource, self.position, None);
        }
    }
}

impl Queued {
    fn new(c: &Arc<Shared>, resource: &KeyValue, ticket: u64, before: Option<LockRecord>) -> Queued {
        let position = before.as_ref().and_then(|h| h.queue_next()).unwrap_or(0) + 1;
        let now = Instant::now();
        c.fifo.join(resource, position);
        Queued {
            c: c.clone(),
            resource: resource.clone(),
            head: head_key(resource),
            ticket,
            position,
            previous_ticket: op::last_ticket(before.as_ref()),
            guid: new_guid(),
            entry: None,
            touch_at: now,
            cursor: position - 1,
            granted_position: before.as_ref().and_then(|h| h.queue_granted()).unwrap_or(0),
            head_token: before.as_ref().and_then(|h| h.fencing_token).unwrap_or(0),
            // Taking the ticket changed none of the holder's attributes.
            fresh_head: Some(before),
            next_read: now,
            watch: Watch::Nothing,
            local_release_tried: 0,
            displaced: false,
            passed: Vec::new(),
            grant_sent_at: now,
            maybe_granted: false,
            granted: None,
            joined: true,
        }
    }

    fn settle(&mut self, mine: Mine) {
        if self.joined {
            self.joined = false;
            self.c.fifo.leave(&self.resource, self.position, Some(mine));
        }
    }

    fn pass(&mut self, position: u64) {
        self.passed.push(position);
        self.cursor = position - 1;
        self.watch = Watch::Nothing;
        self.next_read = Instant::now();
    }

    /// Learns from a head item: the last grant, or that this waiter's own grant landed.
    fn observe_head(&mut self, head: &Option<LockRecord>) -> Option<Step> {
        if let Some(h) = head {
            if h.carries(&self.guid) && h.fencing_token == Some(self.ticket) && !h.is_released() {
                return Some(self.granted(self.grant_sent_at));
            }
            self.granted_position = self.granted_position.max(h.queue_granted().unwrap_or(0));
            self.head_token = self.head_token.max(h.fencing_token.unwrap_or(0));
        }
        (self.head_token >= self.ticket || self.granted_position >= self.position).then_some(Step::Dead)
    }

    fn granted(&mut self, sent_at: Instant) -> Step {
        let lock = hold(&self.c, self.head.clone(), self.guid, self.ticket, sent_at);
        self.granted = Some(lock);
        self.maybe_granted = false;
        self.settle(Mine::Granted(self.ticket));
        Step::Granted
    }

    fn entry_lost(&self) -> bool {
        self.entry
            .as_ref()
            .is_some_and(|e| e.state.try_lock().is_ok_and(|st| st.lost.is_some()))
    }

    /// A read while waiting: `None` when it failed for now (the next poll tries again).
    async fn read(&self, key: &LockKey) -> Result<Option<Option<LockRecord>>, Stop> {
        match read(&self.c, key).await {
            Ok(r) => Ok(Some(r)),
            Err(Failed { error, .. }) if !error.is_transient() => Err(error.into()),
            Err(_) => Ok(None),
        }
    }

    /// Moves this waiter on as far as it can without waiting.
    async fn step(&mut self) -> Result<Step, Stop> {
        let c = self.c.clone();
        let s = &c.settings;
        loop {
            if self.entry_lost() {
                return Ok(Step::Dead);
            }
            let now = Instant::now();
            if self.cursor > self.granted_position {
                match c.fifo.local_entry(&self.resource, self.cursor) {
                    // Alive, as this process is: wait for it to change.
                    Some(Mine::Waiting) => return Ok(Step::Wait(now + s.lease())),
                    Some(Mine::Finished) => {
                        self.pass(self.cursor);
                        continue;
                    }
                    Some(Mine::Granted(token)) => {
                        self.granted_position = self.cursor;
                        self.head_token = self.head_token.max(token);
                        self.watch = Watch::Nothing;
                        continue;
                    }
                    None => {}
                }
                if now < self.next_read {
                    return Ok(Step::Wait(self.next_read));
                }
                let key = entry_key(&self.resource, self.cursor);
                // The closer to the holder, the more often: the waiter whose entry ahead is
                // next in line reads every two `rereadPeriodMs`, the one behind it every three,
                // and so on up to the queue interval, so that each learns its turn is near
                // soon after the grant ahead of it, and k waiters cost about
                // 1000 / rereadPeriodMs × (1/2 + 1/3 + ... + 1/k) reads per second.
                let distance = self.cursor.saturating_sub(self.granted_position).min(1 << 16) as u32;
                let period = s
                    .reread_period
                    .saturating_mul(distance + 1)
                    .min(s.queue_reread_period.max(s.reread_period));
                let Some(entry) = self.read(&key).await? else {
                    self.next_read = now + period;
                    return Ok(Step::Wait(self.next_read));
                };
                self.next_read = now + period;
                match entry {
                    Some(e) if e.is_released() => self.pass(self.cursor),
                    Some(e) => {
                        let guid = e.guid.clone().unwrap_or_default();
                        let lease = Duration::from_millis(e.lease_duration_ms.unwrap_or(s.lease_duration_ms));
                        let since = match &self.watch {
                            Watch::Entry { guid: seen, since } if *seen == guid => *since,
                            _ => {
                                self.watch = Watch::Entry { guid, since: now };
                                return Ok(Step::Wait(self.next_read));
                            }
                        };
                        if now.duration_since(since) < lease {
                            return Ok(Step::Wait(self.next_read.min(since + lease)));
                        }
                        // Not renewed for its lease: its owner is gone. Finished, for every
                        // waiter behind; a new guid tells the owner, should it come back.
                        let Ok(seen) = Guid::try_from(guid.as_slice()) else {
                            self.pass(self.cursor);
                            continue;
                        };
                        let (seen, rotated) = ([seen], new_guid());
                        match attempt(s.policy(), || c.store.fifo_finish_entry(&key, &seen, &rotated)).await {
                            Ok(())
                            | Err(Failed {
                                error: StoreError::ConditionFailed { current: Some(None) },
                                ..
                            }) => self.pass(self.cursor),
                            // Renewed or finished meanwhile: look again.
                            Err(Failed {
                                error: StoreError::ConditionFailed { .. },
                                ..
                            }) => {
                                self.watch = Watch::Nothing;
                                self.next_read = now;
                            }
                            Err(_) => return Ok(Step::Wait(self.next_read)),
                        }
                    }
                    None => {
                        // Granted and removed, or not written yet: the head says which.
                        let Some(head) = self.read(&self.head).await? else {
                            return Ok(Step::Wait(self.next_read));
                        };
                        if let Some(step) = self.observe_head(&head) {
                            return Ok(step);
                        }
                        if self.cursor <= self.granted_position {
                            self.watch = Watch::Nothing;
                            self.fresh_head = Some(head);
                            continue;
                        }
                        let since = match self.watch {
                            Watch::Missing { since } => since,
                            _ => {
                                self.watch = Watch::Missing { since: now };
                                return Ok(Step::Wait(self.next_read));
                            }
                        };
                        if now.duration_since(since) < s.lease() {
                            return Ok(Step::Wait(self.next_read.min(since + s.lease())));
                        }
                        // Missing for a lease: its owner died between taking the ticket and
                        // writing the entry. A finished entry takes its place, which also
                        // refuses the owner's entry should it come back.
                        let marker = new_guid();
                        let finished = Entry {
                            owner: &s.owner,
                            guid: &marker,
                            ticket: 0,
                            lease_duration_ms: crate::item::RELEASED_LEASE_MS,
                            ttl: (&c.fifo.ttl_attribute, entry_ttl(&c)),
                        };
                        match attempt(s.policy(), || c.store.fifo_put_entry(&key, &finished)).await {
                            Ok(()) => self.pass(self.cursor),
                            Err(Failed {
                                error: StoreError::ConditionFailed { .. },
                                ..
                            }) => {
                                self.watch = Watch::Nothing;
                                self.next_read = now;
                            }
                            Err(_) => return Ok(Step::Wait(self.next_read)),
                        }
                    }
                }
                continue;
            }
            // Next in line: the holder, if any, has `head_token`.
            if self.head_token >= self.ticket || self.granted_position >= self.position {
                return Ok(Step::Dead);
            }
            let head = match self.fresh_head.take() {
                Some(h) => h,
                None => {
                    match c.fifo.holder(&self.resource, self.head_token) {
                        // Held here: its release wakes this waiter. Looked at again every
                        // lease, without a request, in case the lock was lost.
                        Some(false) => return Ok(Step::Wait(now + s.lease())),
                        // Released here just now: the head is free (once; a refusal is
                        // followed by reads).
                        Some(true) if self.local_release_tried < self.head_token => {
                            self.local_release_tried = self.head_token;
                            if let Some(step) = self.grant(None).await? {
                                return Ok(step);
                            }
                            continue;
                        }
                        _ => {}
                    }
                    if now < self.next_read {
                        return Ok(Step::Wait(self.next_read));
                    }
                    let Some(h) = self.read(&self.head).await? else {
                        self.next_read = now + s.reread_period;
                        return Ok(Step::Wait(self.next_read));
                    };
                    self.next_read = now + s.reread_period;
                    h
                }
            };
            if let Some(step) = self.observe_head(&head) {
                return Ok(step);
            }
            let waited_out = match &head {
                h if op::free(h.as_ref()) => None,
                Some(h) => {
                    let version = h.version();
                    let lease = Duration::from_millis(h.lease_duration_ms.unwrap_or(s.lease_duration_ms));
                    let since = match &self.watch {
                        Watch::Head { version: seen, since } if *seen == version => *since,
                        _ => {
                            self.watch = Watch::Head { version, since: now };
                            return Ok(Step::Wait(self.next_read));
                        }
                    };
                    if now.duration_since(since) < lease {
                        return Ok(Step::Wait(self.next_read.min(since + lease)));
                    }
                    Some(version)
                }
                None => None,
            };
            if let Some(step) = self.grant(waited_out).await? {
                return Ok(step);
            }
        }
    }

    /// One grant attempt on the head. `None`: refused, with what was learnt kept for the next
    /// step.
    async fn grant(&mut self, waited_out: Option<Version>) -> Result<Option<Step>, Stop> {
        let c = self.c.clone();
        let f = fields(&c);
        let (ticket, position) = (self.ticket, self.position);
        self.grant_sent_at = Instant::now();
        let result = attempt(c.settings.policy(), || {
            c.store
                .fifo_grant(&self.head, &f, &self.guid, ticket, position, waited_out.as_ref())
        })
        .await;
        match result {
            Ok(()) => Ok(Some(self.granted(self.grant_sent_at))),
            Err(Failed {
                error: StoreError::ConditionFailed { current },
                ambiguous,
            }) => {
                self.maybe_granted |= ambiguous;
                match current {
                    Some(h) => self.fresh_head = Some(h.map(|r| *r)),
                    None => self.next_read = Instant::now(),
                }
                self.watch = Watch::Nothing;
                Ok(None)
            }
            Err(Failed { error, ambiguous }) => {
                self.maybe_granted |= ambiguous;
                if !error.is_transient() {
                    return Err(error.into());
                }
                // Tried through transient faults already: the next poll tries again, and a
                // grant that landed unseen shows on the head.
                self.next_read = Instant::now() + c.settings.reread_period;
                Ok(Some(Step::Wait(self.next_read)))
            }
        }
    }

    /// Writes this waiter's queue entry and has it heartbeated. `Dead` if a finished entry
    /// was written in its place (it took longer than a lease to come).
    async fn write_entry(&mut self) -> Result<(), Stop> {
        if self.entry.is_some() || self.granted.is_some() {
            return Ok(());
        }
        let c = self.c.clone();
        let s = &c.settings;
        let key = entry_key(&self.resource, self.position);
        let guid = new_guid();
        let e = Entry {
            owner: &s.owner,
            guid: &guid,
            ticket: self.ticket,
            lease_duration_ms: s.lease_duration_ms,
            ttl: (&c.fifo.ttl_attribute, entry_ttl(&c)),
        };
        let sent_at = Instant::now();
        let written = match attempt(s.policy(), || c.store.fifo_put_entry(&key, &e)).await {
            Ok(()) => true,
            Err(Failed {
                error: StoreError::ConditionFailed { current },
                ambiguous,
            }) => {
                let current = match current {
                    Some(cur) => cur.map(|r| *r),
                    None if ambiguous => read(&c, &key).await.map_err(|f| f.error)?,
                    None => None,
                };
                current.is_some_and(|cur| cur.carries(&guid))
            }
            Err(Failed { error, .. }) => return Err(error.into()),
        };
        if !written {
            self.displaced = true;
            return Err(Stop::Dead);
        }
        let lock = Arc::new(HeldLock::new(
            entries_client(&c),
            key,
            guid,
            None,
            Some(sent_at + s.lease()),
        ));
        schedule(&c, &lock);
        self.entry = Some(lock);
        self.touch_at = Instant::now() + ENTRY_TTL_MARGIN / 2;
        Ok(())
    }

    /// Moves the entry's TTL on when it is due; returns when it is next due.
    async fn touch(&mut self) -> Instant {
        let Some(entry) = &self.entry else {
            return Instant::now() + ENTRY_TTL_MARGIN;
        };
        if Instant::now() >= self.touch_at {
            let ttl = (self.c.fifo.ttl_attribute.as_str(), entry_ttl(&self.c));
            let c = &self.c;
            self.touch_at = match attempt(c.settings.policy(), || c.store.fifo_touch_entry(&entry.key, ttl)).await {
                // Refused: the entry was finished by others, which its heartbeat reports.
                Ok(())
                | Err(Failed {
                    error: StoreError::ConditionFailed { .. },
                    ..
                }) => Instant::now() + ENTRY_TTL_MARGIN / 2,
                Err(_) => Instant::now() + c.settings.queue_reread_period,
            };
        }
        self.touch_at
    }

    /// Stops the entry's heartbeats; the `guid`s it may carry.
    async fn stop_entry(&mut self) -> Option<(LockKey, Vec<Guid>)> {
        let entry = self.entry.take()?;
        entry.abandon();
        Some((entry.key.clone(), entry_guids(&entry).await))
    }

    /// Leaves the queue without the lock: the entry goes, the ticket is given back if it is
    /// still the last, and otherwise a finished entry stays for the waiters behind to pass.
    async fn give_up(&mut self) {
        let c = self.c.clone();
        let s = &c.settings;
        if let Some(lock) = self.granted.take() {
            let _ = lock.release().await;
            return;
        }
        if self.maybe_granted {
            // A grant that may have landed unseen is released if it did.
            let guids = [self.guid];
            let _ = attempt(s.release_policy(), || c.store.release(&self.head, &guids, None, None)).await;
        }
        let key = entry_key(&self.resource, self.position);
        // Whether the position is settled already: another entry is there (a finished one
        // written by waiters behind), or ours could not be removed and is left to expire. A
        // position given back while an entry is there would refuse the next waiter's entry.
        let mut settled = self.displaced;
        if let Some((key, guids)) = self.stop_entry().await {
            settled = attempt(s.policy(), || c.store.delete_if_guid(&key, &guids))
                .await
                .is_err();
        }
        if !settled {
            let (t, p, prev) = (self.ticket, self.position, self.previous_ticket);
            let given_back = attempt(s.policy(), || c.store.fifo_untake(&self.head, t, p, prev))
                .await
                .is_ok();
            if !given_back {
                let marker = new_guid();
                let e = Entry {
                    owner: &s.owner,
                    guid: &marker,
                    ticket: self.ticket,
                    lease_duration_ms: crate::item::RELEASED_LEASE_MS,
                    ttl: (&c.fifo.ttl_attribute, entry_ttl(&c)),
                };
                let _ = attempt(s.policy(), || c.store.fifo_put_entry(&key, &e)).await;
            }
        }
        self.settle(Mine::Finished);
    }
}

/// One acquisition of one or more resources (sorted), with one ticket.
struct Acquisition {
    c: Arc<Shared>,
    queued: Vec<Queued>,
}

impl Acquisition {
    /// Takes the ticket and a queue position for every resource.
    async fn enter(&mut self, resources: &[KeyValue]) -> Result<(), Stop> {
        let c = self.c.clone();
        let policy = c.settings.policy();
        let mut ticket: Option<u64> = None;
        'rounds: for _ in 0..MAX_ROUNDS {
            for r in resources {
                let head = head_key(r);
                let before = match ticket {
                    None => {
                        let before = attempt(policy, || c.store.fifo_ticket(&head))
                            .await
                            .map_err(|f| f.error)?;
                        ticket = Some(op::last_ticket(before.as_ref()) + 1);
                        before
                    }
                    Some(t) => match attempt(policy, || c.store.fifo_reserve(&head, t)).await {
                        Ok(before) => before,
                        Err(Failed {
                            error: StoreError::ConditionFailed { current },
                            ..
                        }) => {
                            // A higher ticket was issued for this resource: every resource
                            // takes one above it.
                            let current = match current {
                                Some(cur) => cur.map(|r| *r),
                                None => read(&c, &head).await.map_err(|f| f.error)?,
                            };
                            for mut q in self.queued.drain(..) {
                                q.give_up().await;
                            }
                            ticket = Some(op::last_ticket(current.as_ref()).max(t) + 1);
                            continue 'rounds;
                        }
                        Err(f) => return Err(f.error.into()),
                    },
                };
                let t = ticket.unwrap_or_default();
                self.queued.push(Queued::new(&c, r, t, before));
            }
            return Ok(());
        }
        Err(failed_to_acquire().into())
    }

    /// Waits until every resource is granted, in order: each as soon as this waiter is next in
    /// its queue and the head is free (or its holder's lease was waited out).
    async fn run(&mut self, deadline: Option<Instant>, cancel: &Cancel) -> Result<(), Stop> {
        let c = self.c.clone();
        loop {
            let changed = c.fifo.changes();
            tokio::pin!(changed);
            changed.as_mut().enable();
            cancel.check()?;
            let mut wait = None;
            for q in self.queued.iter_mut().filter(|q| q.granted.is_none()) {
                match q.step().await? {
                    Step::Granted => continue,
                    Step::Dead => return Err(Stop::Dead),
                    Step::Wait(at) => {
                        wait = Some(at);
                        break;
                    }
                }
            }
            let Some(at) = wait else { return Ok(()) };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(failed_to_acquire().into());
            }
            let written = join_all(self.queued.iter_mut().map(|q| q.write_entry())).await;
            for w in written {
                w?;
            }
            let mut until = at;
            for q in self.queued.iter_mut() {
                until = until.min(q.touch().await);
            }
            if let Some(d) = deadline {
                until = until.min(d);
            }
            tokio::select! {
                r = cancel.sleep_until(until) => r?,
                // This client's queue state changed: look again (without a request, unless
                // it concerns this waiter).
                _ = &mut changed => {}
            }
        }
    }

    /// Every resource is granted: the queue entries go, and the finished ones passed.
    async fn finish(mut self) -> Vec<Arc<HeldLock>> {
        let c = self.c.clone();
        let mut entries = Vec::new();
        let mut passed = Vec::new();
        for q in self.queued.iter_mut() {
            if let Some(entry) = q.entry.take() {
                // No heartbeat of the entry starts from here on.
                entry.abandon();
                entries.push(entry);
            }
            passed.extend(q.passed.drain(..).map(|p| entry_key(&q.resource, p)));
        }
        let policy = c.settings.policy();
        // In the background, after the lock is handed to the caller: nobody waits for these
        // entries any more (the head says who holds the lock), so the caller need not wait
        // for them either, nor for an entry's heartbeat in flight, whose `guid` the removal
        // needs. Best effort: DynamoDB's TTL removes what is left.
        tokio::spawn(async move {
            let c = &c;
            let mut own = Vec::with_capacity(entries.len());
            for entry in &entries {
                own.push((entry.key.clone(), entry_guids(entry).await));
            }
            let own = join_all(
                own.iter()
                    .map(|(key, guids)| attempt(policy, move || c.store.delete_if_guid(key, guids))),
            );
            let passed = join_all(
                passed
                    .iter()
                    .map(|key| attempt(policy, move || c.store.fifo_delete_finished(key))),
            );
            futures_util::future::join(own, passed).await;
        });
        self.queued.iter_mut().filter_map(|q| q.granted.take()).collect()
    }

    /// Leaves every queue: granted heads are released, entries removed or finished.
    async fn give_up(&mut self) {
        for q in self.queued.iter_mut() {
            q.give_up().await;
        }
        self.queued.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use dynamodb_lock_core::settings;
    use tokio::task::JoinHandle;
    use tokio::time::Instant;

    use super::*;
    use crate::client::Client;
    use crate::config::Kind;
    use crate::queues::TableNames;
    use crate::settings::Settings;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::store::Store;
    use crate::testkit::client;

    fn res(id: &str) -> KeyValue {
        KeyValue::S(id.into())
    }

    fn settings(owner: &str, lease_ms: u64) -> Settings {
        let mut s = Settings::new(Kind::Fifo, owner.into());
        s.lease_duration_ms = lease_ms;
        s.heartbeat_period = Some(settings::fifo_heartbeat(lease_ms));
        s.reread_period = settings::reread(lease_ms);
        s.queue_reread_period = settings::queue_reread(lease_ms, s.reread_period);
        s.danger_margin = settings::danger_margin(lease_ms);
        s.request_timeout = Duration::from_millis(lease_ms / 4);
        s
    }

    fn fifo_client(store: &Arc<MemoryStore>, owner: &str, lease_ms: u64) -> Arc<Client> {
        client(store, settings(owner, lease_ms)).0
    }

    async fn take(c: &Arc<Client>, ids: &[&str], wait: Option<Duration>) -> Result<Vec<Arc<HeldLock>>, LockError> {
        acquire(
            &c.shared,
            ids.iter().map(|i| res(i)).collect(),
            wait,
            &Cancel::default(),
        )
        .await
    }

    type Waiting = JoinHandle<Result<Vec<Arc<HeldLock>>, LockError>>;

    fn spawn_take(c: &Arc<Client>, ids: &[&str], wait: Option<Duration>) -> Waiting {
        let (c, ids) = (c.clone(), ids.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        tokio::spawn(async move {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            take(&c, &ids, wait).await
        })
    }

    fn head(store: &MemoryStore, id: &str) -> LockRecord {
        store.record(&head_key(&res(id))).expect("a head item")
    }

    /// The queue entries of resource `id`: (position, record).
    fn entries(store: &MemoryStore, id: &str) -> Vec<(u64, LockRecord)> {
        let mut out: Vec<(u64, LockRecord)> = store
            .items
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(k, r)| match (&k.partition, &k.sort) {
                (p, Some(KeyValue::S(s))) if *p == res(id) && s.starts_with(ENTRY_PREFIX) => {
                    Some((s[ENTRY_PREFIX.len()..].parse().unwrap(), r.clone()))
                }
                _ => None,
            })
            .collect();
        out.sort_by_key(|(p, _)| *p);
        out
    }

    async fn settle_for(ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_uncontended_acquisition_is_one_request_and_tokens_rise() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let c = fifo_client(&store, "me", 1000);
            let first = take(&c, &["a"], None).await.unwrap();
            assert_eq!(store.requests(), 1, "one UpdateItem");
            assert_eq!(first[0].fencing_token, Some(1));
            first[0].release().await.unwrap();
            assert!(head(&store, "a").is_released());
            let second = take(&c, &["a"], None).await.unwrap();
            assert_eq!(second[0].fencing_token, Some(2));
            assert_eq!(store.count("fifo_take"), 2);
            assert_eq!(store.requests(), 3, "take, release, take");
            let h = head(&store, "a");
            assert_eq!((h.fencing_token, h.ticket_next()), (Some(2), Some(2)));
            assert_eq!(h.owner.as_deref(), Some("me"));
            second[0].release().await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn grants_follow_ticket_order_under_concurrent_arrivals() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 300);
            let held = take(&holder, &["a"], None).await.unwrap();
            let busy = Arc::new(AtomicBool::new(true));
            let granted = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for i in 0..6 {
                // Each waiter in a client of its own, as in separate processes.
                let c = fifo_client(&store, &format!("w{i}"), 300);
                let (busy, granted) = (busy.clone(), granted.clone());
                tasks.push(tokio::spawn(async move {
                    let lock = take(&c, &["a"], None).await.unwrap().pop().unwrap();
                    assert!(!busy.swap(true, Ordering::SeqCst), "two holders at once");
                    granted.lock().unwrap().push((i, lock.fencing_token.unwrap()));
                    // Held across two leases: heartbeats keep the queue entries behind alive.
                    tokio::time::sleep(Duration::from_millis(450)).await;
                    busy.store(false, Ordering::SeqCst);
                    lock.release().await.unwrap();
                }));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            settle_for(100).await;
            busy.store(false, Ordering::SeqCst);
            held[0].release().await.unwrap();
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(30), t).await.unwrap().unwrap();
            }
            let granted = granted.lock().unwrap().clone();
            let order: Vec<usize> = granted.iter().map(|(i, _)| *i).collect();
            assert_eq!(order, vec![0, 1, 2, 3, 4, 5], "arrival order");
            let tokens: Vec<u64> = granted.iter().map(|(_, t)| *t).collect();
            assert_eq!(tokens, vec![2, 3, 4, 5, 6, 7], "the ticket is the token");
            assert!(
                entries(&store, "a").is_empty(),
                "no entry left: {:?}",
                entries(&store, "a")
            );
            assert_eq!(store.count("finish"), 0, "nobody was taken for dead");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_dies_in_the_middle_delays_the_queue_by_at_most_its_lease() {
        let lease = 1000;
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", lease);
        let held = take(&holder, &["a"], None).await.unwrap();
        let first = spawn_take(&fifo_client(&store, "first", lease), &["a"], None);
        settle_for(5).await;
        let dies = spawn_take(&fifo_client(&store, "dies", lease), &["a"], None);
        settle_for(5).await;
        let last = spawn_take(&fifo_client(&store, "last", lease), &["a"], None);
        settle_for(3000).await;
        assert_eq!(entries(&store, "a").len(), 3, "three live entries after three leases");
        // The middle waiter's process dies: its entry is no longer renewed.
        dies.abort();
        let died_at = Instant::now();
        held[0].release().await.unwrap();
        let first = first.await.unwrap().unwrap().pop().unwrap();
        assert_eq!(first.fencing_token, Some(2));
        first.release().await.unwrap();
        let last = last.await.unwrap().unwrap().pop().unwrap();
        let delay = died_at.elapsed();
        let bound = Duration::from_millis(lease) + settings::reread(lease) + Duration::from_millis(20);
        assert!(delay <= bound, "the dead entry held the queue {delay:?}");
        assert_eq!(last.fencing_token, Some(4), "ticket 3 died");
        assert_eq!(store.count("finish"), 1, "the dead entry was marked finished");
        assert!(
            entries(&store, "a").is_empty(),
            "and removed: {:?}",
            entries(&store, "a")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_holder_is_waited_out_on_the_waiters_clock() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 1000);
            let held = take(&holder, &["a"], None).await.unwrap();
            // The holder's process dies: no heartbeat, no release.
            held[0].abandon();
            let start = Instant::now();
            let lock = take(&fifo_client(&store, "me", 1000), &["a"], None).await.unwrap();
            let waited = start.elapsed();
            assert!(waited >= Duration::from_millis(1000), "waited {waited:?}");
            assert!(waited <= Duration::from_millis(1030), "waited {waited:?}");
            assert_eq!(lock[0].fencing_token, Some(2));
            assert_eq!(head(&store, "a").owner.as_deref(), Some("me"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wait_zero_fails_at_once_and_leaves_nothing_behind() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 1000);
            let held = take(&holder, &["a"], None).await.unwrap();
            let c = fifo_client(&store, "me", 1000);
            let before = store.requests();
            let start = Instant::now();
            let err = take(&c, &["a"], Some(Duration::ZERO)).await.unwrap_err();
            assert_eq!(err.code(), "FailedToAcquireLock");
            assert_eq!(start.elapsed(), Duration::ZERO);
            let used = store.requests() - before;
            if returns_old {
                assert_eq!(used, 1, "the refused take showed the holder");
            } else {
                assert_eq!(used, 3, "take, ticket, ticket given back");
            }
            assert!(entries(&store, "a").is_empty());
            let h = head(&store, "a");
            assert_eq!(h.ticket_next(), h.fencing_token, "no ticket out");
            held[0].release().await.unwrap();
            let before = store.requests();
            let lock = take(&c, &["a"], Some(Duration::ZERO)).await.unwrap();
            assert_eq!(store.requests() - before, 1, "free again: one request");
            assert_eq!(lock[0].fencing_token, Some(2));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_finite_wait_fails_when_it_ends_and_hands_its_place_on() {
        let store = Arc::new(MemoryStore::new(false));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let short = spawn_take(
            &fifo_client(&store, "short", 1000),
            &["a"],
            Some(Duration::from_millis(700)),
        );
        settle_for(5).await;
        let long = spawn_take(
            &fifo_client(&store, "long", 1000),
            &["a"],
            Some(Duration::from_secs(60)),
        );
        let start = Instant::now();
        let err = short.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(690) && waited <= Duration::from_millis(720),
            "{waited:?}"
        );
        // A waiter is behind: the place stays as a finished entry.
        let left = entries(&store, "a");
        assert_eq!(left.len(), 2);
        assert!(left[0].1.is_released() && !left[1].1.is_released(), "{left:?}");
        settle_for(settings::queue_reread(1000, settings::reread(1000)).as_millis() as u64 + 10).await;
        let released_at = Instant::now();
        held[0].release().await.unwrap();
        let lock = long.await.unwrap().unwrap();
        assert!(
            released_at.elapsed() <= Duration::from_millis(10),
            "the finished entry cost no wait: {:?}",
            released_at.elapsed()
        );
        assert_eq!(lock[0].fencing_token, Some(3));
        assert!(entries(&store, "a").is_empty(), "{:?}", entries(&store, "a"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_waiter_that_gives_up_gives_its_ticket_back() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let err = take(
            &fifo_client(&store, "me", 1000),
            &["a"],
            Some(Duration::from_millis(400)),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        assert!(entries(&store, "a").is_empty());
        let h = head(&store, "a");
        assert_eq!((h.ticket_next(), h.queue_next()), (Some(1), Some(0)), "{h:?}");
        held[0].release().await.unwrap();
        let before = store.requests();
        take(&holder, &["a"], None).await.unwrap();
        assert_eq!(store.requests() - before, 1, "the fast path works again");
    }

    #[tokio::test(start_paused = true)]
    async fn an_infinite_wait_outlasts_the_default_wait() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let waiter = spawn_take(&fifo_client(&store, "patient", 1000), &["a"], None);
        settle_for(settings::FIFO_WAIT.as_millis() as u64 + 30_000).await;
        assert!(!waiter.is_finished());
        held[0].release().await.unwrap();
        let lock = waiter.await.unwrap().unwrap();
        assert_eq!(lock[0].fencing_token, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_abort_while_queued_leaves_no_entry() {
        let store = Arc::new(MemoryStore::new(false));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let cancel = Arc::new(Cancel::default());
        let aborted = {
            let (c, cancel) = (fifo_client(&store, "aborted", 1000), cancel.clone());
            tokio::spawn(async move { acquire(&c.shared, vec![res("a")], None, &cancel).await })
        };
        settle_for(5).await;
        let behind = spawn_take(&fifo_client(&store, "behind", 1000), &["a"], None);
        settle_for(2000).await;
        assert_eq!(entries(&store, "a").len(), 2);
        cancel.cancel();
        assert_eq!(aborted.await.unwrap().unwrap_err(), LockError::Aborted);
        // The waiter behind, in another process, sees it at its next read of the entry.
        settle_for(settings::queue_reread(1000, settings::reread(1000)).as_millis() as u64 + 10).await;
        let released_at = Instant::now();
        held[0].release().await.unwrap();
        let lock = behind.await.unwrap().unwrap();
        assert!(released_at.elapsed() <= Duration::from_millis(10));
        assert_eq!(lock[0].fencing_token, Some(3));
        assert!(entries(&store, "a").is_empty(), "{:?}", entries(&store, "a"));
        // The last waiter aborts: its entry goes and its ticket is given back.
        let cancel = Arc::new(Cancel::default());
        let last = {
            let (c, cancel) = (fifo_client(&store, "last", 1000), cancel.clone());
            tokio::spawn(async move { acquire(&c.shared, vec![res("a")], None, &cancel).await })
        };
        settle_for(500).await;
        assert_eq!(entries(&store, "a").len(), 1);
        cancel.cancel();
        assert_eq!(last.await.unwrap().unwrap_err(), LockError::Aborted);
        assert!(entries(&store, "a").is_empty());
        assert_eq!(head(&store, "a").ticket_next(), Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn several_resources_in_opposite_orders_never_deadlock() {
        let store = Arc::new(MemoryStore::new(false));
        // Different counters, so that one ticket for both skips numbers in one queue.
        let warm = fifo_client(&store, "warm", 500);
        for _ in 0..5 {
            take(&warm, &["b"], None).await.unwrap()[0].release().await.unwrap();
        }
        let busy = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, ids) in [("x", ["a", "b"]), ("y", ["b", "a"]), ("z", ["a", "b"])] {
            let c = fifo_client(&store, name, 500);
            let (busy, tokens) = (busy.clone(), tokens.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..15 {
                    let locks = take(&c, &ids, None).await.unwrap();
                    assert_eq!(locks.len(), 2);
                    assert_eq!(locks[0].fencing_token, locks[1].fencing_token, "one ticket");
                    for b in busy.iter() {
                        assert!(!b.swap(true, Ordering::SeqCst), "two holders at once");
                    }
                    tokens.lock().unwrap().push(locks[0].fencing_token.unwrap());
                    tokio::time::sleep(Duration::from_millis(7)).await;
                    for b in busy.iter() {
                        b.store(false, Ordering::SeqCst);
                    }
                    for l in locks {
                        l.release().await.unwrap();
                    }
                }
            }));
        }
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("no deadlock")
                .unwrap();
        }
        let tokens = tokens.lock().unwrap().clone();
        assert_eq!(tokens.len(), 45);
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "tokens rise in grant order: {tokens:?}"
        );
        assert!(entries(&store, "a").is_empty() && entries(&store, "b").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_local_release_hands_over_to_the_local_waiter_without_polling() {
        let store = Arc::new(MemoryStore::new(true));
        let c = fifo_client(&store, "me", 1000);
        let held = take(&c, &["a"], None).await.unwrap();
        let second = spawn_take(&c, &["a"], None);
        settle_for(5).await;
        let third = spawn_take(&c, &["a"], None);
        // Several leases: the waiters make no read; only heartbeats are written.
        settle_for(3500).await;
        assert_eq!(store.count("get"), 0, "no polling");
        let released_at = Instant::now();
        held[0].release().await.unwrap();
        let second = second.await.unwrap().unwrap();
        assert_eq!(released_at.elapsed(), Duration::ZERO, "woken at once");
        assert_eq!(second[0].fencing_token, Some(2));
        second[0].release().await.unwrap();
        let third = third.await.unwrap().unwrap();
        assert_eq!(third[0].fencing_token, Some(3));
        assert_eq!(released_at.elapsed(), Duration::ZERO);
        assert_eq!(store.count("get"), 0, "handed over without a read");
        assert_eq!(store.count("grant"), 2, "one grant request each");
        assert!(entries(&store, "a").is_empty());
        assert_eq!(c.fifo.tracked(), 1, "the held lock");
        third[0].release().await.unwrap();
        assert_eq!(c.fifo.tracked(), 0, "nothing held or waiting: nothing kept");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_watches_only_the_entry_ahead_at_the_reread_period() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 2000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let next = spawn_take(&fifo_client(&store, "next", 2000), &["a"], None);
        settle_for(5).await;
        let behind = spawn_take(&fifo_client(&store, "behind", 2000), &["a"], None);
        settle_for(100).await;
        let gets = store.count("get");
        settle_for(10_000).await;
        let per_second = (store.count("get") - gets) as f64 / 10.0;
        // Next in line: the head every 10 ms (100/s); second in line: the entry ahead, which is
        // next, every two re-read periods (50/s).
        assert!((140.0..=160.0).contains(&per_second), "{per_second} reads per second");
        held[0].release().await.unwrap();
        next.await.unwrap().unwrap()[0].release().await.unwrap();
        behind.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticket_taken_and_never_queued_delays_the_queue_by_at_most_a_lease() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 1000);
            let held = take(&holder, &["a"], None).await.unwrap();
            // A process takes a ticket and dies before writing its entry.
            store.fifo_ticket(&head_key(&res("a"))).await.unwrap();
            let waiter = spawn_take(&fifo_client(&store, "me", 1000), &["a"], None);
            settle_for(5).await;
            held[0].release().await.unwrap();
            let start = Instant::now();
            let lock = waiter.await.unwrap().unwrap();
            let waited = start.elapsed();
            assert!(waited <= Duration::from_millis(1000), "waited {waited:?}");
            assert_eq!(lock[0].fencing_token, Some(3));
            assert!(entries(&store, "a").is_empty(), "{:?}", entries(&store, "a"));
            lock[0].release().await.unwrap();
            let before = store.requests();
            take(&holder, &["a"], None).await.unwrap();
            assert_eq!(store.requests() - before, 1, "no ticket out any more");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_take_answered_after_its_whole_lease_grants_nothing() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = settings("me", 1000);
        s.request_timeout = Duration::from_secs(3);
        let c = client(&store, s).0;
        // The uncontended take lands at once; its answer comes after the 1 s lease.
        store.fault("fifo_take", Fault::Delay(Duration::from_millis(1500)));
        let err = take(&c, &["a"], None).await.unwrap_err();
        assert!(matches!(err, LockError::Lost(LostReason::LeaseExpired)), "{err:?}");
        assert!(head(&store, "a").is_released(), "the late grant is released");
        let lock = take(&c, &["a"], None).await.unwrap();
        assert_eq!(lock[0].fencing_token, Some(2));
        lock[0].release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_whose_place_was_given_away_queues_again() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        // The slow waiter's entry reaches the table after more than a lease.
        store.fault("enqueue", Fault::Delay(Duration::from_millis(1500)));
        let slow = {
            let mut s = settings("slow", 1000);
            s.request_timeout = Duration::from_secs(5);
            let c = client(&store, s).0;
            tokio::spawn(async move { take(&c, &["a"], None).await })
        };
        settle_for(5).await;
        let quick = spawn_take(&fifo_client(&store, "quick", 1000), &["a"], None);
        settle_for(2000).await;
        held[0].release().await.unwrap();
        let quick = quick.await.unwrap().unwrap();
        assert_eq!(quick[0].fencing_token, Some(3), "ticket 2 was taken for dead");
        settle_for(100).await;
        assert!(!slow.is_finished());
        quick[0].release().await.unwrap();
        let slow = tokio::time::timeout(Duration::from_secs(5), slow)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            slow[0].fencing_token > Some(3),
            "a new ticket: {:?}",
            slow[0].fencing_token
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_table_without_a_string_sort_key_is_named_in_the_error() {
        let store = Arc::new(MemoryStore::new(true));
        store.fault(
            "fifo_take",
            Fault::Fail(StoreError::Service {
                code: "ValidationException".into(),
                message: "The provided key element does not match the schema".into(),
                transient: false,
                maybe_applied: false,
            }),
        );
        let (c, _) = client(&store, settings("me", 1000));
        let c = Arc::new(Client::new(
            c.store.clone(),
            c.settings.clone(),
            c.events.clone(),
            LazyHeartbeats::new(Some(0)),
            Queues::new(
                "ttl".into(),
                TableNames {
                    table: "locks".into(),
                    partition_key: "pk".into(),
                    sort_key: "sk".into(),
                },
            ),
        ));
        let err = take(&c, &["a"], None).await.unwrap_err();
        assert_eq!(err.code(), "ValidationException");
        let m = err.message();
        assert!(
            m.contains("\"locks\"") && m.contains("sort key \"sk\"") && m.contains("string (S)"),
            "{m}"
        );
        assert!(m.ends_with("The provided key element does not match the schema"), "{m}");
    }

    #[tokio::test(start_paused = true)]
    async fn entries_carry_a_ttl_in_seconds_and_are_heartbeated() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 3000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let waiter = spawn_take(&fifo_client(&store, "me", 3000), &["a"], None);
        settle_for(50).await;
        let key = entry_key(&res("a"), 1);
        let ttl = *store.ttls.lock().unwrap().get(&key).expect("a TTL");
        let expected = unix_now_s() + 3 + ENTRY_TTL_MARGIN.as_secs();
        assert!(ttl.abs_diff(expected) <= 1, "{ttl} vs {expected}");
        let guid = store.record(&key).unwrap().guid;
        settle_for(1100).await;
        assert_ne!(store.record(&key).unwrap().guid, guid, "the entry's guid rotates");
        assert_eq!(
            store.record(&key).unwrap().fencing_token,
            Some(2),
            "the entry carries its ticket"
        );
        held[0].release().await.unwrap();
        waiter.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_abandoned_for_a_higher_ticket_is_passed_at_once() {
        let store = Arc::new(MemoryStore::new(true));
        let warm = fifo_client(&store, "warm", 1000);
        for _ in 0..9 {
            take(&warm, &["b"], None).await.unwrap()[0].release().await.unwrap();
        }
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        // Both resources: ticket 2 at place 1 of "a", refused by "b" (ticketNext 9) a moment
        // later, by when a waiter has queued behind it.
        store.fault("reserve", Fault::Delay(Duration::from_millis(50)));
        let both = spawn_take(&fifo_client(&store, "both", 1000), &["a", "b"], None);
        settle_for(10).await;
        let behind = spawn_take(&fifo_client(&store, "behind", 1000), &["a"], None);
        settle_for(1000).await;
        let left = entries(&store, "a");
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(
            left[0].1.is_released(),
            "the abandoned place is a finished entry: {left:?}"
        );
        assert_eq!(left[2].1.fencing_token, Some(10), "the new ticket is above b's");
        let released_at = Instant::now();
        held[0].release().await.unwrap();
        let lock = behind.await.unwrap().unwrap();
        assert!(
            released_at.elapsed() <= Duration::from_millis(10),
            "{:?}",
            released_at.elapsed()
        );
        assert_eq!(lock[0].fencing_token, Some(3));
        lock[0].release().await.unwrap();
        let locks = both.await.unwrap().unwrap();
        assert_eq!(
            locks.iter().map(|l| l.fencing_token).collect::<Vec<_>>(),
            vec![Some(10); 2]
        );
        assert!(entries(&store, "a").is_empty() && entries(&store, "b").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn one_resource_of_several_held_elsewhere_keeps_the_others_until_its_turn() {
        let store = Arc::new(MemoryStore::new(true));
        let other = fifo_client(&store, "other", 1000);
        let b = take(&other, &["b"], None).await.unwrap();
        let both = spawn_take(
            &fifo_client(&store, "me", 1000),
            &["b", "a"],
            Some(Duration::from_millis(400)),
        );
        let err = both.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        assert!(
            head(&store, "a").is_released(),
            "the resource granted meanwhile is released"
        );
        assert!(entries(&store, "a").is_empty() && entries(&store, "b").is_empty());
        let both = spawn_take(&fifo_client(&store, "me", 1000), &["a", "b"], None);
        settle_for(300).await;
        b[0].release().await.unwrap();
        let locks = both.await.unwrap().unwrap();
        let tokens: Vec<_> = locks.iter().map(|l| l.fencing_token).collect();
        assert_eq!(tokens[0], tokens[1]);
        assert!(tokens[0] > Some(1));
    }
}
