//! The undoing, in the background, of an acquisition write whose outcome could not be read,
//! or that could not be given back (the core's `undo::Undo`, run by `drive`).

use dynamodb_lock_core::undo::{self, Undo};

use crate::clock::Clock;
use crate::drive::{run, Target};
use crate::error::StoreError;
use crate::item::{Guid, LockKey};
use crate::lock::Shared;

/// The write an undo removes: one of this package's requests, or the original's put (with
/// its fencing token) over a user's `dynamodb` object.
pub enum Undoing {
    Native(Guid),
    Original(Guid, u64),
}

/// Undoes, in the background, an acquisition write whose outcome could not be read, so
/// that no lock is left held by nobody: FailClosed deletes the item, FailOpen marks it
/// released, each only if it carries `guid`. Tries for about a minute, as one of the client's
/// tasks: `close()` waits for it (within its bound).
pub fn undo_later(c: &Shared, key: &LockKey, what: Undoing) {
    let (store, settings, closing, key) = (c.store.clone(), c.settings.clone(), c.closing.clone(), key.clone());
    c.tasks.spawn(async move {
        let clock = Clock::start();
        let (s, env) = (settings.protocol, clock.env(false));
        let (mut m, step) = match what {
            Undoing::Native(guid) => Undo::start(s, guid, &env),
            Undoing::Original(guid, fencing_token) => Undo::original(s, guid, Some(fencing_token), &env),
        };
        let to = Target {
            // `close()` cuts its pauses short: one last round, then it ends.
            cancel: Some(&closing),
            ..Target::item(&*store, &key, &settings)
        };
        // Given up: the lease (or the TTL) frees the item.
        let _: undo::Outcome<StoreError> = run(&mut m, step, clock, &to).await;
    });
}
