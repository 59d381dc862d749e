//! Runs the core's acquisition and release machines (`dynamodb_lock_core::fail_closed`,
//! `fail_open`, `release`, and `request::Once` for a request that needs no settling: a data
//! update, `getLock`'s read, the removal of Fifo entries nobody waits for): sends the requests they ask for through the store, each bounded by the timeout
//! the machine gives, sleeps until the instant they ask for (cut short by a cancellation where
//! the machine allows it), and feeds back answers, timers, both clocks and random numbers. It
//! makes no protocol decision.

use dynamodb_lock_core::force;
use dynamodb_lock_core::op::{self, Op, OpenFields};
use dynamodb_lock_core::request::{answer_of, Adds, Answer, Ended, Machine, Once, Policy, Purpose, Req, Step, Time};
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::clock::{unix_now_ms, Clock};
use crate::error::StoreError;
use crate::item::{self, Guid, LockData, LockKey, LockRecord, Version};
use crate::settings::Settings;
use crate::store::Store;

pub type Request = Req<Guid, Version>;

/// Permits of a semaphore held: the holder's attribute on its head is keyed by `key` (the
/// `guid` it was granted with), and holds `permits`.
#[derive(Clone, Debug)]
pub struct Permit {
    pub key: Guid,
    pub permits: u64,
}

/// Where a machine's requests go: one lock of one client.
pub struct Target<'a> {
    pub store: &'a dyn Store,
    pub key: &'a LockKey,
    pub settings: &'a Settings,
    /// The holder's data an acquisition writes.
    pub data: Option<&'a LockData>,
    /// The session an acquisition or hand-over holds the lock through (`None`: its own lease).
    pub session: Option<&'a str>,
    pub cancel: Option<&'a Cancel>,
    /// A semaphore's permits the lock is: its release removes the holder from the head, and
    /// the head read back is seen as the holder's (`permit_view`).
    pub permit: Option<&'a Permit>,
}

impl<'a> Target<'a> {
    /// The item at `key`, with nothing added to its requests: no data, no session, no
    /// cancellation, no permits.
    pub fn item(store: &'a dyn Store, key: &'a LockKey, settings: &'a Settings) -> Self {
        Target {
            store,
            key,
            settings,
            data: None,
            session: None,
            cancel: None,
            permit: None,
        }
    }
}

/// Steps `m` from `step` until it is over.
pub async fn run<M: Machine<LockRecord, StoreError>>(
    m: &mut M,
    step: Step<Guid, Version, M::Out>,
    clock: Clock,
    to: &Target<'_>,
) -> M::Out {
    run_keeping_refusal(m, step, clock, to, &mut None).await
}

/// Sends `req` as hard as `policy` allows, to its first answer (`request::Once`); `purpose`:
/// why, when it counts as a request of the lock protocol.
pub async fn once(
    to: &Target<'_>,
    req: Request,
    policy: Policy,
    purpose: Option<Purpose>,
) -> Ended<LockRecord, StoreError> {
    let clock = Clock::start();
    let (mut m, step) = Once::start(req, policy, purpose, Time::ZERO);
    run(&mut m, step, clock, to).await
}

/// An operator's forced release of the lock at `to` (`force::Force`), from its item as the
/// operator read it (`read`), each request given `timeout`: `now` frees it at once.
pub async fn force_release(
    to: &Target<'_>,
    now: bool,
    read: Option<LockRecord>,
    timeout: std::time::Duration,
) -> force::Out<StoreError> {
    let clock = Clock::start();
    let (mut m, step) = force::Force::start(now, item::new_guid(), timeout, read, &clock.env(false));
    run(&mut m, step, clock, to).await
}

/// `run`, keeping the error of the last refused condition in `refusal`.
pub async fn run_keeping_refusal<M: Machine<LockRecord, StoreError>>(
    m: &mut M,
    mut step: Step<Guid, Version, M::Out>,
    clock: Clock,
    to: &Target<'_>,
    refusal: &mut Option<StoreError>,
) -> M::Out {
    loop {
        if let (Some(cancel), Step::Done(_) | Step::Wait { .. }) = (to.cancel, &step) {
            cancel.flush();
        }
        step = match step {
            Step::Done(out) => return out,
            Step::Send { req, timeout_at } => {
                if m.counted() {
                    to.settings.stats.count_purpose(m.purpose());
                }
                let result = within(to.store, clock.instant(timeout_at), send(to, &req)).await;
                match (&result, to.cancel) {
                    (Err(e), cancel) if e.is_condition_failed() => {
                        *refusal = Some(e.clone());
                        // An acquisition's condition failed: someone else holds the lock.
                        if let Some(cancel) = cancel {
                            match e {
                                StoreError::ConditionFailed { current: Some(Some(r)) } => cancel.waiting(Some(r)),
                                // The read that settles the refusal names the holder.
                                _ => cancel.refused(),
                            }
                        }
                    }
                    // A waiter's read: what it found, for its `waiting` reports.
                    (Ok(op::Reply::Before(Some(r))), Some(cancel)) => cancel.seen(r),
                    _ => {}
                }
                let env = clock.env(to.cancel.is_some_and(Cancel::is_cancelled));
                m.answer(answer(result), &env)
            }
            Step::Wait { until, abortable } => {
                let at = clock.instant(until);
                crate::debug::log(|| {
                    let pause = match at {
                        Some(at) => crate::debug::ms(at.saturating_duration_since(crate::clock::now())),
                        None => "until cancelled".into(),
                    };
                    let purpose = dynamodb_lock_core::request::PURPOSES[m.purpose() as usize];
                    format!(
                        "lock {} ({purpose}): pauses {pause} before its next request",
                        crate::debug::key(to.key)
                    )
                });
                match (to.cancel.filter(|_| abortable), at) {
                    (Some(cancel), Some(at)) => drop(cancel.sleep_until(at).await),
                    (Some(cancel), None) => cancel.cancelled().await,
                    (None, Some(at)) => tokio::time::sleep_until(at).await,
                    (None, None) => std::future::pending::<()>().await,
                }
                let env = clock.env(to.cancel.is_some_and(Cancel::is_cancelled));
                m.timer(&env)
            }
        }
    }
}

/// A request's answer, given up on at `at` (`None`: no timeout; a moment already past: at
/// once, without sending).
pub async fn within(
    store: &dyn Store,
    at: Option<Instant>,
    send: impl std::future::Future<Output = Result<op::Reply<LockRecord>, StoreError>>,
) -> Result<op::Reply<LockRecord>, StoreError> {
    match at {
        Some(at) if at > crate::clock::now() => crate::store::until(at, send)
            .await
            .unwrap_or_else(|_| Err(store.timed_out())),
        Some(_) => Err(store.timed_out()),
        None => send.await,
    }
}

/// A store's answer as the machines take it.
pub fn answer(r: Result<op::Reply<LockRecord>, StoreError>) -> Answer<LockRecord, StoreError> {
    match r {
        Ok(reply) => answer_of(reply),
        Err(StoreError::ConditionFailed { current }) => Answer::Refused(current.map(|c| c.map(|b| *b))),
        Err(e) if e.is_condition_failed() => Answer::Refused(None),
        Err(error) => Answer::Failed {
            transient: error.is_transient(),
            maybe_applied: error.maybe_applied(),
            error,
        },
    }
}

/// Sends one request as the operation it is, with what the client's settings add to it.
pub async fn send(to: &Target<'_>, req: &Request) -> Result<op::Reply<LockRecord>, StoreError> {
    let s = to.settings;
    let mut fields = OpenFields {
        data: to.data,
        ..s.open_fields()
    };
    if let Some(id) = to.session {
        fields.session = Some(id);
        fields.lease_duration_ms = item::SESSION_LOCK_LEASE_MS;
        fields.lock_acquired_time_unix_ms = Some(unix_now_ms());
    }
    let adds = Adds {
        fields,
        ttl_released: s.ttl_released(),
    };
    let parts = req.parts(&adds);
    let op = req.op(&adds, &parts);
    if let Some(p) = to.permit {
        return send_permit(to, p, op).await;
    }
    match req.session() {
        // A waiter's read or end of the session a lock is held through: the session's item.
        Some(id) => to.store.apply(&item::session_key(id, to.key.sort.is_some()), &op).await,
        None => to.store.apply(to.key, &op).await,
    }
}

/// A held semaphore's request (`send`): its release removes the holder and gives its permits
/// back; a read sees the head as the holder's item (`op::permit_view`).
async fn send_permit(to: &Target<'_>, p: &Permit, op: Op<'_, LockRecord>) -> Result<op::Reply<LockRecord>, StoreError> {
    let op = op::permit_op(op, &p.key, p.permits)
        .map_err(|other| crate::store::not_supported(format!("{other:?} on a semaphore's permits")))?;
    let view = |r: Option<LockRecord>| op::permit_view(r, &p.key);
    match to.store.apply(to.key, &op).await {
        Ok(op::Reply::Before(r)) => Ok(op::Reply::Before(view(r))),
        Ok(op::Reply::Refused(r)) => Ok(op::Reply::Refused(view(r))),
        Err(StoreError::ConditionFailed { current }) => Err(StoreError::ConditionFailed {
            current: current.map(|c| view(c.map(|b| *b)).map(Box::new)),
        }),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::{closed_settings, key};

    fn throttled() -> StoreError {
        StoreError::Service {
            code: "ProvisionedThroughputExceededException".into(),
            message: "slow down".into(),
            transient: true,
            maybe_applied: false,
        }
    }

    fn target<'a>(store: &'a MemoryStore, settings: &'a Settings, key: &'a LockKey) -> Target<'a> {
        Target::item(store, key, settings)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_sent_once_retries_transient_failures_then_reports_the_last() {
        let (store, s, k) = (MemoryStore::new(true), closed_settings("me"), key("a"));
        for _ in 0..3 {
            store.fault("get", Fault::Fail(throttled()));
        }
        let r = once(&target(&store, &s, &k), Request::Get, Policy::new(3, ms(1000)), None).await;
        assert!(
            matches!(&r, Ended::Failed { error, .. } if error.code() == "ProvisionedThroughputExceededException"),
            "{r:?}"
        );
        assert_eq!(store.count("get"), 3);
        assert_eq!(s.stats.purpose(0), 0, "not a request of the lock protocol");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_condition_is_an_answer_not_retried() {
        let (store, s, k) = (MemoryStore::new(true), closed_settings("me"), key("a"));
        let req = Request::SetData {
            guids: vec![[7; item::GUID_LEN]],
        };
        let r = once(
            &target(&store, &s, &k),
            req,
            Policy::new(5, ms(1000)),
            Some(Purpose::Acquiring),
        )
        .await;
        assert!(matches!(r, Ended::Refused { .. }), "{r:?}");
        assert_eq!(store.count("set_data"), 1);
        assert_eq!(
            s.stats.purpose(Purpose::Acquiring as usize),
            1,
            "counted for its purpose"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_attempt_times_out_and_is_tried_again() {
        let (store, s, k) = (MemoryStore::new(true), closed_settings("me"), key("a"));
        store.fault("get", Fault::Hang);
        let start = Instant::now();
        let r = once(&target(&store, &s, &k), Request::Get, Policy::new(2, ms(100)), None).await;
        assert!(matches!(r, Ended::Ok(op::Reply::Before(None))), "{r:?}");
        assert_eq!(store.count("get"), 2);
        assert!(start.elapsed() >= ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_runs_past_the_deadline() {
        let (store, s, k) = (MemoryStore::new(true), closed_settings("me"), key("a"));
        for _ in 0..100 {
            store.fault("get", Fault::Hang);
        }
        let start = Instant::now();
        let policy = Policy::new(100, Duration::from_secs(10)).until(ms(300));
        let r = once(&target(&store, &s, &k), Request::Get, policy, None).await;
        assert!(
            matches!(&r, Ended::Failed { error, .. } if error.code() == "TimeoutError"),
            "{r:?}"
        );
        assert!(start.elapsed() <= ms(300));
    }
}
