//! The core's acquisition and release machines, explored: every property holds for the
//! protocol as it ships, and every broken variant of the machines and of the store yields a
//! counterexample to its property.

use dynamodb_lock_core::settings::Kind;
use dynamodb_lock_model::explore::Violation;
use dynamodb_lock_model::machines::{broken_config, check, Bug, Config};

const LIMIT: usize = 3_000_000;

fn holds(cfg: Config) -> usize {
    let r = check(cfg, LIMIT);
    assert!(!r.truncated, "stopped at {} states", r.states);
    if let Some((Violation { property: p, detail: d }, _, steps)) = r.violation {
        panic!("{p}: {d}\n{}", steps.join("\n"));
    }
    r.states
}

#[test]
fn every_property_holds_for_failclosed_machines() {
    let n = holds(Config::new(Kind::FailClosed));
    assert!(n > 1000, "{n} states");
}

#[test]
fn every_property_holds_for_failopen_machines() {
    let n = holds(Config::new(Kind::FailOpen));
    assert!(n > 1000, "{n} states");
}

/// FailOpen holders that heartbeat (the core's heartbeat and held-lock machines), and release
/// while a heartbeat's write is on the wire or after it was given up on.
#[test]
fn every_property_holds_for_failopen_machines_that_heartbeat() {
    let n = holds(Config {
        beats: 1,
        horizon: 8,
        ..Config::new(Kind::FailOpen)
    });
    assert!(n > 100_000, "{n} states");
}

/// An acquisition cancelled at any moment (a wait cut short at once, a write out settled
/// first), with a fault, over 10 ticks: a cancelled acquisition that took the lock after all
/// releases it, as the addon's does, and one reported aborted leaves nothing of its own on the
/// item (`npm run model` runs it over 14 ticks, and with a crash).
#[test]
fn every_property_holds_when_an_acquisition_is_cancelled() {
    for kind in [Kind::FailClosed, Kind::FailOpen] {
        let n = holds(Config {
            cancels: 1,
            crashes: 0,
            horizon: 10,
            ..Config::new(kind)
        });
        assert!(n > 500_000, "{kind:?}: {n} states");
    }
}

#[test]
fn every_property_holds_for_the_originals_sequence() {
    for kind in [Kind::FailClosed, Kind::FailOpen] {
        let n = holds(Config {
            original: true,
            ..Config::new(kind)
        });
        assert!(n > 1000, "{kind:?}: {n} states");
    }
}

#[test]
fn every_broken_variant_of_the_machines_is_caught() {
    for bug in Bug::ALL {
        let r = check(broken_config(bug), LIMIT);
        let (Violation { property, .. }, _, steps) = r
            .violation
            .unwrap_or_else(|| panic!("{}: not caught in {} states", bug.name(), r.states));
        assert_eq!(property, bug.property(), "{}:\n{}", bug.name(), steps.join("\n"));
        assert!(!steps.is_empty());
    }
}

/// The seeded simulator on the machines (2 to 8 clients, 1 to 4 ids): the protocol as it
/// ships holds over a million steps, every variant is caught, and a failing run replays
/// exactly from its seed.
#[test]
fn the_simulator_holds_for_the_machines_and_catches_every_variant() {
    use dynamodb_lock_model::simulate::{repeat, run_machines};
    let out = repeat(1, 1_000_000, |s| run_machines(s, None));
    assert!(out.failure.is_none(), "{:?}", out.failure);
    assert!(out.steps >= 1_000_000);
    for bug in Bug::ALL {
        let b = repeat(1, 2_000_000, |s| run_machines(s, Some(bug)));
        let f = b.failure.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert!(bug.caught_by(f.property), "{}: {}", bug.name(), f.property);
        let (_, again) = run_machines(f.seed, Some(bug));
        assert_eq!(
            again.map(|a| a.steps),
            Some(f.steps),
            "{}: the seed replays",
            bug.name()
        );
    }
}
