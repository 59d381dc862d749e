//! A client's settings as the runtime reads them, with what follows from them now: the fields
//! of a write (`settings::open_fields`) and a request's retry policy. The protocol's own view
//! of them, and every default, are the core's (`dynamodb_lock_core::settings`).

use std::sync::Arc;
use std::time::Duration;

use dynamodb_lock_core::request::Policy;
use dynamodb_lock_core::settings;

use crate::clock::unix_now_ms;
use crate::stats::Stats;
use crate::store::{OpenFields, Ttl};

#[derive(Clone, Debug)]
pub struct Settings {
    /// What the protocol reads: the core's settings (`settings::Lock`), one shape from the
    /// options to every machine.
    pub protocol: settings::Lock,
    pub owner: String,
    /// FailClosed, FailOpen: `ttlAttribute` and `ttlSeconds`, when the items self-clean.
    pub ttl: Option<settings::Expiry>,
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

    pub fn new(kind: settings::Kind, owner: String) -> Self {
        Settings {
            protocol: settings::Lock::new(kind),
            owner,
            ttl: None,
            stats: Default::default(),
            original_requests: false,
            session: false,
        }
    }

    /// The TTL attribute written with a FailOpen release.
    pub fn ttl_released(&self) -> Option<Ttl<'_>> {
        Some(self.ttl.as_ref()?.released(unix_now_ms()))
    }

    /// The fields a FailOpen acquisition's hand-over or heartbeat writes now (an acquisition
    /// adds the holder's data and, where it waited one out, the version it replaces).
    pub fn open_fields(&self) -> OpenFields<'_> {
        settings::open_fields(&self.protocol, &self.owner, self.ttl.as_ref(), unix_now_ms())
    }

    /// One request's retry policy: the client's attempts (`retryCount`), each given
    /// `requestTimeoutMs`, as the core states it (`settings::Lock::policy`).
    pub fn policy(&self) -> Policy {
        self.protocol.policy(self.protocol.max_attempts)
    }
}
