//! The configurations checked, and the report: a readable summary and one JSON line.

use std::time::Instant;

use crate::explore::{explore, Model, Report};
use crate::lock::{Bug, Config, Kind, LockModel};

/// How much to explore: `Full` for `npm run model`, `Bounded` for the test suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Full,
    Bounded,
}

/// The base figures (ticks for times), before the per-run choices of `configs`.
fn base(kind: Kind) -> Config {
    Config {
        kind,
        clients: 2,
        locks: 1,
        acquisitions: 1,
        beats: 1,
        lease: 3,
        heartbeat: 1,
        reread: 1,
        retry_count: 1,
        max_attempts: 2,
        faults: 1,
        crashes: 1,
        late_landing: false,
        drift: 0,
        bug: None,
    }
}

/// Outside the assumptions: one client's clock runs one tick ahead over a lease.
pub fn drift_config(kind: Kind) -> Config {
    Config { drift: 1, ..base(kind) }
}

/// Outside the assumptions: requests that timed out may land at any later time. Reported, not
/// required to hold.
pub fn late_landing_config(kind: Kind) -> Config {
    Config {
        late_landing: true,
        faults: 2,
        ..base(kind)
    }
}

/// Explores `config` and returns the first violation's property and steps.
pub fn check_config(config: Config) -> (usize, Option<(&'static str, Vec<String>)>) {
    let m = LockModel::new(config);
    let r = explore(&m, MAX_STATES);
    (r.states, r.violation.map(|(v, _, p)| (v.property, m.narrate(&p))))
}

/// The configurations explored for `kind`.
pub fn configs(kind: Kind, size: Size) -> Vec<Config> {
    let mut out = Vec::new();
    let b = base(kind);
    match (kind, size) {
        (Kind::FailOpen, Size::Bounded) => out.push(Config { beats: 2, ..b }),
        (Kind::Fifo, Size::Bounded) => out.push(b),
        (Kind::Fifo, Size::Full) => {
            out.push(Config {
                clients: 3,
                lease: 2,
                faults: 0,
                ..b
            });
            out.push(Config {
                acquisitions: 2,
                lease: 2,
                ..b
            });
        }
        (Kind::FailOpen, Size::Full) => {
            out.push(Config {
                clients: 3,
                lease: 2,
                ..b
            });
            out.push(Config {
                locks: 2,
                acquisitions: 2,
                lease: 2,
                ..b
            });
        }
    }
    out.into_iter().map(overrides).collect()
}

/// `MODEL_<FIELD>=n` overrides a figure of every configuration (e.g. MODEL_FAULTS=2), for
/// exploring further by hand.
fn overrides(mut c: Config) -> Config {
    let var = |name: &str, v: &mut u8| {
        if let Some(n) = std::env::var(format!("MODEL_{name}")).ok().and_then(|s| s.parse().ok()) {
            *v = n;
        }
    };
    let (mut clients, mut locks) = (c.clients as u8, c.locks as u8);
    var("CLIENTS", &mut clients);
    var("LOCKS", &mut locks);
    c.clients = clients.clamp(1, 3) as usize;
    c.locks = locks.clamp(1, 2) as usize;
    var("ACQUISITIONS", &mut c.acquisitions);
    var("BEATS", &mut c.beats);
    var("LEASE", &mut c.lease);
    var("HEARTBEAT", &mut c.heartbeat);
    var("REREAD", &mut c.reread);
    var("FAULTS", &mut c.faults);
    var("CRASHES", &mut c.crashes);
    var("ATTEMPTS", &mut c.max_attempts);
    var("RETRY_COUNT", &mut c.retry_count);
    c
}

/// The configuration a broken variant is checked in: the bounded one, with what it needs.
pub fn broken_config(bug: Bug) -> Config {
    let mut c = overrides(base(bug.kind()));
    c.bug = Some(bug);
    // Room for every attempt of one request to fail.
    c.faults = c.max_attempts;
    if bug == Bug::FifoGrantIgnoresToken {
        // Two waiters in the queue behind a holder.
        c.clients = 3;
        c.lease = 2;
        c.faults = 0;
        c.crashes = 0;
    }
    c
}

pub fn properties(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::FailOpen => &[
            "mutual exclusion",
            "fencing",
            "no lost release",
            "no orphan",
            "liveness",
        ],
        Kind::Fifo => &[
            "mutual exclusion",
            "fencing (grants in ticket order)",
            "no lost release",
            "no orphan",
        ],
    }
}

pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::FailOpen => "FailOpen",
        Kind::Fifo => "Fifo",
    }
}

pub struct RunResult {
    pub config: Config,
    pub states: usize,
    pub depth: usize,
    pub transitions: u64,
    pub seconds: f64,
    pub holds: bool,
    pub detail: Option<String>,
}

pub struct KindResult {
    pub name: &'static str,
    pub properties: &'static [&'static str],
    pub runs: Vec<RunResult>,
}

impl KindResult {
    pub fn states(&self) -> usize {
        self.runs.iter().map(|r| r.states).sum()
    }
    pub fn depth(&self) -> usize {
        self.runs.iter().map(|r| r.depth).max().unwrap_or(0)
    }
    pub fn holds(&self) -> bool {
        !self.runs.is_empty() && self.runs.iter().all(|r| r.holds)
    }
}

pub struct BrokenResult {
    pub name: &'static str,
    pub kind: &'static str,
    pub property: &'static str,
    pub found: Option<&'static str>,
    pub counterexample: Option<Vec<String>>,
    pub states: usize,
}

/// Beyond this many states a run stops and reports itself incomplete (memory: about 80 bytes a
/// state in a complete run, the graph kept for liveness included; a run cut short at the limit
/// still holds many states whole on its frontier, 402 bytes each).
pub const MAX_STATES: usize = 12_000_000;

fn describe(m: &LockModel, r: &Report<<LockModel as Model>::State, <LockModel as Model>::Action>) -> Option<String> {
    if r.truncated {
        return Some(format!("stopped at {} states", r.states));
    }
    r.violation.as_ref().map(|(v, s, p)| {
        let steps: Vec<String> = m.narrate(p).iter().map(|a| format!("  {a}")).collect();
        format!(
            "{}: {}\n{}\n  final state: {:?}",
            v.property,
            v.detail,
            steps.join("\n"),
            s
        )
    })
}

pub fn check_kind(kind: Kind, size: Size) -> KindResult {
    let runs = configs(kind, size)
        .into_iter()
        .map(|config| {
            let m = LockModel::new(config.clone());
            let t = Instant::now();
            let r = explore(&m, MAX_STATES);
            RunResult {
                config,
                states: r.states,
                depth: r.depth,
                transitions: r.transitions,
                seconds: t.elapsed().as_secs_f64(),
                holds: r.holds(),
                detail: describe(&m, &r),
            }
        })
        .collect();
    KindResult {
        name: kind_name(kind),
        properties: properties(kind),
        runs,
    }
}

pub fn check_broken(bug: Bug) -> BrokenResult {
    let m = LockModel::new(broken_config(bug));
    let r = explore(&m, MAX_STATES);
    BrokenResult {
        name: bug.name(),
        kind: kind_name(bug.kind()),
        property: bug.property(),
        found: r.violation.as_ref().map(|(v, _, _)| v.property),
        counterexample: r.violation.as_ref().map(|(_, _, p)| m.narrate(p)),
        states: r.states,
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The report's last line.
pub fn json(kinds: &[KindResult], broken: &[BrokenResult]) -> String {
    let mut out = String::from("{");
    for k in kinds {
        let props: Vec<String> = k.properties.iter().map(|p| format!("\"{}\"", esc(p))).collect();
        let runs: Vec<String> = k
            .runs
            .iter()
            .map(|r| {
                format!(
                    "{{\"clients\":{},\"locks\":{},\"states\":{},\"depth\":{},\"holds\":{}}}",
                    r.config.clients, r.config.locks, r.states, r.depth, r.holds
                )
            })
            .collect();
        out.push_str(&format!(
            "\"{}\":{{\"states\":{},\"depth\":{},\"properties\":[{}],\"holds\":{},\"runs\":[{}]}},",
            k.name,
            k.states(),
            k.depth(),
            props.join(","),
            k.holds(),
            runs.join(",")
        ));
    }
    let bs: Vec<String> = broken
        .iter()
        .map(|b| {
            // A counterexample counts only if it breaks the property the variant targets.
            let len = match (&b.counterexample, b.found) {
                (Some(p), Some(f)) if f == b.property => p.len().to_string(),
                _ => "null".into(),
            };
            format!(
                "{{\"name\":\"{}\",\"kind\":\"{}\",\"property\":\"{}\",\"counterexampleLength\":{}}}",
                esc(b.name),
                b.kind,
                esc(b.property),
                len
            )
        })
        .collect();
    out.push_str(&format!("\"brokenVariants\":[{}]}}", bs.join(",")));
    out
}
