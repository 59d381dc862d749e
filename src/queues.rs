//! Fifo's settings in one client, with the notification that wakes this client's waiters
//! when its registry of queues (its client machine's, `client::Client::fifo_join` and the
//! rest) changes; and the names of the table, for error messages.

use dynamodb_lock_core::settings;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::error::{shown_key, LockError, StoreError};
use crate::item::{LockKey, LockRecord};

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

/// A Fifo client's TTL attribute and table names, and the notification of every change of
/// its registry, so that a release or an abort in this client wakes its waiters behind at
/// once.
pub struct Queues {
    pub ttl_attribute: String,
    pub names: TableNames,
    /// Notified on every change of the registry. One for the client: a waiter woken for
    /// another resource only looks at its own state again, without a request.
    changed: Notify,
}

impl Default for Queues {
    fn default() -> Self {
        Queues::new(settings::FIFO_TTL_ATTRIBUTE.into(), TableNames::default())
    }
}

pub use dynamodb_lock_core::fifo::Mine;

impl Queues {
    pub fn new(ttl_attribute: String, names: TableNames) -> Self {
        Queues {
            ttl_attribute,
            names,
            changed: Notify::new(),
        }
    }

    /// Completes on the next change of this client's queue state (a waiter's turn may have
    /// come); created before the state is read, so that no change is missed.
    pub fn changes(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// The registry changed: this client's waiters look at their state again.
    pub fn changed(&self) {
        self.changed.notify_waiters();
    }
}
