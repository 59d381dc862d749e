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
    /// What the protocol reads: the core's settings (`settings::Lock`), one shape from the
    /// options to every machine.
    pub protocol: settings::Lock,
    pub owner: String,
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
        let writes_out = match self.original_requests {
            true => original::HEARTBEAT_WRITES_OUT,
            false => heartbeat::MOST_WRITES_OUT,
        };
        heartbeat::Config::of(&self.protocol, TIMER_GRAIN, writes_out)
    }

    pub fn new(kind: Kind, owner: String) -> Self {
        Settings {
            protocol: settings::Lock::new(kind),
            owner,
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
        let lease_s = match self.protocol.kind {
            Kind::FailOpen => self.protocol.lease_duration_ms.div_ceil(1000),
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
            lease_duration_ms: self.protocol.lease_duration_ms,
            // The original with `trustLocalTime` counts a FailOpen lease from it; Fifo items
            // are this package's alone.
            lock_acquired_time_unix_ms: (self.protocol.kind == Kind::FailOpen).then(unix_now_ms),
            data: None,
            ttl: self.ttl_held(),
            token_floor: self.token_floor(),
            session: None,
        }
    }

    /// One request's retry policy: the client's attempts (`retryCount`), each given
    /// `requestTimeoutMs`, as the core states it (`settings::Lock::policy`).
    pub fn policy(&self) -> Policy {
        self.protocol.policy(self.protocol.max_attempts)
    }

    /// Releases try harder than other requests: a lost release leaves a lock held.
    pub fn release_policy(&self) -> Policy {
        self.protocol.policy(self.protocol.release_attempts())
    }

    /// The longest `close()` waits for the client's requests under way: an acquisition's
    /// write with its retries, then the release of what it took (or the undoing of a write of
    /// unknown outcome) with its own, each attempt a request timeout at most.
    pub fn close_wait(&self) -> Duration {
        let attempts = self.protocol.max_attempts.max(1) + self.release_policy().max_attempts;
        self.protocol.request_timeout.saturating_mul(attempts)
    }
}
