//! The original library's request sequence (`dynamodb-lock-client` 0.7.x), for stores that
//! offer only `get`, `put` and `delete`: a user's own `dynamodb` object, whose test doubles and
//! wrappers expect exactly the requests the original sends. The same lock item and the same
//! conditions as `fail_closed` and `fail_open`, reached with whole-item puts instead of
//! `UpdateItem`.
//!
//! The protocol:
//! - FailClosed: a put of `{key, owner, guid}` if no item exists (`PutIfAbsent`); on a held
//!   lock, `retryCount` more puts `acquirePeriodMs` apart, then the refusal.
//! - FailOpen: a consistent read. No item: a put of the whole item with `fencingToken` 1 if
//!   there is still none. An item: wait the holder's `leaseDurationMs` on this process's clock
//!   from when the reply came, then a put of the whole item with the holder's token + 1, if the
//!   item is gone or still carries the `guid` and token read (`PutItem`). A refusal costs one of
//!   `retryCount` and starts over with a read.
//! - With `trustLocalTime` the holder's `lockAcquiredTimeUnixMs` may shorten the wait, never
//!   lengthen it; a missing value does not shorten it.
//! - The lease counts from when the winning put was sent, on the monotonic clock.
//! - No request is retried and none is given up for being slow: the user's object owns its
//!   retries and timeouts. Any failure other than a refused condition is the outcome.
//! - A cancellation ends a wait at once; a request out is answered first.
//! - A release (`Release`) is one request: FailClosed deletes the item if it carries the
//!   holder's `guid`; FailOpen puts the whole item back with `leaseDurationMs` 1, same `guid`
//!   and token, if it carries it. A refused FailClosed release means the lock was not ours; a
//!   refused FailOpen one is quiet (another owner has the lock).
//! - A heartbeat puts the whole item with a new `guid` if it carries the holder's
//!   (`heartbeat`); the `heartbeat` machine decides when, one write at a time.

use std::marker::PhantomData;
use std::time::Duration;

use crate::broken::{self, Broken};
use crate::fail_open::wait_for;
use crate::item::RELEASED_LEASE_MS;
pub use crate::op::Expect;
use crate::op::Record;
use crate::request::{Answer, Env, Machine, Purpose, Reply, Req, Step, Time};
use crate::settings::{Kind, Lock};

/// How an acquisition ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<R, E> {
    /// The lock is ours: its fencing token (FailOpen) and when the winning put was sent.
    Taken {
        fencing_token: Option<u64>,
        sent_at: Time,
    },
    /// FailOpen: our put landed, but its answer came after the whole lease: it grants
    /// nothing (`fail_open::Outcome::Expired`), and it was given back (the original's
    /// release, one request). `undo`: that failed, and the caller undoes the put later.
    Expired {
        fencing_token: u64,
        undo: bool,
    },
    /// The lock stayed held through `retryCount` more attempts.
    Refused,
    /// A request failed: its error.
    Failed(E),
    /// The item read is refused (`Record::corrupt`): no token is computed from it, and it is
    /// not waited out.
    Corrupt(R),
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase<V> {
    Read,
    /// Waiting out the holder read: put on its version with `fencing_token` when the wait ends.
    WaitOut {
        seen: V,
        fencing_token: u64,
    },
    /// A put is out; FailOpen: with `fencing_token`.
    Put {
        fencing_token: Option<u64>,
    },
    /// FailClosed: waiting `acquirePeriodMs` before the next put.
    Pause,
    /// Giving back a put answered after its whole lease, which had `fencing_token`.
    GiveBack {
        fencing_token: u64,
    },
    Over,
}

type St<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Outcome<R, E>>;
type ReleaseStep<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Released<E>>;

/// One acquisition in the original's sequence.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire<R: Record, E> {
    s: Lock,
    guid: R::Guid,
    retries_left: u32,
    sent_at: Time,
    phase: Phase<R::Version>,
    error: PhantomData<fn() -> E>,
}

/// The request that releases a lock held with `guid` (and, FailOpen, `fencing_token`).
pub fn release<G: Clone, V>(s: &Lock, guid: &G, fencing_token: Option<u64>, unix_ms: u64) -> Req<G, V> {
    match s.kind {
        Kind::FailClosed => Req::DeleteIfGuid {
            guids: vec![guid.clone()],
        },
        Kind::FailOpen | Kind::Fifo => Req::PutItem {
            guid: guid.clone(),
            fencing_token: fencing_token.unwrap_or(0),
            lease_duration_ms: RELEASED_LEASE_MS,
            lock_acquired_time_unix_ms: s.trust_local_time.then_some(unix_ms),
            expect: Expect::Guid(guid.clone()),
        },
    }
}

/// Whether a refused release is an error (`FailedToReleaseLock`): FailClosed only.
pub fn refused_release_fails(s: &Lock) -> bool {
    s.kind == Kind::FailClosed
}

/// Writes of one heartbeat out at once: one. The whole-item put is conditioned on the holder's
/// `guid` alone, so a second write beside a slow one would be refused once the first landed.
pub const HEARTBEAT_WRITES_OUT: u32 = 1;

/// The heartbeat write of a lock held with `guid` and `fencing_token`: the whole item with
/// `new_guid` and a full lease, if the item still carries `guid`.
pub fn heartbeat<G: Clone, V>(s: &Lock, guid: &G, new_guid: &G, fencing_token: Option<u64>, unix_ms: u64) -> Req<G, V> {
    Req::PutItem {
        guid: new_guid.clone(),
        fencing_token: fencing_token.unwrap_or(0),
        lease_duration_ms: s.lease_duration_ms,
        lock_acquired_time_unix_ms: s.trust_local_time.then_some(unix_ms),
        expect: Expect::Guid(guid.clone()),
    }
}

/// How a release ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Released<E> {
    /// Written (or, FailOpen, refused quietly: another owner has the lock).
    Released,
    /// FailClosed: the item does not carry the holder's `guid`; the lock was not ours.
    NotOurs,
    Failed(E),
}

/// A release in the original's sequence: one request (`release`), not retried.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release<R: Record, E> {
    s: Lock,
    over: bool,
    types: PhantomData<fn() -> (R, E)>,
}

impl<R, E> Release<R, E>
where
    R: Record,
    R::Guid: Clone,
{
    /// Starts the release of a lock held with `guid` (and, FailOpen, `fencing_token`).
    pub fn start(s: Lock, guid: R::Guid, fencing_token: Option<u64>, env: &Env) -> (Self, ReleaseStep<R, E>) {
        let m = Release {
            s,
            over: false,
            types: PhantomData,
        };
        (m, send(release(&s, &guid, fencing_token, env.unix_ms)))
    }
}

impl<R, E> Machine<R, E> for Release<R, E>
where
    R: Record,
    R::Guid: Clone,
{
    type Out = Released<E>;

    fn purpose(&self) -> Purpose {
        Purpose::Releasing
    }

    fn answer(&mut self, a: Answer<R, E>, _env: &Env) -> ReleaseStep<R, E> {
        self.over = true;
        Step::Done(match a {
            Answer::Done(_) => Released::Released,
            Answer::Refused(_) if refused_release_fails(&self.s) => Released::NotOurs,
            Answer::Refused(_) => Released::Released,
            Answer::Failed { error, .. } => Released::Failed(error),
        })
    }

    fn timer(&mut self, _env: &Env) -> ReleaseStep<R, E> {
        // A release waits for nothing but its answer.
        Step::Wait {
            until: Time::MAX,
            abortable: false,
        }
    }
}

/// How long a waiter waits out `holder` (a FailOpen item it read): the holder's lease, or the
/// client's own when the item carries none; with `trustLocalTime`, what is left of it by the
/// holder's `lockAcquiredTimeUnixMs`, when the item carries one. The same wait as a FailOpen
/// acquisition's (`fail_open::wait_for`).
pub fn wait_out<R: Record>(s: &Lock, holder: &R, unix_ms: u64) -> Duration {
    wait_for(s, holder, unix_ms)
}

impl<R, E> Acquire<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
{
    /// Starts an acquisition (`s.kind`: FailClosed or FailOpen) that writes `guid`.
    pub fn start(s: Lock, guid: R::Guid, env: &Env) -> (Self, St<R, E>) {
        let mut m = Acquire {
            s,
            guid,
            retries_left: s.retry_count,
            sent_at: env.now,
            phase: Phase::Read,
            error: PhantomData,
        };
        let step = m.begin(env);
        (m, step)
    }

    /// What its write is: the settings it was made with, and its `guid` (what an undo of
    /// it removes).
    pub fn written(&self) -> (Lock, R::Guid) {
        (self.s, self.guid.clone())
    }

    fn begin(&mut self, env: &Env) -> St<R, E> {
        match self.s.kind {
            Kind::FailOpen | Kind::Fifo => {
                self.phase = Phase::Read;
                send(Req::Get)
            }
            Kind::FailClosed => self.put(
                Req::PutIfAbsent {
                    guid: self.guid.clone(),
                },
                None,
                env,
            ),
        }
    }

    fn put(&mut self, req: Req<R::Guid, R::Version>, fencing_token: Option<u64>, env: &Env) -> St<R, E> {
        self.sent_at = env.now;
        self.phase = Phase::Put { fencing_token };
        send(req)
    }

    /// The whole FailOpen item, put on `expect`.
    fn put_item(&mut self, fencing_token: u64, expect: Expect<R::Guid, R::Version>, env: &Env) -> St<R, E> {
        let req = Req::PutItem {
            guid: self.guid.clone(),
            fencing_token,
            lease_duration_ms: self.s.lease_duration_ms,
            lock_acquired_time_unix_ms: self.s.trust_local_time.then_some(env.unix_ms),
            expect,
        };
        self.put(req, Some(fencing_token), env)
    }

    fn over(&mut self, o: Outcome<R, E>) -> St<R, E> {
        self.phase = Phase::Over;
        Step::Done(o)
    }
}

/// A request sent with no timeout of ours.
fn send<G, V, O>(req: Req<G, V>) -> Step<G, V, O> {
    Step::Send {
        req,
        timeout_at: Time::MAX,
    }
}

impl<R, E> Machine<R, E> for Acquire<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
{
    type Out = Outcome<R, E>;

    /// The original's sequence sleeps out the lease it read: every request is an attempt.
    fn purpose(&self) -> Purpose {
        match self.phase {
            Phase::GiveBack { .. } => Purpose::Releasing,
            _ => Purpose::Acquiring,
        }
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
        let phase = std::mem::replace(&mut self.phase, Phase::Over);
        match (phase, a) {
            (Phase::GiveBack { fencing_token }, Answer::Failed { .. }) => self.over(Outcome::Expired {
                fencing_token,
                undo: true,
            }),
            (_, Answer::Failed { error, .. }) => self.over(Outcome::Failed(error)),
            (Phase::Read, Answer::Done(Reply::Before(Some(holder)))) if holder.corrupt() => {
                self.over(Outcome::Corrupt(holder))
            }
            (Phase::Read, Answer::Done(Reply::Before(Some(holder)))) => {
                let until = env.now + wait_out(&self.s, &holder, env.unix_ms);
                self.phase = Phase::WaitOut {
                    seen: holder.version(),
                    fencing_token: holder.fencing_token().unwrap_or(0) + 1,
                };
                Step::Wait { until, abortable: true }
            }
            (Phase::Read, _) => self.put_item(1, Expect::Absent, env),
            (Phase::Put { fencing_token: Some(t) }, Answer::Done(_)) if env.now >= self.sent_at + self.s.lease() => {
                if broken::on(Broken::ExpiredTakeKept) {
                    return self.over(Outcome::Expired {
                        fencing_token: t,
                        undo: false,
                    });
                }
                // Nothing of the acquisition is read again: forget it.
                (self.retries_left, self.sent_at) = (0, Time::ZERO);
                self.phase = Phase::GiveBack { fencing_token: t };
                send(release(&self.s, &self.guid, Some(t), env.unix_ms))
            }
            // Given back, or refused quietly (another owner has the lock): nothing to undo.
            (Phase::GiveBack { fencing_token }, a) => self.over(Outcome::Expired {
                fencing_token,
                undo: matches!(a, Answer::Failed { .. }),
            }),
            (Phase::Put { fencing_token }, Answer::Done(_)) => self.over(Outcome::Taken {
                fencing_token,
                sent_at: self.sent_at,
            }),
            (Phase::Put { .. }, Answer::Refused(_)) => {
                if self.retries_left == 0 {
                    return self.over(Outcome::Refused);
                }
                self.retries_left -= 1;
                match self.s.kind {
                    Kind::FailClosed => {
                        self.phase = Phase::Pause;
                        Step::Wait {
                            until: env.now + self.s.acquire_period,
                            abortable: true,
                        }
                    }
                    Kind::FailOpen | Kind::Fifo => self.begin(env),
                }
            }
            (phase, _) => {
                // No other answer is asked for: stay where the machine was.
                self.phase = phase;
                Step::Wait {
                    until: Time::MAX,
                    abortable: true,
                }
            }
        }
    }

    fn timer(&mut self, env: &Env) -> St<R, E> {
        let phase = std::mem::replace(&mut self.phase, Phase::Over);
        if env.cancelled && matches!(phase, Phase::WaitOut { .. } | Phase::Pause) {
            return self.over(Outcome::Aborted);
        }
        match phase {
            Phase::WaitOut { seen, fencing_token } => self.put_item(fencing_token, Expect::AbsentOr(seen), env),
            Phase::Pause => self.begin(env),
            Phase::Over => Step::Done(Outcome::Aborted),
            // A pause between attempts of a request is not the original's: nothing to do.
            phase => {
                self.phase = phase;
                Step::Wait {
                    until: Time::MAX,
                    abortable: true,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::LockRecord;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn lock(kind: Kind) -> Lock {
        Lock {
            kind,
            retry_count: 1,
            acquire_period: ms(50),
            lease_duration_ms: 1000,
            trust_local_time: false,
            heartbeat_period: Duration::ZERO,
            reread: ms(10),
            later_waiter_reread: ms(250),
            request_timeout: ms(100),
            max_attempts: 4,
            base_backoff: ms(10),
            max_backoff: ms(20),
            danger_margin: crate::settings::DANGER_MARGIN,
        }
    }

    fn env(now: u64) -> Env {
        Env {
            now: ms(now),
            unix_ms: 1_000_000 + now,
            cancelled: false,
            random: 0,
        }
    }

    fn held(guid: u8, token: u64, lease: Option<u64>) -> LockRecord {
        LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![guid; 4])),
            fencing_token: Some(token),
            lease_duration_ms: lease,
            ..Default::default()
        }
    }

    type M = Acquire<LockRecord, &'static str>;
    type S = St<LockRecord, &'static str>;

    fn guid() -> [u8; 64] {
        [1; 64]
    }

    fn start(s: Lock) -> (M, S) {
        M::start(s, guid(), &env(0))
    }

    fn item(r: Option<LockRecord>) -> Answer<LockRecord, &'static str> {
        Answer::Done(Reply::Before(r))
    }

    fn refused() -> Answer<LockRecord, &'static str> {
        Answer::Refused(None)
    }

    fn put_item(step: &S) -> (u64, Expect<[u8; 64], crate::item::Version>, Option<u64>) {
        match step {
            Step::Send {
                req:
                    Req::PutItem {
                        fencing_token,
                        expect,
                        lease_duration_ms,
                        lock_acquired_time_unix_ms,
                        guid: g,
                    },
                timeout_at,
            } => {
                assert_eq!(*g, guid());
                assert_eq!(*lease_duration_ms, 1000);
                assert_eq!(*timeout_at, Time::MAX, "no timeout of ours");
                (*fencing_token, expect.clone(), *lock_acquired_time_unix_ms)
            }
            other => panic!("expected a whole-item put: {other:?}"),
        }
    }

    #[test]
    fn fail_open_reads_then_puts_a_new_item_with_token_one() {
        let (mut m, step) = start(lock(Kind::FailOpen));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }));
        let step = m.answer(item(None), &env(5));
        assert_eq!(put_item(&step), (1, Expect::Absent, None));
        let done = m.answer(Answer::Done(Reply::Done), &env(30));
        assert_eq!(
            done,
            Step::Done(Outcome::Taken {
                fencing_token: Some(1),
                sent_at: ms(5)
            }),
            "the lease counts from when the put was sent"
        );
    }

    #[test]
    fn fail_open_waits_out_the_holders_lease_then_puts_on_the_version_read() {
        let (mut m, _) = start(lock(Kind::FailOpen));
        let h = held(2, 41, Some(300));
        let step = m.answer(item(Some(h.clone())), &env(10));
        assert_eq!(
            step,
            Step::Wait {
                until: ms(310),
                abortable: true
            },
            "the holder's lease, from the reply"
        );
        let step = m.timer(&env(310));
        assert_eq!(put_item(&step), (42, Expect::AbsentOr(h.version()), None));
        assert_eq!(
            m.answer(Answer::Done(Reply::Done), &env(320)),
            Step::Done(Outcome::Taken {
                fencing_token: Some(42),
                sent_at: ms(310)
            })
        );
    }

    #[test]
    fn an_item_without_a_lease_is_waited_out_for_the_clients_lease() {
        let (mut m, _) = start(lock(Kind::FailOpen));
        let step = m.answer(item(Some(held(2, 1, None))), &env(0));
        assert_eq!(
            step,
            Step::Wait {
                until: ms(1000),
                abortable: true
            }
        );
    }

    #[test]
    fn trust_local_time_shortens_the_wait_but_a_missing_time_does_not() {
        let mut s = lock(Kind::FailOpen);
        s.trust_local_time = true;
        let mut h = held(2, 1, Some(1000));
        h.lock_acquired_time_unix_ms = Some(1_000_000 - 600);
        assert_eq!(wait_out(&s, &h, 1_000_000), ms(400));
        h.lock_acquired_time_unix_ms = Some(1_000_000 + 5000);
        assert_eq!(
            wait_out(&s, &h, 1_000_000),
            ms(1000),
            "a holder's clock ahead never lengthens it"
        );
        h.lock_acquired_time_unix_ms = None;
        assert_eq!(wait_out(&s, &h, 1_000_000), ms(1000));
        h.lock_acquired_time_unix_ms = Some(1);
        s.trust_local_time = false;
        assert_eq!(wait_out(&s, &h, 1_000_000), ms(1000), "only with trustLocalTime");
        // The put then carries this process's wall clock.
        s.trust_local_time = true;
        let (mut m, _) = start(s);
        let step = m.answer(item(None), &env(7));
        assert_eq!(put_item(&step).2, Some(1_000_007));
    }

    #[test]
    fn a_refused_put_costs_a_retry_and_starts_over_with_a_read() {
        let (mut m, _) = start(lock(Kind::FailOpen));
        m.answer(item(None), &env(0));
        let step = m.answer(refused(), &env(5));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }), "{step:?}");
        let step = m.answer(item(None), &env(6));
        put_item(&step);
        assert_eq!(m.answer(refused(), &env(8)), Step::Done(Outcome::Refused));
    }

    #[test]
    fn any_other_failure_ends_the_acquisition_with_its_error() {
        let (mut m, _) = start(lock(Kind::FailOpen));
        let failed = Answer::Failed {
            error: "boom",
            transient: true,
            maybe_applied: true,
        };
        assert_eq!(m.answer(failed.clone(), &env(1)), Step::Done(Outcome::Failed("boom")));
        let (mut m, _) = start(lock(Kind::FailOpen));
        m.answer(item(None), &env(0));
        assert_eq!(m.answer(failed, &env(1)), Step::Done(Outcome::Failed("boom")));
    }

    #[test]
    fn fail_closed_puts_then_retries_after_the_acquire_period() {
        let (mut m, step) = start(lock(Kind::FailClosed));
        assert!(matches!(step, Step::Send { req: Req::PutIfAbsent { .. }, timeout_at } if timeout_at == Time::MAX));
        let step = m.answer(refused(), &env(3));
        assert_eq!(
            step,
            Step::Wait {
                until: ms(53),
                abortable: true
            }
        );
        let step = m.timer(&env(53));
        assert!(matches!(
            step,
            Step::Send {
                req: Req::PutIfAbsent { .. },
                ..
            }
        ));
        assert_eq!(
            m.answer(Answer::Done(Reply::Done), &env(60)),
            Step::Done(Outcome::Taken {
                fencing_token: None,
                sent_at: ms(53)
            })
        );
        let mut s = lock(Kind::FailClosed);
        s.retry_count = 0;
        let (mut m, _) = start(s);
        assert_eq!(m.answer(refused(), &env(3)), Step::Done(Outcome::Refused));
    }

    #[test]
    fn release_and_heartbeat_put_on_the_holders_guid() {
        type R = Req<u8, crate::item::Version>;
        let open = lock(Kind::FailOpen);
        let r: R = release(&open, &7, Some(3), 5);
        assert_eq!(
            r,
            Req::PutItem {
                guid: 7,
                fencing_token: 3,
                lease_duration_ms: 1,
                lock_acquired_time_unix_ms: None,
                expect: Expect::Guid(7)
            }
        );
        assert!(!refused_release_fails(&open), "quiet, as in the original");
        let closed = lock(Kind::FailClosed);
        let r: R = release(&closed, &7, None, 5);
        assert_eq!(r, Req::DeleteIfGuid { guids: vec![7] });
        assert!(refused_release_fails(&closed));
        let mut trusting = open;
        trusting.trust_local_time = true;
        let r: R = heartbeat(&trusting, &7, &8, Some(3), 5);
        assert_eq!(
            r,
            Req::PutItem {
                guid: 8,
                fencing_token: 3,
                lease_duration_ms: 1000,
                lock_acquired_time_unix_ms: Some(5),
                expect: Expect::Guid(7)
            }
        );
    }

    #[test]
    fn a_release_is_one_request_and_a_refusal_is_an_error_for_fail_closed_only() {
        type Rel = Release<LockRecord, &'static str>;
        let (mut m, step) = Rel::start(lock(Kind::FailClosed), guid(), None, &env(0));
        assert!(matches!(step, Step::Send { req: Req::DeleteIfGuid { .. }, timeout_at } if timeout_at == Time::MAX));
        assert_eq!(m.answer(refused(), &env(1)), Step::Done(Released::NotOurs));
        let (mut m, step) = Rel::start(lock(Kind::FailOpen), guid(), Some(2), &env(0));
        assert!(matches!(
            step,
            Step::Send {
                req: Req::PutItem {
                    fencing_token: 2,
                    lease_duration_ms: 1,
                    ..
                },
                ..
            }
        ));
        assert_eq!(m.answer(refused(), &env(1)), Step::Done(Released::Released));
        let (mut m, _) = Rel::start(lock(Kind::FailOpen), guid(), Some(2), &env(0));
        let failed = Answer::Failed {
            error: "boom",
            transient: true,
            maybe_applied: false,
        };
        assert_eq!(
            m.answer(failed, &env(1)),
            Step::Done(Released::Failed("boom")),
            "not retried"
        );
    }

    #[test]
    fn fail_open_computes_no_token_from_a_corrupt_item() {
        for (name, value) in [
            (crate::item::FENCING_TOKEN, crate::item::Found::N("-5".into())),
            (crate::item::LEASE_DURATION_MS, crate::item::Found::S("1000".into())),
        ] {
            let mut item = held(2, 3, Some(1000));
            item.read(name, value);
            let (mut m, _) = start(lock(Kind::FailOpen));
            assert_eq!(
                m.answer(self::item(Some(item.clone())), &env(1)),
                Step::Done(Outcome::Corrupt(item))
            );
        }
    }

    #[test]
    fn a_cancellation_ends_a_wait_at_once() {
        let (mut m, _) = start(lock(Kind::FailClosed));
        m.answer(refused(), &env(0));
        let cancelled = Env {
            cancelled: true,
            ..env(10)
        };
        assert_eq!(m.timer(&cancelled), Step::Done(Outcome::Aborted));
        let (mut m, _) = start(lock(Kind::FailOpen));
        m.answer(item(Some(held(2, 1, Some(1000)))), &env(0));
        assert_eq!(m.timer(&cancelled), Step::Done(Outcome::Aborted));
    }
    #[test]
    fn a_put_answered_after_the_whole_lease_is_given_back_with_the_originals_release() {
        for (fails, undo) in [(false, false), (true, true)] {
            let (mut m, _) = start(lock(Kind::FailOpen));
            let step = m.answer(item(None), &env(1));
            assert_eq!(put_item(&step).0, 1);
            let step = m.answer(Answer::Done(Reply::Done), &env(1_001));
            assert!(
                matches!(
                    &step,
                    Step::Send {
                        req: Req::PutItem {
                            lease_duration_ms: RELEASED_LEASE_MS,
                            fencing_token: 1,
                            ..
                        },
                        ..
                    }
                ),
                "given back: {step:?}"
            );
            assert_eq!(m.purpose(), Purpose::Releasing);
            let answer = match fails {
                true => Answer::Failed {
                    error: "throttled",
                    transient: true,
                    maybe_applied: false,
                },
                false => Answer::Done(Reply::Done),
            };
            let done = m.answer(answer, &env(1_002));
            assert_eq!(done, Step::Done(Outcome::Expired { fencing_token: 1, undo }));
        }
    }
}
