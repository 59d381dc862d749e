//! A session (`session: true`) as its client sees it: which locks it speaks for, and whether it
//! still does. The session's own item is an ordinary FailOpen lock of the client, with its own
//! `hold::Hold` and heartbeats; this machine is what the client decides around it, within the
//! client machine (`client::Client`), which the addon and the session model step.
//!
//! The protocol:
//! - The session lasts while its item's lease lasts as the item's heartbeat counts it
//!   (`heartbeat::lapsed_by`: no longer from the moment the heartbeat declares the loss, a
//!   timer grain before the lease's end), its loss is not declared, and its item is neither
//!   released nor abandoned. Whatever asks whether a lock held through the session is still
//!   held asks `lasts`, so that nothing says held where the heartbeat says lost.
//! - A lock taken or handed over through the session joins it only while it lasts; a lock that
//!   cannot join is lost already, and its holder gives it back.
//! - What the item's heartbeat reports is every member's: an error or `"danger"` is told to
//!   each, and the loss makes every member lost at once. A lost session stays lost: no lock
//!   joins it any more, and the client's next acquisition starts a new one.
//! - A renewal of the item names the locks an operator revoked (`forceRelease`), by the
//!   `guid`s their items carried: those members are lost and leave; a later lock of the same
//!   id carries another `guid`, and stays.
//! - An acquisition through the session that found it ended while it waited (its lock given
//!   back as expired) starts again through a new session, as often as its retries allow.

use crate::heartbeat::{self, Time};
use std::time::Duration;

/// One session's members (by the caller's lock ids `M`, in their order, with the `guid` each
/// lock's item carries) and its fate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Session<M, G> {
    timer_grain: Duration,
    members: Vec<(M, G)>,
    lost: bool,
    /// Its item is released or abandoned: it speaks for no lock any more.
    ended: bool,
}

impl<M: Copy + Ord, G: PartialEq> Session<M, G> {
    /// A session just taken, for a runtime whose timers fire within `timer_grain`.
    pub fn new(timer_grain: Duration) -> Self {
        Session {
            timer_grain,
            members: Vec::new(),
            lost: false,
            ended: false,
        }
    }

    /// Whether the session still speaks for its locks at `now`, its item's lease ending at
    /// `until` (`None`: the item holds no lease any more).
    pub fn lasts(&self, now: Time, until: Option<Time>) -> bool {
        !self.lost && !self.ended && until.is_some_and(|until| !heartbeat::lapsed_by(self.timer_grain, now, until))
    }

    /// The lock `member`, whose item carries `guid`, is held through the session from now on
    /// if the session lasts; `false`: it does not, and the lock is lost already.
    pub fn join(&mut self, member: M, guid: G, now: Time, until: Option<Time>) -> bool {
        if !self.lasts(now, until) {
            return false;
        }
        // In the members' order, so that equal memberships are equal values.
        match self.members.binary_search_by(|(m, _)| m.cmp(&member)) {
            Ok(i) => self.members[i].1 = guid,
            Err(i) => self.members.insert(i, (member, guid)),
        }
        true
    }

    /// `member` is released, handed on, abandoned or lost: the session no longer speaks for it.
    pub fn leave(&mut self, member: M) {
        self.members.retain(|(m, _)| *m != member);
    }

    /// The session's item is released or abandoned: the session speaks for no lock any more.
    /// Its members are the ones to tell (those still held are lost with it).
    pub fn end(&mut self) -> Vec<M> {
        self.ended = true;
        self.members.drain(..).map(|(m, _)| m).collect()
    }

    /// The item's heartbeat declared the session lost: so is every member, each told once.
    pub fn lose(&mut self) -> Vec<M> {
        self.lost = true;
        self.members.drain(..).map(|(m, _)| m).collect()
    }

    /// The locks held through the session now: each hears what its item's heartbeat reports
    /// short of the loss (an error, `"danger"`).
    pub fn members(&self) -> Vec<M> {
        self.members.iter().map(|(m, _)| *m).collect()
    }

    /// Whether `member` is held through the session now.
    pub fn holds(&self, member: M) -> bool {
        self.members.iter().any(|(m, _)| *m == member)
    }

    /// A renewal of the item names the locks an operator revoked by their `guid`s: the
    /// members whose items carry one of them are lost, and leave.
    pub fn revoke(&mut self, guids: &[G]) -> Vec<M> {
        let mut revoked = Vec::new();
        self.members.retain(|(m, g)| {
            let hit = guids.contains(g);
            if hit {
                revoked.push(*m);
            }
            !hit
        });
        revoked
    }

    /// An acquisition through the session ended with its lock given back as expired, after
    /// `restarts` restarts: whether it starts again (through a new session). Only when the
    /// session is what ended, and while its retries last (`retry_count`, at least one restart;
    /// without end when it waits until aborted).
    pub fn restarts(
        &self,
        now: Time,
        until: Option<Time>,
        restarts: u32,
        retry_count: u32,
        until_aborted: bool,
    ) -> bool {
        !self.lasts(now, until) && (until_aborted || restarts < retry_count.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAIN: Duration = Duration::from_millis(5);

    fn ms(n: u64) -> Time {
        Duration::from_millis(n)
    }

    #[test]
    fn a_session_lasts_until_the_moment_its_heartbeat_declares_the_loss() {
        let s: Session<u64, u8> = Session::new(GRAIN);
        let until = Some(ms(1000));
        assert!(s.lasts(ms(994), until));
        // A grain early, as `heartbeat::lapsed_by` says: never alive where the heartbeat
        // says lost.
        assert!(!s.lasts(ms(995), until));
        assert_eq!(s.lasts(ms(995), until), !heartbeat::lapsed_by(GRAIN, ms(995), ms(1000)));
        assert!(!s.lasts(ms(0), None), "no lease: the item is no longer held");
    }

    #[test]
    fn a_lost_or_ended_session_takes_no_member_and_tells_every_member_once() {
        let mut s = Session::new(GRAIN);
        let until = Some(ms(1000));
        assert!(s.join(1u64, 10u8, ms(0), until));
        assert!(s.join(2, 20, ms(0), until));
        assert_eq!(s.members(), vec![1, 2]);
        assert!(!s.join(3, 30, ms(995), until), "lapsed: the lock is lost already");
        assert_eq!(s.lose(), vec![1, 2]);
        assert!(s.lose().is_empty(), "each member is told once");
        assert!(!s.lasts(ms(0), until), "a lost session stays lost");
        assert!(!s.join(4, 40, ms(0), until));

        let mut s = Session::new(GRAIN);
        assert!(s.join(1u64, 10u8, ms(0), until));
        assert_eq!(s.end(), vec![1]);
        assert!(!s.join(2, 20, ms(0), until), "an ended session speaks for no lock");
    }

    #[test]
    fn a_revocation_loses_only_the_members_whose_items_carry_a_revoked_guid() {
        let mut s = Session::new(GRAIN);
        let until = Some(ms(1000));
        s.join(1u64, 10u8, ms(0), until);
        s.join(2, 20, ms(0), until);
        s.leave(2);
        // The same id taken again since carries another guid: it stays.
        s.join(3, 21, ms(0), until);
        assert_eq!(s.revoke(&[10, 20]), vec![1]);
        assert_eq!(s.members(), vec![3]);
        assert!(s.lasts(ms(1), until), "the session goes on");
        assert!(s.holds(3) && !s.holds(1));
    }

    #[test]
    fn an_acquisition_restarts_only_when_its_session_ended_and_retries_are_left() {
        let mut s: Session<u64, u8> = Session::new(GRAIN);
        let until = Some(ms(1000));
        assert!(
            !s.restarts(ms(0), until, 0, 3, false),
            "the session lasts: the expiry is the lock's own"
        );
        s.lose();
        assert!(
            s.restarts(ms(0), until, 0, 0, false),
            "one restart even without retries"
        );
        assert!(s.restarts(ms(0), until, 2, 3, false));
        assert!(!s.restarts(ms(0), until, 3, 3, false));
        assert!(s.restarts(ms(0), until, 1000, 3, true), "until aborted: no end");
    }
}
