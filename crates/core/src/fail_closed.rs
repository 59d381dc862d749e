//! FailClosed acquisition as a state machine: a lock without a lease. One conditional put
//! writes the item if there is none; the item stays until its holder deletes it, so a crashed
//! holder's lock stays held.
//!
//! The protocol:
//! - As the original library: `retryCount` more attempts on a held lock, `acquirePeriodMs`
//!   apart, then `FailedToAcquireLock` naming the holder (the item, read once if the refusal
//!   did not carry it).
//! - Between attempts a waiter claims the first place in line (`waiting`); the first waiter
//!   re-reads the item, from `rereadPeriodMs` at a pace that slows with the time it has waited
//!   for this holder, and tries at once when it is gone.
//! - After an attempt that may have landed (a timeout, a dropped connection), a refusal may
//!   have met our own write: the item is read, and an item carrying our `guid` is ours. A
//!   failure after such an attempt is settled by reading too; when even the read fails, the
//!   outcome says so (`undo`) and the caller removes the write if it landed, so that no lock is
//!   left held by nobody.
//! - A cancellation ends a wait at once; a write out is settled first.

use crate::broken::{self, Broken};
use crate::op::Record;
use crate::request::{Answer, Ended, Env, Machine, Next, Pending, Policy, Purpose, Reply, Req, Step, Time};
use crate::settings::Lock;
use crate::waiting::{next_read, Waiting};

/// How an acquisition ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<R, E> {
    /// The lock is ours.
    Acquired,
    /// The lock stayed held by another holder: its item, when known.
    Held(Option<R>),
    /// A request failed. `undo`: the write may have landed and could not be read back; the
    /// caller removes it if it did.
    Failed {
        error: E,
        undo: bool,
    },
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase<E> {
    /// Standing back for a local waiter after a release of this client (until the wait ends).
    StandBack,
    Put,
    /// Reading the item after a refusal that may have met our own write.
    SettleRefusal,
    /// Reading the item after a failure that may have landed; `error` is the outcome unless
    /// the item is ours.
    SettleFailure(E),
    /// Reading the holder's item to name it in the refusal.
    ReadHolder,
    /// Writing the first-in-line mark; then pausing.
    Mark,
    /// Waiting for the next attempt or the next re-read.
    Pausing,
    Reread,
    Over,
}

type Out<R, E> = Outcome<R, E>;
type St<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Out<R, E>>;

/// One FailClosed acquisition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire<R: Record, E> {
    s: Lock,
    guid: R::Guid,
    waiting: Option<Waiting<R::Version>>,
    give_up_at: Time,
    next_attempt: Time,
    settle: Policy,
    pending: Option<Pending<R::Guid, R::Version>>,
    phase: Phase<E>,
}

impl<R, E> Acquire<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
    E: Clone,
{
    /// Starts an acquisition that writes `guid`. `stand_back_until`: this client released the
    /// lock lately while others waited, and lets them go first until then.
    pub fn start(s: Lock, guid: R::Guid, stand_back_until: Option<Time>, env: &Env) -> (Self, St<R, E>) {
        let mut m = Acquire {
            s,
            guid,
            waiting: None,
            give_up_at: env.now,
            next_attempt: env.now,
            settle: s.policy(s.max_attempts),
            pending: None,
            phase: Phase::StandBack,
        };
        let step = match stand_back_until {
            Some(until) if until > env.now => Step::Wait { until, abortable: true },
            _ => m.begin(env),
        };
        (m, step)
    }

    /// What its write is: the settings it was made with, and its `guid` (what an undo of
    /// it removes).
    pub fn written(&self) -> (Lock, R::Guid) {
        (self.s, self.guid.clone())
    }

    fn over(&mut self, o: Out<R, E>) -> St<R, E> {
        self.phase = Phase::Over;
        Step::Done(o)
    }

    fn send(&mut self, req: Req<R::Guid, R::Version>, policy: Policy, env: &Env) -> St<R, E> {
        let (p, step) = Pending::start(req, policy, env.now);
        self.pending = Some(p);
        step
    }

    fn begin(&mut self, env: &Env) -> St<R, E> {
        self.give_up_at = env.now + self.s.acquire_period.saturating_mul(self.s.retry_count);
        self.put(env)
    }

    fn put(&mut self, env: &Env) -> St<R, E> {
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        let budget = self.s.budget(self.s.max_attempts, env.now);
        self.settle = budget.settle;
        self.phase = Phase::Put;
        let req = Req::PutIfAbsent {
            guid: self.guid.clone(),
        };
        self.send(req, budget.writes, env)
    }

    fn put_ended(&mut self, ended: Ended<R, E>, env: &Env) -> St<R, E> {
        if env.cancelled && !matches!(ended, Ended::Ok(_)) && broken::on(Broken::CancelSkipsSettle) {
            return self.over(Outcome::Aborted);
        }
        match ended {
            Ended::Ok(_) => self.over(Outcome::Acquired),
            // After an attempt that may have landed, the item met by the condition may be our
            // own: then the lock is ours.
            Ended::Refused { current: Some(cur), .. } => self.refused(cur, env),
            Ended::Refused {
                current: None,
                ambiguous: true,
            } => {
                self.phase = Phase::SettleRefusal;
                self.send(Req::Get, self.settle, env)
            }
            Ended::Refused {
                current: None,
                ambiguous: false,
            } => self.refused(None, env),
            Ended::Failed { error, ambiguous } => {
                if !ambiguous || broken::on(Broken::AmbiguousNotResolved) {
                    return self.over(Outcome::Failed { error, undo: false });
                }
                self.phase = Phase::SettleFailure(error);
                self.send(Req::Get, self.settle, env)
            }
        }
    }

    /// The lock is held (by `held`, when known), unless the item is ours.
    fn refused(&mut self, held: Option<R>, env: &Env) -> St<R, E> {
        if held.as_ref().is_some_and(|r| r.carries(&self.guid)) {
            return self.over(Outcome::Acquired);
        }
        // Cancelled: nothing of ours is on the item, so nothing is left to settle or wait for.
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        if env.now >= self.give_up_at {
            if held.is_some() {
                return self.over(Outcome::Held(held));
            }
            // The error names the holder: one read, best effort.
            self.phase = Phase::ReadHolder;
            return self.send(Req::Get, self.s.policy(1), env);
        }
        self.next_attempt = (env.now + self.s.acquire_period).min(self.give_up_at);
        match held {
            Some(h) => self.observe(&h, env),
            None => {
                self.waiting.get_or_insert_with(|| Waiting::at(env));
                self.pause(env)
            }
        }
    }

    /// Reads the mark on the holder's item, and claims or renews the first place if it may.
    fn observe(&mut self, held: &R, env: &Env) -> St<R, E> {
        // A cancelled waiter neither claims the first place nor reads again.
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        let w = self.waiting.get_or_insert_with(|| Waiting::at(env));
        // Without heartbeats a holder keeps its `guid`: another one is another holder.
        w.pace.seen(held.version(), env.now);
        match w.observe(&self.s, held, env.unix_ms) {
            Some(mark) => {
                self.phase = Phase::Mark;
                self.send(mark, self.s.policy(1), env)
            }
            None => self.pause(env),
        }
    }

    fn pause(&mut self, env: &Env) -> St<R, E> {
        self.phase = Phase::Pausing;
        Step::Wait {
            until: next_read(&self.s, self.waiting.as_ref(), env.now, self.next_attempt),
            abortable: true,
        }
    }
}

impl<R, E> Machine<R, E> for Acquire<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
    E: Clone,
{
    type Out = Outcome<R, E>;

    fn purpose(&self) -> Purpose {
        match self.phase {
            Phase::Mark | Phase::Pausing | Phase::Reread => Purpose::Waiting,
            _ => Purpose::Acquiring,
        }
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
        let Some(pending) = self.pending.as_mut() else {
            return Step::Wait {
                until: Time::MAX,
                abortable: true,
            };
        };
        let ended = match pending.answer::<R, E, Out<R, E>>(a, env) {
            Next::Step(step) => return step,
            Next::Ended(e) => e,
        };
        self.pending = None;
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Put => self.put_ended(ended, env),
            Phase::SettleRefusal => match ended {
                Ended::Ok(Reply::Before(cur)) => self.refused(cur, env),
                Ended::Failed { error, .. } => self.over(Outcome::Failed { error, undo: false }),
                Ended::Ok(_) | Ended::Refused { .. } => self.refused(None, env),
            },
            Phase::SettleFailure(error) => match ended {
                Ended::Ok(Reply::Before(Some(r))) if r.carries(&self.guid) => self.over(Outcome::Acquired),
                Ended::Ok(_) | Ended::Refused { .. } => self.over(Outcome::Failed { error, undo: false }),
                Ended::Failed { .. } => self.over(Outcome::Failed { error, undo: true }),
            },
            Phase::ReadHolder => match ended {
                Ended::Ok(Reply::Before(held)) => self.over(Outcome::Held(held)),
                _ => self.over(Outcome::Held(None)),
            },
            Phase::Mark => {
                let written = matches!(ended, Ended::Ok(_));
                if let Some(w) = self.waiting.as_mut() {
                    w.marked(written);
                }
                self.pause(env)
            }
            Phase::Reread => match ended {
                Ended::Ok(Reply::Before(None)) => self.put(env),
                Ended::Ok(Reply::Before(Some(r))) => self.observe(&r, env),
                _ => self.pause(env),
            },
            Phase::StandBack | Phase::Pausing | Phase::Over => self.over(Outcome::Aborted),
        }
    }

    fn timer(&mut self, env: &Env) -> St<R, E> {
        if let Some(p) = self.pending.as_mut() {
            // A pause between attempts of one request is over.
            return p.resend(env.now);
        }
        match self.phase {
            Phase::StandBack if env.cancelled => self.over(Outcome::Aborted),
            Phase::StandBack => self.begin(env),
            Phase::Pausing if env.cancelled => self.over(Outcome::Aborted),
            Phase::Pausing if env.now >= self.next_attempt => self.put(env),
            Phase::Pausing => {
                if let Some(w) = self.waiting.as_mut() {
                    w.pace.reading(env.now);
                }
                self.phase = Phase::Reread;
                self.send(Req::Get, self.s.policy(self.s.max_attempts), env)
            }
            _ => Step::Wait {
                until: Time::MAX,
                abortable: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::item::LockRecord;
    use crate::settings::Kind;
    use crate::testing::{self, env, ms};

    fn lock() -> Lock {
        Lock {
            retry_count: 2,
            acquire_period: ms(100),
            lease_duration_ms: 0,
            heartbeat_period: Duration::ZERO,
            ..testing::lock(Kind::FailClosed)
        }
    }

    type M = Acquire<LockRecord, &'static str>;

    fn holder() -> LockRecord {
        LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![2; 64])),
            ..Default::default()
        }
    }

    /// The item as this acquisition (`guid` 1) wrote it.
    fn ours() -> LockRecord {
        LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![1; 64])),
            ..Default::default()
        }
    }

    fn timeout() -> Answer<LockRecord, &'static str> {
        Answer::Failed {
            error: "timeout",
            transient: true,
            maybe_applied: true,
        }
    }

    #[test]
    fn a_held_lock_is_tried_retry_count_more_times_acquire_period_apart_then_named() {
        let (mut m, step) = M::start(lock(), [1; 64], None, &env(0));
        assert!(matches!(
            step,
            Step::Send {
                req: Req::PutIfAbsent { .. },
                ..
            }
        ));
        let mut puts = 1;
        let mut now = 0;
        let mut step = m.answer(Answer::Refused(Some(Some(holder()))), &env(now));
        let out = loop {
            step = match step {
                Step::Send {
                    req: Req::PutIfAbsent { .. },
                    ..
                } => {
                    puts += 1;
                    m.answer(Answer::Refused(Some(Some(holder()))), &env(now))
                }
                Step::Send { req: Req::Get, .. } => m.answer(Answer::Done(Reply::Before(Some(holder()))), &env(now)),
                Step::Send {
                    req: Req::MarkWaiting { .. },
                    ..
                } => m.answer(Answer::Done(Reply::Done), &env(now)),
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    m.timer(&env(now))
                }
                Step::Done(out) => break out,
                other => panic!("{other:?}"),
            };
        };
        assert_eq!(out, Outcome::Held(Some(holder())));
        assert_eq!(puts, 3, "the first attempt and retryCount more");
        assert_eq!(now, 200, "acquirePeriodMs apart");
    }

    #[test]
    fn a_refusal_after_a_timeout_reads_the_item_and_finds_its_own_write() {
        let (mut m, _) = M::start(lock(), [1; 64], None, &env(0));
        let pause = match m.answer(timeout(), &env(10)) {
            Step::Wait { until, .. } => until,
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            m.timer(&env(pause.as_millis() as u64)),
            Step::Send {
                req: Req::PutIfAbsent { .. },
                ..
            }
        ));
        // The condition met an item, and the refusal did not say which: it is read.
        let step = m.answer(Answer::Refused(None), &env(30));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }), "{step:?}");
        assert_eq!(
            m.answer(Answer::Done(Reply::Before(Some(ours()))), &env(31)),
            Step::Done(Outcome::Acquired)
        );
    }

    #[test]
    fn a_failure_that_may_have_landed_is_read_back_and_undone_if_the_read_fails() {
        let mut s = lock();
        s.max_attempts = 1;
        let (mut m, _) = M::start(s, [1; 64], None, &env(0));
        let step = m.answer(timeout(), &env(50));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }));
        assert_eq!(
            m.answer(timeout(), &env(100)),
            Step::Done(Outcome::Failed {
                error: "timeout",
                undo: true
            })
        );
    }

    #[test]
    fn a_cancelled_wait_ends_at_once() {
        let (mut m, _) = M::start(lock(), [1; 64], None, &env(0));
        let step = m.answer(Answer::Refused(Some(Some(holder()))), &env(0));
        assert!(matches!(
            step,
            Step::Send {
                req: Req::MarkWaiting { .. },
                ..
            }
        ));
        assert!(matches!(
            m.answer(Answer::Done(Reply::Done), &env(0)),
            Step::Wait { abortable: true, .. }
        ));
        let cancelled = Env {
            cancelled: true,
            ..env(5)
        };
        assert_eq!(m.timer(&cancelled), Step::Done(Outcome::Aborted));
    }

    #[test]
    fn a_cancelled_acquisition_settles_a_write_that_may_have_landed_first() {
        let mut s = lock();
        s.max_attempts = 1;
        let (mut m, _) = M::start(s, [1; 64], None, &env(0));
        let cancelled = |ms| Env {
            cancelled: true,
            ..env(ms)
        };
        // Cancelled while the write was out: it timed out, and may have landed.
        let step = m.answer(timeout(), &cancelled(50));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }), "{step:?}");
        // It did: the lock is taken, for the caller to give back.
        assert_eq!(
            m.answer(Answer::Done(Reply::Before(Some(ours()))), &cancelled(60)),
            Step::Done(Outcome::Acquired)
        );
        // A refusal by another holder's item leaves nothing of its own: aborted at once.
        let (mut m, _) = M::start(lock(), [1; 64], None, &env(0));
        assert_eq!(
            m.answer(Answer::Refused(Some(Some(holder()))), &cancelled(5)),
            Step::Done(Outcome::Aborted)
        );
    }

    /// Steps one waiter with `s` against `holder()` until it releases at `release_at` (the item
    /// goes) or `end`: the reads, the marks, the puts and when it acquired.
    fn wait_against(s: Lock, release_at: Option<u64>, end: u64) -> (u32, u32, u32, Option<u64>) {
        let (mut reads, mut marks, mut puts) = (0, 0, 1);
        let mut item = holder();
        let present = |now: u64| release_at.is_none_or(|t| now < t);
        let (mut m, _) = M::start(s, [1; 64], None, &env(0));
        let mut now = 0;
        let mut step = m.answer(Answer::Refused(Some(Some(item.clone()))), &env(now));
        loop {
            step = match step {
                Step::Send {
                    req: Req::PutIfAbsent { .. },
                    ..
                } => {
                    puts += 1;
                    match present(now) {
                        true => m.answer(Answer::Refused(Some(Some(item.clone()))), &env(now)),
                        false => m.answer(Answer::Done(Reply::Done), &env(now)),
                    }
                }
                Step::Send { req: Req::Get, .. } => {
                    reads += 1;
                    let cur = present(now).then(|| item.clone());
                    m.answer(Answer::Done(Reply::Before(cur)), &env(now))
                }
                Step::Send {
                    req: Req::MarkWaiting {
                        waiter, now_unix_ms, ..
                    },
                    ..
                } => {
                    marks += 1;
                    item.lock_waiting_unix_ms = Some(now_unix_ms);
                    item.lock_waiter = Some(waiter);
                    m.answer(Answer::Done(Reply::Done), &env(now))
                }
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    if now >= end {
                        return (reads, marks, puts, None);
                    }
                    m.timer(&env(now))
                }
                Step::Done(Outcome::Acquired) => return (reads, marks, puts, Some(now)),
                other => panic!("{other:?}"),
            };
        }
    }

    #[test]
    fn a_long_wait_reads_at_most_twice_per_acquire_period_and_marks_once() {
        // acquirePeriodMs 10 s, ten minutes of retries.
        let mut s = lock();
        s.acquire_period = ms(10_000);
        s.retry_count = 60;
        let (reads, marks, puts, taken) = wait_against(s, None, 600_000);
        assert_eq!(taken, None);
        assert_eq!(puts, 60, "an attempt per acquirePeriodMs, as the original");
        assert!(reads <= 150, "at most 0.25 reads a second over ten minutes: {reads}");
        assert!(marks <= 60, "at most a mark per acquirePeriodMs: {marks}");
        // A release is seen within half the time waited for it.
        for w in [5, 100, 1000, 4000, 7000, 95_000] {
            let (_, _, _, taken) = wait_against(s, Some(w), 600_000);
            let at = taken.expect("acquired");
            assert!(at >= w && at <= w + w / 2 + 10, "released at {w}, acquired at {at}");
        }
    }
}
