//! The lock protocol of dynamodb-lock-native, without I/O: no runtime, no clock, no randomness.
//! Whoever runs it passes the current time and new random values in. The addon (the crate at
//! the repository root) and the model checker (`model/`) both build on it.
//!
//! - `item`: the lock item's attribute names (shared with `dynamodb-lock-client`), key values,
//!   the keys of sessions' items and of Fifo's heads and queue entries, and the decoded record.
//! - `op`: operations on one item as data (`Op`) and their `Reply`, with one `apply` over an
//!   item in which each condition is a named function: the addon's in-memory store and the
//!   model checker's store both apply operations through it.
//! - `settings`: the lock kinds, every default of a client's settings, and the lease
//!   arithmetic that derives one setting from another.
//! - `request`: one request as the machines send it (`Req`), its `Answer`, the `Step` a machine
//!   asks its caller for, why it is sent (`Purpose`), and the attempts of a request through
//!   transient faults.
//! - `waiting`: a waiter's first place in line (the item's waiting mark) and the pace of its
//!   re-reads (`Pace`).
//! - `fail_closed`: a FailClosed acquisition as a state machine.
//! - `fail_open`: a FailOpen acquisition (take, wait-out, `trustLocalTime`) as a state machine.
//! - `fifo`: a Fifo acquisition (ticket, queue entry, watching the entry ahead, grant, give
//!   up, dead entries; several resources with one ticket) as a state machine.
//! - `ending`: the end of a held lock: a hand-over to the next acquisition of the same client,
//!   else a release (the original's, for a lock taken with its requests), and whether the
//!   client then stands back from the lock.
//! - `handover`: hand-over of a held lock to the next acquisition of the same client.
//! - `local`: what a client decides without a request: the line of its acquisitions of one
//!   lock id (order, patience, a hand-over within a session) and its stand-back from a lock it
//!   released while others waited, which the client machine keeps, and its Fifo registry (its
//!   queue entries and heads).
//! - `held`: a held lock's `guid`s, which its heartbeats and its release agree on, and what a
//!   release does about a heartbeat on the wire.
//! - `hold`: a held lock's life as one state machine: its lease, its heartbeats one at a time,
//!   the loss of a lock without them, and a release that waits for a heartbeat's write.
//! - `session`: a session's members and whether it still speaks for them: joining, the loss
//!   and the errors of its item told to every member, revocation, restarts.
//! - `release`: a FailClosed or FailOpen release as a state machine.
//! - `heartbeat`: one heartbeat of a held lock as a state machine: its writes, the danger and
//!   loss deadlines, retries, and the renewed lease.
//! - `force`: an operator's forced release (`forceRelease`) as a state machine: the reads,
//!   the order of its writes (a session's item named before its lock is revoked), and when it
//!   reads again or leaves the lock alone.
//! - `undo`: undoing an acquisition's write whose outcome could not be read.
//! - `work`: a client's work, run without I/O: its acquisitions, the ends of its locks,
//!   forced releases, requests sent once and undos, by number: the requests to send, their
//!   answers, its times and what becomes of each piece; and what follows an acquisition's end.
//! - `original`: the original library's get-then-put request sequence, as a FailClosed and
//!   FailOpen acquisition machine for stores with only `get`, `put` and `delete` (a user's
//!   `dynamodb` object).
//! - `client`: the client machine so far: every lock one client holds, its sessions, and its
//!   local line and stand-back in one value, which decides what a session's item means for its
//!   locks, every event about them, and what the end of a lock means for the line.
//! - `broken`: deliberately broken variants (feature `broken`, never in the addon), hooks in
//!   the machines that the model checker and the simulator must catch.

pub mod broken;
pub mod client;
pub mod ending;
pub mod fail_closed;
pub mod fail_open;
pub mod fifo;
pub mod force;
pub mod handover;
pub mod heartbeat;
pub mod held;
pub mod hold;
pub mod item;
pub mod local;
pub mod op;
pub mod original;
pub mod release;
pub mod request;
pub mod session;
pub mod settings;
#[cfg(test)]
mod testing;
pub mod undo;
pub mod waiting;
pub mod work;
