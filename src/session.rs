//! Sessions (`session: true`): one item per client, renewed every heartbeat period, keeps all
//! of the client's FailOpen locks. A lock taken through the session names it (`lockSession`)
//! and writes nothing while it is held; its lease is the session's. The session's item is an
//! ordinary FailOpen lock of this client, on a key of its own (`item::session_key`), taken with
//! one write and heartbeated by the client's scheduler; its events (`"error"`, `"danger"`,
//! `"lost"`) are every member's. A waiter elsewhere ends a dead session before it takes any of
//! its locks (the core's `fail_open::Acquire`), so a session that is lost stays lost: the next
//! acquisition starts a new one.

use std::sync::Arc;

use crate::cancel::Cancel;
use crate::error::{LockError, StoreError};
use crate::fail_open;
use crate::item;
use crate::lock::{HeldLock, Session, Sessions, Shared};

impl Sessions {
    /// The client's live session, started if it has none (one write, a FailOpen take of a new
    /// key), or if the one it had is lost.
    /// `sorted`: the lock table has a sort key.
    pub async fn get(&self, c: &Shared, sorted: bool, cancel: &Cancel) -> Result<Arc<Session>, LockError> {
        let live = |s: &Option<Arc<Session>>| s.as_ref().filter(|s| s.alive()).cloned();
        if let Some(s) = live(&self.current()) {
            return Ok(s);
        }
        let _one = self.starting.lock().await;
        if let Some(s) = live(&self.current()) {
            return Ok(s);
        }
        let session = start(c, sorted, cancel).await?;
        *self.current() = Some(session.clone());
        Ok(session)
    }

    /// `close({ releaseLocks: true })`, after its locks are released: the session's item is
    /// released too, so that nothing is left to wait out.
    pub async fn end(&self) {
        let Some(s) = self.current().take() else { return };
        s.end();
        // Best effort: a session not released lapses after its lease.
        let _ = s.lock.release().await;
    }
}

/// A new session: its item taken under a fresh id, and heartbeated.
async fn start(c: &Shared, sorted: bool, cancel: &Cancel) -> Result<Arc<Session>, LockError> {
    let id = format!("{:032x}", rand::random::<u128>());
    let key = item::session_key(&id, sorted);
    let mut settings = c.settings.clone();
    // The session's item holds through its own lease, and is not itself held through a session.
    settings.session = false;
    // Its undos and its release at `close()` are the client's tasks; the client's own
    // scheduler heartbeats it, under its cap.
    let shared = Arc::new(c.part(settings, c.heartbeats.share()));
    let taken = fail_open::acquire(&shared, &key, None, false, None, cancel)
        .await
        .map_err(|e| explain(e, c, sorted))?;
    let lock = HeldLock::new(
        shared.clone(),
        key,
        taken.guid,
        Some(taken.fencing_token),
        taken.sent_at,
        None,
    )
    .shared();
    let session = Arc::new(Session::new(id, lock.clone()));
    shared.heartbeats.watch(&lock);
    Ok(session)
}

/// A session's item could not be written: when DynamoDB refused its key (a table whose key
/// attributes are not strings), said as the session's, with what it needs of the table; any
/// other refusal (a table name DynamoDB does not take, say) as DynamoDB said it.
fn explain(e: LockError, c: &Shared, sorted: bool) -> LockError {
    let refused_key = matches!(&e, LockError::Store(s) if crate::queues::refuses_keys(s.code(), s.message()));
    if !refused_key {
        return e;
    }
    let n = &c.fifo.names;
    let needs = match sorted {
        true => format!(
            "partition key \"{}\" and sort key \"{}\" to be of type S (strings)",
            n.partition_key, n.sort_key
        ),
        false => format!("partition key \"{}\" to be of type S (a string)", n.partition_key),
    };
    // Said without DynamoDB's words, which the acquisition would take for a refusal of the
    // lock's own key.
    LockError::Store(StoreError::Service {
        code: "ValidationException".into(),
        message: format!(
            "session: true needs the lock table \"{}\"'s {needs}: DynamoDB refused the key of the session's item (\"{}<id>\"{}). Use a table with string keys for sessions, or leave session off",
            n.table,
            item::SESSION_PREFIX,
            if sorted { ", sort value \"session\"" } else { "" },
        ),
        transient: false,
        maybe_applied: false,
    })
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
