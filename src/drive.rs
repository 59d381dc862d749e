//! Runs the core's acquisition and release machines (`dynamodb_lock_core::fail_closed`,
//! `fail_open`, `release`): sends the requests they ask for through the store, each bounded by the timeout
//! the machine gives, sleeps until the instant they ask for (cut short by a cancellation where
//! the machine allows it), and feeds back answers, timers, both clocks and random numbers. It
//! makes no protocol decision.

use dynamodb_lock_core::op::OpenFields;
use dynamodb_lock_core::request::{Answer, Env, Machine, Reply, Req, Step, Time};
use rand::Rng;
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::error::StoreError;
use crate::item::{unix_now_ms, Guid, LockData, LockKey, LockRecord, Version};
use crate::settings::Settings;
use crate::store::{timed_out, Store, StoreOps, WaitMark, WholeItem};

pub type Request = Req<Guid, Version>;

/// Where a machine's requests go: one lock of one client.
pub struct Target<'a> {
    pub store: &'a dyn Store,
    pub key: &'a LockKey,
    pub settings: &'a Settings,
    /// The holder's data an acquisition writes.
    pub data: Option<&'a LockData>,
    pub cancel: Option<&'a Cancel>,
}

/// A machine's clock: the time since `base`, which the machine started at.
#[derive(Clone, Copy)]
pub struct Clock {
    pub base: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock { base: Instant::now() }
    }

    pub fn time(&self, at: Instant) -> Time {
        at.saturating_duration_since(self.base)
    }

    pub fn instant(&self, t: Time) -> Option<Instant> {
        self.base.checked_add(t)
    }

    pub fn env(&self, cancel: Option<&Cancel>) -> Env {
        Env {
            now: self.time(Instant::now()),
            unix_ms: unix_now_ms(),
            cancelled: cancel.is_some_and(Cancel::is_cancelled),
            random: rand::thread_rng().gen(),
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

/// `run`, keeping the error of the last refused condition in `refusal`.
pub async fn run_keeping_refusal<M: Machine<LockRecord, StoreError>>(
    m: &mut M,
    mut step: Step<Guid, Version, M::Out>,
    clock: Clock,
    to: &Target<'_>,
    refusal: &mut Option<StoreError>,
) -> M::Out {
    loop {
        step = match step {
            Step::Done(out) => return out,
            Step::Send { req, timeout_at } => {
                to.settings.stats.count_purpose(m.purpose());
                let result = match clock.instant(timeout_at) {
                    Some(at) if at > Instant::now() => match tokio::time::timeout_at(at, send(to, &req)).await {
                        Ok(r) => r,
                        Err(_) => Err(timed_out()),
                    },
                    Some(_) => Err(timed_out()),
                    None => send(to, &req).await,
                };
                if let Err(e) = &result {
                    if e.is_condition_failed() {
                        *refusal = Some(e.clone());
                        // An acquisition's condition failed: someone else holds the lock.
                        if let Some(cancel) = to.cancel {
                            cancel.waiting();
                        }
                    }
                }
                let env = clock.env(to.cancel);
                m.answer(answer(result), &env)
            }
            Step::Wait { until, abortable } => {
                let at = clock.instant(until);
                match (to.cancel.filter(|_| abortable), at) {
                    (Some(cancel), Some(at)) => {
                        let _ = cancel.sleep_until(at).await;
                    }
                    (Some(cancel), None) => cancel.cancelled().await,
                    (None, Some(at)) => tokio::time::sleep_until(at).await,
                    (None, None) => std::future::pending::<()>().await,
                }
                let env = clock.env(to.cancel);
                m.timer(&env)
            }
        }
    }
}

/// A store result as the machines read it.
pub fn answer(r: Result<Reply<LockRecord>, StoreError>) -> Answer<LockRecord, StoreError> {
    match r {
        Ok(reply) => Answer::Done(reply),
        Err(StoreError::ConditionFailed { current }) => Answer::Refused(current.map(|c| c.map(|b| *b))),
        Err(e) if e.is_condition_failed() => Answer::Refused(None),
        Err(error) => Answer::Failed {
            transient: error.is_transient(),
            maybe_applied: error.maybe_applied(),
            error,
        },
    }
}

/// Sends one request, with what the client's settings add to it.
pub async fn send(to: &Target<'_>, req: &Request) -> Result<Reply<LockRecord>, StoreError> {
    let (store, key, s) = (to.store, to.key, to.settings);
    match req {
        Req::Get => store.get(key).await.map(Reply::Item),
        Req::PutIfAbsent { guid } => store
            .put_if_absent(key, &s.owner, guid, to.data, s.ttl_held())
            .await
            .map(|()| Reply::Done),
        Req::DeleteIfGuid { guids } => store.delete_if_guid(key, guids).await.map(Reply::WaitingMark),
        Req::Take {
            guid,
            waited_out,
            clear_mark,
            lock_acquired_time_unix_ms,
        } => {
            let fields = OpenFields {
                lock_acquired_time_unix_ms: *lock_acquired_time_unix_ms,
                data: to.data,
                ..s.open_fields()
            };
            store
                .take(key, &fields, guid, waited_out.as_ref(), *clear_mark)
                .await
                .map(Reply::Token)
        }
        Req::Release {
            guids,
            lock_acquired_time_unix_ms,
        } => store
            .release(key, guids, *lock_acquired_time_unix_ms, s.ttl_released())
            .await
            .map(Reply::WaitingMark),
        Req::HandOver {
            guids,
            new_guid,
            renew,
            marks_fresh_since_unix_ms,
        } => {
            let fields = renew.then(|| s.open_fields());
            store
                .hand_over(
                    key,
                    guids,
                    new_guid,
                    fields.as_ref(),
                    *marks_fresh_since_unix_ms,
                    s.ttl_held(),
                )
                .await
                .map(|token| token.map_or(Reply::Done, Reply::Token))
        }
        Req::PutItem {
            guid,
            fencing_token,
            lease_duration_ms,
            lock_acquired_time_unix_ms,
            expect,
        } => store
            .put_item(
                key,
                &WholeItem {
                    owner: &s.owner,
                    guid,
                    fencing_token: *fencing_token,
                    lease_duration_ms: *lease_duration_ms,
                    lock_acquired_time_unix_ms: *lock_acquired_time_unix_ms,
                    expect,
                },
            )
            .await
            .map(|()| Reply::Done),
        Req::MarkWaiting {
            waiter,
            since_unix_ms,
            now_unix_ms,
            stale_before_unix_ms,
        } => {
            let mark = WaitMark {
                waiter,
                since_unix_ms: *since_unix_ms,
                now_unix_ms: *now_unix_ms,
                stale_before_unix_ms: *stale_before_unix_ms,
            };
            store.mark_waiting(key, &mark).await.map(|()| Reply::Done)
        }
    }
}
