//! The lock protocol of dynamodb-lock-native, without I/O: no runtime, no clock, no randomness.
//! Whoever runs it passes the current time and new random values in. The addon (the crate at
//! the repository root) builds on it.
//!
//! - `item`: the lock item's attribute names (shared with `dynamodb-lock-client`), key values
//!   and the decoded record.

pub mod item;
