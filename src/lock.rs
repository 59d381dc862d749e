//! A held lock: its key, current `guid`, lease and health, and the events it reports; and
//! what the held locks of one client share with it (`Shared`: store, settings, where events
//! go, the local line, the hand-off, Fifo's queue state, and the heartbeat scheduler, which
//! the layer above supplies through `Scheduler`). A lock's state is the core's `hold::Hold`,
//! kept with every other lock of its client, and its sessions, in the client machine
//! (`client::Client`), which decides every event about them: a release asks it, waits for a
//! heartbeat write on the wire when it says so, and then writes with every `guid` the item
//! may carry.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use std::pin::Pin;

use tokio::sync::futures::Notified;
use tokio::sync::{Mutex, Notify};
use tokio::time::Instant;

use dynamodb_lock_core::op;
use dynamodb_lock_core::request::Ended;
use dynamodb_lock_core::work::Task;
use dynamodb_lock_core::{client, ending, force, held, hold};

use crate::cancel::Cancel;
use crate::clock::Clock;
use crate::error::{LockError, LostReason, StoreError};
use crate::item::{new_guid, Guid, LockData, LockKey, LockRecord};
use crate::line::{Lines, Machine, Turn};
use crate::queues::Queues;
use crate::send::{Permit, Request};
use crate::settings::{Settings, TIMER_GRAIN};
use crate::store::Store;
use crate::work::{Carry, Out, Work};
use dynamodb_lock_core::settings::Kind;

/// What a held lock reports while it is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockEvent {
    /// A heartbeat failed (the original's `"error"` event), with what it means for the lease
    /// as the core's heartbeat machine judged it.
    Error(LockError, Risk),
    /// The lease is about to lapse without a successful heartbeat.
    Danger { remaining_ms: u64 },
    /// The lock is no longer ours.
    Lost(LostReason),
}

/// What a failed heartbeat means for the lease (the core's `heartbeat::Failure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Risk {
    /// No retry mends the failure, or the lease is down to where `"danger"` is told.
    pub at_risk: bool,
    /// What was left of the lease (a session lock's: the session's) when it failed.
    pub remaining: Duration,
}

pub trait EventSink: Send + Sync {
    fn emit(&self, lock_id: u64, event: LockEvent);
}

/// Where the events of locks nobody hears about go (`Shared::part`).
pub(crate) struct Quiet;

impl EventSink for Quiet {
    fn emit(&self, _: u64, _: LockEvent) {}
}

/// The heartbeat scheduler as held locks and their acquisitions see it (`heartbeat`
/// implements it).
pub trait Scheduler: Send + Sync {
    /// Watches a lock just taken, as the core's `heartbeat::first_step` says: its
    /// heartbeats, or, without any, the end of its lease. A lock without a lease (FailClosed)
    /// needs no watching.
    fn watch(&self, lock: &Arc<HeldLock>);
    /// For a release that waits for a heartbeat in flight: until the guard is dropped, the
    /// scheduler (if it has started) takes replies as they come. `None`: not started.
    fn hurry(&self) -> Option<Box<dyn Send + '_>>;
    /// The same scheduler, for locks that share it (a client's session): its cap holds for
    /// them too.
    fn share(&self) -> Box<dyn Scheduler>;
    /// A scheduler without a cap, run where this one runs (a Fifo client's queue entries).
    fn uncapped(&self) -> Box<dyn Scheduler>;
    /// Steps a lock again whose machine had parked it (`hold::Hold::update_ends`), at `due`,
    /// when the machine asks to be stepped (at once, as it came due while parked).
    fn resume(&self, lock: &Arc<HeldLock>, due: Instant);
}

/// What the held locks of one client share with it, and with one another.
pub struct Shared {
    /// The time line every held lock of the client, its session and its line count from.
    pub clock: Clock,
    pub store: Arc<dyn Store>,
    pub settings: Settings,
    pub events: Arc<dyn EventSink>,
    pub heartbeats: Box<dyn Scheduler>,
    /// The local line of acquisitions of one id, and the stand-backs.
    pub lines: Arc<Lines>,
    pub fifo: Queues,
    /// Fifo: what the locks that are queue entries share, made on first use. Their heartbeats
    /// report to nobody: a waiter learns from its entry's state.
    pub entries: OnceLock<Arc<Shared>>,
    /// Every task that speaks to DynamoDB for this client (requests from JavaScript, undoing
    /// writes of unknown outcome, the end of abandoned heartbeats): `close()` waits for them.
    pub tasks: tokio_util::task::TaskTracker,
    /// Set by `close()`: the client's background work makes its last attempt at once
    /// instead of pausing.
    pub closing: Arc<Cancel>,
    /// The client's work (`work::Work`: acquisitions, the ends of locks, undos, ...), with the
    /// settings of this part of the client.
    pub work: Arc<Work>,
    /// FailOpen with `session`: the session its locks are held through.
    pub sessions: Sessions,
    /// The client machine, which the client's session and Fifo entries share with it.
    pub machine: Arc<std::sync::Mutex<Machine>>,
    /// The handles of the client's held locks (with its session's and Fifo entries'), by id,
    /// while they are there: the client machine's events name the lock they are for.
    pub handles: Arc<std::sync::Mutex<HashMap<u64, Weak<HeldLock>>>>,
}

impl Shared {
    pub(crate) fn handles(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<HeldLock>>> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn new(
        clock: Clock,
        store: Arc<dyn Store>,
        settings: Settings,
        events: Arc<dyn EventSink>,
        heartbeats: Box<dyn Scheduler>,
        fifo: Queues,
    ) -> Shared {
        let machine = Machine::new(TIMER_GRAIN).with_line_patience(settings.protocol.line_patience());
        let machine = Arc::new(std::sync::Mutex::new(machine));
        let (tasks, closing) = (tokio_util::task::TaskTracker::new(), Arc::<Cancel>::default());
        let work = Work::new(store.clone(), settings.clone(), clock, closing.clone(), tasks.clone());
        Shared {
            clock,
            store,
            lines: Arc::new(Lines::new(clock, machine.clone())),
            settings,
            events,
            heartbeats,
            fifo,
            entries: OnceLock::new(),
            tasks,
            closing,
            work: Arc::new(work),
            sessions: Sessions::default(),
            machine,
            handles: Default::default(),
        }
    }

    /// What locks held for this client's own bookkeeping share (its session's item, its Fifo
    /// queue entries): its clock, store, client machine, locks' handles, tasks and close, with
    /// `settings` of their own, no events, and `heartbeats`.
    pub(crate) fn part(&self, settings: Settings, heartbeats: Box<dyn Scheduler>) -> Shared {
        let (store, closing, tasks) = (self.store.clone(), self.closing.clone(), self.tasks.clone());
        let work = Work::new(store, settings.clone(), self.clock, closing, tasks);
        Shared {
            clock: self.clock,
            store: self.store.clone(),
            settings,
            events: Arc::new(Quiet),
            heartbeats,
            lines: self.lines.clone(),
            fifo: Queues::default(),
            entries: OnceLock::new(),
            tasks: self.tasks.clone(),
            closing: self.closing.clone(),
            work: Arc::new(work),
            sessions: Sessions::default(),
            machine: self.machine.clone(),
            handles: self.handles.clone(),
        }
    }

    /// One consistent read of the item at `key`, as hard as the client's policy allows.
    pub async fn read(&self, key: &LockKey) -> Result<Option<LockRecord>, LockError> {
        let policy = self.settings.policy();
        let mut piece = self.work.start(key, Carry::default(), None, |env| {
            Task::once(Request::Get, policy, None, env.now)
        });
        match piece.done().await {
            Out::Once(Ended::Ok(op::Reply::Before(record))) => Ok(record),
            Out::Once(Ended::Failed { error, .. }) => Err(LockError::Store(error)),
            other => Err(LockError::Internal(format!("a read answered {other:?}"))),
        }
    }

    /// An operator's forced release of the lock at `key` (`force::Force`), from its item as
    /// the operator read it (`read`), each request given `timeout`: `now` frees it at once.
    pub async fn force_release(
        &self,
        key: &LockKey,
        now: bool,
        read: Option<LockRecord>,
        timeout: Duration,
    ) -> force::Out<StoreError> {
        let mut piece = self.work.start(key, Carry::default(), None, |env| {
            Task::force(force::Force::start(now, new_guid(), timeout, read, env))
        });
        let Out::Force(out) = piece.done().await else {
            unreachable!("a forced release ends as one")
        };
        out
    }

    pub(crate) fn machine(&self) -> std::sync::MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the client without releasing (`close()`, or the end of its environment): its
    /// session takes no more locks, and the client machine abandons the session's item and
    /// those of `held` it says (`client::Client::close`). An abandoned lock's heartbeat under
    /// way stops at once (`HeldLock::settled` waits for that), and the next acquisition of its
    /// id tries for itself. Returns the locks abandoned, the session's item first.
    pub fn close(&self, held: Vec<Arc<HeldLock>>) -> Vec<Arc<HeldLock>> {
        let session = self.sessions.current().take();
        let ids: Vec<u64> = held.iter().map(|l| l.id).collect();
        let abandoned: HashSet<u64> = self.machine().close(&ids).into_iter().collect();
        let item = session.map(|s| s.lock.clone());
        let locks: Vec<Arc<HeldLock>> = (item.into_iter().chain(held))
            .filter(|l| abandoned.contains(&l.id))
            .collect();
        for lock in &locks {
            lock.stopped();
        }
        self.lines.moved();
        locks
    }
}

/// A held lock's state: the core's `hold::Hold`, which decides its lease, heartbeats and
/// fate, with its `guid`s. It lives in its client's machine (`client::Client`), behind the
/// client's mutex, which is held only while the machine steps, never while a request is out:
/// what a write under way means for the others (a heartbeat on the wire for a release, an
/// update for the next heartbeat) is the machine's state.
pub type LockState = hold::Hold<Guid>;

/// A held lock's state in hand: the client's machine, under its mutex, at the lock's entry.
pub(crate) struct State<'a> {
    machine: std::sync::MutexGuard<'a, Machine>,
    id: u64,
}

impl State<'_> {
    /// Steps the lock's hold with `step`: the actions for the caller to carry out, and the
    /// events the client machine drew from them (of this lock, and of its session's members
    /// when it is a session's item), to deliver once the state is let go of.
    pub(crate) fn step(
        &mut self,
        step: impl FnOnce(&mut LockState) -> Vec<hold::Action<Guid>>,
    ) -> (Vec<hold::Action<Guid>>, Vec<(u64, client::Event)>) {
        let actions = self.machine.step(self.id, step);
        (actions, self.machine.events())
    }

    /// The client machine itself, for transitions that concern more than this lock.
    pub(crate) fn machine(&mut self) -> &mut Machine {
        &mut self.machine
    }
}

impl std::ops::Deref for State<'_> {
    type Target = LockState;
    fn deref(&self) -> &LockState {
        self.machine
            .hold(self.id)
            .expect("a held lock is in its client's machine until dropped")
    }
}

impl std::ops::DerefMut for State<'_> {
    fn deref_mut(&mut self) -> &mut LockState {
        self.machine
            .hold_mut(self.id)
            .expect("a held lock is in its client's machine until dropped")
    }
}

pub struct HeldLock {
    pub id: u64,
    pub key: LockKey,
    pub fencing_token: Option<u64>,
    /// What this lock shares with the client that took it.
    pub client: Arc<Shared>,
    pub(crate) wake: Notify,
    /// The heartbeat's writes are answered or dropped after a release asked to wait for them
    /// (`hold::Action::Release`), or after the heartbeat stopped with writes out.
    pub(crate) settled: Notify,
    /// The session the lock is held through: its lease is the session's.
    pub session: Option<Arc<Session>>,
    /// A semaphore's permits: the lock is its holder's attribute on the head.
    pub permit: Option<Permit>,
    /// The holder's own writes (a release, an update) go out one at a time, in call order.
    writer: Mutex<()>,
}

impl std::fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLock")
            .field("id", &self.id)
            .field("key", &self.key)
            .field("fencing_token", &self.fencing_token)
            .finish()
    }
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl HeldLock {
    /// A lock taken with the write sent at `sent_at`, held through `session` if it has one; its
    /// lease, if any, is as the client machine says (`client::leased_from`).
    pub fn new(
        client: Arc<Shared>,
        key: LockKey,
        guid: Guid,
        fencing_token: Option<u64>,
        sent_at: Instant,
        session: Option<Arc<Session>>,
    ) -> Self {
        let now = crate::clock::now();
        let s = &client.settings;
        let clock = client.clock;
        let state = hold::Hold::new(
            s.beat_config(),
            !s.protocol.heartbeat_period.is_zero(),
            guid,
            client::leased_from(s.protocol.kind, clock.time(sent_at), session.is_some()),
            clock.time(now),
            rand::random(),
        );
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        client.machine().taken(id, key.clone(), state, clock.time(now));
        HeldLock {
            id,
            key,
            fencing_token,
            client,
            wake: Notify::new(),
            settled: Notify::new(),
            session,
            permit: None,
            writer: Mutex::new(()),
        }
    }

    /// The lock, shared, where the client machine's events about it reach it.
    pub fn shared(self) -> Arc<Self> {
        let lock = Arc::new(self);
        lock.client.handles().insert(lock.id, Arc::downgrade(&lock));
        lock
    }

    /// The lock as a semaphore's holder of `permits`, keyed by the `guid` it was granted with.
    pub fn with_permits(mut self, permits: u64) -> Self {
        let key = self.state().guid;
        self.permit = Some(Permit { key, permits });
        self
    }

    /// The end of the lock's lease: its own, or, held through a session, the session's (in the
    /// past once the lock is lost or released); `None` without a lease (FailClosed), as the
    /// client machine says (`client::Client::until`). It is read from the machine, not from a
    /// timer: a process that was paused learns on its first read that the lease has gone by.
    pub fn lease_until(&self) -> Option<Instant> {
        let clock = self.client.clock;
        self.client.machine().until(self.id).map(|t| clock.base + t)
    }

    /// What is left of the lease at `now`; `None` without a lease (a held FailClosed lock).
    pub fn lease_remaining(&self, now: Instant) -> Option<Duration> {
        self.lease_until().map(|until| until.saturating_duration_since(now))
    }

    /// Stops this lock's heartbeats without releasing it (a Fifo entry nobody waits for; a
    /// holder that dies, in tests): the client machine abandons it, and its lease lapses. A
    /// heartbeat under way stops at once, dropping its writes (`settled` waits for that).
    pub fn abandon(&self) {
        self.client.machine().abandon(self.id);
        self.stopped();
        self.client.lines.moved();
    }

    /// Abandoned by the client machine: a heartbeat under way stops now.
    fn stopped(&self) {
        self.wake.notify_waiters();
    }

    /// Declares each of `locks`, abandoned by `Shared::close`, lost at its loss moment, as the
    /// client machine says (`client::Client::next_lapse`, `lapse`: a timer grain before its
    /// lease ends, or its session's), unless it was released meanwhile; no rival is granted a
    /// lock before its holder hears. One timer for them all, which does not keep Node alive;
    /// not one of the client's tasks: `close()` does not wait for it.
    pub async fn lapse(locks: Vec<Arc<HeldLock>>) {
        // `locks` are kept until then: the machine forgets a lock that is dropped.
        let Some(first) = locks.first() else { return };
        let clock = first.client.clock;
        loop {
            let next = first.client.machine().next_lapse();
            let Some(at) = next else { return };
            tokio::time::sleep_until(clock.base + at).await;
            let events = {
                let mut m = first.client.machine();
                m.lapse(clock.now());
                m.events()
            };
            first.deliver(events, None);
        }
    }

    /// Its acquisition found it held by another first (what its ending knows).
    #[cfg(test)]
    pub fn contended(&self) -> bool {
        let now = self.client.clock.now();
        (self
            .client
            .machine()
            .ending(self.id, Vec::new(), false, || [0; 64], now))
        .contended
    }

    /// Its release is called, or it was abandoned: no heartbeat starts (the client
    /// machine's).
    pub fn is_stopping(&self) -> bool {
        self.state().stopping
    }

    /// A release or update of this lock is under way.
    pub(crate) fn writing(&self) -> bool {
        self.writer.try_lock().is_err()
    }

    /// The lock's state, for one step of its machine.
    pub(crate) fn state(&self) -> State<'_> {
        State {
            machine: self.client.machine(),
            id: self.id,
        }
    }

    /// Tells the holders what the client machine decided (`events`, taken with the step that
    /// made them), each the lock the event names: this lock's own events, and those of the
    /// locks held through it when it is a session's item. A reported heartbeat failure carries
    /// `error` (a timeout, without one).
    pub(crate) fn deliver(&self, events: Vec<(u64, client::Event)>, error: Option<LockError>) {
        // A lock lost leaves its line (`client::Client::line_moves`).
        if events.iter().any(|(_, e)| matches!(e, client::Event::Lost(_))) {
            self.client.lines.moved();
        }
        for (id, event) in events {
            let event = match event {
                client::Event::Lost(lost) => LockEvent::Lost(lost.into()),
                client::Event::Danger { remaining } => LockEvent::Danger {
                    remaining_ms: remaining.as_millis() as u64,
                },
                client::Event::Failed(f) if f.report => LockEvent::Error(
                    error
                        .clone()
                        .unwrap_or_else(|| LockError::Store(self.client.store.timed_out())),
                    Risk {
                        at_risk: f.at_risk,
                        remaining: f.remaining,
                    },
                ),
                client::Event::Failed(_) => continue,
            };
            let lock = self.client.handles().get(&id).and_then(Weak::upgrade);
            if let Some(lock) = lock {
                lock.emit(event);
            }
        }
    }

    /// A notice of the heartbeat's writes settling, taken while the state says a write is on
    /// the wire (so that the heartbeat's answer cannot come before it is listened for).
    fn settle_notice(&self) -> Pin<Box<Notified<'_>>> {
        let mut notice = Box::pin(self.settled.notified());
        notice.as_mut().enable();
        notice
    }

    /// While a heartbeat's write is on the wire (`held::Release::Wait`): waits for the
    /// heartbeat to take its answer, which decides which `guid` the item carries, until the
    /// instant the lock's machine gave (`until`), when the write counts as dropped (its `guid`
    /// stays known, and a renewal that lands after a release is refused, as the item is
    /// released).
    async fn after_heartbeat(&self, settled: Pin<Box<Notified<'_>>>, until: Instant) {
        // Have the heartbeat's reply taken as soon as it comes.
        let _hurry = self.client.heartbeats.hurry();
        let _ = tokio::time::timeout_at(until, settled).await;
        self.state().settle();
    }

    pub(crate) fn emit(&self, event: LockEvent) {
        self.client.events.emit(self.id, event);
    }

    /// Ends the lock as the core's `ending::Ending` says: hands it to the next acquisition of
    /// this client in line, if one waits (one write that rotates `guid` and, for FailOpen,
    /// raises the fencing token and renews the lease), else releases it (a lock taken with the
    /// original's requests, with the original's one request); the client machine then records
    /// the end (`client::Client::ended`: the stand-back, the line). A hand-over whose taker
    /// gave up meanwhile is released under the new `guid`. `Ok(false)`: nothing of ours was
    /// left on the item (another holder took it).
    async fn end(&self, guids: Vec<Guid>, taken: bool) -> Result<bool, LockError> {
        let c = &self.client;
        let s = c.settings.protocol;
        let original = c.settings.original_requests;
        let end = (!original).then(|| c.machine().ending(self.id, guids, taken, new_guid, c.clock.now()));
        let guid = self.state().guid;
        let mut piece = c.work.start(&self.key, self.carry(), None, |env| {
            Task::end(match end {
                Some(end) => ending::Ending::start(s, end, env),
                None => ending::Ending::original(s, guid, self.fencing_token, env),
            })
        });
        let (outcome, landed_maybe) = loop {
            let Out::End { outcome, landed_maybe } = piece.done().await else {
                unreachable!("the end of a lock ends as one")
            };
            if let ending::Outcome::Handed {
                guid,
                fencing_token,
                sent_at,
            } = outcome
            {
                let turn = Turn::Handed {
                    guid,
                    fencing_token,
                    sent_at: c.clock.base + sent_at,
                    session: self.session.as_ref().map(|s| s.id.clone()),
                };
                if c.lines.pass(&self.key, turn).is_some() {
                    // Everyone in line gave up meanwhile: the machine releases the lock,
                    // still ours under `guid`, instead.
                    piece.unclaimed(guid);
                    continue;
                }
            }
            break (outcome, landed_maybe);
        };
        c.lines.ended(self.id, &outcome, landed_maybe);
        match outcome {
            ending::Outcome::Handed { .. } => Ok(true),
            ending::Outcome::Released { ours, .. } => {
                // A Fifo head released: the client machine marked it so in its registry.
                if c.settings.protocol.kind == Kind::Fifo && self.fencing_token.is_some() {
                    c.fifo.changed();
                }
                Ok(ours)
            }
            // The original's refusal is the user's own error, kept as `originalError`.
            ending::Outcome::NotOurs => Err(LockError::FailedToReleaseLock {
                original: (piece.refusal.take())
                    .filter(|_| original)
                    .unwrap_or_else(StoreError::condition_failed),
            }),
            ending::Outcome::Failed(error) => Err(LockError::Store(error)),
        }
    }

    /// What the lock's requests carry: held through its session if it has one (a hand-over
    /// keeps the lock in the session), a semaphore's holder's permits on the head.
    fn carry(&self) -> Carry {
        Carry {
            session: self.session.as_ref().map(|s| s.id.clone()),
            permit: self.permit.clone(),
            ..Carry::default()
        }
    }

    /// `lock.update({ data })`: writes (or, with `None`, removes) the holder's data at once,
    /// on the condition that the item still carries this lock's `guid`, as a heartbeat does;
    /// serialized with heartbeats and release. A failed condition means the lock is lost.
    pub async fn update_data(self: &Arc<Self>, data: Option<LockData>) -> Result<(), LockError> {
        if self.permit.is_some() {
            return Err(LockError::Store(crate::store::not_supported(
                "lock.update: a semaphore's or read/write lock's holders share one item, which keeps no holder's data"
                    .into(),
            )));
        }
        let _writing = self.writer.lock().await;
        let now = self.client.clock.now();
        let (update, by) = self.client.machine().update(self.id, now);
        let guids = match update {
            held::Update::Write { guids } => guids,
            held::Update::Lost(lost) => return Err(LockError::Lost(lost.into())),
            held::Update::Gone => return Err(LockError::Lost(LostReason::NotOwner)),
        };
        let mut policy = self.client.settings.policy();
        if let Some(by) = by {
            policy = policy.until(by);
        }
        let carry = Carry { data, ..self.carry() };
        let mut ends = UpdateEnds {
            lock: self,
            refused: false,
        };
        let req = Request::SetData { guids };
        let mut piece = (self.client.work).start(&self.key, carry, None, |env| Task::once(req, policy, None, env.now));
        let Out::Once(ended) = piece.done().await else {
            unreachable!("a request sent once ends as one")
        };
        // The write leaves `guid` as it is, so an earlier attempt that landed would not fail
        // the condition of a later one: a refusal means the item is no longer ours.
        ends.refused = matches!(ended, Ended::Refused { .. });
        drop(ends);
        match ended {
            Ended::Ok(_) => Ok(()),
            Ended::Refused { .. } => Err(LockError::Lost(LostReason::NotOwner)),
            Ended::Failed { error, .. } => Err(LockError::Store(error)),
        }
    }

    /// Releases the lock. Heartbeats stop at once; an in-flight heartbeat is awaited so that
    /// the release carries the newest `guid`. A release that failed may be called again.
    /// `Ok(false)`: a FailOpen or Fifo lock another holder had taken, which is quiet, as in the
    /// original, but freed nothing.
    pub async fn release(&self) -> Result<bool, LockError> {
        // No step of the critical section may count on a lock on its way out, and no heartbeat
        // starts.
        self.client.machine().stop(self.id);
        self.wake.notify_waiters();
        let _writing = self.writer.lock().await;
        let kind = self.client.settings.protocol.kind;
        let (guids, taken) = loop {
            let (wait, until) = {
                // Held through a session that is lost: so is the lock, which is released, not
                // handed over (the next acquisition in line starts a session of its own).
                let now = self.client.clock.now();
                match self.client.machine().release(self.id, kind, now) {
                    held::Release::Write { guids, taken } => break (guids, taken),
                    // As in the original: releasing a released FailOpen lock is quiet...
                    held::Release::Done => return Ok(true),
                    // ...and a FailClosed lock that is gone is not ours to release.
                    held::Release::NotOurs => return Err(LockError::not_released()),
                    // A heartbeat's write is on the wire: its answer decides the `guid`s.
                    held::Release::Wait { until } => (self.settle_notice(), self.client.clock.base + until),
                }
            };
            self.after_heartbeat(wait, until).await;
        };
        self.end(guids, taken).await
    }
}

/// Ends an update's write in the lock's machine however the write ends: answered, or its
/// future dropped or unwinding. Heartbeats never stay parked behind an update that is gone.
struct UpdateEnds<'a> {
    lock: &'a Arc<HeldLock>,
    /// The write was answered, and its condition failed: the lock is lost (its holder told
    /// once).
    refused: bool,
}

impl Drop for UpdateEnds<'_> {
    fn drop(&mut self) {
        let (end, events) = {
            let mut st = self.lock.state();
            let end = st.machine().update_ends(self.lock.id, self.refused);
            (end, st.machine().events())
        };
        self.lock.deliver(events, None);
        // Its heartbeat came due meanwhile: it starts now.
        if let Some(due) = end.step_at {
            self.lock
                .client
                .heartbeats
                .resume(self.lock, self.lock.client.clock.base + due);
        }
    }
}

// Sessions (`session: true`, `session.rs`): what a held lock knows of the session it is held
// through.

/// A client's session, made on the first acquisition that needs one.
#[derive(Default)]
pub struct Sessions {
    pub(crate) current: std::sync::Mutex<Option<Arc<Session>>>,
    /// One session is started at a time.
    pub(crate) starting: Mutex<()>,
}

impl Sessions {
    pub(crate) fn current(&self) -> std::sync::MutexGuard<'_, Option<Arc<Session>>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One session: its id and the held lock that is its item. Who is a member, whether the
/// session still lasts and who hears what is the client machine's (`client::Client`).
pub struct Session {
    pub id: String,
    pub lock: Arc<HeldLock>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish()
    }
}

impl Session {
    /// A session whose item is `lock`, just taken.
    pub fn new(id: String, lock: Arc<HeldLock>) -> Session {
        lock.client.machine().open_session(lock.id);
        Session { id, lock }
    }

    /// The session still speaks for its locks now (`client::Client::lasts`).
    pub fn alive(&self) -> bool {
        let item = &self.lock;
        item.client.machine().lasts(item.id, item.client.clock.now())
    }

    /// The session still speaks for its locks at `at`.
    #[cfg(test)]
    pub fn alive_at(&self, at: Instant) -> bool {
        let item = &self.lock;
        item.client.machine().lasts(item.id, item.client.clock.time(at))
    }

    /// The session ends (its client closes): it speaks for no lock any more.
    pub(crate) fn end(&self) {
        self.lock.client.machine().end_session(self.lock.id);
    }
}

impl Drop for HeldLock {
    /// Nothing refers to the lock any more: its client machine forgets it, and its client its
    /// handle.
    fn drop(&mut self) {
        self.client.machine().remove(self.id);
        self.client.handles().remove(&self.id);
    }
}
