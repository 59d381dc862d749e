//! FailClosed and FailOpen clients that are the core's machines themselves
//! (`dynamodb_lock_core::fail_closed::Acquire`, `fail_open::Acquire`, `release::Release`,
//! `heartbeat::Beat`, `held::Held`),
//! pieces of the core's client work (`work::Work`) as the addon's `work` module carries them: every request a machine
//! asks for goes to the store through the core's `op::apply`, its answer (or its timeout) goes
//! back, and a machine waiting for an instant is stepped when the clock reaches it.
//!
//! The environment (`env.rs`, shared with the Fifo model): requests are lost before they
//! land, land and lose their answer, or are throttled; an answer that has not come by the
//! machine's timeout is a timeout (the request may have landed, or may still be on its way
//! and never land); clients crash, with their requests landing or not; clients' wall clocks
//! may be offset (`skew`, read only with `trustLocalTime`). Time is in ticks (a tick is a
//! millisecond to the machines); every client's monotonic clock runs at the same rate. Each
//! holder holds for any time it likes. A FailOpen holder's lease ends a lease after its
//! winning write was sent; with `beats`, it heartbeats as the addon's scheduler steps the
//! core's `heartbeat::Beat`, its `guid`s kept by the core's `held::Held`: a heartbeat's
//! write may be lost, answered late, or given up on and still land any time later, and a
//! release waits for a write on the wire and then writes with every `guid` the item may
//! carry.
//!
//! Properties:
//! - mutual exclusion: no two clients believe they hold one lock at once (a FailOpen holder
//!   believes it while its lease lasts on its own clock);
//! - fencing: each FailOpen grant's token is above every earlier grant's;
//! - no lost release: a release reported done leaves nothing of the holder on the item;
//! - no orphan: an acquisition reported failed leaves nothing of its own on the item, unless
//!   it is still removing it (`undo`);
//! - liveness (bounded): a FailClosed lock whose item is gone is taken by a waiter that keeps
//!   trying within a re-read interval and three request timeouts; a FailOpen lock whose holder crashed is taken by a waiter that keeps
//!   trying within a lease and three request timeouts of the crash (or of its start), when
//!   nothing else goes wrong (no fault, no request slower than its timeout).
//!
//! Each client's acquisitions, releases and undos are pieces of one `work::Work`, the core's
//! client work, carried as the addon's `work` module carries it: its requests go onto the
//! wire, their answers and the clock go back, and it says when a piece ends. An acquisition
//! reported failed whose write may have landed is undone in the background as that work
//! decides (`Task::undo_after`, `undo::Undo`), beside the client's next acquisition; a
//! cancellation is the work's (`Work::cancel`).
//!
//! Each client's lock is a lock of its client machine (`client::Client`, as in the addon),
//! which decides its end (`Client::ending`, `Client::ended`). With `hand_over`, client 0's
//! next acquisition of its lock joins that machine's line and its release hands the lock
//! over (`ending::Ending`); the waiter may give up at any moment before its turn, and the line
//! decides who the lock goes to.
//!
//! Abstractions: every client's first acquisition starts at tick 0 (later ones at any time);
//! the model's item keeps no first-in-line mark, so a mark's write is answered at once and
//! every waiter takes itself for the first in line (the mark decides fairness, never safety).

use std::fmt;
use std::time::Duration;

use dynamodb_lock_core::broken::{self, Broken};
use dynamodb_lock_core::ending::{self, Ending};
use dynamodb_lock_core::heartbeat;
use dynamodb_lock_core::held;
use dynamodb_lock_core::local::{Place, Waiter};
use dynamodb_lock_core::op as core_op;
use dynamodb_lock_core::request::{answer_of, Answer, Env, Req, Step, Time};
use dynamodb_lock_core::settings::{Kind, Lock};
use dynamodb_lock_core::work::{self, Task, Work};
use dynamodb_lock_core::{fail_closed, fail_open, original};

use crate::beats::{BeatEvent, Beats, LOCK};
use crate::env::{self, ms, tick, Ans, Clients, Event, Fail, Left, NetState, Tick};
use crate::explore::{self, Checked, Model, Violation};
use crate::item::{small, Item, Ver, G};

/// Clients have guids of their own (a guid's client is `guid / 16`).
pub const MAX_CLIENTS: usize = 15;

/// A break of the store or of the environment, which the checker must catch (the breaks of
/// the machines themselves are the core's `Broken` hooks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// A machine's variant (`dynamodb_lock_core::broken`).
    Core(Broken),
    /// FailClosed acquisition written without the "absent" condition.
    UnconditionalPut,
    /// FailOpen release that deletes the item: tokens start again at 1.
    ReleaseDeletes,
    /// FailOpen waiter that trusts the holder's clock (`trustLocalTime`) while clocks are
    /// skewed.
    WaiterTrustsHolderClock,
    /// FailOpen heartbeat that rotates `guid` without the condition that the item carries ours.
    RenewWithoutGuid,
}

impl Bug {
    pub const ALL: [Bug; 15] = [
        Bug::UnconditionalPut,
        Bug::Core(Broken::AmbiguousNotResolved),
        Bug::Core(Broken::CancelSkipsSettle),
        Bug::Core(Broken::TimeoutIsReleased),
        Bug::Core(Broken::LeaseFromReply),
        Bug::Core(Broken::RereadRestartsWait),
        Bug::ReleaseDeletes,
        Bug::WaiterTrustsHolderClock,
        Bug::RenewWithoutGuid,
        Bug::Core(Broken::ReleaseSkipsHeartbeat),
        Bug::Core(Broken::HandOverLeaseFromReply),
        Bug::Core(Broken::UnclaimedHandOverForgetsGuid),
        Bug::Core(Broken::LineKeepsQuitter),
        Bug::Core(Broken::ExpiredTakeKept),
        Bug::Core(Broken::CancelledTakeSkipsSettle),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bug::Core(b) => b.name(),
            Bug::UnconditionalPut => "FailClosed acquisition without the absent condition",
            Bug::ReleaseDeletes => "FailOpen release that deletes the item",
            Bug::WaiterTrustsHolderClock => "FailOpen waiter that trusts the holder's skewed clock",
            Bug::RenewWithoutGuid => "FailOpen heartbeat without the guid condition",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Bug::UnconditionalPut
            | Bug::Core(Broken::AmbiguousNotResolved | Broken::CancelSkipsSettle | Broken::TimeoutIsReleased) => {
                Kind::FailClosed
            }
            _ => Kind::FailOpen,
        }
    }

    /// Whether a violation of `property` shows this variant: its own property, or, for the
    /// variants that let two clients hold at once, fencing (a grant answered late that a
    /// second holder's grant overtook).
    pub fn caught_by(self, property: &str) -> bool {
        property == self.property()
            || (self.property() == "mutual exclusion" && self.kind() == Kind::FailOpen && property == "fencing")
            // A heartbeat without the guid condition that lands on the next holder's item
            // rather than on the release takes the lock from that holder.
            || (self == Bug::RenewWithoutGuid && property == "mutual exclusion")
    }

    /// The property its shortest counterexample violates.
    pub fn property(self) -> &'static str {
        match self {
            Bug::UnconditionalPut
            | Bug::Core(Broken::LeaseFromReply)
            | Bug::Core(Broken::HandOverLeaseFromReply)
            | Bug::WaiterTrustsHolderClock => "mutual exclusion",
            Bug::Core(Broken::AmbiguousNotResolved) => "no orphan",
            // Its landed write stays on the item, under an acquisition reported aborted.
            Bug::Core(Broken::CancelSkipsSettle | Broken::CancelledTakeSkipsSettle) => "no orphan",
            // The late take stays on the item, under an acquisition reported failed.
            Bug::Core(Broken::ExpiredTakeKept) => "no orphan",
            // A heartbeat that lands after the holder let go takes the lock back: from its
            // release, or from the next holder.
            Bug::Core(Broken::TimeoutIsReleased) | Bug::Core(Broken::ReleaseSkipsHeartbeat) | Bug::RenewWithoutGuid => {
                "no lost release"
            }
            // The hand-over's `guid` stays on the item, which nobody holds or frees.
            Bug::Core(Broken::UnclaimedHandOverForgetsGuid) => "no lost release",
            // Handed to nobody: the release was reported done, and the item stays held.
            Bug::Core(Broken::LineKeepsQuitter) => "no lost release",
            Bug::Core(Broken::RereadRestartsWait) => "liveness",
            Bug::ReleaseDeletes => "fencing",
            Bug::Core(_) => "a holder's loss is known no later than a rival's grant",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub clients: usize,
    pub locks: usize,
    /// Acquisitions each client makes.
    pub acquisitions: u8,
    pub lease: Tick,
    pub reread: Tick,
    pub acquire_period: Tick,
    pub request_timeout: Tick,
    /// `retryCount` of client 0; the others keep trying.
    pub retry_count: u32,
    /// Attempts per request.
    pub max_attempts: u32,
    /// Lost or throttled requests and answers, in all.
    pub faults: u8,
    pub crashes: u8,
    /// Acquisitions cancelled (an `AbortSignal`, `close()`), in all: at any moment of an
    /// acquisition, as the client's work cancels a piece (`work::Work::cancel`).
    pub cancels: u8,
    /// Client 1's wall clock runs this far ahead of the others'.
    pub skew: Tick,
    pub trust_local_time: bool,
    /// Time ends here.
    pub horizon: Tick,
    /// A holder releases no sooner than this long after it was granted the lock.
    pub min_hold: Tick,
    /// Heartbeats each FailOpen holder starts (0: none; its lease then ends a lease after its
    /// winning write was sent).
    pub beats: u8,
    /// The heartbeat period.
    pub period: Tick,
    pub bug: Option<Bug>,
    /// The clients send the original library's requests (`original`: get, whole-item puts,
    /// no timeouts of their own), as over a user's `dynamodb` object.
    pub original: bool,
    /// Client 0 may release once while its own next acquisition of the lock waits, and hand
    /// it over (`ending::Ending`); that acquisition is one more than its `acquisitions`.
    pub hand_over: bool,
    /// The acquisition waiting for the hand-over may give up before its outcome (with
    /// `hand_over`).
    pub gives_up: bool,
}

impl Config {
    pub fn new(kind: Kind) -> Config {
        Config {
            kind,
            clients: 2,
            locks: 1,
            acquisitions: 1,
            lease: 4,
            reread: 2,
            acquire_period: 2,
            request_timeout: 2,
            retry_count: 1,
            max_attempts: 2,
            faults: 1,
            crashes: 1,
            cancels: 0,
            skew: 0,
            trust_local_time: false,
            horizon: 14,
            min_hold: 0,
            beats: 0,
            period: 2,
            bug: None,
            original: false,
            hand_over: false,
            gives_up: true,
        }
    }

    fn lock(&self) -> Lock {
        let c = self;
        Lock {
            retry_count: c.retry_count,
            acquire_period: ms(c.acquire_period),
            trust_local_time: c.trust_local_time,
            heartbeat_period: ms(c.period),
            ..env::lock(c.kind, c.lease, c.reread, c.request_timeout, c.max_attempts)
        }
    }

    fn beat(&self) -> heartbeat::Config {
        env::beat_config(self.lease, self.period, self.request_timeout, Duration::ZERO)
    }
}

pub(crate) type Request = Req<G, Ver>;

/// A machine of a client: a piece of the core's client work.
pub type M = Task<Item, Fail>;

/// What a machine ended with.
pub(crate) type Out = work::Out<Item, Fail>;

pub(crate) type MStep = Step<G, Ver, Out>;

/// A request sent: what it asks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sent {
    pub req: Request,
    /// Past this tick an answer still to come makes the request slower than a request
    /// timeout (for liveness): its timeout, or for a request without a timeout of its own
    /// (`original`), a request timeout after it was sent.
    pub slow_at: Tick,
}

impl Sent {
    /// Request `req`, slower than a request timeout once `slow_at` passes.
    pub(crate) fn timed(req: Request, slow_at: Tick) -> Sent {
        Sent { req, slow_at }
    }
}

/// A request on its way.
pub type Net = env::Net<Sent>;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Phase {
    #[default]
    Idle,
    /// Crashed at tick `at`.
    Crashed {
        at: Tick,
    },
    Acquiring {
        k: u8,
        g: G,
    },
    /// `until`: the end of a FailOpen lease on this client's clock.
    Holding {
        k: u8,
        g: G,
        token: u8,
        until: Option<Tick>,
    },
    Releasing {
        k: u8,
        g: G,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Client {
    pub phase: Phase,
    /// The client's work (`work::Work`, as the addon's `work` module carries it): its current
    /// acquisition or release (`piece`), and in the background the undo of every write that
    /// may have landed unseen.
    pub work: Box<Work<Item, u8, Fail>>,
    pub piece: Option<u64>,
    /// The current piece's request on its way.
    pub net: Option<Net>,
    /// The work is stepped then (`Work::poll_timeout`).
    pub wake: Option<Tick>,
    /// The undos' requests on their way: by number, on a lock.
    pub undos: Vec<(u64, u8, Net)>,
    /// The current acquisition is cancelled.
    pub cancelled: bool,
    pub left: u8,
    pub seq: u8,
    /// When the current acquisition started, or the lock was granted.
    pub since: Tick,
    /// The last release reported done: the lock, and the first and last `guid` of its
    /// tenure (heartbeats rotate it).
    pub released: Option<(u8, G, G)>,
    /// The client's machine (`client::Client`, as the addon keeps one per client): its held
    /// lock, with a FailOpen holder's heartbeats, its line and the ending of its lock. Its
    /// line's clock stands still (every instant is 0): the waiter may give up at any moment,
    /// which covers the moment its patience ends, and patience decides how long a waiter
    /// waits, never what it may hold. `None` while it is as new (it holds nothing and has no
    /// line), and once the client crashed.
    pub hb: Option<Box<Beats>>,
    /// A heartbeat write given up on while on its way: it may still land (lock, `guid`s, new
    /// `guid`).
    pub stray: Option<(u8, [G; 2], G)>,
    /// The last acquisition reported as not acquired.
    pub failed: Option<(u8, G)>,
    /// The acquisition waiting in the client's line for the lock (until it gives up), for a
    /// client that hands a lock to its own next acquisition.
    pub waiter: Option<Waiter>,
    /// Hand-overs this client may still make.
    pub hand_overs: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: Tick,
    pub items: Vec<Option<Item>>,
    pub clients: Vec<Client>,
    pub left: Left,
    /// The token of the last FailOpen grant of each lock (history, for fencing).
    pub last_token: Vec<u8>,
    /// A request was slower than its timeout (history, for liveness).
    pub slow: bool,
    /// When each lock's item last went away (history, for FailClosed liveness).
    pub freed_at: Vec<Tick>,
    /// Cancellations still to happen.
    pub cancels: u8,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start(u8, u8),
    /// The client's current acquisition is cancelled.
    Cancel(u8),
    /// The environment's event on a client: its request's fate, its wait's end, its crash.
    Event(u8, Event),
    Release(u8),
    /// `release()` while this client's next acquisition of the lock waits for it.
    HandOver(u8),
    /// That waiting acquisition gives up (its `waitMs` or its patience ran out, or it was
    /// aborted) before the hand-over's outcome.
    GiveUp(u8),
    /// The environment's event on the request of one of a client's undos (by its place in
    /// `Client::undos`): its landing, its answer, its loss, its timeout.
    Undo(u8, u8, Event),
    /// A heartbeat starts, or its timer fires.
    Beat(u8, BeatEvent),
    /// A heartbeat write given up on lands after all, or is gone for good.
    StrayLand(u8),
    StrayGone(u8),
    Tick,
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Start(c, k) => write!(f, "c{c} starts acquiring lock {k}"),
            Action::Cancel(c) => write!(f, "c{c}'s acquisition is cancelled"),
            Action::Event(c, e) => e.describe(*c, f),
            Action::Release(c) => write!(f, "c{c} calls release()"),
            Action::HandOver(c) => write!(f, "c{c} calls release() while its next acquisition waits"),
            Action::GiveUp(c) => write!(f, "c{c}'s waiting acquisition gives up"),
            Action::Undo(c, j, e) => {
                write!(f, "undo {j}: ")?;
                e.describe(*c, f)
            }
            Action::Beat(c, BeatEvent::Due) => write!(f, "c{c}'s heartbeat is due"),
            Action::Beat(c, BeatEvent::Land) => write!(f, "c{c}'s heartbeat write lands"),
            Action::Beat(c, BeatEvent::Answer) => write!(f, "c{c} gets the heartbeat's answer"),
            Action::Beat(c, BeatEvent::Lose) => write!(f, "c{c}'s heartbeat write or its answer is lost"),
            Action::StrayLand(c) => write!(f, "c{c}'s abandoned heartbeat write lands late"),
            Action::StrayGone(c) => write!(f, "c{c}'s abandoned heartbeat write never lands"),
            Action::Tick => write!(f, "tick"),
        }
    }
}

pub struct Machines {
    pub cfg: Config,
}

fn owner(g: G) -> usize {
    (g / 16) as usize
}

/// Client `i`'s next `guid`, its sequence `seq` counted on.
pub(crate) fn new_guid(seq: &mut u8, i: usize) -> G {
    *seq += 1;
    assert!(*seq < 16, "guid space");
    (i as u8) * 16 + *seq
}

/// The original's outcomes, as the FailClosed and FailOpen machines' are read.
fn native(out: Out) -> Out {
    match out {
        Out::Original(original::Outcome::Taken {
            fencing_token: None, ..
        }) => Out::Closed(fail_closed::Outcome::Acquired),
        Out::Original(original::Outcome::Taken {
            fencing_token: Some(fencing_token),
            sent_at,
        }) => Out::Open(fail_open::Outcome::Taken {
            fencing_token,
            sent_at,
            contended: false,
        }),
        expired @ Out::Original(original::Outcome::Expired { .. }) => expired,
        Out::Original(_) => Out::Closed(fail_closed::Outcome::Aborted),
        other => other,
    }
}

impl Machines {
    pub fn new(cfg: Config) -> Self {
        assert!(cfg.clients <= MAX_CLIENTS && cfg.locks >= 1);
        // The original's heartbeats are whole-item puts, which the model does not step.
        assert!(
            !(cfg.original && cfg.beats > 0),
            "heartbeats of the native requests only"
        );
        Machines { cfg }
    }

    /// Client `i` hands a lock to its own next acquisition: its acquisitions join its line.
    fn hands_over(&self, i: usize) -> bool {
        i == 0 && self.cfg.hand_over && !self.cfg.original
    }

    /// A client machine as new: it holds nothing, and its line has had nobody in it.
    fn new_machine(&self) -> Beats {
        Beats::new(self.cfg.beat().timer_grain, self.lock().line_patience())
    }

    /// What client `c`'s machine decided about its line is carried out (`Beats::line_moves`:
    /// its waiter tries for itself, and the model follows it no further), and the machine is
    /// not kept while it is as new.
    fn carry_line(&self, c: &mut Client) {
        if c.hb.as_mut().is_some_and(|h| h.line_moves()) {
            c.waiter = None;
        }
        if c.hb.as_deref().is_some_and(|h| *h == self.new_machine()) {
            c.hb = None;
        }
    }

    fn bug(&self, b: Bug) -> bool {
        self.cfg.bug == Some(b)
    }

    fn lock(&self) -> Lock {
        let mut l = self.cfg.lock();
        if self.bug(Bug::WaiterTrustsHolderClock) {
            l.trust_local_time = true;
        }
        l
    }

    fn env(&self, s: &State, i: usize) -> Env {
        let skew = if i == 1 { self.cfg.skew } else { 0 };
        Env {
            unix_ms: u64::from(s.now) + u64::from(skew),
            cancelled: s.clients[i].cancelled,
            ..env::at(s.now)
        }
    }

    /// Applies `req` to lock `k`'s item through the core's `op::apply`, with a broken store's
    /// change around it.
    fn apply(&self, s: &mut State, k: u8, req: &Request) -> Ans {
        let slot = &mut s.items[k as usize];
        if matches!(req, Req::PutIfAbsent { .. }) && self.bug(Bug::UnconditionalPut) {
            *slot = None;
        }
        let (after, reply) = env::apply(req, env::open_fields(self.cfg.lease), *slot);
        if slot.is_some() && after.is_none() {
            s.freed_at[k as usize] = s.now;
        }
        let slot = &mut s.items[k as usize];
        *slot = after;
        if self.bug(Bug::ReleaseDeletes)
            && matches!(req, Req::Release { .. })
            && matches!(reply, core_op::Reply::WaitingMark(_))
        {
            *slot = None;
        }
        answer_of(reply)
    }

    /// Client `i` starts piece `task` of its work, on lock `k`, which it waits for.
    fn begin(&self, s: &mut State, i: usize, k: u8, task: (M, MStep)) -> Result<(), Violation> {
        let env = self.env(s, i);
        let c = &mut s.clients[i];
        c.piece = Some(c.work.start(k, task, c.cancelled, &env));
        self.carry(s, i)
    }

    /// Carries what client `i`'s work asks for now, as the addon's `work` module does: its
    /// requests onto the wire (one past its timeout already is not sent; the model's item
    /// keeps no first-in-line mark, so a mark's write is answered at once, always accepted),
    /// what becomes of its current piece, and when it is stepped again.
    fn carry(&self, s: &mut State, i: usize) -> Result<(), Violation> {
        let env = self.env(s, i);
        let (now, request_timeout) = (s.now, self.cfg.request_timeout);
        loop {
            let c = &mut s.clients[i];
            while let Some(t) = c.work.poll_transmit() {
                let timeout_at = tick(t.timeout_at);
                if matches!(t.req, Req::MarkWaiting { .. }) {
                    c.work.handle_reply(t.id, Answer::Done(core_op::Reply::Done), &env);
                } else if timeout_at <= now {
                    c.work.handle_reply(t.id, env::TIMED_OUT, &env);
                } else {
                    let sent = Sent::timed(t.req, timeout_at.min(now.saturating_add(request_timeout)));
                    let net = Net {
                        sent,
                        timeout_at,
                        state: NetState::Out,
                    };
                    match c.piece == Some(t.id) {
                        true => c.net = Some(net),
                        false => c.undos.push((t.id, t.key, net)),
                    }
                }
            }
            match c.work.poll_event() {
                Some(work::Event::Done(id, out)) => self.done(s, i, id, out)?,
                Some(work::Event::Waits(..)) => {}
                None => break,
            }
        }
        let c = &mut s.clients[i];
        c.wake = c.work.poll_timeout().map(tick);
        Ok(())
    }

    /// Client `i`'s current piece `id` ended with `out`. A FailOpen take is settled at once
    /// (the model's clients hold no session); a hand-over goes by the client machine's line.
    fn done(&self, s: &mut State, i: usize, id: u64, out: Out) -> Result<(), Violation> {
        let env = self.env(s, i);
        let c = &mut s.clients[i];
        if let Out::End {
            outcome: handed @ ending::Outcome::Handed { guid, .. },
            ..
        } = &out
        {
            let guid = *guid;
            let (k, first) = match c.phase {
                Phase::Releasing { k, g } => (k, g),
                _ => unreachable!("a hand-over ends a release"),
            };
            let h = c.hb.as_mut().expect("the client's machine");
            match h.client.line_next(&k, Time::ZERO, true) {
                Some(w) if Some(w) == c.waiter => c.waiter = None,
                // Handed to an acquisition that gave up: the release is reported done, and
                // nobody holds the lock.
                Some(_) => {
                    h.ended(handed, env.now);
                    c.work.forget(id);
                    c.piece = None;
                    c.phase = Phase::Idle;
                    c.released = Some((k, first, guid));
                    self.carry_line(c);
                    return Ok(());
                }
                // Handed over, but the acquisition in line gave up meanwhile: the ending
                // releases the lock instead, as the addon's does.
                None => {
                    c.work.unclaimed(id, guid, &env);
                    return Ok(());
                }
            }
        }
        c.work.forget(id);
        c.piece = None;
        self.ended(s, i, out)
    }

    /// Client `i`'s machine ended with `out`: the client holds the lock, or has failed to
    /// acquire it, or has let it go.
    fn ended(&self, s: &mut State, i: usize, out: Out) -> Result<(), Violation> {
        let (k, g) = match s.clients[i].phase {
            Phase::Acquiring { k, g } | Phase::Releasing { k, g } | Phase::Holding { k, g, .. } => (k, g),
            _ => return Ok(()),
        };
        let now = ms(s.now);
        let c = &mut s.clients[i];
        let out = native(out);
        // A lock that ends, and an acquisition that fails, is done with its line
        // (`client::Client::ended`, `line_turn_unused`).
        match (&out, c.hb.as_mut()) {
            (Out::End { outcome, .. }, Some(h)) => h.ended(outcome, now),
            (Out::Closed(fail_closed::Outcome::Acquired) | Out::Open(fail_open::Outcome::Taken { .. }), _) => {}
            (_, Some(h)) => h.client.line_turn_unused(&k),
            (_, None) => {}
        }
        match out {
            Out::Closed(fail_closed::Outcome::Acquired) => {
                self.holds(s, i, k, g, 0, None);
                return self.started(s, i);
            }
            Out::Open(fail_open::Outcome::Taken {
                fencing_token, sent_at, ..
            }) => {
                self.taken(s, i, k, g, fencing_token, sent_at)?;
                return self.started(s, i);
            }
            // Handed to this client's next acquisition: a grant like any other.
            Out::End {
                outcome:
                    ending::Outcome::Handed {
                        guid,
                        fencing_token: Some(token),
                        sent_at,
                    },
                ..
            } => self.taken(s, i, k, guid, token, sent_at)?,
            Out::End {
                outcome: ending::Outcome::Handed { guid, .. },
                ..
            } => self.holds(s, i, k, guid, 0, None),
            Out::End { outcome, .. } => {
                if let ending::Outcome::Released { .. } = outcome {
                    c.released = Some((k, g, (i as u8) * 16 + c.seq));
                }
                c.phase = Phase::Idle;
            }
            // A failed acquisition, or a grant answered after its whole lease that the machine
            // gave back: the client's work undoes its write in the background if it may have
            // landed (for a grant given back, if the give-back failed).
            _ => {
                c.phase = Phase::Idle;
                c.failed = Some((k, g));
            }
        }
        self.carry_line(&mut s.clients[i]);
        Ok(())
    }

    /// Client `i`'s acquisition took its lock: it holds it from now on as its client machine
    /// says (`client::Client::start`), unless it was cancelled meanwhile: then it releases
    /// it at once, as the addon does.
    fn started(&self, s: &mut State, i: usize) -> Result<(), Violation> {
        let c = &mut s.clients[i];
        let h = c.hb.as_mut().expect("the client's machine");
        if h.client.start(LOCK, None, c.cancelled, Time::ZERO).is_err() {
            return self.release(s, i);
        }
        self.carry_line(&mut s.clients[i]);
        Ok(())
    }

    /// Client `i`'s acquisition is cancelled, as its work cancels a piece (`Work::cancel`).
    fn cancel(&self, s: &mut State, i: usize) -> Result<(), Violation> {
        s.cancels -= 1;
        let env = self.env(s, i);
        let c = &mut s.clients[i];
        c.cancelled = true;
        if let Some(id) = c.piece {
            c.work.cancel(id, &env);
        }
        self.carry(s, i)
    }

    /// Client `i` holds lock `k` with guid `g` and `token` (0: FailClosed), on its own clock
    /// until `until` (FailClosed: for good).
    fn holds(&self, s: &mut State, i: usize, k: u8, g: G, token: u8, until: Option<Tick>) {
        let c = &mut s.clients[i];
        if self.cfg.min_hold > 0 {
            c.since = s.now;
        }
        c.phase = Phase::Holding { k, g, token, until };
        if until.is_none() {
            // FailClosed: held without a lease, in the client's machine.
            let h = c.hb.get_or_insert_with(|| Box::new(self.new_machine()));
            h.take(self.cfg.beat(), k, g, None, Time::ZERO, c.since, 0);
        }
    }

    /// Client `i` took lock `k` with guid `g` (FailOpen): its lease lasts a lease from when
    /// its winning write was sent, its token must be above every earlier grant's, and with
    /// `beats` it heartbeats.
    fn taken(&self, s: &mut State, i: usize, k: u8, g: G, fencing_token: u64, sent_at: Time) -> Result<(), Violation> {
        let until = tick(sent_at + ms(self.cfg.lease));
        let token = small(fencing_token);
        env::fencing(&mut s.last_token[k as usize], i, k, token, until, s.now)?;
        self.holds(s, i, k, g, token, Some(until));
        // A lock without heartbeats is never stepped: its hold is made at time zero and
        // without a lease (its holder's lease is the model's, `Phase::Holding`), so that
        // neither makes a state of its own.
        let (sent_at, now) = match self.cfg.beats {
            0 => (None, Time::ZERO),
            _ => (Some(sent_at), ms(s.now)),
        };
        let c = &mut s.clients[i];
        let h = c.hb.get_or_insert_with(|| Box::new(self.new_machine()));
        h.take(self.cfg.beat(), k, g, sent_at, now, c.since, self.cfg.beats);
        Ok(())
    }

    /// A heartbeat write lands on a lock's item, `slot`: whether it renewed the lease, and the
    /// `guid` it names revoked (none: no lock is held through these items).
    fn renew(&self, slot: &mut Option<Item>, guids: [G; 2], new: G) -> (bool, G) {
        // The broken variant writes whatever the item carries.
        let guids = match *slot {
            Some(it) if self.bug(Bug::RenewWithoutGuid) => [it.guid, guids[1]],
            _ => guids,
        };
        env::renewal(slot, &guids, new, self.cfg.lease)
    }

    /// Client `i` ends its lock as the addon does (`ending::Ending`), the item carrying any of
    /// `guids` (`taken`: another holder took the lock). With `hand_over`, its next acquisition
    /// of the lock waits for it, and is handed it.
    fn start_release(&self, s: &mut State, i: usize, guids: Vec<G>, taken: bool) -> Result<(), Violation> {
        let env = self.env(s, i);
        let c = &mut s.clients[i];
        let h = c.hb.as_ref().expect("the client's machine");
        let end = h.client.ending(LOCK, guids, taken, || new_guid(&mut c.seq, i), env.now);
        let k = self.key(s, i);
        self.begin(s, i, k, Task::end(Ending::start(self.lock(), end, &env)))
    }

    /// A timer or timeout of a client is due: it fires before time goes on.
    fn due(&self, s: &State, c: &Client) -> bool {
        !matches!(c.phase, Phase::Crashed { .. })
            && (env::due(c.net.as_ref(), c.wake, s.now)
                || c.hb
                    .as_ref()
                    .is_some_and(|h| h.due(true) && h.wake().is_some_and(|w| w <= s.now))
                || c.undos.iter().any(|(_, _, n)| n.timeout_at <= s.now))
    }

    /// Whether time going on can change anything.
    fn time_matters(&self, s: &State) -> bool {
        s.now < self.cfg.horizon
            && s.clients.iter().any(|c| {
                !matches!(c.phase, Phase::Crashed { .. })
                    // An undo's pause between rounds (seconds) outlasts every run.
                    && (c.net.is_some()
                        || c.wake.is_some_and(|w| c.piece.is_some() || w < self.cfg.horizon)
                        || !c.undos.is_empty()
                        || c.hb.as_ref().is_some_and(|h| h.due(true) || h.net.is_some())
                        || matches!(c.phase, Phase::Holding { until: Some(u), .. } if u > s.now))
            })
    }

    /// Client `i` believes it holds lock `k`.
    fn believes(&self, s: &State, i: usize, k: u8) -> bool {
        match s.clients[i].phase {
            Phase::Holding { k: hk, until, .. } => hk == k && until.is_none_or(|u| s.now < u),
            _ => false,
        }
    }

    /// Time goes on a tick; a request whose answer is still to come past its `slow_at` is
    /// slower than a request timeout.
    fn pass_time(&self, s: &mut State) {
        s.now += 1;
        let now = s.now;
        s.slow |= s
            .clients
            .iter()
            .filter_map(|c| c.net.as_ref())
            .any(|n| n.state != NetState::Lost && n.sent.slow_at < now);
    }

    /// Client `i` starts acquiring lock `k`.
    fn start(&self, s: &mut State, i: usize, k: u8) -> Result<(), Violation> {
        let env = self.env(s, i);
        let cl = &mut s.clients[i];
        cl.left -= 1;
        cl.released = None;
        cl.failed = None;
        cl.cancelled = false;
        let g = new_guid(&mut cl.seq, i);
        let mut lock = self.lock();
        if i != 0 {
            // The others keep trying, so that liveness can ask whether a waiter
            // that keeps trying gets the lock.
            lock.retry_count = u32::MAX;
        }
        cl.phase = Phase::Acquiring { k, g };
        cl.since = s.now;
        if self.hands_over(i) {
            let h = cl.hb.get_or_insert_with(|| Box::new(self.new_machine()));
            let place = h.client.line_join(&k, Time::ZERO);
            debug_assert_eq!(place, Place::Head, "one acquisition at a time");
        }
        let task = match self.cfg.kind {
            _ if self.cfg.original => Task::original(original::Acquire::start(lock, g, &env)),
            Kind::FailClosed => Task::closed(fail_closed::Acquire::start(lock, g, None, &env)),
            _ => Task::open(fail_open::Acquire::start(lock, g, None, &env)),
        };
        self.begin(s, i, k, task)
    }

    /// Client `i` calls `release()`.
    fn release(&self, s: &mut State, i: usize) -> Result<(), Violation> {
        let Phase::Holding { k, g, token, .. } = s.clients[i].phase else {
            unreachable!()
        };
        s.clients[i].phase = Phase::Releasing { k, g };
        if self.cfg.original {
            let env = self.env(s, i);
            let token = (self.cfg.kind != Kind::FailClosed).then_some(u64::from(token));
            // The addon's end of a lock taken with the original's requests: its one release
            // request (`Ending::original`), which goes by nothing else the client knows.
            self.begin(s, i, k, Task::end(Ending::original(self.lock(), g, token, &env)))
        } else {
            // Between attempts the heartbeat stops at once; a write on the wire is
            // waited for.
            let h = s.clients[i].hb.as_mut().expect("the client's machine");
            match h.release(self.cfg.kind, s.now) {
                held::Release::Wait { .. } => Ok(()),
                held::Release::Write { guids, taken } => self.start_release(s, i, guids, taken),
                held::Release::Done | held::Release::NotOurs => unreachable!("released once"),
            }
        }
    }

    /// Event `e` happens to the request of client `i`'s undo `j` (`Client::undos`).
    fn undo_event(&self, s: &mut State, i: usize, j: usize, e: Event) -> Result<(), Violation> {
        let (id, k, net) = &mut s.clients[i].undos[j];
        let (id, k, req) = (*id, *k, net.sent.req.clone());
        let answer = match (e, &net.state) {
            (Event::Land, _) => {
                let ans = self.apply(s, k, &req);
                s.clients[i].undos[j].2.state = NetState::Landed(ans);
                return Ok(());
            }
            (Event::Lose, _) => {
                s.left.faults -= 1;
                net.state = NetState::Lost;
                return Ok(());
            }
            (Event::Answer, NetState::Landed(a)) => a.clone(),
            (Event::TimeOut, _) => env::TIMED_OUT,
            _ => unreachable!("an undo's request lands, is lost, answered or timed out"),
        };
        let env = self.env(s, i);
        let c = &mut s.clients[i];
        c.undos.remove(j);
        c.work.handle_reply(id, answer, &env);
        self.carry(s, i)
    }

    /// Heartbeat event `e` happens to client `i` (`Due`: `Beats::due` said the lock needs
    /// another heartbeat, or has one under way), and what it asks for is carried out, as the
    /// addon's scheduler does.
    fn beat(&self, s: &mut State, i: usize, e: BeatEvent) -> Result<(), Violation> {
        let (now, k) = (s.now, self.key(s, i));
        let c = &mut s.clients[i];
        let h = c.hb.as_mut().expect("heartbeats");
        let seq = &mut c.seq;
        let renew = |gs, new| self.renew(&mut s.items[k as usize], gs, new);
        let carried = h.happen(e, now, &mut s.left.faults, || new_guid(seq, i), renew);
        c.stray = c.stray.or(carried.abandoned.map(|(gs, new)| (k, gs, new)));
        if let (Phase::Holding { until: u, .. }, Some(until)) = (&mut c.phase, carried.until(now)) {
            *u = Some(until);
        }
        match carried.release {
            Some(held::Release::Write { guids, taken }) => self.start_release(s, i, guids, taken),
            _ => Ok(()),
        }
    }

    /// The time a lock went free matters only while it stays free and liveness is checked.
    fn forget_freed(&self, s: &mut State) {
        let checked = self.cfg.kind == Kind::FailClosed && s.left.faults == self.cfg.faults && !s.slow;
        for k in 0..self.cfg.locks {
            if !checked || s.items[k].is_some() {
                s.freed_at[k] = 0;
            }
        }
    }
}

impl Model for Machines {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        vec![State {
            now: 0,
            items: vec![None; self.cfg.locks],
            clients: (0..self.cfg.clients)
                .map(|i| {
                    let hand_overs = u8::from(self.hands_over(i));
                    Client {
                        hand_overs,
                        left: self.cfg.acquisitions,
                        ..Client::default()
                    }
                })
                .collect(),
            left: Left::new(self.cfg.faults, self.cfg.crashes),
            last_token: vec![0; self.cfg.locks],
            slow: false,
            freed_at: vec![0; self.cfg.locks],
            cancels: self.cfg.cancels,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let mut due = false;
        for (i, c) in s.clients.iter().enumerate() {
            let ci = i as u8;
            if c.stray.is_some() {
                out.push(Action::StrayLand(ci));
                out.push(Action::StrayGone(ci));
            }
            if matches!(c.phase, Phase::Crashed { .. }) {
                continue;
            }
            due |= self.due(s, c);
            Event::may_happen(c.net.as_ref(), c.wake, s.now, s.left.faults, |e| {
                out.push(Action::Event(ci, e))
            });
            for (j, (_, _, n)) in c.undos.iter().enumerate() {
                let mut undo = |e| out.push(Action::Undo(ci, j as u8, e));
                match n.state {
                    _ if n.timeout_at <= s.now => undo(Event::TimeOut),
                    NetState::Out => {
                        undo(Event::Land);
                        if s.left.faults > 0 {
                            undo(Event::Lose);
                        }
                    }
                    NetState::Landed(_) => undo(Event::Answer),
                    NetState::Lost => {}
                }
            }
            if let Some(h) = &c.hb {
                h.may_happen(true, s.now, s.left.faults, |e| out.push(Action::Beat(ci, e)));
            }
            Event::may_crash(s.left.crashes, c.net.as_ref(), |e| out.push(Action::Event(ci, e)));
            match c.phase {
                // A client's first acquisition starts at the beginning; a later one at any time.
                Phase::Idle if c.left > 0 && (s.now == 0 || c.left < self.cfg.acquisitions) => {
                    for k in 0..self.cfg.locks as u8 {
                        out.push(Action::Start(ci, k));
                    }
                }
                Phase::Holding { .. } if s.now >= c.since + self.cfg.min_hold => {
                    out.push(Action::Release(ci));
                    if c.hand_overs > 0 {
                        out.push(Action::HandOver(ci));
                    }
                }
                Phase::Releasing { .. } if self.cfg.gives_up && c.waiter.is_some() => out.push(Action::GiveUp(ci)),
                Phase::Acquiring { .. } if s.cancels > 0 && !c.cancelled => out.push(Action::Cancel(ci)),
                _ => {}
            }
        }
        if !due && self.time_matters(s) {
            out.push(Action::Tick);
        }
    }

    fn next(&self, s: &State, a: &Action) -> Result<State, Violation> {
        broken::set(match self.cfg.bug {
            Some(Bug::Core(b)) => Some(b),
            _ => None,
        });
        let mut s = s.clone();
        match *a {
            Action::Tick => self.pass_time(&mut s),
            Action::Start(c, k) => self.start(&mut s, c as usize, k)?,
            Action::Cancel(c) => self.cancel(&mut s, c as usize)?,
            Action::Event(c, e) => env::happen(self, &mut s, c as usize, e)?,
            Action::Release(c) => self.release(&mut s, c as usize)?,
            Action::HandOver(c) => {
                // The next acquisition joins the line, then the holder calls `release()`.
                let k = self.key(&s, c as usize);
                let cl = &mut s.clients[c as usize];
                cl.hand_overs -= 1;
                let h = cl.hb.as_mut().expect("the client's machine");
                match h.client.line_join(&k, Time::ZERO) {
                    Place::Queued(w) => cl.waiter = Some(w),
                    // The lock was lost, and its line ended: the acquisition leads a new one
                    // and tries for itself, which the model follows no further.
                    Place::Head => {
                        h.client.line_turn_unused(&k);
                        self.carry_line(cl);
                    }
                }
                self.release(&mut s, c as usize)?
            }
            Action::GiveUp(c) => {
                let k = self.key(&s, c as usize);
                let c = &mut s.clients[c as usize];
                if let (Some(h), Some(w)) = (c.hb.as_mut(), c.waiter.take()) {
                    h.client.line_quit(&k, w);
                }
            }
            Action::Undo(c, j, e) => self.undo_event(&mut s, c as usize, j as usize, e)?,
            Action::Beat(c, e) => {
                self.beat(&mut s, c as usize, e)?;
                // A lock its heartbeat lost leaves its line.
                self.carry_line(&mut s.clients[c as usize]);
            }
            Action::StrayLand(c) => {
                let (k, gs, new) = s.clients[c as usize].stray.take().unwrap();
                s.slow = true;
                self.renew(&mut s.items[k as usize], gs, new);
            }
            Action::StrayGone(c) => s.clients[c as usize].stray = None,
        }
        self.forget_freed(&mut s);
        Ok(s)
    }

    fn invariant(&self, s: &State) -> Result<(), Violation> {
        env::mutual_exclusion(self.cfg.locks, self.cfg.clients, s.now, |i, k| self.believes(s, i, k))?;
        let open = self.cfg.kind != Kind::FailClosed;
        for (i, c) in s.clients.iter().enumerate() {
            if let Some((k, lo, hi)) = c.released {
                let item = s.items[k as usize];
                if item.is_some_and(|it| (lo..=hi).contains(&it.guid) && !(open && it.released)) {
                    return Err(env::lost_release(i, k));
                }
            }
            if let Some((k, g)) = c.failed {
                let undoing = c.work.undoing(&k, &g);
                let item = s.items[k as usize];
                if !undoing && item.is_some_and(|it| it.guid == g && !it.released) {
                    return Err(env::orphan(i, k, "the item"));
                }
            }
        }
        self.check_liveness(s)
    }
}

impl Clients for Machines {
    type Sent = Sent;

    fn wire(s: &mut State, i: usize) -> (&mut Left, &mut Option<Net>, &mut Option<Tick>) {
        let c = &mut s.clients[i];
        (&mut s.left, &mut c.net, &mut c.wake)
    }

    fn apply_sent(&self, s: &mut State, i: usize, sent: &Sent) -> Ans {
        let k = self.key(s, i);
        self.apply(s, k, &sent.req)
    }

    fn resume(&self, s: &mut State, i: usize, a: Option<Ans>) -> Result<(), Violation> {
        let env = self.env(s, i);
        let c = &mut s.clients[i];
        match (a, c.piece) {
            (Some(a), Some(id)) => c.work.handle_reply(id, a, &env),
            (Some(_), None) => unreachable!("an answer to the current piece's request"),
            (None, _) => c.work.handle_timeout(&env),
        }
        self.carry(s, i)
    }

    /// A request that was not lost, timed out: it was slower than its timeout.
    fn timed_out(&self, s: &mut State, was: &NetState) {
        s.slow |= *was != NetState::Lost;
    }

    /// A crashed client keeps its guids' sequence and a heartbeat write on its way (which
    /// may still land), and nothing else.
    fn crashed(&self, s: &mut State, i: usize) {
        let k = self.key(s, i);
        let c = &s.clients[i];
        let unlanded = c.hb.as_ref().and_then(|h| h.unlanded());
        let stray = c.stray.or(unlanded.map(|(gs, new)| (k, gs, new)));
        s.clients[i] = Client {
            phase: Phase::Crashed { at: s.now },
            seq: c.seq,
            stray,
            ..Client::default()
        };
    }
}

impl Machines {
    /// The lock client `i`'s machine works on.
    fn key(&self, s: &State, i: usize) -> u8 {
        match s.clients[i].phase {
            Phase::Acquiring { k, .. } | Phase::Releasing { k, .. } | Phase::Holding { k, .. } => k,
            _ => 0,
        }
    }

    /// Bounded liveness: a FailOpen lock whose holder crashed is granted, within a lease and
    /// three request timeouts of the crash (or of the start of the acquisition, if later), to
    /// a client that keeps trying, when no fault happened and no request was slower than its
    /// timeout.
    fn check_liveness(&self, s: &State) -> Result<(), Violation> {
        if s.left.faults != self.cfg.faults || s.slow {
            return Ok(());
        }
        if self.cfg.kind == Kind::FailClosed {
            return self.check_closed_liveness(s);
        }
        // Refused (a round trip), a lease waited from then, a re-read out at the deadline, and
        // the take: three round trips, each within a request timeout. The original's sequence
        // takes one more: a read that came before the holder's put, the put refused, the read
        // that sees the holder, a lease waited from then, and the put.
        let round_trips = if self.cfg.original { 4 } else { 3 };
        let bound = self.cfg.lease + round_trips * self.cfg.request_timeout + 1;
        for k in 0..self.cfg.locks {
            // The item is still the one a crashed holder left.
            let Some(it) = s.items[k].filter(|it| !it.released && it.guid != 0) else {
                continue;
            };
            if let Phase::Crashed { at } = s.clients[owner(it.guid)].phase {
                self.served_within(s, k, at, "'s holder crashed at", |_| bound)?;
            }
        }
        Ok(())
    }

    /// Bounded liveness, FailClosed: a lock whose item is gone is granted, within a waiter's
    /// pause after waiting as long as it had (the core's `reread_interval`, or the next
    /// attempt if sooner) and three request timeouts of its going (or of the start of the
    /// acquisition, if later), to a client that keeps trying, when no fault happened.
    fn check_closed_liveness(&self, s: &State) -> Result<(), Violation> {
        let lock = self.lock();
        for k in 0..self.cfg.locks {
            if s.items[k].is_some() {
                continue;
            }
            let at = s.freed_at[k];
            self.served_within(s, k, at, " is free since", |c| {
                let waited = Duration::from_millis(at.saturating_sub(c.since).into());
                let pause = lock.reread_interval(true, waited).min(lock.acquire_period);
                let pause = Tick::try_from(pause.as_millis()).unwrap_or(Tick::MAX);
                pause.saturating_add(3 * self.cfg.request_timeout + 1)
            })?;
        }
        Ok(())
    }

    /// Liveness for lock `k`, which `happened` (told after the lock's id) at tick `at`: no
    /// client but 0 still acquires it `bound` ticks after `at`, or after its acquisition
    /// started if later.
    fn served_within(
        &self,
        s: &State,
        k: usize,
        at: Tick,
        happened: &str,
        bound: impl Fn(&Client) -> Tick,
    ) -> Result<(), Violation> {
        for (i, c) in s.clients.iter().enumerate().skip(1) {
            // A cancelled acquisition no longer keeps trying.
            let acquiring = matches!(c.phase, Phase::Acquiring { k: ak, .. } if ak as usize == k) && !c.cancelled;
            if acquiring && s.now > at.max(c.since).saturating_add(bound(c)) {
                let detail = format!(
                    "lock {k}{happened} tick {at}; at tick {} c{i} still waits for it",
                    s.now
                );
                return Err(Violation::new("liveness", detail));
            }
        }
        Ok(())
    }
}

/// Beyond this many states a run stops and reports itself incomplete. The protocol as it
/// ships is explored depth first, which keeps about 22 bytes a state (1.5 GB for the largest
/// run, three FailOpen clients, 71,743,822 states); a broken variant is explored breadth first
/// and caught within a few hundred thousand.
pub const MAX_STATES: usize = 80_000_000;

/// The configurations explored: the bounded ones of the test suite, or the full ones of
/// `npm run model`: per kind, two clients with two faults (one lock id over 18 ticks, two ids
/// over 16) and three clients; for FailOpen, holders that heartbeat, with one fault over 14
/// ticks; and the original's requests (user `dynamodb` objects), in the same environment.
pub fn configs(full: bool) -> Vec<Config> {
    use Kind::{FailClosed as C, FailOpen as O};
    // Each: its kind, the original's requests, clients, lock ids, faults, horizon, heartbeats a
    // holder, and whether client 0 hands over to its next acquisition.
    let bounded = [
        (C, true, 2, 1, 1, 14, 0, false),
        (O, true, 2, 1, 1, 14, 0, false),
        (C, false, 2, 1, 1, 14, 0, false),
        (O, false, 2, 1, 1, 14, 0, false),
        (O, false, 2, 1, 1, 8, 1, false),
        (O, false, 2, 1, 1, 10, 0, true),
    ];
    let full_ones = [
        (C, true, 2, 1, 2, 18, 0, false),
        (O, true, 2, 1, 2, 18, 0, false),
        (C, false, 2, 1, 2, 18, 0, false),
        (C, false, 2, 2, 2, 16, 0, false),
        (O, false, 2, 1, 2, 18, 0, false),
        (O, false, 2, 2, 2, 16, 0, false),
        // Three clients: FailClosed with a fault over 8 ticks; FailOpen, whose waits are
        // longer, with its crash but no fault over 9 (70 million states; over 10, many more).
        (C, false, 3, 1, 1, 8, 0, false),
        (O, false, 3, 1, 0, 9, 0, false),
        (O, false, 2, 1, 1, 14, 1, false),
        // Hand-over to the holder's own next acquisition, with heartbeats for FailOpen.
        (C, false, 2, 1, 1, 14, 0, true),
        (O, false, 2, 1, 1, 10, 1, true),
    ];
    let table: &[_] = if full { &full_ones } else { &bounded };
    let config = |&(kind, original, clients, locks, faults, horizon, beats, hand_over)| Config {
        original,
        clients,
        locks,
        faults,
        horizon,
        beats,
        hand_over,
        ..Config::new(kind)
    };
    // And per kind, an acquisition cancelled at any moment, with a fault (a write that may
    // have landed unseen when the cancellation comes) and without a crash; in the full runs,
    // with the crash too.
    let cancelled = |kind| Config {
        cancels: 1,
        crashes: u8::from(full),
        ..Config::new(kind)
    };
    (table.iter().map(config))
        .chain([cancelled(Kind::FailClosed), cancelled(Kind::FailOpen)])
        .collect()
}

/// The configuration a broken variant is checked in.
pub fn broken_config(bug: Bug) -> Config {
    let mut c = Config::new(bug.kind());
    c.bug = Some(bug);
    if bug == Bug::WaiterTrustsHolderClock {
        c.skew = 2;
    }
    if matches!(bug, Bug::RenewWithoutGuid | Bug::Core(Broken::ReleaseSkipsHeartbeat)) {
        c.beats = 1;
    }
    if matches!(
        bug,
        Bug::Core(Broken::CancelSkipsSettle | Broken::CancelledTakeSkipsSettle)
    ) {
        c.cancels = 1;
    }
    if matches!(
        bug,
        Bug::Core(Broken::HandOverLeaseFromReply | Broken::UnclaimedHandOverForgetsGuid | Broken::LineKeepsQuitter)
    ) {
        c.hand_over = true;
    }
    c
}

/// Action `a` taken in `s`, told as a counterexample's step: with the request it concerns.
pub fn tell(s: &State, a: &Action) -> String {
    let request = match *a {
        Action::Event(c, e) if e.on_the_wire() => {
            s.clients[c as usize].net.as_ref().map(|n| format!("{:?}", n.sent.req))
        }
        Action::Undo(c, j, _) => {
            (s.clients[c as usize].undos.get(j as usize)).map(|(_, _, n)| format!("{:?}", n.sent.req))
        }
        _ => None,
    };
    env::step_text(s.now, a, request)
}

/// Explores `cfg` (at most `max_states` states): the protocol as it ships depth first, a
/// broken variant breadth first (its shortest counterexample).
pub fn check(cfg: Config, max_states: usize) -> Checked<State> {
    explore::check(cfg.bug.is_none(), &Machines::new(cfg), max_states, tell)
}
