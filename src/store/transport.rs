//! How requests reach DynamoDB, all through maintained crates: hyper's HTTP/1.1 client
//! (hyper-util's pooled, kept-alive client), rustls through hyper-rustls (the system's trusted
//! roots, or a private CA bundle), and the proxies of the environment (`HTTPS_PROXY`,
//! `HTTP_PROXY`, `NO_PROXY`, also lowercase, as the AWS SDKs read them) through hyper-util's
//! proxy matcher: a CONNECT tunnel for TLS, absolute-form requests for plain HTTP.
//!
//! A request whose future is dropped (a timeout) takes its connection with it: hyper never
//! hands a connection back to the pool with a reply unread, so a late reply can never be read
//! as the answer to another request.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connect, Connected, Connection, HttpConnector};
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::aws_env::causes;

/// Idle connections older than this are closed rather than reused: servers and load
/// balancers drop quiet connections after a while.
const IDLE_TIMEOUT: Duration = Duration::from_secs(20);

/// At most this many idle connections are kept per client: twice as many as may be on the
/// wire (`MAX_CONNECTIONS`). A connection goes back to the pool a moment after its reply is
/// read, so a request sent in that moment opens another; keeping those too lets a burst that
/// used them all find them again instead of opening (against DynamoDB: a TLS handshake each)
/// the ones a smaller pool closed.
const MAX_IDLE: usize = 2 * MAX_CONNECTIONS;

/// At most this many heartbeat requests of one process are on the wire at once, on
/// connections of their own (the heartbeat scheduler bounds them itself, following the round
/// trip), and as many idle connections are kept for them.
pub const MOST_HEARTBEAT_CONNECTIONS: usize = 1024;

/// At most this many requests of one client are on the wire at once; more wait for one to
/// finish. A burst (thousands of locks released together) then reuses connections instead
/// of opening one per request and running out of file descriptors or ports.
const MAX_CONNECTIONS: usize = 128;

/// Replies larger than this are refused (a lock item's reply is well under 1 KiB).
const MAX_REPLY: usize = 1 << 20;

/// Why a request got no usable reply.
#[derive(Debug)]
pub enum TransportError {
    /// No connection could be made: the request was never sent.
    Connect(String),
    /// The connection could not be made in time: the request was never sent.
    ConnectTimeout,
    /// The request was (perhaps partly) sent, but no complete reply came back.
    Exchange(String),
    /// The reply's `x-amz-crc32` does not match its body: it was damaged on the way.
    Checksum { expected: u32, actual: u32 },
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Connect(m) => write!(f, "Could not connect to DynamoDB: {m}"),
            TransportError::ConnectTimeout => f.write_str("Could not connect to DynamoDB in time"),
            TransportError::Exchange(m) => write!(f, "No complete reply from DynamoDB: {m}"),
            TransportError::Checksum { expected, actual } => write!(
                f,
                "DynamoDB's reply was damaged on the way: its x-amz-crc32 header says {expected}, its body has {actual}"
            ),
        }
    }
}

/// A reply: its status, its `Date` header (for clock-skew errors) and its body.
pub struct HttpResponse {
    pub status: u16,
    pub date: Option<String>,
    pub body: Bytes,
}

/// Where the connections go, decided once per endpoint; `C` makes the TCP connections.
#[derive(Clone)]
enum Route<C> {
    Direct(Client<HttpsConnector<C>, Full<Bytes>>),
    /// TLS (or plain HTTP) inside a CONNECT tunnel through the proxy.
    Tunnel(Client<HttpsConnector<Tunnel<C>>, Full<Bytes>>),
    /// Plain HTTP to the proxy, which forwards absolute-form requests.
    Forward(Client<Forward<C>, Full<Bytes>>, Option<http::HeaderValue>),
}

impl<C> Route<C>
where
    HttpsConnector<C>: Connect + Clone + Send + Sync + 'static,
    HttpsConnector<Tunnel<C>>: Connect + Clone + Send + Sync + 'static,
    Forward<C>: Connect + Clone + Send + Sync + 'static,
{
    fn request(&self, mut request: http::Request<Full<Bytes>>) -> ResponseFuture {
        match self {
            Route::Direct(c) => c.request(request),
            Route::Tunnel(c) => c.request(request),
            Route::Forward(c, auth) => {
                if let Some(auth) = auth {
                    request
                        .headers_mut()
                        .insert(http::header::PROXY_AUTHORIZATION, auth.clone());
                }
                c.request(request)
            }
        }
    }
}

/// Connections to one endpoint. Each runtime that sends requests has its own pool (the
/// heartbeat scheduler's thread drives a runtime of its own): a connection belongs to the
/// runtime whose reactor tells it when a reply arrives. Requests made on a JavaScript thread
/// whose loop runs them (`uvloop`) have a pool of their own too, watched by that loop.
pub struct Transport {
    /// Connections for requests in general, and for heartbeats.
    routes: [Route<HttpConnector>; 2],
    #[cfg(all(unix, not(test)))]
    local: Route<crate::uvloop::Connector>,
    slots: [tokio::sync::Semaphore; 2],
    /// How the endpoint is reached, for error messages.
    pub via: Option<String>,
}

thread_local! {
    static POOL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A thread that drives its own runtime (the heartbeat scheduler's) calls this once so that
/// its requests use, and keep, connections of their own.
pub fn keep_connections_apart() {
    POOL.with(|p| p.set(1));
}

/// The environment's `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY`, as the AWS SDKs read them:
/// upper case first, then lower case (an empty value is no proxy).
fn proxy_matcher() -> Matcher {
    let var = |upper: &str| {
        std::env::var(upper)
            .or_else(|_| std::env::var(upper.to_lowercase()))
            .unwrap_or_default()
    };
    Matcher::builder()
        .http(var("HTTP_PROXY"))
        .https(var("HTTPS_PROXY"))
        .no(var("NO_PROXY"))
        .build()
}

fn tls_config(ca_bundle: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle {
        Some(pem) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("the CA bundle could not be read: {e}"))?;
            if certs.is_empty() {
                return Err("the CA bundle holds no PEM certificate".into());
            }
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| format!("the CA bundle holds a certificate that cannot be used: {e}"))?;
            }
        }
        None => {
            // Certificates the platform store holds but rustls cannot parse are skipped.
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

impl Transport {
    /// Connections to `endpoint` (an `http` or `https` URL); `ca_bundle`, PEM certificates,
    /// replaces the system's trusted roots (`AWS_CA_BUNDLE`).
    pub fn new(
        endpoint: &http::Uri,
        connect_timeout: Option<Duration>,
        ca_bundle: Option<&[u8]>,
    ) -> Result<Transport, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        // Requests are written whole: nothing is gained by waiting for more.
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout.unwrap_or(Duration::from_secs(3))));
        let tls = tls_config(ca_bundle)?;
        let intercept = proxy_matcher().intercept(endpoint);
        let via = intercept.as_ref().map(|i| {
            let u = i.uri();
            format!(
                "{}://{}",
                u.scheme_str().unwrap_or("http"),
                u.authority().map(|a| a.host()).unwrap_or("")
            )
        });
        let on_runtime = |max_idle| {
            route(
                &http,
                &intercept,
                endpoint,
                &tls,
                builder(TokioExecutor::new(), max_idle),
            )
        };
        Ok(Transport {
            routes: [on_runtime(MAX_IDLE), on_runtime(MOST_HEARTBEAT_CONNECTIONS)],
            #[cfg(all(unix, not(test)))]
            local: route(
                &crate::uvloop::Connector(http.clone()),
                &intercept,
                endpoint,
                &tls,
                builder(crate::uvloop::Executor, MAX_IDLE),
            ),
            slots: [
                tokio::sync::Semaphore::new(MAX_CONNECTIONS),
                tokio::sync::Semaphore::new(MOST_HEARTBEAT_CONNECTIONS),
            ],
            via,
        })
    }

    /// Sends `request` and reads the whole reply, checking its `x-amz-crc32`.
    pub async fn send(&self, request: http::Request<Full<Bytes>>) -> Result<HttpResponse, TransportError> {
        // The semaphore is never closed. A JavaScript thread's requests share the client's
        // bound with those of the runtime.
        let pool = POOL.with(std::cell::Cell::get);
        let _slot = self.slots[pool].acquire().await.ok();
        #[cfg(all(unix, not(test)))]
        let response = match pool == 0 && crate::uvloop::here() {
            true => self.local.request(request),
            false => self.routes[pool].request(request),
        };
        #[cfg(any(not(unix), test))]
        let response = self.routes[pool].request(request);
        let response = response.await.map_err(|e| match e.is_connect() {
            true if has_timeout(&e) => TransportError::ConnectTimeout,
            true => TransportError::Connect(causes(&e)),
            false => TransportError::Exchange(causes(&e)),
        })?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_REPLY)
            .collect()
            .await
            .map_err(|e| TransportError::Exchange(e.to_string()))?
            .to_bytes();
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(expected) = header("x-amz-crc32").and_then(|v| v.trim().parse::<u32>().ok()) {
            let actual = crc32fast::hash(&body);
            if actual != expected {
                return Err(TransportError::Checksum { expected, actual });
            }
        }
        Ok(HttpResponse {
            status: parts.status.as_u16(),
            date: header("date").map(str::to_string),
            body,
        })
    }
}

/// Whether a timeout is among the error's causes.
fn has_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |c| c.source()).any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
    })
}

/// A pool's client, keeping up to `max_idle` idle connections, whose connection tasks run on
/// `exec`.
fn builder<E>(exec: E, max_idle: usize) -> hyper_util::client::legacy::Builder
where
    E: hyper::rt::Executor<Pin<Box<dyn Future<Output = ()> + Send>>> + Send + Sync + Clone + 'static,
{
    let mut builder = Client::builder(exec);
    builder
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_max_idle_per_host(max_idle)
        // A small request goes out with one write of one buffer rather than a vectored write
        // of head and body.
        .http1_writev(false)
        // The signed `Host` header is set with the request.
        .set_host(false);
    builder
}

/// The route to `endpoint` over TCP connections that `http` makes, through the proxy that
/// `intercept` names if any.
fn route<C>(
    http: &C,
    intercept: &Option<hyper_util::client::proxy::matcher::Intercept>,
    endpoint: &http::Uri,
    tls: &rustls::ClientConfig,
    builder: hyper_util::client::legacy::Builder,
) -> Route<C>
where
    C: Clone,
    HttpsConnector<C>: Connect + Clone,
    HttpsConnector<Tunnel<C>>: Connect + Clone,
    Forward<C>: Connect + Clone,
{
    let https = || {
        HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
    };
    match intercept {
        None => Route::Direct(builder.build(https().wrap_connector(http.clone()))),
        Some(i) if endpoint.scheme_str() == Some("https") => {
            let mut tunnel = Tunnel::new(i.uri().clone(), http.clone());
            if let Some(auth) = i.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            Route::Tunnel(builder.build(https().wrap_connector(tunnel)))
        }
        Some(i) => Route::Forward(
            builder.build(Forward {
                proxy: i.uri().clone(),
                http: http.clone(),
            }),
            i.basic_auth().cloned(),
        ),
    }
}

/// Connects every request to the proxy and tells hyper so, which then writes the request
/// line in absolute form for the proxy to forward.
#[derive(Clone)]
struct Forward<C> {
    proxy: http::Uri,
    http: C,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<http::Uri> for Forward<C>
where
    C: tower_service::Service<http::Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = Proxied<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, _dst: http::Uri) -> Self::Future {
        let connecting = self.http.call(self.proxy.clone());
        Box::pin(async move { connecting.await.map(Proxied).map_err(Into::into) })
    }
}

/// A connection to a forwarding proxy.
struct Proxied<T>(T);

impl<T: Connection> Connection for Proxied<T> {
    fn connected(&self) -> Connected {
        self.0.connected().proxy(true)
    }
}

impl<T: Read + Unpin> Read for Proxied<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Proxied<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
