//! A client's work that nobody waits for, without I/O, each piece on the key of its item: the
//! undo rounds of acquisitions whose write's outcome could not be read (`undo::Undo`), and
//! requests sent once that need no settling (`request::Once`: the removal of Fifo queue
//! entries nobody waits for). The client owns them from the moment they are asked for to
//! their end; its caller only carries their requests and time:
//! - it sends each request handed out (`poll_transmit`), on its key, and gives back its answer
//!   by number (`handle_reply`), a request not answered by its `timeout_at` as a timeout;
//! - it steps the work again at the instant asked for (`poll_timeout`, `handle_timeout`);
//! - when the client closes (`close`), every pause between rounds ends at once and the next
//!   round is the last.
//!
//! Each piece keeps its own rules (`undo::Undo`, `request::Once`): this is where they are
//! run, in one place for the addon and the model.

use std::collections::BTreeMap;

use crate::op::Record;
use crate::request::{Answer, Env, Machine, Once, Policy, Purpose, Req, Step, Time};
use crate::undo::{self, Undo};

/// A request to send: number `id` (its answer's), `req` on `key`, given up on at `timeout_at`;
/// `purpose`: why, when it counts as a request of the lock protocol.
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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum At<G, V> {
    /// Its request is to be sent (`poll_transmit`).
    Unsent(Req<G, V>, Time),
    /// Its request is out.
    Out,
    /// It is stepped again at `until` (`handle_timeout`); `abortable`: a close ends the wait.
    Waits { until: Time, abortable: bool },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Work<R: Record> {
    Undo(Box<Undo<R>>),
    Once(Once<R::Guid, R::Version>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Job<R: Record, K> {
    key: K,
    work: Work<R>,
    at: At<R::Guid, R::Version>,
}

fn forget<G, V, O>(step: Step<G, V, O>) -> Step<G, V, ()> {
    match step {
        Step::Send { req, timeout_at } => Step::Send { req, timeout_at },
        Step::Wait { until, abortable } => Step::Wait { until, abortable },
        Step::Done(_) => Step::Done(()),
    }
}

impl<R: Record> Work<R> {
    /// Why its requests are sent, when they count as the lock protocol's.
    fn purpose(&self) -> Option<Purpose> {
        match self {
            Work::Undo(m) => Some(Machine::<R, ()>::purpose(m.as_ref())),
            Work::Once(m) => Machine::<R, ()>::counted(m).then(|| Machine::<R, ()>::purpose(m)),
        }
    }

    fn answer<E>(&mut self, a: Answer<R, E>, env: &Env) -> Step<R::Guid, R::Version, ()> {
        match self {
            Work::Undo(m) => forget(m.as_mut().answer(a, env)),
            Work::Once(m) => forget(Machine::<R, E>::answer(m, a, env)),
        }
    }

    fn timer(&mut self, env: &Env) -> Step<R::Guid, R::Version, ()> {
        match self {
            Work::Undo(m) => forget(Machine::<R, ()>::timer(m.as_mut(), env)),
            Work::Once(m) => forget(Machine::<R, ()>::timer(m, env)),
        }
    }
}

/// The work in the background of one client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Background<R: Record, K> {
    next: u64,
    jobs: BTreeMap<u64, Job<R, K>>,
    closed: bool,
}

impl<R: Record, K> Default for Background<R, K> {
    fn default() -> Self {
        Background {
            next: 0,
            jobs: BTreeMap::new(),
            closed: false,
        }
    }
}

impl<R: Record, K: Clone> Background<R, K> {
    /// An undo of a write on `key`, just started (`undo::Undo::start`, `Undo::original`), runs
    /// here from its first step.
    pub fn undo<E>(&mut self, key: K, (undo, step): Started<R, E>, env: &Env) {
        self.add(key, Work::Undo(Box::new(undo)), forget(step), env);
    }

    /// `req` on `key`, tried as hard as `policy` allows, to its first answer (`request::Once`;
    /// not a request of the lock protocol).
    pub fn once(&mut self, key: K, req: Req<R::Guid, R::Version>, policy: Policy, env: &Env) {
        let (once, step) = Once::start(req, policy, None, env.now);
        self.add(key, Work::Once(once), step, env);
    }

    fn add(&mut self, key: K, work: Work<R>, step: Step<R::Guid, R::Version, ()>, env: &Env) {
        let id = self.next;
        self.next += 1;
        let at = At::Out;
        self.jobs.insert(id, Job { key, work, at });
        self.carry(id, step, env);
    }

    /// Whether nothing is left to do.
    pub fn is_idle(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The next request to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit<R::Guid, R::Version, K>> {
        let (&id, job) = self.jobs.iter_mut().find(|(_, j)| matches!(j.at, At::Unsent(..)))?;
        let At::Unsent(req, timeout_at) = std::mem::replace(&mut job.at, At::Out) else {
            unreachable!("found unsent")
        };
        Some(Transmit {
            id,
            key: job.key.clone(),
            req,
            timeout_at,
            purpose: job.work.purpose(),
        })
    }

    /// The answer to request `id` (a timeout: `Answer::Failed`, as the store gives it).
    pub fn handle_reply<E>(&mut self, id: u64, a: Answer<R, E>, env: &Env) {
        let Some(job) = self.jobs.get_mut(&id).filter(|j| j.at == At::Out) else {
            return;
        };
        let step = job.work.answer(a, env);
        self.carry(id, step, env);
    }

    /// When the work is next stepped (`handle_timeout`), if it waits for a time.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.jobs
            .values()
            .filter_map(|j| match j.at {
                At::Waits { until, .. } => Some(until),
                _ => None,
            })
            .min()
    }

    /// Steps the work whose time has come at `env.now`.
    pub fn handle_timeout(&mut self, env: &Env) {
        self.wake_where(env, |until, _| until <= env.now);
    }

    /// The client closes (once; again, nothing): every pause that a close ends (an undo's,
    /// between its rounds) ends now, and the round that follows is the last. A backoff
    /// between the attempts of a request runs its course.
    pub fn close(&mut self, env: &Env) {
        if !std::mem::replace(&mut self.closed, true) {
            self.wake_where(env, |_, abortable| abortable);
        }
    }

    /// Steps every piece of work that waits for an instant `until` that `pick` takes.
    fn wake_where(&mut self, env: &Env, pick: impl Fn(Time, bool) -> bool) {
        let picked: Vec<u64> = (self.jobs.iter())
            .filter(|(_, j)| matches!(j.at, At::Waits { until, abortable } if pick(until, abortable)))
            .map(|(&id, _)| id)
            .collect();
        for id in picked {
            self.wake(id, env);
        }
    }

    fn wake(&mut self, id: u64, env: &Env) {
        let env = Env {
            cancelled: self.closed,
            ..*env
        };
        if let Some(job) = self.jobs.get_mut(&id) {
            let step = job.work.timer(&env);
            self.carry(id, step, &env);
        }
    }

    /// Keeps what job `id`'s machine asked for: a request to send, a time to be stepped at
    /// (at once, for a pause the close cut short), or its end.
    fn carry(&mut self, id: u64, step: Step<R::Guid, R::Version, ()>, env: &Env) {
        let at = match step {
            Step::Send { req, timeout_at } => At::Unsent(req, timeout_at),
            Step::Wait { abortable: true, .. } if self.closed => return self.wake(id, env),
            Step::Wait { until, abortable } => At::Waits { until, abortable },
            Step::Done(_) => {
                self.jobs.remove(&id);
                return;
            }
        };
        if let Some(job) = self.jobs.get_mut(&id) {
            job.at = at;
        }
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

    type B = Background<LockRecord, &'static str>;
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
        b.undo::<&str>("k", Undo::start(s, G, &env(0)), &env(0));
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
