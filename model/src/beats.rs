//! A client's machine (`client::Client`) with its held lock's heartbeats, for both models that
//! hold locks of the core's machines: the machines model's clients (`machines`) and the
//! session's client (`session`). The held lock is lock `LOCK` of its client's machine (with
//! the locks held through it when it is a session's item), whose `hold::Hold` decides its
//! life and whose line and ending decide what follows it, as in the addon; this is its wire.
//! Of the writes a heartbeat asks for, one is on the wire at a time (another is "not sent",
//! as when the addon's scheduler has no free slot), and only `left` heartbeats write.

use std::time::Duration;

use dynamodb_lock_core::client::{Client, Id};
use dynamodb_lock_core::ending;
use dynamodb_lock_core::heartbeat::{self, Time};
use dynamodb_lock_core::held;
use dynamodb_lock_core::hold::{self, Hold};
use dynamodb_lock_core::settings::Kind;

use crate::env::{ms, tick, Tick, RETRY_PAUSE_ONE_TICK};
use crate::item::G;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Beats {
    /// The holder's client machine: the lock is its `LOCK`, of the lock `u8`.
    pub client: Client<G, u8>,
    /// The heartbeat's write: its `guid`s, its new `guid`, and how it stands (`Landed(true, _)`:
    /// renewed, `Landed(false, _)`: refused; with the `guid` of a lock the renewed session's
    /// item names revoked, 0 for none).
    pub net: Option<([G; 2], G, BeatNet)>,
    /// Heartbeats that write, left to start.
    pub left: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BeatNet {
    Out,
    Landed(bool, G),
    Lost,
}

/// What may happen to a heartbeat: it is due (or its timer fires), its write lands, its
/// answer comes back, or the write or its answer is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeatEvent {
    Due,
    Land,
    Answer,
    Lose,
}

/// What a heartbeat's actions did to the lock, for the model that holds it.
#[derive(Default)]
pub struct Carried {
    /// Renewed until then.
    pub renewed: Option<Tick>,
    /// The lock is lost.
    pub lost: bool,
    /// A release that waited for the heartbeat's write goes on, as `held::Held` says.
    pub release: Option<held::Release<G>>,
    /// A write given up on while out (the first, if several): it may still land.
    pub abandoned: Option<([G; 2], G)>,
}

impl Carried {
    /// The new end of the lease on the holder's clock, if it changed: `now` once the lock is
    /// lost, else the end of its renewal.
    pub fn until(&self, now: Tick) -> Option<Tick> {
        if self.lost {
            Some(now)
        } else {
            self.renewed
        }
    }
}

/// The heartbeating lock's id in its client machine.
pub const LOCK: Id = 0;

impl Beats {
    /// A client machine that holds nothing yet, whose waiters in line wait `line_patience`.
    pub fn new(timer_grain: Duration, line_patience: Duration) -> Beats {
        Beats {
            client: Client::new(timer_grain).with_line_patience(line_patience),
            net: None,
            left: 0,
        }
    }

    /// Lock `key` is taken under `g` at `now` (a lock before it under `LOCK` is forgotten),
    /// its lease counted from `sent_at` if it has one, and it holds its line; its holder
    /// counts it held from `since` (what its ending counts). With `left` above zero it
    /// heartbeats that many times, first at the period's last point that the addon's random
    /// number may pick.
    #[allow(clippy::too_many_arguments)]
    pub fn take(
        &mut self,
        cfg: heartbeat::Config,
        key: u8,
        g: G,
        sent_at: Option<Time>,
        now: Time,
        since: Tick,
        left: u8,
    ) {
        let last = (cfg.period.as_micros() as u64).saturating_sub(1);
        self.client.remove(LOCK);
        let hold = Hold::new(cfg, left > 0, g, sent_at, now, last);
        self.client.taken(LOCK, key, hold, ms(since));
        self.client.line_holds(LOCK);
        self.net = None;
        self.left = left;
    }

    /// The lock's state.
    pub fn hold(&self) -> &Hold<G> {
        self.client.hold(LOCK).expect("the heartbeating lock")
    }

    /// Steps the lock in its client machine; the events it draws are the holders' to hear,
    /// and the model reads their effect from the holds.
    fn stepped(&mut self, step: impl FnOnce(&mut Hold<G>) -> Vec<hold::Action<G>>) -> Vec<hold::Action<G>> {
        let actions = self.client.step(LOCK, step);
        self.client.events();
        actions
    }

    /// When the lock is next stepped, if it needs to be.
    pub fn wake(&self) -> Option<Tick> {
        self.client.hold(LOCK)?.poll_timeout().map(tick)
    }

    /// A heartbeat is under way, or is to start (`writing`: only one that writes, while some
    /// are left).
    pub fn due(&self, writing: bool) -> bool {
        let Some(h) = self.client.hold(LOCK) else { return false };
        h.under_way() || ((!writing || self.left > 0) && h.poll_timeout().is_some())
    }

    /// The events that may happen to the heartbeat at `now` (`writing`: as `due`) while
    /// `faults` may still happen.
    pub fn may_happen(&self, writing: bool, now: Tick, faults: u8, mut push: impl FnMut(BeatEvent)) {
        if self.due(writing) && self.wake().is_some_and(|w| w <= now) {
            push(BeatEvent::Due);
        }
        match self.net.map(|n| n.2) {
            Some(BeatNet::Out) => push(BeatEvent::Land),
            Some(BeatNet::Landed(..)) => push(BeatEvent::Answer),
            _ => return,
        }
        if faults > 0 {
            push(BeatEvent::Lose);
        }
    }

    /// Heartbeat event `e` happens at `now`: its timer fires, or one starts (a writing one
    /// under the `guid` `fresh` gives while any are left, else one that only reports the loss
    /// moment); its write lands, as `renew` writes it (whether it renewed); its write or its
    /// answer is lost, one of the `faults` left; its answer comes back. What the lock asked
    /// for (nothing when only the write changed), carried out.
    pub fn happen(
        &mut self,
        e: BeatEvent,
        now: Tick,
        faults: &mut u8,
        fresh: impl FnOnce() -> G,
        renew: impl FnOnce([G; 2], G) -> (bool, G),
    ) -> Carried {
        let actions = match e {
            BeatEvent::Due => {
                let fresh = (!self.hold().under_way() && self.left > 0).then(|| {
                    self.left -= 1;
                    self.hold().held.pending.unwrap_or_else(fresh)
                });
                self.stepped(|h| h.handle_timeout(ms(now), fresh, RETRY_PAUSE_ONE_TICK, Duration::ZERO))
            }
            BeatEvent::Land => {
                let (gs, new, net) = self.net.as_mut().expect("a write on its way");
                let (renewed, revoked) = renew(*gs, *new);
                *net = BeatNet::Landed(renewed, revoked);
                Vec::new()
            }
            BeatEvent::Lose => {
                *faults -= 1;
                self.net.as_mut().expect("a write on its way").2 = BeatNet::Lost;
                Vec::new()
            }
            BeatEvent::Answer => {
                let Some((_, _, BeatNet::Landed(ok, revoked))) = self.net.take() else {
                    unreachable!("an answer to a write that landed")
                };
                // A session's item may name a lock an operator revoked (0: none).
                let (answer, revoked) = match ok {
                    true => (
                        heartbeat::Answer::Renewed,
                        [revoked].into_iter().filter(|&g| g != 0).collect(),
                    ),
                    false => (heartbeat::Answer::NotOurs, Vec::new()),
                };
                let actions = (self.client).beat_answered(LOCK, ms(now), answer, &revoked, RETRY_PAUSE_ONE_TICK);
                self.client.events();
                actions
            }
        };
        self.carry(actions)
    }

    /// The write on the wire that has not landed yet, if any (its `guid`s and new `guid`): given
    /// up on, or outliving its client, it may still land.
    pub fn unlanded(&self) -> Option<([G; 2], G)> {
        match self.net {
            Some((gs, new, BeatNet::Out)) => Some((gs, new)),
            _ => None,
        }
    }

    /// The release of a lock of `kind` is called at `now`.
    pub fn release(&mut self, kind: Kind, now: Tick) -> held::Release<G> {
        self.client.stop(LOCK);
        self.client.release(LOCK, kind, ms(now))
    }

    /// The lock's end came to `outcome` at `now` (`client::Client::ended`), and the machine
    /// forgets it.
    pub fn ended<E>(&mut self, outcome: &ending::Outcome<G, E>, now: Time) {
        self.client.ended(LOCK, outcome, false, now);
        self.client.remove(LOCK);
        self.net = None;
        self.left = 0;
    }

    /// Each line the machine moved on (`client::Client::line_moves`) gives its next waiter the
    /// turn to try for itself, an acquisition the models follow no further: every waiter is
    /// done at once, and the line ends. Whether a waiter was given such a turn.
    pub fn line_moves(&mut self) -> bool {
        let mut given = false;
        for key in self.client.line_moves() {
            while self.client.line_next(&key, Time::ZERO, false).is_some() {
                given = true;
            }
        }
        given
    }

    /// The lock writes no more heartbeats (the model's bound on writes).
    pub fn stop_writing(&mut self) {
        if let Some(h) = self.client.hold_mut(LOCK) {
            h.stop_writing();
        }
    }

    /// Carries out what the lock asks for.
    fn carry(&mut self, actions: Vec<hold::Action<G>>) -> Carried {
        let mut carried = Carried::default();
        for a in actions {
            match a {
                hold::Action::Write { guids, new } if self.net.is_none() => {
                    self.net = Some((guids, new, BeatNet::Out));
                }
                hold::Action::Write { .. } => {
                    if let Some(h) = self.client.hold_mut(LOCK) {
                        h.write_not_sent();
                    }
                }
                hold::Action::Abandon => {
                    if let Some((gs, new, BeatNet::Out)) = self.net.take() {
                        carried.abandoned.get_or_insert((gs, new));
                    }
                }
                hold::Action::Failed(_) | hold::Action::Danger { .. } => {}
                hold::Action::Renewed { until } => carried.renewed = Some(tick(until)),
                hold::Action::Lost(_) => carried.lost = true,
                hold::Action::Release(release) => carried.release = Some(release),
            }
        }
        carried
    }
}
