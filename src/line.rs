//! Carries the client's local line and stand-back (`dynamodb_lock_core::local`, which decides
//! their order, patience, pauses, and which lock holds a line) to the tasks of its
//! acquisitions: a turn goes to the waiting task over a channel, and times are read from the
//! clock here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use dynamodb_lock_core::local::{self, Patience, Waiter};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::item::{Guid, LockKey};

/// What the next in line receives.
#[derive(Debug)]
pub enum Turn {
    /// The lock is already written as the receiver's: this `guid` and fencing token, with the
    /// lease counted from `sent_at`.
    Handed {
        guid: Guid,
        fencing_token: Option<u64>,
        sent_at: Instant,
        /// The id of the session the lock stays held through.
        session: Option<String>,
    },
    /// The receiver now speaks to DynamoDB for the line.
    Go,
}

/// A place in a line, or the head of a new one.
pub enum Place {
    /// Nobody of this client had the id: the caller leads the line.
    Head,
    Queued(InLine),
}

/// An acquisition waiting in a line, and where its turn comes.
pub struct InLine {
    id: Waiter,
    pub turn: oneshot::Receiver<Turn>,
}

struct Inner {
    local: local::Local<LockKey>,
    turns: HashMap<Waiter, oneshot::Sender<Turn>>,
}

/// Every line and stand-back of one client, by lock id.
pub struct Lines {
    clock: Clock,
    inner: Mutex<Inner>,
}

impl Lines {
    /// `patience`: how long a waiter waits for one holder (`Lock::line_patience`).
    pub fn new(clock: Clock, patience: Duration) -> Self {
        Lines {
            clock,
            inner: Mutex::new(Inner {
                local: local::Local::new(patience),
                turns: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the line of `key`, or starts it.
    pub fn join(&self, key: &LockKey) -> Place {
        let now = self.clock.now();
        let mut inner = self.lock();
        match inner.local.join(key, now) {
            local::Place::Head => Place::Head,
            local::Place::Queued(id) => {
                let (tx, rx) = oneshot::channel();
                inner.turns.insert(id, tx);
                Place::Queued(InLine { id, turn: rx })
            }
        }
    }

    /// Whether someone waits in the line of `key`.
    pub fn has_waiters(&self, key: &LockKey) -> bool {
        self.lock().local.has_waiters(key)
    }

    /// Whether the line of `key` exists.
    #[cfg(test)]
    pub fn has_line(&self, key: &LockKey) -> bool {
        self.lock().local.has_line(key)
    }

    /// What `w`'s patience says now, on the client's clock (giving up, it has left the line).
    pub fn patience(&self, key: &LockKey, w: &InLine) -> Patience {
        let now = self.clock.now();
        let mut inner = self.lock();
        let patience = inner.local.patience(key, w.id, now);
        if patience == Patience::GivesUp {
            inner.turns.remove(&w.id);
        }
        patience
    }

    /// Gives the next waiter that is still there `turn`; returns the turn back if nobody is
    /// left (the line is then gone when `Go` was meant, and kept for a handed lock, whose
    /// owner must release it).
    pub fn pass(&self, key: &LockKey, turn: Turn) -> Option<Turn> {
        self.pass_on(&mut self.lock(), key, turn)
    }

    fn pass_on(&self, inner: &mut Inner, key: &LockKey, mut turn: Turn) -> Option<Turn> {
        let now = self.clock.now();
        let handed = matches!(turn, Turn::Handed { .. });
        while let Some(w) = inner.local.next(key, now, handed) {
            // A waiter whose task is gone without quitting cannot take it: the next one may.
            if let Some(tx) = inner.turns.remove(&w) {
                match tx.send(turn) {
                    Ok(()) => return None,
                    Err(back) => turn = back,
                }
            }
        }
        Some(turn)
    }

    /// Lock `lock` holds the line of `key` (`local::Local::holds`).
    pub fn holds(&self, key: &LockKey, lock: u64) {
        self.lock().local.holds(key, lock);
    }

    /// `lock` (`None`: the acquisition with the turn, which took none) is done with `key` and
    /// nobody was handed it: if it held the line, the next waiter tries for itself, or the line
    /// ends (`local::Local::leaves`).
    pub fn leave(&self, key: &LockKey, lock: Option<u64>) {
        let mut inner = self.lock();
        if inner.local.leaves(key, lock) {
            let _ = self.pass_on(&mut inner, key, Turn::Go);
        }
    }

    /// Leaves the line without having had a turn. Returns `None` if the waiter was still
    /// queued; otherwise its turn had already been given, and the caller must deal with it.
    pub fn quit(&self, key: &LockKey, w: &mut InLine) -> Option<Turn> {
        {
            let mut inner = self.lock();
            if inner.local.quit(key, w.id) {
                inner.turns.remove(&w.id);
                return None;
            }
        }
        w.turn.try_recv().ok()
    }

    /// `key` was released while others waited: stand back from it for `pause`.
    pub fn released(&self, key: &LockKey, pause: Duration) {
        let now = self.clock.now();
        self.lock().local.released(key, now + pause, now);
    }

    /// Until when this client stands back from `key`. Asking ends it.
    pub fn stand_back(&self, key: &LockKey) -> Option<Instant> {
        self.lock().local.stand_back(key).map(|t| self.clock.base + t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::key;

    fn queued(lines: &Lines) -> InLine {
        match lines.join(&key("a")) {
            Place::Queued(w) => w,
            Place::Head => panic!("the line exists"),
        }
    }

    #[test]
    fn a_turn_goes_to_the_next_task_still_there() {
        let lines = Lines::new(Clock::start(), Duration::from_secs(1));
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let gone = queued(&lines);
        let mut next = queued(&lines);
        // A task dropped without quitting.
        drop(gone);
        lines.leave(&key("a"), None);
        assert!(matches!(next.turn.try_recv(), Ok(Turn::Go)));
        lines.leave(&key("a"), None);
        assert!(!lines.has_line(&key("a")), "the line ended");
    }

    #[test]
    fn a_handed_turn_nobody_takes_comes_back() {
        let lines = Lines::new(Clock::start(), Duration::from_secs(1));
        assert!(matches!(lines.join(&key("a")), Place::Head));
        drop(queued(&lines));
        let turn = Turn::Handed {
            guid: [0; 64],
            fencing_token: Some(2),
            sent_at: Instant::now(),
            session: None,
        };
        assert!(matches!(lines.pass(&key("a"), turn), Some(Turn::Handed { .. })));
        assert!(lines.has_line(&key("a")), "the line stays: its holder releases");
    }

    #[test]
    fn quitting_after_the_turn_was_given_returns_it() {
        let lines = Lines::new(Clock::start(), Duration::from_secs(1));
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let mut w = queued(&lines);
        lines.leave(&key("a"), None);
        assert!(matches!(lines.quit(&key("a"), &mut w), Some(Turn::Go)));
        assert!(matches!(lines.patience(&key("a"), &w), Patience::Turned));
    }
}
