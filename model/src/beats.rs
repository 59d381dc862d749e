//! A FailOpen holder's heartbeats, for both models that hold such a lock: the lease model's
//! clients (`machines`) and the session's item (`session`). The core's `hold::Hold` decides
//! the held lock's life, as it does in the addon; this is its wire. Of the writes a heartbeat
//! asks for, one is on the wire at a time (another is "not sent", as when the addon's
//! scheduler has no free slot), and only `left` heartbeats write.

use std::time::Duration;

use dynamodb_lock_core::heartbeat::{self, Time};
use dynamodb_lock_core::held;
use dynamodb_lock_core::hold::{self, Hold};
use dynamodb_lock_core::settings::Kind;

use crate::env::{ms, tick, Tick};
use crate::item::G;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Beats {
    pub hold: Hold<G>,
    /// The heartbeat's write: its `guid`s, its new `guid`, and how it stands (`Landed(true)`:
    /// renewed, `Landed(false)`: refused).
    pub net: Option<([G; 2], G, BeatNet)>,
    /// Heartbeats that write, left to start.
    pub left: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BeatNet {
    Out,
    Landed(bool),
    Lost,
}

/// What a heartbeat's actions did to the lock, for the model that holds it.
pub struct Carried {
    /// Renewed until then.
    pub renewed: Option<Tick>,
    /// The lock is lost.
    pub lost: bool,
    /// A release that waited for the heartbeat's write goes on, as `held::Held` says.
    pub release: Option<held::Release<G>>,
}

impl Beats {
    /// A lock taken under `g` with the write sent at `sent_at`, at `now`; `beats`: it
    /// heartbeats, first at the period's last point that the addon's random number may pick.
    pub fn new(cfg: heartbeat::Config, beats: bool, g: G, sent_at: Time, now: Tick, left: u8) -> Beats {
        let last = (cfg.period.as_micros() as u64).saturating_sub(1);
        Beats {
            hold: Hold::new(cfg, beats, g, Some(sent_at), ms(now), last),
            net: None,
            left,
        }
    }

    /// When the lock is next stepped, if it needs to be.
    pub fn wake(&self) -> Option<Tick> {
        self.hold.poll_timeout().map(tick)
    }

    /// A heartbeat is under way, or is to start (`writing`: only one that writes, while some
    /// are left).
    pub fn due(&self, writing: bool) -> bool {
        self.hold.under_way() || ((!writing || self.left > 0) && self.hold.poll_timeout().is_some())
    }

    /// The heartbeat's timer fires, or one starts: a writing one under the `guid` `fresh`
    /// gives while any are left, else one that only reports the loss moment.
    pub fn step(&mut self, now: Tick, fresh: impl FnOnce() -> G) -> Vec<hold::Action<G>> {
        let fresh = (!self.hold.under_way() && self.left > 0).then(|| {
            self.left -= 1;
            self.hold.held.pending.unwrap_or_else(fresh)
        });
        self.hold.handle_timeout(ms(now), fresh, ms(1), Duration::ZERO)
    }

    /// The heartbeat's write was answered.
    pub fn answered(&mut self, now: Tick) -> Vec<hold::Action<G>> {
        let Some((_, _, BeatNet::Landed(ok))) = self.net.take() else {
            unreachable!("an answer to a write that landed")
        };
        let answer = if ok {
            heartbeat::Answer::Renewed
        } else {
            heartbeat::Answer::NotOurs
        };
        self.hold.handle_answer(ms(now), answer, ms(1))
    }

    /// The release is called.
    pub fn release(&mut self) -> held::Release<G> {
        self.hold.release(Kind::FailOpen)
    }

    /// Carries out what the lock asks for; a write given up on while out goes to `stray` (it
    /// may still land).
    pub fn carry(&mut self, actions: Vec<hold::Action<G>>, mut stray: impl FnMut([G; 2], G)) -> Carried {
        let mut carried = Carried {
            renewed: None,
            lost: false,
            release: None,
        };
        for a in actions {
            match a {
                hold::Action::Write { guids, new } if self.net.is_none() => {
                    self.net = Some((guids, new, BeatNet::Out));
                }
                hold::Action::Write { .. } => self.hold.write_not_sent(),
                hold::Action::Abandon => {
                    if let Some((gs, new, state)) = self.net.take() {
                        if state == BeatNet::Out {
                            stray(gs, new);
                        }
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
