//! Fifo: a fair lock, granted in ticket order (the ticket is the fencing token). The protocol
//! is the core's (`dynamodb_lock_core::fifo`, which states it); this module steps its machine:
//! it sends the requests the machine asks for to the resources' head items and queue entries,
//! heartbeats the queue entries through the scheduler of held locks, builds the held locks,
//! and tells this client's registry of queues (its client machine's, `client::Client::fifo_*`)
//! what the machine asks, waking this client's waiters behind at once (`queues.rs`), without a
//! request. It makes no protocol decision.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dynamodb_lock_core::fifo::{
    entry_ttl, queue_order, Acquire, Act, Adds, Here, Input, NewEntry, Outcome, Request, Sem,
};
use dynamodb_lock_core::op::Reply;
use dynamodb_lock_core::request::{Req, Time};
use tokio::sync::futures::Notified;
use tokio::time::Instant;

use crate::cancel::Cancel;
use crate::clock::Clock;
use crate::error::{LockError, LostReason, StoreError};
use crate::item::{new_guid, Guid, KeyValue, LockKey, LockRecord, Version};
use crate::lock::{HeldLock, Shared};
use crate::queues::Mine;
use crate::send::{answer, within};
use crate::store::OpenFields;

#[cfg(test)]
pub use crate::item::HEAD_SORT_VALUE;
pub use crate::item::{entry_key, head_key};

/// What the locks that are `c`'s queue entries share: `c`'s store and settings, a scheduler
/// without a cap (`Scheduler::uncapped`), no events.
fn entries_client(c: &Shared) -> Arc<Shared> {
    c.entries
        .get_or_init(|| {
            // Entries renew at their own pace (`settings::Lock::entry_renew`).
            let mut settings = c.settings.clone();
            settings.protocol.heartbeat_period = c.settings.protocol.entry_renew();
            Arc::new(c.part(settings, c.heartbeats.uncapped()))
        })
        .clone()
}

/// A readable message for DynamoDB's refusal of Fifo's keys (a table without a string sort
/// key, or lock ids of the wrong type).
fn explain(c: &Shared, e: LockError) -> LockError {
    c.fifo.names.explain_keys(e, "Fifo locks", |n| {
        format!(
            "they need its partition key \"{}\" to have the lock ids' type and its sort key \"{}\" to be a string (S)",
            n.partition_key, n.sort_key
        )
    })
}

/// Acquires every resource in `resources` with one ticket. `wait`: how long to wait for the
/// turn (`None`: without end; zero: fail at once if anyone is ahead). A cancelled or timed
/// out acquisition leaves neither a lock nor a live queue entry behind.
pub async fn acquire(
    c: &Arc<Shared>,
    mut resources: Vec<KeyValue>,
    sem: Option<Sem>,
    wait: Option<Duration>,
    cancel: &Cancel,
) -> Result<Vec<Arc<HeldLock>>, LockError> {
    queue_order(&mut resources);
    if resources.is_empty() {
        return Err(LockError::Internal("a Fifo acquisition needs a resource".into()));
    }
    if sem.is_some() && resources.len() != 1 {
        return Err(LockError::Internal(
            "a semaphore's acquisition is of one resource".into(),
        ));
    }
    let mut d = Driver {
        c,
        sem,
        heads: resources.iter().map(head_key).collect(),
        resources: &resources,
        clock: Clock::start(),
        entries: vec![None; resources.len()],
        held: vec![None; resources.len()],
        joined: Vec::new(),
    };
    d.run(wait, cancel).await.map_err(|e| explain(c, e))
}

/// One acquisition as the core's machine runs it: its resources, the queue entries it
/// heartbeats, the locks it was granted, and where it waits in this client's registry.
struct Driver<'a> {
    c: &'a Arc<Shared>,
    sem: Option<Sem>,
    resources: &'a [KeyValue],
    /// The key of each resource's head: its queue in the registry.
    heads: Vec<LockKey>,
    clock: Clock,
    entries: Vec<Option<Arc<HeldLock>>>,
    held: Vec<Option<Arc<HeldLock>>>,
    /// Positions joined in the registry and not left yet.
    joined: Vec<(usize, u64)>,
}

impl Drop for Driver<'_> {
    fn drop(&mut self) {
        // An acquisition dropped midway: waiters behind read the store from now on.
        for (r, p) in std::mem::take(&mut self.joined) {
            self.registry_leave(r, p, None);
        }
    }
}

impl Here<Guid> for Driver<'_> {
    fn guid(&mut self) -> Guid {
        new_guid()
    }

    fn busy(&self, resource: usize) -> bool {
        self.c.machine().fifo_busy(&self.heads[resource], self.c.clock.now())
    }

    fn entry(&self, resource: usize, position: u64) -> Option<Mine> {
        self.c.machine().fifo_entry(&self.heads[resource], position)
    }

    fn holder(&self, resource: usize, token: u64) -> Option<bool> {
        self.c
            .machine()
            .fifo_holder(&self.heads[resource], token, self.c.clock.now())
    }

    fn entry_lost(&self, resource: usize) -> bool {
        self.entries[resource]
            .as_ref()
            .is_some_and(|e| e.state().lost.is_some())
    }

    fn held_until(&self, resource: usize) -> Option<Time> {
        let until = self.held[resource].as_ref()?.lease_until()?;
        Some(self.clock.time(until))
    }

    fn releases(&self, resource: usize) -> u64 {
        self.c.machine().fifo_releases(&self.heads[resource])
    }
}

impl Driver<'_> {
    fn leave(&mut self, resource: usize, position: u64, mine: Option<Mine>) {
        self.joined.retain(|j| *j != (resource, position));
        self.registry_leave(resource, position, mine);
    }

    /// The registry's entry at `position` of `resource` is `mine` now, or unknown.
    fn registry_leave(&self, resource: usize, position: u64, mine: Option<Mine>) {
        self.c
            .machine()
            .fifo_leave(&self.heads[resource], position, mine, self.c.clock.now());
        self.c.fifo.changed();
    }

    async fn run(&mut self, wait: Option<Duration>, cancel: &Cancel) -> Result<Vec<Arc<HeldLock>>, LockError> {
        let c = self.c;
        let clock = self.clock;
        let env = clock.env(cancel.is_cancelled());
        let (mut m, mut act) = match self.sem {
            Some(sem) => Acquire::<LockRecord, StoreError>::start_sem(c.settings.protocol, sem, wait, &env, self),
            None => {
                Acquire::<LockRecord, StoreError>::start(c.settings.protocol, self.resources.len(), wait, &env, self)
            }
        };
        let mut changed: Option<Pin<Box<Notified<'_>>>> = None;
        // The head as the last read of it found it: the holder a waiting report names.
        let mut head: Option<LockRecord> = None;
        loop {
            let input = match act {
                Act::Send { req, timeout_at } => {
                    let result = send(c, self.resources, &req, clock.instant(timeout_at)).await;
                    if let (Ok(Reply::Before(Some(r))), None) = (&result, req.place().1) {
                        head = Some(r.clone());
                    }
                    Input::Answer(answer(result))
                }
                Act::Wait { until, watch } => {
                    // Someone is ahead in a queue or holds the head: this acquisition waits
                    // (joining a queue alone is no wait: an acquisition of several resources
                    // always joins theirs).
                    cancel.waiting(head.take().as_ref());
                    let at = clock.instant(until);
                    if watch {
                        wait_or_change(at, cancel, &mut changed).await;
                    } else {
                        match at {
                            Some(at) => tokio::time::sleep_until(at).await,
                            None => std::future::pending::<()>().await,
                        }
                    }
                    Input::Resume
                }
                Act::Arm => {
                    // Enabled now, so that no change between now and the wait is missed.
                    let mut n = Box::pin(c.fifo.changes());
                    n.as_mut().enable();
                    changed = Some(n);
                    Input::Resume
                }
                Act::Join { resource, position } => {
                    c.machine().fifo_join(&self.heads[resource], position, c.clock.now());
                    self.joined.push((resource, position));
                    Input::Resume
                }
                Act::Leave {
                    resource,
                    position,
                    mine,
                } => {
                    self.leave(resource, position, mine);
                    Input::Resume
                }
                Act::Entry(entry) => {
                    self.add_entry(entry, clock.base);
                    Input::Resume
                }
                Act::StopEntry { resource } => match self.entries[resource].take() {
                    Some(entry) => {
                        entry.abandon();
                        // Every `guid` it may carry (an unanswered heartbeat's new one too).
                        Input::Guids(entry.state().guids())
                    }
                    None => Input::Guids(Vec::new()),
                },
                Act::Hold {
                    resource,
                    guid,
                    token,
                    sent_at,
                    leave,
                } => {
                    self.hold_head(resource, guid, token, clock.base + sent_at, leave);
                    Input::Resume
                }
                Act::ReleaseHeld { resource } => {
                    if let Some(lock) = self.held[resource].take() {
                        // Best effort: the release retries through transient faults on its own.
                        let _ = lock.release().await;
                    }
                    Input::Resume
                }
                Act::Cleanup { entries, passed } => {
                    self.cleanup(&entries, &passed);
                    Input::Resume
                }
                Act::Done(outcome) => return self.result(outcome, m.refused()),
            };
            let env = clock.env(cancel.is_cancelled());
            act = m.step(input, &env, self);
        }
    }

    /// Starts the queue entry `e` and its heartbeats, its lease counted from its write's send
    /// (a time of the machine's clock, which started at `base`).
    fn add_entry(&mut self, e: NewEntry<Guid>, base: Instant) {
        let lock = HeldLock::new(
            entries_client(self.c),
            entry_key(&self.resources[e.resource], e.position),
            e.guid,
            None,
            base + e.sent_at,
            None,
        )
        .shared();
        self.c.heartbeats.watch(&lock);
        self.entries[e.resource] = Some(lock);
    }

    /// Holds the head of `resource` under `guid` and `token` (taken by a request sent at
    /// `sent_at`), and leaves this acquisition's place in its queue, if it had one.
    fn hold_head(&mut self, resource: usize, guid: Guid, token: u64, sent_at: Instant, leave: Option<u64>) {
        // A held lock, heartbeated like a FailOpen lock.
        let c = self.c;
        let mut lock = HeldLock::new(
            c.clone(),
            self.heads[resource].clone(),
            guid,
            Some(token),
            sent_at,
            None,
        );
        if let Some(sem) = self.sem {
            lock = lock.with_permits(sem.permits);
        }
        let lock = lock.shared();
        c.heartbeats.watch(&lock);
        c.machine()
            .fifo_hold(&self.heads[resource], token, lock.id, c.clock.now());
        c.fifo.changed();
        self.held[resource] = Some(lock);
        if let Some(position) = leave {
            self.leave(resource, position, Some(Mine::Granted(token)));
        }
    }

    /// What the acquisition returns once the machine is done: the locks it holds, or why not.
    fn result(
        &mut self,
        outcome: Outcome<StoreError>,
        refused: Option<&LockRecord>,
    ) -> Result<Vec<Arc<HeldLock>>, LockError> {
        match outcome {
            Outcome::Corrupt { resource } => {
                let head = &self.heads[resource];
                Err(refused
                    .and_then(|item| self.c.fifo.names.head_refusal(head, item))
                    .unwrap_or_else(|| {
                        LockError::Internal("a Fifo head refused by the core was accepted by its record".into())
                    }))
            }
            Outcome::Granted => Ok(self.held.iter_mut().filter_map(Option::take).collect()),
            Outcome::NotAcquired => Err(LockError::not_acquired()),
            Outcome::Aborted => Err(LockError::Aborted),
            Outcome::Lost => Err(LockError::Lost(LostReason::LeaseExpired)),
            Outcome::Failed(e) => Err(LockError::Store(e)),
            Outcome::WrongKind { permits } => {
                let n = &self.c.fifo.names;
                let sort_key = (!n.sort_key.is_empty()).then_some(n.sort_key.as_str());
                Err(LockError::PermitsMismatch {
                    table: n.table.clone(),
                    id: crate::error::shown_key(&n.partition_key, sort_key, &self.heads[0]),
                    permits: self.sem.map_or(0, |s| s.limit),
                    found: permits,
                })
            }
        }
    }

    /// Removes the queue entries and the finished entries passed, in the background, after the
    /// lock is handed to the caller: nobody waits for these entries any more (the head says
    /// who holds the lock), so the caller need not wait for them either, nor for an entry's
    /// heartbeat in flight. Best effort: DynamoDB's TTL removes what is left. The client's
    /// work (`work`): `close()` waits for it.
    fn cleanup(&mut self, entries: &[usize], passed: &[(usize, u64)]) {
        let work = &self.c.work;
        for e in entries.iter().filter_map(|&r| self.entries[r].take()) {
            // No heartbeat of the entry starts from here on; the removal names every `guid`
            // it may carry.
            e.abandon();
            let guids = e.state().guids();
            work.once(&e.key, Req::DeleteIfGuid { guids });
        }
        for &(r, p) in passed {
            work.once(&entry_key(&self.resources[r], p), Req::DeleteFinished);
        }
    }
}

/// A watching wait: until `at` (`None`: until cancelled), the acquisition's cancellation, or
/// a change of this client's queue state (`changed`, once armed): then the machine looks
/// again, without a request unless the change concerns this waiter.
async fn wait_or_change(at: Option<Instant>, cancel: &Cancel, changed: &mut Option<Pin<Box<Notified<'_>>>>) {
    let sleep = async {
        match at {
            Some(at) => drop(cancel.sleep_until(at).await),
            None => cancel.cancelled().await,
        }
    };
    let change = async {
        match changed.as_mut() {
            Some(n) => n.as_mut().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = sleep => {}
        // This client's queue state changed: look again (without a
        // request, unless it concerns this waiter).
        _ = change => {}
    }
}

/// Sends one of the machine's requests (counting it by purpose) to the item it names, as the
/// operation it is, with what the client's settings add to it, giving up at `timeout_at`
/// (`None`: no timeout; a moment already past: at once, without sending).
async fn send(
    c: &Shared,
    resources: &[KeyValue],
    req: &Request<Guid, Version>,
    timeout_at: Option<Instant>,
) -> Result<Reply<LockRecord>, StoreError> {
    c.settings.stats.count_purpose(req.purpose());
    let (r, position) = req.place();
    let key = match position {
        None => head_key(&resources[r]),
        Some(p) => entry_key(&resources[r], p),
    };
    // The owner and the lease: heads and entries carry no time of acquisition, and no TTL
    // or token floor of the client's.
    let fields = OpenFields {
        lock_acquired_time_unix_ms: None,
        ttl: None,
        token_floor: 0,
        ..c.settings.open_fields()
    };
    let entry_ttl = entry_ttl(&c.settings.protocol, crate::clock::unix_now_ms());
    let adds = Adds {
        fields,
        entry_ttl: (&c.fifo.ttl_attribute, entry_ttl),
    };
    within(&*c.store, timeout_at, c.store.apply(&key, &req.op(&adds))).await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use dynamodb_lock_core::fifo::ENTRY_TTL_MARGIN;
    use dynamodb_lock_core::settings;
    use tokio::task::JoinHandle;
    use tokio::time::Instant;

    use super::*;
    use crate::client::Client;
    use crate::item::ENTRY_PREFIX;
    use crate::queues::TableNames;
    use crate::settings::Settings;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::store::StoreOps;
    use crate::testkit::client;
    use dynamodb_lock_core::settings::Kind;

    fn res(id: &str) -> KeyValue {
        KeyValue::S(id.into())
    }

    fn settings(owner: &str, lease_ms: u64) -> Settings {
        let mut s = Settings::new(Kind::Fifo, owner.into());
        s.protocol.lease_duration_ms = lease_ms;
        s.protocol.heartbeat_period = settings::fifo_heartbeat(lease_ms);
        s.protocol.reread = settings::reread(lease_ms);
        s.protocol.later_waiter_reread = settings::later_waiter_reread(lease_ms, s.protocol.reread);
        s.protocol.danger_margin = settings::danger_margin(lease_ms);
        s.protocol.request_timeout = Duration::from_millis(lease_ms / 4);
        s
    }

    /// The longest a waiter that has waited `waited` takes to see a release: its pause (the
    /// core's pace), and a few milliseconds for its requests.
    fn within_a_pause(lease_ms: u64, waited: Duration) -> Duration {
        settings("any", lease_ms).protocol.reread_interval(true, waited) + Duration::from_millis(10)
    }

    fn fifo_client(store: &Arc<MemoryStore>, owner: &str, lease_ms: u64) -> Arc<Client> {
        client(store, settings(owner, lease_ms)).0
    }

    async fn take(c: &Arc<Client>, ids: &[&str], wait: Option<Duration>) -> Result<Vec<Arc<HeldLock>>, LockError> {
        acquire(
            &c.shared,
            ids.iter().map(|i| res(i)).collect(),
            None,
            wait,
            &Cancel::default(),
        )
        .await
    }

    type Waiting = JoinHandle<Result<Vec<Arc<HeldLock>>, LockError>>;

    fn spawn_take(c: &Arc<Client>, ids: &[&str], wait: Option<Duration>) -> Waiting {
        let (c, ids) = (c.clone(), ids.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        tokio::spawn(async move {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            take(&c, &ids, wait).await
        })
    }

    fn head(store: &MemoryStore, id: &str) -> LockRecord {
        store.record(&head_key(&res(id))).expect("a head item")
    }

    /// The queue entries of resource `id`: (position, record).
    fn entries(store: &MemoryStore, id: &str) -> Vec<(u64, LockRecord)> {
        let mut out: Vec<(u64, LockRecord)> = store
            .items
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(k, r)| match (&k.partition, &k.sort) {
                (p, Some(KeyValue::S(s))) if *p == res(id) && s.starts_with(ENTRY_PREFIX) => {
                    Some((s[ENTRY_PREFIX.len()..].parse().unwrap(), r.clone()))
                }
                _ => None,
            })
            .collect();
        out.sort_by_key(|(p, _)| *p);
        out
    }

    async fn settle_for(ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_uncontended_acquisition_is_one_request_and_tokens_rise() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let c = fifo_client(&store, "me", 1000);
            let first = take(&c, &["a"], None).await.unwrap();
            assert_eq!(store.requests(), 1, "one UpdateItem");
            assert_eq!(first[0].fencing_token, Some(1));
            first[0].release().await.unwrap();
            assert!(head(&store, "a").is_released());
            let second = take(&c, &["a"], None).await.unwrap();
            assert_eq!(second[0].fencing_token, Some(2));
            assert_eq!(store.count("fifo_take"), 2);
            assert_eq!(store.requests(), 3, "take, release, take");
            let h = head(&store, "a");
            assert_eq!((h.fencing_token, h.ticket_next()), (Some(2), Some(2)));
            assert_eq!(h.owner.as_deref(), Some("me"));
            second[0].release().await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn grants_follow_ticket_order_under_concurrent_arrivals() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 300);
            let held = take(&holder, &["a"], None).await.unwrap();
            let busy = Arc::new(AtomicBool::new(true));
            let granted = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for i in 0..6 {
                // Each waiter in a client of its own, as in separate processes.
                let c = fifo_client(&store, &format!("w{i}"), 300);
                let (busy, granted) = (busy.clone(), granted.clone());
                tasks.push(tokio::spawn(async move {
                    let lock = take(&c, &["a"], None).await.unwrap().pop().unwrap();
                    assert!(!busy.swap(true, Ordering::SeqCst), "two holders at once");
                    granted.lock().unwrap().push((i, lock.fencing_token.unwrap()));
                    // Held across two leases: heartbeats keep the queue entries behind alive.
                    tokio::time::sleep(Duration::from_millis(450)).await;
                    busy.store(false, Ordering::SeqCst);
                    lock.release().await.unwrap();
                }));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            settle_for(100).await;
            busy.store(false, Ordering::SeqCst);
            held[0].release().await.unwrap();
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(30), t).await.unwrap().unwrap();
            }
            let granted = granted.lock().unwrap().clone();
            let order: Vec<usize> = granted.iter().map(|(i, _)| *i).collect();
            assert_eq!(order, vec![0, 1, 2, 3, 4, 5], "arrival order");
            let tokens: Vec<u64> = granted.iter().map(|(_, t)| *t).collect();
            assert_eq!(tokens, vec![2, 3, 4, 5, 6, 7], "the ticket is the token");
            assert!(
                entries(&store, "a").is_empty(),
                "no entry left: {:?}",
                entries(&store, "a")
            );
            assert_eq!(store.count("finish"), 0, "nobody was taken for dead");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_dies_in_the_middle_delays_the_queue_by_at_most_its_lease() {
        let lease = 1000;
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", lease);
        let held = take(&holder, &["a"], None).await.unwrap();
        let first = spawn_take(&fifo_client(&store, "first", lease), &["a"], None);
        settle_for(5).await;
        let dies = spawn_take(&fifo_client(&store, "dies", lease), &["a"], None);
        settle_for(5).await;
        let last = spawn_take(&fifo_client(&store, "last", lease), &["a"], None);
        settle_for(3000).await;
        assert_eq!(entries(&store, "a").len(), 3, "three live entries after three leases");
        // The middle waiter's process dies: its entry is no longer renewed.
        dies.abort();
        let died_at = Instant::now();
        held[0].release().await.unwrap();
        let first = first.await.unwrap().unwrap().pop().unwrap();
        assert_eq!(first.fencing_token, Some(2));
        first.release().await.unwrap();
        let last = last.await.unwrap().unwrap().pop().unwrap();
        let delay = died_at.elapsed();
        // The waiter behind sees the dead entry's last version within one pause of its
        // reads (at most half a lease) and takes it for dead a lease after that.
        let bound =
            Duration::from_millis(lease) + settings("any", lease).protocol.reread_ceiling() + Duration::from_millis(20);
        assert!(delay <= bound, "the dead entry held the queue {delay:?}");
        assert_eq!(last.fencing_token, Some(4), "ticket 3 died");
        assert_eq!(store.count("finish"), 1, "the dead entry was marked finished");
        assert!(
            entries(&store, "a").is_empty(),
            "and removed: {:?}",
            entries(&store, "a")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_holder_is_waited_out_on_the_waiters_clock() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 1000);
            let held = take(&holder, &["a"], None).await.unwrap();
            // The holder's process dies: no heartbeat, no release.
            held[0].abandon();
            let start = Instant::now();
            let lock = take(&fifo_client(&store, "me", 1000), &["a"], None).await.unwrap();
            let waited = start.elapsed();
            assert!(waited >= Duration::from_millis(1000), "waited {waited:?}");
            assert!(waited <= Duration::from_millis(1030), "waited {waited:?}");
            assert_eq!(lock[0].fencing_token, Some(2));
            assert_eq!(head(&store, "a").owner.as_deref(), Some("me"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wait_zero_fails_at_once_and_leaves_nothing_behind() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 1000);
            let held = take(&holder, &["a"], None).await.unwrap();
            let c = fifo_client(&store, "me", 1000);
            let before = store.requests();
            let start = Instant::now();
            let err = take(&c, &["a"], Some(Duration::ZERO)).await.unwrap_err();
            assert_eq!(err.code(), "FailedToAcquireLock");
            assert_eq!(start.elapsed(), Duration::ZERO);
            let used = store.requests() - before;
            if returns_old {
                assert_eq!(used, 1, "the refused take showed the holder");
            } else {
                assert_eq!(used, 3, "take, ticket, ticket given back");
            }
            assert!(entries(&store, "a").is_empty());
            let h = head(&store, "a");
            assert_eq!(h.ticket_next(), h.fencing_token, "no ticket out");
            held[0].release().await.unwrap();
            let before = store.requests();
            let lock = take(&c, &["a"], Some(Duration::ZERO)).await.unwrap();
            assert_eq!(store.requests() - before, 1, "free again: one request");
            assert_eq!(lock[0].fencing_token, Some(2));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_finite_wait_fails_when_it_ends_and_hands_its_place_on() {
        let store = Arc::new(MemoryStore::new(false));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let short = spawn_take(
            &fifo_client(&store, "short", 1000),
            &["a"],
            Some(Duration::from_millis(700)),
        );
        settle_for(5).await;
        let long = spawn_take(
            &fifo_client(&store, "long", 1000),
            &["a"],
            Some(Duration::from_secs(60)),
        );
        let start = Instant::now();
        let long_since = Instant::now();
        let err = short.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(690) && waited <= Duration::from_millis(720),
            "{waited:?}"
        );
        // A waiter is behind: the place stays as a finished entry.
        let left = entries(&store, "a");
        assert_eq!(left.len(), 2);
        assert!(left[0].1.is_released() && !left[1].1.is_released(), "{left:?}");
        settle_for(settings::later_waiter_reread(1000, settings::reread(1000)).as_millis() as u64 + 10).await;
        let released_at = Instant::now();
        held[0].release().await.unwrap();
        let waited = long_since.elapsed();
        let lock = long.await.unwrap().unwrap();
        assert!(
            released_at.elapsed() <= within_a_pause(1000, waited),
            "the finished entry cost no wait: {:?}",
            released_at.elapsed()
        );
        assert_eq!(lock[0].fencing_token, Some(3));
        assert!(entries(&store, "a").is_empty(), "{:?}", entries(&store, "a"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_waiter_that_gives_up_gives_its_ticket_back() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let err = take(
            &fifo_client(&store, "me", 1000),
            &["a"],
            Some(Duration::from_millis(400)),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        assert!(entries(&store, "a").is_empty());
        let h = head(&store, "a");
        assert_eq!((h.ticket_next(), h.queue_next()), (Some(1), Some(0)), "{h:?}");
        held[0].release().await.unwrap();
        let before = store.requests();
        take(&holder, &["a"], None).await.unwrap();
        assert_eq!(store.requests() - before, 1, "the fast path works again");
    }

    #[tokio::test(start_paused = true)]
    async fn an_infinite_wait_outlasts_the_default_wait() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let waiter = spawn_take(&fifo_client(&store, "patient", 1000), &["a"], None);
        settle_for(settings::FIFO_WAIT.as_millis() as u64 + 30_000).await;
        assert!(!waiter.is_finished());
        held[0].release().await.unwrap();
        let lock = waiter.await.unwrap().unwrap();
        assert_eq!(lock[0].fencing_token, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_abort_while_queued_leaves_no_entry() {
        let store = Arc::new(MemoryStore::new(false));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let cancel = Arc::new(Cancel::default());
        let aborted = {
            let (c, cancel) = (fifo_client(&store, "aborted", 1000), cancel.clone());
            tokio::spawn(async move { acquire(&c.shared, vec![res("a")], None, None, &cancel).await })
        };
        settle_for(5).await;
        let behind = spawn_take(&fifo_client(&store, "behind", 1000), &["a"], None);
        let behind_since = Instant::now();
        settle_for(2000).await;
        assert_eq!(entries(&store, "a").len(), 2);
        cancel.cancel();
        assert_eq!(aborted.await.unwrap().unwrap_err(), LockError::Aborted);
        // The waiter behind, in another process, sees it at its next read of the entry.
        settle_for(settings::later_waiter_reread(1000, settings::reread(1000)).as_millis() as u64 + 10).await;
        let released_at = Instant::now();
        let waited = behind_since.elapsed();
        held[0].release().await.unwrap();
        let lock = behind.await.unwrap().unwrap();
        assert!(released_at.elapsed() <= within_a_pause(1000, waited));
        assert_eq!(lock[0].fencing_token, Some(3));
        assert!(entries(&store, "a").is_empty(), "{:?}", entries(&store, "a"));
        // The last waiter aborts: its entry goes and its ticket is given back.
        let cancel = Arc::new(Cancel::default());
        let last = {
            let (c, cancel) = (fifo_client(&store, "last", 1000), cancel.clone());
            tokio::spawn(async move { acquire(&c.shared, vec![res("a")], None, None, &cancel).await })
        };
        settle_for(500).await;
        assert_eq!(entries(&store, "a").len(), 1);
        cancel.cancel();
        assert_eq!(last.await.unwrap().unwrap_err(), LockError::Aborted);
        assert!(entries(&store, "a").is_empty());
        assert_eq!(head(&store, "a").ticket_next(), Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn several_resources_in_opposite_orders_never_deadlock() {
        let store = Arc::new(MemoryStore::new(false));
        // Different counters, so that one ticket for both skips numbers in one queue.
        let warm = fifo_client(&store, "warm", 500);
        for _ in 0..5 {
            take(&warm, &["b"], None).await.unwrap()[0].release().await.unwrap();
        }
        let busy = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, ids) in [("x", ["a", "b"]), ("y", ["b", "a"]), ("z", ["a", "b"])] {
            let c = fifo_client(&store, name, 500);
            let (busy, tokens) = (busy.clone(), tokens.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..15 {
                    let locks = take(&c, &ids, None).await.unwrap();
                    assert_eq!(locks.len(), 2);
                    assert_eq!(locks[0].fencing_token, locks[1].fencing_token, "one ticket");
                    for b in busy.iter() {
                        assert!(!b.swap(true, Ordering::SeqCst), "two holders at once");
                    }
                    tokens.lock().unwrap().push(locks[0].fencing_token.unwrap());
                    tokio::time::sleep(Duration::from_millis(7)).await;
                    for b in busy.iter() {
                        b.store(false, Ordering::SeqCst);
                    }
                    for l in locks {
                        l.release().await.unwrap();
                    }
                }
            }));
        }
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("no deadlock")
                .unwrap();
        }
        let tokens = tokens.lock().unwrap().clone();
        assert_eq!(tokens.len(), 45);
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "tokens rise in grant order: {tokens:?}"
        );
        assert!(entries(&store, "a").is_empty() && entries(&store, "b").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_local_release_hands_over_to_the_local_waiter_without_polling() {
        let store = Arc::new(MemoryStore::new(true));
        let c = fifo_client(&store, "me", 1000);
        let held = take(&c, &["a"], None).await.unwrap();
        let second = spawn_take(&c, &["a"], None);
        settle_for(5).await;
        let third = spawn_take(&c, &["a"], None);
        // Several leases: the waiters make no read; only heartbeats are written.
        settle_for(3500).await;
        assert_eq!(store.count("get"), 0, "no polling");
        let released_at = Instant::now();
        held[0].release().await.unwrap();
        let second = second.await.unwrap().unwrap();
        assert_eq!(released_at.elapsed(), Duration::ZERO, "woken at once");
        assert_eq!(second[0].fencing_token, Some(2));
        second[0].release().await.unwrap();
        let third = third.await.unwrap().unwrap();
        assert_eq!(third[0].fencing_token, Some(3));
        assert_eq!(released_at.elapsed(), Duration::ZERO);
        assert_eq!(store.count("get"), 0, "handed over without a read");
        assert_eq!(store.count("grant"), 2, "one grant request each");
        assert!(entries(&store, "a").is_empty());
        assert_eq!(c.machine().fifo_tracked(), 1, "the held lock");
        third[0].release().await.unwrap();
        assert_eq!(c.machine().fifo_tracked(), 0, "nothing held or waiting: nothing kept");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_watches_only_the_entry_ahead_at_the_reread_pace() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 2000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let next = spawn_take(&fifo_client(&store, "next", 2000), &["a"], None);
        settle_for(5).await;
        let behind = spawn_take(&fifo_client(&store, "behind", 2000), &["a"], None);
        settle_for(100).await;
        let gets = store.count("get");
        settle_for(10_000).await;
        // Next in line reads the head, second in line the entry ahead, each from every
        // `rereadPeriodMs` or two slowing to every half lease: 30 reads in 10 s, against 1500
        // at a fixed 10 ms.
        let first = store.count("get") - gets;
        assert!((25..=35).contains(&first), "{first} reads in the first 10 s");
        // Then one read each per half lease: 2 a second.
        let gets = store.count("get");
        settle_for(10_000).await;
        let then = store.count("get") - gets;
        assert!((19..=21).contains(&then), "{then} reads in the next 10 s");
        held[0].release().await.unwrap();
        next.await.unwrap().unwrap()[0].release().await.unwrap();
        behind.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticket_taken_and_never_queued_delays_the_queue_by_at_most_a_lease() {
        for returns_old in [true, false] {
            let store = Arc::new(MemoryStore::new(returns_old));
            let holder = fifo_client(&store, "holder", 1000);
            let held = take(&holder, &["a"], None).await.unwrap();
            // A process takes a ticket and dies before writing its entry.
            store.fifo_ticket(&head_key(&res("a"))).await.unwrap();
            let waiter = spawn_take(&fifo_client(&store, "me", 1000), &["a"], None);
            settle_for(5).await;
            held[0].release().await.unwrap();
            let start = Instant::now();
            let lock = waiter.await.unwrap().unwrap();
            let waited = start.elapsed();
            assert!(waited <= Duration::from_millis(1000), "waited {waited:?}");
            assert_eq!(lock[0].fencing_token, Some(3));
            assert!(entries(&store, "a").is_empty(), "{:?}", entries(&store, "a"));
            lock[0].release().await.unwrap();
            let before = store.requests();
            take(&holder, &["a"], None).await.unwrap();
            assert_eq!(store.requests() - before, 1, "no ticket out any more");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_take_answered_after_its_whole_lease_grants_nothing() {
        let store = Arc::new(MemoryStore::new(true));
        let mut s = settings("me", 1000);
        s.protocol.request_timeout = Duration::from_secs(3);
        let c = client(&store, s).0;
        // The uncontended take lands at once; its answer comes after the 1 s lease.
        store.fault("fifo_take", Fault::Delay(Duration::from_millis(1500)));
        let err = take(&c, &["a"], None).await.unwrap_err();
        assert!(matches!(err, LockError::Lost(LostReason::LeaseExpired)), "{err:?}");
        assert!(head(&store, "a").is_released(), "the late grant is released");
        let lock = take(&c, &["a"], None).await.unwrap();
        assert_eq!(lock[0].fencing_token, Some(2));
        lock[0].release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_whose_place_was_given_away_queues_again() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        // The slow waiter's entry reaches the table after more than a lease.
        store.fault("enqueue", Fault::Delay(Duration::from_millis(1500)));
        let slow = {
            let mut s = settings("slow", 1000);
            s.protocol.request_timeout = Duration::from_secs(5);
            let c = client(&store, s).0;
            tokio::spawn(async move { take(&c, &["a"], None).await })
        };
        settle_for(5).await;
        let quick = spawn_take(&fifo_client(&store, "quick", 1000), &["a"], None);
        settle_for(2000).await;
        held[0].release().await.unwrap();
        let quick = quick.await.unwrap().unwrap();
        assert_eq!(quick[0].fencing_token, Some(3), "ticket 2 was taken for dead");
        settle_for(100).await;
        assert!(!slow.is_finished());
        quick[0].release().await.unwrap();
        let slow = tokio::time::timeout(Duration::from_secs(5), slow)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            slow[0].fencing_token > Some(3),
            "a new ticket: {:?}",
            slow[0].fencing_token
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_table_without_a_string_sort_key_is_named_in_the_error() {
        let store = Arc::new(MemoryStore::new(true));
        store.fault(
            "fifo_take",
            Fault::Fail(StoreError::Service {
                code: "ValidationException".into(),
                message: "The provided key element does not match the schema".into(),
                transient: false,
                maybe_applied: false,
            }),
        );
        let (c, _) = client(&store, settings("me", 1000));
        let c = Arc::new(Client::new(
            c.store.clone(),
            c.settings.clone(),
            c.events.clone(),
            crate::heartbeat::LazyHeartbeats::in_runtime(0),
            crate::queues::Queues::new(
                "ttl".into(),
                TableNames {
                    table: "locks".into(),
                    partition_key: "pk".into(),
                    sort_key: "sk".into(),
                },
            ),
        ));
        let err = take(&c, &["a"], None).await.unwrap_err();
        assert_eq!(err.code(), "ValidationException");
        let m = err.message();
        assert!(
            m.contains("\"locks\"") && m.contains("sort key \"sk\"") && m.contains("string (S)"),
            "{m}"
        );
        assert!(m.ends_with("The provided key element does not match the schema"), "{m}");
    }

    #[tokio::test(start_paused = true)]
    async fn entries_carry_a_ttl_in_seconds_and_are_heartbeated() {
        let store = Arc::new(MemoryStore::new(true));
        let holder = fifo_client(&store, "holder", 3000);
        let held = take(&holder, &["a"], None).await.unwrap();
        let waiter = spawn_take(&fifo_client(&store, "me", 3000), &["a"], None);
        settle_for(50).await;
        let key = entry_key(&res("a"), 1);
        let ttl = *store.ttls.lock().unwrap().get(&key).expect("a TTL");
        let expected = crate::clock::unix_now_ms() / 1000 + 3 + ENTRY_TTL_MARGIN.as_secs();
        assert!(ttl.abs_diff(expected) <= 1, "{ttl} vs {expected}");
        let guid = store.record(&key).unwrap().guid;
        // The first renewal falls within the entries' period (half the lease).
        settle_for(1550).await;
        assert_ne!(store.record(&key).unwrap().guid, guid, "the entry's guid rotates");
        assert_eq!(
            store.record(&key).unwrap().fencing_token,
            Some(2),
            "the entry carries its ticket"
        );
        held[0].release().await.unwrap();
        waiter.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_abandoned_for_a_higher_ticket_is_passed_at_once() {
        let store = Arc::new(MemoryStore::new(true));
        let warm = fifo_client(&store, "warm", 1000);
        for _ in 0..9 {
            take(&warm, &["b"], None).await.unwrap()[0].release().await.unwrap();
        }
        let holder = fifo_client(&store, "holder", 1000);
        let held = take(&holder, &["a"], None).await.unwrap();
        // Both resources: ticket 2 at place 1 of "a", refused by "b" (ticketNext 9) a moment
        // later, by when a waiter has queued behind it.
        store.fault("reserve", Fault::Delay(Duration::from_millis(50)));
        let both = spawn_take(&fifo_client(&store, "both", 1000), &["a", "b"], None);
        settle_for(10).await;
        let behind = spawn_take(&fifo_client(&store, "behind", 1000), &["a"], None);
        let behind_since = Instant::now();
        settle_for(1000).await;
        let left = entries(&store, "a");
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(
            left[0].1.is_released(),
            "the abandoned place is a finished entry: {left:?}"
        );
        assert_eq!(left[2].1.fencing_token, Some(10), "the new ticket is above b's");
        let released_at = Instant::now();
        let waited = behind_since.elapsed();
        held[0].release().await.unwrap();
        let lock = behind.await.unwrap().unwrap();
        assert!(
            released_at.elapsed() <= within_a_pause(1000, waited),
            "{:?}",
            released_at.elapsed()
        );
        assert_eq!(lock[0].fencing_token, Some(3));
        lock[0].release().await.unwrap();
        let locks = both.await.unwrap().unwrap();
        assert_eq!(
            locks.iter().map(|l| l.fencing_token).collect::<Vec<_>>(),
            vec![Some(10); 2]
        );
        assert!(entries(&store, "a").is_empty() && entries(&store, "b").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn one_resource_of_several_held_elsewhere_keeps_the_others_until_its_turn() {
        let store = Arc::new(MemoryStore::new(true));
        let other = fifo_client(&store, "other", 1000);
        let b = take(&other, &["b"], None).await.unwrap();
        let both = spawn_take(
            &fifo_client(&store, "me", 1000),
            &["b", "a"],
            Some(Duration::from_millis(400)),
        );
        let err = both.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "FailedToAcquireLock");
        assert!(
            head(&store, "a").is_released(),
            "the resource granted meanwhile is released"
        );
        assert!(entries(&store, "a").is_empty() && entries(&store, "b").is_empty());
        let both = spawn_take(&fifo_client(&store, "me", 1000), &["a", "b"], None);
        settle_for(300).await;
        b[0].release().await.unwrap();
        let locks = both.await.unwrap().unwrap();
        let tokens: Vec<_> = locks.iter().map(|l| l.fencing_token).collect();
        assert_eq!(tokens[0], tokens[1]);
        assert!(tokens[0] > Some(1));
    }
}
