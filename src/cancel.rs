//! Cancellation of one pending acquisition (an `AbortSignal` in JavaScript), and the report
//! that it found the lock held and waits (contention), which travels the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use dynamodb_lock_core::request::Time;
use dynamodb_lock_core::waiting::{self, Found, Report};

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

/// The acquisition's reports of its wait, as the core's `waiting::Reports` decides them, and
/// where they go.
#[derive(Default)]
struct Reports {
    decide: waiting::Reports<Version>,
    to: Option<OnWait>,
}

#[derive(Default)]
pub struct Cancel {
    flag: AtomicBool,
    notify: Notify,
    reports: Mutex<Reports>,
    /// The origin of the reports' times: the first time one is needed.
    base: OnceLock<Instant>,
}

impl Cancel {
    /// `f` is called (from the acquisition's task) when the acquisition first finds the lock
    /// held, and then at reads that find it held, at most once per `period`.
    pub fn on_wait(&self, period: Duration, f: impl Fn(Option<Holder>, bool) + Send + Sync + 'static) {
        let mut r = self.reports();
        r.decide.every(period);
        r.to = Some(Box::new(f));
    }

    /// The acquisition found the lock held (by `holder`, when the answer carried the item):
    /// it waits (or gives up) for someone else.
    pub fn waiting(&self, holder: Option<&LockRecord>) {
        let now = self.now();
        self.tell(holder, |d| d.waiting(holder.map(found), now));
    }

    /// A condition of the acquisition failed, and the answer did not carry the item: it waits
    /// (or gives up), and its first report names the holder the next read finds.
    pub fn refused(&self) {
        self.reports().decide.refused();
    }

    /// The acquisition goes on without having read the holder: a first report still pending
    /// goes out without it.
    pub fn flush(&self) {
        self.tell(None, waiting::Reports::flush);
    }

    /// A read of a waiting acquisition found the lock held by `holder`.
    pub fn seen(&self, holder: &LockRecord) {
        let now = self.now();
        self.tell(Some(holder), |d| d.seen(found(holder), now));
    }

    /// Whether the acquisition found the lock held at some point.
    pub fn waited(&self) -> bool {
        self.reports().decide.waited()
    }

    fn reports(&self) -> std::sync::MutexGuard<'_, Reports> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Time {
        let now = crate::clock::now();
        now.saturating_duration_since(*self.base.get_or_init(|| now))
    }

    /// Makes the report `decide` asks for, if any, naming `holder` when it says so.
    fn tell(&self, holder: Option<&LockRecord>, decide: impl FnOnce(&mut waiting::Reports<Version>) -> Option<Report>) {
        let r = &mut *self.reports();
        let Some(report) = decide(&mut r.decide) else { return };
        let holder = holder.zip(report.unchanged).map(|(h, unchanged)| Holder {
            owner: h.owner.clone(),
            fencing_token: h.fencing_token,
            lease_duration_ms: h.lease_duration_ms,
            session: h.session.clone(),
            unchanged,
        });
        if let Some(f) = &r.to {
            f(holder, report.progress);
        }
    }

    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Returns once the acquisition is cancelled.
    pub async fn cancelled(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.is_cancelled() {
            notified.await;
        }
    }

    /// Sleeps until `deadline`, or returns `Aborted` as soon as the acquisition is cancelled.
    pub async fn sleep_until(&self, deadline: Instant) -> Result<(), LockError> {
        tokio::select! {
            biased;
            _ = self.cancelled() => Err(LockError::Aborted),
            _ = tokio::time::sleep_until(deadline) => Ok(()),
        }
    }
}

/// A holder's item as the core's reports see it.
fn found(holder: &LockRecord) -> Found<Version> {
    (holder.version(), holder.is_released())
}
