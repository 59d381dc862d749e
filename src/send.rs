//! Sends one of the core's requests (`request::Req`) as the operation it is (`op::Op`), with
//! what the client's settings and the caller add to it (the holder's data, the session a lock
//! is held through, a semaphore's permits), bounded by its deadline, and gives its answer as
//! the machines take it. It makes no protocol decision.

use dynamodb_lock_core::op::{self, Op, OpenFields};
use dynamodb_lock_core::request::{answer_of, Adds, Answer, Req};
use tokio::time::Instant;

use crate::clock::unix_now_ms;
use crate::error::StoreError;
use crate::item::{self, Guid, LockData, LockKey, LockRecord, Version};
use crate::settings::Settings;
use crate::store::Store;

pub type Request = Req<Guid, Version>;

/// Permits of a semaphore held: the holder's attribute on its head is keyed by `key` (the
/// `guid` it was granted with), and holds `permits`.
#[derive(Clone, Debug)]
pub struct Permit {
    pub key: Guid,
    pub permits: u64,
}

/// Where a machine's requests go: one lock of one client.
pub struct Target<'a> {
    pub store: &'a dyn Store,
    pub key: &'a LockKey,
    pub settings: &'a Settings,
    /// The holder's data an acquisition writes.
    pub data: Option<&'a LockData>,
    /// The session an acquisition or hand-over holds the lock through (`None`: its own lease).
    pub session: Option<&'a str>,
    /// A semaphore's permits the lock is: its release removes the holder from the head, and
    /// the head read back is seen as the holder's (`permit_view`).
    pub permit: Option<&'a Permit>,
}

impl<'a> Target<'a> {
    /// The item at `key`, with nothing added to its requests: no data, no session, no
    /// permits.
    pub fn item(store: &'a dyn Store, key: &'a LockKey, settings: &'a Settings) -> Self {
        Target {
            store,
            key,
            settings,
            data: None,
            session: None,
            permit: None,
        }
    }
}

/// A request's answer, given up on at `at` (`None`: no timeout; a moment already past: at
/// once, without sending).
pub async fn within(
    store: &dyn Store,
    at: Option<Instant>,
    send: impl std::future::Future<Output = Result<op::Reply<LockRecord>, StoreError>>,
) -> Result<op::Reply<LockRecord>, StoreError> {
    match at {
        Some(at) if at > crate::clock::now() => crate::store::until(at, send)
            .await
            .unwrap_or_else(|_| Err(store.timed_out())),
        Some(_) => Err(store.timed_out()),
        None => send.await,
    }
}

/// A store's answer as the machines take it.
pub fn answer(r: Result<op::Reply<LockRecord>, StoreError>) -> Answer<LockRecord, StoreError> {
    match r {
        Ok(reply) => answer_of(reply),
        Err(StoreError::ConditionFailed { current }) => Answer::Refused(current.map(|c| c.map(|b| *b))),
        Err(e) if e.is_condition_failed() => Answer::Refused(None),
        Err(error) => Answer::Failed {
            transient: error.is_transient(),
            maybe_applied: error.maybe_applied(),
            error,
        },
    }
}

/// Sends one request as the operation it is, with what the client's settings add to it.
pub async fn send(to: &Target<'_>, req: &Request) -> Result<op::Reply<LockRecord>, StoreError> {
    let s = to.settings;
    let mut fields = OpenFields {
        data: to.data,
        ..s.open_fields()
    };
    if let Some(id) = to.session {
        fields = fields.in_session(id, unix_now_ms());
    }
    let adds = Adds {
        fields,
        ttl_released: s.ttl_released(),
    };
    let parts = req.parts(&adds);
    let op = req.op(&adds, &parts);
    if let Some(p) = to.permit {
        return send_permit(to, p, op).await;
    }
    match req.session() {
        // A waiter's read or end of the session a lock is held through: the session's item.
        Some(id) => to.store.apply(&item::session_key(id, to.key.sort.is_some()), &op).await,
        None => to.store.apply(to.key, &op).await,
    }
}

/// A held semaphore's request (`send`): its release removes the holder and gives its permits
/// back; a read sees the head as the holder's item (`op::permit_view`).
async fn send_permit(to: &Target<'_>, p: &Permit, op: Op<'_, LockRecord>) -> Result<op::Reply<LockRecord>, StoreError> {
    let op = op::permit_op(op, &p.key, p.permits)
        .map_err(|other| crate::store::not_supported(format!("{other:?} on a semaphore's permits")))?;
    let view = |r: Option<LockRecord>| op::permit_view(r, &p.key);
    match to.store.apply(to.key, &op).await {
        Ok(op::Reply::Before(r)) => Ok(op::Reply::Before(view(r))),
        Ok(op::Reply::Refused(r)) => Ok(op::Reply::Refused(view(r))),
        Err(StoreError::ConditionFailed { current }) => Err(StoreError::ConditionFailed {
            current: current.map(|c| view(c.map(|b| *b)).map(Box::new)),
        }),
        other => other,
    }
}
