//! Cancellation of one pending acquisition (an `AbortSignal` in JavaScript).

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::LockError;

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
    /// Returns once the acquisition is cancelled.
    pub async fn cancelled(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.is_cancelled() {
            notified.await;
        }
    }

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
