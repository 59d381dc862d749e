//! A client's settings as the runtime reads them, with what follows from them: the TTL
//! attribute of a write, the token floor, the fields of a FailOpen write, and the retry
//! policies and budgets of requests. The protocol's own view of them, and every default, are
//! the core's (`dynamodb_lock_core::settings`).

use std::sync::Arc;
use std::time::Duration;

use dynamodb_lock_core::request::Policy;
use dynamodb_lock_core::settings;

use crate::clock::unix_now_ms;
use crate::item::token_floor;
use crate::stats::Stats;
use crate::store::{OpenFields, Ttl};
use dynamodb_lock_core::settings::Kind;

#[derive(Clone, Debug)]
pub struct Settings {
    pub kind: Kind,
    pub owner: String,
    pub retry_count: u32,
    /// FailClosed: pause between attempts on a held lock.
    pub acquire_period: Duration,
    /// FailOpen: the lease written with every acquisition and heartbeat.
    pub lease_duration_ms: u64,
    pub heartbeat_period: Option<Duration>,
    pub trust_local_time: bool,
    /// The first waiter in line re-reads a held lock at this interval, to act at once on a
    /// release.
    pub reread_period: Duration,
    /// Other FailOpen waiters re-read at this interval.
    pub later_waiter_reread_period: Duration,
    /// Longest wait for one DynamoDB answer.
    pub request_timeout: Duration,
    /// `"danger"` is emitted when this little of the lease is left without a heartbeat.
    pub danger_margin: Duration,
    /// Attempts of one request through transient faults (throttling, 5xx, timeouts).
    pub max_attempts: u32,
    /// FailClosed, FailOpen: `ttlAttribute` and `ttlSeconds`, when the items self-clean.
    pub ttl: Option<TtlSettings>,
    /// The client's counters (`metrics()`), shared by everything made from these settings.
    pub stats: Arc<Stats>,
    /// The store has no `UpdateItem` (a user's `dynamodb` object): acquisitions, heartbeats
    /// and releases send the original library's requests (`dynamodb_lock_core::original`),
    /// and each acquisition speaks to the store itself (no local line, no hand-over).
    pub original_requests: bool,
    /// FailOpen `session`: locks are held through the client's session (`session.rs`).
    pub session: bool,
}

/// The granularity of the runtime's timers: the core declares a lease lost this much before
/// its end (`heartbeat::lapsed_by`).
pub const TIMER_GRAIN: Duration = Duration::from_millis(1);

/// How a FailClosed or FailOpen client marks its items for DynamoDB's TTL.
#[derive(Clone, Debug)]
pub struct TtlSettings {
    /// The Number attribute the table's TTL reads (Unix seconds).
    pub attribute: String,
    /// FailClosed: how long after its last write a held or abandoned item may be deleted.
    /// FailOpen: how long past the end of the lease (held) or the release (released).
    pub seconds: u64,
}

impl Settings {
    /// What the core's heartbeat reads of these settings (a lock without heartbeats: a zero
    /// period).
    pub fn beat_config(&self) -> dynamodb_lock_core::heartbeat::Config {
        use dynamodb_lock_core::{heartbeat, original};
        heartbeat::Config {
            lease: self.lease(),
            period: self.heartbeat_period.unwrap_or_default(),
            danger_margin: self.danger_margin,
            request_timeout: self.request_timeout,
            timer_grain: TIMER_GRAIN,
            writes_out: if self.original_requests {
                original::HEARTBEAT_WRITES_OUT
            } else {
                heartbeat::MOST_WRITES_OUT
            },
        }
    }

    pub fn new(kind: Kind, owner: String) -> Self {
        Settings {
            kind,
            owner,
            retry_count: settings::RETRY_COUNT,
            acquire_period: settings::ACQUIRE_PERIOD,
            lease_duration_ms: settings::LEASE_DURATION_MS,
            heartbeat_period: None,
            trust_local_time: settings::TRUST_LOCAL_TIME,
            reread_period: settings::REREAD_PERIOD,
            later_waiter_reread_period: settings::LATER_WAITER_REREAD_PERIOD,
            request_timeout: settings::REQUEST_TIMEOUT,
            danger_margin: settings::DANGER_MARGIN,
            max_attempts: settings::MAX_ATTEMPTS,
            ttl: None,
            stats: Default::default(),
            original_requests: false,
            session: false,
        }
    }

    /// The TTL attribute written with an acquisition, heartbeat or data update: FailOpen, the
    /// lease plus `ttlSeconds` from now; FailClosed, `ttlSeconds` from now.
    pub fn ttl_held(&self) -> Option<Ttl<'_>> {
        let t = self.ttl.as_ref()?;
        let lease_s = match self.kind {
            Kind::FailOpen => self.lease_duration_ms.div_ceil(1000),
            Kind::FailClosed => 0,
            Kind::Fifo => return None,
        };
        let now_s = unix_now_ms() / 1000;
        Some((&t.attribute, now_s + lease_s + t.seconds))
    }

    /// The TTL attribute written with a FailOpen release: `ttlSeconds` from now.
    pub fn ttl_released(&self) -> Option<Ttl<'_>> {
        let t = self.ttl.as_ref()?;
        Some((&t.attribute, unix_now_ms() / 1000 + t.seconds))
    }

    /// What an absent item's fencing token counts from: 0, or, where TTL may have deleted an
    /// earlier item of the same id, a floor above every token that item can have had.
    pub fn token_floor(&self) -> u64 {
        match self.ttl {
            Some(_) => token_floor(unix_now_ms()),
            None => 0,
        }
    }

    /// The fields a FailOpen acquisition's hand-over or heartbeat writes (an acquisition adds
    /// the holder's data and, where it waited one out, the version it replaces).
    pub fn open_fields(&self) -> OpenFields<'_> {
        OpenFields {
            owner: &self.owner,
            lease_duration_ms: self.lease_duration_ms,
            // The original with `trustLocalTime` counts a FailOpen lease from it; Fifo items
            // are this package's alone.
            lock_acquired_time_unix_ms: (self.kind == Kind::FailOpen).then(unix_now_ms),
            data: None,
            ttl: self.ttl_held(),
            token_floor: self.token_floor(),
            session: None,
        }
    }

    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_duration_ms)
    }

    /// What the core's acquisition and release machines read of these settings.
    pub fn protocol(&self) -> settings::Lock {
        settings::Lock {
            kind: self.kind,
            retry_count: self.retry_count,
            acquire_period: self.acquire_period,
            lease_duration_ms: self.lease_duration_ms,
            trust_local_time: self.trust_local_time,
            heartbeat_period: self.heartbeat_period.unwrap_or_default(),
            reread: self.reread_period,
            later_waiter_reread: self.later_waiter_reread_period,
            request_timeout: self.request_timeout,
            max_attempts: self.max_attempts,
            base_backoff: settings::RETRY_BASE_BACKOFF,
            max_backoff: settings::RETRY_MAX_BACKOFF,
        }
    }

    /// One request's retry policy: the client's attempts (`retryCount`), each given
    /// `requestTimeoutMs`, as the core states it (`settings::Lock::policy`).
    pub fn policy(&self) -> Policy {
        self.protocol().policy(self.max_attempts)
    }

    /// Releases try harder than other requests: a lost release leaves a lock held.
    pub fn release_policy(&self) -> Policy {
        self.protocol()
            .policy(self.max_attempts.max(settings::RELEASE_MAX_ATTEMPTS))
    }

    /// The longest `close()` waits for the client's requests under way: an acquisition's
    /// write with its retries, then the release of what it took (or the undoing of a write of
    /// unknown outcome) with its own, each attempt a request timeout at most.
    pub fn close_wait(&self) -> Duration {
        let attempts = self.max_attempts.max(1) + self.release_policy().max_attempts;
        self.request_timeout.saturating_mul(attempts)
    }
}
