//! FailOpen: a lock with a lease. One conditional `UpdateItem` takes a lock that is absent,
//! released, or still carries the version a waiter has waited out; it raises `fencingToken` by
//! one. A waiter waits the holder's lease on its own clock, re-reading at a bounded interval so
//! that a release is acted on at once.

use dynamodb_lock_core::fail_open::{self as machine, Outcome};
use dynamodb_lock_core::work::Task;
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::error::{LockError, LostReason, StoreError};
use crate::item::{new_guid, Guid, LockData, LockKey};
use crate::lock::{Session, Shared};
use crate::work::{Carry, Out};

pub struct Taken {
    pub guid: Guid,
    pub fencing_token: u64,
    /// When the winning request was sent: the lease runs from here on this process's clock.
    pub sent_at: Instant,
    /// The acquisition found the lock held by someone else: others want it too.
    pub contended: bool,
}

/// `until_aborted`: the acquisition waits until it takes the lock or is cancelled, whatever
/// `retryCount` says (a `campaign()` candidate: a new acquisition after each refusal would start
/// the pace of its re-reads over). `session`: the lock is taken through it, and is granted
/// only if the session's lease still lasts when the take is answered.
pub async fn acquire(
    c: &Shared,
    key: &LockKey,
    data: Option<&LockData>,
    until_aborted: bool,
    session: Option<&Session>,
    cancel: &Cancel,
) -> Result<Taken, LockError> {
    let guid = new_guid();
    let stand_back = c.lines.stand_back(key).map(|t| c.clock.time(t));
    let mut s = c.settings.protocol;
    if until_aborted {
        s.retry_count = u32::MAX;
    }
    let carry = Carry {
        data: data.cloned(),
        session: session.map(|s| s.id.clone()),
        ..Carry::default()
    };
    let mut piece = c.work.start(key, carry, Some(cancel), |env| {
        Task::open(machine::Acquire::start(s, guid, stand_back, env))
    });
    let mut out = piece.done().await;
    if matches!(out, Out::Open(Outcome::Taken { .. })) && session.is_some_and(|s| !s.alive()) {
        // The session's lease ended before the grant was known: the lock is lost already, and
        // the machine gives it back (undone later, in the client's work, if that fails).
        piece.give_back();
        out = piece.done().await;
    }
    let Out::Open(outcome) = out else {
        unreachable!("a FailOpen acquisition ends as one")
    };
    match outcome {
        Outcome::Taken {
            fencing_token,
            sent_at,
            contended,
        } => Ok(Taken {
            guid,
            fencing_token,
            sent_at: c.clock.base + sent_at,
            contended,
        }),
        Outcome::Expired { .. } => Err(LockError::Lost(LostReason::LeaseExpired)),
        Outcome::Held(held) => Err(LockError::FailedToAcquireLock {
            original: StoreError::ConditionFailed {
                current: Some(Some(Box::new(held))),
            },
        }),
        // Our take raised a token that is refused: the machine gave the lock back.
        Outcome::Corrupt { item, .. } => Err(c.fifo.names.corrupt(key, &item)),
        Outcome::Failed { error, .. } => Err(LockError::Store(error)),
        Outcome::Aborted => Err(LockError::Aborted),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use dynamodb_lock_core::request::Purpose;
    use tokio::time::Instant;

    use crate::cancel::Cancel;
    use crate::client::Client;
    use crate::clock::unix_now_ms;
    use crate::error::{LockError, LostReason, StoreError};
    use crate::item::{GuidValue, LockRecord};
    use crate::lock::LockEvent;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::*;

    #[tokio::test(start_paused = true)]
    async fn fencing_tokens_rise_by_one_across_acquire_release_acquire() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, open_settings("me", 1000, None));
        let a = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        assert_eq!(a.fencing_token, Some(1));
        a.release().await.unwrap();
        let rec = store.record(&key("a")).unwrap();
        assert!(rec.is_released(), "the item stays, with leaseDurationMs 1");
        assert_eq!(rec.fencing_token, Some(1));
        let b = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        assert_eq!(b.fencing_token, Some(2));
        assert_eq!(
            store.count("take"),
            2,
            "one request per acquisition, released or absent"
        );
        assert_eq!(store.count("release"), 1);
        assert_eq!(store.count("get"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_holder_is_taken_over_after_its_lease_on_our_clock() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let (dead, _) = client(&store, open_settings("dead", 1000, None));
            let _gone = dead.acquire(key("a"), &Cancel::default()).await.unwrap();
            let (c, _) = client(&store, open_settings("me", 1000, None));
            let start = Instant::now();
            let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
            let waited = start.elapsed();
            assert!(waited >= Duration::from_millis(1000), "waited {waited:?}");
            assert!(waited < Duration::from_millis(1100), "waited {waited:?}");
            assert_eq!(lock.fencing_token, Some(2));
            assert_eq!(store.record(&key("a")).unwrap().owner.as_deref(), Some("me"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_seen_by_a_reread_is_acted_on_at_once() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, open_settings("other", 10_000, None));
        let held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
        let mut s = open_settings("me", 10_000, None);
        s.protocol.reread = Duration::from_millis(100);
        let (c, _) = client(&store, s);
        let start = Instant::now();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.acquire(key("a"), &Cancel::default()).await }
        });
        tokio::time::sleep(Duration::from_millis(350)).await;
        held.release().await.unwrap();
        let lock = waiter.await.unwrap().unwrap();
        // Re-reads at 100, 250 and 475 ms (`rereadPeriodMs` plus half the time waited): the
        // one that sees the release takes the lock, within a pace of the release.
        assert!(
            start.elapsed() <= Duration::from_millis(350 + 100 + 350 / 2),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(lock.fencing_token, Some(2));
        assert_eq!(store.count("get"), 3, "the re-reads");
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewing_holder_exhausts_retries_at_lease_boundaries() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, open_settings("other", 1000, Some(300)));
        let _held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
        let mut s = open_settings("me", 1000, None);
        s.protocol.retry_count = 1;
        let (c, _) = client(&store, s);
        let start = Instant::now();
        let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        let took = start.elapsed();
        // As the original: one wait of a lease, a failed attempt, a second wait, a failure.
        assert!(
            took >= Duration::from_millis(1000) && took < Duration::from_millis(2300),
            "took {took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_count_zero_still_waits_out_one_lease() {
        let store = Arc::new(MemoryStore::new(true));
        let (dead, _) = client(&store, open_settings("dead", 500, None));
        let _gone = dead.acquire(key("a"), &Cancel::default()).await.unwrap();
        let mut s = open_settings("me", 500, None);
        s.protocol.retry_count = 0;
        let (c, _) = client(&store, s);
        let lock = c
            .acquire(key("a"), &Cancel::default())
            .await
            .expect("the first find is no failed attempt");
        assert_eq!(lock.fencing_token, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_corrupt_token_is_refused_by_name_and_left_as_it_was() {
        let store = Arc::new(MemoryStore::new(true));
        let mut rec = LockRecord {
            owner: Some("tool".into()),
            guid: Some(GuidValue::B(vec![9; 64])),
            lease_duration_ms: Some(1),
            ..Default::default()
        };
        rec.read(crate::item::FENCING_TOKEN, crate::item::Found::N("-5".into()));
        store.set(&key("a"), rec.clone());
        let (c, _) = client(&store, open_settings("me", 1000, None));
        let e = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
        assert_eq!(e.code(), "CorruptLockItem");
        assert_eq!(e.attribute(), Some("fencingToken"));
        assert_eq!(store.record(&key("a")), Some(rec), "the item is left as it was");
    }

    #[tokio::test(start_paused = true)]
    async fn trust_local_time_shortens_the_wait_but_never_lengthens_it() {
        let store = Arc::new(MemoryStore::new(true));
        let rec = |acquired: u64| LockRecord {
            owner: Some("other".into()),
            guid: Some(GuidValue::B(vec![9; 64])),
            fencing_token: Some(7),
            lease_duration_ms: Some(1000),
            lock_acquired_time_unix_ms: Some(acquired),
            ..Default::default()
        };
        let mut s = open_settings("me", 1000, None);
        s.protocol.trust_local_time = true;
        let (c, _) = client(&store, s.clone());
        store.set(&key("a"), rec(unix_now_ms() - 800));
        let start = Instant::now();
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(150) && waited < Duration::from_millis(400),
            "waited {waited:?}"
        );
        assert_eq!(lock.fencing_token, Some(8));
        assert!(store.record(&key("a")).unwrap().lock_acquired_time_unix_ms.is_some());
        // A holder whose clock runs ahead does not make us wait longer than the lease.
        store.set(&key("b"), rec(unix_now_ms() + 60_000));
        let start = Instant::now();
        c.acquire(key("b"), &Cancel::default()).await.unwrap();
        assert!(start.elapsed() <= Duration::from_millis(1100));
        // Without trustLocalTime the holder's clock is ignored, and the value is replaced by
        // this writer's clock (the original with trustLocalTime counts the lease from it).
        let (plain, _) = client(&store, open_settings("me", 1000, None));
        let stale = unix_now_ms() - 900;
        store.set(&key("c"), rec(stale));
        let start = Instant::now();
        plain.acquire(key("c"), &Cancel::default()).await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(1000));
        let written = store.record(&key("c")).unwrap().lock_acquired_time_unix_ms;
        assert!(written.is_some_and(|t| t > stale), "{written:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_a_lock_past_many_leases() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 400, Some(100)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let first = store.record(&key("a")).unwrap().guid;
        let (w, _) = client(&store, open_settings("waiter", 400, None));
        let waiter = tokio::spawn(async move { w.acquire(key("a"), &Cancel::default()).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert_eq!(waiter.await.unwrap().unwrap_err().code(), "FailedToAcquireLock");
        let renews = store.count("renew");
        assert!((15..=21).contains(&renews), "about one heartbeat per period: {renews}");
        assert_ne!(store.record(&key("a")).unwrap().guid, first, "guid rotates");
        assert!(events.events().is_empty(), "{:?}", events.events());
        lock.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(store.count("renew"), renews, "no heartbeat after release");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_heartbeat_is_reported_and_retried_while_the_lease_lasts() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(200)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.fault("renew", Fault::Fail(throttled()));
        store.fault("renew", Fault::ApplyThenFail(lost_response()));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ev = events.events();
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert!(
            matches!(&ev[0], LockEvent::Error(LockError::Store(e), _) if e.code() == "ProvisionedThroughputExceededException")
        );
        assert!(matches!(&ev[1], LockEvent::Error(LockError::Store(e), _) if e.code() == "NetworkingError"));
        let st = lock.state();
        assert!(st.lost.is_none());
        assert!(
            store.record(&key("a")).unwrap().carries(&st.guid),
            "the unseen write was accepted"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_heartbeat_error_that_cannot_mend_is_reported_once_and_not_retried() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(200)));
        let _lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let denied = StoreError::Service {
            code: "AccessDeniedException".into(),
            message: "not authorized to perform: dynamodb:UpdateItem".into(),
            transient: false,
            maybe_applied: false,
        };
        for _ in 0..100 {
            store.fault("renew", Fault::Fail(denied.clone()));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ev = events.events();
        let errors: Vec<_> = ev.iter().filter(|e| matches!(e, LockEvent::Error(..))).collect();
        assert_eq!(errors.len(), 1, "{ev:?}");
        assert_eq!(store.count("renew"), 1, "not retried");
        assert_eq!(ev.last(), Some(&LockEvent::Lost(LostReason::LeaseExpired)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_heartbeat_that_finds_the_table_gone_is_a_loss_at_once() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(200)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let missing = StoreError::Service {
            code: "ResourceNotFoundException".into(),
            message: "Requested resource not found".into(),
            transient: false,
            maybe_applied: false,
        };
        for _ in 0..100 {
            store.fault("renew", Fault::Fail(missing.clone()));
        }
        // The first heartbeat falls within the first period: lost then, not at the lease's end.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ev = events.events();
        assert_eq!(store.count("renew"), 1, "not retried");
        assert!(
            matches!(&ev[0], LockEvent::Error(LockError::Store(e), _) if e.code() == "ResourceNotFoundException"),
            "{ev:?}"
        );
        assert_eq!(ev.last(), Some(&LockEvent::Lost(LostReason::NotOwner)), "{ev:?}");
        assert!(lock.state().lost.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_heartbeat_error_is_reported_at_most_once_per_period() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 10_000, Some(1000)));
        let _lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        for _ in 0..1000 {
            store.fault("renew", Fault::Fail(throttled()));
        }
        tokio::time::sleep(Duration::from_millis(4500)).await;
        let errors = events
            .events()
            .iter()
            .filter(|e| matches!(e, LockEvent::Error(..)))
            .count();
        let attempts = store.count("renew");
        assert!(attempts > 5, "{attempts} attempts: retried with (jittered) backoff");
        // The first heartbeat falls anywhere in the first period and the pauses between
        // attempts are jittered and grow, so failures are told 2 to 5 times: again after a
        // period, never twice within one.
        assert!(
            (2..=5).contains(&errors),
            "{errors} \"error\" events in 3.5 to 4.5 s of failures, period 1 s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_heartbeat_that_finds_another_owner_reports_the_lock_lost() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(200)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.set(
            &key("a"),
            LockRecord {
                guid: Some(GuidValue::B(vec![1; 64])),
                lease_duration_ms: Some(1000),
                ..Default::default()
            },
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let ev = events.events();
        assert!(matches!(&ev[0], LockEvent::Error(e, _) if e.code() == "ConditionalCheckFailedException"));
        assert_eq!(ev[1], LockEvent::Lost(LostReason::NotOwner));
        let renews = store.count("renew");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(store.count("renew"), renews, "a lost lock is not renewed");
        lock.release().await.expect("releasing a lost FailOpen lock is quiet");
        assert_eq!(
            store.record(&key("a")).unwrap().guid,
            Some(GuidValue::B(vec![1; 64])),
            "the new owner's item is untouched"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_longer_than_the_lease_warns_then_reports_the_lease_lapsed() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 1000, Some(300)));
        let _lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        for _ in 0..200 {
            store.fault("renew", Fault::Fail(throttled()));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ev = events.events();
        let danger = ev
            .iter()
            .position(|e| matches!(e, LockEvent::Danger { .. }))
            .expect("danger");
        let lost = ev
            .iter()
            .position(|e| *e == LockEvent::Lost(LostReason::LeaseExpired))
            .expect("lost");
        assert!(danger < lost);
        assert_eq!(ev.len() - 1, lost, "nothing after lost: {ev:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn release_waits_for_an_in_flight_heartbeat_and_uses_its_guid() {
        for fault in [
            Fault::Delay(Duration::from_millis(80)),
            Fault::ApplyThenFail(lost_response()),
        ] {
            let store = Arc::new(MemoryStore::new(true));
            let (c, _) = client(&store, open_settings("me", 1000, Some(100)));
            let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
            store.fault("renew", fault.clone());
            // Land inside the heartbeat (its first one is due between 50 and 100 ms).
            until_renewing(&store).await;
            assert_eq!(store.count("renew"), 1);
            lock.release().await.expect("released");
            let rec = store.record(&key("a")).unwrap();
            assert!(rec.is_released(), "{fault:?}: the release found the heartbeat's guid");
            let renews = store.count("renew");
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert_eq!(store.count("renew"), renews);
        }
    }

    /// The heartbeat's write never answers (a black-holed connection): a release waits for it
    /// until the instant the core's `Hold` gives (a request timeout after the release was
    /// called), then releases with both `guid`s the item may carry. Nothing goes out after it.
    #[tokio::test(start_paused = true)]
    async fn a_release_waits_for_a_hanging_heartbeat_write_no_longer_than_a_request_timeout() {
        let store = Arc::new(MemoryStore::new(true));
        let mut settings = open_settings("me", 10_000, Some(100));
        settings.protocol.request_timeout = Duration::from_millis(400);
        let (c, events) = client(&store, settings);
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        store.fault("renew", Fault::Hang);
        until_renewing(&store).await;
        assert_eq!(store.count("renew"), 1);
        assert!(lock.state().beating, "the write is on the wire");
        let t0 = Instant::now();
        lock.release().await.expect("released");
        let waited = t0.elapsed();
        assert!(
            waited > Duration::ZERO && waited <= Duration::from_millis(400),
            "released {waited:?} after it was asked"
        );
        assert!(store.record(&key("a")).unwrap().is_released());
        let writes = store.count("renew") + store.count("release");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            store.count("renew") + store.count("release"),
            writes,
            "nothing after the release"
        );
        // The attempt that timed out is reported, as any failed heartbeat; the lock is not lost.
        let ev = events.events();
        assert!(
            ev.len() <= 1 && ev.iter().all(|e| matches!(e, LockEvent::Error(..))),
            "{ev:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_waiting_for_a_heartbeat_gets_its_reply_without_a_pause() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, open_settings("me", 1000, Some(100)));
        let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        // The reply comes 7 ms after the heartbeat starts: between two 5 ms pauses.
        store.fault("renew", Fault::Delay(Duration::from_millis(7)));
        until_renewing(&store).await;
        assert_eq!(store.count("renew"), 1);
        let t0 = Instant::now();
        lock.release().await.expect("released");
        let waited = t0.elapsed();
        assert!(
            waited <= Duration::from_millis(7),
            "released {waited:?} after it was asked"
        );
        assert!(store.record(&key("a")).unwrap().is_released());
    }

    #[tokio::test(start_paused = true)]
    async fn a_take_that_landed_unseen_is_ours_with_its_token() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            store.fault("take", Fault::ApplyThenFail(lost_response()));
            let (c, _) = client(&store, open_settings("me", 1000, None));
            let lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
            assert_eq!(lock.fencing_token, Some(1));
            assert_eq!(store.record(&key("a")).unwrap().fencing_token, Some(1), "applied once");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_leaves_no_lock() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, open_settings("other", 5000, None));
        let _held = holder.acquire(key("a"), &Cancel::default()).await.unwrap();
        let (c, _) = client(&store, open_settings("me", 5000, None));
        let cancel = Arc::new(Cancel::default());
        let task = tokio::spawn({
            let (c, cancel) = (c.clone(), cancel.clone());
            async move { c.acquire(key("a"), &cancel).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(700)).await;
        cancel.cancel();
        assert_eq!(task.await.unwrap().unwrap_err(), LockError::Aborted);
        assert_eq!(store.record(&key("a")).unwrap().owner.as_deref(), Some("other"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_without_heartbeats_reports_its_lease_lapsing_unless_released() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 500, None));
        let kept = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        let released = c.acquire(key("b"), &Cancel::default()).await.unwrap();
        released.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(events.events().is_empty());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ev = events.0.lock().unwrap().clone();
        assert_eq!(ev, vec![(kept.id, LockEvent::Lost(LostReason::LeaseExpired))]);
    }

    #[tokio::test(start_paused = true)]
    async fn danger_is_reported_while_a_heartbeat_hangs() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 1000, Some(300));
        s.protocol.request_timeout = Duration::from_secs(10);
        let (c, events) = client(&store, s);
        let _lock = c.acquire(key("a"), &Cancel::default()).await.unwrap();
        for _ in 0..50 {
            store.fault("renew", Fault::Hang);
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let ev = events.events();
        let danger = ev
            .iter()
            .position(|e| matches!(e, LockEvent::Danger { .. }))
            .expect("danger while hung");
        let lost = ev
            .iter()
            .position(|e| *e == LockEvent::Lost(LostReason::LeaseExpired))
            .expect("lost");
        assert!(danger < lost, "{ev:?}");
        assert!(ev
            .iter()
            .any(|e| matches!(e, LockEvent::Error(e, _) if e.code() == "TimeoutError")));
    }

    /// 100 locks renewed every 100 ms by a client capped at 200 heartbeats per second.
    async fn hundred_locks_capped_at_200_per_second() -> (
        Arc<MemoryStore>,
        Arc<crate::testkit::Recorder>,
        Vec<Arc<crate::lock::HeldLock>>,
    ) {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 10_000, Some(100));
        s.protocol.request_timeout = Duration::from_millis(500);
        let (c, rec) = client_capped(&store, s, 200);
        let held = hold(&c, 100).await;
        (store, rec, held)
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeat_cap_bounds_the_rate_and_spreads_it() {
        let (store, rec, _held) = hundred_locks_capped_at_200_per_second().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = store.count("renew");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let renews = store.count("renew") - before;
        // Wanted: 100 locks x 10/s = 1000/s; allowed: 200/s.
        assert!(
            (360..=440).contains(&renews),
            "{renews} heartbeats in 2 s at a cap of 200/s"
        );
        assert!(rec.events().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_under_the_cap_start_a_few_at_a_time() {
        let (store, rec, _held) = hundred_locks_capped_at_200_per_second().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (renews, wakes) = renews_and_wake_ups(&store, 2000).await;
        assert!(
            (380..=420).contains(&renews),
            "{renews} heartbeats in 2 s at a cap of 200/s"
        );
        // Slots 5 ms apart, taken two at a time: one wake-up per 10 ms, not per slot.
        assert!(wakes <= 220, "{wakes} wake-ups for {renews} heartbeats");
        assert!(rec.events().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_releaser_stands_back_for_a_waiter_only_when_others_wanted_the_lock() {
        let store = Arc::new(MemoryStore::new(true));
        let settings = |owner| {
            let mut s = open_settings(owner, 1000, None);
            s.protocol.reread = Duration::from_millis(20);
            s
        };
        let (a, _) = client(&store, settings("a"));
        let (b, _) = client(&store, settings("b"));
        let wait_for = |c: &Arc<Client>| {
            let c = c.clone();
            tokio::spawn(async move { c.acquire(key("k"), &Cancel::default()).await.unwrap() })
        };
        let owner = || store.record(&key("k")).unwrap().owner;
        // Uncontended: release and take again at once.
        let first = b.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert!(!first.contended());
        first.release().await.unwrap();
        let start = Instant::now();
        let held_by_b = b.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "no waiter, no standing back");
        assert!(!held_by_b.contended());
        // A waits, which marks the item; B, which never waited, releases and asks again at
        // once: A's turn comes first.
        let a_waits = wait_for(&a);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(store.count("mark"), 1);
        assert!(store.record(&key("k")).unwrap().lock_waiting_unix_ms.is_some());
        held_by_b.release().await.unwrap();
        let b_again = wait_for(&b);
        let held_by_a = a_waits.await.unwrap();
        assert_eq!(owner().as_deref(), Some("a"));
        assert!(held_by_a.contended());
        assert!(!b_again.is_finished(), "the releaser waits for the holder after it");
        held_by_a.release().await.unwrap();
        let held_by_b = b_again.await.unwrap();
        assert_eq!(owner().as_deref(), Some("b"));
        // A holder that itself waited stands back too: A waits, B releases and asks again.
        let a_waits = wait_for(&a);
        tokio::time::sleep(Duration::from_millis(50)).await;
        held_by_b.release().await.unwrap();
        let b_again = wait_for(&b);
        let held_by_a = a_waits.await.unwrap();
        assert_eq!(owner().as_deref(), Some("a"));
        held_by_a.release().await.unwrap();
        b_again.await.unwrap();
        assert_eq!(owner().as_deref(), Some("b"));
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_waiting_for_a_slow_backend_are_not_tasks() {
        use crate::heartbeat::FIRST_IN_FLIGHT;
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 60_000, Some(100));
        s.protocol.request_timeout = Duration::from_secs(30);
        let (c, _) = client(&store, s);
        let _held = hold(&c, 300).await;
        let tasks_before = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        for _ in 0..1000 {
            store.fault("renew", Fault::Hang);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let hung = store.count("renew");
        let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        assert_eq!(
            hung, FIRST_IN_FLIGHT,
            "as many heartbeats in flight as the bound allows"
        );
        assert!(
            tasks <= tasks_before,
            "{tasks} tasks with 300 heartbeats due and {FIRST_IN_FLIGHT} in flight (before: {tasks_before}): heartbeats run in the scheduler's task"
        );
    }

    /// In real time: the scheduler on its own thread, pausing while slow replies are out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_scheduler_on_its_own_thread_renews_through_slow_replies() {
        use crate::heartbeat::LazyHeartbeats;
        let store = Arc::new(MemoryStore::new(true));
        let (c, rec) = client_with(
            &store,
            open_settings("me", 2_000, Some(100)),
            LazyHeartbeats::new(Some(0)),
        );
        let held = hold(&c, 20).await;
        for _ in 0..400 {
            store.fault("renew", Fault::Delay(Duration::from_millis(3)));
        }
        let before = store.count("renew");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let renewals = store.count("renew") - before;
        // 200 are due; a loaded machine may delay some, but none runs twice in a period.
        assert!(
            (120..=240).contains(&renewals),
            "{renewals} renewals of 20 locks in 1 s at a 100 ms period"
        );
        let events = rec.events();
        assert!(events.is_empty(), "no errors and no lost locks: {events:?}");
        for l in held {
            l.release().await.unwrap();
        }
        assert!(store.items.lock().unwrap().values().all(|r| r.is_released()));
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_due_close_together_share_a_wake_up_yet_stay_spread() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, rec) = client_capped(&store, open_settings("me", 10_000, Some(1000)), 0);
        let _held = hold(&c, 200).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (renewed, wakes) = renews_and_wake_ups(&store, 3000).await;
        assert!(
            (550..=650).contains(&renewed),
            "{renewed} heartbeats of 200 locks in 3 s"
        );
        // 200 random phases in a 1 s period: one wake-up per 50 ms window, and no window
        // without heartbeats for long.
        assert!(
            (35..=62).contains(&wakes),
            "{wakes} wake-ups for {renewed} heartbeats in 3 s"
        );
        assert!(rec.events().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn retried_heartbeats_stay_under_the_cap() {
        let (store, rec, _held) = hundred_locks_capped_at_200_per_second().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Every other write is throttled from here on: each failure is retried.
        for _ in 0..1000 {
            store.fault("renew", Fault::Fail(throttled()));
            store.fault("renew", Fault::Delay(Duration::ZERO));
        }
        let before = store.count("renew");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let writes = store.count("renew") - before;
        assert!(
            (360..=440).contains(&writes),
            "{writes} heartbeat writes (first attempts and retries) in 2 s at a cap of 200/s"
        );
        // One report per lock and period for one cause: retries within the period are quiet.
        let errors = rec
            .events()
            .iter()
            .filter(|e| matches!(e, LockEvent::Error(..)))
            .count();
        assert!(
            (100..=writes / 2).contains(&errors),
            "{errors} throttled heartbeats reported"
        );
    }

    /// One process waits ten minutes for a lock another holds and heartbeats, at the README's
    /// settings: its reads slow to one per half lease. A wait until aborted (a campaign's)
    /// keeps that pace, where acquisitions of `retryCount` 1 after one another each start it
    /// over.
    #[tokio::test(start_paused = true)]
    async fn a_long_wait_costs_a_few_reads_a_minute() {
        for until_aborted in [true, false] {
            let store = Arc::new(MemoryStore::new(true));
            let (holder, _) = client(&store, open_settings("holder", 10_000, Some(3_000)));
            let held = holder.acquire(key("k"), &Cancel::default()).await.unwrap();
            let (w, _) = client(&store, open_settings("waiter", 10_000, Some(3_000)));
            let cancel = Arc::new(Cancel::default());
            let waiting = tokio::spawn({
                let (w, cancel) = (w.clone(), cancel.clone());
                async move {
                    let end = Instant::now() + Duration::from_secs(600);
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        let place = w.join(&key("k"));
                        match w.acquire_joined(key("k"), place, None, until_aborted, &cancel).await {
                            Err(LockError::FailedToAcquireLock { .. }) if Instant::now() < end => continue,
                            other => break (other.map(|_| ()), attempts),
                        }
                    }
                }
            });
            tokio::time::sleep(Duration::from_secs(600)).await;
            // (The mark's renewals go by the wall clock, which paused time does not move: the
            // core's tests count them.)
            let gets = store.count("get");
            if until_aborted {
                assert!(gets <= 150, "at most 0.25 reads a second over ten minutes: {gets}");
                // metrics() counts them as waiting: every re-read, and the mark.
                let waiting = w.settings.stats.purpose(Purpose::Waiting as usize);
                assert_eq!(waiting as usize, gets + store.count("mark"));
                assert_eq!(
                    w.settings.stats.purpose(Purpose::Acquiring as usize),
                    1,
                    "the refused take"
                );
            } else {
                assert!(gets > 300, "each acquisition starts the pace over: {gets}");
            }
            held.release().await.unwrap();
            if until_aborted {
                let (won, attempts) = waiting.await.unwrap();
                assert!(won.is_ok(), "{won:?}");
                assert_eq!(attempts, 1);
                assert_eq!(
                    store.count("take"),
                    3,
                    "the holder's, the refused one and the winning one"
                );
            } else {
                cancel.cancel();
                let _ = waiting.await;
            }
        }
    }
}
