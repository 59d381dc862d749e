//! One step on one store, and its outcome. `put_item` is the original library's whole-item
//! put, which only the user-object store sends: on DynamoDB it goes as the very request the
//! original sends (`object::Params::put_item`), written as DynamoDB JSON.

use super::step::{guid, Expect, Step, TTL};
use crate::error::StoreError;
use crate::item::{Guid, LockKey, LockRecord, TableSpec};
use crate::store::http::HttpStore;
use crate::store::object::{Params, Value};
use crate::store::{Entry, Store, StoreOps, WaitMark, WholeItem};
use dynamodb_lock_core::op::{Grant, Holder, Op, Reply};
use dynamodb_lock_wire::json::{Attr, Body};

/// What a store answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Done,
    Token(u64),
    Before(Option<LockRecord>),
    WaitingMark(Option<u64>),
    HandedOver(Option<u64>),
    /// A failed condition, with the item the store returned with it (`None`: it returned
    /// none; `Some(None)`: it says there is no item).
    Refused(Option<Option<LockRecord>>),
    /// Any other error: its code and message.
    Failed(String),
}

impl Outcome {
    fn of<T>(r: Result<T, StoreError>, ok: impl FnOnce(T) -> Outcome) -> Outcome {
        match r {
            Ok(v) => ok(v),
            Err(StoreError::ConditionFailed { current }) => Outcome::Refused(current.map(|c| c.map(|b| *b))),
            Err(e) => Outcome::Failed(format!("{}: {}", e.code(), e)),
        }
    }
}

/// A write's reply, as `Outcome`.
fn written(r: Reply<LockRecord>) -> Outcome {
    match r {
        Reply::Done => Outcome::Done,
        other => Outcome::Failed(format!("unexpected reply {other:?}")),
    }
}

fn guids(ns: &[u32]) -> Vec<Guid> {
    ns.iter().map(|n| guid(*n)).collect()
}

/// Runs `step` on `store` at `key`; `raw`, when given, carries `put_item` (the HTTP store).
pub async fn run(store: &dyn Store, raw: Option<(&HttpStore, &TableSpec)>, key: &LockKey, step: &Step) -> Outcome {
    let done = |_| Outcome::Done;
    match step {
        Step::Get => Outcome::of(store.get(key).await, Outcome::Before),
        Step::PutIfAbsent {
            owner,
            guid: g,
            data,
            ttl,
        } => Outcome::of(
            store
                .put_if_absent(key, owner, &guid(*g), data.as_ref(), ttl.map(|t| (TTL, t)))
                .await,
            done,
        ),
        Step::DeleteIfGuid { guids: gs } => {
            Outcome::of(store.delete_if_guid(key, &guids(gs)).await, Outcome::WaitingMark)
        }
        Step::Take {
            fields,
            guid: g,
            waited_out,
            clear_mark,
        } => {
            let v = waited_out.as_ref().map(|v| v.version());
            let r = store
                .take(key, &fields.open(), &guid(*g), v.as_ref(), *clear_mark)
                .await;
            Outcome::of(r, Outcome::Token)
        }
        Step::HandOver {
            guids: gs,
            new_guid,
            fields,
            fresh,
            ttl,
        } => {
            let f = fields.as_ref().map(|f| f.open());
            let ttl = ttl.map(|t| (TTL, t));
            let r = store
                .hand_over(key, &guids(gs), &guid(*new_guid), f.as_ref(), *fresh, ttl)
                .await;
            Outcome::of(r, Outcome::HandedOver)
        }
        Step::PutItem { .. } => put_item(store, raw, key, step).await,
        Step::Renew {
            guids: gs,
            new_guid,
            fields,
        } => Outcome::of(
            store.renew(key, &guids(gs), &guid(*new_guid), &fields.open()).await,
            |_: Vec<Vec<u8>>| Outcome::Done,
        ),
        Step::Release {
            guids: gs,
            acquired,
            ttl,
        } => Outcome::of(
            store.release(key, &guids(gs), *acquired, ttl.map(|t| (TTL, t))).await,
            Outcome::WaitingMark,
        ),
        Step::SetData { guids: gs, data, ttl } => Outcome::of(
            store
                .set_data(key, &guids(gs), data.as_ref(), ttl.map(|t| (TTL, t)))
                .await,
            done,
        ),
        Step::MarkWaiting {
            waiter,
            since,
            now,
            stale,
        } => {
            let mark = WaitMark {
                waiter,
                owner: "waiter",
                since_unix_ms: *since,
                now_unix_ms: *now,
                stale_before_unix_ms: *stale,
            };
            Outcome::of(store.mark_waiting(key, &mark).await, done)
        }
        Step::ForceFree {
            read,
            new_guid,
            now,
            delete,
        } => {
            let (read, new_guid) = (read.version(), guid(*new_guid));
            let op = Op::ForceFree {
                read: &read,
                new_guid: &new_guid,
                now_unix_ms: *now,
                delete: *delete,
            };
            Outcome::of(store.apply(key, &op).await, written)
        }
        Step::Revoke {
            read,
            new_guid,
            now,
            session,
        } => {
            let (read, new_guid) = (read.version(), guid(*new_guid));
            let op = Op::Revoke {
                read: &read,
                new_guid: &new_guid,
                now_unix_ms: *now,
                session: session.as_ref().map(|(id, lease)| (id.as_str(), *lease)),
            };
            Outcome::of(store.apply(key, &op).await, written)
        }
        Step::MarkRevoked { guid: g } => {
            let op = Op::MarkRevoked { guid: &guid(*g) };
            Outcome::of(store.apply(key, &op).await, written)
        }
        Step::Prune {
            read,
            ticket_next,
            permits,
        } => {
            let read = read.version();
            let op = Op::Prune {
                read: &read,
                ticket_next: *ticket_next,
                permits: *permits,
            };
            Outcome::of(store.apply(key, &op).await, written)
        }
        _ => run_fifo(store, key, step).await,
    }
}

async fn run_fifo(store: &dyn Store, key: &LockKey, step: &Step) -> Outcome {
    let done = |_| Outcome::Done;
    match step {
        Step::FifoTakeFree { fields, guid: g } => Outcome::of(
            store.fifo_take_free(key, &fields.open(), &guid(*g)).await,
            Outcome::Token,
        ),
        Step::FifoTicket => Outcome::of(store.fifo_ticket(key).await, Outcome::Before),
        Step::FifoReserve { ticket } => Outcome::of(store.fifo_reserve(key, *ticket).await, Outcome::Before),
        Step::FifoUntake {
            ticket,
            position,
            previous,
        } => Outcome::of(store.fifo_untake(key, *ticket, *position, *previous).await, done),
        Step::FifoPutEntry {
            owner,
            guid: g,
            ticket,
            lease,
            ttl,
        } => {
            let g = guid(*g);
            let entry = Entry {
                owner,
                guid: &g,
                ticket: *ticket,
                permits: (*ticket % 3 == 0).then_some(2),
                lease_duration_ms: *lease,
                ttl: (TTL, *ttl),
            };
            Outcome::of(store.fifo_put_entry(key, &entry).await, done)
        }
        Step::FifoGrant {
            fields,
            guid: g,
            ticket,
            position,
            waited_out,
        } => {
            let v = waited_out.as_ref().map(|v| v.version());
            let r = store
                .fifo_grant(key, &fields.open(), &guid(*g), *ticket, *position, v.as_ref())
                .await;
            Outcome::of(r, done)
        }
        Step::FifoFinishEntry { guids: gs, new_guid } => {
            Outcome::of(store.fifo_finish_entry(key, &guids(gs), &guid(*new_guid)).await, done)
        }
        Step::FifoDeleteFinished => Outcome::of(store.fifo_delete_finished(key).await, done),
        Step::FifoTouchEntry { ttl } => Outcome::of(store.fifo_touch_entry(key, (TTL, *ttl)).await, done),
        _ => run_sem(store, key, step).await,
    }
}

/// A semaphore's step on its head.
async fn run_sem(store: &dyn Store, key: &LockKey, step: &Step) -> Outcome {
    let reply = |r: Result<Reply<LockRecord>, StoreError>| {
        Outcome::of(r, |reply| match reply {
            Reply::Token(t) => Outcome::Token(t),
            Reply::WaitingMark(m) => Outcome::WaitingMark(m),
            _ => Outcome::Done,
        })
    };
    match step {
        Step::SemTake {
            fields,
            guid: g,
            limit,
            permits,
        } => {
            let (f, g) = (fields.open(), guid(*g));
            let op = Op::SemTake {
                fields: &f,
                guid: &g,
                limit: *limit,
                permits: *permits,
            };
            reply(store.apply(key, &op).await)
        }
        Step::SemGrant {
            fields,
            guid: g,
            limit,
            permits,
            ticket,
            position,
            reclaim,
        } => {
            let (f, g) = (fields.open(), guid(*g));
            let reclaim: Vec<Holder<Guid>> = reclaim
                .iter()
                .map(|&(k, hg, p)| Holder {
                    key: guid(k),
                    guid: guid(hg),
                    permits: p,
                    lease_duration_ms: 0,
                })
                .collect();
            let op = Op::SemGrant(Grant {
                fields: &f,
                guid: &g,
                limit: *limit,
                permits: *permits,
                ticket: *ticket,
                position: *position,
                reclaim: &reclaim,
            });
            reply(store.apply(key, &op).await)
        }
        Step::SemRenew {
            key: k,
            guids: gs,
            new_guid,
            permits,
            fields,
        } => {
            let (f, k, gs, n) = (fields.open(), guid(*k), guids(gs), guid(*new_guid));
            let op = Op::SemRenew {
                key: &k,
                guids: &gs,
                new_guid: &n,
                permits: *permits,
                fields: &f,
            };
            reply(store.apply(key, &op).await)
        }
        Step::SemRelease {
            key: k,
            guids: gs,
            permits,
        } => {
            let (k, gs) = (guid(*k), guids(gs));
            let op = Op::SemRelease {
                key: &k,
                guids: &gs,
                permits: *permits,
            };
            reply(store.apply(key, &op).await)
        }
        other => Outcome::Failed(format!("not a Fifo step: {other:?}")),
    }
}

async fn put_item(store: &dyn Store, raw: Option<(&HttpStore, &TableSpec)>, key: &LockKey, step: &Step) -> Outcome {
    let Step::PutItem {
        owner,
        guid: g,
        token,
        lease,
        acquired,
        expect,
    } = step
    else {
        return Outcome::Failed(format!("not a put_item: {step:?}"));
    };
    let expect = match expect {
        Expect::Absent => crate::store::Expect::Absent,
        Expect::AbsentOr(vg, vt) => crate::store::Expect::AbsentOr(crate::item::Version {
            guid: Some(crate::item::GuidValue::B(guid(*vg).to_vec())),
            fencing_token: Some(*vt),
        }),
        Expect::Guid(eg) => crate::store::Expect::Guid(guid(*eg)),
    };
    let w = WholeItem {
        owner,
        guid: &guid(*g),
        fencing_token: *token,
        lease_duration_ms: *lease,
        lock_acquired_time_unix_ms: *acquired,
        expect: &expect,
    };
    match raw {
        None => Outcome::of(store.put_item(key, &w).await, |_| Outcome::Done),
        Some((http, table)) => {
            let params = Params { table: table.clone() }.put_item(key, &w);
            match put_item_body(table, key, &params) {
                Ok(body) => Outcome::of(http.call_raw("PutItem", body).await, |_| Outcome::Done),
                Err(e) => Outcome::Failed(e),
            }
        }
    }
}

/// The original's `put` parameters (DocumentClient form) as a DynamoDB `PutItem` body.
fn put_item_body(table: &TableSpec, key: &LockKey, params: &Value) -> Result<String, String> {
    let Value::Map(fields) = params else {
        return Err("parameters are not an object".into());
    };
    let mut b = Body::new(&table.name);
    for (name, v) in fields {
        match (name.as_str(), v) {
            ("TableName", _) => {}
            ("Item", Value::Map(attrs)) => {
                let keys = [Some(&table.partition_key), table.sort_key.as_ref()];
                let extra = attrs
                    .iter()
                    .filter(|(n, _)| !keys.contains(&Some(n)))
                    .map(|(n, v)| Ok((n.as_str(), attr(v)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                b.item("Item", table, key, &extra);
            }
            ("ConditionExpression", Value::Str(c)) => b.str("ConditionExpression", c),
            ("ExpressionAttributeNames", Value::Map(names)) => {
                let names = names
                    .iter()
                    .map(|(n, v)| match v {
                        Value::Str(s) => Ok((n.as_str(), s.as_str())),
                        other => Err(format!("name {n} is {other:?}")),
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                b.names(&names);
            }
            ("ExpressionAttributeValues", Value::Map(values)) => {
                let values = values
                    .iter()
                    .map(|(n, v)| Ok((n.as_str(), attr(v)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                b.values(&values);
            }
            (other, v) => return Err(format!("unexpected parameter {other}: {v:?}")),
        }
    }
    Ok(b.finish())
}

fn attr(v: &Value) -> Result<Attr<'_>, String> {
    match v {
        Value::Str(s) => Ok(Attr::S(s)),
        Value::Num(n) if n.is_finite() && *n >= 0.0 && n.fract() == 0.0 => Ok(Attr::N(*n as u64)),
        Value::Buf(b) => Ok(Attr::B(b)),
        other => Err(format!("no DynamoDB value for {other:?}")),
    }
}
