//! What the machines' unit tests share: a lock's settings and the inputs' clocks.

use std::time::Duration;

use crate::op::OpenFields;
use crate::request::{Answer, Env};
use crate::settings::{Kind, Lock};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Settings of a lock of `kind` with short, round times: a 1 s lease, 50 ms request timeouts,
/// two attempts.
pub fn lock(kind: Kind) -> Lock {
    Lock {
        kind,
        retry_count: 1,
        acquire_period: Duration::ZERO,
        lease_duration_ms: 1000,
        trust_local_time: false,
        heartbeat_period: ms(300),
        reread: ms(10),
        later_waiter_reread: ms(250),
        request_timeout: ms(50),
        max_attempts: 2,
        base_backoff: ms(10),
        max_backoff: ms(20),
        danger_margin: crate::settings::DANGER_MARGIN,
    }
}

/// A heartbeat's settings: a 1 s lease renewed every `period` ms, `"danger"` at a third
/// left, 5 s request timeouts, a 1 ms timer grain.
pub fn beat_config(period: u64) -> crate::heartbeat::Config {
    crate::heartbeat::Config {
        lease: ms(1000),
        period: ms(period),
        danger_margin: ms(333),
        request_timeout: ms(5000),
        timer_grain: ms(1),
        writes_out: crate::heartbeat::MOST_WRITES_OUT,
        base_backoff: ms(25),
        max_backoff: ms(25),
    }
}

/// The random number that draws the longest pause of `beat_config`: 25 ms.
pub const LONGEST_PAUSE: u64 = 13;

/// The inputs' clocks at `now` ms: the wall clock a million ms later.
pub fn env(now: u64) -> Env {
    Env {
        now: ms(now),
        unix_ms: 1_000_000 + now,
        cancelled: false,
        random: 0,
    }
}

/// A throttled request's answer: transient, and not applied.
pub fn throttled<R>() -> Answer<R, &'static str> {
    Answer::Failed {
        error: "throttled",
        transient: true,
        maybe_applied: false,
    }
}

/// The holder's fields of `owner`'s writes with a lease of `lease_ms`, and nothing else.
pub fn fields(owner: &str, lease_ms: u64) -> OpenFields<'_> {
    OpenFields {
        owner,
        lease_duration_ms: lease_ms,
        lock_acquired_time_unix_ms: None,
        data: None,
        ttl: None,
        token_floor: 0,
        session: None,
    }
}
