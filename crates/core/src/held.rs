//! A held lock between its acquisition and its release: the `guid`s its item may carry, which
//! its heartbeats and its release must agree on.
//!
//! The protocol:
//! - A heartbeat writes a new `guid` on the condition that the item carries the holder's (or
//!   that new one). Until an answer settles it, the item may carry either, so both are known
//!   (`pending`). A heartbeat that starts while an earlier one's `guid` is still unsettled
//!   writes that same `guid` again.
//! - A heartbeat that landed makes its `guid` the lock's own. A lock another holder took
//!   carries nothing of ours any more; a lock whose lease lapsed keeps both `guid`s known, so
//!   that a release can still free the item if nobody has taken it.
//! - No heartbeat starts once the release is called. A release waits for a heartbeat whose
//!   write is on the wire (its answer decides which `guid` the item carries) until the instant
//!   it is given (`hold::Hold::release`: a request timeout), when the write counts as dropped,
//!   then writes on the condition that the item carries any `guid` it may carry. A FailOpen
//!   lock another holder took is not written at all.
//! - Releasing a released lock is quiet for FailOpen and Fifo, as in the original library,
//!   and an error for FailClosed: its item is gone, so the lock is not ours to release.
//! - A write of the holder's data (`lock.update`) is conditioned on every `guid` the item may
//!   carry and leaves the `guid` as it is. No heartbeat starts while it is out: a new `guid`
//!   landing meanwhile would fail its condition. A heartbeat already under way goes on, its
//!   `guid` being among those the write is conditioned on. A lock lost, released or on its way
//!   out takes no update; a refused update means another holder took the lock.

use std::time::Duration;

use crate::broken::{self, Broken};
use crate::settings::Kind;

/// How a held lock was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lost {
    /// Its lease ran out: the item may still carry its `guid`s.
    Lapsed,
    /// Another holder took it.
    Taken,
}

/// What a release does next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Release<G> {
    /// A heartbeat's write is on the wire: ask again once it is answered, or at `until`, when
    /// it counts as dropped (`hold::Hold::settle`).
    Wait { until: Duration },
    /// Released already, quietly (FailOpen, Fifo).
    Done,
    /// Released already: the FailClosed item is gone, the lock is not ours.
    NotOurs,
    /// Write, on the condition that the item carries one of `guids`. `taken`: another holder
    /// took the lock (a FailOpen lock then needs no write; a Fifo head still lets its queue
    /// go on).
    Write { guids: Vec<G>, taken: bool },
}

/// How long a write of the holder's data (`lock.update`) may take, with its retries, when
/// `lease_left` is left of the lease: heartbeats wait for it, so it takes at most half, and an
/// outage cannot keep them from renewing the lease.
pub fn update_time(lease_left: Duration) -> Duration {
    if broken::on(Broken::UpdateTakesWholeLease) {
        return lease_left;
    }
    lease_left / 2
}

/// The `guid`s and the fate of one held lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Held<G> {
    /// The `guid` the item carries for this lock, as far as any answer told.
    pub guid: G,
    /// A new `guid` a heartbeat may have written: its outcome is unknown until it answers.
    pub pending: Option<G>,
    pub lost: Option<Lost>,
    /// The release is called: no heartbeat starts any more.
    pub stopping: bool,
    pub released: bool,
    /// A heartbeat's write is on the wire.
    pub beating: bool,
    /// A release failed after an attempt that may have landed: the next one counts a refusal
    /// as that attempt's success (`ending::End::landed_maybe`).
    pub release_landed_maybe: bool,
    /// A write of the holder's data is out (`update`): no heartbeat starts.
    pub updating: bool,
    /// Its heartbeats stopped without a release (its client closed): it lapses at the end of
    /// its lease.
    pub abandoned: bool,
}

/// What `lock.update` does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Update<G> {
    /// The lock is lost: no update.
    Lost(Lost),
    /// The lock is released, or its release is called: no update.
    Gone,
    /// Write, on the condition that the item carries one of `guids`; then `update_ends`.
    Write { guids: Vec<G> },
}

impl<G: Clone + PartialEq> Held<G> {
    pub fn new(guid: G) -> Self {
        Held {
            guid,
            pending: None,
            lost: None,
            stopping: false,
            released: false,
            beating: false,
            release_landed_maybe: false,
            updating: false,
            abandoned: false,
        }
    }

    /// Every `guid` the item may carry while it is ours.
    pub fn guids(&self) -> Vec<G> {
        std::iter::once(self.guid.clone()).chain(self.pending.clone()).collect()
    }

    /// Whether the lock needs another heartbeat.
    pub fn beats(&self) -> bool {
        !self.stopping && self.lost.is_none() && !self.released
    }

    /// Whether the lock still has a fate to learn from its lease: it needs heartbeats, or it
    /// was abandoned and is still to lapse.
    pub fn watched(&self) -> bool {
        (self.beats() || self.abandoned) && self.lost.is_none() && !self.released
    }

    /// A heartbeat starts: the `guid` it writes (`fresh` unless an earlier one is unsettled),
    /// or `None` when the lock needs no more heartbeats.
    pub fn beat_starts(&mut self, fresh: G) -> Option<G> {
        if !self.beats() {
            return None;
        }
        Some(self.pending.get_or_insert(fresh).clone())
    }

    /// A heartbeat's write is on the wire (`true`), or every write of it is answered or
    /// dropped (`false`).
    pub fn on_the_wire(&mut self, beating: bool) {
        self.beating = beating;
    }

    /// A heartbeat's write landed: its `guid` is the lock's.
    pub fn landed(&mut self) {
        if let Some(g) = self.pending.take() {
            self.guid = g;
        }
    }

    /// The lock is lost.
    pub fn lose(&mut self, how: Lost) {
        self.lost = Some(how);
        self.beating = false;
        if how == Lost::Taken {
            self.pending = None;
        }
    }

    /// The lease of a lock whose heartbeats stopped without a release (its client closed
    /// without releasing it) has run out: whether that loses the lock now, which is then
    /// reported once. A lock released or lost meanwhile is not lost again.
    pub fn lapses(&mut self) -> bool {
        if self.released || self.lost.is_some() {
            return false;
        }
        self.lose(Lost::Lapsed);
        true
    }

    /// The release is called: what it does now; a wait for a heartbeat's write ends at
    /// `wait_until`. A release that waits calls this again.
    pub fn release(&mut self, kind: Kind, wait_until: Duration) -> Release<G> {
        self.stopping = true;
        if self.beating && !broken::on(Broken::ReleaseSkipsHeartbeat) {
            return Release::Wait { until: wait_until };
        }
        if self.released {
            return match kind {
                Kind::FailClosed => Release::NotOurs,
                Kind::FailOpen | Kind::Fifo => Release::Done,
            };
        }
        let guids = if broken::on(Broken::ReleaseSkipsHeartbeat) {
            vec![self.guid.clone()]
        } else {
            self.guids()
        };
        Release::Write {
            guids,
            taken: self.lost == Some(Lost::Taken),
        }
    }

    /// Its heartbeats stop without a release (its client closed): no heartbeat starts and no
    /// update is written any more; the lock lapses at the end of its lease (`lapses`).
    pub fn abandon(&mut self) {
        self.stopping = true;
        self.abandoned = true;
    }

    /// `lock.update` is called: what it does.
    pub fn update(&mut self) -> Update<G> {
        if let Some(lost) = self.lost {
            return Update::Lost(lost);
        }
        if self.released || self.stopping {
            return Update::Gone;
        }
        self.updating = true;
        Update::Write { guids: self.guids() }
    }

    /// A release failed; `landed_maybe`: after an attempt that may have landed (as the
    /// ending says).
    pub fn release_failed(&mut self, landed_maybe: bool) {
        self.release_landed_maybe |= landed_maybe;
    }

    /// The release is done (or the lock was handed over).
    pub fn release_done(&mut self) {
        self.released = true;
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When a release's wait for a heartbeat's write ends.
    const T: Duration = Duration::from_millis(7);

    #[test]
    fn an_unsettled_heartbeat_guid_is_written_again_and_known_to_the_release() {
        let mut h = Held::new(1u8);
        assert_eq!(h.beat_starts(2), Some(2));
        h.on_the_wire(true);
        assert_eq!(h.release(Kind::FailOpen, T), Release::Wait { until: T });
        h.on_the_wire(false);
        // Unanswered: the next heartbeat would write the same guid, but the release stopped it.
        assert_eq!(h.beat_starts(3), None);
        assert_eq!(
            h.release(Kind::FailOpen, T),
            Release::Write {
                guids: vec![1, 2],
                taken: false
            }
        );
        h.release_done();
        assert_eq!(h.release(Kind::FailOpen, T), Release::Done);
        assert_eq!(h.release(Kind::FailClosed, T), Release::NotOurs);
    }

    #[test]
    fn a_landed_heartbeat_makes_its_guid_the_locks() {
        let mut h = Held::new(1u8);
        assert_eq!(h.beat_starts(2), Some(2));
        assert_eq!(h.beat_starts(3), Some(2), "the unsettled guid is kept");
        h.landed();
        assert_eq!(h.guids(), vec![2]);
        assert_eq!(h.beat_starts(4), Some(4));
    }

    #[test]
    fn an_abandoned_lock_lapses_once_unless_released_or_lost_first() {
        let mut h = Held::new(1u8);
        assert!(h.lapses());
        assert_eq!(h.lost, Some(Lost::Lapsed));
        assert!(!h.lapses(), "reported once");
        let mut r = Held::new(1u8);
        assert!(matches!(r.release(Kind::FailOpen, T), Release::Write { .. }));
        r.release_done();
        assert!(!r.lapses(), "a released lock is not lost");
        let mut t = Held::new(1u8);
        t.lose(Lost::Taken);
        assert!(!t.lapses(), "lost already");
        assert_eq!(t.lost, Some(Lost::Taken));
    }

    #[test]
    fn a_lapsed_lock_keeps_its_guids_and_a_taken_one_writes_nothing_of_them() {
        let mut h = Held::new(1u8);
        h.beat_starts(2);
        h.lose(Lost::Lapsed);
        assert!(!h.beats());
        assert_eq!(
            h.release(Kind::FailOpen, T),
            Release::Write {
                guids: vec![1, 2],
                taken: false
            }
        );
        let mut t = Held::new(1u8);
        t.beat_starts(2);
        t.lose(Lost::Taken);
        assert_eq!(
            t.release(Kind::FailOpen, T),
            Release::Write {
                guids: vec![1],
                taken: true
            }
        );
    }
}
