//! `npm run model`: explores every reachable state of each lock kind's model, checks each
//! broken variant for a counterexample, prints a summary and ends with one JSON line.
//! `--bounded` checks the smaller configurations the test suite uses. Exits with 1 when a
//! property fails for the real protocol or a broken variant goes uncaught.

use dynamodb_lock_core::broken::Broken;
use dynamodb_lock_model::fifo_machines;
use dynamodb_lock_model::lease;
use dynamodb_lock_model::lock::{Bug, Kind};
use dynamodb_lock_model::machines;
use dynamodb_lock_model::run::{check_broken, check_config, check_kind, drift_config, json, late_landing_config, Size};

fn main() {
    let size = if std::env::args().any(|a| a == "--bounded") {
        Size::Bounded
    } else {
        Size::Full
    };
    let started = std::time::Instant::now();
    let mut ok = true;
    let mut kinds = Vec::new();
    for kind in [Kind::FailOpen, Kind::Fifo] {
        let r = check_kind(kind, size);
        println!("{}: properties {}", r.name, r.properties.join(", "));
        for run in &r.runs {
            let c = &run.config;
            println!(
                "  {} clients, {} lock ids, {} acquisitions each, lease {} ticks, heartbeat every {}, {} heartbeats \
                 per hold, {} faults, {} crash, {} attempts per request, retryCount {} (client 0; the others \
                 keep trying)",
                c.clients,
                c.locks,
                c.acquisitions,
                c.lease,
                c.heartbeat,
                c.beats,
                c.faults,
                c.crashes,
                c.max_attempts,
                c.retry_count
            );
            println!(
                "    {} distinct states, depth {}, {} transitions, {:.1} s: {}",
                run.states,
                run.depth,
                run.transitions,
                run.seconds,
                if run.holds { "every property holds" } else { "FAILS" }
            );
            if let Some(d) = &run.detail {
                println!("{d}");
            }
        }
        ok &= r.holds();
        kinds.push(r);
    }
    let mut broken = Vec::new();
    println!("Broken variants (each must yield a counterexample):");
    for bug in Bug::ALL {
        let b = check_broken(bug);
        match (&b.counterexample, b.found) {
            (Some(p), Some(f)) if f == b.property => {
                println!("  {}: {} violated in {} steps", b.name, f, p.len());
                for step in p {
                    println!("      {step}");
                }
            }
            (_, found) => {
                ok = false;
                println!(
                    "  {}: NOT CAUGHT ({} states; found: {:?}, expected {})",
                    b.name, b.states, found, b.property
                );
            }
        }
        broken.push(b);
    }
    println!(
        "The core's acquisition, heartbeat, held-lock and release machines (FailClosed, FailOpen, and the \
         original's requests for user objects) over the core's apply, with lost, throttled, slow and abandoned \
         requests, crashes and skewed clocks (properties: mutual exclusion, fencing, no lost release, no orphan, \
         liveness)"
    );
    let mut machine_runs = Vec::new();
    for cfg in machines::configs(size == Size::Full) {
        let t = std::time::Instant::now();
        let r = machines::check(cfg.clone(), machines::MAX_STATES);
        let holds = r.violation.is_none() && !r.truncated;
        println!(
            "  {:?}{}: {} clients, {} lock ids, {} acquisitions each, lease {} ticks, request timeout {}, {} attempts, \
             retryCount {} (client 0), {} faults, {} crash, {} ticks, {} heartbeats a holder: {} distinct states, \
             depth {}, {:.1} s: {}",
            cfg.kind,
            if cfg.original { " (the original's requests)" } else { "" },
            cfg.clients,
            cfg.locks,
            cfg.acquisitions,
            cfg.lease,
            cfg.request_timeout,
            cfg.max_attempts,
            cfg.retry_count,
            cfg.faults,
            cfg.crashes,
            cfg.horizon,
            cfg.beats,
            r.states,
            r.depth,
            t.elapsed().as_secs_f64(),
            if holds { "every property holds" } else { "FAILS" }
        );
        if let Some((property, detail, steps)) = &r.violation {
            println!("    {property}: {detail}");
            for step in steps {
                println!("      {step}");
            }
        }
        ok &= holds;
        machine_runs.push((cfg, r.states, holds));
    }
    let mut machine_broken = Vec::new();
    for bug in machines::Bug::ALL {
        let r = machines::check(machines::broken_config(bug), machines::MAX_STATES);
        match &r.violation {
            Some((property, _, steps)) if *property == bug.property() => {
                println!("  {}: {} violated in {} steps", bug.name(), property, steps.len());
                for step in steps {
                    println!("      {step}");
                }
            }
            other => {
                ok = false;
                println!(
                    "  {}: NOT CAUGHT ({} states; found: {:?})",
                    bug.name(),
                    r.states,
                    other.as_ref().map(|v| v.0)
                );
            }
        }
        machine_broken.push((bug, r.violation.map(|v| (v.0, v.2.len()))));
    }
    println!(
        "The core's Fifo machines (acquisition with its queue entries, grant and give-up; release) over the \
         core's apply, with lost, throttled and slow requests, crashes, cancellations and clock offsets \
         (properties: {})",
        fifo_machines::PROPERTIES.join(", ")
    );
    let mut fifo_runs = Vec::new();
    for cfg in fifo_machines::configs(size == Size::Full) {
        let t = std::time::Instant::now();
        let r = fifo_machines::check(cfg.clone(), fifo_machines::MAX_STATES);
        let holds = r.violation.is_none() && !r.truncated;
        println!(
            "  {} clients, {} lock ids{}, {} acquisitions each, lease {} ticks, re-read {}, request timeout {}, {} \
             attempts, {} faults, {} crash, {} cancellation, {} ticks: {} distinct states, depth {}, {:.1} s: {}",
            cfg.clients,
            cfg.locks,
            if cfg.several {
                " (one or both per acquisition)"
            } else {
                ""
            },
            cfg.acquisitions,
            cfg.lease,
            cfg.reread,
            cfg.request_timeout,
            cfg.max_attempts,
            cfg.faults,
            cfg.crashes,
            cfg.aborts,
            cfg.horizon,
            r.states,
            r.depth,
            t.elapsed().as_secs_f64(),
            if holds {
                "every property holds"
            } else if r.truncated {
                "INCOMPLETE"
            } else {
                "FAILS"
            }
        );
        if let Some((property, detail, steps)) = &r.violation {
            println!("    {property}: {detail}");
            for step in steps {
                println!("      {step}");
            }
        }
        ok &= holds;
        fifo_runs.push((cfg, r.states, holds));
    }
    let mut fifo_broken = Vec::new();
    for bug in Broken::FIFO {
        let r = fifo_machines::check(fifo_machines::broken_config(bug), fifo_machines::MAX_STATES);
        let expected = fifo_machines::property(bug);
        match &r.violation {
            Some((property, _, steps)) if *property == expected => {
                println!("  {}: {} violated in {} steps", bug.name(), property, steps.len());
                for step in steps {
                    println!("      {step}");
                }
            }
            other => {
                ok = false;
                println!(
                    "  {}: NOT CAUGHT ({} states; found: {:?})",
                    bug.name(),
                    r.states,
                    other.as_ref().map(|v| v.0)
                );
            }
        }
        fifo_broken.push((bug, r.violation.map(|v| (v.0, v.2.len()))));
    }
    println!(
        "Lease timing: the core's heartbeat machine against a waiter, with a pause, late and lost \
         answers (property: {})",
        lease::PROPERTY
    );
    let config = lease::Config::new();
    let r = lease::check(config);
    println!(
        "  lease {} ticks, heartbeat every {}, network delay 0 or {}, one pause of {}, {} ticks: {} distinct states, \
         depth {}: {}",
        config.lease,
        config.period,
        config.delay,
        config.pause,
        config.horizon,
        r.states,
        r.depth,
        if r.holds { "holds" } else { "FAILS" }
    );
    if let Some((property, steps)) = &r.counterexample {
        println!("    {property}:");
        for step in steps {
            println!("      {step}");
        }
    }
    ok &= r.holds;
    let mut lease_broken = Vec::new();
    for bug in Broken::TIMING {
        let b = lease::check(lease::Config {
            bug: Some(bug),
            ..lease::Config::new()
        });
        match &b.counterexample {
            Some((property, steps)) if *property == lease::PROPERTY => {
                println!("  {}: {} violated in {} steps", bug.name(), property, steps.len() - 1);
                for step in steps {
                    println!("      {step}");
                }
            }
            _ => {
                ok = false;
                println!("  {}: NOT CAUGHT ({} states)", bug.name(), b.states);
            }
        }
        lease_broken.push((bug, b));
    }
    println!("Outside the assumptions: the waiter's clock runs one tick fast over a lease");
    match lease::check(lease::Config {
        drift: 1,
        ..lease::Config::new()
    })
    .counterexample
    {
        None => println!("  every property holds"),
        Some((property, steps)) => println!("  {property} violated in {} steps", steps.len() - 1),
    }
    println!("Outside the assumptions: a timed-out request may land at any later time");
    for kind in [Kind::FailOpen] {
        match check_config(late_landing_config(kind)) {
            (n, None) => println!("  {kind:?}: every property holds ({n} states)"),
            (_, Some((property, steps))) => {
                println!("  {kind:?}: {property} violated in {} steps", steps.len());
                for step in steps {
                    println!("      {step}");
                }
            }
        }
    }
    println!("Outside the assumptions: one clock runs one tick ahead (rate drift) within a lease");
    for kind in [Kind::FailOpen, Kind::Fifo] {
        match check_config(drift_config(kind)) {
            (n, None) => println!("  {kind:?}: every property holds ({n} states)"),
            (_, Some((property, steps))) => {
                println!("  {kind:?}: {property} violated in {} steps", steps.len());
                for step in steps {
                    println!("      {step}");
                }
            }
        }
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    let json = json(&kinds, &broken);
    let runs: Vec<String> = machine_runs
        .iter()
        .map(|(c, states, holds)| {
            format!(
                "{{\"kind\":\"{:?}\",\"originalRequests\":{},\"clients\":{},\"locks\":{},\"states\":{states},\"holds\":{holds}}}",
                c.kind, c.original, c.clients, c.locks
            )
        })
        .collect();
    let variants: Vec<String> = machine_broken
        .iter()
        .map(|(bug, found)| {
            let len = match found {
                Some((p, n)) if *p == bug.property() => n.to_string(),
                _ => "null".into(),
            };
            format!(
                "{{\"name\":\"{}\",\"property\":\"{}\",\"counterexampleLength\":{len}}}",
                bug.name(),
                bug.property()
            )
        })
        .collect();
    let fifo_json: Vec<String> = fifo_runs
        .iter()
        .map(|(c, states, holds)| {
            format!(
                "{{\"clients\":{},\"locks\":{},\"several\":{},\"states\":{states},\"holds\":{holds}}}",
                c.clients, c.locks, c.several
            )
        })
        .collect();
    let fifo_variants: Vec<String> = fifo_broken
        .iter()
        .map(|(bug, found)| {
            let len = match found {
                Some((p, n)) if *p == fifo_machines::property(*bug) => n.to_string(),
                _ => "null".into(),
            };
            format!(
                "{{\"name\":\"{}\",\"property\":\"{}\",\"counterexampleLength\":{len}}}",
                bug.name(),
                fifo_machines::property(*bug)
            )
        })
        .collect();
    println!(
        "{},\"machines\":{{\"runs\":[{}],\"brokenVariants\":[{}]}},\"fifoMachines\":{{\"runs\":[{}],\"brokenVariants\":[{}]}}}}",
        &json[..json.len() - 1],
        runs.join(","),
        variants.join(","),
        fifo_json.join(","),
        fifo_variants.join(",")
    );
    if !ok {
        std::process::exit(1);
    }
}
