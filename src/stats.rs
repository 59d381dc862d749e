//! Counters of one client, kept by the native core where JavaScript cannot see: the requests
//! sent by operation and outcome, and by purpose (the core's `Purpose`), throttled answers,
//! and heartbeat attempts. Relaxed atomic
//! increments only, so counting costs nothing measurable on the heartbeat path; `metrics()` in
//! JavaScript reads a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

use dynamodb_lock_core::request::{Purpose, PURPOSES};

/// The DynamoDB operations the lock protocol sends, in the order of `Stats::requests`.
pub const OPERATIONS: [&str; 4] = ["GetItem", "PutItem", "UpdateItem", "DeleteItem"];

/// How a request ended, in the order of `Stats::requests`' inner arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Ok = 0,
    /// The write's condition did not hold (contention, or a lock no longer ours).
    ConditionFailed = 1,
    /// DynamoDB asked to slow down (throughput, throttling, HTTP 429).
    Throttled = 2,
    /// Any other error: a service error, a dropped connection, or a timeout (a request whose
    /// answer was not awaited).
    Error = 3,
}

pub const OUTCOMES: [&str; 4] = ["ok", "conditionFailed", "throttled", "error"];

#[derive(Debug, Default)]
pub struct Stats {
    requests: [[AtomicU64; 4]; 4],
    /// Requests the lock protocol sent (each attempt), by purpose.
    purposes: [AtomicU64; PURPOSES.len()],
    /// Heartbeat writes started, first attempts and retries alike.
    pub heartbeats_sent: AtomicU64,
    /// Heartbeat writes that retried a failed one.
    pub heartbeats_retried: AtomicU64,
    /// Heartbeat writes that failed (each is an `"error"` event on its lock).
    pub heartbeats_failed: AtomicU64,
}

impl Stats {
    pub fn count_request(&self, operation: &str, outcome: Outcome) {
        if let Some(op) = OPERATIONS.iter().position(|o| *o == operation) {
            self.requests[op][outcome as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn count_purpose(&self, purpose: Purpose) {
        self.purposes[purpose as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests sent for the purpose of index `purpose` (in the order of `PURPOSES`).
    pub fn purpose(&self, purpose: usize) -> u64 {
        self.purposes[purpose].load(Ordering::Relaxed)
    }

    /// Requests of `operation` that ended with `outcome`.
    pub fn requests(&self, operation: usize, outcome: usize) -> u64 {
        self.requests[operation][outcome].load(Ordering::Relaxed)
    }

    pub fn throttles(&self) -> u64 {
        (0..OPERATIONS.len())
            .map(|op| self.requests(op, Outcome::Throttled as usize))
            .sum()
    }

    pub fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_operation_and_outcome() {
        let s = Stats::default();
        s.count_request("UpdateItem", Outcome::Ok);
        s.count_request("UpdateItem", Outcome::Ok);
        s.count_request("GetItem", Outcome::Throttled);
        s.count_request("Scan", Outcome::Ok);
        assert_eq!(s.requests(2, 0), 2);
        assert_eq!(s.requests(0, 2), 1);
        assert_eq!(s.throttles(), 1);
        let total: u64 = (0..4)
            .flat_map(|o| (0..4).map(move |r| (o, r)))
            .map(|(o, r)| s.requests(o, r))
            .sum();
        assert_eq!(total, 3, "an operation the protocol does not send is not counted");
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeat_attempts_retries_and_failures_are_counted() {
        use std::sync::Arc;
        use std::time::Duration;

        use crate::cancel::Cancel;
        use crate::store::memory::{Fault, MemoryStore};
        use crate::testkit::*;

        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, open_settings("me", 1000, Some(200)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.fault("renew", Fault::Fail(throttled()));
        store.fault("renew", Fault::Fail(throttled()));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        lock.release().await.unwrap();
        let s = &c.settings.stats;
        let sent = Stats::get(&s.heartbeats_sent);
        assert_eq!(sent as usize, store.count("renew"), "every heartbeat write is counted");
        assert_eq!(Stats::get(&s.heartbeats_failed), 2);
        assert_eq!(Stats::get(&s.heartbeats_retried), 2, "each failure was retried");
    }
}
