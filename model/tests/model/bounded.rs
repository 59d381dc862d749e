//! The explorer itself, and the lease-timing model: the heartbeat machine declares a loss no
//! later than a rival is granted, its timing variants are caught, and the simulator agrees.

use dynamodb_lock_model::explore::{explore, Model, Violation};

/// A counter that wraps at 5, with a property that fails at 3 and a goal it can miss.
struct Counter {
    bad: Option<u8>,
    stuck: bool,
}

impl Model for Counter {
    type State = u8;
    type Action = u8;
    fn init(&self) -> Vec<u8> {
        vec![0]
    }
    fn actions(&self, s: &u8, out: &mut Vec<u8>) {
        if !(self.stuck && *s == 2) {
            out.push((s + 1) % 5);
        }
        out.push(*s);
    }
    fn next(&self, _s: &u8, a: &u8) -> Result<u8, Violation> {
        Ok(*a)
    }
    fn invariant(&self, s: &u8) -> Result<(), Violation> {
        match self.bad {
            Some(b) if b == *s => Err(Violation {
                property: "bad",
                detail: String::new(),
            }),
            _ => Ok(()),
        }
    }
    fn liveness_goals(&self) -> usize {
        1
    }
    fn waiting(&self, s: &u8, _: usize) -> bool {
        *s == 1
    }
    fn served(&self, s: &u8, _: usize) -> bool {
        *s == 4
    }
}

#[test]
fn the_explorer_counts_states_and_finds_the_shortest_counterexample() {
    let ok = explore(
        &Counter {
            bad: None,
            stuck: false,
        },
        100,
    );
    assert_eq!((ok.states, ok.depth), (5, 4));
    assert!(ok.holds());
    let bad = explore(
        &Counter {
            bad: Some(3),
            stuck: false,
        },
        100,
    );
    assert_eq!(bad.violation.map(|(_, _, p)| p.len()), Some(3));
    let stuck = explore(&Counter { bad: None, stuck: true }, 100);
    let (v, s, path) = stuck.violation.expect("4 is unreachable from 1");
    assert_eq!((v.property, s, path.len()), ("liveness", 1, 1));
    let truncated = explore(
        &Counter {
            bad: None,
            stuck: false,
        },
        3,
    );
    assert!(truncated.truncated && !truncated.holds());
}

/// Two initial states, `(root, 0)`, each stepping its counter up by 1 or 2 (an action names
/// the state it leads to); the counter may not reach 3 from the second root.
struct TwoRoots;

impl Model for TwoRoots {
    type State = (u8, u8);
    type Action = (u8, u8);
    fn init(&self) -> Vec<(u8, u8)> {
        vec![(0, 0), (1, 0)]
    }
    fn actions(&self, s: &(u8, u8), out: &mut Vec<(u8, u8)>) {
        if s.1 < 4 {
            out.push((s.0, s.1 + 1));
            out.push((s.0, s.1 + 2));
        }
    }
    fn next(&self, _s: &(u8, u8), a: &(u8, u8)) -> Result<(u8, u8), Violation> {
        Ok(*a)
    }
    fn invariant(&self, s: &(u8, u8)) -> Result<(), Violation> {
        if *s == (1, 3) {
            return Err(Violation {
                property: "three",
                detail: String::new(),
            });
        }
        Ok(())
    }
}

/// The explorer keeps no path, only how each state was first reached: the counterexample is
/// replayed from the right initial state through the right actions.
#[test]
fn the_explorer_replays_a_counterexample_from_its_initial_state() {
    let r = explore(&TwoRoots, 100);
    let (v, s, path) = r.violation.expect("(1, 3) is reachable");
    assert_eq!((v.property, s, path), ("three", (1, 3), vec![(1, 1), (1, 3)]));
}

/// The heartbeat machine of the core, stepped in time against a waiter: the holder always
/// knows of its loss no later than the waiter is granted the lock.
#[test]
fn the_heartbeat_machine_declares_the_loss_before_a_rival_is_granted() {
    let r = dynamodb_lock_model::lease::check(dynamodb_lock_model::lease::Config::default());
    assert!(r.holds(), "{:?}", r.violation);
    assert!(r.states > 1000, "{} states", r.states);
}

/// With a heartbeat period longer than the lease, the loss is still declared at the lease's
/// end, before a rival's grant; the variant that waits for the next heartbeat is caught.
#[test]
fn with_a_period_longer_than_the_lease_the_loss_comes_before_a_rival_is_granted() {
    use dynamodb_lock_model::lease::{check, Config, PROPERTY};
    let long = Config {
        period: 9,
        ..Config::default()
    };
    let r = check(long);
    assert!(r.holds(), "{:?}", r.violation);
    for bug in dynamodb_lock_core::broken::Broken::LONG_PERIOD {
        let r = check(Config { bug: Some(bug), ..long });
        let (Violation { property, .. }, _, steps) = r.violation.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert_eq!(property, PROPERTY, "{}", bug.name());
        eprintln!("{}: {} steps\n  {}", bug.name(), steps.len(), steps.join("\n  "));
    }
}

/// The lease model of `config` holds over more than a million states, and each of
/// `variants` is caught by its property in a counterexample with a step that `marks` accepts.
fn holds_and_catches(
    config: dynamodb_lock_model::lease::Config,
    variants: &[dynamodb_lock_core::broken::Broken],
    marks: impl Fn(&str) -> bool,
) {
    use dynamodb_lock_model::lease::{check, Config, PROPERTY};
    let r = check(config);
    assert!(r.holds(), "{:?}", r.violation);
    assert!(r.states > 1_000_000, "{} states", r.states);
    for &bug in variants {
        let r = check(Config {
            bug: Some(bug),
            ..config
        });
        let (Violation { property, .. }, _, steps) = r.violation.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert_eq!(property, PROPERTY, "{}", bug.name());
        assert!(steps.iter().any(|s| marks(s)), "{steps:?}");
    }
}

/// A holder whose client closes without releasing its lock (`close()`, the core's
/// `Hold::abandon`) writes no more and still declares the loss before a rival's grant: at its
/// lease's loss moment. The variant that declares it at the lease's end is caught.
#[test]
fn a_lock_abandoned_by_close_is_lost_before_a_rival_is_granted() {
    use dynamodb_lock_model::lease::Config;
    let close = Config {
        close: true,
        horizon: 10,
        pause: 4,
        ..Config::default()
    };
    holds_and_catches(close, &dynamodb_lock_core::broken::Broken::CLOSE, |s| s == "Close");
}

/// A holder that writes its data (`lock.update`, the core's `request::Once` under
/// `held::update_time`'s deadline) while its heartbeats wait for the write, paused or not:
/// the loss still comes before a rival's grant. The variants whose update may take the whole
/// lease, or whose waiting heartbeat declares no loss, are caught.
#[test]
fn a_lock_update_holds_back_heartbeats_but_never_the_loss() {
    use dynamodb_lock_model::lease::Config;
    let update = Config {
        update: true,
        lease: 4,
        horizon: 6,
        pause: 3,
        ..Config::default()
    };
    holds_and_catches(update, &dynamodb_lock_core::broken::Broken::UPDATE, |s| {
        s.starts_with("UpdateStart")
    });
}

/// Each broken variant of the heartbeat machine is caught by that property.
#[test]
fn every_broken_heartbeat_variant_is_caught() {
    for bug in dynamodb_lock_core::broken::Broken::TIMING {
        let r = dynamodb_lock_model::lease::check(dynamodb_lock_model::lease::Config {
            bug: Some(bug),
            ..dynamodb_lock_model::lease::Config::default()
        });
        let (Violation { property, .. }, _, steps) = r.violation.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert_eq!(property, dynamodb_lock_model::lease::PROPERTY, "{}", bug.name());
        eprintln!("{}: {} steps\n  {}", bug.name(), steps.len(), steps.join("\n  "));
    }
}

/// The seeded simulator: the protocol as it ships holds over two million steps, each broken
/// heartbeat variant is caught (and a heartbeat waiting for `lock.update` that declares no loss), and a failing run replays exactly from its seed.
#[test]
fn the_simulator_holds_for_the_protocol_and_catches_every_variant() {
    use dynamodb_lock_model::simulate::{repeat, run_one};
    let out = repeat(1, 2_000_000, |s| run_one(s, None));
    assert!(out.failure.is_none(), "{:?}", out.failure);
    assert!(out.steps >= 2_000_000);
    use dynamodb_lock_core::broken::Broken;
    for bug in Broken::TIMING.into_iter().chain([Broken::ParkedMissesLapse]) {
        let b = repeat(1, 1_000_000, |s| run_one(s, Some(bug)));
        let f = b.failure.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        assert_eq!(f.property, dynamodb_lock_model::lease::PROPERTY, "{}", bug.name());
        let (_, again) = run_one(f.seed, Some(bug));
        assert_eq!(
            again.map(|a| a.steps),
            Some(f.steps),
            "{}: the seed replays",
            bug.name()
        );
    }
}
