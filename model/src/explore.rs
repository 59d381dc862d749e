//! A breadth-first explorer of every reachable state of a model, with safety properties
//! checked on every state and every transition, and a liveness property of the form
//! "always, if `waiting` then eventually `served`" checked on the explored graph.
//!
//! Memory: a visited state is remembered by its 64-bit fingerprint, as TLC does, with the
//! index of the state it was first reached from and the position of the action taken there
//! (20 to 50 bytes a state in all, with the slack of growing tables). Whole states are kept
//! only for the breadth-first frontier. A counterexample path is rebuilt by replaying those
//! actions from the initial state, which needs `init`, `actions` and `next` to be
//! deterministic. When the model asks for liveness, the explored graph is kept as well, as
//! the distinct successors of each state (4 bytes an edge, 8 while liveness is checked), and
//! two bits a state for each goal.
//!
//! Fingerprint collisions: two distinct states with one fingerprint make the second look
//! visited, and the states only it leads to go unexplored. For a fingerprint that behaves as
//! a random 64-bit function, the chance of any collision among N states is about
//! N^2 / 2^65: 8e-6 for 17 million states, 4e-5 for 40 million, 3e-4 for 100 million.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};

/// The fingerprint of a state: its `Hash` input folded a word at a time, each word mixed in
/// by a 64 x 64 -> 128-bit multiply whose halves are xored (the mixing step of wyhash and
/// foldhash), then mixed once more with the input's length. Several times faster than
/// SipHash on the many small writes of a derived `Hash`.
struct Fingerprint {
    h: u64,
    len: u64,
}

const MIX: [u64; 3] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344, 0xa409_3822_299f_31d0];

fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for Fingerprint {
    fn finish(&self) -> u64 {
        fold(self.h ^ MIX[2], self.len ^ MIX[1])
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        let rest = chunks.remainder();
        if !rest.is_empty() {
            last[..rest.len()].copy_from_slice(rest);
            // The length of the tail tells "a" from "a\0".
            self.write_u64(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i.into())
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i.into())
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i.into())
    }
    fn write_u64(&mut self, i: u64) {
        self.h = fold(self.h ^ i ^ MIX[0], MIX[1].wrapping_add(self.len));
        self.len += 1;
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
    // The other integers' writes are the defaults: a `u128` comes to `write` as two words,
    // and a signed integer to the unsigned write of its width (the states hold none but
    // enums' discriminants, each an `isize` that is never negative).
}

fn fingerprint<S: Hash>(s: &S) -> u64 {
    let mut h = Fingerprint { h: 0, len: 0 };
    s.hash(&mut h);
    h.finish()
}

/// The visited set: fingerprints in discovery order, found through an open-addressing table
/// of their indices (linear probing; a slot holds index + 1, 0 when empty).
struct Visited {
    fps: Vec<u64>,
    slots: Vec<u32>,
}

impl Default for Visited {
    fn default() -> Visited {
        Visited {
            fps: Vec::new(),
            slots: vec![0; 1 << 10],
        }
    }
}

impl Visited {
    fn len(&self) -> usize {
        self.fps.len()
    }

    /// The slot holding `fp`, or the empty slot where it belongs.
    fn slot(slots: &[u32], fps: &[u64], fp: u64) -> usize {
        let mask = slots.len() - 1;
        // A fingerprint's bits are already mixed.
        let mut i = (fp as usize) & mask;
        loop {
            match slots[i] {
                0 => return i,
                j if fps[j as usize - 1] == fp => return i,
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn get(&self, fp: u64) -> Option<u32> {
        match self.slots[Self::slot(&self.slots, &self.fps, fp)] {
            0 => None,
            j => Some(j - 1),
        }
    }

    /// Adds `fp` (not yet visited); returns its index.
    fn insert(&mut self, fp: u64) -> u32 {
        let j = u32::try_from(self.fps.len() + 1).expect("fewer than 2^32 states");
        self.fps.push(fp);
        // Kept at most 70% full.
        if self.fps.len() * 10 > self.slots.len() * 7 {
            let size = self.slots.len() * 2;
            self.slots = Vec::new();
            self.slots = vec![0; size];
            for (k, &f) in self.fps.iter().enumerate() {
                let i = Self::slot(&self.slots, &self.fps[..k], f);
                self.slots[i] = k as u32 + 1;
            }
        } else {
            let i = Self::slot(&self.slots, &self.fps, fp);
            self.slots[i] = j;
        }
        j - 1
    }
}

/// A violated property found on a transition (`next` returns it) or in a state (`invariant`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub property: &'static str,
    pub detail: String,
}

impl Violation {
    /// `property` violated, as `detail` tells.
    pub fn new(property: &'static str, detail: impl Into<String>) -> Violation {
        Violation {
            property,
            detail: detail.into(),
        }
    }
}

pub trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Action: Clone + Debug;

    /// The initial states; the same each call.
    fn init(&self) -> Vec<Self::State>;
    /// The actions enabled in `s`, in an order that depends on `s` alone.
    fn actions(&self, s: &Self::State, out: &mut Vec<Self::Action>);
    /// The state after `a`, or the property the step itself violates; the same each call.
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
    /// The longest of the shortest paths from an initial state (BFS levels); depth first, the
    /// longest path followed.
    pub depth: usize,
    /// The first violation found, the state it shows in, and the path to it from an initial
    /// state (breadth first, the shortest): its actions, or once told, its steps. The last is
    /// the violating step, or the step to the state that violates an invariant.
    pub violation: Option<(Violation, S, Vec<A>)>,
    /// Exploration stopped at the state limit before covering the space.
    pub truncated: bool,
}

impl<S, A> Report<S, A> {
    /// The exploration covered the whole space and found no violation.
    pub fn holds(&self) -> bool {
        self.violation.is_none() && !self.truncated
    }

    /// The report told for people, a violation's path step by step by `tell`.
    pub fn told(self, tell: impl FnOnce(&[A]) -> Vec<String>) -> Checked<S> {
        Report {
            states: self.states,
            depth: self.depth,
            truncated: self.truncated,
            violation: self.violation.map(|(v, s, p)| (v, s, tell(&p))),
        }
    }
}

/// A fixed-size set of bits.
struct Bits(Vec<u64>);

impl Bits {
    fn set(&mut self, i: usize) {
        if self.0.len() <= i / 64 {
            self.0.resize(i / 64 + 1, 0);
        }
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

/// The state an initial state is reached from.
const ROOT: u32 = u32::MAX;

/// A model's report.
type ReportOf<M> = Report<<M as Model>::State, <M as Model>::Action>;

/// Where a step led: the index of its state, with the state itself if it is new.
type Led<S> = Option<(u32, Option<S>)>;

/// A search so far: the states it knows and how each was first reached, the depth it reached,
/// whether it stopped at its limit of states, and that limit.
#[derive(Default)]
struct Search {
    visited: Visited,
    /// How each state was first reached: the index of the state before it (`ROOT` for an
    /// initial state) and the position of the action in that state's `actions` (for an initial
    /// state, its position in `init`).
    parent: Vec<u32>,
    action: Vec<u16>,
    depth: usize,
    truncated: bool,
    limit: usize,
}

impl Search {
    fn new(limit: usize) -> Search {
        Search {
            limit,
            ..Search::default()
        }
    }

    /// State `i` and the actions from an initial state to it, replayed.
    fn replay<M: Model>(&self, model: &M, mut i: u32) -> (M::State, Vec<M::Action>) {
        let mut positions = Vec::new();
        while self.parent[i as usize] != ROOT {
            positions.push(self.action[i as usize]);
            i = self.parent[i as usize];
        }
        let mut s = model.init().swap_remove(self.action[i as usize] as usize);
        let mut path = Vec::with_capacity(positions.len());
        let mut acts = Vec::new();
        for &k in positions.iter().rev() {
            acts.clear();
            model.actions(&s, &mut acts);
            let a = acts.swap_remove(k as usize);
            s = model
                .next(&s, &a)
                .expect("a replayed step succeeds as it did when explored");
            path.push(a);
        }
        (s, path)
    }

    /// The report of the search over `states` states, `depth` deep, that found `violation`.
    fn report<S, A>(&self, states: usize, depth: usize, violation: Option<(Violation, S, Vec<A>)>) -> Report<S, A> {
        Report {
            states,
            depth,
            violation,
            truncated: self.truncated,
        }
    }

    /// Records state `s`, reached by the `k`th action of state `at` (`ROOT`: the `k`th initial
    /// state): its index and whether it is new; `None` when it is new and the search knows its
    /// limit of states already (the search is then truncated; an initial state is always
    /// recorded); or the invariant it violates.
    fn record<M: Model>(
        &mut self,
        model: &M,
        s: &M::State,
        at: u32,
        k: usize,
    ) -> Result<Option<(u32, bool)>, Violation> {
        let fp = fingerprint(s);
        if let Some(j) = self.visited.get(fp) {
            return Ok(Some((j, false)));
        }
        if at != ROOT && self.visited.len() >= self.limit {
            self.truncated = true;
            return Ok(None);
        }
        model.invariant(s)?;
        self.parent.push(at);
        self.action
            .push(u16::try_from(k).expect("fewer than 2^16 actions a state"));
        Ok(Some((self.visited.insert(fp), true)))
    }

    /// Records initial state `s`, the `k`th of `init`: its index if it is new; or the report of
    /// the invariant it violates.
    fn initial<M: Model>(&mut self, model: &M, s: &M::State, k: usize) -> Result<Option<u32>, ReportOf<M>> {
        match self.record(model, s, ROOT, k) {
            Ok(r) => Ok(r.filter(|&(_, new)| new).map(|(i, _)| i)),
            Err(v) => Err(self.report(self.visited.len() + 1, 0, Some((v, s.clone(), Vec::new())))),
        }
    }

    /// Takes action `a`, the `k`th of state `s` (index `at`, `d` deep), and records the state
    /// it leads to: its index, with the state itself if it is new; `None` as `record`; or the
    /// report of the violation the step, or the state it leads to, shows.
    fn take<M: Model>(
        &mut self,
        model: &M,
        s: &M::State,
        at: u32,
        d: usize,
        k: usize,
        a: &M::Action,
    ) -> Result<Led<M::State>, ReportOf<M>> {
        // The violation, the state it shows in, and whether that state is new (one step deeper).
        let (v, n, new) = match model.next(s, a) {
            Err(v) => (v, s.clone(), false),
            Ok(n) => match self.record(model, &n, at, k) {
                Ok(r) => return Ok(r.map(|(j, new)| (j, new.then_some(n)))),
                Err(v) => (v, n, true),
            },
        };
        let (_, mut path) = self.replay(model, at);
        path.push(a.clone());
        let depth = if new { self.depth.max(d + 1) } else { self.depth };
        Err(self.report(self.visited.len() + usize::from(new), depth, Some((v, n, path))))
    }
}

/// The explored graph, kept when the model asks for liveness: the successors of state `i` are
/// `succ[first[i]..first[i + 1]]`; per goal, the states where it is waiting and those where it
/// is served.
struct Graph {
    goals: usize,
    first: Vec<u32>,
    succ: Vec<u32>,
    waiting: Vec<Bits>,
    served: Vec<Bits>,
}

impl Graph {
    fn new(goals: usize) -> Graph {
        Graph {
            goals,
            first: Vec::new(),
            succ: Vec::new(),
            waiting: (0..goals).map(|_| Bits(Vec::new())).collect(),
            served: (0..goals).map(|_| Bits(Vec::new())).collect(),
        }
    }

    /// Liveness is checked.
    fn live(&self) -> bool {
        self.goals > 0
    }

    /// Marks state `i` waiting, or served, for each goal.
    fn mark<M: Model>(&mut self, model: &M, s: &M::State, i: u32) {
        for g in 0..self.goals {
            if model.waiting(s, g) {
                self.waiting[g].set(i as usize);
            }
            if model.served(s, g) {
                self.served[g].set(i as usize);
            }
        }
    }

    /// Adds the successors of the next state in discovery order (`out`, sorted here).
    fn add(&mut self, out: &mut Vec<u32>) {
        out.sort_unstable();
        out.dedup();
        self.first
            .push(u32::try_from(self.succ.len()).expect("fewer than 2^32 edges"));
        self.succ.extend_from_slice(out);
    }

    /// The first of the `n` states, in discovery order, from which a waiting goal cannot be
    /// served, with the property it violates.
    ///
    /// For each goal, the states that can reach a `served` state (backwards over the edges); a
    /// `waiting` state outside that set is a counterexample: from it, no schedule serves the
    /// waiter. With strong fairness on a finite graph this is exactly "waiting leads to served":
    /// a fair run visits infinitely often only a set of states closed under every enabled step,
    /// so it meets a `served` state if every one of them can reach one.
    fn unserved(mut self, n: usize) -> Option<(Violation, u32)> {
        self.first
            .push(u32::try_from(self.succ.len()).expect("fewer than 2^32 edges"));
        // The predecessors of state `t` are `pred[start[t]..start[t + 1]]`.
        let mut start = vec![0u32; n + 1];
        for &t in &self.succ {
            start[t as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut pred = vec![0u32; self.succ.len()];
        {
            let mut fill = start.clone();
            for f in 0..n {
                for &t in &self.succ[self.first[f] as usize..self.first[f + 1] as usize] {
                    pred[fill[t as usize] as usize] = f as u32;
                    fill[t as usize] += 1;
                }
            }
        }
        drop(self.succ);
        drop(self.first);
        for goal in 0..self.goals {
            let mut reach = Bits(vec![0; n.div_ceil(64)]);
            let mut stack: Vec<u32> = Vec::new();
            for i in 0..n {
                if self.served[goal].get(i) {
                    reach.set(i);
                    stack.push(i as u32);
                }
            }
            while let Some(t) = stack.pop() {
                for &f in &pred[start[t as usize] as usize..start[t as usize + 1] as usize] {
                    if !reach.get(f as usize) {
                        reach.set(f as usize);
                        stack.push(f);
                    }
                }
            }
            // BFS order: the first such state has the shortest path.
            if let Some(i) = (0..n).find(|&i| !reach.get(i) && self.waiting[goal].get(i)) {
                return Some((
                    Violation::new(
                        "liveness",
                        format!("goal {goal}: from this state no schedule lets a waiter acquire the lock"),
                    ),
                    i as u32,
                ));
            }
        }
        None
    }
}

/// Explores every state reachable from `model.init()`, up to `max_states`; stops at the first
/// violation.
pub fn explore<M: Model>(model: &M, max_states: usize) -> ReportOf<M> {
    breadth_first(model, Search::new(max_states)).unwrap_or_else(|r| r)
}

/// `explore`, its search ended early by the report of a violation.
fn breadth_first<M: Model>(model: &M, mut search: Search) -> Result<ReportOf<M>, ReportOf<M>> {
    let mut graph = Graph::new(model.liveness_goals());
    // The frontier: the states of the level being explored, then those of the next, in
    // discovery order.
    let mut queue = VecDeque::new();
    for (k, s) in model.init().into_iter().enumerate() {
        let Some(i) = search.initial(model, &s, k)? else {
            continue;
        };
        graph.mark(model, &s, i);
        queue.push_back(s);
    }
    // The index of the state at the front of the frontier, and of the first state of the level
    // after the one being explored; the actions of the state at the front, and its distinct
    // successors, for the graph.
    let (mut head, mut level_end) = (0, 0);
    let (mut acts, mut out) = (Vec::new(), Vec::new());
    while let Some(s) = queue.pop_front() {
        if head == level_end {
            if head > 0 {
                search.depth += 1;
            }
            level_end = search.visited.len();
        }
        acts.clear();
        model.actions(&s, &mut acts);
        out.clear();
        let at = head as u32;
        for (k, a) in acts.iter().enumerate() {
            let Some((j, new)) = search.take(model, &s, at, search.depth, k, a)? else {
                continue;
            };
            if let Some(n) = new {
                graph.mark(model, &n, j);
                queue.push_back(n);
            }
            if graph.live() && j != at {
                out.push(j);
            }
        }
        if graph.live() {
            graph.add(&mut out);
        }
        head += 1;
    }
    // Run to its end: liveness is checked on the whole graph.
    let states = search.visited.len();
    // The visited set's memory goes to the liveness check.
    search.visited = Visited::default();
    let mut violation = None;
    if graph.live() && !search.truncated {
        violation = graph.unserved(states).map(|(v, i)| {
            let (s, p) = search.replay(model, i);
            (v, s, p)
        });
    }
    Ok(search.report(states, search.depth, violation))
}

/// A state on the depth-first path: its index, its actions, and the next of them to take.
struct Frame<S, A> {
    s: S,
    i: u32,
    acts: Vec<A>,
    next: usize,
}

impl<S, A> Frame<S, A> {
    fn new<M: Model<State = S, Action = A>>(model: &M, s: S, i: u32) -> Self {
        let mut acts = Vec::new();
        model.actions(&s, &mut acts);
        Frame { s, i, acts, next: 0 }
    }
}

/// Explores the same states as `explore`, depth first, for models without liveness goals.
/// Only the states on the current path are held whole, so memory is the visited set alone
/// (the breadth-first frontier of a large model holds millions of whole states). A
/// counterexample is a path to the violation, not the shortest one; `depth` is the longest
/// path followed.
pub fn explore_deep<M: Model>(model: &M, max_states: usize) -> ReportOf<M> {
    assert_eq!(model.liveness_goals(), 0, "liveness needs the breadth-first graph");
    depth_first(model, Search::new(max_states)).unwrap_or_else(|r| r)
}

/// `explore_deep`, its search ended early by the report of a violation.
fn depth_first<M: Model>(model: &M, mut search: Search) -> Result<ReportOf<M>, ReportOf<M>> {
    let mut stack: Vec<Frame<M::State, M::Action>> = Vec::new();
    for (k, s) in model.init().into_iter().enumerate() {
        let Some(i) = search.initial(model, &s, k)? else {
            continue;
        };
        stack.push(Frame::new(model, s, i));
        while let Some(d) = stack.len().checked_sub(1) {
            let top = &mut stack[d];
            let Some(a) = top.acts.get(top.next) else {
                stack.pop();
                continue;
            };
            top.next += 1;
            if let Some((j, Some(n))) = search.take(model, &top.s, top.i, d, top.next - 1, a)? {
                stack.push(Frame::new(model, n, j));
                search.depth = search.depth.max(d + 1);
            }
        }
    }
    Ok(search.report(search.visited.len(), search.depth, None))
}

/// A report told for people: a violation's path is its steps, a line each (`Report::told`).
pub type Checked<S> = Report<S, String>;

/// Explores `model` (at most `max_states` states), depth first when `deep` (only the visited
/// set is held), else breadth first (the counterexample is the shortest); a violation's path
/// is told step by step by `tell`.
pub fn check<M: Model>(
    deep: bool,
    model: &M,
    max_states: usize,
    tell: impl Fn(&M::State, &M::Action) -> String,
) -> Checked<M::State> {
    let r = if deep {
        explore_deep(model, max_states)
    } else {
        explore(model, max_states)
    };
    r.told(|p| narrate(model, p, &tell))
}

/// The steps of `path` from `model`'s initial state, each told by `tell` in the state it is
/// taken in.
pub fn narrate<M: Model>(model: &M, path: &[M::Action], tell: impl Fn(&M::State, &M::Action) -> String) -> Vec<String> {
    let mut s = model.init().remove(0);
    let mut out = Vec::new();
    for a in path {
        out.push(tell(&s, a));
        match model.next(&s, a) {
            Ok(n) => s = n,
            Err(_) => break,
        }
    }
    out
}
