//! Cancellation of one pending acquisition (an `AbortSignal` in JavaScript), and the report
//! that it found the lock held and waits (contention), which travels the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::LockError;
use crate::item::{LockRecord, Version};

/// What a waiting acquisition last saw of the holder, for people (`waiting` reports).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub owner: Option<String>,
    pub fencing_token: Option<u64>,
    pub lease_duration_ms: Option<u64>,
    pub session: Option<String>,
    /// How long this acquisition has seen the holder's item unchanged (one `guid`).
    pub unchanged: Duration,
}

/// Told when an acquisition first finds the lock held (`progress` false), then about once a
/// report period while it keeps waiting (`progress` true), with the holder it last saw, if
/// the answer carried the item.
type OnWait = Box<dyn Fn(Option<Holder>, bool) + Send + Sync>;

/// The holder's item as last seen, since when, and when it was last reported.
struct Seen {
    version: Option<Version>,
    since: Instant,
    reported: Instant,
}

#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    notify: Notify,
    waited: AtomicBool,
    /// Found held by an answer that did not carry the item: the first report waits for the
    /// read that follows (`seen`), or for the acquisition's next step (`flush`).
    first_pending: AtomicBool,
    on_wait: Mutex<Option<(OnWait, Duration)>>,
    seen: Mutex<Option<Seen>>,
}

impl Cancel {
    /// `f` is called (from the acquisition's task) when the acquisition first finds the lock
    /// held, and then at reads that find it held, at most once per `period`.
    pub fn on_wait(&self, period: Duration, f: impl Fn(Option<Holder>, bool) + Send + Sync + 'static) {
        *self.on_wait.lock().unwrap_or_else(|p| p.into_inner()) = Some((Box::new(f), period));
    }

    /// The acquisition found the lock held (by `holder`, when the answer carried the item):
    /// it waits (or gives up) for someone else.
    pub fn waiting(&self, holder: Option<&LockRecord>) {
        if !self.waited.swap(true, Ordering::SeqCst) {
            self.report(holder, false);
        } else if let Some(h) = holder {
            self.seen(h);
        }
    }

    /// A condition of the acquisition failed, and the answer did not carry the item: it waits
    /// (or gives up), and its first report names the holder the next read finds.
    pub fn refused(&self) {
        if !self.waited.swap(true, Ordering::SeqCst) {
            self.first_pending.store(true, Ordering::SeqCst);
        }
    }

    /// The acquisition goes on without having read the holder: a first report still pending
    /// goes out without it.
    pub fn flush(&self) {
        if self.first_pending.swap(false, Ordering::SeqCst) {
            self.report(None, false);
        }
    }

    /// A read of a waiting acquisition found the lock held by `holder`: reported if a report
    /// period has passed since the last report (or the first report waits for it).
    pub fn seen(&self, holder: &LockRecord) {
        if !self.waited() {
            return;
        }
        if self.first_pending.load(Ordering::SeqCst) {
            if !holder.is_released() && self.first_pending.swap(false, Ordering::SeqCst) {
                self.report(Some(holder), false);
            }
            return;
        }
        if holder.is_released() {
            return;
        }
        let due = {
            let on_wait = self.on_wait.lock().unwrap_or_else(|p| p.into_inner());
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            match (on_wait.as_ref(), seen.as_ref()) {
                (Some((_, period)), Some(s)) => s.reported.elapsed() >= *period,
                _ => false,
            }
        };
        if due {
            self.report(Some(holder), true);
        } else {
            self.track(holder);
        }
    }

    /// Notes `holder`'s version: how long it has been seen unchanged.
    fn track(&self, holder: &LockRecord) -> Duration {
        let now = Instant::now();
        let version = Some(holder.version());
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.as_mut() {
            Some(s) if s.version == version => now.saturating_duration_since(s.since),
            Some(s) => {
                s.version = version;
                s.since = now;
                Duration::ZERO
            }
            None => {
                *seen = Some(Seen {
                    version,
                    since: now,
                    reported: now,
                });
                Duration::ZERO
            }
        }
    }

    fn report(&self, holder: Option<&LockRecord>, progress: bool) {
        let holder = holder.filter(|h| !h.is_released()).map(|h| Holder {
            owner: h.owner.clone(),
            fencing_token: h.fencing_token,
            lease_duration_ms: h.lease_duration_ms,
            session: h.session.clone(),
            unchanged: self.track(h),
        });
        if let Some(s) = self.seen.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            s.reported = Instant::now();
        }
        if let Some((f, _)) = self.on_wait.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            f(holder, progress);
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
