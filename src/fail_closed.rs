//! FailClosed: a lock without a lease. Acquisition writes the item if it is absent; release
//! (in `release`) deletes it if it still carries our `guid`. A crashed holder's lock stays
//! held. This module runs the core's acquisition machine.

use dynamodb_lock_core::fail_closed::{self as machine, Outcome};
use dynamodb_lock_core::work::Task;

use crate::cancel::Cancel;
use crate::error::{LockError, StoreError};
use crate::item::{new_guid, Guid, LockData, LockKey};
use crate::lock::Shared;
use crate::work::{Carry, Out};

/// Acquires `key` for client `c`, writing `data` with the lock; a write whose outcome could
/// not be read is undone in the client's work.
pub async fn acquire(c: &Shared, key: &LockKey, data: Option<&LockData>, cancel: &Cancel) -> Result<Guid, LockError> {
    let guid = new_guid();
    let stand_back = c.lines.stand_back(key).map(|t| c.clock.time(t));
    let carry = Carry {
        data: data.cloned(),
        ..Carry::default()
    };
    let s = c.settings.protocol;
    let mut piece = c.work.start(key, carry, Some(cancel), |env| {
        Task::closed(machine::Acquire::start(s, guid, stand_back, env))
    });
    let Out::Closed(outcome) = piece.done().await else {
        unreachable!("a FailClosed acquisition ends as one")
    };
    match outcome {
        Outcome::Acquired => Ok(guid),
        Outcome::Held(held) => Err(LockError::FailedToAcquireLock {
            original: StoreError::ConditionFailed {
                current: held.map(|h| Some(Box::new(h))),
            },
        }),
        Outcome::Failed { error, .. } => Err(LockError::Store(error)),
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
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::*;

    #[tokio::test(start_paused = true)]
    async fn acquires_with_one_write_and_releases_with_one_delete() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("me"));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let rec = store.record(&key("a")).unwrap();
        assert_eq!(rec.owner.as_deref(), Some("me"));
        assert!(matches!(&rec.guid, Some(crate::item::GuidValue::B(g)) if g.len() == 64));
        assert_eq!(store.count("put"), 1);
        lock.release().await.unwrap();
        assert!(store.record(&key("a")).is_none());
        assert_eq!(store.count("delete"), 1);
        assert_eq!(lock.fencing_token, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_lock_is_retried_retry_count_times_then_refused() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let mut s = closed_settings("me");
            s.protocol.retry_count = 3;
            let (holder, _) = client(&store, closed_settings("other"));
            let _held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
            let (c, _) = client(&store, s);
            let start = Instant::now();
            let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
            assert_eq!(err.code(), "FailedToAcquireLock");
            assert_eq!(
                err.original().map(|o| o.code()),
                Some("ConditionalCheckFailedException")
            );
            assert_eq!(store.count("put"), 1 + 4, "one for the holder, four attempts");
            // The first waiter in line re-reads between attempts, from every 10 ms slowing to
            // half of `acquirePeriodMs` (at 10, 25, 47, 80, 150 and 250 ms); without the item in
            // the refusal it never learns it is first, and only tries.
            let gets = store.count("get");
            if returns_old {
                assert!((5..=7).contains(&gets), "{gets} re-reads in 300 ms");
                assert_eq!(store.count("mark"), 1, "one claim of the first place");
            } else {
                assert_eq!(gets, 1, "one read, to name the holder in the error");
            }
            assert_eq!(
                start.elapsed(),
                Duration::from_millis(300),
                "three pauses of acquirePeriodMs"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_freed_between_attempts_is_acquired() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, closed_settings("other"));
        let held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
        let (c, _) = client(&store, closed_settings("me"));
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.acquire(key("a"), &Cancel::default()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        held.release().await.unwrap();
        let lock = waiter.await.unwrap().unwrap();
        assert!(store.record(&key("a")).unwrap().carries(&lock.state().guid));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_landed_unseen_is_a_lock_held_not_an_orphan() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            store.fault("put", Fault::ApplyThenFail(lost_response()));
            let (c, _) = client(&store, closed_settings("me"));
            let lock = c
                .acquire(key("a"), &Cancel::default())
                .await
                .expect("the write landed: the lock is ours");
            assert_eq!(store.count("put"), 2, "the retry met our own write");
            assert_eq!(store.count("get"), if returns_old { 0 } else { 1 });
            lock.release().await.unwrap();
            assert!(store.record(&key("a")).is_none());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_whose_outcome_cannot_be_read_is_cleaned_up() {
        let store = Arc::new(MemoryStore::new(false));
        let mut s = closed_settings("me");
        s.protocol.max_attempts = 1;
        store.fault("put", Fault::ApplyThenFail(lost_response()));
        store.fault("get", Fault::Fail(lost_response()));
        let (c, _) = client(&store, s);
        let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
        assert_eq!(err.code(), "NetworkingError");
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(store.record(&key("a")).is_none(), "the orphaned item was deleted");
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_that_landed_unseen_is_a_release() {
        let store = Arc::new(MemoryStore::new(false));
        let (c, _) = client(&store, closed_settings("me"));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.fault("delete", Fault::ApplyThenFail(lost_response()));
        lock.release().await.expect("the delete landed");
        assert!(store.record(&key("a")).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_landed_delete_stays_a_release_when_another_client_takes_the_lock_before_the_retry() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("me"));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let mut s = closed_settings("other");
        s.protocol.retry_count = 10_000;
        s.protocol.acquire_period = Duration::from_millis(1);
        let (other, _) = client(&store, s);
        let taker = tokio::spawn(async move { other.acquire(key("a"), &Cancel::default()).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(5)).await;
        store.fault("delete", Fault::ApplyThenFail(lost_response()));
        lock.release().await.expect("our delete landed: released");
        assert!(store.count("delete") >= 2, "the retry met the other client's item");
        taker.await.unwrap().unwrap();
        assert_eq!(store.record(&key("a")).unwrap().owner.as_deref(), Some("other"));
    }

    #[tokio::test(start_paused = true)]
    async fn releasing_a_lock_that_is_not_ours_is_refused() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("me"));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.items.lock().unwrap().clear();
        let (other, _) = client(&store, closed_settings("other"));
        let _theirs = other.acquire(key("a"), &Cancel::default()).await.unwrap();
        let err = lock.release().await.unwrap_err();
        assert_eq!(err.code(), "FailedToReleaseLock");
        assert_eq!(store.record(&key("a")).unwrap().owner.as_deref(), Some("other"));
    }

    #[tokio::test(start_paused = true)]
    async fn releasing_twice_is_refused_without_a_request() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("me"));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        lock.release().await.unwrap();
        assert_eq!(lock.release().await.unwrap_err().code(), "FailedToReleaseLock");
        assert_eq!(store.count("delete"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_keep_their_aws_name() {
        let store = Arc::new(MemoryStore::new(true));
        store.fault(
            "put",
            Fault::Fail(StoreError::Service {
                code: "ResourceNotFoundException".into(),
                message: "Requested resource not found".into(),
                transient: false,
                maybe_applied: false,
            }),
        );
        let (c, _) = client(&store, closed_settings("me"));
        let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
        assert_eq!(err.code(), "ResourceNotFoundException");
        assert_eq!(err.message(), "Requested resource not found");
        assert_eq!(store.count("put"), 1, "not a transient error: not retried");
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_is_retried_transparently() {
        let store = Arc::new(MemoryStore::new(true));
        store.fault("put", Fault::Fail(throttled()));
        store.fault("put", Fault::Fail(throttled()));
        let (c, _) = client(&store, closed_settings("me"));
        c.acquire(key("a"), &Cancel::default()).await.unwrap();
        assert_eq!(store.count("put"), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_endpoint_fails_an_acquisition_within_max_attempts_request_timeouts() {
        for kind in ["closed", "open"] {
            let store = Arc::new(MemoryStore::new(false));
            for op in ["put", "take", "get", "delete", "mark"] {
                for _ in 0..20 {
                    store.fault(op, Fault::Hang);
                }
            }
            let s = match kind {
                "closed" => closed_settings("me"),
                _ => open_settings("me", 1000, None),
            };
            let budget = s.protocol.request_timeout * s.protocol.max_attempts;
            let (c, _) = client(&store, s);
            let start = Instant::now();
            let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
            assert_eq!(err.code(), "TimeoutError", "{kind}");
            assert!(
                start.elapsed() <= budget,
                "{kind}: {:?} for a budget of {budget:?}",
                start.elapsed()
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_a_waiting_acquisition_aborts_it() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, closed_settings("other"));
        let _held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
        let mut s = closed_settings("me");
        s.protocol.retry_count = 1000;
        let (c, _) = client(&store, s);
        let cancel = Arc::new(Cancel::default());
        let task = tokio::spawn({
            let (c, cancel) = (c.clone(), cancel.clone());
            async move { c.acquire(key("a"), &cancel).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(250)).await;
        cancel.cancel();
        assert_eq!(task.await.unwrap().unwrap_err(), LockError::Aborted);
        assert_eq!(store.record(&key("a")).unwrap().owner.as_deref(), Some("other"));
    }
}
