//! The `Store` over DynamoDB's HTTP API. Each operation is one signed JSON `POST` on a pooled
//! connection (`transport.rs`: hyper, rustls, the environment's proxies), signed by aws-sigv4,
//! and only the lock's attributes are read from the reply. The AWS SDK supplies what is done
//! once per client: configuration and credentials (aws-config) and the endpoint (the DynamoDB
//! endpoint rules of aws-sdk-dynamodb). aws-sdk-dynamodb's own request path is not used: at
//! 80-120 µs of CPU per request it would cost a heartbeat several times what this path does.
//! Table administration (`createTable`: `CreateTable`, `DescribeTable`, `UpdateTimeToLive`, ...)
//! takes the same path (`call_raw`), with its JSON written and read by `lib/table.js`, so that
//! it needs no SDK operations compiled in and reaches DynamoDB exactly as the locks do.
//!
//! Every write is conditional; a failed condition asks for the current item
//! (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), which DynamoDB returns and some local
//! engines ignore. There are no retries here: the protocol retries, so that it knows when an
//! attempt may have landed.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sdk_dynamodb::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use tokio::sync::OnceCell;

use super::json::{read_response, Attr, Body, Response};
use super::sigv4::{PostSigner, CONTENT_TYPE};
use super::transport::{Transport, TransportError, TransportOptions};
use super::{not_supported, Entry, Op, OpenFields, Reply, Store, Ttl, WaitMark};
use crate::clock::unix_now_ms;
use crate::error::StoreError;
use crate::item::{
    self, Guid, GuidValue, LockData, LockKey, LockRecord, TableSpec, Version, MAX_FENCING_TOKEN, RELEASED_LEASE_MS,
};
use crate::stats::{Outcome, Stats};
use dynamodb_lock_core::op::Grant;

/// How to reach DynamoDB. Unset fields come from the standard AWS environment (aws-config).
#[derive(Clone, Default)]
pub struct HttpOptions {
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub credentials: Option<SharedCredentialsProvider>,
    pub connect_timeout: Option<Duration>,
    /// PEM certificates trusted instead of the system's roots; `AWS_CA_BUNDLE` (a file) when
    /// not given.
    pub ca_bundle: Option<Vec<u8>>,
}

/// Credentials are fetched again when less than this is left before they expire.
const CREDENTIALS_REFRESH_MARGIN: Duration = Duration::from_secs(10);

const X_AMZ_TARGET: http::HeaderName = http::HeaderName::from_static("x-amz-target");

const USER_AGENT: &str = concat!("dynamodb-lock-native/", env!("CARGO_PKG_VERSION"));

/// Errors that say the request's signing time was too far from the service's clock. The
/// service's `Date` header then gives the offset, and the request is worth retrying.
const CLOCK_SKEW_ERRORS: &[&str] = &[
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "RequestTimeTooSkewed",
    "RequestExpired",
    "RequestInTheFuture",
];

/// Offsets smaller than this are not taken for the cause of a refused signature (the service
/// allows minutes; the `Date` header has whole seconds).
const MIN_SKEW_MS: i64 = 60_000;

/// Credentials that expired or were revoked before their announced expiry: the next attempt
/// asks the provider again, which may mend it, so they are retried like a transient fault.
const EXPIRED_CREDENTIALS: &[&str] = &["ExpiredTokenException", "ExpiredToken"];

const THROTTLES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "LimitExceededException",
];

/// A write to a global table in the strongly consistent mode that met a concurrent write of
/// the same item from another Region: nothing was written, and it may be retried like a
/// throttle (it is not counted as one).
const REPLICATED_WRITE_CONFLICT: &str = "ReplicatedWriteConflictException";

/// Everything resolved once per client.
struct Link {
    host: String,
    /// The endpoint for messages: its scheme, host, port and path, without credentials.
    shown: String,
    path: String,
    uri: http::Uri,
    signer: PostSigner,
    transport: Transport,
    provider: Mutex<SharedCredentialsProvider>,
    /// The region, when the provider is the environment's (aws-config's default chain): after
    /// a failure it is built anew, as aws-config's keeps its first failure's cause only once.
    from_environment: Option<String>,
    credentials: Mutex<Option<Credentials>>,
    refresh: tokio::sync::Mutex<()>,
    /// The service's clock minus ours, in milliseconds, learnt from a clock-skew error.
    skew_ms: AtomicI64,
}

impl Link {
    /// Where requests go, for messages: ` (endpoint URL)`, with the proxy when there is one.
    fn destination(&self) -> String {
        match &self.transport.via {
            Some(proxy) => format!(" (endpoint {}, through the proxy {proxy})", self.shown),
            None => format!(" (endpoint {})", self.shown),
        }
    }
}

pub struct HttpStore {
    table: TableSpec,
    options: HttpOptions,
    link: OnceCell<Result<Arc<Link>, StoreError>>,
    /// Set once the backend has returned an item with a failed condition: from then on, a
    /// failure without one means the item is absent.
    returns_old: AtomicBool,
    stats: Arc<Stats>,
}

/// Counts one request when it ends, answered or dropped.
struct Counting<'a> {
    stats: &'a Stats,
    operation: &'a str,
    outcome: Outcome,
}

impl Drop for Counting<'_> {
    fn drop(&mut self) {
        self.stats.count_request(self.operation, self.outcome);
    }
}

/// An answer that asks the client to slow down.
fn is_throttle(code: &str) -> bool {
    code == "HttpStatus429" || THROTTLES.contains(&code)
}

fn config_error(message: String) -> StoreError {
    StoreError::Service {
        code: "ConfigError".into(),
        message,
        transient: false,
        maybe_applied: false,
    }
}

impl HttpStore {
    pub fn new(table: TableSpec, options: HttpOptions) -> Self {
        HttpStore {
            table,
            options,
            link: OnceCell::new(),
            returns_old: AtomicBool::new(false),
            stats: Default::default(),
        }
    }

    /// Counts this store's requests in `stats` (the client's).
    pub fn with_stats(mut self, stats: Arc<Stats>) -> Self {
        self.stats = stats;
        self
    }

    /// Loads configuration, resolves the endpoint and sets up the connections, once.
    async fn link(&self) -> Result<&Arc<Link>, StoreError> {
        let link = match self.link.get() {
            Some(l) => l,
            // Boxed: the first call's future is kilobytes, and every request's future would
            // otherwise carry (and copy) that much.
            None => Box::pin(self.link.get_or_init(|| async { self.connect().await.map(Arc::new) })).await,
        };
        link.as_ref().map_err(Clone::clone)
    }

    async fn connect(&self) -> Result<Link, StoreError> {
        let o = &self.options;
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(r) = &o.region {
            loader = loader.region(Region::new(r.clone()));
        }
        if let Some(e) = &o.endpoint {
            loader = loader.endpoint_url(e.clone());
        }
        if let Some(c) = &o.credentials {
            loader = loader.credentials_provider(c.clone());
        }
        let config = loader.load().await;
        let region = match config.region() {
            Some(r) => r.to_string(),
            None => return Err(config_error(super::aws_env::no_region().await)),
        };
        let provider = config
            .credentials_provider()
            .ok_or_else(|| config_error("No AWS credentials provider is configured".into()))?;
        let url = match dynamodb_endpoint_url(&config) {
            Some(u) => u,
            None => {
                let params = Params::builder()
                    .region(region.clone())
                    .use_fips(config.use_fips().unwrap_or(false))
                    .use_dual_stack(config.use_dual_stack().unwrap_or(false))
                    .build()
                    .map_err(|e| config_error(format!("DynamoDB endpoint parameters: {e}")))?;
                DefaultResolver::new()
                    .resolve_endpoint(&params)
                    .await
                    .map_err(|e| config_error(format!("No DynamoDB endpoint for region {region}: {e}")))?
                    .url()
                    .to_string()
            }
        };
        let uri: http::Uri = url
            .parse()
            .map_err(|e| config_error(format!("Invalid DynamoDB endpoint {url:?}: {e}")))?;
        let (scheme, host, path) = match (uri.scheme_str(), uri.authority()) {
            (Some(scheme @ ("http" | "https")), Some(authority)) => {
                let default_port = if scheme == "https" { 443 } else { 80 };
                let host = match authority.port_u16() {
                    Some(p) if p == default_port => authority.host().to_string(),
                    _ => authority.as_str().to_string(),
                };
                let path = match uri.path() {
                    "" => "/".to_string(),
                    p => p.to_string(),
                };
                (scheme, host, path)
            }
            _ => {
                return Err(config_error(format!(
                    "Invalid DynamoDB endpoint {url:?}: not an http(s) URL"
                )))
            }
        };
        let ca_bundle = match (&o.ca_bundle, std::env::var_os("AWS_CA_BUNDLE")) {
            (Some(pem), _) => Some(pem.clone()),
            (None, Some(path)) if !path.is_empty() => Some(std::fs::read(&path).map_err(|e| {
                config_error(format!(
                    "AWS_CA_BUNDLE {:?} could not be read: {e}",
                    path.to_string_lossy()
                ))
            })?),
            _ => None,
        };
        let transport = Transport::new(
            &uri,
            &TransportOptions {
                connect_timeout: o.connect_timeout,
                ca_bundle,
                proxy: None,
            },
        )
        .map_err(|e| config_error(format!("DynamoDB endpoint {url:?}: {e}")))?;
        let shown = format!(
            "{scheme}://{}{}",
            host.rsplit_once('@').map_or(host.as_str(), |(_, h)| h),
            path.strip_suffix('/').unwrap_or(&path)
        );
        Ok(Link {
            shown,
            host,
            path,
            uri,
            signer: PostSigner::new(region.clone()),
            transport,
            provider: Mutex::new(provider),
            from_environment: o.credentials.is_none().then_some(region),
            credentials: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
            skew_ms: AtomicI64::new(0),
        })
    }

    /// One signed request, counted in the client's `Stats` by operation and outcome (a request
    /// dropped before its answer, on a timeout, counts as an error).
    async fn call(&self, operation: &str, body: String) -> Result<Response, StoreError> {
        let mut counting = Counting {
            stats: &self.stats,
            operation,
            outcome: Outcome::Error,
        };
        let result = self.exchange(operation, body).await.map(|(reply, _)| reply);
        counting.outcome = match &result {
            Ok(_) => Outcome::Ok,
            Err(StoreError::ConditionFailed { .. }) => Outcome::ConditionFailed,
            Err(StoreError::Service { code, .. }) if is_throttle(code) => Outcome::Throttled,
            Err(_) => Outcome::Error,
        };
        result
    }

    /// One signed request of any DynamoDB operation (table administration: `CreateTable`,
    /// `DescribeTable`, `UpdateTimeToLive`, ...): the response body as JSON text, or the
    /// error it amounts to.
    pub async fn call_raw(&self, operation: &str, body: String) -> Result<String, StoreError> {
        let (_, bytes) = self.exchange(operation, body).await?;
        String::from_utf8(bytes.to_vec()).map_err(|_| invalid_response("DynamoDB's response is not UTF-8"))
    }

    /// One signed request; the reply and the body it was read from, or the error they amount to.
    async fn exchange(&self, operation: &str, body: String) -> Result<(Response, bytes::Bytes), StoreError> {
        let link = self.link().await?;
        let credentials = link.credentials().await?;
        let target = ["DynamoDB_20120810.", operation].concat();
        let time = skewed(SystemTime::now(), link.skew_ms.load(Ordering::Relaxed));
        let signature = link
            .signer
            .sign(&credentials, time, &link.host, &link.path, &target, body.as_bytes());
        let mut request = http::Request::post(link.uri.clone())
            .header(http::header::CONTENT_TYPE, http::HeaderValue::from_static(CONTENT_TYPE))
            .header(http::header::HOST, link.host.as_str())
            .header(X_AMZ_TARGET, target)
            .header(http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT));
        for (name, value) in signature {
            request = request.header(name, value);
        }
        let request = request
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .map_err(|e| config_error(format!("The request could not be built: {e}")))?;
        let response = link.transport.send(request).await.map_err(|e| StoreError::Io {
            code: match e {
                TransportError::ConnectTimeout => "TimeoutError",
                TransportError::Checksum { .. } => "CRC32CheckFailed",
                _ => "NetworkingError",
            }
            .into(),
            message: format!("{e}{}", link.destination()),
            // Only a request that was never sent is known not to have landed.
            maybe_applied: !matches!(e, TransportError::Connect(_) | TransportError::ConnectTimeout),
        })?;
        let status = response.status;
        let server_skew = match (200..300).contains(&status) {
            true => None,
            false => response
                .date
                .as_deref()
                .and_then(|d| skew_from_date(d, SystemTime::now())),
        };
        let bytes = response.body;
        let reply = read_response(&bytes);
        if (200..300).contains(&status) {
            return reply.map(|r| (r, bytes)).map_err(|e| StoreError::Service {
                code: "InvalidResponse".into(),
                message: format!("DynamoDB's response could not be read: {e}"),
                transient: false,
                maybe_applied: true,
            });
        }
        let reply = reply.unwrap_or_default();
        if reply.error_type.as_deref() == Some("ConditionalCheckFailedException") {
            return Err(StoreError::ConditionFailed {
                current: self.current(reply.record),
            });
        }
        let code = reply.error_type.unwrap_or_else(|| {
            if status >= 500 {
                "InternalServerError".into()
            } else {
                format!("HttpStatus{status}")
            }
        });
        // A signature refused while the clocks agree is a credentials problem, not a skew.
        let skew = server_skew.filter(|s| s.abs() >= MIN_SKEW_MS && CLOCK_SKEW_ERRORS.contains(&code.as_str()));
        if let Some(skew) = skew {
            link.skew_ms.store(skew, Ordering::Relaxed);
        }
        let skewed_clock = skew.is_some();
        let expired = EXPIRED_CREDENTIALS.contains(&code.as_str());
        if expired {
            *link.credentials.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let mut message = reply
            .message
            .unwrap_or_else(|| "DynamoDB returned an error without a message".into());
        if code == "ResourceNotFoundException" {
            message = format!("{message} (the lock table \"{}\")", self.table.name);
        }
        Err(StoreError::Service {
            transient: status >= 500
                || status == 429
                || THROTTLES.contains(&code.as_str())
                || code == REPLICATED_WRITE_CONFLICT
                || skewed_clock
                || expired,
            message,
            code,
            maybe_applied: status >= 500,
        })
    }

    fn current(&self, record: Option<LockRecord>) -> Option<Option<Box<LockRecord>>> {
        match record {
            Some(r) => {
                self.returns_old.store(true, Ordering::Relaxed);
                Some(Some(Box::new(r)))
            }
            None if self.returns_old.load(Ordering::Relaxed) => Some(None),
            None => None,
        }
    }

    /// One conditional `UpdateItem` of a holder (or of a forced release): it also sets
    /// `lockWrittenUnixMs` (one more `SET`, in the same request).
    async fn update(
        &self,
        key: &LockKey,
        update: &str,
        condition: &str,
        names: &[(&str, &str)],
        values: &[(&str, Attr<'_>)],
        returns: &str,
    ) -> Result<Response, StoreError> {
        let mut names = names.to_vec();
        names.push(("#lw", item::LOCK_WRITTEN_UNIX_MS));
        let mut values = values.to_vec();
        values.push((":lw", Attr::N(written_now())));
        self.send_update(key, &stamped(update), condition, &names, &values, returns)
            .await
    }

    /// One conditional `UpdateItem` as given. A waiter's write (its first-in-line mark, a Fifo
    /// ticket) is sent through it directly: it leaves `lockWrittenUnixMs` alone, which tells
    /// when the holder last wrote.
    async fn send_update(
        &self,
        key: &LockKey,
        update: &str,
        condition: &str,
        names: &[(&str, &str)],
        values: &[(&str, Attr<'_>)],
        returns: &str,
    ) -> Result<Response, StoreError> {
        let mut b = Body::new(&self.table.name);
        b.item("Key", &self.table, key, &[]);
        b.str("UpdateExpression", update);
        b.str("ConditionExpression", condition);
        b.names(names);
        b.values(values);
        b.str("ReturnValues", returns);
        b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        self.call("UpdateItem", b.finish()).await
    }
}

/// `lockWrittenUnixMs` of a write sent now: this host's clock, in Unix ms.
fn written_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `update` with `#lw = :lw` (`lockWrittenUnixMs`) first in its `SET` clause.
fn stamped(update: &str) -> String {
    match update.strip_prefix("SET ") {
        Some(rest) => format!("SET #lw = :lw, {rest}"),
        None if update.is_empty() => "SET #lw = :lw".to_string(),
        None => format!("SET #lw = :lw {update}"),
    }
}

/// The condition that a version a waiter waited out is still there, with its values.
fn waited_out_condition<'a>(v: &'a Version, values: &mut Vec<(&'static str, Attr<'a>)>) -> String {
    let guid_is = match &v.guid {
        None => "attribute_not_exists(#guid)",
        Some(g) => {
            values.push((
                ":eguid",
                match g {
                    GuidValue::B(b) => Attr::B(b),
                    GuidValue::S(s) => Attr::S(s),
                    GuidValue::N(n) => Attr::NText(n),
                },
            ));
            "#guid = :eguid"
        }
    };
    let token_is = match v.fencing_token {
        Some(t) => {
            values.push((":eft", Attr::N(t)));
            "#ft = :eft"
        }
        None => "attribute_not_exists(#ft)",
    };
    format!("({guid_is} AND {token_is})")
}

/// `op::token_can_rise`: only a token that can rise to a safe integer (`item::MAX_FENCING_TOKEN`)
/// is raised. An item whose token is of another type, negative or too large is refused as it
/// is, and the refusal carries it (or a read follows) for the core to name: a comparison with
/// numbers is false for an attribute of another type, so `BETWEEN` alone refuses those too
/// (an `attribute_type` test beside it cost dynalite twice the time per acquisition). A
/// fractional token is the one no condition can tell apart: the write lands, its new token is
/// refused when read back, and the lock is given back.
fn token_can_rise(values: &mut Vec<(&'static str, Attr<'_>)>) -> &'static str {
    values.extend([(":zero_ft", Attr::N(0)), (":below_max", Attr::N(MAX_FENCING_TOKEN - 1))]);
    "(attribute_not_exists(#ft) OR #ft BETWEEN :zero_ft AND :below_max)"
}

/// The condition that a new Fifo ticket and queue position can be taken on the head
/// (`op::ticket_can_rise`): `ticketNext`, `fencingToken` and `queueNext`, where present, are
/// numbers from 0 to 2^53 - 2, and `queueGranted` one from 0 to 2^53 - 1. Another type fails the comparison, so the head is refused with
/// the item, which the acquisition names; a fraction is the one refused form no condition
/// tells apart (see `token_can_rise`).
fn ticket_can_rise(values: &mut Vec<(&'static str, Attr<'_>)>) -> &'static str {
    values.extend([
        (":zero_ft", Attr::N(0)),
        (":below_max", Attr::N(MAX_FENCING_TOKEN - 1)),
        (":max_ft", Attr::N(MAX_FENCING_TOKEN)),
    ]);
    "(attribute_not_exists(#tn) OR #tn BETWEEN :zero_ft AND :below_max) \
     AND (attribute_not_exists(#ft) OR #ft BETWEEN :zero_ft AND :below_max) \
     AND (attribute_not_exists(#qn) OR #qn BETWEEN :zero_ft AND :below_max) \
     AND (attribute_not_exists(#qg) OR #qg BETWEEN :zero_ft AND :max_ft)"
}

/// Names of the Fifo head item's attributes in expressions.
const FIFO_NAMES: [(&str, &str); 9] = [
    ("#owner", item::OWNER),
    ("#guid", item::GUID),
    ("#lease", item::LEASE_DURATION_MS),
    ("#ft", item::FENCING_TOKEN),
    ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
    ("#tn", item::TICKET_NEXT),
    ("#qn", item::QUEUE_NEXT),
    ("#qg", item::QUEUE_GRANTED),
    ("#perm", item::PERMITS),
];

/// The names a grant uses (DynamoDB refuses names an expression does not use).
const GRANT_NAMES: [(&str, &str); 7] = [
    ("#owner", item::OWNER),
    ("#guid", item::GUID),
    ("#lease", item::LEASE_DURATION_MS),
    ("#ft", item::FENCING_TOKEN),
    ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
    ("#qg", item::QUEUE_GRANTED),
    ("#perm", item::PERMITS),
];

/// The ticket after the last one issued: `ticketNext + 1`, counting from `fencingToken` (or 0)
/// on an item without `ticketNext`.
const NEXT_TICKET: &str = "if_not_exists(#tn, if_not_exists(#ft, :zero)) + :one";

impl Link {
    /// Current credentials, fetched again from the provider when they near expiry.
    async fn credentials(&self) -> Result<Credentials, StoreError> {
        let usable = |c: &Option<Credentials>| {
            c.as_ref()
                .filter(|c| {
                    c.expiry()
                        .is_none_or(|e| e > SystemTime::now() + CREDENTIALS_REFRESH_MARGIN)
                })
                .cloned()
        };
        if let Some(c) = usable(&self.credentials.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(c);
        }
        // Boxed, as rare and large.
        Box::pin(self.fetch_credentials(usable)).await
    }

    async fn fetch_credentials(
        &self,
        usable: impl Fn(&Option<Credentials>) -> Option<Credentials>,
    ) -> Result<Credentials, StoreError> {
        let _one_fetch = self.refresh.lock().await;
        if let Some(c) = usable(&self.credentials.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(c);
        }
        let provider = self.provider.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match provider.provide_credentials().await {
            Ok(c) => {
                *self.credentials.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                // Credentials that have not expired yet still sign.
                let previous = self.credentials.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(c) = previous.filter(|c| c.expiry().is_none_or(|x| x > SystemTime::now())) {
                    return Ok(c);
                }
                let message = match &self.from_environment {
                    Some(region) => {
                        let fresh = aws_config::defaults(BehaviorVersion::latest())
                            .region(Region::new(region.clone()))
                            .load()
                            .await
                            .credentials_provider();
                        if let Some(fresh) = fresh {
                            *self.provider.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
                        }
                        match super::aws_env::credentials_cause(&e).await {
                            Some(cause) => format!("No AWS credentials could be loaded for DynamoDB: {cause}."),
                            None => super::aws_env::no_credentials_found().await,
                        }
                    }
                    None => format!(
                        "No AWS credentials could be loaded for DynamoDB: {}.",
                        super::aws_env::deepest(&e).trim_end_matches('.')
                    ),
                };
                Err(StoreError::Service {
                    code: "CredentialsError".into(),
                    message: crate::error::with_detail(&message, &super::aws_env::causes(&e)),
                    transient: true,
                    maybe_applied: false,
                })
            }
        }
    }
}

/// The endpoint URL configured for DynamoDB, as the AWS SDK for DynamoDB reads it: one given
/// in code wins; otherwise the service's own setting (`AWS_ENDPOINT_URL_DYNAMODB`, or
/// `endpoint_url` in the profile's `dynamodb` section) before the global one
/// (`AWS_ENDPOINT_URL`).
fn dynamodb_endpoint_url(config: &aws_config::SdkConfig) -> Option<String> {
    let global = config.endpoint_url().map(str::to_string);
    if config.get_origin("endpoint_url").is_client_config() {
        return global;
    }
    let Ok(key) = aws_types::service_config::ServiceConfigKey::builder()
        .service_id("DynamoDB")
        .env("AWS_ENDPOINT_URL")
        .profile("endpoint_url")
        .build()
    else {
        return global;
    };
    config.service_config().and_then(|c| c.load_config(key)).or(global)
}

/// `now` moved by `skew_ms` (positive: the service's clock is ahead of ours).
fn skewed(now: SystemTime, skew_ms: i64) -> SystemTime {
    let by = Duration::from_millis(skew_ms.unsigned_abs());
    if skew_ms >= 0 {
        now + by
    } else {
        now.checked_sub(by).unwrap_or(now)
    }
}

/// The service's clock minus ours, from an HTTP `Date` header (whole seconds).
fn skew_from_date(date: &str, now: SystemTime) -> Option<i64> {
    let server = aws_smithy_types::DateTime::from_str(date, aws_smithy_types::date_time::Format::HttpDate).ok()?;
    let ours = aws_smithy_types::DateTime::from(now);
    Some(server.to_millis().ok()? - ours.to_millis().ok()?)
}

/// `#guid IN (:g0, :g1, ...)` and its values. A lock has at most two live guids (its own and
/// one a heartbeat may have written).
fn guid_condition<'a>(guids: &'a [Guid], values: &mut Vec<(&'static str, Attr<'a>)>) -> Result<String, StoreError> {
    const NAMES: [&str; 4] = [":g0", ":g1", ":g2", ":g3"];
    if guids.is_empty() || guids.len() > NAMES.len() {
        return Err(config_error(format!("{} guids in one condition", guids.len())));
    }
    for (name, g) in NAMES.iter().zip(guids) {
        values.push((name, Attr::B(g)));
    }
    Ok(if guids.len() == 1 {
        "#guid = :g0".to_string()
    } else {
        format!("#guid IN ({})", NAMES[..guids.len()].join(", "))
    })
}

/// `SET ... #t = :t` when the write carries the writer's clock (every FailOpen write does),
/// otherwise `REMOVE #t`.
fn acquired_time(set: &mut String, t: Option<u64>, values: &mut Vec<(&'static str, Attr<'_>)>) {
    match t {
        Some(t) => {
            set.push_str(", #t = :t");
            values.push((":t", Attr::N(t)));
        }
        None => set.push_str(" REMOVE #t"),
    }
}

/// `lockSession` as an acquisition or a hand-over writes it: set, or removed.
fn session_attr<'a>(
    session: Option<&'a str>,
    parts: (&mut Vec<&'static str>, &mut Vec<&'static str>),
    names: &mut Vec<(&'static str, &'a str)>,
    values: &mut Vec<(&'static str, Attr<'a>)>,
) {
    let (set, remove) = parts;
    names.push(("#sess", item::LOCK_SESSION));
    match session {
        Some(id) => {
            set.push("#sess = :sess");
            values.push((":sess", Attr::S(id)));
        }
        None => remove.push("#sess"),
    }
}

/// An update expression from its `SET` and `REMOVE` parts.
fn expression(set: &[&str], remove: &[&str]) -> String {
    let mut e = String::with_capacity(160);
    if !set.is_empty() {
        e.push_str("SET ");
        e.push_str(&set.join(", "));
    }
    if !remove.is_empty() {
        if !e.is_empty() {
            e.push(' ');
        }
        e.push_str("REMOVE ");
        e.push_str(&remove.join(", "));
    }
    e
}

fn data_attr(d: &LockData) -> Attr<'_> {
    match d {
        LockData::S(s) => Attr::S(s),
        LockData::B(b) => Attr::B(b),
    }
}

/// Adds the holder's data (`remove_if_none`: removes a previous holder's when there is none)
/// and the TTL attribute to an update.
fn data_and_ttl<'a>(
    data: Option<&'a LockData>,
    remove_if_none: bool,
    ttl: Option<Ttl<'a>>,
    parts: (&mut Vec<&'static str>, &mut Vec<&'static str>),
    names: &mut Vec<(&'static str, &'a str)>,
    values: &mut Vec<(&'static str, Attr<'a>)>,
) {
    let (set, remove) = parts;
    match data {
        Some(d) => {
            set.push("#data = :data");
            values.push((":data", data_attr(d)));
            names.push(("#data", item::LOCK_DATA));
        }
        None if remove_if_none => {
            remove.push("#data");
            names.push(("#data", item::LOCK_DATA));
        }
        None => {}
    }
    if let Some((name, at)) = ttl {
        set.push("#ttl = :ttl");
        values.push((":ttl", Attr::N(at)));
        names.push(("#ttl", name));
    }
}

fn invalid_response(message: &str) -> StoreError {
    StoreError::Service {
        code: "InvalidResponse".into(),
        message: message.into(),
        transient: false,
        maybe_applied: true,
    }
}

#[async_trait]
impl Store for HttpStore {
    /// A timeout names the endpoint, once the connection is set up (a request that timed out
    /// before that names none: it never got as far as an endpoint).
    fn timed_out(&self) -> StoreError {
        let mut e = super::timed_out();
        if let (StoreError::Io { message, .. }, Some(Ok(link))) = (&mut e, self.link.get()) {
            *message = super::timed_out_message(&link.destination());
        }
        e
    }

    /// The one way an operation reaches DynamoDB: each `Op` is one request, whose condition
    /// states `op::allowed` and whose update states `op::apply` (the agreement test,
    /// `src/tests/agreement`, holds the two side by side on real engines).
    async fn apply(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Reply<LockRecord>, StoreError> {
        if !crate::debug::on() {
            return self.apply_op(key, op).await;
        }
        let started = std::time::Instant::now();
        let r = self.apply_op(key, op).await;
        crate::debug::log(|| crate::debug::request(&self.table, key, op, &r, started.elapsed()));
        r
    }
}

impl HttpStore {
    /// `Store::apply`: the request of each operation.
    async fn apply_op(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Reply<LockRecord>, StoreError> {
        match *op {
            Op::Get => self.get(key).await.map(Reply::Before),
            Op::PutIfAbsent { owner, guid, data, ttl } => {
                self.put_if_absent(key, owner, guid, data, ttl).await.map(|()| Reply::Done)
            }
            Op::DeleteIfGuid { guids } => self.delete_if_guid(key, guids).await.map(Reply::WaitingMark),
            Op::Take {
                fields,
                guid,
                waited_out,
                clear_mark,
            } => self.take(key, fields, guid, waited_out, clear_mark).await.map(Reply::Token),
            Op::HandOver {
                guids,
                new_guid,
                fields,
                marks_fresh_since_unix_ms,
                ttl,
            } => self
                .hand_over(key, guids, new_guid, fields, marks_fresh_since_unix_ms, ttl)
                .await
                .map(Reply::HandedOver),
            Op::Renew {
                guids,
                new_guid,
                fields,
            } => self.renew(key, guids, new_guid, fields).await.map(|revoked| match revoked.is_empty() {
                true => Reply::Done,
                false => Reply::Revoked(revoked),
            }),
            Op::PutItem { .. } => Err(not_supported(
                "the original's whole-item put is sent only through a dynamodb object; this store writes the lock item with UpdateItem".into(),
            )),
            Op::Release {
                guids,
                lock_acquired_time_unix_ms,
                ttl,
            } => self
                .release(key, guids, lock_acquired_time_unix_ms, ttl)
                .await
                .map(Reply::WaitingMark),
            Op::SetData { guids, data, ttl } => self.set_data(key, guids, data, ttl).await.map(|()| Reply::Done),
            Op::MarkWaiting(ref mark) => self.mark_waiting(key, mark).await.map(|()| Reply::Done),
            Op::FifoTakeFree { fields, guid } => self.fifo_take_free(key, fields, guid).await.map(Reply::Token),
            Op::FifoTicket => self.fifo_ticket(key).await.map(Reply::Before),
            Op::FifoReserve { ticket } => self.fifo_reserve(key, ticket).await.map(Reply::Before),
            Op::FifoUntake {
                ticket,
                position,
                previous_ticket,
            } => self
                .fifo_untake(key, ticket, position, previous_ticket)
                .await
                .map(|()| Reply::Done),
            Op::FifoPutEntry(ref entry) => self.fifo_put_entry(key, entry).await.map(|()| Reply::Done),
            Op::FifoGrant {
                fields,
                guid,
                ticket,
                position,
                waited_out,
            } => self
                .fifo_grant(key, fields, guid, ticket, position, waited_out)
                .await
                .map(|()| Reply::Done),
            Op::FifoFinishEntry { guids, new_guid } => {
                self.fifo_finish_entry(key, guids, new_guid).await.map(|()| Reply::Done)
            }
            Op::FifoDeleteFinished => self.fifo_delete_finished(key).await.map(|()| Reply::Done),
            Op::FifoTouchEntry { ttl } => self.fifo_touch_entry(key, ttl).await.map(|()| Reply::Done),
            Op::SemTake {
                fields,
                guid,
                limit,
                permits,
            } => self.sem_take(key, fields, guid, limit, permits).await.map(Reply::Token),
            Op::SemGrant(ref g) => self.sem_grant(key, g).await.map(|()| Reply::Done),
            Op::SemRenew {
                key: holder,
                guids,
                new_guid,
                permits,
                fields,
            } => self
                .sem_renew(key, holder, guids, new_guid, permits, fields)
                .await
                .map(|()| Reply::Done),
            Op::SemRelease {
                key: holder,
                guids,
                permits,
            } => self
                .sem_release(key, holder, guids, permits)
                .await
                .map(|()| Reply::WaitingMark(None)),
        }
    }
}

/// Names for the holders one semaphore grant reclaims, `fifo::MAX_RECLAIM` at most.
const RECLAIM_NAMES: [(&str, &str, &str); dynamodb_lock_core::fifo::MAX_RECLAIM] = [
    ("#r0", ":r0", ":rp0"),
    ("#r1", ":r1", ":rp1"),
    ("#r2", ":r2", ":rp2"),
    ("#r3", ":r3", ":rp3"),
    ("#r4", ":r4", ":rp4"),
    ("#r5", ":r5", ":rp5"),
    ("#r6", ":r6", ":rp6"),
    ("#r7", ":r7", ":rp7"),
];

/// The condition that a semaphore holder's attribute `#h` holds `permits` (its value's first
/// word, `:hp`) and carries one of `hexes` (its `guid`s in hex), with the values it names.
fn holder_condition<'a>(
    hexes: &'a [String],
    permits: &'a str,
    values: &mut Vec<(&'static str, Attr<'a>)>,
) -> Result<String, StoreError> {
    const NAMES: [&str; 4] = [":hg0", ":hg1", ":hg2", ":hg3"];
    if hexes.is_empty() || hexes.len() > NAMES.len() {
        return Err(config_error(format!("{} guids in one condition", hexes.len())));
    }
    let mut parts = Vec::new();
    for (name, h) in NAMES.iter().zip(hexes) {
        values.push((name, Attr::S(h)));
        parts.push(format!("contains(#h, {name})"));
    }
    values.push((":hp", Attr::S(permits)));
    Ok(format!("begins_with(#h, :hp) AND ({})", parts.join(" OR ")))
}

/// The first word of a semaphore holder's value, with the space after it: its permits.
fn permits_word(permits: u64) -> String {
    format!("{permits} ")
}

/// A semaphore's requests on its head item (`Op::SemTake`, `SemGrant`, `SemRenew`,
/// `SemRelease`). A holder is one attribute (`item::holder_name`), so that each holder's
/// writes name only its own; `permitsHeld` counts the permits of them all, which conditions
/// compare with the permits a grant may add.
impl HttpStore {
    async fn sem_take(
        &self,
        head: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        limit: u64,
        permits: u64,
    ) -> Result<u64, StoreError> {
        let name = item::holder_name(guid);
        let value = item::holder_value(permits, fields.lease_duration_ms, guid, unix_now_ms(), fields.owner);
        let mut values = vec![
            (":zero", Attr::N(0)),
            (":one", Attr::N(1)),
            (":n", Attr::N(limit)),
            (":k", Attr::N(permits)),
            (":room", Attr::N(limit.saturating_sub(permits))),
            (":hv", Attr::S(&value)),
        ];
        let update = format!(
            "SET #perm = :n, #held = if_not_exists(#held, :zero) + :k, #h = :hv, #ft = {NEXT_TICKET}, \
             #tn = {NEXT_TICKET}, #qg = if_not_exists(#qn, :zero)"
        );
        let cond = format!(
            "attribute_not_exists(#lease) AND (attribute_not_exists(#perm) OR #perm = :n) \
             AND (attribute_not_exists(#held) OR #held <= :room) \
             AND (attribute_not_exists(#tn) OR #tn = #ft OR (attribute_not_exists(#ft) AND #tn = :zero)) AND {}",
            ticket_can_rise(&mut values)
        );
        let names = [
            ("#lease", item::LEASE_DURATION_MS),
            ("#perm", item::PERMITS),
            ("#held", item::PERMITS_HELD),
            ("#h", name.as_str()),
            ("#ft", item::FENCING_TOKEN),
            ("#tn", item::TICKET_NEXT),
            ("#qn", item::QUEUE_NEXT),
            ("#qg", item::QUEUE_GRANTED),
        ];
        let reply = self
            .update(head, &update, &cond, &names, &values, "UPDATED_NEW")
            .await?;
        reply
            .record
            .and_then(|r| r.fencing_token)
            .ok_or_else(|| invalid_response("DynamoDB did not return the new fencingToken"))
    }

    async fn sem_grant(&self, head: &LockKey, g: &Grant<'_, Guid>) -> Result<(), StoreError> {
        let Grant {
            fields,
            guid,
            limit,
            permits,
            ticket,
            position,
            reclaim,
        } = *g;
        if reclaim.len() > RECLAIM_NAMES.len() {
            return Err(config_error(format!(
                "{} holders reclaimed in one grant",
                reclaim.len()
            )));
        }
        let name = item::holder_name(guid);
        let value = item::holder_value(permits, fields.lease_duration_ms, guid, unix_now_ms(), fields.owner);
        let freed: u64 = reclaim.iter().map(|r| r.permits).sum();
        let reclaimed: Vec<(String, String, String)> = reclaim
            .iter()
            .map(|r| {
                (
                    item::holder_name(&r.key),
                    item::guid_hex(&r.guid),
                    permits_word(r.permits),
                )
            })
            .collect();
        let mut values = vec![
            (":n", Attr::N(limit)),
            (":tk", Attr::N(ticket)),
            (":p", Attr::N(position)),
            (":room", Attr::N((limit + freed).saturating_sub(permits))),
            (":hv", Attr::S(&value)),
        ];
        let mut names = vec![
            ("#lease", item::LEASE_DURATION_MS),
            ("#perm", item::PERMITS),
            ("#held", item::PERMITS_HELD),
            ("#h", name.as_str()),
            ("#ft", item::FENCING_TOKEN),
            ("#qg", item::QUEUE_GRANTED),
        ];
        // `permitsHeld` moves by what the grant adds less what it reclaims.
        let held = match permits >= freed {
            true => {
                values.push((":d", Attr::N(permits - freed)));
                values.push((":zero", Attr::N(0)));
                "if_not_exists(#held, :zero) + :d"
            }
            false => {
                values.push((":d", Attr::N(freed - permits)));
                "#held - :d"
            }
        };
        let mut update = format!("SET #perm = :n, #held = {held}, #h = :hv, #ft = :tk, #qg = :p");
        let mut cond = "attribute_not_exists(#lease) AND (attribute_not_exists(#perm) OR #perm = :n) \
             AND (attribute_not_exists(#ft) OR #ft < :tk) AND (attribute_not_exists(#held) OR #held <= :room)"
            .to_string();
        for (i, (n, hex, word)) in reclaimed.iter().enumerate() {
            let (hn, vn, pn) = RECLAIM_NAMES[i];
            names.push((hn, n.as_str()));
            values.push((vn, Attr::S(hex)));
            values.push((pn, Attr::S(word)));
            cond.push_str(&format!(" AND contains({hn}, {vn}) AND begins_with({hn}, {pn})"));
            update.push_str(if i == 0 { " REMOVE " } else { ", " });
            update.push_str(hn);
        }
        self.update(head, &update, &cond, &names, &values, "NONE").await?;
        Ok(())
    }

    async fn sem_renew(
        &self,
        head: &LockKey,
        key: &Guid,
        guids: &[Guid],
        new_guid: &Guid,
        permits: u64,
        fields: &OpenFields<'_>,
    ) -> Result<(), StoreError> {
        let name = item::holder_name(key);
        let value = item::holder_value(permits, fields.lease_duration_ms, new_guid, unix_now_ms(), fields.owner);
        let hexes: Vec<String> = guids.iter().map(|g| item::guid_hex(g)).collect();
        let word = permits_word(permits);
        let mut values = vec![(":hv", Attr::S(&value))];
        let cond = holder_condition(&hexes, &word, &mut values)?;
        let names = [("#h", name.as_str())];
        self.update(head, "SET #h = :hv", &cond, &names, &values, "NONE")
            .await?;
        Ok(())
    }

    async fn sem_release(&self, head: &LockKey, key: &Guid, guids: &[Guid], permits: u64) -> Result<(), StoreError> {
        let name = item::holder_name(key);
        let hexes: Vec<String> = guids.iter().map(|g| item::guid_hex(g)).collect();
        let word = permits_word(permits);
        let mut values = vec![(":k", Attr::N(permits))];
        let cond = holder_condition(&hexes, &word, &mut values)?;
        let names = [("#h", name.as_str()), ("#held", item::PERMITS_HELD)];
        self.update(head, "SET #held = #held - :k REMOVE #h", &cond, &names, &values, "NONE")
            .await?;
        Ok(())
    }
}

/// Each operation's DynamoDB request: its condition and update expressions, and what the
/// reply is read for.
impl HttpStore {
    async fn get(&self, key: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        let mut b = Body::new(&self.table.name);
        b.item("Key", &self.table, key, &[]);
        b.bool("ConsistentRead", true);
        Ok(self.call("GetItem", b.finish()).await?.record)
    }

    async fn put_if_absent(
        &self,
        key: &LockKey,
        owner: &str,
        guid: &Guid,
        data: Option<&LockData>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<(), StoreError> {
        let mut b = Body::new(&self.table.name);
        let mut attrs = vec![
            (item::OWNER, Attr::S(owner)),
            (item::GUID, Attr::B(guid)),
            (item::LOCK_WRITTEN_UNIX_MS, Attr::N(written_now())),
        ];
        if let Some(d) = data {
            attrs.push((item::LOCK_DATA, data_attr(d)));
        }
        if let Some((name, at)) = ttl {
            attrs.push((name, Attr::N(at)));
        }
        b.item("Item", &self.table, key, &attrs);
        b.str("ConditionExpression", "attribute_not_exists(#pk)");
        b.names(&[("#pk", &self.table.partition_key)]);
        b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        self.call("PutItem", b.finish()).await?;
        Ok(())
    }

    async fn delete_if_guid(&self, key: &LockKey, guids: &[Guid]) -> Result<Option<u64>, StoreError> {
        let mut values = Vec::with_capacity(guids.len());
        let cond = guid_condition(guids, &mut values)?;
        let mut b = Body::new(&self.table.name);
        b.item("Key", &self.table, key, &[]);
        b.str("ConditionExpression", &cond);
        b.names(&[("#guid", item::GUID)]);
        b.values(&values);
        b.str("ReturnValues", "ALL_OLD");
        b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        let reply = self.call("DeleteItem", b.finish()).await?;
        Ok(reply.record.and_then(|r| r.lock_waiting_unix_ms))
    }

    async fn take(
        &self,
        key: &LockKey,
        fields: &OpenFields<'_>,
        guid: &Guid,
        waited_out: Option<&Version>,
        clear_mark: bool,
    ) -> Result<u64, StoreError> {
        let mut values = vec![
            (":owner", Attr::S(fields.owner)),
            (":guid", Attr::B(guid)),
            (":lease", Attr::N(fields.lease_duration_ms)),
            (":zero", Attr::N(fields.token_floor)),
            (":one", Attr::N(1)),
            (":released", Attr::N(RELEASED_LEASE_MS)),
        ];
        let mut names = vec![
            ("#pk", self.table.partition_key.as_str()),
            ("#owner", item::OWNER),
            ("#guid", item::GUID),
            ("#lease", item::LEASE_DURATION_MS),
            ("#ft", item::FENCING_TOKEN),
            ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
        ];
        let mut set = vec![
            "#owner = :owner",
            "#guid = :guid",
            "#lease = :lease",
            "#ft = if_not_exists(#ft, :zero) + :one",
        ];
        let mut remove = vec![];
        match fields.lock_acquired_time_unix_ms {
            Some(t) => {
                set.push("#t = :t");
                values.push((":t", Attr::N(t)));
            }
            None => remove.push("#t"),
        }
        if clear_mark {
            remove.extend(["#w", "#wid", "#ws", "#wo"]);
            names.extend([
                ("#w", item::LOCK_WAITING_UNIX_MS),
                ("#wid", item::LOCK_WAITER),
                ("#ws", item::LOCK_WAITING_SINCE_UNIX_MS),
                ("#wo", item::LOCK_WAITER_OWNER),
            ]);
        }
        data_and_ttl(
            fields.data,
            true,
            fields.ttl,
            (&mut set, &mut remove),
            &mut names,
            &mut values,
        );
        session_attr(fields.session, (&mut set, &mut remove), &mut names, &mut values);
        let update = expression(&set, &remove);
        let mut cond = "(attribute_not_exists(#pk) OR #lease = :released".to_string();
        if let Some(v) = waited_out {
            cond.push_str(" OR ");
            cond.push_str(&waited_out_condition(v, &mut values));
        }
        cond.push_str(") AND ");
        cond.push_str(token_can_rise(&mut values));
        let reply = self.update(key, &update, &cond, &names, &values, "UPDATED_NEW").await?;
        reply
            .record
            .and_then(|r| r.fencing_token)
            .ok_or_else(|| invalid_response("DynamoDB did not return a new fencingToken that reads as one"))
    }

    async fn renew(
        &self,
        key: &LockKey,
        guids: &[Guid],
        new_guid: &Guid,
        fields: &OpenFields<'_>,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut values = vec![
            (":owner", Attr::S(fields.owner)),
            (":new", Attr::B(new_guid)),
            (":lease", Attr::N(fields.lease_duration_ms)),
        ];
        let mut update = "SET #owner = :owner, #guid = :new, #lease = :lease".to_string();
        let mut names = vec![
            ("#owner", item::OWNER),
            ("#guid", item::GUID),
            ("#lease", item::LEASE_DURATION_MS),
            ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
        ];
        if let Some((name, at)) = fields.ttl {
            update.push_str(", #ttl = :ttl");
            values.push((":ttl", Attr::N(at)));
            names.push(("#ttl", name));
        }
        acquired_time(&mut update, fields.lock_acquired_time_unix_ms, &mut values);
        // Held (`op::free` is false: a lease that is not the released one): a heartbeat that
        // lands after the release must not take the lock back. `<>` alone is true on an item
        // without a lease (DynamoDB Local applies it; the agreement test caught it), which
        // `free` counts as free: the lease must exist too.
        values.push((":released", Attr::N(RELEASED_LEASE_MS)));
        let cond = format!(
            "{} AND attribute_exists(#lease) AND #lease <> :released",
            guid_condition(guids, &mut values)?
        );
        // A session's renewal reads its item back: an operator's revocation of one of its
        // locks is on it (`lockRevoked`), and reaches the holder with this answer.
        let returns = if item::is_session_key(key) { "ALL_NEW" } else { "NONE" };
        Ok(self
            .update(key, &update, &cond, &names, &values, returns)
            .await?
            .revoked)
    }

    async fn release(
        &self,
        key: &LockKey,
        guids: &[Guid],
        lock_acquired_time_unix_ms: Option<u64>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<Option<u64>, StoreError> {
        let mut values = vec![(":released", Attr::N(RELEASED_LEASE_MS))];
        let mut update = "SET #lease = :released".to_string();
        let mut names = vec![
            ("#guid", item::GUID),
            ("#lease", item::LEASE_DURATION_MS),
            ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
        ];
        if let Some((name, at)) = ttl {
            update.push_str(", #ttl = :ttl");
            values.push((":ttl", Attr::N(at)));
            names.push(("#ttl", name));
        }
        acquired_time(&mut update, lock_acquired_time_unix_ms, &mut values);
        let cond = guid_condition(guids, &mut values)?;
        let reply = self.update(key, &update, &cond, &names, &values, "ALL_OLD").await?;
        Ok(reply.record.and_then(|r| r.lock_waiting_unix_ms))
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
        let mut values = vec![
            (":new", Attr::B(new_guid)),
            (":fresh", Attr::N(marks_fresh_since_unix_ms)),
        ];
        let mut names = vec![("#guid", item::GUID), ("#w", item::LOCK_WAITING_UNIX_MS)];
        let mut set = vec!["#guid = :new"];
        let mut remove = vec![];
        if let Some(f) = fields {
            // An item without a token counts from 0, as `op::apply` does (`#ft + :one` alone
            // is a ValidationException there).
            set.extend([
                "#owner = :owner",
                "#lease = :lease",
                "#ft = if_not_exists(#ft, :zero) + :one",
            ]);
            values.extend([
                (":owner", Attr::S(f.owner)),
                (":lease", Attr::N(f.lease_duration_ms)),
                (":zero", Attr::N(0)),
                (":one", Attr::N(1)),
            ]);
            names.extend([
                ("#owner", item::OWNER),
                ("#lease", item::LEASE_DURATION_MS),
                ("#ft", item::FENCING_TOKEN),
                ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
            ]);
            match f.lock_acquired_time_unix_ms {
                Some(t) => {
                    set.push("#t = :t");
                    values.push((":t", Attr::N(t)));
                }
                None => remove.push("#t"),
            }
            session_attr(f.session, (&mut set, &mut remove), &mut names, &mut values);
        }
        // The next holder brings its own data, if any, with a write of its own.
        data_and_ttl(None, true, ttl, (&mut set, &mut remove), &mut names, &mut values);
        let update = expression(&set, &remove);
        let mut cond = format!(
            "({}) AND (attribute_not_exists(#w) OR #w < :fresh)",
            guid_condition(guids, &mut values)?
        );
        if fields.is_some() {
            cond.push_str(" AND ");
            cond.push_str(token_can_rise(&mut values));
        }
        let returns = if fields.is_some() { "UPDATED_NEW" } else { "NONE" };
        let reply = self.update(key, &update, &cond, &names, &values, returns).await?;
        match fields {
            None => Ok(None),
            Some(_) => reply
                .record
                .and_then(|r| r.fencing_token)
                .map(Some)
                .ok_or_else(|| invalid_response("DynamoDB did not return the new fencingToken")),
        }
    }

    async fn set_data(
        &self,
        key: &LockKey,
        guids: &[Guid],
        data: Option<&LockData>,
        ttl: Option<Ttl<'_>>,
    ) -> Result<(), StoreError> {
        let mut values = vec![];
        let mut names = vec![("#guid", item::GUID)];
        let (mut set, mut remove) = (vec![], vec![]);
        data_and_ttl(data, true, ttl, (&mut set, &mut remove), &mut names, &mut values);
        let update = expression(&set, &remove);
        let cond = guid_condition(guids, &mut values)?;
        self.update(key, &update, &cond, &names, &values, "NONE").await?;
        Ok(())
    }

    async fn fifo_take_free(&self, head: &LockKey, fields: &OpenFields<'_>, guid: &Guid) -> Result<u64, StoreError> {
        let mut values = vec![
            (":owner", Attr::S(fields.owner)),
            (":guid", Attr::B(guid)),
            (":lease", Attr::N(fields.lease_duration_ms)),
            (":zero", Attr::N(0)),
            (":one", Attr::N(RELEASED_LEASE_MS)),
        ];
        let mut update = format!(
            "SET #owner = :owner, #guid = :guid, #lease = :lease, #ft = {NEXT_TICKET}, #tn = {NEXT_TICKET}, \
             #qg = if_not_exists(#qn, :zero)"
        );
        acquired_time(&mut update, fields.lock_acquired_time_unix_ms, &mut values);
        // No ticket is out: none was ever issued, the last one issued is the holder's, or every
        // one issued was given back before any was granted (`ticketNext` 0, no token yet).
        let cond = format!(
            "(attribute_not_exists(#lease) OR #lease = :one) AND (attribute_not_exists(#tn) OR #tn = #ft \
             OR (attribute_not_exists(#ft) AND #tn = :zero)) AND attribute_not_exists(#perm) AND {}",
            ticket_can_rise(&mut values)
        );
        let reply = self
            .update(head, &update, &cond, &FIFO_NAMES, &values, "UPDATED_NEW")
            .await?;
        reply
            .record
            .and_then(|r| r.fencing_token)
            .ok_or_else(|| invalid_response("DynamoDB did not return the new fencingToken"))
    }

    async fn fifo_ticket(&self, head: &LockKey) -> Result<Option<LockRecord>, StoreError> {
        let mut values = vec![(":zero", Attr::N(0)), (":one", Attr::N(1))];
        let update = format!("SET #tn = {NEXT_TICKET}, #qn = if_not_exists(#qn, :zero) + :one");
        let cond = ticket_can_rise(&mut values);
        let names = [
            ("#ft", item::FENCING_TOKEN),
            ("#tn", item::TICKET_NEXT),
            ("#qn", item::QUEUE_NEXT),
            ("#qg", item::QUEUE_GRANTED),
        ];
        let reply = self
            .send_update(head, &update, cond, &names, &values, "ALL_OLD")
            .await?;
        Ok(reply.record)
    }

    async fn fifo_reserve(&self, head: &LockKey, ticket: u64) -> Result<Option<LockRecord>, StoreError> {
        let mut values = vec![(":zero", Attr::N(0)), (":one", Attr::N(1)), (":t", Attr::N(ticket))];
        let update = "SET #tn = :t, #qn = if_not_exists(#qn, :zero) + :one";
        let cond = format!(
            "((attribute_not_exists(#tn) AND (attribute_not_exists(#ft) OR #ft < :t)) OR #tn < :t) AND {}",
            ticket_can_rise(&mut values)
        );
        let names = [
            ("#ft", item::FENCING_TOKEN),
            ("#tn", item::TICKET_NEXT),
            ("#qn", item::QUEUE_NEXT),
            ("#qg", item::QUEUE_GRANTED),
        ];
        let reply = self
            .send_update(head, update, &cond, &names, &values, "ALL_OLD")
            .await?;
        Ok(reply.record)
    }

    async fn fifo_untake(
        &self,
        head: &LockKey,
        ticket: u64,
        position: u64,
        previous_ticket: u64,
    ) -> Result<(), StoreError> {
        let values = [
            (":t", Attr::N(ticket)),
            (":p", Attr::N(position)),
            (":prev", Attr::N(previous_ticket)),
            (":pprev", Attr::N(position.saturating_sub(1))),
        ];
        let names = [
            ("#tn", item::TICKET_NEXT),
            ("#qn", item::QUEUE_NEXT),
            ("#ft", item::FENCING_TOKEN),
        ];
        self.send_update(
            head,
            "SET #tn = :prev, #qn = :pprev",
            "#qn = :p AND #tn = :t AND (attribute_not_exists(#ft) OR #ft < :t)",
            &names,
            &values,
            "NONE",
        )
        .await?;
        Ok(())
    }

    async fn fifo_put_entry(&self, key: &LockKey, entry: &Entry<'_>) -> Result<(), StoreError> {
        let mut b = Body::new(&self.table.name);
        let mut attrs = vec![
            (item::OWNER, Attr::S(entry.owner)),
            (item::GUID, Attr::B(entry.guid)),
            (item::FENCING_TOKEN, Attr::N(entry.ticket)),
            (item::LEASE_DURATION_MS, Attr::N(entry.lease_duration_ms)),
            (item::LOCK_WRITTEN_UNIX_MS, Attr::N(written_now())),
            (entry.ttl.0, Attr::N(entry.ttl.1)),
        ];
        if let Some(p) = entry.permits {
            attrs.push((item::PERMITS, Attr::N(p)));
        }
        b.item("Item", &self.table, key, &attrs);
        b.str("ConditionExpression", "attribute_not_exists(#pk)");
        b.names(&[("#pk", &self.table.partition_key)]);
        b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        self.call("PutItem", b.finish()).await?;
        Ok(())
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
        let mut values = vec![
            (":owner", Attr::S(fields.owner)),
            (":guid", Attr::B(guid)),
            (":lease", Attr::N(fields.lease_duration_ms)),
            (":one", Attr::N(RELEASED_LEASE_MS)),
            (":tk", Attr::N(ticket)),
            (":p", Attr::N(position)),
        ];
        let mut update = "SET #owner = :owner, #guid = :guid, #lease = :lease, #ft = :tk, #qg = :p".to_string();
        acquired_time(&mut update, fields.lock_acquired_time_unix_ms, &mut values);
        let mut free = "attribute_not_exists(#lease) OR #lease = :one".to_string();
        if let Some(v) = waited_out {
            free.push_str(" OR ");
            free.push_str(&waited_out_condition(v, &mut values));
        }
        let cond = format!("({free}) AND (attribute_not_exists(#ft) OR #ft < :tk) AND attribute_not_exists(#perm)");
        self.update(head, &update, &cond, &GRANT_NAMES, &values, "NONE").await?;
        Ok(())
    }

    async fn fifo_finish_entry(&self, key: &LockKey, guids: &[Guid], new_guid: &Guid) -> Result<(), StoreError> {
        let mut values = vec![(":one", Attr::N(RELEASED_LEASE_MS)), (":new", Attr::B(new_guid))];
        let cond = guid_condition(guids, &mut values)?;
        let names = [("#guid", item::GUID), ("#lease", item::LEASE_DURATION_MS)];
        self.update(key, "SET #lease = :one, #guid = :new", &cond, &names, &values, "NONE")
            .await?;
        Ok(())
    }

    async fn fifo_delete_finished(&self, key: &LockKey) -> Result<(), StoreError> {
        let mut b = Body::new(&self.table.name);
        b.item("Key", &self.table, key, &[]);
        b.str("ConditionExpression", "#lease = :one");
        b.names(&[("#lease", item::LEASE_DURATION_MS)]);
        b.values(&[(":one", Attr::N(RELEASED_LEASE_MS))]);
        self.call("DeleteItem", b.finish()).await?;
        Ok(())
    }

    async fn fifo_touch_entry(&self, key: &LockKey, ttl: (&str, u64)) -> Result<(), StoreError> {
        let names = [
            ("#pk", self.table.partition_key.as_str()),
            ("#lease", item::LEASE_DURATION_MS),
            ("#ttl", ttl.0),
        ];
        let values = [(":one", Attr::N(RELEASED_LEASE_MS)), (":ttl", Attr::N(ttl.1))];
        self.update(
            key,
            "SET #ttl = :ttl",
            "attribute_exists(#pk) AND #lease <> :one",
            &names,
            &values,
            "NONE",
        )
        .await?;
        Ok(())
    }

    async fn mark_waiting(&self, key: &LockKey, mark: &WaitMark<'_>) -> Result<(), StoreError> {
        let names = [
            ("#pk", self.table.partition_key.as_str()),
            ("#w", item::LOCK_WAITING_UNIX_MS),
            ("#wid", item::LOCK_WAITER),
            ("#ws", item::LOCK_WAITING_SINCE_UNIX_MS),
            ("#wo", item::LOCK_WAITER_OWNER),
        ];
        let values = [
            (":w", Attr::N(mark.now_unix_ms)),
            (":wid", Attr::S(mark.waiter)),
            (":ws", Attr::N(mark.since_unix_ms)),
            (":wo", Attr::S(mark.owner)),
            (":stale", Attr::N(mark.stale_before_unix_ms)),
        ];
        self.send_update(
            key,
            "SET #w = :w, #wid = :wid, #ws = :ws, #wo = :wo",
            "attribute_exists(#pk) AND (attribute_not_exists(#w) OR #w < :stale OR #wid = :wid OR #ws > :ws)",
            &names,
            &values,
            "NONE",
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn one_guid_is_an_equality_two_are_a_list() {
        let g = [[1u8; 64], [2u8; 64]];
        let mut v = vec![];
        assert_eq!(guid_condition(&g[..1], &mut v).unwrap(), "#guid = :g0");
        let mut v = vec![];
        assert_eq!(guid_condition(&g, &mut v).unwrap(), "#guid IN (:g0, :g1)");
        assert_eq!(v.len(), 2);
        assert!(guid_condition(&[], &mut v).is_err());
    }

    #[test]
    fn a_clock_skew_is_read_from_the_date_header_and_applied() {
        let now = UNIX_EPOCH + Duration::from_secs(1_784_000_000);
        let server = aws_smithy_types::DateTime::from(now + Duration::from_secs(600))
            .fmt(aws_smithy_types::date_time::Format::HttpDate)
            .unwrap();
        assert_eq!(skew_from_date(&server, now), Some(600_000));
        assert_eq!(skewed(now, 600_000), now + Duration::from_secs(600));
        assert_eq!(skewed(now, -1_000), now - Duration::from_secs(1));
        assert_eq!(skew_from_date("not a date", now), None);
    }

    #[test]
    fn stale_acquired_time_is_removed_without_trust() {
        let mut v = vec![];
        let mut s = "SET #lease = :lease".to_string();
        acquired_time(&mut s, None, &mut v);
        assert_eq!(s, "SET #lease = :lease REMOVE #t");
        let mut s = "SET #lease = :lease".to_string();
        acquired_time(&mut s, Some(5), &mut v);
        assert_eq!(s, "SET #lease = :lease, #t = :t");
        assert!(matches!(v.as_slice(), [(":t", Attr::N(5))]));
    }

    #[test]
    fn update_expressions_join_their_set_and_remove_parts() {
        assert_eq!(
            expression(&["#a = :a", "#b = :b"], &["#c"]),
            "SET #a = :a, #b = :b REMOVE #c"
        );
        assert_eq!(expression(&[], &["#data"]), "REMOVE #data");
        let (mut set, mut remove, mut names, mut values) = (vec![], vec![], vec![], vec![]);
        let data = LockData::S("x".into());
        data_and_ttl(
            Some(&data),
            true,
            Some(("expires", 9)),
            (&mut set, &mut remove),
            &mut names,
            &mut values,
        );
        assert_eq!(expression(&set, &remove), "SET #data = :data, #ttl = :ttl");
        assert_eq!(names, vec![("#data", "lockData"), ("#ttl", "expires")]);
        let (mut set, mut remove, mut names, mut values) = (vec![], vec![], vec![], vec![]);
        data_and_ttl(None, true, None, (&mut set, &mut remove), &mut names, &mut values);
        assert_eq!(expression(&set, &remove), "REMOVE #data");
        assert!(values.is_empty());
    }

    #[test]
    fn every_update_also_sets_the_time_it_was_written() {
        assert_eq!(stamped("SET #a = :a REMOVE #t"), "SET #lw = :lw, #a = :a REMOVE #t");
        assert_eq!(stamped("REMOVE #data"), "SET #lw = :lw REMOVE #data");
        assert_eq!(stamped(""), "SET #lw = :lw");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(written_now().abs_diff(now) < 5_000);
    }

    fn store(endpoint: &str) -> HttpStore {
        HttpStore::new(
            TableSpec {
                name: "locks".into(),
                partition_key: "id".into(),
                sort_key: None,
            },
            HttpOptions {
                region: Some("us-east-1".into()),
                endpoint: Some(endpoint.into()),
                credentials: Some(SharedCredentialsProvider::new(Credentials::new(
                    "AKID", "secret", None, None, "test",
                ))),
                connect_timeout: None,
                ca_bundle: None,
            },
        )
    }

    #[tokio::test]
    async fn endpoints_keep_their_port_and_path() {
        let s = store("http://127.0.0.1:8000");
        let l = s.link().await.unwrap();
        assert_eq!((l.host.as_str(), l.path.as_str()), ("127.0.0.1:8000", "/"));
        assert_eq!(l.shown, "http://127.0.0.1:8000");
        let s = store("https://127.0.0.1:443/prefix");
        let l = s.link().await.unwrap();
        assert_eq!((l.host.as_str(), l.path.as_str()), ("127.0.0.1", "/prefix"));
        assert_eq!(l.shown, "https://127.0.0.1/prefix");
        let l = store("http://user:secret@127.0.0.1:8000/")
            .link()
            .await
            .unwrap()
            .clone();
        assert_eq!(l.shown, "http://127.0.0.1:8000");
        let e = store("ftp://127.0.0.1").link().await.map(|_| ()).unwrap_err();
        assert_eq!(e.code(), "ConfigError");
    }
}
