//! The local line: acquisitions of one lock id by one client wait here, in arrival order,
//! while another acquisition of the same client is in progress or holds the lock. Only the
//! first of them speaks to DynamoDB; the others cost no request until their turn. A release
//! hands the lock to the next in line with one conditional write (`Turn::Handed`), or, when
//! it cannot, lets the next one try for itself (`Turn::Go`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tokio::sync::oneshot;
use tokio::time::Instant;

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

#[derive(Default)]
struct Line {
    waiters: VecDeque<(u64, oneshot::Sender<Turn>)>,
    /// When the current holder (or the acquisition in progress) got its turn: a waiter's
    /// patience is measured per holder.
    holder_since: Option<Instant>,
}

/// Every line of one client, by lock id. A line exists while an acquisition of its id is in
/// progress or a lock of that id is held by this client.
#[derive(Default)]
pub struct Lines {
    lines: Mutex<HashMap<LockKey, Line>>,
    next_waiter: std::sync::atomic::AtomicU64,
}

/// A place in a line, or the head of a new one.
pub enum Place {
    /// Nobody of this client had the id: the caller leads the line.
    Head,
    Queued(Waiter),
}

pub struct Waiter {
    id: u64,
    pub turn: oneshot::Receiver<Turn>,
}

impl Lines {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LockKey, Line>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the line of `key`, or starts it.
    pub fn join(&self, key: &LockKey) -> Place {
        let mut lines = self.lock();
        match lines.get_mut(key) {
            Some(line) => {
                let id = self.next_waiter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (tx, rx) = oneshot::channel();
                line.waiters.push_back((id, tx));
                Place::Queued(Waiter { id, turn: rx })
            }
            None => {
                lines.insert(
                    key.clone(),
                    Line {
                        waiters: VecDeque::new(),
                        holder_since: Some(Instant::now()),
                    },
                );
                Place::Head
            }
        }
    }

    /// Whether someone waits in the line of `key`.
    pub fn has_waiters(&self, key: &LockKey) -> bool {
        self.lock().get(key).is_some_and(|l| !l.waiters.is_empty())
    }

    /// When the line's current holder got its turn.
    pub fn holder_since(&self, key: &LockKey) -> Option<Instant> {
        self.lock().get(key).and_then(|l| l.holder_since)
    }

    /// Gives the next waiter that is still there the turn that `make` builds; returns the
    /// turn back if nobody is left (the line is then gone when `Go` was meant, and kept for a
    /// handed lock, whose owner must release it).
    pub fn pass(&self, key: &LockKey, turn: Turn) -> Option<Turn> {
        let mut lines = self.lock();
        let line = lines.get_mut(key)?;
        let mut turn = turn;
        while let Some((_, tx)) = line.waiters.pop_front() {
            match tx.send(turn) {
                Ok(()) => {
                    line.holder_since = Some(Instant::now());
                    return None;
                }
                Err(back) => turn = back,
            }
        }
        if matches!(turn, Turn::Go) {
            lines.remove(key);
        }
        Some(turn)
    }

    /// The line's holder is done with the lock and nobody was handed it: the next waiter
    /// tries for itself, or the line ends.
    pub fn leave(&self, key: &LockKey) {
        let _ = self.pass(key, Turn::Go);
    }

    /// Leaves the line without having had a turn. Returns `None` if the waiter was still
    /// queued; otherwise its turn had already been given, and the caller must deal with it.
    pub fn quit(&self, key: &LockKey, w: &mut Waiter) -> Option<Turn> {
        {
            let mut lines = self.lock();
            if let Some(line) = lines.get_mut(key) {
                if let Some(i) = line.waiters.iter().position(|(id, _)| *id == w.id) {
                    line.waiters.remove(i);
                    return None;
                }
            }
        }
        // Not queued any more: the turn was sent before we took the lock above.
        w.turn.try_recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::key;

    #[test]
    fn turns_go_in_arrival_order_and_skip_those_who_quit() {
        let lines = Lines::default();
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let Place::Queued(mut w1) = lines.join(&key("a")) else {
            panic!()
        };
        let Place::Queued(mut w2) = lines.join(&key("a")) else {
            panic!()
        };
        let Place::Queued(mut w3) = lines.join(&key("a")) else {
            panic!()
        };
        assert!(lines.quit(&key("a"), &mut w2).is_none(), "w2 leaves before its turn");
        lines.leave(&key("a"));
        assert!(matches!(w1.turn.try_recv(), Ok(Turn::Go)));
        assert!(w3.turn.try_recv().is_err(), "w3 waits for w1");
        drop(w1);
        lines.leave(&key("a"));
        assert!(matches!(w3.turn.try_recv(), Ok(Turn::Go)));
        assert!(lines.has_waiters(&key("a")) || lines.holder_since(&key("a")).is_some());
        lines.leave(&key("a"));
        assert!(lines.holder_since(&key("a")).is_none(), "the line ended");
        assert!(matches!(lines.join(&key("a")), Place::Head));
    }

    #[test]
    fn a_turn_nobody_takes_comes_back() {
        let lines = Lines::default();
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let Place::Queued(w) = lines.join(&key("a")) else {
            panic!()
        };
        drop(w);
        let back = lines.pass(
            &key("a"),
            Turn::Handed {
                guid: [0; 64],
                fencing_token: Some(2),
                sent_at: Instant::now(),
                session: None,
            },
        );
        assert!(matches!(back, Some(Turn::Handed { .. })));
        assert!(
            lines.holder_since(&key("a")).is_some(),
            "the line stays: its holder releases"
        );
    }

    #[test]
    fn quitting_after_the_turn_was_given_returns_it() {
        let lines = Lines::default();
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let Place::Queued(mut w) = lines.join(&key("a")) else {
            panic!()
        };
        lines.leave(&key("a"));
        assert!(matches!(lines.quit(&key("a"), &mut w), Some(Turn::Go)));
    }
}
