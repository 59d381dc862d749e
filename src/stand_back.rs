//! The stand-back: locks this client released while others waited for them, from which its
//! next acquisition stands back for a moment.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::item::LockKey;

/// How many recently released locks a client remembers standing back from.
const STAND_BACK_KEYS: usize = 4096;

/// Locks this client released while others were waiting for them. A releaser that asks again
/// at once needs one request and wins nearly every time, while a waiter first has to re-read
/// and see the release. So after such a release this client's next acquisition of the same
/// lock stands back for as long as the core says a waiter may pause after waiting as long as
/// the lock was held (`Lock::stand_back`), and the waiter takes its turn. Waiters make
/// themselves known on the item (`lockWaitingUnixMs`, written when they start waiting and
/// renewed while they wait), which the release reads back; a holder that itself waited for
/// the lock knows anyway.
#[derive(Default)]
pub struct StandBack(Mutex<HashMap<LockKey, Instant>>);

impl StandBack {
    /// `key` was released while others waited: stand back from it for `pause`
    /// (`ending::Outcome::Released`).
    pub fn released(&self, key: &LockKey, pause: Duration) {
        let until = Instant::now() + pause;
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= STAND_BACK_KEYS {
            let now = Instant::now();
            m.retain(|_, t| *t > now);
        }
        if m.len() < STAND_BACK_KEYS {
            m.insert(key.clone(), until);
        }
    }

    /// Until when this client stands back from `key`, if it released it lately while others
    /// waited. Asking ends it.
    pub fn turn(&self, key: &LockKey) -> Option<Instant> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key)
    }
}
