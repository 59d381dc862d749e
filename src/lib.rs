//! dynamodb-lock-native: distributed locks on DynamoDB, with the table format and API of
//! `dynamodb-lock-client`, and a Rust core that owns the protocol, timers and I/O.
//!
//! The lock item, the store operations as data with the one `apply` that states their
//! conditions, and every settings default live in the crate `dynamodb_lock_core`
//! (crates/core), which does no I/O and reads no clock; the modules here run it.
//!
//! Modules, each depending only on modules listed before it (the crate root on them all):
//!
//! - `clock`: time as the runtime reads it, in this module alone outside the store: the
//!   monotonic clock, the wall clock, and the core's time lines (`Clock`: one per client for
//!   its held locks, their leases, its session and its line; one per acquisition).
//! - `item`: the core's lock item, plus what the core leaves to its runner: new random
//!   `guid`s.
//! - `error`: `LockError` and the `code` JavaScript sees.
//! - `stats`: a client's request and heartbeat counters, read by `metrics()`.
//! - `debug`: the debug log (`NODE_DEBUG=dynamodb-lock-native`).
//! - `defaults`: the settings defaults JavaScript applies itself, from the core's `settings`.
//! - `runtime`: what every tokio runtime of the addon runs beside its work (the timer floor).
//! - `uvloop` (Unix): the requests a JavaScript thread starts, run on that thread's event loop
//!   (libuv), with their connections' sockets; JavaScript called back from there in order.
//! - `js_credentials`: credentials from a JavaScript provider.
//! - `store`: the `Store` trait (one operation, one request, no retries: those are the
//!   machines'), over DynamoDB's HTTP API (hyper, rustls, aws-sigv4) and over a user's own
//!   `dynamodb` object.
//! - `settings`: a client's settings, and the TTL, fields, retry policies and budgets that
//!   follow from them.
//! - `cancel`: cancellation of one pending acquisition, and its `waiting` reports.
//! - `line`: acquisitions of one id by one client, waiting in arrival order for a hand-over,
//!   and the stand-back from locks this client released while others waited.
//! - `queues`: Fifo's settings in one client and the notification of changes of its registry
//!   (the client machine's), and the table's names for error messages.
//! - `send`: one of the core's requests sent as the operation it is, with what the client's
//!   settings and the caller add to it, by its deadline.
//! - `work`: carries the client's work (the core's `work::Work`: acquisitions, the ends of
//!   locks, forced releases, requests sent once, the undo of acquisition writes whose outcome
//!   is unknown), in one task per client, and the pieces' callers waiting for them.
//! - `lock`: a held lock, its serialized state and its events, its release and update, and
//!   `Shared`, what the held locks of one client share with it; `Scheduler`, the heartbeat
//!   scheduler as they see it.
//! - `heartbeat`: one scheduler renewing every held FailOpen lock and Fifo head and entry.
//! - `fail_closed`, `fail_open`: acquisition of each kind (the core's machines, run in the
//!   client's `work`).
//! - `original`: acquisition with the original library's requests, through a user's own
//!   `dynamodb` object.
//! - `session`: a FailOpen client's session (`session: true`), started on first need.
//! - `fifo`: the fair lock's acquisition (the core's Fifo machine): its requests to head
//!   items and queue entries, the entries' heartbeats, and the held locks.
//! - `client`: acquisition of every kind through the local line, and the start of a new
//!   lock's heartbeats.
//! - `agreement` (tests only): seeded runs of every store operation on a real engine through
//!   the HTTP store and through `op::apply`, compared step by step (run by
//!   `__test__/agreement.test.js`).
//! - `testkit` (tests only): a client over the in-memory store, and a recorder of events.
//!
//! This file is only the N-API surface: it converts values and keeps the registry of held
//! locks and pending acquisitions that JavaScript refers to by number.

#![cfg_attr(test, allow(dead_code))]

#[cfg(test)]
#[path = "tests/agreement/mod.rs"]
mod agreement;
mod cancel;
mod client;
mod clock;
mod debug;
mod defaults;
mod error;
mod fail_closed;
mod fail_open;
mod fifo;
mod heartbeat;
mod item;
mod js_credentials;
mod line;
mod lock;
mod original;
mod queues;
mod runtime;
mod send;
mod session;
mod settings;
mod stats;
mod store;
#[cfg(test)]
#[path = "tests/testkit.rs"]
mod testkit;
#[cfg(all(unix, not(test)))]
mod uvloop;
mod work;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use dynamodb_lock_core::release::{held_by, nothing_freed_fails, reported_released};
use dynamodb_lock_core::request::PURPOSES;
use dynamodb_lock_core::settings as core_settings;
use dynamodb_lock_core::{force, op};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::cancel::Cancel;
use crate::client::Client;
use crate::error::{LockError, StoreError};
use crate::heartbeat::LazyHeartbeats;
use crate::item::{KeyValue, LockData, LockKey, TableSpec};
use crate::lock::{EventSink, HeldLock, LockEvent};
use crate::settings::Settings;
use crate::store::http::{HttpOptions, HttpStore};
use crate::store::Store;
use dynamodb_lock_core::settings::Kind;

// Lock items, requests and responses are many small, short-lived allocations across threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One worker thread: the protocol's work is I/O-bound and small, and a second worker would
/// only compete with Node's own thread for the cores (and add cross-thread wake-ups).
#[napi_derive::module_init]
fn init() {
    if let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("dynamodb-lock-native")
        .enable_all()
        .build()
    {
        rt.spawn(runtime::timer_floor());
        napi::bindgen_prelude::create_custom_tokio_runtime(rt);
    }
}

static LOCKS: LazyLock<Mutex<HashMap<u64, Arc<HeldLock>>>> = LazyLock::new(Default::default);

fn locks() -> std::sync::MutexGuard<'static, HashMap<u64, Arc<HeldLock>>> {
    // A panic while the map is locked cannot leave it inconsistent: recover the guard.
    LOCKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Pending acquisitions of a client, by the number JavaScript gave them (below 2^32) or one of
/// ours (above), so that JavaScript may cancel one and `close()` may cancel them all.
#[derive(Default)]
struct Cancels {
    pending: Mutex<HashMap<u64, Arc<Cancel>>>,
    next_own: std::sync::atomic::AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

impl Cancels {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Cancel>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, id: u64) -> Arc<Cancel> {
        self.map().entry(id).or_default().clone()
    }

    /// The cancellation of a starting acquisition, under JavaScript's number or one of ours.
    /// Cancelled at once when the client is closed: `close()` sets the flag before it cancels
    /// what it finds, so an acquisition is either found or sees the flag.
    fn register(&self, cancel_id: Option<u32>) -> (u64, Arc<Cancel>) {
        let id = match cancel_id {
            Some(id) => id as u64,
            None => (1 << 32) + self.next_own.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        let cancel = self.get(id);
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            cancel.cancel();
        }
        (id, cancel)
    }

    fn forget(&self, id: u64) {
        self.map().remove(&id);
    }

    /// Cancels every pending acquisition, and every later one.
    fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let pending: Vec<Arc<Cancel>> = self.map().values().cloned().collect();
        for cancel in pending {
            cancel.cancel();
        }
    }
}

/// An error for JavaScript to rethrow with its `code`.
#[napi(object)]
pub struct NativeError {
    /// `FailedToAcquireLock`, `FailedToReleaseLock`, an AWS error name, `AbortError`, ...
    pub code: String,
    pub message: String,
    /// The error behind `FailedToAcquireLock`/`FailedToReleaseLock` (the AWS error name).
    pub original_code: Option<String>,
    pub original_message: Option<String>,
    /// The chain of causes behind `message` (JavaScript's `cause`).
    pub detail: Option<String>,
    /// The `owner` of the item that kept the lock, when the failure returned it.
    pub holder: Option<String>,
    /// `CorruptLockItem`: the attribute the item holds in a form that is refused.
    pub attribute: Option<String>,
    /// The user's `dynamodb` object gave this error: JavaScript keeps it under this number
    /// (lib/object-store.js) and hands it back as it came.
    pub js_error: Option<u32>,
    /// The same, for the error behind `FailedToAcquireLock`/`FailedToReleaseLock`.
    pub original_js_error: Option<u32>,
}

impl From<&LockError> for NativeError {
    fn from(e: &LockError) -> Self {
        NativeError {
            code: e.code().to_string(),
            message: e.message(),
            original_code: e.original().map(|o| o.code().to_string()),
            original_message: e.original().map(|o| o.message().to_string()),
            detail: e.detail().map(str::to_string),
            holder: e.holder().map(str::to_string),
            attribute: e.attribute().map(str::to_string),
            js_error: match e {
                LockError::Store(s) => s.js_id(),
                _ => None,
            },
            original_js_error: e.original().and_then(StoreError::js_id),
        }
    }
}

/// An event on a held lock (`error`, `danger` or `lost`), or on a pending acquisition
/// (`waiting`: it found the lock held; `lockId` 0 and its `request`).
#[napi(object)]
#[derive(Default)]
pub struct JsLockEvent {
    pub lock_id: f64,
    pub event: String,
    pub error: Option<NativeError>,
    /// `danger`, `error`: milliseconds of lease left (`error`: absent without a lease).
    pub remaining_ms: Option<f64>,
    /// `error`: the lease is at risk: no retry can mend the failure, or the lease has no more
    /// than the danger margin left.
    pub lease_at_risk: Option<bool>,
    /// `waiting`: the request number of the acquisition.
    pub request: Option<u32>,
    /// `waiting`: a report while the acquisition keeps waiting (about once a lease), not its
    /// first.
    pub progress: Option<bool>,
    /// `waiting`: the holder as the acquisition last saw it, when the answer carried the item.
    pub holder_owner: Option<String>,
    pub holder_fencing_token: Option<f64>,
    pub holder_lease_duration_ms: Option<f64>,
    pub holder_session: Option<String>,
    /// `waiting`: how long the acquisition has seen the holder's item unchanged.
    pub holder_unchanged_ms: Option<f64>,
    /// `lost`: the item may still carry the lock (its lease ran out, and nobody may have taken
    /// it), which stays known, so that a release can still free it.
    pub releasable: Option<bool>,
}

impl JsLockEvent {
    fn new(lock_id: u64, event: &str) -> Self {
        JsLockEvent {
            lock_id: lock_id as f64,
            event: event.into(),
            ..Default::default()
        }
    }
}

/// What a client hands JavaScript: its locks' events, its answers.
trait ToJs: Sized + 'static {
    /// As the thread-safe function takes it.
    type Args: JsValuesTupleIntoVec + 'static;
    fn args(self) -> Self::Args;
    /// As JavaScript values, in a callback of the loop (`uvloop::call`).
    #[cfg(all(unix, not(test)))]
    fn values(env: napi::sys::napi_env, v: Self) -> Result<Vec<napi::sys::napi_value>>;
}

/// Where a client's events or answers go: to its JavaScript function, called from a callback of
/// the thread's loop in the order they were sent, events before the answer that follows them
/// (`uvloop::call`), or through its thread-safe function (from other threads, or where
/// requests do not run on the loop).
struct ToJavaScript<T: ToJs> {
    tsfn: Arc<WeakHandler<T::Args>>,
    /// The function as `uvloop` keeps it.
    #[cfg(all(unix, not(test)))]
    direct: Option<uvloop::Kept>,
}

impl<T: ToJs> Clone for ToJavaScript<T> {
    fn clone(&self) -> Self {
        ToJavaScript {
            tsfn: self.tsfn.clone(),
            #[cfg(all(unix, not(test)))]
            direct: self.direct,
        }
    }
}

impl<T: ToJs> ToJavaScript<T> {
    fn new(f: Function<T::Args, ()>) -> Result<Self> {
        #[cfg(all(unix, not(test)))]
        let direct = uvloop::keep(f.raw());
        Ok(ToJavaScript {
            tsfn: Arc::new(weak_handler(f)?),
            #[cfg(all(unix, not(test)))]
            direct,
        })
    }

    fn send(&self, v: T) {
        #[cfg(all(unix, not(test)))]
        let v = match self.direct {
            Some(f) => match uvloop::call(f, v, T::values) {
                Ok(()) => return,
                Err(v) => v,
            },
            None => v,
        };
        self.tsfn.call(v.args(), ThreadsafeFunctionCallMode::NonBlocking);
    }
}

type Events = ToJavaScript<JsLockEvent>;
type Answers = ToJavaScript<Answer>;

impl ToJs for JsLockEvent {
    type Args = JsLockEvent;

    fn args(self) -> JsLockEvent {
        self
    }

    #[cfg(all(unix, not(test)))]
    fn values(env: napi::sys::napi_env, ev: JsLockEvent) -> Result<Vec<napi::sys::napi_value>> {
        // SAFETY: on the environment's thread, in a handle scope (`uvloop::call`).
        Ok(vec![unsafe { ToNapiValue::to_napi_value(env, ev)? }])
    }
}

/// Sends a client's lock events to the JavaScript environment that made the client.
struct JsEvents(Events);

impl EventSink for JsEvents {
    fn emit(&self, lock_id: u64, event: LockEvent) {
        let ev = match &event {
            LockEvent::Error(e, risk) => JsLockEvent {
                error: Some(e.into()),
                remaining_ms: Some(risk.remaining.as_secs_f64() * 1000.0),
                lease_at_risk: Some(risk.at_risk),
                ..JsLockEvent::new(lock_id, "error")
            },
            LockEvent::Danger { remaining_ms } => JsLockEvent {
                remaining_ms: Some(*remaining_ms as f64),
                ..JsLockEvent::new(lock_id, "danger")
            },
            LockEvent::Lost(reason) => {
                // A lock whose lease ran out may still be on the item, unclaimed: it stays
                // known until released (or until JavaScript lets go of it), so that its
                // release frees the item for the next waiter at once.
                let releasable = *reason == error::LostReason::LeaseExpired;
                if !releasable {
                    locks().remove(&lock_id);
                }
                JsLockEvent {
                    error: Some((&LockError::Lost(*reason)).into()),
                    releasable: Some(releasable),
                    ..JsLockEvent::new(lock_id, "lost")
                }
            }
        };
        self.0.send(ev);
    }
}

/// Sends a `waiting` event for acquisition `request` when it first finds the lock held,
/// and then about once per `period` while it waits, naming the holder it saw.
fn tell_waiting(cancel: &Cancel, period: std::time::Duration, events: Events, request: u32) {
    cancel.on_wait(period, move |holder, progress| {
        let holder = holder.unwrap_or_default();
        let ev = JsLockEvent {
            request: Some(request),
            progress: Some(progress),
            holder_owner: holder.owner,
            holder_fencing_token: holder.fencing_token.map(|t| t as f64),
            holder_lease_duration_ms: holder.lease_duration_ms.map(|l| l as f64),
            holder_session: holder.session,
            holder_unchanged_ms: Some(holder.unchanged.as_secs_f64() * 1000.0),
            ..JsLockEvent::new(0, "waiting")
        };
        events.send(ev);
    });
}

/// A JavaScript function callable from any thread, which does not keep Node alive.
type WeakHandler<T, R = ()> = ThreadsafeFunction<T, R, T, Status, false, true>;

fn weak_handler<T: JsValuesTupleIntoVec + 'static, R: FromNapiValue>(f: Function<T, R>) -> Result<WeakHandler<T, R>> {
    f.build_threadsafe_function::<T>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()
}

fn parse_kind(kind: &str) -> Result<Kind> {
    match kind {
        "FailClosed" => Ok(Kind::FailClosed),
        "FailOpen" => Ok(Kind::FailOpen),
        "Fifo" => Ok(Kind::Fifo),
        _ => Err(Error::from_reason(format!("unknown lock kind {kind}"))),
    }
}

/// A validated configuration, with defaults applied by `index.js`.
#[napi(object)]
pub struct NativeOptions {
    /// `FailClosed`, `FailOpen` or `Fifo`.
    pub kind: String,
    pub lock_table: String,
    pub partition_key: String,
    pub sort_key: Option<String>,
    pub owner: String,
    /// Retries after the lock is found held (default 1).
    pub retry_count: Option<f64>,
    /// FailClosed: ms between attempts.
    pub acquire_period_ms: Option<f64>,
    /// FailOpen: the lease in ms.
    pub lease_duration_ms: Option<f64>,
    /// FailOpen: ms between heartbeats; none without it. Fifo: default lease/3.
    pub heartbeat_period_ms: Option<f64>,
    pub trust_local_time: Option<bool>,
    /// ms between re-reads of a held lock by the first waiter in line (default 10, or lease/4
    /// when shorter).
    pub reread_period_ms: Option<f64>,
    /// Longest wait for one DynamoDB answer, in ms (default 5000).
    pub request_timeout_ms: Option<f64>,
    /// FailOpen: `danger` is emitted when this many ms of lease are left (default lease/3).
    pub danger_margin_ms: Option<f64>,
    /// FailOpen: cap on heartbeat requests per second for this client (default: none).
    pub max_heartbeats_per_second: Option<f64>,
    /// The Number attribute DynamoDB's TTL reads (Unix seconds). FailClosed/FailOpen: written
    /// with every write of a lock item when set (default: none). Fifo: written on queue
    /// entries (default `ttl`).
    pub ttl_attribute: Option<String>,
    /// With `ttlAttribute`: FailClosed, seconds after its last write that an item may be
    /// deleted (required); FailOpen, seconds past the lease or the release (default 3600).
    pub ttl_seconds: Option<f64>,
    /// FailOpen: hold every lock through one session of the client, renewed every heartbeat
    /// period, instead of heartbeating each lock.
    pub session: Option<bool>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// PEM certificates trusted instead of the system's roots (`dynamodb.caBundle`).
    pub ca_bundle: Option<Buffer>,
}

/// A lock id value: exactly one of `s`, `n` (decimal text), `b`.
#[napi(object)]
pub struct KeyInput {
    pub s: Option<String>,
    pub n: Option<String>,
    pub b: Option<Buffer>,
}

/// An item's key as JavaScript gives it.
fn native_key(partition: KeyInput, sort: Option<KeyInput>) -> Result<LockKey> {
    Ok(LockKey {
        partition: key_value(partition)?,
        sort: sort.map(key_value).transpose()?,
    })
}

fn key_value(k: KeyInput) -> Result<KeyValue> {
    match (k.s, k.n, k.b) {
        (Some(s), None, None) => Ok(KeyValue::S(s)),
        (None, Some(n), None) => Ok(KeyValue::N(n)),
        (None, None, Some(b)) => Ok(KeyValue::B(b.to_vec())),
        _ => Err(Error::from_reason("a key value needs exactly one of s, n, b")),
    }
}

/// An operator's deletion of an item nobody holds (`NativeClient::start_prune`).
#[napi(object)]
pub struct JsPrune {
    pub partition: KeyInput,
    pub sort: Option<KeyInput>,
    /// The version read: its `guid` (absent: none) and token.
    pub guid: Option<KeyInput>,
    pub fencing_token: Option<f64>,
    /// The Fifo ticket read (`ticketNext`; absent: none).
    pub ticket_next: Option<f64>,
    /// A semaphore's head that nobody holds permits of.
    pub semaphore: bool,
}

/// An operator's forced release of one lock (`NativeClient::start_force_release`).
#[napi(object)]
pub struct JsForceRelease {
    pub partition: KeyInput,
    pub sort: Option<KeyInput>,
    /// The lock item as the operator read it (DynamoDB JSON of GetItem's `Item`); absent: none.
    pub item: Option<String>,
    /// Free the lock at once instead of revoking it.
    pub now: bool,
}

/// Data kept with a lock: exactly one of `s` (a string), `b` (a Buffer).
#[napi(object)]
pub struct DataInput {
    pub s: Option<String>,
    pub b: Option<Buffer>,
}

fn lock_data(d: DataInput) -> Result<LockData> {
    match (d.s, d.b) {
        (Some(s), None) => Ok(LockData::S(s)),
        (None, Some(b)) => Ok(LockData::B(b.to_vec())),
        _ => Err(Error::from_reason("lock data needs exactly one of s, b")),
    }
}

/// A lock item as `getLock` reports it.
#[napi(object)]
pub struct JsLockInfo {
    pub owner: Option<String>,
    pub fencing_token: Option<f64>,
    pub lease_duration_ms: Option<f64>,
    pub released: bool,
    /// The holder's data: a string (`dataS`) or bytes (`dataB`).
    pub data_s: Option<String>,
    pub data_b: Option<Buffer>,
    /// The item carries the `guid` of a lock this client holds.
    pub held_by_this_client: bool,
    /// `lockWrittenUnixMs`: when this library last wrote the item (Unix ms, the writer's
    /// clock), for people; absent when unknown (the original's writes drop it).
    pub last_written_unix_ms: Option<f64>,
    /// `lockSession`: the session the lock is held through.
    pub session: Option<String>,
}

/// What an answer to `startAcquire`, `startRelease`, `startUpdate`, `startGetLock`,
/// `startAdmin` or `startSettle` carries besides its request number, lock id, fencing token
/// and `waited` (see `on_answer` of `NativeClient::new`); sent only when one of them is there.
#[napi(object)]
#[derive(Default)]
pub struct JsOutcome {
    /// An error to rethrow.
    pub error: Option<NativeError>,
    /// Fifo: the ids of the locks on every resource, which share `fencingToken`.
    pub lock_ids: Option<Vec<f64>>,
    /// `startGetLock`: the item, absent when there is none.
    pub info: Option<JsLockInfo>,
    /// `startAdmin`: the response body (JSON text).
    pub body: Option<String>,
}

impl JsOutcome {
    fn is_empty(&self) -> bool {
        self.error.is_none() && self.lock_ids.is_none() && self.info.is_none() && self.body.is_none()
    }
}

/// The answer to request `request`, as JavaScript receives it: the arguments of `on_answer`.
#[derive(Default)]
struct Answer {
    request: u32,
    /// An acquisition: the (first) lock's id and fencing token.
    lock_id: Option<f64>,
    fencing_token: Option<f64>,
    /// An acquisition: it found the lock held at some point (it waited, or gave up).
    waited: Option<bool>,
    rest: JsOutcome,
}

/// `on_answer`'s arguments: request number, lock id, fencing token, `waited`, and the rest
/// (`JsOutcome`), each `null` when absent. Plain values cost far less to hand to JavaScript
/// than an object with named properties, which every answer would otherwise be.
type AnswerArgs = FnArgs<(u32, Option<f64>, Option<f64>, Option<bool>, Option<JsOutcome>)>;

impl Answer {
    fn done(request: u32, error: Option<&LockError>) -> Self {
        Answer {
            request,
            rest: JsOutcome {
                error: error.map(Into::into),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[cfg(all(unix, not(test)))]
    fn js(self, env: napi::sys::napi_env) -> Result<Vec<napi::sys::napi_value>> {
        let a = self;
        let rest = (!a.rest.is_empty()).then_some(a.rest);
        // SAFETY: on the environment's thread, in a handle scope (`uvloop::call`).
        unsafe {
            Ok(vec![
                ToNapiValue::to_napi_value(env, a.request)?,
                ToNapiValue::to_napi_value(env, a.lock_id)?,
                ToNapiValue::to_napi_value(env, a.fencing_token)?,
                ToNapiValue::to_napi_value(env, a.waited)?,
                ToNapiValue::to_napi_value(env, rest)?,
            ])
        }
    }
}

impl ToJs for Answer {
    type Args = AnswerArgs;

    fn args(self) -> AnswerArgs {
        let rest = (!self.rest.is_empty()).then_some(self.rest);
        (self.request, self.lock_id, self.fencing_token, self.waited, rest).into()
    }

    /// `args`, as JavaScript values (an internal error, should they not be made).
    #[cfg(all(unix, not(test)))]
    fn values(env: napi::sys::napi_env, a: Answer) -> Result<Vec<napi::sys::napi_value>> {
        let request = a.request;
        a.js(env).or_else(|_| {
            let e = LockError::Internal("the answer could not be made a JavaScript value".into());
            Answer::done(request, Some(&e)).js(env)
        })
    }
}

/// Runs `work` on the calling thread's event loop (`uvloop`; on the runtime where there is
/// none) and sends its answer through `answers`; a panic is answered as an internal error, so
/// that no request is left without an answer.
/// The task is one of `tasks`, which `close()` waits for.
fn answer<F>(answers: &Answers, tasks: &tokio_util::task::TaskTracker, request: u32, work: F)
where
    F: std::future::Future<Output = Answer> + Send + 'static,
{
    use futures_util::FutureExt;
    let answers = answers.clone();
    // On the heap at once: the task then holds a pointer, not the request's whole state
    // machine, which would otherwise be copied again as it is wrapped, spawned and finished.
    let work = Box::pin(work);
    let task = tasks.track_future(async move {
        let outcome = std::panic::AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                Answer::done(
                    request,
                    Some(&LockError::Internal("the request's task panicked".into())),
                )
            });
        answers.send(outcome);
    });
    // On the loop of the JavaScript thread that asked, where it has one (`uvloop`).
    #[cfg(all(unix, not(test)))]
    let Err(task) = uvloop::spawn(Box::pin(task)) else {
        return;
    };
    napi::bindgen_prelude::spawn(task);
}

fn ms(v: Option<f64>) -> Option<Duration> {
    v.filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| Duration::from_millis(v as u64))
}

/// `client` closes without releasing: undos of writes of unknown outcome make their last
/// round now, and its held locks known to JavaScript (taken out of the registry when
/// `forget`) are abandoned as the client machine says (`lock::Shared::close`), which returns
/// those it abandoned.
fn closing(client: &Client, forget: bool) -> Vec<Arc<HeldLock>> {
    client.closing.cancel();
    let mine = |l: &Arc<HeldLock>| Arc::ptr_eq(&l.client, &client.shared);
    let held = match forget {
        true => locks().extract_if(|_, l| mine(l)).map(|(_, l)| l).collect(),
        false => locks().values().filter(|l| mine(l)).cloned().collect(),
    };
    client.shared.close(held)
}

/// The answer to acquisition `request`: its locks, or its error; and whether it found the
/// lock held at some point. The first lock's id and token; `several` (Fifo's resources):
/// every lock's id too. The locks are made known to JavaScript unless their acquisition was
/// cancelled (an `AbortSignal`, `close()`, the end of the environment) before it could: then
/// they are released, and the acquisition ends with `Aborted`. Checked with the registry
/// locked, so that a cancellation either comes first or finds the locks there to abandon.
async fn acquired(
    request: u32,
    result: std::result::Result<Vec<Arc<HeldLock>>, LockError>,
    several: bool,
    cancel: &Cancel,
) -> Answer {
    let outcome = match result {
        Ok(held) => {
            let mut registry = locks();
            if cancel.is_cancelled() {
                drop(registry);
                for lock in held {
                    // Best effort: the release retries through transient faults on its own.
                    let _ = lock.release().await;
                }
                Answer::done(request, Some(&LockError::Aborted))
            } else {
                registry.extend(held.iter().map(|l| (l.id, l.clone())));
                Answer {
                    lock_id: held.first().map(|l| l.id as f64),
                    fencing_token: held.first().and_then(|l| l.fencing_token).map(|t| t as f64),
                    rest: JsOutcome {
                        lock_ids: several.then(|| held.iter().map(|l| l.id as f64).collect()),
                        ..Default::default()
                    },
                    ..Answer::done(request, None)
                }
            }
        }
        Err(e) => Answer::done(request, Some(&e)),
    };
    Answer {
        waited: Some(cancel.waited()),
        ..outcome
    }
}

/// Every `guid` the lock `key` of `client` may carry on the item now (none if this client
/// holds no such lock, or it is lost or released).
fn held_guids(client: &Arc<Client>, key: &LockKey) -> Vec<item::Guid> {
    let held: Vec<Arc<HeldLock>> = locks()
        .values()
        .filter(|l| Arc::ptr_eq(&l.client, &client.shared) && l.key == *key)
        .cloned()
        .collect();
    held.iter()
        .flat_map(|l| l.client.machine().guids_on_item(l.id))
        .collect()
}

/// `getLock`: one consistent read of the item, and whether it is held by this client.
async fn lock_info(client: &Arc<Client>, key: &LockKey) -> std::result::Result<Option<JsLockInfo>, LockError> {
    // A heartbeat may rotate the guid while the read is in flight: both sides of it count.
    let mut guids = held_guids(client, key);
    let Some(r) = client.read(key).await? else {
        return Ok(None);
    };
    if let Some(refused) = client.shared.fifo.names.refusal(key, &r) {
        return Err(refused);
    }
    guids.extend(held_guids(client, key));
    let kind = client.settings.protocol.kind;
    let released = reported_released(kind, &r);
    let held_by_this_client = held_by(kind, &r, &guids);
    let (data_s, data_b) = match r.data.map(|d| *d) {
        Some(LockData::S(s)) => (Some(s), None),
        Some(LockData::B(b)) => (None, Some(b.into())),
        None => (None, None),
    };
    Ok(Some(JsLockInfo {
        held_by_this_client,
        owner: r.owner,
        fencing_token: r.fencing_token.map(|t| t as f64),
        lease_duration_ms: r.lease_duration_ms.map(|l| l as f64),
        released,
        data_s,
        data_b,
        last_written_unix_ms: r.lock_written_unix_ms.map(|t| t as f64),
        session: r.session,
    }))
}

/// A client's settings from its options (what validation let through); the core applies
/// the defaults of those not given (`settings::Lock::given`).
fn settings(kind: Kind, o: &NativeOptions) -> Settings {
    let given = core_settings::Given {
        // Validation allows any safe integer; past u32 it is as good as unbounded.
        retry_count: o
            .retry_count
            .filter(|r| r.is_finite() && *r >= 0.0)
            .map(|r| r.min(u32::MAX as f64) as u32),
        acquire_period: ms(o.acquire_period_ms),
        lease_duration_ms: o.lease_duration_ms.map(|l| l.max(0.0) as u64),
        heartbeat_period: ms(o.heartbeat_period_ms),
        trust_local_time: o.trust_local_time,
        reread: ms(o.reread_period_ms),
        request_timeout: ms(o.request_timeout_ms),
        danger_margin: ms(o.danger_margin_ms),
    };
    let seconds = o.ttl_seconds.filter(|t| t.is_finite() && *t >= 0.0).map(|t| t as u64);
    Settings {
        protocol: core_settings::Lock::given(kind, &given),
        session: kind == Kind::FailOpen && o.session.unwrap_or(false),
        ttl: (o.ttl_attribute.clone())
            .zip(core_settings::ttl_seconds(kind, seconds))
            .map(|(attribute, seconds)| core_settings::Expiry { attribute, seconds }),
        ..Settings::new(kind, o.owner.clone())
    }
}

/// The credentials a client signs with: those of the JavaScript provider `js` when given,
/// else the keys in its options, else none (the store finds its own).
fn credentials_of(
    js: Option<Function<(), Promise<js_credentials::JsCredentials>>>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    session_token: Option<String>,
) -> Result<Option<SharedCredentialsProvider>> {
    let js_provider = js.map(weak_handler).transpose()?;
    Ok(match (access_key_id, secret_access_key, js_provider) {
        (_, _, Some(resolve)) => Some(SharedCredentialsProvider::new(js_credentials::JsCredentialsProvider {
            resolve: Arc::new(resolve),
        })),
        (Some(ak), Some(sk), None) => Some(SharedCredentialsProvider::new(Credentials::new(
            ak,
            sk,
            session_token,
            None,
            "dynamodb-lock-native",
        ))),
        _ => None,
    })
}

/// The client's registry of Fifo queues in `table`; a Fifo client's `ttl_attribute` names
/// the attribute its queue entries expire by.
fn queues_of(kind: Kind, ttl_attribute: Option<String>, table: &TableSpec) -> queues::Queues {
    queues::Queues::new(
        match kind {
            Kind::Fifo => ttl_attribute.unwrap_or_else(|| core_settings::FIFO_TTL_ATTRIBUTE.into()),
            _ => core_settings::FIFO_TTL_ATTRIBUTE.into(),
        },
        queues::TableNames {
            table: table.name.clone(),
            partition_key: table.partition_key.clone(),
            sort_key: table.sort_key.clone().unwrap_or_default(),
        },
    )
}

/// Longest wait for one answer to a table administration request.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A configured FailClosed, FailOpen or Fifo client.
#[napi]
pub struct NativeClient {
    inner: Arc<Client>,
    /// The same store, for table administration requests.
    admin: Arc<HttpStore>,
    /// One channel for every answer, to the environment that made the client: no
    /// thread-safe function per request (each would be a libuv handle to open and close, and
    /// a lock both threads contend for).
    answers: Answers,
    /// Where lock events go; also where a pending acquisition says it waits.
    events: Events,
    cancels: Arc<Cancels>,
}

impl Drop for NativeClient {
    fn drop(&mut self) {
        #[cfg(all(unix, not(test)))]
        for f in [self.answers.direct, self.events.direct].into_iter().flatten() {
            uvloop::forget(f);
        }
    }
}

#[napi]
impl NativeClient {
    /// `credentials`, when given, is called for credentials whenever the cached ones near
    /// expiry (an AWS SDK for JavaScript client's provider). `on_event` receives the events of
    /// this client's locks, `on_answer` the answers to its requests (its arguments: the request
    /// number, the lock id, the fencing token, `waited`, and the rest, a `JsOutcome`, each null
    /// when absent); neither keeps Node alive.
    #[napi(constructor, catch_unwind)]
    #[allow(clippy::type_complexity)]
    pub fn new(
        env: Env,
        o: NativeOptions,
        credentials: Option<Function<(), Promise<js_credentials::JsCredentials>>>,
        on_event: Function<JsLockEvent, ()>,
        on_answer: Function<FnArgs<(u32, Option<f64>, Option<f64>, Option<bool>, Option<JsOutcome>)>, ()>,
        object_call: Option<Function<FnArgs<(String, store::object::Value)>, Promise<store::object::ObjectReply>>>,
    ) -> Result<Self> {
        let kind = parse_kind(&o.kind)?;
        #[cfg(all(unix, not(test)))]
        uvloop::init(&env);
        let mut s = settings(kind, &o);
        let credentials = credentials_of(credentials, o.access_key_id, o.secret_access_key, o.session_token)?;
        let table = TableSpec {
            name: o.lock_table,
            partition_key: o.partition_key,
            sort_key: o.sort_key,
        };
        let queues = queues_of(kind, o.ttl_attribute, &table);
        let stats = s.stats.clone();
        // The store of a user's `dynamodb` object, when given one: its own get/put/delete
        // carry the original's requests (and the client then sends those).
        s.original_requests = object_call.is_some();
        let object_store = match object_call {
            Some(f) => Some(store::object::ObjectStore::new(
                weak_handler(f)?,
                table.clone(),
                stats.clone(),
            )),
            None => None,
        };
        let store = HttpStore::new(
            table,
            HttpOptions {
                region: o.region,
                endpoint: o.endpoint,
                credentials,
                connect_timeout: None,
                ca_bundle: o.ca_bundle.map(|b| b.to_vec()),
            },
        )
        .with_stats(stats);
        let store = Arc::new(store);
        let protocol_store: Arc<dyn store::Store> = match object_store {
            Some(o) => Arc::new(o),
            None => store.clone(),
        };
        let events = Events::new(on_event)?;
        let inner = Arc::new(Client::new(
            protocol_store,
            s,
            Arc::new(JsEvents(events.clone())),
            // The cap on heartbeats started per second (`maxHeartbeatsPerSecond`), if any.
            LazyHeartbeats::new(
                (o.max_heartbeats_per_second.filter(|r| r.is_finite() && *r >= 1.0))
                    .map(|r| r.min(u32::MAX as f64) as u32),
            ),
            queues,
        ));
        let cancels: Arc<Cancels> = Default::default();
        // The hook runs when this environment ends (a worker thread, or the process): its
        // pending acquisitions are cancelled (a lock one of them takes meanwhile is released,
        // since nobody is left to hold it) and its held locks abandoned and forgotten, since
        // nothing will release them or hear their events.
        env.add_env_cleanup_hook((Arc::downgrade(&inner), cancels.clone()), |(client, cancels)| {
            cancels.close();
            if let Some(c) = client.upgrade() {
                closing(&c, true);
            }
        })?;
        Ok(NativeClient {
            inner,
            admin: store,
            answers: Answers::new(on_answer)?,
            events,
            cancels,
        })
    }

    /// Starts acquiring a lock; the answer carries `request` and the lock's id and fencing
    /// token, or an error to rethrow. `cancel_id` names the acquisition for
    /// `cancelAcquisition`; `data` is stored with the lock; `untilAborted` (FailOpen): wait
    /// until the lock is taken or the acquisition cancelled, whatever `retryCount` says. Throws
    /// at once only for an invalid key.
    #[napi(catch_unwind)]
    pub fn start_acquire(
        &self,
        request: u32,
        partition: KeyInput,
        sort: Option<KeyInput>,
        cancel_id: Option<u32>,
        data: Option<DataInput>,
        until_aborted: Option<bool>,
    ) -> Result<()> {
        let key = LockKey {
            partition: key_value(partition)?,
            sort: sort.map(key_value).transpose()?,
        };
        let data = data.map(lock_data).transpose()?;
        // The local line's turns follow the order of the calls, not of the tasks' first polls.
        let place = self.inner.join(&key);
        let until_aborted = until_aborted.unwrap_or(false);
        self.acquisition(request, cancel_id, false, move |client, cancel| async move {
            let taken = client.acquire_joined(key, place, data.as_ref(), until_aborted, &cancel);
            taken.await.map(|lock| vec![lock])
        });
        Ok(())
    }

    /// Fifo: starts acquiring every resource in `resources` with one ticket. `waitMs`: how
    /// long to wait for the turn (0: fail at once if anyone is ahead; `Infinity`: without
    /// end). The answer carries the locks' ids in `lockIds`.
    #[napi(catch_unwind)]
    pub fn start_acquire_fifo(
        &self,
        request: u32,
        resources: Vec<KeyInput>,
        wait_ms: f64,
        cancel_id: Option<u32>,
        limit: Option<f64>,
        permits: Option<f64>,
    ) -> Result<()> {
        if self.inner.settings.protocol.kind != Kind::Fifo {
            return Err(Error::from_reason("startAcquireFifo needs a Fifo client"));
        }
        let resources = resources.into_iter().map(key_value).collect::<Result<Vec<_>>>()?;
        // A semaphore's: `permits` of the `limit` its resource counts (validated in lib/).
        let sem = match (limit, permits) {
            (Some(limit), Some(permits)) if limit >= 1.0 && permits >= 1.0 && permits <= limit => {
                Some(dynamodb_lock_core::fifo::Sem {
                    limit: limit as u64,
                    permits: permits as u64,
                })
            }
            (None, None) => None,
            _ => {
                return Err(Error::from_reason(
                    "startAcquireFifo: permits must be from 1 to the limit",
                ))
            }
        };
        let wait = (wait_ms.is_finite() && wait_ms >= 0.0).then(|| Duration::from_millis(wait_ms as u64));
        self.acquisition(request, cancel_id, true, move |client, cancel| async move {
            fifo::acquire(&client.shared, resources, sem, wait, &cancel).await
        });
        Ok(())
    }

    /// Runs acquisition `work` as request `request`: cancellable under `cancel_id`, telling
    /// its waits, and answered with the locks it took (registered for JavaScript) or its error
    /// (`acquired`; `several`: every lock's id too).
    fn acquisition<F, Fut>(&self, request: u32, cancel_id: Option<u32>, several: bool, work: F)
    where
        F: FnOnce(Arc<Client>, Arc<Cancel>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = std::result::Result<Vec<Arc<HeldLock>>, LockError>> + Send,
    {
        let client = self.inner.clone();
        let cancels = self.cancels.clone();
        let events = self.events.clone();
        answer(&self.answers, &self.inner.tasks, request, async move {
            let (id, cancel) = cancels.register(cancel_id);
            let period = client.settings.protocol.waiting_report_period();
            tell_waiting(&cancel, period, events, request);
            let result = work(client, cancel.clone()).await;
            let outcome = acquired(request, result, several, &cancel).await;
            cancels.forget(id);
            outcome
        });
    }

    /// Starts releasing a held lock; the answer carries `request` and an error to rethrow,
    /// if any. `strict` (`close({ releaseLocks: true })`, whose outcomes say what was freed):
    /// a FailOpen or Fifo lock that another holder had taken, or that is lost and forgotten,
    /// fails with `FailedToReleaseLock`, as a FailClosed one does; otherwise that is quiet, as
    /// in the original, except for a lock held through a session whose item was changed
    /// behind its back while the lock was not lost.
    #[napi(catch_unwind)]
    pub fn start_release(&self, request: u32, lock_id: f64, strict: Option<bool>) {
        let id = lock_id as u64;
        let kind = self.inner.settings.protocol.kind;
        let strict = strict.unwrap_or(false);
        answer(&self.answers, &self.inner.tasks, request, async move {
            let lock = locks().get(&id).cloned();
            let result = match lock {
                Some(lock) => {
                    // Taken before the release leaves the session (the core's judgement).
                    let behind_back = lock.client.machine().through_live_session(lock.id);
                    let r = lock.release().await;
                    // Released, or not ours to release: either way nothing is left to retry.
                    if matches!(r, Ok(_) | Err(LockError::FailedToReleaseLock { .. })) {
                        locks().remove(&id);
                    }
                    match r {
                        Ok(false) if nothing_freed_fails(kind, strict, Some(behind_back)) => {
                            Err(LockError::not_released())
                        }
                        r => r.map(drop),
                    }
                }
                // Released before, or lost: as the original, quiet for FailOpen.
                None if nothing_freed_fails(kind, strict, None) => Err(LockError::not_released()),
                None => Ok(()),
            };
            Answer::done(request, result.err().as_ref())
        });
    }

    /// Starts writing new data for a held lock (`lock.update({ data })`; `None` removes it);
    /// the answer carries `request` and an error to rethrow, if any (`LockLost` when the lock
    /// is no longer ours).
    #[napi(catch_unwind)]
    pub fn start_update(&self, request: u32, lock_id: f64, data: Option<DataInput>) -> Result<()> {
        let id = lock_id as u64;
        let data = data.map(lock_data).transpose()?;
        answer(&self.answers, &self.inner.tasks, request, async move {
            let lock = locks().get(&id).cloned();
            let result = match lock {
                Some(lock) => lock.update_data(data).await,
                None => Err(LockError::Lost(error::LostReason::NotOwner)),
            };
            Answer::done(request, result.err().as_ref())
        });
        Ok(())
    }

    /// Starts reading a lock item (`getLock`): one consistent read, no write. The answer
    /// carries `info`, absent when there is no item. Fifo: `partition` is the resource.
    #[napi(catch_unwind)]
    pub fn start_get_lock(&self, request: u32, partition: KeyInput, sort: Option<KeyInput>) -> Result<()> {
        let partition = key_value(partition)?;
        let key = match self.inner.settings.protocol.kind {
            Kind::Fifo => fifo::head_key(&partition),
            _ => LockKey {
                partition,
                sort: sort.map(key_value).transpose()?,
            },
        };
        let client = self.inner.clone();
        answer(&self.answers, &self.inner.tasks, request, async move {
            match lock_info(&client, &key).await {
                Ok(info) => Answer {
                    rest: JsOutcome {
                        info,
                        ..Default::default()
                    },
                    ..Answer::done(request, None)
                },
                // Told as an acquisition tells it: the table's key and the id's types.
                Err(e) if client.settings.protocol.kind != Kind::Fifo => {
                    Answer::done(request, Some(&client.explain_keys(e, &key)))
                }
                Err(e) => Answer::done(request, Some(&e)),
            }
        });
        Ok(())
    }

    /// Starts one table administration request (`operation`, e.g. `DescribeTable`, with its
    /// JSON `body`) on this client's connection and credentials; the answer carries the
    /// response body, or the error with its AWS name. It is not one of the client's tasks
    /// that `close()` waits for: it neither takes nor frees a lock.
    #[napi(catch_unwind)]
    pub fn start_admin(&self, request: u32, operation: String, body: String) {
        let store = self.admin.clone();
        let untracked = tokio_util::task::TaskTracker::new();
        answer(&self.answers, &untracked, request, async move {
            let started = crate::clock::now();
            let table = debug::on().then(|| debug::table_name(&body)).flatten();
            let until = started + ADMIN_TIMEOUT;
            let reply = crate::store::until(until, store.call_raw(&operation, body))
                .await
                .unwrap_or_else(|_| Err(store.timed_out()));
            debug::log(|| {
                let outcome = match &reply {
                    Ok(_) => "done".to_string(),
                    Err(e) => format!("failed: {}: {}", e.code(), e.message()),
                };
                let on = table.map(|t| format!(" on \"{t}\"")).unwrap_or_default();
                format!(
                    "{operation}{on}: {outcome} in {}",
                    debug::ms(crate::clock::since(started))
                )
            });
            match reply {
                Ok(body) => Answer {
                    rest: JsOutcome {
                        body: Some(body),
                        ..Default::default()
                    },
                    ..Answer::done(request, None)
                },
                Err(e) => Answer::done(request, Some(&LockError::Store(e))),
            }
        });
    }

    /// An operator's deletion of an item nobody holds (`pruneLocks`), as the core's operation
    /// `op::Op::Prune`, only while the item is still at the version read. One attempt: an item
    /// that changed since fails with `ConditionalCheckFailedException`.
    #[napi(catch_unwind)]
    pub fn start_prune(&self, request: u32, prune: JsPrune) -> Result<()> {
        let key = native_key(prune.partition, prune.sort)?;
        let read = item::Version {
            guid: prune.guid.map(key_value).transpose()?.map(|g| match g {
                KeyValue::S(s) => item::GuidValue::S(s),
                KeyValue::N(n) => item::GuidValue::N(n),
                KeyValue::B(b) => item::GuidValue::B(b),
            }),
            fencing_token: prune.fencing_token.map(|t| t as u64),
        };
        let ticket_next = prune.ticket_next.map(|t| t as u64);
        let store = self.inner.store.clone();
        answer(&self.answers, &self.inner.tasks, request, async move {
            let op = op::Op::Prune {
                read: &read,
                ticket_next,
                permits: prune.semaphore,
            };
            let reply = tokio::time::timeout(ADMIN_TIMEOUT, store.apply(&key, &op))
                .await
                .unwrap_or_else(|_| Err(store.timed_out()));
            Answer::done(request, reply.err().map(LockError::Store).as_ref())
        });
        Ok(())
    }

    /// An operator's forced release of one lock of this client's table (`forceRelease`), from
    /// its item as the operator read it (`item`: DynamoDB JSON; absent: no item), as the core's
    /// machine says (`force::Force`: what it reads, in which order it writes, when it reads
    /// again). Answers with `body` (JSON text): `{"action", "freeAfterMs"}` after a revocation,
    /// `{"action", "endedSession"}` after a release or deletion at once, `{"action"}` for an
    /// absent or free lock, or `{"refused", "reads"}` (`force::Refusal`, and the most reads it
    /// makes).
    #[napi(catch_unwind)]
    pub fn start_force_release(&self, request: u32, force: JsForceRelease) -> Result<()> {
        let key = native_key(force.partition, force.sort)?;
        let read = force
            .item
            .as_deref()
            .map(store::decode_item)
            .transpose()
            .map_err(|e| Error::from_reason(e.message()))?;
        let client = self.inner.clone();
        answer(&self.answers, &self.inner.tasks, request, async move {
            // Each request's attempts share the bound of one administration request.
            let attempt = ADMIN_TIMEOUT / force::ATTEMPTS;
            let body = match client.force_release(&key, force.now, read.flatten(), attempt).await {
                Ok(forced) => {
                    let (action, more) = match forced {
                        force::Forced::Absent => ("absent", String::new()),
                        force::Forced::AlreadyFree => ("already-free", String::new()),
                        force::Forced::Revoked { free_after_ms } => {
                            ("revoked", format!(",\"freeAfterMs\":{free_after_ms}"))
                        }
                        force::Forced::Freed { deleted, ended_session } => (
                            if deleted { "deleted" } else { "released" },
                            format!(",\"endedSession\":{ended_session}"),
                        ),
                    };
                    format!("{{\"action\":\"{action}\"{more}}}")
                }
                Err(force::Failure::Refused(why)) => {
                    format!("{{\"refused\":\"{why:?}\",\"reads\":{}}}", force::TRIES)
                }
                Err(force::Failure::Failed(e)) => return Answer::done(request, Some(&LockError::Store(e))),
            };
            Answer {
                rest: JsOutcome {
                    body: Some(body),
                    ..Default::default()
                },
                ..Answer::done(request, None)
            }
        });
        Ok(())
    }

    /// Cancels a pending acquisition (an `AbortSignal` fired). Harmless if it already settled.
    #[napi(catch_unwind)]
    pub fn cancel_acquisition(&self, cancel_id: u32) {
        self.cancels.get(cancel_id as u64).cancel();
    }

    /// Forgets a cancellation that will never be used (the acquisition settled first).
    #[napi(catch_unwind)]
    pub fn forget_acquisition(&self, cancel_id: u32) {
        self.cancels.forget(cancel_id as u64);
    }

    /// Closes the client: every pending and later acquisition is cancelled (it answers
    /// `AbortError`, which JavaScript turns into `ClientClosed`). With `abandon`, the held
    /// locks' heartbeats stop and their leases lapse: each lock (and the session, if any) is
    /// held until its lease ends, then reported lost (`LeaseExpired`). Releases of held locks
    /// still work.
    #[napi(catch_unwind)]
    pub fn close(&self, abandon: bool) {
        self.cancels.close();
        self.inner.closing.cancel();
        if abandon {
            // A heartbeat under way ends at once (`hold::Hold::abandon` drops its write).
            let abandoned = closing(&self.inner, false);
            // The end of the leases is not the client's work: `close()` does not wait for
            // it, and, like every timer of the addon, it does not keep Node alive.
            napi::bindgen_prelude::spawn(HeldLock::lapse(abandoned));
        }
    }

    /// Answers `request` once every task of this client that may still speak to DynamoDB
    /// has ended (acquisitions that were cancelled, the releases of locks they took, undoing
    /// writes of unknown outcome, releases, heartbeats under way of abandoned locks), or after
    /// `closeWaitMs` whatever is left. For `close()`, after `close(abandon)`.
    #[napi(catch_unwind)]
    pub fn start_settle(&self, request: u32) {
        let tasks = self.inner.tasks.clone();
        let bound = self.inner.settings.protocol.close_wait();
        let answers = self.answers.clone();
        // Its locks are released by now (or abandoned): the session's item goes with them.
        let client = self.inner.clone();
        napi::bindgen_prelude::spawn(tasks.track_future(async move { client.sessions.end().await }));
        tasks.close();
        napi::bindgen_prelude::spawn(async move {
            let error = tokio::time::timeout(bound, tasks.wait())
                .await
                .err()
                .map(|_| LockError::Store(store::timed_out()));
            answers.send(Answer::done(request, error.as_ref()));
        });
    }

    /// The native counters: `requests[operation][outcome]` (in the order of
    /// `requestOperations` and `requestOutcomes`), `byPurpose` (in the order of
    /// `requestPurposes`), and the heartbeat attempts.
    #[napi(catch_unwind)]
    pub fn stats(&self) -> NativeStats {
        let s = &self.inner.settings.stats;
        NativeStats {
            request_operations: stats::OPERATIONS.iter().map(|o| o.to_string()).collect(),
            request_outcomes: stats::OUTCOMES.iter().map(|o| o.to_string()).collect(),
            requests: (0..stats::OPERATIONS.len())
                .map(|op| (0..stats::OUTCOMES.len()).map(|o| s.requests(op, o) as f64).collect())
                .collect(),
            request_purposes: PURPOSES.iter().map(|p| p.to_string()).collect(),
            by_purpose: (0..PURPOSES.len()).map(|p| s.purpose(p) as f64).collect(),
            throttles: s.throttles() as f64,
            heartbeats_sent: stats::Stats::get(&s.heartbeats_sent) as f64,
            heartbeats_retried: stats::Stats::get(&s.heartbeats_retried) as f64,
            heartbeats_failed: stats::Stats::get(&s.heartbeats_failed) as f64,
        }
    }
}

/// A snapshot of a client's native counters.
#[napi(object)]
pub struct NativeStats {
    pub request_operations: Vec<String>,
    pub request_outcomes: Vec<String>,
    /// Requests by operation, then by outcome.
    pub requests: Vec<Vec<f64>>,
    /// The purposes of `byPurpose`, in its order.
    pub request_purposes: Vec<String>,
    /// Requests the lock protocol sent, by purpose.
    pub by_purpose: Vec<f64>,
    pub throttles: f64,
    pub heartbeats_sent: f64,
    pub heartbeats_retried: f64,
    pub heartbeats_failed: f64,
}

/// Milliseconds left on a lock's lease at the moment of the call, by this process's monotonic
/// clock, counted from when its last successful write was sent; 0 once it is lost, lapsed or
/// released; `Infinity` for a held lock without a lease (FailClosed).
#[napi(catch_unwind)]
pub fn lease_remaining_ms(lock_id: f64) -> f64 {
    let lock = locks().get(&(lock_id as u64)).cloned();
    match lock.map(|l| l.lease_remaining(crate::clock::now())) {
        None => 0.0,
        Some(None) => f64::INFINITY,
        Some(Some(left)) => left.as_secs_f64() * 1000.0,
    }
}

/// What `lock.conditionCheck()` is made of: the lock item's table and key, and, for a
/// FailClosed lock, the `guid` it carries while this acquisition holds it.
#[napi(object)]
pub struct JsConditionTarget {
    pub table_name: String,
    pub partition_key: String,
    pub sort_key: Option<String>,
    pub partition: KeyInput,
    pub sort: Option<KeyInput>,
    pub guid: Option<Buffer>,
}

fn key_output(v: &KeyValue) -> KeyInput {
    let (s, n, b) = match v {
        KeyValue::S(s) => (Some(s.clone()), None, None),
        KeyValue::N(n) => (None, Some(n.clone()), None),
        KeyValue::B(b) => (None, None, Some(b.clone().into())),
    };
    KeyInput { s, n, b }
}

/// The item a held lock is, for a condition in the user's own transaction; `None` once the
/// lock is released or lost (or, for a FailClosed lock, while a release or update of it is
/// under way).
#[napi(catch_unwind)]
pub fn lock_condition_target(lock_id: f64) -> Option<JsConditionTarget> {
    let lock = locks().get(&(lock_id as u64)).cloned()?;
    let now = lock.client.clock.now();
    if !lock.client.machine().held(lock.id, now) {
        return None;
    }
    let guid = match lock.client.settings.protocol.kind {
        Kind::FailClosed if lock.writing() => return None,
        Kind::FailClosed => Some(Buffer::from(lock.state().guid.to_vec())),
        Kind::FailOpen | Kind::Fifo => None,
    };
    let names = &lock.client.fifo.names;
    Some(JsConditionTarget {
        table_name: names.table.clone(),
        partition_key: names.partition_key.clone(),
        sort_key: (!names.sort_key.is_empty()).then(|| names.sort_key.clone()),
        partition: key_output(&lock.key.partition),
        sort: lock.key.sort.as_ref().map(key_output),
        guid,
    })
}

/// JavaScript no longer refers to a lock: forget it unless the client machine says it is
/// held (a held lock keeps its heartbeats, as in the original library; one lost, released,
/// or abandoned by `close()` is done with).
#[napi(catch_unwind)]
pub fn forget_lock(lock_id: f64) {
    let id = lock_id as u64;
    let mut registry = locks();
    if registry
        .get(&id)
        .is_some_and(|l| !l.client.machine().held(l.id, l.client.clock.now()))
    {
        registry.remove(&id);
    }
}

/// Number of locks this process holds (for tests and benchmarks).
#[napi(catch_unwind)]
pub fn held_lock_count() -> u32 {
    locks().len() as u32
}

/// Turns the native debug log on or off (`NODE_DEBUG=dynamodb-lock-native`, read by
/// JavaScript as Node's `util.debuglog` reads it): requests, outcomes and the protocol's
/// pauses, on stderr.
#[napi(catch_unwind)]
pub fn set_debug(on: bool) {
    debug::set(on);
}

#[cfg(test)]
mod tests {
    use super::Cancels;

    #[test]
    fn closing_cancels_pending_acquisitions_and_every_later_one() {
        let cancels = Cancels::default();
        let (mine, pending) = cancels.register(None);
        let (theirs, signalled) = cancels.register(Some(7));
        assert_ne!(mine, theirs, "our numbers never meet JavaScript's");
        assert!(!pending.is_cancelled() && !signalled.is_cancelled());
        cancels.close();
        assert!(pending.is_cancelled() && signalled.is_cancelled());
        let (_, later) = cancels.register(None);
        assert!(
            later.is_cancelled(),
            "an acquisition that starts after close is cancelled"
        );
        cancels.forget(mine);
        cancels.forget(theirs);
    }
}
