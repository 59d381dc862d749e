//! `npm run simulate -- [--seed N] [--steps M]`: seeded random runs of the lease model (the
//! core's heartbeat machine against a waiter, with pauses and late and lost answers) and of the
//! machines model (the core's acquisition, heartbeat and release machines, 2 to 8 clients over 1 to 4
//! ids) and of the Fifo machines model (the core's Fifo acquisition and release, 2 to 8 clients
//! over 1 to 4 ids, acquisitions of several ids with one ticket), first of the protocol as it ships, then of each broken variant, which a run must
//! catch. Prints the
//! runs, steps and properties, each variant's failing seed, and ends with one JSON line. Exits
//! with 1 when the protocol fails a property (its seed replays the run exactly: `--seed` with
//! `--steps 1`) or a variant goes uncaught.

use dynamodb_lock_core::broken::Broken;
use dynamodb_lock_model::fifo_machines;
use dynamodb_lock_model::lease::PROPERTY;
use dynamodb_lock_model::machines::Bug;
use dynamodb_lock_model::simulate::{
    run_fifo, run_machines, run_one, simulate, simulate_fifo, simulate_machines, Failure,
};

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

fn show(f: &Failure) {
    println!("    seed {} ({}): {}", f.seed, f.config, f.property);
    for step in &f.steps {
        println!("      {step}");
    }
}

fn main() {
    let seed = arg("--seed").unwrap_or(1);
    let steps = arg("--steps").unwrap_or(2_000_000);
    let started = std::time::Instant::now();
    let mut ok = true;
    println!("Property: {PROPERTY}");
    let out = simulate(seed, steps, None);
    println!(
        "Protocol as it ships: {} runs, {} steps from seed {seed}: {}",
        out.runs,
        out.steps,
        if out.failure.is_none() { "holds" } else { "FAILS" }
    );
    if let Some(f) = &out.failure {
        ok = false;
        show(f);
    }
    let mut variants = Vec::new();
    println!("Broken variants (each must be caught):");
    for bug in Broken::TIMING {
        // Each variant from the same seeds, until caught (or as many steps, and at least a
        // million: a rare schedule may be needed).
        let b = simulate(seed, steps.max(1_000_000), Some(bug));
        match &b.failure {
            Some(f) if f.property == PROPERTY => {
                println!(
                    "  {}: caught after {} runs, {} steps; replay with --seed {}",
                    bug.name(),
                    b.runs,
                    b.steps,
                    f.seed
                );
                // The failing run replays exactly.
                let (_, again) = run_one(f.seed, Some(bug));
                if again.as_ref().map(|a| &a.steps) != Some(&f.steps) {
                    ok = false;
                    println!("    its replay differs");
                }
            }
            _ => {
                ok = false;
                println!("  {}: NOT CAUGHT in {} runs, {} steps", bug.name(), b.runs, b.steps);
            }
        }
        variants.push(format!(
            "{{\"name\":\"{}\",\"caught\":{},\"runs\":{},\"steps\":{}}}",
            bug.name(),
            b.failure.is_some(),
            b.runs,
            b.steps
        ));
    }
    println!(
        "Machines: FailClosed and FailOpen acquisition, heartbeats and release, with native or the original's \
         requests (properties: mutual exclusion, fencing, no \
         lost release, no orphan, liveness)"
    );
    let m = simulate_machines(seed, steps, None);
    println!(
        "Protocol as it ships: {} runs, {} steps from seed {seed}: {}",
        m.runs,
        m.steps,
        if m.failure.is_none() { "holds" } else { "FAILS" }
    );
    if let Some(f) = &m.failure {
        ok = false;
        show(f);
    }
    println!("Broken variants (each must be caught):");
    for bug in Bug::ALL {
        let b = simulate_machines(seed, steps.max(1_000_000), Some(bug));
        match &b.failure {
            Some(f) if bug.caught_by(f.property) => {
                println!(
                    "  {}: {} violated after {} runs, {} steps; replay with --seed {}",
                    bug.name(),
                    f.property,
                    b.runs,
                    b.steps,
                    f.seed
                );
                let (_, again) = run_machines(f.seed, Some(bug));
                if again.as_ref().map(|a| &a.steps) != Some(&f.steps) {
                    ok = false;
                    println!("    its replay differs");
                }
            }
            other => {
                ok = false;
                println!(
                    "  {}: NOT CAUGHT in {} runs, {} steps (found: {:?})",
                    bug.name(),
                    b.runs,
                    b.steps,
                    other.as_ref().map(|f| f.property)
                );
            }
        }
        variants.push(format!(
            "{{\"name\":\"{}\",\"caught\":{},\"runs\":{},\"steps\":{}}}",
            bug.name(),
            b.failure.as_ref().is_some_and(|f| bug.caught_by(f.property)),
            b.runs,
            b.steps
        ));
    }
    println!(
        "Fifo machines: acquisition with its queue entries, grant and give-up, one or several ids per \
         acquisition; release (properties: {})",
        fifo_machines::PROPERTIES.join(", ")
    );
    // A Fifo step costs more than another model's: a quarter of the steps.
    let fifo_steps = (steps / 4).max(1);
    let f = simulate_fifo(seed, fifo_steps, None);
    println!(
        "Protocol as it ships: {} runs, {} steps from seed {seed}: {}",
        f.runs,
        f.steps,
        if f.failure.is_none() { "holds" } else { "FAILS" }
    );
    if let Some(failure) = &f.failure {
        ok = false;
        show(failure);
    }
    println!("Broken variants (each must be caught):");
    for bug in Broken::FIFO
        .into_iter()
        .filter(|b| !fifo_machines::SIMULATED.contains(b))
    {
        println!("  {}: left to the exhaustive model (`npm run model`)", bug.name());
    }
    for bug in fifo_machines::SIMULATED {
        let b = simulate_fifo(seed, fifo_steps.max(500_000), Some(bug));
        let expected = fifo_machines::property(bug);
        match &b.failure {
            Some(failure) if failure.property == expected => {
                println!(
                    "  {}: {} violated after {} runs, {} steps; replay with --seed {}",
                    bug.name(),
                    failure.property,
                    b.runs,
                    b.steps,
                    failure.seed
                );
                let (_, again) = run_fifo(failure.seed, Some(bug));
                if again.as_ref().map(|a| &a.steps) != Some(&failure.steps) {
                    ok = false;
                    println!("    its replay differs");
                }
            }
            other => {
                ok = false;
                println!(
                    "  {}: NOT CAUGHT in {} runs, {} steps (found: {:?})",
                    bug.name(),
                    b.runs,
                    b.steps,
                    other.as_ref().map(|f| f.property)
                );
            }
        }
        variants.push(format!(
            "{{\"name\":\"{}\",\"caught\":{},\"runs\":{},\"steps\":{}}}",
            bug.name(),
            b.failure.as_ref().is_some_and(|f| f.property == expected),
            b.runs,
            b.steps
        ));
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    println!(
        "{{\"seed\":{seed},\"runs\":{},\"steps\":{},\"holds\":{},\"machines\":{{\"runs\":{},\"steps\":{},\"holds\":{}}},\"fifo\":{{\"runs\":{},\"steps\":{},\"holds\":{}}},\"variants\":[{}]}}",
        out.runs,
        out.steps,
        out.failure.is_none(),
        m.runs,
        m.steps,
        m.failure.is_none(),
        f.runs,
        f.steps,
        f.failure.is_none(),
        variants.join(",")
    );
    if !ok {
        std::process::exit(1);
    }
}
