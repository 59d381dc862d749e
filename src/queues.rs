//! Fifo's state in one client: the core's registry of its queue entries and the heads it
//! holds or held, per resource (`local::Queues`), behind a lock, with the notification that
//! wakes this client's waiters when it changes; and the names of the table, for error
//! messages.

use std::sync::{Arc, Mutex, Weak};

use dynamodb_lock_core::request::Time;
use dynamodb_lock_core::{local, settings};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::error::{shown_key, LockError, StoreError};
use crate::item::{KeyValue, LockKey, LockRecord};

/// A held head as the registry sees it (a held lock).
pub trait Head: Send + Sync {
    /// Lost, as far as can be told without waiting: a heartbeat in flight holds the lock's
    /// state, and a lock with a heartbeat in flight is live.
    fn seen_lost(&self) -> bool;
    /// Its release has begun, or it was abandoned.
    fn is_stopping(&self) -> bool;
}

/// The table a client works on, for error messages.
#[derive(Clone, Debug, Default)]
pub struct TableNames {
    pub table: String,
    pub partition_key: String,
    /// Empty: none.
    pub sort_key: String,
}

impl TableNames {
    /// The refusal of a lock item the protocol cannot act on (`LockRecord::refusal`), naming
    /// this table, the lock's key and the attribute; `None` for an item that is fine.
    pub fn refusal(&self, key: &LockKey, record: &LockRecord) -> Option<LockError> {
        self.refused(key, record.refusal()?)
    }

    /// The refusal of an item the core refused, which its record refuses too.
    pub fn corrupt(&self, key: &LockKey, record: &LockRecord) -> LockError {
        self.refusal(key, record)
            .unwrap_or_else(|| LockError::Internal("an item refused by the core was accepted by its record".into()))
    }

    /// The refusal of a Fifo head (`LockRecord::ticket_refusal`: what `refusal` refuses, its
    /// counters, or no ticket left to issue), as `refusal` names it.
    pub fn head_refusal(&self, key: &LockKey, record: &LockRecord) -> Option<LockError> {
        self.refused(key, record.ticket_refusal()?)
    }

    fn refused(&self, key: &LockKey, m: dynamodb_lock_core::item::Malformed) -> Option<LockError> {
        let sort_key = (!self.sort_key.is_empty()).then_some(self.sort_key.as_str());
        Some(LockError::CorruptLockItem {
            table: self.table.clone(),
            id: shown_key(&self.partition_key, sort_key, key),
            attribute: m.attribute,
            found: m.found,
        })
    }

    /// A readable message for DynamoDB's refusal of a request's key (a key attribute named or
    /// typed otherwise than the table's): names the table and what `what` needs of its key
    /// (`needs`), and keeps DynamoDB's words at the end. Other errors are returned as they are.
    pub fn explain_keys(&self, e: LockError, what: &str, needs: impl FnOnce(&TableNames) -> String) -> LockError {
        let LockError::Store(StoreError::Service {
            code,
            message,
            transient,
            maybe_applied,
        }) = e
        else {
            return e;
        };
        let message = match refuses_keys(&code, &message) {
            true => format!(
                "The lock table \"{}\" does not fit {what}: {}. DynamoDB said: {message}",
                self.table,
                needs(self)
            ),
            false => message,
        };
        LockError::Store(StoreError::Service {
            code,
            message,
            transient,
            maybe_applied,
        })
    }
}

/// DynamoDB's refusal of a request's key: a key attribute named or typed otherwise than the
/// table's.
pub fn refuses_keys(code: &str, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == "ValidationException"
        && [
            "key element does not match the schema",
            "type mismatch for key",
            "conditions on the keys",
            "missing the key",
            "required keys was not given a value",
        ]
        .iter()
        .any(|k| m.contains(k))
}

/// A Fifo client's own state: its TTL attribute, and its registry of queue entries and held
/// heads per resource (the core's `local::Queues`), so that a release or an abort in this
/// client wakes its waiters behind at once.
pub struct Queues {
    pub ttl_attribute: String,
    pub names: TableNames,
    local: Mutex<local::Queues<KeyValue, HeadRef>>,
    /// Notified on every change of `local`. One for the client: a waiter woken for another
    /// resource only looks at its own state again, without a request.
    changed: Notify,
}

impl Default for Queues {
    fn default() -> Self {
        Queues::new(settings::FIFO_TTL_ATTRIBUTE.into(), TableNames::default())
    }
}

pub use dynamodb_lock_core::fifo::Mine;

/// The registry's time: a held lock here tells its own state (`HeadRef`), whatever the time,
/// so the registry needs no clock.
pub const NOW: Time = Time::ZERO;

/// A held head as the registry keeps it: the lock, while it is there.
pub struct HeadRef(Weak<dyn Head>);

impl local::Head for HeadRef {
    fn lost(&self, _now: Time) -> Option<bool> {
        self.0.upgrade().map(|l| l.seen_lost())
    }

    fn stopping(&self) -> bool {
        self.0.upgrade().is_some_and(|l| l.is_stopping())
    }
}

impl Queues {
    pub fn new(ttl_attribute: String, names: TableNames) -> Self {
        Queues {
            ttl_attribute,
            names,
            local: Default::default(),
            changed: Notify::new(),
        }
    }

    /// The registry, for what asks it and changes nothing (joining a queue does not let
    /// anyone go sooner).
    pub fn local(&self) -> std::sync::MutexGuard<'_, local::Queues<KeyValue, HeadRef>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Completes on the next change of this client's queue state (a waiter's turn may have
    /// come); created before the state is read, so that no change is missed.
    pub fn changes(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// This acquisition no longer waits at `position`: it is `mine` now, or unknown (`None`:
    /// waiters behind read the store).
    pub fn leave(&self, r: &KeyValue, position: u64, mine: Option<Mine>) {
        self.local().leave(r, position, mine, NOW);
        self.changed.notify_waiters();
    }

    pub fn hold<H: Head + 'static>(&self, r: &KeyValue, token: u64, lock: &Arc<H>) {
        let lock: Weak<H> = Arc::downgrade(lock);
        self.local().hold(r, token, HeadRef(lock), NOW);
        self.changed.notify_waiters();
    }

    pub fn released(&self, r: &KeyValue, token: u64) {
        self.local().released(r, token, NOW);
        self.changed.notify_waiters();
    }

    /// Resources this client keeps state for.
    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.local().tracked()
    }
}
