//! A configured lock client: its store and settings, acquisition for either kind, and
//! cancellation of a pending acquisition.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::Kind;
use crate::error::{LockError, StoreError};
use crate::fail_open::Handoff;
use crate::heartbeat::LazyHeartbeats;
use crate::item::{Guid, LockKey};
use crate::lock::{EventSink, HeldLock};
use crate::store::{attempt, Failed, RetryPolicy, Store};
use crate::{fail_closed, fail_open};

#[derive(Clone, Debug)]
pub struct Settings {
    pub kind: Kind,
    pub owner: String,
    pub retry_count: u32,
    /// FailClosed: pause between attempts on a held lock.
    pub acquire_period: Duration,
    /// FailOpen: the lease written with every acquisition and heartbeat.
    pub lease_duration_ms: u64,
    pub heartbeat_period: Option<Duration>,
    pub trust_local_time: bool,
    /// FailOpen waiters re-read a held lock at this interval, to act at once on a release.
    pub reread_period: Duration,
    /// Longest wait for one DynamoDB answer.
    pub request_timeout: Duration,
    /// `"danger"` is emitted when this little of the lease is left without a heartbeat.
    pub danger_margin: Duration,
    /// Attempts of one request through transient faults (throttling, 5xx, timeouts).
    pub max_attempts: u32,
}

impl Settings {
    pub fn new(kind: Kind, owner: String) -> Self {
        Settings {
            kind,
            owner,
            retry_count: 1,
            acquire_period: Duration::ZERO,
            lease_duration_ms: 0,
            heartbeat_period: None,
            trust_local_time: false,
            reread_period: Duration::from_millis(1000),
            request_timeout: Duration::from_millis(5000),
            danger_margin: Duration::ZERO,
            max_attempts: 4,
        }
    }

    /// The default re-read interval: a quarter of the lease, between 10 ms and 1 s.
    pub fn default_reread(lease_duration_ms: u64) -> Duration {
        Duration::from_millis((lease_duration_ms / 4).clamp(10, 1000))
    }

    /// The default danger margin: a third of the lease.
    pub fn default_danger_margin(lease_duration_ms: u64) -> Duration {
        Duration::from_millis(lease_duration_ms / 3)
    }

    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_duration_ms)
    }

    pub fn policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.max_attempts, self.request_timeout)
    }

    /// Releases try harder than other requests: a lost release leaves a lock held.
    pub fn release_policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.max_attempts.max(8), self.request_timeout)
    }
}

pub struct Client {
    pub store: Arc<dyn Store>,
    pub settings: Settings,
    pub events: Arc<dyn EventSink>,
    pub heartbeats: LazyHeartbeats,
    pub handoff: Handoff,
    pub fifo: crate::fifo::Queues,
}

impl Client {
    /// Acquires the lock `key`. A cancelled acquisition leaves no lock behind: a write that
    /// landed after cancellation is released before `Aborted` is returned.
    pub async fn acquire(self: &Arc<Self>, key: LockKey, cancel: &Cancel) -> Result<Arc<HeldLock>, LockError> {
        let lock = match self.settings.kind {
            Kind::FailClosed => {
                let guid = fail_closed::acquire(self, &key, cancel).await?;
                HeldLock::new(self.clone(), key, guid, None, None)
            }
            Kind::Fifo => {
                let locks = crate::fifo::acquire(self, vec![key.partition], Some(crate::fifo::DEFAULT_WAIT), cancel);
                return locks
                    .await?
                    .pop()
                    .ok_or_else(|| LockError::Internal("no lock granted".into()));
            }
            Kind::FailOpen => {
                let taken = fail_open::acquire(self, &key, cancel).await?;
                let lease_until = taken.sent_at + self.settings.lease();
                let mut lock = HeldLock::new(
                    self.clone(),
                    key,
                    taken.guid,
                    Some(taken.fencing_token),
                    Some(lease_until),
                );
                lock.contended = taken.contended;
                lock
            }
        };
        let lock = Arc::new(lock);
        if cancel.is_cancelled() {
            // Best effort: the release retries through transient faults on its own.
            let _ = lock.release().await;
            return Err(LockError::Aborted);
        }
        match (self.settings.kind, self.settings.heartbeat_period) {
            (Kind::FailOpen, Some(period)) => self.heartbeats.get().schedule_first(&lock, period),
            (Kind::FailOpen, None) => {
                let lease_until = lock.state.lock().await.lease_until;
                if let Some(at) = lease_until {
                    self.heartbeats.get().schedule_lapse(&lock, at);
                }
            }
            (Kind::FailClosed | Kind::Fifo, _) => {}
        }
        Ok(lock)
    }
}

impl Client {
    /// Undoes, in the background, an acquisition write whose outcome could not be read, so
    /// that no lock is left held by nobody: FailClosed deletes the item, FailOpen marks it
    /// released, each only if it carries `guid`. Tries for about a minute.
    pub(crate) fn undo_later(&self, key: &LockKey, guid: Guid) {
        let store = self.store.clone();
        let key = key.clone();
        let policy = self.settings.release_policy();
        let kind = self.settings.kind;
        tokio::spawn(async move {
            let guids = [guid];
            for _ in 0..12 {
                let result = match kind {
                    Kind::FailClosed => attempt(policy, || store.delete_if_guid(&key, &guids)).await,
                    Kind::FailOpen | Kind::Fifo => {
                        attempt(policy, || store.release(&key, &guids, None)).await.map(|_| ())
                    }
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
}

/// Cancellation of one pending acquisition (an `AbortSignal` in JavaScript).
#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    notify: Notify,
}

impl Cancel {
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    pub fn check(&self) -> Result<(), LockError> {
        if self.is_cancelled() {
            Err(LockError::Aborted)
        } else {
            Ok(())
        }
    }

    /// Sleeps until `deadline`, or returns `Aborted` as soon as the acquisition is cancelled.
    pub async fn sleep_until(&self, deadline: Instant) -> Result<(), LockError> {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        self.check()?;
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => Ok(()),
            _ = notified => Err(LockError::Aborted),
        }
    }
}
