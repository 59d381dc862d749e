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

/// When a waiting acquisition tells its caller that it waits (`onWaiting`): once when it
/// first finds the lock held, then at reads that still find it held, at most once per report
/// period (`progress`). The first report names the holder when the answer that found the lock
/// held carried the item; when it did not (a refused condition), it waits for the read that
/// follows, or goes out without a holder at the acquisition's next step. `V` is the version
/// of the holder's item: a report says for how long it has been seen unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reports<V> {
    period: Option<Duration>,
    waited: bool,
    first_pending: bool,
    seen: Option<Seen<V>>,
}

/// The holder's item as last seen, since when, and when it was last reported.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen<V> {
    version: V,
    since: Time,
    reported: Time,
}

/// A report to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// A report of a wait that goes on, not the first.
    pub progress: bool,
    /// The holder is named (the item was read and not released): for how long its item has
    /// been seen unchanged.
    pub unchanged: Option<Duration>,
}

/// A holder's item as a read found it: its version, and whether it is released.
pub type Found<V> = (V, bool);

impl<V: PartialEq> Default for Reports<V> {
    fn default() -> Self {
        Reports {
            period: None,
            waited: false,
            first_pending: false,
            seen: None,
        }
    }
}

impl<V: PartialEq> Reports<V> {
    /// Progress reports come at most once per `period`; without one, only the first.
    pub fn every(&mut self, period: Duration) {
        self.period = Some(period);
    }

    /// Whether the acquisition found the lock held at some point.
    pub fn waited(&self) -> bool {
        self.waited
    }

    /// At `now` the acquisition found the lock held (`holder`: the item, when the answer
    /// carried it): it waits, or gives up, for someone else.
    pub fn waiting(&mut self, holder: Option<Found<V>>, now: Time) -> Option<Report> {
        if !self.waited {
            self.waited = true;
            return Some(self.report(holder, false, now));
        }
        holder.and_then(|h| self.seen(h, now))
    }

    /// A condition of the acquisition failed, and the answer did not carry the item: the
    /// first report waits for the read that follows (`seen`), or for `flush`.
    pub fn refused(&mut self) {
        if !self.waited {
            self.waited = true;
            self.first_pending = true;
        }
    }

    /// The acquisition goes on without having read the holder: a first report still pending
    /// goes out without it. (Nothing was seen before it: it needs no time.)
    pub fn flush(&mut self) -> Option<Report> {
        std::mem::take(&mut self.first_pending).then_some(Report {
            progress: false,
            unchanged: None,
        })
    }

    /// A read of a waiting acquisition at `now` found `holder`'s item: reported if a report
    /// period has passed since the last report, or if the first report waits for it.
    pub fn seen(&mut self, (version, released): Found<V>, now: Time) -> Option<Report> {
        if !self.waited {
            return None;
        }
        if self.first_pending {
            if released {
                return None;
            }
            self.first_pending = false;
            return Some(self.report(Some((version, false)), false, now));
        }
        if released {
            return None;
        }
        let due = match (self.period, &self.seen) {
            (Some(period), Some(s)) => now.saturating_sub(s.reported) >= period,
            _ => false,
        };
        if due {
            return Some(self.report(Some((version, false)), true, now));
        }
        self.track(version, now);
        None
    }

    /// Notes the holder's version at `now`: how long it has been seen unchanged.
    fn track(&mut self, version: V, now: Time) -> Duration {
        match &mut self.seen {
            Some(s) if s.version == version => now.saturating_sub(s.since),
            Some(s) => {
                s.version = version;
                s.since = now;
                Duration::ZERO
            }
            None => {
                self.seen = Some(Seen {
                    version,
                    since: now,
                    reported: now,
                });
                Duration::ZERO
            }
        }
    }

    fn report(&mut self, holder: Option<Found<V>>, progress: bool, now: Time) -> Report {
        let unchanged = holder
            .filter(|(_, released)| !released)
            .map(|(v, _)| self.track(v, now));
        if let Some(s) = &mut self.seen {
            s.reported = now;
        }
        Report { progress, unchanged }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{tests::lock, Kind};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A report: `progress`, and how long the named holder's item was unchanged (ms).
    fn told(progress: bool, unchanged: Option<u64>) -> Option<Report> {
        Some(Report {
            progress,
            unchanged: unchanged.map(ms),
        })
    }

    /// The first report names the holder; progress reports follow at most once a period,
    /// each saying how long the holder's item has been unchanged; a new holder starts that
    /// count over; a released item is never reported.
    #[test]
    fn a_wait_is_reported_first_then_once_a_period() {
        let mut r = Reports::default();
        r.every(ms(1000));
        assert_eq!(r.waiting(Some((1, false)), ms(0)), told(false, Some(0)));
        assert_eq!(r.seen((1, false), ms(400)), None);
        assert_eq!(r.seen((1, false), ms(1000)), told(true, Some(1000)));
        assert_eq!(r.seen((2, false), ms(1500)), None, "a new holder, within the period");
        assert_eq!(r.seen((2, true), ms(2100)), None, "released: nobody to report");
        assert_eq!(r.seen((2, false), ms(2200)), told(true, Some(700)));
        assert!(r.waited());
    }

    /// A refusal that did not carry the item: the first report waits for the read that
    /// names the holder, or goes out without one at the acquisition's next step; only once.
    #[test]
    fn a_refusal_reports_with_the_holder_the_next_read_finds() {
        let mut r = Reports::default();
        r.refused();
        assert_eq!(r.seen((3, true), ms(10)), None, "a released item names nobody");
        assert_eq!(r.seen((3, false), ms(20)), told(false, Some(0)));
        assert_eq!(r.flush(), None, "the first report went out");

        let mut r: Reports<u8> = Reports::default();
        r.refused();
        assert_eq!(r.flush(), told(false, None));
        assert_eq!(r.flush(), None);
        r.refused();
        assert_eq!(r.flush(), None, "refused again: no second first report");
    }

    /// Without a report period only the first report goes out; reads before any wait report
    /// nothing.
    #[test]
    fn without_a_period_only_the_first_wait_is_reported() {
        let mut r = Reports::default();
        assert_eq!(r.seen((1, false), ms(0)), None, "not waiting yet");
        assert!(!r.waited());
        assert_eq!(r.waiting(None, ms(0)), told(false, None));
        assert_eq!(r.waiting(Some((1, false)), ms(60_000)), None);
        assert_eq!(r.seen((1, false), ms(120_000)), None);
    }

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
