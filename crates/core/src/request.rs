//! One request as the protocol sends it: the operations a machine asks for (`Req`), how their
//! answers come back (`Answer`), what a machine tells its caller to do next (`Step`), and the
//! attempts of one request through transient faults (`Attempts`): a timeout per attempt,
//! bounded retries with jittered exponential pauses, an optional deadline, and whether any
//! attempt so far may have landed ("ambiguous"), which decides whether the outcome has to be
//! settled by reading the item.

use std::time::Duration;

use crate::op::{Expect, Op, OpenFields, Record, Ttl, WaitMark};
use crate::settings::{self, Lock};

/// A point on the caller's monotonic clock, as the time since an origin the caller chooses
/// (per machine: the instant it started).
pub type Time = Duration;

/// What a machine is told with every input: both clocks, whether the acquisition was
/// cancelled, and a fresh random number (for the jitter of pauses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Env {
    pub now: Time,
    /// The wall clock, in milliseconds since 1970: written into items and compared with the
    /// times other processes wrote.
    pub unix_ms: u64,
    pub cancelled: bool,
    pub random: u64,
}

/// An operation a machine sends, with the arguments that are the protocol's. The caller adds
/// what its settings hold (the owner, the holder's data, the TTL attribute, the lease fields)
/// and the key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Req<G, V> {
    Get,
    PutIfAbsent {
        guid: G,
    },
    DeleteIfGuid {
        guids: Vec<G>,
    },
    /// A FailOpen acquisition; `lock_acquired_time_unix_ms` is the writer's wall clock, from
    /// which the original with `trustLocalTime` counts the lease.
    Take {
        guid: G,
        waited_out: Option<V>,
        clear_mark: bool,
        lock_acquired_time_unix_ms: Option<u64>,
    },
    /// A FailOpen release; `lock_acquired_time_unix_ms` as in `Take`.
    Release {
        guids: Vec<G>,
        lock_acquired_time_unix_ms: Option<u64>,
    },
    /// Hands a held lock to the next acquisition of this client (`handover`); `renew`:
    /// FailOpen's lease and token too.
    HandOver {
        guids: Vec<G>,
        new_guid: G,
        renew: bool,
        marks_fresh_since_unix_ms: u64,
    },
    /// A put of the whole FailOpen item (`original`): `{key, fencingToken, leaseDurationMs,
    /// owner, guid}` and, with `trustLocalTime`, `lockAcquiredTimeUnixMs`, on `expect`.
    PutItem {
        guid: G,
        fencing_token: u64,
        lease_duration_ms: u64,
        lock_acquired_time_unix_ms: Option<u64>,
        expect: Expect<G, V>,
    },
    MarkWaiting {
        waiter: String,
        since_unix_ms: u64,
        now_unix_ms: u64,
        stale_before_unix_ms: u64,
    },
    /// A strongly consistent read of session `session`'s item (`item::session_key`).
    ReadSession {
        session: String,
    },
    /// Ends session `session` for good: its item released (`leaseDurationMs` 1) if it still
    /// carries `guid`, the version a waiter waited out. No renewal of the session lands after
    /// it (`op::allowed`: a renewal needs an item that is not released).
    EndSession {
        session: String,
        guid: G,
    },
    /// `lock.update`: the holder's data (what the caller adds; none removes it) written on the
    /// item if it carries one of `guids`, its `guid` left as it is.
    SetData {
        guids: Vec<G>,
    },
    /// Deletes a finished Fifo queue entry (its waiter was granted or gave up).
    DeleteFinished,
    /// A heartbeat's write (`hold::Action::Write`): the lease renewed and `guid` rotated to
    /// `new_guid` if the item carries one of `guids`.
    Renew {
        guids: [G; 2],
        new_guid: G,
    },
    /// An operator frees the lock at once, at the version `read` (`op::Op::ForceFree`).
    ForceFree {
        read: V,
        new_guid: G,
        now_unix_ms: u64,
        delete: bool,
    },
    /// An operator revokes the lock at the version `read`, out of `session` (its id and its
    /// item's lease) if it is held through one (`op::Op::Revoke`).
    Revoke {
        read: V,
        new_guid: G,
        now_unix_ms: u64,
        session: Option<(String, u64)>,
    },
    /// Names `guid` on session `session`'s item as a lock an operator revoked
    /// (`op::Op::MarkRevoked`).
    MarkRevoked {
        session: String,
        guid: G,
    },
}

/// What a caller's settings add to its requests when they become operations (`Req::op`):
/// the holder's fields of its writes (owner, lease, data, TTL attribute, token floor) and the
/// TTL attribute a FailOpen release writes.
#[derive(Clone, Debug)]
pub struct Adds<'a> {
    pub fields: OpenFields<'a>,
    pub ttl_released: Option<Ttl<'a>>,
}

/// What an operation borrows that its request holds in another form (`Req::parts`): the
/// holder's fields as the request writes them.
#[derive(Clone, Debug)]
pub struct Parts<'a> {
    fields: OpenFields<'a>,
}

impl<G, V> Req<G, V> {
    /// The session whose item the request goes to; `None`: the lock's own item.
    pub fn session(&self) -> Option<&str> {
        match self {
            Req::ReadSession { session } | Req::EndSession { session, .. } | Req::MarkRevoked { session, .. } => {
                Some(session)
            }
            _ => None,
        }
    }

    /// The pieces `op` borrows: the holder's fields as this request writes them.
    pub fn parts<'a>(&'a self, adds: &Adds<'a>) -> Parts<'a> {
        let fields = match self {
            // Held through a session, a lock always carries its acquisition time: the original
            // with `trustLocalTime` counts the lock's lease from it (without it, it would wait
            // nothing), and so waits out `SESSION_LOCK_LEASE_MS` from the acquisition.
            Req::Take {
                lock_acquired_time_unix_ms,
                ..
            } => OpenFields {
                lock_acquired_time_unix_ms: lock_acquired_time_unix_ms
                    .or(adds.fields.session.and(adds.fields.lock_acquired_time_unix_ms)),
                ..adds.fields.clone()
            },
            // The next holder brings its own data, if any, with a write of its own.
            Req::HandOver { .. } => OpenFields {
                data: None,
                ..adds.fields.clone()
            },
            _ => adds.fields.clone(),
        };
        Parts { fields }
    }

    /// The operation this request is, with what the caller adds (`parts` from
    /// `self.parts(adds)`): the one translation from the machines' requests to the store's
    /// operations.
    pub fn op<'a, R: Record<Guid = G, Version = V>>(&'a self, adds: &'a Adds<'a>, parts: &'a Parts<'a>) -> Op<'a, R> {
        match self {
            Req::Get | Req::ReadSession { .. } => Op::Get,
            Req::EndSession { guid, .. } => Op::Release {
                guids: std::slice::from_ref(guid),
                lock_acquired_time_unix_ms: None,
                ttl: adds.ttl_released,
            },
            Req::PutIfAbsent { guid } => Op::PutIfAbsent {
                owner: adds.fields.owner,
                guid,
                data: adds.fields.data,
                ttl: adds.fields.ttl,
            },
            Req::DeleteIfGuid { guids } => Op::DeleteIfGuid { guids },
            Req::Take {
                guid,
                waited_out,
                clear_mark,
                ..
            } => Op::Take {
                fields: &parts.fields,
                guid,
                waited_out: waited_out.as_ref(),
                clear_mark: *clear_mark,
            },
            Req::Release {
                guids,
                lock_acquired_time_unix_ms,
            } => Op::Release {
                guids,
                lock_acquired_time_unix_ms: *lock_acquired_time_unix_ms,
                ttl: adds.ttl_released,
            },
            Req::HandOver {
                guids,
                new_guid,
                renew,
                marks_fresh_since_unix_ms,
            } => Op::HandOver {
                guids,
                new_guid,
                fields: renew.then_some(&parts.fields),
                marks_fresh_since_unix_ms: *marks_fresh_since_unix_ms,
                ttl: adds.fields.ttl,
            },
            Req::PutItem {
                guid,
                fencing_token,
                lease_duration_ms,
                lock_acquired_time_unix_ms,
                expect,
            } => Op::PutItem {
                owner: adds.fields.owner,
                guid,
                fencing_token: *fencing_token,
                lease_duration_ms: *lease_duration_ms,
                lock_acquired_time_unix_ms: *lock_acquired_time_unix_ms,
                expect,
            },
            Req::MarkWaiting {
                waiter,
                since_unix_ms,
                now_unix_ms,
                stale_before_unix_ms,
            } => Op::MarkWaiting(WaitMark {
                waiter,
                owner: adds.fields.owner,
                since_unix_ms: *since_unix_ms,
                now_unix_ms: *now_unix_ms,
                stale_before_unix_ms: *stale_before_unix_ms,
            }),
            Req::SetData { guids } => Op::SetData {
                guids,
                data: adds.fields.data,
                ttl: adds.fields.ttl,
            },
            Req::DeleteFinished => Op::FifoDeleteFinished,
            Req::Renew { guids, new_guid } => Op::Renew {
                guids,
                new_guid,
                fields: &adds.fields,
            },
            Req::ForceFree {
                read,
                new_guid,
                now_unix_ms,
                delete,
            } => Op::ForceFree {
                read,
                new_guid,
                now_unix_ms: *now_unix_ms,
                delete: *delete,
            },
            Req::Revoke {
                read,
                new_guid,
                now_unix_ms,
                session,
            } => Op::Revoke {
                read,
                new_guid,
                now_unix_ms: *now_unix_ms,
                session: session.as_ref().map(|(id, lease)| (id.as_str(), *lease)),
            },
            Req::MarkRevoked { guid, .. } => Op::MarkRevoked { guid },
        }
    }
}

/// How an operation's reply reaches a machine: a refusal as `Answer::Refused`, with the item
/// as it was.
pub fn answer_of<R, E>(reply: Reply<R>) -> Answer<R, E> {
    match reply {
        Reply::Refused(i) => Answer::Refused(Some(i)),
        done => Answer::Done(done),
    }
}

/// How an operation ended, as the machines need to know it. `E` is the caller's error, kept
/// to be reported.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Answer<R, E> {
    /// Applied (or read): the store's reply.
    Done(Reply<R>),
    /// The condition failed. `Some(item)`: the item as the store returned it (`None` inside:
    /// there is none); `None`: the store did not say.
    Refused(Option<Option<R>>),
    /// Any other failure. `transient`: another attempt may succeed; `maybe_applied`: the
    /// operation may have landed all the same (a timeout, a dropped connection).
    Failed {
        error: E,
        transient: bool,
        maybe_applied: bool,
    },
}

/// What a successful operation returned: the operations' one reply (`op::Reply`; a refusal
/// reaches a machine as `Answer::Refused`, never as `Reply::Refused`).
pub use crate::op::Reply;

/// What the caller does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<G, V, O> {
    /// Send `req`; an answer that has not come by `timeout_at` is a timeout (the request may
    /// still land). At or before the current time: do not send it, it timed out already.
    Send { req: Req<G, V>, timeout_at: Time },
    /// Step again at `until` (`Time::MAX`: never, unless cancelled). `abortable`: a
    /// cancellation ends the wait at once.
    Wait { until: Time, abortable: bool },
    /// The machine is over.
    Done(O),
}

/// `step`, its outcome made another by `f`.
pub fn map<G, V, A, B>(step: Step<G, V, A>, f: impl FnOnce(A) -> B) -> Step<G, V, B> {
    match step {
        Step::Send { req, timeout_at } => Step::Send { req, timeout_at },
        Step::Wait { until, abortable } => Step::Wait { until, abortable },
        Step::Done(out) => Step::Done(f(out)),
    }
}

/// A machine that sends requests: its caller sends what a `Step` asks for and steps it again
/// with the answer, or when the time it waits for comes.
/// Why a request is sent, for the bill (`metrics()` counts requests by purpose): taking a
/// lock, waiting for one (re-reads, the first-in-line mark, a Fifo waiter's reads and entry
/// upkeep), keeping a held lock (heartbeats), giving one up (release, hand-over).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    Acquiring = 0,
    Waiting = 1,
    Heartbeat = 2,
    Releasing = 3,
}

/// The purposes' names, in the order of their values.
pub const PURPOSES: [&str; 4] = ["acquiring", "waiting", "heartbeats", "releasing"];

pub trait Machine<R: Record, E> {
    /// What the machine ends with.
    type Out;
    /// Why the request of its last step is sent.
    fn purpose(&self) -> Purpose;
    /// Whether its requests count in the requests by purpose (the lock protocol's own).
    fn counted(&self) -> bool {
        true
    }
    /// An answer to the request the last step sent.
    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> Step<R::Guid, R::Version, Self::Out>;
    /// The time the last step waited for has come, or the wait was cancelled
    /// (`env.cancelled`).
    fn timer(&mut self, env: &Env) -> Step<R::Guid, R::Version, Self::Out>;
}

/// Full-jitter exponential pause before attempt `n` (1-based, n >= 2), drawn with `random`:
/// between half and all of `base` doubled `n - 2` times, at most `max`.
pub fn backoff(base: Duration, max: Duration, n: u32, random: u64) -> Duration {
    let exp = base.saturating_mul(1u32 << n.saturating_sub(2).min(16)).min(max);
    let ms = exp.as_millis() as u64;
    let low = ms / 2;
    let high = ms.max(1);
    Duration::from_millis(low + random % (high - low + 1))
}

/// How hard to try one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    pub max_attempts: u32,
    pub attempt_timeout: Duration,
    /// No attempt starts, and no attempt runs, past this instant.
    pub deadline: Option<Time>,
    /// The first pause between attempts, before jitter; it doubles with each attempt up to
    /// `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
}

impl Policy {
    pub fn new(max_attempts: u32, attempt_timeout: Duration) -> Self {
        Policy {
            max_attempts: max_attempts.max(1),
            attempt_timeout,
            deadline: None,
            base_backoff: settings::RETRY_BASE_BACKOFF,
            max_backoff: settings::RETRY_MAX_BACKOFF,
        }
    }

    /// The pause before attempt `n` (`backoff`).
    pub fn backoff(&self, n: u32, random: u64) -> Duration {
        backoff(self.base_backoff, self.max_backoff, n, random)
    }

    /// The same policy, with no attempt running past `deadline`.
    pub fn until(mut self, deadline: Time) -> Self {
        self.deadline = Some(deadline);
        self
    }
}

/// The attempts of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attempts {
    policy: Policy,
    sent: u32,
    /// An attempt so far may have landed.
    pub ambiguous: bool,
}

impl Attempts {
    pub fn new(policy: Policy) -> Self {
        Attempts {
            policy,
            sent: 0,
            ambiguous: false,
        }
    }

    /// The next attempt goes out now: when it times out.
    pub fn send(&mut self, now: Time) -> Time {
        self.sent += 1;
        let at = now.saturating_add(self.policy.attempt_timeout);
        match self.policy.deadline {
            Some(d) => at.min(d.max(now)),
            None => at,
        }
    }

    /// An attempt failed: when the next one goes out, or `None` when none does (the failure
    /// is the operation's).
    pub fn failed(&mut self, transient: bool, maybe_applied: bool, now: Time, random: u64) -> Option<Time> {
        self.ambiguous |= maybe_applied;
        if !transient || self.sent >= self.policy.max_attempts {
            return None;
        }
        let at = now + self.policy.backoff(self.sent + 1, random);
        match self.policy.deadline {
            Some(d) if at >= d => None,
            _ => Some(at),
        }
    }
}

/// The policies of one write and of the read that settles it, sharing one deadline: the
/// write attempts end one request timeout before `attempts` of them would, which leaves that
/// last timeout to the read that settles a write that may have landed. So an operation takes
/// at most `attempts` request timeouts, whatever happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    pub writes: Policy,
    pub settle: Policy,
}

impl Budget {
    /// A write under `write` and its settling read under `read`, from `now`.
    pub fn new(write: Policy, read: Policy, now: Time) -> Budget {
        let n = write.max_attempts;
        let request_timeout = write.attempt_timeout;
        let end = now + request_timeout.saturating_mul(n);
        let writes_end = now + request_timeout.saturating_mul(n.saturating_sub(1).max(1));
        Budget {
            writes: write.until(writes_end),
            settle: read.until(end),
        }
    }
}

impl Lock {
    /// Up to `attempts` attempts of one request, each given `requestTimeoutMs`.
    pub fn policy(&self, attempts: u32) -> Policy {
        let mut p = Policy::new(attempts, self.request_timeout);
        p.base_backoff = self.base_backoff;
        p.max_backoff = self.max_backoff;
        p
    }

    /// The budget of a write of `attempts` attempts and of the read that settles it.
    pub fn budget(&self, attempts: u32, now: Time) -> Budget {
        Budget::new(self.policy(attempts), self.policy(self.max_attempts), now)
    }
}

/// One operation in flight, or pausing between its attempts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pending<G, V> {
    pub req: Req<G, V>,
    pub attempts: Attempts,
}

/// How one operation ended after its attempts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ended<R, E> {
    Ok(Reply<R>),
    /// The condition failed (`current` as in `Answer::Refused`); `ambiguous`: an earlier
    /// attempt may have landed, and may be what the condition met.
    Refused {
        current: Option<Option<R>>,
        ambiguous: bool,
    },
    Failed {
        error: E,
        ambiguous: bool,
    },
}

/// An answer to the pending operation: its end, or the step that retries it.
pub enum Next<R, E, G, V, O> {
    Ended(Ended<R, E>),
    Step(Step<G, V, O>),
}

impl<G: Clone, V: Clone> Pending<G, V> {
    /// Starts `req` under `policy`: the step that sends it.
    pub fn start<O>(req: Req<G, V>, policy: Policy, now: Time) -> (Self, Step<G, V, O>) {
        let mut p = Pending {
            req,
            attempts: Attempts::new(policy),
        };
        let step = p.resend(now);
        (p, step)
    }

    /// The step that sends the next attempt.
    pub fn resend<O>(&mut self, now: Time) -> Step<G, V, O> {
        Step::Send {
            req: self.req.clone(),
            timeout_at: self.attempts.send(now),
        }
    }

    /// Takes an attempt's answer.
    pub fn answer<R: Record, E, O>(&mut self, a: Answer<R, E>, env: &Env) -> Next<R, E, G, V, O> {
        match a {
            Answer::Done(r) => Next::Ended(Ended::Ok(r)),
            Answer::Refused(current) => Next::Ended(Ended::Refused {
                current,
                ambiguous: self.attempts.ambiguous,
            }),
            Answer::Failed {
                error,
                transient,
                maybe_applied,
            } => match self.attempts.failed(transient, maybe_applied, env.now, env.random) {
                Some(until) => Next::Step(Step::Wait {
                    until,
                    abortable: false,
                }),
                None => Next::Ended(Ended::Failed {
                    error,
                    ambiguous: self.attempts.ambiguous,
                }),
            },
        }
    }
}

/// One request, tried as hard as its policy allows and ended by its first answer, as a
/// machine: for a request whose outcome needs no settling (a read, or a write whose repetition
/// is harmless: `lock.update`'s data, the removal of Fifo queue entries nobody waits for).
/// `purpose`: why it is sent, when it counts as a request of the lock protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Once<G, V> {
    pending: Pending<G, V>,
    purpose: Option<Purpose>,
}

impl<G: Clone, V: Clone> Once<G, V> {
    /// Starts `req` under `policy` at `now`: the step that sends it.
    pub fn start<O>(req: Req<G, V>, policy: Policy, purpose: Option<Purpose>, now: Time) -> (Self, Step<G, V, O>) {
        let (pending, step) = Pending::start(req, policy, now);
        (Once { pending, purpose }, step)
    }
}

impl<R: Record, E> Machine<R, E> for Once<R::Guid, R::Version> {
    type Out = Ended<R, E>;

    fn purpose(&self) -> Purpose {
        self.purpose.unwrap_or(Purpose::Acquiring)
    }

    fn counted(&self) -> bool {
        self.purpose.is_some()
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> Step<R::Guid, R::Version, Ended<R, E>> {
        match self.pending.answer(a, env) {
            Next::Step(step) => step,
            Next::Ended(ended) => Step::Done(ended),
        }
    }

    fn timer(&mut self, env: &Env) -> Step<R::Guid, R::Version, Ended<R, E>> {
        self.pending.resend(env.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn transient_failures_are_retried_until_the_attempts_run_out() {
        let mut a = Attempts::new(Policy::new(3, ms(100)));
        assert_eq!(a.send(ms(0)), ms(100));
        let next = a.failed(true, false, ms(5), 0).expect("a second attempt");
        assert!(next >= ms(5 + 12) && next <= ms(5 + 25), "{next:?}");
        a.send(next);
        let next = a.failed(true, true, next, u64::MAX).expect("a third attempt");
        a.send(next);
        assert_eq!(a.failed(true, false, next, 0), None);
        assert!(a.ambiguous, "the second attempt may have landed");
    }

    #[test]
    fn a_failure_that_no_retry_mends_ends_at_once() {
        let mut a = Attempts::new(Policy::new(5, ms(100)));
        a.send(ms(0));
        assert_eq!(a.failed(false, false, ms(1), 0), None);
        assert!(!a.ambiguous);
    }

    #[test]
    fn nothing_runs_past_the_deadline() {
        let mut a = Attempts::new(Policy::new(100, ms(1000)).until(ms(300)));
        assert_eq!(a.send(ms(0)), ms(300), "the attempt's timeout stops at the deadline");
        assert_eq!(a.failed(true, true, ms(299), 0), None, "no pause runs past it");
        assert_eq!(a.send(ms(400)), ms(400), "an attempt after it times out at once");
    }

    #[test]
    fn pauses_double_within_bounds() {
        let p = Policy::new(50, ms(100));
        assert_eq!(p.backoff(2, 0), ms(12));
        assert_eq!(p.backoff(2, 13), ms(25));
        assert_eq!(p.backoff(3, 0), ms(25));
        assert!(p.backoff(40, u64::MAX - 1) <= ms(1000));
        assert!(p.backoff(40, 0) >= ms(500));
    }

    #[test]
    fn a_budget_leaves_its_last_timeout_to_the_settling_read() {
        let p = |n| Policy::new(n, ms(100));
        let b = Budget::new(p(4), p(4), ms(1000));
        assert_eq!(b.writes.deadline, Some(ms(1300)));
        assert_eq!(b.settle.deadline, Some(ms(1400)));
        let b = Budget::new(p(1), p(4), ms(0));
        assert_eq!(b.writes.deadline, Some(ms(100)));
        assert_eq!(b.settle.deadline, Some(ms(100)));
    }

    #[test]
    fn a_request_tried_once_retries_transient_failures_and_ends_at_its_first_answer() {
        use crate::item::{Guid, LockRecord, Version};
        type O = Once<Guid, Version>;
        type St = Step<Guid, Version, Ended<LockRecord, &'static str>>;
        fn failed<R>(transient: bool) -> Answer<R, &'static str> {
            Answer::Failed {
                error: "e",
                transient,
                maybe_applied: false,
            }
        }
        let (mut m, step): (O, St) = Once::start(Req::Get, Policy::new(3, ms(100)), None, ms(0));
        assert_eq!(
            step,
            Step::Send {
                req: Req::Get,
                timeout_at: ms(100)
            }
        );
        assert!(
            !Machine::<LockRecord, &str>::counted(&m),
            "not a request of the lock protocol"
        );
        let env = crate::testing::env(100);
        let St::Wait { until, .. } = m.answer(failed::<LockRecord>(true), &env) else {
            panic!("a transient failure is retried")
        };
        let env = crate::testing::env(until.as_millis() as u64);
        assert!(matches!(m.timer(&env), St::Send { req: Req::Get, .. }));
        assert_eq!(
            m.answer(Answer::<LockRecord, &str>::Done(Reply::Before(None)), &env),
            Step::Done(Ended::Ok(Reply::Before(None)))
        );

        let (mut m, _): (O, St) = Once::start(
            Req::SetData {
                guids: vec![[1; crate::item::GUID_LEN]],
            },
            Policy::new(3, ms(100)),
            Some(Purpose::Heartbeat),
            ms(0),
        );
        assert!(Machine::<LockRecord, &str>::counted(&m));
        assert_eq!(
            m.answer(Answer::<LockRecord, &str>::Refused(None), &crate::testing::env(5)),
            Step::Done(Ended::Refused {
                current: None,
                ambiguous: false
            }),
            "a refusal is an answer"
        );
        let (mut m, _): (O, St) = Once::start(Req::DeleteFinished, Policy::new(3, ms(100)), None, ms(0));
        assert_eq!(
            m.answer(failed::<LockRecord>(false), &crate::testing::env(5)),
            Step::Done(Ended::Failed {
                error: "e",
                ambiguous: false
            }),
            "a failure no retry mends ends it"
        );
    }
}
