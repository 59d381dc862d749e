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

use dynamodb_lock_wire as wire;
use dynamodb_lock_wire::json::Response;
use dynamodb_lock_wire::Answer;

use super::sigv4::{PostSigner, CONTENT_TYPE};
use super::transport::{Transport, TransportError};
use super::{invalid_response, Op, Reply, Store};
use crate::clock::unix_now_ms;
use crate::error::StoreError;
use crate::item::{LockKey, LockRecord, TableSpec};
use crate::stats::{Outcome, Stats};

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

/// Offsets smaller than this are not taken for the cause of a refused signature (the service
/// allows minutes; the `Date` header has whole seconds).
const MIN_SKEW_MS: i64 = 60_000;

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
    /// The fetch of credentials under way, if any: one at a time, in a task of its own.
    fetch: Mutex<Option<Fetch>>,
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

pub(super) fn config_error(message: String) -> StoreError {
    super::lasting("ConfigError", message, false)
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
        } else if region_variables_blank() {
            // `AWS_REGION=` (set, but empty) stops aws-config's region chain at a region "";
            // as the AWS CLI does, the profile's region is taken instead.
            use aws_config::meta::region::ProvideRegion;
            let profile = aws_config::profile::ProfileFileRegionProvider::builder().build();
            if let Some(r) = profile.region().await {
                loader = loader.region(r);
            }
        }
        if let Some(e) = &o.endpoint {
            loader = loader.endpoint_url(e.clone());
        }
        if let Some(c) = &o.credentials {
            loader = loader.credentials_provider(c.clone());
        }
        let config = loader.load().await;
        // A region set but empty (`AWS_REGION=`) is none: nothing is signed for a region "".
        let region = match config.region().map(|r| r.to_string()).filter(|r| !r.is_empty()) {
            Some(r) => r,
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
                // The `Host` header: the host and a port other than the scheme's, never the
                // user information a URL may carry before them.
                let host = match authority.port_u16() {
                    Some(p) if p != default_port => format!("{}:{p}", authority.host()),
                    _ => authority.host().to_string(),
                };
                // An absolute URI's empty path reads as "/".
                (scheme, host, uri.path().to_string())
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
        let transport = Transport::new(&uri, o.connect_timeout, ca_bundle.as_deref())
            .map_err(|e| config_error(format!("DynamoDB endpoint {url:?}: {e}")))?;
        let shown = format!("{scheme}://{host}{}", path.strip_suffix('/').unwrap_or(&path));
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
            fetch: Mutex::new(None),
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
        counting.outcome = super::outcome(&result);
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
        let ready = async {
            let link = self.link().await?;
            link.credentials().await.map(|c| (link, c))
        };
        // What comes before the request is sent ends by its deadline: a request given up on
        // then was never sent.
        let (link, credentials) = match super::deadline() {
            Some(at) => tokio::time::timeout_at(at, ready)
                .await
                .unwrap_or_else(|_| Err(self.not_ready()))?,
            None => ready.await?,
        };
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
        let refusal = match wire::answer(response.status, &response.body, &self.table.name) {
            Ok(Answer::Ok(reply)) => return Ok((reply, response.body)),
            Ok(Answer::ConditionFailed(record)) => {
                return Err(StoreError::ConditionFailed {
                    current: self.current(record),
                })
            }
            Ok(Answer::Refused(refusal)) => refusal,
            Err(e) => return Err(super::wire_error(e)),
        };
        // A signature refused while the clocks agree is a credentials problem, not a skew.
        let skew = response
            .date
            .as_deref()
            .and_then(|d| skew_from_date(d, SystemTime::now()))
            .filter(|s| s.abs() >= MIN_SKEW_MS && refusal.clock_skew);
        if let Some(skew) = skew {
            link.skew_ms.store(skew, Ordering::Relaxed);
        }
        if refusal.expired_credentials {
            *link.credentials.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        Err(StoreError::Service {
            transient: refusal.transient || skew.is_some(),
            maybe_applied: refusal.maybe_applied,
            message: refusal.message,
            code: refusal.code,
        })
    }

    /// The error of a request whose configuration or credentials were not ready by its
    /// deadline: it was never sent, and may be tried again.
    fn not_ready(&self) -> StoreError {
        let (code, message) = match self.link.get() {
            Some(Ok(_)) => (
                "CredentialsError",
                "The AWS credentials source did not answer within the request's timeout (requestTimeoutMs), so \
                 nothing was sent to DynamoDB: check the profile's credential_process or SSO login, the container or \
                 instance credentials endpoint, or the provider given as `dynamodb.credentials`",
            ),
            _ => (
                "ConfigError",
                "The AWS configuration (region, endpoint, credentials provider) did not load within the request's \
                 timeout (requestTimeoutMs), so nothing was sent to DynamoDB",
            ),
        };
        StoreError::Service {
            code: code.into(),
            message: message.into(),
            transient: true,
            maybe_applied: false,
        }
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
}

/// A fetch of credentials under way: its answer, once there.
type Fetch = tokio::sync::watch::Receiver<Option<Result<Credentials, StoreError>>>;

/// Credentials that still sign for longer than the refresh margin.
fn usable(c: &Option<Credentials>) -> Option<Credentials> {
    c.as_ref()
        .filter(|c| {
            c.expiry()
                .is_none_or(|e| e > SystemTime::now() + CREDENTIALS_REFRESH_MARGIN)
        })
        .cloned()
}

impl Link {
    /// Current credentials, fetched again from the provider when they near expiry. One fetch
    /// runs at a time, in a task of its own that every request needing credentials waits
    /// for: a request that stops waiting (its deadline passed) leaves it running for the
    /// next, so that a source that is slow to answer is asked once, not once per attempt (a
    /// `credential_process` that hangs is started once, not once a request).
    async fn credentials(self: &Arc<Self>) -> Result<Credentials, StoreError> {
        if let Some(c) = usable(&self.credentials.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(c);
        }
        let mut fetch = self.fetching();
        let answer = fetch.wait_for(Option::is_some).await.map(|a| a.clone());
        match answer {
            Ok(Some(answer)) => answer,
            // The fetch's task ended without an answer (its runtime shut down): the next
            // request starts another.
            _ => Err(StoreError::Service {
                code: "CredentialsError".into(),
                message: "The fetch of AWS credentials ended without an answer".into(),
                transient: true,
                maybe_applied: false,
            }),
        }
    }

    /// The fetch under way, or a new one.
    fn fetching(self: &Arc<Self>) -> Fetch {
        let mut slot = self.fetch.lock().unwrap_or_else(|p| p.into_inner());
        // A fetch whose task is gone without an answer is not waited for.
        if let Some(fetch) = slot.as_ref().filter(|f| f.has_changed().is_ok()) {
            return fetch.clone();
        }
        let (answer, fetch) = tokio::sync::watch::channel(None);
        *slot = Some(fetch.clone());
        let link = self.clone();
        tokio::spawn(async move {
            let fetched = link.fetch_credentials().await;
            let _ = answer.send(Some(fetched));
            *link.fetch.lock().unwrap_or_else(|p| p.into_inner()) = None;
        });
        fetch
    }

    async fn fetch_credentials(&self) -> Result<Credentials, StoreError> {
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

/// The environment names no region, but sets a region variable to an empty value.
fn region_variables_blank() -> bool {
    let vars = ["AWS_REGION", "AWS_DEFAULT_REGION"].map(std::env::var_os);
    vars.iter().any(|v| v.as_ref().is_some_and(|v| v.is_empty()))
        && !vars.iter().any(|v| v.as_ref().is_some_and(|v| !v.is_empty()))
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
    /// `Store::apply`: the request of each operation, then its reply read as the operation
    /// answers.
    async fn apply_op(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Reply<LockRecord>, StoreError> {
        let call = wire::request(&self.table, key, op, unix_now_ms()).map_err(super::wire_error)?;
        let response = self.call(call.operation, call.body).await?;
        call.read.reply(response).map_err(super::wire_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

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

    fn store(endpoint: &str) -> HttpStore {
        store_with(
            endpoint,
            SharedCredentialsProvider::new(Credentials::new("AKID", "secret", None, None, "test")),
        )
    }

    fn store_with(endpoint: &str, credentials: SharedCredentialsProvider) -> HttpStore {
        HttpStore::new(
            TableSpec {
                name: "locks".into(),
                partition_key: "id".into(),
                sort_key: None,
            },
            HttpOptions {
                region: Some("us-east-1".into()),
                endpoint: Some(endpoint.into()),
                credentials: Some(credentials),
                connect_timeout: None,
                ca_bundle: None,
            },
        )
    }

    /// A credentials source that never answers, counting how often it is asked.
    #[derive(Clone, Debug, Default)]
    struct Silent(Arc<std::sync::atomic::AtomicU32>);

    impl ProvideCredentials for Silent {
        fn provide_credentials<'a>(&'a self) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.0.fetch_add(1, Ordering::SeqCst);
            aws_credential_types::provider::future::ProvideCredentials::new(std::future::pending())
        }
    }

    #[tokio::test]
    async fn credentials_that_never_come_fail_each_request_by_its_deadline_unsent_and_are_asked_for_once() {
        let silent = Silent::default();
        // Nothing listens there: a request that went out would fail otherwise.
        let s = store_with("http://127.0.0.1:9", SharedCredentialsProvider::new(silent.clone()));
        for _ in 0..3 {
            let at = crate::clock::now() + Duration::from_millis(50);
            // At the deadline the store answers, before `until` gives the request up.
            let call = super::super::until(at, s.call("GetItem", "{}".into()));
            let e = call.await.expect("answered by the deadline").unwrap_err();
            assert_eq!(e.code(), "CredentialsError");
            assert!(e.message().contains("did not answer"), "{}", e.message());
            assert!(!e.maybe_applied(), "never sent, so never landed");
            assert!(e.is_transient());
        }
        assert_eq!(
            silent.0.load(Ordering::SeqCst),
            1,
            "one fetch, waited for by every request"
        );
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
        assert_eq!(l.host, "127.0.0.1:8000", "the Host header carries no user information");
        let l = store("http://[::1]:8000").link().await.unwrap().clone();
        assert_eq!(l.host, "[::1]:8000");
        let e = store("ftp://127.0.0.1").link().await.map(|_| ()).unwrap_err();
        assert_eq!(e.code(), "ConfigError");
    }
}
