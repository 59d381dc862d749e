//! Fifo clients that are the core's Fifo machine itself (`dynamodb_lock_core::fifo::Acquire`)
//! and the end of a held lock (`ending::Ending`: the release of the head), stepped as the
//! addon's driver (src/fifo.rs) steps them: every request goes to the item it names (a resource's head, or one of its queue
//! entries) through the core's `op::apply`, its answer (or its timeout) goes back, a machine
//! waiting for an instant is stepped when the clock reaches it, and the machine's effects on
//! the client (a queue entry to heartbeat, a lock held, a lock to release, entries to clean
//! up) are carried out as the driver carries them out.
//!
//! The environment is the one both models share (`env.rs`): requests are lost before they
//! land, land and lose their answer, or are throttled; an answer that has not come by the
//! machine's timeout is a timeout (the request may have landed); clients crash, with their
//! requests landing or not; an acquisition may be cancelled (`abort`) at any moment. Each
//! client's monotonic clock has an origin of its own (`offset`): the machine only ever
//! compares its own times. Time is in ticks (a tick is a millisecond to the machines);
//! clocks run at the same rate. Acquisitions take one lock id or, with `several`, both ids
//! with one ticket.
//!
//! Each client keeps a client machine (`client::Client`) whose locks are its held heads: they
//! end as it says (`release`, `ending`, `ended`), as the addon's do.
//!
//! What is abstracted: each client runs one acquisition at a time. With `process`, clients 0
//! and 1 are two acquisitions of one process: they share its client machine and so its Fifo
//! registry (`Client::fifo_join` and the rest, as the addon keeps it), which answers what the
//! acquisition machine asks of local knowledge (`Here`: another acquisition of this process waits or holds, its entry's
//! state, a head held or released here); a change of it ends the other's wait that watches
//! for one, as the addon's notification does. That process does not crash (its crash is both
//! clients' at once). Without `process`, each client's registry would know nothing the store
//! does not, and every look is a read. A queue
//! entry's heartbeat is one atomic conditional write (the heartbeat machine is the lease
//! model's), sent in the last third of the entry's lease, never late; client 1 may be a slow
//! process whose entries are renewed at most `beats` times, at any moment. An entry not
//! renewed for its lease is lost to its owner, as the scheduler reports it. A head is not
//! heartbeated: a holder's lease ends a lease after its grant was sent. The releases the
//! acquisition asks for itself (`ReleaseHeld`) and the cleanup after a grant are atomic.
//!
//! Properties:
//! - mutual exclusion: no two clients believe they hold one lock at once (while the lease of
//!   their grant lasts on their own clock);
//! - fencing (grants in ticket order): each grant's token is above every earlier grant's;
//! - no lost release: a release reported done leaves nothing of the holder on the head;
//! - no orphan: an acquisition reported failed leaves no head held with a grant of its own
//!   (the uncontended take's unread outcome is left to its lease, as the protocol says).
//!
//! With `permits`, the clients are a semaphore's (`Acquire::start_sem`), each asking for the
//! permits of its place in `asks`, and a held lock is a holder on the head (released through
//! `op::permit_op`, as the addon's driver sends it); a ReadWriteLock is such a semaphore, a
//! shared hold one permit and an exclusive hold all. Mutual exclusion becomes:
//! - permits: the clients that believe they hold permits of one lock hold at most `permits`
//!   together;
//! - fencing: each token is handed out once (holders learn of their grants in any order);
//! - ticket order: no take or grant lands while a live queue entry of an earlier position
//!   (after the last granted) waits, and a grant's ticket is above the head's token.

use std::fmt;
use std::time::Duration;

use dynamodb_lock_core::broken::{self, Broken};
use dynamodb_lock_core::client::{self, Id};
use dynamodb_lock_core::ending::{self, Ending};
use dynamodb_lock_core::fifo::{self, Act, Adds as FifoAdds, Here, Input, Mine, Outcome, Request, Sem};
use dynamodb_lock_core::held;
use dynamodb_lock_core::hold::Hold;
use dynamodb_lock_core::op as core_op;
use dynamodb_lock_core::request::{answer_of, Adds, Env, Req, Step, Time};
use dynamodb_lock_core::settings::{self, Kind, Lock};

use crate::env::{self, ms, tick, Ans, Clients, Event, Fail, Left, NetState, Tick, TIMED_OUT};
use crate::explore::{self, Checked, Model, Violation};
use crate::item::{small, Item, Ver, G};

/// Clients have guids of their own: client `i`'s are `i * GUIDS + 1 ..`.
pub const MAX_CLIENTS: usize = 8;
const GUIDS: u8 = 32;

/// The properties checked.
pub const PROPERTIES: [&str; 7] = [
    "mutual exclusion",
    "fencing",
    "no lost release",
    "no orphan",
    "permits",
    "permits counted",
    "ticket order",
];

#[derive(Clone, Debug)]
pub struct Config {
    pub clients: usize,
    pub locks: usize,
    /// Acquisitions each client makes.
    pub acquisitions: u8,
    /// Acquisitions may take every lock id with one ticket.
    pub several: bool,
    pub lease: Tick,
    pub reread: Tick,
    pub request_timeout: Tick,
    /// Attempts per request.
    pub max_attempts: u32,
    /// Client 0's `waitMs` (`None`: without end); the others wait without end.
    pub wait: Option<Tick>,
    /// Lost or throttled requests and answers, in all.
    pub faults: u8,
    pub crashes: u8,
    /// Cancelled acquisitions, in all.
    pub aborts: u8,
    /// Heartbeats of each queue entry of client 1: `None`, as the scheduler sends them (each
    /// within the last third of the entry's lease, never late), as every other client's are;
    /// `Some(n)`: at most `n`, at any time in the lease (a slow process, whose entry others may
    /// take for dead).
    pub beats: Option<u8>,
    /// Client 1's monotonic clock starts this far from the others'.
    pub offset: Tick,
    /// Time ends here.
    pub horizon: Tick,
    /// A holder releases no sooner than this long after it was granted.
    pub min_hold: Tick,
    /// A semaphore of this many permits, each client asking for the permits of its place in
    /// `asks` (1 if it has none); `None`: Fifo locks.
    pub permits: Option<u8>,
    pub asks: Vec<u8>,
    /// Clients 0 and 1 are one process, sharing its registry (Fifo locks only: see
    /// `FifoMachines::new`).
    pub process: bool,
    pub bug: Option<Broken>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            clients: 2,
            locks: 1,
            acquisitions: 1,
            several: false,
            lease: 4,
            reread: 2,
            request_timeout: 2,
            max_attempts: 2,
            wait: None,
            faults: 0,
            crashes: 1,
            aborts: 0,
            beats: None,
            offset: 3,
            horizon: 6,
            min_hold: 0,
            permits: None,
            asks: Vec::new(),
            process: false,
            bug: None,
        }
    }
}

impl Config {
    /// A semaphore of `permits`, its clients asking for `asks`.
    pub fn semaphore(permits: u8, asks: &[u8]) -> Config {
        Config {
            clients: asks.len(),
            permits: Some(permits),
            asks: asks.to_vec(),
            ..Config::default()
        }
    }

    /// What client `i` asks for of the semaphore, if there is one.
    fn sem(&self, i: usize) -> Option<Sem> {
        self.permits.map(|limit| Sem {
            limit: limit.into(),
            permits: self.asks.get(i).copied().unwrap_or(1).into(),
        })
    }

    fn lock(&self) -> Lock {
        let c = self;
        env::lock(Kind::Fifo, c.lease, c.reread, c.request_timeout, c.max_attempts)
    }
}

/// A request as a machine asked for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rq {
    Fifo(Request<G, Ver>),
    /// The release machine's, on the head of the lock being released.
    Release(Req<G, Ver>),
    /// The release machine's, for a semaphore's holder (key, permits), as the addon sends it
    /// (`op::permit_op`, `op::permit_view`).
    Permit(Req<G, Ver>, G, u8),
}

/// A request sent, to lock `k`'s item `slot` (0: the head; else the queue position).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sent {
    pub rq: Rq,
    pub k: u8,
    pub slot: u8,
}

/// A request on its way.
pub type Net = env::Net<Sent>;

/// A step of the release machine.
type EndStep = Step<G, Ver, ending::Outcome<G, Fail>>;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Phase {
    #[default]
    Idle,
    Crashed,
    Acquiring,
    Holding,
    /// Releasing the held lock of resource `usize` through the release machine.
    Releasing(usize),
}

/// A queue entry this client heartbeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Beating {
    pub position: u8,
    pub guid: G,
    /// Its lease ends then, unless renewed.
    pub until: Tick,
    /// A heartbeat was refused: others finished it.
    pub lost: bool,
    /// Heartbeats left (`None`: without end).
    pub beats: Option<u8>,
}

impl Beating {
    fn live(&self, now: Tick) -> bool {
        !self.lost && now < self.until
    }
}

/// A client's machine (`client::Client`): its held heads, by `lock_id`, which end as it says
/// (`Client::release`, `ending`, `ended`); with `process`, clients 0 and 1 share one, whose
/// Fifo registry they ask and tell.
pub type Machine = client::Client<G, u8>;

/// The id of client `i`'s head of its resource `r` in its client machine.
fn lock_id(i: usize, r: usize) -> Id {
    (i * 8 + r) as Id
}

/// A lock held: its guid, token and the end of its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    pub guid: G,
    pub token: u8,
    pub until: Tick,
    /// A semaphore's permits (0: a Fifo lock).
    pub permits: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Client {
    pub phase: Phase,
    pub acquire: Option<fifo::Acquire<Item, Fail>>,
    pub release: Option<Ending<Item, Fail>>,
    pub net: Option<Net>,
    pub wake: Option<Tick>,
    /// The machine's wait ends on a cancellation too.
    pub watch: bool,
    pub cancelled: bool,
    /// The lock ids of the acquisition (sorted): the machine's resources.
    pub resources: Vec<u8>,
    pub entries: Vec<Option<Beating>>,
    pub held: Vec<Option<Held>>,
    pub left: u8,
    pub seq: u8,
    pub since: Tick,
    /// Guids of this acquisition that a head may be granted with, and the uncontended take's.
    pub grants: Vec<G>,
    pub take: Option<G>,
    /// The last acquisition was reported not acquired.
    pub failed: bool,
    /// Releases reported done: lock and guid.
    pub released: Vec<(u8, G)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: Tick,
    /// Per lock: the head (slot 0) and the queue entries by position.
    pub items: Vec<Vec<Option<Item>>>,
    pub clients: Vec<Client>,
    pub left: Left,
    pub aborts: u8,
    /// The token of the last grant of each lock (history, for fencing).
    pub last_token: Vec<u8>,
    /// A semaphore's grant landed while an earlier ticket's entry waited: (lock, position).
    pub overtaken: Option<(u8, u8)>,
    /// A semaphore's tokens handed out: (lock, token).
    pub tokens: Vec<(u8, u8)>,
    /// Each client's machine; with `process`, clients 0 and 1 share the first.
    pub machines: Vec<Machine>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Client, index of the set of lock ids.
    Start(u8, u8),
    /// The environment's event on a client: its request's fate, its wait's end, its crash.
    Event(u8, Event),
    Abort(u8),
    /// A heartbeat of the client's entry for resource `u8`.
    Beat(u8, u8),
    Release(u8),
    Tick,
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Start(c, set) => write!(f, "c{c} starts acquiring lock ids set {set}"),
            Action::Event(c, e) => e.describe(*c, f),
            Action::Abort(c) => write!(f, "c{c}'s acquisition is cancelled"),
            Action::Beat(c, r) => write!(f, "c{c} heartbeats its queue entry for resource {r}"),
            Action::Release(c) => write!(f, "c{c} calls release()"),
            Action::Tick => write!(f, "tick"),
        }
    }
}

/// What a client knows of itself, for the machine: new guids, the entries it heartbeats, the
/// locks it was granted. One acquisition at a time: its registry knows nothing of others.
struct Ctx<'a> {
    i: usize,
    c: &'a mut Client,
    /// The process's client machine, whose registry knows the lock ids of the acquisition's
    /// resources.
    registry: Option<&'a Machine>,
    /// Guids in use (on items, or this client's): a new one is none of them.
    in_use: &'a [G],
    /// The model's clock; the client's own is `offset` from it.
    now: Tick,
    offset: Tick,
}

/// Client `i`'s next guid that is not in use, if there is one: the model's guids are few, and
/// come round again.
fn new_guid(seq: &mut u8, i: usize, in_use: &[G]) -> G {
    let mut g = 0;
    for _ in 1..GUIDS {
        *seq = *seq % (GUIDS - 1) + 1;
        g = (i as u8) * GUIDS + *seq;
        if !in_use.contains(&g) {
            break;
        }
    }
    g
}

/// The guids in use for client `i`: on any item, or held by its acquisition.
fn in_use(s: &State, i: usize) -> Vec<G> {
    let c = &s.clients[i];
    let mut out: Vec<G> = s.items.iter().flatten().flatten().map(|it| it.guid).collect();
    out.extend(c.grants.iter().copied());
    out.extend(c.entries.iter().flatten().map(|e| e.guid));
    out.extend(c.held.iter().flatten().map(|h| h.guid));
    out
}

impl Here<G> for Ctx<'_> {
    fn guid(&mut self) -> G {
        let mut in_use = self.in_use.to_vec();
        in_use.extend(self.c.grants.iter().copied());
        let g = new_guid(&mut self.c.seq, self.i, &in_use);
        self.c.grants.push(g);
        g
    }
    fn busy(&self, r: usize) -> bool {
        self.registry
            .is_some_and(|m| m.fifo_busy(&self.c.resources[r], ms(self.now)))
    }
    fn entry(&self, r: usize, position: u64) -> Option<Mine> {
        self.registry?.fifo_entry(&self.c.resources[r], position)
    }
    fn holder(&self, r: usize, token: u64) -> Option<bool> {
        self.registry?.fifo_holder(&self.c.resources[r], token, ms(self.now))
    }
    fn releases(&self, r: usize) -> u64 {
        self.registry.map_or(0, |m| m.fifo_releases(&self.c.resources[r]))
    }
    fn entry_lost(&self, r: usize) -> bool {
        self.c.entries[r].is_some_and(|e| e.lost || self.now >= e.until)
    }
    fn held_until(&self, r: usize) -> Option<Time> {
        self.c.held[r].map(|h| ms(h.until + self.offset))
    }
}

pub struct FifoMachines {
    pub cfg: Config,
}

impl FifoMachines {
    pub fn new(cfg: Config) -> Self {
        assert!(cfg.clients <= MAX_CLIENTS && (1..=4).contains(&cfg.locks));
        // A semaphore's waiter of one process passes an entry its process abandoned at once,
        // which the ticket-order property, read off the table, counts as a waiter still.
        assert!(
            !(cfg.process && cfg.permits.is_some()),
            "one process's registry: Fifo locks only"
        );
        FifoMachines { cfg }
    }

    fn offset(&self, i: usize) -> Tick {
        // One process has one clock.
        if i == 1 && !self.cfg.process {
            self.cfg.offset
        } else {
            0
        }
    }

    fn env(&self, s: &State, i: usize) -> Env {
        Env {
            now: ms(s.now + self.offset(i)),
            cancelled: s.clients[i].cancelled,
            ..env::at(s.now)
        }
    }

    /// What client `i` knows of itself, with `in_use` the guids in use.
    fn ctx<'a>(&self, s: &'a mut State, i: usize, in_use: &'a [G]) -> Ctx<'a> {
        Ctx {
            i,
            c: &mut s.clients[i],
            registry: s.machines.first().filter(|_| self.shares(i)),
            in_use,
            now: s.now,
            offset: self.offset(i),
        }
    }

    /// A machine's time as a tick of the model's clock.
    fn at(&self, i: usize, t: Time) -> Tick {
        tick(t).saturating_sub(self.offset(i))
    }

    /// The sets of lock ids an acquisition may take: each id, and with `several` each pair
    /// and every id.
    fn sets(&self) -> Vec<Vec<u8>> {
        let n = self.cfg.locks as u8;
        let mut out: Vec<Vec<u8>> = (0..n).map(|k| vec![k]).collect();
        // A semaphore's acquisition is of one id.
        if self.cfg.several && self.cfg.permits.is_none() {
            for a in 0..n {
                for b in a + 1..n {
                    out.push(vec![a, b]);
                }
            }
            if n > 2 {
                out.push((0..n).collect());
            }
        }
        out
    }

    fn slot<'s>(&self, s: &'s mut State, k: u8, slot: u8) -> &'s mut Option<Item> {
        let items = &mut s.items[k as usize];
        if items.len() <= slot as usize {
            items.resize(slot as usize + 1, None);
        }
        &mut items[slot as usize]
    }

    /// Applies a request to its item through the core's `op::apply`.
    fn apply(&self, s: &mut State, k: u8, slot: u8, rq: &Rq) -> Ans {
        // The addon's translations, with what the model's item keeps of a client's writes.
        let fifo_adds = FifoAdds {
            fields: env::open_fields(self.cfg.lease),
            entry_ttl: ("", 0),
        };
        let adds = Adds {
            fields: fifo_adds.fields.clone(),
            ttl_released: None,
        };
        let parts;
        let op = match rq {
            Rq::Fifo(r) => r.op(&fifo_adds),
            Rq::Release(r) => {
                parts = r.parts(&adds);
                r.op(&adds, &parts)
            }
            Rq::Permit(r, key, permits) => {
                parts = r.parts(&adds);
                core_op::permit_op(r.op(&adds, &parts), key, (*permits).into())
                    .unwrap_or_else(|other| unreachable!("{other:?} for permits"))
            }
        };
        let grants = matches!(rq, Rq::Fifo(Request::SemTake { .. } | Request::SemGrant { .. }));
        if grants && core_op::allowed(&op, self.slot(s, k, slot).as_ref()) {
            Self::ticket_order(s, k, rq);
        }
        let item = self.slot(s, k, slot);
        let (after, reply) = core_op::apply(&op, *item);
        *item = after;
        let reply = match (rq, reply) {
            (Rq::Permit(_, key, _), core_op::Reply::Before(r)) => core_op::Reply::Before(core_op::permit_view(r, key)),
            (Rq::Permit(_, key, _), core_op::Reply::Refused(r)) => {
                core_op::Reply::Refused(core_op::permit_view(r, key))
            }
            (_, reply) => reply,
        };
        answer_of(reply)
    }

    /// Before a semaphore's take or grant on lock `k` lands: no entry between the last
    /// position granted and the one this grants may still wait (live), or an earlier ticket
    /// is overtaken; and a grant's ticket is above the head's token (tokens rise in the order
    /// grants land).
    fn ticket_order(s: &mut State, k: u8, rq: &Rq) {
        let items = &s.items[k as usize];
        let Some(head) = items[0] else { return };
        if let Rq::Fifo(Request::SemGrant { ticket, position, .. }) = rq {
            if u64::from(head.token) >= *ticket && s.overtaken.is_none() {
                s.overtaken = Some((k, small(*position)));
            }
        }
        let from = head.qg.unwrap_or(0);
        let to = match rq {
            Rq::Fifo(Request::SemGrant { position, .. }) => small(*position),
            // A take that lands grants every position issued.
            _ => head.qn.unwrap_or(0).saturating_add(1),
        };
        let live = (from + 1..to).find(|&p| items.get(p as usize).copied().flatten().is_some_and(|e| !e.released));
        if let (Some(p), None) = (live, s.overtaken) {
            s.overtaken = Some((k, p));
        }
    }

    /// Steps client `i`'s acquisition with `input`, carrying out its effects, until it sends,
    /// waits or ends.
    fn run(&self, s: &mut State, i: usize, mut input: Input<Item, Fail>) -> Result<(), Violation> {
        loop {
            let env = self.env(s, i);
            let used = in_use(s, i);
            let mut m = s.clients[i].acquire.take().expect("an acquisition");
            let act = m.step(input, &env, &mut self.ctx(s, i, &used));
            s.clients[i].acquire = Some(m);
            input = match self.act(s, i, act)? {
                Some(next) => next,
                None => return Ok(()),
            };
        }
    }

    /// Carries out one act; the input to step with at once, if any.
    fn act(&self, s: &mut State, i: usize, act: Act<G, Ver, Fail>) -> Result<Option<Input<Item, Fail>>, Violation> {
        let c = &mut s.clients[i];
        c.net = None;
        c.wake = None;
        c.watch = false;
        let resume = Ok(Some(Input::Resume));
        match act {
            Act::Send { req, timeout_at } => {
                if let Request::TakeFree { guid, .. } | Request::SemTake { guid, .. } = req {
                    c.take = Some(guid);
                }
                let (r, position) = req.place();
                let k = c.resources[r];
                let rq = Rq::Fifo(req);
                Ok(self
                    .send(s, i, rq, k, position.map_or(0, small), timeout_at)
                    .map(Input::Answer))
            }
            Act::Wait { until, watch } => {
                c.wake = Some(self.at(i, until));
                c.watch = watch;
                if watch && c.cancelled {
                    c.wake = Some(s.now);
                }
                Ok(None)
            }
            Act::Arm => resume,
            Act::Join { resource, position } => {
                let k = c.resources[resource];
                self.registry(s, i, |m, now| m.fifo_join(&k, position, now));
                resume
            }
            Act::Leave {
                resource,
                position: p,
                mine,
            } => {
                let k = c.resources[resource];
                self.registry(s, i, |m, now| m.fifo_leave(&k, p, mine, now));
                resume
            }
            Act::Entry(e) => {
                c.entries[e.resource] = Some(Beating {
                    position: small(e.position),
                    guid: e.guid,
                    until: self.at(i, e.sent_at) + self.cfg.lease,
                    lost: false,
                    beats: if i == 1 && !self.cfg.process {
                        self.cfg.beats
                    } else {
                        None
                    },
                });
                resume
            }
            Act::StopEntry { resource } => {
                let guids = c.entries[resource].take().map(|e| vec![e.guid]).unwrap_or_default();
                Ok(Some(Input::Guids(guids)))
            }
            Act::Hold {
                resource,
                guid,
                token,
                sent_at,
                ..
            } => {
                self.hold(s, i, resource, guid, small(token), sent_at)?;
                resume
            }
            Act::ReleaseHeld { resource } => {
                self.release_held(s, i, resource);
                resume
            }
            Act::Cleanup { entries, passed } => {
                self.clean_up(s, i, &entries, &passed);
                resume
            }
            Act::Done(outcome) => {
                Self::done(c, outcome, s.now);
                Ok(None)
            }
        }
    }

    /// Client `i` holds its acquisition's resource `resource` with `guid` and `token`, its
    /// grant sent at `sent_at`: until a lease from then, and its token must be above every
    /// earlier grant's.
    fn hold(
        &self,
        s: &mut State,
        i: usize,
        resource: usize,
        guid: G,
        token: u8,
        sent_at: Time,
    ) -> Result<(), Violation> {
        let c = &mut s.clients[i];
        let k = c.resources[resource];
        let until = self.at(i, sent_at) + self.cfg.lease;
        let permits = self.cfg.sem(i).map_or(0, |p| small(p.permits));
        c.held[resource] = Some(Held {
            guid,
            token,
            until,
            permits,
        });
        // The head is a lock of the client's machine, its lease counted from the grant's send.
        let config = env::beat_config(self.cfg.lease, self.cfg.lease, self.cfg.request_timeout, Duration::ZERO);
        let hold = Hold::new(config, false, guid, Some(ms(until - self.cfg.lease)), ms(s.now), 0);
        let id = lock_id(i, resource);
        s.machines[self.machine_of(i)].taken(id, k, hold, ms(s.now));
        self.registry(s, i, |m, now| m.fifo_hold(&k, token.into(), id, now));
        if self.cfg.permits.is_none() {
            return env::fencing(&mut s.last_token[k as usize], i, k, token, until, s.now);
        }
        // A semaphore's holders learn of their grants in any order: each token is handed out
        // once, and rises in the order the grants land (`ticket_order`).
        if s.tokens.contains(&(k, token)) {
            let detail = format!("c{i} granted lock {k} with token {token}, handed out before");
            return Err(Violation::new("fencing", detail));
        }
        s.tokens.push((k, token));
        Ok(())
    }

    /// The acquisition lets go of the lock it holds of resource `resource` (one write, at once).
    fn release_held(&self, s: &mut State, i: usize, resource: usize) {
        let c = &mut s.clients[i];
        let k = c.resources[resource];
        if let Some(h) = c.held[resource].take() {
            // Released by one write sent at once: its machine marks it so (`ended`).
            let (id, now) = (lock_id(i, resource), ms(s.now));
            let m = &mut s.machines[self.machine_of(i)];
            let _ = m.release(id, Kind::Fifo, now);
            let released = ending::Outcome::<G, Fail>::Released {
                stand_back: None,
                ours: true,
            };
            m.ended(id, &released, false, now);
            m.remove(id);
            self.registry(s, i, |_, _| {});
            let rq = match self.cfg.permits {
                Some(_) => Rq::Fifo(Request::SemRelease {
                    resource,
                    key: h.guid,
                    permits: h.permits.into(),
                }),
                None => Rq::Release(Req::Release {
                    guids: vec![h.guid],
                    lock_acquired_time_unix_ms: None,
                }),
            };
            self.apply(s, k, 0, &rq);
        }
    }

    /// The cleanup after a grant, at once: the client's own entries of resources `entries`
    /// are deleted, and the finished entries it passed (resource, position).
    fn clean_up(&self, s: &mut State, i: usize, entries: &[usize], passed: &[(usize, u64)]) {
        let c = &mut s.clients[i];
        let own: Vec<(u8, Beating)> = entries
            .iter()
            .filter_map(|&r| c.entries[r].take().map(|e| (c.resources[r], e)))
            .collect();
        let passed: Vec<(u8, u8)> = passed.iter().map(|&(r, p)| (c.resources[r], small(p))).collect();
        for (k, e) in own {
            let rq = Rq::Fifo(Request::DeleteEntry {
                resource: 0,
                position: e.position.into(),
                guids: vec![e.guid],
            });
            self.apply(s, k, e.position, &rq);
        }
        for (k, p) in passed {
            let item = self.slot(s, k, p);
            *item = core_op::apply(&core_op::Op::FifoDeleteFinished, *item).0;
        }
    }

    /// Client `c`'s acquisition ended with `outcome` at `now`: it holds its locks, or has
    /// failed; it heartbeats no entry either way.
    fn done(c: &mut Client, outcome: Outcome<Fail>, now: Tick) {
        c.acquire = None;
        if outcome == Outcome::Granted {
            c.phase = Phase::Holding;
            c.since = now;
        } else {
            c.phase = Phase::Idle;
            c.failed = true;
            c.held.iter_mut().for_each(|h| *h = None);
        }
        c.entries.iter_mut().for_each(|e| *e = None);
    }

    /// Client `i` sends `rq` to lock `k`'s item `slot`, timed out at `timeout_at` on its
    /// clock: the answer to give its machine at once, if any.
    fn send(&self, s: &mut State, i: usize, rq: Rq, k: u8, slot: u8, timeout_at: Time) -> Option<Ans> {
        let timeout_at = self.at(i, timeout_at);
        // Past its timeout already: the driver does not send it.
        if timeout_at <= s.now {
            return Some(TIMED_OUT);
        }
        s.clients[i].net = Some(Net {
            sent: Sent { rq, k, slot },
            timeout_at,
            state: NetState::Out,
        });
        None
    }

    /// Starts releasing the next held lock from resource `from`, or ends the release.
    fn release_from(&self, s: &mut State, i: usize, from: usize) -> Result<(), Violation> {
        let c = &s.clients[i];
        let Some(r) = (from..c.held.len()).find(|&r| c.held[r].is_some()) else {
            let c = &mut s.clients[i];
            c.phase = Phase::Idle;
            c.release = None;
            return Ok(());
        };
        let env = self.env(s, i);
        // The addon's end of a held Fifo lock, as its client machine says: nobody of its own
        // waits in line (Fifo keeps its own order), so a release of the head. On its way out,
        // it keeps no acquisition of this process from its one-request take.
        let (id, now) = (lock_id(i, r), ms(s.now));
        let m = &mut s.machines[self.machine_of(i)];
        let held::Release::Write { guids, taken } = m.release(id, Kind::Fifo, now) else {
            unreachable!("a head without heartbeats is released by a write")
        };
        let end = m.ending(id, guids, taken, || 0, now);
        let (m, step) = Ending::start(self.cfg.lock(), end, &env);
        self.registry(s, i, |_, _| {});
        let c = &mut s.clients[i];
        c.phase = Phase::Releasing(r);
        c.release = Some(m);
        self.release_step(s, i, step)
    }

    /// Carries out the release machine's step for client `i`.
    fn release_step(&self, s: &mut State, i: usize, step: EndStep) -> Result<(), Violation> {
        let Phase::Releasing(r) = s.clients[i].phase else {
            unreachable!("a release step while not releasing")
        };
        let c = &mut s.clients[i];
        c.net = None;
        c.wake = None;
        match step {
            Step::Send { req, timeout_at } => {
                let k = c.resources[r];
                let rq = match (self.cfg.permits, c.held[r]) {
                    (Some(_), Some(h)) => Rq::Permit(req, h.guid, h.permits),
                    _ => Rq::Release(req),
                };
                match self.send(s, i, rq, k, 0, timeout_at) {
                    Some(a) => self.deliver(s, i, a),
                    None => Ok(()),
                }
            }
            Step::Wait { until, .. } => {
                c.wake = Some(self.at(i, until));
                Ok(())
            }
            Step::Done(out) => {
                let h = c.held[r].take().expect("held");
                let k = c.resources[r];
                let (id, now) = (lock_id(i, r), ms(s.now));
                let m = &mut s.machines[self.machine_of(i)];
                m.ended(id, &out, false, now);
                m.remove(id);
                if let ending::Outcome::Released { .. } = out {
                    s.clients[i].released.push((k, h.guid));
                    self.registry(s, i, |_, _| {});
                }
                self.release_from(s, i, r + 1)
            }
        }
    }

    fn due(&self, s: &State, c: &Client) -> bool {
        c.phase != Phase::Crashed
            && (env::due(c.net.as_ref(), c.wake, s.now)
                || c.entries
                    .iter()
                    .flatten()
                    .any(|e| e.beats.is_none() && e.live(s.now) && e.until <= s.now + 1))
    }

    /// Whether the entry may be heartbeated now.
    fn may_beat(&self, s: &State, e: &Beating) -> bool {
        // Fifo's heartbeat period: a third of the lease.
        let period = tick(settings::fifo_heartbeat(self.cfg.lease.into()));
        e.live(s.now)
            && match e.beats {
                None => s.now + period >= e.until,
                Some(n) => n > 0,
            }
    }

    fn time_matters(&self, s: &State) -> bool {
        s.now < self.cfg.horizon
            && s.clients.iter().any(|c| {
                c.phase != Phase::Crashed
                    && (env::pending(c.net.as_ref(), c.wake)
                        || c.entries.iter().flatten().any(|e| !e.lost && e.until > s.now)
                        || c.held.iter().flatten().any(|h| h.until > s.now))
            })
    }

    /// Client `i` believes it holds lock `k`.
    fn believes(&self, s: &State, i: usize, k: u8) -> bool {
        let c = &s.clients[i];
        matches!(c.phase, Phase::Holding | Phase::Releasing(_))
            && c.resources.iter().zip(&c.held).any(|(&rk, h)| {
                rk == k
                    && h.is_some_and(|h| s.now < h.until)
                    && !matches!(c.phase, Phase::Releasing(r) if c.resources[r] == k)
            })
    }

    /// A semaphore's head counts as held the permits of the holders it names, no more: permits
    /// counted for no holder would never be given back.
    fn permits_counted(&self, s: &State) -> Result<(), Violation> {
        use core_op::Record;
        for (k, slots) in s.items.iter().enumerate() {
            if let Some(head) = &slots[0] {
                let named: u64 = head.holders().iter().map(|h| h.permits).sum();
                if head.permits_held() != named {
                    let detail = format!(
                        "lock {k}'s head counts {} permits held at tick {}, its holders {named}",
                        head.permits_held(),
                        s.now
                    );
                    return Err(Violation::new("permits counted", detail));
                }
            }
        }
        Ok(())
    }

    /// A semaphore's clients that believe they hold permits of one lock hold `limit` at most
    /// together.
    fn permits_held(&self, s: &State, limit: u8) -> Result<(), Violation> {
        for k in 0..self.cfg.locks as u8 {
            let holders: Vec<usize> = (0..self.cfg.clients).filter(|&i| self.believes(s, i, k)).collect();
            let held: u8 = holders
                .iter()
                .map(|&i| self.cfg.sem(i).map_or(1, |p| small(p.permits)))
                .sum();
            if held > limit {
                let detail = format!(
                    "clients {holders:?} hold {held} permits of lock {k} at tick {}, of {limit}",
                    s.now
                );
                return Err(Violation::new("permits", detail));
            }
        }
        Ok(())
    }

    /// Client `i` starts acquiring the lock ids of set `set`.
    fn start(&self, s: &mut State, i: usize, set: u8) -> Result<(), Violation> {
        let resources = self.sets()[set as usize].clone();
        let env = self.env(s, i);
        let used = in_use(s, i);
        let wait = if i == 0 { self.cfg.wait.map(ms) } else { None };
        let now = s.now;
        let cl = &mut s.clients[i];
        cl.left -= 1;
        cl.failed = false;
        cl.released.clear();
        cl.grants.clear();
        cl.take = None;
        cl.cancelled = false;
        cl.entries = vec![None; resources.len()];
        cl.held = vec![None; resources.len()];
        let n = resources.len();
        cl.resources = resources;
        cl.phase = Phase::Acquiring;
        cl.since = now;
        let here = &mut self.ctx(s, i, &used);
        let (m, act) = match self.cfg.sem(i) {
            Some(sem) => fifo::Acquire::start_sem(self.cfg.lock(), sem, wait, &env, here),
            None => fifo::Acquire::start(self.cfg.lock(), n, wait, &env, here),
        };
        s.clients[i].acquire = Some(m);
        if let Some(input) = self.act(s, i, act)? {
            self.run(s, i, input)?;
        }
        Ok(())
    }

    /// Clients 0 and 1 share the client machine and Fifo registry of their process.
    fn shares(&self, i: usize) -> bool {
        self.cfg.process && i < 2
    }

    /// The index of client `i`'s machine.
    fn machine_of(&self, i: usize) -> usize {
        if self.shares(i) {
            0
        } else {
            i
        }
    }

    /// Client `i` changes the registry of its process's client machine (`process`, clients 0
    /// and 1) with `f`: a wait of the other that watches for a change ends at once. Other
    /// clients' registries stay empty (they would know nothing the table does not).
    fn registry(&self, s: &mut State, i: usize, f: impl FnOnce(&mut Machine, Time)) {
        let now = s.now;
        if !self.shares(i) {
            return;
        }
        f(&mut s.machines[0], ms(now));
        let other = &mut s.clients[1 - i];
        if other.watch && other.wake.is_some() {
            other.wake = Some(now);
        }
    }

    /// Client `i`'s acquisition is cancelled: a wait that watches for it ends at once.
    fn abort(s: &mut State, i: usize) {
        s.aborts -= 1;
        let cl = &mut s.clients[i];
        cl.cancelled = true;
        if cl.watch {
            cl.wake = Some(s.now);
        }
    }

    /// Client `i` heartbeats its queue entry for resource `r`: one conditional write, at once;
    /// refused, the entry is lost.
    fn renew_entry(&self, s: &mut State, i: usize, r: usize) {
        let mut e = s.clients[i].entries[r].expect("an entry");
        let k = s.clients[i].resources[r];
        let used = in_use(s, i);
        let g = new_guid(&mut s.clients[i].seq, i, &used);
        let now = s.now;
        let renewed = env::renew(self.slot(s, k, e.position), &[e.guid], g, self.cfg.lease);
        e.beats = e.beats.map(|n| n - 1);
        match renewed {
            false => e.lost = true,
            true => {
                e.guid = g;
                e.until = now + self.cfg.lease;
            }
        }
        s.clients[i].entries[r] = Some(e);
    }
}

impl Model for FifoMachines {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        let c = Client {
            left: self.cfg.acquisitions,
            ..Client::default()
        };
        vec![State {
            now: 0,
            items: vec![vec![None]; self.cfg.locks],
            clients: vec![c; self.cfg.clients],
            left: Left::new(self.cfg.faults, self.cfg.crashes),
            aborts: self.cfg.aborts,
            last_token: vec![0; self.cfg.locks],
            overtaken: None,
            tokens: Vec::new(),
            machines: vec![Machine::new(Duration::ZERO); self.cfg.clients],
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let mut due = false;
        for (i, c) in s.clients.iter().enumerate() {
            let ci = i as u8;
            if c.phase == Phase::Crashed {
                continue;
            }
            due |= self.due(s, c);
            Event::may_happen(c.net.as_ref(), c.wake, s.now, s.left.faults, |e| {
                out.push(Action::Event(ci, e))
            });
            for (r, e) in c.entries.iter().enumerate() {
                if e.is_some_and(|e| self.may_beat(s, &e)) {
                    out.push(Action::Beat(ci, r as u8));
                }
            }
            // The process of clients 0 and 1 does not crash (`process`).
            let crashes = if self.cfg.process && i < 2 { 0 } else { s.left.crashes };
            Event::may_crash(crashes, c.net.as_ref(), |e| out.push(Action::Event(ci, e)));
            match c.phase {
                Phase::Idle if c.left > 0 && (s.now == 0 || c.left < self.cfg.acquisitions) => {
                    for set in 0..self.sets().len() as u8 {
                        out.push(Action::Start(ci, set));
                    }
                }
                Phase::Acquiring if s.aborts > 0 && !c.cancelled => out.push(Action::Abort(ci)),
                Phase::Holding if s.now >= c.since + self.cfg.min_hold => out.push(Action::Release(ci)),
                _ => {}
            }
        }
        if !due && self.time_matters(s) {
            out.push(Action::Tick);
        }
    }

    fn next(&self, s: &State, a: &Action) -> Result<State, Violation> {
        broken::set(self.cfg.bug);
        let mut s = s.clone();
        match *a {
            Action::Tick => s.now += 1,
            Action::Start(c, set) => self.start(&mut s, c as usize, set)?,
            Action::Event(c, e) => env::happen(self, &mut s, c as usize, e)?,
            Action::Abort(c) => Self::abort(&mut s, c as usize),
            Action::Beat(c, r) => self.renew_entry(&mut s, c as usize, r as usize),
            Action::Release(c) => self.release_from(&mut s, c as usize, 0)?,
        }
        Ok(s)
    }

    fn invariant(&self, s: &State) -> Result<(), Violation> {
        match self.cfg.permits {
            Some(limit) => {
                self.permits_held(s, limit)?;
                self.permits_counted(s)?;
            }
            None => env::mutual_exclusion(self.cfg.locks, self.cfg.clients, s.now, |i, k| self.believes(s, i, k))?,
        }
        if let Some((k, p)) = s.overtaken {
            let detail = format!("lock {k} granted while the waiter at position {p}, an earlier ticket, waited");
            return Err(Violation::new("ticket order", detail));
        }
        // The head carries grant `g` of a client: as its `guid`, or as a semaphore's holder.
        let carries = |it: &Item, g: G| match self.cfg.permits {
            Some(_) => it.holders.iter().any(|h| h.0 == g),
            None => it.guid == g && !it.released,
        };
        for (i, c) in s.clients.iter().enumerate() {
            for &(k, g) in &c.released {
                if s.items[k as usize][0].is_some_and(|it| carries(&it, g)) {
                    return Err(env::lost_release(i, k));
                }
            }
            if c.failed && c.phase == Phase::Idle {
                for &k in &c.resources {
                    let head = s.items[k as usize][0];
                    let orphan = head.is_some_and(|it| c.grants.iter().any(|&g| carries(&it, g) && c.take != Some(g)));
                    if orphan {
                        return Err(env::orphan(i, k, "the head"));
                    }
                }
            }
        }
        Ok(())
    }
}

impl Clients for FifoMachines {
    type Sent = Sent;

    fn wire(s: &mut State, i: usize) -> (&mut Left, &mut Option<Net>, &mut Option<Tick>) {
        let c = &mut s.clients[i];
        (&mut s.left, &mut c.net, &mut c.wake)
    }

    fn apply_sent(&self, s: &mut State, _: usize, sent: &Sent) -> Ans {
        self.apply(s, sent.k, sent.slot, &sent.rq)
    }

    /// Client `i`'s acquisition, or else its release, is handed the answer or the wait's end.
    fn resume(&self, s: &mut State, i: usize, a: Option<Ans>) -> Result<(), Violation> {
        if s.clients[i].acquire.is_some() {
            let input = match a {
                Some(a) => Input::Answer(a),
                None => Input::Resume,
            };
            return self.run(s, i, input);
        }
        let env = self.env(s, i);
        let m = s.clients[i].release.as_mut().expect("a machine waits");
        let step = env::resume(m, a, &env);
        self.release_step(s, i, step)
    }

    /// A crashed client drops its machines, requests, entries, holds and reports. It keeps its
    /// guids' sequence, its acquisition's lock ids, its cancellation, and `watch`, `since` and
    /// `take` as they were.
    fn crashed(&self, s: &mut State, i: usize) {
        s.machines[self.machine_of(i)] = Machine::new(Duration::ZERO);
        let cl = &mut s.clients[i];
        cl.phase = Phase::Crashed;
        cl.acquire = None;
        cl.release = None;
        cl.net = None;
        cl.wake = None;
        cl.left = 0;
        cl.entries.clear();
        cl.held.clear();
        cl.grants.clear();
        cl.released.clear();
        cl.failed = false;
    }
}

/// Beyond this many states a run stops and reports itself incomplete (the largest run, each
/// client acquiring twice, is 40,194,199, about 1 GB explored depth first).
pub const MAX_STATES: usize = 45_000_000;

/// A configuration as `Config::new` has it, but for: a semaphore of two permits asked for by
/// `asks` (none: Fifo locks), clients 0 and 1 one process, attempts per request, lease,
/// horizon, faults, crashes, cancellations and acquisitions each.
type Row = (&'static [u8], bool, u32, Tick, Tick, u8, u8, u8, u8);

fn table(rows: &[Row]) -> Vec<Config> {
    let config = |&(asks, process, max_attempts, lease, horizon, faults, crashes, aborts, acquisitions): &Row| {
        let base = if asks.is_empty() {
            Config::default()
        } else {
            Config::semaphore(2, asks)
        };
        Config {
            process,
            max_attempts,
            lease,
            horizon,
            faults,
            crashes,
            aborts,
            acquisitions,
            ..base
        }
    };
    rows.iter().map(config).collect()
}

/// The configurations explored: the bounded ones of the test suite (clients 0 and 1 apart or
/// one process, with a crash), or the full ones of `npm run model`: one process; a crash; a
/// lost, throttled or slow request; a crash and a cancellation.
pub fn configs(full: bool) -> Vec<Config> {
    let apart: Row = (&[], false, 2, 4, 6, 0, 1, 0, 1);
    let process: Row = (&[], true, 2, 4, 6, 0, 1, 0, 1);
    if !full {
        return table(&[apart, process]);
    }
    table(&[
        process,
        apart,
        (&[], false, 2, 4, 6, 1, 0, 0, 1),
        (&[], false, 2, 4, 6, 0, 1, 1, 1),
    ])
}

/// The semaphore configurations explored: the bounded ones of the test suite (two clients on
/// two permits, asking for one each, or one and both: a shared/exclusive mix, each request
/// tried once), or the full ones of `npm run model`: those two with a crash; the mix with
/// requests tried twice; with a lost, throttled or slow request and a cancellation; with
/// requests tried three times and a lost, throttled or slow request (a take that landed and
/// whose answer was lost, sent again); with each client acquiring twice.
pub fn semaphore_configs(full: bool) -> Vec<Config> {
    let one: Row = (&[1, 1], false, 1, 4, 6, 0, 1, 0, 1);
    let mix: Row = (&[1, 2], false, 1, 4, 6, 0, 1, 0, 1);
    if !full {
        return table(&[one, mix]);
    }
    let twice: Row = (&[1, 2], false, 2, 3, 5, 0, 1, 0, 1);
    let faults: Row = (&[1, 2], false, 1, 4, 6, 1, 0, 1, 1);
    // Each client acquiring twice: over 6 ticks with a lease of 4 the run passes 100 million
    // states; with a lease of 3 over 4 ticks it is whole, and the variants of the grant rule
    // are caught in it.
    let again: Row = (&[1, 2], false, 3, 3, 5, 1, 0, 0, 1);
    table(&[one, mix, twice, faults, again, (&[1, 2], false, 1, 3, 4, 0, 0, 0, 2)])
}

/// The configuration a broken variant is checked in.
pub fn broken_config(bug: Broken) -> Config {
    let mut c = match bug {
        // A holder of one permit and a request for both; then each client acquires again, so
        // that one waits while the other asks anew.
        // A take that lands and whose answer is lost, sent again after its timeout (of three
        // attempts, the first two may be sent again: the last timeout is the settling read's).
        Broken::SemTakeRepeats => Config {
            max_attempts: 3,
            faults: 1,
            lease: 3,
            horizon: 5,
            crashes: 0,
            ..Config::semaphore(2, &[1, 2])
        },
        Broken::SemGrantIgnoresHeld | Broken::SemGrantIgnoresEarlier | Broken::SemTakePastWaiter => Config {
            max_attempts: 1,
            crashes: 0,
            acquisitions: if bug == Broken::SemGrantIgnoresHeld { 1 } else { 2 },
            ..Config::semaphore(2, &[1, 2])
        },
        _ => Config::default(),
    };
    c.bug = Some(bug);
    match bug {
        // A waiter whose entry is never renewed, and whose grant is slow to land: the holder's
        // next acquisition takes it for dead and is granted first.
        Broken::FifoGrantIgnoresToken => {
            c.acquisitions = 2;
            c.lease = 2;
            c.reread = 1;
            c.max_attempts = 1;
            c.crashes = 0;
            c.beats = Some(0);
            c.horizon = 3;
        }
        // A grant whose answer is lost (one attempt per request), then a cancellation.
        Broken::FifoGiveUpKeepsGrant => {
            c.max_attempts = 1;
            c.faults = 1;
            c.aborts = 1;
            c.crashes = 0;
        }
        _ => {}
    }
    c
}

/// The variants the simulator must find too. The token condition of the grant shows only
/// after a ticket is given back and taken again while a slow waiter's grant is on its way, a
/// schedule the exhaustive search finds and random runs have not.
pub const SIMULATED: [Broken; 4] = [
    Broken::FifoGiveUpKeepsGrant,
    Broken::SemGrantIgnoresHeld,
    Broken::SemGrantIgnoresEarlier,
    Broken::SemTakePastWaiter,
];

/// The property a broken variant's counterexample violates.
pub fn property(bug: Broken) -> &'static str {
    match bug {
        Broken::FifoGrantIgnoresToken => "fencing",
        Broken::FifoGiveUpKeepsGrant => "no orphan",
        Broken::SemGrantIgnoresHeld => "permits",
        Broken::SemTakeRepeats => "permits counted",
        Broken::SemGrantIgnoresEarlier | Broken::SemTakePastWaiter => "ticket order",
        _ => "",
    }
}

/// Explores `cfg` (at most `max_states` states): as for the other machines, a variant
/// breadth first (its shortest counterexample), the protocol as it ships depth first (only
/// the visited set is kept).
pub fn check(cfg: Config, max_states: usize) -> Checked<State> {
    explore::check(cfg.bug.is_none(), &FifoMachines::new(cfg), max_states, tell)
}

/// Action `a` taken in `s`, told as a counterexample's step: with the request it concerns
/// and the item it goes to.
pub fn tell(s: &State, a: &Action) -> String {
    let request = match *a {
        Action::Event(c, e) if e.on_the_wire() => s.clients[c as usize]
            .net
            .as_ref()
            .map(|n| format!("{:?} on lock {} item {}", n.sent.rq, n.sent.k, n.sent.slot)),
        _ => None,
    };
    env::step_text(s.now, a, request)
}
