//! An in-memory `Store` for unit tests and the agreement test (`src/tests/agreement`): it applies
//! each of the core's operations (`dynamodb_lock_core::op::Op`) to the item through
//! `op::apply`, the conditions the model checks; plus scripted faults (errors before or after
//! the write is applied, hung requests, delays) and a request log.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use dynamodb_lock_core::op::{self, Op, Reply};

use super::Store;
use crate::error::StoreError;
use crate::item::{LockKey, LockRecord};

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
    /// Panic in the request's task (a bug of the sender's side).
    Panic,
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

    /// Drops the faults still queued.
    pub fn clear_faults(&self) {
        self.faults.lock().unwrap().clear();
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

    /// The operations sent so far, in order.
    pub fn sent(&self) -> Vec<&'static str> {
        self.log.lock().unwrap().clone()
    }

    fn take_fault(&self, op: &'static str) -> Option<Fault> {
        let mut q = self.faults.lock().unwrap();
        let i = q.iter().position(|(o, _)| *o == op)?;
        q.remove(i).map(|(_, f)| f)
    }

    /// Logs the request as `name`, plays its fault, and applies `op` to the item at `key`.
    async fn run(
        &self,
        name: &'static str,
        key: &LockKey,
        op: &Op<'_, LockRecord>,
    ) -> Result<Reply<LockRecord>, StoreError> {
        self.log.lock().unwrap().push(name);
        let fault = self.take_fault(name);
        match &fault {
            Some(Fault::Fail(e)) => return Err(e.clone()),
            Some(Fault::Hang) => std::future::pending::<()>().await,
            Some(Fault::Delay(d)) => tokio::time::sleep(*d).await,
            Some(Fault::Panic) => panic!("a fault of the test: {name} panics"),
            _ => {}
        }
        let result = {
            let mut items = self.items.lock().unwrap();
            match op::apply(op, items.get(key).cloned()) {
                (_, Reply::Refused(before)) => Err(StoreError::ConditionFailed {
                    current: self.returns_old.then(|| before.map(Box::new)),
                }),
                (after, reply) => {
                    match after {
                        // Every write of a holder of this package also records when it was
                        // made, as the HTTP store does; a waiter's (its mark, a Fifo ticket)
                        // and the original's whole-item write do not.
                        Some(mut rec) if !UNSTAMPED.contains(&name) => {
                            rec.lock_written_unix_ms = Some(written_now());
                            items.insert(key.clone(), rec)
                        }
                        Some(rec) => items.insert(key.clone(), rec),
                        None => items.remove(key),
                    };
                    if let Some((_, at)) = op.ttl() {
                        self.ttls.lock().unwrap().insert(key.clone(), at);
                    }
                    Ok(reply)
                }
            }
        };
        match fault {
            Some(Fault::ApplyThenFail(e)) => Err(e),
            _ => result,
        }
    }
}

/// Operations that leave `lockWrittenUnixMs` as it was: reads, waiters' writes, an operator's
/// naming of a revoked lock on its session's item, and the original's whole-item write (which
/// drops it).
const UNSTAMPED: [&str; 7] = ["get", "put_item", "mark", "ticket", "reserve", "untake", "mark_revoked"];

/// `lockWrittenUnixMs` of a write made now (Unix ms, this host's clock).
fn written_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The name an operation is logged and faulted by.
fn name(op: &Op<'_, LockRecord>) -> &'static str {
    match op {
        Op::Get => "get",
        Op::PutIfAbsent { .. } => "put",
        Op::DeleteIfGuid { .. } => "delete",
        Op::Take { .. } => "take",
        Op::HandOver { .. } => "handover",
        Op::Renew { .. } => "renew",
        Op::PutItem { .. } => "put_item",
        Op::Release { .. } => "release",
        Op::SetData { .. } => "set_data",
        Op::MarkWaiting(_) => "mark",
        Op::FifoTakeFree { .. } => "fifo_take",
        Op::FifoTicket => "ticket",
        Op::FifoReserve { .. } => "reserve",
        Op::FifoUntake { .. } => "untake",
        Op::FifoPutEntry(_) => "enqueue",
        Op::FifoGrant { .. } => "grant",
        Op::FifoFinishEntry { .. } => "finish",
        Op::FifoDeleteFinished => "delete_finished",
        Op::FifoTouchEntry { .. } => "touch",
        Op::SemTake { .. } => "sem_take",
        Op::SemGrant(_) => "sem_grant",
        Op::SemRenew { .. } => "sem_renew",
        Op::SemRelease { .. } => "sem_release",
        Op::ForceFree { .. } => "force_free",
        Op::Revoke { .. } => "revoke",
        Op::MarkRevoked { .. } => "mark_revoked",
        Op::Prune { .. } => "prune",
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn apply(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Reply<LockRecord>, StoreError> {
        self.run(name(op), key, op).await
    }
}

/// The model checker's item (model/src/item.rs), checked against this store's.
#[cfg(test)]
#[path = "../../model/src/item.rs"]
mod model_item;

#[cfg(test)]
mod model_agreement {
    //! The model checker (model/) applies the core's operations to `model_item::Item`, a small
    //! view of the lock item. Here every operation runs on every item of a small domain with
    //! every argument of a small domain, once on this store and once on the model's item;
    //! answers and resulting items must agree, so that what the model's item leaves out
    //! cannot change an answer unnoticed.

    use dynamodb_lock_core::op::{self as m, Op, Reply};

    use super::model_item::{Item, G};
    use super::MemoryStore;
    use crate::error::StoreError;
    use crate::item::{Guid, GuidValue, LockRecord, QueueCounters, Version, RELEASED_LEASE_MS};
    use crate::store::{OpenFields, StoreOps};
    use crate::testkit::key;

    fn guid(g: G) -> Guid {
        [g; crate::item::GUID_LEN]
    }

    fn record(i: &Option<Item>) -> Option<LockRecord> {
        i.map(|i| LockRecord {
            owner: Some("o".into()),
            guid: (i.guid > 0).then(|| GuidValue::B(guid(i.guid).to_vec())),
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
                    ..Default::default()
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
            let g = match &r.guid {
                Some(GuidValue::B(g)) => g[0],
                _ => 0,
            };
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

    /// Applies `op` to the model's item `start`; `answer` reads an applied operation's reply.
    fn on_model<T>(start: &Option<Item>, op: &Op<'_, Item>, answer: impl FnOnce(Reply<Item>) -> T) -> Seen<T> {
        let (slot, reply) = m::apply(op, *start);
        let r = match reply {
            Reply::Refused(cur) => {
                assert_eq!(cur, *start, "a refusal returns the item as it was");
                Err(())
            }
            reply => Ok(answer(reply)),
        };
        (r, abs(&slot))
    }

    fn token(r: Reply<Item>) -> u8 {
        match r {
            Reply::Token(t) => t as u8,
            other => panic!("{other:?}"),
        }
    }

    fn done(r: Reply<Item>) {
        assert!(matches!(r, Reply::Done | Reply::WaitingMark(_)), "{r:?}");
    }

    fn model_fields(floor: u8) -> OpenFields<'static> {
        OpenFields {
            owner: "",
            lease_duration_ms: super::model_item::HELD_LEASE_MS,
            lock_acquired_time_unix_ms: None,
            data: None,
            ttl: None,
            token_floor: floor.into(),
            session: None,
        }
    }

    /// The fields the memory store's operations write, with a token floor of `floor`.
    fn memory_fields(floor: u64) -> OpenFields<'static> {
        OpenFields {
            owner: "o",
            lease_duration_ms: 1000,
            lock_acquired_time_unix_ms: None,
            data: None,
            ttl: None,
            token_floor: floor,
            session: None,
        }
    }

    /// Takes by each guid, waited out on each version (or none), under each token floor;
    /// returns the number of cases checked.
    async fn check_takes(start: &Option<Item>) -> usize {
        let k = key("a");
        let mut checked = 0;
        for floor in [0, 5] {
            let f = memory_fields(floor as u64);
            for g in [1, 3] {
                for w in [None, Some((1, 0)), Some((1, 1)), Some((2, 2)), Some((2, 1))] {
                    let v = w.map(|(g, t): (G, u8)| Version {
                        guid: Some(GuidValue::B(guid(g).to_vec())),
                        fencing_token: (t > 0).then_some(t as u64),
                    });
                    let mem = on_memory(start, async |s| {
                        s.take(&k, &f, &guid(g), v.as_ref(), false).await.map(|t| t as u8)
                    })
                    .await;
                    assert_eq!(
                        mem,
                        on_model(
                            start,
                            &Op::Take {
                                fields: &model_fields(floor),
                                guid: &g,
                                waited_out: w.as_ref(),
                                clear_mark: false,
                            },
                            token
                        ),
                        "take {start:?} {g} {w:?} {floor}"
                    );
                    checked += 1;
                }
            }
        }
        checked
    }

    /// A read sees the item as the model has it.
    async fn check_get(start: &Option<Item>) {
        let k = key("a");
        assert_eq!(
            on_memory(start, async |s| s.get(&k).await.map(|r| item(&r))).await.0,
            on_model(start, &Op::Get, |r| match r {
                Reply::Before(i) => abs(&i),
                other => panic!("{other:?}"),
            })
            .0
        );
    }

    /// Writes of an item where there is none, by each guid.
    async fn check_puts_if_absent(start: &Option<Item>) {
        let k = key("a");
        for g in [1, 3] {
            let mem = on_memory(start, async |s| s.put_if_absent(&k, "o", &guid(g), None, None).await).await;
            assert_eq!(
                mem,
                on_model(
                    start,
                    &Op::PutIfAbsent {
                        owner: "",
                        guid: &g,
                        data: None,
                        ttl: None
                    },
                    done
                ),
                "put_if_absent {start:?} {g}"
            );
        }
    }

    /// What a whole-item write may expect of the item, as the memory store and the model
    /// state it: nothing there, nothing or a version, or a guid.
    type Both = (m::Expect<Guid, Version>, m::Expect<G, (G, u8)>);

    fn put_item_expects() -> Vec<Both> {
        let versions = [(1, 0), (1, 1), (2, 2), (2, 1)];
        std::iter::once((m::Expect::Absent, m::Expect::Absent))
            .chain(versions.iter().map(|&(vg, t)| {
                let v = Version {
                    guid: Some(GuidValue::B(guid(vg).to_vec())),
                    fencing_token: (t > 0).then_some(t as u64),
                };
                (m::Expect::AbsentOr(v), m::Expect::AbsentOr((vg, t)))
            }))
            .chain([1, 2, 3].map(|h| (m::Expect::Guid(guid(h)), m::Expect::Guid(h))))
            .collect()
    }

    /// Whole-item writes by each guid under each expectation; returns the number of cases
    /// checked.
    async fn check_put_items(start: &Option<Item>) -> usize {
        let k = key("a");
        let mut checked = 0;
        for g in [1, 3] {
            for (mem_expect, model_expect) in &put_item_expects() {
                let w = crate::store::WholeItem {
                    owner: "o",
                    guid: &guid(g),
                    fencing_token: 7,
                    lease_duration_ms: 1000,
                    lock_acquired_time_unix_ms: None,
                    expect: mem_expect,
                };
                let mem = on_memory(start, async |s| s.put_item(&k, &w).await).await;
                assert_eq!(
                    mem,
                    on_model(
                        start,
                        &Op::PutItem {
                            owner: "",
                            guid: &g,
                            fencing_token: 7,
                            lease_duration_ms: 1000,
                            lock_acquired_time_unix_ms: None,
                            expect: model_expect,
                        },
                        done
                    ),
                    "put_item {start:?} {g} {model_expect:?}"
                );
                checked += 1;
            }
        }
        checked
    }

    /// Deletes, releases and renewals on each set of guids; returns the number of cases
    /// checked.
    async fn check_guid_set_ops(start: &Option<Item>) -> usize {
        let k = key("a");
        let f = memory_fields(0);
        let mut checked = 0;
        for gs in GUID_SETS {
            let set = [guid(gs[0]), guid(gs[1])];
            let mem = on_memory(start, async |s| s.delete_if_guid(&k, &set).await.map(|_| ())).await;
            assert_eq!(
                mem,
                on_model(start, &Op::DeleteIfGuid { guids: &gs }, done),
                "delete {start:?} {gs:?}"
            );
            let mem = on_memory(start, async |s| s.release(&k, &set, None, None).await.map(|_| ())).await;
            assert_eq!(
                mem,
                on_model(
                    start,
                    &Op::Release {
                        guids: &gs,
                        lock_acquired_time_unix_ms: None,
                        ttl: None
                    },
                    done
                ),
                "release {start:?} {gs:?}"
            );
            let mem = on_memory(start, async |s| s.renew(&k, &set, &guid(5), &f).await.map(drop)).await;
            assert_eq!(
                mem,
                on_model(
                    start,
                    &Op::Renew {
                        guids: &gs,
                        new_guid: &5,
                        fields: &model_fields(0)
                    },
                    done
                ),
                "renew {start:?} {gs:?}"
            );
            checked += 3;
        }
        checked
    }

    #[tokio::test]
    async fn model_ops_agree_with_the_memory_store() {
        let mut checked = 0;
        for start in items() {
            checked += check_takes(&start).await;
            check_get(&start).await;
            check_puts_if_absent(&start).await;
            checked += check_put_items(&start).await;
            checked += check_guid_set_ops(&start).await;
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
            session: None,
        };
        let mut checked = 0;
        for start in heads() {
            let mem = on_memory(&start, async |s| {
                s.fifo_take_free(&k, &f, &guid(3)).await.map(|t| t as u8)
            })
            .await;
            assert_eq!(
                mem,
                on_model(
                    &start,
                    &Op::FifoTakeFree {
                        fields: &model_fields(0),
                        guid: &3
                    },
                    token
                ),
                "take_free {start:?}"
            );
            let mem = on_memory(&start, async |s| s.fifo_ticket(&k).await.map(|b| item(&b))).await;
            let model = on_model(&start, &Op::FifoTicket, |r| match r {
                Reply::Before(i) => abs(&i),
                other => panic!("{other:?}"),
            });
            assert_eq!(mem, model, "ticket {start:?}");
            for ticket in [1, 2, 3] {
                for w in [None, Some((1, 1)), Some((2, 2))] {
                    let v = w.map(|(g, t): (G, u8)| Version {
                        guid: Some(GuidValue::B(guid(g).to_vec())),
                        fencing_token: (t > 0).then_some(t as u64),
                    });
                    let mem = on_memory(&start, async |s| {
                        s.fifo_grant(&k, &f, &guid(3), ticket as u64, 2, v.as_ref()).await
                    })
                    .await;
                    assert_eq!(
                        mem,
                        on_model(
                            &start,
                            &Op::FifoGrant {
                                fields: &model_fields(0),
                                guid: &3,
                                ticket: ticket as u64,
                                position: 2,
                                waited_out: w.as_ref()
                            },
                            done
                        ),
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
                        on_model(
                            &start,
                            &Op::FifoUntake {
                                ticket: ticket as u64,
                                position: position as u64,
                                previous_ticket: 0
                            },
                            done
                        ),
                        "untake {start:?} {ticket} {position}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 5000, "{checked} cases");
    }
}
