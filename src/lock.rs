//! A held lock: its key, current `guid`, lease and health, and the events it reports.
//! Operations on one lock are serialized by its state mutex: a release waits for an
//! in-flight heartbeat and then writes with the newest `guid`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{Mutex, Notify};
use tokio::time::Instant;

use crate::client::Client;
use crate::config::Kind;
use crate::error::{LockError, LostReason, StoreError};
use crate::item::{Guid, LockKey};
use crate::{fail_closed, fail_open};

/// What a held lock reports while it is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockEvent {
    /// A heartbeat failed (the original's `"error"` event).
    Error(LockError),
    /// The lease is about to lapse without a successful heartbeat.
    Danger { remaining_ms: u64 },
    /// The lock is no longer ours.
    Lost(LostReason),
}

pub trait EventSink: Send + Sync {
    fn emit(&self, lock_id: u64, event: LockEvent);
}

/// Mutable state of a held lock, behind its mutex.
pub struct LockState {
    pub guid: Guid,
    /// A new `guid` a heartbeat may have written (its outcome is unknown until it answers).
    /// Boxed: it is rarely there, and every held lock carries this state.
    pub pending: Option<Box<Guid>>,
    /// End of the lease on this process's clock (counted from when the last successful write
    /// was sent); `None` for FailClosed.
    pub lease_until: Option<Instant>,
    pub lost: bool,
    pub released: bool,
}

impl LockState {
    /// Every `guid` the item may carry while it is ours.
    pub fn guids(&self) -> Vec<Guid> {
        std::iter::once(self.guid)
            .chain(self.pending.as_deref().copied())
            .collect()
    }
}

pub struct HeldLock {
    pub id: u64,
    pub key: LockKey,
    pub fencing_token: Option<u64>,
    /// Others wanted this lock when it was taken: its release hands it over (`Handoff`).
    pub contended: bool,
    pub client: Arc<Client>,
    /// Set by `release()` before it waits for the state: no heartbeat starts after it.
    pub(crate) stopping: AtomicBool,
    pub(crate) wake: Notify,
    pub(crate) state: Mutex<LockState>,
}

impl std::fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLock")
            .field("id", &self.id)
            .field("key", &self.key)
            .field("fencing_token", &self.fencing_token)
            .finish()
    }
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl HeldLock {
    pub fn new(
        client: Arc<Client>,
        key: LockKey,
        guid: Guid,
        fencing_token: Option<u64>,
        lease_until: Option<Instant>,
    ) -> Self {
        HeldLock {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            key,
            fencing_token,
            contended: false,
            client,
            stopping: AtomicBool::new(false),
            wake: Notify::new(),
            state: Mutex::new(LockState {
                guid,
                pending: None,
                lease_until,
                lost: false,
                released: false,
            }),
        }
    }

    /// Stops this lock's heartbeats without releasing it: its lease lapses.
    pub fn abandon(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub(crate) fn emit(&self, event: LockEvent) {
        self.client.events.emit(self.id, event);
    }

    /// Releases the lock. Heartbeats stop at once; an in-flight heartbeat is awaited so that
    /// the release carries the newest `guid`. A release that failed may be called again.
    pub async fn release(&self) -> Result<(), LockError> {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
        let mut st = match self.state.try_lock() {
            Ok(st) => st,
            // Most likely a heartbeat in flight: have its reply taken as soon as it comes.
            Err(_) => {
                let _hurry = self.client.heartbeats.started().map(|h| h.hurry());
                self.state.lock().await
            }
        };
        let kind = self.client.settings.kind;
        if st.released {
            return match kind {
                // As in the original: releasing a released FailOpen lock is quiet...
                Kind::FailOpen | Kind::Fifo => Ok(()),
                // ...and a FailClosed lock that is gone is not ours to release.
                Kind::FailClosed => Err(LockError::FailedToReleaseLock {
                    original: StoreError::condition_failed(),
                }),
            };
        }
        let result = match kind {
            Kind::FailClosed => fail_closed::release(&self.client, &self.key, &st.guids()).await,
            Kind::FailOpen if st.lost => Ok(()),
            Kind::Fifo => crate::fifo::release(&self.client, &self.key, &st.guids(), self.fencing_token, st.lost).await,
            Kind::FailOpen => fail_open::release(&self.client, &self.key, &st.guids())
                .await
                .map(|waiters| {
                    if waiters || self.contended {
                        self.client.handoff.released(&self.key, &self.client.settings);
                    }
                }),
        };
        if result.is_ok() {
            st.released = true;
            st.pending = None;
        }
        result
    }
}
