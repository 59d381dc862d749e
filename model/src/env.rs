//! The environment both client models step the core's machines in (`machines`: FailClosed
//! and FailOpen; `fifo_machines`: Fifo), written once:
//! - the model's clock, in ticks (a tick is a millisecond to the machines), and a machine's
//!   inputs at a tick (`at`);
//! - a request on its way (`Net`, `NetState`), the faults and crashes still to happen
//!   (`Left`), and what may happen to a client (`Event`): its request lands, its answer comes
//!   back, it or its answer is lost, it is throttled, its timeout passes, the machine's wait
//!   ends, the client crashes with its request landing or not; `happen` carries each out
//!   through what a model says of its clients (`Clients`);
//! - the answers a machine is given: the store's replies, a timeout, a throttle (`Fail`);
//! - the settings and FailOpen fields both models give the core, a request landing on an
//!   item as the addon sends it (`apply`), a machine stepped (`resume`), the end of a held
//!   lock as the addon's runtime gives it (`end`);
//! - the properties both models check: mutual exclusion, fencing, no lost release, no
//!   orphan;
//! - a counterexample's step, told (`step_text`).

use std::fmt;
use std::time::Duration;

use dynamodb_lock_core::heartbeat;
use dynamodb_lock_core::op::{self, Op, OpenFields};
use dynamodb_lock_core::request::{Adds, Answer, Env, Machine, Reply, Req, Step};
use dynamodb_lock_core::settings::{Kind, Lock};

use crate::explore::{Model, Violation};
use crate::item::{Item, Ver, FIELDS, G};

/// Ticks of the model's clock.
pub type Tick = u16;

/// A tick as the machines' time.
pub fn ms(t: Tick) -> Duration {
    Duration::from_millis(t.into())
}

/// A machine's inputs at tick `now`: its monotonic clock and the wall clock both read `now`,
/// and nothing is cancelled.
pub fn at(now: Tick) -> Env {
    Env {
        now: ms(now),
        unix_ms: now.into(),
        cancelled: false,
        random: 0,
    }
}

/// The first tick at or after `d`.
pub fn tick(d: Duration) -> Tick {
    Tick::try_from(d.as_micros().div_ceil(1000)).unwrap_or(Tick::MAX)
}

/// The model's errors: what a failed attempt reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fail {
    Timeout,
    Throttled,
}

/// What a machine is answered.
pub type Ans = Answer<Item, Fail>;

/// How a request on its way stands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NetState {
    /// Not landed yet.
    Out,
    /// Landed: the answer, on its way back.
    Landed(Ans),
    /// Lost (before or after landing): the machine learns of it at its timeout.
    Lost,
}

/// A request on its way: what it was sent as, when it times out, and how it stands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Net<R> {
    pub sent: R,
    pub timeout_at: Tick,
    pub state: NetState,
}

impl<R> Net<R> {
    /// It has not landed yet.
    pub fn out(&self) -> bool {
        self.state == NetState::Out
    }
}

/// A client's request on its way (`net`) has reached its timeout, or its machine's wait
/// (`wake`) has ended, at `now`: it is due before time goes on.
pub fn due<R>(net: Option<&Net<R>>, wake: Option<Tick>, now: Tick) -> bool {
    wake.is_some_and(|w| w <= now) || net.is_some_and(|n| n.timeout_at <= now)
}

/// A client waits for a time (`wake`), or has a request on its way (`net`): time going on
/// matters to it.
pub fn pending<R>(net: Option<&Net<R>>, wake: Option<Tick>) -> bool {
    wake.is_some_and(|w| w != Tick::MAX) || net.is_some()
}

/// The faults (lost or throttled requests and answers) and the crashes still to happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Left {
    pub faults: u8,
    pub crashes: u8,
}

impl Left {
    pub fn new(faults: u8, crashes: u8) -> Left {
        Left { faults, crashes }
    }
}

/// The answer to a request whose timeout passed first: it may have landed, or may still.
pub const TIMED_OUT: Ans = Answer::Failed {
    error: Fail::Timeout,
    transient: true,
    maybe_applied: true,
};

/// The answer to a throttled request: it did not land.
pub const THROTTLED: Ans = Answer::Failed {
    error: Fail::Throttled,
    transient: true,
    maybe_applied: false,
};

/// The holder's fields of a FailOpen write (or a Fifo grant or heartbeat) whose lease is
/// `lease` ticks: the model's item keeps no owner, data or TTL.
pub fn open_fields(lease: Tick) -> OpenFields<'static> {
    OpenFields {
        lease_duration_ms: lease.into(),
        ..FIELDS
    }
}

/// Request `req` lands on `item` as the addon sends it (the core's `Req::op`, with the
/// holder's `fields`), through the core's `op::apply`: the item after it, and the reply.
pub fn apply(req: &Req<G, Ver>, fields: OpenFields<'_>, item: Option<Item>) -> (Option<Item>, Reply<Item>) {
    let adds = Adds {
        fields,
        ttl_released: None,
    };
    let parts = req.parts(&adds);
    op::apply(&req.op(&adds, &parts), item)
}

/// A heartbeat's write lands on `item`: the core's renewal (`op::Op::Renew`) of one of
/// `guids` to `new`, with a lease of `lease` ticks. Whether it renewed (else it was refused).
pub fn renew(item: &mut Option<Item>, guids: &[G], new: G, lease: Tick) -> bool {
    renewal(item, guids, new, lease).0
}

/// `renew`, and the `guid` of a lock the renewed item names revoked (a session's; 0: none).
pub fn renewal(item: &mut Option<Item>, guids: &[G], new: G, lease: Tick) -> (bool, G) {
    let fields = open_fields(lease);
    let op = Op::Renew {
        guids,
        new_guid: &new,
        fields: &fields,
    };
    let (after, reply) = op::apply(&op, *item);
    *item = after;
    match reply {
        Reply::Refused(_) => (false, 0),
        Reply::Revoked(guids) => (true, guids.first().and_then(|g| g.first()).copied().unwrap_or(0)),
        _ => (true, 0),
    }
}

/// The random number a model's holder draws its retry pauses with: with `beat_config`'s
/// backoffs it makes every pause one tick.
pub const RETRY_PAUSE_ONE_TICK: u64 = 1;

/// The heartbeat settings of a model's holder: a lease of `lease` ticks renewed every
/// `period`, writes timed out after `request_timeout`, `"danger"` a tick before the end, and
/// timers that may fire `timer_grain` late.
pub fn beat_config(lease: Tick, period: Tick, request_timeout: Tick, timer_grain: Duration) -> heartbeat::Config {
    heartbeat::Config {
        lease: ms(lease),
        period: ms(period),
        danger_margin: ms(1),
        request_timeout: ms(request_timeout),
        timer_grain,
        writes_out: heartbeat::MOST_WRITES_OUT,
        base_backoff: ms(1),
        max_backoff: ms(1),
    }
}

/// Steps machine `m` with the answer to its request, or, without one, at the end of its wait.
pub fn resume<M: Machine<Item, Fail>>(m: &mut M, a: Option<Ans>, env: &Env) -> Step<G, Ver, M::Out> {
    match a {
        Some(a) => m.answer(a, env),
        None => m.timer(env),
    }
}

/// What is left to a model of a machine's step once `carry` has put its request on the wire
/// or set its timer.
pub enum Carried<O> {
    /// Deliver this answer to the machine at once.
    Answer(Ans),
    /// The request is out, or the timer set.
    Set,
    /// The machine ended.
    Done(O),
}

/// Carries a machine's step for a client whose request and timer are `net` and `wake`, at
/// `now`; `sent` makes the request as the model keeps it (given its timeout).
pub fn carry<S, O>(
    step: Step<G, Ver, O>,
    now: Tick,
    net: &mut Option<Net<S>>,
    wake: &mut Option<Tick>,
    sent: impl FnOnce(Req<G, Ver>, Tick) -> S,
) -> Carried<O> {
    *net = None;
    *wake = None;
    match step {
        // The model's item keeps no first-in-line mark: its write is answered at once, always
        // accepted.
        Step::Send {
            req: Req::MarkWaiting { .. },
            ..
        } => Carried::Answer(Answer::Done(Reply::Done)),
        // Past its timeout already: the driver does not send it.
        Step::Send { timeout_at, .. } if tick(timeout_at) <= now => Carried::Answer(TIMED_OUT),
        Step::Send { req, timeout_at } => {
            let timeout_at = tick(timeout_at);
            *net = Some(Net {
                sent: sent(req, timeout_at),
                timeout_at,
                state: NetState::Out,
            });
            Carried::Set
        }
        Step::Wait { until, .. } => {
            *wake = Some(tick(until));
            Carried::Set
        }
        Step::Done(out) => Carried::Done(out),
    }
}

/// The settings both models give the core's machines: a lease of `lease` ticks, re-reads
/// every `reread` ticks (the first waiter's and the later ones' alike), requests timed out
/// after `request_timeout` ticks and tried `max_attempts` times, with backoffs of one to two
/// ticks. The rest are the defaults (`Lock::new`; a lock of another kind sets its own): one
/// retry, no acquire period, no heartbeat period, no trust in the holder's clock.
pub fn lock(kind: Kind, lease: Tick, reread: Tick, request_timeout: Tick, max_attempts: u32) -> Lock {
    Lock {
        lease_duration_ms: lease.into(),
        reread: ms(reread),
        later_waiter_reread: ms(reread),
        request_timeout: ms(request_timeout),
        max_attempts,
        base_backoff: ms(1),
        max_backoff: ms(2),
        ..Lock::new(kind)
    }
}

/// What the environment does to one client: a step of the request it has on its way, the
/// end of its machine's wait, or its crash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The request lands.
    Land,
    /// The request's answer comes back.
    Answer,
    /// The request is lost before it lands, or its answer after.
    Lose,
    /// The request is throttled.
    Throttle,
    /// The request's timeout passes before its answer came.
    TimeOut,
    /// The machine's wait ends.
    Timer,
    /// The client crashes; `true`: its request on its way lands first.
    Crash(bool),
}

impl Event {
    /// The events that may happen to a client's request on its way while `faults` may still
    /// happen, and the end of its machine's wait.
    pub fn may_happen<R>(
        request: Option<&Net<R>>,
        wake: Option<Tick>,
        now: Tick,
        faults: u8,
        mut push: impl FnMut(Event),
    ) {
        if let Some(n) = request {
            match n.state {
                NetState::Out => {
                    push(Event::Land);
                    if faults > 0 {
                        push(Event::Lose);
                        push(Event::Throttle);
                    }
                }
                NetState::Landed(_) => {
                    push(Event::Answer);
                    if faults > 0 {
                        push(Event::Lose);
                    }
                }
                NetState::Lost => {}
            }
            if n.timeout_at <= now {
                push(Event::TimeOut);
            }
        }
        if wake.is_some_and(|w| w <= now) {
            push(Event::Timer);
        }
    }

    /// The crashes that may happen to a client while `crashes` may still happen (a request
    /// on its way that has not landed may land as it crashes).
    pub fn may_crash<R>(crashes: u8, request: Option<&Net<R>>, mut push: impl FnMut(Event)) {
        if crashes > 0 {
            push(Event::Crash(false));
            if request.is_some_and(Net::out) {
                push(Event::Crash(true));
            }
        }
    }

    /// The event concerns the request on its way (its landing, answer, loss, throttle or
    /// timeout).
    pub fn on_the_wire(self) -> bool {
        !matches!(self, Event::Timer | Event::Crash(_))
    }

    /// Tells what happens to client `c`, as a counterexample's step.
    pub fn describe(self, c: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Land => write!(f, "c{c}'s request lands"),
            Event::Answer => write!(f, "c{c} gets the answer"),
            Event::Lose => write!(f, "c{c}'s request or its answer is lost"),
            Event::Throttle => write!(f, "c{c}'s request is throttled"),
            Event::TimeOut => write!(f, "c{c}'s request times out"),
            Event::Timer => write!(f, "c{c}'s wait ends"),
            Event::Crash(landed) => write!(f, "c{c} crashes (requests in flight land: {landed})"),
        }
    }
}

/// A model whose clients' machines send their requests through the environment: what the
/// environment's events reach of its state, and what its clients do when an event reaches
/// them.
pub trait Clients: Model {
    /// What a request on its way was sent as: the request, where it goes, when it times out.
    type Sent: Clone;

    /// The faults and crashes still to happen in `s`, client `i`'s request on its way and
    /// when its machine's wait ends.
    fn wire(s: &mut Self::State, i: usize) -> (&mut Left, &mut Option<Net<Self::Sent>>, &mut Option<Tick>);
    /// Client `i`'s request `sent` lands: applies it to its item; the store's answer.
    fn apply_sent(&self, s: &mut Self::State, i: usize, sent: &Self::Sent) -> Ans;
    /// Client `i`'s request on its way lands.
    fn land(&self, s: &mut Self::State, i: usize) -> Ans {
        let sent = Self::wire(s, i).1.as_ref().expect("a request").sent.clone();
        self.apply_sent(s, i, &sent)
    }
    /// Hands client `i`'s machine the answer to its request, or the end of its wait (`None`).
    fn resume(&self, s: &mut Self::State, i: usize, a: Option<Ans>) -> Result<(), Violation>;
    /// Hands client `i`'s machine the answer to its request.
    fn deliver(&self, s: &mut Self::State, i: usize, a: Ans) -> Result<(), Violation> {
        self.resume(s, i, Some(a))
    }
    /// Client `i`'s machine's wait ends.
    fn timer(&self, s: &mut Self::State, i: usize) -> Result<(), Violation> {
        *Self::wire(s, i).2 = None;
        self.resume(s, i, None)
    }
    /// A request timed out while it stood as `was`, before its machine is told.
    fn timed_out(&self, _s: &mut Self::State, _was: &NetState) {}
    /// Client `i` crashed (its request landed first, if it was to): what it keeps.
    fn crashed(&self, s: &mut Self::State, i: usize);
}

/// Carries out event `e` on client `i` of model `m`.
pub fn happen<M: Clients>(m: &M, s: &mut M::State, i: usize, e: Event) -> Result<(), Violation> {
    match e {
        Event::Land => {
            let ans = m.land(s, i);
            let (_, request, _) = M::wire(s, i);
            request.as_mut().expect("a request").state = NetState::Landed(ans);
        }
        Event::Answer => {
            let (_, request, _) = M::wire(s, i);
            let NetState::Landed(ans) = request.take().expect("a request").state else {
                unreachable!("an answer comes back once its request landed")
            };
            m.deliver(s, i, ans)?;
        }
        Event::Lose => {
            let (left, request, _) = M::wire(s, i);
            left.faults -= 1;
            request.as_mut().expect("a request").state = NetState::Lost;
        }
        Event::Throttle => {
            let (left, request, _) = M::wire(s, i);
            left.faults -= 1;
            *request = None;
            m.deliver(s, i, THROTTLED)?;
        }
        Event::TimeOut => {
            let (_, request, _) = M::wire(s, i);
            let was = request.take().expect("a request").state;
            m.timed_out(s, &was);
            m.deliver(s, i, TIMED_OUT)?;
        }
        Event::Timer => m.timer(s, i)?,
        Event::Crash(landed) => {
            let (left, request, _) = M::wire(s, i);
            left.crashes -= 1;
            if landed && request.as_ref().is_some_and(Net::out) {
                m.land(s, i);
            }
            m.crashed(s, i);
        }
    }
    Ok(())
}

/// Mutual exclusion: of `clients` clients, no two believe at once (`believes(i, k)`) that
/// they hold one of `locks` locks.
pub fn mutual_exclusion(
    locks: usize,
    clients: usize,
    now: Tick,
    believes: impl Fn(usize, u8) -> bool,
) -> Result<(), Violation> {
    for k in 0..locks as u8 {
        let holders: Vec<usize> = (0..clients).filter(|&i| believes(i, k)).collect();
        if holders.len() > 1 {
            let detail = format!("clients {holders:?} both hold lock {k} at tick {now}");
            return Err(Violation::new("mutual exclusion", detail));
        }
    }
    Ok(())
}

/// Fencing: client `i` is granted lock `k` with `token`, its lease lasting until `until`;
/// a grant whose lease still lasts must carry a token above every earlier one's (`last`, the
/// last such grant's token, which it becomes).
pub fn fencing(last: &mut u8, i: usize, k: u8, token: u8, until: Tick, now: Tick) -> Result<(), Violation> {
    if until > now {
        if token <= *last {
            let detail = format!("c{i} granted lock {k} with token {token} after a holder with token {last}");
            return Err(Violation::new("fencing", detail));
        }
        *last = token;
    }
    Ok(())
}

/// No lost release, violated: client `i` was told lock `k` is released, and still holds it.
pub fn lost_release(i: usize, k: u8) -> Violation {
    Violation::new(
        "no lost release",
        format!("c{i} was told lock {k} is released, and still holds it"),
    )
}

/// No orphan, violated: client `i` was told lock `k` was not acquired, and `item` (the lock's
/// item, or a Fifo head) is its own.
pub fn orphan(i: usize, k: u8, item: &str) -> Violation {
    Violation::new(
        "no orphan",
        format!("c{i} was told lock {k} was not acquired, and {item} is its own"),
    )
}

/// A counterexample's step: action `a`, taken at tick `now`, with the request it concerns
/// if any.
pub fn step_text(now: Tick, a: &impl fmt::Debug, request: Option<String>) -> String {
    match request {
        Some(r) => format!("t{now} {a:?}: {r}"),
        None => format!("t{now} {a:?}"),
    }
}
