//! One error type for everything a lock operation can report, and the `code` each carries to
//! JavaScript. Contention (`FailedToAcquireLock`) is kept apart from outages (the AWS error
//! name), because callers retry them differently.

use dynamodb_lock_core::fifo::READ_WRITE_PERMITS;
use dynamodb_lock_core::held;
use std::fmt;

/// A failure reported by a store (DynamoDB or a stand-in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The request's condition did not hold. `current` is the item as the backend returned it
    /// (`Some(None)`: absent), or `None` when the backend did not say.
    ConditionFailed {
        /// Boxed: it is rarely there, and every `Result` of the store carries the variant.
        current: Option<Option<Box<crate::item::LockRecord>>>,
    },
    /// The service answered with an error. `transient` errors may succeed when retried;
    /// `maybe_applied` says the write may have landed all the same (e.g. HTTP 500).
    Service {
        code: String,
        message: String,
        transient: bool,
        maybe_applied: bool,
    },
    /// No answer: timeout, refused or dropped connection, garbled response. The request may
    /// have been applied unless `maybe_applied` is false (e.g. the connection was refused).
    Io {
        code: String,
        message: String,
        maybe_applied: bool,
    },
    /// An error from the user's `dynamodb` object (`store::object`), kept in JavaScript under
    /// `id` so that callers get that very object back. `condition_failed`: its `code` or
    /// `name` is `ConditionalCheckFailedException`. Any other is worth retrying where the
    /// protocol retries (a heartbeat), and never landed as far as we know.
    Js {
        id: u32,
        code: String,
        message: String,
        condition_failed: bool,
    },
}

impl StoreError {
    pub fn condition_failed() -> Self {
        StoreError::ConditionFailed { current: None }
    }

    /// The request's condition did not hold.
    pub fn is_condition_failed(&self) -> bool {
        matches!(
            self,
            StoreError::ConditionFailed { .. }
                | StoreError::Js {
                    condition_failed: true,
                    ..
                }
        )
    }

    /// The id under which JavaScript keeps the user's own error object, for a failure of the
    /// user's `dynamodb` object.
    pub fn js_id(&self) -> Option<u32> {
        match self {
            StoreError::Js { id, .. } => Some(*id),
            _ => None,
        }
    }

    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::ConditionFailed { .. } => false,
            StoreError::Js { condition_failed, .. } => !condition_failed,
            StoreError::Service { transient, .. } => *transient,
            StoreError::Io { .. } => true,
        }
    }

    pub fn maybe_applied(&self) -> bool {
        match self {
            StoreError::ConditionFailed { .. } | StoreError::Js { .. } => false,
            StoreError::Service { maybe_applied, .. } | StoreError::Io { maybe_applied, .. } => *maybe_applied,
        }
    }

    /// The AWS error name (what the JavaScript SDK puts in `code` and `name`).
    pub fn code(&self) -> &str {
        match self {
            StoreError::ConditionFailed { .. } => "ConditionalCheckFailedException",
            StoreError::Service { code, .. } | StoreError::Io { code, .. } | StoreError::Js { code, .. } => code,
        }
    }

    /// The message for people: one sentence, without the chain of causes.
    pub fn message(&self) -> &str {
        self.full_message()
            .split_once(DETAIL)
            .map_or(self.full_message(), |(m, _)| m)
    }

    /// The chain of causes behind the message, when there is one (see `with_detail`).
    pub fn detail(&self) -> Option<&str> {
        self.full_message().split_once(DETAIL).map(|(_, d)| d)
    }

    fn full_message(&self) -> &str {
        match self {
            StoreError::ConditionFailed { .. } => "The conditional request failed",
            StoreError::Service { message, .. } | StoreError::Io { message, .. } | StoreError::Js { message, .. } => {
                message
            }
        }
    }

    /// The `owner` of the item a failed condition met, when the backend returned it.
    pub fn holder(&self) -> Option<&str> {
        match self {
            StoreError::ConditionFailed { current: Some(Some(r)) } => r.owner.as_deref(),
            _ => None,
        }
    }
}

/// Separates a message from the chain of causes carried after it (JavaScript's `cause`).
const DETAIL: &str = "\n\u{1f}";

/// A message with the chain of causes behind it, kept apart for JavaScript's `cause`.
pub fn with_detail(message: &str, detail: &str) -> String {
    format!("{message}{DETAIL}{detail}")
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

/// Why a held lock stopped being ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// The item no longer carries our `guid`: another owner took it, or it was deleted.
    NotOwner,
    /// No heartbeat succeeded before the lease ran out.
    LeaseExpired,
}

impl From<held::Lost> for LostReason {
    fn from(lost: held::Lost) -> Self {
        match lost {
            held::Lost::Lapsed => LostReason::LeaseExpired,
            held::Lost::Taken => LostReason::NotOwner,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockError {
    /// The lock was held by another owner through every retry.
    FailedToAcquireLock { original: StoreError },
    /// The lock is no longer ours to release (FailClosed).
    FailedToReleaseLock { original: StoreError },
    /// Any other error from DynamoDB, under its AWS name.
    Store(StoreError),
    /// The acquisition was cancelled (an `AbortSignal`) before it completed.
    Aborted,
    /// The lock is lost (event payload).
    Lost(LostReason),
    /// A fault inside this library, e.g. a caught panic.
    Internal(String),
    /// The lock item holds `attribute` in a form the protocol refuses (`LockRecord::refusal`):
    /// no lock is handed out from it, and `getLock` does not report it as a lock. `id` is the
    /// lock's key as people read it; `found`, what the attribute holds.
    CorruptLockItem {
        table: String,
        id: String,
        attribute: &'static str,
        found: String,
    },
    /// A semaphore's head counts another number of permits than this client (`found`), or it
    /// is a Fifo lock's (`found` `None`).
    PermitsMismatch {
        table: String,
        id: String,
        permits: u64,
        found: Option<u64>,
    },
}

/// A lock's key as people read it: `name "value"`, with the sort key after a comma; numbers
/// bare, binary values in hex.
pub fn shown_key(partition_key: &str, sort_key: Option<&str>, key: &crate::item::LockKey) -> String {
    use crate::item::KeyValue;
    let value = |v: &KeyValue| match v {
        KeyValue::S(s) => format!("{s:?}"),
        KeyValue::N(n) => n.clone(),
        KeyValue::B(b) => format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
    };
    let mut shown = format!("{partition_key} {}", value(&key.partition));
    if let (Some(name), Some(v)) = (sort_key, &key.sort) {
        shown.push_str(&format!(", {name} {}", value(v)));
    }
    shown
}

impl LockError {
    /// The lock is held by someone else (`FailedToAcquireLock` without the item).
    pub fn not_acquired() -> Self {
        LockError::FailedToAcquireLock {
            original: StoreError::condition_failed(),
        }
    }

    /// The lock is not this holder's to release (`FailedToReleaseLock`).
    pub fn not_released() -> Self {
        LockError::FailedToReleaseLock {
            original: StoreError::condition_failed(),
        }
    }

    pub fn code(&self) -> &str {
        match self {
            LockError::FailedToAcquireLock { .. } => "FailedToAcquireLock",
            LockError::FailedToReleaseLock { .. } => "FailedToReleaseLock",
            LockError::Store(e) => e.code(),
            LockError::Aborted => "AbortError",
            LockError::Lost(LostReason::NotOwner) => "LockLost",
            LockError::Lost(LostReason::LeaseExpired) => "LeaseExpired",
            LockError::Internal(_) => "InternalError",
            LockError::CorruptLockItem { .. } => "CorruptLockItem",
            LockError::PermitsMismatch { .. } => "PermitsMismatch",
        }
    }

    pub fn message(&self) -> String {
        match self {
            LockError::FailedToAcquireLock { .. } => "Failed to acquire lock.".into(),
            LockError::FailedToReleaseLock { .. } => "Failed to release lock.".into(),
            LockError::Store(e) => e.message().into(),
            LockError::Aborted => "The lock acquisition was aborted.".into(),
            LockError::Lost(LostReason::NotOwner) => {
                "The lock item no longer carries this holder's guid: another owner has it or it was deleted.".into()
            }
            LockError::Lost(LostReason::LeaseExpired) => {
                "No heartbeat succeeded before the lease ran out: the lock may be taken by another owner.".into()
            }
            LockError::Internal(m) => format!("Internal error in dynamodb-lock-native: {m}"),
            LockError::CorruptLockItem {
                table,
                id,
                attribute,
                found,
            } => format!(
                "The lock item {id} in the table \"{table}\" is refused: its {attribute} holds {found}, which \
                 neither library writes. No lock is handed out from it until the attribute is corrected or the \
                 item deleted."
            ),
            LockError::PermitsMismatch {
                table,
                id,
                permits,
                found,
            } => {
                // What a head counts, or a client takes: 0 for a Fifo lock.
                let item = |n: u64| match n {
                    0 => "a Fifo lock's".to_string(),
                    READ_WRITE_PERMITS => "a ReadWriteLock's".to_string(),
                    n => format!("a Semaphore's of {n} permits"),
                };
                let client = |n: u64| match n {
                    0 => "a Fifo client".to_string(),
                    READ_WRITE_PERMITS => "a ReadWriteLock".to_string(),
                    n => format!("a Semaphore of {n} permits"),
                };
                let (found, permits) = (found.unwrap_or(0), *permits);
                let both_semaphores = ![found, permits].iter().any(|n| *n == 0 || *n == READ_WRITE_PERMITS);
                match both_semaphores {
                    true => format!(
                        "The semaphore {id} in the table \"{table}\" counts {found} permits, and this client {permits}: \
                         every client of one id must be constructed with the same permits. Delete its item once \
                         nobody holds or waits for it to count another number."
                    ),
                    false => format!(
                        "The item {id} in the table \"{table}\" is {}, and this client {}: one id serves one kind of \
                         lock.",
                        item(found),
                        client(permits)
                    ),
                }
            }
        }
    }

    /// The chain of causes behind the message, if any.
    pub fn detail(&self) -> Option<&str> {
        match self {
            LockError::Store(e) => e.detail(),
            _ => None,
        }
    }

    /// The attribute a refused lock item holds in a form the protocol refuses.
    pub fn attribute(&self) -> Option<&str> {
        match self {
            LockError::CorruptLockItem { attribute, .. } => Some(attribute),
            _ => None,
        }
    }

    /// The `owner` of the item that kept the lock from being acquired or released, if known.
    pub fn holder(&self) -> Option<&str> {
        self.original().and_then(StoreError::holder)
    }

    pub fn original(&self) -> Option<&StoreError> {
        match self {
            LockError::FailedToAcquireLock { original } | LockError::FailedToReleaseLock { original } => Some(original),
            _ => None,
        }
    }
}

impl From<StoreError> for LockError {
    fn from(e: StoreError) -> Self {
        LockError::Store(e)
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_contention_apart_from_outages() {
        let cf = StoreError::condition_failed();
        assert_eq!(
            LockError::FailedToAcquireLock { original: cf.clone() }.code(),
            "FailedToAcquireLock"
        );
        assert_eq!(
            LockError::FailedToReleaseLock { original: cf }.code(),
            "FailedToReleaseLock"
        );
        let rnf = StoreError::Service {
            code: "ResourceNotFoundException".into(),
            message: "Requested resource not found".into(),
            transient: false,
            maybe_applied: false,
        };
        assert_eq!(LockError::from(rnf).code(), "ResourceNotFoundException");
        assert_eq!(LockError::Aborted.code(), "AbortError");
    }

    #[test]
    fn a_corrupt_item_is_named_with_its_table_id_and_attribute() {
        let key = crate::item::LockKey {
            partition: crate::item::KeyValue::S("m0".into()),
            sort: Some(crate::item::KeyValue::N("3".into())),
        };
        let e = LockError::CorruptLockItem {
            table: "locks".into(),
            id: shown_key("id", Some("shard"), &key),
            attribute: crate::item::FENCING_TOKEN,
            found: "the number -5".into(),
        };
        assert_eq!(e.code(), "CorruptLockItem");
        assert_eq!(e.attribute(), Some("fencingToken"));
        assert!(
            e.message()
                .starts_with("The lock item id \"m0\", shard 3 in the table \"locks\" is refused: its fencingToken holds the number -5"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn acquire_message_is_the_originals() {
        let e = LockError::FailedToAcquireLock {
            original: StoreError::condition_failed(),
        };
        assert_eq!(e.message(), "Failed to acquire lock.");
        assert_eq!(e.original().map(|o| o.code()), Some("ConditionalCheckFailedException"));
    }
}
