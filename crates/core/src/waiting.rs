//! A waiter's place among the waiters of every process, and the pace of its re-reads.
//!
//! - The pace: a waiter pauses between re-reads `rereadPeriodMs` plus half the time it has
//!   waited for the holder it sees, up to a ceiling tied to the lock's timing
//!   (`Lock::reread_interval`); a new holder is news and starts the pace over at
//!   `rereadPeriodMs`, for every waiter. A lock that keeps changing hands is read at that
//!   pace, so its hand-overs across processes wait for no back-off; a long hold costs a few
//!   reads a minute. The takeover deadline of a FailOpen wait does not depend on the pace:
//!   every pause ends at it (`next_read`).
//! - The first in line (the one whose mark the item carries: `lockWaitingUnixMs`,
//!   `lockWaiter`, `lockWaitingSinceUnixMs`) starts its pace at `rereadPeriodMs`, the others at
//!   the slower queue interval; a waiter that has waited longer than the marked one takes its
//!   place. The first renews its mark no more often than a holder heartbeats
//!   (`Lock::mark_renew`). The mark is best effort: a failed write of it costs fairness only,
//!   never safety. A holder's release reads the mark back, and a releaser that finds it fresh
//!   stands back long enough for the first waiter's next read (`Lock::stand_back`).

use std::time::Duration;

use crate::op::Record;
use crate::request::{Env, Req, Time};
use crate::settings::Lock;

/// The pace of a waiter's re-reads: the holder it last saw, since when (the start of the
/// pace), and when it last read. `H` names a holder: what changes when the lock changes hands
/// (FailOpen: the fencing token; FailClosed: the holder's `guid`; Fifo: the entry or the head
/// holder watched).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pace<H> {
    holder: Option<H>,
    since: Time,
    read_at: Time,
}

impl<H: PartialEq> Pace<H> {
    pub fn new(now: Time) -> Self {
        Pace {
            holder: None,
            since: now,
            read_at: now,
        }
    }

    /// A read at `now` found the lock held by `holder`: a holder other than the last one seen
    /// starts the pace over.
    pub fn seen(&mut self, holder: H, now: Time) {
        if self.holder.as_ref() != Some(&holder) {
            self.holder = Some(holder);
            self.since = now;
        }
        self.read_at = now;
    }

    /// A read is sent at `now`: should it fail, the next one still waits a pause.
    pub fn reading(&mut self, now: Time) {
        self.read_at = now;
    }

    /// The pause after the last read (`first`: of the first in line). A read that found a new
    /// holder leaves `read_at == since`: the time waited for it is zero.
    pub fn pause(&self, s: &Lock, first: bool) -> Duration {
        s.reread_interval(first, self.read_at.saturating_sub(self.since))
    }

    /// When the next read is due: a pause after the last one, not before `now`, and never
    /// after `limit`.
    pub fn next(&self, s: &Lock, first: bool, now: Time, limit: Time) -> Time {
        let at = self.read_at.checked_add(self.pause(s, first)).unwrap_or(limit);
        at.max(now).min(limit)
    }
}

/// One acquisition's waiting: its first place in line, and the pace of its re-reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiting<H> {
    id: String,
    since_unix_ms: u64,
    /// The item carries this waiter's mark.
    pub first: bool,
    pub pace: Pace<H>,
}

impl<H: PartialEq> Waiting<H> {
    /// A waiter named `id` (random, unique among waiters) that started waiting at
    /// `since_unix_ms` on the wall clock and `now` on the monotonic one.
    pub fn new(id: String, since_unix_ms: u64, now: Time) -> Self {
        Waiting {
            id,
            since_unix_ms,
            first: false,
            pace: Pace::new(now),
        }
    }

    /// A waiter that starts waiting at `env`'s time, named by `env`'s random number.
    pub fn at(env: &Env) -> Self {
        Waiting::new(format!("{:016x}", env.random), env.unix_ms, env.now)
    }

    /// Reads the mark on `held`: the mark to write when this waiter claims the first place or
    /// renews its own; otherwise whether it is first is settled.
    pub fn observe<R: Record, G, V>(&mut self, s: &Lock, held: &R, now_unix_ms: u64) -> Option<Req<G, V>> {
        let fresh_ms = s.mark_fresh().as_millis() as u64;
        let age = held.lock_waiting_unix_ms().map(|w| now_unix_ms.saturating_sub(w));
        let fresh = age.is_some_and(|a| a < fresh_ms);
        let mine = fresh && held.lock_waiter() == Some(self.id.as_str());
        let write = if mine {
            age.is_some_and(|a| a >= s.mark_renew().as_millis() as u64)
        } else {
            !fresh
                || held
                    .lock_waiting_since_unix_ms()
                    .is_none_or(|since| since > self.since_unix_ms)
        };
        if !write {
            self.first = mine;
            return None;
        }
        Some(Req::MarkWaiting {
            waiter: self.id.clone(),
            since_unix_ms: self.since_unix_ms,
            now_unix_ms,
            stale_before_unix_ms: now_unix_ms.saturating_sub(fresh_ms),
        })
    }

    /// The mark's write answered: `written` whether the item carries it now.
    pub fn marked(&mut self, written: bool) {
        self.first = written;
    }
}

/// Whether a waiting mark read back by a release is fresh: someone else waits.
pub fn marked_recently(s: &Lock, mark: Option<u64>, now_unix_ms: u64) -> bool {
    mark.is_some_and(|w| now_unix_ms.saturating_sub(w) < s.mark_fresh().as_millis() as u64)
}

/// When a waiter (`None`: one not in line yet) next reads the item: its pause after its last
/// read (and not before `now`), and never after `limit` (the next attempt, or the takeover
/// deadline).
pub fn next_read<H: PartialEq>(s: &Lock, waiting: Option<&Waiting<H>>, now: Time, limit: Time) -> Time {
    match waiting {
        Some(w) => w.pace.next(s, w.first, now, limit),
        None => Pace::<H>::new(now).next(s, false, now, limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{tests::lock, Kind};

    /// Steps a waiter behind the first in line through reads that find `holders` one after
    /// the other, each read when its pause says; returns the pauses.
    fn pauses(holders: &[u64]) -> Vec<u64> {
        let s = lock(Kind::FailOpen);
        let mut pace = Pace::new(Duration::ZERO);
        let mut now = Duration::ZERO;
        let mut out = Vec::new();
        for h in holders {
            pace.seen(*h, now);
            let pause = pace.pause(&s, false);
            out.push(pause.as_millis() as u64);
            now += pause;
        }
        out
    }

    #[test]
    fn a_lock_that_changes_hands_is_read_at_the_fast_pace_by_every_waiter() {
        // Every read finds a new holder: every waiter reads at `rereadPeriodMs`.
        assert_eq!(pauses(&[1, 2, 3, 4, 5]), vec![10, 10, 10, 10, 10]);
        // One holder keeps it: after the first read past the news, the queue interval, then
        // the pace grows by half the wait, up to half the lease.
        let kept = pauses(&[7; 12]);
        assert_eq!(&kept[..4], &[10, 250, 250, 265]);
        assert!(kept.windows(2).all(|w| w[0] <= w[1]), "{kept:?}");
        assert_eq!(*kept.last().unwrap(), 5000);
        // A new holder after a long hold starts the pace over.
        let mut again = vec![7; 12];
        again.push(8);
        assert_eq!(*pauses(&again).last().unwrap(), 10);
    }
}
