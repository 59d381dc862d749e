//! FailOpen acquisition as a state machine: a lock with a lease. One conditional `UpdateItem`
//! (`Take`) takes a lock that is absent, released, or still carries the version a waiter has
//! waited out; it raises `fencingToken` by one.
//!
//! The protocol:
//! - The lease counts from when the winning write was sent, on the taker's clock.
//! - A waiter waits the holder's whole lease on its own monotonic clock from when it saw the
//!   item. With `trustLocalTime` the holder's `lockAcquiredTimeUnixMs` may shorten that wait,
//!   never lengthen it. It re-reads meanwhile, at a pace that slows with the time it has
//!   waited for this holder (`waiting`), and at the deadline whatever the pace: a released or
//!   deleted item is taken at once; a new holder
//!   restarts the wait at no cost; a holder that renewed costs one of `retryCount` at the old
//!   deadline and restarts the wait from when the renewal was seen.
//! - The takeover write is conditioned on the version waited out: a holder that renewed
//!   meanwhile keeps its lock.
//! - After a write that may have landed, a refusal may have met our own write: an item that
//!   carries our `guid` is ours, with its token. A failure after such a write is settled by
//!   reading; when even the read fails, the outcome says so (`undo`) and the caller marks the
//!   write released if it landed.
//! - A cancellation ends a wait at once; a write out is settled first, and a cancelled
//!   acquisition sends nothing after that (no first-in-line mark, no re-read).
//! - An item the record refuses (`Record::corrupt`: a token that is not a safe integer, a
//!   lease that is not whole milliseconds, a `guid` of an unnamable type) ends the acquisition
//!   at once, from a refusal, a read or a re-read: it is not contention and is not waited out.
//!   The take's condition keeps it from landing on a token it refuses, except a fraction; a
//!   take that landed on one gives the lock back before it ends.
//! - A take that landed but grants nothing (answered after its whole lease, `Expired`, or on a
//!   refused item) is given back by the acquisition itself, with the release of a held lock
//!   (`release::Release`), before it ends; the outcome says if that failed (`undo`), for the
//!   caller to undo the write later (`undo::Undo`). The caller may also ask for a lock just
//!   taken to be given back (`give_back`: its session ended before the grant was known).
//! - A lock held through a session (`lockSession`) writes nothing while it is held: the
//!   waiter waits out the session's item instead of the lock's, a whole session lease on its
//!   own clock from when it read it, re-reading the lock meanwhile at its pace (a release is
//!   taken at once) and the session every half of its lease. At the deadline it ends the
//!   session (`EndSession`, a release of the session's item on the `guid` it waited out, which
//!   no late renewal can undo), then takes the lock on the lock's version it saw. A session
//!   found ended (released or gone) is not waited out. A session seen renewed costs one of
//!   `retryCount` at the deadline and restarts the wait from when the renewal was seen: a
//!   crashed holder's lock is taken at most a lease and a half after its last renewal.

use std::time::Duration;

use crate::broken::{self, Broken};
use crate::item::RELEASED_LEASE_MS;
use crate::op::Record;
use crate::release::{self, Release};
use crate::request::{Answer, Ended, Env, Machine, Next, Pending, Policy, Purpose, Reply, Req, Step, Time};
use crate::settings::Lock;
use crate::waiting::{next_read, Waiting};

/// How an acquisition ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<R, E> {
    /// The lock is ours with `fencing_token`; its lease runs from `sent_at`. `contended`: the
    /// acquisition found the lock held by someone else (others want it too).
    Taken {
        fencing_token: u64,
        sent_at: Time,
        contended: bool,
    },
    /// The lock stayed held: the holder's item.
    Held(R),
    /// Our take landed, but its answer came after the whole lease (a request slower than the
    /// lease, or a write settled by reading it back much later): it grants nothing, as another
    /// waiter may have waited the lease out meanwhile, and it was given back. `undo`: the give
    /// back failed, and the caller undoes the write later.
    Expired {
        undo: bool,
    },
    /// The item is refused (`Record::corrupt`): no token is handed out from it. Our take may
    /// have been applied to it all the same (a fractional token, which no condition can
    /// exclude): it was given back, and `undo` says that failed, for the caller to undo the
    /// write later.
    Corrupt {
        item: R,
        undo: bool,
    },
    /// A request failed. `undo`: the write may have landed and could not be read back; the
    /// caller releases it if it did.
    Failed {
        error: E,
        undo: bool,
    },
    Aborted,
}

/// What follows a write of the first-in-line mark.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Then<R> {
    /// The take was refused by `R`'s holder: wait it out.
    WaitOut(R),
    /// A re-read found `R`.
    Reread(R),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase<R: Record, E> {
    StandBack,
    Take,
    /// Reading the item after a refusal that did not carry it.
    SettleRefusal,
    /// Reading the item after a failure that may have landed; `E` is the outcome unless the
    /// item is ours.
    SettleFailure(E),
    Mark(Then<R>),
    /// Waiting out the holder's lease (until `deadline`) or for the next re-read.
    Waiting,
    Reread,
    /// Reading the item of the session the lock is held through.
    ReadSession,
    /// Ending the session waited out.
    EndSession,
    /// Giving back the lock our take left on the item, then ending as `Back` says.
    GiveBack(Box<Release<R, E>>, Back<R>),
    Over,
}

/// Why a take that landed is given back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Back<R> {
    Expired,
    Corrupt(R),
}

/// The session a waited-for lock is held through: its id, the lock's item as last seen, the
/// session's version waited out with its `guid` (`None`: not read yet), a newer one seen since
/// (with when), and when the session is read next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Session<R: Record> {
    id: String,
    lock: R,
    seen: Option<(R::Version, R::Guid)>,
    newer: Option<(R, R::Guid, Time, u64)>,
    read_at: Time,
}

type Out<R, E> = Outcome<R, E>;
type St<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Out<R, E>>;

/// The wait before `rec` may be taken over, from when it was seen (`seen_unix_ms` on the
/// wall clock).
pub fn wait_for<R: Record>(s: &Lock, rec: &R, seen_unix_ms: u64) -> Duration {
    let lease = rec.lease_duration_ms().unwrap_or(s.lease_duration_ms);
    let ms = match (s.trust_local_time, rec.lock_acquired_time_unix_ms()) {
        (true, Some(acquired)) => lease.saturating_sub(seen_unix_ms.saturating_sub(acquired)),
        _ => lease,
    };
    Duration::from_millis(ms)
}

/// One FailOpen acquisition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire<R: Record, E> {
    s: Lock,
    guid: R::Guid,
    waiting: Option<Waiting<Option<u64>>>,
    retries_left: u32,
    /// The version the next take may overwrite, and its token.
    waited_out: Option<(R::Version, Option<u64>)>,
    /// When the current take was first sent.
    sent_at: Time,
    settle: Policy,
    /// The wait-out: the version (and its token) waited for, until when, and a renewal of it
    /// seen at a time (and wall-clock time).
    target: Option<(R::Version, Option<u64>)>,
    deadline: Time,
    newer: Option<(R, Time, u64)>,
    /// The lock waited for is held through this session: the session is waited out. Boxed:
    /// most waits are for locks without one.
    session: Option<Box<Session<R>>>,
    pending: Option<Pending<R::Guid, R::Version>>,
    phase: Phase<R, E>,
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
            retries_left: s.retry_count,
            waited_out: None,
            sent_at: env.now,
            settle: s.policy(s.max_attempts),
            target: None,
            deadline: env.now,
            newer: None,
            session: None,
            pending: None,
            phase: Phase::StandBack,
        };
        let step = match stand_back_until {
            Some(until) if until > env.now => Step::Wait { until, abortable: true },
            _ => m.take(env),
        };
        (m, step)
    }

    /// What its write is: the settings it was made with, and its `guid` (what an undo of
    /// it removes).
    pub fn written(&self) -> (Lock, R::Guid) {
        (self.s, self.guid.clone())
    }

    /// Gives back the lock this acquisition just took (`Outcome::Taken`), which its caller
    /// does not take after all (the session it was taken through ended before the grant was
    /// known): it ends as `Expired`.
    pub fn give_back(&mut self, env: &Env) -> St<R, E> {
        self.give_back_as(Back::Expired, env)
    }

    fn give_back_as(&mut self, back: Back<R>, env: &Env) -> St<R, E> {
        if broken::on(Broken::ExpiredTakeKept) {
            return self.over(Self::given_back(back, false));
        }
        let (m, step) = Release::start(self.s, vec![self.guid.clone()], false, env);
        // Nothing of the acquisition is read again: forget it.
        self.waiting = None;
        self.waited_out = None;
        self.target = None;
        self.newer = None;
        self.session = None;
        self.pending = None;
        self.retries_left = 0;
        self.settle = self.s.policy(self.s.max_attempts);
        (self.sent_at, self.deadline) = (Time::ZERO, Time::ZERO);
        self.phase = Phase::GiveBack(Box::new(m), back);
        self.giving_back(step)
    }

    fn giving_back(&mut self, step: release::St<R, E>) -> St<R, E> {
        match step {
            Step::Send { req, timeout_at } => Step::Send { req, timeout_at },
            Step::Wait { until, abortable } => Step::Wait { until, abortable },
            Step::Done(out) => {
                let Phase::GiveBack(_, back) = std::mem::replace(&mut self.phase, Phase::Over) else {
                    unreachable!("giving back")
                };
                // Released, or nothing of ours was left: nothing to undo.
                let undo = matches!(out, release::Outcome::Failed(_));
                self.over(Self::given_back(back, undo))
            }
        }
    }

    fn given_back(back: Back<R>, undo: bool) -> Out<R, E> {
        match back {
            Back::Expired => Outcome::Expired { undo },
            Back::Corrupt(item) => Outcome::Corrupt { item, undo },
        }
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

    /// Our take landed on `r`.
    fn taken(&mut self, r: &R) -> St<R, E> {
        if r.corrupt() {
            return Step::Done(Outcome::Corrupt {
                item: r.clone(),
                undo: true,
            });
        }
        let fencing_token = r.fencing_token().unwrap_or(1);
        self.won(fencing_token)
    }

    fn won(&mut self, fencing_token: u64) -> St<R, E> {
        let contended = self.waiting.is_some();
        let sent_at = self.sent_at;
        self.over(Outcome::Taken {
            fencing_token,
            sent_at,
            contended,
        })
    }

    fn take(&mut self, env: &Env) -> St<R, E> {
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        self.target = None;
        self.newer = None;
        self.sent_at = env.now;
        let budget = self.s.budget(self.s.max_attempts, env.now);
        self.settle = budget.settle;
        self.phase = Phase::Take;
        let req = Req::Take {
            guid: self.guid.clone(),
            waited_out: self.waited_out.as_ref().map(|(v, _)| v.clone()),
            clear_mark: self.waiting.as_ref().is_some_and(|w| w.first),
            lock_acquired_time_unix_ms: Some(env.unix_ms),
        };
        self.send(req, budget.writes, env)
    }

    fn take_ended(&mut self, ended: Ended<R, E>, env: &Env) -> St<R, E> {
        if env.cancelled && !matches!(ended, Ended::Ok(_)) && broken::on(Broken::CancelledTakeSkipsSettle) {
            return self.over(Outcome::Aborted);
        }
        match ended {
            Ended::Ok(Reply::Token(t)) => {
                if broken::on(Broken::LeaseFromReply) {
                    self.sent_at = env.now;
                }
                self.won(t)
            }
            Ended::Ok(_) => self.won(1),
            Ended::Refused { current: Some(cur), .. } => self.refused(cur, env),
            Ended::Refused { current: None, .. } => {
                self.phase = Phase::SettleRefusal;
                self.send(Req::Get, self.settle, env)
            }
            Ended::Failed { error, ambiguous } => {
                if !ambiguous {
                    return self.over(Outcome::Failed { error, undo: false });
                }
                self.phase = Phase::SettleFailure(error);
                self.send(Req::Get, self.settle, env)
            }
        }
    }

    /// The take was refused: the item is `current`.
    fn refused(&mut self, current: Option<R>, env: &Env) -> St<R, E> {
        // An earlier attempt of this request may be what the condition met.
        if let Some(r) = current.as_ref().filter(|r| r.carries(&self.guid)) {
            let r = r.clone();
            return self.taken(&r);
        }
        // The take's condition excludes the tokens it can (another type, out of range): the
        // refusal is for the item, not for contention, and is not waited out.
        if let Some(r) = current.as_ref().filter(|r| r.corrupt()) {
            return self.over(Outcome::Corrupt {
                item: r.clone(),
                undo: false,
            });
        }
        // Cancelled: nothing of ours is on the item, so nothing is left to settle or wait for.
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        let Some(held) = current.filter(|r| r.lease_duration_ms() != Some(RELEASED_LEASE_MS)) else {
            // Another waiter took the free lock first and released it already, or the item
            // went away: try again at once. Losing a race is waiting, not a failed attempt.
            self.waited_out = None;
            return self.take(env);
        };
        // A takeover after waiting a whole lease that finds the same holder (it renewed) is
        // a failed attempt; a lock that changed hands meanwhile is not.
        if let Some((_, token)) = self.waited_out.take() {
            if token == held.fencing_token() {
                if self.retries_left == 0 {
                    return self.over(Outcome::Held(held));
                }
                self.retries_left -= 1;
            }
        }
        self.observe(held, true, env)
    }

    /// Reads the mark on `held`, claims or renews the first place if it may, then goes on
    /// waiting (`start`: the wait-out begins with `held`; otherwise `held` was re-read).
    fn observe(&mut self, held: R, start: bool, env: &Env) -> St<R, E> {
        // A cancelled waiter neither claims the first place nor reads again.
        if env.cancelled {
            return self.over(Outcome::Aborted);
        }
        let w = self.waiting.get_or_insert_with(|| Waiting::at(env));
        // The holder is its token: a heartbeat (same token, new guid) keeps the pace, a new
        // acquisition starts it over.
        w.pace.seen(held.fencing_token(), env.now);
        let mark = w.observe(&self.s, &held, env.unix_ms);
        let then = if start { Then::WaitOut(held) } else { Then::Reread(held) };
        match mark {
            Some(mark) => {
                self.phase = Phase::Mark(then);
                self.send(mark, self.s.policy(1), env)
            }
            None => match then {
                Then::WaitOut(h) => self.wait_out(h, env),
                Then::Reread(h) => self.reread(h, env),
            },
        }
    }

    /// Starts waiting out `seen`, or the session it is held through.
    fn wait_out(&mut self, seen: R, env: &Env) -> St<R, E> {
        self.target = Some((seen.version(), seen.fencing_token()));
        self.newer = None;
        if let Some(id) = seen.session().map(str::to_owned) {
            self.session = Some(Box::new(Session {
                id,
                lock: seen,
                seen: None,
                newer: None,
                read_at: env.now,
            }));
            return self.read_session(env);
        }
        self.session = None;
        self.deadline = env.now + wait_for(&self.s, &seen, env.unix_ms);
        self.wait(env)
    }

    fn read_session(&mut self, env: &Env) -> St<R, E> {
        let Some(session) = self.session.as_ref().map(|s| s.id.clone()) else {
            return self.wait(env);
        };
        self.phase = Phase::ReadSession;
        self.send(Req::ReadSession { session }, self.s.policy(self.s.max_attempts), env)
    }

    /// The session's item is `current`: an ended session lets the lock be taken at once; a
    /// live one is waited out from its first read, and a renewal seen since is kept for the
    /// deadline (`wait`).
    fn session_seen(&mut self, current: Option<R>, env: &Env) -> St<R, E> {
        let Some(live) = current.filter(|r| r.lease_duration_ms() != Some(RELEASED_LEASE_MS)) else {
            return self.waited(env);
        };
        let Some(sess) = self.session.as_mut() else {
            return self.waited(env);
        };
        let Some(guid) = live.guid().filter(|_| !live.corrupt()) else {
            return self.over(Outcome::Corrupt {
                item: live,
                undo: false,
            });
        };
        // The session is read again every half of its lease.
        let half = wait_for(&self.s, &live, env.unix_ms) / 2;
        sess.read_at = env.now + half.max(self.s.reread);
        let v = live.version();
        let known = sess
            .newer
            .as_ref()
            .map(|(r, ..)| r.version())
            .or_else(|| sess.seen.as_ref().map(|(v, _)| v.clone()));
        match known {
            None => {
                self.deadline = env.now + wait_for(&self.s, &live, env.unix_ms);
                sess.seen = Some((v, guid));
            }
            // Renewed since: the wait restarts from here, at the deadline.
            Some(k) if k != v => sess.newer = Some((live, guid, env.now, env.unix_ms)),
            Some(_) => {}
        }
        self.wait(env)
    }

    /// The session waited out showed one version for a whole lease: end it, then take the
    /// lock.
    fn end_session(&mut self, env: &Env) -> St<R, E> {
        let Some(sess) = self.session.as_ref() else {
            return self.waited(env);
        };
        let Some((_, guid)) = sess.seen.clone() else {
            return self.read_session(env);
        };
        if broken::on(Broken::TakeoverSkipsSessionEnd) {
            return self.waited(env);
        }
        let session = sess.id.clone();
        self.phase = Phase::EndSession;
        self.send(
            Req::EndSession { session, guid },
            self.s.policy(self.s.max_attempts),
            env,
        )
    }

    /// A re-read found `r`, held.
    fn reread(&mut self, r: R, env: &Env) -> St<R, E> {
        let Some((target, target_token)) = self.target.clone() else {
            return self.wait_out(r, env);
        };
        // A lock held through a session changes only when it changes hands (or sessions).
        let sessions_differ = match &self.session {
            Some(s) => r.version() != target || s.lock.session() != r.session(),
            None => r.session().is_some(),
        };
        if sessions_differ {
            return self.wait_out(r, env);
        }
        if r.fencing_token() != target_token || broken::on(Broken::RereadRestartsWait) {
            // A new holder: its lease starts now.
            return self.wait_out(r, env);
        }
        let v = r.version();
        let known = self.newer.as_ref().map(|(l, _, _)| l.version()).unwrap_or(target);
        if v != known {
            self.newer = Some((r, env.now, env.unix_ms));
        }
        self.wait(env)
    }

    /// The wait is over: take the lock, on the condition that it still carries the version
    /// waited out (or is free).
    fn waited(&mut self, env: &Env) -> St<R, E> {
        self.waited_out = self.target.take();
        self.take(env)
    }

    /// Waits for the deadline or the next re-read; at the deadline, the takeover (or, if the
    /// holder renewed meanwhile, one retry spent and the wait restarted from the renewal).
    fn wait(&mut self, env: &Env) -> St<R, E> {
        while env.now >= self.deadline {
            if let Some(sess) = self.session.as_mut() {
                let Some((rec, guid, at, at_unix)) = sess.newer.take() else {
                    return self.end_session(env);
                };
                // The session renewed while it was waited out: it lives.
                if self.retries_left == 0 {
                    let lock = sess.lock.clone();
                    return self.over(Outcome::Held(lock));
                }
                self.retries_left -= 1;
                sess.seen = Some((rec.version(), guid));
                self.deadline = at + wait_for(&self.s, &rec, at_unix);
                continue;
            }
            match self.newer.take() {
                None => return self.waited(env),
                Some((rec, at, at_unix)) => {
                    if self.retries_left == 0 {
                        return self.over(Outcome::Held(rec));
                    }
                    self.retries_left -= 1;
                    self.target = Some((rec.version(), rec.fencing_token()));
                    self.deadline = at + wait_for(&self.s, &rec, at_unix);
                }
            }
        }
        self.phase = Phase::Waiting;
        let limit = match &self.session {
            Some(sess) => self.deadline.min(sess.read_at.max(env.now)),
            None => self.deadline,
        };
        Step::Wait {
            until: next_read(&self.s, self.waiting.as_ref(), env.now, limit),
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
            Phase::Mark(_) | Phase::Waiting | Phase::Reread | Phase::ReadSession | Phase::EndSession => {
                Purpose::Waiting
            }
            Phase::GiveBack(..) => Purpose::Releasing,
            _ => Purpose::Acquiring,
        }
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
        if let Phase::GiveBack(m, _) = &mut self.phase {
            let step = m.answer(a, env);
            return self.giving_back(step);
        }
        match self.answered(a, env) {
            Step::Done(Outcome::Taken { sent_at, .. }) if env.now >= sent_at + self.s.lease() => {
                self.give_back_as(Back::Expired, env)
            }
            // Our take landed on an item that is refused (`taken`).
            Step::Done(Outcome::Corrupt { item, undo: true }) => self.give_back_as(Back::Corrupt(item), env),
            step => step,
        }
    }

    fn timer(&mut self, env: &Env) -> St<R, E> {
        if let Phase::GiveBack(m, _) = &mut self.phase {
            let step = m.timer(env);
            return self.giving_back(step);
        }
        self.timed(env)
    }
}

impl<R: Record, E: Clone> Acquire<R, E> {
    fn answered(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
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
            Phase::Take => self.take_ended(ended, env),
            Phase::SettleRefusal => match ended {
                Ended::Ok(Reply::Before(cur)) => self.refused(cur, env),
                Ended::Failed { error, .. } => self.over(Outcome::Failed { error, undo: false }),
                Ended::Ok(_) | Ended::Refused { .. } => self.refused(None, env),
            },
            Phase::SettleFailure(error) => match ended {
                Ended::Ok(Reply::Before(Some(r))) if r.carries(&self.guid) => self.taken(&r),
                Ended::Ok(_) | Ended::Refused { .. } => self.over(Outcome::Failed { error, undo: false }),
                Ended::Failed { .. } => self.over(Outcome::Failed { error, undo: true }),
            },
            Phase::Mark(then) => {
                let written = matches!(ended, Ended::Ok(_));
                if let Some(w) = self.waiting.as_mut() {
                    w.marked(written);
                }
                match then {
                    Then::WaitOut(held) => self.wait_out(held, env),
                    Then::Reread(r) => self.reread(r, env),
                }
            }
            Phase::Reread => match ended {
                Ended::Ok(Reply::Before(None)) => self.waited(env),
                Ended::Ok(Reply::Before(Some(r))) if r.corrupt() => {
                    self.over(Outcome::Corrupt { item: r, undo: false })
                }
                Ended::Ok(Reply::Before(Some(r))) if r.lease_duration_ms() == Some(RELEASED_LEASE_MS) => {
                    self.waited(env)
                }
                Ended::Ok(Reply::Before(Some(r))) => self.observe(r, false, env),
                // A failed re-read changes nothing: the deadline still decides.
                _ => self.wait(env),
            },
            Phase::ReadSession => match ended {
                Ended::Ok(Reply::Before(current)) => self.session_seen(current, env),
                Ended::Failed { error, .. } => self.over(Outcome::Failed { error, undo: false }),
                Ended::Ok(_) | Ended::Refused { .. } => self.read_session(env),
            },
            Phase::EndSession => match ended {
                // Ended by this waiter: the lock is taken on the version seen.
                Ended::Ok(_) => self.waited(env),
                Ended::Refused {
                    current: Some(current), ..
                } => self.session_seen(current, env),
                Ended::Refused { current: None, .. } => self.read_session(env),
                Ended::Failed { error, .. } => self.over(Outcome::Failed { error, undo: false }),
            },
            Phase::StandBack | Phase::Waiting | Phase::GiveBack(..) | Phase::Over => self.over(Outcome::Aborted),
        }
    }

    fn timed(&mut self, env: &Env) -> St<R, E> {
        if let Some(p) = self.pending.as_mut() {
            return p.resend(env.now);
        }
        match self.phase {
            Phase::StandBack | Phase::Waiting if env.cancelled => self.over(Outcome::Aborted),
            Phase::StandBack => self.take(env),
            Phase::Waiting if env.now >= self.deadline => self.wait(env),
            Phase::Waiting if self.session.as_ref().is_some_and(|s| env.now >= s.read_at) => self.read_session(env),
            Phase::Waiting => {
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
    use super::*;
    use crate::item::LockRecord;
    use crate::settings::Kind;
    use crate::testing::{self, env, ms};

    fn lock() -> Lock {
        Lock {
            request_timeout: ms(100),
            ..testing::lock(Kind::FailOpen)
        }
    }

    fn held(guid: u8, token: u64) -> LockRecord {
        LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![guid; 4])),
            fencing_token: Some(token),
            lease_duration_ms: Some(1000),
            ..Default::default()
        }
    }

    type M = Acquire<LockRecord, &'static str>;
    type S = St<LockRecord, &'static str>;

    fn guid(n: u8) -> [u8; 64] {
        [n; 64]
    }

    /// An acquisition whose requests have one attempt each.
    fn one_attempt() -> M {
        let mut s = lock();
        s.max_attempts = 1;
        M::start(s, guid(1), None, &env(0)).0
    }

    /// A request that timed out: it may have landed.
    fn timeout() -> Answer<LockRecord, &'static str> {
        Answer::Failed {
            error: "timeout",
            transient: true,
            maybe_applied: true,
        }
    }

    fn wait_until(step: S) -> Time {
        match step {
            Step::Wait { until, .. } => until,
            other => panic!("expected a wait: {other:?}"),
        }
    }

    /// Answers reads with `item` and marks with success, until the machine waits, takes or
    /// ends.
    fn settle(m: &mut M, mut step: S, now: u64, item: &LockRecord) -> S {
        loop {
            step = match step {
                Step::Send { req: Req::Get, .. } => {
                    m.answer(Answer::Done(Reply::Before(Some(item.clone()))), &env(now))
                }
                Step::Send {
                    req: Req::MarkWaiting { .. },
                    ..
                } => m.answer(Answer::Done(Reply::Done), &env(now)),
                other => return other,
            }
        }
    }

    /// Steps the waiting machine at each instant it asks for, the item staying `item`, until
    /// it sends a take or ends; the step and the time.
    fn wait_out(m: &mut M, mut step: S, item: &LockRecord) -> (S, u64) {
        loop {
            match settle(m, step, 0, item) {
                Step::Wait { until, .. } => {
                    let now = until.as_millis() as u64;
                    let t = m.timer(&env(now));
                    step = settle(m, t, now, item);
                    if !matches!(step, Step::Wait { .. }) {
                        return (step, now);
                    }
                }
                other => return (other, 0),
            }
        }
    }

    fn corrupt(token: &str) -> LockRecord {
        let mut r = LockRecord::default();
        r.read(crate::item::GUID, crate::item::Found::B(vec![2; 4]));
        r.read(crate::item::LEASE_DURATION_MS, crate::item::Found::N("1".into()));
        r.read(crate::item::FENCING_TOKEN, crate::item::Found::N(token.into()));
        r
    }

    #[test]
    fn a_cancelled_acquisition_settles_a_take_that_may_have_landed_first() {
        let cancelled = |ms| Env {
            cancelled: true,
            ..env(ms)
        };
        let mut m = one_attempt();
        // Cancelled while the take was out: it timed out, and may have landed.
        let step = m.answer(timeout(), &cancelled(100));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }), "{step:?}");
        // It did: the lock is taken, for the caller to give back.
        let ours = LockRecord {
            guid: Some(crate::item::GuidValue::B(guid(1).to_vec())),
            ..held(1, 7)
        };
        let done = m.answer(Answer::Done(Reply::Before(Some(ours))), &cancelled(110));
        assert!(
            matches!(done, Step::Done(Outcome::Taken { fencing_token: 7, .. })),
            "{done:?}"
        );
        // Refused by another holder's item: nothing of its own is there, aborted at once.
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let done = m.answer(Answer::Refused(Some(Some(held(2, 3)))), &cancelled(5));
        assert_eq!(done, Step::Done(Outcome::Aborted));
    }

    #[test]
    fn a_refused_take_on_a_corrupt_item_ends_with_it_at_once() {
        for token in ["-5", "9007199254740992", "9007199254740991"] {
            let item = corrupt(token);
            let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
            let done = m.answer(Answer::Refused(Some(Some(item.clone()))), &env(1));
            assert_eq!(done, Step::Done(Outcome::Corrupt { item, undo: false }), "{token}");
        }
        // A backend that does not return the item: the read that follows finds it.
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let step = m.answer(Answer::Refused(None), &env(1));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }));
        let done = m.answer(Answer::Done(Reply::Before(Some(corrupt("1.5")))), &env(2));
        assert!(matches!(done, Step::Done(Outcome::Corrupt { undo: false, .. })));
    }

    #[test]
    fn a_take_that_landed_on_a_fractional_token_is_given_back_not_handed_out() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        // The new token could not be read: the write may have landed, and a read settles it.
        let step = m.answer(
            Answer::Failed {
                error: "unreadable token",
                transient: false,
                maybe_applied: true,
            },
            &env(1),
        );
        assert!(matches!(step, Step::Send { req: Req::Get, .. }), "{step:?}");
        let mut ours = corrupt("2.5");
        ours.read(crate::item::GUID, crate::item::Found::B(guid(1).to_vec()));
        let step = m.answer(Answer::Done(Reply::Before(Some(ours.clone()))), &env(2));
        assert!(
            matches!(&step, Step::Send { req: Req::Release { guids, .. }, .. } if *guids == vec![guid(1)]),
            "given back: {step:?}"
        );
        let done = m.answer(Answer::Done(Reply::Done), &env(3));
        assert_eq!(
            done,
            Step::Done(Outcome::Corrupt {
                item: ours,
                undo: false
            })
        );
    }

    #[test]
    fn a_corrupt_item_met_while_waiting_ends_the_wait() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let step = m.answer(Answer::Refused(Some(Some(held(2, 3)))), &env(1));
        let mut turned = corrupt("x");
        turned.lease_duration_ms = Some(1000);
        let mut step = settle(&mut m, step, 1, &held(2, 3));
        for _ in 0..1000 {
            if let Step::Wait { until, .. } = step {
                let now = until.as_millis() as u64;
                let t = m.timer(&env(now));
                step = settle(&mut m, t, now, &turned);
            } else {
                break;
            }
        }
        assert!(
            matches!(step, Step::Done(Outcome::Corrupt { undo: false, .. })),
            "{step:?}"
        );
    }

    #[test]
    fn a_free_lock_is_taken_with_one_write_and_its_lease_runs_from_the_send() {
        let (mut m, step) = M::start(lock(), guid(1), None, &env(0));
        assert!(
            matches!(step, Step::Send { req: Req::Take { waited_out: None, .. }, timeout_at } if timeout_at == ms(100))
        );
        let done = m.answer(Answer::Done(Reply::Token(7)), &env(40));
        assert_eq!(
            done,
            Step::Done(Outcome::Taken {
                fencing_token: 7,
                sent_at: ms(0),
                contended: false
            })
        );
    }

    #[test]
    fn a_held_lock_is_waited_out_then_taken_on_the_version_seen() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        // Refused by a holder: the waiter claims the first place, then waits.
        let step = m.answer(Answer::Refused(Some(Some(held(2, 3)))), &env(6));
        assert!(matches!(
            step,
            Step::Send {
                req: Req::MarkWaiting { .. },
                ..
            }
        ));
        let until = wait_until(m.answer(Answer::Done(Reply::Done), &env(6)));
        assert_eq!(until, ms(16), "the first in line re-reads at rereadPeriodMs");
        // Re-reads find the same version: the deadline stays a lease after it was seen.
        let (step, now) = wait_out(&mut m, Step::Wait { until, abortable: true }, &held(2, 3));
        assert_eq!(now, 1006, "a whole lease after the refusal was seen");
        let v = held(2, 3).version();
        assert!(matches!(step, Step::Send { req: Req::Take { waited_out: Some(w), .. }, .. } if w == v));
    }

    #[test]
    fn a_renewal_costs_a_retry_at_the_deadline_and_restarts_the_wait_from_the_renewal() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let step = m.answer(Answer::Refused(Some(Some(held(2, 3)))), &env(0));
        settle(&mut m, step, 0, &held(2, 3));
        // At 500 ms the holder has renewed (same token, new guid).
        let t = m.timer(&env(500));
        let step = settle(&mut m, t, 500, &held(9, 3));
        assert!(matches!(step, Step::Wait { .. }));
        // At the first deadline the wait restarts from the renewal: no take.
        let step = m.timer(&env(1000));
        assert!(matches!(step, Step::Wait { .. }), "{step:?}");
        // The one retry is spent: at the renewal's deadline, if it renewed again, the
        // acquisition gives up naming the holder.
        let t = m.timer(&env(1490));
        let step = settle(&mut m, t, 1490, &held(8, 3));
        assert!(matches!(step, Step::Wait { .. }));
        let step = m.timer(&env(1500));
        assert_eq!(step, Step::Done(Outcome::Held(held(8, 3))));
    }

    #[test]
    fn a_refusal_after_an_attempt_that_may_have_landed_may_be_our_own_write() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let failed = Answer::Failed {
            error: "timeout",
            transient: true,
            maybe_applied: true,
        };
        let pause = wait_until(m.answer(failed, &env(10)));
        assert!(matches!(
            m.timer(&env(pause.as_millis() as u64)),
            Step::Send {
                req: Req::Take { .. },
                ..
            }
        ));
        let ours = LockRecord {
            guid: Some(crate::item::GuidValue::B(guid(1).to_vec())),
            fencing_token: Some(4),
            lease_duration_ms: Some(1000),
            ..Default::default()
        };
        let step = m.answer(Answer::Refused(Some(Some(ours))), &env(150));
        assert!(
            matches!(step, Step::Done(Outcome::Taken { fencing_token: 4, .. })),
            "{step:?}"
        );
    }

    fn session_lock(guid: u8, token: u64) -> LockRecord {
        LockRecord {
            session: Some("s1".into()),
            lease_duration_ms: Some(crate::item::SESSION_LOCK_LEASE_MS),
            ..held(guid, token)
        }
    }

    fn session_item(g: u8) -> LockRecord {
        LockRecord {
            guid: Some(crate::item::GuidValue::B(guid(g).to_vec())),
            fencing_token: Some(1),
            lease_duration_ms: Some(1000),
            ..Default::default()
        }
    }

    /// An acquisition refused at 0 ms by `lock`, its mark written: the step after.
    fn refused_by(m: &mut M, lock: &LockRecord) -> S {
        let step = m.answer(Answer::Refused(Some(Some(lock.clone()))), &env(0));
        match step {
            Step::Send {
                req: Req::MarkWaiting { .. },
                ..
            } => m.answer(Answer::Done(Reply::Done), &env(0)),
            other => other,
        }
    }

    fn reads_session(step: &S) -> bool {
        matches!(step, Step::Send { req: Req::ReadSession { session }, .. } if session == "s1")
    }

    fn ends_session(step: &S, g: u8) -> bool {
        matches!(step, Step::Send { req: Req::EndSession { session, guid: seen }, .. } if session == "s1" && *seen == guid(g))
    }

    /// Steps the waiting machine at each instant it asks for until `until_ms` or until it
    /// sends anything but a read or a mark: reads of the lock find `lock`, reads of the session
    /// find what `session` says at that instant. The step, its time, and the session reads.
    fn wait_session(
        m: &mut M,
        mut step: S,
        lock: &LockRecord,
        session: impl Fn(u64) -> LockRecord,
        mut now: u64,
    ) -> (S, u64, u32) {
        let mut session_reads = 0;
        for _ in 0..100_000 {
            step = match step {
                Step::Send { req: Req::Get, .. } => {
                    m.answer(Answer::Done(Reply::Before(Some(lock.clone()))), &env(now))
                }
                Step::Send {
                    req: Req::MarkWaiting { .. },
                    ..
                } => m.answer(Answer::Done(Reply::Done), &env(now)),
                Step::Send {
                    req: Req::ReadSession { .. },
                    ..
                } => {
                    session_reads += 1;
                    m.answer(Answer::Done(Reply::Before(Some(session(now)))), &env(now))
                }
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    m.timer(&env(now))
                }
                other => return (other, now, session_reads),
            };
        }
        panic!("the wait never ended")
    }

    #[test]
    fn a_lock_of_a_live_session_is_taken_after_a_session_lease_and_the_sessions_end() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let l = session_lock(2, 3);
        let step = refused_by(&mut m, &l);
        assert!(
            reads_session(&step),
            "the waiter reads the session, not the lock's lease: {step:?}"
        );
        let step = m.answer(Answer::Done(Reply::Before(Some(session_item(7)))), &env(5));
        // The session stays as it was: the deadline is a session lease after its first read,
        // not the lock's 24.8 days; the session is read again every half lease meanwhile.
        let (step, now, reads) = wait_session(&mut m, step, &l, |_| session_item(7), 5);
        assert_eq!(now, 1005);
        assert_eq!(reads, 1, "re-read at 505 ms; the deadline at 1,005 ms ends it");
        assert!(ends_session(&step, 7), "{step:?}");
        let step = m.answer(Answer::Done(Reply::WaitingMark(None)), &env(1006));
        let v = l.version();
        assert!(
            matches!(&step, Step::Send { req: Req::Take { waited_out: Some(w), .. }, .. } if *w == v),
            "then the lock is taken on the version seen: {step:?}"
        );
    }

    #[test]
    fn a_crashed_sessions_lock_is_taken_within_a_lease_and_a_half_of_its_last_renewal() {
        // The session renews every 300 ms until it stops at 1,250 ms (its holder crashed).
        let renewed = |now: u64| session_item(10 + (now.min(1250) / 300) as u8);
        let patient = Lock {
            retry_count: 10,
            ..lock()
        };
        let (mut m, _) = M::start(patient, guid(1), None, &env(0));
        let l = session_lock(2, 3);
        assert!(reads_session(&refused_by(&mut m, &l)));
        let step = m.answer(Answer::Done(Reply::Before(Some(renewed(0)))), &env(0));
        let (step, now, _) = wait_session(&mut m, step, &l, renewed, 0);
        // The last version is first seen by the read at 1,500 ms at the latest: ended at 2,500
        // ms, within a lease and a half of the renewal at 1,200 ms.
        assert!(ends_session(&step, 14), "{step:?}");
        assert!(now <= 1200 + 1500, "ended at {now} ms");
    }

    #[test]
    fn a_lock_of_an_ended_or_gone_session_is_taken_at_once() {
        let mut ended = session_item(7);
        ended.lease_duration_ms = Some(RELEASED_LEASE_MS);
        for session in [None, Some(ended)] {
            let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
            let l = session_lock(2, 3);
            let step = refused_by(&mut m, &l);
            assert!(reads_session(&step));
            let step = m.answer(Answer::Done(Reply::Before(session.clone())), &env(3));
            assert!(
                matches!(
                    &step,
                    Step::Send {
                        req: Req::Take {
                            waited_out: Some(_),
                            ..
                        },
                        ..
                    }
                ),
                "{session:?}: {step:?}"
            );
        }
    }

    #[test]
    fn a_session_that_renewed_costs_a_retry_and_then_keeps_its_lock() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let l = session_lock(2, 3);
        assert!(reads_session(&refused_by(&mut m, &l)));
        let step = m.answer(Answer::Done(Reply::Before(Some(session_item(7)))), &env(0));
        let (step, now, _) = wait_session(&mut m, step, &l, |_| session_item(7), 0);
        assert!(ends_session(&step, 7));
        // The session renewed just before the end: the end is refused, the renewal costs the
        // one retry, and the wait starts over from it.
        let step = m.answer(Answer::Refused(Some(Some(session_item(8)))), &env(now));
        let (step, again, _) = wait_session(&mut m, step, &l, |_| session_item(8), now);
        assert_eq!(again, now + 1000);
        assert!(ends_session(&step, 8), "{step:?}");
        // A backend that does not return the item: a read tells the renewal, and with no
        // retry left the lock stays held.
        let step = m.answer(Answer::Refused(None), &env(again));
        assert!(reads_session(&step));
        let done = m.answer(Answer::Done(Reply::Before(Some(session_item(9)))), &env(again));
        assert_eq!(done, Step::Done(Outcome::Held(l)));
    }

    #[test]
    fn a_take_answered_after_the_whole_lease_grants_nothing_and_is_given_back() {
        for (answered_at, expired) in [(999, false), (1000, true), (5000, true)] {
            let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
            let step = m.answer(Answer::Done(Reply::Token(5)), &env(answered_at));
            let gives_back =
                matches!(&step, Step::Send { req: Req::Release { guids, .. }, .. } if *guids == vec![guid(1)]);
            assert_eq!(gives_back, expired, "answered at {answered_at} ms: {step:?}");
            if expired {
                assert_eq!(m.purpose(), Purpose::Releasing);
                let done = m.answer(Answer::Done(Reply::Done), &env(answered_at + 1));
                assert_eq!(done, Step::Done(Outcome::Expired { undo: false }));
            }
        }
    }

    #[test]
    fn a_give_back_that_fails_asks_to_be_undone() {
        let (mut m, _) = M::start(lock(), guid(1), None, &env(0));
        let step = m.answer(Answer::Done(Reply::Token(5)), &env(10));
        assert!(matches!(step, Step::Done(Outcome::Taken { .. })));
        // Its session ended before the grant was known: the caller has it given back.
        let mut step = m.give_back(&env(11));
        let mut now = 11;
        let done = loop {
            step = match step {
                Step::Send {
                    req: Req::Release { .. },
                    ..
                } => m.answer(testing::throttled(), &env(now)),
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    m.timer(&env(now))
                }
                other => break other,
            };
        };
        assert_eq!(done, Step::Done(Outcome::Expired { undo: true }));
    }

    #[test]
    fn an_unsettled_write_asks_to_be_undone() {
        let mut m = one_attempt();
        let timeout = timeout();
        let step = m.answer(timeout.clone(), &env(100));
        assert!(matches!(step, Step::Send { req: Req::Get, .. }), "the outcome is read");
        let step = m.answer(timeout, &env(200));
        assert_eq!(
            step,
            Step::Done(Outcome::Failed {
                error: "timeout",
                undo: true
            })
        );
    }

    #[test]
    fn trust_local_time_shortens_the_wait_by_the_holders_age() {
        let mut s = lock();
        s.trust_local_time = true;
        let (mut m, _) = M::start(s, guid(1), None, &env(0));
        let mut h = held(2, 3);
        h.lock_acquired_time_unix_ms = Some(1_000_000 - 600);
        let step = m.answer(Answer::Refused(Some(Some(h.clone()))), &env(0));
        let (step, now) = wait_out(&mut m, step, &h);
        assert!(
            matches!(
                step,
                Step::Send {
                    req: Req::Take { .. },
                    ..
                }
            ),
            "{step:?}"
        );
        assert_eq!(now, 400, "what was left of the holder's lease by its clock");
    }

    /// The README's settings: lease 10 s, heartbeats every 3 s, a waiter that keeps trying.
    fn readme_lock() -> Lock {
        let mut s = lock();
        s.lease_duration_ms = 10_000;
        s.heartbeat_period = ms(3000);
        s.retry_count = u32::MAX;
        s.request_timeout = ms(5000);
        s
    }

    /// What a waiter sent while it waited.
    #[derive(Debug, Default)]
    struct Sent {
        reads: u32,
        marks: u32,
        takes: u32,
    }

    /// Steps one waiter against a lock held by one holder that heartbeats every 3 s (a new
    /// `guid`, same token), answering at once, until `release_at` (the holder then releases:
    /// `None`, never) or `end`; the requests sent and the outcome with its time, if any.
    fn wait_against_a_holder(release_at: Option<u64>, end: u64) -> (Sent, Option<(S, u64)>) {
        let mut sent = Sent::default();
        let mut item = held(2, 3);
        item.lease_duration_ms = Some(10_000);
        let item_at = |item: &LockRecord, now: u64| {
            let mut r = item.clone();
            r.guid = Some(crate::item::GuidValue::B(vec![(now / 3000) as u8; 4]));
            if release_at.is_some_and(|t| now >= t) {
                r.lease_duration_ms = Some(RELEASED_LEASE_MS);
            }
            r
        };
        let (mut m, mut step) = M::start(readme_lock(), guid(1), None, &env(0));
        let mut now = 0;
        loop {
            step = match step {
                Step::Send {
                    req: Req::Take { .. }, ..
                } => {
                    sent.takes += 1;
                    let cur = item_at(&item, now);
                    if cur.lease_duration_ms == Some(RELEASED_LEASE_MS) {
                        m.answer(Answer::Done(Reply::Token(4)), &env(now))
                    } else {
                        m.answer(Answer::Refused(Some(Some(cur))), &env(now))
                    }
                }
                Step::Send { req: Req::Get, .. } => {
                    sent.reads += 1;
                    m.answer(Answer::Done(Reply::Before(Some(item_at(&item, now)))), &env(now))
                }
                Step::Send {
                    req:
                        Req::MarkWaiting {
                            waiter,
                            since_unix_ms,
                            now_unix_ms,
                            ..
                        },
                    ..
                } => {
                    sent.marks += 1;
                    item.lock_waiting_unix_ms = Some(now_unix_ms);
                    item.lock_waiter = Some(waiter);
                    item.lock_waiting_since_unix_ms = Some(since_unix_ms);
                    m.answer(Answer::Done(Reply::Done), &env(now))
                }
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    if now >= end {
                        return (sent, None);
                    }
                    m.timer(&env(now))
                }
                Step::Done(o) => return (sent, Some((Step::Done(o), now))),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn a_long_wait_costs_a_few_reads_a_minute_and_a_mark_per_heartbeat_at_most() {
        let (sent, out) = wait_against_a_holder(None, 60_000);
        assert!(out.is_none(), "{out:?}");
        assert!(sent.reads <= 30, "at most 0.5 reads a second over a minute: {sent:?}");
        assert!(sent.marks <= 20, "at most a mark per heartbeat period: {sent:?}");
        let (sent, out) = wait_against_a_holder(None, 600_000);
        assert!(out.is_none(), "{out:?}");
        assert!(
            sent.reads <= 150,
            "at most 0.25 reads a second over ten minutes: {sent:?}"
        );
        assert!(sent.marks <= 200, "{sent:?}");
        // At each deadline a renewal seen costs a retry, with no request of its own.
        assert_eq!(sent.takes, 1, "{sent:?}");
    }

    #[test]
    fn a_release_is_seen_within_half_the_time_waited() {
        for w in [5, 30, 200, 1000, 4000, 9000, 20_000, 300_000] {
            let (_, out) = wait_against_a_holder(Some(w), 700_000);
            let Some((Step::Done(Outcome::Taken { sent_at, .. }), _)) = out else {
                panic!("released at {w}: {out:?}");
            };
            let at = sent_at.as_millis() as u64;
            assert!(at >= w && at <= w + w / 2 + 10, "released at {w}, taken at {at}");
            assert!(
                at <= w + 5000 + 10,
                "within half a lease: released at {w}, taken at {at}"
            );
        }
    }

    #[test]
    fn a_crashed_holder_is_taken_over_a_lease_after_its_last_version_was_seen() {
        // The holder heartbeats until 30 s and then crashes: its last version (written at
        // 30 s) is seen by the first read after it, and taken over a lease after that read,
        // however slow the pace had grown.
        let s = readme_lock();
        let mut item = held(2, 3);
        item.lease_duration_ms = Some(10_000);
        let at = |now: u64| {
            let mut r = item.clone();
            r.guid = Some(crate::item::GuidValue::B(vec![(now.min(30_000) / 3000) as u8; 4]));
            r
        };
        let (mut m, mut step) = M::start(s, guid(1), None, &env(0));
        let mut now = 0;
        let mut last_read_of_last_version = None;
        let taken_at = loop {
            step = match step {
                Step::Send {
                    req: Req::Take { waited_out, .. },
                    ..
                } => {
                    if waited_out == Some(at(now).version()) {
                        break now;
                    }
                    m.answer(Answer::Refused(Some(Some(at(now)))), &env(now))
                }
                Step::Send { req: Req::Get, .. } => {
                    if now >= 30_000 && last_read_of_last_version.is_none() {
                        last_read_of_last_version = Some(now);
                    }
                    m.answer(Answer::Done(Reply::Before(Some(at(now)))), &env(now))
                }
                Step::Send {
                    req: Req::MarkWaiting { .. },
                    ..
                } => m.answer(Answer::Done(Reply::Done), &env(now)),
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    assert!(now < 100_000, "no takeover");
                    m.timer(&env(now))
                }
                other => panic!("unexpected {other:?}"),
            }
        };
        let seen = last_read_of_last_version.expect("the last version was read");
        assert!(seen <= 30_000 + 5000, "seen within a pause: {seen}");
        assert_eq!(taken_at, seen + 10_000, "a lease after it was seen");
    }
}
