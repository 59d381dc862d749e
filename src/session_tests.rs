//! Sessions under paused time, over the in-memory store.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::client::Client;
use crate::error::LostReason;
use crate::item::{new_guid, session_key, Guid, GuidValue, LockKey, LockRecord, SESSION_LOCK_LEASE_MS};
use crate::lock::{HeldLock, LockEvent};
use crate::store::memory::{Fault, MemoryStore};
use crate::store::{Op, OpenFields, Reply};
use crate::testkit::*;
use dynamodb_lock_core::{force, op};

/// A client with `session: true` over `store`.
fn session_client(
    store: &Arc<MemoryStore>,
    owner: &str,
    lease_ms: u64,
    heartbeat_ms: u64,
) -> (Arc<Client>, Arc<Recorder>) {
    client(store, session_settings(owner, lease_ms, heartbeat_ms))
}

/// Acquires `key` through `c`'s session (heartbeated by `c`'s own scheduler).
async fn acquire(c: &Arc<Client>, k: LockKey) -> Arc<HeldLock> {
    let lock = c.acquire(k, &Cancel::default()).await.unwrap();
    assert!(lock.session.is_some(), "held through a session");
    lock
}

/// Acquires `k0`, `k1`, ... through `c`'s session.
async fn hold_s(c: &Arc<Client>, n: usize) -> Vec<Arc<HeldLock>> {
    let mut held = Vec::new();
    for i in 0..n {
        held.push(acquire(c, key(&format!("k{i}"))).await);
    }
    held
}

fn session_settings(owner: &str, lease_ms: u64, heartbeat_ms: u64) -> crate::settings::Settings {
    let mut s = open_settings(owner, lease_ms, Some(heartbeat_ms));
    s.session = true;
    s
}

fn session_id(lock: &HeldLock) -> String {
    lock.session.as_ref().expect("held through a session").id.clone()
}

fn skey(lock: &HeldLock) -> LockKey {
    session_key(&session_id(lock), false)
}

/// The events reported for `lock`.
fn events_of(rec: &Recorder, lock: &HeldLock) -> Vec<LockEvent> {
    rec.0
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| *id == lock.id)
        .map(|(_, e)| e.clone())
        .collect()
}

fn lost_count(rec: &Recorder, lock: &HeldLock) -> usize {
    events_of(rec, lock)
        .iter()
        .filter(|e| matches!(e, LockEvent::Lost(_)))
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_session_renews_once_per_period_for_many_locks_and_its_locks_write_nothing() {
    let store = Arc::new(MemoryStore::new(true));
    let (c, events) = session_client(&store, "me", 1000, 250);
    let locks = hold_s(&c, 50).await;
    assert_eq!(store.count("take"), 51, "one take per lock and one for the session");
    let sid = session_id(&locks[0]);
    assert!(locks.iter().all(|l| session_id(l) == sid), "one session for every lock");
    let before: Vec<LockRecord> = (0..50).map(|i| store.record(&key(&format!("k{i}"))).unwrap()).collect();
    for r in &before {
        assert_eq!(r.session.as_deref(), Some(sid.as_str()));
        assert_eq!(r.lease_duration_ms, Some(SESSION_LOCK_LEASE_MS));
    }
    let session_before = store.record(&skey(&locks[0])).expect("the session's item");
    assert_eq!(session_before.lease_duration_ms, Some(1000));
    assert_eq!(session_before.session, None);

    let requests = store.requests();
    let renews = store.count("renew");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let renewed = store.count("renew") - renews;
    // 2000 ms / 250 ms: about 8; per-lock heartbeats would be 400.
    assert!((6..=10).contains(&renewed), "{renewed} renewals in 2 s");
    assert_eq!(
        store.requests() - requests,
        renewed,
        "nothing but the session's renewals"
    );
    for (i, r) in before.iter().enumerate() {
        assert_eq!(
            store.record(&key(&format!("k{i}"))).as_ref(),
            Some(r),
            "lock {i} unchanged"
        );
    }
    let session_after = store.record(&skey(&locks[0])).unwrap();
    assert_ne!(
        session_after.guid, session_before.guid,
        "the renewals rotate the session's guid"
    );
    for l in &locks {
        let left = l.lease_remaining(Instant::now()).unwrap();
        assert!(left > Duration::ZERO && left <= Duration::from_millis(1000), "{left:?}");
    }
    assert!(events.0.lock().unwrap().is_empty(), "{:?}", events.events());

    // A released lock leaves the session; the others stay held, and the renewals go on.
    locks[0].release().await.unwrap();
    assert!(store.record(&key("k0")).unwrap().is_released());
    assert_eq!(locks[0].lease_remaining(Instant::now()), Some(Duration::ZERO));
    let renews = store.count("renew");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(store.count("renew") - renews >= 3);
    assert!(locks[1].lease_remaining(Instant::now()).unwrap() > Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_takes_a_crashed_sessions_lock_only_after_a_session_lease_ending_the_session_first() {
    let store = Arc::new(MemoryStore::new(true));
    let (holder, _) = session_client(&store, "holder", 1000, 250);
    let locks = hold_s(&holder, 3).await;
    let sk = skey(&locks[0]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The crash: the session's heartbeats stop.
    holder.close(Vec::new());
    let session_guid = store.record(&sk).unwrap().guid;

    let (w, _) = client(&store, open_settings("waiter", 1000, None));
    let sent_before = store.sent().len();
    let start = Instant::now();
    let waiter = tokio::spawn({
        let w = w.clone();
        async move { w.acquire(key("k1"), &Cancel::default()).await }
    });
    tokio::time::sleep(Duration::from_millis(950)).await;
    assert!(!waiter.is_finished(), "taken before a session lease went by");
    let session = store.record(&sk).unwrap();
    assert!(
        !session.is_released(),
        "the session is not ended before its lease went by"
    );
    assert_eq!(session.guid, session_guid);
    assert_eq!(store.record(&key("k1")).unwrap().owner.as_deref(), Some("holder"));

    let lock = waiter.await.unwrap().unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_millis(1300),
        "waited {waited:?}"
    );
    assert_eq!(lock.fencing_token, Some(2));
    let session = store.record(&sk).unwrap();
    assert!(session.is_released(), "the waiter ended the session");
    assert_eq!(session.guid, session_guid, "on the guid it waited out");
    let taken = store.record(&key("k1")).unwrap();
    assert_eq!(taken.owner.as_deref(), Some("waiter"));
    assert_eq!(taken.session, None);
    assert_eq!(taken.lease_duration_ms, Some(1000));
    // The session was ended before the lock was taken.
    let sent = store.sent()[sent_before..].to_vec();
    let end = sent.iter().position(|o| *o == "release").expect("the session's end");
    let take = sent.iter().rposition(|o| *o == "take").expect("the take");
    assert!(end < take, "{sent:?}");

    // The session is ended: its other locks are taken at once, without a second wait.
    let start = Instant::now();
    let other = w.acquire(key("k2"), &Cancel::default()).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(50),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(other.fencing_token, Some(2));
}

#[tokio::test(start_paused = true)]
async fn a_live_sessions_lock_is_not_taken_and_a_late_renewal_does_not_revive_an_ended_session() {
    let store = Arc::new(MemoryStore::new(true));
    let (holder, events) = session_client(&store, "holder", 1000, 250);
    let locks = hold_s(&holder, 2).await;
    let sk = skey(&locks[0]);

    // Live: a waiter with retryCount 0 gives up after a lease; the session is not ended.
    let mut s = open_settings("waiter", 1000, None);
    s.protocol.retry_count = 0;
    let (w, _) = client(&store, s);
    let err = w.acquire(key("k0"), &Cancel::default()).await.unwrap_err();
    assert_eq!(err.code(), "FailedToAcquireLock");
    assert!(!store.record(&sk).unwrap().is_released());
    assert_eq!(store.record(&key("k0")).unwrap().owner.as_deref(), Some("holder"));
    assert!(events.0.lock().unwrap().is_empty(), "{:?}", events.events());

    // A partition: every renewal from now on hangs. A waiter reads the session's item, waits a
    // whole lease on the version it saw, ends the session on its guid, then takes the lock.
    for _ in 0..50 {
        store.fault("renew", Fault::Hang);
    }
    let seen = store.record(&sk).unwrap().guid;
    let (w2, _) = client(&store, open_settings("waiter2", 1000, None));
    let start = Instant::now();
    let taken = w2.acquire(key("k0"), &Cancel::default()).await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(1000),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(taken.fencing_token, Some(2));
    let ended = store.record(&sk).unwrap();
    assert!(ended.is_released(), "{ended:?}");
    assert_eq!(ended.guid, seen);
    // A renewal on the guid the waiter saw, landing after the end (a late write of the
    // partitioned holder), is refused: the end is final.
    let Some(GuidValue::B(g)) = seen else {
        panic!("{seen:?}")
    };
    let g: Guid = g.try_into().unwrap();
    let fields = OpenFields {
        owner: "holder",
        lease_duration_ms: 1000,
        lock_acquired_time_unix_ms: None,
        data: None,
        ttl: None,
        token_floor: 0,
        session: None,
    };
    // (Applied as the memory store applies a request; its queued faults are the holder's.)
    let renewal = Op::Renew {
        guids: &[g],
        new_guid: &new_guid(),
        fields: &fields,
    };
    let (after, reply) = op::apply(&renewal, store.record(&sk));
    assert!(matches!(reply, Reply::Refused(_)), "a late renewal applied: {reply:?}");
    assert_eq!(after, Some(ended.clone()));
    assert_eq!(store.record(&sk), Some(ended), "the ended session stays ended");
    tokio::time::sleep(Duration::from_millis(500)).await;
    for l in &locks {
        assert_eq!(lost_count(&events, l), 1, "{:?}", events_of(&events, l));
        assert_eq!(l.lease_remaining(Instant::now()), Some(Duration::ZERO));
    }
    assert_eq!(store.record(&key("k0")).unwrap().owner.as_deref(), Some("waiter2"));
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_session_reports_every_lock_in_danger_then_lost_no_later_than_its_deadline() {
    let store = Arc::new(MemoryStore::new(true));
    let (c, events) = session_client(&store, "me", 1000, 250);
    let locks = hold_s(&c, 5).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Every renewal from now on hangs.
    for _ in 0..50 {
        store.fault("renew", Fault::Hang);
    }
    let deadline = locks[0].lease_until().unwrap();
    assert!(
        locks.iter().all(|l| l.lease_until() == Some(deadline)),
        "one lease for all"
    );
    let mut lost_at = vec![None; locks.len()];
    for _ in 0..3000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        for (i, l) in locks.iter().enumerate() {
            if lost_at[i].is_none() && lost_count(&events, l) > 0 {
                lost_at[i] = Some(Instant::now());
            }
        }
        if lost_at.iter().all(Option::is_some) {
            break;
        }
    }
    for (i, l) in locks.iter().enumerate() {
        let at = lost_at[i].unwrap_or_else(|| panic!("lock {i} never lost: {:?}", events_of(&events, l)));
        // Paused time is stepped 1 ms at a time: "lost" is seen in the step of the deadline.
        assert!(
            at <= deadline + Duration::from_millis(1),
            "lock {i} lost {:?} after the deadline",
            at - deadline
        );
        let ev = events_of(&events, l);
        let danger = ev.iter().position(|e| matches!(e, LockEvent::Danger { .. }));
        let lost = ev.iter().position(|e| *e == LockEvent::Lost(LostReason::LeaseExpired));
        assert!(danger.is_some() && lost.is_some() && danger < lost, "lock {i}: {ev:?}");
        assert_eq!(lost, Some(ev.len() - 1), "nothing after lost: {ev:?}");
        assert_eq!(l.lease_remaining(Instant::now()), Some(Duration::ZERO));
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_renewal_reports_every_lock_lost_and_the_next_acquisition_starts_a_new_session() {
    let store = Arc::new(MemoryStore::new(true));
    let (c, events) = session_client(&store, "me", 1000, 250);
    let locks = hold_s(&c, 4).await;
    let sk = skey(&locks[0]);
    let old = session_id(&locks[0]);
    // Someone else's item where the session's was: the next renewal is refused.
    let mut usurper = store.record(&sk).unwrap();
    usurper.guid = Some(GuidValue::B(vec![7; 64]));
    usurper.owner = Some("usurper".into());
    store.set(&sk, usurper.clone());
    let start = Instant::now();
    let deadline = locks[0].lease_until().unwrap();
    let mut all_lost = None;
    for _ in 0..2000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if locks.iter().all(|l| lost_count(&events, l) > 0) {
            all_lost = Some(Instant::now());
            break;
        }
    }
    let at = all_lost.unwrap_or_else(|| panic!("not every lock lost: {:?}", events.events()));
    assert!(
        at - start <= Duration::from_millis(260),
        "lost {:?} after the item changed",
        at - start
    );
    assert!(at <= deadline);
    for l in &locks {
        let ev = events_of(&events, l);
        assert!(ev.contains(&LockEvent::Lost(LostReason::NotOwner)), "{ev:?}");
        assert_eq!(lost_count(&events, l), 1, "{ev:?}");
        assert_eq!(l.lease_remaining(Instant::now()), Some(Duration::ZERO));
    }
    assert_eq!(store.record(&sk), Some(usurper), "the usurper's item is left alone");
    // A lock released after the loss is released quietly, and a new acquisition starts a new session.
    let _ = locks[1].release().await;
    let next = acquire(&c, key("fresh")).await;
    assert_ne!(session_id(&next), old, "a lost session stays lost");
    assert!(next.lease_remaining(Instant::now()).unwrap() > Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(lost_count(&events, &next), 0, "{:?}", events_of(&events, &next));
}

/// An operator revokes one lock held through a session as `forceRelease` does, through the
/// core's machine (`force::Force`): named on the session's item first, then moved out of the
/// session on the version read. The session's next renewal reads the name back: that lock, and
/// no other, is lost then, and it stays releasable.
#[tokio::test(start_paused = true)]
async fn an_operators_revocation_loses_that_lock_alone_at_the_sessions_next_renewal() {
    let store = Arc::new(MemoryStore::new(true));
    let (c, events) = session_client(&store, "me", 1000, 250);
    let locks = hold_s(&c, 3).await;
    let sk = skey(&locks[0]);
    let item = store.record(&locks[0].key).unwrap();
    let Some(GuidValue::B(g)) = item.guid.clone() else {
        panic!("{item:?}")
    };
    let forced = (c.shared).force_release(&locks[0].key, false, Some(item), Duration::from_secs(1));
    let forced = forced.await;
    assert_eq!(forced, Ok(force::Forced::Revoked { free_after_ms: 1000 }));
    assert_eq!(
        store.record(&sk).unwrap().revoked,
        vec![g],
        "named on the session's item"
    );
    let new = store.record(&locks[0].key).unwrap().guid;
    let start = Instant::now();
    while lost_count(&events, &locks[0]) == 0 && start.elapsed() < Duration::from_millis(1000) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        start.elapsed() <= Duration::from_millis(260),
        "lost {:?} after the revocation: {:?}",
        start.elapsed(),
        events.events()
    );
    assert_eq!(
        events_of(&events, &locks[0]),
        vec![LockEvent::Lost(LostReason::NotOwner)]
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for l in &locks[1..] {
        assert_eq!(lost_count(&events, l), 0, "{:?}", events_of(&events, l));
        assert!(l.lease_remaining(Instant::now()).unwrap() > Duration::ZERO);
    }
    assert_eq!(lost_count(&events, &locks[0]), 1, "told once");
    // Its release is quiet and leaves the revoked item to its waiters.
    locks[0].release().await.expect("released quietly");
    assert_eq!(store.record(&locks[0].key).unwrap().guid, new);
}

/// Near the end of the session's lease, the session counts as alive exactly as long as the
/// core's heartbeat does not declare it lost: not in the last timer grain, where the
/// heartbeat has already reported the loss.
#[tokio::test(start_paused = true)]
async fn a_session_is_alive_until_the_moment_its_heartbeat_declares_it_lost() {
    let store = Arc::new(MemoryStore::new(true));
    let (c, _events) = session_client(&store, "me", 1000, 300);
    let lock = acquire(&c, key("a")).await;
    let session = lock.session.clone().expect("a session");
    let until = session.lock.lease_until().expect("a lease");
    let grain = crate::settings::TIMER_GRAIN;
    assert!(session.alive_at(until - grain - Duration::from_micros(1)));
    assert!(
        !session.alive_at(until - grain),
        "lost from a grain before the end, as the heartbeat says"
    );
    assert!(!session.alive_at(until - grain / 2));
    assert!(!session.alive_at(until));
}

/// A take through a session answered within its own lease but after the session was declared
/// lost grants nothing: the acquisition machine gives the lock back at once, and the
/// acquisition starts again through a new session, which finds the lock free.
#[tokio::test(start_paused = true)]
async fn a_take_answered_after_its_session_was_lost_is_given_back_at_once() {
    let store = Arc::new(MemoryStore::new(true));
    let mut s = session_settings("me", 1000, 250);
    s.protocol.request_timeout = Duration::from_millis(3000);
    let (c, _) = client(&store, s);
    let first = acquire(&c, key("a")).await;
    let old = session_id(&first);
    // The session's renewals hang from now on: it is lost about 1 s after it began.
    for _ in 0..50 {
        store.fault("renew", Fault::Hang);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    // The take of "b" is answered 500 ms after it is sent: after the session's deadline, well
    // within the lock's own lease.
    store.fault("take", Fault::Delay(Duration::from_millis(500)));
    let start = Instant::now();
    let lock = c.acquire(key("b"), &Cancel::default()).await.unwrap();
    assert_eq!(store.count("release"), 1, "the late take was given back");
    assert_eq!(lock.fencing_token, Some(2), "taken again, one token higher");
    assert_ne!(session_id(&lock), old, "through a new session");
    assert!(
        start.elapsed() < Duration::from_millis(600),
        "no session lease waited out: {:?}",
        start.elapsed()
    );
}

/// A lock left by `close()` (its heartbeats stopped, as `abandon` does) is reported lost at
/// the moment a heartbeat would declare the loss, a timer grain before its lease ends, so that
/// its holder hears before any rival can be granted it; through a session, at the session's.
#[tokio::test(start_paused = true)]
async fn an_abandoned_lock_is_lost_a_timer_grain_before_its_lease_ends() {
    use crate::settings::TIMER_GRAIN;
    let store = Arc::new(MemoryStore::new(true));
    let (own, own_events) = client(&store, open_settings("own", 1000, Some(250)));
    let (sessions, session_events) = session_client(&store, "sessions", 1000, 250);
    let per_lock = own.acquire(key("p"), &Cancel::default()).await.unwrap();
    let through = hold_s(&sessions, 1).await.remove(0);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let own_abandoned = own.close(vec![per_lock.clone()]);
    let session_abandoned = sessions.close(vec![through.clone()]);
    assert_eq!(own_abandoned.len(), 1);
    assert_eq!(
        session_abandoned.len(),
        2,
        "the session's item and the lock held through it"
    );
    // Each lease ends where its last renewal put it (heartbeats start at random points):
    // the earlier one is looked at first.
    let mut cases: Vec<_> = [(&per_lock, &own_events), (&through, &session_events)]
        .into_iter()
        .map(|(l, e)| (l, e, l.lease_until().expect("a lease")))
        .collect();
    cases.sort_by_key(|c| c.2);
    tokio::spawn(HeldLock::lapse(own_abandoned));
    tokio::spawn(HeldLock::lapse(session_abandoned));
    let lost = |events: &Recorder| events.events().contains(&LockEvent::Lost(LostReason::LeaseExpired));
    for n in 0..cases.len() {
        let (lock, events, until) = cases[n];
        // Paused time moves in whole milliseconds: the last one before the loss moment. Two
        // leases may end in the same millisecond: then the first case looked at both then.
        let before = until - TIMER_GRAIN - Duration::from_millis(1);
        if before >= Instant::now() {
            tokio::time::sleep_until(before).await;
            for (_, later, _) in &cases[n..] {
                assert!(!lost(later), "lost before the loss moment: {:?}", later.events());
            }
        }
        tokio::time::sleep_until(until - TIMER_GRAIN).await;
        tokio::task::yield_now().await;
        assert!(
            lost(events),
            "lost at the loss moment, {:?} before the lease ends: {:?}",
            TIMER_GRAIN,
            events.events()
        );
        assert_eq!(lock.lease_remaining(Instant::now()), Some(Duration::ZERO));
    }
}
