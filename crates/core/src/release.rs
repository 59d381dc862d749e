//! Release as a state machine, for FailClosed and FailOpen.
//!
//! The protocol:
//! - FailClosed deletes the item if it carries one of the lock's `guid`s (its own, and one a
//!   heartbeat may have written). FailOpen sets `leaseDurationMs` to 1 on the same condition:
//!   the item stays, so fencing tokens keep rising.
//! - A release tries harder than other requests (at least `RELEASE_MAX_ATTEMPTS`): a lost
//!   release leaves a lock held.
//! - A refusal after an attempt that may have landed means that attempt landed: while the
//!   item was ours, nobody else could write it. A FailClosed refusal otherwise is an error (the
//!   lock was not ours); a FailOpen one is quiet, as in the original library (the lease
//!   lapsed and someone took the lock).
//! - A failure after an attempt that may have landed is settled by reading the item: if it no
//!   longer holds the lock for us, the release happened. Not settled (the read failed too), the
//!   release fails, and the next release of the lock starts knowing that an attempt may have
//!   landed: a refusal then means it did.
//! - The answer tells whether a waiter marked the item lately: the caller then stands back for
//!   a moment before it asks for the same lock again.

use crate::broken::{self, Broken};
use crate::item::RELEASED_LEASE_MS;
use crate::op::{self, Record};
use crate::request::{Answer, Ended, Env, Machine, Next, Pending, Policy, Purpose, Reply, Req, Step};
use crate::settings::{Kind, Lock};
use crate::waiting::marked_recently;

/// Whether an existing lock item of a `kind` client is released, as `getLock` reports it: a
/// FailClosed item is held while it exists, a FailOpen one is released once its
/// `leaseDurationMs` is 1, a semaphore's head while no holder is on it, a Fifo head while free.
pub fn reported_released<R: Record>(kind: Kind, item: &R) -> bool {
    match kind {
        Kind::FailClosed => false,
        Kind::FailOpen => op::released(Some(item)),
        Kind::Fifo if item.permits().is_some() => item.holders().is_empty(),
        Kind::Fifo => op::free(Some(item)),
    }
}

/// Whether an existing lock item of a `kind` client is held by the holder of `guids` (every
/// `guid` its lock may carry): not released, and carrying one of them, or naming a semaphore
/// holder that does.
pub fn held_by<R: Record>(kind: Kind, item: &R, guids: &[R::Guid]) -> bool {
    !reported_released(kind, item)
        && guids
            .iter()
            .any(|g| item.carries(g) || item.holders().iter().any(|h| h.guid == *g))
}

/// Whether a `release()` that freed nothing fails (`FailedToReleaseLock`) rather than being
/// quiet, as the original is for FailOpen. `through_live_session`: the lock was known and
/// found no longer ours; whether it is held through a session that had not lost it (its item
/// was then changed behind the protocol's back: a hand edit, the original's write). `None`: no
/// lock of that id is known any more (released before, or lost and forgotten). `strict`: the
/// caller asked what was freed (`close({ releaseLocks: true })`). A FailClosed lock found not
/// ours fails in its machine (`Outcome::NotOurs`); one no longer known fails here.
pub fn nothing_freed_fails(kind: Kind, strict: bool, through_live_session: Option<bool>) -> bool {
    strict || through_live_session.unwrap_or(kind == Kind::FailClosed)
}

/// How a release ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<E> {
    /// Released (or found released); `waiter`: another process marked the item lately.
    /// `ours`: false when a FailOpen or Fifo item was refused as no longer ours (the lease
    /// lapsed and someone took the lock): quiet, as in the original, but nothing was freed.
    Released {
        waiter: bool,
        ours: bool,
    },
    /// FailClosed: the item was not ours.
    NotOurs,
    Failed(E),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase<E> {
    Write,
    Settle(E),
    Over,
}

/// A release's step.
pub type St<R, E> = Step<<R as Record>::Guid, <R as Record>::Version, Outcome<E>>;

/// One release of a FailClosed or FailOpen lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release<R: Record, E> {
    s: Lock,
    guids: Vec<R::Guid>,
    settle: Policy,
    pending: Option<Pending<R::Guid, R::Version>>,
    phase: Phase<E>,
    /// An attempt of this release, or of an earlier one of the same lock, may have landed.
    landed_maybe: bool,
}

impl<R, E> Release<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
{
    /// Releases the lock whose item may carry any of `guids`; `landed_maybe`: an earlier
    /// release of it failed after an attempt that may have landed.
    pub fn start(s: Lock, guids: Vec<R::Guid>, landed_maybe: bool, env: &Env) -> (Self, St<R, E>) {
        let budget = s.budget(s.release_attempts(), env.now);
        let req = match s.kind {
            Kind::FailClosed => Req::DeleteIfGuid { guids: guids.clone() },
            Kind::FailOpen | Kind::Fifo => Req::Release {
                guids: guids.clone(),
                // The original reads it on FailOpen items; Fifo items are this package's alone.
                lock_acquired_time_unix_ms: (s.kind == Kind::FailOpen).then_some(env.unix_ms),
            },
        };
        let (mut pending, step) = Pending::start(req, budget.writes, env.now);
        pending.attempts.ambiguous = landed_maybe;
        let m = Release {
            s,
            guids,
            settle: budget.settle,
            pending: Some(pending),
            phase: Phase::Write,
            landed_maybe,
        };
        (m, step)
    }

    fn written(&mut self, ended: Ended<R, E>, env: &Env) -> St<R, E> {
        match ended {
            Ended::Ok(Reply::WaitingMark(mark)) => Step::Done(Outcome::Released {
                waiter: marked_recently(&self.s, mark, env.unix_ms),
                ours: true,
            }),
            Ended::Ok(_) => Step::Done(Outcome::Released {
                waiter: false,
                ours: true,
            }),
            // An earlier attempt may have released the lock: nobody else could write the item
            // while it was ours, so a refusal now means that attempt landed.
            Ended::Refused { ambiguous: true, .. } => Step::Done(Outcome::Released {
                waiter: false,
                ours: true,
            }),
            Ended::Refused { ambiguous: false, .. } => match self.s.kind {
                Kind::FailClosed => Step::Done(Outcome::NotOurs),
                Kind::FailOpen | Kind::Fifo => Step::Done(Outcome::Released {
                    waiter: false,
                    ours: false,
                }),
            },
            Ended::Failed { error, ambiguous } => {
                if !ambiguous {
                    return Step::Done(Outcome::Failed(error));
                }
                if broken::on(Broken::TimeoutIsReleased) {
                    return Step::Done(Outcome::Released {
                        waiter: false,
                        ours: true,
                    });
                }
                self.landed_maybe = true;
                self.phase = Phase::Settle(error);
                let (p, step) = Pending::start(Req::Get, self.settle, env.now);
                self.pending = Some(p);
                step
            }
        }
    }

    /// Whether an attempt of this release (or of an earlier one it was told of) may have
    /// landed: a release that failed says so to the next.
    pub fn landed_maybe(&self) -> bool {
        self.landed_maybe
    }

    /// Whether `cur` still holds the lock for us.
    fn still_held(&self, cur: Option<&R>) -> bool {
        let ours = cur.is_some_and(|r| self.guids.iter().any(|g| r.carries(g)));
        match self.s.kind {
            Kind::FailClosed => ours,
            Kind::FailOpen | Kind::Fifo => {
                ours && cur.is_some_and(|r| r.lease_duration_ms() != Some(RELEASED_LEASE_MS))
            }
        }
    }
}

impl<R, E> Machine<R, E> for Release<R, E>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
    E: Clone,
{
    type Out = Outcome<E>;

    fn purpose(&self) -> Purpose {
        Purpose::Releasing
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R, E> {
        let Some(pending) = self.pending.as_mut() else {
            return Step::Done(Outcome::Released {
                waiter: false,
                ours: true,
            });
        };
        let ended = match pending.answer::<R, E, Outcome<E>>(a, env) {
            Next::Step(step) => return step,
            Next::Ended(e) => e,
        };
        self.pending = None;
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Write => self.written(ended, env),
            Phase::Settle(error) => match ended {
                Ended::Ok(Reply::Before(cur)) if !self.still_held(cur.as_ref()) => Step::Done(Outcome::Released {
                    waiter: false,
                    ours: true,
                }),
                _ => Step::Done(Outcome::Failed(error)),
            },
            Phase::Over => Step::Done(Outcome::Released {
                waiter: false,
                ours: true,
            }),
        }
    }

    fn timer(&mut self, env: &Env) -> St<R, E> {
        match self.pending.as_mut() {
            Some(p) => p.resend(env.now),
            None => Step::Done(Outcome::Released {
                waiter: false,
                ours: true,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::LockRecord;
    use crate::testing::{self, env, lock};

    type R = Release<LockRecord, &'static str>;

    fn timeout() -> Answer<LockRecord, &'static str> {
        Answer::Failed {
            error: "timeout",
            transient: true,
            maybe_applied: true,
        }
    }

    #[test]
    fn get_lock_reports_an_item_held_by_kind_and_by_guid() {
        let g = |b: u8| [b; crate::item::GUID_LEN];
        let (mine, other) = (g(1), g(2));
        let item = LockRecord {
            owner: Some("o".into()),
            guid: Some(crate::item::GuidValue::B(mine.to_vec())),
            fencing_token: Some(3),
            lease_duration_ms: Some(1000),
            ..Default::default()
        };
        for kind in [Kind::FailClosed, Kind::FailOpen, Kind::Fifo] {
            assert!(!reported_released(kind, &item), "{kind:?}");
            assert!(held_by(kind, &item, &[other, mine]), "{kind:?}");
            assert!(!held_by(kind, &item, &[other]), "{kind:?}");
        }
        let mut released = item.clone();
        released.set_lease_duration_ms(RELEASED_LEASE_MS);
        assert!(
            !reported_released(Kind::FailClosed, &released),
            "a FailClosed item is held while it exists"
        );
        assert!(reported_released(Kind::FailOpen, &released));
        assert!(!held_by(Kind::FailOpen, &released, &[mine]));
        assert!(
            reported_released(Kind::Fifo, &LockRecord::default()),
            "a head nobody was granted is free"
        );
        // A semaphore's head: held while a holder is on it, by that holder's guid.
        let mut head = LockRecord::default();
        head.set_permits(2);
        assert!(reported_released(Kind::Fifo, &head));
        let holder = crate::op::Holder {
            key: g(5),
            guid: mine,
            permits: 1,
            lease_duration_ms: 1000,
        };
        head.set_holder(&g(5), Some(&holder), "o");
        assert!(!reported_released(Kind::Fifo, &head));
        assert!(held_by(Kind::Fifo, &head, &[mine]));
        assert!(!held_by(Kind::Fifo, &head, &[other]));
    }

    #[test]
    fn a_release_that_frees_nothing_is_quiet_only_where_the_original_is() {
        for kind in [Kind::FailOpen, Kind::Fifo] {
            assert!(
                !nothing_freed_fails(kind, false, Some(false)),
                "{kind:?}: taken after its lease lapsed"
            );
            assert!(
                !nothing_freed_fails(kind, false, None),
                "{kind:?}: released before, or lost"
            );
            assert!(
                nothing_freed_fails(kind, false, Some(true)),
                "{kind:?}: changed behind a live session"
            );
            assert!(
                nothing_freed_fails(kind, true, Some(false)),
                "{kind:?}: the caller asked what was freed"
            );
        }
        assert!(nothing_freed_fails(Kind::FailClosed, false, None));
    }

    #[test]
    fn failclosed_deletes_and_failopen_marks_released_with_every_guid() {
        let guids = vec![[1; 64], [2; 64]];
        let (_, step) = R::start(lock(Kind::FailClosed), guids.clone(), false, &env(0));
        assert!(matches!(step, Step::Send { req: Req::DeleteIfGuid { guids: g }, .. } if g == guids));
        let (_, step) = R::start(lock(Kind::FailOpen), guids.clone(), false, &env(0));
        assert!(matches!(step, Step::Send { req: Req::Release { guids: g, .. }, .. } if g == guids));
    }

    #[test]
    fn a_release_tries_harder_than_other_requests() {
        let (mut m, _) = R::start(lock(Kind::FailOpen), vec![[1; 64]], false, &env(0));
        let mut now = 0;
        let mut writes = 1;
        loop {
            match m.answer(testing::throttled(), &env(now)) {
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    assert!(matches!(m.timer(&env(now)), Step::Send { .. }));
                    writes += 1;
                }
                Step::Done(out) => {
                    assert_eq!(out, Outcome::Failed("throttled"));
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(writes, 8, "RELEASE_MAX_ATTEMPTS");
    }

    #[test]
    fn a_refusal_after_a_write_that_may_have_landed_means_it_landed() {
        let (mut m, _) = R::start(lock(Kind::FailClosed), vec![[1; 64]], false, &env(0));
        let until = match m.answer(timeout(), &env(10)) {
            Step::Wait { until, .. } => until,
            other => panic!("{other:?}"),
        };
        m.timer(&env(until.as_millis() as u64));
        assert_eq!(
            m.answer(Answer::Refused(Some(None)), &env(30)),
            Step::Done(Outcome::Released {
                waiter: false,
                ours: true
            })
        );
        let (mut m, _) = R::start(lock(Kind::FailClosed), vec![[1; 64]], false, &env(0));
        assert_eq!(
            m.answer(Answer::Refused(Some(None)), &env(5)),
            Step::Done(Outcome::NotOurs)
        );
    }

    /// A release that failed after an attempt that may have landed (the settling read failed
    /// too) says so; the next release of the lock, told, takes a refusal for that attempt's
    /// success rather than for a lock that was not ours.
    #[test]
    fn a_release_after_one_that_may_have_landed_takes_a_refusal_for_success() {
        let mut s = lock(Kind::FailClosed);
        s.max_attempts = 1;
        let (mut m, _) = R::start(s, vec![[1; 64]], false, &env(0));
        assert!(!m.landed_maybe());
        // Every write and every settling read times out.
        let mut now = 0;
        let mut step = m.answer(timeout(), &env(now));
        let out = loop {
            match step {
                Step::Wait { until, .. } => {
                    now = until.as_millis() as u64;
                    m.timer(&env(now));
                    step = m.answer(timeout(), &env(now));
                }
                Step::Send { .. } => step = m.answer(timeout(), &env(now)),
                Step::Done(out) => break out,
            }
        };
        assert_eq!(out, Outcome::Failed("timeout"));
        assert!(m.landed_maybe(), "the failed release may have landed");

        let (mut again, _) = R::start(lock(Kind::FailClosed), vec![[1; 64]], m.landed_maybe(), &env(30));
        assert_eq!(
            again.answer(Answer::Refused(Some(None)), &env(40)),
            Step::Done(Outcome::Released {
                waiter: false,
                ours: true
            })
        );
    }

    #[test]
    fn a_failopen_refusal_is_quiet_but_says_the_item_was_not_ours() {
        for kind in [Kind::FailOpen, Kind::Fifo] {
            let (mut m, _) = R::start(lock(kind), vec![[1; 64]], false, &env(0));
            assert_eq!(
                m.answer(Answer::Refused(Some(None)), &env(5)),
                Step::Done(Outcome::Released {
                    waiter: false,
                    ours: false
                })
            );
        }
    }

    #[test]
    fn a_timeout_is_settled_by_reading_the_item() {
        let mut s = lock(Kind::FailOpen);
        s.max_attempts = 1;
        let ours = LockRecord {
            guid: Some(crate::item::GuidValue::B(vec![1; 64])),
            lease_duration_ms: Some(1000),
            ..Default::default()
        };
        for (item, out) in [
            (Some(ours.clone()), Outcome::Failed("timeout")),
            (
                Some(LockRecord {
                    lease_duration_ms: Some(1),
                    ..ours
                }),
                Outcome::Released {
                    waiter: false,
                    ours: true,
                },
            ),
            (
                None,
                Outcome::Released {
                    waiter: false,
                    ours: true,
                },
            ),
        ] {
            let (mut m, _) = R::start(s, vec![[1; 64]], false, &env(0));
            // One attempt... a release makes at least eight: the budget ends them first.
            let mut now = 0;
            let mut step = m.answer(timeout(), &env(now));
            while let Step::Wait { until, .. } = step {
                now = until.as_millis() as u64;
                m.timer(&env(now));
                step = m.answer(timeout(), &env(now));
            }
            assert!(matches!(step, Step::Send { req: Req::Get, .. }), "{step:?}");
            assert_eq!(m.answer(Answer::Done(Reply::Before(item)), &env(now)), Step::Done(out));
        }
    }

    #[test]
    fn the_answer_tells_whether_a_waiter_marked_the_item_lately() {
        let (mut m, _) = R::start(lock(Kind::FailOpen), vec![[1; 64]], false, &env(0));
        let fresh = m.answer(Answer::Done(Reply::WaitingMark(Some(1_000_000 - 100))), &env(0));
        assert_eq!(
            fresh,
            Step::Done(Outcome::Released {
                waiter: true,
                ours: true
            })
        );
        let (mut m, _) = R::start(lock(Kind::FailOpen), vec![[1; 64]], false, &env(0));
        let stale = m.answer(Answer::Done(Reply::WaitingMark(Some(1_000_000 - 60_000))), &env(0));
        assert_eq!(
            stale,
            Step::Done(Outcome::Released {
                waiter: false,
                ours: true
            })
        );
    }
}
