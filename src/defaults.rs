//! The settings defaults that JavaScript applies itself, read from the core's `settings` so
//! that each number is written once, and the item attribute names its validation of a
//! configuration keeps free.

use dynamodb_lock_core::{item, settings};
use napi_derive::napi;

/// Defaults the JavaScript layer needs before it reaches the native core.
#[napi(object)]
pub struct Defaults {
    /// `retryCount`: how many times a FailClosed or FailOpen acquisition tries again after
    /// finding the lock held (the user-object transport counts its retries with it).
    pub retry_count: u32,
    /// Fifo's `waitMs`: how long an acquisition waits for its turn, in milliseconds.
    pub fifo_wait_ms: f64,
    /// How long a campaign pauses after an acquisition failed for another reason than a rival
    /// holding the lock (an outage), in milliseconds: the longest pause between two attempts
    /// of a request.
    pub outage_pause_ms: f64,
    /// The lock item's attribute names, which key and TTL attribute names may not take.
    pub reserved_names: Vec<String>,
    /// The Fifo head item's own attribute names, which a Fifo client's may not take either.
    pub fifo_reserved_names: Vec<String>,
}

/// Attributes only this library writes.
const OWN_NAMES: [&str; 7] = [
    item::LOCK_DATA,
    item::LOCK_WAITING_UNIX_MS,
    item::LOCK_WAITER,
    item::LOCK_WAITER_OWNER,
    item::LOCK_WAITING_SINCE_UNIX_MS,
    item::LOCK_WRITTEN_UNIX_MS,
    item::LOCK_SESSION,
];

/// Attributes of the Fifo head item.
const FIFO_NAMES: [&str; 5] = [
    item::TICKET_NEXT,
    item::QUEUE_NEXT,
    item::QUEUE_GRANTED,
    item::PERMITS,
    item::PERMITS_HELD,
];

/// The defaults of the options that JavaScript applies (`retryCount` and Fifo's `waitMs`), a
/// campaign's pause after an outage, and the attribute names its validation refuses for keys.
#[napi(catch_unwind)]
pub fn defaults() -> Defaults {
    Defaults {
        retry_count: settings::RETRY_COUNT,
        fifo_wait_ms: settings::FIFO_WAIT.as_millis() as f64,
        outage_pause_ms: settings::RETRY_MAX_BACKOFF.as_millis() as f64,
        reserved_names: item::RESERVED_NAMES
            .iter()
            .chain(&OWN_NAMES)
            .map(|n| n.to_string())
            .collect(),
        fifo_reserved_names: FIFO_NAMES.map(String::from).to_vec(),
    }
}
