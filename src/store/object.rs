//! The user's own `dynamodb` object (a test double, a wrapper, a DocumentClient chosen with
//! `transport: "object"`) as a store. Its `get`, `put` and `delete` are called with exactly the
//! parameters `dynamodb-lock-client` 0.7.x sends, field for field and in the same order, so
//! that doubles and wrappers written for the original keep working. The requests themselves
//! are the core's (`dynamodb_lock_core::original`): a consistent read, conditional puts of the
//! whole item, a conditional delete.
//!
//! The call goes through one JavaScript function (`lib/object-store.js`), which calls the
//! method, settles once whichever of its callback or returned promise answers first, keeps the
//! user's error object to hand back to the caller as it was, and answers with what the
//! protocol reads of the reply: the item's attributes, or the error's `code` and whether it is
//! a failed condition (`code` or `name` `ConditionalCheckFailedException`).

use std::sync::Arc;

use async_trait::async_trait;
use dynamodb_lock_core::op::Expect;
use napi::bindgen_prelude::{Buffer, FnArgs, Object, Promise, ToNapiValue};
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{sys, JsValue, Status};
use napi_derive::napi;

use super::{not_supported, Op, Reply, Store, WholeItem};
use crate::error::StoreError;
use crate::item::{Found, Guid, GuidValue, KeyValue, LockKey, LockRecord, TableSpec};
use crate::stats::Stats;

/// A JavaScript value as a request's parameters hold it: strings, numbers, Buffers and objects
/// whose keys keep their order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Num(f64),
    Bool(bool),
    Buf(Vec<u8>),
    Map(Vec<(String, Value)>),
}

impl Value {
    fn map(fields: Vec<(&str, Value)>) -> Value {
        Value::Map(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    fn str(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl ToNapiValue for Value {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        match val {
            Value::Str(s) => String::to_napi_value(env, s),
            Value::Num(n) => f64::to_napi_value(env, n),
            Value::Bool(b) => bool::to_napi_value(env, b),
            Value::Buf(b) => Buffer::to_napi_value(env, Buffer::from(b)),
            Value::Map(fields) => {
                let mut o = Object::new(&napi::Env::from_raw(env))?;
                for (k, v) in fields {
                    o.set(k, v)?;
                }
                Ok(o.raw())
            }
        }
    }
}

/// One attribute of an item, as `lib/object-store.js` passes it on for the core's rule
/// (`LockRecord::read`) to read.
#[napi(object)]
pub struct ObjectAttribute {
    pub name: String,
    /// `S` (a string), `N` (a number or bigint, `value` its decimal text), `B` (a Buffer or
    /// typed array, `value` in hex), or the JavaScript type of anything else.
    pub kind: String,
    pub value: String,
}

/// The lock's attributes of an item.
#[napi(object)]
pub struct ObjectItem {
    pub attributes: Vec<ObjectAttribute>,
}

/// A failure of the user's method: the error object is kept in JavaScript under `id`.
#[napi(object)]
pub struct ObjectError {
    pub id: u32,
    pub code: String,
    pub message: String,
    pub condition_failed: bool,
}

/// How a call of the user's method ended.
#[napi(object)]
pub struct ObjectReply {
    /// `get`: the item, when the reply carried one.
    pub item: Option<ObjectItem>,
    pub error: Option<ObjectError>,
}

/// The JavaScript function that calls `dynamodb[method](params, callback)`.
pub type CallFn =
    ThreadsafeFunction<FnArgs<(String, Value)>, Promise<ObjectReply>, FnArgs<(String, Value)>, Status, false, true>;

const CONDITION_FAILED: &str = "ConditionalCheckFailedException";

/// The parameters of the original's requests for one table.
pub struct Params {
    pub table: TableSpec,
}

impl Params {
    fn key(&self, key: &LockKey) -> Vec<(String, Value)> {
        let mut k = vec![(self.table.partition_key.clone(), key_value(&key.partition))];
        if let (Some(name), Some(v)) = (&self.table.sort_key, &key.sort) {
            k.push((name.clone(), key_value(v)));
        }
        k
    }

    fn not_exists(&self) -> &'static str {
        match self.table.sort_key {
            Some(_) => "(attribute_not_exists(#partitionKey) and attribute_not_exists(#sortKey))",
            None => "attribute_not_exists(#partitionKey)",
        }
    }

    fn exists(&self) -> &'static str {
        match self.table.sort_key {
            Some(_) => "(attribute_exists(#partitionKey) and attribute_exists(#sortKey))",
            None => "attribute_exists(#partitionKey)",
        }
    }

    fn names(&self) -> Value {
        let mut n = vec![("#partitionKey", Value::str(&self.table.partition_key))];
        if let Some(s) = &self.table.sort_key {
            n.push(("#sortKey", Value::str(s)));
        }
        Value::map(n)
    }

    /// `get`: a consistent read of the item.
    pub fn get(&self, key: &LockKey) -> Value {
        Value::map(vec![
            ("TableName", Value::str(&self.table.name)),
            ("Key", Value::Map(self.key(key))),
            ("ConsistentRead", Value::Bool(true)),
        ])
    }

    /// `put`: a FailClosed acquisition, `{key, owner, guid}` if there is no item.
    pub fn put_if_absent(&self, key: &LockKey, owner: &str, guid: &Guid) -> Value {
        let mut item = self.key(key);
        item.push(("owner".into(), Value::str(owner)));
        item.push(("guid".into(), Value::Buf(guid.to_vec())));
        Value::map(vec![
            ("TableName", Value::str(&self.table.name)),
            ("Item", Value::Map(item)),
            ("ConditionExpression", Value::str(self.not_exists())),
            ("ExpressionAttributeNames", self.names()),
        ])
    }

    /// `delete`: a FailClosed release, if the item carries `guid`.
    pub fn delete_if_guid(&self, key: &LockKey, guid: &Guid) -> Value {
        Value::map(vec![
            ("TableName", Value::str(&self.table.name)),
            ("Key", Value::Map(self.key(key))),
            (
                "ConditionExpression",
                Value::Str(format!("{} and guid = :guid", self.exists())),
            ),
            ("ExpressionAttributeNames", self.names()),
            (
                "ExpressionAttributeValues",
                Value::map(vec![(":guid", Value::Buf(guid.to_vec()))]),
            ),
        ])
    }

    /// `put`: the whole FailOpen item (an acquisition, a heartbeat, a release).
    pub fn put_item(&self, key: &LockKey, w: &WholeItem<'_>) -> Value {
        let mut item = vec![
            (self.table.partition_key.clone(), key_value(&key.partition)),
            ("fencingToken".into(), Value::Num(w.fencing_token as f64)),
            ("leaseDurationMs".into(), Value::Num(w.lease_duration_ms as f64)),
            ("owner".into(), Value::str(w.owner)),
            ("guid".into(), Value::Buf(w.guid.to_vec())),
        ];
        if let Some(t) = w.lock_acquired_time_unix_ms {
            item.push(("lockAcquiredTimeUnixMs".into(), Value::Num(t as f64)));
        }
        if let (Some(name), Some(v)) = (&self.table.sort_key, &key.sort) {
            item.push((name.clone(), key_value(v)));
        }
        let (condition, values) = match w.expect {
            Expect::Absent => (self.not_exists().to_string(), None),
            Expect::AbsentOr(seen) => (
                format!(
                    "{} or (guid = :guid and fencingToken = :fencingToken)",
                    self.not_exists()
                ),
                Some(Value::map(vec![
                    (
                        ":fencingToken",
                        seen.fencing_token
                            .map_or(Value::Num(f64::NAN), |t| Value::Num(t as f64)),
                    ),
                    (
                        ":guid",
                        match &seen.guid {
                            Some(GuidValue::B(b)) => Value::Buf(b.clone()),
                            Some(GuidValue::S(s)) => Value::str(s),
                            Some(GuidValue::N(n)) => Value::Num(n.parse().unwrap_or(f64::NAN)),
                            // An item without a guid: no put on its version can apply.
                            None => Value::Buf(Vec::new()),
                        },
                    ),
                ])),
            ),
            Expect::Guid(g) => (
                format!("{} and guid = :guid", self.exists()),
                Some(Value::map(vec![(":guid", Value::Buf(g.to_vec()))])),
            ),
        };
        let mut params = vec![
            ("TableName", Value::str(&self.table.name)),
            ("Item", Value::Map(item)),
            ("ConditionExpression", Value::Str(condition)),
            ("ExpressionAttributeNames", self.names()),
        ];
        if let Some(v) = values {
            params.push(("ExpressionAttributeValues", v));
        }
        Value::map(params)
    }
}

/// A key value as the user gave it: a string, a number or a Buffer.
fn key_value(v: &KeyValue) -> Value {
    match v {
        KeyValue::S(s) => Value::str(s),
        KeyValue::N(n) => Value::Num(n.parse().unwrap_or(f64::NAN)),
        KeyValue::B(b) => Value::Buf(b.clone()),
    }
}

/// The item as the protocol reads it.
pub fn record(item: ObjectItem) -> LockRecord {
    let mut r = LockRecord::default();
    for a in item.attributes {
        let value = match a.kind.as_str() {
            "S" => Found::S(a.value),
            "N" => Found::N(a.value),
            "B" => from_hex(&a.value).map_or_else(|| Found::Other("B".into()), Found::B),
            _ => Found::Other(a.kind),
        };
        r.read(&a.name, value);
    }
    r
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A failure of the user's method as the protocol reads it.
pub fn error(e: ObjectError) -> StoreError {
    StoreError::Js {
        id: e.id,
        condition_failed: e.condition_failed || e.code == CONDITION_FAILED,
        code: e.code,
        message: e.message,
    }
}

/// The store that calls the user's object.
pub struct ObjectStore {
    call: Arc<CallFn>,
    params: Params,
    stats: Arc<Stats>,
}

impl ObjectStore {
    pub fn new(call: CallFn, table: TableSpec, stats: Arc<Stats>) -> ObjectStore {
        ObjectStore {
            call: Arc::new(call),
            params: Params { table },
            stats,
        }
    }

    /// Calls `method` with `params`, counting the request in `metrics()`.
    async fn call(&self, method: &str, operation: &str, params: Value) -> Result<Option<ObjectItem>, StoreError> {
        let reply = match self.call.call_async(FnArgs::from((method.to_string(), params))).await {
            Ok(promise) => promise.await,
            Err(e) => Err(e),
        };
        let result = match reply {
            Ok(ObjectReply { error: Some(e), .. }) => Err(error(e)),
            Ok(ObjectReply { item, error: None }) => Ok(item),
            Err(e) => Err(StoreError::Io {
                code: "InternalError".into(),
                message: format!("the call of dynamodb.{method} could not be made: {e}"),
                maybe_applied: false,
            }),
        };
        self.stats.count_request(operation, super::outcome(&result));
        result
    }
}

/// An operation a dynamodb object of `get`, `put` and `delete` cannot carry.
fn unsupported(what: &str) -> StoreError {
    not_supported(format!(
        "{what} needs the native transport: a dynamodb object of get/put/delete has no UpdateItem"
    ))
}

/// The original library's requests, the only ones a dynamodb object of `get`, `put` and
/// `delete` can carry: a read, the FailClosed put and delete, and the whole-item put of
/// FailOpen acquisitions, heartbeats and releases (`dynamodb_lock_core::original`).
#[async_trait]
impl Store for ObjectStore {
    async fn apply(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Reply<LockRecord>, StoreError> {
        match *op {
            Op::Get => Ok(Reply::Before(
                self.call("get", "GetItem", self.params.get(key)).await?.map(record),
            )),
            Op::PutIfAbsent { owner, guid, .. } => self
                .call("put", "PutItem", self.params.put_if_absent(key, owner, guid))
                .await
                .map(|_| Reply::Done),
            Op::DeleteIfGuid { guids } => {
                let guid = guids.first().ok_or_else(|| unsupported("a release without a guid"))?;
                self.call("delete", "DeleteItem", self.params.delete_if_guid(key, guid))
                    .await
                    .map(|_| Reply::WaitingMark(None))
            }
            Op::PutItem {
                owner,
                guid,
                fencing_token,
                lease_duration_ms,
                lock_acquired_time_unix_ms,
                expect,
            } => {
                let w = WholeItem {
                    owner,
                    guid,
                    fencing_token,
                    lease_duration_ms,
                    lock_acquired_time_unix_ms,
                    expect,
                };
                self.call("put", "PutItem", self.params.put_item(key, &w))
                    .await
                    .map(|_| Reply::Done)
            }
            Op::Take { .. } => Err(unsupported("a one-request FailOpen acquisition")),
            Op::HandOver { .. } => Err(unsupported("a hand-over")),
            Op::Renew { .. } => Err(unsupported("an UpdateItem heartbeat")),
            Op::Release { .. } => Err(unsupported("an UpdateItem release")),
            Op::SetData { .. } => Err(unsupported("lock.update")),
            Op::MarkWaiting(_) => Err(unsupported("the first-in-line mark")),
            Op::FifoTakeFree { .. }
            | Op::FifoTicket
            | Op::FifoReserve { .. }
            | Op::FifoUntake { .. }
            | Op::FifoPutEntry(_)
            | Op::FifoGrant { .. }
            | Op::FifoFinishEntry { .. }
            | Op::FifoDeleteFinished
            | Op::FifoTouchEntry { .. } => Err(unsupported("Fifo")),
            Op::ForceFree { .. } | Op::Revoke { .. } | Op::MarkRevoked { .. } | Op::Prune { .. } => {
                Err(unsupported("an operator's forced release"))
            }
            Op::SemTake { .. } | Op::SemGrant(_) | Op::SemRenew { .. } | Op::SemRelease { .. } => {
                Err(unsupported("Semaphore"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Version;

    fn params(sort: bool) -> Params {
        Params {
            table: TableSpec {
                name: "locks".into(),
                partition_key: "id".into(),
                sort_key: sort.then(|| "shard".into()),
            },
        }
    }

    fn key(sort: bool) -> LockKey {
        LockKey {
            partition: KeyValue::S("a".into()),
            sort: sort.then(|| KeyValue::N("7".into())),
        }
    }

    fn keys(m: &Value) -> Vec<&str> {
        match m {
            Value::Map(f) => f.iter().map(|(k, _)| k.as_str()).collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    fn field<'a>(m: &'a Value, name: &str) -> &'a Value {
        match m {
            Value::Map(f) => {
                &f.iter()
                    .find(|(k, _)| k == name)
                    .unwrap_or_else(|| panic!("no {name}"))
                    .1
            }
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn a_read_is_consistent_and_names_the_key_as_given() {
        let p = params(true).get(&key(true));
        assert_eq!(keys(&p), ["TableName", "Key", "ConsistentRead"]);
        assert_eq!(
            field(&p, "Key"),
            &Value::map(vec![("id", Value::str("a")), ("shard", Value::Num(7.0))])
        );
        assert_eq!(field(&p, "ConsistentRead"), &Value::Bool(true));
    }

    #[test]
    fn a_fail_closed_put_and_delete_are_the_originals() {
        let g = [3u8; 64];
        let p = params(false).put_if_absent(&key(false), "me", &g);
        assert_eq!(
            keys(&p),
            ["TableName", "Item", "ConditionExpression", "ExpressionAttributeNames"]
        );
        assert_eq!(keys(field(&p, "Item")), ["id", "owner", "guid"]);
        assert_eq!(
            field(&p, "ConditionExpression"),
            &Value::str("attribute_not_exists(#partitionKey)")
        );
        let d = params(true).delete_if_guid(&key(true), &g);
        assert_eq!(
            keys(&d),
            [
                "TableName",
                "Key",
                "ConditionExpression",
                "ExpressionAttributeNames",
                "ExpressionAttributeValues"
            ]
        );
        assert_eq!(
            field(&d, "ConditionExpression"),
            &Value::str("(attribute_exists(#partitionKey) and attribute_exists(#sortKey)) and guid = :guid")
        );
        assert_eq!(
            field(&d, "ExpressionAttributeNames"),
            &Value::map(vec![
                ("#partitionKey", Value::str("id")),
                ("#sortKey", Value::str("shard"))
            ])
        );
        assert_eq!(
            field(&d, "ExpressionAttributeValues"),
            &Value::map(vec![(":guid", Value::Buf(g.to_vec()))])
        );
    }

    #[test]
    fn whole_item_puts_keep_the_originals_fields_and_order() {
        let g = [3u8; 64];
        let seen = Version {
            guid: Some(GuidValue::B(vec![9; 64])),
            fencing_token: Some(41),
        };
        let expect = Expect::AbsentOr(seen.clone());
        let w = WholeItem {
            owner: "me",
            guid: &g,
            fencing_token: 42,
            lease_duration_ms: 1000,
            lock_acquired_time_unix_ms: Some(5),
            expect: &expect,
        };
        let p = params(true).put_item(&key(true), &w);
        assert_eq!(
            keys(&p),
            [
                "TableName",
                "Item",
                "ConditionExpression",
                "ExpressionAttributeNames",
                "ExpressionAttributeValues"
            ]
        );
        assert_eq!(
            keys(field(&p, "Item")),
            [
                "id",
                "fencingToken",
                "leaseDurationMs",
                "owner",
                "guid",
                "lockAcquiredTimeUnixMs",
                "shard"
            ]
        );
        assert_eq!(
            field(&p, "ConditionExpression"),
            &Value::str("(attribute_not_exists(#partitionKey) and attribute_not_exists(#sortKey)) or (guid = :guid and fencingToken = :fencingToken)")
        );
        assert_eq!(
            field(&p, "ExpressionAttributeValues"),
            &Value::map(vec![
                (":fencingToken", Value::Num(41.0)),
                (":guid", Value::Buf(vec![9; 64]))
            ])
        );
        let absent = Expect::Absent;
        let p = params(false).put_item(
            &key(false),
            &WholeItem {
                expect: &absent,
                lock_acquired_time_unix_ms: None,
                ..w
            },
        );
        assert_eq!(
            keys(&p),
            ["TableName", "Item", "ConditionExpression", "ExpressionAttributeNames"]
        );
        assert_eq!(
            keys(field(&p, "Item")),
            ["id", "fencingToken", "leaseDurationMs", "owner", "guid"]
        );
        let mine = Expect::Guid(g);
        let p = params(false).put_item(
            &key(false),
            &WholeItem {
                expect: &mine,
                lease_duration_ms: 1,
                ..w
            },
        );
        assert_eq!(
            field(&p, "ConditionExpression"),
            &Value::str("attribute_exists(#partitionKey) and guid = :guid")
        );
        assert_eq!(field(field(&p, "Item"), "leaseDurationMs"), &Value::Num(1.0));
    }

    #[test]
    fn replies_and_errors_are_read_as_the_protocol_needs() {
        let attr = |name: &str, kind: &str, value: &str| ObjectAttribute {
            name: name.into(),
            kind: kind.into(),
            value: value.into(),
        };
        let r = record(ObjectItem {
            attributes: vec![
                attr("owner", "S", "o"),
                attr("guid", "B", "0aff"),
                attr("fencingToken", "N", "3"),
                attr("leaseDurationMs", "N", "1000"),
            ],
        });
        assert_eq!(r.guid, Some(GuidValue::B(vec![0x0a, 0xff])));
        assert_eq!((r.fencing_token, r.lease_duration_ms), (Some(3), Some(1000)));
        assert_eq!(r.malformed, None);
        let r = record(ObjectItem {
            attributes: vec![attr("guid", "S", "abc"), attr("leaseDurationMs", "N", "-1")],
        });
        assert_eq!(r.guid, Some(GuidValue::S("abc".into())));
        assert_eq!(
            r.malformed.map(|m| m.attribute),
            Some("leaseDurationMs"),
            "a negative lease is refused"
        );
        let r = record(ObjectItem {
            attributes: vec![attr("fencingToken", "N", "1152921504606847000")],
        });
        assert_eq!(r.malformed.map(|m| m.attribute), Some("fencingToken"), "past 2^53");
        assert_eq!(from_hex("abc"), None);
        let e = error(ObjectError {
            id: 4,
            code: "ConditionalCheckFailedException".into(),
            message: "no".into(),
            condition_failed: false,
        });
        assert!(e.is_condition_failed());
        assert_eq!(e.js_id(), Some(4));
        let e = error(ObjectError {
            id: 5,
            code: "Error".into(),
            message: "boom".into(),
            condition_failed: false,
        });
        assert!(!e.is_condition_failed() && e.is_transient() && !e.maybe_applied());
    }
}
