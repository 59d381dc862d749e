//! FailClosed: a lock without a lease. Acquisition writes the item if it is absent; release
//! deletes it if it still carries our `guid`. A crashed holder's lock stays held.

use crate::client::{Cancel, Client};
use crate::error::{LockError, StoreError};
use crate::item::{new_guid, Guid, LockKey, LockRecord};
use crate::store::{attempt, Failed};

/// Reads the item to settle an ambiguous outcome.
pub(crate) async fn read(c: &Client, key: &LockKey) -> Result<Option<LockRecord>, Failed> {
    attempt(c.settings.policy(), || c.store.get(key)).await
}

/// The item after a failed condition: as the backend returned it, or read when it did not
/// say and the answer matters.
pub(crate) async fn current_after(
    c: &Client,
    key: &LockKey,
    current: Option<Option<LockRecord>>,
) -> Result<Option<LockRecord>, LockError> {
    match current {
        Some(cur) => Ok(cur),
        None => read(c, key).await.map_err(|f| LockError::Store(f.error)),
    }
}

pub async fn acquire(c: &Client, key: &LockKey, cancel: &Cancel) -> Result<Guid, LockError> {
    let guid = new_guid();
    let mut retries_left = c.settings.retry_count;
    loop {
        cancel.check()?;
        let Failed { error, ambiguous } =
            match attempt(c.settings.policy(), || c.store.put_if_absent(key, &c.settings.owner, &guid)).await {
                Ok(()) => return Ok(guid),
                Err(f) => f,
            };
        match error {
            StoreError::ConditionFailed { current } => {
                // After an attempt that may have landed, the item met by the condition may be
                // our own: then the lock is ours.
                if ambiguous || current.is_some() {
                    let cur = current_after(c, key, current).await?;
                    if cur.is_some_and(|r| r.carries(&guid)) {
                        return Ok(guid);
                    }
                }
                if retries_left == 0 {
                    return Err(LockError::FailedToAcquireLock { original: StoreError::condition_failed() });
                }
                retries_left -= 1;
                cancel.sleep_until(tokio::time::Instant::now() + c.settings.acquire_period).await?;
            }
            other => {
                if ambiguous {
                    match read(c, key).await {
                        Ok(Some(r)) if r.carries(&guid) => return Ok(guid),
                        Ok(_) => {}
                        // Unknown whether the write landed: remove it if it did, so that no
                        // lock is left held by nobody.
                        Err(_) => clean_up_later(c, key, guid),
                    }
                }
                return Err(LockError::Store(other));
            }
        }
    }
}

/// Deletes a possibly-written item in the background, trying for about a minute.
fn clean_up_later(c: &Client, key: &LockKey, guid: Guid) {
    let store = c.store.clone();
    let key = key.clone();
    let policy = c.settings.release_policy();
    tokio::spawn(async move {
        for _ in 0..12 {
            let guids = [guid];
            match attempt(policy, || store.delete_if_guid(&key, &guids)).await {
                Ok(()) | Err(Failed { error: StoreError::ConditionFailed { .. }, .. }) => return,
                Err(_) => tokio::time::sleep(std::time::Duration::from_secs(5)).await,
            }
        }
    });
}

pub async fn release(c: &Client, key: &LockKey, guids: &[Guid]) -> Result<(), LockError> {
    let refused = || LockError::FailedToReleaseLock { original: StoreError::condition_failed() };
    match attempt(c.settings.release_policy(), || c.store.delete_if_guid(key, guids)).await {
        Ok(()) => Ok(()),
        Err(Failed { error: StoreError::ConditionFailed { current }, ambiguous }) => {
            // An earlier attempt may have deleted the item: then the release happened.
            if ambiguous && current_after(c, key, current).await?.is_none() {
                return Ok(());
            }
            Err(refused())
        }
        Err(Failed { error, ambiguous }) => {
            if ambiguous {
                if let Ok(cur) = read(c, key).await {
                    match cur {
                        None => return Ok(()),
                        Some(r) if !guids.iter().any(|g| r.carries(g)) => return Err(refused()),
                        Some(_) => {}
                    }
                }
            }
            Err(LockError::Store(error))
        }
    }
}
