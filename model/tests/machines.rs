//! The core's acquisition and release machines, explored: every property holds for the
//! protocol as it ships, and every broken variant of the machines and of the store yields a
//! counterexample to its property.

use dynamodb_lock_core::settings::Kind;
use dynamodb_lock_model::machines::{check, Bug, Config};

const LIMIT: usize = 3_000_000;

fn holds(cfg: Config) -> usize {
    let r = check(cfg, LIMIT);
    assert!(!r.truncated, "stopped at {} states", r.states);
    if let Some((p, d, steps)) = r.violation {
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

#[test]
fn every_broken_variant_of_the_machines_is_caught() {
    for bug in Bug::ALL {
        let mut cfg = Config::new(bug.kind());
        cfg.bug = Some(bug);
        if bug == Bug::WaiterTrustsHolderClock {
            cfg.skew = 2;
        }
        let r = check(cfg, LIMIT);
        let (property, _, steps) = r.violation.unwrap_or_else(|| panic!("{}: not caught in {} states", bug.name(), r.states));
        assert_eq!(property, bug.property(), "{}:\n{}", bug.name(), steps.join("\n"));
        assert!(!steps.is_empty());
    }
}
