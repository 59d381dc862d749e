//! Time, as the runtime reads it: the only module outside the store (which signs and times its
//! own requests) that reads a clock.
//!
//! - The monotonic clock, as tokio's `Instant` (paused time in unit tests): `now`.
//! - The wall clock, in milliseconds since the Unix epoch, for the item's fields that other
//!   clients read (`lastUpdatedTimeInMs`, TTL, the fencing token's floor): `unix_now_ms`.
//! - A machine's time line (`Clock`): the core counts time as a `Duration` from an origin. A
//!   client has one, made with it, that its held locks, their leases and heartbeats, its
//!   session and its local line all count from; each acquisition or single request counts from
//!   its own start.

use std::time::{Duration, SystemTime};

use dynamodb_lock_core::request::{Env, Time};
use rand::Rng;
use tokio::time::Instant;

/// Now, on this process's monotonic clock.
pub fn now() -> Instant {
    Instant::now()
}

/// How long ago `at` was (zero for a moment still to come).
pub fn since(at: Instant) -> Duration {
    now().saturating_duration_since(at)
}

/// Now, on the wall clock, in milliseconds since the Unix epoch (0 for a clock set before it).
pub fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The wall-clock moment `ms` milliseconds after the Unix epoch.
pub fn unix_time(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// A time line of the core's machines: the time since `base`.
#[derive(Clone, Copy)]
pub struct Clock {
    pub base: Instant,
}

impl Clock {
    /// A time line that starts now.
    pub fn start() -> Clock {
        Clock { base: now() }
    }

    /// Now, on this time line.
    pub fn now(&self) -> Time {
        self.time(now())
    }

    /// `at` on this time line (zero for a moment before its start).
    pub fn time(&self, at: Instant) -> Time {
        at.saturating_duration_since(self.base)
    }

    /// The moment `t` of this time line (`None` past the clock's range: never).
    pub fn instant(&self, t: Time) -> Option<Instant> {
        self.base.checked_add(t)
    }

    /// What a machine is told with each input: now on this line and on the wall clock, whether
    /// it was cancelled, and a fresh random number.
    pub fn env(&self, cancelled: bool) -> Env {
        Env {
            now: self.now(),
            unix_ms: unix_now_ms(),
            cancelled,
            random: rand::thread_rng().gen(),
        }
    }
}
