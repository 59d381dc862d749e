//! What one client decides from what it knows itself, without a request: the line of its
//! acquisitions of one lock id, and its stand-back from a lock it released while others
//! waited.
//!
//! The line:
//! - Acquisitions of one id by one client wait in arrival order while another acquisition of
//!   that id by the same client asks for the lock or holds it. Only the first speaks to
//!   DynamoDB; the others cost no request until their turn.
//! - The holder's end (`ending::Ending`) hands the lock to the next in line with one write, or
//!   lets the next one try for itself. A waiter that gave up is never handed anything: the
//!   turn goes to the next one still there, and a hand-over nobody is left to take is
//!   released by its holder (`Ending::unclaimed`).
//! - The line knows the lock that holds it (`holds`): a lock that ends without a hand-over
//!   (released, lost, abandoned) gives the next waiter its turn to try for itself once, and
//!   only while it holds the line (`leaves`); a turn given moves the line on from it.
//! - A waiter waits for each holder at most `Lock::line_patience` (what the original library
//!   would have waited), counted again from the moment the line's holder changes.
//! - A lock handed over within a session is taken only while that session is still the
//!   client's current one (`takes_handed`); otherwise the next in line tries for itself.
//!
//! The stand-back: after a release while others waited, the client's next acquisition of the
//! same lock pauses until the instant the release gave (`ending::Outcome::Released`), so that
//! a waiter, which first has to read the release, takes its turn.
//!
//! The Fifo registry (`Queues`): per resource, this client's queue entries and the heads it
//! holds or released, which its Fifo acquisitions ask (`fifo::Here`) instead of the table. A
//! release or an abort in this client wakes its waiters behind at once, without a request.
//! It keeps entries only while an acquisition of this client waits in the queue (only waiters
//! behind an entry look at it), released heads only while one waits too (at most 64), and a
//! held head as long as its lock is there.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::broken::{self, Broken};
use crate::fifo::Mine;
use crate::request::Time;

/// One acquisition waiting in a line.
pub type Waiter = u64;

/// A lock of the client (`client::Id`).
pub type LockId = u64;

/// How many recently released locks a client remembers standing back from.
pub const STAND_BACK_KEYS: usize = 4096;

/// Where `join` put an acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Nobody of this client had the id: the acquisition leads the line and asks DynamoDB.
    Head,
    /// Another acquisition of the id by this client is ahead.
    Queued(Waiter),
}

/// What a waiter's patience says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    /// It waits for the current holder until then.
    Waits(Time),
    /// It waited the whole patience for one holder: it has left the line and gives up.
    GivesUp,
    /// Its turn was given: it takes it, whatever the time.
    Turned,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Line {
    waiters: VecDeque<Waiter>,
    /// When the current holder (or the acquisition asking DynamoDB) got its turn.
    holder_since: Time,
    /// The lock that holds the line; `None` while the acquisition with the turn has none.
    holder: Option<LockId>,
}

/// A client's lines and stand-backs, by lock id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Local<K: Ord> {
    lines: BTreeMap<K, Line>,
    stand_back: BTreeMap<K, Time>,
    next_waiter: Waiter,
    patience: Duration,
}

impl<K: Ord + Clone> Local<K> {
    /// `patience`: how long a waiter waits for one holder (`Lock::line_patience`).
    pub fn new(patience: Duration) -> Self {
        Local {
            lines: BTreeMap::new(),
            stand_back: BTreeMap::new(),
            next_waiter: 0,
            patience,
        }
    }

    /// Joins the line of `key`, or starts it.
    pub fn join(&mut self, key: &K, now: Time) -> Place {
        match self.lines.get_mut(key) {
            Some(line) => {
                let w = self.next_waiter;
                self.next_waiter += 1;
                line.waiters.push_back(w);
                Place::Queued(w)
            }
            None => {
                self.lines.insert(
                    key.clone(),
                    Line {
                        waiters: VecDeque::new(),
                        holder_since: now,
                        holder: None,
                    },
                );
                Place::Head
            }
        }
    }

    /// Whether someone waits in the line of `key`: a release hands the lock over.
    pub fn has_waiters(&self, key: &K) -> bool {
        self.lines.get(key).is_some_and(|l| !l.waiters.is_empty())
    }

    /// Whether the line of `key` exists: an acquisition of it by this client asks DynamoDB, or
    /// holds the lock.
    pub fn has_line(&self, key: &K) -> bool {
        self.lines.contains_key(key)
    }

    fn queued(&self, key: &K, w: Waiter) -> bool {
        self.lines.get(key).is_some_and(|l| l.waiters.contains(&w))
    }

    /// What waiter `w`'s patience says at `now`. Giving up, it leaves the line.
    pub fn patience(&mut self, key: &K, w: Waiter, now: Time) -> Patience {
        let Some(line) = self.lines.get(key).filter(|_| self.queued(key, w)) else {
            return Patience::Turned;
        };
        let until = line.holder_since.saturating_add(self.patience);
        if now < until {
            return Patience::Waits(until);
        }
        self.quit(key, w);
        Patience::GivesUp
    }

    /// Waiter `w` leaves the line without its turn (aborted, or its own wait ran out).
    /// `false`: its turn was already given, and it must take it or pass it on.
    pub fn quit(&mut self, key: &K, w: Waiter) -> bool {
        if broken::on(Broken::LineKeepsQuitter) {
            return self.queued(key, w);
        }
        let Some(line) = self.lines.get_mut(key) else {
            return false;
        };
        match line.waiters.iter().position(|x| *x == w) {
            Some(i) => {
                line.waiters.remove(i);
                true
            }
            None => false,
        }
    }

    /// The holder of `key` is done: the next waiter gets the turn (`Some`), which starts its
    /// patience over. A turn that only lets the next one try for itself (`handed` false) and
    /// finds nobody ends the line; a handed lock nobody takes keeps it, for its holder to
    /// release and then leave.
    pub fn next(&mut self, key: &K, now: Time, handed: bool) -> Option<Waiter> {
        let line = self.lines.get_mut(key)?;
        match line.waiters.pop_front() {
            Some(w) => {
                line.holder_since = now;
                line.holder = None;
                Some(w)
            }
            None => {
                if !handed {
                    self.lines.remove(key);
                }
                None
            }
        }
    }

    /// Lock `lock` holds the line of `key`: the acquisition with the turn took it.
    pub fn holds(&mut self, key: &K, lock: LockId) {
        if let Some(line) = self.lines.get_mut(key) {
            line.holder = Some(lock);
        }
    }

    /// The line's turn moves on from `lock` (`None`: the acquisition with the turn, which took
    /// no lock), which is done with `key` without a hand-over: whether it held the line, which
    /// then gives the next waiter its turn (`next`, not handed). Once per lock.
    pub fn leaves(&mut self, key: &K, lock: Option<LockId>) -> bool {
        let Some(line) = self.lines.get_mut(key) else {
            return false;
        };
        if line.holder != lock {
            return false;
        }
        line.holder = None;
        true
    }

    /// `key` was released while others waited: this client stands back from it until
    /// `until`.
    pub fn released(&mut self, key: &K, until: Time, now: Time) {
        if self.stand_back.len() >= STAND_BACK_KEYS {
            self.stand_back.retain(|_, t| *t > now);
        }
        if self.stand_back.len() < STAND_BACK_KEYS || self.stand_back.contains_key(key) {
            self.stand_back.insert(key.clone(), until);
        }
    }

    /// Until when this client's next acquisition of `key` stands back. Asking ends it.
    pub fn stand_back(&mut self, key: &K) -> Option<Time> {
        self.stand_back.remove(key)
    }
}

/// A head this client holds, as the registry sees it (a held lock), asked through what knows
/// it (`of`: the client machine's locks for a lock's id; nothing, `()`, for a head that tells
/// its own state).
pub trait Head<C: ?Sized = ()> {
    /// At `now`: `None`, the lock is gone (dropped); `Some(true)`, lost, as far as can be told
    /// without waiting (a heartbeat in flight may yet renew it: a lock with one is live).
    fn lost(&self, of: &C, now: Time) -> Option<bool>;
    /// Its release has begun, or it was abandoned.
    fn stopping(&self, of: &C) -> bool;
}

/// Released heads remembered per resource while this client has waiters there.
pub const HELD_KEPT: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Held<H> {
    Holding(H),
    Released,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Queue<H> {
    /// This client's queue entries, by position.
    entries: BTreeMap<u64, Mine>,
    /// Heads this client holds or held, by token.
    held: BTreeMap<u64, Held<H>>,
    /// Acquisitions of this client waiting in this queue.
    waiting: usize,
    /// Heads (or a semaphore's permits) this client released, so far, while anyone waited.
    releases: u64,
}

impl<H> Default for Queue<H> {
    fn default() -> Self {
        Queue {
            entries: BTreeMap::new(),
            held: BTreeMap::new(),
            waiting: 0,
            releases: 0,
        }
    }
}

/// A client's Fifo registry, by resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Queues<K: Ord, H> {
    queues: BTreeMap<K, Queue<H>>,
}

impl<K: Ord, H> Default for Queues<K, H> {
    fn default() -> Self {
        Queues {
            queues: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone, H> Queues<K, H> {
    /// Changes the queue of `r`, then forgets what no acquisition of this client needs at
    /// `now` (its heads asked through `of`).
    fn with<C: ?Sized, R>(&mut self, r: &K, of: &C, now: Time, f: impl FnOnce(&mut Queue<H>) -> R) -> R
    where
        H: Head<C>,
    {
        let q = self.queues.entry(r.clone()).or_default();
        let out = f(q);
        if q.waiting == 0 {
            q.entries.clear();
            // Forget released heads, and held ones whose lock is gone.
            q.held
                .retain(|_, h| matches!(h, Held::Holding(lock) if lock.lost(of, now).is_some()));
            if q.held.is_empty() {
                self.queues.remove(r);
            }
        } else {
            let last_waiting = q
                .entries
                .iter()
                .rev()
                .find(|(_, m)| **m == Mine::Waiting)
                .map(|(p, _)| *p);
            // Only waiters behind an entry look at it.
            q.entries
                .retain(|p, m| *m == Mine::Waiting || last_waiting.is_some_and(|w| *p < w));
            while q.held.len() > HELD_KEPT {
                q.held.pop_first();
            }
        }
        out
    }

    /// What this client knows of its entry at `position` of `r`'s queue.
    pub fn entry(&self, r: &K, position: u64) -> Option<Mine> {
        self.queues.get(r).and_then(|q| q.entries.get(&position).copied())
    }

    /// An acquisition of this client waits at `position` of `r`'s queue.
    pub fn join<C: ?Sized>(&mut self, r: &K, position: u64, of: &C, now: Time)
    where
        H: Head<C>,
    {
        self.with(r, of, now, |q| {
            q.waiting += 1;
            q.entries.insert(position, Mine::Waiting);
        });
    }

    /// That acquisition no longer waits at `position`: its entry is `mine` now, or unknown
    /// (`None`: waiters behind read the table).
    pub fn leave<C: ?Sized>(&mut self, r: &K, position: u64, mine: Option<Mine>, of: &C, now: Time)
    where
        H: Head<C>,
    {
        self.with(r, of, now, |q| {
            q.waiting = q.waiting.saturating_sub(1);
            match mine {
                Some(m) => q.entries.insert(position, m),
                None => q.entries.remove(&position),
            };
        });
    }

    /// This client holds `r`'s head with `token`, as `lock`.
    pub fn hold<C: ?Sized>(&mut self, r: &K, token: u64, lock: H, of: &C, now: Time)
    where
        H: Head<C>,
    {
        self.with(r, of, now, |q| q.held.insert(token, Held::Holding(lock)));
    }

    /// This client released `r`'s head with `token` (or permits of it).
    pub fn released<C: ?Sized>(&mut self, r: &K, token: u64, of: &C, now: Time)
    where
        H: Head<C>,
    {
        self.with(r, of, now, |q| {
            if let Some(h) = q.held.get_mut(&token) {
                *h = Held::Released;
            }
            q.releases += 1;
        });
    }

    /// The token under which this client holds `r`'s head as `lock`, while it holds it.
    pub fn token_of(&self, r: &K, lock: &H) -> Option<u64>
    where
        H: PartialEq,
    {
        let q = self.queues.get(r)?;
        q.held
            .iter()
            .find_map(|(t, h)| matches!(h, Held::Holding(l) if l == lock).then_some(*t))
    }

    /// How many locks this client released on `r` while it had a waiter there.
    pub fn releases(&self, r: &K) -> u64 {
        self.queues.get(r).map_or(0, |q| q.releases)
    }

    /// Whether this client holds the head of `r` with `token` (`Some(false)`: its release
    /// wakes the waiters) or has just released it (`Some(true)`). `None` also for a lock of
    /// this client that was lost or dropped: only the table knows.
    pub fn holder<C: ?Sized>(&self, r: &K, token: u64, of: &C, now: Time) -> Option<bool>
    where
        H: Head<C>,
    {
        match self.queues.get(r)?.held.get(&token)? {
            Held::Released => Some(true),
            Held::Holding(lock) => (!lock.lost(of, now)?).then_some(false),
        }
    }

    /// Whether an acquisition of this client waits in `r`'s queue, or a lock of this client
    /// holds its head and is not on its way out.
    pub fn busy<C: ?Sized>(&self, r: &K, of: &C, now: Time) -> bool
    where
        H: Head<C>,
    {
        self.queues.get(r).is_some_and(|q| {
            q.waiting > 0
                || q.held
                    .values()
                    .any(|h| matches!(h, Held::Holding(lock) if lock.lost(of, now).is_some() && !lock.stopping(of)))
        })
    }

    /// The held head of `r` with `token`, while it is held here.
    pub fn head_mut(&mut self, r: &K, token: u64) -> Option<&mut H> {
        match self.queues.get_mut(r)?.held.get_mut(&token)? {
            Held::Holding(h) => Some(h),
            Held::Released => None,
        }
    }

    /// Resources this client keeps state for.
    pub fn tracked(&self) -> usize {
        self.queues.len()
    }
}

/// Whether an acquisition takes a lock handed over within `handed` (the session the lock is
/// held through, if any) while `current` is the client's session: only within the same one.
pub fn takes_handed<S: PartialEq>(handed: Option<&S>, current: Option<&S>) -> bool {
    handed.is_none_or(|h| current == Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ms;

    #[test]
    fn turns_go_in_arrival_order_and_skip_those_who_quit() {
        let mut l = Local::new(ms(100));
        assert_eq!(l.join(&"a", ms(0)), Place::Head);
        let ws: Vec<Waiter> = (0..3)
            .map(|_| match l.join(&"a", ms(0)) {
                Place::Queued(w) => w,
                Place::Head => panic!("the line exists"),
            })
            .collect();
        assert!(l.quit(&"a", ws[1]), "queued: it leaves");
        assert_eq!(l.next(&"a", ms(5), false), Some(ws[0]));
        assert!(!l.quit(&"a", ws[0]), "its turn was given");
        assert_eq!(l.next(&"a", ms(6), false), Some(ws[2]));
        assert!(l.has_line(&"a") && !l.has_waiters(&"a"));
        assert_eq!(l.next(&"a", ms(7), false), None);
        assert!(!l.has_line(&"a"), "the line ended");
        assert_eq!(l.join(&"a", ms(8)), Place::Head);
    }

    #[test]
    fn a_handed_lock_nobody_takes_keeps_the_line_for_its_release() {
        let mut l = Local::new(ms(100));
        l.join(&"a", ms(0));
        let Place::Queued(w) = l.join(&"a", ms(0)) else {
            panic!("queued")
        };
        assert!(l.quit(&"a", w));
        assert_eq!(l.next(&"a", ms(1), true), None);
        assert!(l.has_line(&"a"), "the holder releases, then leaves");
        assert_eq!(l.next(&"a", ms(2), false), None);
        assert!(!l.has_line(&"a"));
    }

    #[test]
    fn patience_counts_per_holder() {
        let mut l = Local::new(ms(100));
        l.join(&"a", ms(0));
        let Place::Queued(w1) = l.join(&"a", ms(10)) else {
            panic!("queued")
        };
        let Place::Queued(w2) = l.join(&"a", ms(20)) else {
            panic!("queued")
        };
        assert_eq!(l.patience(&"a", w1, ms(50)), Patience::Waits(ms(100)));
        // The holder changes at 80 ms: w2's patience starts over.
        assert_eq!(l.next(&"a", ms(80), true), Some(w1));
        assert_eq!(l.patience(&"a", w1, ms(500)), Patience::Turned);
        assert_eq!(l.patience(&"a", w2, ms(100)), Patience::Waits(ms(180)));
        assert_eq!(l.patience(&"a", w2, ms(180)), Patience::GivesUp);
        assert!(!l.has_waiters(&"a"), "it left the line");
    }

    #[test]
    fn only_the_lock_that_holds_the_line_moves_it_on_and_once() {
        let mut l = Local::new(ms(100));
        assert_eq!(l.join(&"a", ms(0)), Place::Head);
        let Place::Queued(w) = l.join(&"a", ms(0)) else {
            panic!("queued")
        };
        assert!(!l.leaves(&"b", None), "no line");
        l.holds(&"a", 7);
        assert!(!l.leaves(&"a", Some(8)), "not the holder");
        assert!(!l.leaves(&"a", None), "the line's holder has a lock");
        assert!(l.leaves(&"a", Some(7)));
        assert!(!l.leaves(&"a", Some(7)), "once");
        assert_eq!(l.next(&"a", ms(1), false), Some(w));
        // The waiter's turn: it tries, fails and takes no lock.
        assert!(l.leaves(&"a", None));
        assert_eq!(l.next(&"a", ms(2), false), None);
        assert!(!l.has_line(&"a"));
        // A turn given moves the line on from its holder.
        l.join(&"a", ms(3));
        l.holds(&"a", 9);
        l.join(&"a", ms(3));
        assert!(l.next(&"a", ms(4), true).is_some(), "handed over");
        assert!(!l.leaves(&"a", Some(9)), "no longer the holder");
        l.holds(&"a", 10);
        assert!(l.leaves(&"a", Some(10)));
    }

    #[test]
    fn a_stand_back_is_asked_once() {
        let mut l = Local::new(ms(100));
        l.released(&"a", ms(30), ms(10));
        assert_eq!(l.stand_back(&"b"), None);
        assert_eq!(l.stand_back(&"a"), Some(ms(30)));
        assert_eq!(l.stand_back(&"a"), None);
    }

    #[test]
    fn stand_backs_are_bounded_and_forget_the_past_first() {
        let mut l = Local::new(ms(100));
        for k in 0..STAND_BACK_KEYS {
            l.released(&k, ms(10), ms(0));
        }
        l.released(&STAND_BACK_KEYS, ms(50), ms(5));
        assert_eq!(l.stand_back(&STAND_BACK_KEYS), None, "full of live stand-backs");
        l.released(&STAND_BACK_KEYS, ms(50), ms(20));
        assert_eq!(l.stand_back(&STAND_BACK_KEYS), Some(ms(50)), "the past ones went");
        assert_eq!(l.stand_back(&0), None);
    }

    #[test]
    fn a_handed_lock_is_taken_only_within_the_current_session() {
        assert!(takes_handed::<&str>(None, None));
        assert!(takes_handed::<&str>(None, Some(&"s1")));
        assert!(takes_handed(Some(&"s1"), Some(&"s1")));
        assert!(!takes_handed(Some(&"s1"), Some(&"s2")));
        assert!(!takes_handed(Some(&"s1"), None));
    }
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct H(Option<bool>, bool);

    impl Head for H {
        fn lost(&self, _: &(), _: Time) -> Option<bool> {
            self.0
        }
        fn stopping(&self, _: &()) -> bool {
            self.1
        }
    }

    const LIVE: H = H(Some(false), false);
    const T: Time = Time::ZERO;

    #[test]
    fn a_queue_is_kept_while_this_client_waits_there_or_holds_its_head() {
        let mut q: Queues<&str, H> = Queues::default();
        q.join(&"r", 3, &(), T);
        q.join(&"r", 5, &(), T);
        assert!(q.busy(&"r", &(), T));
        assert_eq!(q.entry(&"r", 3), Some(Mine::Waiting));
        // The entry at 3 was granted; the waiter at 5 still looks at it.
        q.leave(&"r", 3, Some(Mine::Granted(7)), &(), T);
        q.hold(&"r", 7, LIVE, &(), T);
        assert_eq!(q.entry(&"r", 3), Some(Mine::Granted(7)));
        assert_eq!(
            q.holder(&"r", 7, &(), T),
            Some(false),
            "held here: its release wakes the waiter"
        );
        q.released(&"r", 7, &(), T);
        assert_eq!(q.holder(&"r", 7, &(), T), Some(true), "released here just now");
        assert_eq!(q.releases(&"r"), 1);
        // The last waiter leaves: entries and released heads are forgotten.
        q.leave(&"r", 5, None, &(), T);
        assert_eq!(q.entry(&"r", 3), None);
        assert_eq!(q.holder(&"r", 7, &(), T), None);
        assert_eq!(q.tracked(), 0);
    }

    #[test]
    fn a_lost_stopping_or_dropped_head_is_not_vouched_for() {
        let mut q: Queues<&str, H> = Queues::default();
        q.join(&"r", 1, &(), T);
        q.hold(&"r", 1, H(Some(true), false), &(), T);
        q.hold(&"r", 2, H(None, false), &(), T);
        q.hold(&"r", 3, H(Some(false), true), &(), T);
        assert_eq!(q.holder(&"r", 1, &(), T), None, "lost: only the table knows");
        assert_eq!(q.holder(&"r", 2, &(), T), None, "dropped");
        assert_eq!(q.holder(&"r", 3, &(), T), Some(false));
        q.leave(&"r", 1, None, &(), T);
        assert_eq!(q.tracked(), 1, "the held heads whose locks are there are kept");
        let mut q: Queues<&str, H> = Queues::default();
        q.hold(&"s", 1, H(Some(false), true), &(), T);
        assert!(
            !q.busy(&"s", &(), T),
            "a head on its way out keeps nobody from the one-request take"
        );
        q.hold(&"s", 2, LIVE, &(), T);
        assert!(q.busy(&"s", &(), T));
    }

    #[test]
    fn released_heads_kept_are_bounded() {
        let mut q: Queues<&str, H> = Queues::default();
        q.join(&"r", 1_000, &(), T);
        for t in 0..(HELD_KEPT as u64 + 10) {
            q.hold(&"r", t, LIVE, &(), T);
            q.released(&"r", t, &(), T);
        }
        assert_eq!(q.holder(&"r", 0, &(), T), None, "the oldest were forgotten");
        assert_eq!(q.holder(&"r", HELD_KEPT as u64 + 9, &(), T), Some(true));
    }
}
