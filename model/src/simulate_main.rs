//! `npm run simulate -- [--seed N] [--steps M]`: seeded random runs of the lease model (the
//! core's heartbeat machine against a waiter, with pauses and late and lost answers, the holder
//! writing its data in half the runs) and of the
//! machines model (the core's acquisition, heartbeat and release machines, 2 to 8 clients over 1 to 4
//! ids) and of the Fifo machines model (the core's Fifo acquisition and release, 2 to 8 clients
//! over 1 to 4 ids, acquisitions of several ids with one ticket) and of the session model (one
//! client holding two locks through its session against one or two rivals), first of the protocol as it ships, then of each broken variant, which a run must
//! catch. Prints the
//! runs, steps and properties, each variant's failing seed, and ends with one JSON line. Exits
//! with 1 when the protocol fails a property (its seed replays the run exactly: `--seed` with
//! `--steps 1`) or a variant goes uncaught.

use dynamodb_lock_core::broken::Broken;
use dynamodb_lock_model::fifo_machines;
use dynamodb_lock_model::lease::PROPERTY;
use dynamodb_lock_model::machines::Bug;
use dynamodb_lock_model::session;
use dynamodb_lock_model::simulate::{repeat, run_fifo, run_machines, run_one, run_session, Failure, Outcome};

/// Steps of a Fifo run searched for each broken variant, at the least.
const FIFO_VARIANT_STEPS: u64 = 1_500_000;

fn arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    match args.get(i + 1).map(|v| v.parse::<u64>()) {
        Some(Ok(v)) => Some(v),
        _ => {
            eprintln!("{name} needs a number");
            std::process::exit(2);
        }
    }
}

/// The simulation so far: its seed, whether everything holds, and each variant's JSON.
struct Sim {
    seed: u64,
    ok: bool,
    variants: Vec<String>,
}

impl Sim {
    /// Runs a model (`run`, one run from a seed) for `steps` steps as the protocol ships and
    /// prints how it fared; prints that the variants `left` are left to the exhaustive model;
    /// then runs each of `bugs` (named by `name`) from the same seeds, for as many steps and
    /// at least `least` (a rare schedule may be needed), until a property that `caught`
    /// accepts fails, and checks that the failing run replays exactly from its seed. Returns
    /// the protocol's outcome.
    #[allow(clippy::too_many_arguments)]
    fn section<B: Copy>(
        &mut self,
        steps: u64,
        least: u64,
        left: impl IntoIterator<Item = Broken>,
        bugs: impl IntoIterator<Item = B>,
        name: impl Fn(B) -> &'static str,
        caught: impl Fn(B, &str) -> bool,
        run: impl Fn(u64, Option<B>) -> (u64, Option<Failure>),
    ) -> Outcome {
        let (seed, o) = (self.seed, repeat(self.seed, steps, |s| run(s, None)));
        let verdict = if o.failure.is_none() { "holds" } else { "FAILS" };
        println!(
            "Protocol as it ships: {} runs, {} steps from seed {seed}: {verdict}",
            o.runs, o.steps
        );
        if let Some(f) = &o.failure {
            println!("    seed {} ({}): {}", f.seed, f.config, f.property);
            for step in &f.steps {
                println!("      {step}");
            }
        }
        println!("Broken variants (each must be caught):");
        self.ok &= o.failure.is_none();
        for bug in left {
            println!("  {}: left to the exhaustive model (`npm run model`)", bug.name());
        }
        for bug in bugs {
            let b = repeat(seed, steps.max(least), |s| run(s, Some(bug)));
            let name = name(bug);
            let found = b.failure.as_ref().filter(|f| caught(bug, f.property));
            if let Some(f) = found {
                println!(
                    "  {name}: {} violated after {} runs, {} steps; replay with --seed {}",
                    f.property, b.runs, b.steps, f.seed
                );
                if run(f.seed, Some(bug)).1.as_ref().map(|a| &a.steps) != Some(&f.steps) {
                    self.ok = false;
                    println!("    its replay differs");
                }
            } else {
                self.ok = false;
                let other = b.failure.as_ref().map(|f| f.property);
                println!(
                    "  {name}: NOT CAUGHT in {} runs, {} steps (found: {other:?})",
                    b.runs, b.steps
                );
            }
            self.variants.push(format!(
                "{{\"name\":\"{name}\",\"caught\":{},\"runs\":{},\"steps\":{}}}",
                found.is_some(),
                b.runs,
                b.steps
            ));
        }
        o
    }
}

fn main() {
    let seed = arg("--seed").unwrap_or(1);
    let steps = arg("--steps").unwrap_or(2_000_000);
    let started = std::time::Instant::now();
    let mut sim = Sim {
        seed,
        ok: true,
        variants: Vec::new(),
    };

    println!("Property: {PROPERTY}");
    // An update that takes the whole lease shows only when a lost write, a parked heartbeat
    // and a rival's take line up to the tick, with the holder never paused.
    let out = sim.section(
        steps,
        1_000_000,
        [Broken::UpdateTakesWholeLease],
        Broken::TIMING.into_iter().chain([Broken::ParkedMissesLapse]),
        Broken::name,
        |_, p| p == PROPERTY,
        run_one,
    );

    println!(
        "Machines: FailClosed and FailOpen acquisition, heartbeats and release, with native or the original's \
         requests (properties: mutual exclusion, fencing, no lost release, no orphan, liveness)"
    );
    let m = sim.section(steps, 1_000_000, [], Bug::ALL, Bug::name, Bug::caught_by, run_machines);

    println!(
        "Fifo machines: acquisition with its queue entries, grant and give-up, one or several ids per \
         acquisition, or a semaphore's permits; release (properties: {})",
        fifo_machines::PROPERTIES.join(", ")
    );
    // A Fifo step costs more than another model's: a quarter of the steps. Waiters that slow
    // their reads as they wait meet a give-up racing a grant less often per step: from seed 1
    // the give-up variant shows after some 540,000 steps.
    let f = sim.section(
        (steps / 4).max(1),
        FIFO_VARIANT_STEPS,
        Broken::FIFO
            .into_iter()
            .chain(Broken::SEMAPHORE)
            .filter(|b| !fifo_machines::SIMULATED.contains(b)),
        fifo_machines::SIMULATED,
        Broken::name,
        |bug, p| p == fifo_machines::property(bug),
        run_fifo,
    );
    println!(
        "Sessions: a client holding two locks through its session against rivals that end it \
         (properties: {})",
        session::PROPERTIES.join(", ")
    );
    let se = sim.section(
        steps,
        1_000_000,
        session::VARIANTS
            .into_iter()
            .filter(|b| !session::SIMULATED.contains(b)),
        session::SIMULATED,
        Broken::name,
        session::caught_by,
        run_session,
    );
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    let counts = |o: &Outcome| {
        format!(
            "\"runs\":{},\"steps\":{},\"holds\":{}",
            o.runs,
            o.steps,
            o.failure.is_none()
        )
    };
    println!(
        "{{\"seed\":{seed},{},\"machines\":{{{}}},\"fifo\":{{{}}},\"sessions\":{{{}}},\"variants\":[{}]}}",
        counts(&out),
        counts(&m),
        counts(&f),
        counts(&se),
        sim.variants.join(",")
    );
    if !sim.ok {
        std::process::exit(1);
    }
}
