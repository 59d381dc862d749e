//! Undoing an acquisition's write whose outcome could not be read, as a state machine: an
//! acquisition that reports a failure with `undo` may have left the item held by a `guid`
//! nobody holds.
//!
//! The protocol:
//! - FailClosed deletes the item, FailOpen and Fifo mark it released, each only if it carries
//!   the acquisition's `guid`; a refusal means there was nothing of ours to undo. Over the
//!   original's requests (a user's `dynamodb` object) the undo is the original's release.
//! - It tries as hard as a release (`Lock::release_attempts`) in each of `UNDO_ROUNDS`
//!   rounds, `UNDO_PAUSE` apart: about a minute in all, past a short outage. After that the
//!   lease (FailOpen, Fifo) or the TTL (FailClosed) is left to free the item. Cancelled (the
//!   client closes), it makes one more round at once and ends.

use std::time::Duration;

use crate::op::Record;
use crate::request::{Answer, Ended, Env, Machine, Next, Pending, Purpose, Req, Step};
use crate::settings::{Kind, Lock};

/// Rounds of attempts of an undo, and the pause between them.
pub const UNDO_ROUNDS: u32 = 12;
pub const UNDO_PAUSE: Duration = Duration::from_secs(5);

/// How an undo ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<E> {
    /// Undone, or nothing of ours was on the item.
    Undone,
    /// Every round failed; the last error.
    GaveUp(E),
}

type St<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Outcome<E>>;

/// One undo.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Undo<R: Record> {
    s: Lock,
    guid: R::Guid,
    req: Req<R::Guid, R::Version>,
    rounds_left: u32,
    pending: Option<Pending<R::Guid, R::Version>>,
}

impl<R: Record> Undo<R> {
    /// Undoes the write of `guid`.
    pub fn start<E>(s: Lock, guid: R::Guid, env: &Env) -> (Self, St<R, E>) {
        let req = match s.kind {
            Kind::FailClosed => Req::DeleteIfGuid {
                guids: vec![guid.clone()],
            },
            Kind::FailOpen | Kind::Fifo => Req::Release {
                guids: vec![guid.clone()],
                lock_acquired_time_unix_ms: None,
            },
        };
        Self::sending(s, guid, req, env)
    }

    fn sending<E>(s: Lock, guid: R::Guid, req: Req<R::Guid, R::Version>, env: &Env) -> (Self, St<R, E>) {
        let mut m = Undo {
            s,
            guid,
            req,
            rounds_left: UNDO_ROUNDS,
            pending: None,
        };
        let step = m.round(env);
        (m, step)
    }

    /// Undoes the write of `guid` (with `fencing_token`, FailOpen) made with the original's
    /// requests.
    pub fn original<E>(s: Lock, guid: R::Guid, fencing_token: Option<u64>, env: &Env) -> (Self, St<R, E>) {
        let req = crate::original::release(&s, &guid, fencing_token, env.unix_ms);
        Self::sending(s, guid, req, env)
    }

    /// The `guid` whose write this undo removes.
    pub fn guid(&self) -> &R::Guid {
        &self.guid
    }

    /// The request this undo sends.
    pub fn request(&self) -> &Req<R::Guid, R::Version> {
        &self.req
    }

    fn round<E>(&mut self, env: &Env) -> St<R, E> {
        self.rounds_left -= 1;
        let (p, step) = Pending::start(self.req.clone(), self.s.policy(self.s.release_attempts()), env.now);
        self.pending = Some(p);
        step
    }
}

impl<R: Record, E> Machine<R, E> for Undo<R> {
    type Out = Outcome<E>;

    fn purpose(&self) -> Purpose {
        Purpose::Releasing
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
        let Some(pending) = self.pending.as_mut() else {
            return Step::Done(Outcome::Undone);
        };
        match pending.answer::<R, E, Outcome<E>>(a, env) {
            Next::Step(step) => step,
            Next::Ended(Ended::Ok(_) | Ended::Refused { .. }) => Step::Done(Outcome::Undone),
            Next::Ended(Ended::Failed { error, .. }) => {
                self.pending = None;
                if self.rounds_left == 0 {
                    return Step::Done(Outcome::GaveUp(error));
                }
                Step::Wait {
                    until: env.now + UNDO_PAUSE,
                    abortable: true,
                }
            }
        }
    }

    fn timer(&mut self, env: &Env) -> St<R, E> {
        match self.pending.as_mut() {
            Some(p) => p.resend(env.now),
            None => {
                // Cancelled (the client closes): this round is the last.
                if env.cancelled {
                    self.rounds_left = self.rounds_left.min(1);
                }
                self.round(env)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::LockRecord;
    use crate::op::Reply;
    use crate::testing;

    fn lock(kind: Kind) -> Lock {
        Lock {
            trust_local_time: true,
            ..testing::lock(kind)
        }
    }

    fn env(now: Duration) -> Env {
        Env { now, ..testing::env(0) }
    }

    type U = Undo<LockRecord>;
    const G: [u8; 64] = [7; 64];

    #[test]
    fn failclosed_deletes_and_the_others_mark_released_if_the_item_carries_the_guid() {
        let (_, step) = U::start::<&str>(lock(Kind::FailClosed), G, &env(Duration::ZERO));
        assert!(matches!(step, Step::Send { req: Req::DeleteIfGuid { guids }, .. } if guids == vec![G]));
        for kind in [Kind::FailOpen, Kind::Fifo] {
            let (_, step) = U::start::<&str>(lock(kind), G, &env(Duration::ZERO));
            assert!(matches!(
                step,
                Step::Send { req: Req::Release { guids, lock_acquired_time_unix_ms: None }, .. } if guids == vec![G]
            ));
        }
    }

    #[test]
    fn a_refusal_or_a_reply_ends_it() {
        for a in [
            Answer::<LockRecord, &str>::Refused(None),
            Answer::Done(Reply::WaitingMark(None)),
        ] {
            let (mut m, _) = U::start::<&str>(lock(Kind::FailOpen), G, &env(Duration::ZERO));
            assert_eq!(m.answer(a, &env(Duration::ZERO)), Step::Done(Outcome::Undone));
        }
    }

    #[test]
    fn cancelled_during_a_pause_it_makes_one_last_round_at_once() {
        let (mut m, _) = U::start::<&str>(lock(Kind::FailClosed), G, &env(Duration::ZERO));
        let down = || Answer::Failed {
            error: "down",
            transient: false,
            maybe_applied: false,
        };
        assert!(matches!(
            m.answer(down(), &env(Duration::ZERO)),
            Step::Wait { abortable: true, .. }
        ));
        let closing = Env {
            cancelled: true,
            ..env(Duration::from_millis(10))
        };
        assert!(
            matches!(Machine::<LockRecord, &str>::timer(&mut m, &closing), Step::Send { .. }),
            "the last round"
        );
        assert_eq!(m.answer(down(), &closing), Step::Done(Outcome::GaveUp("down")));
    }

    #[test]
    fn it_tries_in_rounds_five_seconds_apart_for_about_a_minute_and_then_gives_up() {
        let (mut m, mut step) = U::start::<&str>(lock(Kind::FailOpen), G, &env(Duration::ZERO));
        let (mut now, mut sends, mut rounds) = (Duration::ZERO, 0, 1);
        loop {
            step = match step {
                Step::Send { .. } => {
                    sends += 1;
                    m.answer(
                        Answer::Failed {
                            error: "down",
                            transient: true,
                            maybe_applied: false,
                        },
                        &env(now),
                    )
                }
                Step::Wait { until, .. } => {
                    if until >= now + UNDO_PAUSE {
                        rounds += 1;
                    }
                    now = until;
                    m.timer(&env(now))
                }
                Step::Done(out) => {
                    assert_eq!(out, Outcome::GaveUp("down"));
                    break;
                }
            }
        }
        assert_eq!(rounds, UNDO_ROUNDS);
        assert_eq!(sends, UNDO_ROUNDS * lock(Kind::FailOpen).release_attempts());
        assert!(
            now >= UNDO_PAUSE * (UNDO_ROUNDS - 1) && now < Duration::from_secs(70),
            "{now:?}"
        );
    }
}
