//! A release outside a held lock's end (`lock::HeldLock::release` runs the core's
//! `ending::Ending`), and the undoing, in the background, of an acquisition write whose
//! outcome could not be read (the core's `undo::Undo`). Both are the core's machines, run by
//! `drive`.

use std::sync::Arc;

use dynamodb_lock_core::release::{Outcome as Released, Release};
use dynamodb_lock_core::undo::{self, Undo};

use crate::cancel::Cancel;
use crate::drive::{run, Clock, Target};
use crate::error::{LockError, StoreError};
use crate::item::{Guid, LockKey};
use crate::settings::Settings;
use crate::store::Store;

/// Releases a lock whose item may carry any of `guids` and that was never handed to the user
/// (an acquisition that took it and then refused it).
pub async fn release(store: &dyn Store, settings: &Settings, key: &LockKey, guids: &[Guid]) -> Result<(), LockError> {
    let clock = Clock::start();
    let (mut m, step) = Release::start(settings.protocol(), guids.to_vec(), &clock.env(None));
    let to = Target {
        store,
        key,
        settings,
        data: None,
        session: None,
        cancel: None,
        permit: None,
    };
    match run(&mut m, step, clock, &to).await {
        Released::Released { .. } => Ok(()),
        Released::NotOurs => Err(LockError::FailedToReleaseLock {
            original: StoreError::condition_failed(),
        }),
        Released::Failed(error) => Err(LockError::Store(error)),
    }
}

/// The write an undo removes: one of this package's requests, or the original's put (with
/// its fencing token) over a user's `dynamodb` object.
pub enum Undoing {
    Native(Guid),
    Original(Guid, u64),
}

/// Undoes, in the background, an acquisition write whose outcome could not be read, so
/// that no lock is left held by nobody: FailClosed deletes the item, FailOpen marks it
/// released, each only if it carries `guid`. Tries for about a minute, as one of the client's
/// `tasks`: `close()` waits for it (within its bound).
pub fn undo_later(
    tasks: &tokio_util::task::TaskTracker,
    store: &Arc<dyn Store>,
    settings: &Settings,
    closing: &Arc<Cancel>,
    key: &LockKey,
    what: Undoing,
) {
    let store = store.clone();
    let key = key.clone();
    let settings = settings.clone();
    let closing = closing.clone();
    tasks.spawn(async move {
        let clock = Clock::start();
        let (s, env) = (settings.protocol(), clock.env(None));
        let (mut m, step) = match what {
            Undoing::Native(guid) => Undo::start(s, guid, &env),
            Undoing::Original(guid, fencing_token) => Undo::original(s, guid, Some(fencing_token), &env),
        };
        let to = Target {
            store: &*store,
            key: &key,
            settings: &settings,
            data: None,
            session: None,
            // `close()` cuts its pauses short: one last round, then it ends.
            cancel: Some(&closing),
            permit: None,
        };
        // Given up: the lease (or the TTL) frees the item.
        let _: undo::Outcome<StoreError> = run(&mut m, step, clock, &to).await;
    });
}
