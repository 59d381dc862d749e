//! The original library's request sequence (`dynamodb_lock_core::original`) for a store
//! without `UpdateItem` (a user's `dynamodb` object): runs its acquisition machine through
//! `drive`, and sends the one request of a release. Heartbeats are the scheduler's
//! (`heartbeat`), which writes the whole item for such a store.

use dynamodb_lock_core::original::{self as machine, Outcome};
use dynamodb_lock_core::request::Reply;
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::drive::{run_keeping_refusal, send, Clock, Target};
use crate::error::{LockError, StoreError};
use crate::item::{new_guid, unix_now_ms, Guid, LockKey};
use crate::settings::Settings;
use crate::store::Store;

/// A lock taken: its `guid`, its fencing token (FailOpen) and when the winning put was sent.
pub struct Taken {
    pub guid: Guid,
    pub fencing_token: Option<u64>,
    pub sent_at: Instant,
}

pub async fn acquire(
    store: &dyn Store,
    settings: &Settings,
    key: &LockKey,
    cancel: &Cancel,
) -> Result<Taken, LockError> {
    let guid = new_guid();
    let clock = Clock::start();
    let (mut m, step) = machine::Acquire::start(settings.protocol(), guid, &clock.env(Some(cancel)));
    let to = Target {
        store,
        key,
        settings,
        data: None,
        cancel: Some(cancel),
    };
    // The refusal that ends an acquisition is the user's own error, kept as `originalError`.
    let mut refusal = None;
    match run_keeping_refusal(&mut m, step, clock, &to, &mut refusal).await {
        Outcome::Taken { fencing_token, sent_at } => Ok(Taken {
            guid,
            fencing_token,
            sent_at: clock.base + sent_at,
        }),
        Outcome::Refused => Err(LockError::FailedToAcquireLock {
            original: refusal.unwrap_or_else(StoreError::condition_failed),
        }),
        Outcome::Failed(error) => Err(LockError::Store(error)),
        Outcome::Aborted => Err(LockError::Aborted),
    }
}

/// Releases a lock held with `guid` (and `fencing_token`): one request, not retried.
pub async fn release(
    store: &dyn Store,
    settings: &Settings,
    key: &LockKey,
    guid: &Guid,
    fencing_token: Option<u64>,
) -> Result<(), LockError> {
    let s = settings.protocol();
    let req = machine::release(&s, guid, fencing_token, unix_now_ms());
    let to = Target {
        store,
        key,
        settings,
        data: None,
        cancel: None,
    };
    match send(&to, &req).await {
        Ok(Reply::Done | Reply::Token(_) | Reply::Item(_) | Reply::WaitingMark(_)) => Ok(()),
        Err(e) if e.is_condition_failed() => match machine::refused_release_fails(&s) {
            true => Err(LockError::FailedToReleaseLock { original: e }),
            false => Ok(()),
        },
        Err(e) => Err(LockError::Store(e)),
    }
}
