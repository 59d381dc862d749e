//! `npm run model`: explores every reachable state of the core's machines in each
//! configuration, checks each broken variant for a counterexample, prints a summary and ends
//! with one JSON line. `--bounded` checks the smaller configurations the test suite uses;
//! `--sessions` checks the session configurations alone. Exits
//! with 1 when a property fails for the protocol as it ships or a broken variant goes uncaught.

use std::time::Instant;

use dynamodb_lock_core::broken::Broken;
use dynamodb_lock_model::explore::Checked;
use dynamodb_lock_model::{fifo_machines, lease, machines, session};

/// The report so far: whether everything holds, and the JSON of each section.
struct Report {
    ok: bool,
    json: Vec<String>,
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn steps(steps: &[String]) {
    for step in steps {
        println!("      {step}");
    }
}

impl Report {
    /// Prints one configuration's run; returns its JSON.
    fn run<S>(&mut self, label: String, f: Checked<S>, seconds: f64) -> String {
        let holds = f.holds();
        let verdict = if holds {
            "every property holds"
        } else if f.violation.is_none() {
            "INCOMPLETE"
        } else {
            "FAILS"
        };
        println!(
            "  {label}: {} distinct states, depth {}, {seconds:.1} s: {verdict}",
            f.states, f.depth
        );
        if let Some((v, _, path)) = &f.violation {
            println!("    {}: {}", v.property, v.detail);
            steps(path);
        }
        self.ok &= holds;
        format!(
            "{{\"config\":\"{}\",\"states\":{},\"holds\":{holds}}}",
            esc(&label),
            f.states
        )
    }

    /// Prints one broken variant's counterexample; returns its JSON.
    fn variant<S>(&mut self, name: &str, expected: &str, f: Checked<S>) -> String {
        let len = match &f.violation {
            Some((v, _, path)) if v.property == expected => {
                println!("  {name}: {expected} violated in {} steps", path.len());
                steps(path);
                path.len().to_string()
            }
            other => {
                self.ok = false;
                println!(
                    "  {name}: NOT CAUGHT ({} states; found: {:?})",
                    f.states,
                    other.as_ref().map(|v| v.0.property)
                );
                "null".into()
            }
        };
        format!(
            "{{\"name\":\"{}\",\"property\":\"{expected}\",\"counterexampleLength\":{len}}}",
            esc(name)
        )
    }
}

/// The FailClosed and FailOpen machines: each configuration, then each broken variant.
fn check_machines(rep: &mut Report, full: bool) {
    println!(
        "FailClosed and FailOpen: the core's acquisition, heartbeat, held-lock and release machines (and the \
         original's requests for user objects) over the core's apply, with lost, throttled, slow and abandoned \
         requests, crashes, cancelled acquisitions and skewed clocks (properties: mutual exclusion, fencing, no lost \
         release, no orphan, liveness)"
    );
    let variants = machines::Bug::ALL.map(|bug| (bug.name(), bug.property(), machines::broken_config(bug)));
    check_section(
        rep,
        "machines",
        machines::configs(full),
        machines_label,
        |cfg| machines::check(cfg, machines::MAX_STATES),
        variants,
    );
}

/// Explores each configuration of a section, labelled by `label`, then each broken variant
/// (its name, the property it must violate, its configuration); reports them as `section`.
fn check_section<C, S>(
    rep: &mut Report,
    section: &str,
    configs: impl IntoIterator<Item = C>,
    label: impl Fn(&C) -> String,
    check: impl Fn(C) -> Checked<S>,
    variants: impl IntoIterator<Item = (&'static str, &'static str, C)>,
) {
    let mut runs = Vec::new();
    for cfg in configs {
        let label = label(&cfg);
        let t = Instant::now();
        let r = check(cfg);
        runs.push(rep.run(label, r, t.elapsed().as_secs_f64()));
    }
    let variants: Vec<String> = variants
        .into_iter()
        .map(|(name, property, cfg)| rep.variant(name, property, check(cfg)))
        .collect();
    rep.json.push(format!(
        "\"{section}\":{{\"runs\":[{}],\"brokenVariants\":[{}]}}",
        runs.join(","),
        variants.join(",")
    ));
}

/// A machines configuration, as its run is labelled.
fn machines_label(cfg: &machines::Config) -> String {
    format!(
        "{:?}{}: {} clients, {} lock ids, {} acquisitions each, lease {} ticks, request timeout {}, {} attempts, \
         retryCount {} (client 0), {} faults, {} crash, {}{} ticks, {} heartbeats a holder",
        cfg.kind,
        match (cfg.original, cfg.hand_over, cfg.gives_up) {
            (true, ..) => " (the original's requests)",
            (_, true, true) => " (client 0 hands over once to its next acquisition, which may give up)",
            (_, true, false) => " (client 0 hands over once to its next acquisition)",
            _ => "",
        },
        cfg.clients,
        cfg.locks,
        cfg.acquisitions,
        cfg.lease,
        cfg.request_timeout,
        cfg.max_attempts,
        cfg.retry_count,
        cfg.faults,
        cfg.crashes,
        match cfg.cancels {
            0 => String::new(),
            n => format!("{n} cancelled acquisition, "),
        },
        cfg.horizon,
        cfg.beats
    )
}

/// The Fifo machines: each configuration, then each broken variant.
fn check_fifo(rep: &mut Report, full: bool) {
    println!(
        "Fifo: the core's Fifo machines (acquisition with its queue entries, grant and give-up; release; \
         a semaphore's permits) over the core's apply, with lost, throttled and slow requests, crashes, cancellations and clock offsets \
         (properties: {})",
        fifo_machines::PROPERTIES.join(", ")
    );
    let variants = Broken::FIFO.into_iter().chain(Broken::SEMAPHORE).map(|bug| {
        (
            bug.name(),
            fifo_machines::property(bug),
            fifo_machines::broken_config(bug),
        )
    });
    check_section(
        rep,
        "fifoMachines",
        fifo_machines::configs(full)
            .into_iter()
            .chain(fifo_machines::semaphore_configs(full)),
        fifo_label,
        |cfg| fifo_machines::check(cfg, fifo_machines::MAX_STATES),
        variants,
    );
}

/// A Fifo machines configuration, as its run is labelled.
fn fifo_label(cfg: &fifo_machines::Config) -> String {
    format!(
        "{}{} clients{}, {} lock ids{}, {} acquisitions each, lease {} ticks, re-read {}, request timeout {}, {} \
         attempts, {} faults, {} crash, {} cancellation, {} ticks",
        match cfg.permits {
            Some(n) => format!("a semaphore of {n} permits, asked for {:?} by ", cfg.asks),
            None => String::new(),
        },
        cfg.clients,
        if cfg.process {
            " (clients 0 and 1 one process, sharing its registry)"
        } else {
            ""
        },
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
        cfg.horizon
    )
}

/// Sessions: each configuration, then each session variant.
fn check_sessions(rep: &mut Report, full: bool) {
    println!(
        "Sessions: a client holds two locks through its session (the core's take, heartbeat and release of the \
         session's item) against rivals that wait out the session, end it and take the locks (the core's FailOpen \
         acquisition), with lost, late and abandoned renewals, crashes (properties: {})",
        session::PROPERTIES.join(", ")
    );
    let variants = session::VARIANTS.map(|bug| (bug.name(), session::property(bug), session::broken_config(bug)));
    check_section(
        rep,
        "sessions",
        session::configs(full),
        session_label,
        |cfg| session::check(cfg, session::MAX_STATES),
        variants,
    );
}

/// A session configuration, as its run is labelled.
fn session_label(cfg: &session::Config) -> String {
    format!(
        "2 lock ids held through one session{}, {} rival{}, session lease {} ticks, heartbeat every {}, {} heartbeats, \
         re-read {}, request timeout {}, {} attempts, {} faults, {} crash, {} ticks",
        match (cfg.handover, cfg.close, cfg.revoke, cfg.keeps_a) {
            (true, ..) => " (the first handed over within it)",
            (false, true, ..) => " (a close without releasing them)",
            (false, false, true, true) => " (the first revoked by an operator while client 0 keeps it)",
            (false, false, true, false) => " (the first revoked by an operator)",
            (false, false, false, _) => "",
        },
        cfg.rivals,
        if cfg.rivals == 1 { "" } else { "s" },
        cfg.lease,
        cfg.period,
        cfg.beats,
        cfg.reread,
        cfg.request_timeout,
        cfg.max_attempts,
        cfg.faults,
        cfg.crashes,
        cfg.horizon
    )
}

/// The lease timing: the heartbeat machine against a waiter, with a heartbeat period shorter
/// and longer than the lease, with a close and with an update, then each timing variant.
fn check_lease(rep: &mut Report) {
    println!(
        "Lease timing: the core's held-lock machine (its heartbeats) against a waiter, with a pause, late and \
         lost answers \
         (property: {})",
        lease::PROPERTY
    );
    let config = lease::Config::default();
    // A heartbeat period longer than the lease: the loss is watched between heartbeats.
    let long = lease::Config {
        period: config.lease + config.lease / 2,
        ..config
    };
    // The holder's client may close without releasing the lock: it lapses at its loss moment.
    let close = lease::Config { close: true, ..config };
    // The holder may write its data once (`lock.update`), its heartbeats waiting for it.
    let update = lease::Config {
        update: true,
        horizon: 8,
        pause: 4,
        ..config
    };
    let variants = Broken::TIMING
        .iter()
        .map(|b| (*b, config))
        .chain(Broken::LONG_PERIOD.iter().map(|b| (*b, long)))
        .chain(Broken::CLOSE.iter().map(|b| (*b, close)))
        .chain(Broken::UPDATE.iter().map(|b| (*b, update)))
        .map(|(bug, base)| (bug.name(), lease::PROPERTY, lease::Config { bug: Some(bug), ..base }));
    check_section(
        rep,
        "lease",
        [config, long, close, update],
        lease_label,
        lease::check,
        variants,
    );
}

/// A lease configuration, as its run is labelled: the first in full, the others by what
/// sets them apart from it.
fn lease_label(cfg: &lease::Config) -> String {
    if cfg.update {
        format!(
            "the same over {} ticks with a pause of {}, the holder writing its data once",
            cfg.horizon, cfg.pause
        )
    } else if cfg.close {
        "the same, the holder's client closing once without releasing".into()
    } else if cfg.period > cfg.lease {
        format!("the same with a heartbeat every {} ticks", cfg.period)
    } else {
        format!(
            "lease {} ticks, heartbeat every {}, network delay 0 or {}, one pause of {}, {} ticks",
            cfg.lease, cfg.period, cfg.delay, cfg.pause, cfg.horizon
        )
    }
}

/// The lease timing outside the assumptions, where the property may fail: a waiter's clock
/// that runs fast.
fn outside_the_assumptions() {
    println!("Outside the assumptions: the waiter's clock runs one tick fast over a lease");
    match lease::check(lease::Config {
        drift: 1,
        ..lease::Config::default()
    })
    .violation
    {
        None => println!("  every property holds"),
        Some((v, _, path)) => println!("  {} violated in {} steps", v.property, path.len()),
    }
}

fn main() {
    let full = !std::env::args().any(|a| a == "--bounded");
    let started = Instant::now();
    let mut rep = Report {
        ok: true,
        json: Vec::new(),
    };
    // `--sessions`, `--machines`, `--fifo`: that section alone.
    if std::env::args().any(|a| a == "--sessions") {
        check_sessions(&mut rep, full);
    } else if std::env::args().any(|a| a == "--machines") {
        check_machines(&mut rep, full);
    } else if std::env::args().any(|a| a == "--fifo") {
        check_fifo(&mut rep, full);
    } else {
        check_machines(&mut rep, full);
        check_fifo(&mut rep, full);
        check_lease(&mut rep);
        check_sessions(&mut rep, full);
        outside_the_assumptions();
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    println!("{{{}}}", rep.json.join(","));
    if !rep.ok {
        std::process::exit(1);
    }
}
