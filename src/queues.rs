//! Fifo's state in one client: its queue entries and the heads it holds or held, per resource,
//! so that a release or an abort in this client wakes its waiters behind at once, without a
//! request; and the names of the table, for error messages.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

use dynamodb_lock_core::settings;
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
        let m = message.to_ascii_lowercase();
        let about_keys = code == "ValidationException"
            && [
                "key element does not match the schema",
                "type mismatch for key",
                "conditions on the keys",
                "missing the key",
                "required keys was not given a value",
            ]
            .iter()
            .any(|k| m.contains(k));
        let message = match about_keys {
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

/// A Fifo client's own state: its TTL attribute, and its queue entries and held heads per
/// resource, so that a release or an abort in this client wakes its waiters behind at once.
pub struct Queues {
    pub ttl_attribute: String,
    pub names: TableNames,
    local: Mutex<HashMap<KeyValue, Local>>,
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

/// A head this client holds or held.
enum Held {
    Holding(Weak<dyn Head>),
    Released,
}

#[derive(Default)]
struct Local {
    /// This client's queue entries, by position.
    entries: BTreeMap<u64, Mine>,
    /// Heads this client holds or held, by token.
    held: BTreeMap<u64, Held>,
    /// Acquisitions of this client waiting in this queue.
    waiting: usize,
    /// Heads (or a semaphore's permits) this client released, so far, while anyone waited.
    releases: u64,
}

/// Released heads remembered per resource while this client has waiters there.
const HELD_KEPT: usize = 64;

impl Queues {
    pub fn new(ttl_attribute: String, names: TableNames) -> Self {
        Queues {
            ttl_attribute,
            names,
            local: Default::default(),
            changed: Notify::new(),
        }
    }

    fn with<R>(&self, r: &KeyValue, f: impl FnOnce(&mut Local) -> R) -> R {
        let mut m = self.local.lock().unwrap_or_else(|p| p.into_inner());
        let local = m.entry(r.clone()).or_default();
        let out = f(local);
        if local.waiting == 0 {
            local.entries.clear();
            // Forget released heads, and held ones whose lock is gone (lost and dropped).
            local
                .held
                .retain(|_, h| matches!(h, Held::Holding(lock) if lock.strong_count() > 0));
            if local.held.is_empty() {
                m.remove(r);
            }
        } else {
            let last_waiting = local
                .entries
                .iter()
                .rev()
                .find(|(_, m)| **m == Mine::Waiting)
                .map(|(p, _)| *p);
            // Only waiters behind an entry look at it.
            local
                .entries
                .retain(|p, m| *m == Mine::Waiting || last_waiting.is_some_and(|w| *p < w));
            while local.held.len() > HELD_KEPT {
                local.held.pop_first();
            }
        }
        out
    }

    fn changed(&self) {
        self.changed.notify_waiters();
    }

    /// Completes on the next change of this client's queue state (a waiter's turn may have
    /// come); created before the state is read, so that no change is missed.
    pub fn changes(&self) -> Notified<'_> {
        self.changed.notified()
    }

    pub fn local_entry(&self, r: &KeyValue, position: u64) -> Option<Mine> {
        let m = self.local.lock().unwrap_or_else(|p| p.into_inner());
        m.get(r).and_then(|l| l.entries.get(&position).copied())
    }

    pub fn join(&self, r: &KeyValue, position: u64) {
        self.with(r, |l| {
            l.waiting += 1;
            l.entries.insert(position, Mine::Waiting);
        });
    }

    /// This acquisition no longer waits at `position`: it is `mine` now, or unknown (`None`:
    /// waiters behind read the store).
    pub fn leave(&self, r: &KeyValue, position: u64, mine: Option<Mine>) {
        self.with(r, |l| {
            l.waiting = l.waiting.saturating_sub(1);
            match mine {
                Some(m) => l.entries.insert(position, m),
                None => l.entries.remove(&position),
            };
        });
        self.changed();
    }

    pub fn hold<H: Head + 'static>(&self, r: &KeyValue, token: u64, lock: &Arc<H>) {
        let lock: Weak<H> = Arc::downgrade(lock);
        let lock: Weak<dyn Head> = lock;
        self.with(r, |l| l.held.insert(token, Held::Holding(lock)));
        self.changed();
    }

    pub fn released(&self, r: &KeyValue, token: u64) {
        self.with(r, |l| {
            if let Some(h) = l.held.get_mut(&token) {
                *h = Held::Released;
            }
            l.releases += 1;
        });
        self.changed();
    }

    /// How many locks this client released on `r` while it had a waiter there.
    pub fn releases(&self, r: &KeyValue) -> u64 {
        let m = self.local.lock().unwrap_or_else(|p| p.into_inner());
        m.get(r).map_or(0, |l| l.releases)
    }

    /// Whether this client holds the head with `token` (`Some(false)`: its release wakes the
    /// waiters) or has just released it (`Some(true)`). `None` also for a lock of this client
    /// that was lost or dropped: only the table knows.
    pub fn holder(&self, r: &KeyValue, token: u64) -> Option<bool> {
        let m = self.local.lock().unwrap_or_else(|p| p.into_inner());
        match m.get(r).and_then(|l| l.held.get(&token))? {
            Held::Released => Some(true),
            Held::Holding(lock) => {
                let lock = lock.upgrade()?;
                (!lock.seen_lost()).then_some(false)
            }
        }
    }

    /// Whether an acquisition of this client waits in `r`'s queue, or a lock of this client
    /// holds its head.
    pub fn busy_here(&self, r: &KeyValue) -> bool {
        let m = self.local.lock().unwrap_or_else(|p| p.into_inner());
        m.get(r).is_some_and(|l| {
            l.waiting > 0
                || l.held
                    .values()
                    .any(|h| matches!(h, Held::Holding(lock) if lock.upgrade().is_some_and(|l| !l.is_stopping())))
        })
    }

    /// Resources this client keeps state for.
    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.local.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
