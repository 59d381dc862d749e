//! A held lock: its key, current `guid`, lease and health, and the events it reports; and
//! what the held locks of one client share with it (`Shared`: store, settings, where events
//! go, the local line, the hand-off, Fifo's queue state, and the heartbeat scheduler, which
//! the layer above supplies through `Scheduler`). A lock's state is the core's `hold::Hold`:
//! a release asks it, waits for a heartbeat write on the wire when it says so, and then
//! writes with every `guid` the item may carry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use std::pin::Pin;

use tokio::sync::futures::Notified;
use tokio::sync::{Mutex, Notify};
use tokio::time::Instant;

use dynamodb_lock_core::request::Ended;
use dynamodb_lock_core::{ending, heartbeat, held, hold, session};

use crate::cancel::Cancel;
use crate::clock::Clock;
use crate::config::Kind;
use crate::drive::{once, run, Permit, Request, Target};
use crate::error::{LockError, LostReason, StoreError};
use crate::item::{new_guid, Guid, LockData, LockKey};
use crate::line::{Lines, Turn};
use crate::original;
use crate::queues::{Head, Queues};
use crate::settings::{Settings, TIMER_GRAIN};
use crate::store::Store;

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
    /// A session's renewal found these locks (by their items' `guid`s) revoked by an
    /// operator: the session tells each of them it is lost (`Session::report`).
    Revoked(Vec<Vec<u8>>),
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
    pub lines: Lines,
    pub fifo: Queues,
    /// Fifo: what the locks that are queue entries share, made on first use. Their heartbeats
    /// report to nobody: a waiter learns from its entry's state.
    pub entries: OnceLock<Arc<Shared>>,
    /// Every task that speaks to DynamoDB for this client (requests from JavaScript, undoing
    /// writes of unknown outcome, the end of abandoned heartbeats): `close()` waits for them.
    pub tasks: tokio_util::task::TaskTracker,
    /// Set by `close()`: the client's background work (`release::undo_later`) makes its last
    /// attempt at once instead of pausing.
    pub closing: Arc<Cancel>,
    /// FailOpen with `session`: the session its locks are held through.
    pub sessions: Sessions,
}

impl Shared {
    pub fn new(
        clock: Clock,
        store: Arc<dyn Store>,
        settings: Settings,
        events: Arc<dyn EventSink>,
        heartbeats: Box<dyn Scheduler>,
        fifo: Queues,
    ) -> Shared {
        Shared {
            clock,
            store,
            lines: Lines::new(clock, settings.protocol().line_patience()),
            settings,
            events,
            heartbeats,
            fifo,
            entries: OnceLock::new(),
            tasks: tokio_util::task::TaskTracker::new(),
            closing: Arc::default(),
            sessions: Sessions::default(),
        }
    }
}

/// End of a lock's lease on this process's monotonic clock, counted from when the last
/// successful write was sent. Readable without the state mutex, which a release or an
/// update holds while it writes: `lock.leaseRemainingMs` answers at once, from the deadline itself, so a process
/// that was paused learns on its first read that the lease has gone by, before any timer of
/// the scheduler has run.
pub struct Lease {
    base: Instant,
    /// Microseconds from `base` to the end of the lease, plus one; `ENDED` once the lock is
    /// lost or released; `NO_LEASE` for a lock without one (FailClosed).
    end: AtomicU64,
}

const ENDED: u64 = 0;
const NO_LEASE: u64 = u64::MAX;

impl Lease {
    fn new(base: Instant, until: Option<Instant>) -> Self {
        let lease = Lease {
            base,
            end: AtomicU64::new(NO_LEASE),
        };
        if let Some(until) = until {
            lease.set(until);
        }
        lease
    }

    /// A successful write renewed the lease until `until`.
    pub fn set(&self, until: Instant) {
        let micros = until.saturating_duration_since(self.base).as_micros() as u64;
        self.end
            .store(micros.saturating_add(1).min(NO_LEASE - 1), Ordering::SeqCst);
    }

    /// The lock is lost or released: nothing is left of its lease.
    pub fn end(&self) {
        self.end.store(ENDED, Ordering::SeqCst);
    }

    /// The end of the lease (in the past once it has ended); `None` without a lease.
    pub fn until(&self) -> Option<Instant> {
        match self.end.load(Ordering::SeqCst) {
            NO_LEASE => None,
            ENDED => Some(self.base),
            end => Some(self.base + Duration::from_micros(end - 1)),
        }
    }
}

/// Mutable state of a held lock, behind its mutex: the core's `hold::Hold`, which decides its
/// lease, heartbeats and fate, with its `guid`s. The mutex is held only while the machine
/// steps, never while a request is out: what a write under way means for the others (a
/// heartbeat on the wire for a release, an update for the next heartbeat) is the machine's
/// state.
pub type LockState = hold::Hold<Guid>;

pub struct HeldLock {
    pub id: u64,
    pub key: LockKey,
    pub fencing_token: Option<u64>,
    /// The `guid` the lock was taken (or handed over) with: a lock held through a session
    /// writes nothing while held, so its item carries this one.
    pub guid_taken: Guid,
    /// Others wanted this lock when it was taken: its release hands it over (`StandBack`).
    pub contended: bool,
    /// When this client learnt it holds the lock: a waiter elsewhere has waited for this
    /// holder at most since then, which bounds its pause (`StandBack`).
    pub taken_at: Instant,
    /// When the heartbeat scheduler first steps the lock, as its state says; `None` for a lock
    /// it never steps (without a lease).
    pub(crate) first_step: Option<Instant>,
    /// What this lock shares with the client that took it.
    pub client: Arc<Shared>,
    /// Set by `release()` before it waits for the state: no heartbeat starts after it.
    pub(crate) stopping: AtomicBool,
    /// Set by `abandon()`: a heartbeat under way stops at once, without its answer.
    abandoned: AtomicBool,
    left_line: AtomicBool,
    pub(crate) wake: Notify,
    /// The heartbeat's writes are answered or dropped after a release asked to wait for them
    /// (`hold::Action::Release`), or after the heartbeat stopped with writes out.
    pub(crate) settled: Notify,
    pub lease: Lease,
    /// The session the lock is held through: its lease is the session's.
    pub session: Option<Arc<Session>>,
    /// A semaphore's permits: the lock is its holder's attribute on the head.
    pub permit: Option<Permit>,
    pub(crate) state: std::sync::Mutex<LockState>,
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
    /// A lock taken with the write sent at `leased_from` (FailOpen, Fifo: its lease counts from
    /// then, `leaseDurationMs` long; `None`: a lock without a lease, FailClosed).
    pub fn new(
        client: Arc<Shared>,
        key: LockKey,
        guid: Guid,
        fencing_token: Option<u64>,
        leased_from: Option<Instant>,
    ) -> Self {
        let now = crate::clock::now();
        let s = &client.settings;
        let clock = client.clock;
        let lease_until = leased_from.map(|sent| sent + s.lease());
        let state = hold::Hold::new(
            s.beat_config(),
            s.heartbeat_period.is_some(),
            guid,
            leased_from.map(|sent| clock.time(sent)),
            clock.time(now),
            rand::random(),
        );
        HeldLock {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            key,
            fencing_token,
            guid_taken: guid,
            contended: false,
            taken_at: now,
            first_step: state.poll_timeout().map(|t| clock.base + t),
            client,
            stopping: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            left_line: AtomicBool::new(false),
            wake: Notify::new(),
            settled: Notify::new(),
            lease: Lease::new(clock.base, lease_until),
            session: None,
            permit: None,
            state: std::sync::Mutex::new(state),
            writer: Mutex::new(()),
        }
    }

    /// The lock as a semaphore's holder of `permits`, keyed by the `guid` it was granted with.
    pub fn with_permits(mut self, permits: u64) -> Self {
        let key = self.state.get_mut().unwrap_or_else(|p| p.into_inner()).guid;
        self.permit = Some(Permit { key, permits });
        self
    }

    /// The end of the lock's lease: its own, or, held through a session, the session's (in the
    /// past once the lock is lost or released); `None` without a lease (FailClosed).
    pub fn lease_until(&self) -> Option<Instant> {
        match (self.lease.until(), &self.session) {
            (None, Some(s)) => s.lock.lease.until(),
            (own, _) => own,
        }
    }

    /// What is left of the lease at `now`; `None` without a lease (a held FailClosed lock).
    pub fn lease_remaining(&self, now: Instant) -> Option<Duration> {
        self.lease_until().map(|until| until.saturating_duration_since(now))
    }

    /// Stops this lock's heartbeats without releasing it: its lease lapses. A heartbeat under
    /// way stops at once, dropping its writes (`settled` waits for that). The lease is kept:
    /// the lock is held until it ends, when `lapse_at_end` reports it lost.
    pub fn abandon(&self) {
        // Held through a session (abandoned first): the lock lapses with its item's lease.
        let mut through = None;
        if let Some(s) = &self.session {
            s.leave(self);
            through = s.lock.lease.until().map(|u| self.client.clock.time(u));
        }
        self.abandoned.store(true, Ordering::SeqCst);
        self.stopping.store(true, Ordering::SeqCst);
        self.state().abandon(through);
        self.wake.notify_waiters();
        self.leave_line();
    }

    /// For an abandoned lock: steps it when its machine says (`hold::Hold::abandon`: at the
    /// loss moment of its lease, or of its session's, a timer grain before its end), where it
    /// is reported lost (`LeaseExpired`) once, unless it was released or lost meanwhile. No
    /// rival is granted the lock before its holder hears. A lock without a lease (FailClosed)
    /// stays held. Not one of the client's tasks: `close()` does not wait for it.
    pub async fn lapse_at_end(self: Arc<Self>) {
        let clock = self.client.clock;
        loop {
            let Some(at) = self.state().poll_timeout() else { return };
            if at > clock.now() {
                tokio::time::sleep_until(clock.base + at).await;
                continue;
            }
            let actions = self
                .state()
                .handle_timeout(clock.now(), None, Duration::ZERO, Duration::ZERO);
            if actions.iter().any(|a| matches!(a, hold::Action::Lost(_))) {
                self.emit(LockEvent::Lost(LostReason::LeaseExpired));
            }
            return;
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// A release or update of this lock is under way.
    pub(crate) fn writing(&self) -> bool {
        self.writer.try_lock().is_err()
    }

    /// The lock's state, for one step of its machine.
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, LockState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Once no heartbeat write of this lock is on the wire: nothing more goes out for it.
    pub async fn settled(&self) {
        let notice = self.state().beating.then(|| self.settle_notice());
        if let Some(notice) = notice {
            self.after_heartbeat(notice).await;
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
    /// heartbeat to take its answer, which decides which `guid` the item carries. The wait
    /// ends after a request timeout at most: the write then counts as dropped (its `guid`
    /// stays known, and a renewal that lands after a release is refused, as the item is
    /// released).
    async fn after_heartbeat(&self, settled: Pin<Box<Notified<'_>>>) {
        // Have the heartbeat's reply taken as soon as it comes.
        let _hurry = self.client.heartbeats.hurry();
        let _ = tokio::time::timeout(self.client.settings.request_timeout, settled).await;
        self.state().settle();
    }

    pub(crate) fn emit(&self, event: LockEvent) {
        if matches!(event, LockEvent::Lost(_)) {
            self.lease.end();
            self.leave_line();
            if let Some(s) = &self.session {
                s.leave(self);
            }
        }
        self.client.events.emit(self.id, event);
    }

    /// This lock is done with: the next acquisition of its id by this client tries for
    /// itself. Once per lock.
    fn leave_line(&self) {
        if !self.left_line.swap(true, Ordering::SeqCst) {
            self.client.lines.leave(&self.key);
        }
    }

    /// Ends the lock as the core's `ending::Ending` says: hands it to the next acquisition of
    /// this client in line, if one waits (one write that rotates `guid` and, for FailOpen,
    /// raises the fencing token and renews the lease), else releases it; then stands back from
    /// it if the core says so. A hand-over whose taker gave up meanwhile is released under the
    /// new `guid`. `Ok(false)`: nothing of ours was left on the item (another holder took it).
    async fn end(&self, guids: Vec<Guid>, taken: bool) -> Result<bool, LockError> {
        let c = &self.client;
        let (lost, landed_maybe) = {
            let st = self.state();
            (st.lost.is_some(), st.release_landed_maybe)
        };
        let end = ending::End {
            guids,
            lost,
            taken,
            next: c.lines.has_waiters(&self.key).then(new_guid),
            held_for: crate::clock::since(self.taken_at),
            contended: self.contended,
            landed_maybe,
        };
        let to = self.target();
        let mut clock = Clock::start();
        let (mut m, mut step) = ending::Ending::start(c.settings.protocol(), end, &clock.env(false));
        loop {
            let result = match run(&mut m, step, clock, &to).await {
                ending::Outcome::Handed {
                    guid,
                    fencing_token,
                    sent_at,
                } => {
                    let turn = Turn::Handed {
                        guid,
                        fencing_token,
                        sent_at: clock.base + sent_at,
                        session: self.session.as_ref().map(|s| s.id.clone()),
                    };
                    if c.lines.pass(&self.key, turn).is_some() {
                        // Everyone in line gave up meanwhile: the machine releases the lock,
                        // still ours under `guid`, instead.
                        clock = Clock::start();
                        (m, step) = m.unclaimed(guid, &clock.env(false));
                        continue;
                    }
                    self.state().release_done();
                    return Ok(true);
                }
                ending::Outcome::Released { stand_back, ours } => {
                    if let Some(pause) = stand_back {
                        c.lines.released(&self.key, pause);
                    }
                    if let (Kind::Fifo, Some(token)) = (c.settings.kind, self.fencing_token) {
                        c.fifo.released(&self.key.partition, token);
                    }
                    Ok(ours)
                }
                ending::Outcome::NotOurs => Err(LockError::FailedToReleaseLock {
                    original: StoreError::condition_failed(),
                }),
                ending::Outcome::Failed(error) => {
                    self.state().release_failed(m.landed_maybe());
                    Err(LockError::Store(error))
                }
            };
            self.leave_line();
            if result.is_ok() {
                self.state().release_done();
            }
            return result;
        }
    }

    /// Where the lock's requests go: its item (a semaphore's holder: its permits on the head),
    /// held through its session if it has one (a hand-over keeps the lock in the session).
    fn target(&self) -> Target<'_> {
        let c = &self.client;
        Target {
            session: self.session.as_ref().map(|s| s.id.as_str()),
            permit: self.permit.as_ref(),
            ..Target::item(&*c.store, &self.key, &c.settings)
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
        let update = self.state().update();
        let guids = match update {
            held::Update::Write { guids } => guids,
            held::Update::Lost(held::Lost::Lapsed) => return Err(LockError::Lost(LostReason::LeaseExpired)),
            held::Update::Lost(held::Lost::Taken) | held::Update::Gone => {
                return Err(LockError::Lost(LostReason::NotOwner))
            }
        };
        let mut policy = self.client.settings.policy();
        if let Some(until) = self.lease_until() {
            // The update's times count from now (`drive::once`).
            policy = policy.until(held::update_time(until.saturating_duration_since(crate::clock::now())));
        }
        let to = Target {
            data: data.as_ref(),
            ..self.target()
        };
        let mut ends = UpdateEnds {
            lock: self,
            ended: false,
        };
        let ended = once(&to, Request::SetData { guids }, policy, None).await;
        // The write leaves `guid` as it is, so an earlier attempt that landed would not fail
        // the condition of a later one: a refusal means the item is no longer ours.
        if ends.end(matches!(ended, Ended::Refused { .. })) {
            self.emit(LockEvent::Lost(LostReason::NotOwner));
        }
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
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(s) = &self.session {
            s.leave(self);
        }
        // No step of the critical section may count on a lock on its way out.
        self.lease.end();
        self.wake.notify_waiters();
        let _writing = self.writer.lock().await;
        let kind = self.client.settings.kind;
        let (guids, taken) = loop {
            let wait = {
                let mut st = self.state();
                // Held through a session that is lost: so is the lock, which is released, not
                // handed over (the next acquisition in line starts a session of its own).
                if st.lost.is_none() && self.session.as_ref().is_some_and(|s| !s.alive()) {
                    st.lose(held::Lost::Lapsed);
                }
                match st.release(kind) {
                    held::Release::Write { guids, taken } => break (guids, taken),
                    // As in the original: releasing a released FailOpen lock is quiet...
                    held::Release::Done => return Ok(true),
                    // ...and a FailClosed lock that is gone is not ours to release.
                    held::Release::NotOurs => {
                        return Err(LockError::FailedToReleaseLock {
                            original: StoreError::condition_failed(),
                        })
                    }
                    // A heartbeat's write is on the wire: its answer decides the `guid`s.
                    held::Release::Wait => self.settle_notice(),
                }
            };
            self.after_heartbeat(wait).await;
        };
        if self.client.settings.original_requests {
            // The original's release: one request with the newest guid, even after a loss.
            let guid = self.state().guid;
            let result = original::release(
                &*self.client.store,
                &self.client.settings,
                &self.key,
                &guid,
                self.fencing_token,
            )
            .await;
            if result.is_ok() {
                self.state().release_done();
            }
            return result.map(|()| true);
        }
        self.end(guids, taken).await
    }
}

/// Ends an update's write in the lock's machine however the write ends: answered (`end`), or
/// its future dropped or unwinding. Heartbeats never stay parked behind an update that is gone.
struct UpdateEnds<'a> {
    lock: &'a Arc<HeldLock>,
    ended: bool,
}

impl UpdateEnds<'_> {
    /// The write was answered; `refused`: its condition failed. Whether that lost the lock.
    fn end(&mut self, refused: bool) -> bool {
        self.ended = true;
        let end = self.lock.state().update_ends(refused);
        // Its heartbeat came due meanwhile: it starts now.
        if let Some(due) = end.step_at {
            self.lock
                .client
                .heartbeats
                .resume(self.lock, self.lock.client.clock.base + due);
        }
        end.lost
    }
}

impl Drop for UpdateEnds<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.end(false);
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

/// One session: its id, the held lock that is its item, and the locks held through it. Who
/// is a member, whether the session still lasts and who hears what is the core's
/// `session::Session`; this keeps it, on the item's time line, with the members' handles.
pub struct Session {
    pub id: String,
    pub lock: Arc<HeldLock>,
    members: std::sync::Mutex<Members>,
}

struct Members {
    machine: session::Session<u64, Guid>,
    handles: HashMap<u64, Weak<HeldLock>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish()
    }
}

impl Session {
    /// A session whose item is `lock`, just taken.
    pub fn new(id: String, lock: Arc<HeldLock>) -> Session {
        Session {
            id,
            lock,
            members: std::sync::Mutex::new(Members {
                machine: session::Session::new(TIMER_GRAIN),
                handles: HashMap::new(),
            }),
        }
    }

    /// `at` and the end of the item's lease, on the client's time line.
    fn times(&self, at: Instant) -> (heartbeat::Time, Option<heartbeat::Time>) {
        let clock = self.lock.client.clock;
        (clock.time(at), self.lock.lease.until().map(|u| clock.time(u)))
    }

    /// The session still speaks for its locks now (`session::Session::lasts`).
    pub fn alive(&self) -> bool {
        self.alive_at(crate::clock::now())
    }

    /// The session still speaks for its locks at `at`.
    pub fn alive_at(&self, at: Instant) -> bool {
        let (now, until) = self.times(at);
        self.members().machine.lasts(now, until)
    }

    /// An acquisition through the session had its lock given back as expired, after
    /// `restarts` restarts: whether it starts again through a new session.
    pub fn restarts(&self, restarts: u32, retry_count: u32, until_aborted: bool) -> bool {
        let (now, until) = self.times(crate::clock::now());
        self.members()
            .machine
            .restarts(now, until, restarts, retry_count, until_aborted)
    }

    /// `lock` is held through this session from now on. `false`: the session does not last,
    /// and the lock is lost already.
    pub fn join(&self, lock: &Arc<HeldLock>) -> bool {
        let mut m = self.members();
        let (now, until) = self.times(crate::clock::now());
        if !m.machine.join(lock.id, lock.guid_taken, now, until) {
            return false;
        }
        m.handles.insert(lock.id, Arc::downgrade(lock));
        true
    }

    /// `lock` is released, handed on, abandoned or lost: the session no longer speaks for it.
    pub fn leave(&self, lock: &HeldLock) {
        let mut m = self.members();
        m.machine.leave(lock.id);
        m.handles.remove(&lock.id);
    }

    /// The session's item is released or abandoned: it speaks for no lock any more (its
    /// members are released or abandoned with it).
    pub(crate) fn end(&self) {
        let mut m = self.members();
        m.machine.end();
        m.handles.clear();
    }

    fn members(&self) -> std::sync::MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the session's item reports, as the core says who hears it: every member an error
    /// or `"danger"`; the loss, every member once (none joins after it); a revocation, the
    /// members revoked, each lost.
    pub(crate) fn report(&self, event: LockEvent) {
        let (told, event) = {
            // Under the members' mutex: a lock joining now finds the session lost.
            let mut m = self.members();
            let told = match &event {
                LockEvent::Lost(_) => m.machine.lose(),
                LockEvent::Revoked(guids) => {
                    let guids: Vec<Guid> = guids.iter().filter_map(|g| Guid::try_from(g.as_slice()).ok()).collect();
                    m.machine.revoke(&guids)
                }
                _ => m.machine.members(),
            };
            let leaving = !matches!(event, LockEvent::Error(..) | LockEvent::Danger { .. });
            let locks: Vec<Arc<HeldLock>> = told
                .iter()
                .filter_map(|id| match leaving {
                    true => m.handles.remove(id),
                    false => m.handles.get(id).cloned(),
                })
                .filter_map(|l| l.upgrade())
                .collect();
            let event = match event {
                LockEvent::Revoked(_) => LockEvent::Lost(LostReason::NotOwner),
                other => other,
            };
            (locks, event)
        };
        for lock in told {
            if lock.is_stopping() {
                continue;
            }
            if event == LockEvent::Lost(LostReason::NotOwner) {
                lock.state().lose(held::Lost::Taken);
            }
            lock.emit(event.clone());
        }
    }
}

impl Head for HeldLock {
    fn seen_lost(&self) -> bool {
        self.state().lost.is_some()
    }

    fn is_stopping(&self) -> bool {
        HeldLock::is_stopping(self)
    }
}
