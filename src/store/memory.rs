//! An in-memory `Store` for unit tests: the same conditions as DynamoDB, plus scripted faults
//! (errors before or after the write is applied, hung requests, delays) and a request log.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::{Entry, OpenFields, Store, Ttl, WaitMark};
use crate::error::StoreError;
use crate::item::{Guid, LockData, LockKey, LockRecord, Version, RELEASED_LEASE_MS};

#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer with this error; nothing is applied.
    Fail(StoreError),
    /// Apply the request, then answer with this error (a lost response).
    ApplyThenFail(StoreError),
    /// Never answer; nothing is applied.
    Hang,
    /// Wait this long, then behave normally.
    Delay(Duration),
}

#[derive(Default)]
pub struct MemoryStore {
    pub items: Mutex<HashMap<LockKey, LockRecord>>,
    faults: Mutex<VecDeque<(&'static str, Fault)>>,
    pub log: Mutex<Vec<&'static str>>,
    /// TTL attribute values written (Unix seconds), by key: Fifo queue entries, and lock items
    /// of clients with `ttlAttribute`.
    pub ttls: Mutex<HashMap<LockKey, u64>>,
    /// Whether a failed condition returns the current item, as DynamoDB does on request.
    pub returns_old: bool,
}

impl MemoryStore {
    pub fn new(returns_old: bool) -> Self {
        MemoryStore {
            returns_old,
            ..Default::default()
        }
    }

    /// Queues a fault for the next request of kind `op` ("get", "put", "delete", "take",
    /// "renew", "release", and for Fifo "fifo_take", "ticket", "reserve", "untake", "enqueue",
    /// "grant", "finish", "delete_finished", "touch").
    pub fn fault(&self, op: &'static str, f: Fault) {
        self.faults.lock().unwrap().push_back((op, f));
    }

    pub fn record(&self, key: &LockKey) -> Option<LockRecord> {
        self.items.lock().unwrap().get(key).cloned()
    }

    pub fn set(&self, key: &LockKey, r: LockRecord) {
        self.items.lock().unwrap().insert(key.clone(), r);
    }

    pub fn count(&self, op: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|o| **o == op).count()
    }

    /// Every request so far.
    pub fn requests(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    fn note_ttl(&self, key: &LockKey, ttl: Option<Ttl<'_>>) {
        if let Some((_, at)) = ttl {
            self.ttls.lock().unwrap().insert(key.clone(), at);
        }
    }

    fn take_fault(&self, op: &'static str) -> Option<Fault> {
        let mut q = self.faults.lock().unwrap();
        let i = q.iter().position(|(o, _)| *o == op)?;
        q.remove(i).map(|(_, f)| f)
    }

    async fn run<T>(
        &self,
        op: &'static str,
        key: &LockKey,
        apply: impl FnOnce(&mut Option<LockRecord>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.log.lock().unwrap().push(op);
        let fault = self.take_fault(op);
        match &fault {
            Some(Fault::Fail(e)) => return Err(e.clone()),
            Some(Fault::Hang) => std::future::pending::<()>().await,
            Some(Fault::Delay(d)) => tokio::time::sleep(*d).await,
            _ => {}
        }
        let result = {
            let mut items = self.items.lock().unwrap();
            let mut slot = items.get(key).cloned();
            let before = slot.clone();
            let r = apply(&mut slot);
            match (&r, slot) {
                (Ok(_), Some(rec)) => {
                    items.insert(key.clone(), rec);
                }
                (Ok(_), None) => {
                    items.remove(key);
                }
                (Err(_), _) => {}
            }
            r.map_err(|e| match e {
                StoreError::ConditionFailed { .. } => StoreError::ConditionFailed {
                    current: self.returns_old.then(|| before.map(Box::new)),
                },
                other => other,
            })
        };
        match fault {
            Some(Fault::ApplyThenFail(e)) => Err(e),
            _ => result,
        }
    }
}

fn guid_in(rec: &Option<LockRecord>, guids: &[Guid]) -> bool {
    rec.as_ref().is_some_and(|r| guids.iter().any(|g| r.carries(g)))
}

#[async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        self.run("get", key, |slot| Ok(slot.clone())).await
    }

    async fn put_if_absent(
        &self,
        key: &LockKey,
        owner: &str,
        guid: &Guid,
        data: Option<&LockData>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<(), StoreError> {
        self.run("put", key, |slot| {
            if slot.is_some() {
                return Err(StoreError::condition_failed());
            }
            *slot = Some(LockRecord {
                owner: Some(owner.into()),
                guid: Some(guid.to_vec()),
                data: data.cloned().map(Box::new),
                ..Default::default()
            });
            Ok(())
        })
        .await?;
        self.note_ttl(key, ttl);
        Ok(())
    }

    async fn set_data(
        &self,
        key: &LockKey,
        guids: &[Guid],
        data: Option<&LockData>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<(), StoreError> {
        self.run("set_data", key, |slot| {
            if !guid_in(slot, guids) {
                return Err(StoreError::condition_failed());
            }
            if let Some(r) = slot {
                r.data = data.cloned().map(Box::new);
            }
            Ok(())
        })
        .await?;
        self.note_ttl(key, ttl);
        Ok(())
    }

    async fn delete_if_guid(&self, key: &LockKey, guids: &[Guid]) -> Result<Option<u64>, StoreError> {
        self.run("delete", key, |slot| {
            if !guid_in(slot, guids) {
                return Err(StoreError::condition_failed());
            }
            Ok(slot.take().and_then(|r| r.lock_waiting_unix_ms))
        })
        .await
    }

    async fn take(
        &self,
        key: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        waited_out: Option<&Version>,
        clear_mark: bool,
    ) -> Result<u64, StoreError> {
        self.run("take", key, |slot| {
            let free = match slot {
                None => true,
                Some(r) => r.is_released() || waited_out.is_some_and(|v| r.version() == *v),
            };
            if !free {
                return Err(StoreError::condition_failed());
            }
            let token = slot
                .as_ref()
                .and_then(|r| r.fencing_token)
                .unwrap_or(fields.token_floor)
                + 1;
            let mark = slot.take().filter(|_| !clear_mark).unwrap_or_default();
            *slot = Some(LockRecord {
                owner: Some(fields.owner.into()),
                guid: Some(guid.to_vec()),
                fencing_token: Some(token),
                lease_duration_ms: Some(fields.lease_duration_ms),
                lock_acquired_time_unix_ms: fields.lock_acquired_time_unix_ms,
                lock_waiting_unix_ms: mark.lock_waiting_unix_ms,
                lock_waiter: mark.lock_waiter,
                lock_waiting_since_unix_ms: mark.lock_waiting_since_unix_ms,
                data: fields.data.cloned().map(Box::new),
                ..Default::default()
            });
            Ok(token)
        })
        .await
        .inspect(|_| self.note_ttl(key, fields.ttl))
    }

    async fn renew(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: &OpenFields<'_>,
    ) -> Result<(), StoreError> {
        self.run("renew", key, |slot| {
            if !guid_in(slot, guids) {
                return Err(StoreError::condition_failed());
            }
            if let Some(r) = slot {
                r.guid = Some(new_guid.to_vec());
                r.owner = Some(fields.owner.into());
                r.lease_duration_ms = Some(fields.lease_duration_ms);
                r.lock_acquired_time_unix_ms = fields.lock_acquired_time_unix_ms;
            }
            Ok(())
        })
        .await
        .inspect(|_| self.note_ttl(key, fields.ttl))
    }

    async fn release(
        &self,
        key: &LockKey,
        guids: &[Guid],
        lock_acquired_time_unix_ms: Option<u64>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<Option<u64>, StoreError> {
        self.run("release", key, |slot| {
            if !guid_in(slot, guids) {
                return Err(StoreError::condition_failed());
            }
            let r = slot.as_mut().expect("guid_in found the item");
            r.lease_duration_ms = Some(RELEASED_LEASE_MS);
            r.lock_acquired_time_unix_ms = lock_acquired_time_unix_ms;
            Ok(r.lock_waiting_unix_ms)
        })
        .await
        .inspect(|_| self.note_ttl(key, ttl))
    }

    async fn hand_over(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: Option<&OpenFields<'_>>,
        marks_fresh_since_unix_ms: u64,
        ttl: Option<Ttl<'_>>,
    ) -> Result<Option<u64>, StoreError> {
        let r = self
            .run("handover", key, |slot| {
                let marked = slot
                    .as_ref()
                    .and_then(|r| r.lock_waiting_unix_ms)
                    .is_some_and(|w| w >= marks_fresh_since_unix_ms);
                if !guid_in(slot, guids) || marked {
                    return Err(StoreError::condition_failed());
                }
                let r = slot.as_mut().expect("guid_in found the item");
                r.guid = Some(new_guid.to_vec());
                r.data = None;
                Ok(fields.map(|f| {
                    r.owner = Some(f.owner.into());
                    r.lease_duration_ms = Some(f.lease_duration_ms);
                    r.lock_acquired_time_unix_ms = f.lock_acquired_time_unix_ms;
                    let token = r.fencing_token.unwrap_or(0) + 1;
                    r.fencing_token = Some(token);
                    token
                }))
            })
            .await?;
        self.note_ttl(key, ttl);
        Ok(r)
    }

    async fn fifo_take_free(&self, head: &LockKey, fields: &OpenFields<'_>, guid: &Guid) -> Result<u64, StoreError> {
        self.run("fifo_take", head, |slot| {
            let r = slot.clone().unwrap_or_default();
            let free = r.lease_duration_ms.is_none_or(|l| l == RELEASED_LEASE_MS);
            let no_ticket_out = r.ticket_next().is_none() || r.ticket_next() == Some(r.fencing_token.unwrap_or(0));
            if !(free && no_ticket_out) {
                return Err(StoreError::condition_failed());
            }
            let token = r.ticket_next().or(r.fencing_token).unwrap_or(0) + 1;
            let mut new = LockRecord {
                owner: Some(fields.owner.into()),
                guid: Some(guid.to_vec()),
                fencing_token: Some(token),
                lease_duration_ms: Some(fields.lease_duration_ms),
                lock_acquired_time_unix_ms: fields.lock_acquired_time_unix_ms,
                ..r
            };
            let q = new.queue_mut();
            q.ticket_next = Some(token);
            q.queue_granted = Some(q.queue_next.unwrap_or(0));
            *slot = Some(new);
            Ok(token)
        })
        .await
    }

    async fn fifo_ticket(&self, head: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        self.run("ticket", head, |slot| {
            let before = slot.clone();
            let r = slot.get_or_insert_with(Default::default);
            let last = r.ticket_next().or(r.fencing_token).unwrap_or(0);
            let q = r.queue_mut();
            q.ticket_next = Some(last + 1);
            q.queue_next = Some(q.queue_next.unwrap_or(0) + 1);
            Ok(before)
        })
        .await
    }

    async fn fifo_reserve(&self, head: &LockKey, ticket: u64) -> Result<Option<LockRecord>, StoreError> {
        self.run("reserve", head, |slot| {
            let before = slot.clone();
            let r = slot.get_or_insert_with(Default::default);
            let lower = match r.ticket_next() {
                Some(tn) => tn < ticket,
                None => r.fencing_token.is_none_or(|ft| ft < ticket),
            };
            if !lower {
                return Err(StoreError::condition_failed());
            }
            let q = r.queue_mut();
            q.ticket_next = Some(ticket);
            q.queue_next = Some(q.queue_next.unwrap_or(0) + 1);
            Ok(before)
        })
        .await
    }

    async fn fifo_untake(
        &self,
        head: &LockKey,
        ticket: u64,
        position: u64,
        previous_ticket: u64,
    ) -> Result<(), StoreError> {
        self.run("untake", head, |slot| match slot {
            Some(r) if r.queue_next() == Some(position) && r.ticket_next() == Some(ticket) => {
                let q = r.queue_mut();
                q.ticket_next = Some(previous_ticket);
                q.queue_next = Some(position.saturating_sub(1));
                Ok(())
            }
            _ => Err(StoreError::condition_failed()),
        })
        .await
    }

    async fn fifo_put_entry(&self, key: &LockKey, entry: &Entry<'_>) -> Result<(), StoreError> {
        self.run("enqueue", key, |slot| {
            if slot.is_some() {
                return Err(StoreError::condition_failed());
            }
            *slot = Some(LockRecord {
                owner: Some(entry.owner.into()),
                guid: Some(entry.guid.to_vec()),
                fencing_token: Some(entry.ticket),
                lease_duration_ms: Some(entry.lease_duration_ms),
                ..Default::default()
            });
            self.ttls.lock().unwrap().insert(key.clone(), entry.ttl.1);
            Ok(())
        })
        .await
    }

    async fn fifo_grant(
        &self,
        head: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        ticket: u64,
        position: u64,
        waited_out: Option<&Version>,
    ) -> Result<(), StoreError> {
        self.run("grant", head, |slot| {
            let r = slot.clone().unwrap_or_default();
            let free = r.lease_duration_ms.is_none_or(|l| l == RELEASED_LEASE_MS)
                || (slot.is_some() && waited_out.is_some_and(|v| r.version() == *v));
            if !free || r.fencing_token.is_some_and(|ft| ft >= ticket) {
                return Err(StoreError::condition_failed());
            }
            let mut new = LockRecord {
                owner: Some(fields.owner.into()),
                guid: Some(guid.to_vec()),
                fencing_token: Some(ticket),
                lease_duration_ms: Some(fields.lease_duration_ms),
                lock_acquired_time_unix_ms: fields.lock_acquired_time_unix_ms,
                ..r
            };
            new.queue_mut().queue_granted = Some(position);
            *slot = Some(new);
            Ok(())
        })
        .await
    }

    async fn fifo_finish_entry(&self, key: &LockKey, guids: &[Guid], new_guid: &Guid) -> Result<(), StoreError> {
        self.run("finish", key, |slot| {
            if !guid_in(slot, guids) {
                return Err(StoreError::condition_failed());
            }
            let r = slot.as_mut().expect("guid_in found the item");
            r.lease_duration_ms = Some(RELEASED_LEASE_MS);
            r.guid = Some(new_guid.to_vec());
            Ok(())
        })
        .await
    }

    async fn fifo_delete_finished(&self, key: &LockKey) -> Result<(), StoreError> {
        self.run("delete_finished", key, |slot| {
            if !slot.as_ref().is_some_and(|r| r.is_released()) {
                return Err(StoreError::condition_failed());
            }
            *slot = None;
            Ok(())
        })
        .await
    }

    async fn fifo_touch_entry(&self, key: &LockKey, ttl: (&str, u64)) -> Result<(), StoreError> {
        self.run("touch", key, |slot| match slot {
            Some(r) if !r.is_released() => {
                self.ttls.lock().unwrap().insert(key.clone(), ttl.1);
                Ok(())
            }
            _ => Err(StoreError::condition_failed()),
        })
        .await
    }

    async fn mark_waiting(&self, key: &LockKey, mark: &WaitMark<'_>) -> Result<(), StoreError> {
        self.run("mark", key, |slot| match slot {
            Some(r) => {
                let free = r.lock_waiting_unix_ms.is_none_or(|w| w < mark.stale_before_unix_ms)
                    || r.lock_waiter.as_deref() == Some(mark.waiter)
                    || r.lock_waiting_since_unix_ms.is_some_and(|s| s > mark.since_unix_ms);
                if !free {
                    return Err(StoreError::condition_failed());
                }
                r.lock_waiting_unix_ms = Some(mark.now_unix_ms);
                r.lock_waiter = Some(mark.waiter.into());
                r.lock_waiting_since_unix_ms = Some(mark.since_unix_ms);
                Ok(())
            }
            None => Err(StoreError::condition_failed()),
        })
        .await
    }
}

/// The model checker's store operations (model/src/ops.rs), checked against this store.
#[path = "../../model/src/ops.rs"]
mod model_ops;

#[cfg(test)]
mod model_agreement {
    //! The model checker (model/) explores the protocol over `model_ops`, an abstract store
    //! with the same conditions. Here every operation of both stores runs on every item of a
    //! small domain with every argument of a small domain; answers and resulting items must
    //! agree, so that the model cannot drift from the code unnoticed.

    use super::model_ops::{self as m, Item, G};
    use super::MemoryStore;
    use crate::error::StoreError;
    use crate::item::{Guid, LockRecord, QueueCounters, Version, RELEASED_LEASE_MS};
    use crate::store::{OpenFields, Store};
    use crate::testkit::key;

    fn guid(g: G) -> Guid {
        [g; crate::item::GUID_LEN]
    }

    fn record(i: &Option<Item>) -> Option<LockRecord> {
        i.map(|i| LockRecord {
            owner: Some("o".into()),
            guid: (i.guid > 0).then(|| guid(i.guid).to_vec()),
            fencing_token: (i.token > 0).then_some(i.token as u64),
            lease_duration_ms: match (i.holderless, i.released) {
                (true, _) => None,
                (false, true) => Some(RELEASED_LEASE_MS),
                (false, false) => Some(1000),
            },
            queue: (i.tn.is_some() || i.qn.is_some() || i.qg.is_some()).then(|| {
                Box::new(QueueCounters {
                    ticket_next: i.tn.map(u64::from),
                    queue_next: i.qn.map(u64::from),
                    queue_granted: i.qg.map(u64::from),
                })
            }),
            ..Default::default()
        })
    }

    /// What the model sees of a record.
    type Abs = (G, u8, bool, bool, Option<u8>, Option<u8>, Option<u8>);

    fn item(r: &Option<LockRecord>) -> Option<Abs> {
        let n = |v: Option<u64>| v.map(|v| v as u8);
        r.as_ref().map(|r| {
            let g = r.guid.as_ref().map_or(0, |g| g[0]);
            (
                g,
                r.fencing_token.unwrap_or(0) as u8,
                r.is_released(),
                r.lease_duration_ms.is_none(),
                n(r.ticket_next()),
                n(r.queue_next()),
                n(r.queue_granted()),
            )
        })
    }

    fn abs(i: &Option<Item>) -> Option<Abs> {
        i.map(|i| (i.guid, i.token, i.released, i.holderless, i.tn, i.qn, i.qg))
    }

    /// Lock items (FailClosed, FailOpen).
    fn items() -> Vec<Option<Item>> {
        let mut v = vec![None];
        for guid in [1, 2] {
            for token in [0, 1, 2] {
                for (holderless, released) in [(false, false), (false, true), (true, false)] {
                    v.push(Some(Item {
                        guid,
                        token,
                        released,
                        holderless,
                        ..Item::default()
                    }));
                }
            }
        }
        v
    }

    /// Fifo head items: lock items with every combination of counters.
    fn heads() -> Vec<Option<Item>> {
        let mut v = vec![None];
        for base in items().into_iter().flatten() {
            for tn in [None, Some(0), Some(1), Some(2)] {
                for qn in [None, Some(1), Some(2)] {
                    for qg in [None, Some(1)] {
                        v.push(Some(Item { tn, qn, qg, ..base }));
                    }
                }
            }
        }
        v.push(Some(Item {
            holderless: true,
            tn: Some(1),
            qn: Some(1),
            ..Item::default()
        }));
        v
    }

    const GUID_SETS: [[G; 2]; 4] = [[1, 0], [2, 0], [3, 1], [3, 4]];

    /// An operation's answer (`Ok`, or `Err` for a refused condition) and the item after it.
    type Seen<T> = (Result<T, ()>, Option<Abs>);

    /// Runs `op` on a memory store holding `start`.
    async fn on_memory<T, F>(start: &Option<Item>, op: F) -> Seen<T>
    where
        F: AsyncFnOnce(&MemoryStore) -> Result<T, StoreError>,
    {
        let store = MemoryStore::new(true);
        if let Some(r) = record(start) {
            store.set(&key("a"), r);
        }
        let r = op(&store).await.map_err(|e| {
            assert!(matches!(e, StoreError::ConditionFailed { .. }), "{e:?}");
        });
        (r, item(&store.record(&key("a"))))
    }

    fn on_model<T>(start: &Option<Item>, op: impl FnOnce(&mut Option<Item>) -> Result<T, Option<Item>>) -> Seen<T> {
        let mut slot = *start;
        let r = op(&mut slot).map_err(|cur| assert_eq!(cur, *start, "a refusal returns the item as it was"));
        (r, abs(&slot))
    }

    #[tokio::test]
    async fn model_ops_agree_with_the_memory_store() {
        let k = key("a");
        let f = OpenFields {
            owner: "o",
            lease_duration_ms: 1000,
            lock_acquired_time_unix_ms: None,
            data: None,
            ttl: None,
            token_floor: 0,
        };
        let mut checked = 0;
        for start in items() {
            for floor in [0, 5] {
                let f = OpenFields {
                    token_floor: floor as u64,
                    ..f.clone()
                };
                for g in [1, 3] {
                    for w in [None, Some((1, 0)), Some((1, 1)), Some((2, 2)), Some((2, 1))] {
                        let v = w.map(|(g, t): (G, u8)| Version {
                            guid: guid(g).to_vec(),
                            fencing_token: (t > 0).then_some(t as u64),
                        });
                        let mem = on_memory(&start, async |s| {
                            s.take(&k, &f, &guid(g), v.as_ref(), false).await.map(|t| t as u8)
                        })
                        .await;
                        assert_eq!(
                            mem,
                            on_model(&start, |i| m::take(i, g, w, floor)),
                            "take {start:?} {g} {w:?} {floor}"
                        );
                        checked += 1;
                    }
                }
            }
            assert_eq!(
                on_memory(&start, async |s| s.get(&k).await.map(|r| item(&r))).await.0,
                Ok(abs(&m::get(&start)))
            );
            for g in [1, 3] {
                let mem = on_memory(&start, async |s| s.put_if_absent(&k, "o", &guid(g), None, None).await).await;
                assert_eq!(
                    mem,
                    on_model(&start, |i| m::put_if_absent(i, g)),
                    "put_if_absent {start:?} {g}"
                );
            }
            for gs in GUID_SETS {
                let set = [guid(gs[0]), guid(gs[1])];
                let mem = on_memory(&start, async |s| s.delete_if_guid(&k, &set).await.map(|_| ())).await;
                assert_eq!(
                    mem,
                    on_model(&start, |i| m::delete_if_guid(i, &gs)),
                    "delete {start:?} {gs:?}"
                );
                let mem = on_memory(&start, async |s| s.release(&k, &set, None, None).await.map(|_| ())).await;
                assert_eq!(
                    mem,
                    on_model(&start, |i| m::release(i, &gs)),
                    "release {start:?} {gs:?}"
                );
                let mem = on_memory(&start, async |s| s.renew(&k, &set, &guid(5), &f).await).await;
                assert_eq!(mem, on_model(&start, |i| m::renew(i, &gs, 5)), "renew {start:?} {gs:?}");
                checked += 3;
            }
        }
        assert!(checked > 200, "{checked} cases");
    }

    #[tokio::test]
    async fn model_fifo_ops_agree_with_the_memory_store() {
        let k = key("a");
        let f = OpenFields {
            owner: "o",
            lease_duration_ms: 1000,
            lock_acquired_time_unix_ms: None,
            data: None,
            ttl: None,
            token_floor: 0,
        };
        let mut checked = 0;
        for start in heads() {
            let mem = on_memory(&start, async |s| {
                s.fifo_take_free(&k, &f, &guid(3)).await.map(|t| t as u8)
            })
            .await;
            assert_eq!(
                mem,
                on_model(&start, |i| m::fifo_take_free(i, 3)),
                "take_free {start:?}"
            );
            let mem = on_memory(&start, async |s| s.fifo_ticket(&k).await.map(|b| item(&b))).await;
            let model = on_model(&start, |i| Ok::<_, Option<Item>>(abs(&m::fifo_ticket(i))));
            assert_eq!(mem, model, "ticket {start:?}");
            for ticket in [1, 2, 3] {
                for w in [None, Some((1, 1)), Some((2, 2))] {
                    let v = w.map(|(g, t): (G, u8)| Version {
                        guid: guid(g).to_vec(),
                        fencing_token: (t > 0).then_some(t as u64),
                    });
                    let mem = on_memory(&start, async |s| {
                        s.fifo_grant(&k, &f, &guid(3), ticket as u64, 2, v.as_ref()).await
                    })
                    .await;
                    assert_eq!(
                        mem,
                        on_model(&start, |i| m::fifo_grant(i, 3, ticket, 2, w)),
                        "grant {start:?} {ticket} {w:?}"
                    );
                    checked += 1;
                }
                for position in [1, 2] {
                    let mem = on_memory(&start, async |s| {
                        s.fifo_untake(&k, ticket as u64, position as u64, 0).await
                    })
                    .await;
                    assert_eq!(
                        mem,
                        on_model(&start, |i| m::fifo_untake(i, ticket, position, 0)),
                        "untake {start:?} {ticket} {position}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 5000, "{checked} cases");
    }
}
