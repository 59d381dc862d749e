//! A waiter's place among the waiters of every process. The first in line (the one whose mark
//! the item carries: `lockWaitingUnixMs`, `lockWaiter`, `lockWaitingSinceUnixMs`) re-reads at
//! `rereadPeriodMs`, the others at the slower queue interval; a waiter that has waited longer
//! than the marked one takes its place. The mark is best effort: a failed write of it costs
//! fairness only, never safety. A holder's release reads the mark back, and a releaser that
//! finds it fresh stands back for a moment before it asks again.

use crate::op::Record;
use crate::request::{Req, Time};
use crate::settings::Lock;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiting {
    id: String,
    since_unix_ms: u64,
    /// The item carries this waiter's mark.
    pub first: bool,
}

impl Waiting {
    /// A waiter named `id` (random, unique among waiters) that started waiting at
    /// `since_unix_ms`.
    pub fn new(id: String, since_unix_ms: u64) -> Self {
        Waiting {
            id,
            since_unix_ms,
            first: false,
        }
    }

    /// Reads the mark on `held`: the mark to write when this waiter claims the first place or
    /// renews its own; otherwise whether it is first is settled.
    pub fn observe<R: Record, G, V>(&mut self, s: &Lock, held: &R, now_unix_ms: u64) -> Option<Req<G, V>> {
        let fresh_ms = s.mark_fresh().as_millis() as u64;
        let age = held.lock_waiting_unix_ms().map(|w| now_unix_ms.saturating_sub(w));
        let fresh = age.is_some_and(|a| a < fresh_ms);
        let mine = fresh && held.lock_waiter() == Some(self.id.as_str());
        let write = if mine {
            age.is_some_and(|a| a >= fresh_ms / 2)
        } else {
            !fresh
                || held
                    .lock_waiting_since_unix_ms()
                    .is_none_or(|since| since > self.since_unix_ms)
        };
        if !write {
            self.first = mine;
            return None;
        }
        Some(Req::MarkWaiting {
            waiter: self.id.clone(),
            since_unix_ms: self.since_unix_ms,
            now_unix_ms,
            stale_before_unix_ms: now_unix_ms.saturating_sub(fresh_ms),
        })
    }

    /// The mark's write answered: `written` whether the item carries it now.
    pub fn marked(&mut self, written: bool) {
        self.first = written;
    }
}

/// Whether a waiting mark read back by a release is fresh: someone else waits.
pub fn marked_recently(s: &Lock, mark: Option<u64>, now_unix_ms: u64) -> bool {
    mark.is_some_and(|w| now_unix_ms.saturating_sub(w) < s.mark_fresh().as_millis() as u64)
}

/// When a waiter (`None`: one not in line yet) next reads the item: a re-read interval from
/// `now`, and never after `limit` (the next attempt, or the end of the wait).
pub fn next_read(s: &Lock, waiting: Option<&Waiting>, now: Time, limit: Time) -> Time {
    let first = waiting.is_some_and(|w| w.first);
    now.checked_add(s.reread_interval(first)).unwrap_or(limit).min(limit)
}
