//! One heartbeat of a held FailOpen lock (or Fifo head), from its first write to a renewed
//! lease or a loss, as a state machine. Time is an input: every step is told the holder's
//! monotonic clock, and `poll_timeout` says when the next step is due if nothing answers
//! before. The addon's scheduler, the model checker and the simulator step this machine.
//!
//! The protocol:
//! - A heartbeat rotates the item's `guid` to a new one on the condition that the item carries
//!   the holder's (or the new one, if an earlier write of this heartbeat landed unseen). Every
//!   write of one heartbeat carries the same new `guid`, so the renewed lease counts from when
//!   the first of them was sent: a waiter elsewhere that saw the item before that write waits
//!   out a lease from its own read, which came later.
//! - The lease ends at `until` on the holder's clock. The loss is declared at `until` itself,
//!   one timer grain early, whatever is under way: a write out, a pause between attempts. An
//!   answer that comes at or after that moment grants nothing (a process that was paused sees
//!   the deadline and the answer together): the holder never learns of its loss later than a
//!   waiter can be granted the lock.
//! - A write is not given up for being slow: after half of what was left of the lease (and at
//!   least a period) it is reported once as a timeout and still awaited; another write of the
//!   same `guid` goes out beside it when it has taken a period, twice the usual round trip or
//!   half of what was left, whichever is longest (a black-holed connection never answers). The
//!   first answer counts; the others are dropped.
//! - `"danger"` once little of the lease is left (`danger_margin`, or half of what was left
//!   when the heartbeat started, whichever comes later); errors are reported at most once per
//!   period for one cause; an error no retry can mend waits for the end of the lease, except
//!   a missing table (`TABLE_GONE`): the item went with it, and the lock is lost at once, as
//!   when the item no longer carries the holder's `guid` (deleted, or taken).
//! - A renewed lock's next heartbeat is due a period after this one was due, or after it
//!   started if it started late, and at once if the answer took longer than that; but never
//!   after the renewed lease's loss moment (`due`). A heartbeat due at or after that moment is
//!   the loss itself, with no write: with a period as long as the lease or longer, the loss is
//!   still declared when the lease ends, not when the next heartbeat would have started.

use std::time::Duration;

use crate::broken::{self, Broken};
use crate::settings::Lock;

/// A point on the holder's monotonic clock, as the time since an origin the caller chooses.
pub type Time = Duration;

/// Writes of one heartbeat out at once, as a rule: the first, and others sent beside it when it
/// is slow.
pub const MOST_WRITES_OUT: u32 = 3;

/// The code a write that did not answer in time is reported with.
pub const TIMEOUT: &str = "TimeoutError";

/// The code DynamoDB answers a write to a table that does not exist with: the table was
/// deleted, or the engine behind it restarted without its data. The item is gone with it, and
/// a rival may hold the lock as soon as the table is back: a loss at once, like a refusal.
pub const TABLE_GONE: &str = "ResourceNotFoundException";

/// The shortest pause between attempts, and between writes of one attempt.
const LEAST_PAUSE: Duration = Duration::from_millis(10);

/// What a heartbeat needs to know of its lock's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub lease: Duration,
    pub period: Duration,
    pub danger_margin: Duration,
    /// Longest wait for the writes of one attempt before it counts as failed.
    pub request_timeout: Duration,
    /// How late the caller's timers may fire: the loss is declared that much early.
    pub timer_grain: Duration,
    /// Writes of one attempt out at once (`MOST_WRITES_OUT`, or 1 where a write beside a slow
    /// one would be refused once the first landed).
    pub writes_out: u32,
    /// The pause before a failed attempt is tried again, before jitter: the first, and the
    /// longest it doubles to (the client's request retries', `request::backoff`).
    pub base_backoff: Duration,
    pub max_backoff: Duration,
}

impl Config {
    /// What a held lock's heartbeat reads of its lock's settings `s` (a lock without heartbeats:
    /// a zero period), where timers fire up to `timer_grain` late and at most `writes_out`
    /// writes of one heartbeat are out at once.
    pub fn of(s: &Lock, timer_grain: Duration, writes_out: u32) -> Config {
        Config {
            lease: s.lease(),
            period: s.heartbeat_period,
            danger_margin: s.danger_margin,
            request_timeout: s.request_timeout,
            timer_grain,
            writes_out,
            base_backoff: s.base_backoff,
            max_backoff: s.max_backoff,
        }
    }

    /// The pause before attempt `n` of a heartbeat, drawn with `random`.
    pub fn retry_pause(&self, n: u32, random: u64) -> Duration {
        crate::request::backoff(self.base_backoff, self.max_backoff, n, random)
    }
}

/// How a write was answered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The item carries the new `guid`.
    Renewed,
    /// The condition failed: the item carries neither `guid` of this lock.
    NotOurs,
    /// Any other failure; `transient` if a retry may mend it (throttling, 5xx, a dropped
    /// connection, a timeout).
    Failed { code: String, transient: bool },
}

/// Why a lock was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// No heartbeat renewed the lease in time.
    Lapsed,
    /// Another holder took the lock.
    NotOurs,
}

/// A failed heartbeat write or attempt. `report`: emit an `"error"` event for it (the
/// answer's error, or a timeout when the step was a timer). `at_risk`: the lease is at risk,
/// since no retry mends the failure or the lease is down to where `"danger"` is told;
/// `remaining`: what is left of the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Failure {
    pub report: bool,
    pub at_risk: bool,
    pub remaining: Duration,
}

/// What the caller does after a step, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send a write of the new `guid` (the attempt's first, or one beside a slow one).
    Write,
    /// Drop every write of this heartbeat still out.
    Abandon,
    /// A write or an attempt failed (count it).
    Failed(Failure),
    /// Emit `"danger"`: this much of the lease is left.
    Danger { remaining: Duration },
    /// The item carries the new `guid` now: it is the lock's own.
    Landed,
    /// The lease runs until `until`; the next heartbeat is due at `next`. The heartbeat is over.
    Renewed { until: Time, next: Time },
    /// The lock is lost. The heartbeat is over.
    Lost(Loss),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Writes are out: the attempt gives up at `gives_up_at`; another write may go out at
    /// `next_write`; the attempt is reported slow at `slow_at` (unless `slow_told`).
    Writing {
        out: u32,
        next_write: Time,
        hedge: Duration,
        slow_at: Time,
        slow_told: bool,
        gives_up_at: Time,
    },
    /// Between attempts, until `until`.
    Pausing {
        until: Time,
    },
    Done,
}

/// One heartbeat of one lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Beat {
    config: Config,
    /// When this heartbeat was due, and when its first write was sent.
    due: Time,
    started: Time,
    /// The end of the lease as it stood when the heartbeat started.
    until: Time,
    danger_at: Time,
    danger_told: bool,
    /// Attempts started.
    attempts: u32,
    /// The cause and time of the last `"error"` reported.
    told: Option<(String, Time)>,
    phase: Phase,
}

/// When the next heartbeat of a lock whose lease ends at `until` is due, if a period would
/// make it `next`: never past the moment the loss is declared, so that the loss is watched
/// between heartbeats too, whatever the period.
pub fn due(config: &Config, next: Time, until: Time) -> Time {
    if broken::on(Broken::LossUnwatchedBetweenBeats) {
        return next;
    }
    next.min(lost_at(config, until))
}

/// When the first heartbeat of a lock is due, counted from when the write that took it was
/// sent (its lease counts from then too, and ends at `until`): at a point of the period that
/// `random` picks, so that locks taken together renew spread evenly over the period, and
/// never past the loss moment (`due`).
pub fn first_due(config: &Config, random: u64, until: Time) -> Time {
    let micros = config.period.as_micros().clamp(1, u128::from(u64::MAX)) as u64;
    let offset = Duration::from_micros(1 + random % micros);
    due(config, offset, until)
}

/// When the scheduler first steps a held lock whose lease ends at `until` (both times counted
/// from when the write that took it was sent): at its first heartbeat (`first_due`), or, for
/// a lock without heartbeats (`beats` false), at the moment its loss is declared.
pub fn first_step(config: &Config, beats: bool, random: u64, until: Time) -> Time {
    if beats {
        first_due(config, random, until)
    } else {
        lost_at(config, until)
    }
}

/// Whether a lock without heartbeats, stepped at `now`, has lost its lease ending at `until`:
/// from the moment `first_step` gives on.
pub fn lapsed(config: &Config, now: Time, until: Time) -> bool {
    lapsed_by(config.timer_grain, now, until)
}

/// Whether a lease that ends at `until` counts as lost at `now`, for a runtime whose timers
/// fire within `timer_grain`: from a grain before its end on, as the heartbeat declares it.
/// Whatever else asks whether a lease still lasts (a session a lock is held through) asks
/// this, so that it never says alive where the heartbeat says lost.
pub fn lapsed_by(timer_grain: Duration, now: Time, until: Time) -> bool {
    now >= loss_moment(timer_grain, until)
}

/// The moment the loss of a lease that ends at `until` is declared, for a runtime whose
/// timers fire within `timer_grain`: a grain early. A lock whose heartbeats stopped (its client
/// closed) is reported lost then too.
pub fn loss_moment(timer_grain: Duration, until: Time) -> Time {
    until.checked_sub(timer_grain).unwrap_or(until)
}

/// The moment the loss of a lease that ends at `until` is declared.
fn lost_at(config: &Config, until: Time) -> Time {
    loss_moment(config.timer_grain, until)
}

impl Beat {
    /// Starts the heartbeat due at `due` of a lock whose lease ends at `until`. `round_trip`
    /// is the usual round trip of heartbeat writes (zero if none is known yet).
    pub fn start(config: Config, due: Time, until: Time, now: Time, round_trip: Duration) -> (Beat, Vec<Action>) {
        let danger_at = until
            .checked_sub(config.danger_margin)
            .unwrap_or(now)
            .max(now + until.saturating_sub(now) / 2);
        let mut beat = Beat {
            config,
            due,
            started: now,
            until,
            danger_at,
            danger_told: false,
            attempts: 0,
            told: None,
            phase: Phase::Done,
        };
        let mut actions = Vec::new();
        // A heartbeat due at the loss moment is the loss (`due`): it writes nothing, even when
        // the caller starts it a little early to share a wake-up with others.
        if now.max(due) >= beat.lost_at() {
            beat.lose(Loss::Lapsed, &mut actions);
        } else {
            beat.attempt(now, round_trip, &mut actions);
        }
        (beat, actions)
    }

    /// The moment the loss is declared: the end of the lease, a timer grain early.
    pub fn lost_at(&self) -> Time {
        lost_at(&self.config, self.until)
    }

    /// Whether the heartbeat is over (renewed or lost).
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// When the machine must be stepped (`timer`) if nothing answers before; `None` once done.
    pub fn poll_timeout(&self) -> Option<Time> {
        let own = match self.phase {
            Phase::Done => return None,
            Phase::Pausing { until } => until,
            Phase::Writing {
                out,
                next_write,
                slow_at,
                slow_told,
                gives_up_at,
                ..
            } => {
                let mut at = gives_up_at;
                if out < self.config.writes_out {
                    at = at.min(next_write);
                }
                if !slow_told {
                    at = at.min(slow_at);
                }
                at
            }
        };
        Some(own.min(self.urgent()))
    }

    /// The earliest moment at which this heartbeat must report something whatever happens
    /// (danger or loss): a caller that pauses for answers must not pause past it.
    pub fn urgent(&self) -> Time {
        let lost = if broken::on(Broken::LostAfterDeadline) {
            Time::MAX
        } else {
            self.lost_at()
        };
        if self.danger_told {
            lost
        } else {
            self.danger_at.min(lost)
        }
    }

    /// A timer fired: `now` is at or after `poll_timeout`. `backoff` is the pause the caller
    /// would make before another attempt (its jitter is the caller's).
    pub fn timer(&mut self, now: Time, backoff: Duration, round_trip: Duration) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.phase == Phase::Done {
            return actions;
        }
        if now >= self.lost_at() && !broken::on(Broken::LostAfterDeadline) {
            actions.push(Action::Abandon);
            self.lose(Loss::Lapsed, &mut actions);
            return actions;
        }
        self.maybe_danger(now, &mut actions);
        match self.phase {
            Phase::Writing { gives_up_at, .. } if now >= gives_up_at => {
                actions.push(Action::Abandon);
                self.failed(now, TIMEOUT.to_string(), true, backoff, &mut actions);
            }
            Phase::Writing {
                slow_at,
                slow_told: false,
                ..
            } if now >= slow_at => {
                if let Phase::Writing { slow_told, .. } = &mut self.phase {
                    *slow_told = true;
                }
                let failure = self.failure(now, TIMEOUT, true);
                actions.push(failure);
            }
            Phase::Writing {
                out, next_write, hedge, ..
            } if out < self.config.writes_out && now >= next_write => {
                if let Phase::Writing { out, next_write, .. } = &mut self.phase {
                    *out += 1;
                    *next_write = now + hedge;
                }
                actions.push(Action::Write);
            }
            Phase::Pausing { until } if now >= until => {
                if now >= self.lost_at() {
                    // Reached only when the loss is decided when an attempt starts
                    // (`LostAfterDeadline`).
                    self.lose(Loss::Lapsed, &mut actions);
                } else {
                    self.attempt(now, round_trip, &mut actions);
                }
            }
            _ => {}
        }
        actions
    }

    /// A write was not sent after all (no connection was free for it).
    pub fn write_not_sent(&mut self) {
        if let Phase::Writing { out, .. } = &mut self.phase {
            *out = out.saturating_sub(1);
        }
    }

    /// A write was answered at `now`. The first answer of an attempt counts; the attempt's
    /// other writes are dropped. `backoff` as for `timer`.
    pub fn answer(&mut self, now: Time, answer: Answer, backoff: Duration) -> Vec<Action> {
        let mut actions = Vec::new();
        if !matches!(self.phase, Phase::Writing { .. }) {
            return actions;
        }
        actions.push(Action::Abandon);
        let late = now >= self.lost_at() && !broken::on(Broken::LateReplyExtends);
        match answer {
            Answer::Renewed => {
                actions.push(Action::Landed);
                if late {
                    self.lose(Loss::Lapsed, &mut actions);
                } else {
                    let until = self.started + self.config.lease;
                    let next = (self.due.max(self.started) + self.config.period).max(now);
                    actions.push(Action::Renewed {
                        until,
                        next: due(&self.config, next, until),
                    });
                    self.phase = Phase::Done;
                }
            }
            _ if late => self.lose(Loss::Lapsed, &mut actions),
            Answer::NotOurs => {
                actions.push(Action::Failed(Failure {
                    report: true,
                    at_risk: true,
                    remaining: self.until.saturating_sub(now),
                }));
                self.lose(Loss::NotOurs, &mut actions);
            }
            Answer::Failed { code, .. } if code == TABLE_GONE => {
                let failure = self.failure(now, &code, false);
                actions.push(failure);
                self.lose(Loss::NotOurs, &mut actions);
            }
            Answer::Failed { code, transient } => self.failed(now, code, transient, backoff, &mut actions),
        }
        actions
    }

    /// Starts an attempt: its first write.
    fn attempt(&mut self, now: Time, round_trip: Duration, actions: &mut Vec<Action>) {
        self.attempts += 1;
        let remaining = self.until.saturating_sub(now);
        let hedge = self
            .config
            .period
            .max(2 * round_trip)
            .max(remaining / 2)
            .max(LEAST_PAUSE);
        let gives_up_at = now + self.config.request_timeout.min(remaining);
        let slow_at = now + (remaining / 2).max(self.config.period);
        self.phase = Phase::Writing {
            out: 1,
            next_write: now + hedge,
            hedge,
            slow_at,
            // A slow report at the moment the attempt gives up would say the same twice.
            slow_told: slow_at >= gives_up_at,
            gives_up_at,
        };
        actions.push(Action::Write);
    }

    /// An attempt failed: report it (once per period for one cause) and pause before the
    /// next, or until the lease ends if no retry can mend it.
    fn failed(&mut self, now: Time, code: String, transient: bool, backoff: Duration, actions: &mut Vec<Action>) {
        let failure = self.failure(now, &code, transient);
        actions.push(failure);
        self.maybe_danger(now, actions);
        let remaining = self.until.saturating_sub(now);
        let until = if transient {
            now + backoff.min((remaining / 4).max(LEAST_PAUSE))
        } else {
            self.until
        };
        self.phase = Phase::Pausing { until };
    }

    /// A failure with `code` at `now`: reported unless it repeats within a period; the lease
    /// at risk unless a retry may mend it (`mendable`) and `"danger"` is not yet due.
    fn failure(&mut self, now: Time, code: &str, mendable: bool) -> Action {
        Action::Failed(Failure {
            report: self.tell(now, code),
            at_risk: !mendable || now >= self.danger_at,
            remaining: self.until.saturating_sub(now),
        })
    }

    /// Whether an error with `code` is to be reported now.
    fn tell(&mut self, now: Time, code: &str) -> bool {
        let repeated = self
            .told
            .as_ref()
            .is_some_and(|(c, at)| c == code && now < *at + self.config.period);
        if !repeated {
            self.told = Some((code.to_string(), now));
        }
        !repeated
    }

    fn maybe_danger(&mut self, now: Time, actions: &mut Vec<Action>) {
        if !self.danger_told && now >= self.danger_at {
            self.danger_told = true;
            actions.push(Action::Danger {
                remaining: self.until.saturating_sub(now),
            });
        }
    }

    fn lose(&mut self, loss: Loss, actions: &mut Vec<Action>) {
        self.phase = Phase::Done;
        actions.push(Action::Lost(loss));
    }

    /// How many attempts this heartbeat has started.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{beat_config, ms};

    #[test]
    fn a_heartbeat_reads_the_locks_lease_period_margin_timeouts_and_backoff() {
        let s = crate::testing::lock(crate::settings::Kind::FailOpen);
        let expected = Config {
            danger_margin: s.danger_margin,
            request_timeout: s.request_timeout,
            base_backoff: s.base_backoff,
            max_backoff: s.max_backoff,
            writes_out: 2,
            ..beat_config(300)
        };
        assert_eq!(Config::of(&s, ms(1), 2), expected);
    }

    #[test]
    fn the_first_heartbeat_falls_within_the_period_and_before_the_loss() {
        let c = beat_config(250);
        let spread: Vec<Time> = (0..1000u64).map(|r| first_due(&c, r * 7919, ms(1000))).collect();
        assert!(
            spread.iter().all(|d| *d > Duration::ZERO && *d <= c.period),
            "{spread:?}"
        );
        assert!(
            spread.iter().any(|d| *d < ms(50)) && spread.iter().any(|d| *d > ms(200)),
            "spread over the period"
        );
        // A period longer than the lease: due at the loss moment at the latest.
        let long = Config { period: ms(1500), ..c };
        assert!((0..1000u64).all(|r| first_due(&long, r * 7919, ms(1000)) <= ms(999)));
    }

    #[test]
    fn a_lock_without_heartbeats_is_stepped_once_its_loss_is_due() {
        let c = beat_config(250);
        assert_eq!(first_step(&c, false, 12345, ms(1000)), ms(999), "a timer grain early");
        assert!(first_step(&c, true, 12345, ms(1000)) <= c.period);
        assert!(!lapsed(&c, ms(998), ms(1000)));
        assert!(lapsed(&c, ms(999), ms(1000)));
    }

    #[test]
    fn an_answer_in_time_renews_from_the_send() {
        let (mut b, a) = Beat::start(beat_config(250), ms(250), ms(1000), ms(260), Duration::ZERO);
        assert_eq!(a, vec![Action::Write]);
        let a = b.answer(ms(460), Answer::Renewed, ms(25));
        assert_eq!(
            a,
            vec![
                Action::Abandon,
                Action::Landed,
                Action::Renewed {
                    until: ms(1260),
                    next: ms(510)
                }
            ]
        );
    }

    #[test]
    fn a_missing_table_is_a_loss_at_once_not_at_the_end_of_the_lease() {
        let gone = Answer::Failed {
            code: TABLE_GONE.into(),
            transient: false,
        };
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        let a = b.answer(ms(260), gone, ms(10));
        assert_eq!(
            a,
            vec![
                Action::Abandon,
                Action::Failed(Failure {
                    report: true,
                    at_risk: true,
                    remaining: ms(740)
                }),
                Action::Lost(Loss::NotOurs)
            ]
        );
        assert!(b.is_done());
        // Any other error no retry can mend waits for the lease's end, as before.
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        let denied = Answer::Failed {
            code: "AccessDeniedException".into(),
            transient: false,
        };
        let a = b.answer(ms(260), denied, ms(10));
        assert!(!a.iter().any(|a| matches!(a, Action::Lost(_))), "{a:?}");
        assert!(!b.is_done());
        assert_eq!(b.lost_at(), ms(999));
    }

    #[test]
    fn a_failure_puts_the_lease_at_risk_when_no_retry_mends_it_or_danger_is_due() {
        let failed = |transient| Answer::Failed {
            code: "X".into(),
            transient,
        };
        let risk = |a: &[Action]| {
            a.iter().find_map(|a| match a {
                Action::Failed(Failure { at_risk, remaining, .. }) => Some((*at_risk, *remaining)),
                _ => None,
            })
        };
        // Danger is due at 667 (the lease ends at 1000, the margin is 333).
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        assert_eq!(risk(&b.answer(ms(300), failed(true), ms(10))), Some((false, ms(700))));
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        assert_eq!(risk(&b.answer(ms(300), failed(false), ms(10))), Some((true, ms(700))));
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        let a = b.answer(ms(700), failed(true), ms(10));
        assert_eq!(risk(&a), Some((true, ms(300))));
        assert!(a.iter().any(|a| matches!(a, Action::Danger { .. })), "{a:?}");
    }

    #[test]
    fn an_answer_after_the_deadline_grants_nothing() {
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        let a = b.answer(ms(3000), Answer::Renewed, ms(25));
        assert_eq!(a, vec![Action::Abandon, Action::Landed, Action::Lost(Loss::Lapsed)]);
    }

    #[test]
    fn the_loss_is_due_at_the_deadline_whatever_is_under_way() {
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        let mut now = ms(250);
        let mut seen = Vec::new();
        while let Some(at) = b.poll_timeout() {
            assert!(at >= now);
            now = at;
            seen.extend(b.timer(now, ms(25), Duration::ZERO));
        }
        assert_eq!(now, ms(999), "stepped at the deadline, a grain early");
        assert_eq!(seen.last(), Some(&Action::Lost(Loss::Lapsed)));
        let danger = seen.iter().position(|a| matches!(a, Action::Danger { .. }));
        assert!(danger.is_some(), "{seen:?}");
        assert!(
            seen.iter()
                .any(|a| matches!(a, Action::Failed(Failure { report: true, .. }))),
            "a slow write is reported"
        );
        assert!(
            seen.iter().filter(|a| **a == Action::Write).count() >= 1,
            "a write beside the slow one: {seen:?}"
        );
    }

    #[test]
    fn with_one_write_out_a_slow_write_gets_none_beside_it() {
        let writes = |writes_out| {
            let c = Config {
                writes_out,
                ..beat_config(250)
            };
            let (mut b, first) = Beat::start(c, ms(250), ms(1000), ms(250), Duration::ZERO);
            let mut seen = first;
            // No answer comes until the attempt gives up (the lease's end).
            while let Some(at) = b.poll_timeout() {
                seen.extend(b.timer(at, ms(25), Duration::ZERO));
            }
            seen.iter().filter(|a| **a == Action::Write).count()
        };
        assert_eq!(writes(1), 1, "the first write alone");
        assert!(writes(MOST_WRITES_OUT) > 1, "writes beside the slow one");
    }

    #[test]
    fn a_slow_answer_still_counts() {
        let (mut b, _) = Beat::start(beat_config(250), ms(250), ms(1000), ms(250), Duration::ZERO);
        let a = b.timer(ms(625), ms(25), Duration::ZERO);
        assert_eq!(
            a,
            vec![Action::Failed(Failure {
                report: true,
                at_risk: false,
                remaining: ms(375)
            })]
        );
        let a = b.answer(ms(900), Answer::Renewed, ms(25));
        assert!(a.contains(&Action::Renewed {
            until: ms(1250),
            next: ms(900)
        }));
    }
}
