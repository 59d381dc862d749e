//! A seeded simulator: random walks through the models at scales the exhaustive search cannot
//! reach, so through the core's machines themselves.
//! - The lease model (`lease.rs`, the heartbeat machine): leases of up to 40 ticks, heartbeat
//!   periods from one tick to half the lease, network delays of up to 5 ticks, pauses of up to
//!   three leases, up to four waiters in other processes, long horizons.
//! - The machines model (`machines.rs`, acquisition and release): FailClosed and FailOpen, 2
//!   to 8 clients over 1 to 4 lock ids, up to 3 acquisitions each, leases of 4 to 20 ticks,
//!   up to 8 lost, throttled or timed-out requests, 2 crashes and 2 cancelled acquisitions,
//!   `trustLocalTime` on or off, long horizons.
//!
//! - The Fifo machines model (`fifo_machines.rs`): 2 to 8 clients over 1 to 4 lock ids,
//!   acquisitions of one id or of several with one ticket, up to 3 acquisitions each, leases
//!   of 4 to 20 ticks, up to 8 lost, throttled or timed-out requests, 2 crashes and 2
//!   cancellations, a finite wait for client 0, clock origins apart by up to 10 ticks.
//!
//! - The session model (`session.rs`): one client holding two locks through its session,
//!   against one or two rivals; leases of 4 to 20 ticks, heartbeat periods up to half the
//!   lease, up to 6 heartbeats that write, up to 6 lost, throttled or timed-out requests and 2
//!   crashes.
//!
//! Each run draws its configuration and every choice (which event happens next, each
//! request's fate, when time passes) from one seeded generator, so a failing seed replays
//! exactly. The properties are the models'.

use std::fmt::Debug;

use crate::explore::{self, Model};
use crate::fifo_machines::{self, FifoMachines};
use crate::lease::{Action, Config, LeaseModel};
use crate::machines::{self, Machines};
use crate::session::{self, Sessions};
use dynamodb_lock_core::broken::Broken;
use dynamodb_lock_core::settings::Kind;

/// A small, seeded generator (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// What a simulation found.
#[derive(Debug)]
pub struct Outcome {
    pub runs: u64,
    pub steps: u64,
    /// The first failing run: its seed, configuration, the property and the steps to it.
    pub failure: Option<Failure>,
}

#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    /// The configuration drawn, as text.
    pub config: String,
    pub property: &'static str,
    pub steps: Vec<String>,
}

/// A run that takes this many steps without time ending has stopped time: some event keeps
/// being due without changing anything.
const MOST_STEPS_PER_RUN: usize = 100_000;

/// A configuration drawn from `rng`.
fn draw(rng: &mut Rng, bug: Option<Broken>) -> Config {
    let lease = rng.range(4, 40) as u16;
    let period = rng.range(1, (lease / 2).max(1) as u64) as u16;
    Config {
        lease,
        period,
        danger_margin: rng.range(0, (lease / 2) as u64) as u16,
        delay: rng.range(1, 5) as u16,
        // The variants show once an answer comes after the lease's end: their runs pause the
        // holder for longer than a lease.
        pause: match bug {
            Some(_) => rng.range(lease as u64, 3 * lease as u64) as u16,
            None => rng.range(1, 3 * lease as u64) as u16,
        },
        horizon: lease * rng.range(2, 6) as u16,
        drift: 0,
        waiters: rng.range(1, 4) as u8,
        // `close()` is left to the exhaustive lease model: a rival is granted before a late
        // loss only when its read, its wait and the holder's timer line up to the tick.
        close: false,
        // The holder writes its data once in half the runs of the protocol, and in every run
        // of an update's variant.
        update: match bug {
            None => rng.range(0, 1) == 1,
            Some(b) => Broken::UPDATE.contains(&b),
        },
        bug,
    }
}

/// One run from `seed`: a random walk until time ends, nothing is left to do, or a property
/// fails. Returns the steps taken and the failure, if any.
pub fn run_one(seed: u64, bug: Option<Broken>) -> (u64, Option<Failure>) {
    let mut rng = Rng::new(seed);
    let config = draw(&mut rng, bug);
    let model = LeaseModel { config };
    let narrate = |p: &[Action]| p.iter().map(|a| format!("{a:?}")).collect();
    let found = walk(&model, &mut rng, 3, |a| matches!(a, Action::Tick), narrate);
    run(found, seed, format!("{config:?}"))
}

/// A machines configuration drawn from `rng`.
fn draw_machines(rng: &mut Rng, bug: Option<machines::Bug>) -> machines::Config {
    let kind = match bug {
        Some(b) => b.kind(),
        None if rng.range(0, 1) == 0 => Kind::FailClosed,
        None => Kind::FailOpen,
    };
    let lease = rng.range(4, 20) as u16;
    let request_timeout = rng.range(1, 4) as u16;
    let mut c = machines::Config {
        kind,
        clients: rng.range(2, 8) as usize,
        locks: rng.range(1, 4) as usize,
        acquisitions: rng.range(1, 3) as u8,
        lease,
        reread: rng.range(1, 4) as u16,
        acquire_period: rng.range(1, 4) as u16,
        request_timeout,
        retry_count: rng.range(0, 2) as u32,
        max_attempts: rng.range(1, 4) as u32,
        faults: rng.range(0, 8) as u8,
        crashes: rng.range(0, 2) as u8,
        skew: if bug == Some(machines::Bug::WaiterTrustsHolderClock) {
            rng.range(1, 3) as u16
        } else {
            0
        },
        // With clocks that agree, trusting the holder's clock must be safe too.
        trust_local_time: bug.is_none() && rng.range(0, 1) == 1,
        horizon: lease * rng.range(3, 6) as u16,
        min_hold: rng.range(0, lease as u64 + 2) as u16,
        // Only FailOpen holders heartbeat (and only their runs draw for it).
        beats: match kind {
            // A variant of the heartbeat's write needs heartbeats to show.
            Kind::FailOpen if bug == Some(machines::Bug::RenewWithoutGuid) => rng.range(1, 2) as u8,
            Kind::FailOpen => rng.range(0, 2) as u8,
            _ => 0,
        },
        period: if kind == Kind::FailOpen {
            rng.range(1, lease as u64 / 2) as u16
        } else {
            2
        },
        // A quarter of the runs send the original's requests (user objects); the broken
        // variants are the native machines'.
        original: bug.is_none() && rng.range(0, 3) == 0,
        // Half the runs of the protocol let client 0 hand its lock over to its next
        // acquisition; of the variants, the hand-over's own (the others draw as before).
        hand_over: match bug {
            Some(machines::Bug::Core(
                Broken::HandOverLeaseFromReply | Broken::UnclaimedHandOverForgetsGuid | Broken::LineKeepsQuitter,
            )) => true,
            Some(_) => false,
            None => rng.range(0, 1) == 1,
        },
        // Half the hand-overs of the protocol meet a waiter that may give up; of the variants,
        // only those that show on a give-up (it dilutes the others' runs).
        gives_up: match bug {
            Some(machines::Bug::Core(Broken::UnclaimedHandOverForgetsGuid | Broken::LineKeepsQuitter)) => true,
            Some(_) => false,
            None => rng.range(0, 1) == 1,
        },
        // Runs of the protocol cancel up to two acquisitions; of the variants, the
        // cancellation's own (the others draw as before).
        cancels: match bug {
            Some(machines::Bug::Core(Broken::CancelSkipsSettle | Broken::CancelledTakeSkipsSettle)) => {
                rng.range(1, 2) as u8
            }
            Some(_) => 0,
            None => rng.range(0, 2) as u8,
        },
        bug,
    };
    // The model steps heartbeats and hand-overs of the native requests only.
    if c.original {
        c.beats = 0;
        c.hand_over = false;
    }
    c
}

/// One run of the machines model from `seed`.
pub fn run_machines(seed: u64, bug: Option<machines::Bug>) -> (u64, Option<Failure>) {
    let draw = |rng: &mut Rng| draw_machines(rng, bug);
    run_clients(seed, draw, Machines::new, machines::Action::Tick, machines::tell)
}

/// One run of a model of clients from `seed`: its configuration drawn by `draw`, then how
/// strongly events are picked before time passes (its action `tick`; some runs let answers
/// come late), then the walk, its steps told by `tell`.
fn run_clients<C: Debug, M: Model>(
    seed: u64,
    draw: impl FnOnce(&mut Rng) -> C,
    model: impl FnOnce(C) -> M,
    tick: M::Action,
    tell: impl Fn(&M::State, &M::Action) -> String,
) -> (u64, Option<Failure>)
where
    M::Action: Debug + PartialEq,
{
    let is_tick = |a: &M::Action| *a == tick;
    let mut rng = Rng::new(seed);
    let config = draw(&mut rng);
    let bias = rng.range(1, 7);
    let text = format!("{config:?}, events first {bias} in {}", bias + 1);
    let model = model(config);
    let found = walk(&model, &mut rng, bias, is_tick, |p| explore::narrate(&model, p, &tell));
    run(found, seed, text)
}

/// A Fifo machines configuration drawn from `rng`.
fn draw_fifo(rng: &mut Rng, bug: Option<Broken>) -> fifo_machines::Config {
    // Leases from 2 ticks where the variant needs a slow waiter's grant to outlast one.
    let shortest = if bug == Some(Broken::FifoGrantIgnoresToken) {
        2
    } else {
        4
    };
    let lease = rng.range(shortest, 20) as u16;
    // A semaphore of one or two permits in half the runs (always for its variants), its
    // clients asking for one permit or all.
    let sem = bug.is_some_and(|b| Broken::SEMAPHORE.contains(&b)) || (bug.is_none() && rng.range(0, 1) == 1);
    let permits = sem.then(|| rng.range(1, 2) as u8);
    let clients = rng.range(2, 8) as usize;
    let asks = match permits {
        Some(n) => (0..clients).map(|_| rng.range(1, n.into()) as u8).collect(),
        None => Vec::new(),
    };
    let several = permits.is_none() && rng.range(0, 1) == 1;
    fifo_machines::Config {
        clients,
        permits,
        asks,
        locks: rng.range(1, 4) as usize,
        acquisitions: rng.range(1, 3) as u8,
        several,
        lease,
        reread: rng.range(1, 4) as u16,
        request_timeout: rng.range(1, 4) as u16,
        max_attempts: rng.range(1, 4) as u32,
        wait: match rng.range(0, 2) {
            0 => Some(rng.range(0, 2 * lease as u64) as u16),
            _ => None,
        },
        faults: rng.range(0, 8) as u8,
        crashes: rng.range(0, 2) as u8,
        aborts: rng.range(0, 2) as u8,
        // A slow process, whose entries others take for dead, now and then (always where the
        // variant needs one to show).
        beats: match rng.range(0, 3) {
            _ if bug == Some(Broken::FifoGrantIgnoresToken) => Some(0),
            0 => Some(rng.range(0, 2) as u8),
            _ => None,
        },
        offset: rng.range(0, 10) as u16,
        horizon: lease * rng.range(3, 6) as u16,
        min_hold: rng.range(0, lease as u64 + 2) as u16,
        // Half the Fifo lock runs of the protocol make clients 0 and 1 one process, sharing
        // its registry.
        process: !sem && bug.is_none() && rng.range(0, 1) == 1,
        bug,
    }
}

/// One run of the Fifo machines model from `seed`.
pub fn run_fifo(seed: u64, bug: Option<Broken>) -> (u64, Option<Failure>) {
    let draw = |rng: &mut Rng| draw_fifo(rng, bug);
    use fifo_machines::{tell, Action};
    run_clients(seed, draw, FifoMachines::new, Action::Tick, tell)
}

/// A session configuration drawn from `rng`.
fn draw_session(rng: &mut Rng, bug: Option<Broken>) -> session::Config {
    let lease = rng.range(4, 20) as u16;
    let mut cfg = session::Config {
        lease,
        period: rng.range(1, lease as u64 / 2) as u16,
        reread: rng.range(1, 4) as u16,
        request_timeout: rng.range(1, 4) as u16,
        max_attempts: rng.range(1, 4) as u32,
        rivals: rng.range(1, 2) as u8,
        faults: rng.range(0, 6) as u8,
        crashes: rng.range(0, 2) as u8,
        beats: rng.range(0, 6) as u8,
        horizon: lease * rng.range(3, 6) as u16,
        handover: rng.range(0, 1) == 1,
        close: rng.range(0, 1) == 1,
        revoke: rng.range(0, 1) == 1,
        keeps_a: false,
        operator_delay: 0,
        bug,
    };
    // In half the runs with a revocation, client 0 keeps lock A: a rival then waits out the
    // revoked lease while client 0 still holds A, unless it was told.
    cfg.keeps_a = cfg.revoke && rng.range(0, 1) == 1;
    // And an operator whose writes are up to a lease apart.
    if cfg.revoke {
        cfg.operator_delay = rng.range(0, lease.into()) as u16;
    }
    cfg
}

/// One run of the session model from `seed`.
pub fn run_session(seed: u64, bug: Option<Broken>) -> (u64, Option<Failure>) {
    let draw = |rng: &mut Rng| draw_session(rng, bug);
    run_clients(seed, draw, Sessions::new, session::Action::Tick, session::tell)
}

/// What one walk found: its length, and the failing property with the steps to it.
type Walk = (u64, Option<(&'static str, Vec<String>)>);

/// What walk `w` found, as the run from `seed` on `config`.
fn run((n, found): Walk, seed: u64, config: String) -> (u64, Option<Failure>) {
    let failure = |(property, steps)| Failure {
        seed,
        config,
        property,
        steps,
    };
    (n, found.map(failure))
}

/// A random walk through `model`. Time passes (`is_tick`) less often than events happen:
/// when both may, an event is picked first `bias` times in `bias + 1`.
fn walk<M: Model>(
    model: &M,
    rng: &mut Rng,
    bias: u64,
    is_tick: impl Fn(&M::Action) -> bool,
    narrate: impl Fn(&[M::Action]) -> Vec<String>,
) -> Walk
where
    M::Action: Debug,
{
    let inits = model.init();
    let mut state = inits[rng.range(0, inits.len() as u64 - 1) as usize].clone();
    let mut path: Vec<M::Action> = Vec::new();
    let mut actions = Vec::new();
    loop {
        if path.len() >= MOST_STEPS_PER_RUN {
            let steps = path.iter().rev().take(20).map(|a| format!("{a:?}")).collect();
            return (path.len() as u64, Some(("time passes", steps)));
        }
        actions.clear();
        model.actions(&state, &mut actions);
        if actions.is_empty() {
            return (path.len() as u64, None);
        }
        // An event is picked first when there is one.
        let events = actions.iter().filter(|a| !is_tick(a)).count();
        let pick = if events > 0 && actions.len() > events && rng.range(0, bias) > 0 {
            let i = rng.range(0, events as u64 - 1) as usize;
            actions.iter().filter(|a| !is_tick(a)).nth(i).cloned()
        } else {
            let i = rng.range(0, actions.len() as u64 - 1) as usize;
            actions.get(i).cloned()
        };
        let Some(action) = pick else {
            return (path.len() as u64, None);
        };
        path.push(action.clone());
        let checked = model
            .next(&state, &action)
            .and_then(|next| model.invariant(&next).map(|()| next));
        match checked {
            Ok(next) => state = next,
            Err(v) => {
                let mut steps = narrate(&path);
                steps.push(v.detail);
                return (path.len() as u64, Some((v.property, steps)));
            }
        }
    }
}

/// Runs from `seed`, `seed + 1`, ... (`run`, one run from a seed: its steps and failure) until
/// `steps` steps have been taken or a run fails.
pub fn repeat(seed: u64, steps: u64, run: impl Fn(u64) -> (u64, Option<Failure>)) -> Outcome {
    let mut out = Outcome {
        runs: 0,
        steps: 0,
        failure: None,
    };
    let mut s = seed;
    while out.steps < steps {
        let (n, failure) = run(s);
        out.runs += 1;
        out.steps += n;
        if failure.is_some() {
            out.failure = failure;
            break;
        }
        s = s.wrapping_add(1);
    }
    out
}
