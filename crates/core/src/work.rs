//! A client's work, without I/O, each piece on the key of its item: its acquisitions
//! (`fail_closed`, `fail_open`, `original`), the ends of its locks (`ending::Ending`),
//! operators' forced releases (`force::Force`), requests sent once (`request::Once`: a read,
//! `lock.update`'s write, the removal of Fifo queue entries nobody waits for), and the undo
//! rounds of acquisitions whose write's outcome could not be read (`undo::Undo`). The client
//! owns each piece from the moment it is asked for to its end; its caller only carries
//! requests, time and events:
//! - it sends each request handed out (`poll_transmit`), on its key, and gives back its answer
//!   by number (`handle_reply`), a request not answered by its `timeout_at` as a timeout;
//! - it steps the work again at the instant asked for (`poll_timeout`, `handle_timeout`);
//! - it hears what becomes of the pieces it waits for (`poll_event`): a pause, and the end;
//! - it cancels a piece it waits for (`cancel`: a wait that may be cut short ends at once),
//!   and closes the client (`close`): every pause between an undo's rounds ends at once, and
//!   the next round is the last.
//!
//! What follows a piece's end is decided here too: an acquisition whose write may have landed
//! unseen is undone (`Task::undo_after`), in the background, as soon as it ends. A FailOpen
//! take through a session and a hand-over are kept once they end, for the caller to settle
//! with what the client machine knows (`give_back`, `unclaimed`, `forget`).
//!
//! Each piece keeps its own rules (its machine): this is where they are run, in one place for
//! the addon and the model.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};

use crate::ending::{self, Ending};
use crate::force::{self, Force};
use crate::op::Record;
use crate::request::{map, Answer, Ended, Env, Machine, Once, Policy, Purpose, Req, Step, Time};
use crate::undo::{self, Undo};
use crate::{fail_closed, fail_open, original};

/// A request to send: number `id` (its answer's, and its piece's), `req` on `key`, given up on
/// at `timeout_at`; `purpose`: why, when it counts as a request of the lock protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit<G, V, K> {
    pub id: u64,
    pub key: K,
    pub req: Req<G, V>,
    pub timeout_at: Time,
    pub purpose: Option<Purpose>,
}

/// An undo just started, and its first step.
pub type Started<R, E> = (
    Undo<R>,
    Step<<R as Record>::Guid, <R as Record>::Version, undo::Outcome<E>>,
);

/// A piece of work: one of the core's machines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Task<R: Record, E> {
    Undo(Box<Undo<R>>),
    Once(Once<R::Guid, R::Version>),
    Closed(Box<fail_closed::Acquire<R, E>>),
    Open(Box<fail_open::Acquire<R, E>>),
    Original(Box<original::Acquire<R, E>>),
    End(Box<Ending<R, E>>),
    Force(Box<Force<R>>),
}

/// What a piece of work ended with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Out<R: Record, E> {
    Undo(undo::Outcome<E>),
    Once(Ended<R, E>),
    Closed(fail_closed::Outcome<R, E>),
    Open(fail_open::Outcome<R, E>),
    Original(original::Outcome<R, E>),
    /// `landed_maybe`: a write of the ending may have landed unseen.
    End {
        outcome: ending::Outcome<R::Guid, E>,
        landed_maybe: bool,
    },
    Force(force::Out<E>),
}

/// A step of a piece of work.
pub type TaskStep<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Out<R, E>>;

/// A machine `M` just started, and its first step, which ends with `O`.
pub type Begun<R, M, O> = (M, Step<<R as Record>::Guid, <R as Record>::Version, O>);

impl<R, E> Task<R, E>
where
    R: Record,
    E: Clone,
{
    /// An undo just started, as a piece of work.
    pub fn undo((m, step): Started<R, E>) -> (Self, TaskStep<R, E>) {
        (Task::Undo(Box::new(m)), map(step, Out::Undo))
    }

    /// `req`, tried as hard as `policy` allows from `now`, to its first answer
    /// (`request::Once`); `purpose`: why, when it counts as a request of the lock protocol.
    pub fn once(
        req: Req<R::Guid, R::Version>,
        policy: Policy,
        purpose: Option<Purpose>,
        now: Time,
    ) -> (Self, TaskStep<R, E>) {
        let (m, step) = Once::start(req, policy, purpose, now);
        (Task::Once(m), step)
    }

    pub fn closed(
        (m, step): Begun<R, fail_closed::Acquire<R, E>, fail_closed::Outcome<R, E>>,
    ) -> (Self, TaskStep<R, E>) {
        (Task::Closed(Box::new(m)), map(step, Out::Closed))
    }

    pub fn open((m, step): Begun<R, fail_open::Acquire<R, E>, fail_open::Outcome<R, E>>) -> (Self, TaskStep<R, E>) {
        (Task::Open(Box::new(m)), map(step, Out::Open))
    }

    pub fn original((m, step): Begun<R, original::Acquire<R, E>, original::Outcome<R, E>>) -> (Self, TaskStep<R, E>) {
        (Task::Original(Box::new(m)), map(step, Out::Original))
    }

    pub fn end((m, step): Begun<R, Ending<R, E>, ending::Outcome<R::Guid, E>>) -> (Self, TaskStep<R, E>) {
        let landed_maybe = m.landed_maybe();
        (
            Task::End(Box::new(m)),
            map(step, |outcome| Out::End { outcome, landed_maybe }),
        )
    }

    pub fn force((m, step): (Force<R>, force::ForceStep<R, E>)) -> (Self, TaskStep<R, E>) {
        (Task::Force(Box::new(m)), map(step, Out::Force))
    }

    /// Why its requests are sent, when they count as the lock protocol's.
    pub fn purpose(&self) -> Option<Purpose> {
        fn of<R: Record, E, M: Machine<R, E>>(m: &M) -> Option<Purpose> {
            m.counted().then(|| m.purpose())
        }
        match self {
            Task::Undo(m) => of::<R, E, _>(m.as_ref()),
            Task::Once(m) => of::<R, E, _>(m),
            Task::Closed(m) => of::<R, E, _>(m.as_ref()),
            Task::Open(m) => of::<R, E, _>(m.as_ref()),
            Task::Original(m) => of::<R, E, _>(m.as_ref()),
            Task::End(m) => of::<R, E, _>(m.as_ref()),
            Task::Force(m) => of::<R, E, _>(m.as_ref()),
        }
    }

    /// A FailOpen take known after the session it was taken through stopped lasting is given
    /// back at once (`fail_open::Acquire::give_back`): the step that follows, or `None` for
    /// any other piece of work.
    pub fn give_back(&mut self, env: &Env) -> Option<TaskStep<R, E>> {
        match self {
            Task::Open(m) => Some(map(m.give_back(env), Out::Open)),
            _ => None,
        }
    }

    /// The answer to its request, or (`None`) the end of its wait.
    pub fn resume(&mut self, a: Option<Answer<R, E>>, env: &Env) -> TaskStep<R, E> {
        fn go<R: Record, E, M: Machine<R, E>>(
            m: &mut M,
            a: Option<Answer<R, E>>,
            env: &Env,
        ) -> Step<R::Guid, R::Version, M::Out> {
            match a {
                Some(a) => m.answer(a, env),
                None => m.timer(env),
            }
        }
        match self {
            Task::Undo(m) => map(go(m.as_mut(), a, env), Out::Undo),
            Task::Once(m) => map(go(m, a, env), Out::Once),
            Task::Closed(m) => map(go(m.as_mut(), a, env), Out::Closed),
            Task::Open(m) => map(go(m.as_mut(), a, env), Out::Open),
            Task::Original(m) => map(go(m.as_mut(), a, env), Out::Original),
            Task::End(m) => {
                let step = go(m.as_mut(), a, env);
                let landed_maybe = m.landed_maybe();
                map(step, |outcome| Out::End { outcome, landed_maybe })
            }
            Task::Force(m) => map(go(m.as_mut(), a, env), Out::Force),
        }
    }

    /// The undo an acquisition's end calls for: its write may have landed unseen (or a take
    /// it gave back could not be), and nobody holds what it wrote.
    pub fn undo_after(&self, out: &Out<R, E>, env: &Env) -> Option<Started<R, E>> {
        use fail_open::Outcome as Open;
        match (self, out) {
            (Task::Closed(m), Out::Closed(fail_closed::Outcome::Failed { undo: true, .. })) => {
                let (s, guid) = m.written();
                Some(Undo::start(s, guid, env))
            }
            (
                Task::Open(m),
                Out::Open(
                    Open::Expired { undo: true } | Open::Corrupt { undo: true, .. } | Open::Failed { undo: true, .. },
                ),
            ) => {
                let (s, guid) = m.written();
                Some(Undo::start(s, guid, env))
            }
            (
                Task::Original(m),
                Out::Original(original::Outcome::Expired {
                    fencing_token,
                    undo: true,
                }),
            ) => {
                let (s, guid) = m.written();
                Some(Undo::original(s, guid, Some(*fencing_token), env))
            }
            _ => None,
        }
    }
}

impl<R: Record, E> Out<R, E> {
    /// Whether the piece ends for good: a FailOpen take and a hand-over are kept, for the
    /// caller to settle (`Work::give_back`, `Work::unclaimed`, `Work::forget`).
    fn kept(&self) -> bool {
        matches!(
            self,
            Out::Open(fail_open::Outcome::Taken { .. })
                | Out::End {
                    outcome: ending::Outcome::Handed { .. },
                    ..
                }
        )
    }
}

/// What becomes of a piece of work its caller waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event<R: Record, E> {
    /// Piece `id` pauses until `until` (`Time::MAX`: until it is cancelled) before its next
    /// request; `purpose`: why it sends its requests, when they count as the lock protocol's.
    Waits(u64, Time, Option<Purpose>),
    /// Piece `id` ended with this. A FailOpen take and a hand-over stay kept until settled.
    Done(u64, Out<R, E>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum At<G, V> {
    /// Its request is to be sent (`poll_transmit`).
    Unsent(Req<G, V>, Time),
    /// Its request is out.
    Out,
    /// It is stepped again at `until` (`handle_timeout`); `abortable`: a cancellation (a
    /// close, for work nobody waits for) ends the wait.
    Waits { until: Time, abortable: bool },
    /// Ended, kept for its caller to settle.
    Kept,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Job<R: Record, K, E> {
    key: K,
    task: Task<R, E>,
    at: At<R::Guid, R::Version>,
    /// Its caller waits for it (`Event`s); else it is the client's background work.
    awaited: bool,
    cancelled: bool,
}

/// The work of one client.
#[derive(Clone, Debug)]
pub struct Work<R: Record, K, E> {
    next: u64,
    jobs: BTreeMap<u64, Job<R, K, E>>,
    events: VecDeque<Event<R, E>>,
    closed: bool,
    /// The pieces whose request is to be sent, and those that wait, by when: what
    /// `poll_transmit`, `poll_timeout` and `handle_timeout` look up without a pass over every
    /// piece. Both follow from `jobs` (`Work::set`), and are left out of its equality.
    unsent: BTreeSet<u64>,
    waits: BTreeSet<(Time, u64)>,
}

impl<R: Record + PartialEq, K: PartialEq, E: PartialEq> PartialEq for Work<R, K, E> {
    fn eq(&self, other: &Self) -> bool {
        (self.next, &self.jobs, &self.events, self.closed) == (other.next, &other.jobs, &other.events, other.closed)
    }
}

impl<R: Record + Eq, K: Eq, E: Eq> Eq for Work<R, K, E> {}

impl<R: Record + Hash, K: Hash, E: Hash> Hash for Work<R, K, E> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.next, &self.jobs, &self.events, self.closed).hash(state);
    }
}

impl<R: Record, K, E> Default for Work<R, K, E> {
    fn default() -> Self {
        Work {
            next: 0,
            jobs: BTreeMap::new(),
            events: VecDeque::new(),
            closed: false,
            unsent: BTreeSet::new(),
            waits: BTreeSet::new(),
        }
    }
}

impl<R, K, E> Work<R, K, E>
where
    R: Record,
    K: Clone,
    E: Clone,
{
    /// A piece of work on `key` just started (`Task::closed`, `Task::once`, ...), which its
    /// caller waits for: its number, which its events carry. `cancelled`: it is cancelled
    /// already.
    pub fn start(&mut self, key: K, (task, step): (Task<R, E>, TaskStep<R, E>), cancelled: bool, env: &Env) -> u64 {
        self.add(key, task, step, true, cancelled, env)
    }

    /// An undo of a write on `key`, just started (`undo::Undo::start`, `Undo::original`), runs
    /// in the background from its first step.
    pub fn undo(&mut self, key: K, started: Started<R, E>, env: &Env) {
        let (task, step) = Task::undo(started);
        self.add(key, task, step, false, false, env);
    }

    /// `req` on `key`, tried as hard as `policy` allows, to its first answer, in the
    /// background (`request::Once`; not a request of the lock protocol).
    pub fn once(&mut self, key: K, req: Req<R::Guid, R::Version>, policy: Policy, env: &Env) {
        let (task, step) = Task::once(req, policy, None, env.now);
        self.add(key, task, step, false, false, env);
    }

    fn add(
        &mut self,
        key: K,
        task: Task<R, E>,
        step: TaskStep<R, E>,
        awaited: bool,
        cancelled: bool,
        env: &Env,
    ) -> u64 {
        let id = self.next;
        self.next += 1;
        let at = At::Out;
        self.jobs.insert(
            id,
            Job {
                key,
                task,
                at,
                awaited,
                cancelled,
            },
        );
        self.carry(id, step, env);
        id
    }

    /// Whether the undo of `guid`'s write on `key` is still under way.
    pub fn undoing(&self, key: &K, guid: &R::Guid) -> bool
    where
        K: PartialEq,
    {
        (self.jobs.values()).any(|j| j.key == *key && matches!(&j.task, Task::Undo(u) if u.guid() == guid))
    }

    /// Whether nothing is left to do.
    pub fn is_idle(&self) -> bool {
        self.jobs.is_empty() && self.events.is_empty()
    }

    /// The next request to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit<R::Guid, R::Version, K>> {
        let id = *self.unsent.first()?;
        let At::Unsent(req, timeout_at) = self.set(id, At::Out) else {
            unreachable!("indexed as unsent")
        };
        let job = &self.jobs[&id];
        Some(Transmit {
            id,
            key: job.key.clone(),
            req,
            timeout_at,
            purpose: job.task.purpose(),
        })
    }

    /// What became of the pieces waited for, in order.
    pub fn poll_event(&mut self) -> Option<Event<R, E>> {
        self.events.pop_front()
    }

    /// The answer to request `id` (a timeout: `Answer::Failed`, as the store gives it).
    pub fn handle_reply(&mut self, id: u64, a: Answer<R, E>, env: &Env) {
        if self.jobs.get(&id).is_some_and(|j| j.at == At::Out) {
            self.resume(id, Some(a), env);
        }
    }

    /// When the work is next stepped (`handle_timeout`), if it waits for a time.
    pub fn poll_timeout(&self) -> Option<Time> {
        // A wait until `Time::MAX` (until cancelled) sorts last.
        self.waits
            .first()
            .map(|&(until, _)| until)
            .filter(|&until| until != Time::MAX)
    }

    /// Steps the work whose time has come at `env.now`.
    pub fn handle_timeout(&mut self, env: &Env) {
        let mut due: Vec<u64> = (self.waits.range(..=(env.now, u64::MAX))).map(|&(_, id)| id).collect();
        // In the order the pieces were started, whenever each came due.
        due.sort_unstable();
        for id in due {
            self.resume(id, None, env);
        }
    }

    /// Piece `id` is cancelled: from now on its machine is told so, and a wait that a
    /// cancellation may cut short ends at once.
    pub fn cancel(&mut self, id: u64, env: &Env) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        job.cancelled = true;
        if matches!(job.at, At::Waits { abortable: true, .. }) {
            self.resume(id, None, env);
        }
    }

    /// The client closes (once; again, nothing): every pause of its background work that a
    /// close ends (an undo's, between its rounds) ends now, and the round that follows is the
    /// last. A backoff between the attempts of a request runs its course; work waited for is
    /// cancelled by its caller.
    pub fn close(&mut self, env: &Env) {
        if !std::mem::replace(&mut self.closed, true) {
            self.wake_where(env, |j| !j.awaited && matches!(j.at, At::Waits { abortable: true, .. }));
        }
    }

    /// A FailOpen take kept (`Event::Done`) is given back after all (the session it was
    /// taken through ended before the grant was known): the piece goes on, and ends again.
    pub fn give_back(&mut self, id: u64, env: &Env) {
        let Some(step) = self
            .jobs
            .get_mut(&id)
            .filter(|j| j.at == At::Kept)
            .and_then(|j| j.task.give_back(env))
        else {
            return;
        };
        self.carry(id, step, env);
    }

    /// A hand-over kept (`Event::Done`) found nobody left to take the lock, still ours under
    /// `guid`: the ending releases it instead, and ends again.
    pub fn unclaimed(&mut self, id: u64, guid: R::Guid, env: &Env) {
        let Some(job) = self.jobs.get_mut(&id).filter(|j| j.at == At::Kept) else {
            return;
        };
        let Task::End(m) = &mut job.task else { return };
        let (ending, step) = (**m).clone().unclaimed(guid, env);
        **m = ending;
        let landed_maybe = m.landed_maybe();
        self.carry(id, map(step, |outcome| Out::End { outcome, landed_maybe }), env);
    }

    /// Piece `id` is over for its caller: kept (`Event::Done`), it is settled as it ended;
    /// not ended yet (its caller is gone), it is dropped, and an answer still to come is
    /// ignored.
    pub fn forget(&mut self, id: u64) {
        self.remove(id);
    }

    /// Piece `id` (which is there) is at `at` from now on; what it was at before.
    fn set(&mut self, id: u64, at: At<R::Guid, R::Version>) -> At<R::Guid, R::Version> {
        let job = self.jobs.get_mut(&id).expect("a piece of work that is there");
        let was = std::mem::replace(&mut job.at, at);
        Self::index(&mut self.unsent, &mut self.waits, id, &was, false);
        Self::index(&mut self.unsent, &mut self.waits, id, &job.at, true);
        debug_assert!(self.indexed());
        was
    }

    /// Piece `id` is done with.
    fn remove(&mut self, id: u64) {
        if let Some(job) = self.jobs.remove(&id) {
            Self::index(&mut self.unsent, &mut self.waits, id, &job.at, false);
        }
        debug_assert!(self.indexed());
    }

    /// The lookups hold what a pass over every piece finds (checked in debug builds).
    fn indexed(&self) -> bool {
        let unsent = (self.jobs.iter())
            .filter(|(_, j)| matches!(j.at, At::Unsent(..)))
            .map(|(&id, _)| id);
        let waits = (self.jobs.iter()).filter_map(|(&id, j)| match j.at {
            At::Waits { until, .. } => Some((until, id)),
            _ => None,
        });
        unsent.eq(self.unsent.iter().copied()) && waits.collect::<BTreeSet<_>>() == self.waits
    }

    /// Puts piece `id`, at `at`, into the lookups (`add`) or takes it out.
    fn index(
        unsent: &mut BTreeSet<u64>,
        waits: &mut BTreeSet<(Time, u64)>,
        id: u64,
        at: &At<R::Guid, R::Version>,
        add: bool,
    ) {
        match (at, add) {
            (At::Unsent(..), true) => _ = unsent.insert(id),
            (At::Unsent(..), false) => _ = unsent.remove(&id),
            (&At::Waits { until, .. }, true) => _ = waits.insert((until, id)),
            (&At::Waits { until, .. }, false) => _ = waits.remove(&(until, id)),
            (At::Out | At::Kept, _) => {}
        }
    }

    /// Steps every piece of work that `pick` takes.
    fn wake_where(&mut self, env: &Env, pick: impl Fn(&Job<R, K, E>) -> bool) {
        let picked: Vec<u64> = (self.jobs.iter()).filter(|(_, j)| pick(j)).map(|(&id, _)| id).collect();
        for id in picked {
            self.resume(id, None, env);
        }
    }

    /// Steps piece `id` with the answer to its request, or the end of its wait.
    fn resume(&mut self, id: u64, a: Option<Answer<R, E>>, env: &Env) {
        if let Some(job) = self.jobs.get_mut(&id) {
            let env = Env {
                cancelled: job.cancelled || (self.closed && !job.awaited),
                ..*env
            };
            let step = job.task.resume(a, &env);
            self.carry(id, step, &env);
        }
    }

    /// Keeps what piece `id`'s machine asked for: a request to send, a time to be stepped at
    /// (at once, for a pause a cancellation cut short), or its end, and what follows it.
    fn carry(&mut self, id: u64, step: TaskStep<R, E>, env: &Env) {
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let cut = job.cancelled || (self.closed && !job.awaited);
        let at = match step {
            Step::Send { req, timeout_at } => At::Unsent(req, timeout_at),
            Step::Wait { abortable: true, .. } if cut => return self.resume(id, None, env),
            Step::Wait { until, abortable } => {
                if job.awaited {
                    self.events.push_back(Event::Waits(id, until, job.task.purpose()));
                }
                At::Waits { until, abortable }
            }
            Step::Done(out) => {
                let undo = job.task.undo_after(&out, env);
                let (key, awaited, kept) = (job.key.clone(), job.awaited, out.kept());
                if kept && awaited {
                    self.set(id, At::Kept);
                } else {
                    self.remove(id);
                }
                if awaited {
                    self.events.push_back(Event::Done(id, out));
                }
                if let Some(started) = undo {
                    self.undo(key, started, env);
                }
                return;
            }
        };
        self.set(id, at);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::item::LockRecord;
    use crate::op::Reply;
    use crate::settings::Kind;
    use crate::testing;
    use crate::undo::UNDO_PAUSE;

    type B = Work<LockRecord, &'static str, &'static str>;
    const G: [u8; 64] = [7; 64];

    fn env(ms: u64) -> Env {
        Env {
            now: Duration::from_millis(ms),
            ..testing::env(0)
        }
    }

    fn failed() -> Answer<LockRecord, &'static str> {
        Answer::Failed {
            error: "down",
            transient: false,
            maybe_applied: true,
        }
    }

    /// The answer to an undo's release or delete that applied.
    fn undone() -> Answer<LockRecord, &'static str> {
        Answer::Done(Reply::WaitingMark(None))
    }

    fn started(kind: Kind) -> B {
        let mut b = B::default();
        let s = testing::lock(kind);
        b.undo("k", Undo::start(s, G, &env(0)), &env(0));
        b
    }

    #[test]
    fn an_undo_sends_its_request_on_its_key_and_ends_with_its_answer() {
        let mut b = started(Kind::FailClosed);
        let t = b.poll_transmit().expect("a request");
        assert_eq!((t.key, &t.req), ("k", &Req::DeleteIfGuid { guids: vec![G] }));
        assert_eq!(b.poll_transmit(), None, "sent once");
        assert!(!b.is_idle());
        b.handle_reply(t.id, undone(), &env(5));
        assert!(b.is_idle());
    }

    #[test]
    fn a_failed_round_pauses_then_tries_again_and_a_close_makes_the_next_round_the_last() {
        let mut b = started(Kind::FailOpen);
        let t = b.poll_transmit().unwrap();
        b.handle_reply(t.id, failed(), &env(10));
        assert_eq!(b.poll_transmit(), None, "pausing");
        assert_eq!(b.poll_timeout(), Some(Duration::from_millis(10) + UNDO_PAUSE));
        b.handle_timeout(&env(11));
        assert_eq!(b.poll_transmit(), None, "not yet");
        b.handle_timeout(&env(10 + UNDO_PAUSE.as_millis() as u64));
        let t = b.poll_transmit().expect("the next round");
        b.handle_reply(t.id, failed(), &env(5_100));
        b.close(&env(5_200));
        let t = b.poll_transmit().expect("the last round, at once");
        b.handle_reply(t.id, failed(), &env(5_300));
        assert!(b.is_idle(), "no round after the last");
    }

    #[test]
    fn a_request_sent_once_is_tried_again_after_its_backoff_even_when_closed_and_counts_for_no_purpose() {
        let mut b = started(Kind::FailClosed);
        let undo = b.poll_transmit().unwrap();
        assert_eq!(undo.purpose, Some(Purpose::Releasing), "an undo is a release");
        b.once(
            "entry",
            Req::DeleteFinished,
            Policy::new(2, Duration::from_millis(100)),
            &env(0),
        );
        let t = b.poll_transmit().expect("the once's request");
        assert_eq!((t.key, &t.req, t.purpose), ("entry", &Req::DeleteFinished, None));
        let throttled = Answer::<LockRecord, &str>::Failed {
            error: "slow down",
            transient: true,
            maybe_applied: false,
        };
        b.handle_reply(t.id, throttled, &env(1));
        let again = b.poll_timeout().expect("a backoff");
        b.close(&env(2));
        assert_eq!(b.poll_transmit(), None, "a close leaves a backoff to run its course");
        assert_eq!(b.poll_timeout(), Some(again));
        b.handle_timeout(&Env { now: again, ..env(0) });
        let t = b.poll_transmit().expect("its second attempt");
        b.handle_reply(t.id, Answer::<LockRecord, &str>::Done(Reply::Done), &env(200));
        b.handle_reply(undo.id, undone(), &env(200));
        assert!(b.is_idle());
    }

    fn timeout() -> Answer<LockRecord, &'static str> {
        Answer::Failed {
            error: "timeout",
            transient: true,
            maybe_applied: true,
        }
    }

    fn closed(b: &mut B, s: crate::settings::Lock, now: u64) -> u64 {
        let started = fail_closed::Acquire::start(s, G, None, &env(now));
        b.start("k", Task::closed(started), false, &env(now))
    }

    #[test]
    fn an_acquisition_whose_write_may_have_landed_unseen_ends_and_is_undone_in_the_background() {
        let mut b = B::default();
        let mut s = testing::lock(Kind::FailClosed);
        s.max_attempts = 1;
        let id = closed(&mut b, s, 0);
        let put = b.poll_transmit().expect("the put");
        assert_eq!((put.id, put.purpose), (id, Some(Purpose::Acquiring)));
        b.handle_reply(put.id, timeout(), &env(10));
        let read = b.poll_transmit().expect("the read back");
        assert_eq!(read.req, Req::Get);
        assert!(!b.undoing(&"k", &G), "not while the acquisition settles its write");
        b.handle_reply(read.id, timeout(), &env(20));
        let failed = Out::Closed(fail_closed::Outcome::Failed {
            error: "timeout",
            undo: true,
        });
        assert_eq!(b.poll_event(), Some(Event::Done(id, failed)));
        let undo = b.poll_transmit().expect("the undo, at once");
        assert_eq!((undo.key, &undo.req), ("k", &Req::DeleteIfGuid { guids: vec![G] }));
        assert_ne!(undo.id, id);
        assert!(b.undoing(&"k", &G));
        assert!(!b.undoing(&"other", &G), "on its own key");
        assert!(!b.undoing(&"k", &[8; 64]), "of its own guid");
        b.handle_reply(undo.id, undone(), &env(30));
        assert_eq!(b.poll_event(), None, "nobody waits for an undo");
        assert!(!b.undoing(&"k", &G), "over");
        assert!(b.is_idle());
    }

    #[test]
    fn a_cancellation_ends_an_acquisitions_wait_at_once_and_its_pauses_are_told() {
        let mut b = B::default();
        let mut s = testing::lock(Kind::FailClosed);
        s.retry_count = 5;
        s.acquire_period = Duration::from_millis(100);
        let id = closed(&mut b, s, 0);
        let put = b.poll_transmit().unwrap();
        let holder = LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![2; 64])),
            ..Default::default()
        };
        b.handle_reply(put.id, Answer::Refused(Some(Some(holder))), &env(1));
        let mark = b.poll_transmit().expect("the waiting mark");
        b.handle_reply(mark.id, Answer::Done(Reply::Done), &env(2));
        let Some(Event::Waits(waits, until, purpose)) = b.poll_event() else {
            panic!("a pause")
        };
        assert_eq!((waits, purpose), (id, Some(Purpose::Waiting)));
        assert_eq!(b.poll_timeout(), Some(until));
        b.close(&env(3));
        assert_eq!(
            b.poll_timeout(),
            Some(until),
            "a close leaves what is waited for to its caller"
        );
        b.cancel(id, &env(4));
        assert_eq!(
            b.poll_event(),
            Some(Event::Done(id, Out::Closed(fail_closed::Outcome::Aborted)))
        );
        assert!(b.is_idle());
    }

    #[test]
    fn a_take_is_kept_until_settled_and_given_back_it_ends_again() {
        let mut b = B::default();
        let s = testing::lock(Kind::FailOpen);
        let started = fail_open::Acquire::start(s, G, None, &env(0));
        let id = b.start("k", Task::open(started), false, &env(0));
        let take = b.poll_transmit().unwrap();
        b.handle_reply(take.id, Answer::Done(Reply::Token(4)), &env(5));
        let Some(Event::Done(done, Out::Open(fail_open::Outcome::Taken { fencing_token: 4, .. }))) = b.poll_event()
        else {
            panic!("taken")
        };
        assert_eq!(done, id);
        assert!(!b.is_idle(), "kept");
        b.give_back(id, &env(6));
        let back = b.poll_transmit().expect("the give-back");
        assert!(matches!(back.req, Req::Release { .. }), "{:?}", back.req);
        b.handle_reply(back.id, undone(), &env(7));
        assert_eq!(
            b.poll_event(),
            Some(Event::Done(id, Out::Open(fail_open::Outcome::Expired { undo: false })))
        );
        assert!(b.is_idle());
        let started = fail_open::Acquire::start(s, G, None, &env(10));
        let id = b.start("k", Task::open(started), false, &env(10));
        let take = b.poll_transmit().unwrap();
        b.handle_reply(take.id, Answer::Done(Reply::Token(5)), &env(15));
        assert!(matches!(b.poll_event(), Some(Event::Done(..))));
        b.forget(id);
        assert!(b.is_idle());
    }

    #[test]
    fn an_answer_to_nothing_out_is_ignored() {
        let mut b = started(Kind::FailClosed);
        b.handle_reply(7, failed(), &env(1));
        let t = b.poll_transmit().unwrap();
        b.handle_reply(t.id, failed(), &env(1));
        b.handle_reply(
            t.id,
            Answer::<LockRecord, &str>::Done(Reply::WaitingMark(None)),
            &env(2),
        );
        assert!(!b.is_idle(), "the second answer came while it paused");
    }
}
