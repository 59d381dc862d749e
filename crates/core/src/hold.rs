//! A held lock's life from its acquisition to its release or loss, as one state machine: its
//! `guid`s (`held::Held`), its lease, when it is next stepped, one heartbeat at a time
//! (`heartbeat::Beat`), and a release that waits for a heartbeat's write on the wire. The
//! addon's heartbeat scheduler and both models that hold a FailOpen lock step this machine;
//! they carry its writes and report its answers, and decide nothing about the lease.
//!
//! The protocol:
//! - The lease counts from when the write that took the lock was sent (`Hold::new`). A lock
//!   with heartbeats is first stepped at a point of its period that a random number picks
//!   (`heartbeat::first_due`); a lock without them at the moment its loss is declared.
//! - When stepped with no heartbeat under way, a lock with heartbeats starts one; a lock
//!   without them is lost once its lease is over (`heartbeat::lapsed`), else is stepped again
//!   at that moment.
//! - A renewed lease is the lock's new `until`; the next step is the heartbeat's `next`, or
//!   the loss moment for a lock that writes no more.
//! - A release stops heartbeats: one pausing between attempts is dropped at once; one whose
//!   write is on the wire is waited for, a request timeout at most (the write is then dropped:
//!   it may still land, and is refused on a released item), and the release then goes on with
//!   every `guid` the item may carry (`Action::Release`).
//! - While a write of the holder's data is out (`held::Held::update`) no heartbeat starts: the
//!   lock is parked, not stepped, until the write ends (`update_ends`), and then stepped at
//!   once if its heartbeat was due meanwhile.
//! - A lock abandoned without a release (its client closed without `releaseLocks`) writes
//!   nothing more: a heartbeat under way is dropped, and the lock is stepped only at the loss
//!   moment of its lease, where it is lost, once, unless released or lost before
//!   (`held::Held::lapses`): its holder hears of the loss no later than a rival can be granted
//!   the lock, as with heartbeats.
//! - A heartbeat that failed outside the protocol (a panic of the code that carries it) is
//!   reported, at risk, and tried again a period later while the lease lasts; after that the
//!   lock is lost, once.

use std::time::Duration;

use crate::broken;
use crate::heartbeat::{self, Answer, Beat, Config, Failure, Loss, Time};
use crate::held::{self, Held};
use crate::settings::Kind;

/// What the caller does after a step, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<G> {
    /// Send a heartbeat write: rotate the item's `guid` from one of `guids` to `new`. A write
    /// the caller does not send after all is `Hold::write_not_sent`.
    Write { guids: [G; 2], new: G },
    /// Drop every write of the heartbeat still out.
    Abandon,
    /// A heartbeat write or attempt failed (count it).
    Failed(Failure),
    /// Emit `"danger"`: this much of the lease is left.
    Danger { remaining: Duration },
    /// The lease now runs until `until`.
    Renewed { until: Time },
    /// The lock is lost.
    Lost(Loss),
    /// A release that waited for a heartbeat's write goes on, as `held::Held::release` says.
    Release(held::Release<G>),
}

/// One held lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hold<G> {
    pub held: Held<G>,
    config: Config,
    /// The lock renews its lease with heartbeats.
    beats: bool,
    /// The end of the lease; `None` for a lock without one (FailClosed), never stepped.
    until: Option<Time>,
    /// When the lock is next stepped while no heartbeat is under way.
    wake: Time,
    beat: Option<Beat>,
    /// A release waits for the heartbeat's write on the wire, until then.
    releasing: Option<(Kind, Time)>,
    /// A heartbeat was due while a write of the holder's data was out: the lock is not
    /// stepped until that write ends.
    parked: bool,
}

/// What follows the end of a write of the holder's data (`Hold::update_ends`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateEnd {
    /// Its refusal lost the lock (which was not lost before): reported once, as taken.
    pub lost: bool,
    /// Its heartbeat came due while the write was out: when to step it (at once, as a rule).
    pub step_at: Option<Time>,
}

impl<G: Clone + PartialEq> Hold<G> {
    /// A lock taken under `guid` with the write sent at `sent` (`None`: a lock without a
    /// lease), at `now`. `random` places its first heartbeat within the period.
    pub fn new(config: Config, beats: bool, guid: G, sent: Option<Time>, now: Time, random: u64) -> Self {
        let until = sent.map(|sent| sent + config.lease);
        let wake = sent.map_or(now, |sent| {
            (sent + heartbeat::first_step(&config, beats, random, config.lease)).max(now)
        });
        Hold {
            held: Held::new(guid),
            config,
            beats,
            until,
            wake,
            beat: None,
            releasing: None,
            parked: false,
        }
    }

    /// The end of the lease (`None`: a lock without one).
    pub fn until(&self) -> Option<Time> {
        self.until
    }

    /// A heartbeat is under way.
    pub fn under_way(&self) -> bool {
        self.beat.is_some()
    }

    /// Attempts of the heartbeat under way so far.
    pub fn attempts(&self) -> u32 {
        self.beat.as_ref().map_or(0, Beat::attempts)
    }

    /// The pause before the next attempt of the heartbeat under way, should this one fail.
    fn retry_pause(&self, random: u64) -> Duration {
        self.config.retry_pause(self.attempts() + 1, random)
    }

    /// When the lock must be stepped (`handle_timeout`) if nothing answers before; `None` when
    /// it needs no more steps (released, lost, or without a lease).
    pub fn poll_timeout(&self) -> Option<Time> {
        let release_by = self.releasing.map(|(_, by)| by);
        if let Some(b) = &self.beat {
            return b.poll_timeout().into_iter().chain(release_by).min();
        }
        if release_by.is_some() {
            return release_by;
        }
        (self.until.is_some() && self.releasing.is_none() && !self.parked && self.held.watched()).then_some(self.wake)
    }

    /// The earliest moment the heartbeat under way must report something (danger or loss),
    /// however long its caller pauses for answers.
    pub fn urgent(&self) -> Option<Time> {
        self.beat.as_ref().map(Beat::urgent)
    }

    /// The lock is stepped at `now` (at or after `poll_timeout`, or a little before it when
    /// the caller starts heartbeats together). A heartbeat that starts writes `fresh`, unless
    /// an earlier one's `guid` is unsettled; with `None` it writes nothing (a model's bound on
    /// writes) and only reports the loss. `random` draws the pause before another attempt
    /// (`heartbeat::Config::retry_pause`); `round_trip`: the usual round trip of heartbeat
    /// writes.
    pub fn handle_timeout(&mut self, now: Time, fresh: Option<G>, random: u64, round_trip: Duration) -> Vec<Action<G>> {
        if self.releasing.is_some_and(|(_, by)| now >= by) {
            // The write a release waits for has taken a request timeout: it is dropped.
            return self.carry(vec![heartbeat::Action::Abandon]);
        }
        let backoff = self.retry_pause(random);
        if let Some(b) = self.beat.as_mut() {
            let actions = b.timer(now, backoff, round_trip);
            return self.carry(actions);
        }
        let Some(until) = self.until.filter(|_| self.releasing.is_none() && self.held.watched()) else {
            return Vec::new();
        };
        if !self.beats || self.held.abandoned {
            if heartbeat::lapsed_by(self.lapse_grain(), now, until) && self.held.lapses() {
                return self.carry(vec![heartbeat::Action::Lost(Loss::Lapsed)]);
            }
            self.wake = heartbeat::first_step(&self.config, false, 0, until);
            return Vec::new();
        }
        if self.held.updating {
            // The heartbeat waits for the write of the holder's data; the loss of a lease that
            // has run out meanwhile (its process was paused past it) does not.
            if !broken::on(broken::Broken::ParkedMissesLapse)
                && heartbeat::lapsed_by(self.config.timer_grain, now, until)
                && self.held.lapses()
            {
                return self.carry(vec![heartbeat::Action::Lost(Loss::Lapsed)]);
            }
            self.parked = true;
            return Vec::new();
        }
        if let Some(fresh) = fresh {
            self.held.beat_starts(fresh);
        }
        let (b, actions) = Beat::start(self.config, self.wake, until, now, round_trip);
        self.beat = Some(b);
        self.carry(actions)
    }

    /// The heartbeat's write (the first of its writes to answer) was answered at `now`;
    /// `random` as for `handle_timeout`.
    pub fn handle_answer(&mut self, now: Time, answer: Answer, random: u64) -> Vec<Action<G>> {
        let backoff = self.retry_pause(random);
        self.held.on_the_wire(false);
        let actions = match self.beat.as_mut() {
            Some(b) => b.answer(now, answer, backoff),
            None => Vec::new(),
        };
        self.carry(actions)
    }

    /// A write asked for was not sent after all (no connection was free for it).
    pub fn write_not_sent(&mut self) {
        if let Some(b) = self.beat.as_mut() {
            b.write_not_sent();
        }
    }

    /// The lock writes no more heartbeats: from now on it is stepped only at the loss moment
    /// of its lease (a model's bound on writes).
    pub fn stop_writing(&mut self) {
        self.beats = false;
        if let (None, Some(until)) = (&self.beat, self.until) {
            self.wake = heartbeat::first_step(&self.config, false, 0, until);
        }
    }

    /// Its heartbeats stop without a release (its client closed): a heartbeat under way is
    /// dropped, and the lock is stepped only at the loss moment of its lease, where it lapses.
    /// `through`: for a lock without a lease of its own, the end of the lease it is held
    /// through (its session's item's, abandoned with it), which it lapses with.
    pub fn abandon(&mut self, through: Option<Time>) {
        self.until = self.until.or(through);
        self.held.abandon();
        // No heartbeat waits for an update any more: the lapse does not.
        self.parked = false;
        self.beat = None;
        self.held.on_the_wire(false);
        self.stop_writing();
        if let Some(until) = self.until {
            self.wake = heartbeat::loss_moment(self.lapse_grain(), until);
        }
    }

    /// How early an abandoned lock or one without heartbeats lapses: a timer grain.
    fn lapse_grain(&self) -> Duration {
        if broken::on(broken::Broken::AbandonedLapsesLate) && self.held.abandoned {
            return Duration::ZERO;
        }
        self.config.timer_grain
    }

    /// Every write of the heartbeat is answered or dropped: none is on the wire any more (its
    /// `guid` stays known).
    pub fn settle(&mut self) {
        self.held.on_the_wire(false);
    }

    /// The release is called at `now`: no heartbeat starts any more, one between attempts
    /// stops at once, and one whose write is on the wire is waited for (`Wait`; its answer, or
    /// a step at the end of the wait, a request timeout later, then gives `Action::Release`).
    pub fn release(&mut self, kind: Kind, now: Time) -> held::Release<G> {
        if !self.held.beating {
            self.beat = None;
        }
        let by = self.releasing.map_or(now + self.config.request_timeout, |(_, by)| by);
        let release = self.held.release(kind, by);
        self.releasing = matches!(release, held::Release::Wait { .. }).then_some((kind, by));
        release
    }

    /// `lock.update` is called at `now` (`held::Held::update`): what it does, and for a write
    /// the instant its attempts must end by, `held::update_time` of what is left of the lease
    /// (its own, else `through`, the lease it is held through), so that the heartbeats parked
    /// behind it come back in time; `None` without a lease.
    pub fn update(&mut self, now: Time, through: Option<Time>) -> (held::Update<G>, Option<Time>) {
        let by = (self.until.or(through)).map(|until| now + held::update_time(until.saturating_sub(now)));
        (self.held.update(), by)
    }

    /// The write of the holder's data ended; `refused`: its condition failed, so another
    /// holder took the lock.
    pub fn update_ends(&mut self, refused: bool) -> UpdateEnd {
        self.held.updating = false;
        let lost = refused && self.held.lost.is_none();
        if refused {
            self.held.lose(held::Lost::Taken);
        }
        let step_at = if std::mem::take(&mut self.parked) {
            self.poll_timeout()
        } else {
            None
        };
        UpdateEnd { lost, step_at }
    }

    /// The code carrying the heartbeat failed at `now` (it panicked): the failure is reported
    /// as putting the lease at risk; while the lease lasts the heartbeat is tried again a
    /// period later (and no later than the lease's end), else the lock is lost, once.
    pub fn failed_outside(&mut self, now: Time) -> Vec<Action<G>> {
        self.beat = None;
        self.held.on_the_wire(false);
        let Some(until) = self.until else { return Vec::new() };
        let mut actions = vec![Action::Failed(Failure {
            report: true,
            at_risk: true,
            remaining: until.saturating_sub(now),
        })];
        if now < until {
            self.wake = (now + self.config.period.max(self.config.timer_grain)).min(until);
        } else if self.held.lost.is_none() && !self.held.released {
            actions.extend(self.carry(vec![heartbeat::Action::Lost(Loss::Lapsed)]));
        }
        actions
    }

    /// Keeps the lock's state as the heartbeat's actions say, and passes on what its caller
    /// carries out.
    fn carry(&mut self, actions: Vec<heartbeat::Action>) -> Vec<Action<G>> {
        let mut out = Vec::new();
        for a in actions {
            match a {
                // Once its release is called, nothing more goes out: the release waits for
                // the write already on the wire, and writes with every `guid` it may leave.
                heartbeat::Action::Write => match self.held.pending.clone().filter(|_| !self.held.stopping) {
                    Some(new) => {
                        self.held.on_the_wire(true);
                        out.push(Action::Write {
                            guids: [self.held.guid.clone(), new.clone()],
                            new,
                        });
                    }
                    None => self.write_not_sent(),
                },
                heartbeat::Action::Abandon => {
                    self.held.on_the_wire(false);
                    out.push(Action::Abandon);
                }
                heartbeat::Action::Failed(f) => out.push(Action::Failed(f)),
                heartbeat::Action::Danger { remaining } => out.push(Action::Danger { remaining }),
                heartbeat::Action::Landed => self.held.landed(),
                heartbeat::Action::Renewed { until, next } => {
                    self.beat = None;
                    self.until = Some(until);
                    self.wake = if self.beats {
                        next
                    } else {
                        heartbeat::first_step(&self.config, false, 0, until)
                    };
                    out.push(Action::Renewed { until });
                }
                heartbeat::Action::Lost(loss) => {
                    self.held.lose(match loss {
                        Loss::Lapsed => held::Lost::Lapsed,
                        Loss::NotOurs => held::Lost::Taken,
                    });
                    // Nothing of the lease is left to keep.
                    self.beat = None;
                    self.until = None;
                    self.wake = Time::ZERO;
                    out.push(Action::Lost(loss));
                }
            }
        }
        // A release that waited for the heartbeat's write goes on once it is answered.
        if let (Some((kind, by)), false) = (self.releasing, self.held.beating) {
            self.releasing = None;
            self.beat = None;
            out.push(Action::Release(self.held.release(kind, by)));
        }
        out
    }
}

impl<G> std::ops::Deref for Hold<G> {
    type Target = Held<G>;
    fn deref(&self) -> &Held<G> {
        &self.held
    }
}

impl<G> std::ops::DerefMut for Hold<G> {
    fn deref_mut(&mut self) -> &mut Held<G> {
        &mut self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{beat_config, ms, LONGEST_PAUSE};

    #[test]
    fn no_heartbeat_starts_while_the_holders_data_is_written() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 99_999);
        let due = h.poll_timeout().unwrap();
        assert_eq!(
            h.update(ms(100), None),
            (held::Update::Write { guids: vec![1] }, Some(ms(550))),
            "its attempts end by half of what is left of the lease"
        );
        // Due meanwhile: parked, not stepped, no write.
        assert_eq!(h.handle_timeout(due, Some(2), LONGEST_PAUSE, Duration::ZERO), vec![]);
        assert_eq!(h.poll_timeout(), None, "parked until the write ends");
        assert_eq!(h.held.guids(), vec![1], "no new guid");
        assert!(h.update_ends(false).step_at.is_some(), "stepped again at once");
        assert_eq!(h.poll_timeout(), Some(due));
        let a = h.handle_timeout(due + ms(3), Some(2), LONGEST_PAUSE, Duration::ZERO);
        assert_eq!(a, vec![Action::Write { guids: [1, 2], new: 2 }]);

        // A heartbeat under way goes on, and the update is conditioned on its guid too.
        assert_eq!(h.update(ms(0), None).0, held::Update::Write { guids: vec![1, 2] });
        let a = h.handle_answer(due + ms(10), Answer::Renewed, LONGEST_PAUSE);
        assert!(a.contains(&Action::Renewed { until: due + ms(1003) }), "{a:?}");
        assert_eq!(
            h.update_ends(false).step_at,
            None,
            "not parked: its next step is planned already"
        );
        assert!(h.poll_timeout().is_some());
    }

    /// A process paused past its lease while an update writes: the heartbeat's first step
    /// after it declares the loss, without waiting for the update to end; the update's refusal
    /// that follows reports nothing more.
    #[test]
    fn a_heartbeat_waiting_for_an_update_still_declares_a_lapsed_lease() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        assert!(matches!(h.update(ms(0), None).0, held::Update::Write { .. }));
        assert_eq!(
            h.handle_timeout(ms(1500), Some(2), LONGEST_PAUSE, Duration::ZERO),
            vec![Action::Lost(Loss::Lapsed)]
        );
        assert_eq!(
            h.update_ends(true),
            UpdateEnd {
                lost: false,
                step_at: None
            }
        );
        assert_eq!(h.held.lost, Some(held::Lost::Taken));
    }

    #[test]
    fn a_refused_update_loses_the_lock_and_a_lock_on_its_way_out_takes_none() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        assert!(matches!(h.update(ms(0), None).0, held::Update::Write { .. }));
        assert_eq!(
            h.update_ends(true),
            UpdateEnd {
                lost: true,
                step_at: None
            }
        );
        assert_eq!(h.held.lost, Some(held::Lost::Taken));
        assert_eq!(h.update(ms(0), None).0, held::Update::Lost(held::Lost::Taken));
        assert_eq!(h.poll_timeout(), None);

        let mut r = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        assert!(matches!(r.release(Kind::FailOpen, ms(0)), held::Release::Write { .. }));
        assert_eq!(r.update(ms(0), None).0, held::Update::Gone, "its release is called");

        let mut a = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        a.abandon(None);
        assert_eq!(a.update(ms(0), None).0, held::Update::Gone, "its client closed");
    }

    /// A lock held through a session has no lease of its own: abandoned with its session,
    /// it lapses at the loss moment of the session's lease, once.
    #[test]
    fn a_lock_held_through_a_session_lapses_with_the_sessions_lease() {
        let mut m = Hold::new(beat_config(250), true, 1u8, None, ms(0), 1);
        assert_eq!(m.poll_timeout(), None, "never stepped while the session keeps it");
        m.abandon(Some(ms(1500)));
        assert_eq!(m.poll_timeout(), Some(ms(1499)), "the session's loss moment");
        assert_eq!(m.handle_timeout(ms(1000), None, LONGEST_PAUSE, Duration::ZERO), vec![]);
        assert_eq!(
            m.handle_timeout(ms(1499), None, LONGEST_PAUSE, Duration::ZERO),
            vec![Action::Lost(Loss::Lapsed)]
        );
        assert_eq!(m.poll_timeout(), None, "lost once");
        let mut own = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        own.abandon(Some(ms(5000)));
        assert_eq!(own.poll_timeout(), Some(ms(999)), "its own lease counts");
    }

    #[test]
    fn an_abandoned_lock_writes_nothing_and_is_lost_once_at_its_loss_moment() {
        let mut a = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        let first = a.poll_timeout().unwrap();
        assert_eq!(
            a.handle_timeout(first, Some(2), LONGEST_PAUSE, Duration::ZERO),
            vec![Action::Write { guids: [1, 2], new: 2 }]
        );
        // Closed with the heartbeat's write out: dropped, and nothing more is written.
        a.abandon(None);
        assert!(!a.under_way() && !a.held.beating);
        assert_eq!(
            a.poll_timeout(),
            Some(ms(999)),
            "the lease's loss moment, a timer grain early"
        );
        assert_eq!(
            a.handle_timeout(ms(500), Some(3), LONGEST_PAUSE, Duration::ZERO),
            vec![]
        );
        assert_eq!(
            a.handle_timeout(ms(999), Some(3), LONGEST_PAUSE, Duration::ZERO),
            vec![Action::Lost(Loss::Lapsed)]
        );
        assert_eq!(a.held.lost, Some(held::Lost::Lapsed));
        assert_eq!(a.poll_timeout(), None, "lost once");
        assert_eq!(a.update(ms(0), None).0, held::Update::Lost(held::Lost::Lapsed));

        // Closed while an update writes, a heartbeat parked behind it: it still lapses.
        let mut p = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        let due = p.poll_timeout().unwrap();
        assert!(matches!(p.update(ms(0), None).0, held::Update::Write { .. }));
        assert_eq!(p.handle_timeout(due, Some(2), LONGEST_PAUSE, Duration::ZERO), vec![]);
        assert_eq!(p.poll_timeout(), None, "parked");
        p.abandon(None);
        assert_eq!(p.poll_timeout(), Some(ms(999)));
        assert_eq!(
            p.update_ends(false).step_at,
            None,
            "nothing to start when the update ends"
        );
        assert_eq!(
            p.handle_timeout(ms(999), None, LONGEST_PAUSE, Duration::ZERO),
            vec![Action::Lost(Loss::Lapsed)]
        );

        // Released after its client closed: not lost.
        let mut r = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 1);
        r.abandon(None);
        assert!(matches!(r.release(Kind::FailOpen, ms(0)), held::Release::Write { .. }));
        r.release_done();
        assert_eq!(r.poll_timeout(), None);
        assert_eq!(r.handle_timeout(ms(999), None, LONGEST_PAUSE, Duration::ZERO), vec![]);
    }

    #[test]
    fn heartbeats_renew_from_the_send_and_rotate_the_guid() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(10), 99_999);
        let first = h.poll_timeout().unwrap();
        assert!(first > ms(0) && first <= ms(250), "{first:?}");
        let a = h.handle_timeout(first, Some(2), LONGEST_PAUSE, Duration::ZERO);
        assert_eq!(a, vec![Action::Write { guids: [1, 2], new: 2 }]);
        assert!(h.under_way() && h.held.beating);
        let a = h.handle_answer(first + ms(5), Answer::Renewed, LONGEST_PAUSE);
        assert_eq!(
            a,
            vec![
                Action::Abandon,
                Action::Renewed {
                    until: first + ms(1000)
                }
            ]
        );
        assert_eq!(h.held.guids(), vec![2]);
        assert!(!h.under_way());
        assert_eq!(h.poll_timeout(), Some(first + ms(250)));
    }

    #[test]
    fn a_lock_without_heartbeats_is_lost_at_its_loss_moment_only() {
        let mut h = Hold::new(beat_config(0), false, 1u8, Some(ms(0)), ms(0), 7);
        assert_eq!(h.poll_timeout(), Some(ms(999)), "a timer grain early");
        assert_eq!(h.handle_timeout(ms(500), None, LONGEST_PAUSE, Duration::ZERO), vec![]);
        assert_eq!(h.poll_timeout(), Some(ms(999)));
        assert_eq!(
            h.handle_timeout(ms(999), None, LONGEST_PAUSE, Duration::ZERO),
            vec![Action::Lost(Loss::Lapsed)]
        );
        assert_eq!(h.poll_timeout(), None);
        assert_eq!(h.held.lost, Some(held::Lost::Lapsed));
        let mut closed = Hold::new(beat_config(0), false, 1u8, None, ms(0), 7);
        assert_eq!(closed.poll_timeout(), None, "no lease, never stepped");
        assert_eq!(
            closed.handle_timeout(ms(5000), None, LONGEST_PAUSE, Duration::ZERO),
            vec![]
        );
    }

    #[test]
    fn a_release_waits_for_the_write_on_the_wire_then_writes_both_guids() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 0);
        let t = h.poll_timeout().unwrap();
        h.handle_timeout(t, Some(2), LONGEST_PAUSE, Duration::ZERO);
        assert_eq!(
            h.release(Kind::FailOpen, t),
            held::Release::Wait { until: t + ms(5000) }
        );
        assert!(
            h.poll_timeout().is_some(),
            "the heartbeat under way still has its timer"
        );
        let a = h.handle_answer(
            t + ms(400),
            Answer::Failed {
                code: "Throttled".into(),
                transient: true,
            },
            LONGEST_PAUSE,
        );
        assert_eq!(
            a.last(),
            Some(&Action::Release(held::Release::Write {
                guids: vec![1, 2],
                taken: false
            }))
        );
        assert!(!h.under_way());
        assert_eq!(h.poll_timeout(), None, "no heartbeat after the release");
    }

    #[test]
    fn a_release_waits_a_request_timeout_at_most_then_drops_the_write_and_writes_both_guids() {
        let config = Config {
            request_timeout: ms(300),
            ..beat_config(250)
        };
        let mut h = Hold::new(config, true, 1u8, Some(ms(0)), ms(0), 0);
        let t = h.poll_timeout().unwrap();
        h.handle_timeout(t, Some(2), LONGEST_PAUSE, Duration::ZERO);
        let by = t + ms(300);
        assert_eq!(h.release(Kind::FailOpen, t), held::Release::Wait { until: by });
        assert_eq!(
            h.release(Kind::FailOpen, t + ms(10)),
            held::Release::Wait { until: by },
            "asked again, the same end"
        );
        // The write is never answered; the wait ends before the lease (a lease that ends first
        // drops the write then).
        let mut last = Vec::new();
        while let Some(at) = h.poll_timeout() {
            assert!(at <= by, "{at:?}");
            last = h.handle_timeout(at, None, LONGEST_PAUSE, Duration::ZERO);
            if last.iter().any(|a| matches!(a, Action::Release(_))) {
                assert_eq!(at, by);
                break;
            }
        }
        assert_eq!(
            last,
            vec![
                Action::Abandon,
                Action::Release(held::Release::Write {
                    guids: vec![1, 2],
                    taken: false
                })
            ]
        );
        assert_eq!(h.poll_timeout(), None, "nothing more after the release");
    }

    #[test]
    fn once_its_release_is_called_a_heartbeat_writes_nothing_more() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 0);
        let t = h.poll_timeout().unwrap();
        let first = h.handle_timeout(t, Some(2), LONGEST_PAUSE, Duration::ZERO);
        assert!(first.iter().any(|a| matches!(a, Action::Write { .. })), "{first:?}");
        assert_eq!(
            h.release(Kind::FailOpen, t),
            held::Release::Wait { until: t + ms(5000) }
        );
        // The write on the wire is slow: the heartbeat's timers come, and would send another
        // write beside it, then another attempt, until the lease is at its end.
        let mut steps = 0;
        while let Some(at) = h.poll_timeout().filter(|at| *at < ms(1000)) {
            let actions = h.handle_timeout(at, None, LONGEST_PAUSE, Duration::ZERO);
            assert!(
                !actions.iter().any(|a| matches!(a, Action::Write { .. })),
                "{actions:?}"
            );
            steps += 1;
            assert!(steps < 100);
        }
        assert!(steps > 0, "the heartbeat under way kept its timers");
    }

    #[test]
    fn a_release_between_attempts_stops_the_heartbeat_at_once() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 0);
        let t = h.poll_timeout().unwrap();
        h.handle_timeout(t, Some(2), LONGEST_PAUSE, Duration::ZERO);
        h.handle_answer(
            t + ms(5),
            Answer::Failed {
                code: "Throttled".into(),
                transient: true,
            },
            LONGEST_PAUSE,
        );
        assert!(h.under_way(), "pausing before the next attempt");
        assert!(matches!(h.release(Kind::FailOpen, ms(0)), held::Release::Write { .. }));
        assert!(!h.under_way());
        assert_eq!(h.poll_timeout(), None);
    }

    #[test]
    fn a_heartbeat_failing_outside_the_protocol_is_retried_a_period_later_then_lost_once() {
        let mut h = Hold::new(beat_config(250), true, 1u8, Some(ms(0)), ms(0), 0);
        let a = h.failed_outside(ms(100));
        assert_eq!(
            a,
            vec![Action::Failed(Failure {
                report: true,
                at_risk: true,
                remaining: ms(900)
            })]
        );
        assert_eq!(h.poll_timeout(), Some(ms(350)));
        assert_eq!(h.failed_outside(ms(900)).len(), 1);
        assert_eq!(h.poll_timeout(), Some(ms(1000)), "no later than the lease's end");
        let a = h.failed_outside(ms(1000));
        assert_eq!(a.last(), Some(&Action::Lost(Loss::Lapsed)));
        assert_eq!(h.poll_timeout(), None);
        let again = h.failed_outside(ms(1300));
        assert!(
            !again.iter().any(|a| matches!(a, Action::Lost(_))),
            "lost once: {again:?}"
        );
    }
}
