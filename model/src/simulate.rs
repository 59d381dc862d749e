//! A seeded simulator: random walks through the lease model (`lease.rs`), so through the core's
//! heartbeat machine itself, at scales the exhaustive search cannot reach: leases of up to 40
//! ticks, heartbeat periods from one tick to half the lease, network delays of up to 5 ticks,
//! pauses of up to three leases, up to four waiters in other processes, long horizons. Each run draws its configuration and every choice
//! (which event happens next, each write's fate, when the waiter reads) from one seeded
//! generator, so a failing seed replays exactly. The properties are the model's.

use crate::explore::Model;
use crate::lease::{Action, Config, LeaseModel};
use dynamodb_lock_core::broken::Broken;

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
    pub config: Config,
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
        pause: rng.range(1, 3 * lease as u64) as u16,
        horizon: lease * rng.range(2, 6) as u16,
        drift: 0,
        waiters: rng.range(1, 4) as u8,
        bug,
    }
}

/// One run from `seed`: a random walk until time ends, nothing is left to do, or a property
/// fails. Returns the steps taken and the failure, if any.
pub fn run_one(seed: u64, bug: Option<Broken>) -> (u64, Option<Failure>) {
    let mut rng = Rng::new(seed);
    let config = draw(&mut rng, bug);
    let model = LeaseModel { config };
    let inits = model.init();
    let mut state = inits[rng.range(0, inits.len() as u64 - 1) as usize].clone();
    let mut path: Vec<Action> = Vec::new();
    let mut actions = Vec::new();
    loop {
        if path.len() >= MOST_STEPS_PER_RUN {
            return (
                path.len() as u64,
                Some(Failure {
                    seed,
                    config,
                    property: "time passes",
                    steps: path.iter().rev().take(20).map(|a| format!("{a:?}")).collect(),
                }),
            );
        }
        actions.clear();
        model.actions(&state, &mut actions);
        if actions.is_empty() {
            return (path.len() as u64, None);
        }
        // Time passes less often than events happen: an event is picked first when there is one.
        let events = actions.iter().filter(|a| !matches!(a, Action::Tick)).count();
        let pick = if events > 0 && actions.len() > events && rng.range(0, 3) > 0 {
            let i = rng.range(0, events as u64 - 1) as usize;
            actions.iter().filter(|a| !matches!(a, Action::Tick)).nth(i).cloned()
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
                let mut steps: Vec<String> = path.iter().map(|a| format!("{a:?}")).collect();
                steps.push(v.detail);
                return (
                    path.len() as u64,
                    Some(Failure {
                        seed,
                        config,
                        property: v.property,
                        steps,
                    }),
                );
            }
        }
    }
}

/// Runs from `seed`, `seed + 1`, ... until `steps` steps have been taken or a run fails.
pub fn simulate(seed: u64, steps: u64, bug: Option<Broken>) -> Outcome {
    let mut out = Outcome {
        runs: 0,
        steps: 0,
        failure: None,
    };
    let mut s = seed;
    while out.steps < steps {
        let (n, failure) = run_one(s, bug);
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
