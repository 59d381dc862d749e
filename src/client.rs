//! A configured lock client: what its locks share (`lock::Shared`, which it derefs to), and
//! acquisition of every kind, with the local line of acquisitions of one id.

use std::sync::Arc;

use dynamodb_lock_core::client::GiveBack;
use dynamodb_lock_core::local::{self, Patience};
use dynamodb_lock_core::settings;

use crate::cancel::Cancel;
use crate::clock::Clock;
use crate::error::{LockError, LostReason};
use crate::heartbeat::LazyHeartbeats;
use crate::item::{LockData, LockKey};
use crate::line::{InLine, Place, Turn};
use crate::lock::{EventSink, HeldLock, Shared};
use crate::queues::Queues;
use crate::settings::Settings;
use crate::store::Store;
use crate::{fail_closed, fail_open, fifo, original};
use dynamodb_lock_core::settings::Kind;

pub struct Client {
    /// What this client's held locks share with it: `client.settings`, `client.store`, ...
    pub shared: Arc<Shared>,
}

impl std::ops::Deref for Client {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl Client {
    pub fn new(
        store: Arc<dyn Store>,
        settings: Settings,
        events: Arc<dyn EventSink>,
        heartbeats: LazyHeartbeats,
        fifo: Queues,
    ) -> Client {
        Client {
            shared: Arc::new(Shared::new(
                Clock::start(),
                store,
                settings,
                events,
                Box::new(heartbeats),
                fifo,
            )),
        }
    }

    /// Acquires the lock `key`. Acquisitions of one id by this client form a line: only the
    /// first speaks to DynamoDB, the others wait for their turn and are handed the lock by
    /// the release before them. A cancelled acquisition leaves no lock behind: a write that
    /// landed after cancellation is released before `Aborted` is returned.
    #[cfg(test)]
    pub async fn acquire(self: &Arc<Self>, key: LockKey, cancel: &Cancel) -> Result<Arc<HeldLock>, LockError> {
        self.acquire_with_data(key, None, cancel).await
    }

    /// `acquire`, storing `data` with the lock (FailClosed, FailOpen).
    #[cfg(test)]
    pub async fn acquire_with_data(
        self: &Arc<Self>,
        key: LockKey,
        data: Option<&LockData>,
        cancel: &Cancel,
    ) -> Result<Arc<HeldLock>, LockError> {
        let place = self.join(&key);
        self.acquire_joined(key, place, data, false, cancel).await
    }

    /// Takes this acquisition's place in the local line of `key` (FailClosed, FailOpen; Fifo
    /// has none): the order of the calls is the order of the turns.
    pub fn join(&self, key: &LockKey) -> Option<Place> {
        (self.settings.protocol.kind != Kind::Fifo && !self.settings.original_requests).then(|| self.lines.join(key))
    }

    /// Acquires `key` from the place `join` gave, storing `data` with the lock (FailClosed,
    /// FailOpen). `until_aborted` (FailOpen): wait until the lock is taken or `cancel` ends the
    /// wait, whatever `retryCount` says.
    pub async fn acquire_joined(
        self: &Arc<Self>,
        key: LockKey,
        place: Option<Place>,
        data: Option<&LockData>,
        until_aborted: bool,
        cancel: &Cancel,
    ) -> Result<Arc<HeldLock>, LockError> {
        if self.settings.original_requests {
            // The original's sequence: every acquisition speaks to the store for itself.
            let taken = original::acquire(&self.shared, &key, cancel).await?;
            let lock = HeldLock::new(
                self.shared.clone(),
                key,
                taken.guid,
                taken.fencing_token,
                taken.sent_at,
                None,
            );
            return self.start_lock(lock.shared(), cancel).await;
        }
        let Some(place) = place else {
            let locks = fifo::acquire(
                &self.shared,
                vec![key.partition],
                None,
                Some(settings::FIFO_WAIT),
                cancel,
            );
            return locks
                .await?
                .pop()
                .ok_or_else(|| LockError::Internal("no lock granted".into()));
        };
        let handed = match place {
            Place::Head => None,
            Place::Queued(waiter) => {
                // Another acquisition of this client holds the lock or asks for it first.
                cancel.waiting(None);
                self.wait_in_line(&key, waiter, cancel).await?
            }
        };
        let (lock, handed) = match handed {
            Some(lock) => (lock, true),
            None => match self.acquire_for_line(&key, data, until_aborted, cancel).await {
                Ok(lock) => (lock, false),
                Err(e) => {
                    self.lines.unused(&key);
                    return Err(self.explain_keys(e, &key));
                }
            },
        };
        let lock = lock.shared();
        self.lines.holds(lock.id);
        // A hand-over removes the previous holder's data: this holder writes its own.
        if handed && data.is_some() {
            if let Err(e) = lock.update_data(data.cloned()).await {
                let _ = lock.release().await;
                return Err(e);
            }
        }
        self.start_lock(lock, cancel).await
    }

    /// A refusal of the lock's key by DynamoDB (a key attribute named or typed otherwise than
    /// the table's), told with the table, the key attributes and the types this lock id has.
    pub fn explain_keys(&self, e: LockError, key: &LockKey) -> LockError {
        self.fifo.names.explain_keys(e, "this client's lock ids", |n| {
            let mut needs = format!(
                "its partition key must be \"{}\" of type {}, as the lock id is",
                n.partition_key,
                key_type(&key.partition)
            );
            match (&key.sort, n.sort_key.as_str()) {
                (Some(sort), name) if !name.is_empty() => needs.push_str(&format!(
                    ", and its sort key \"{name}\" of type {}, as the id's sort value is",
                    key_type(sort)
                )),
                _ => needs.push_str(", with no sort key (set `sortKey` for a table that has one)"),
            }
            needs
        })
    }

    /// Starts the heartbeats (or the lease timer) of a lock just acquired, or releases it, as
    /// the client machine says (`client::Client::start`).
    async fn start_lock(self: &Arc<Self>, lock: Arc<HeldLock>, cancel: &Cancel) -> Result<Arc<HeldLock>, LockError> {
        let through = lock.session.as_ref().map(|s| s.lock.id);
        let started = self
            .machine()
            .start(lock.id, through, cancel.is_cancelled(), self.clock.now());
        if let Err(why) = started {
            // Best effort: the release retries through transient faults on its own.
            let _ = lock.release().await;
            return Err(match why {
                GiveBack::Aborted => LockError::Aborted,
                GiveBack::Lapsed => LockError::Lost(LostReason::LeaseExpired),
            });
        }
        // Held through a session, the session's heartbeats keep it.
        if lock.session.is_none() {
            self.heartbeats.watch(&lock);
        }
        Ok(lock)
    }

    /// Waits in the line until the lock is handed over (`Some`) or it is this waiter's turn
    /// to ask DynamoDB (`None`), for as long as the line's patience (`local::Local`) allows.
    async fn wait_in_line(
        self: &Arc<Self>,
        key: &LockKey,
        mut waiter: InLine,
        cancel: &Cancel,
    ) -> Result<Option<HeldLock>, LockError> {
        let turn = loop {
            let until = match self.lines.patience(key, &waiter) {
                Patience::Waits(until) => self.clock.base + until,
                Patience::GivesUp => return Err(LockError::not_acquired()),
                Patience::Turned => break (&mut waiter.turn).await.ok(),
            };
            tokio::select! {
                turn = &mut waiter.turn => break turn.ok(),
                r = cancel.sleep_until(until) => if let Err(e) = r {
                    // The turn came as we gave up: pass it on.
                    if let Some(turn) = self.lines.quit(key, &mut waiter) {
                        match self.handed(key, turn) {
                            Some(lock) => {
                                self.lines.holds(lock.id);
                                let _ = lock.release().await;
                            }
                            None => self.lines.unused(key),
                        }
                    }
                    return Err(e);
                },
            }
        };
        // A dropped sender means the line ended without a turn for us: try for ourselves.
        Ok(turn.and_then(|t| self.handed(key, t)))
    }

    /// The lock a `Turn::Handed` carries: handed over within a session, it is held through
    /// it only while that session is still the client's (`local::takes_handed`); otherwise the
    /// lock went with the old session, and the next in line tries for itself (and waits out
    /// the old session).
    fn handed(self: &Arc<Self>, key: &LockKey, turn: Turn) -> Option<HeldLock> {
        let Turn::Handed {
            guid,
            fencing_token,
            sent_at,
            session,
        } = turn
        else {
            return None;
        };
        let current = self.sessions.current().clone();
        if !local::takes_handed(session.as_ref(), current.as_ref().map(|s| &s.id)) {
            return None;
        }
        let session = session.and(current);
        Some(HeldLock::new(
            self.shared.clone(),
            key.clone(),
            guid,
            fencing_token,
            sent_at,
            session,
        ))
    }

    /// Acquires `key` from DynamoDB for the line.
    async fn acquire_for_line(
        self: &Arc<Self>,
        key: &LockKey,
        data: Option<&LockData>,
        until_aborted: bool,
        cancel: &Cancel,
    ) -> Result<HeldLock, LockError> {
        Ok(match self.settings.protocol.kind {
            Kind::Fifo => return Err(LockError::Internal("a Fifo lock has no local line".into())),
            Kind::FailClosed => {
                let guid = fail_closed::acquire(self, key, data, cancel).await?;
                HeldLock::new(self.shared.clone(), key.clone(), guid, None, crate::clock::now(), None)
            }
            Kind::FailOpen => {
                let mut restarts = 0u32;
                let (session, taken) = loop {
                    let session = match self.settings.session {
                        true => Some(self.sessions.get(self, key.sort.is_some(), cancel).await?),
                        false => None,
                    };
                    match fail_open::acquire(self, key, data, until_aborted, session.as_deref(), cancel).await {
                        // The session ended while this acquisition waited (its item lapsed, or
                        // vanished): the lock it took was given back. It tries again through a
                        // new session, as often as its retries allow (`client::Client::restarts`).
                        Err(LockError::Lost(LostReason::LeaseExpired))
                            if session.as_ref().is_some_and(|s| {
                                let retry_count = self.settings.protocol.retry_count;
                                let now = self.clock.now();
                                self.machine()
                                    .restarts(s.lock.id, now, restarts, retry_count, until_aborted)
                            }) =>
                        {
                            restarts += 1;
                        }
                        taken => break (session, taken?),
                    }
                };
                let lock = HeldLock::new(
                    self.shared.clone(),
                    key.clone(),
                    taken.guid,
                    Some(taken.fencing_token),
                    taken.sent_at,
                    session,
                );
                if taken.contended {
                    self.machine().contended(lock.id);
                }
                lock
            }
        })
    }
}

/// A key value's DynamoDB type, for people.
fn key_type(v: &crate::item::KeyValue) -> &'static str {
    match v {
        crate::item::KeyValue::S(_) => "S (a string)",
        crate::item::KeyValue::N(_) => "N (a number)",
        crate::item::KeyValue::B(_) => "B (binary)",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::Client;
    use crate::cancel::Cancel;
    use crate::clock::unix_now_ms;
    use crate::error::LockError;
    use crate::lock::HeldLock;
    use crate::store::memory::MemoryStore;
    use crate::store::{StoreOps, WaitMark};
    use crate::testkit::*;

    /// A FailClosed release whose delete landed but was not answered, and whose settling
    /// reads failed too, fails; called again, it finds the item gone and reports the lock
    /// released (not `FailedToReleaseLock`): the earlier attempt may have landed.
    #[tokio::test(start_paused = true)]
    async fn a_release_called_again_after_one_that_may_have_landed_succeeds() {
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("a"));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        store.fault("delete", Fault::ApplyThenFail(lost_response()));
        for _ in 0..20 {
            store.fault("delete", Fault::Fail(lost_response()));
            store.fault("get", Fault::Fail(lost_response()));
        }
        let first = lock.release().await;
        assert!(matches!(first, Err(LockError::Store(_))), "{first:?}");
        assert!(store.record(&key("k")).is_none(), "the first release's delete landed");
        store.clear_faults();
        assert!(lock.release().await.unwrap(), "released");
    }

    /// `n` tasks of one client ask for one lock at once, each holds it `hold` and releases;
    /// returns (task, fencing token, acquired at, released at) in grant order.
    async fn pool(c: &Arc<Client>, n: usize, hold: Duration) -> Vec<(usize, Option<u64>, Instant, Instant)> {
        let done = Arc::new(std::sync::Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let (c, done) = (c.clone(), done.clone());
                tokio::spawn(async move {
                    // Arrival order: task i asks i ms after the start.
                    tokio::time::sleep(Duration::from_millis(i as u64)).await;
                    let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
                    let at = Instant::now();
                    tokio::time::sleep(hold).await;
                    let out = Instant::now();
                    done.lock().unwrap().push((i, lock.fencing_token, at, out));
                    lock.release().await.unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let mut v = done.lock().unwrap().clone();
        v.sort_by_key(|r| r.2);
        v
    }

    #[tokio::test(start_paused = true)]
    async fn a_failopen_line_is_served_in_arrival_order_by_handovers() {
        let store = Arc::new(MemoryStore::new(false));
        let (c, events) = client(&store, open_settings("me", 10_000, Some(3_000)));
        let grants = pool(&c, 5, Duration::from_millis(10)).await;
        let order: Vec<usize> = grants.iter().map(|g| g.0).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4], "arrival order");
        let tokens: Vec<Option<u64>> = grants.iter().map(|g| g.1).collect();
        assert_eq!(tokens, (1..=5).map(Some).collect::<Vec<_>>(), "one token per holder");
        for w in grants.windows(2) {
            assert!(w[1].2 >= w[0].3, "no overlap");
        }
        let idle = grants.last().unwrap().3 - grants[0].2 - Duration::from_millis(50);
        assert!(
            idle <= Duration::from_millis(5),
            "lock idle {idle:?} between five holders"
        );
        assert_eq!(store.count("take"), 1, "only the first asks DynamoDB");
        assert_eq!(store.count("handover"), 4, "each release hands over with one write");
        assert_eq!(store.count("release"), 1);
        assert_eq!(store.count("get"), 0, "nobody polls");
        let rec = store.record(&key("k")).unwrap();
        assert!(rec.is_released());
        assert_eq!(rec.fencing_token, Some(5));
        assert!(events.events().is_empty());
        assert!(!c.lines.has_line(&key("k")), "the line ended");
    }

    /// The acquisition in line is aborted while the hand-over's write is on the wire: the
    /// write lands, nobody takes the lock, and the release that follows frees the item under
    /// the `guid` the hand-over wrote (the core's `Ending::unclaimed`), so that a rival takes
    /// it at once.
    #[tokio::test(start_paused = true)]
    async fn a_hand_over_nobody_takes_is_released_under_its_guid() {
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(false));
        let (c, events) = client(&store, open_settings("me", 10_000, Some(3_000)));
        let first = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        let cancel = Arc::new(Cancel::default());
        let second = tokio::spawn({
            let (c, cancel) = (c.clone(), cancel.clone());
            async move { c.acquire(key("k"), &cancel).await }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        store.fault("handover", Fault::Delay(Duration::from_millis(100)));
        let release = tokio::spawn(async move { first.release().await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
        assert!(matches!(second.await.unwrap(), Err(LockError::Aborted)));
        assert!(release.await.unwrap().unwrap(), "released, and it was ours");
        assert_eq!(store.count("handover"), 1, "the hand-over landed");
        assert_eq!(store.count("release"), 1);
        assert!(
            store.record(&key("k")).unwrap().is_released(),
            "freed under the new guid"
        );
        let (rival, _) = client(&store, open_settings("rival", 10_000, Some(3_000)));
        let taken = rival.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert_eq!(
            taken.fencing_token,
            Some(3),
            "after the holder's 1 and the hand-over's 2"
        );
        assert_eq!(store.count("get"), 0, "taken at once, with no wait");
        assert!(events.events().is_empty(), "{:?}", events.events());
        assert!(!c.lines.has_line(&key("k")), "the line ended");
    }

    #[tokio::test(start_paused = true)]
    async fn data_belongs_to_the_holder_across_hand_overs() {
        use crate::item::LockData;
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, open_settings("me", 10_000, Some(3_000)));
        let first = c
            .acquire_with_data(key("k"), Some(&LockData::S("a".into())), &Cancel::default())
            .await
            .unwrap();
        let data = |store: &MemoryStore| store.record(&key("k")).unwrap().data.map(|d| *d);
        assert_eq!(data(&store), Some(LockData::S("a".into())));
        let second = tokio::spawn({
            let c = c.clone();
            async move {
                c.acquire_with_data(key("k"), Some(&LockData::B(vec![1, 2])), &Cancel::default())
                    .await
                    .unwrap()
            }
        });
        let third = tokio::spawn({
            let c = c.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                c.acquire(key("k"), &Cancel::default()).await.unwrap()
            }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        first.release().await.unwrap();
        let second = second.await.unwrap();
        assert_eq!(store.count("handover"), 1);
        assert_eq!(
            data(&store),
            Some(LockData::B(vec![1, 2])),
            "the next holder wrote its own"
        );
        second.update_data(Some(LockData::S("c".into()))).await.unwrap();
        assert_eq!(data(&store), Some(LockData::S("c".into())));
        second.release().await.unwrap();
        let third = third.await.unwrap();
        assert_eq!(
            data(&store),
            None,
            "a holder without data leaves none of the previous holder's"
        );
        assert_eq!(third.fencing_token, Some(3));
        third.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_that_comes_after_the_whole_lease_grants_nothing() {
        use crate::error::LostReason;
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 1000, Some(250));
        s.protocol.request_timeout = Duration::from_millis(3000);
        let (c, _) = client(&store, s);
        // The write lands at once; its answer comes 1.5 s later, after the 1 s lease.
        store.fault("take", Fault::Delay(Duration::from_millis(1500)));
        let err = c.acquire(key("k"), &Cancel::default()).await.unwrap_err();
        assert!(matches!(err, LockError::Lost(LostReason::LeaseExpired)), "{err:?}");
        let rec = store.record(&key("k")).expect("the item");
        assert!(rec.is_released(), "the write that landed is released: {rec:?}");
        // Without the delay the same client takes it, one token higher.
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert_eq!(lock.fencing_token, Some(2));
        lock.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_of_a_lock_taken_by_another_reports_it_lost() {
        use crate::error::LostReason;
        use crate::item::LockData;
        use crate::lock::LockEvent;
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, closed_settings("me"));
        let lock = c
            .acquire_with_data(key("k"), Some(&LockData::S("a".into())), &Cancel::default())
            .await
            .unwrap();
        let mut rec = store.record(&key("k")).unwrap();
        rec.guid = Some(crate::item::GuidValue::B(vec![7; 64]));
        store.set(&key("k"), rec);
        let err = lock.update_data(Some(LockData::S("b".into()))).await.unwrap_err();
        assert_eq!(err, LockError::Lost(LostReason::NotOwner));
        assert_eq!(events.events(), vec![LockEvent::Lost(LostReason::NotOwner)]);
        let rec = store.record(&key("k")).unwrap();
        assert_eq!(rec.data.map(|d| *d), Some(LockData::S("a".into())), "not written");
        assert_eq!(
            lock.update_data(None).await.unwrap_err(),
            LockError::Lost(LostReason::NotOwner),
            "a lost lock writes nothing"
        );
        assert_eq!(store.count("set_data"), 1);
    }

    /// Another holder took the item: the heartbeat on the wire as an update starts is refused
    /// and loses the lock; the update's refusal that follows reports nothing more ("lost"
    /// comes once) and fails the update.
    #[tokio::test(start_paused = true)]
    async fn an_update_refused_after_a_heartbeat_lost_the_lock_reports_no_second_loss() {
        use crate::error::LostReason;
        use crate::item::LockData;
        use crate::lock::LockEvent;
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 10_000, Some(1_000)));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        store.fault("renew", Fault::Delay(Duration::from_millis(300)));
        store.fault("set_data", Fault::Delay(Duration::from_millis(600)));
        while store.count("renew") == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut rec = store.record(&key("k")).unwrap();
        rec.guid = Some(crate::item::GuidValue::B(vec![7; 64]));
        store.set(&key("k"), rec);
        let err = lock.update_data(Some(LockData::S("x".into()))).await.unwrap_err();
        assert_eq!(err, LockError::Lost(LostReason::NotOwner));
        assert_eq!(store.count("set_data"), 1, "the update was sent beside the heartbeat");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lost: Vec<_> = events
            .events()
            .into_iter()
            .filter(|e| matches!(e, LockEvent::Lost(_)))
            .collect();
        assert_eq!(lost, vec![LockEvent::Lost(LostReason::NotOwner)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_heartbeat_due_while_an_update_writes_starts_once_it_has_landed() {
        use crate::item::LockData;
        use crate::lock::LockEvent;
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 10_000, Some(1_000)));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        // Past the first heartbeat, at a random point of the first period.
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let before = store.count("renew");
        assert!(before >= 1, "a heartbeat renewed the lease");
        // The update takes two periods: the heartbeats due meanwhile wait for it, as a new
        // guid landing would fail its condition.
        store.fault("set_data", Fault::Delay(Duration::from_millis(2_000)));
        let start = Instant::now();
        lock.update_data(Some(LockData::S("x".into()))).await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(2_000));
        assert_eq!(store.count("renew"), before, "no heartbeat while the update wrote");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            store.count("renew"),
            before + 1,
            "the heartbeat due meanwhile starts at once"
        );
        tokio::time::sleep(Duration::from_millis(3_000)).await;
        assert!(
            store.count("renew") >= before + 3,
            "and the next ones follow a period apart"
        );
        let rec = store.record(&key("k")).unwrap();
        assert_eq!(rec.data.map(|d| *d), Some(LockData::S("x".into())));
        assert!(
            !events.events().iter().any(|e| matches!(e, LockEvent::Lost(_))),
            "{:?}",
            events.events()
        );
        lock.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_go_on_after_an_update_whose_task_is_dropped() {
        use crate::item::LockData;
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(true));
        let (c, _events) = client(&store, open_settings("me", 10_000, Some(1_000)));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        store.fault("set_data", Fault::Hang);
        let updating = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.update_data(Some(LockData::S("x".into()))).await })
        };
        // Past the first heartbeat's due time: it is parked behind the update.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(store.count("renew"), 0, "no heartbeat while the update writes");
        updating.abort();
        assert!(updating.await.unwrap_err().is_cancelled());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            store.count("renew"),
            1,
            "the parked heartbeat starts once the update is gone"
        );
        tokio::time::sleep(Duration::from_millis(3_000)).await;
        assert!(store.count("renew") >= 4, "{} heartbeats", store.count("renew"));
        lock.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_that_hangs_leaves_the_heartbeats_half_the_lease() {
        use crate::item::LockData;
        use crate::lock::LockEvent;
        use crate::store::memory::Fault;
        let store = Arc::new(MemoryStore::new(true));
        let (c, events) = client(&store, open_settings("me", 10_000, Some(3_000)));
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        for _ in 0..8 {
            store.fault("set_data", Fault::Hang);
        }
        let start = Instant::now();
        let err = lock.update_data(Some(LockData::S("x".into()))).await.unwrap_err();
        assert_eq!(err.code(), "TimeoutError");
        assert!(start.elapsed() <= Duration::from_millis(5_000), "{:?}", start.elapsed());
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(
            !events.events().iter().any(|e| matches!(e, LockEvent::Lost(_))),
            "{:?}",
            events.events()
        );
        assert!(store.count("renew") >= 6, "{} heartbeats", store.count("renew"));
        lock.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn with_ttl_items_carry_it_and_a_recreated_item_keeps_tokens_rising() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 10_000, None);
        s.ttl = Some(dynamodb_lock_core::settings::Expiry {
            attribute: "expires".into(),
            seconds: 3600,
        });
        let (c, _) = client(&store, s);
        let now_s = unix_now_ms() / 1000;
        let lock = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        let first = lock.fencing_token.unwrap();
        assert!(first > crate::item::token_floor(unix_now_ms() - 1_000), "{first}");
        let ttl = |store: &MemoryStore| *store.ttls.lock().unwrap().get(&key("k")).unwrap();
        assert!(
            (now_s + 10 + 3600..=now_s + 10 + 3601).contains(&ttl(&store)),
            "lease + ttlSeconds"
        );
        lock.release().await.unwrap();
        assert!(
            (now_s + 3600..=now_s + 3601).contains(&ttl(&store)),
            "ttlSeconds after release"
        );
        let again = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert_eq!(again.fencing_token, Some(first + 1), "an item that is there counts on");
        again.release().await.unwrap();
        // DynamoDB's TTL deletes the released item; the id is taken again later.
        store.items.lock().unwrap().remove(&key("k"));
        // The floor reads the wall clock, which paused tokio time does not move; in use, TTL
        // deletes an item an hour or more after its last write.
        std::thread::sleep(Duration::from_millis(2));
        let recreated = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        assert!(recreated.fencing_token.unwrap() > first + 1, "tokens never go back");
        recreated.release().await.unwrap();
        // Without TTL, an absent item counts from 0, as the original does.
        let (plain, _) = client(&store, open_settings("plain", 10_000, None));
        let lock = plain.acquire(key("other"), &Cancel::default()).await.unwrap();
        assert_eq!(lock.fencing_token, Some(1));
        assert!(!store.ttls.lock().unwrap().contains_key(&key("other")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failclosed_line_is_served_in_arrival_order_by_handovers() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, closed_settings("me"));
        let grants = pool(&c, 5, Duration::from_millis(10)).await;
        let order: Vec<usize> = grants.iter().map(|g| g.0).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert_eq!(store.count("put"), 1);
        assert_eq!(store.count("handover"), 4);
        assert_eq!(store.count("delete"), 1);
        assert!(store.record(&key("k")).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_of_another_process_goes_before_the_local_line() {
        let store = Arc::new(MemoryStore::new(true));
        let (here, _) = client(&store, open_settings("here", 10_000, None));
        let (there, _) = client(&store, open_settings("there", 10_000, None));
        let held = here.acquire(key("k"), &Cancel::default()).await.unwrap();
        let local = tokio::spawn({
            let c = here.clone();
            async move { c.acquire(key("k"), &Cancel::default()).await.unwrap() }
        });
        let remote = tokio::spawn({
            let c = there.clone();
            async move { c.acquire(key("k"), &Cancel::default()).await.unwrap() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(store.count("mark"), 1, "the remote waiter put itself first in line");
        held.release().await.unwrap();
        let theirs = remote.await.unwrap();
        assert_eq!(store.record(&key("k")).unwrap().owner.as_deref(), Some("there"));
        assert_eq!(store.count("handover"), 1, "tried, and refused by the fresh mark");
        assert!(!local.is_finished(), "the local waiter waits for the remote holder");
        theirs.release().await.unwrap();
        let ours = local.await.unwrap();
        assert_eq!(ours.fencing_token, Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_local_waiter_gives_up_on_one_holder_after_the_originals_wait() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("me", 1_000, Some(300));
        s.protocol.retry_count = 1;
        let (c, _) = client(&store, s);
        let _held = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        let start = Instant::now();
        let err = c.acquire(key("k"), &Cancel::default()).await.unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        assert_eq!(start.elapsed(), Duration::from_millis(2_000), "retryCount + 1 leases");
        // The line is intact: the holder's release finds nobody waiting and releases.
        _held.release().await.unwrap();
        assert_eq!(store.count("handover"), 0);
        assert!(store.record(&key("k")).unwrap().is_released());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_quits_the_line_is_skipped() {
        let store = Arc::new(MemoryStore::new(true));
        let (c, _) = client(&store, open_settings("me", 10_000, None));
        let held = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        let cancel = Arc::new(Cancel::default());
        let quitter = tokio::spawn({
            let (c, cancel) = (c.clone(), cancel.clone());
            async move { c.acquire(key("k"), &cancel).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        let next = tokio::spawn({
            let c = c.clone();
            async move { c.acquire(key("k"), &Cancel::default()).await.unwrap() }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        cancel.cancel();
        assert_eq!(quitter.await.unwrap().unwrap_err(), LockError::Aborted);
        held.release().await.unwrap();
        let lock = next.await.unwrap();
        assert_eq!(lock.fencing_token, Some(2));
        assert_eq!(store.count("handover"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_lost_by_its_holder_lets_the_line_try_for_itself() {
        let store = Arc::new(MemoryStore::new(true));
        // No heartbeats: the lease lapses under the holder.
        let (c, events) = client(&store, open_settings("me", 500, None));
        let _held = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        let start = Instant::now();
        let next = c.acquire(key("k"), &Cancel::default()).await.unwrap();
        // The lapse is reported at 500 ms, a timer grain early; the next in line then finds
        // the item as the lost holder left it and waits a lease of its own, as any waiter
        // would.
        assert!(start.elapsed() >= Duration::from_millis(999), "{:?}", start.elapsed());
        assert!(start.elapsed() < Duration::from_millis(1_100), "{:?}", start.elapsed());
        assert_eq!(next.fencing_token, Some(2));
        assert_eq!(events.events().len(), 1, "the first lock was reported lost");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_that_keeps_changing_hands_is_waited_for_not_failed() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = open_settings("patient", 1_000, Some(300));
        s.protocol.retry_count = 0;
        let (patient, _) = client(&store, s);
        let (busy, _) = client(&store, open_settings("busy", 1_000, Some(300)));
        // The busy client holds the lock 300 ms at a time, over and over, for 3 s.
        let churn = tokio::spawn({
            let busy = busy.clone();
            async move {
                let mut held: Vec<Arc<HeldLock>> = Vec::new();
                let end = Instant::now() + Duration::from_secs(3);
                while Instant::now() < end {
                    let l = busy.acquire(key("k"), &Cancel::default()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    l.release().await.unwrap();
                    held.push(l);
                }
                held.len()
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lock = patient.acquire(key("k"), &Cancel::default()).await;
        assert!(
            lock.is_ok(),
            "waiting for a busy lock is not a failed attempt: {lock:?}"
        );
        lock.unwrap().release().await.unwrap();
        assert!(churn.await.unwrap() >= 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_oldest_waiter_takes_the_first_place_and_reads_fastest() {
        let store = Arc::new(MemoryStore::new(true));
        let (holder, _) = client(&store, open_settings("holder", 10_000, Some(3_000)));
        let _held = holder.acquire(key("k"), &Cancel::default()).await.unwrap();
        // A younger waiter holds the mark; an older one arrives and takes its place.
        let young = WaitMark {
            waiter: "young",
            owner: "young-owner",
            since_unix_ms: unix_now_ms() + 60_000,
            now_unix_ms: unix_now_ms(),
            stale_before_unix_ms: 0,
        };
        store.mark_waiting(&key("k"), &young).await.unwrap();
        let (w, _) = client(&store, open_settings("waiter", 10_000, None));
        let waiting = tokio::spawn(async move { w.acquire(key("k"), &Cancel::default()).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let rec = store.record(&key("k")).unwrap();
        assert_ne!(rec.lock_waiter.as_deref(), Some("young"), "the older waiter is first");
        // The first in line's pace: `rereadPeriodMs` (10 ms) plus half the time waited, reads
        // at 10, 25, 47, 80, 130, 205, 317, 485 and 737 ms; a waiter not first would pause
        // the queue interval (250 ms) at least, and read 3 times.
        let gets = store.count("get");
        assert!((8..=10).contains(&gets), "{gets} re-reads in 1 s by the first in line");
        waiting.abort();
    }
}
