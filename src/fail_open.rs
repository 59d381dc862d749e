//! FailOpen: a lock with a lease. One conditional `UpdateItem` takes a lock that is absent,
//! released, or still carries the version a waiter has waited out; it raises `fencingToken` by
//! one. A waiter waits the holder's lease on its own clock, re-reading at a bounded interval so
//! that a release is acted on at once.

use std::time::Duration;

use tokio::time::Instant;

use crate::client::{Cancel, Client, Settings};
use crate::error::{LockError, StoreError};
use crate::fail_closed::{current_after, read};
use crate::item::{new_guid, unix_now_ms, Guid, LockKey, LockRecord, Version};
use crate::store::{attempt, Failed, OpenFields};

pub struct Taken {
    pub guid: Guid,
    pub fencing_token: u64,
    /// When the winning request was sent: the lease runs from here on this process's clock.
    pub sent_at: Instant,
}

pub fn fields(s: &Settings) -> OpenFields<'_> {
    OpenFields {
        owner: &s.owner,
        lease_duration_ms: s.lease_duration_ms,
        lock_acquired_time_unix_ms: s.trust_local_time.then(unix_now_ms),
    }
}

/// How long a waiter must wait, from the moment it saw `rec`, before it may take the lock.
/// With `trustLocalTime` the holder's `lockAcquiredTimeUnixMs` may shorten the wait, never
/// lengthen it; without it (or without that field) the full lease is waited on our clock.
pub fn wait_for(s: &Settings, rec: &LockRecord, seen_unix_ms: u64) -> Duration {
    let lease = rec.lease_duration_ms.unwrap_or(s.lease_duration_ms);
    let ms = match (s.trust_local_time, rec.lock_acquired_time_unix_ms) {
        (true, Some(acquired)) => lease.saturating_sub(seen_unix_ms.saturating_sub(acquired)),
        _ => lease,
    };
    Duration::from_millis(ms)
}

fn failed_to_acquire() -> LockError {
    LockError::FailedToAcquireLock { original: StoreError::condition_failed() }
}

pub async fn acquire(c: &Client, key: &LockKey, cancel: &Cancel) -> Result<Taken, LockError> {
    let s = &c.settings;
    let guid = new_guid();
    let mut retries_left = s.retry_count;
    let mut waited_out: Option<Version> = None;
    loop {
        cancel.check()?;
        let f = fields(s);
        let sent_at = Instant::now();
        let Failed { error, ambiguous } =
            match attempt(s.policy(), || c.store.take(key, &f, &guid, waited_out.as_ref())).await {
                Ok(fencing_token) => return Ok(Taken { guid, fencing_token, sent_at }),
                Err(failed) => failed,
            };
        let current = match error {
            StoreError::ConditionFailed { current } => current_after(c, key, current).await?,
            other => {
                if ambiguous {
                    match read(c, key).await {
                        Ok(Some(r)) if r.carries(&guid) => {
                            return Ok(Taken { guid, fencing_token: r.fencing_token.unwrap_or(1), sent_at });
                        }
                        Ok(_) => {}
                        Err(_) => release_later(c, key, guid),
                    }
                }
                return Err(LockError::Store(other));
            }
        };
        // An earlier attempt of this request may be what the condition met.
        if let Some(r) = current.as_ref().filter(|r| r.carries(&guid)) {
            return Ok(Taken { guid, fencing_token: r.fencing_token.unwrap_or(1), sent_at });
        }
        let free = current.as_ref().is_none_or(|r| r.is_released());
        // The first write found the lock held: that is the original's "check for existing
        // lock" and costs no retry. A write after waiting, or one that lost a race for a free
        // lock, is a failed acquisition attempt.
        if waited_out.is_some() || free {
            if retries_left == 0 {
                return Err(failed_to_acquire());
            }
            retries_left -= 1;
        }
        match current {
            Some(held) if !free => waited_out = Some(wait_out(c, key, held, &mut retries_left, cancel).await?),
            _ => waited_out = None,
        }
    }
}

/// Waits until `seen` may be taken over, or until the lock is released or deleted. Returns
/// the version the takeover write must still find. A holder that renews meanwhile makes the
/// attempt due at the old deadline fail (costing a retry, as in the original) and restarts
/// the wait from when the new version was seen.
async fn wait_out(
    c: &Client,
    key: &LockKey,
    seen: LockRecord,
    retries_left: &mut u32,
    cancel: &Cancel,
) -> Result<Version, LockError> {
    let s = &c.settings;
    let mut target = seen.version();
    let mut deadline = Instant::now() + wait_for(s, &seen, unix_now_ms());
    let mut newer: Option<(LockRecord, Instant, u64)> = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            match newer.take() {
                None => return Ok(target),
                Some((rec, at, at_unix)) => {
                    if *retries_left == 0 {
                        return Err(failed_to_acquire());
                    }
                    *retries_left -= 1;
                    target = rec.version();
                    deadline = at + wait_for(s, &rec, at_unix);
                    continue;
                }
            }
        }
        cancel.sleep_until(deadline.min(now + s.reread_period)).await?;
        if Instant::now() >= deadline {
            continue;
        }
        // A failed re-read changes nothing: the deadline still decides.
        if let Ok(cur) = read(c, key).await {
            match cur {
                None => return Ok(target),
                Some(r) if r.is_released() => return Ok(target),
                Some(r) => {
                    let v = r.version();
                    let known = newer.as_ref().map(|(l, _, _)| l.version()).unwrap_or_else(|| target.clone());
                    if v != known {
                        newer = Some((r, Instant::now(), unix_now_ms()));
                    }
                }
            }
        }
    }
}

/// Marks a possibly-written lock released in the background, so that a write whose outcome
/// could not be read does not hold the lock for a whole lease.
fn release_later(c: &Client, key: &LockKey, guid: Guid) {
    let store = c.store.clone();
    let key = key.clone();
    let policy = c.settings.release_policy();
    tokio::spawn(async move {
        for _ in 0..12 {
            let guids = [guid];
            match attempt(policy, || store.release(&key, &guids, None)).await {
                Ok(()) | Err(Failed { error: StoreError::ConditionFailed { .. }, .. }) => return,
                Err(_) => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        }
    });
}

/// Release: `leaseDurationMs` becomes 1 and the item stays, so fencing tokens keep rising. A
/// lock that is no longer ours releases quietly, as in the original.
pub async fn release(c: &Client, key: &LockKey, guids: &[Guid]) -> Result<(), LockError> {
    let at = c.settings.trust_local_time.then(unix_now_ms);
    match attempt(c.settings.release_policy(), || c.store.release(key, guids, at)).await {
        Ok(()) | Err(Failed { error: StoreError::ConditionFailed { .. }, .. }) => Ok(()),
        Err(Failed { error, ambiguous }) => {
            if ambiguous {
                if let Ok(cur) = read(c, key).await {
                    let still_held = cur.is_some_and(|r| !r.is_released() && guids.iter().any(|g| r.carries(g)));
                    if !still_held {
                        return Ok(());
                    }
                }
            }
            Err(LockError::Store(error))
        }
    }
}
