//! The end of a held lock as a state machine: what `release()` does once no heartbeat is on
//! the wire.
//!
//! The protocol:
//! - A lock that another acquisition of the same client waits for, and that is still ours as
//!   far as the holder knows, is handed over with one write (`handover::HandOver`). Not done,
//!   it is released instead, with the `guid` the hand-over may have left among those the
//!   release accepts. Handed over while every acquisition in line gave up, it is still ours
//!   under the `guid` the hand-over wrote, and is released with that `guid` among the others
//!   (`Ending::unclaimed`).
//! - A FailOpen or Fifo lock that another holder took needs no write: nothing of ours is left
//!   on the item. Any other lock is released (`release::Release`).
//! - A lock taken with the original library's requests (`original`, a client without a
//!   line) is released with the original's one request, under the newest `guid` it knows,
//!   even after a loss, and not retried (`original::Release`).
//! - After a release, the client stands back from the lock for a moment (`Lock::stand_back`)
//!   when a waiter of another process marked the item lately, or when this holder waited for
//!   the lock itself: a releaser that asks again at once needs one request, while a waiter
//!   first has to see the release. Fifo keeps its own order and has no marks; only its own
//!   wait counts.

use std::time::Duration;

use crate::broken::{self, Broken};
use crate::handover::{self, HandOver};
use crate::op::Record;
use crate::original::{self, Released};
use crate::release::{self, Release};
use crate::request::{map, Answer, Env, Machine, Purpose, Step, Time};
use crate::settings::{Kind, Lock};

/// What the holder knows when its lock ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct End<G> {
    /// Every `guid` the item may carry for this lock (`held::Held::release`).
    pub guids: Vec<G>,
    /// The lease lapsed, or another holder took the lock.
    pub lost: bool,
    /// Another holder took the lock.
    pub taken: bool,
    /// A fresh `guid` for the next acquisition of this client, if one waits for the lock.
    pub next: Option<G>,
    /// How long the lock was held.
    pub held_for: Duration,
    /// This holder waited for the lock before it took it.
    pub contended: bool,
    /// An earlier release of this lock failed after an attempt that may have landed
    /// (`held::Held::release_failed`).
    pub landed_maybe: bool,
}

/// How a held lock ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<G, E> {
    /// Handed to the next acquisition of this client under `guid`: FailOpen with its token,
    /// its lease running from `sent_at`.
    Handed {
        guid: G,
        fencing_token: Option<u64>,
        sent_at: Time,
    },
    /// Released (or nothing was left to release); `stand_back`: for how long the client lets
    /// others take the lock first. `ours`: the item was still this lock's (false: another
    /// holder had taken it, so nothing was freed).
    Released {
        stand_back: Option<Duration>,
        ours: bool,
    },
    /// FailClosed: the item was not ours.
    NotOurs,
    Failed(E),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase<R: Record, E> {
    HandOver(HandOver<R>),
    Release(Box<Release<R, E>>),
    Original(original::Release<R, E>),
}

type St<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Outcome<<R as Record>::Guid, E>>;

/// The end of one held lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ending<R: Record, E> {
    s: Lock,
    end: End<R::Guid>,
    phase: Phase<R, E>,
}

impl<R, E> Ending<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
    E: Clone,
{
    /// Ends the lock: hands it over if the next acquisition of this client waits, else
    /// releases it.
    pub fn start(s: Lock, end: End<R::Guid>, env: &Env) -> (Self, St<R, E>) {
        match end.next.clone().filter(|_| !end.lost) {
            Some(next) => {
                let (m, step) = HandOver::start(s, end.guids.clone(), next, env);
                let mut ending = Ending {
                    s,
                    end,
                    phase: Phase::HandOver(m),
                };
                let step = ending.handing(step, env);
                (ending, step)
            }
            None => Self::release(s, end, env),
        }
    }

    /// Ends a lock taken with the original library's requests: its one release request, under
    /// `guid`, the newest the lock is known to have, with its `fencing_token` (FailOpen). It
    /// goes by nothing else the client knows of the lock.
    pub fn original(s: Lock, guid: R::Guid, fencing_token: Option<u64>, env: &Env) -> (Self, St<R, E>) {
        let end = End {
            guids: vec![guid.clone()],
            lost: false,
            taken: false,
            next: None,
            held_for: Duration::ZERO,
            contended: false,
            landed_maybe: false,
        };
        let (m, step) = original::Release::start(s, guid, fencing_token, env);
        let ending = Ending {
            s,
            end,
            phase: Phase::Original(m),
        };
        (ending, Self::originals(step))
    }

    fn originals(step: Step<R::Guid, R::Version, Released<E>>) -> St<R, E> {
        map(step, |out| match out {
            Released::Released => Outcome::Released {
                stand_back: None,
                ours: true,
            },
            Released::NotOurs => Outcome::NotOurs,
            Released::Failed(e) => Outcome::Failed(e),
        })
    }

    /// This ending handed the lock over under `guid` (`Outcome::Handed`), but no acquisition
    /// of the client took it: every one in line gave up meanwhile. The lock is still ours,
    /// and is released instead, on the condition that the item carries `guid` or any it
    /// carried before.
    pub fn unclaimed(self, guid: R::Guid, env: &Env) -> (Self, St<R, E>) {
        let mut end = self.end;
        if !broken::on(Broken::UnclaimedHandOverForgetsGuid) {
            end.guids.push(guid);
        }
        end.next = None;
        Self::release(self.s, end, env)
    }

    /// Whether this ending's release failed (or may yet fail) after an attempt that may have
    /// landed: the holder tells the next release (`held::Held::release_failed`).
    pub fn landed_maybe(&self) -> bool {
        match &self.phase {
            Phase::Release(m) => m.landed_maybe(),
            Phase::HandOver(_) => self.end.landed_maybe,
            Phase::Original(_) => false,
        }
    }

    fn release(s: Lock, end: End<R::Guid>, env: &Env) -> (Self, St<R, E>) {
        let (m, step) = Release::start(s, end.guids.clone(), end.landed_maybe, env);
        let ending = Ending {
            s,
            end,
            phase: Phase::Release(Box::new(m)),
        };
        let step = if ending.end.taken && s.kind != Kind::FailClosed {
            // Nothing of ours is left on the item.
            Step::Done(ending.released(false, false))
        } else {
            ending.releasing(step)
        };
        (ending, step)
    }

    fn released(&self, waiter_marked: bool, ours: bool) -> Outcome<R::Guid, E> {
        let marked = waiter_marked && self.s.kind != Kind::Fifo;
        Outcome::Released {
            stand_back: (marked || self.end.contended).then(|| self.s.stand_back(self.end.held_for)),
            ours,
        }
    }

    fn handing(&mut self, step: Step<R::Guid, R::Version, handover::Outcome<R::Guid>>, env: &Env) -> St<R, E> {
        match step {
            // Answered after the whole lease, it hands nothing over (as an acquisition's take,
            // `fail_open::Outcome::Expired`): the lock is released under the new `guid`.
            Step::Done(handover::Outcome::Handed { sent_at, .. })
                if self.s.kind == Kind::FailOpen && env.now >= sent_at + self.s.lease() =>
            {
                self.handing(
                    Step::Done(handover::Outcome::NotDone {
                        maybe: self.end.next.clone(),
                    }),
                    env,
                )
            }
            Step::Done(handover::Outcome::Handed { fencing_token, sent_at }) => Step::Done(Outcome::Handed {
                guid: self.end.next.clone().expect("handed to the next"),
                fencing_token,
                sent_at,
            }),
            Step::Done(handover::Outcome::NotDone { maybe }) => {
                let mut end = self.end.clone();
                end.guids.extend(maybe);
                end.next = None;
                let (m, step) = Self::release(self.s, end, env);
                *self = m;
                step
            }
            step => map(step, |_| unreachable!("mapped above")),
        }
    }

    fn releasing(&self, step: Step<R::Guid, R::Version, release::Outcome<E>>) -> St<R, E> {
        map(step, |out| match out {
            release::Outcome::Released { waiter, ours } => self.released(waiter, ours),
            release::Outcome::NotOurs => Outcome::NotOurs,
            release::Outcome::Failed(e) => Outcome::Failed(e),
        })
    }
}

impl<R, E> Machine<R, E> for Ending<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
    E: Clone,
{
    type Out = Outcome<R::Guid, E>;

    fn purpose(&self) -> Purpose {
        Purpose::Releasing
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
        match &mut self.phase {
            Phase::HandOver(m) => {
                let step = Machine::<R, E>::answer(m, a, env);
                self.handing(step, env)
            }
            Phase::Release(m) => {
                let step = m.answer(a, env);
                self.releasing(step)
            }
            Phase::Original(m) => Self::originals(m.answer(a, env)),
        }
    }

    fn timer(&mut self, env: &Env) -> St<R, E> {
        match &mut self.phase {
            Phase::HandOver(m) => {
                let step = Machine::<R, E>::timer(m, env);
                self.handing(step, env)
            }
            Phase::Release(m) => {
                let step = m.timer(env);
                self.releasing(step)
            }
            Phase::Original(m) => Self::originals(m.timer(env)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{Guid, LockRecord, Version};
    use crate::op::Reply;
    use crate::request::Req;
    use crate::testing::{env, lock};

    type M = Ending<LockRecord, &'static str>;

    const A: Guid = [1; 64];
    const B: Guid = [2; 64];

    fn end(next: Option<Guid>) -> End<Guid> {
        End {
            guids: vec![A],
            lost: false,
            taken: false,
            next,
            held_for: Duration::from_millis(200),
            contended: false,
            landed_maybe: false,
        }
    }

    fn sent<'a>(step: &'a St<LockRecord, &'static str>) -> &'a Req<Guid, Version> {
        match step {
            Step::Send { req, .. } => req,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn a_waiting_acquisition_of_this_client_gets_the_lock_with_one_write() {
        let (mut m, step) = M::start(lock(Kind::FailOpen), end(Some(B)), &env(0));
        assert!(matches!(sent(&step), Req::HandOver { new_guid, renew: true, .. } if *new_guid == B));
        let done = m.answer(Answer::Done(Reply::HandedOver(Some(8))), &env(5));
        assert_eq!(
            done,
            Step::Done(Outcome::Handed {
                guid: B,
                fencing_token: Some(8),
                sent_at: Duration::ZERO,
            })
        );
    }

    #[test]
    fn a_hand_over_nobody_takes_is_released_under_the_guid_it_wrote() {
        let (mut m, _) = M::start(lock(Kind::FailOpen), end(Some(B)), &env(0));
        let done = m.answer(Answer::Done(Reply::HandedOver(Some(8))), &env(5));
        assert!(matches!(done, Step::Done(Outcome::Handed { guid: B, .. })));
        let (_, step) = m.unclaimed(B, &env(6));
        match sent(&step) {
            Req::Release { guids, .. } => assert_eq!(guids, &vec![A, B]),
            other => panic!("expected a release, got {other:?}"),
        }
    }

    #[test]
    fn a_refused_hand_over_is_a_release_of_every_guid_it_may_have_left() {
        let (mut m, _) = M::start(lock(Kind::FailOpen), end(Some(B)), &env(0));
        // Timed out (may have landed), then refused: a waiter elsewhere marked the item.
        let step = m.answer(
            Answer::Failed {
                transient: true,
                maybe_applied: true,
                error: "timeout",
            },
            &env(50),
        );
        let step = match step {
            Step::Wait { until, .. } => m.timer(&env(until.as_millis() as u64)),
            s => s,
        };
        assert!(matches!(sent(&step), Req::HandOver { .. }));
        let step = m.answer(Answer::Refused(None), &env(80));
        match sent(&step) {
            Req::Release { guids, .. } => assert_eq!(guids, &vec![A, B]),
            other => panic!("expected a release, got {other:?}"),
        }
        let done = m.answer(Answer::Done(Reply::WaitingMark(None)), &env(90));
        assert_eq!(
            done,
            Step::Done(Outcome::Released {
                stand_back: None,
                ours: true
            })
        );
    }

    #[test]
    fn a_hand_over_answered_after_the_whole_lease_is_a_release_under_both_guids() {
        let (mut m, _) = M::start(lock(Kind::FailOpen), end(Some(B)), &env(0));
        let step = m.answer(Answer::Done(Reply::HandedOver(Some(8))), &env(1000));
        match sent(&step) {
            Req::Release { guids, .. } => assert_eq!(guids, &vec![A, B]),
            other => panic!("expected a release, got {other:?}"),
        }
    }

    #[test]
    fn a_lock_taken_with_the_originals_requests_is_released_with_one_of_them() {
        let (mut m, step) = M::original(lock(Kind::FailOpen), A, Some(3), &env(0));
        assert!(matches!(sent(&step), Req::PutItem { .. }), "{step:?}");
        assert_eq!(
            m.answer(Answer::Refused(None), &env(5)),
            Step::Done(Outcome::Released {
                stand_back: None,
                ours: true
            }),
            "FailOpen: refused quietly"
        );
        let (mut m, step) = M::original(lock(Kind::FailClosed), A, None, &env(0));
        assert!(matches!(sent(&step), Req::DeleteIfGuid { .. }), "{step:?}");
        assert_eq!(m.answer(Answer::Refused(None), &env(5)), Step::Done(Outcome::NotOurs));
        let (mut m, _) = M::original(lock(Kind::FailClosed), A, None, &env(0));
        let failed = Answer::Failed {
            transient: true,
            maybe_applied: true,
            error: "timeout",
        };
        assert_eq!(
            m.answer(failed, &env(50)),
            Step::Done(Outcome::Failed("timeout")),
            "not retried"
        );
        assert!(!m.landed_maybe());
    }

    #[test]
    fn a_lost_lock_is_released_not_handed_over() {
        let mut e = end(Some(B));
        e.lost = true;
        let (_, step) = M::start(lock(Kind::FailClosed), e, &env(0));
        assert!(matches!(sent(&step), Req::DeleteIfGuid { .. }));
    }

    #[test]
    fn a_taken_failopen_or_fifo_lock_writes_nothing_and_stands_back_only_if_it_waited() {
        for kind in [Kind::FailOpen, Kind::Fifo] {
            let mut e = end(Some(B));
            (e.lost, e.taken) = (true, true);
            let (_, step) = M::start(lock(kind), e.clone(), &env(0));
            assert_eq!(
                step,
                Step::Done(Outcome::Released {
                    stand_back: None,
                    ours: false
                }),
                "{kind:?}"
            );
            e.contended = true;
            let (_, step) = M::start(lock(kind), e, &env(0));
            assert!(
                matches!(
                    step,
                    Step::Done(Outcome::Released {
                        stand_back: Some(_),
                        ours: false
                    })
                ),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn a_release_that_finds_a_fresh_mark_stands_back_for_the_waiter() {
        let s = lock(Kind::FailOpen);
        let (mut m, step) = M::start(s, end(None), &env(0));
        assert!(matches!(sent(&step), Req::Release { .. }));
        // A waiter marked the item 1 ms before the release.
        let done = m.answer(Answer::Done(Reply::WaitingMark(Some(1_000_004))), &env(5));
        assert_eq!(
            done,
            Step::Done(Outcome::Released {
                stand_back: Some(s.stand_back(Duration::from_millis(200))),
                ours: true
            })
        );
    }
}
