//! Exhaustive model checking of the dynamodb-lock-native lock protocol.
//!
//! - `explore`: visits every reachable state of a model, remembering each by a 64-bit
//!   fingerprint, and finds the shortest path to a violated property.
//! - `item`: the model's lock item, a small view of the real one; the store operations on it
//!   are the core's (`dynamodb_lock_core::op::apply`), the same the addon's in-memory store
//!   applies.
//! - `lock`: FailClosed, FailOpen and Fifo clients over that store, in an environment of lost,
//!   late and repeated requests, crashes and clock offsets, and the broken variants.
//! - `machines`: FailClosed and FailOpen clients that are the core's acquisition and release
//!   machines themselves, over the same store, with lost, throttled and timed-out requests,
//!   crashes and skewed wall clocks, and the broken variants of the machines and the store.
//! - `fifo_machines`: Fifo clients that are the core's Fifo acquisition and release machines
//!   themselves (queues, entries, grants, give-up; one or several lock ids), over the same
//!   store, with lost, throttled and timed-out requests, crashes, cancellations and clock
//!   offsets, and the Fifo broken variants.
//! - `lease`: a FailOpen holder's heartbeats in time, stepped through the core's heartbeat
//!   machine itself, against a waiter in another process; pauses, late and lost answers.
//! - `run`: the configurations checked and the report.
//! - `simulate`: seeded random walks through the lease model at larger scales; a failing seed
//!   replays exactly.

pub mod explore;
pub mod fifo_machines;
pub mod item;
pub mod lease;
pub mod lock;
pub mod machines;
pub mod run;
pub mod simulate;
