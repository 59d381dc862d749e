//! Carries a client's work (`dynamodb_lock_core::work::Work`: its acquisitions, the ends of
//! its locks, forced releases, requests sent once, and the undo of acquisition writes whose
//! outcome is unknown): sends the requests it hands out through the store, each bounded by its
//! timeout and with what the piece's caller adds to it (the holder's data, the session, a
//! semaphore's permits), and feeds back their answers and the clock. One task carries it while
//! there is any, on the event loop of the thread that started it where that thread has one
//! (`uvloop`), as one of the client's tasks, which `close()` waits for. A caller waits for its
//! piece (`Piece`): it hears the piece's pauses, what its answers found (the reports of a wait),
//! and its end, and cancels it. It makes no protocol decision.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use dynamodb_lock_core::request::{Env, Purpose, Time, PURPOSES};
use dynamodb_lock_core::work::{self, Event, Task, TaskStep, Transmit};
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use tokio::sync::Notify;

use crate::cancel::Cancel;
use crate::clock::Clock;
use crate::error::StoreError;
use crate::item::{Guid, LockData, LockKey, LockRecord, Version};
use crate::send::{answer, send, within, Permit, Request, Target};
use crate::settings::Settings;
use crate::store::{Reply, Store};

/// What a piece of work ended with.
pub type Out = work::Out<LockRecord, StoreError>;

type Core = work::Work<LockRecord, LockKey, StoreError>;

/// What a piece's requests carry besides what its machine asks: the holder's data (an
/// acquisition's, `lock.update`'s), the session the lock is held through, a semaphore's
/// permits.
#[derive(Default)]
pub struct Carry {
    pub data: Option<LockData>,
    pub session: Option<String>,
    pub permit: Option<Permit>,
}

/// What the caller of a piece hears.
enum Heard {
    /// A condition of its request failed: the error, naming the item when the store did.
    Refused(StoreError),
    /// A read found the lock held by this item.
    Seen(LockRecord),
    /// It pauses until then before its next request, for this purpose.
    Waits(Time, Option<Purpose>),
    Done(Out),
}

/// What a caller has still to hear, and its wake-up.
#[derive(Default)]
struct Heards {
    queue: Mutex<VecDeque<Heard>>,
    more: Notify,
}

impl Heards {
    fn push(&self, h: Heard) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push_back(h);
        self.more.notify_one();
    }

    async fn next(&self) -> Heard {
        loop {
            let more = self.more.notified();
            if let Some(h) = self.queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front() {
                return h;
            }
            more.await;
        }
    }
}

/// A caller waiting for its piece.
struct Waiter {
    carry: Arc<Carry>,
    heard: Arc<Heards>,
}

/// A client's work, and what carrying it needs.
pub struct Work {
    store: Arc<dyn Store>,
    settings: Settings,
    clock: Clock,
    closing: Arc<Cancel>,
    tasks: tokio_util::task::TaskTracker,
    inner: Mutex<Inner>,
    /// New work for the task that carries it.
    more: Notify,
}

struct Inner {
    core: Core,
    waiters: HashMap<u64, Waiter>,
    /// A task carries the work.
    carried: bool,
}

impl Work {
    pub fn new(
        store: Arc<dyn Store>,
        settings: Settings,
        clock: Clock,
        closing: Arc<Cancel>,
        tasks: tokio_util::task::TaskTracker,
    ) -> Self {
        Work {
            store,
            settings,
            clock,
            closing,
            tasks,
            inner: Mutex::new(Inner {
                core: Default::default(),
                waiters: HashMap::new(),
                carried: false,
            }),
            more: Notify::new(),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the piece `task` makes (on the client's clock) on `key`, its requests carrying
    /// `carry`, cancelled by `cancel`; its caller waits for it through the `Piece`.
    pub fn start<'a>(
        self: &'a Arc<Self>,
        key: &LockKey,
        carry: Carry,
        cancel: Option<&'a Cancel>,
        task: impl FnOnce(&Env) -> (Task<LockRecord, StoreError>, TaskStep<LockRecord, StoreError>),
    ) -> Piece<'a> {
        let cancelled = cancel.is_some_and(Cancel::is_cancelled);
        let env = self.clock.env(cancelled);
        let heard = Arc::<Heards>::default();
        let mut w = self.inner();
        let id = w.core.start(key.clone(), task(&env), cancelled, &env);
        let carry = Arc::new(carry);
        w.waiters.insert(
            id,
            Waiter {
                carry,
                heard: heard.clone(),
            },
        );
        self.moved(w);
        Piece {
            work: self,
            id,
            key: key.clone(),
            heard,
            cancel,
            told: cancel.is_none() || cancelled,
            refusal: None,
        }
    }

    /// Sends `req` to `key` in the background, as hard as the client's policy allows, to its
    /// first answer (a request that needs no settling).
    pub fn once(self: &Arc<Self>, key: &LockKey, req: Request) {
        let (policy, env) = (self.settings.policy(), self.clock.env(false));
        let mut w = self.inner();
        w.core.once(key.clone(), req, policy, &env);
        self.moved(w);
    }

    /// Tells the callers what became of their pieces, and has a task carry the work if none
    /// does.
    fn moved(self: &Arc<Self>, mut w: MutexGuard<'_, Inner>) {
        self.tell(&mut w);
        if std::mem::replace(&mut w.carried, true) {
            self.more.notify_one();
            return;
        }
        drop(w);
        let task = self.tasks.track_future(self.clone().carry());
        // On the loop of the JavaScript thread that asked, where it has one (`uvloop`).
        #[cfg(all(unix, not(test)))]
        let Err(task) = crate::uvloop::spawn(Box::pin(task)) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(task)),
            Err(_) => drop(napi::bindgen_prelude::spawn(task)),
        }
    }

    /// Carries the work until none is left to send or wait for.
    async fn carry(self: Arc<Self>) {
        let mut out = FuturesUnordered::new();
        loop {
            let closed = self.closing.is_cancelled();
            let wake = {
                let mut w = self.inner();
                if closed {
                    w.core.close(&self.clock.env(true));
                }
                while let Some(t) = w.core.poll_transmit() {
                    let carry = w.waiters.get(&t.id).map(|w| w.carry.clone());
                    out.push(self.send(t, carry));
                }
                let wake = w.core.poll_timeout();
                if out.is_empty() && wake.is_none() {
                    w.carried = false;
                    return;
                }
                wake
            };
            let more = self.more.notified();
            tokio::select! {
                Some((id, r)) = out.next(), if !out.is_empty() => self.answered(id, r),
                _ = tokio::time::sleep_until(self.clock.base + wake.unwrap_or_default()), if wake.is_some() => {
                    let mut w = self.inner();
                    w.core.handle_timeout(&self.clock.env(false));
                    self.tell(&mut w);
                }
                _ = self.closing.cancelled(), if !closed => {}
                _ = more => {}
            }
        }
    }

    /// Request `id` was answered with `r`: its caller hears what it found, and the work is
    /// stepped with it.
    fn answered(&self, id: u64, r: Result<Reply<LockRecord>, StoreError>) {
        let mut w = self.inner();
        if let Some(waiter) = w.waiters.get(&id) {
            let heard = match &r {
                Err(e) if e.is_condition_failed() => Some(Heard::Refused(e.clone())),
                Ok(Reply::Before(Some(r))) => Some(Heard::Seen(r.clone())),
                _ => None,
            };
            if let Some(heard) = heard {
                waiter.heard.push(heard);
            }
        }
        w.core.handle_reply(id, answer(r), &self.clock.env(false));
        self.tell(&mut w);
    }

    /// Tells the callers what became of their pieces.
    fn tell(&self, w: &mut Inner) {
        while let Some(e) = w.core.poll_event() {
            let (id, heard) = match e {
                Event::Waits(id, until, purpose) => (id, Heard::Waits(until, purpose)),
                Event::Done(id, out) => (id, Heard::Done(out)),
            };
            if let Some(waiter) = w.waiters.get(&id) {
                waiter.heard.push(heard);
            }
        }
    }

    /// Sends request `t` as the operation it is, to its key, with what its piece carries; its
    /// number and outcome.
    async fn send(
        &self,
        t: Transmit<Guid, Version, LockKey>,
        carry: Option<Arc<Carry>>,
    ) -> (u64, Result<Reply<LockRecord>, StoreError>) {
        if let Some(purpose) = t.purpose {
            self.settings.stats.count_purpose(purpose);
        }
        let c = carry.as_deref();
        let to = Target {
            data: c.and_then(|c| c.data.as_ref()),
            session: c.and_then(|c| c.session.as_deref()),
            permit: c.and_then(|c| c.permit.as_ref()),
            ..Target::item(&*self.store, &t.key, &self.settings)
        };
        let at = self.clock.instant(t.timeout_at);
        (t.id, within(&*self.store, at, send(&to, &t.req)).await)
    }

    /// Steps the work with `step`, then tells and carries what follows.
    fn step(self: &Arc<Self>, step: impl FnOnce(&mut Core, &Env)) {
        let mut w = self.inner();
        step(&mut w.core, &self.clock.env(false));
        self.moved(w);
    }
}

/// A piece of work its caller waits for.
pub struct Piece<'a> {
    work: &'a Arc<Work>,
    id: u64,
    key: LockKey,
    heard: Arc<Heards>,
    cancel: Option<&'a Cancel>,
    /// The work knows of the cancellation.
    told: bool,
    /// The error of the last refused condition (the original's refusal is the user's own
    /// error).
    pub refusal: Option<StoreError>,
}

impl Piece<'_> {
    /// Waits for the piece's end, telling its cancellation what it found while it waited.
    pub async fn done(&mut self) -> Out {
        loop {
            let heard = tokio::select! {
                biased;
                heard = self.heard.next() => heard,
                _ = async { self.cancel.unwrap().cancelled().await }, if !self.told => {
                    self.told = true;
                    let id = self.id;
                    self.work.step(|core, env| core.cancel(id, env));
                    continue;
                }
            };
            match heard {
                Heard::Refused(e) => {
                    if let Some(cancel) = self.cancel {
                        match &e {
                            StoreError::ConditionFailed { current: Some(Some(r)) } => cancel.waiting(Some(r)),
                            // The read that settles the refusal names the holder.
                            _ => cancel.refused(),
                        }
                    }
                    self.refusal = Some(e);
                }
                Heard::Seen(r) => {
                    if let Some(cancel) = self.cancel {
                        cancel.seen(&r);
                    }
                }
                Heard::Waits(until, purpose) => {
                    self.flush();
                    crate::debug::log(|| {
                        let pause = match self.work.clock.instant(until) {
                            Some(at) => crate::debug::ms(at.saturating_duration_since(crate::clock::now())),
                            None => "until cancelled".into(),
                        };
                        let purpose = purpose
                            .map(|p| format!(" ({})", PURPOSES[p as usize]))
                            .unwrap_or_default();
                        let key = crate::debug::key(&self.key);
                        format!("lock {key}{purpose}: pauses {pause} before its next request")
                    });
                }
                Heard::Done(out) => {
                    self.flush();
                    return out;
                }
            }
        }
    }

    fn flush(&self) {
        if let Some(cancel) = self.cancel {
            cancel.flush();
        }
    }

    /// The FailOpen take it ended with is given back after all (`work::Work::give_back`).
    pub fn give_back(&mut self) {
        let id = self.id;
        self.work.step(|core, env| core.give_back(id, env));
    }

    /// The hand-over it ended with found nobody to take the lock, still ours under `guid`
    /// (`work::Work::unclaimed`).
    pub fn unclaimed(&mut self, guid: Guid) {
        let id = self.id;
        self.work.step(|core, env| core.unclaimed(id, guid, env));
    }
}

impl Drop for Piece<'_> {
    /// The piece is over for its caller: kept, it is settled as it ended; not over (its caller
    /// is gone), it is dropped, and an answer still to come is ignored.
    fn drop(&mut self) {
        let mut w = self.work.inner();
        w.core.forget(self.id);
        w.waiters.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use dynamodb_lock_core::undo::UNDO_PAUSE;

    use dynamodb_lock_core::op;
    use dynamodb_lock_core::request::{Ended, Policy, Purpose};
    use dynamodb_lock_core::work::Task;
    use tokio::time::Instant;

    use super::{Carry, Out, Work};
    use crate::cancel::Cancel;
    use crate::clock::Clock;
    use crate::error::StoreError;
    use crate::item;
    use crate::send::Request;
    use crate::settings::Settings;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::*;

    fn throttled() -> StoreError {
        StoreError::Service {
            code: "ProvisionedThroughputExceededException".into(),
            message: "slow down".into(),
            transient: true,
            maybe_applied: false,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `req` sent once through the work of a client of `store`, from now, to its end.
    async fn once(
        store: &Arc<MemoryStore>,
        s: &Settings,
        req: Request,
        policy: Policy,
        purpose: Option<Purpose>,
    ) -> Ended<crate::item::LockRecord, StoreError> {
        let tasks = tokio_util::task::TaskTracker::new();
        let work = Arc::new(Work::new(
            store.clone(),
            s.clone(),
            Clock::start(),
            Default::default(),
            tasks,
        ));
        let mut piece = work.start(&key("a"), Carry::default(), None, |env| {
            Task::once(req, policy, purpose, env.now)
        });
        let Out::Once(ended) = piece.done().await else {
            panic!("a request sent once")
        };
        ended
    }

    #[tokio::test(start_paused = true)]
    async fn one_task_carries_every_acquisition_and_release_of_a_client_and_ends_with_them() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("me"));
        for _ in 0..16 {
            store.fault("put", Fault::Delay(ms(50)));
        }
        let acquisitions: Vec<_> = (0..16)
            .map(|n| {
                let c = c.clone();
                tokio::spawn(async move { c.acquire(key(&format!("k{n}")), &Cancel::default()).await })
            })
            .collect();
        tokio::time::sleep(ms(10)).await;
        assert_eq!(store.count("put"), 16, "all sent at once");
        assert_eq!(c.tasks.len(), 1, "by one task");
        let mut locks = Vec::new();
        for a in acquisitions {
            locks.push(a.await.unwrap().unwrap());
        }
        tokio::time::sleep(ms(1)).await;
        assert_eq!(c.tasks.len(), 0, "nothing left to carry");
        for lock in locks {
            lock.release().await.unwrap();
        }
        assert_eq!(store.count("delete"), 16);
        assert!(store.items.lock().unwrap().is_empty());
        assert_eq!(c.tasks.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_sent_once_retries_transient_failures_then_reports_the_last() {
        let (store, s) = (Arc::new(MemoryStore::new(true)), closed_settings("me"));
        for _ in 0..3 {
            store.fault("get", Fault::Fail(throttled()));
        }
        let r = once(&store, &s, Request::Get, Policy::new(3, ms(1000)), None).await;
        assert!(
            matches!(&r, Ended::Failed { error, .. } if error.code() == "ProvisionedThroughputExceededException"),
            "{r:?}"
        );
        assert_eq!(store.count("get"), 3);
        assert_eq!(s.stats.purpose(0), 0, "not a request of the lock protocol");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_condition_is_an_answer_not_retried() {
        let (store, s) = (Arc::new(MemoryStore::new(true)), closed_settings("me"));
        let req = Request::SetData {
            guids: vec![[7; item::GUID_LEN]],
        };
        let r = once(&store, &s, req, Policy::new(5, ms(1000)), Some(Purpose::Acquiring)).await;
        assert!(matches!(r, Ended::Refused { .. }), "{r:?}");
        assert_eq!(store.count("set_data"), 1);
        assert_eq!(
            s.stats.purpose(Purpose::Acquiring as usize),
            1,
            "counted for its purpose"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_attempt_times_out_and_is_tried_again() {
        let (store, s) = (Arc::new(MemoryStore::new(true)), closed_settings("me"));
        store.fault("get", Fault::Hang);
        let start = Instant::now();
        let r = once(&store, &s, Request::Get, Policy::new(2, ms(100)), None).await;
        assert!(matches!(r, Ended::Ok(op::Reply::Before(None))), "{r:?}");
        assert_eq!(store.count("get"), 2);
        assert!(start.elapsed() >= ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_runs_past_the_deadline() {
        let (store, s) = (Arc::new(MemoryStore::new(true)), closed_settings("me"));
        for _ in 0..100 {
            store.fault("get", Fault::Hang);
        }
        let start = Instant::now();
        let policy = Policy::new(100, Duration::from_secs(10)).until(ms(300));
        let r = once(&store, &s, Request::Get, policy, None).await;
        assert!(
            matches!(&r, Ended::Failed { error, .. } if error.code() == "TimeoutError"),
            "{r:?}"
        );
        assert!(start.elapsed() <= ms(300));
    }

    /// A FailClosed acquisition whose write landed unseen and could not be read back: its
    /// undo is the client's background work.
    async fn orphaned(store: &Arc<MemoryStore>, s: Settings) -> Arc<crate::client::Client> {
        let (c, _) = client(store, s);
        store.fault("put", Fault::ApplyThenFail(lost_response()));
        store.fault("get", Fault::Fail(lost_response()));
        let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
        assert_eq!(err.code(), "NetworkingError");
        c
    }

    #[tokio::test(start_paused = true)]
    async fn an_undo_pauses_between_failed_rounds_and_a_close_makes_its_last_round_at_once() {
        let store = Arc::new(MemoryStore::new(false));
        let mut s = closed_settings("me");
        s.protocol.max_attempts = 1;
        let attempts = s.protocol.release_attempts() as usize;
        for _ in 0..3 * attempts {
            store.fault("delete", Fault::Fail(lost_response()));
        }
        let c = orphaned(&store, s).await;
        // A round's attempts, backing off between them, take less than the pause.
        tokio::time::sleep(UNDO_PAUSE / 2).await;
        assert_eq!(store.count("delete"), attempts, "one round");
        tokio::time::sleep(UNDO_PAUSE).await;
        assert!(store.count("delete") < 2 * attempts, "the pause is not over");
        tokio::time::sleep(UNDO_PAUSE / 2).await;
        assert_eq!(store.count("delete"), 2 * attempts, "a second round after the pause");
        assert!(store.record(&key("a")).is_some(), "still there");
        store.clear_faults();
        let start = tokio::time::Instant::now();
        c.closing.cancel();
        c.tasks.close();
        c.tasks.wait().await;
        assert!(start.elapsed() < Duration::from_millis(10), "{:?}", start.elapsed());
        assert_eq!(store.count("delete"), 2 * attempts + 1, "one last round, at once");
        assert!(store.record(&key("a")).is_none(), "undone");
    }

    #[tokio::test(start_paused = true)]
    async fn undos_of_two_locks_run_side_by_side_and_the_carrying_task_ends_with_them() {
        let store = Arc::new(MemoryStore::new(false));
        let mut s = closed_settings("me");
        s.protocol.max_attempts = 1;
        let (c, _) = client(&store, s);
        for k in ["a", "b"] {
            store.fault("put", Fault::ApplyThenFail(lost_response()));
            store.fault("get", Fault::Fail(lost_response()));
            store.fault("delete", Fault::Delay(Duration::from_millis(50)));
            assert!(c.acquire(key(k), &Cancel::default()).await.is_err());
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(store.record(&key("a")).is_none() && store.record(&key("b")).is_none());
        assert_eq!(store.count("delete"), 2);
        c.tasks.close();
        let ended = tokio::time::timeout(Duration::from_millis(1), c.tasks.wait()).await;
        assert!(ended.is_ok(), "nothing left to carry");
    }
}
