//! The original library's request sequence (`dynamodb_lock_core::original`) for a store
//! without `UpdateItem` (a user's `dynamodb` object): runs its acquisition machine through
//! the client's `work`. Its release is the held lock's (`lock`), and its heartbeats the scheduler's
//! (`heartbeat`), which writes the whole item for such a store.

use dynamodb_lock_core::original::{self as machine, Outcome};
use dynamodb_lock_core::work::Task;
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::error::{LockError, LostReason, StoreError};
use crate::item::{new_guid, Guid, LockKey};
use crate::lock::Shared;
use crate::work::{Carry, Out};

/// A lock taken: its `guid`, its fencing token (FailOpen) and when the winning put was sent.
pub struct Taken {
    pub guid: Guid,
    pub fencing_token: Option<u64>,
    pub sent_at: Instant,
}

/// Acquires `key` for client `c` with the original's requests; a write given back too late is
/// undone in the client's work, and a refused item is named by the client's table names.
pub async fn acquire(c: &Shared, key: &LockKey, cancel: &Cancel) -> Result<Taken, LockError> {
    let guid = new_guid();
    let s = c.settings.protocol;
    let mut piece = c.work.start(key, Carry::default(), Some(cancel), |env| {
        Task::original(machine::Acquire::start(s, guid, env))
    });
    let Out::Original(outcome) = piece.done().await else {
        unreachable!("an acquisition with the original's requests ends as one")
    };
    match outcome {
        Outcome::Taken { fencing_token, sent_at } => Ok(Taken {
            guid,
            fencing_token,
            sent_at: c.clock.base + sent_at,
        }),
        // Given back by the machine; undone later if that failed.
        Outcome::Expired { .. } => Err(LockError::Lost(LostReason::LeaseExpired)),
        // The refusal that ends an acquisition is the user's own error, kept as `originalError`.
        Outcome::Refused => Err(LockError::FailedToAcquireLock {
            original: piece.refusal.take().unwrap_or_else(StoreError::condition_failed),
        }),
        Outcome::Failed(error) => Err(LockError::Store(error)),
        Outcome::Corrupt(item) => Err(c.fifo.names.corrupt(key, &item)),
        Outcome::Aborted => Err(LockError::Aborted),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::time::Instant;

    use crate::cancel::Cancel;
    use crate::error::{LockError, StoreError};
    use crate::lock::LockEvent;
    use crate::settings::Settings;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::*;

    fn original(mut s: Settings) -> Settings {
        s.original_requests = true;
        s
    }

    #[tokio::test(start_paused = true)]
    async fn fail_open_reads_puts_heartbeats_and_releases_with_whole_item_puts() {
        let store = Arc::new(MemoryStore::new(false));
        let (c, events) = client(&store, original(open_settings("me", 1000, Some(300))));
        let sent_at = Instant::now();
        store.fault("put_item", Fault::Delay(Duration::from_millis(40)));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert_eq!(store.sent(), ["get", "put_item"]);
        assert_eq!(lock.fencing_token, Some(1));
        assert_eq!(
            lock.lease_until(),
            Some(sent_at + Duration::from_millis(1000)),
            "the lease counts from when the put was sent, not from its answer"
        );
        tokio::time::sleep(Duration::from_millis(950)).await;
        let beats = store.count("put_item") - 1;
        assert!(
            (2..=4).contains(&beats),
            "{beats} heartbeats in 950 ms at a 300 ms period"
        );
        assert_eq!(store.count("renew"), 0, "no UpdateItem");
        let guid = store.record(&key("k")).unwrap().guid;
        lock.release().await.unwrap();
        let rec = store.record(&key("k")).unwrap();
        assert!(rec.is_released());
        assert_eq!(rec.guid, guid, "the release writes the newest guid");
        assert_eq!(rec.fencing_token, Some(1));
        assert!(events.events().is_empty(), "{:?}", events.events());
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_fail_open_lock_is_waited_out_then_taken_on_the_version_read() {
        let store = Arc::new(MemoryStore::new(false));
        let (holder, _) = client(&store, original(open_settings("holder", 1000, None)));
        let (waiter, _) = client(&store, original(open_settings("waiter", 1000, None)));
        let held = holder.acquire(key("k"), &Cancel::default()).await.unwrap();
        let start = Instant::now();
        let lock = waiter.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(1000), "the holder's whole lease");
        assert_eq!(lock.fencing_token, Some(2));
        assert_eq!(store.sent(), ["get", "put_item", "get", "put_item"]);
        // The first holder's release is refused, quietly, as in the original.
        held.release().await.unwrap();
        assert_eq!(store.record(&key("k")).unwrap().owner.as_deref(), Some("waiter"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewed_lock_costs_a_retry_and_the_last_refusal_is_the_error() {
        let store = Arc::new(MemoryStore::new(false));
        let (holder, _) = client(&store, original(open_settings("holder", 1000, Some(200))));
        let mut s = original(open_settings("waiter", 1000, None));
        s.protocol.retry_count = 1;
        let (waiter, _) = client(&store, s);
        let _held = holder.acquire(key("k"), &Cancel::default()).await.unwrap();
        let e = waiter.acquire(key("k"), &Cancel::default()).await.unwrap_err();
        assert!(matches!(e, LockError::FailedToAcquireLock { .. }), "{e:?}");
        let gets = store.sent().iter().filter(|o| **o == "get").count();
        assert_eq!(
            gets, 3,
            "the holder's read, and one before each of the waiter's 1 + retryCount puts"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fail_closed_puts_retries_after_the_period_and_deletes() {
        let store = Arc::new(MemoryStore::new(false));
        let (a, _) = client(&store, original(closed_settings("a")));
        let (b, _) = client(&store, original(closed_settings("b")));
        let held = a.acquire(key("k"), &Cancel::default()).await.unwrap();
        let start = Instant::now();
        let e = b.acquire(key("k"), &Cancel::default()).await.unwrap_err();
        assert!(matches!(e, LockError::FailedToAcquireLock { .. }));
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(100),
            "one retry, acquirePeriodMs later"
        );
        assert_eq!(store.sent(), ["put", "put", "put"], "no read, no mark");
        held.release().await.unwrap();
        assert_eq!(store.sent().last(), Some(&"delete"));
        assert!(store.record(&key("k")).is_none());
        // A second release finds the lock gone: not ours.
        let again = b.acquire(key("k"), &Cancel::default()).await.unwrap();
        store.fault("delete", Fault::Fail(StoreError::condition_failed()));
        let e = again.release().await.unwrap_err();
        assert!(matches!(e, LockError::FailedToReleaseLock { .. }), "{e:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_heartbeat_is_retried_while_the_lease_lasts() {
        let store = Arc::new(MemoryStore::new(false));
        let (c, events) = client(&store, original(open_settings("me", 1000, Some(300))));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        store.fault(
            "put_item",
            Fault::Fail(StoreError::Js {
                id: 1,
                code: "Error".into(),
                message: "boom".into(),
                condition_failed: false,
            }),
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            lock.lease_until().is_some_and(|u| u > Instant::now()),
            "renewed by a retry"
        );
        assert!(matches!(events.events().first(), Some(LockEvent::Error(..))));
        assert!(!events.events().iter().any(|e| matches!(e, LockEvent::Lost(_))));
        lock.release().await.unwrap();
    }
}
