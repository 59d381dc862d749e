//! The client machine, as far as it goes so far: every lock one client holds, its sessions,
//! its local line and stand-back (`local::Local`), and every event about them, in one value. A
//! held lock's own life is its `hold::Hold`; what connects the locks of a client is decided
//! here: which locks a session speaks for, what the loss, the errors and the revocations of a
//! session's item do to them, what a release or an abandon of a lock held through a session
//! does, when each holder hears of its lease's end, and what a lock's end means for the
//! acquisitions of its id waiting in line. The addon keeps one per client (its sessions' items
//! and its Fifo entries are locks of the same value) and steps it under one mutex; it carries
//! the writes, the events and the turns, and decides nothing about them.
//!
//! The protocol:
//! - A lock's lease, as its holder sees it, is its own; a lock held through a session has none
//!   of its own and counts its session item's. A lock released, lost, or whose release is
//!   under way has no lease left.
//! - A lock just taken counts its own lease from when the write that took it was sent
//!   (FailOpen, Fifo), unless it is held through a session; a FailClosed lock has none.
//! - A lock taken for an acquisition cancelled meanwhile is given back. A lock taken through
//!   a session joins it while the session lasts (`session::Session`); otherwise it is lost
//!   already and its holder gives it back.
//! - What a session item's heartbeat reports is its members': an error the holder is told of
//!   and `"danger"` go to every member; the item's loss makes every member lost (lapsed: a
//!   release may still free its item) with the item's reason, once.
//! - A renewal of the item that names revoked `guid`s makes the members whose items carried
//!   them lost (taken), and they leave the session.
//! - A member that is released or abandoned leaves its session first; a release finds the
//!   lock lapsed if its session no longer lasts. An abandoned member lapses with its session
//!   item's lease.
//! - A client that closes without releasing ends its sessions and abandons their items first,
//!   then its holders' locks whose release was not called; each is declared lost at its loss
//!   moment, once, and stays releasable until then.
//! - A lock ends with a hand-over when an acquisition of this client waits in line for its id
//!   (`ending`); otherwise, and when it is lost or abandoned, it leaves the line it holds, whose
//!   next waiter then tries for itself (`line_moves`). A release while others waited has the
//!   client's next acquisition of the id stand back (`ended`).
//! - Its Fifo registry (`local::Queues`, by head key) holds a head as the lock's id: the lock
//!   is lost, on its way out or gone as this machine knows it, and its release (`ended`) marks
//!   the head released for the waiters behind it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::ending::{End, Outcome};
use crate::fifo::Mine;
use crate::heartbeat::{Answer, Failure, Loss, Time};
use crate::held::{self, Lost};
use crate::hold::{self, Hold};
use crate::local::{self, Local, Patience, Place, Queues, Waiter};
use crate::session::Session;
use crate::settings::Kind;

/// A held lock's number, unique within its client.
pub type Id = u64;

/// Why a lock just taken is given back (released, never handed over) instead of held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveBack {
    /// Its acquisition was cancelled meanwhile.
    Aborted,
    /// The session it was taken through no longer lasts: the lock is lost already, lapsed.
    Lapsed,
}

/// When a lock just taken, by a write sent at `sent`, counts its own lease from (`Hold::new`'s
/// `sent`): a FailOpen or Fifo lock from then, unless it is held through a session (it counts
/// its session item's lease); a FailClosed lock has no lease.
pub fn leased_from(kind: Kind, sent: Time, through_session: bool) -> Option<Time> {
    (kind != Kind::FailClosed && !through_session).then_some(sent)
}

/// What a holder is told about its lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The lock is lost: its lease (or its session's) ran out, or another holder took it.
    Lost(Lost),
    /// This much of the lease is left, and no heartbeat has renewed it yet.
    Danger { remaining: Duration },
    /// A heartbeat write failed; `report`: the holder is told, with what is left of the lease.
    Failed(Failure),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Entry<G, K> {
    hold: Hold<G>,
    /// The lock's id: the line it may hold, and what a stand-back after its release is from.
    key: K,
    /// The session item through which the lock is held (the lock has no lease of its own).
    through: Option<Id>,
    /// When its holder learnt it holds the lock.
    taken_at: Time,
    /// Its acquisition found it held by another first: others want it too.
    contended: bool,
}

/// Every held lock of one client (with its id, `K`), its sessions (by their items' lock `Id`),
/// and its local lines and stand-backs (`local::Local`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client<G, K: Ord = ()> {
    timer_grain: Duration,
    locks: BTreeMap<Id, Entry<G, K>>,
    sessions: BTreeMap<Id, Session<Id, G>>,
    line: Local<K>,
    /// The Fifo registry, by head key: its heads are the ids of this client's locks.
    fifo: Queues<K, Id>,
    /// The ids whose line's next waiter now tries for itself (`line_moves`).
    moves: Vec<K>,
    events: Vec<(Id, Event)>,
}

impl<G: Clone + PartialEq, K: Ord + Clone> Client<G, K> {
    /// `timer_grain`: how late a timer may fire (a session lasts until a grain before its
    /// item's lease ends, as its heartbeat declares the loss). Its line's waiters have no
    /// patience until `with_line_patience` gives them some.
    pub fn new(timer_grain: Duration) -> Self {
        Client {
            timer_grain,
            locks: BTreeMap::new(),
            sessions: BTreeMap::new(),
            line: Local::new(Duration::ZERO),
            fifo: Queues::default(),
            moves: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The client's waiters in line wait at most `patience` for one holder
    /// (`Lock::line_patience`).
    pub fn with_line_patience(mut self, patience: Duration) -> Self {
        self.line = Local::new(patience);
        self
    }

    /// A lock is held from now on.
    pub fn insert(&mut self, id: Id, hold: Hold<G>)
    where
        K: Default,
    {
        self.taken(id, K::default(), hold, Time::ZERO);
    }

    /// Lock `id` of `key` is held from `now` on, which its ending counts from (`ending`).
    pub fn taken(&mut self, id: Id, key: K, hold: Hold<G>, now: Time) {
        let entry = Entry {
            hold,
            key,
            through: None,
            taken_at: now,
            contended: false,
        };
        self.locks.insert(id, entry);
    }

    /// The acquisition of lock `id` found it held by another first.
    pub fn contended(&mut self, id: Id) {
        if let Some(e) = self.locks.get_mut(&id) {
            e.contended = true;
        }
    }

    /// What the end of lock `id` at `now` goes by (`ending::Ending`): the `guids` and `taken`
    /// its release gave (`release`), and what the client knows of the lock: whether an
    /// acquisition of this client waits in line for it (the lock is then handed to it under
    /// a `guid` that `fresh` draws), whether it is lost, how long it was held, whether others
    /// wanted it, and whether an earlier release may have landed.
    pub fn ending(&self, id: Id, guids: Vec<G>, taken: bool, fresh: impl FnOnce() -> G, now: Time) -> End<G> {
        let e = self.locks.get(&id);
        let waits = e.is_some_and(|e| self.line.has_waiters(&e.key));
        End {
            guids,
            lost: e.is_some_and(|e| e.hold.lost.is_some()),
            taken,
            next: waits.then(fresh),
            held_for: e.map_or(Duration::ZERO, |e| now.saturating_sub(e.taken_at)),
            contended: e.is_some_and(|e| e.contended),
            landed_maybe: e.is_some_and(|e| e.hold.release_landed_maybe),
        }
    }

    /// The lock is forgotten (its holder let go of it): it leaves its session, and a session
    /// whose item it is ends.
    pub fn remove(&mut self, id: Id) {
        self.leave(id);
        self.locks.remove(&id);
        if let Some(mut s) = self.sessions.remove(&id) {
            for m in s.end() {
                if let Some(e) = self.locks.get_mut(&m) {
                    e.through = None;
                }
            }
        }
    }

    /// The end of lock `id` came to `outcome` (`ending::Ending`) at `now`: handed to the next
    /// in line, or released (the client stands back from the lock for the pause the release
    /// gave), its release done; or its release failed (a later one must know whether an
    /// attempt may have landed, `landed_maybe`) or found the lock another's. Without a
    /// hand-over the lock leaves its line (`line_moves`).
    pub fn ended<E>(&mut self, id: Id, outcome: &Outcome<G, E>, landed_maybe: bool, now: Time) {
        let Some(e) = self.locks.get_mut(&id) else {
            return;
        };
        match outcome {
            Outcome::Handed { .. } => {
                e.hold.release_done();
                return;
            }
            Outcome::Released { stand_back, .. } => {
                e.hold.release_done();
                if let Some(pause) = stand_back {
                    self.line.released(&e.key, now.saturating_add(*pause), now);
                }
                if let Some(token) = self.fifo.token_of(&e.key, &id) {
                    let key = e.key.clone();
                    self.fifo.released(&key, token, &self.locks, now);
                }
            }
            Outcome::NotOurs => {}
            Outcome::Failed(_) => e.hold.release_failed(landed_maybe),
        }
        self.leave_line(id);
    }

    /// Lock `id` is done with its id without a hand-over (lost, abandoned, released): if it
    /// held its line, the line's next waiter tries for itself (once per lock).
    fn leave_line(&mut self, id: Id) {
        if let Some(e) = self.locks.get(&id) {
            if self.line.leaves(&e.key, Some(id)) {
                self.moves.push(e.key.clone());
            }
        }
    }

    /// The ids, since the last call, whose line's next waiter now tries for itself (its
    /// holder lost, abandoned or released the lock, or the acquisition with the turn took
    /// none): the caller gives each its turn (`line_next`, not handed).
    pub fn line_moves(&mut self) -> Vec<K> {
        std::mem::take(&mut self.moves)
    }

    /// An acquisition of `key` at `now` joins this client's line of it, or starts it.
    pub fn line_join(&mut self, key: &K, now: Time) -> Place {
        self.line.join(key, now)
    }

    /// What waiter `w`'s patience in the line of `key` says at `now` (giving up, it has left).
    pub fn line_patience(&mut self, key: &K, w: Waiter, now: Time) -> Patience {
        self.line.patience(key, w, now)
    }

    /// Waiter `w` leaves the line of `key` without its turn; `false`: the turn was given.
    pub fn line_quit(&mut self, key: &K, w: Waiter) -> bool {
        self.line.quit(key, w)
    }

    /// The next waiter in the line of `key` gets the turn at `now` (`handed`: the lock is
    /// handed to it, else it tries for itself); `None` when nobody is left.
    pub fn line_next(&mut self, key: &K, now: Time, handed: bool) -> Option<Waiter> {
        self.line.next(key, now, handed)
    }

    /// Lock `id` holds the line of its id: its acquisition had the turn.
    pub fn line_holds(&mut self, id: Id) {
        if let Some(e) = self.locks.get(&id) {
            self.line.holds(&e.key, id);
        }
    }

    /// The acquisition with the turn in the line of `key` took no lock: the next waiter
    /// tries for itself (`line_moves`).
    pub fn line_turn_unused(&mut self, key: &K) {
        if self.line.leaves(key, None) {
            self.moves.push(key.clone());
        }
    }

    /// Until when the next acquisition of `key` stands back; asking ends it.
    pub fn stand_back(&mut self, key: &K) -> Option<Time> {
        self.line.stand_back(key)
    }

    /// Whether the line of `key` exists.
    pub fn has_line(&self, key: &K) -> bool {
        self.line.has_line(key)
    }

    /// An acquisition of this client waits at `position` of the Fifo queue of `head`.
    pub fn fifo_join(&mut self, head: &K, position: u64, now: Time) {
        self.fifo.join(head, position, &self.locks, now);
    }

    /// That acquisition no longer waits at `position`: its entry is `mine` now, or unknown
    /// (`None`: waiters behind read the table).
    pub fn fifo_leave(&mut self, head: &K, position: u64, mine: Option<Mine>, now: Time) {
        self.fifo.leave(head, position, mine, &self.locks, now);
    }

    /// Lock `id` holds `head` with `token`.
    pub fn fifo_hold(&mut self, head: &K, token: u64, id: Id, now: Time) {
        self.fifo.hold(head, token, id, &self.locks, now);
    }

    /// What this client knows of its entry at `position` of the queue of `head`.
    pub fn fifo_entry(&self, head: &K, position: u64) -> Option<Mine> {
        self.fifo.entry(head, position)
    }

    /// Whether this client holds `head` with `token` (`local::Queues::holder`).
    pub fn fifo_holder(&self, head: &K, token: u64, now: Time) -> Option<bool> {
        self.fifo.holder(head, token, &self.locks, now)
    }

    /// Whether an acquisition of this client waits in the queue of `head`, or a lock of it
    /// holds `head` and is not on its way out.
    pub fn fifo_busy(&self, head: &K, now: Time) -> bool {
        self.fifo.busy(head, &self.locks, now)
    }

    /// How many locks this client released on `head` while it had a waiter there.
    pub fn fifo_releases(&self, head: &K) -> u64 {
        self.fifo.releases(head)
    }

    /// The Fifo heads this client keeps state for.
    pub fn fifo_tracked(&self) -> usize {
        self.fifo.tracked()
    }

    pub fn hold(&self, id: Id) -> Option<&Hold<G>> {
        self.locks.get(&id).map(|e| &e.hold)
    }

    pub fn hold_mut(&mut self, id: Id) -> Option<&mut Hold<G>> {
        self.locks.get_mut(&id).map(|e| &mut e.hold)
    }

    /// Lock `item` is a session's item from now on.
    pub fn open_session(&mut self, item: Id) {
        self.sessions.insert(item, Session::new(self.timer_grain));
    }

    /// The session of item `item` still speaks for its locks at `now`.
    pub fn lasts(&self, item: Id, now: Time) -> bool {
        let until = self.hold(item).and_then(Hold::until);
        self.sessions.get(&item).is_some_and(|s| s.lasts(now, until))
    }

    /// An acquisition through the session of `item` that found it over starts again through
    /// a new one (`session::Session::restarts`).
    pub fn restarts(&self, item: Id, now: Time, restarts: u32, retry_count: u32, until_aborted: bool) -> bool {
        let until = self.hold(item).and_then(Hold::until);
        self.sessions
            .get(&item)
            .is_none_or(|s| s.restarts(now, until, restarts, retry_count, until_aborted))
    }

    /// Lock `id` joins the session of `item`, if that session lasts at `now`; otherwise the
    /// lock is lost already, lapsed (its holder gives it back, with a release, never a
    /// hand-over).
    pub fn join(&mut self, id: Id, item: Id, now: Time) -> bool {
        let until = self.hold(item).and_then(Hold::until);
        let Some(guid) = self.hold(id).map(|h| h.guid.clone()) else {
            return false;
        };
        let joined = self
            .sessions
            .get_mut(&item)
            .is_some_and(|s| s.join(id, guid, now, until));
        if let Some(e) = self.locks.get_mut(&id) {
            match joined {
                true => e.through = Some(item),
                false if e.hold.lost.is_none() => e.hold.lose(Lost::Lapsed),
                false => {}
            }
        }
        joined
    }

    /// Lock `id`, just taken for an acquisition (through the session of `through`, if any), is
    /// held from now on, unless the acquisition was `cancelled` meanwhile or the session no
    /// longer lasts at `now` (`join`): its holder then gives it back.
    pub fn start(&mut self, id: Id, through: Option<Id>, cancelled: bool, now: Time) -> Result<(), GiveBack> {
        if cancelled {
            return Err(GiveBack::Aborted);
        }
        match through {
            Some(item) if !self.join(id, item, now) => Err(GiveBack::Lapsed),
            _ => Ok(()),
        }
    }

    /// The session of `item` ends (its client closes): it speaks for no lock any more.
    pub fn end_session(&mut self, item: Id) {
        if let Some(s) = self.sessions.get_mut(&item) {
            s.end();
        }
    }

    /// The end of the lease of lock `id` as its holder sees it: its own, else its session
    /// item's; `Some(ZERO)` once the lock is lost or released, or its release is called;
    /// `None` for a lock without a lease.
    pub fn until(&self, id: Id) -> Option<Time> {
        let e = self.locks.get(&id)?;
        let h = &e.hold;
        if h.lost.is_some() || h.released || (h.stopping && !h.abandoned) {
            return Some(Time::ZERO);
        }
        h.until().or_else(|| e.through.and_then(|item| self.until(item)))
    }

    /// Lock `id` is held at `now`, as its holder may count on it (a condition in the holder's
    /// own transaction): not lost, released, abandoned or on its way out, and its lease (its
    /// own, or its session item's) not over. A lock without a lease is held until then.
    pub fn held(&self, id: Id, now: Time) -> bool {
        // A lost or released lock's lease ended at `Time::ZERO` (`until`).
        self.hold(id).is_some_and(|h| !h.stopping) && self.until(id).is_none_or(|until| until > now)
    }

    /// Every `guid` the item may carry for lock `id` now: none once the lock is lost or
    /// released (or is not known), which then speaks for nothing on the item.
    pub fn guids_on_item(&self, id: Id) -> Vec<G> {
        match self.hold(id) {
            Some(h) if h.lost.is_none() && !h.released => h.guids(),
            _ => Vec::new(),
        }
    }

    /// Steps the hold of lock `id` with `step`, and keeps what its actions mean for the
    /// client: the events of the lock (and of its session's members, for a session's item).
    /// Returns the actions for the caller to carry out.
    pub fn step(&mut self, id: Id, step: impl FnOnce(&mut Hold<G>) -> Vec<hold::Action<G>>) -> Vec<hold::Action<G>> {
        let Some(e) = self.locks.get_mut(&id) else {
            return Vec::new();
        };
        let actions = step(&mut e.hold);
        for a in &actions {
            let event = match a {
                hold::Action::Lost(loss) => Event::Lost(match loss {
                    Loss::Lapsed => Lost::Lapsed,
                    Loss::NotOurs => Lost::Taken,
                }),
                hold::Action::Danger { remaining } => Event::Danger { remaining: *remaining },
                hold::Action::Failed(f) => Event::Failed(*f),
                _ => continue,
            };
            self.tell(id, event);
        }
        actions
    }

    /// Tells lock `id` of `event`, and every member of the session whose item it is.
    fn tell(&mut self, id: Id, event: Event) {
        self.push(id, event.clone());
        if let Some(s) = self.sessions.get_mut(&id) {
            let members = match &event {
                Event::Lost(_) => s.lose(),
                Event::Failed(f) if !f.report => Vec::new(),
                _ => s.members(),
            };
            for m in members {
                let Some(e) = self.locks.get_mut(&m) else { continue };
                // A member lost on its own (its update refused) was told then.
                if e.hold.lost.is_some() {
                    continue;
                }
                if let Event::Lost(_) = event {
                    // Its item may still be free to release: it lapsed with the session.
                    e.hold.lose(Lost::Lapsed);
                }
                self.push(m, event.clone());
            }
        }
    }

    /// Lock `id`'s heartbeat write was answered at `now` (`random`: as for
    /// `hold::Hold::handle_answer`). A renewal of a session's item that names `revoked`
    /// `guid`s (locks an operator revoked) makes the members whose items carried them lost
    /// first (`revoke`); the session goes on.
    pub fn beat_answered(
        &mut self,
        id: Id,
        now: Time,
        answer: Answer,
        revoked: &[G],
        random: u64,
    ) -> Vec<hold::Action<G>> {
        if answer == Answer::Renewed && !revoked.is_empty() {
            self.revoke(id, revoked);
        }
        self.step(id, |h| h.handle_answer(now, answer, random))
    }

    /// A renewal of session item `item` named the `guid`s an operator revoked: the members
    /// whose items carried one are lost, taken, and leave the session.
    pub fn revoke(&mut self, item: Id, guids: &[G]) {
        if crate::broken::on(crate::broken::Broken::RevocationIgnored) {
            return;
        }
        let Some(s) = self.sessions.get_mut(&item) else { return };
        for m in s.revoke(guids) {
            if let Some(e) = self.locks.get_mut(&m) {
                e.hold.lose(Lost::Taken);
                self.push(m, Event::Lost(Lost::Taken));
            }
        }
    }

    /// The release of lock `id` is called: it leaves its session, starts no heartbeat and has
    /// no lease left from now on, while its release waits for any write of the holder's.
    pub fn stop(&mut self, id: Id) {
        self.leave(id);
        if let Some(e) = self.locks.get_mut(&id) {
            e.hold.stopping = true;
        }
    }

    /// `lock.update` is called on lock `id` at `now` (`hold::Hold::update`; a lock held through
    /// a session counts its session item's lease).
    pub fn update(&mut self, id: Id, now: Time) -> (held::Update<G>, Option<Time>) {
        let through = (self.locks.get(&id).and_then(|e| e.through)).and_then(|item| self.until(item));
        match self.locks.get_mut(&id) {
            Some(e) => e.hold.update(now, through),
            None => (held::Update::Gone, None),
        }
    }

    /// A write of the holder's data to lock `id` ended; `refused`: another holder took the
    /// lock, which is lost, and its holder told, once (`hold::Hold::update_ends`).
    pub fn update_ends(&mut self, id: Id, refused: bool) -> hold::UpdateEnd {
        let Some(e) = self.locks.get_mut(&id) else {
            return hold::UpdateEnd {
                lost: false,
                step_at: None,
            };
        };
        let end = e.hold.update_ends(refused);
        if end.lost {
            self.leave(id);
            self.push(id, Event::Lost(Lost::Taken));
        }
        end
    }

    /// The release of lock `id` is called at `now`: it leaves its session, is lapsed if that
    /// session no longer lasts, and is released as `hold::Hold::release` says.
    pub fn release(&mut self, id: Id, kind: Kind, now: Time) -> held::Release<G> {
        let through = self.locks.get(&id).and_then(|e| e.through);
        let lapsed = through.is_some_and(|item| !self.lasts(item, now));
        self.leave(id);
        let Some(e) = self.locks.get_mut(&id) else {
            return held::Release::Done;
        };
        if lapsed && e.hold.lost.is_none() {
            e.hold.lose(Lost::Lapsed);
        }
        e.hold.release(kind, now)
    }

    /// Lock `id` is abandoned (its client closed without releasing it): it leaves its
    /// session and lapses with its own lease, or its session item's.
    pub fn abandon(&mut self, id: Id) {
        let through = self
            .locks
            .get(&id)
            .and_then(|e| e.through)
            .and_then(|item| self.hold(item).and_then(Hold::until));
        self.leave(id);
        self.leave_line(id);
        if let Some(e) = self.locks.get_mut(&id) {
            e.hold.abandon(through);
        }
    }

    /// The client closes without releasing (`close()`): every session ends and its item is
    /// abandoned, then each of `held`, its holders' locks, whose release was not called and
    /// that is still held. Returns the locks abandoned, in that order. Each lapses with its
    /// own lease, or its session item's as it stood then, and is declared lost at its loss
    /// moment (`next_lapse`, `lapse`); a lock without a lease (FailClosed) stays held.
    pub fn close(&mut self, held: &[Id]) -> Vec<Id> {
        let items: Vec<Id> = self.sessions.keys().copied().collect();
        for &item in &items {
            self.end_session(item);
        }
        let mut abandoned = Vec::new();
        for id in items.into_iter().chain(held.iter().copied()) {
            let Some(h) = self.hold(id) else { continue };
            // An id given twice is abandoned already the second time.
            if h.stopping || h.released || h.lost.is_some() || h.abandoned {
                continue;
            }
            self.abandon(id);
            abandoned.push(id);
        }
        abandoned
    }

    /// When the machine must next be stepped for an abandoned lock (nobody heartbeats it any
    /// more): the earliest loss moment among them; `None` once none is left to declare.
    pub fn next_lapse(&self) -> Option<Time> {
        self.locks
            .values()
            .filter(|e| e.hold.abandoned)
            .filter_map(|e| e.hold.poll_timeout())
            .min()
    }

    /// Steps every abandoned lock whose loss moment has come by `now`: it is declared lost,
    /// once (`events`).
    pub fn lapse(&mut self, now: Time) {
        let due: Vec<Id> = (self.locks.iter())
            .filter(|(_, e)| e.hold.abandoned && e.hold.poll_timeout().is_some_and(|at| at <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.step(id, |h| h.handle_timeout(now, None, 0, Duration::ZERO));
        }
    }

    /// Lock `id` is held through a session that has not lost it (`release::nothing_freed_fails`'s
    /// `through_live_session`): its holder writes nothing to its item while it holds it.
    pub fn through_live_session(&self, id: Id) -> bool {
        self.locks
            .get(&id)
            .is_some_and(|e| e.through.is_some() && e.hold.lost.is_none())
    }

    /// Lock `id` leaves its session (it keeps counting the session item's lease).
    fn leave(&mut self, id: Id) {
        if let Some(item) = self.locks.get(&id).and_then(|e| e.through) {
            if let Some(s) = self.sessions.get_mut(&item) {
                s.leave(id);
            }
        }
    }

    /// Tells lock `id` of `event`; a lock lost leaves its line.
    fn push(&mut self, id: Id, event: Event) {
        if let Event::Lost(_) = event {
            self.leave_line(id);
        }
        self.events.push((id, event));
    }

    /// The events since the last call, in order: each names its lock.
    pub fn events(&mut self) -> Vec<(Id, Event)> {
        std::mem::take(&mut self.events)
    }
}

/// A Fifo head of the registry is a lock of this client, known by its id: lost once its loss
/// is declared or its lease has ended by `now`.
impl<G: Clone + PartialEq, K> local::Head<BTreeMap<Id, Entry<G, K>>> for Id {
    fn lost(&self, locks: &BTreeMap<Id, Entry<G, K>>, now: Time) -> Option<bool> {
        let e = locks.get(self)?;
        Some(e.hold.held.lost.is_some() || e.hold.until().is_some_and(|until| until <= now))
    }

    fn stopping(&self, locks: &BTreeMap<Id, Entry<G, K>>) -> bool {
        locks.get(self).is_some_and(|e| e.hold.held.stopping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{beat_config, ms, LONGEST_PAUSE};

    /// Client with a session item (1, heartbeats, lease from 0) and two locks (2, 3) held
    /// through it.
    fn with_session() -> Client<u8> {
        let mut c = Client::new(ms(1));
        c.insert(1, Hold::new(beat_config(250), true, 10, Some(ms(0)), ms(0), 0));
        c.open_session(1);
        for id in [2, 3] {
            c.insert(id, Hold::new(beat_config(250), false, 10 * id as u8, None, ms(0), 0));
            assert!(c.join(id, 1, ms(10)));
        }
        c
    }

    #[test]
    fn a_lock_counts_its_own_lease_from_its_write_unless_failclosed_or_held_through_a_session() {
        assert_eq!(leased_from(Kind::FailOpen, ms(7), false), Some(ms(7)));
        assert_eq!(leased_from(Kind::Fifo, ms(7), false), Some(ms(7)));
        assert_eq!(leased_from(Kind::FailOpen, ms(7), true), None, "its session's lease");
        assert_eq!(leased_from(Kind::FailClosed, ms(7), false), None, "no lease");
    }

    #[test]
    fn an_ending_counts_how_long_the_lock_was_held_and_what_befell_it() {
        let mut c = Client::new(ms(1));
        c.taken(
            1,
            'a',
            Hold::new(beat_config(250), true, 10u8, Some(ms(100)), ms(120), 0),
            ms(120),
        );
        let end = c.ending(1, vec![10], false, || 11, ms(500));
        assert_eq!(
            end,
            End {
                guids: vec![10],
                lost: false,
                taken: false,
                next: None,
                held_for: ms(380),
                contended: false,
                landed_maybe: false
            }
        );
        assert_eq!(c.line_join(&'a', ms(0)), Place::Head);
        assert!(matches!(c.line_join(&'a', ms(0)), Place::Queued(_)));
        assert_eq!(
            c.ending(1, vec![10], false, || 11, ms(500)).next,
            Some(11),
            "handed to the waiter in line"
        );
        c.contended(1);
        c.hold_mut(1).unwrap().release_failed(true);
        c.hold_mut(1).unwrap().lose(Lost::Taken);
        let end = c.ending(1, vec![10], true, || 12, ms(600));
        assert!(end.lost && end.contended && end.landed_maybe && end.taken);
        assert_eq!(
            c.ending(9, vec![], false, || 13, ms(0)).held_for,
            Duration::ZERO,
            "unknown"
        );
        assert_eq!(c.ending(9, vec![], false, || 13, ms(0)).next, None, "unknown");
    }

    #[test]
    fn a_lock_that_ends_without_a_hand_over_leaves_its_line_and_a_release_stands_back() {
        let mut c: Client<u8, char> = Client::new(ms(1)).with_line_patience(ms(100));
        assert_eq!(c.line_join(&'a', ms(0)), Place::Head);
        let Place::Queued(w) = c.line_join(&'a', ms(0)) else {
            panic!("queued behind the head")
        };
        c.taken(1, 'a', Hold::new(beat_config(250), false, 10, None, ms(0), 0), ms(0));
        assert_eq!(c.line_patience(&'a', w, ms(50)), Patience::Waits(ms(100)));
        c.line_holds(1);
        let released = Outcome::<u8, ()>::Released {
            stand_back: Some(ms(30)),
            ours: true,
        };
        c.ended(1, &released, false, ms(40));
        assert_eq!(c.line_moves(), vec!['a'], "the waiter tries for itself");
        assert!(c.hold(1).unwrap().released);
        c.abandon(1);
        assert_eq!(c.line_moves(), Vec::<char>::new(), "once");
        assert_eq!(c.stand_back(&'a'), Some(ms(70)));
        assert_eq!(c.stand_back(&'a'), None, "asking ends it");
        assert_eq!(c.line_next(&'a', ms(40), false), Some(w));
        // A failed release keeps what its attempts may have done, and leaves no line held.
        c.taken(2, 'b', Hold::new(beat_config(250), false, 20, None, ms(0), 0), ms(0));
        c.ended(2, &Outcome::<u8, ()>::Failed(()), true, ms(50));
        assert_eq!(c.line_moves(), Vec::<char>::new(), "it held no line");
        assert!(c.hold(2).unwrap().release_landed_maybe && !c.hold(2).unwrap().released);
        // A hand-over is the end of the holder's release, and the line stays with the taker.
        c.taken(3, 'a', Hold::new(beat_config(250), false, 30, None, ms(0), 0), ms(0));
        c.line_holds(3);
        let handed = Outcome::<u8, ()>::Handed {
            guid: 31,
            fencing_token: None,
            sent_at: ms(60),
        };
        c.ended(3, &handed, false, ms(60));
        assert_eq!(c.line_moves(), Vec::<char>::new());
        assert!(c.hold(3).unwrap().released && c.has_line(&'a'));
    }

    #[test]
    fn the_fifo_registry_holds_heads_as_this_clients_locks_and_a_release_marks_them_released() {
        let mut c: Client<u8, char> = Client::new(ms(1));
        let taken = |c: &mut Client<u8, char>, id: Id| {
            c.taken(
                id,
                'h',
                Hold::new(beat_config(250), true, id as u8, Some(ms(0)), ms(0), 0),
                ms(0),
            );
        };
        c.fifo_join(&'h', 4, ms(0));
        taken(&mut c, 1);
        c.fifo_hold(&'h', 7, 1, ms(0));
        assert_eq!(
            c.fifo_holder(&'h', 7, ms(0)),
            Some(false),
            "held here: its release wakes the waiter"
        );
        assert!(c.fifo_busy(&'h', ms(0)));
        let released = Outcome::<u8, ()>::Released {
            stand_back: None,
            ours: true,
        };
        c.ended(1, &released, false, ms(10));
        assert_eq!(c.fifo_holder(&'h', 7, ms(10)), Some(true), "released here just now");
        assert_eq!(c.fifo_releases(&'h'), 1);
        // A head whose lock is lost is the table's to tell; one on its way out keeps nobody
        // from the one-request take; one whose lock is gone is forgotten.
        taken(&mut c, 2);
        c.fifo_hold(&'h', 8, 2, ms(10));
        c.hold_mut(2).unwrap().lose(Lost::Lapsed);
        assert_eq!(c.fifo_holder(&'h', 8, ms(10)), None);
        taken(&mut c, 4);
        c.fifo_hold(&'h', 10, 4, ms(10));
        assert_eq!(c.fifo_holder(&'h', 10, ms(999)), Some(false));
        assert_eq!(c.fifo_holder(&'h', 10, ms(1000)), None, "its lease ended");
        c.remove(4);
        c.fifo_leave(&'h', 4, None, ms(10));
        assert!(c.fifo_busy(&'h', ms(10)), "nobody waits, but the lost lock is there");
        c.remove(2);
        assert!(!c.fifo_busy(&'h', ms(10)), "its lock is gone");
        taken(&mut c, 3);
        c.fifo_hold(&'h', 9, 3, ms(10));
        assert!(c.fifo_busy(&'h', ms(10)));
        let _ = c.release(3, Kind::Fifo, ms(10));
        assert!(!c.fifo_busy(&'h', ms(10)), "its release has begun");
        c.remove(3);
        c.fifo_join(&'h', 5, ms(10));
        c.fifo_leave(&'h', 5, None, ms(10));
        assert_eq!(c.fifo_tracked(), 0, "nothing held or waiting: nothing kept");
    }

    #[test]
    fn a_lock_lost_or_abandoned_moves_its_line_on_and_so_does_a_turn_unused() {
        let mut c: Client<u8, char> = Client::new(ms(1)).with_line_patience(ms(100));
        for (id, key) in [(1, 'a'), (2, 'b')] {
            assert_eq!(c.line_join(&key, ms(0)), Place::Head);
            c.taken(id, key, Hold::new(beat_config(250), false, 10, None, ms(0), 0), ms(0));
            c.line_holds(id);
        }
        // Its update refused: another holder took it.
        assert!(matches!(c.update(1, ms(5)).0, held::Update::Write { .. }));
        assert!(c.update_ends(1, true).lost);
        assert_eq!(c.line_moves(), vec!['a']);
        c.abandon(2);
        assert_eq!(c.line_moves(), vec!['b']);
        assert_eq!(c.line_join(&'c', ms(0)), Place::Head);
        c.line_turn_unused(&'c');
        assert_eq!(c.line_moves(), vec!['c']);
    }

    #[test]
    fn a_lock_just_taken_is_given_back_when_cancelled_or_its_session_is_over() {
        let mut c = with_session();
        c.insert(4, Hold::new(beat_config(250), false, 40, None, ms(0), 0));
        assert_eq!(c.start(4, Some(1), true, ms(10)), Err(GiveBack::Aborted));
        assert!(
            !c.through_live_session(4),
            "a cancelled acquisition's lock joins nothing"
        );
        assert_eq!(c.start(4, Some(1), false, ms(10)), Ok(()));
        assert!(c.through_live_session(4), "it joined the session");
        c.insert(5, Hold::new(beat_config(250), true, 50, Some(ms(0)), ms(0), 0));
        assert_eq!(c.start(5, None, false, ms(10)), Ok(()), "a lock of its own lease");
        c.insert(6, Hold::new(beat_config(250), false, 60, None, ms(0), 0));
        assert_eq!(c.start(6, Some(1), false, ms(999)), Err(GiveBack::Lapsed));
        assert_eq!(c.hold(6).unwrap().lost, Some(Lost::Lapsed), "lost already");
    }

    #[test]
    fn a_member_counts_its_session_items_lease_and_none_once_released() {
        let mut c = with_session();
        assert_eq!(c.until(2), Some(ms(1000)));
        assert_eq!(
            c.update(2, ms(10)),
            (held::Update::Write { guids: vec![20] }, Some(ms(505))),
            "an update's attempts end by half of what is left of the session's lease"
        );
        c.update_ends(2, false);
        assert!(c.lasts(1, ms(998)));
        assert!(
            !c.lasts(1, ms(999)),
            "a grain early, as the heartbeat declares the loss"
        );
        assert!(matches!(
            c.release(2, Kind::FailOpen, ms(20)),
            held::Release::Write { taken: false, .. }
        ));
        assert_eq!(c.until(2), Some(Time::ZERO), "no lease left once its release is called");
        assert_eq!(c.until(3), Some(ms(1000)));
    }

    #[test]
    fn a_lock_is_held_until_its_lease_ends_or_its_release_is_called() {
        let mut c = with_session();
        c.insert(4, Hold::new(beat_config(250), false, 40, None, ms(0), 0));
        assert!(c.held(2, ms(998)), "through its session's lease");
        assert!(!c.held(2, ms(1000)), "not once the session's lease is over");
        assert!(c.held(4, ms(1_000_000)), "a lock without a lease, until it ends");
        c.stop(3);
        assert!(!c.held(3, ms(10)), "not once its release is called");
        c.abandon(4);
        assert!(!c.held(4, ms(10)), "not once abandoned");
        assert_eq!(c.guids_on_item(2), vec![20], "its guid speaks for it on the item");
        assert_eq!(c.guids_on_item(3), vec![30], "on its way out, but not yet released");
        c.revoke(1, &[20]);
        assert!(!c.held(2, ms(10)), "not once lost");
        assert!(c.guids_on_item(2).is_empty(), "a lost lock's guid speaks for nothing");
        assert!(!c.held(9, ms(0)), "nor an unknown lock");
        assert!(c.guids_on_item(9).is_empty());
    }

    #[test]
    fn only_a_member_not_lost_is_held_through_a_live_session() {
        let mut c = with_session();
        c.insert(4, Hold::new(beat_config(250), true, 40, Some(ms(0)), ms(0), 0));
        assert!(c.through_live_session(2) && c.through_live_session(3));
        assert!(!c.through_live_session(1), "the session's item is not held through it");
        assert!(!c.through_live_session(4), "nor a lock with a lease of its own");
        c.revoke(1, &[20]);
        assert!(!c.through_live_session(2), "revoked: lost");
        c.step(1, |h| h.handle_timeout(ms(999), None, LONGEST_PAUSE, Duration::ZERO));
        assert!(!c.through_live_session(3), "lost with the session");
    }

    #[test]
    fn the_loss_of_a_session_item_loses_every_member_once_with_its_reason() {
        let mut c = with_session();
        let actions = c.step(1, |h| h.handle_timeout(ms(999), None, LONGEST_PAUSE, Duration::ZERO));
        assert!(actions.contains(&hold::Action::Lost(Loss::Lapsed)), "{actions:?}");
        assert_eq!(
            c.events(),
            vec![
                (1, Event::Lost(Lost::Lapsed)),
                (2, Event::Lost(Lost::Lapsed)),
                (3, Event::Lost(Lost::Lapsed))
            ]
        );
        assert_eq!(c.hold(2).unwrap().lost, Some(Lost::Lapsed));
        c.insert(4, Hold::new(beat_config(250), false, 40, None, ms(0), 0));
        assert!(!c.join(4, 1, ms(0)), "a lost session takes no lock");
        assert_eq!(c.hold(4).unwrap().lost, Some(Lost::Lapsed), "which is lost already");
        assert!(
            matches!(
                c.release(4, Kind::FailOpen, ms(1)),
                held::Release::Write { taken: false, .. }
            ),
            "and released, as lapsed"
        );
        // A member's release after the loss still writes: its item may be free.
        assert!(matches!(
            c.release(3, Kind::FailOpen, ms(1000)),
            held::Release::Write { taken: false, .. }
        ));
        assert!(c.events().is_empty(), "told once");
    }

    #[test]
    fn danger_and_reported_errors_of_the_item_reach_every_member() {
        let mut c = with_session();
        let f = Failure {
            report: false,
            at_risk: false,
            remaining: ms(500),
        };
        c.step(1, |_| {
            vec![hold::Action::Failed(f), hold::Action::Danger { remaining: ms(300) }]
        });
        assert_eq!(
            c.events(),
            vec![
                (1, Event::Failed(f)),
                (1, Event::Danger { remaining: ms(300) }),
                (2, Event::Danger { remaining: ms(300) }),
                (3, Event::Danger { remaining: ms(300) })
            ],
            "an unreported failure stays the item's"
        );
        let f = Failure { report: true, ..f };
        c.step(1, |_| vec![hold::Action::Failed(f)]);
        assert_eq!(c.events().len(), 3);
    }

    #[test]
    fn a_revocation_loses_the_members_that_carried_a_revoked_guid() {
        let mut c = with_session();
        c.revoke(1, &[30]);
        assert_eq!(c.events(), vec![(3, Event::Lost(Lost::Taken))]);
        assert_eq!(c.hold(3).unwrap().lost, Some(Lost::Taken));
        assert_eq!(c.until(3), Some(Time::ZERO));
        // The other member is still held, and the item's loss now tells it alone.
        c.step(1, |h| h.handle_timeout(ms(999), None, LONGEST_PAUSE, Duration::ZERO));
        assert_eq!(
            c.events(),
            vec![(1, Event::Lost(Lost::Lapsed)), (2, Event::Lost(Lost::Lapsed))]
        );
    }

    #[test]
    fn only_a_renewal_of_the_item_that_names_a_revoked_guid_loses_a_member() {
        let mut c = with_session();
        // A refused write of the item says nothing of revocations.
        c.beat_answered(1, ms(10), Answer::NotOurs, &[30], LONGEST_PAUSE);
        assert!(!c.events().contains(&(3, Event::Lost(Lost::Taken))));
        assert_eq!(c.hold(3).unwrap().lost, None);
        let mut c = with_session();
        c.beat_answered(1, ms(10), Answer::Renewed, &[30], LONGEST_PAUSE);
        assert_eq!(c.events(), vec![(3, Event::Lost(Lost::Taken))]);
        assert_eq!(c.hold(3).unwrap().lost, Some(Lost::Taken));
        assert_eq!(c.hold(2).unwrap().lost, None, "the other member is still held");
    }

    #[test]
    fn a_release_after_the_session_lapsed_finds_the_lock_lapsed_and_an_abandoned_member_lapses_with_it() {
        let mut c = with_session();
        // Lapsed by the clock, not yet declared by the item's heartbeat.
        c.release(2, Kind::FailOpen, ms(999));
        assert_eq!(c.hold(2).unwrap().lost, Some(Lost::Lapsed));
        c.abandon(3);
        assert_eq!(c.until(3), Some(ms(1000)), "an abandoned lock keeps counting down");
        assert_eq!(c.hold(3).unwrap().poll_timeout(), Some(ms(999)));
        let a = c.step(3, |h| h.handle_timeout(ms(999), None, 0, Duration::ZERO));
        assert_eq!(a, vec![hold::Action::Lost(Loss::Lapsed)]);
        assert_eq!(c.events(), vec![(3, Event::Lost(Lost::Lapsed))]);
    }

    #[test]
    fn close_abandons_the_session_item_then_the_held_locks_and_declares_each_lost_at_its_loss_moment() {
        let mut c = with_session();
        // A lock of its own lease, and one whose release was called.
        c.insert(4, Hold::new(beat_config(250), true, 40, Some(ms(0)), ms(0), 0));
        c.insert(5, Hold::new(beat_config(250), true, 50, Some(ms(0)), ms(0), 0));
        c.stop(5);
        assert_eq!(
            c.close(&[2, 3, 4, 5, 4]),
            vec![1, 2, 3, 4],
            "the item first; not a lock being released"
        );
        assert!(!c.lasts(1, ms(0)), "the session ended");
        assert_eq!(c.close(&[2, 3, 4, 5]), Vec::<Id>::new(), "once");
        assert_eq!(c.until(2), Some(ms(1000)), "an abandoned lock keeps counting down");
        let at = c.next_lapse().expect("locks to declare lost");
        assert_eq!(at, ms(999));
        c.lapse(at - ms(1));
        assert!(c.events().is_empty(), "not before its loss moment");
        c.lapse(at);
        let mut events = c.events();
        events.sort_by_key(|(id, _)| *id);
        assert_eq!(
            events,
            [1, 2, 3, 4].map(|id| (id, Event::Lost(Lost::Lapsed))).to_vec(),
            "every abandoned lock, once"
        );
        assert_eq!(c.next_lapse(), None, "nothing left to declare");
        c.lapse(ms(5000));
        assert!(c.events().is_empty());
    }

    #[test]
    fn a_removed_session_item_ends_its_session_and_a_lost_lock_is_told_once() {
        let mut c = with_session();
        c.remove(1);
        assert!(!c.lasts(1, ms(0)));
        assert_eq!(c.until(2), None, "no session item: no lease to count");
        // A refused update loses the lock, told once, and the next refusal tells nothing.
        for _ in 0..2 {
            c.update(2, ms(0));
            c.update_ends(2, true);
        }
        assert_eq!(c.events(), vec![(2, Event::Lost(Lost::Taken))]);
        assert!(c.events().is_empty());
    }
}
