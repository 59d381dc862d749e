//! Releases: the write that frees a FailClosed or FailOpen lock (the core's release machine,
//! run by `drive`) or a Fifo head, and the undoing, in the background, of an acquisition write whose outcome
//! could not be read.

use std::sync::Arc;
use std::time::Duration;

use dynamodb_lock_core::release::{Outcome as Released, Release};

use crate::config::Kind;
use crate::drive::{run, Clock, Target};
use crate::error::{LockError, StoreError};
use crate::item::{Guid, LockKey};
use crate::queues::Queues;
use crate::settings::Settings;
use crate::store::{attempt, Failed, Store, StoreOps};

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

/// Release of a held head: `leaseDurationMs` becomes 1 (the item and its token stay), and this
/// client's waiter next in line is woken. A lock that is no longer ours releases quietly.
pub async fn release_head(
    store: &dyn Store,
    settings: &Settings,
    queues: &Queues,
    key: &LockKey,
    guids: &[Guid],
    token: Option<u64>,
    lost: bool,
) -> Result<(), LockError> {
    let result = if lost {
        Ok(())
    } else {
        let budget = settings.budget_of(settings.release_policy());
        match attempt(budget.writes, || store.release(key, guids, None, None)).await {
            Ok(_)
            | Err(Failed {
                error: StoreError::ConditionFailed { .. },
                ..
            }) => Ok(()),
            Err(Failed { error, ambiguous }) => {
                let mut outcome = Err(LockError::Store(error));
                if ambiguous {
                    if let Ok(cur) = attempt(budget.settle, || store.get(key)).await {
                        let still_held = cur.is_some_and(|r| !r.is_released() && guids.iter().any(|g| r.carries(g)));
                        if !still_held {
                            outcome = Ok(());
                        }
                    }
                }
                outcome
            }
        }
    };
    if result.is_ok() {
        if let Some(token) = token {
            queues.released(&key.partition, token);
        }
    }
    result
}

/// Undoes, in the background, an acquisition write whose outcome could not be read, so
/// that no lock is left held by nobody: FailClosed deletes the item, FailOpen marks it
/// released, each only if it carries `guid`. Tries for about a minute, as one of the client's
/// `tasks`: `close()` waits for it (within its bound).
pub fn undo_later(
    tasks: &tokio_util::task::TaskTracker,
    store: &Arc<dyn Store>,
    settings: &Settings,
    key: &LockKey,
    guid: Guid,
) {
    let store = store.clone();
    let key = key.clone();
    let policy = settings.release_policy();
    let kind = settings.kind;
    tasks.spawn(async move {
        let guids = [guid];
        for _ in 0..UNDO_TRIES {
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
                Err(_) => tokio::time::sleep(UNDO_PAUSE).await,
            }
        }
    });
}

/// Rounds of retries of an undo, and the pause between them.
const UNDO_TRIES: u32 = 12;
const UNDO_PAUSE: Duration = Duration::from_secs(5);
