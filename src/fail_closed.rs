//! FailClosed: a lock without a lease. Acquisition writes the item if it is absent; release
//! deletes it if it still carries our `guid`. A crashed holder's lock stays held.

use crate::client::{Cancel, Client};
use crate::error::{LockError, StoreError};
use crate::fail_open::Waiting;
use crate::item::{new_guid, Guid, LockData, LockKey, LockRecord};
use crate::store::{attempt, Failed};
use tokio::time::Instant;

/// Reads the item to settle an ambiguous outcome.
pub(crate) async fn read(c: &Client, key: &LockKey) -> Result<Option<LockRecord>, Failed> {
    attempt(c.settings.policy(), || c.store.get(key)).await
}

/// The item after a failed condition: as the backend returned it, or read when it did not
/// say and the answer matters.
pub(crate) async fn current_after(
    c: &Client,
    key: &LockKey,
    current: Option<Option<Box<LockRecord>>>,
) -> Result<Option<LockRecord>, LockError> {
    match current {
        Some(cur) => Ok(cur.map(|r| *r)),
        None => read(c, key).await.map_err(|f| LockError::Store(f.error)),
    }
}

pub async fn acquire(c: &Client, key: &LockKey, data: Option<&LockData>, cancel: &Cancel) -> Result<Guid, LockError> {
    let s = &c.settings;
    let guid = new_guid();
    c.handoff.wait_turn(key, cancel).await?;
    // As the original: `retryCount` more attempts, `acquirePeriodMs` apart. Between them the
    // first waiter in line re-reads the item and tries at once when it is gone.
    let give_up_at = Instant::now() + s.acquire_period.saturating_mul(s.retry_count);
    let mut waiting: Option<Waiting> = None;
    loop {
        cancel.check()?;
        let Failed { error, ambiguous } = match attempt(s.policy(), || {
            c.store.put_if_absent(key, &s.owner, &guid, data, s.ttl_held())
        })
        .await
        {
            Ok(()) => return Ok(guid),
            Err(f) => f,
        };
        let held = match error {
            StoreError::ConditionFailed { current } => {
                // After an attempt that may have landed, the item met by the condition may be
                // our own: then the lock is ours.
                if ambiguous || current.is_some() {
                    let cur = current_after(c, key, current).await?;
                    if cur.as_ref().is_some_and(|r| r.carries(&guid)) {
                        return Ok(guid);
                    }
                    cur
                } else {
                    None
                }
            }
            other => {
                if ambiguous {
                    match read(c, key).await {
                        Ok(Some(r)) if r.carries(&guid) => return Ok(guid),
                        Ok(_) => {}
                        // Unknown whether the write landed: remove it if it did, so that no
                        // lock is left held by nobody.
                        Err(_) => c.undo_later(key, guid),
                    }
                }
                return Err(LockError::Store(other));
            }
        };
        let now = Instant::now();
        if now >= give_up_at {
            return Err(LockError::FailedToAcquireLock {
                original: StoreError::condition_failed(),
            });
        }
        let w = waiting.get_or_insert_with(Waiting::new);
        if let Some(held) = &held {
            w.observe(c, key, held).await;
        }
        let next_attempt = (now + s.acquire_period).min(give_up_at);
        loop {
            let next_read = Instant::now().checked_add(w.interval(s)).unwrap_or(next_attempt);
            cancel.sleep_until(next_attempt.min(next_read)).await?;
            if Instant::now() >= next_attempt {
                break;
            }
            match read(c, key).await {
                Ok(None) => break,
                Ok(Some(r)) => w.observe(c, key, &r).await,
                Err(_) => {}
            }
        }
    }
}

/// Deletes the item if it is ours. Returns whether a waiter marked it recently.
pub async fn release(c: &Client, key: &LockKey, guids: &[Guid]) -> Result<bool, LockError> {
    let refused = || LockError::FailedToReleaseLock {
        original: StoreError::condition_failed(),
    };
    match attempt(c.settings.release_policy(), || c.store.delete_if_guid(key, guids)).await {
        Ok(mark) => Ok(crate::fail_open::marked_recently(&c.settings, mark)),
        // An earlier attempt may have deleted the item. While our item existed nobody could
        // have written another, so an item that is gone or belongs to someone else after such
        // an attempt means that attempt landed: the release happened.
        Err(Failed {
            error: StoreError::ConditionFailed { .. },
            ambiguous: true,
        }) => Ok(false),
        Err(Failed {
            error: StoreError::ConditionFailed { .. },
            ambiguous: false,
        }) => Err(refused()),
        Err(Failed { error, ambiguous }) => {
            if ambiguous {
                if let Ok(cur) = read(c, key).await {
                    if !cur.is_some_and(|r| guids.iter().any(|g| r.carries(g))) {
                        return Ok(false);
                    }
                }
            }
            Err(LockError::Store(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::time::Instant;

    use crate::client::Cancel;
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
        assert_eq!(rec.guid.as_ref().map(|g| g.len()), Some(64));
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
            s.retry_count = 3;
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
            // The first waiter in line re-reads between attempts (every 10 ms); without the
            // item in the refusal it never learns it is first, and only tries.
            let gets = store.count("get");
            if returns_old {
                assert!((20..=31).contains(&gets), "{gets} re-reads in 300 ms");
                assert_eq!(store.count("mark"), 1, "one claim of the first place");
            } else {
                assert_eq!(gets, 0);
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
        assert!(store.record(&key("a")).unwrap().carries(&lock.state.lock().await.guid));
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
        s.max_attempts = 1;
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
        s.retry_count = 10_000;
        s.acquire_period = Duration::from_millis(1);
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
    async fn cancelling_a_waiting_acquisition_aborts_it() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, closed_settings("other"));
        let _held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
        let mut s = closed_settings("me");
        s.retry_count = 1000;
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
