//! A FailOpen holder's heartbeats, stepped as the addon's scheduler steps them
//! (src/heartbeat.rs `beat`), for both models that hold such a lock: the lease model's clients
//! (`machines`) and the session's item (`session`). The core's `held::Held` keeps the `guid`s,
//! the core's `heartbeat::Beat` runs one heartbeat at a time. Of the writes a heartbeat asks
//! for, one is on the wire at a time (another is "not sent", as when the scheduler has no free
//! slot).

use std::time::Duration;

use dynamodb_lock_core::heartbeat::{self, Beat};
use dynamodb_lock_core::held::{self, Held};
use dynamodb_lock_core::settings::Kind;

use crate::env::{ms, tick, Tick};
use crate::item::G;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Beats {
    pub held: Held<G>,
    pub beat: Option<Beat>,
    /// The heartbeat's write: its `guid`s, its new `guid`, and how it stands (`Landed(true)`:
    /// renewed, `Landed(false)`: refused).
    pub net: Option<([G; 2], G, BeatNet)>,
    /// When the heartbeat must be stepped, or the next is due.
    pub wake: Tick,
    /// Heartbeats that write, left to start.
    pub left: u8,
    /// `release()` was called and waits for the heartbeat's write.
    pub releasing: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BeatNet {
    Out,
    Landed(bool),
    Lost,
}

/// What a heartbeat's actions did to the lock, for the model that holds it.
pub struct Carried {
    /// Renewed until then (the next heartbeat is due at `Beats::wake`).
    pub renewed: Option<Tick>,
    /// The lock is lost.
    pub lost: bool,
    /// A release that waited for the heartbeat's write goes on, as `held::Held` says.
    pub release: Option<held::Release<G>>,
}

impl Beats {
    /// A heartbeat is to start (`writing`: only one that writes, while some are left) or to be
    /// stepped at `wake`.
    pub fn due(&self, writing: bool) -> bool {
        self.beat.is_some() || (!self.releasing && (!writing || self.left > 0) && self.held.beats())
    }

    /// The heartbeat's timer fires, or a heartbeat starts on a lease that ends at `until`: a
    /// writing one under the `guid` `fresh` gives while any are left, else the one that
    /// reports the loss moment.
    pub fn step(
        &mut self,
        cfg: heartbeat::Config,
        until: Tick,
        now: Tick,
        fresh: impl FnOnce() -> G,
    ) -> Vec<heartbeat::Action> {
        if let Some(b) = self.beat.as_mut() {
            return b.timer(ms(now), ms(1), Duration::ZERO);
        }
        if self.left > 0 {
            let fresh = self.held.pending.unwrap_or_else(fresh);
            self.held.beat_starts(fresh).expect("a lock that needs heartbeats");
            self.left -= 1;
        }
        let (b, actions) = Beat::start(cfg, ms(self.wake), ms(until), ms(now), Duration::ZERO);
        self.beat = Some(b);
        actions
    }

    /// The heartbeat's write was answered.
    pub fn answered(&mut self, now: Tick) -> Vec<heartbeat::Action> {
        let Some((_, _, BeatNet::Landed(ok))) = self.net.take() else {
            unreachable!("an answer to a write that landed")
        };
        self.held.on_the_wire(false);
        let answer = if ok {
            heartbeat::Answer::Renewed
        } else {
            heartbeat::Answer::NotOurs
        };
        match self.beat.as_mut() {
            Some(b) => b.answer(ms(now), answer, ms(1)),
            None => Vec::new(),
        }
    }

    /// Carries out what the heartbeat asks for; a write given up on while out goes to
    /// `stray` (it may still land).
    pub fn carry(&mut self, actions: Vec<heartbeat::Action>, mut stray: impl FnMut([G; 2], G)) -> Carried {
        let mut carried = Carried {
            renewed: None,
            lost: false,
            release: None,
        };
        for a in actions {
            match a {
                heartbeat::Action::Write => {
                    let b = self.beat.as_mut().expect("a heartbeat");
                    match (self.net, self.held.pending) {
                        (None, Some(new)) => {
                            self.net = Some(([self.held.guid, new], new, BeatNet::Out));
                            self.held.on_the_wire(true);
                        }
                        _ => b.write_not_sent(),
                    }
                }
                heartbeat::Action::Abandon => {
                    if let Some((gs, new, st)) = self.net.take() {
                        if st == BeatNet::Out {
                            stray(gs, new);
                        }
                    }
                    self.held.on_the_wire(false);
                }
                heartbeat::Action::Failed { .. } | heartbeat::Action::Danger { .. } => {}
                heartbeat::Action::Landed => self.held.landed(),
                heartbeat::Action::Renewed { until, next } => {
                    self.beat = None;
                    self.wake = tick(next);
                    carried.renewed = Some(tick(until));
                }
                heartbeat::Action::Lost(loss) => {
                    self.held.lose(match loss {
                        heartbeat::Loss::Lapsed => held::Lost::Lapsed,
                        heartbeat::Loss::NotOurs => held::Lost::Taken,
                    });
                    self.beat = None;
                    carried.lost = true;
                }
            }
        }
        if let Some(t) = self.beat.as_ref().and_then(|b| b.poll_timeout()) {
            self.wake = tick(t);
        }
        // A release that waited for the heartbeat's write goes on once it is answered.
        if self.releasing && self.net.is_none() {
            self.releasing = false;
            self.beat = None;
            self.held.on_the_wire(false);
            carried.release = Some(self.held.release(Kind::FailOpen));
        }
        carried
    }
}
