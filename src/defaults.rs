//! The settings defaults that JavaScript applies itself, read from the core's `settings` so
//! that each number is written once.

use dynamodb_lock_core::settings;
use napi_derive::napi;

/// Defaults the JavaScript layer needs before it reaches the native core.
#[napi(object)]
pub struct Defaults {
    /// `retryCount`: how many times a FailClosed or FailOpen acquisition tries again after
    /// finding the lock held (the user-object transport counts its retries with it).
    pub retry_count: u32,
    /// Fifo's `waitMs`: how long an acquisition waits for its turn, in milliseconds.
    pub fifo_wait_ms: f64,
}

/// The defaults of the options that JavaScript applies: `retryCount` and Fifo's `waitMs`.
#[napi(catch_unwind)]
pub fn defaults() -> Defaults {
    Defaults {
        retry_count: settings::RETRY_COUNT,
        fifo_wait_ms: settings::FIFO_WAIT.as_millis() as f64,
    }
}
