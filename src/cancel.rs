//! Cancellation of one pending acquisition (an `AbortSignal` in JavaScript), and the report
//! that it found the lock held and waits (contention), which travels the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::LockError;

/// Told once, the first time an acquisition finds the lock held.
type OnWait = Box<dyn FnOnce() + Send>;

#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    notify: Notify,
    waited: AtomicBool,
    on_wait: Mutex<Option<OnWait>>,
}

impl Cancel {
    /// `f` is called (once, from the acquisition's task) when the acquisition first finds the
    /// lock held.
    pub fn on_wait(&self, f: impl FnOnce() + Send + 'static) {
        *self.on_wait.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(f));
    }

    /// The acquisition found the lock held: it waits (or gives up) for someone else.
    pub fn waiting(&self) {
        if !self.waited.swap(true, Ordering::SeqCst) {
            let f = self.on_wait.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(f) = f {
                f();
            }
        }
    }

    /// Whether the acquisition found the lock held at some point.
    pub fn waited(&self) -> bool {
        self.waited.load(Ordering::SeqCst)
    }

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
