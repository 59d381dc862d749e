//! Sessions: client 0 holds locks A and B through its session S, and rivals in other processes
//! wait for them. Every client step is the core's machine itself, stepped as the addon's
//! driver steps it (`machines.rs`), over the core's `op::apply` on three items (A, B and S's
//! own, `item::session_key`):
//! - client 0 takes S with a plain FailOpen take (`fail_open::Acquire`), heartbeats it with the
//!   core's `heartbeat::Beat` (its `guid`s kept by `held::Held`), as the addon's scheduler
//!   does; then takes A, then B, through S (`lockSession` written, `leaseDurationMs` the
//!   session lock's); S and each lock are locks of client 0's machine (`client::Client`, as
//!   in the addon), and each lock joins S and is held while S lasts, as that machine says:
//!   while S's lease lasts on its
//!   own clock (from the send of the last successful write of S), and not once the heartbeat
//!   declares S lost (a take answered once S no longer lasts is given back at once, as the
//!   addon's acquisition gives it back: `fail_open::Acquire::give_back`); at any
//!   time it lets go of one thing at a time (`ending::Ending`): A, then B, then S once no lock
//!   is left (a release of S waits for a heartbeat write on the wire, as the addon's does);
//!   with `handover`, a second acquisition of A waits in client 0's line (its machine's), and
//!   the first release of A hands the lock to it within S (`client::Client::ending` and
//!   `ending::Ending`, as the addon's release does when its line has a waiter); the waiter
//!   may give up at any moment
//!   (the ending then releases the lock under the `guid` it wrote), and holds the lock through
//!   S only if it joins S when the hand-over is known (else it releases it at once);
//! - with `close`, client 0 may instead close once its acquisitions are over, without
//!   releasing: its machine ends and abandons S, then abandons A and B
//!   (`client::Client::close`, as the addon's `close()` does), and client 0 believes it holds
//!   each until its machine, stepped at its next lapse (`Client::lapse`), declares it lost;
//! - a rival per lock (client 1 for A, client 2 for B), started once client 0's acquisitions
//!   are over, is a FailOpen acquisition that keeps trying (`fail_open::Acquire`): refused by
//!   a lock held through S, it reads S, waits out a whole session lease, ends S, and takes the
//!   lock; it holds the lock a lease from its winning write's send, and releases it at any
//!   time.
//!
//! The environment (`env.rs`): requests are lost before they land, land and lose their
//! answer, are throttled or slower than their timeout; clients crash, a request on its way
//! landing or not. A heartbeat write of S may be lost, land late, be answered late, or be given
//! up on (or outlive its crashed client) and still land any time later: after a rival ended S,
//! or after client 0 released it.
//!
//! Properties, per lock: mutual exclusion, fencing, no lost release (of each lock and of S;
//! a waiter's end of S is a release of client 0's tenure too: S never becomes client 0's
//! again), and "a holder's loss is known no later than a rival's grant": when a rival is granted a
//! lock client 0 holds through S, client 0's heartbeat has declared S lost. As in the lease
//! model, the heartbeat's timers may fire a tick late (`timer_grain`), so the loss is declared
//! a tick before the lease's end.

use std::fmt;
use std::time::Duration;

use dynamodb_lock_core::broken::{self, Broken};
use dynamodb_lock_core::client::{self, Id};
use dynamodb_lock_core::ending::{self, End, Ending};
use dynamodb_lock_core::fail_open;
use dynamodb_lock_core::force::{self, Force};
use dynamodb_lock_core::heartbeat;
use dynamodb_lock_core::held;
use dynamodb_lock_core::hold::Hold;
use dynamodb_lock_core::item::SESSION_LOCK_LEASE_MS;
use dynamodb_lock_core::local::{Place, Waiter};
use dynamodb_lock_core::op as core_op;
use dynamodb_lock_core::request::{answer_of, Machine, Req, Step, Time};
use dynamodb_lock_core::settings::{Kind, Lock};

use crate::beats::{BeatEvent, Beats, LOCK};
use crate::env::{self, ms, tick, Ans, Clients, Event, Fail, Left, Tick};
use crate::explore::{self, Checked, Model, Violation};
use crate::item::{small, Item, Ver, G, SESSIONS};
use crate::lease::PROPERTY as LOSS;
use crate::machines::{new_guid, MStep, Out, Sent, M};
use dynamodb_lock_core::work::Task;

/// The properties checked.
pub const PROPERTIES: [&str; 4] = ["mutual exclusion", "fencing", "no lost release", LOSS];

/// The items: locks A and B, and client 0's session S.
pub const A: usize = 0;
pub const B: usize = 1;
pub const S: usize = 2;

/// Client 0's slots (its session's machine, then its machine for A, then for B); the rivals'
/// slots follow (client 1's for A, client 2's for B).
const SESSION_SLOT: usize = 0;
const RIVAL_SLOT: usize = 3;

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The session's lease, and the rivals' own locks' lease.
    pub lease: Tick,
    /// The session's heartbeat period.
    pub period: Tick,
    pub reread: Tick,
    pub request_timeout: Tick,
    pub max_attempts: u32,
    /// Rivals: 1 (client 1 for A) or 2 (and client 2 for B).
    pub rivals: u8,
    /// Lost or throttled requests and answers, in all.
    pub faults: u8,
    pub crashes: u8,
    /// Heartbeats of S that write (after them, the heartbeat only watches for the loss).
    pub beats: u8,
    /// A second acquisition of A by client 0 waits in its local line from the start: the
    /// release of A hands the lock over to it within S (`ending::Ending` with a next `guid`),
    /// and it may give up at any moment.
    pub handover: bool,
    /// Client 0 may close once its acquisitions are over, without releasing its locks: the
    /// locks held through S and S itself are abandoned (`client::Client::close`), write
    /// nothing more, and are each lost at the loss moment of S's lease, when the client
    /// machine steps them; until then client 0 believes it holds them.
    pub close: bool,
    /// An operator revokes lock A once, at any moment A's item is held through a session,
    /// through the core's machine for `forceRelease` (`force::Force`): it reads A's item and
    /// S's, names A's `guid` on S's item (`op::Op::MarkRevoked`; refused once S has ended, when
    /// it gives up), then revokes the lock on the version read (`op::Op::Revoke`: a new
    /// `guid`, out of the session, with S's lease, which a rival waits out). A session found
    /// ended frees the lock instead. Each write lands with the reads before it, at once.
    /// Client 0 hears it when S's next renewal reads the name back
    /// (`client::Client::revoke`).
    pub revoke: bool,
    /// Ticks between one of the operator's writes and the next (its link is slow, or its
    /// process stalls): the next one lands no earlier.
    pub operator_delay: Tick,
    /// Client 0 never lets go of lock A (the simulator's runs with a revocation, in which a
    /// rival must wait out the revoked lease while client 0 still holds A).
    pub keeps_a: bool,
    /// Time ends here.
    pub horizon: Tick,
    pub bug: Option<Broken>,
}

impl Config {
    /// One rival; a fault, a crash and two heartbeats that write, over 14 ticks.
    pub const DEFAULT: Config = Config {
        lease: 4,
        period: 2,
        reread: 2,
        request_timeout: 2,
        max_attempts: 2,
        rivals: 1,
        faults: 1,
        crashes: 1,
        beats: 2,
        handover: false,
        close: false,
        revoke: false,
        keeps_a: false,
        operator_delay: 0,
        horizon: 14,
        bug: None,
    };

    fn lock(&self, retry_count: u32) -> Lock {
        let c = self;
        Lock {
            retry_count,
            heartbeat_period: ms(self.period),
            ..env::lock(Kind::FailOpen, c.lease, c.reread, c.request_timeout, c.max_attempts)
        }
    }

    fn beat(&self) -> heartbeat::Config {
        // Timers may fire a tick late: the loss is declared a tick early.
        env::beat_config(self.lease, self.period, self.request_timeout, ms(1))
    }
}

pub type Net = env::Net<Sent>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Phase {
    /// Not started yet.
    #[default]
    Idle,
    Acquiring {
        g: G,
    },
    /// `until`: the end of the lease on the holder's clock (client 0's locks: unused, the
    /// session's decides).
    Holding {
        g: G,
        token: u8,
        until: Tick,
    },
    Releasing {
        g: G,
    },
    Done,
    Crashed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Slot {
    pub phase: Phase,
    pub machine: Option<M>,
    pub net: Option<Net>,
    pub wake: Option<Tick>,
    /// The release reported done: the first and last `guid` the item may carry for it.
    pub released: Option<(G, G)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: Tick,
    pub items: [Option<Item>; 3],
    pub slots: Vec<Slot>,
    pub hb: Option<Box<Beats>>,
    /// A heartbeat write of S given up on (or outliving client 0): it may still land.
    pub stray: Option<([G; 2], G)>,
    /// Client 0's `guid`s so far.
    pub seq: u8,
    pub left: Left,
    /// The token of the last grant of each lock (history, for fencing).
    pub last_token: [u8; 2],
    /// A waiter's end of S landed (history: S must stay ended).
    pub ended: bool,
    /// Client 0's second acquisition of A waits for its turn (`Config::handover`): its task,
    /// as the addon's waiting task is.
    pub waiting: bool,
    /// Its place in client 0's line (`client::Client`'s), once client 0's machine is there.
    pub waiter: Option<Waiter>,
    /// Client 0 closed without releasing its locks (`Config::close`).
    pub closed: bool,
    /// The operator's revocation of A (`Config::revoke`).
    pub operator: Operator,
}

/// How far the operator's revocation of A has come.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Operator {
    #[default]
    Idle,
    /// The core's forced release (`force::Force`), whose request out lands no earlier than
    /// the tick given.
    Forcing(Box<(Force<Item>, Tick)>),
    Done,
}

/// The `guid` an operator's revocation writes: no client's.
const OPERATOR_GUID: G = 0xf0;

/// The operator's inputs at tick `now`. Its wall clock reads 0: the times it writes (the
/// revocation's, and the acquisition time a revocation sets) are read by nobody in this model
/// (its rivals do not trust the holder's clock), and a time carried by a write from the moment
/// it was decided to the moment it lands would only tell apart states that behave alike.
fn operator_env(now: Tick) -> dynamodb_lock_core::request::Env {
    dynamodb_lock_core::request::Env {
        unix_ms: 0,
        ..env::at(now)
    }
}

/// Where the operator's forced release is after `step`: a request out, or over (no request of
/// the operator fails, so that it never waits).
fn forcing(m: Force<Item>, step: Step<G, Ver, force::Out<Fail>>, at: Tick) -> Operator {
    match step {
        Step::Send { .. } => Operator::Forcing(Box::new((m, at))),
        Step::Done(_) => Operator::Done,
        Step::Wait { .. } => unreachable!("the operator's requests never fail"),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A rival starts acquiring.
    Start(u8),
    Event(u8, Event),
    Release(u8),
    /// Client 0's acquisition of A waiting in its line gives up.
    GiveUp,
    /// Client 0 closes without releasing its locks.
    Close,
    /// Client 0's machine steps an abandoned lock held through S at its loss moment.
    Lapse,
    /// The operator reads A's item and forces its release (`forceRelease`), to its first
    /// write.
    Force,
    /// The operator's next write lands on the item it names, and is answered.
    Operate,
    /// The operator's process dies before its next write (one of the crashes).
    OperatorCrash,
    Beat(BeatEvent),
    StrayLand,
    StrayGone,
    Tick,
}

fn slot_name(i: u8) -> &'static str {
    [
        "c0's session S",
        "c0's lock A",
        "c0's lock B",
        "c1 (lock A)",
        "c2 (lock B)",
    ][i as usize]
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Start(i) => write!(f, "{} starts acquiring", slot_name(*i)),
            Action::Event(i, e) => {
                write!(f, "{}: ", slot_name(*i))?;
                e.describe(owner(*i as usize) as u8, f)
            }
            Action::Release(i) => write!(f, "{}: release()", slot_name(*i)),
            Action::GiveUp => write!(f, "c0's next acquisition of A, waiting in line, gives up"),
            Action::Close => write!(f, "c0 closes without releasing its locks"),
            Action::Lapse => write!(f, "c0's machine steps its abandoned locks"),
            Action::Force => write!(
                f,
                "an operator reads lock A's item and forces its release, to its first write"
            ),
            Action::Operate => write!(f, "the operator's next write lands"),
            Action::OperatorCrash => write!(f, "the operator's process dies before its next write"),
            Action::Beat(BeatEvent::Due) => write!(f, "S's heartbeat is due"),
            Action::Beat(BeatEvent::Land) => write!(f, "S's heartbeat write lands"),
            Action::Beat(BeatEvent::Answer) => write!(f, "c0 gets S's heartbeat answer"),
            Action::Beat(BeatEvent::Lose) => write!(f, "S's heartbeat write or its answer is lost"),
            Action::StrayLand => write!(f, "S's abandoned heartbeat write lands late"),
            Action::StrayGone => write!(f, "S's abandoned heartbeat write never lands"),
            Action::Tick => write!(f, "tick"),
        }
    }
}

/// The client of slot `i`.
fn owner(i: usize) -> usize {
    if i < RIVAL_SLOT {
        0
    } else {
        i - RIVAL_SLOT + 1
    }
}

/// The client a `guid` is of (client 0's are below 16).
fn owner_of(g: G) -> Option<usize> {
    (g != 0).then_some(usize::from(g / 16))
}

/// The item slot `i`'s machine works on.
fn home(i: usize) -> usize {
    match i {
        0 => S,
        1 | 3 => A,
        _ => B,
    }
}

pub struct Sessions {
    pub cfg: Config,
}

impl Sessions {
    pub fn new(cfg: Config) -> Sessions {
        assert!((1..=2).contains(&cfg.rivals));
        Sessions { cfg }
    }

    fn step(&self, s: &mut State, i: usize, step: MStep) -> Result<(), Violation> {
        let c = &mut s.slots[i];
        match env::carry(step, s.now, &mut c.net, &mut c.wake, Sent::timed) {
            env::Carried::Answer(a) => self.deliver(s, i, a),
            env::Carried::Set => Ok(()),
            env::Carried::Done(out) => {
                let m = s.slots[i].machine.take();
                self.ended(s, i, out, m)
            }
        }
    }

    /// Slot `i` starts acquiring.
    fn start(&self, s: &mut State, i: usize) -> Result<(), Violation> {
        let env = env::at(s.now);
        let g = if owner(i) == 0 {
            new_guid(&mut s.seq, 0)
        } else {
            owner(i) as G * 16 + 1
        };
        // Client 0 tries once; the rivals keep trying.
        let retry = if owner(i) == 0 { 0 } else { u32::MAX };
        let (m, step) = Task::open(fail_open::Acquire::start(self.cfg.lock(retry), g, None, &env));
        let c = &mut s.slots[i];
        c.phase = Phase::Acquiring { g };
        c.machine = Some(m);
        self.step(s, i, step)
    }

    /// The end of S's lease, while client 0 holds S.
    fn s_until(s: &State) -> Option<Tick> {
        match s.slots[SESSION_SLOT].phase {
            Phase::Holding { until, .. } => Some(until),
            _ => None,
        }
    }

    /// The session still speaks for its locks, as client 0's machine says
    /// (`client::Client::lasts`: its loss is not declared, and its lease has not lapsed as the
    /// heartbeat counts it): until when its lease lasts.
    fn session_until(&self, s: &State) -> Option<Tick> {
        let until = Self::s_until(s)?;
        s.hb.as_ref()
            .is_some_and(|h| h.client.lasts(LOCK, ms(s.now)))
            .then_some(until)
    }

    /// Slot `i`'s lock, taken or handed over under `g`, is lock `i` of client 0's machine
    /// and joins S (`client::Client::join`); `false`: S does not last, and the lock is lost
    /// already. A lock without a lease of its own is never stepped: its hold is made at time
    /// zero, so that its joining time makes no state of its own.
    fn join(&self, s: &mut State, i: usize, g: G) -> bool {
        let now = ms(s.now);
        let Some(h) = s.hb.as_mut() else { return false };
        h.client.remove(i as Id);
        let hold = Hold::new(self.cfg.beat(), false, g, None, Time::ZERO, 0);
        h.client.taken(i as Id, home(i) as u8, hold, Time::ZERO);
        h.client.line_holds(i as Id);
        h.client.join(i as Id, LOCK, now)
    }

    /// Client 0's next lock, if any, is acquired through S while S lasts; otherwise none is.
    fn next_lock(&self, s: &mut State) -> Result<(), Violation> {
        let Some(i) = (1..=2).find(|&i| s.slots[i].phase == Phase::Idle) else {
            return Ok(());
        };
        if self.session_until(s).is_some() {
            self.start(s, i)
        } else {
            s.slots[1..=2]
                .iter_mut()
                .filter(|c| c.phase == Phase::Idle)
                .for_each(|c| c.phase = Phase::Done);
            Ok(())
        }
    }

    /// Slot `i`'s machine `m` ended with `out`.
    fn ended(&self, s: &mut State, i: usize, out: Out, m: Option<M>) -> Result<(), Violation> {
        match (s.slots[i].phase, out) {
            (
                Phase::Releasing { .. },
                Out::End {
                    outcome:
                        ending::Outcome::Handed {
                            guid, fencing_token, ..
                        },
                    ..
                },
            ) => {
                let Some(Task::End(m)) = m else {
                    unreachable!("a hand-over ends an ending")
                };
                self.handed(s, i, guid, fencing_token, *m)
            }
            // A take through S known once S no longer lasts (`client::Client::lasts`): as the
            // addon's FailOpen acquisition does, its machine gives the lock back at once
            // (`fail_open::Acquire::give_back`), and the acquisition ends as expired.
            (Phase::Acquiring { .. }, Out::Open(fail_open::Outcome::Taken { .. }))
                if matches!(i, 1 | 2) && self.session_until(s).is_none() =>
            {
                let Some(mut m) = m else {
                    unreachable!("a take ends a FailOpen acquisition")
                };
                let step = m
                    .give_back(&env::at(s.now))
                    .expect("a take ends a FailOpen acquisition");
                s.slots[i].machine = Some(m);
                self.step(s, i, step)
            }
            (
                Phase::Acquiring { g },
                Out::Open(fail_open::Outcome::Taken {
                    fencing_token, sent_at, ..
                }),
            ) => self.taken(s, i, g, small(fencing_token), sent_at),
            (Phase::Acquiring { .. }, _) => {
                s.slots[i].phase = Phase::Done;
                match i {
                    SESSION_SLOT => {
                        s.slots[1..=2].iter_mut().for_each(|c| c.phase = Phase::Done);
                        Ok(())
                    }
                    1 | 2 => self.next_lock(s),
                    _ => Ok(()),
                }
            }
            (Phase::Releasing { g }, out) => {
                // The end of a lock of client 0 is its machine's (`client::Client::ended`).
                if let (Out::End { outcome: end, .. }, 1 | 2, Some(h)) = (&out, i, s.hb.as_mut()) {
                    h.client.ended(i as Id, end, false, Time::ZERO);
                }
                let c = &mut s.slots[i];
                c.phase = Phase::Done;
                if matches!(
                    out,
                    Out::End {
                        outcome: ending::Outcome::Released { .. },
                        ..
                    }
                ) {
                    // Every `guid` client 0 wrote since: a session's heartbeats, and a
                    // hand-over of A, rotate it.
                    let last = if i == SESSION_SLOT || (i == 1 && self.cfg.handover) {
                        s.seq
                    } else {
                        g
                    };
                    c.released = Some((g, last));
                }
                if i == SESSION_SLOT {
                    s.hb = None;
                } else if i < RIVAL_SLOT {
                    // The give-back of a lock granted too late: the next lock goes on.
                    return self.next_lock(s);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Slot `i`'s lock was handed over under `guid` to the next acquisition in client 0's
    /// line, by ending `m`. If that acquisition gave up meanwhile, the ending releases the
    /// lock, still ours under `guid` (`Ending::unclaimed`). Otherwise it holds the lock
    /// through S if it joins S (`client::Client::join`), and releases it at once if not.
    fn handed(
        &self,
        s: &mut State,
        i: usize,
        guid: G,
        token: Option<u64>,
        m: Ending<Item, Fail>,
    ) -> Result<(), Violation> {
        // The turn goes to the waiter still in client 0's line (`local::Local::next`); one whose
        // task gave up takes nothing, and the next one is asked.
        let h = s.hb.as_mut().expect("client 0's machine");
        let next = h.client.line_next(&(A as u8), Time::ZERO, true);
        if next.is_none() || next != s.waiter || !s.waiting {
            let env = env::at(s.now);
            let (m, step) = Task::end(m.unclaimed(guid, &env));
            s.slots[i].machine = Some(m);
            return self.step(s, i, step);
        }
        s.waiting = false;
        s.waiter = None;
        let token = small(token.expect("a FailOpen hand-over raises the token"));
        s.slots[i].phase = Phase::Holding {
            g: guid,
            token,
            until: 0,
        };
        let k = home(i);
        match self.join(s, i, guid) {
            true => {
                let until = Self::s_until(s).expect("S lasts");
                env::fencing(&mut s.last_token[k], 0, k as u8, token, until, s.now)
            }
            false => self.end(s, i, guid),
        }
    }

    /// Slot `i` took its item with `g` and `token`, its winning write sent at `sent_at`.
    fn taken(&self, s: &mut State, i: usize, g: G, token: u8, sent_at: Time) -> Result<(), Violation> {
        let own = tick(sent_at + ms(self.cfg.lease));
        // Client 0's locks last as long as S: their own end is not kept.
        let kept = if matches!(i, 1 | 2) { 0 } else { own };
        s.slots[i].phase = Phase::Holding { g, token, until: kept };
        match i {
            SESSION_SLOT => {
                let cfg = self.cfg.beat();
                let mut beats = Beats::new(cfg.timer_grain, self.cfg.lock(0).line_patience());
                // How long S was held decides nothing (`end_session`): its machine counts it
                // from time zero.
                beats.take(cfg, S as u8, g, Some(sent_at), ms(s.now), 0, self.cfg.beats);
                beats.client.open_session(LOCK);
                if s.waiting {
                    // Client 0's two acquisitions of A, in the order they were called: the
                    // first leads the line, the second waits in it.
                    let a = A as u8;
                    beats.client.line_join(&a, Time::ZERO);
                    if let Place::Queued(w) = beats.client.line_join(&a, Time::ZERO) {
                        s.waiter = Some(w);
                    }
                }
                s.hb = Some(Box::new(beats));
                self.next_lock(s)
            }
            1 | 2 => {
                // Held through S: while S's lease lasts, if it joins S.
                let k = home(i);
                let until = match self.join(s, i, g) {
                    true => Self::s_until(s).expect("S lasts"),
                    false => s.now,
                };
                env::fencing(&mut s.last_token[k], 0, k as u8, token, until, s.now)?;
                self.next_lock(s)
            }
            _ => {
                let k = home(i);
                env::fencing(&mut s.last_token[k], owner(i), k as u8, token, own, s.now)?;
                self.exclusion(s)?;
                self.loss_known(s, k)
            }
        }
    }

    /// Slot `i` ends its hold of `g`; a lock of client 0 with a new `guid` for the
    /// acquisition waiting in line, if one waits: `ending::Ending` decides whether it hands
    /// the lock over.
    fn end(&self, s: &mut State, i: usize, g: G) -> Result<(), Violation> {
        if i >= RIVAL_SLOT {
            // A rival's client machine, which holds its one lock (no heartbeats, no line):
            // nothing but its release changes it, so it is made when the lock ends.
            let mut m = client::Client::<G, u8>::new(Duration::ZERO);
            let cfg = self.cfg.beat();
            m.taken(
                0,
                home(i) as u8,
                Hold::new(cfg, false, g, None, Time::ZERO, 0),
                Time::ZERO,
            );
            let held::Release::Write { guids, taken } = m.release(0, Kind::FailOpen, Time::ZERO) else {
                unreachable!("a lock without heartbeats is released by a write")
            };
            let end = m.ending(0, guids, taken, || g, Time::ZERO);
            return self.ending(s, i, g, end);
        }
        // Client 0's machine: the line of A (`client::Client::ending`), and whether the lock
        // is lost. Its locks are never stepped and count no time held.
        let h = s.hb.as_ref().expect("client 0's machine");
        let end = h
            .client
            .ending(i as Id, vec![g], false, || new_guid(&mut s.seq, 0), Time::ZERO);
        self.ending(s, i, g, end)
    }

    /// Slot `i` ends its hold of `g` through the core's `ending::Ending`.
    fn ending(&self, s: &mut State, i: usize, g: G, end: End<G>) -> Result<(), Violation> {
        let env = env::at(s.now);
        let (m, step) = Task::end(Ending::start(self.cfg.lock(0), end, &env));
        let c = &mut s.slots[i];
        c.phase = Phase::Releasing { g };
        c.machine = Some(m);
        self.step(s, i, step)
    }

    /// S's release writes once its heartbeat lets it, the item carrying any of `guids`
    /// (`taken`: another holder took S).
    fn end_session(&self, s: &mut State, g: G, guids: Vec<G>, taken: bool) -> Result<(), Violation> {
        // How long S was held decides nothing (nothing stands back: S's item keeps no mark,
        // and S was not contended), so its ending counts none.
        let h = s.hb.as_ref().expect("client 0's machine");
        let end = h.client.ending(LOCK, guids, taken, || g, Time::ZERO);
        self.ending(s, SESSION_SLOT, g, end)
    }

    /// `release()` on slot `i`'s lock (client 0's session: once its locks are let go).
    fn release(&self, s: &mut State, i: usize) -> Result<(), Violation> {
        let Phase::Holding { g, .. } = s.slots[i].phase else {
            unreachable!("a release of a held lock")
        };
        match i {
            SESSION_SLOT => {
                let h = s.hb.as_mut().expect("S's heartbeats");
                h.client.end_session(LOCK);
                match h.release(Kind::FailOpen, s.now) {
                    held::Release::Wait { .. } => {
                        s.slots[i].phase = Phase::Releasing { g };
                        Ok(())
                    }
                    held::Release::Write { guids, taken } => self.end_session(s, g, guids, taken),
                    held::Release::Done | held::Release::NotOurs => unreachable!("released once"),
                }
            }
            1 | 2 => {
                // Lapsed if S no longer lasts (`client::Client::release`).
                let now = ms(s.now);
                let c = &mut s.hb.as_mut().expect("client 0's machine").client;
                c.release(i as Id, Kind::FailOpen, now);
                self.end(s, i, g)
            }
            _ => self.end(s, i, g),
        }
    }

    /// Client 0 believes it holds the lock of slot `i` (1 or 2): while S lasts and the lock is
    /// not lost, and once it closed, until its machine declares the abandoned lock lost. A
    /// rival, its own.
    fn believes(&self, s: &State, i: usize) -> bool {
        match s.slots[i].phase {
            Phase::Holding { .. } if i < RIVAL_SLOT => {
                (s.closed || self.session_until(s).is_some())
                    && s.hb
                        .as_ref()
                        .and_then(|h| h.client.hold(i as Id))
                        .is_some_and(|h| h.lost.is_none())
            }
            Phase::Holding { until, .. } => s.now < until,
            _ => false,
        }
    }

    fn exclusion(&self, s: &State) -> Result<(), Violation> {
        env::mutual_exclusion(2, 3, s.now, |c, k| {
            let i = if c == 0 {
                1 + k as usize
            } else {
                RIVAL_SLOT + k as usize
            };
            (c == 0 || c == 1 + k as usize) && i < s.slots.len() && self.believes(s, i)
        })
    }

    /// A rival was just granted lock `k`: if client 0 holds it through S, S's loss must be
    /// declared.
    fn loss_known(&self, s: &State, k: usize) -> Result<(), Violation> {
        // Held, and not lost alone (an operator's revocation).
        let holds = matches!(s.slots[1 + k].phase, Phase::Holding { .. })
            && s.hb
                .as_ref()
                .and_then(|h| h.client.hold((1 + k) as Id))
                .is_none_or(|h| h.lost.is_none());
        let live = matches!(s.slots[SESSION_SLOT].phase, Phase::Holding { .. })
            && s.hb.as_ref().is_some_and(|h| h.hold().lost.is_none());
        if holds && live {
            let (c, now) = (k + 1, s.now);
            let detail = format!("c{c} was granted lock {k} at tick {now} while c0 holds it through its session, whose loss is not declared");
            return Err(Violation::new(LOSS, detail));
        }
        Ok(())
    }

    /// The operator reads A's item and forces its release as the addon's `forceRelease` does
    /// (`force::Force`, which decides what is read and written, in which order), up to its
    /// first write.
    fn force(&self, s: &mut State) {
        let timeout = ms(self.cfg.request_timeout);
        let (m, step) = Force::start(false, OPERATOR_GUID, timeout, s.items[A], &operator_env(s.now));
        s.operator = forcing(m, step, 0);
        self.operate(s);
    }

    /// The operator's next write lands on the item it names (A's, or S's for a request about
    /// the session), with the reads the machine asks for before it, at once; each answer goes
    /// back to the machine. A read and the write it leads to are one step: the write's
    /// condition checks at its landing what the read saw.
    fn operate(&self, s: &mut State) {
        while matches!(s.operator, Operator::Forcing(_)) {
            let Operator::Forcing(f) = std::mem::take(&mut s.operator) else {
                unreachable!("the operator's request")
            };
            let (mut m, _) = *f;
            let req = m.request().expect("a request out").clone();
            let i = if req.session().is_some() { S } else { A };
            let (after, reply) = env::apply(&req, env::open_fields(self.cfg.lease), s.items[i]);
            s.items[i] = after;
            let step = Machine::<Item, Fail>::answer(&mut m, answer_of(reply), &operator_env(s.now));
            // Without a delay, no tick is kept: the write may land at any moment.
            let at = match self.cfg.operator_delay {
                0 => 0,
                delay => s.now.saturating_add(delay),
            };
            s.operator = forcing(m, step, at);
            if !matches!(req, Req::Get | Req::ReadSession { .. }) {
                return;
            }
        }
    }

    /// A heartbeat write lands on S: whether it renewed the lease.
    fn renew(&self, s: &mut State, guids: [G; 2], new: G) -> bool {
        env::renew(&mut s.items[S], &guids, new, self.cfg.lease)
    }

    /// Client 0 closes without releasing its locks, as the addon's `close()` does: its
    /// machine ends S and abandons it, then each lock held through it
    /// (`client::Client::close`). Nothing more is written; a heartbeat write of S on its way
    /// may still land.
    fn close(&self, s: &mut State) {
        s.closed = true;
        let held: Vec<Id> = (1..=2)
            .filter(|&i| matches!(s.slots[i].phase, Phase::Holding { .. }))
            .map(|i| i as Id)
            .collect();
        let Some(h) = s.hb.as_mut() else { return };
        h.client.close(&held);
        s.stray = s.stray.or(h.unlanded());
        h.net = None;
    }

    /// Client 0's machine steps its abandoned locks whose loss moment came, as the addon's
    /// one timer for them does (`HeldLock::lapse`): a lock it declares lost is no longer
    /// believed held (S's own loss is told to nobody).
    fn lapse(&self, s: &mut State) {
        let now = ms(s.now);
        let h = s.hb.as_mut().expect("client 0's machine");
        h.client.lapse(now);
        for (id, event) in h.client.events() {
            if matches!(event, client::Event::Lost(_)) && (1..=2).contains(&id) {
                s.slots[id as usize].phase = Phase::Done;
            }
        }
    }

    /// When client 0's machine must next step its abandoned locks, once it closed.
    fn next_lapse(&self, s: &State) -> Option<Tick> {
        let h = s.hb.as_ref().filter(|_| s.closed)?;
        h.client.next_lapse().map(tick)
    }

    /// Heartbeat event `e` happens to S, and what it asks for is carried out.
    fn beat(&self, s: &mut State, e: BeatEvent) -> Result<(), Violation> {
        let (now, lease, seq) = (s.now, self.cfg.lease, &mut s.seq);
        let h = s.hb.as_mut().expect("heartbeats");
        let renew = |gs: [G; 2], new| env::renewal(&mut s.items[S], &gs, new, lease);
        let carried = h.happen(e, now, &mut s.left.faults, || new_guid(seq, 0), renew);
        s.stray = s.stray.or(carried.abandoned);
        // Once its writing heartbeats are spent, the scheduler still steps it at the loss
        // moment.
        if carried.renewed.is_some() && h.left == 0 {
            h.stop_writing();
        }
        // Once lost, S lasts no longer (client 0's machine told every lock held through S).
        if let (Phase::Holding { until: u, .. }, Some(until)) = (&mut s.slots[SESSION_SLOT].phase, carried.until(now)) {
            *u = until;
        }
        let Some(held::Release::Write { guids, taken }) = carried.release else {
            return Ok(());
        };
        let Phase::Releasing { g, .. } = s.slots[SESSION_SLOT].phase else {
            unreachable!("S's release waits")
        };
        self.end_session(s, g, guids, taken)
    }

    /// Client 0's acquisitions are over (held, failed or ended): the rivals start.
    fn settled(&self, s: &State) -> bool {
        s.slots[1..RIVAL_SLOT]
            .iter()
            .all(|c| !matches!(c.phase, Phase::Idle | Phase::Acquiring { .. }))
    }

    fn due(&self, s: &State) -> bool {
        let start = self.settled(s) && s.slots[RIVAL_SLOT..].iter().any(|c| c.phase == Phase::Idle);
        start
            || s.slots
                .iter()
                .any(|c| c.phase != Phase::Crashed && env::due(c.net.as_ref(), c.wake, s.now))
            || s.hb
                .as_ref()
                .is_some_and(|h| h.due(false) && h.wake().is_some_and(|w| w <= s.now))
            || self.next_lapse(s).is_some_and(|at| at <= s.now)
    }

    fn time_matters(&self, s: &State) -> bool {
        s.now < self.cfg.horizon
            && (s.hb.as_ref().is_some_and(|h| h.due(false) || h.net.is_some())
                || matches!(&s.operator, Operator::Forcing(f) if f.1 > s.now)
                || self.next_lapse(s).is_some()
                || s.slots.iter().any(|c| {
                    c.phase != Phase::Crashed
                        && (env::pending(c.net.as_ref(), c.wake)
                            || matches!(c.phase, Phase::Holding { until, .. } if until > s.now))
                }))
    }
}

impl Model for Sessions {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        broken::set(self.cfg.bug);
        let mut s = State {
            now: 0,
            items: [None; 3],
            slots: vec![Slot::default(); RIVAL_SLOT + self.cfg.rivals as usize],
            hb: None,
            stray: None,
            seq: 0,
            left: Left::new(self.cfg.faults, self.cfg.crashes),
            last_token: [0; 2],
            ended: false,
            waiting: self.cfg.handover,
            waiter: None,
            closed: false,
            operator: Operator::Idle,
        };
        self.start(&mut s, SESSION_SLOT).expect("a start violates nothing");
        vec![s]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        if s.stray.is_some() {
            out.push(Action::StrayLand);
            out.push(Action::StrayGone);
        }
        let c0_crashed = s.slots[SESSION_SLOT].phase == Phase::Crashed;
        for (i, c) in s.slots.iter().enumerate() {
            if c.phase == Phase::Crashed {
                continue;
            }
            let ci = i as u8;
            Event::may_happen(c.net.as_ref(), c.wake, s.now, s.left.faults, |e| {
                out.push(Action::Event(ci, e))
            });
            if owner(i) != 0 || i == SESSION_SLOT {
                Event::may_crash(s.left.crashes, c.net.as_ref(), |e| out.push(Action::Event(ci, e)));
            } else if s.left.crashes > 0 && c.net.as_ref().is_some_and(Net::out) {
                // Client 0 crashes with this slot's request landing.
                out.push(Action::Event(ci, Event::Crash(true)));
            }
            match c.phase {
                Phase::Idle if i >= RIVAL_SLOT && self.settled(s) => out.push(Action::Start(ci)),
                Phase::Holding { .. } if i >= RIVAL_SLOT => out.push(Action::Release(ci)),
                _ => {}
            }
        }
        if s.waiting && matches!(s.slots[1].phase, Phase::Holding { .. } | Phase::Releasing { .. }) {
            out.push(Action::GiveUp);
        }
        // Client 0 lets go of one thing at a time, its locks in order, then its session once
        // no lock is left; or, once its acquisitions are over and nothing is on its way out,
        // it closes without releasing.
        let c0 = &s.slots[..RIVAL_SLOT];
        let busy = c0
            .iter()
            .any(|c| matches!(c.phase, Phase::Releasing { .. } | Phase::Crashed));
        if self.cfg.close
            && !s.closed
            && !busy
            && !s.waiting
            && self.settled(s)
            && matches!(c0[SESSION_SLOT].phase, Phase::Holding { .. })
        {
            out.push(Action::Close);
        }
        if self.next_lapse(s).is_some_and(|at| at <= s.now) {
            out.push(Action::Lapse);
        }
        match s.operator {
            Operator::Idle if self.cfg.revoke && s.items[A].is_some_and(|a| a.session != 0 && !a.released) => {
                out.push(Action::Force)
            }
            Operator::Forcing(ref f) => {
                if f.1 <= s.now {
                    out.push(Action::Operate);
                }
                if s.left.crashes > 0 {
                    out.push(Action::OperatorCrash);
                }
            }
            _ => {}
        }
        if !busy && !s.closed {
            let next = [1, 2]
                .into_iter()
                .find(|&i| matches!(c0[i].phase, Phase::Holding { .. }))
                .filter(|&i| !(i == 1 && self.cfg.keeps_a))
                .or_else(|| {
                    let free = c0[1..].iter().all(|l| matches!(l.phase, Phase::Idle | Phase::Done));
                    (free && matches!(c0[SESSION_SLOT].phase, Phase::Holding { .. })).then_some(SESSION_SLOT)
                });
            if let Some(i) = next {
                out.push(Action::Release(i as u8));
            }
        }
        if let (Some(h), false) = (&s.hb, c0_crashed) {
            h.may_happen(false, s.now, s.left.faults, |e| out.push(Action::Beat(e)));
        }
        if !self.due(s) && self.time_matters(s) {
            out.push(Action::Tick);
        }
    }

    fn next(&self, s: &State, a: &Action) -> Result<State, Violation> {
        broken::set(self.cfg.bug);
        let mut s = s.clone();
        match *a {
            Action::Start(i) => self.start(&mut s, i as usize)?,
            Action::Event(i, e) => env::happen(self, &mut s, i as usize, e)?,
            Action::Release(i) => self.release(&mut s, i as usize)?,
            Action::GiveUp => {
                s.waiting = false;
                if let (Some(h), Some(w)) = (s.hb.as_mut(), s.waiter.take()) {
                    h.client.line_quit(&(A as u8), w);
                }
            }
            Action::Close => self.close(&mut s),
            Action::Lapse => self.lapse(&mut s),
            Action::Force => self.force(&mut s),
            Action::Operate => self.operate(&mut s),
            Action::OperatorCrash => {
                s.left.crashes -= 1;
                s.operator = Operator::Done;
            }
            Action::Beat(e) => self.beat(&mut s, e)?,
            Action::StrayLand => {
                let (gs, new) = s.stray.take().unwrap();
                self.renew(&mut s, gs, new);
            }
            Action::StrayGone => s.stray = None,
            Action::Tick => s.now += 1,
        }
        // A lock of client 0 lost, abandoned or released without a hand-over leaves its
        // line: the acquisition waiting in it tries for itself, which the model follows no
        // further.
        if s.hb.as_mut().is_some_and(|h| h.line_moves()) {
            s.waiting = false;
            s.waiter = None;
        }
        Ok(s)
    }

    fn invariant(&self, s: &State) -> Result<(), Violation> {
        self.exclusion(s)?;
        // A waiter's end of S is a release of client 0's tenure: final.
        if s.ended && s.items[S].is_some_and(|it| !it.released && owner_of(it.guid) == Some(0)) {
            return Err(Violation::new(
                "no lost release",
                "a waiter ended c0's session S, and S is c0's again",
            ));
        }
        for (i, c) in s.slots.iter().enumerate() {
            if let Some((lo, hi)) = c.released {
                let k = home(i);
                if s.items[k].is_some_and(|it| (lo..=hi).contains(&it.guid) && !it.released) {
                    return Err(env::lost_release(owner(i), k as u8));
                }
            }
        }
        Ok(())
    }
}

impl Clients for Sessions {
    type Sent = Sent;

    /// Slot `i`'s request lands: the session's item for a waiter's read or end of a session,
    /// else its own; client 0's lock writes name S.
    fn apply_sent(&self, s: &mut State, i: usize, sent: &Sent) -> Ans {
        let req = &sent.req;
        let k = if req.session().is_some() { S } else { home(i) };
        let mut fields = env::open_fields(self.cfg.lease);
        if matches!(i, 1 | 2) {
            fields.session = Some(SESSIONS[0]);
            fields.lease_duration_ms = SESSION_LOCK_LEASE_MS;
        }
        let (after, reply) = env::apply(req, fields, s.items[k]);
        s.items[k] = after;
        if matches!(req, Req::EndSession { .. }) && !matches!(reply, core_op::Reply::Refused(_)) {
            s.ended = true;
        }
        answer_of(reply)
    }

    fn wire(s: &mut State, i: usize) -> (&mut Left, &mut Option<Net>, &mut Option<Tick>) {
        let slot = &mut s.slots[i];
        (&mut s.left, &mut slot.net, &mut slot.wake)
    }

    fn resume(&self, s: &mut State, i: usize, a: Option<Ans>) -> Result<(), Violation> {
        let env = env::at(s.now);
        let step = s.slots[i].machine.as_mut().expect("a machine waits").resume(a, &env);
        self.step(s, i, step)
    }

    /// A crashed client keeps nothing but a heartbeat write of S on its way, which may still
    /// land; client 0's crash ends all three of its slots.
    fn crashed(&self, s: &mut State, i: usize) {
        let slots = if owner(i) == 0 { 0..RIVAL_SLOT } else { i..i + 1 };
        for j in slots {
            s.slots[j] = Slot {
                phase: Phase::Crashed,
                ..Slot::default()
            };
        }
        if owner(i) == 0 {
            s.waiting = false;
            s.waiter = None;
            s.stray = s.stray.or(s.hb.take().and_then(|h| h.unlanded()));
        }
    }
}

/// Beyond this many states a run stops and reports itself incomplete (about 22 bytes a state
/// explored depth first: 2.8 GB for the largest run, with a fault, 129,059,970 states).
pub const MAX_STATES: usize = 140_000_000;

/// The configurations explored: the bounded ones of the test suite, or the full ones of
/// `npm run model`: one rival, with a fault and a crash, over 6 ticks; a hand-over within the
/// session; a close (the same in both); an operator's revocation while client 0 keeps A.
/// Two rivals (one per lock id) do not fit in a run of some minutes, even over 4 ticks: the
/// simulator runs them.
pub fn configs(full: bool) -> Vec<Config> {
    // Each: heartbeats that write, faults, crashes, horizon, a hand-over, a close, an
    // operator's revocation (the last two long enough for a rival to wait S out and take a
    // lock), and whether client 0 keeps A. A revocation does not fit in a bounded run, and
    // one that client 0's release of A may race passes 300 million states over the 8 ticks a
    // rival needs to wait out the revoked lease; with client 0 keeping A, the run the
    // variants need is whole in under 7 million.
    type Row = (u8, u8, u8, Tick, bool, bool, bool, bool);
    let rows: &[Row] = if full {
        &[
            (2, 1, 1, 6, false, false, false, false),
            (1, 0, 1, 4, true, false, false, false),
            (0, 0, 0, 6, false, true, false, false),
            (2, 0, 0, 8, false, false, true, true),
        ]
    } else {
        &[
            (1, 0, 1, 4, false, false, false, false),
            (1, 0, 0, 3, true, false, false, false),
            (0, 0, 0, 6, false, true, false, false),
        ]
    };
    let config = |&(beats, faults, crashes, horizon, handover, close, revoke, keeps_a): &Row| Config {
        beats,
        faults,
        crashes,
        horizon,
        handover,
        close,
        revoke,
        keeps_a,
        ..Config::DEFAULT
    };
    rows.iter().map(config).collect()
}

/// The variants the session model checks: the session's own (`Broken::SESSION`), and a lock
/// held through the session, abandoned by a close, that is reported lost at its lease's end
/// instead of a timer grain before.
pub const VARIANTS: [Broken; 6] = [
    Broken::TakeoverSkipsSessionEnd,
    Broken::RenewRevivesEnded,
    Broken::UnclaimedHandOverForgetsGuid,
    Broken::AbandonedLapsesLate,
    Broken::RevocationIgnored,
    Broken::ForceRevokesFirst,
];

/// The property each session variant's shortest counterexample violates.
pub fn property(b: Broken) -> &'static str {
    match b {
        Broken::TakeoverSkipsSessionEnd
        | Broken::AbandonedLapsesLate
        | Broken::RevocationIgnored
        | Broken::ForceRevokesFirst => "mutual exclusion",
        _ => "no lost release",
    }
}

/// The variants the simulator is to catch (in its runs that close, a lock held through the
/// session abandoned and reported lost late). A takeover that does not end the session shows
/// only when the session renews after the waiter's last read of it (a waiter reads it every
/// half lease) and before its deadline; a holder that ignores a revocation, only when it keeps
/// the lock until a rival has waited out the revoked lease (a random walk releases it long
/// before): both are left to the exhaustive model.
pub const SIMULATED: [Broken; 5] = [
    Broken::RenewRevivesEnded,
    Broken::UnclaimedHandOverForgetsGuid,
    Broken::AbandonedLapsesLate,
    Broken::RevocationIgnored,
    Broken::ForceRevokesFirst,
];

/// Whether a violation of `property` shows variant `b`: its own property, or for the takeover
/// that does not end the session, the holder's loss not yet known at the rival's grant.
pub fn caught_by(b: Broken, property: &str) -> bool {
    property == self::property(b)
        || (matches!(
            b,
            Broken::TakeoverSkipsSessionEnd | Broken::RevocationIgnored | Broken::ForceRevokesFirst
        ) && property == LOSS)
}

/// The configuration a variant is checked in.
pub fn broken_config(b: Broken) -> Config {
    if b == Broken::AbandonedLapsesLate {
        return Config {
            bug: Some(b),
            ..configs(false)[2]
        };
    }
    if matches!(b, Broken::RevocationIgnored | Broken::ForceRevokesFirst) {
        return Config {
            bug: Some(b),
            beats: 2,
            faults: 0,
            crashes: 0,
            horizon: 8,
            revoke: true,
            ..Config::DEFAULT
        };
    }
    Config {
        bug: Some(b),
        // The takeover shows without a fault; a renewal that outlives a release needs one.
        faults: u8::from(b != Broken::TakeoverSkipsSessionEnd),
        crashes: 0,
        horizon: 8,
        handover: b == Broken::UnclaimedHandOverForgetsGuid,
        ..Config::DEFAULT
    }
}

/// Action `a` taken in `s`, told as a counterexample's step.
pub fn tell(s: &State, a: &Action) -> String {
    let request = match *a {
        Action::Event(i, e) if e.on_the_wire() => s.slots[i as usize].net.as_ref().map(|n| format!("{:?}", n.sent.req)),
        Action::Beat(e) if e != BeatEvent::Due => {
            s.hb.as_ref()
                .and_then(|h| h.net)
                .map(|(gs, new, _)| format!("renew {gs:?} -> {new}"))
        }
        Action::StrayLand => s.stray.map(|(gs, new)| format!("renew {gs:?} -> {new}")),
        Action::Operate => match &s.operator {
            Operator::Forcing(f) => f.0.request().map(|r| format!("{r:?}")),
            _ => None,
        },
        _ => None,
    };
    env::step_text(s.now, a, request)
}

/// Explores `cfg`: the protocol as it ships depth first, a variant breadth first.
pub fn check(cfg: Config, max_states: usize) -> Checked<State> {
    explore::check(cfg.bug.is_none(), &Sessions::new(cfg), max_states, tell)
}
