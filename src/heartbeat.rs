//! One scheduler for every held FailOpen lock of the process: one queue of locks by due time
//! in a single task, not a timer per lock. First heartbeats are spread uniformly over the period so that locks
//! taken together do not renew together; later ones keep their phase and are
//! delayed, never bunched, after a stall. Heartbeats run with a bound on how many are in
//! flight and an optional cap on how many start per second.
//!
//! The scheduler runs on a thread of its own with its own single-threaded runtime and its own
//! connections. While requests are out it does not wake for each reply: it sleeps until the
//! next group of heartbeats starts (or a few milliseconds, when every slot is taken) and then
//! takes every reply that has arrived in one turn of its runtime.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::Poll;
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use dynamodb_lock_core::heartbeat as machine;
use dynamodb_lock_core::hold;
use dynamodb_lock_core::original;
use dynamodb_lock_core::request::Purpose;

use crate::clock::unix_now_ms;
use crate::error::{LockError, StoreError};
use crate::item::{new_guid, Guid};
use crate::lock::{HeldLock, Scheduler};
use crate::send::{send, Request, Target};
use crate::settings::TIMER_GRAIN;
use crate::stats::Stats;
use crate::store::{revoked, timed_out};

/// Heartbeats in flight at once, per scheduler, to begin with. Each in-flight request holds a
/// connection; 64 at a few milliseconds each sustain thousands of heartbeats per second.
pub(crate) const FIRST_IN_FLIGHT: usize = 64;

/// The most heartbeats in flight at once, however slow the round trip (and the connections
/// the scheduler may keep open).
pub(crate) const MOST_IN_FLIGHT: usize = crate::store::MOST_HEARTBEAT_CONNECTIONS;

/// How far behind schedule the rate cap may catch up at once, so that timer granularity does
/// not lower the rate below the cap.
const CAP_CATCH_UP: Duration = Duration::from_millis(20);

/// Under a cap, writes whose slots fall within this much of each other start together, one
/// wake-up for several of them; the rate over any second stays within 0.5% of the cap.
const CAP_BATCH: Duration = Duration::from_millis(5);

/// Heartbeats due within this share of their period are started together, one wake-up for
/// several of them: never later than due, at most 50 ms early, and still spread over the
/// period in twenty or more groups.
const BATCH_SHARE: u32 = 20;
const BATCH_MAX: Duration = Duration::from_millis(50);

/// While heartbeat requests are out, the scheduler does not wake for each reply: it looks for
/// replies when it starts the next heartbeats, if that is within two of their batch windows,
/// and every this often when the backend is slow or busy and every slot is taken. One
/// wake-up of its thread then serves every reply that came meanwhile, and replies are taken
/// no later than two batch windows (a tenth of the period, 100 ms at most), which no lease
/// notices.
const REPLY_PAUSE: Duration = Duration::from_millis(5);

/// How the scheduler waits for replies while requests are out.
#[derive(Clone, Copy)]
enum Pause {
    /// Parks its own thread, so that replies queue up in the kernel without waking it, then
    /// lets its runtime take them all at once.
    Thread,
    /// Sleeps on a runtime timer: for a scheduler that shares its runtime (and its tests).
    Timer,
}

impl Pause {
    /// Until `until`, or until a heartbeat due sooner is scheduled. `unsent`: heartbeats
    /// started since the runtime last had a turn, whose writes are still to go out.
    async fn wait(self, until: Instant, inbox: &Inbox, unsent: bool) {
        match self {
            Pause::Thread => {
                // The writes go out before the thread sleeps, not after: a slot's turn then
                // takes a round trip and one pause at most, not two pauses.
                if unsent {
                    tokio::task::yield_now().await;
                }
                std::thread::park_timeout(until.saturating_duration_since(crate::clock::now()));
                // One turn of the runtime: readiness of every socket, and due timers.
                tokio::task::yield_now().await;
            }
            // A pause that is already over still gives the runtime a turn: a sleep already
            // due would be ready at once, and the scheduler would not hand back its thread.
            Pause::Timer if until <= crate::clock::now() => tokio::task::yield_now().await,
            Pause::Timer => tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = inbox.wake.notified() => {}
            },
        }
    }
}

/// Start slots for heartbeat writes under a per-second cap. First attempts and retries draw
/// from the same slots, so the cap holds while requests fail and are retried.
pub(crate) struct Pacer {
    spacing: Duration,
    next: std::sync::Mutex<Instant>,
}

impl Pacer {
    fn new(max_per_second: u32) -> Option<Pacer> {
        (max_per_second > 0).then(|| Pacer {
            spacing: Duration::from_secs(1) / max_per_second,
            next: std::sync::Mutex::new(crate::clock::now()),
        })
    }

    /// The earliest instant a write may start.
    fn next_free(&self) -> Instant {
        *self.next.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the first slot at or after `at` (or up to `CAP_CATCH_UP` before it, if the slots
    /// fell behind) and returns its start.
    fn reserve(&self, at: Instant) -> Instant {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let slot = (*next).max(at.checked_sub(CAP_CATCH_UP).unwrap_or(at));
        *next = slot + self.spacing;
        slot
    }
}

/// The bound on heartbeats in flight, which follows the round trip: by Little's law the
/// requests out at once are the rate at which heartbeats start times how long each takes, so
/// at 500 heartbeats a second and 200 ms each, 100 are out. When heartbeats are due and every
/// slot is taken while the backend is answering, the bound grows by the number overdue (at
/// least doubling, at most eightfold, up to `MOST_IN_FLIGHT`; only doubling once a growth did
/// not pay): a slow backend does not hold heartbeats back until their leases lapse. Each
/// growth is judged four round trips later, once the requests it let out have come back: if
/// the round trip grew with the bound, so that the backend answers not much more per second
/// than before (it does not keep up with the heartbeat rate and queues what it is sent), the
/// bound goes back to where it was and does not grow again for `GROWTH_HOLD`. More requests
/// out would only wait longer in the backend's queue, hold more connections and memory, and
/// slow every other request sent to it (acquisitions first). Requests that hang (a
/// black-holed connection) answer nothing and do not raise the bound.
pub(crate) struct Flight {
    slots: Arc<Semaphore>,
    size: AtomicUsize,
    /// Slots to take out of use as soon as they are free, after the bound went back down.
    excess: AtomicUsize,
    /// Smoothed round trip of answered heartbeat writes, in microseconds (0: none yet).
    round_trip_micros: AtomicU64,
    /// When a heartbeat write was last answered.
    answered_at: std::sync::Mutex<Option<Instant>>,
    growth: std::sync::Mutex<Growth>,
    /// Instants at which heartbeats out must act, by lock id: the scheduler's pauses for
    /// replies end no later than the first.
    watched: std::sync::Mutex<BTreeSet<(Instant, u64)>>,
}

/// The last growth of the bound, until it is judged, and how long growth is held off.
#[derive(Default)]
struct Growth {
    /// When the bound grew, from what size, and the round trip then.
    last: Option<(Instant, usize, Duration)>,
    hold_until: Option<Instant>,
    /// Whether a growth did not pay: later ones only double the bound.
    unpaid: bool,
}

/// How long the bound stays put after a growth that did not pay: the backend is tried with
/// more requests out again after that.
const GROWTH_HOLD: Duration = Duration::from_secs(10);

/// An instant at which a heartbeat out must act (report danger or loss) even while the
/// scheduler pauses for replies, watched until dropped (`Flight::watched`).
struct Watch<'a> {
    flight: &'a Flight,
    key: Option<(Instant, u64)>,
}

impl Watch<'_> {
    fn set(&mut self, id: u64, at: Instant) {
        let mut watched = self.flight.watched.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = self.key.take() {
            watched.remove(&old);
        }
        watched.insert((at, id));
        self.key = Some((at, id));
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.flight
                .watched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
        }
    }
}

impl Flight {
    fn new() -> Flight {
        Flight {
            slots: Arc::new(Semaphore::new(FIRST_IN_FLIGHT)),
            size: AtomicUsize::new(FIRST_IN_FLIGHT),
            round_trip_micros: AtomicU64::new(0),
            excess: AtomicUsize::new(0),
            answered_at: Default::default(),
            growth: Default::default(),
            watched: Default::default(),
        }
    }

    fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// The earliest instant watched.
    fn next_watch(&self) -> Option<Instant> {
        self.watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first()
            .map(|&(at, _)| at)
    }

    /// The smoothed round trip of answered heartbeat writes (zero before the first).
    fn round_trip(&self) -> Duration {
        Duration::from_micros(self.round_trip_micros.load(Ordering::Relaxed))
    }

    /// A write sent at `sent` was answered at `now`.
    fn answered(&self, sent: Instant, now: Instant) {
        let sample = now.saturating_duration_since(sent).as_micros().min(u64::MAX as u128) as u64;
        let old = self.round_trip_micros.load(Ordering::Relaxed);
        let new = if old == 0 { sample } else { old - old / 8 + sample / 8 };
        self.round_trip_micros.store(new.max(1), Ordering::Relaxed);
        *self.answered_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
    }

    /// Heartbeats are due and no slot is free: the bound may grow (see `Flight`).
    fn behind(&self, now: Instant, overdue: impl FnOnce() -> usize) {
        let size = self.size();
        let round_trip = self.round_trip();
        let answered = *self.answered_at.lock().unwrap_or_else(|p| p.into_inner());
        if answered.is_none_or(|at| now > at + 2 * round_trip) {
            return;
        }
        let mut growth = self.growth.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, from, then)) = growth.last {
            if now < at + 4 * round_trip.max(then) {
                return;
            }
            growth.last = None;
            // Judged at the first shortage four round trips after the growth, once the
            // backend's queue has grown with it; a shortage much later says nothing of it (the
            // growth took away the one it met).
            if now < at + 16 * round_trip.max(then) && !paid(from, size, then, round_trip) {
                growth.unpaid = true;
                self.resize(from);
                growth.hold_until = Some(now + GROWTH_HOLD);
                return;
            }
        }
        if size >= MOST_IN_FLIGHT || growth.hold_until.is_some_and(|until| now < until) {
            return;
        }
        let new = if growth.unpaid {
            2 * size
        } else {
            (size + overdue()).clamp(2 * size, 8 * size)
        };
        let new = new.min(MOST_IN_FLIGHT);
        growth.last = Some((now, size, round_trip));
        self.resize(new);
    }

    /// Sets the bound: new slots are free at once, slots taken out go as they are freed.
    fn resize(&self, new: usize) {
        let size = self.size.swap(new, Ordering::Relaxed);
        if new > size {
            let back = self.excess.load(Ordering::Relaxed).min(new - size);
            self.excess.fetch_sub(back, Ordering::Relaxed);
            self.slots.add_permits(new - size - back);
        } else {
            self.excess.fetch_add(size - new, Ordering::Relaxed);
            self.trim();
        }
    }

    /// Takes out of use the free slots above the bound.
    fn trim(&self) {
        let excess = self.excess.load(Ordering::Relaxed);
        if excess > 0 {
            let gone = self.slots.forget_permits(excess);
            self.excess.fetch_sub(gone, Ordering::Relaxed);
        }
    }
}

/// Whether the bound's growth from `from` to `to` slots paid: the backend answers at least
/// half of the growth more per second (by Little's law, slots over the round trip). A backend
/// that does not keep up answers at the same rate with every request waiting longer; one that
/// shares its time among other clients' requests as well answers ours faster only at their
/// expense, and by less than half of the growth while theirs are as many as ours.
fn paid(from: usize, to: usize, before: Duration, after: Duration) -> bool {
    // to / after >= from / before * (1 + (to / from - 1) / 2), in whole numbers.
    let (from, to) = (from as u128, to as u128);
    let (before, after) = (before.as_micros().max(1), after.as_micros().max(1));
    2 * to * before >= after * (from + to)
}

/// A heartbeat to schedule: when it is due, how early it may start to share a wake-up with
/// others, and its lock.
type Due = (Instant, Duration, Weak<HeldLock>);

/// The heartbeats to start, by when they are due; those due at the same instant in the order
/// they came.
#[derive(Default)]
struct Heap {
    entries: BTreeMap<(Instant, u64), (Duration, Weak<HeldLock>)>,
    seq: u64,
}

impl Heap {
    fn push(&mut self, (due, early, lock): Due) {
        self.seq += 1;
        self.entries.insert((due, self.seq), (early, lock));
    }
}

/// A client's way to the scheduler, started on first use (it needs the runtime): the
/// process-wide one, or the client's own when it caps heartbeats per second.
#[derive(Clone)]
pub struct LazyHeartbeats {
    cap: Option<u32>,
    /// The client's own scheduler runs as a task of the runtime that first uses it, not on a
    /// thread of its own (tests under paused time).
    in_runtime: bool,
    /// Shared with the schedulers `share` hands out (a client's session's).
    own: Arc<OnceLock<Arc<Heartbeats>>>,
}

static SHARED: OnceLock<Arc<Heartbeats>> = OnceLock::new();

impl LazyHeartbeats {
    pub fn new(cap: Option<u32>) -> Self {
        LazyHeartbeats {
            cap,
            in_runtime: false,
            own: Arc::default(),
        }
    }

    /// A scheduler of the client's own, capped at `cap` (0: no cap), that runs as a task of
    /// the runtime that first uses it.
    #[cfg(test)]
    pub fn in_runtime(cap: u32) -> Self {
        LazyHeartbeats {
            in_runtime: true,
            ..LazyHeartbeats::new(Some(cap))
        }
    }

    pub fn get(&self) -> &Arc<Heartbeats> {
        match self.cap {
            None => SHARED.get_or_init(|| Heartbeats::start(0, false)),
            Some(cap) => self.own.get_or_init(|| Heartbeats::start(cap, self.in_runtime)),
        }
    }
}

impl Scheduler for LazyHeartbeats {
    /// Watches a lock just taken from when its state says it is first stepped: its first
    /// heartbeat, at a random point of its period so that locks taken together renew evenly
    /// spread over the period, or, without heartbeats, the end of its lease. Times count from
    /// when the write that took the lock was sent, as its lease does: after an answer slower
    /// than the period, the first heartbeat starts at once.
    fn watch(&self, lock: &Arc<HeldLock>) {
        let heartbeats = self.get();
        let first = lock.state().poll_timeout();
        if let Some(first) = first {
            heartbeats.schedule(lock, lock.client.clock.base + first);
        }
    }

    fn hurry(&self) -> Option<Box<dyn Send + '_>> {
        let started = match self.cap {
            None => SHARED.get(),
            Some(_) => self.own.get(),
        };
        started.map(|h| Box::new(h.hurry()) as Box<dyn Send + '_>)
    }

    fn resume(&self, lock: &Arc<HeldLock>, due: Instant) {
        self.get().schedule(lock, due);
    }

    fn share(&self) -> Box<dyn Scheduler> {
        Box::new(self.clone())
    }

    /// The process-wide scheduler; in a runtime, one more of its own there.
    fn uncapped(&self) -> Box<dyn Scheduler> {
        Box::new(LazyHeartbeats {
            in_runtime: self.in_runtime,
            ..LazyHeartbeats::new(self.in_runtime.then_some(0))
        })
    }
}

/// New heartbeats on their way to the scheduler, and when it will next look for them. A new
/// lock's first heartbeat is usually due after that (it is at a random point of the period),
/// so taking a lock seldom wakes the scheduler's thread.
struct Inbox {
    new: std::sync::Mutex<Vec<Due>>,
    /// When the scheduler will next take `new` without being woken, in microseconds since
    /// `base` (`u64::MAX`: not until woken).
    looks_at: AtomicU64,
    base: Instant,
    wake: Notify,
    /// The scheduler's thread, when it has one: it sleeps there while requests are out.
    thread: OnceLock<std::thread::Thread>,
    /// Releases waiting for a heartbeat in flight: while there are any, replies are taken as
    /// they come.
    hurry: AtomicUsize,
    closed: AtomicBool,
}

impl Inbox {
    fn new() -> Arc<Inbox> {
        Arc::new(Inbox {
            new: Default::default(),
            looks_at: AtomicU64::new(u64::MAX),
            base: crate::clock::now(),
            wake: Notify::new(),
            thread: OnceLock::new(),
            hurry: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        })
    }

    fn micros(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_micros() as u64
    }

    fn put(&self, due: Due) {
        let at = due.0;
        self.new.lock().unwrap_or_else(|p| p.into_inner()).push(due);
        if self.micros(at) < self.looks_at.load(Ordering::SeqCst) {
            self.wake_up();
        }
    }

    fn wake_up(&self) {
        self.wake.notify_one();
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Moves new heartbeats into the heap; whether there were any.
    fn take(&self, heap: &mut Heap) -> bool {
        let new = std::mem::take(&mut *self.new.lock().unwrap_or_else(|p| p.into_inner()));
        let any = !new.is_empty();
        for due in new {
            heap.push(due);
        }
        any
    }

    /// Tells senders when the scheduler will look next, then takes what came before that was
    /// seen; whether anything did (the scheduler must then think again before it sleeps).
    fn plan(&self, at: Option<Instant>, heap: &mut Heap) -> bool {
        self.looks_at
            .store(at.map_or(u64::MAX, |t| self.micros(t)), Ordering::SeqCst);
        self.take(heap)
    }
}

pub struct Heartbeats {
    inbox: Arc<Inbox>,
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.inbox.closed.store(true, Ordering::SeqCst);
        self.inbox.wake_up();
    }
}

impl Heartbeats {
    /// Starts the scheduler on a thread of its own (`in_runtime`, or should the thread not
    /// start: as a task on the current runtime). It ends when the last handle is dropped.
    /// `max_per_second` caps heartbeat starts (0: no cap).
    pub fn start(max_per_second: u32, in_runtime: bool) -> Arc<Self> {
        let inbox = Inbox::new();
        if in_runtime || own_thread(inbox.clone(), max_per_second).is_err() {
            tokio::spawn(tokio::task::unconstrained(run(
                inbox.clone(),
                max_per_second,
                Pause::Timer,
            )));
        }
        Arc::new(Heartbeats { inbox })
    }

    /// For a release that waits for a heartbeat in flight: until the guard is dropped, the
    /// scheduler takes replies as they come instead of pausing.
    pub fn hurry(&self) -> Hurry<'_> {
        self.inbox.hurry.fetch_add(1, Ordering::SeqCst);
        self.inbox.wake_up();
        Hurry(&self.inbox)
    }

    fn schedule(&self, lock: &Arc<HeldLock>, due: Instant) {
        self.inbox.put((due, batch_window(lock), Arc::downgrade(lock)));
    }
}

pub struct Hurry<'a>(&'a Inbox);

impl Drop for Hurry<'_> {
    fn drop(&mut self) {
        self.0.hurry.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs a scheduler on a new thread with a single-threaded runtime. Its connections are
/// registered with that runtime, so replies to heartbeats wake no other thread.
fn own_thread(inbox: Arc<Inbox>, max_per_second: u32) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::Builder::new()
        .name("dynamodb-lock-heartbeats".into())
        .spawn(move || {
            crate::store::keep_connections_apart();
            let _ = inbox.thread.set(std::thread::current());
            rt.spawn(crate::runtime::timer_floor());
            // A task, not the future `block_on` drives: waking that one from the runtime's own
            // thread would still write to the runtime's eventfd.
            let _ = rt.block_on(rt.spawn(tokio::task::unconstrained(run(inbox, max_per_second, Pause::Thread))));
        })?;
    Ok(())
}

type Outcome = (Arc<HeldLock>, Result<Option<Instant>, Box<dyn Any + Send>>);

/// Passes over the heartbeats under way in one turn of the scheduler, at most.
const MOST_PASSES: usize = 64;

/// Whether anything under way asked to be polled again during a pass.
#[derive(Default)]
struct Woken(AtomicBool, std::sync::Mutex<Option<std::task::Waker>>);

impl Woken {
    /// A waker that notes the wake-up, then passes it on to `outer`.
    fn wrap(self: &Arc<Self>, outer: &std::task::Waker) -> std::task::Waker {
        *self.1.lock().unwrap_or_else(|p| p.into_inner()) = Some(outer.clone());
        futures_util::task::waker(self.clone())
    }
}

impl futures_util::task::ArcWake for Woken {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.store(true, Ordering::SeqCst);
        if let Some(w) = arc_self.1.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            w.wake_by_ref();
        }
    }
}

/// The scheduler's loop. It runs unconstrained by tokio's cooperative budget: every heartbeat
/// out is a future inside this one task, and under the budget a turn that takes more than a
/// hundred or so replies would see the rest yield and pause until the next turn, so that at a
/// thousand locks replies were taken late and leases ran short.
async fn run(inbox: Arc<Inbox>, max_per_second: u32, pause: Pause) {
    let mut heap = Heap::default();
    let flight = Arc::new(Flight::new());
    let pacer = Pacer::new(max_per_second).map(Arc::new);
    // Heartbeats under way run inside this task: no task to spawn for each, and the next one
    // goes back into the heap without a message.
    let mut running = FuturesUnordered::new();
    // One timer for the whole loop, moved only when the next start moves: registering a timer
    // earlier than the runtime's planned wake-up costs a write to its eventfd and a spurious
    // wake-up, and a new timer per loop turn did that for every finished heartbeat.
    let timer = tokio::time::sleep_until(crate::clock::now());
    tokio::pin!(timer);
    // The smallest batch window of the heartbeats out.
    let mut flight_early = Duration::MAX;
    // Heartbeats started since the runtime last had a turn.
    let mut unsent = false;
    loop {
        if inbox.closed.load(Ordering::SeqCst) {
            return;
        }
        inbox.take(&mut heap);
        // Send the heartbeats started last turn and take the replies that are here: their
        // slots and connections go to the next ones.
        take_replies(&mut running, &mut heap).await;
        if running.is_empty() {
            flight_early = Duration::MAX;
        }
        let next_start = pacer.as_ref().map(|p| p.next_free());
        let next_due = (heap.entries.first_key_value()).map(|(&(due, _), _)| next_start.map_or(due, |n| due.max(n)));
        let now = crate::clock::now();
        let free = free_slots(&flight, &heap, next_due, now);
        // Start what is due at once, in this turn: when the backend falls behind, a finished
        // heartbeat frees the slot of one that is overdue, and a timer already past would
        // only cost another turn of the runtime.
        if next_due.is_some_and(|d| d <= now) && free > 0 {
            while let Some((lock, early, permit)) = next_start_due(&mut heap, &flight, pacer.as_deref(), now) {
                flight_early = flight_early.min(early);
                unsent = true;
                // Its panic caught: the outcome is its lock and how it ended (when the next
                // heartbeat is due, or the panic).
                let (flight, pacer) = (flight.clone(), pacer.clone());
                running.push(async move {
                    let beat = beat(&lock, permit, &flight, pacer.as_deref());
                    let outcome = AssertUnwindSafe(beat).catch_unwind().await;
                    (lock, outcome)
                });
            }
            continue;
        }
        // Requests are out: pause rather than wake for each reply.
        if free < flight.size() && inbox.hurry.load(Ordering::SeqCst) == 0 {
            let until = reply_pause_end(&flight, next_due, free, flight_early, now);
            if !inbox.plan(Some(until), &mut heap) {
                pause.wait(until, &inbox, unsent).await;
                unsent = false;
            }
            continue;
        }
        if inbox.plan(next_due, &mut heap) {
            continue;
        }
        // The timer is for a start that can happen. With every slot taken, a heartbeat that
        // is due waits for a reply (or for the bound to grow): the scheduler looks again a
        // pause later. A timer left at an instant already past would be ready at every turn,
        // so that this task, unconstrained by the runtime's budget, would never give its
        // thread back: no reply would ever be read and no slot freed.
        let wake_at = next_due.map(|d| if free > 0 { d } else { d.max(now + REPLY_PAUSE) });
        if let Some(at) = wake_at {
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
        }
        unsent = false;
        tokio::select! {
            // A heartbeat due before the planned wake-up, a release in a hurry, or the end.
            _ = inbox.wake.notified() => {}
            // A heartbeat finished (between retries, or with a release waiting for it).
            Some(outcome) = running.next(), if !running.is_empty() => finished(&mut heap, outcome),
            // Something is due: the next turn starts it.
            _ = &mut timer, if next_due.is_some() => {}
        }
    }
}

/// Takes every heartbeat that has finished and puts its next one into the heap. A pass over
/// the futures ends early, asking to be polled again, when some of them wake themselves (a
/// timer already due): passes go on until one finds nothing, so that no heartbeat waits for
/// the scheduler's next turn because others were busy.
async fn take_replies<F: std::future::Future<Output = Outcome>>(running: &mut FuturesUnordered<F>, heap: &mut Heap) {
    for _ in 0..MOST_PASSES {
        let woken = Arc::new(Woken::default());
        let (done, again) = poll_fn(|cx| {
            let waker = woken.wrap(cx.waker());
            let mut inner = std::task::Context::from_waker(&waker);
            let mut done = Vec::new();
            while let Poll::Ready(Some(outcome)) = running.poll_next_unpin(&mut inner) {
                done.push(outcome);
            }
            Poll::Ready((done, woken.0.load(Ordering::SeqCst)))
        })
        .await;
        let progress = !done.is_empty();
        for outcome in done {
            finished(heap, outcome);
        }
        if !again && !progress {
            break;
        }
    }
}

/// The slots free for heartbeats due by `next_due`, after taking out of use those above the
/// bound; when heartbeats are due and none is free, the bound may grow first.
fn free_slots(flight: &Flight, heap: &Heap, next_due: Option<Instant>, now: Instant) -> usize {
    flight.trim();
    let free = flight.slots.available_permits();
    if free == 0 && next_due.is_some_and(|d| d <= now) {
        flight.behind(now, || heap.entries.range(..=(now, u64::MAX)).count());
        return flight.slots.available_permits();
    }
    free
}

/// The next heartbeat to start now, taken off the heap with a slot for its write (and its
/// start slot under the cap): one due within its batch window, while the cap allows, whose
/// lock still needs heartbeats. `None` when nothing more starts in this turn.
fn next_start_due(
    heap: &mut Heap,
    flight: &Flight,
    pacer: Option<&Pacer>,
    now: Instant,
) -> Option<(Arc<HeldLock>, Duration, OwnedSemaphorePermit)> {
    while let Some((&(due, _), &(early, _))) = heap.entries.first_key_value() {
        if due > now + early || pacer.is_some_and(|p| p.next_free() > now + CAP_BATCH) {
            return None;
        }
        // Only heartbeats that can be sent start; the others wait here as heap entries, a
        // few dozen bytes each, when the backend falls behind.
        let Ok(permit) = flight.slots.clone().try_acquire_owned() else {
            return None;
        };
        let (_, (early, lock)) = heap.entries.pop_first()?;
        let Some(lock) = lock.upgrade() else { continue };
        if lock.is_stopping() {
            continue;
        }
        if let Some(p) = pacer {
            p.reserve(now);
        }
        return Some((lock, early, permit));
    }
    None
}

/// When a pause for replies ends: at the next start, if it comes within two batch windows of
/// the heartbeats out (groups start a window or more apart, and the replies are then taken
/// with the next, one wake-up for both); a short pause when every slot is taken. Never past
/// the moment a heartbeat out must report danger or loss.
fn reply_pause_end(
    flight: &Flight,
    next_due: Option<Instant>,
    free: usize,
    flight_early: Duration,
    now: Instant,
) -> Instant {
    let until = match next_due {
        Some(d) if free > 0 => d.min(now + 2 * flight_early.clamp(REPLY_PAUSE, BATCH_MAX)),
        _ => now + REPLY_PAUSE,
    };
    flight.next_watch().map_or(until, |w| until.min(w))
}

/// Puts the next heartbeat of a lock whose heartbeat has finished into the heap.
fn finished(heap: &mut Heap, (lock, outcome): Outcome) {
    let next = match outcome {
        Ok(Some(next)) => next,
        Ok(None) => return,
        // A panic while the lock's state was not in hand (`beat` catches those within it, and
        // its state decides what follows): the lock is stepped again a period later.
        Err(_) => {
            let period = lock.client.settings.protocol.heartbeat_period;
            crate::clock::now() + period.max(TIMER_GRAIN)
        }
    };
    heap.push((next, batch_window(&lock), Arc::downgrade(&lock)));
}

/// How early a lock's heartbeat may start to share a wake-up with others.
fn batch_window(lock: &HeldLock) -> Duration {
    (lock.client.settings.protocol.heartbeat_period / BATCH_SHARE).min(BATCH_MAX)
}

/// Steps `lock` once its state is in hand: its heartbeat, as the core's `hold::Hold` (and
/// within it `heartbeat::Beat`, where the protocol and its timing are stated) says, on this
/// process's monotonic clock. Returns when the lock is next due, or `None` when it needs no
/// more steps. A panic while it steps is reported and handled as the state says
/// (`Hold::failed_outside`): tried again a period later while the lease lasts, else lost.
async fn beat(
    lock: &HeldLock,
    permit: OwnedSemaphorePermit,
    flight: &Flight,
    pacer: Option<&Pacer>,
) -> Option<Instant> {
    let stepped = AssertUnwindSafe(steps(lock, Some(permit), flight, pacer))
        .catch_unwind()
        .await;
    if let Ok(next) = stepped {
        return next;
    }
    let clock = lock.client.clock;
    let now = clock.now();
    let (next, events) = {
        let mut st = lock.state();
        let (_, events) = st.step(|h| h.failed_outside(now));
        (st.poll_timeout().map(|t| clock.base + t), events)
    };
    lock.deliver(events, Some(LockError::Internal("heartbeat panicked".into())));
    // Its writes are dropped: a release waiting for them goes on.
    lock.settled.notify_waiters();
    next
}

/// What steps a heartbeat: its start, or what woke it while it waited.
enum Woke {
    Start,
    Stop,
    Timer,
    Answer(Instant, Result<Vec<Vec<u8>>, StoreError>),
}

/// The lock's step: sends the writes its state asks for and reports what it decides. Writes
/// beside a slow one are sent only in a free slot; a retry waits for one, and for the cap.
/// The state is held only while the machine steps, not while writes are out: a release that
/// comes meanwhile asks the machine, which stops the heartbeat between attempts at once and,
/// with a write on the wire, has it wait for the answer (`hold::Action::Release` then wakes
/// it).
async fn steps(
    lock: &HeldLock,
    mut permit: Option<OwnedSemaphorePermit>,
    flight: &Flight,
    pacer: Option<&Pacer>,
) -> Option<Instant> {
    let s = &lock.client.settings;
    let clock = lock.client.clock;
    // A heartbeat writes the lock's own lease, never a session's; a semaphore holder's, on
    // its head.
    let to = &Target {
        permit: lock.permit.as_ref(),
        ..Target::item(&*lock.client.store, &lock.key, s)
    };
    let mut fresh = (!s.protocol.heartbeat_period.is_zero()).then(new_guid);
    let mut watch = Watch { flight, key: None };
    let mut out: FuturesUnordered<Write<'_>> = FuturesUnordered::new();
    let mut writes = 0u32;
    let mut last_error: Option<StoreError> = None;
    let woken = lock.wake.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    let mut woke = Woke::Start;
    loop {
        // One step of the machine, under its state's mutex: what woke it, and what it asks
        // for. The mutex is not held while anything is awaited.
        let (next, urgent, events, error) = {
            let mut st = lock.state();
            let now = crate::clock::now();
            let (actions, mut events) = match woke {
                Woke::Start if st.stopping => return None,
                // The new `guid` goes with the first step only (the start).
                Woke::Start | Woke::Timer => {
                    st.step(|h| h.handle_timeout(clock.time(now), fresh.take(), rand::random(), flight.round_trip()))
                }
                Woke::Stop => {
                    if !out.is_empty() {
                        // Its writes are dropped: a release waiting for them goes on.
                        st.settle();
                        lock.settled.notify_waiters();
                    }
                    return None;
                }
                Woke::Answer(sent, r) => {
                    flight.answered(sent, now);
                    // A session's item names the locks an operator revoked.
                    let revoked: Vec<Guid> = (r.iter().flatten())
                        .filter_map(|g| Guid::try_from(g.as_slice()).ok())
                        .collect();
                    let answer = answer_of(r.map(|_| ()), &mut last_error);
                    let m = st.machine();
                    (
                        m.beat_answered(lock.id, clock.time(now), answer, &revoked, rand::random()),
                        m.events(),
                    )
                }
            };
            // A reported failure carries the store's last error (or a timeout).
            let mut error = None;
            for action in actions {
                match action {
                    hold::Action::Write { guids, new } => {
                        writes += 1;
                        // The first write goes out in the scheduler's slot; an attempt's first
                        // write waits for a slot (and for the cap); one beside a slow write only
                        // goes out in a free one.
                        let (slot, wait) = match permit.take() {
                            Some(p) => (Some(p), false),
                            None if out.is_empty() => (None, true),
                            None => (flight.slots.clone().try_acquire_owned().ok(), false),
                        };
                        if slot.is_none() && !wait {
                            st.write_not_sent();
                            continue;
                        }
                        Stats::add(&s.stats.heartbeats_sent);
                        s.stats.count_purpose(Purpose::Heartbeat);
                        if writes > 1 {
                            Stats::add(&s.stats.heartbeats_retried);
                        }
                        let paced_at = pacer.filter(|_| writes > 1).map(|p| p.reserve(now));
                        out.push(write(lock, to, guids, new, slot, flight.slots.clone(), paced_at));
                    }
                    hold::Action::Abandon => out.clear(),
                    hold::Action::Failed(_) => {
                        Stats::add(&s.stats.heartbeats_failed);
                        error = Some(LockError::Store(
                            last_error.take().unwrap_or_else(|| lock.client.store.timed_out()),
                        ));
                    }
                    // Told through the client machine's events.
                    hold::Action::Danger { .. } | hold::Action::Renewed { .. } | hold::Action::Lost(_) => {}
                    // The write a release waited for is answered or given up on.
                    hold::Action::Release(_) => lock.settled.notify_waiters(),
                }
            }
            events.extend(st.machine().events());
            (st.poll_timeout().map(|t| clock.base + t), st.urgent(), events, error)
        };
        lock.deliver(events, error);
        let Some(urgent) = urgent else {
            // The heartbeat is over, or none started (a lock without heartbeats).
            return next;
        };
        watch.set(lock.id, clock.base + urgent);
        let wake_at = next?;
        woke = tokio::select! {
            biased;
            // Between attempts, a release stops the heartbeat at once; while a write is out it
            // waits for the answer.
            // An abandoned lock (its client closed, its thread ended) stops at once.
            _ = &mut woken, if out.is_empty() || lock.state().abandoned => Woke::Stop,
            _ = tokio::time::sleep_until(wake_at) => Woke::Timer,
            Some((sent, r)) = out.next(), if !out.is_empty() => Woke::Answer(sent, r),
        };
    }
}

/// A heartbeat write under way, rotating the lock's `guid` from one of `guids` to `new`: it
/// takes `slot`, or waits for one of `slots`, waits for its start under the cap (`paced_at`),
/// then sends the original's request when the client sends those, else the core's renewal
/// (`Req::Renew`, a semaphore holder's on its head).
fn write<'a>(
    lock: &'a HeldLock,
    to: &'a Target<'a>,
    guids: [Guid; 2],
    new: Guid,
    slot: Option<OwnedSemaphorePermit>,
    slots: Arc<Semaphore>,
    paced_at: Option<Instant>,
) -> Write<'a> {
    let s = &lock.client.settings;
    let original_requests = s.original_requests;
    let req = match original_requests {
        true => original::heartbeat(&s.protocol, &guids[0], &new, lock.fencing_token, unix_now_ms()),
        false => Request::Renew { guids, new_guid: new },
    };
    Box::pin(async move {
        let _slot = match slot {
            Some(slot) => slot,
            // The scheduler's semaphore is never closed.
            None => match slots.acquire_owned().await {
                Ok(slot) => slot,
                Err(_) => return (crate::clock::now(), Err(timed_out())),
            },
        };
        if let Some(at) = paced_at {
            tokio::time::sleep_until(at).await;
        }
        let sent = crate::clock::now();
        let r = send(to, &req).await;
        let r = match original_requests {
            true => r.map(|_| Vec::new()),
            false => r.and_then(revoked),
        };
        (sent, r)
    })
}

/// What the core's heartbeat machine is told of a write's answer; a refusal or failure is
/// kept in `last_error` for the report of a failed heartbeat.
fn answer_of(r: Result<(), StoreError>, last_error: &mut Option<StoreError>) -> machine::Answer {
    match r {
        Ok(()) => machine::Answer::Renewed,
        Err(e) if e.is_condition_failed() => {
            *last_error = Some(e);
            machine::Answer::NotOurs
        }
        Err(e) => {
            let answer = machine::Answer::Failed {
                code: e.code().to_string(),
                transient: e.is_transient(),
            };
            *last_error = Some(e);
            answer
        }
    }
}

/// A heartbeat write under way: when it was sent, and its answer.
type Write<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = (Instant, Result<Vec<Vec<u8>>, StoreError>)> + Send + 'a>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::Cancel;
    use crate::error::LostReason;
    use crate::lock::LockEvent;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::*;

    fn lost(events: &Recorder) -> bool {
        events.events().contains(&LockEvent::Lost(LostReason::LeaseExpired))
    }

    /// The process is paused (SIGSTOP) for 3 s while a heartbeat is on the wire: its write
    /// lands 100 ms after it was sent, and on resume the reply, the attempt's timeout and the
    /// lease deadline are all due at once. The lease counted from the send ended long ago: a
    /// waiter elsewhere may hold the lock by now. "lost" comes at once, not a period later.
    #[tokio::test(start_paused = true)]
    async fn a_reply_that_comes_after_the_deadline_does_not_extend_the_lease() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(250)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.fault("renew", Fault::Delay(Duration::from_millis(100)));
        until_renewing(&store).await;
        tokio::time::advance(Duration::from_secs(3)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(lost(&events), "lost on resume: {:?}", events.events());
        assert_eq!(lock.lease_remaining(Instant::now()), Some(Duration::ZERO));
        assert_eq!(store.count("renew"), 1, "no heartbeat after the loss");
    }

    /// Every heartbeat panics (a bug): each panic is reported as an error, tried again a
    /// period later rather than at once, and the lock is lost once its lease has run out.
    #[tokio::test(start_paused = true)]
    async fn a_heartbeat_that_keeps_panicking_ends_in_lost_at_the_lease_end() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(250)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        for _ in 0..100 {
            store.fault("renew", Fault::Panic);
        }
        let deadline = lock.lease_until().unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let ev = events.events();
        let panics = ev.iter().filter(|e| matches!(e, LockEvent::Error(..))).count();
        assert!((1..=5).contains(&panics), "one error a period at most: {ev:?}");
        assert_eq!(
            ev.iter().filter(|e| matches!(e, LockEvent::Lost(_))).count(),
            1,
            "lost once: {ev:?}"
        );
        assert!(lost(&events));
        assert!(store.count("renew") <= 5, "{} heartbeats", store.count("renew"));
        assert_eq!(lock.lease_remaining(Instant::now()), Some(Duration::ZERO));
        assert!(Instant::now() > deadline);
    }

    /// A partition: every heartbeat write hangs. "danger" comes before the deadline and
    /// "lost" at the deadline itself, whether an attempt is out or a retry is pausing then.
    #[tokio::test(start_paused = true)]
    async fn during_a_partition_lost_comes_at_the_deadline() {
        for request_timeout_ms in [10_000, 150, 37] {
            let store = Arc::new(MemoryStore::new(true));
            let mut s = open_settings("me", 1000, Some(250));
            s.protocol.request_timeout = Duration::from_millis(request_timeout_ms);
            let (c, events) = client(&store, s);
            let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
            for _ in 0..1000 {
                store.fault("renew", Fault::Hang);
            }
            until_renewing(&store).await;
            let deadline = lock.lease_until().unwrap();
            let mut lost_at = None;
            for _ in 0..3000 {
                tokio::time::sleep(Duration::from_micros(250)).await;
                if lost(&events) {
                    lost_at = Some(Instant::now());
                    break;
                }
            }
            let lost_at = lost_at.expect("lost");
            assert!(
                lost_at + TIMER_GRAIN >= deadline && lost_at <= deadline,
                "request timeout {request_timeout_ms} ms: lost {:?} after the deadline",
                lost_at.saturating_duration_since(deadline)
            );
            let ev = events.events();
            let danger = ev.iter().position(|e| matches!(e, LockEvent::Danger { .. }));
            assert!(danger.is_some_and(|d| d < ev.len() - 1), "danger before lost: {ev:?}");
        }
    }

    /// Round trips of 200 ms against a 250 ms period: no heartbeat gives up early, and no
    /// lease is lost, however the first heartbeat falls after a slow acquisition.
    #[tokio::test(start_paused = true)]
    async fn round_trips_below_the_period_never_cost_the_lease() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 1000, Some(250));
        s.protocol.request_timeout = Duration::from_secs(5);
        let (c, events) = client(&store, s);
        for _ in 0..2000 {
            store.fault("renew", Fault::Delay(Duration::from_millis(240)));
        }
        store.fault("take", Fault::Delay(Duration::from_millis(240)));
        let held = hold(&c, 30).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let ev = events.events();
        assert!(
            !ev.iter()
                .any(|e| matches!(e, LockEvent::Error(..) | LockEvent::Lost(_))),
            "{ev:?}"
        );
        assert!(held
            .iter()
            .all(|l| l.lease_remaining(Instant::now()) > Some(Duration::ZERO)));
    }

    /// The bound on requests in flight follows the round trip, and replies are taken as they
    /// come however many are out: 1,000 locks renewed every 500 ms (2,000 a second) at 200 ms
    /// each keep 400 out, far above the first bound.
    #[tokio::test(start_paused = true)]
    async fn the_bound_on_requests_in_flight_follows_the_round_trip() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 2000, Some(500));
        s.protocol.request_timeout = Duration::from_secs(5);
        let (c, events) = client(&store, s);
        let held = hold(&c, 1000).await;
        for _ in 0..20_000 {
            store.fault("renew", Fault::Delay(Duration::from_millis(200)));
        }
        tokio::time::sleep(Duration::from_secs(6)).await;
        let ev = events.events();
        let bad = ev
            .iter()
            .filter(|e| matches!(e, LockEvent::Error(..) | LockEvent::Lost(_)))
            .count();
        assert_eq!(bad, 0, "{:?}", &ev[..3.min(ev.len())]);
        assert!(held
            .iter()
            .all(|l| l.lease_remaining(Instant::now()) > Some(Duration::ZERO)));
    }

    /// The bound grows while more requests out are answered faster, and goes back when the
    /// round trip grows with it (a backend that does not keep up): then it holds, and later
    /// grows only by doubling.
    #[tokio::test(start_paused = true)]
    async fn the_bound_goes_back_when_its_growth_does_not_pay() {
        let ms = Duration::from_millis;
        let flight = Flight::new();
        let answer = |took: Duration| {
            let now = Instant::now();
            for _ in 0..64 {
                flight.answered(now - took, now);
            }
        };
        answer(ms(10));
        flight.behind(Instant::now(), || 10);
        assert_eq!(flight.size(), 2 * FIRST_IN_FLIGHT, "at least doubling");
        // Within four round trips of a growth, none.
        tokio::time::advance(ms(30)).await;
        answer(ms(10));
        flight.behind(Instant::now(), || 1000);
        assert_eq!(flight.size(), 2 * FIRST_IN_FLIGHT);
        // Latency, not load: the round trip holds while the bound grows.
        tokio::time::advance(ms(10)).await;
        answer(ms(10));
        flight.behind(Instant::now(), || 200);
        let grown = 2 * FIRST_IN_FLIGHT + 200;
        assert_eq!(flight.size(), grown, "by the number overdue");
        flight.behind(Instant::now(), || 10_000);
        assert_eq!(flight.size(), grown, "not again at once");
        tokio::time::advance(ms(40)).await;
        answer(ms(10));
        flight.behind(Instant::now(), || 10_000);
        assert_eq!(flight.size(), (8 * grown).min(MOST_IN_FLIGHT), "at most eightfold");
        // Load: the round trip grows with the bound, the backend answers no faster.
        let taken: Vec<_> = (0..100)
            .map(|_| flight.slots.clone().try_acquire_owned().unwrap())
            .collect();
        tokio::time::advance(ms(130)).await;
        answer(ms(30));
        flight.behind(Instant::now(), || 10_000);
        assert_eq!(flight.size(), grown, "back to where it was");
        assert_eq!(
            flight.slots.available_permits(),
            grown - 100,
            "free slots above it are gone"
        );
        drop(taken);
        flight.trim();
        assert_eq!(
            flight.slots.available_permits(),
            grown,
            "and the others as they are freed"
        );
        tokio::time::advance(ms(400)).await;
        answer(ms(10));
        flight.behind(Instant::now(), || 10_000);
        assert_eq!(flight.size(), grown, "held");
        tokio::time::advance(GROWTH_HOLD).await;
        answer(ms(10));
        flight.behind(Instant::now(), || 10_000);
        assert_eq!(flight.size(), 2 * grown, "then only doubling");
    }

    /// Every slot is taken by writes that hang, and more heartbeats are due behind them;
    /// then every lock is released. The releases of locks with a heartbeat on the wire wait
    /// for it, and meanwhile the scheduler takes replies as they come instead of pausing. It
    /// must still hand its thread back to its runtime, which serves its heartbeats' timers and
    /// connections: the writes out end at their leases' deadlines, and the releases finish.
    /// Under paused time a scheduler that never yields stops the clock; the test runs on a
    /// thread of its own so that it fails in seconds instead of hanging.
    #[test]
    fn a_scheduler_with_no_free_slot_still_yields_to_its_runtime() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async {
                let store = Arc::new(MemoryStore::new(true));
                let mut s = open_settings("me", 1000, Some(250));
                s.protocol.request_timeout = Duration::from_secs(10);
                let (c, events) = client(&store, s);
                let held = hold(&c, 3 * FIRST_IN_FLIGHT).await;
                for _ in 0..10 * held.len() {
                    store.fault("renew", Fault::Hang);
                }
                // Every slot taken, and heartbeats due behind them.
                tokio::time::sleep(Duration::from_millis(400)).await;
                assert_eq!(store.count("renew"), FIRST_IN_FLIGHT);
                let releases: Vec<_> = held
                    .iter()
                    .map(|l| {
                        let l = l.clone();
                        tokio::spawn(async move { l.release().await })
                    })
                    .collect();
                for r in releases {
                    r.await.unwrap().unwrap();
                }
                let lost = events
                    .events()
                    .iter()
                    .filter(|e| **e == LockEvent::Lost(LostReason::LeaseExpired))
                    .count();
                tx.send((lost, store.count("renew"), Instant::now())).unwrap();
            });
        });
        let (lost, renews, _) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the scheduler gave its thread back to its runtime");
        assert_eq!(lost, FIRST_IN_FLIGHT, "the leases of the writes out lapsed");
        assert_eq!(renews, FIRST_IN_FLIGHT, "no heartbeat after a release");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_heartbeat_wakes_the_scheduler_only_if_due_before_it_looks() {
        let inbox = Inbox::new();
        let mut heap = Heap::default();
        let now = Instant::now();
        let ms = Duration::from_millis;
        let woken = |inbox: &Inbox| inbox.wake.notified().now_or_never().is_some();
        assert!(!inbox.plan(Some(now + ms(50)), &mut heap));
        inbox.put((now + ms(80), Duration::ZERO, Weak::new()));
        assert!(!woken(&inbox), "due after the scheduler looks: it is not woken");
        inbox.put((now + ms(20), Duration::ZERO, Weak::new()));
        assert!(woken(&inbox), "due before: it is woken");
        assert!(inbox.plan(None, &mut heap), "what came is taken before it sleeps");
        assert_eq!(heap.entries.len(), 2);
        inbox.put((now + ms(10_000), Duration::ZERO, Weak::new()));
        assert!(woken(&inbox), "a scheduler that sleeps until woken is woken by any");
    }
}
