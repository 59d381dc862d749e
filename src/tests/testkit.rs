//! Test support: a client over the in-memory store, and a sink that records lock events.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dynamodb_lock_core::settings;

use crate::client::Client;
use crate::error::StoreError;
use crate::heartbeat::LazyHeartbeats;
use crate::item::{KeyValue, LockKey};
use crate::lock::{EventSink, LockEvent};
use crate::settings::Settings;
use crate::store::memory::MemoryStore;
use dynamodb_lock_core::settings::Kind;

#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<(u64, LockEvent)>>);

impl EventSink for Recorder {
    fn emit(&self, lock_id: u64, event: LockEvent) {
        self.0.lock().unwrap().push((lock_id, event));
    }
}

impl Recorder {
    pub fn events(&self) -> Vec<LockEvent> {
        self.0.lock().unwrap().iter().map(|(_, e)| e.clone()).collect()
    }
}

pub fn key(id: &str) -> LockKey {
    LockKey {
        partition: KeyValue::S(id.into()),
        sort: None,
    }
}

pub fn closed_settings(owner: &str) -> Settings {
    let mut s = Settings::new(Kind::FailClosed, owner.into());
    s.protocol.acquire_period = Duration::from_millis(100);
    s.protocol.request_timeout = Duration::from_millis(500);
    s
}

pub fn open_settings(owner: &str, lease_ms: u64, heartbeat_ms: Option<u64>) -> Settings {
    let mut s = Settings::new(Kind::FailOpen, owner.into());
    s.protocol.lease_duration_ms = lease_ms;
    s.protocol.heartbeat_period = heartbeat_ms.map(Duration::from_millis).unwrap_or_default();
    s.protocol.reread = settings::reread(lease_ms);
    s.protocol.later_waiter_reread = settings::later_waiter_reread(lease_ms, s.protocol.reread);
    s.protocol.danger_margin = settings::danger_margin(lease_ms);
    s.protocol.request_timeout = Duration::from_millis(lease_ms / 4);
    s
}

pub fn client(store: &Arc<MemoryStore>, settings: Settings) -> (Arc<Client>, Arc<Recorder>) {
    client_capped(store, settings, 100_000)
}

/// A client with its own heartbeat scheduler, capped at `max_per_second` (0: no cap).
pub fn client_capped(
    store: &Arc<MemoryStore>,
    settings: Settings,
    max_per_second: u32,
) -> (Arc<Client>, Arc<Recorder>) {
    client_with(store, settings, LazyHeartbeats::in_runtime(max_per_second))
}

/// A client with the given heartbeat scheduler.
pub fn client_with(
    store: &Arc<MemoryStore>,
    settings: Settings,
    heartbeats: LazyHeartbeats,
) -> (Arc<Client>, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let c = Client::new(store.clone(), settings, rec.clone(), heartbeats, Default::default());
    (Arc::new(c), rec)
}

/// Acquires `n` FailOpen locks named `k0`, `k1`, ...
pub async fn hold(c: &Arc<Client>, n: usize) -> Vec<Arc<crate::lock::HeldLock>> {
    let mut held = Vec::new();
    for i in 0..n {
        held.push(
            c.acquire(key(&format!("k{i}")), &crate::cancel::Cancel::default())
                .await
                .unwrap(),
        );
    }
    held
}

pub fn throttled() -> StoreError {
    StoreError::Service {
        code: "ProvisionedThroughputExceededException".into(),
        message: "slow down".into(),
        transient: true,
        maybe_applied: false,
    }
}

pub fn lost_response() -> StoreError {
    StoreError::Io {
        code: "NetworkingError".into(),
        message: "connection reset".into(),
        maybe_applied: true,
    }
}

/// Steps paused time 1 ms at a time for `ms` milliseconds; returns the heartbeats written and
/// the wake-ups that wrote them (writes seen in consecutive milliseconds are one wake-up seen
/// late).
pub async fn renews_and_wake_ups(store: &MemoryStore, ms: u32) -> (usize, usize) {
    let start = store.count("renew");
    let (mut last, mut wakes, mut previous_step_wrote) = (start, 0, false);
    for _ in 0..ms {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let n = store.count("renew");
        if n > last && !previous_step_wrote {
            wakes += 1;
        }
        previous_step_wrote = n > last;
        last = n;
    }
    (last - start, wakes)
}

/// Waits, 1 ms at a time (a second at most), until a heartbeat write has started.
pub async fn until_renewing(store: &MemoryStore) {
    for _ in 0..1000 {
        if store.count("renew") > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("no heartbeat started");
}
