//! Hand-over to a local waiter as a state machine: a holder releasing a lock that another
//! acquisition of the same client waits for passes it on with one write instead of a release
//! and a new acquisition.
//!
//! The protocol:
//! - One conditional write rotates `guid` to the next holder's if the item still carries one
//!   of this holder's, and no waiter of another process marked the item within the mark's
//!   freshness (`waiting`): a waiter elsewhere goes first, so the lock is released instead.
//!   FailOpen's write also renews the lease and raises `fencingToken` by one; the next
//!   holder's lease runs from when the write was sent.
//! - Not done (refused, or failed), the lock is released instead, with the new `guid` among
//!   those the release accepts when the write may have landed.

use crate::broken::{self, Broken};
use crate::op::Record;
use crate::request::{Answer, Ended, Env, Machine, Next, Pending, Purpose, Reply, Req, Step, Time};
use crate::settings::{Kind, Lock};

/// How a hand-over ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<G> {
    /// The lock is the next holder's, under the new `guid`: FailOpen with its token, its lease
    /// running from `sent_at`.
    Handed { fencing_token: Option<u64>, sent_at: Time },
    /// Release it instead; `maybe`: a `guid` the write may have left on the item.
    NotDone { maybe: Option<G> },
}

type St<R> = Step<<R as Record>::Guid, <R as Record>::Version, Outcome<<R as Record>::Guid>>;

/// One hand-over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HandOver<R: Record> {
    new_guid: R::Guid,
    sent_at: Time,
    pending: Pending<R::Guid, R::Version>,
}

impl<R> HandOver<R>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
{
    /// Hands the lock whose item may carry any of `guids` over to `new_guid`.
    pub fn start(s: Lock, guids: Vec<R::Guid>, new_guid: R::Guid, env: &Env) -> (Self, St<R>) {
        let fresh = s.mark_fresh().as_millis() as u64;
        let req = Req::HandOver {
            guids,
            new_guid: new_guid.clone(),
            renew: s.kind == Kind::FailOpen,
            marks_fresh_since_unix_ms: env.unix_ms.saturating_sub(fresh),
        };
        let (pending, step) = Pending::start(req, s.policy(s.max_attempts), env.now);
        let m = HandOver {
            new_guid,
            sent_at: env.now,
            pending,
        };
        (m, step)
    }
}

impl<R, E> Machine<R, E> for HandOver<R>
where
    R: Record,
    R::Guid: Clone,
    R::Version: Clone,
{
    type Out = Outcome<R::Guid>;

    fn purpose(&self) -> Purpose {
        Purpose::Releasing
    }

    fn answer(&mut self, a: Answer<R, E>, env: &Env) -> St<R> {
        match self.pending.answer::<R, E, Outcome<R::Guid>>(a, env) {
            Next::Step(step) => step,
            Next::Ended(Ended::Ok(Reply::HandedOver(Some(t)))) => Step::Done(Outcome::Handed {
                fencing_token: Some(t),
                sent_at: if broken::on(Broken::HandOverLeaseFromReply) {
                    env.now
                } else {
                    self.sent_at
                },
            }),
            Next::Ended(Ended::Ok(_)) => Step::Done(Outcome::Handed {
                fencing_token: None,
                sent_at: self.sent_at,
            }),
            Next::Ended(Ended::Refused { ambiguous, .. } | Ended::Failed { ambiguous, .. }) => {
                Step::Done(Outcome::NotDone {
                    maybe: ambiguous.then(|| self.new_guid.clone()),
                })
            }
        }
    }

    fn timer(&mut self, env: &Env) -> St<R> {
        self.pending.resend(env.now)
    }
}
