//! An in-memory `Store` for unit tests: the same conditions as DynamoDB, plus scripted faults
//! (errors before or after the write is applied, hung requests, delays) and a request log.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::{OpenFields, Store, WaitMark};
use crate::error::StoreError;
use crate::item::{Guid, LockKey, LockRecord, Version, RELEASED_LEASE_MS};

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
    /// "renew", "release").
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

    async fn put_if_absent(&self, key: &LockKey, owner: &str, guid: &Guid) -> Result<(), StoreError> {
        self.run("put", key, |slot| {
            if slot.is_some() {
                return Err(StoreError::condition_failed());
            }
            *slot = Some(LockRecord {
                owner: Some(owner.into()),
                guid: Some(guid.to_vec()),
                ..Default::default()
            });
            Ok(())
        })
        .await
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
            let token = slot.as_ref().and_then(|r| r.fencing_token).unwrap_or(0) + 1;
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
            });
            Ok(token)
        })
        .await
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
    }

    async fn release(
        &self,
        key: &LockKey,
        guids: &[Guid],
        lock_acquired_time_unix_ms: Option<u64>,
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
    }

    async fn hand_over(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: Option<&OpenFields<'_>>,
        marks_fresh_since_unix_ms: u64,
    ) -> Result<Option<u64>, StoreError> {
        self.run("handover", key, |slot| {
            let marked = slot
                .as_ref()
                .and_then(|r| r.lock_waiting_unix_ms)
                .is_some_and(|w| w >= marks_fresh_since_unix_ms);
            if !guid_in(slot, guids) || marked {
                return Err(StoreError::condition_failed());
            }
            let r = slot.as_mut().expect("guid_in found the item");
            r.guid = Some(new_guid.to_vec());
            Ok(fields.map(|f| {
                r.owner = Some(f.owner.into());
                r.lease_duration_ms = Some(f.lease_duration_ms);
                r.lock_acquired_time_unix_ms = f.lock_acquired_time_unix_ms;
                let token = r.fencing_token.unwrap_or(0) + 1;
                r.fencing_token = Some(token);
                token
            }))
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
