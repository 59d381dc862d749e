//! Every default of a client's settings, and the lease arithmetic that derives one setting from
//! another. The option names are the JavaScript ones (`retryCount`, `leaseDurationMs`, ...);
//! a default applies where the option is not given.

use std::time::Duration;

/// The kind of lock a client takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    FailClosed,
    FailOpen,
    Fifo,
}

/// `retryCount`: FailClosed and FailOpen acquisitions try again once after a held lock.
pub const RETRY_COUNT: u32 = 1;
/// `acquirePeriodMs`: FailClosed tries again at once.
pub const ACQUIRE_PERIOD: Duration = Duration::ZERO;
/// `leaseDurationMs`: none (validation asks for it where a kind needs it).
pub const LEASE_DURATION_MS: u64 = 0;
/// `trustLocalTime`: a waiter counts a lease on its own clock only.
pub const TRUST_LOCAL_TIME: bool = false;
/// `rereadPeriodMs`, where a lease does not make it shorter (`reread`).
pub const REREAD_PERIOD: Duration = Duration::from_millis(10);
/// The re-read interval of FailOpen waiters other than the first, at most (`queue_reread`).
pub const QUEUE_REREAD_PERIOD: Duration = Duration::from_millis(250);
/// `requestTimeoutMs`: the longest wait for one DynamoDB answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(5000);
/// `dangerMarginMs` without a lease to take a third of (`danger_margin`).
pub const DANGER_MARGIN: Duration = Duration::ZERO;
/// Attempts of one request through transient faults (throttling, 5xx, timeouts).
pub const MAX_ATTEMPTS: u32 = 4;
/// Attempts of a release, at least: a lost release leaves a lock held.
pub const RELEASE_MAX_ATTEMPTS: u32 = 8;
/// The first pause between attempts of a request, before jitter; it doubles with each attempt.
pub const RETRY_BASE_BACKOFF: Duration = Duration::from_millis(25);
/// The longest pause between attempts of a request, before jitter.
pub const RETRY_MAX_BACKOFF: Duration = Duration::from_millis(1000);
/// FailOpen's `ttlSeconds`: an hour past the lease, so a held lock's item can never go while it
/// is held (heartbeats move it on), and a released one goes an hour after.
pub const OPEN_TTL_SECONDS: u64 = 3600;
/// Fifo's `ttlAttribute`.
pub const FIFO_TTL_ATTRIBUTE: &str = "ttl";
/// Fifo's `waitMs`: how long an acquisition waits.
pub const FIFO_WAIT: Duration = Duration::from_secs(60);

/// The first waiter's re-read interval (`rereadPeriodMs`): 10 ms, or a quarter of a shorter
/// lease.
pub fn reread(lease_duration_ms: u64) -> Duration {
    if lease_duration_ms == 0 {
        return REREAD_PERIOD;
    }
    Duration::from_millis((lease_duration_ms / 4).clamp(1, REREAD_PERIOD.as_millis() as u64))
}

/// Other waiters re-read at a quarter of the lease, between the first waiter's interval
/// `reread` and 250 ms.
pub fn queue_reread(lease_duration_ms: u64, reread: Duration) -> Duration {
    Duration::from_millis(lease_duration_ms / 4)
        .min(QUEUE_REREAD_PERIOD)
        .max(reread)
}

/// `dangerMarginMs`: a third of the lease.
pub fn danger_margin(lease_duration_ms: u64) -> Duration {
    Duration::from_millis(lease_duration_ms / 3)
}

/// Fifo's `heartbeatPeriodMs`: a third of the lease.
pub fn fifo_heartbeat(lease_duration_ms: u64) -> Duration {
    Duration::from_millis((lease_duration_ms / 3).max(1))
}

/// How long a first-in-line mark stays fresh: a mark older than this no longer makes its writer
/// first in line, and the first waiter renews it at half this age. Four of the waiter's re-read
/// intervals (FailClosed: of `acquirePeriodMs`, up to 250 ms), and at least 200 ms.
pub fn mark_fresh(kind: Kind, queue_reread_period: Duration, acquire_period: Duration) -> Duration {
    let base = match kind {
        Kind::FailOpen | Kind::Fifo => queue_reread_period,
        Kind::FailClosed => acquire_period.min(Duration::from_millis(250)),
    };
    (base * 4).max(Duration::from_millis(200))
}

/// What the acquisition and release machines need to know of a client's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lock {
    pub kind: Kind,
    /// `retryCount`.
    pub retry_count: u32,
    /// `acquirePeriodMs` (FailClosed).
    pub acquire_period: Duration,
    /// `leaseDurationMs` (FailOpen).
    pub lease_duration_ms: u64,
    /// `trustLocalTime`.
    pub trust_local_time: bool,
    /// The first waiter's re-read interval (`rereadPeriodMs`).
    pub reread: Duration,
    /// Other waiters' re-read interval.
    pub queue_reread: Duration,
    /// `requestTimeoutMs`.
    pub request_timeout: Duration,
    /// Attempts of one request through transient faults.
    pub max_attempts: u32,
    /// The first pause between attempts of a request, and the longest (before jitter).
    pub base_backoff: Duration,
    pub max_backoff: Duration,
}

impl Lock {
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_duration_ms)
    }

    /// Attempts of a release: more than of other requests, since a lost release leaves a
    /// lock held.
    pub fn release_attempts(&self) -> u32 {
        self.max_attempts.max(RELEASE_MAX_ATTEMPTS)
    }

    pub fn mark_fresh(&self) -> Duration {
        mark_fresh(self.kind, self.queue_reread, self.acquire_period)
    }

    /// How long a waiter waits before it reads the item again: the first in line at
    /// `rereadPeriodMs`, the others at the slower queue interval; other FailClosed waiters
    /// only try at `acquirePeriodMs`, as the original does (`Duration::MAX`).
    pub fn reread_interval(&self, first: bool) -> Duration {
        match (first, self.kind) {
            (true, _) => self.reread,
            (false, Kind::FailOpen | Kind::Fifo) => self.queue_reread,
            (false, Kind::FailClosed) => Duration::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_reread_at_a_quarter_of_the_lease_within_bounds() {
        assert_eq!(reread(0), Duration::from_millis(10));
        assert_eq!(reread(20), Duration::from_millis(5));
        assert_eq!(reread(2), Duration::from_millis(1));
        assert_eq!(reread(60_000), Duration::from_millis(10));
        assert_eq!(queue_reread(400, reread(400)), Duration::from_millis(100));
        assert_eq!(queue_reread(60_000, reread(60_000)), Duration::from_millis(250));
        assert_eq!(queue_reread(8, reread(8)), Duration::from_millis(2));
    }

    #[test]
    fn danger_and_fifo_heartbeat_take_a_third_of_the_lease() {
        assert_eq!(danger_margin(3000), Duration::from_millis(1000));
        assert_eq!(fifo_heartbeat(3000), Duration::from_millis(1000));
        assert_eq!(fifo_heartbeat(2), Duration::from_millis(1), "never a zero period");
    }

    #[test]
    fn a_mark_stays_fresh_for_four_rereads_and_at_least_200_ms() {
        let ms = Duration::from_millis;
        assert_eq!(mark_fresh(Kind::FailOpen, ms(250), ms(0)), ms(1000));
        assert_eq!(mark_fresh(Kind::Fifo, ms(10), ms(0)), ms(200));
        assert_eq!(mark_fresh(Kind::FailClosed, ms(250), ms(5000)), ms(1000));
        assert_eq!(mark_fresh(Kind::FailClosed, ms(250), ms(0)), ms(200));
    }
}
