//! Releases: the write that frees a FailClosed or FailOpen lock (the core's release machine,
//! run by `drive`), and the undoing, in the background, of an acquisition write whose outcome
//! could not be read.

use std::sync::Arc;
use std::time::Duration;

use dynamodb_lock_core::release::{Outcome as Released, Release};

use crate::config::Kind;
use crate::drive::{run, Clock, Target};
use crate::error::{LockError, StoreError};
use crate::item::{Guid, LockKey};
use crate::settings::Settings;
use crate::store::{attempt, Failed, Store};

/// Releases a FailClosed or FailOpen lock whose item may carry any of `guids`. Returns
/// whether a waiter marked it recently.
pub async fn release(store: &dyn Store, settings: &Settings, key: &LockKey, guids: &[Guid]) -> Result<bool, LockError> {
    let clock = Clock::start();
    let (mut m, step) = Release::start(settings.protocol(), guids.to_vec(), &clock.env(None));
    let to = Target {
        store,
        key,
        settings,
        data: None,
        cancel: None,
    };
    match run(&mut m, step, clock, &to).await {
        Released::Released { waiter } => Ok(waiter),
        Released::NotOurs => Err(LockError::FailedToReleaseLock {
            original: StoreError::condition_failed(),
        }),
        Released::Failed(error) => Err(LockError::Store(error)),
    }
}

/// Undoes, in the background, an acquisition write whose outcome could not be read, so
/// that no lock is left held by nobody: FailClosed deletes the item, FailOpen marks it
/// released, each only if it carries `guid`. Tries for about a minute.
pub fn undo_later(store: &Arc<dyn Store>, settings: &Settings, key: &LockKey, guid: Guid) {
    let store = store.clone();
    let key = key.clone();
    let policy = settings.release_policy();
    let kind = settings.kind;
    tokio::spawn(async move {
        let guids = [guid];
        for _ in 0..12 {
            let result = match kind {
                Kind::FailClosed => attempt(policy, || store.delete_if_guid(&key, &guids)).await.map(|_| ()),
                Kind::FailOpen | Kind::Fifo => attempt(policy, || store.release(&key, &guids, None, None))
                    .await
                    .map(|_| ()),
            };
            match result {
                Ok(())
                | Err(Failed {
                    error: StoreError::ConditionFailed { .. },
                    ..
                }) => return,
                Err(_) => tokio::time::sleep(Duration::from_secs(5)).await,
            }
        }
    });
}
