//! A breadth-first explorer of every reachable state of a model, with safety properties
//! checked on every state and every transition, and a liveness property of the form
//! "always, if `waiting` then eventually `served`" checked on the explored graph.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A small, fast, non-cryptographic hasher (the multiply-rotate scheme of rustc's FxHash).
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

fn fingerprint<S: Hash>(s: &S) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// A violated property found on a transition (`next` returns it) or in a state (`invariant`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub property: &'static str,
    pub detail: String,
}

pub trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Action: Clone + Debug;

    fn init(&self) -> Vec<Self::State>;
    fn actions(&self, s: &Self::State, out: &mut Vec<Self::Action>);
    /// The state after `a`, or the property the step itself violates.
    fn next(&self, s: &Self::State, a: &Self::Action) -> Result<Self::State, Violation>;
    fn invariant(&self, s: &Self::State) -> Result<(), Violation>;
    /// Liveness: for each `i` in `0..liveness_goals()`, every reachable state where
    /// `waiting(s, i)` must be able to reach one where `served(s, i)`.
    fn liveness_goals(&self) -> usize {
        0
    }
    fn waiting(&self, _s: &Self::State, _i: usize) -> bool {
        false
    }
    fn served(&self, _s: &Self::State, _i: usize) -> bool {
        false
    }
}

#[derive(Debug)]
pub struct Report<S, A> {
    /// Distinct states explored.
    pub states: usize,
    /// The longest of the shortest paths from an initial state (BFS levels).
    pub depth: usize,
    pub transitions: u64,
    /// The first violation found, with the shortest path to it (from an initial state; the
    /// last action is the violating step, or `None` when the last state violates an invariant).
    pub violation: Option<(Violation, S, Vec<A>)>,
    /// Exploration stopped at the state limit before covering the space.
    pub truncated: bool,
}

impl<S, A> Report<S, A> {
    pub fn holds(&self) -> bool {
        self.violation.is_none() && !self.truncated
    }
    pub fn counterexample_len(&self) -> Option<usize> {
        self.violation.as_ref().map(|(_, _, p)| p.len())
    }
}

/// Explores every state reachable from `model.init()`, up to `max_states`; stops at the first
/// violation.
pub fn explore<M: Model>(model: &M, max_states: usize) -> Report<M::State, M::Action> {
    // States are deduplicated by a 64-bit fingerprint (SipHash), as explicit-state checkers
    // such as TLC and stateright do: with N states the chance of any collision is about
    // N^2 / 2^65 (below 1e-5 for ten million).
    let mut index: FxMap<u64, u32> = FxMap::default();
    let mut states: Vec<M::State> = Vec::new();
    // How each state was first reached: (parent, action).
    let mut came: Vec<Option<(u32, M::Action)>> = Vec::new();
    let live = model.liveness_goals() > 0;
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut level_end = 0usize;
    let mut depth = 0usize;
    let mut transitions = 0u64;
    let mut truncated = false;

    let path_to = |came: &Vec<Option<(u32, M::Action)>>, mut i: u32| {
        let mut p = Vec::new();
        while let Some((parent, a)) = &came[i as usize] {
            p.push(a.clone());
            i = *parent;
        }
        p.reverse();
        p
    };

    for s in model.init() {
        if index.contains_key(&fingerprint(&s)) {
            continue;
        }
        if let Err(v) = model.invariant(&s) {
            return Report {
                states: states.len() + 1,
                depth: 0,
                transitions,
                violation: Some((v, s, Vec::new())),
                truncated,
            };
        }
        index.insert(fingerprint(&s), states.len() as u32);
        states.push(s);
        came.push(None);
    }
    let mut head = 0usize;
    let mut acts = Vec::new();
    while head < states.len() {
        if head == level_end {
            if head > 0 {
                depth += 1;
            }
            level_end = states.len();
        }
        let s = states[head].clone();
        acts.clear();
        model.actions(&s, &mut acts);
        for a in &acts {
            transitions += 1;
            let n = match model.next(&s, a) {
                Ok(n) => n,
                Err(v) => {
                    let mut p = path_to(&came, head as u32);
                    p.push(a.clone());
                    return Report {
                        states: states.len(),
                        depth,
                        transitions,
                        violation: Some((v, s, p)),
                        truncated,
                    };
                }
            };
            let fp = fingerprint(&n);
            let j = match index.get(&fp) {
                Some(j) => *j,
                None => {
                    if states.len() >= max_states {
                        truncated = true;
                        continue;
                    }
                    if let Err(v) = model.invariant(&n) {
                        let mut p = path_to(&came, head as u32);
                        p.push(a.clone());
                        return Report {
                            states: states.len() + 1,
                            depth: depth + 1,
                            transitions,
                            violation: Some((v, n, p)),
                            truncated,
                        };
                    }
                    let j = states.len() as u32;
                    index.insert(fp, j);
                    states.push(n);
                    came.push(Some((head as u32, a.clone())));
                    j
                }
            };
            if live {
                edges.push((head as u32, j));
            }
        }
        head += 1;
    }
    drop(index);

    let mut violation = None;
    if live && !truncated {
        violation =
            check_liveness(model, &states, &edges).map(|(v, i)| (v, states[i as usize].clone(), path_to(&came, i)));
    }
    Report {
        states: states.len(),
        depth,
        transitions,
        violation,
        truncated,
    }
}

/// For each goal, the states that can reach a `served` state (backwards over the edges); a
/// `waiting` state outside that set is a counterexample: from it, no schedule serves the
/// waiter. With strong fairness on a finite graph this is exactly "waiting leads to served":
/// a fair run visits infinitely often only a set of states closed under every enabled step,
/// so it meets a `served` state if every one of them can reach one.
fn check_liveness<M: Model>(model: &M, states: &[M::State], edges: &[(u32, u32)]) -> Option<(Violation, u32)> {
    let n = states.len();
    // Reverse adjacency in compressed rows.
    let mut start = vec![0u32; n + 1];
    for &(_, to) in edges {
        start[to as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut from = vec![0u32; edges.len()];
    for &(f, to) in edges {
        from[fill[to as usize] as usize] = f;
        fill[to as usize] += 1;
    }
    for goal in 0..model.liveness_goals() {
        let mut reach = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        for (i, s) in states.iter().enumerate() {
            if model.served(s, goal) {
                reach[i] = true;
                stack.push(i as u32);
            }
        }
        while let Some(t) = stack.pop() {
            for &f in &from[start[t as usize] as usize..start[t as usize + 1] as usize] {
                if !reach[f as usize] {
                    reach[f as usize] = true;
                    stack.push(f);
                }
            }
        }
        // BFS order: the first such state has the shortest path.
        if let Some(i) = (0..n).find(|&i| !reach[i] && model.waiting(&states[i], goal)) {
            return Some((
                Violation {
                    property: "liveness",
                    detail: format!("goal {goal}: from this state no schedule lets a waiter acquire the lock"),
                },
                i as u32,
            ));
        }
    }
    None
}
