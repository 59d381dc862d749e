//! Carries the client's local line and stand-back, which its client machine keeps and decides
//! (`client::Client`: their order, patience, pauses, and which lock holds a line), to the
//! tasks of its acquisitions: a turn goes to the waiting task over a channel, and times are
//! read from the clock here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dynamodb_lock_core::client;
use dynamodb_lock_core::ending::Outcome;
use dynamodb_lock_core::local::{self, Patience, Waiter};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::item::{Guid, LockKey};

/// The client machine of one client: every lock it holds (its sessions' items and its Fifo
/// entries too), its sessions, and its lines.
pub type Machine = client::Client<Guid, LockKey>;

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

/// Where the turns of one client's waiters go.
pub struct Lines {
    clock: Clock,
    machine: Arc<Mutex<Machine>>,
    turns: Mutex<HashMap<Waiter, oneshot::Sender<Turn>>>,
}

impl Lines {
    pub fn new(clock: Clock, machine: Arc<Mutex<Machine>>) -> Self {
        Lines {
            clock,
            machine,
            turns: Mutex::new(HashMap::new()),
        }
    }

    fn machine(&self) -> std::sync::MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The waiters' channels, taken after the machine's mutex, never before it.
    fn turns(&self) -> std::sync::MutexGuard<'_, HashMap<Waiter, oneshot::Sender<Turn>>> {
        self.turns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the line of `key`, or starts it.
    pub fn join(&self, key: &LockKey) -> Place {
        let now = self.clock.now();
        let mut m = self.machine();
        match m.line_join(key, now) {
            local::Place::Head => Place::Head,
            local::Place::Queued(id) => {
                let (tx, rx) = oneshot::channel();
                self.turns().insert(id, tx);
                Place::Queued(InLine { id, turn: rx })
            }
        }
    }

    /// Whether the line of `key` exists.
    #[cfg(test)]
    pub fn has_line(&self, key: &LockKey) -> bool {
        self.machine().has_line(key)
    }

    /// What `w`'s patience says now, on the client's clock (giving up, it has left the line).
    pub fn patience(&self, key: &LockKey, w: &InLine) -> Patience {
        let now = self.clock.now();
        let mut m = self.machine();
        let patience = m.line_patience(key, w.id, now);
        if patience == Patience::GivesUp {
            self.turns().remove(&w.id);
        }
        patience
    }

    /// Gives the next waiter that is still there `turn`; returns the turn back if nobody is
    /// left (the line is then gone when `Go` was meant, and kept for a handed lock, whose
    /// owner must release it).
    pub fn pass(&self, key: &LockKey, turn: Turn) -> Option<Turn> {
        self.pass_on(&mut self.machine(), key, turn)
    }

    fn pass_on(&self, m: &mut Machine, key: &LockKey, mut turn: Turn) -> Option<Turn> {
        let now = self.clock.now();
        let handed = matches!(turn, Turn::Handed { .. });
        while let Some(w) = m.line_next(key, now, handed) {
            // A waiter whose task is gone without quitting cannot take it: the next one may.
            if let Some(tx) = self.turns().remove(&w) {
                match tx.send(turn) {
                    Ok(()) => return None,
                    Err(back) => turn = back,
                }
            }
        }
        Some(turn)
    }

    /// Lock `lock` holds the line of its id (`client::Client::line_holds`).
    pub fn holds(&self, lock: u64) {
        self.machine().line_holds(lock);
    }

    /// The acquisition with the turn in the line of `key` took no lock: the next waiter tries
    /// for itself, or the line ends.
    pub fn unused(&self, key: &LockKey) {
        let mut m = self.machine();
        m.line_turn_unused(key);
        self.carry(&mut m);
    }

    /// The end of lock `lock` came to `outcome` (`client::Client::ended`, which records it):
    /// without a hand-over, if the lock held its line, the next waiter tries for itself, or
    /// the line ends.
    pub fn ended<E>(&self, lock: u64, outcome: &Outcome<Guid, E>, landed_maybe: bool) {
        let now = self.clock.now();
        let mut m = self.machine();
        m.ended(lock, outcome, landed_maybe, now);
        self.carry(&mut m);
    }

    /// The client machine may have moved lines on (a lock lost or abandoned): their next
    /// waiters try for themselves.
    pub fn moved(&self) {
        self.carry(&mut self.machine());
    }

    /// Gives the next waiter of each line the machine moved on its turn to try for itself
    /// (`client::Client::line_moves`); a line nobody waits in ends.
    fn carry(&self, m: &mut Machine) {
        for key in m.line_moves() {
            let _ = self.pass_on(m, &key, Turn::Go);
        }
    }

    /// Leaves the line without having had a turn. Returns `None` if the waiter was still
    /// queued; otherwise its turn had already been given, and the caller must deal with it.
    pub fn quit(&self, key: &LockKey, w: &mut InLine) -> Option<Turn> {
        {
            let mut m = self.machine();
            if m.line_quit(key, w.id) {
                self.turns().remove(&w.id);
                return None;
            }
        }
        w.turn.try_recv().ok()
    }

    /// Until when this client stands back from `key`. Asking ends it.
    pub fn stand_back(&self, key: &LockKey) -> Option<Instant> {
        self.machine().stand_back(key).map(|t| self.clock.base + t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::key;
    use std::time::Duration;

    fn lines() -> Lines {
        let machine = Machine::new(Duration::from_millis(1)).with_line_patience(Duration::from_secs(1));
        Lines::new(Clock::start(), Arc::new(Mutex::new(machine)))
    }

    fn queued(lines: &Lines) -> InLine {
        match lines.join(&key("a")) {
            Place::Queued(w) => w,
            Place::Head => panic!("the line exists"),
        }
    }

    #[test]
    fn a_turn_goes_to_the_next_task_still_there() {
        let lines = lines();
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let gone = queued(&lines);
        let mut next = queued(&lines);
        // A task dropped without quitting.
        drop(gone);
        lines.unused(&key("a"));
        assert!(matches!(next.turn.try_recv(), Ok(Turn::Go)));
        lines.unused(&key("a"));
        assert!(!lines.has_line(&key("a")), "the line ended");
    }

    #[test]
    fn a_handed_turn_nobody_takes_comes_back() {
        let lines = lines();
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
        let lines = lines();
        assert!(matches!(lines.join(&key("a")), Place::Head));
        let mut w = queued(&lines);
        lines.unused(&key("a"));
        assert!(matches!(lines.quit(&key("a"), &mut w), Some(Turn::Go)));
        assert!(matches!(lines.patience(&key("a"), &w), Patience::Turned));
    }
}
