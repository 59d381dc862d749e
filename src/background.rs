//! Carries a client's work that nobody waits for (`dynamodb_lock_core::background`: the undo
//! of an acquisition write whose outcome could not be read, the removal of Fifo queue entries
//! nobody waits for): sends the requests it hands out through the store, each bounded by its
//! timeout, and feeds back their answers and the clock. One task carries it while there is
//! any, as one of the client's tasks, which `close()` waits for; the client's close ends an
//! undo's pause, for one last round. It makes no protocol decision.

use std::sync::{Arc, Mutex, MutexGuard};

use dynamodb_lock_core::background::{self, Transmit};
use dynamodb_lock_core::undo::Undo;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use tokio::sync::Notify;

use crate::cancel::Cancel;
use crate::clock::Clock;
use crate::drive::{answer, send, within, Request, Target};
use crate::error::StoreError;
use crate::item::{Guid, LockKey, LockRecord, Version};
use crate::settings::Settings;
use crate::store::Store;

/// The write an undo removes: one of this package's requests, or the original's put (with
/// its fencing token) over a user's `dynamodb` object.
pub enum Undoing {
    Native(Guid),
    Original(Guid, u64),
}

/// A client's background work, and what carrying it needs.
pub struct Background {
    store: Arc<dyn Store>,
    settings: Settings,
    clock: Clock,
    closing: Arc<Cancel>,
    tasks: tokio_util::task::TaskTracker,
    work: Mutex<Work>,
    /// New work for the task that carries it.
    more: Notify,
}

struct Work {
    core: background::Background<LockRecord, LockKey>,
    /// A task carries the work.
    carried: bool,
}

impl Background {
    pub fn new(
        store: Arc<dyn Store>,
        settings: Settings,
        clock: Clock,
        closing: Arc<Cancel>,
        tasks: tokio_util::task::TaskTracker,
    ) -> Self {
        Background {
            store,
            settings,
            clock,
            closing,
            tasks,
            work: Mutex::new(Work {
                core: Default::default(),
                carried: false,
            }),
            more: Notify::new(),
        }
    }

    fn work(&self) -> MutexGuard<'_, Work> {
        self.work.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Undoes, in the background, the acquisition write of `what` on `key` whose outcome
    /// could not be read, so that no lock is left held by nobody (the core's `undo::Undo`:
    /// about a minute of rounds, then the lease or the TTL frees the item).
    pub fn undo(self: &Arc<Self>, key: &LockKey, what: Undoing) {
        let (s, env) = (self.settings.protocol, self.clock.env(false));
        let started = match what {
            Undoing::Native(guid) => Undo::start(s, guid, &env),
            Undoing::Original(guid, fencing_token) => Undo::original(s, guid, Some(fencing_token), &env),
        };
        self.add(|core| core.undo::<StoreError>(key.clone(), started, &env));
    }

    /// Sends `req` to `key` in the background, as hard as the client's policy allows, to its
    /// first answer (a request that needs no settling).
    pub fn once(self: &Arc<Self>, key: &LockKey, req: Request) {
        let (policy, env) = (self.settings.policy(), self.clock.env(false));
        self.add(|core| core.once(key.clone(), req, policy, &env));
    }

    /// Adds work, and has a task carry it if none does.
    fn add(self: &Arc<Self>, add: impl FnOnce(&mut background::Background<LockRecord, LockKey>)) {
        let mut w = self.work();
        add(&mut w.core);
        if std::mem::replace(&mut w.carried, true) {
            self.more.notify_one();
        } else {
            self.tasks.spawn(self.clone().carry());
        }
    }

    /// Carries the work until none is left.
    async fn carry(self: Arc<Self>) {
        let mut out = FuturesUnordered::new();
        loop {
            let closed = self.closing.is_cancelled();
            let wake = {
                let mut w = self.work();
                if closed {
                    w.core.close(&self.clock.env(true));
                }
                while let Some(t) = w.core.poll_transmit() {
                    out.push(self.send(t));
                }
                let wake = w.core.poll_timeout();
                if out.is_empty() && wake.is_none() {
                    w.carried = false;
                    return;
                }
                wake
            };
            let more = self.more.notified();
            tokio::select! {
                Some((id, a)) = out.next(), if !out.is_empty() => {
                    self.work().core.handle_reply(id, a, &self.clock.env(false));
                }
                _ = tokio::time::sleep_until(self.clock.base + wake.unwrap_or_default()), if wake.is_some() => {
                    self.work().core.handle_timeout(&self.clock.env(false));
                }
                _ = self.closing.cancelled(), if !closed => {}
                _ = more => {}
            }
        }
    }

    /// Sends request `t` as the operation it is, to its key; its number and answer.
    async fn send(
        &self,
        t: Transmit<Guid, Version, LockKey>,
    ) -> (u64, dynamodb_lock_core::request::Answer<LockRecord, StoreError>) {
        if let Some(purpose) = t.purpose {
            self.settings.stats.count_purpose(purpose);
        }
        let to = Target::item(&*self.store, &t.key, &self.settings);
        let at = self.clock.instant(t.timeout_at);
        (t.id, answer(within(&*self.store, at, send(&to, &t.req)).await))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use dynamodb_lock_core::undo::UNDO_PAUSE;

    use crate::cancel::Cancel;
    use crate::settings::Settings;
    use crate::store::memory::{Fault, MemoryStore};
    use crate::testkit::*;

    /// A FailClosed acquisition whose write landed unseen and could not be read back: its
    /// undo is the client's background work.
    async fn orphaned(store: &Arc<MemoryStore>, s: Settings) -> Arc<crate::client::Client> {
        let (c, _) = client(store, s);
        store.fault("put", Fault::ApplyThenFail(lost_response()));
        store.fault("get", Fault::Fail(lost_response()));
        let err = c.acquire(key("a"), &Cancel::default()).await.unwrap_err();
        assert_eq!(err.code(), "NetworkingError");
        c
    }

    #[tokio::test(start_paused = true)]
    async fn an_undo_pauses_between_failed_rounds_and_a_close_makes_its_last_round_at_once() {
        let store = Arc::new(MemoryStore::new(false));
        let mut s = closed_settings("me");
        s.protocol.max_attempts = 1;
        let attempts = s.protocol.release_attempts() as usize;
        for _ in 0..3 * attempts {
            store.fault("delete", Fault::Fail(lost_response()));
        }
        let c = orphaned(&store, s).await;
        // A round's attempts, backing off between them, take less than the pause.
        tokio::time::sleep(UNDO_PAUSE / 2).await;
        assert_eq!(store.count("delete"), attempts, "one round");
        tokio::time::sleep(UNDO_PAUSE).await;
        assert!(store.count("delete") < 2 * attempts, "the pause is not over");
        tokio::time::sleep(UNDO_PAUSE / 2).await;
        assert_eq!(store.count("delete"), 2 * attempts, "a second round after the pause");
        assert!(store.record(&key("a")).is_some(), "still there");
        store.clear_faults();
        let start = tokio::time::Instant::now();
        c.closing.cancel();
        c.tasks.close();
        c.tasks.wait().await;
        assert!(start.elapsed() < Duration::from_millis(10), "{:?}", start.elapsed());
        assert_eq!(store.count("delete"), 2 * attempts + 1, "one last round, at once");
        assert!(store.record(&key("a")).is_none(), "undone");
    }

    #[tokio::test(start_paused = true)]
    async fn undos_of_two_locks_run_side_by_side_and_the_carrying_task_ends_with_them() {
        let store = Arc::new(MemoryStore::new(false));
        let mut s = closed_settings("me");
        s.protocol.max_attempts = 1;
        let (c, _) = client(&store, s);
        for k in ["a", "b"] {
            store.fault("put", Fault::ApplyThenFail(lost_response()));
            store.fault("get", Fault::Fail(lost_response()));
            store.fault("delete", Fault::Delay(Duration::from_millis(50)));
            assert!(c.acquire(key(k), &Cancel::default()).await.is_err());
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(store.record(&key("a")).is_none() && store.record(&key("b")).is_none());
        assert_eq!(store.count("delete"), 2);
        c.tasks.close();
        let ended = tokio::time::timeout(Duration::from_millis(1), c.tasks.wait()).await;
        assert!(ended.is_ok(), "nothing left to carry");
    }
}
