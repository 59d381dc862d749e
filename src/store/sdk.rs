//! The `Store` over aws-sdk-dynamodb. Every write is one conditional request; a failed
//! condition asks for the current item (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), which
//! DynamoDB returns and some local engines ignore. The SDK's own retries are off: the
//! protocol retries, so that it knows when an attempt may have landed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure as OnFail};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use tokio::sync::OnceCell;

use super::{OpenFields, Store};
use crate::error::StoreError;
use crate::item::{self, Guid, KeyValue, LockKey, LockRecord, TableSpec, Version, RELEASED_LEASE_MS};

/// How to reach DynamoDB. Unset fields come from the standard AWS environment (aws-config).
#[derive(Clone, Default)]
pub struct SdkOptions {
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub credentials: Option<SharedCredentialsProvider>,
    pub connect_timeout: Option<Duration>,
}

pub struct SdkStore {
    table: TableSpec,
    options: SdkOptions,
    client: OnceCell<Client>,
    /// Set once the backend has returned an item with a failed condition: from then on, a
    /// failure without one means the item is absent.
    returns_old: AtomicBool,
}

const THROTTLES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "LimitExceededException",
];

impl SdkStore {
    pub fn new(table: TableSpec, options: SdkOptions) -> Self {
        SdkStore {
            table,
            options,
            client: OnceCell::new(),
            returns_old: AtomicBool::new(false),
        }
    }

    /// The SDK client, configured on first use (loading configuration is asynchronous and is
    /// done once per lock client, not per request).
    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let o = &self.options;
                let mut loader = aws_config::defaults(BehaviorVersion::latest())
                    .retry_config(RetryConfig::disabled())
                    .timeout_config(
                        TimeoutConfig::builder()
                            .connect_timeout(o.connect_timeout.unwrap_or(Duration::from_secs(3)))
                            .operation_timeout(Duration::from_secs(60))
                            .build(),
                    );
                if let Some(r) = &o.region {
                    loader = loader.region(Region::new(r.clone()));
                }
                if let Some(e) = &o.endpoint {
                    loader = loader.endpoint_url(e.clone());
                }
                if let Some(c) = &o.credentials {
                    loader = loader.credentials_provider(c.clone());
                }
                Client::new(&loader.load().await)
            })
            .await
    }

    fn key(&self, key: &LockKey) -> HashMap<String, AttributeValue> {
        let mut m = HashMap::with_capacity(2);
        m.insert(self.table.partition_key.clone(), attr(&key.partition));
        if let (Some(name), Some(v)) = (&self.table.sort_key, &key.sort) {
            m.insert(name.clone(), attr(v));
        }
        m
    }

    /// One conditional `UpdateItem` on the lock item.
    async fn update(
        &self,
        key: &LockKey,
        update: String,
        condition: String,
        names: &[(&str, &str)],
        values: HashMap<String, AttributeValue>,
        returns: ReturnValue,
    ) -> Result<UpdateItemOutput, StoreError> {
        self.client()
            .await
            .update_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(key)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(
                names.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ))
            .set_expression_attribute_values(Some(values))
            .return_values(returns)
            .return_values_on_condition_check_failure(OnFail::AllOld)
            .send()
            .await
            .map_err(|e| self.map_err(e, update_ccf))
    }

    fn current(&self, item: Option<&HashMap<String, AttributeValue>>) -> Option<Option<LockRecord>> {
        match item {
            Some(i) => {
                self.returns_old.store(true, Ordering::Relaxed);
                Some(Some(decode(i)))
            }
            None if self.returns_old.load(Ordering::Relaxed) => Some(None),
            None => None,
        }
    }

    fn map_err<E>(
        &self,
        err: SdkError<E, HttpResponse>,
        item: impl FnOnce(&E) -> Option<Option<&HashMap<String, AttributeValue>>>,
    ) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match &err {
            SdkError::ServiceError(se) => {
                if let Some(i) = item(se.err()) {
                    return StoreError::ConditionFailed {
                        current: self.current(i),
                    };
                }
                let status = se.raw().status().as_u16();
                let e = se.err();
                let code = e.code().map(str::to_owned).unwrap_or_else(|| {
                    if status >= 500 {
                        "InternalServerError".into()
                    } else {
                        format!("HttpStatus{status}")
                    }
                });
                let transient = status >= 500 || status == 429 || THROTTLES.contains(&code.as_str());
                StoreError::Service {
                    message: e
                        .message()
                        .unwrap_or("DynamoDB returned an error without a message")
                        .into(),
                    code,
                    transient,
                    maybe_applied: status >= 500,
                }
            }
            SdkError::TimeoutError(_) => super::timed_out(),
            SdkError::ConstructionFailure(_) => StoreError::Service {
                code: "ConfigError".into(),
                message: describe(&err),
                transient: false,
                maybe_applied: false,
            },
            _ => StoreError::Io {
                code: "NetworkingError".into(),
                message: describe(&err),
                maybe_applied: true,
            },
        }
    }
}

fn describe<E: std::error::Error + 'static>(err: &E) -> String {
    aws_smithy_types::error::display::DisplayErrorContext(err).to_string()
}

fn update_ccf(e: &UpdateItemError) -> Option<Option<&HashMap<String, AttributeValue>>> {
    match e {
        UpdateItemError::ConditionalCheckFailedException(c) => Some(c.item()),
        _ => None,
    }
}

fn attr(v: &KeyValue) -> AttributeValue {
    match v {
        KeyValue::S(s) => AttributeValue::S(s.clone()),
        KeyValue::N(n) => AttributeValue::N(n.clone()),
        KeyValue::B(b) => AttributeValue::B(Blob::new(b.clone())),
    }
}

fn b(g: &[u8]) -> AttributeValue {
    AttributeValue::B(Blob::new(g.to_vec()))
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Decodes a lock item, tolerating anything another writer may have left.
pub fn decode(i: &HashMap<String, AttributeValue>) -> LockRecord {
    let num = |k: &str| i.get(k).and_then(|v| v.as_n().ok()).and_then(|s| item::parse_u64(s));
    LockRecord {
        owner: i.get(item::OWNER).and_then(|v| v.as_s().ok()).cloned(),
        guid: i
            .get(item::GUID)
            .and_then(|v| v.as_b().ok())
            .map(|b| b.as_ref().to_vec()),
        fencing_token: num(item::FENCING_TOKEN),
        lease_duration_ms: num(item::LEASE_DURATION_MS),
        lock_acquired_time_unix_ms: num(item::LOCK_ACQUIRED_TIME_UNIX_MS),
    }
}

/// `#guid IN (:g0, :g1, ...)` and its values.
fn guid_condition(guids: &[Guid], values: &mut HashMap<String, AttributeValue>) -> String {
    let names: Vec<String> = guids
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let k = format!(":g{i}");
            values.insert(k.clone(), b(g));
            k
        })
        .collect();
    if names.len() == 1 {
        format!("#guid = {}", names[0])
    } else {
        format!("#guid IN ({})", names.join(", "))
    }
}

/// `SET ... #t = :t` with `trustLocalTime`, otherwise `REMOVE #t`, so the item equals what
/// the original's full `PutItem` would leave.
fn acquired_time(set: &mut String, t: Option<u64>, values: &mut HashMap<String, AttributeValue>) {
    match t {
        Some(t) => {
            set.push_str(", #t = :t");
            values.insert(":t".into(), n(t));
        }
        None => set.push_str(" REMOVE #t"),
    }
}

fn names(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[async_trait]
impl Store for SdkStore {
    async fn get(&self, key: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        let out = self
            .client()
            .await
            .get_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.map_err(e, |_| None))?;
        Ok(out.item().map(decode))
    }

    async fn put_if_absent(&self, key: &LockKey, owner: &str, guid: &Guid) -> Result<(), StoreError> {
        let mut item = self.key(key);
        item.insert(item::OWNER.into(), AttributeValue::S(owner.into()));
        item.insert(item::GUID.into(), b(guid));
        self.client()
            .await
            .put_item()
            .table_name(&self.table.name)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", &self.table.partition_key)
            .return_values_on_condition_check_failure(OnFail::AllOld)
            .send()
            .await
            .map_err(|e| {
                self.map_err(e, |e| match e {
                    PutItemError::ConditionalCheckFailedException(c) => Some(c.item()),
                    _ => None,
                })
            })?;
        Ok(())
    }

    async fn delete_if_guid(&self, key: &LockKey, guids: &[Guid]) -> Result<(), StoreError> {
        let mut values = HashMap::new();
        let cond = guid_condition(guids, &mut values);
        self.client()
            .await
            .delete_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(key)))
            .condition_expression(cond)
            .set_expression_attribute_names(Some(names(&[("#guid", item::GUID)])))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(OnFail::AllOld)
            .send()
            .await
            .map_err(|e| {
                self.map_err(e, |e| match e {
                    DeleteItemError::ConditionalCheckFailedException(c) => Some(c.item()),
                    _ => None,
                })
            })?;
        Ok(())
    }

    async fn take(
        &self,
        key: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        waited_out: Option<&Version>,
    ) -> Result<u64, StoreError> {
        let mut values = HashMap::from([
            (":owner".to_string(), AttributeValue::S(fields.owner.into())),
            (":guid".to_string(), b(guid)),
            (":lease".to_string(), n(fields.lease_duration_ms)),
            (":zero".to_string(), n(0)),
            (":one".to_string(), n(1)),
            (":released".to_string(), n(RELEASED_LEASE_MS)),
        ]);
        let mut update =
            "SET #owner = :owner, #guid = :guid, #lease = :lease, #ft = if_not_exists(#ft, :zero) + :one".to_string();
        acquired_time(&mut update, fields.lock_acquired_time_unix_ms, &mut values);
        let mut cond = "attribute_not_exists(#pk) OR #lease = :released".to_string();
        if let Some(v) = waited_out {
            let guid_is = if v.guid.is_empty() {
                "attribute_not_exists(#guid)".to_string()
            } else {
                values.insert(":eguid".into(), b(&v.guid));
                "#guid = :eguid".to_string()
            };
            let token_is = match v.fencing_token {
                Some(t) => {
                    values.insert(":eft".into(), n(t));
                    "#ft = :eft".to_string()
                }
                None => "attribute_not_exists(#ft)".to_string(),
            };
            cond.push_str(&format!(" OR ({guid_is} AND {token_is})"));
        }
        let names = [
            ("#pk", self.table.partition_key.as_str()),
            ("#owner", item::OWNER),
            ("#guid", item::GUID),
            ("#lease", item::LEASE_DURATION_MS),
            ("#ft", item::FENCING_TOKEN),
            ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
        ];
        let out = self
            .update(key, update, cond, &names, values, ReturnValue::UpdatedNew)
            .await?;
        out.attributes()
            .and_then(|a| a.get(item::FENCING_TOKEN))
            .and_then(|v| v.as_n().ok())
            .and_then(|s| item::parse_u64(s))
            .ok_or_else(|| StoreError::Service {
                code: "InvalidResponse".into(),
                message: "DynamoDB did not return the new fencingToken".into(),
                transient: false,
                maybe_applied: true,
            })
    }

    async fn renew(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: &OpenFields<'_>,
    ) -> Result<(), StoreError> {
        let mut values = HashMap::from([
            (":owner".to_string(), AttributeValue::S(fields.owner.into())),
            (":new".to_string(), b(new_guid)),
            (":lease".to_string(), n(fields.lease_duration_ms)),
        ]);
        let mut update = "SET #owner = :owner, #guid = :new, #lease = :lease".to_string();
        acquired_time(&mut update, fields.lock_acquired_time_unix_ms, &mut values);
        let cond = guid_condition(guids, &mut values);
        let names = [
            ("#owner", item::OWNER),
            ("#guid", item::GUID),
            ("#lease", item::LEASE_DURATION_MS),
            ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
        ];
        self.update(key, update, cond, &names, values, ReturnValue::None)
            .await?;
        Ok(())
    }

    async fn release(
        &self,
        key: &LockKey,
        guids: &[Guid],
        lock_acquired_time_unix_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut values = HashMap::from([(":released".to_string(), n(RELEASED_LEASE_MS))]);
        let mut update = "SET #lease = :released".to_string();
        acquired_time(&mut update, lock_acquired_time_unix_ms, &mut values);
        let cond = guid_condition(guids, &mut values);
        let names = [
            ("#guid", item::GUID),
            ("#lease", item::LEASE_DURATION_MS),
            ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
        ];
        self.update(key, update, cond, &names, values, ReturnValue::None)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_decode_whatever_their_writer() {
        let i = HashMap::from([
            ("owner".to_string(), AttributeValue::S("me".into())),
            ("guid".to_string(), b(&[7u8; 64])),
            ("fencingToken".to_string(), AttributeValue::N("41".into())),
            ("leaseDurationMs".to_string(), AttributeValue::N("1".into())),
            (
                "lockAcquiredTimeUnixMs".to_string(),
                AttributeValue::S("not a number".into()),
            ),
        ]);
        let r = decode(&i);
        assert_eq!(r.owner.as_deref(), Some("me"));
        assert!(r.carries(&[7u8; 64]));
        assert_eq!(r.fencing_token, Some(41));
        assert!(r.is_released());
        assert_eq!(r.lock_acquired_time_unix_ms, None);
    }

    #[test]
    fn one_guid_is_an_equality_two_are_a_list() {
        let mut v = HashMap::new();
        assert_eq!(guid_condition(&[[1; 64]], &mut v), "#guid = :g0");
        let mut v = HashMap::new();
        assert_eq!(guid_condition(&[[1; 64], [2; 64]], &mut v), "#guid IN (:g0, :g1)");
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn stale_acquired_time_is_removed_without_trust() {
        let mut v = HashMap::new();
        let mut s = "SET #lease = :lease".to_string();
        acquired_time(&mut s, None, &mut v);
        assert_eq!(s, "SET #lease = :lease REMOVE #t");
        let mut s = "SET #lease = :lease".to_string();
        acquired_time(&mut s, Some(5), &mut v);
        assert_eq!(s, "SET #lease = :lease, #t = :t");
        assert_eq!(v.get(":t"), Some(&AttributeValue::N("5".into())));
    }
}
