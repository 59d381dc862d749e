//! FailOpen and Fifo clients that acquire, heartbeat and release locks over a store of
//! `item.rs` items that only the core's `op::apply` changes, in an environment that loses
//! requests before or after they apply, loses or delays replies, throttles, delays any request
//! for any number of ticks (so requests of different clients land in any order), and crashes
//! clients.
//!
//! FailClosed, and FailOpen acquisition and release on their own, are checked through the
//! core's machines themselves (`machines.rs`). The clients here restate what is not yet a
//! machine of the core, each step following the code it names:
//! - `FailOpen`: the heartbeat's race with a release: `heartbeat::beat` (src/heartbeat.rs), and
//!   the release's wait for an in-flight heartbeat and its `guid` set, `HeldLock::release`
//!   (src/lock.rs); around them, acquisition as `fail_open::Acquire` in the core and release as
//!   `release::Release`.
//! - `Fifo` (src/fifo.rs): the uncontended `take_free`, the ticket of `Acquisition::enter`, the
//!   next-in-line part of `Queued::step` with `Queued::observe_head` and `Queued::grant`,
//!   `Queued::give_up` (releasing a grant that may have landed, giving the ticket back), and
//!   `release::release_head`; a granted head is held and heartbeated as a FailOpen lock. The
//!   queue of entries is over-approximated: any waiter with a ticket may be told at any moment
//!   that it is next in line (`Action::Look`), so the head's conditions alone must keep grants
//!   exclusive and in ticket order.
//! - Every request: per-attempt timeouts, bounded retries of transient failures, and the "may
//!   have applied" flag (`request::Attempts` in the core).
//!
//! Time is counted in ticks. Monotonic clocks (tokio `Instant`) advance together: their rate
//! drift over one lease is taken to be below one tick.

use std::fmt;

use crate::explore::{Model, Violation};
use dynamodb_lock_core::op::{self as core_op, Reply};

use crate::item::{Item, Ver, FIELDS, G};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    FailOpen,
    Fifo,
}

/// A deliberate break of the protocol, which the checker must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// FailOpen heartbeat that rotates `guid` without the condition that the item carries ours.
    RenewWithoutGuid,
    /// FailOpen release that does not wait for the heartbeat in flight: it writes with the
    /// `guid` it knows, and that heartbeat may land after it.
    ReleaseSkipsHeartbeat,
    /// Fifo grant without the condition that the head's token is below the ticket.
    FifoGrantIgnoresToken,
    /// Fifo acquisition that gives up without releasing a grant that may have landed unseen.
    FifoGiveUpKeepsGrant,
}

impl Bug {
    pub fn name(self) -> &'static str {
        match self {
            Bug::RenewWithoutGuid => "FailOpen heartbeat without the guid condition",
            Bug::ReleaseSkipsHeartbeat => "FailOpen release without waiting for the in-flight heartbeat",
            Bug::FifoGrantIgnoresToken => "Fifo grant without the token-below-ticket condition",
            Bug::FifoGiveUpKeepsGrant => "Fifo give-up that keeps a grant that may have landed",
        }
    }
    pub fn kind(self) -> Kind {
        match self {
            Bug::RenewWithoutGuid | Bug::ReleaseSkipsHeartbeat => Kind::FailOpen,
            Bug::FifoGrantIgnoresToken | Bug::FifoGiveUpKeepsGrant => Kind::Fifo,
        }
    }
    /// The property its counterexample violates.
    pub fn property(self) -> &'static str {
        match self {
            Bug::RenewWithoutGuid => "mutual exclusion",
            Bug::ReleaseSkipsHeartbeat => "no lost release",
            Bug::FifoGrantIgnoresToken => "fencing",
            Bug::FifoGiveUpKeepsGrant => "no orphan",
        }
    }
    pub const ALL: [Bug; 4] = [
        Bug::RenewWithoutGuid,
        Bug::ReleaseSkipsHeartbeat,
        Bug::FifoGrantIgnoresToken,
        Bug::FifoGiveUpKeepsGrant,
    ];
}

#[derive(Clone, Debug)]
pub struct Config {
    pub kind: Kind,
    pub clients: usize,
    pub locks: usize,
    /// Acquisitions each client makes.
    pub acquisitions: u8,
    /// Successful heartbeats a holder sends before it stops heartbeating (a holder that
    /// releases later sees its lease lapse first).
    pub beats: u8,
    /// Ticks.
    pub lease: u8,
    pub heartbeat: u8,
    pub reread: u8,
    /// `retryCount`.
    pub retry_count: u8,
    /// Attempts per request (`store::attempt`).
    pub max_attempts: u8,
    /// Lost, dropped or throttled requests and replies, in all.
    pub faults: u8,
    pub crashes: u8,
    /// A request lost before it landed may still land later, at any time (outside the
    /// model's assumptions: see `Client::ghost`).
    pub late_landing: bool,
    /// Ticks by which one client's monotonic clock may run ahead of real time in a run
    /// (outside the model's assumptions: rate drift is taken to be below one tick a lease).
    pub drift: u8,
    pub bug: Option<Bug>,
}

pub const MAX_CLIENTS: usize = 3;
pub const MAX_LOCKS: usize = 2;

/// The request a client has in flight, and the `attempt` state around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Net {
    pub op: Op,
    /// The store's answer, once the request has been applied.
    pub applied: Option<Answer>,
    pub attempt: u8,
    /// An attempt so far may have been applied (`Failed::ambiguous`).
    pub ambiguous: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Get(u8),
    Take(u8, G, Option<Ver>),
    Renew(u8, [G; 2], G),
    Release(u8, [G; 2]),
    FifoTakeFree(u8, G),
    FifoTicket(u8),
    /// Lock, guid, ticket, position, waited-out version.
    FifoGrant(u8, G, u8, u8, Option<Ver>),
    /// Lock, ticket, position, previous ticket.
    FifoUntake(u8, u8, u8, u8),
}

impl Op {
    fn lock(self) -> u8 {
        match self {
            Op::Get(k)
            | Op::Take(k, _, _)
            | Op::Renew(k, _, _)
            | Op::Release(k, _)
            | Op::FifoTakeFree(k, _)
            | Op::FifoTicket(k)
            | Op::FifoGrant(k, ..)
            | Op::FifoUntake(k, ..) => k,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    Done,
    Token(u8),
    Read(Option<Item>),
    Refused(Option<Item>),
}

/// What a request's caller gets from `attempt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok(Answer),
    /// `ConditionFailed`, and whether an earlier attempt may have applied.
    Refused(Option<Item>, bool),
    /// A transient failure after the last attempt.
    Failed {
        ambiguous: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Idle,
    Crashed,
    /// The acquisition write is in flight. `lease`: ticks left of a lease counted from when it
    /// was first sent (`Taken::sent_at`).
    Taking {
        k: u8,
        g: G,
        waited: Option<Ver>,
        retries: u8,
        lease: u8,
    },
    /// Reading the item after an acquisition write failed ambiguously.
    TakeRead {
        k: u8,
        g: G,
        lease: u8,
    },
    /// FailOpen `wait_out`: waiting `deadline` more ticks for `target` to lapse, re-reading every
    /// `reread`; `newer`: a renewed version seen `age` ticks ago.
    Waiting {
        k: u8,
        g: G,
        target: Ver,
        deadline: u8,
        newer: Option<(Ver, u8)>,
        retries: u8,
        reread: u8,
    },
    Holding {
        k: u8,
        g: G,
        /// A `guid` a heartbeat may have written (`LockState::pending`).
        pending: G,
        token: u8,
        /// Ticks left of the lease on this client's clock (FailOpen).
        lease: u8,
        hb_due: u8,
        /// Ticks left of the lease the heartbeat in flight would give (counted from its start).
        hb_lease: u8,
        beats: u8,
        lost: bool,
        /// `release()` was called; it waits for the heartbeat in flight.
        stopping: bool,
    },
    /// Fifo: taking a ticket and a queue position (`fifo_ticket`).
    FifoTicket {
        k: u8,
        g: G,
    },
    /// Fifo `Queued::step` once next in line: the ticket `t` at position `pos` (`prev`: the
    /// ticket before it), the last grant position `gp` and head token `ht` seen, the head
    /// version watched and for how long, whether a grant may have landed unseen, and the lease
    /// left counted from the last grant sent.
    FifoWait {
        k: u8,
        g: G,
        t: u8,
        pos: u8,
        prev: u8,
        gp: u8,
        ht: u8,
        watch: Option<(Ver, u8)>,
        maybe: bool,
        lease: u8,
    },
    /// Fifo `Queued::give_up`: releasing a grant that may have landed (`release`), then giving
    /// the ticket back.
    FifoGiveUp {
        k: u8,
        g: G,
        t: u8,
        pos: u8,
        prev: u8,
        release: bool,
    },
    /// The release write is in flight, with every `guid` the item may carry.
    Releasing {
        k: u8,
        guids: [G; 2],
    },
    /// Reading the item after a release failed ambiguously.
    ReleaseRead {
        k: u8,
        guids: [G; 2],
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub phase: Phase,
    pub left: u8,
    pub seq: u8,
    pub main: Option<Net>,
    pub hb: Option<Net>,
    /// `undo_later` in the background: the lock and `guid` to remove, and its request.
    pub undo: Option<(u8, G, Net)>,
    /// The last release reported successful (lock, and whether the lock was lost before).
    pub released: Option<(u8, bool)>,
    /// The last acquisition reported as not acquired (lock, `guid`).
    pub failed: Option<(u8, G)>,
    /// With `late_landing`: a timed-out request still on its way, which may land at any time.
    pub ghost: Option<Op>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub items: [Option<Item>; MAX_LOCKS],
    pub clients: [Client; MAX_CLIENTS],
    pub faults: u8,
    pub crashes: u8,
    pub drift: u8,
    /// The token of the last holder granted each lock (a history variable for fencing).
    pub last_token: [u8; MAX_LOCKS],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Main,
    Heartbeat,
    Undo,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start(u8, u8),
    Apply(u8, Slot),
    Reply(u8, Slot),
    DropRequest(u8, Slot),
    Throttle(u8, Slot),
    LoseReply(u8, Slot),
    Tick,
    Release(u8),
    Beat(u8),
    Deadline(u8),
    Reread(u8),
    Crash(u8, bool),
    GhostLands(u8),
    /// This client's clock runs one tick ahead of real time.
    Drift(u8),
    /// Fifo: the queue says this waiter is next in line; it reads the head.
    Look(u8),
    /// Fifo: the acquisition's wait ends (`waitMs`, or an abort).
    GiveUp(u8),
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Start(c, k) => write!(f, "c{c} starts acquiring lock {k}"),
            Action::Apply(c, s) => write!(f, "c{c}'s {s:?} request lands"),
            Action::Reply(c, s) => write!(f, "c{c} gets the {s:?} reply"),
            Action::DropRequest(c, s) => write!(f, "c{c}'s {s:?} request is lost before it lands (timeout)"),
            Action::Throttle(c, s) => write!(f, "c{c}'s {s:?} request is throttled"),
            Action::LoseReply(c, s) => write!(f, "c{c}'s {s:?} reply is lost after it landed (timeout)"),
            Action::Tick => write!(f, "tick"),
            Action::Release(c) => write!(f, "c{c} calls release()"),
            Action::Beat(c) => write!(f, "c{c} heartbeat due"),
            Action::Deadline(c) => write!(f, "c{c}'s wait ends"),
            Action::Reread(c) => write!(f, "c{c} re-reads"),
            Action::Crash(c, landed) => write!(f, "c{c} crashes (requests in flight land: {landed})"),
            Action::GhostLands(c) => write!(f, "c{c}'s timed-out request lands late"),
            Action::Drift(c) => write!(f, "c{c}'s clock runs one tick ahead"),
            Action::Look(c) => write!(f, "c{c} is next in line and reads the head"),
            Action::GiveUp(c) => write!(f, "c{c} stops waiting"),
        }
    }
}

pub struct LockModel {
    pub cfg: Config,
}

impl LockModel {
    /// The steps of `path` from the initial state, each with the request it concerns.
    pub fn narrate(&self, path: &[Action]) -> Vec<String> {
        let mut s = self.init().remove(0);
        let mut out = Vec::new();
        for a in path {
            let op = match *a {
                Action::Apply(c, slot)
                | Action::Reply(c, slot)
                | Action::DropRequest(c, slot)
                | Action::Throttle(c, slot)
                | Action::LoseReply(c, slot) => Self::slot(&s.clients[c as usize], slot).map(|n| n.op),
                Action::GhostLands(c) => s.clients[c as usize].ghost,
                _ => None,
            };
            out.push(match op {
                Some(op) => format!("{a:?}: {op:?}"),
                None => format!("{a:?}"),
            });
            match self.next(&s, a) {
                Ok(n) => s = n,
                Err(_) => break,
            }
        }
        out
    }
}

/// A waiter that never gives up (`retryCount` without bound).
pub const UNLIMITED: u8 = u8::MAX;

/// One failed attempt off `retries`; `None` when none was left.
fn spend(retries: u8) -> Option<u8> {
    match retries {
        UNLIMITED => Some(UNLIMITED),
        r => r.checked_sub(1),
    }
}

fn owner(g: G) -> usize {
    (g / 16) as usize
}

fn send(op: Op) -> Option<Net> {
    Some(Net {
        op,
        applied: None,
        attempt: 1,
        ambiguous: false,
    })
}

fn guids_of(g: G, pending: G) -> [G; 2] {
    [g, pending]
}

/// Applies the model's request `op` to `slot` through the core's `op::apply`.
fn apply(slot: &mut Option<Item>, op: Op) -> Answer {
    let core = match &op {
        Op::Get(_) => core_op::Op::Get,
        Op::Take(_, g, w) => core_op::Op::Take {
            fields: &FIELDS,
            guid: g,
            waited_out: w.as_ref(),
            clear_mark: false,
        },
        Op::Renew(_, gs, new) => core_op::Op::Renew {
            guids: gs,
            new_guid: new,
            fields: &FIELDS,
        },
        Op::Release(_, gs) => core_op::Op::Release {
            guids: gs,
            lock_acquired_time_unix_ms: None,
            ttl: None,
        },
        Op::FifoTakeFree(_, g) => core_op::Op::FifoTakeFree {
            fields: &FIELDS,
            guid: g,
        },
        Op::FifoTicket(_) => core_op::Op::FifoTicket,
        Op::FifoGrant(_, g, t, pos, w) => core_op::Op::FifoGrant {
            fields: &FIELDS,
            guid: g,
            ticket: (*t).into(),
            position: (*pos).into(),
            waited_out: w.as_ref(),
        },
        Op::FifoUntake(_, t, pos, prev) => core_op::Op::FifoUntake {
            ticket: (*t).into(),
            position: (*pos).into(),
            previous_ticket: (*prev).into(),
        },
    };
    let (after, reply) = core_op::apply(&core, *slot);
    *slot = after;
    match reply {
        Reply::Done | Reply::WaitingMark(_) | Reply::HandedOver(_) => Answer::Done,
        Reply::Token(t) => Answer::Token(u8::try_from(t).expect("the model's tokens stay below 256")),
        Reply::Before(i) => Answer::Read(i),
        Reply::Refused(i) => Answer::Refused(i),
    }
}

impl LockModel {
    pub fn new(cfg: Config) -> Self {
        assert!(cfg.clients <= MAX_CLIENTS && cfg.locks <= MAX_LOCKS);
        LockModel { cfg }
    }

    fn bug(&self, b: Bug) -> bool {
        self.cfg.bug == Some(b)
    }

    fn fifo(&self) -> bool {
        self.cfg.kind == Kind::Fifo
    }

    fn new_guid(c: &mut Client, i: usize) -> G {
        c.seq += 1;
        assert!(c.seq < 16, "guid space");
        (i as u8) * 16 + c.seq
    }

    /// Applies `op` to the store through the core's `op::apply` (with a broken variant's change
    /// around it).
    fn apply(&self, s: &mut State, op: Op) -> Answer {
        let slot = &mut s.items[op.lock() as usize];
        match op {
            Op::Renew(_, _, new) if self.bug(Bug::RenewWithoutGuid) => {
                if let Some(i) = *slot {
                    return apply(slot, Op::Renew(op.lock(), [i.guid, 0], new));
                }
            }
            Op::FifoGrant(k, g, t, pos, w) if self.bug(Bug::FifoGrantIgnoresToken) => {
                if let Some(h) = slot.as_mut() {
                    // The condition no longer sees the token.
                    let token = h.token;
                    h.token = 0;
                    let a = apply(slot, Op::FifoGrant(k, g, t, pos, w.map(|(wg, _)| (wg, 0))));
                    if let (Answer::Refused(_), Some(h)) = (a, slot.as_mut()) {
                        h.token = token;
                        return Answer::Refused(*slot);
                    }
                    return a;
                }
            }
            _ => {}
        }
        apply(slot, op)
    }

    /// The `attempt` loop around a request whose attempt ended in `a` (an answer) or in a
    /// transient failure (`ambiguous`: it may have landed). `None`: it is sent again.
    fn attempt(&self, net: &mut Net, a: Result<Answer, bool>, max: u8) -> Option<Outcome> {
        match a {
            Ok(Answer::Refused(cur)) => Some(Outcome::Refused(cur, net.ambiguous)),
            Ok(a) => Some(Outcome::Ok(a)),
            Err(amb) => {
                net.ambiguous |= amb;
                if net.attempt >= max {
                    Some(Outcome::Failed {
                        ambiguous: net.ambiguous,
                    })
                } else {
                    net.attempt += 1;
                    net.applied = None;
                    None
                }
            }
        }
    }

    fn hold(&self, s: &mut State, i: usize, k: u8, g: G, token: u8, lease: u8) -> Result<(), Violation> {
        // A grant whose lease already ran out on the grantee's clock (its reply came later than
        // a lease after its send) is not a holder: it never believes it holds.
        if lease > 0 {
            let last = s.last_token[k as usize];
            if token <= last {
                return Err(Violation {
                    property: "fencing",
                    detail: format!("c{i} granted lock {k} with token {token} after a holder with token {last}"),
                });
            }
            s.last_token[k as usize] = token;
        }
        s.clients[i].phase = Phase::Holding {
            k,
            g,
            pending: 0,
            token,
            lease,
            hb_due: self.cfg.heartbeat,
            hb_lease: 0,
            beats: self.cfg.beats,
            lost: false,
            stopping: false,
        };
        Ok(())
    }

    /// The acquisition reports "not acquired"; with `undo`, `undo_later` runs in the background.
    fn not_acquired(&self, s: &mut State, i: usize, k: u8, g: G, undo: bool) {
        let c = &mut s.clients[i];
        c.phase = Phase::Idle;
        c.failed = Some((k, g));
        if undo {
            c.undo = Some((k, g, send(Op::Release(k, [g, 0])).unwrap()));
        }
    }

    fn release_done(&self, s: &mut State, i: usize, k: u8, lost: bool) {
        let c = &mut s.clients[i];
        c.phase = Phase::Idle;
        c.released = Some((k, lost));
    }

    fn start_take(&self, s: &mut State, i: usize, k: u8, g: G, waited: Option<Ver>, retries: u8) {
        let c = &mut s.clients[i];
        c.phase = Phase::Taking {
            k,
            g,
            waited,
            retries,
            lease: self.cfg.lease,
        };
        c.main = send(match self.cfg.kind {
            Kind::FailOpen => Op::Take(k, g, waited),
            Kind::Fifo => Op::FifoTakeFree(k, g),
        });
    }

    fn start_wait(&self, s: &mut State, i: usize, k: u8, g: G, held: Item, retries: u8) {
        s.clients[i].phase = Phase::Waiting {
            k,
            g,
            target: held.version(),
            deadline: self.cfg.lease,
            newer: None,
            retries,
            reread: self.cfg.reread,
        };
    }

    /// The main request's outcome, handed to the phase that sent it.
    fn on_main(&self, s: &mut State, i: usize, out: Outcome) -> Result<(), Violation> {
        let phase = s.clients[i].phase;
        let net_op = s.clients[i].main.map(|n| n.op);
        s.clients[i].main = None;
        match phase {
            Phase::Taking {
                k,
                g,
                waited,
                retries,
                lease,
            } => match out {
                Outcome::Ok(Answer::Token(t)) => self.hold(s, i, k, g, t, lease),
                Outcome::Ok(_) => self.hold(s, i, k, g, 0, lease),
                Outcome::Refused(cur, _) => {
                    if let Some(cur) = cur.filter(|c| c.guid == g) {
                        return self.hold(s, i, k, g, cur.token, lease);
                    }
                    if self.fifo() {
                        // `take_free` refused: to the queue.
                        s.clients[i].phase = Phase::FifoTicket { k, g };
                        s.clients[i].main = send(Op::FifoTicket(k));
                    } else {
                        self.open_refused(s, i, k, g, cur, waited, retries);
                    }
                    Ok(())
                }
                Outcome::Failed { ambiguous } => {
                    if ambiguous {
                        s.clients[i].phase = Phase::TakeRead { k, g, lease };
                        s.clients[i].main = send(Op::Get(k));
                    } else {
                        self.not_acquired(s, i, k, g, false);
                    }
                    Ok(())
                }
            },
            Phase::TakeRead { k, g, lease } => match out {
                Outcome::Ok(Answer::Read(Some(r))) if r.guid == g => self.hold(s, i, k, g, r.token, lease),
                Outcome::Ok(_) | Outcome::Refused(..) => {
                    self.not_acquired(s, i, k, g, false);
                    Ok(())
                }
                Outcome::Failed { .. } => {
                    // Fifo's `take_free` leaves an unread outcome to the lease.
                    self.not_acquired(s, i, k, g, !self.fifo());
                    Ok(())
                }
            },
            Phase::FifoTicket { k, g } => {
                match out {
                    Outcome::Ok(Answer::Read(before)) => {
                        let prev = core_op::last_ticket(before.as_ref()) as u8;
                        s.clients[i].phase = Phase::FifoWait {
                            k,
                            g,
                            t: prev + 1,
                            pos: before.and_then(|h| h.qn).unwrap_or(0) + 1,
                            prev,
                            gp: before.and_then(|h| h.qg).unwrap_or(0),
                            ht: before.map_or(0, |h| h.token),
                            watch: None,
                            maybe: false,
                            lease: 0,
                        };
                        // Taking the ticket changed none of the holder's attributes.
                        return self.fifo_observe(s, i, before);
                    }
                    _ => self.not_acquired(s, i, k, g, false),
                }
                Ok(())
            }
            Phase::FifoWait { maybe, .. } => {
                let grant = matches!(net_op, Some(Op::FifoGrant(..)));
                match out {
                    Outcome::Ok(Answer::Read(cur)) => return self.fifo_observe(s, i, cur),
                    Outcome::Ok(_) if grant => {
                        if let Phase::FifoWait { k, g, t, lease, .. } = phase {
                            return self.hold(s, i, k, g, t, lease);
                        }
                    }
                    Outcome::Refused(cur, ambiguous) if grant => {
                        if let Phase::FifoWait { watch, maybe: m, .. } = &mut s.clients[i].phase {
                            *watch = None;
                            *m = maybe || ambiguous;
                        }
                        return self.fifo_observe(s, i, cur);
                    }
                    Outcome::Failed { ambiguous } if grant => {
                        if let Phase::FifoWait { maybe: m, .. } = &mut s.clients[i].phase {
                            *m = maybe || ambiguous;
                        }
                    }
                    _ => {}
                }
                Ok(())
            }
            Phase::FifoGiveUp {
                k,
                g,
                t,
                pos,
                prev,
                release,
            } => {
                if release {
                    s.clients[i].phase = Phase::FifoGiveUp {
                        k,
                        g,
                        t,
                        pos,
                        prev,
                        release: false,
                    };
                    s.clients[i].main = send(Op::FifoUntake(k, t, pos, prev));
                } else {
                    self.not_acquired(s, i, k, g, false);
                }
                Ok(())
            }
            Phase::Waiting {
                k,
                g,
                target,
                deadline,
                newer,
                retries,
                reread,
            } => {
                // A failed re-read changes nothing: the deadline still decides.
                if let Outcome::Ok(Answer::Read(cur)) = out {
                    match cur {
                        None => self.start_take(s, i, k, g, Some(target), retries),
                        Some(r) if r.released => self.start_take(s, i, k, g, Some(target), retries),
                        Some(r) if r.token != target.1 => self.start_wait(s, i, k, g, r, retries),
                        Some(r) => {
                            let known = newer.map_or(target, |(v, _)| v);
                            let newer = if r.version() != known {
                                Some((r.version(), 0))
                            } else {
                                newer
                            };
                            s.clients[i].phase = Phase::Waiting {
                                k,
                                g,
                                target,
                                deadline,
                                newer,
                                retries,
                                reread,
                            };
                        }
                    }
                }
                Ok(())
            }
            Phase::Releasing { k, guids } => {
                match out {
                    Outcome::Ok(_) => self.release_done(s, i, k, false),
                    Outcome::Refused(..) => self.release_done(s, i, k, false),
                    Outcome::Failed { ambiguous } => {
                        if ambiguous {
                            s.clients[i].phase = Phase::ReleaseRead { k, guids };
                            s.clients[i].main = send(Op::Get(k));
                        } else {
                            s.clients[i].phase = Phase::Idle;
                        }
                    }
                }
                Ok(())
            }
            Phase::ReleaseRead { k, guids } => {
                match out {
                    Outcome::Ok(Answer::Read(cur)) => {
                        let ours = cur.is_some_and(|r| guids.contains(&r.guid) && !r.released);
                        if ours {
                            s.clients[i].phase = Phase::Idle;
                        } else {
                            self.release_done(s, i, k, false);
                        }
                    }
                    _ => s.clients[i].phase = Phase::Idle,
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `Queued::observe_head` and the next-in-line part of `Queued::step`, on a head item just
    /// read (or returned by a refused grant, or by the ticket).
    fn fifo_observe(&self, s: &mut State, i: usize, cur: Option<Item>) -> Result<(), Violation> {
        let Phase::FifoWait {
            k,
            g,
            t,
            pos,
            prev,
            mut gp,
            mut ht,
            watch,
            maybe,
            lease,
        } = s.clients[i].phase
        else {
            return Ok(());
        };
        if let Some(h) = cur {
            if h.guid == g && h.token == t && !h.released {
                return self.hold(s, i, k, g, t, lease);
            }
            gp = gp.max(h.qg.unwrap_or(0));
            ht = ht.max(h.token);
        }
        if ht >= t || gp >= pos {
            // `Step::Dead`: taken for dead, or granted past; this acquisition gives up.
            self.fifo_give_up(s, i, k, g, t, pos, prev, maybe);
            return Ok(());
        }
        let mut next = Phase::FifoWait {
            k,
            g,
            t,
            pos,
            prev,
            gp,
            ht,
            watch,
            maybe,
            lease,
        };
        let waited = if core_op::free(cur.as_ref()) {
            Some(None)
        } else {
            let ver = cur.unwrap().version();
            match watch {
                Some((v, age)) if v == ver => (age >= self.cfg.lease).then_some(Some(ver)),
                _ => {
                    if let Phase::FifoWait { watch, .. } = &mut next {
                        *watch = Some((ver, 0));
                    }
                    None
                }
            }
        };
        if let (Some(w), Phase::FifoWait { lease, .. }) = (waited, &mut next) {
            *lease = self.cfg.lease;
            s.clients[i].main = send(Op::FifoGrant(k, g, t, pos, w));
        }
        s.clients[i].phase = next;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn fifo_give_up(&self, s: &mut State, i: usize, k: u8, g: G, t: u8, pos: u8, prev: u8, maybe: bool) {
        let release = maybe && !self.bug(Bug::FifoGiveUpKeepsGrant);
        s.clients[i].phase = Phase::FifoGiveUp {
            k,
            g,
            t,
            pos,
            prev,
            release,
        };
        s.clients[i].main = send(if release {
            Op::Release(k, [g, 0])
        } else {
            Op::FifoUntake(k, t, pos, prev)
        });
    }

    /// `fail_open::acquire` after a refused take that did not meet our own write.
    #[allow(clippy::too_many_arguments)]
    fn open_refused(
        &self,
        s: &mut State,
        i: usize,
        k: u8,
        g: G,
        cur: Option<Item>,
        waited: Option<Ver>,
        mut retries: u8,
    ) {
        let Some(held) = cur.filter(|r| !r.released) else {
            // Lost a race for a free lock: try again at once.
            self.start_take(s, i, k, g, None, retries);
            return;
        };
        if let Some(v) = waited {
            if v.1 == held.token {
                match spend(retries) {
                    None => {
                        self.not_acquired(s, i, k, g, false);
                        return;
                    }
                    Some(r) => retries = r,
                }
            }
        }
        self.start_wait(s, i, k, g, held, retries);
    }

    /// The heartbeat's outcome (`heartbeat::beat`).
    fn on_heartbeat(&self, s: &mut State, i: usize, out: Outcome) {
        s.clients[i].hb = None;
        let Phase::Holding {
            k,
            g,
            pending,
            token,
            lease,
            hb_lease,
            beats,
            lost,
            stopping,
            ..
        } = s.clients[i].phase
        else {
            return; // the lock was released meanwhile (only the broken release does that)
        };
        let mut h = (g, pending, lease, lost);
        let mut resend = false;
        match out {
            Outcome::Ok(_) => h = (pending, 0, hb_lease, lost),
            Outcome::Refused(..) => h = (g, 0, lease, true),
            Outcome::Failed { .. } => {
                if lease == 0 {
                    h.3 = true;
                } else if !stopping {
                    resend = true;
                }
            }
        }
        let (g, pending, lease, lost) = h;
        s.clients[i].phase = Phase::Holding {
            k,
            g,
            pending,
            token,
            lease,
            hb_due: self.cfg.heartbeat,
            hb_lease,
            beats,
            lost,
            stopping,
        };
        if resend {
            s.clients[i].hb = send(Op::Renew(k, [g, pending], pending));
        } else if stopping {
            self.send_release(s, i);
        }
    }

    /// `HeldLock::release` once the state lock is free.
    fn send_release(&self, s: &mut State, i: usize) {
        let Phase::Holding {
            k, g, pending, lost, ..
        } = s.clients[i].phase
        else {
            return;
        };
        if lost {
            self.release_done(s, i, k, true);
            return;
        }
        let guids = guids_of(g, pending);
        s.clients[i].phase = Phase::Releasing { k, guids };
        s.clients[i].main = send(Op::Release(k, guids));
    }

    fn slot(c: &Client, slot: Slot) -> Option<Net> {
        match slot {
            Slot::Main => c.main,
            Slot::Heartbeat => c.hb,
            Slot::Undo => c.undo.map(|u| u.2),
        }
    }

    fn set_slot(c: &mut Client, slot: Slot, net: Option<Net>) {
        match slot {
            Slot::Main => c.main = net,
            Slot::Heartbeat => c.hb = net,
            Slot::Undo => c.undo = net.and_then(|n| c.undo.map(|(k, g, _)| (k, g, n))),
        }
    }

    /// A request's attempt ended: run `attempt`, then hand the outcome over.
    fn deliver(&self, s: &mut State, i: usize, slot: Slot, a: Result<Answer, bool>) -> Result<(), Violation> {
        let mut net = Self::slot(&s.clients[i], slot).expect("request in flight");
        let max = match slot {
            Slot::Heartbeat => 1,
            _ => self.cfg.max_attempts,
        };
        let Some(out) = self.attempt(&mut net, a, max) else {
            Self::set_slot(&mut s.clients[i], slot, Some(net));
            return Ok(());
        };
        match slot {
            Slot::Main => self.on_main(s, i, out),
            Slot::Heartbeat => {
                self.on_heartbeat(s, i, out);
                Ok(())
            }
            Slot::Undo => {
                let (k, g, _) = s.clients[i].undo.unwrap();
                match out {
                    // Undone, or nothing to undo.
                    Outcome::Ok(_) | Outcome::Refused(..) => s.clients[i].undo = None,
                    // `undo_later` tries again.
                    Outcome::Failed { .. } => {
                        let op = net.op;
                        s.clients[i].undo = Some((k, g, send(op).unwrap()));
                    }
                }
                Ok(())
            }
        }
    }

    fn tick(&self, s: &mut State) {
        for c in s.clients.iter_mut() {
            self.tick_client(c);
        }
    }

    /// One tick of this client's monotonic clock.
    fn tick_client(&self, c: &mut Client) {
        let lease = self.cfg.lease;
        {
            let dec = |x: &mut u8| *x = x.saturating_sub(1);
            match &mut c.phase {
                Phase::Taking { lease, .. } | Phase::TakeRead { lease, .. } => dec(lease),
                Phase::Waiting {
                    deadline,
                    newer,
                    reread,
                    ..
                } => {
                    dec(deadline);
                    dec(reread);
                    if let Some((_, age)) = newer {
                        *age = (*age + 1).min(lease);
                    }
                }
                Phase::FifoWait { watch, lease: l, .. } => {
                    dec(l);
                    if let Some((_, age)) = watch {
                        *age = (*age + 1).min(lease);
                    }
                }
                Phase::Holding {
                    lease,
                    hb_due,
                    hb_lease,
                    ..
                } => {
                    dec(lease);
                    dec(hb_due);
                    dec(hb_lease);
                }
                _ => {}
            }
        }
    }

    /// A timer of this client is due: it fires before time goes on. (A process slow to act is
    /// covered by the unbounded delay of the request it then sends.)
    fn due(&self, c: &Client) -> bool {
        match c.phase {
            Phase::Waiting { deadline, reread, .. } => c.main.is_none() && (deadline == 0 || reread == 0),
            Phase::Holding {
                hb_due,
                beats,
                stopping,
                lost,
                ..
            } => !stopping && !lost && hb_due == 0 && c.hb.is_none() && beats > 0,
            _ => false,
        }
    }

    fn time_matters(&self, s: &State) -> bool {
        if s.clients.iter().take(self.cfg.clients).any(|c| self.due(c)) {
            return false;
        }
        s.clients.iter().take(self.cfg.clients).any(|c| match c.phase {
            Phase::Taking { lease, .. } | Phase::TakeRead { lease, .. } => lease > 0,
            Phase::Waiting { deadline, reread, .. } => deadline > 0 || reread > 0,
            Phase::FifoWait { watch, lease, .. } => lease > 0 || watch.is_some_and(|(_, a)| a < self.cfg.lease),
            Phase::Holding {
                lease,
                hb_due,
                hb_lease,
                beats,
                stopping,
                lost,
                ..
            } => !lost && (lease > 0 || (hb_due > 0 && beats > 0 && !stopping) || hb_lease > 0),
            _ => false,
        })
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        let c = Client {
            phase: Phase::Idle,
            left: self.cfg.acquisitions,
            seq: 0,
            main: None,
            hb: None,
            undo: None,
            released: None,
            failed: None,
            ghost: None,
        };
        let mut clients = [c; MAX_CLIENTS];
        for c in clients.iter_mut().skip(self.cfg.clients) {
            c.left = 0;
        }
        vec![State {
            items: [None; MAX_LOCKS],
            clients,
            faults: self.cfg.faults,
            crashes: self.cfg.crashes,
            drift: self.cfg.drift,
            last_token: [0; MAX_LOCKS],
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        if self.time_matters(s) {
            out.push(Action::Tick);
        }
        for (i, c) in s.clients.iter().enumerate().take(self.cfg.clients) {
            let ci = i as u8;
            if c.ghost.is_some() {
                out.push(Action::GhostLands(ci));
            }
            if s.drift > 0 && c.phase != Phase::Crashed && !self.due(c) {
                out.push(Action::Drift(ci));
            }
            for slot in [Slot::Main, Slot::Heartbeat, Slot::Undo] {
                let Some(net) = Self::slot(c, slot) else { continue };
                if c.phase == Phase::Crashed {
                    continue;
                }
                match net.applied {
                    None => {
                        out.push(Action::Apply(ci, slot));
                        if s.faults > 0 {
                            out.push(Action::DropRequest(ci, slot));
                            out.push(Action::Throttle(ci, slot));
                        }
                    }
                    Some(_) => {
                        out.push(Action::Reply(ci, slot));
                        if s.faults > 0 {
                            out.push(Action::LoseReply(ci, slot));
                        }
                    }
                }
            }
            if c.phase == Phase::Crashed {
                continue;
            }
            if s.crashes > 0 {
                out.push(Action::Crash(ci, false));
                let unapplied = [c.main, c.hb, c.undo.map(|u| u.2)]
                    .iter()
                    .flatten()
                    .any(|n| n.applied.is_none());
                if unapplied {
                    out.push(Action::Crash(ci, true));
                }
            }
            match c.phase {
                Phase::Idle if c.left > 0 && c.main.is_none() => {
                    for k in 0..self.cfg.locks as u8 {
                        out.push(Action::Start(ci, k));
                    }
                }
                Phase::Holding {
                    stopping,
                    hb_due,
                    beats,
                    lost,
                    ..
                } => {
                    if !stopping {
                        out.push(Action::Release(ci));
                    }
                    if !stopping && !lost && hb_due == 0 && c.hb.is_none() && beats > 0 {
                        out.push(Action::Beat(ci));
                    }
                }
                Phase::Waiting { deadline, reread, .. } if c.main.is_none() => {
                    if deadline == 0 {
                        out.push(Action::Deadline(ci));
                    } else if reread == 0 {
                        out.push(Action::Reread(ci));
                    }
                }
                Phase::FifoWait { .. } if c.main.is_none() => {
                    out.push(Action::Look(ci));
                    if i == 0 {
                        out.push(Action::GiveUp(ci));
                    }
                }
                _ => {}
            }
        }
    }

    fn next(&self, s: &State, a: &Action) -> Result<State, Violation> {
        let mut s = s.clone();
        match *a {
            Action::Tick => self.tick(&mut s),
            Action::Start(c, k) => {
                let i = c as usize;
                let cl = &mut s.clients[i];
                cl.left -= 1;
                cl.released = None;
                cl.failed = None;
                let g = Self::new_guid(cl, i);
                // Client 0 gives up after `retryCount`; the others keep trying, so that
                // liveness can ask whether a waiter that keeps trying gets the lock.
                let retries = if i == 0 { self.cfg.retry_count } else { UNLIMITED };
                self.start_take(&mut s, i, k, g, None, retries);
            }
            Action::Apply(c, slot) => {
                let i = c as usize;
                let mut net = Self::slot(&s.clients[i], slot).unwrap();
                net.applied = Some(self.apply(&mut s, net.op));
                Self::set_slot(&mut s.clients[i], slot, Some(net));
            }
            Action::Reply(c, slot) => {
                let net = Self::slot(&s.clients[c as usize], slot).unwrap();
                self.deliver(&mut s, c as usize, slot, Ok(net.applied.unwrap()))?;
            }
            Action::DropRequest(c, slot) if self.cfg.late_landing && s.clients[c as usize].ghost.is_none() => {
                s.faults -= 1;
                let net = Self::slot(&s.clients[c as usize], slot).unwrap();
                s.clients[c as usize].ghost = Some(net.op);
                self.deliver(&mut s, c as usize, slot, Err(true))?;
            }
            Action::Drift(c) => {
                s.drift -= 1;
                let mut cl = s.clients[c as usize];
                self.tick_client(&mut cl);
                s.clients[c as usize] = cl;
            }
            Action::GhostLands(c) => {
                let op = s.clients[c as usize].ghost.take().unwrap();
                self.apply(&mut s, op);
            }
            Action::DropRequest(c, slot) | Action::LoseReply(c, slot) => {
                s.faults -= 1;
                self.deliver(&mut s, c as usize, slot, Err(true))?;
            }
            Action::Throttle(c, slot) => {
                s.faults -= 1;
                self.deliver(&mut s, c as usize, slot, Err(false))?;
            }
            Action::Crash(c, landed) => {
                s.crashes -= 1;
                let i = c as usize;
                if landed {
                    let cl = s.clients[i];
                    for net in [cl.main, cl.hb, cl.undo.map(|u| u.2)].into_iter().flatten() {
                        if net.applied.is_none() {
                            self.apply(&mut s, net.op);
                        }
                    }
                }
                let cl = &mut s.clients[i];
                *cl = Client {
                    phase: Phase::Crashed,
                    left: 0,
                    seq: cl.seq,
                    main: None,
                    hb: None,
                    undo: None,
                    released: None,
                    failed: None,
                    ghost: cl.ghost,
                };
            }
            Action::Release(c) => {
                let i = c as usize;
                if let Phase::Holding { stopping, .. } = &mut s.clients[i].phase {
                    *stopping = true;
                }
                if s.clients[i].hb.is_none() || self.bug(Bug::ReleaseSkipsHeartbeat) {
                    if self.bug(Bug::ReleaseSkipsHeartbeat) {
                        // Writes with the guid it knows, forgetting the pending one.
                        if let Phase::Holding { pending, .. } = &mut s.clients[i].phase {
                            *pending = 0;
                        }
                    }
                    self.send_release(&mut s, i);
                }
            }
            Action::Beat(c) => {
                let i = c as usize;
                let mut cl = s.clients[i];
                if let Phase::Holding {
                    k, g, pending, lease, ..
                } = cl.phase
                {
                    let p = if lease > 0 && pending == 0 {
                        Self::new_guid(&mut cl, i)
                    } else {
                        pending
                    };
                    if let Phase::Holding {
                        pending,
                        hb_lease,
                        beats,
                        lost,
                        ..
                    } = &mut cl.phase
                    {
                        if lease == 0 {
                            // `heartbeat::beat`: the lease ran out on our clock.
                            *lost = true;
                        } else {
                            *pending = p;
                            *beats -= 1;
                            *hb_lease = self.cfg.lease;
                        }
                    }
                    if lease > 0 {
                        cl.hb = send(Op::Renew(k, [g, p], p));
                    }
                }
                s.clients[i] = cl;
            }
            Action::Deadline(c) => {
                let i = c as usize;
                if let Phase::Waiting {
                    k,
                    g,
                    target,
                    newer,
                    retries,
                    reread,
                    ..
                } = s.clients[i].phase
                {
                    match newer {
                        None => self.start_take(&mut s, i, k, g, Some(target), retries),
                        Some((v, age)) => match spend(retries) {
                            None => self.not_acquired(&mut s, i, k, g, false),
                            Some(retries) => {
                                s.clients[i].phase = Phase::Waiting {
                                    k,
                                    g,
                                    target: v,
                                    deadline: self.cfg.lease.saturating_sub(age),
                                    newer: None,
                                    retries,
                                    reread,
                                };
                            }
                        },
                    }
                }
            }
            Action::Reread(c) => {
                let i = c as usize;
                if let Phase::Waiting { k, reread, .. } = &mut s.clients[i].phase {
                    *reread = self.cfg.reread;
                    let k = *k;
                    s.clients[i].main = send(Op::Get(k));
                }
            }
            Action::Look(c) => {
                if let Phase::FifoWait { k, .. } = s.clients[c as usize].phase {
                    s.clients[c as usize].main = send(Op::Get(k));
                }
            }
            Action::GiveUp(c) => {
                let i = c as usize;
                if let Phase::FifoWait {
                    k,
                    g,
                    t,
                    pos,
                    prev,
                    maybe,
                    ..
                } = s.clients[i].phase
                {
                    self.fifo_give_up(&mut s, i, k, g, t, pos, prev, maybe);
                }
            }
        }
        Ok(s)
    }

    fn invariant(&self, s: &State) -> Result<(), Violation> {
        let n = self.cfg.clients;
        for k in 0..self.cfg.locks as u8 {
            let holders: Vec<usize> = (0..n)
                .filter(|&i| match s.clients[i].phase {
                    Phase::Holding {
                        k: hk,
                        lease,
                        lost,
                        stopping,
                        ..
                    } => hk == k && !stopping && !lost && lease > 0,
                    _ => false,
                })
                .collect();
            if holders.len() > 1 {
                return Err(Violation {
                    property: "mutual exclusion",
                    detail: format!("clients {holders:?} both hold lock {k}"),
                });
            }
        }
        for (i, c) in s.clients.iter().enumerate().take(n) {
            if let Some((k, lost)) = c.released {
                let item = s.items[k as usize];
                if !lost && item.is_some_and(|it| owner(it.guid) == i && !(it.released)) {
                    return Err(Violation {
                        property: "no lost release",
                        detail: format!("c{i} was told lock {k} is released, and still holds it"),
                    });
                }
            }
            if let Some((k, g)) = c.failed {
                let undoing = c.undo.is_some_and(|(uk, ug, _)| uk == k && ug == g);
                let item = s.items[k as usize];
                let busy = c.main.is_some();
                if !undoing && !busy && item.is_some_and(|it| it.guid == g && !it.released) {
                    return Err(Violation {
                        property: "no orphan",
                        detail: format!("c{i} was told lock {k} was not acquired, and the item is its own"),
                    });
                }
            }
        }
        Ok(())
    }

    fn liveness_goals(&self) -> usize {
        if self.fifo() {
            0
        } else {
            self.cfg.locks
        }
    }

    /// Lock `k` is free (absent, released, or its holder's lease over on its own clock) and a
    /// live client is acquiring it.
    fn waiting(&self, s: &State, k: usize) -> bool {
        let free = match s.items[k] {
            None => true,
            Some(it) => it.released || !self.believes(s, owner(it.guid), k),
        };
        free && s
            .clients
            .iter()
            .take(self.cfg.clients)
            .any(|c| Self::acquiring(c, k) == Some(UNLIMITED))
    }

    /// A client is granted lock `k` (its lease may have run out before the grant's reply).
    fn served(&self, s: &State, k: usize) -> bool {
        s.clients
            .iter()
            .take(self.cfg.clients)
            .any(|c| matches!(c.phase, Phase::Holding { k: hk, .. } if hk as usize == k))
    }
}

impl LockModel {
    fn believes(&self, s: &State, i: usize, k: usize) -> bool {
        match s.clients[i].phase {
            Phase::Holding { k: hk, lease, lost, .. } => hk as usize == k && !lost && lease > 0,
            _ => false,
        }
    }

    /// The retries left of a client acquiring lock `k`.
    fn acquiring(c: &Client, k: usize) -> Option<u8> {
        match c.phase {
            Phase::Taking { k: ak, retries, .. } | Phase::Waiting { k: ak, retries, .. } => {
                (ak as usize == k).then_some(retries)
            }
            Phase::FifoTicket { k: ak, .. } | Phase::FifoWait { k: ak, .. } | Phase::FifoGiveUp { k: ak, .. } => {
                (ak as usize == k).then_some(0)
            }
            Phase::TakeRead { k: ak, .. } => (ak as usize == k).then_some(0),
            _ => None,
        }
    }
}
