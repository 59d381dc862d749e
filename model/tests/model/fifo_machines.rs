//! The core's Fifo machines, explored: every property holds for the protocol as it ships, and
//! every Fifo broken variant yields a counterexample to its property.

use dynamodb_lock_core::broken::Broken;
use dynamodb_lock_model::explore::Violation;
use dynamodb_lock_model::fifo_machines::{
    broken_config, check, property, semaphore_configs, Config, MAX_STATES, SIMULATED,
};

const LIMIT: usize = 3_000_000;

#[test]
fn every_property_holds_for_fifo_machines() {
    let r = check(Config::default(), LIMIT);
    assert!(!r.truncated, "stopped at {} states", r.states);
    if let Some((Violation { property: p, detail: d }, _, steps)) = r.violation {
        panic!("{p}: {d}\n{}", steps.join("\n"));
    }
    assert!(r.states > 100_000, "{} states", r.states);
}

/// A semaphore of two permits, three clients asking for one, two and one: never more than two
/// permits held, grants in ticket order.
#[test]
fn every_property_holds_for_a_semaphore() {
    for cfg in semaphore_configs(false) {
        let r = check(cfg, LIMIT);
        assert!(!r.truncated, "stopped at {} states", r.states);
        if let Some((Violation { property: p, detail: d }, _, steps)) = r.violation {
            panic!("{p}: {d}\n{}", steps.join("\n"));
        }
        assert!(r.states > 10_000, "{} states", r.states);
    }
}

#[test]
fn every_fifo_broken_variant_is_caught() {
    for bug in Broken::FIFO.into_iter().chain(Broken::SEMAPHORE) {
        // The token condition shows only with a ticket given back and taken again (about
        // three million states).
        let r = check(broken_config(bug), MAX_STATES);
        let (Violation { property: found, .. }, _, steps) = r
            .violation
            .unwrap_or_else(|| panic!("{}: not caught in {} states", bug.name(), r.states));
        assert_eq!(found, property(bug), "{}:\n{}", bug.name(), steps.join("\n"));
        assert!(!steps.is_empty());
    }
}

/// The seeded simulator on the Fifo machines (2 to 8 clients, 1 to 4 ids, several ids per
/// acquisition): the protocol as it ships holds, the variants it is to find are caught, and a
/// failing run replays exactly from its seed.
#[test]
fn the_simulator_holds_for_fifo_and_catches_every_variant() {
    use dynamodb_lock_model::simulate::{repeat, run_fifo};
    let out = repeat(1, 500_000, |s| run_fifo(s, None));
    assert!(out.failure.is_none(), "{:?}", out.failure);
    assert!(out.steps >= 500_000);
    for bug in SIMULATED {
        let b = repeat(1, 2_000_000, |s| run_fifo(s, Some(bug)));
        let f = b.failure.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert_eq!(f.property, property(bug), "{}", bug.name());
        let (_, again) = run_fifo(f.seed, Some(bug));
        assert_eq!(
            again.map(|a| a.steps),
            Some(f.steps),
            "{}: the seed replays",
            bug.name()
        );
    }
}
