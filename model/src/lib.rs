//! Exhaustive model checking of the dynamodb-lock-native lock protocol.
//!
//! - `beats`: a FailOpen holder's heartbeats as the addon's scheduler carries them out (one
//!   write on the wire at a time), shared by `machines` and `session`.
//! - `env`: the environment both client models share: the clock in ticks, requests on their
//!   way and what may happen to them (landing, answer, loss, throttle, timeout), crashes, and
//!   the properties both check (mutual exclusion, fencing, no lost release, no orphan).
//! - `explore`: visits every reachable state of a model, remembering each by a 64-bit
//!   fingerprint, and finds the shortest path to a violated property.
//! - `item`: the model's lock item, a small view of the real one; the store operations on it
//!   are the core's (`dynamodb_lock_core::op::apply`), the same the addon's in-memory store
//!   applies.
//! - `machines`: FailClosed and FailOpen clients that are the core's acquisition, heartbeat,
//!   held-lock and release machines themselves (and the original's requests for user
//!   objects), each client's acquisitions, releases and undos one `work::Work` carried as the
//!   addon carries it, over that store, with lost, throttled, timed-out and abandoned requests, crashes
//!   and skewed wall clocks, and the broken variants of the machines and the store.
//! - `fifo_machines`: Fifo clients that are the core's Fifo acquisition and release machines
//!   themselves (queues, entries, grants, give-up; one or several lock ids), over the same
//!   store, with lost, throttled and timed-out requests, crashes, cancellations and clock
//!   offsets, and the Fifo broken variants, each client's heads held in its client machine; the
//!   same clients as a semaphore's (permits of a
//!   limit, a ReadWriteLock's shared and exclusive holds among them) and its variants.
//! - `lease`: a FailOpen holder's heartbeats in time, stepped through the core's heartbeat
//!   machine itself, against a waiter in another process; pauses, late and lost answers.
//! - `session`: a client that holds two locks through its session (the core's heartbeat
//!   machine renewing the session's item) against rivals in other processes that wait out the
//!   session, end it and take the locks; lost, late and abandoned renewals, crashes.
//! - `simulate`: seeded random walks through the lease, machines and Fifo models at larger
//!   scales; a failing seed replays exactly.
//!
//! Every decision a client makes is the core's machine's, and every lock of every model ends
//! through a client machine (`client::Client::ending`), whose Fifo registry the Fifo model's
//! one-process clients share; the glue the addon's runtime puts between the machines (a
//! heartbeat's writes, a release that waits for one, and in the session and Fifo models the
//! step from a request to the network, which the machines model leaves to `work::Work`) is
//! restated here as the runtime does it.

pub mod beats;
pub mod env;
pub mod explore;
pub mod fifo_machines;
pub mod item;
pub mod lease;
pub mod machines;
pub mod session;
pub mod simulate;
