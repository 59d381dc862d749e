//! Sessions, explored: a client holding two locks through its session against a rival that
//! waits the session out, ends it and takes a lock; every property holds for the protocol as it
//! ships, and every session variant yields a counterexample to its property.

use dynamodb_lock_model::explore::Violation;
use dynamodb_lock_model::session::{broken_config, caught_by, check, configs, property, VARIANTS};

const LIMIT: usize = 3_000_000;

#[test]
fn every_property_holds_for_sessions() {
    for cfg in configs(false) {
        let r = check(cfg, LIMIT);
        assert!(!r.truncated, "stopped at {} states", r.states);
        if let Some((Violation { property: p, detail: d }, _, steps)) = r.violation {
            panic!("{p}: {d}\n{}", steps.join("\n"));
        }
        assert!(r.states > 10_000, "{} states", r.states);
    }
}

#[test]
fn every_session_variant_is_caught() {
    for bug in VARIANTS {
        let r = check(broken_config(bug), LIMIT);
        let (Violation { property: found, .. }, _, steps) = r
            .violation
            .unwrap_or_else(|| panic!("{}: not caught in {} states", bug.name(), r.states));
        assert_eq!(found, property(bug), "{}:\n{}", bug.name(), steps.join("\n"));
        assert!(!steps.is_empty());
    }
}

/// The seeded simulator on sessions: the protocol as it ships holds, the variants it is to
/// find are caught, and a failing run replays exactly from its seed.
#[test]
fn the_simulator_holds_for_sessions_and_catches_every_variant() {
    use dynamodb_lock_model::simulate::{repeat, run_session};
    let out = repeat(1, 1_000_000, |s| run_session(s, None));
    assert!(out.failure.is_none(), "{:?}", out.failure);
    assert!(out.steps >= 1_000_000);
    for bug in dynamodb_lock_model::session::SIMULATED {
        let b = repeat(1, 2_000_000, |s| run_session(s, Some(bug)));
        let f = b.failure.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert!(caught_by(bug, f.property), "{}: {}", bug.name(), f.property);
        let (_, again) = run_session(f.seed, Some(bug));
        assert_eq!(
            again.map(|a| a.steps),
            Some(f.steps),
            "{}: the seed replays",
            bug.name()
        );
    }
}
