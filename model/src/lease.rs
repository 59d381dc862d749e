//! A FailOpen holder's heartbeats against a waiter in another process, in time. The holder is
//! the core's held-lock machine itself (`dynamodb_lock_core::hold::Hold`, and within it the
//! heartbeat machine `heartbeat::Beat`), stepped by the model's clock exactly as the addon's
//! scheduler steps it: at the instant it asks for (`poll_timeout`), and whenever an answer
//! comes. Writes go to the item through the core's
//! `op::apply`; each write may be lost before it lands, land at once or a tick later, and its
//! answer may come at once, a tick later or never. The holder may be paused once (SIGSTOP, a
//! frozen Lambda) for longer than a lease; each waiter (one in the exhaustive search, up to four in
//! the simulator) is the core's FailOpen acquisition (`fail_open::Acquire`) that keeps trying,
//! started at any moment: it takes, waits out the lease it saw on its own clock (which may run
//! fast by `drift` ticks per lease), re-reads at its pace, and takes the lock on the condition
//! that the item still carries what it saw. Its requests land at once or `delay` ticks later and
//! are answered as they land. The holder may write its data once (`lock.update`, with
//! `Config::update`): the core's `request::Once` under the deadline the addon gives it, each
//! attempt lost, answered at once or after the delay, while the holder's machine holds back the
//! heartbeats that come due (and never the loss of its lease).
//!
//! Property, "a holder's loss is known no later than a rival's grant": when the waiter is
//! granted the lock, the holder has declared the loss, unless it is paused; and the first step
//! of a paused holder after it resumes declares it.

use std::time::Duration;

use dynamodb_lock_core::broken::{self, Broken};
use dynamodb_lock_core::fail_open::{self, Acquire};
use dynamodb_lock_core::heartbeat::{Answer, Config as BeatConfig};
use dynamodb_lock_core::held::Update;
use dynamodb_lock_core::hold::{Action as Step, Hold};
use dynamodb_lock_core::op::Reply;
use dynamodb_lock_core::request::{answer_of, Ended, Env, Machine as _, Once, Req, Step as MStep};
use dynamodb_lock_core::settings::Kind;

use crate::env::{self, ms, tick, Fail, Tick};
use crate::explore::{self, Checked, Model, Violation};
use crate::item::{Item, Ver, G};

pub const PROPERTY: &str = "a holder's loss is known no later than a rival's grant";

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub lease: Tick,
    pub period: Tick,
    pub danger_margin: Tick,
    /// A write lands, and an answer comes, after 0 or `delay` ticks.
    pub delay: Tick,
    /// How long the holder's one pause lasts.
    pub pause: Tick,
    /// Time ends here.
    pub horizon: Tick,
    /// The waiters' clocks run this many ticks fast over one lease.
    pub drift: Tick,
    /// Waiters in other processes (each reads, waits out and takes on its own).
    pub waiters: u8,
    /// The holder's client may close once without releasing the lock (`close()` without
    /// `releaseLocks`): the core's `Hold::abandon`.
    pub close: bool,
    /// The holder may write its data once (`lock.update`): the core's `request::Once` under
    /// the deadline its machine gives (`Hold::update`: `held::update_time`), its attempts
    /// timed out after a lease, with heartbeats parked behind it (`Hold::update_ends`).
    pub update: bool,
    pub bug: Option<Broken>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            lease: 6,
            period: 2,
            danger_margin: 2,
            delay: 1,
            pause: 8,
            horizon: 16,
            drift: 0,
            waiters: 1,
            close: false,
            update: false,
            bug: None,
        }
    }
}

/// A write on its way, `of` what it writes (a heartbeat's renewal, or an attempt of the
/// update), and its fate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Write<W, A> {
    of: W,
    /// When it lands (`None`: landed already, or lost before landing).
    land_at: Option<Tick>,
    /// How long its answer takes once it has landed (`None`: the answer is lost).
    answer_delay: Option<Tick>,
    answer_at: Option<Tick>,
    answer: Option<A>,
}

impl<W, A> Write<W, A> {
    /// A write of `of`, sent at `now` to meet `fate`.
    fn new(of: W, fate: Fate, now: Tick) -> Self {
        let land_at = fate.land.map(|d| now + d);
        Write {
            of,
            land_at,
            answer_delay: fate.answer,
            answer_at: None,
            answer: None,
        }
    }

    /// It lands at `now`, and is answered `answer`.
    fn lands(&mut self, answer: A, now: Tick) {
        self.land_at = None;
        self.answer = Some(answer);
        self.answer_at = self.answer_delay.map(|d| now + d);
    }
}

/// A heartbeat's renewal: it rotates the item's `guid` from one of `guids` to `new`; the
/// holder still waits for it (not abandoned).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Renewal {
    awaited: bool,
    guids: [G; 2],
    new: G,
}

/// The holder's write of its data (`lock.update`) under way: the machine, its attempt on the
/// wire (`None` between attempts) and when the machine asked to be stepped again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Updating {
    m: Box<Once<G, Ver>>,
    out: Option<Attempt>,
    wake: Option<Tick>,
}

/// An attempt of the update: its request and when it times out.
type Attempt = Write<(Req<G, Ver>, Tick), env::Ans>;

/// A waiter's acquisition under way: the machine, the request it sent (and when it lands,
/// once its delay is chosen), or when it asked to be stepped again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Asking {
    m: Box<Acquire<Item, Fail>>,
    req: Option<(Req<G, Ver>, Option<Tick>)>,
    wake: Option<Tick>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Waiter {
    Idle,
    Asking(Asking),
    Granted { at: Tick },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: Tick,
    item: Item,
    holder: Box<Hold<G>>,
    paused_until: Option<Tick>,
    pause_used: bool,
    /// The holder's client closed without releasing the lock.
    closed: bool,
    updating: Option<Updating>,
    update_used: bool,
    /// Resumed from a pause and not stepped since.
    resumed: bool,
    writes: Vec<Write<Renewal, Answer>>,
    waiters: Vec<Waiter>,
}

/// Where a write goes: lost before landing, or landing after `land` ticks with its answer
/// after `answer` more (or never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fate {
    land: Option<Tick>,
    answer: Option<Tick>,
}

/// A write lost before it lands.
const LOST: Fate = Fate {
    land: None,
    answer: None,
};

#[derive(Clone, Debug)]
pub enum Action {
    /// The holder's timer fires (a heartbeat is due, or the machine asked to be stepped);
    /// the fates of the writes it sends.
    HolderTimer(Vec<Fate>),
    /// The holder takes the answer to write `i`.
    HolderAnswer(usize, Vec<Fate>),
    /// Write `i` lands on the item.
    Land(usize),
    Pause,
    /// The holder's client closes without releasing the lock.
    Close,
    /// The holder calls `lock.update`; the fate of its first attempt.
    UpdateStart(Fate),
    /// The update's attempt lands on the item.
    UpdateLand,
    /// The holder takes the update's answer, or its timeout.
    UpdateAnswer,
    /// The update's machine is stepped at the instant it asked for; the fate of the attempt
    /// it sends.
    UpdateTimer(Fate),
    /// Waiter `i` starts acquiring.
    WaiterStart(usize),
    /// Waiter `i`'s request is on its way, landing after this many ticks.
    WaiterSend(usize, Tick),
    /// Waiter `i`'s request lands and is answered.
    WaiterLand(usize),
    /// Waiter `i`'s machine is stepped at the instant it asked for.
    WaiterTimer(usize),
    Tick,
}

pub struct LeaseModel {
    pub config: Config,
}

impl LeaseModel {
    fn beat_config(&self) -> BeatConfig {
        let c = &self.config;
        BeatConfig {
            danger_margin: ms(c.danger_margin),
            ..env::beat_config(c.lease, c.period, 1000, ms(1))
        }
    }

    fn fates(&self) -> Vec<Fate> {
        let d = self.config.delay;
        [
            (None, None),
            (Some(0), Some(0)),
            (Some(d), Some(0)),
            (Some(0), Some(d)),
            (Some(0), None),
        ]
        .map(|(land, answer)| Fate { land, answer })
        .to_vec()
    }

    /// The fates of an update's attempt that tell apart what the holder can see: when it ends
    /// (answered at once, answered after the delay, timed out) and whether it met the item
    /// before or after the delay (it writes only the holder's data: when else it lands
    /// changes nothing).
    fn update_fates(&self) -> Vec<Fate> {
        // `fates` lists these first: lost, answered at once, landing after the delay.
        self.fates()[..3].to_vec()
    }

    /// Every way of choosing a fate for each of `n` writes.
    fn fate_choices(&self, n: usize) -> Vec<Vec<Fate>> {
        (0..n).fold(vec![Vec::new()], |all, _| {
            all.iter()
                .flat_map(|v| self.fates().into_iter().map(|f| [v.as_slice(), &[f]].concat()))
                .collect()
        })
    }

    fn paused(&self, s: &State) -> bool {
        s.paused_until.is_some()
    }

    /// The holder has declared the loss of its lock.
    fn lost(s: &State) -> bool {
        s.holder.lost.is_some()
    }

    /// Steps the holder's machine on a clone, to learn how many writes it sends.
    fn writes_of(&self, s: &State, answer: Option<usize>) -> usize {
        let mut t = s.clone();
        self.holder_step(&mut t, answer, &[]).map_or(0, |n| n)
    }

    /// Steps the holder: its timer, or the answer to write `answer`. Returns how many writes it
    /// sent (each given its fate from `fates`, or lost when there are too few).
    fn holder_step(&self, s: &mut State, answer: Option<usize>, fates: &[Fate]) -> Option<usize> {
        let now = ms(s.now);
        let random = env::RETRY_PAUSE_ONE_TICK;
        let steps = match answer {
            // A new heartbeat writes the `guid` after the one the item carries for the holder
            // (an unsettled one is written again).
            None => {
                let fresh = s.holder.guid.wrapping_add(1);
                s.holder.handle_timeout(now, Some(fresh), random, Duration::ZERO)
            }
            Some(i) => {
                let a = s.writes[i].answer.clone()?;
                s.writes[i].of.awaited = false;
                s.writes[i].answer_at = None;
                s.holder.handle_answer(now, a, random)
            }
        };
        let mut sent = 0;
        for step in steps {
            match step {
                Step::Write { guids, new } => {
                    let fate = fates.get(sent).copied().unwrap_or(LOST);
                    sent += 1;
                    let renewal = Renewal {
                        awaited: true,
                        guids,
                        new,
                    };
                    s.writes.push(Write::new(renewal, fate, s.now));
                }
                Step::Abandon => s.writes.iter_mut().for_each(|w| w.of.awaited = false),
                // The machine keeps the lease, the next step and the loss itself.
                Step::Failed { .. } | Step::Danger { .. } | Step::Renewed { .. } | Step::Lost(_) => {}
                Step::Release(_) => unreachable!("the holder is never released here"),
            }
        }
        // Writes nobody waits for that have landed or never will are forgotten.
        s.writes.retain(|w| w.of.awaited || w.land_at.is_some());
        Some(sent)
    }

    /// Waiter `i`'s inputs at real tick `now`: its monotonic clock runs `drift` ticks fast
    /// over a lease.
    fn waiter_env(&self, now: Tick) -> Env {
        let c = &self.config;
        let lease = u64::from(c.lease);
        let micros = u64::from(now) * 1000 * lease / (lease - u64::from(c.drift));
        Env {
            now: Duration::from_micros(micros),
            ..env::at(now)
        }
    }

    /// The real tick at which waiter time `t` comes (the first tick at or after it).
    fn waiter_tick(&self, t: Duration) -> Tick {
        let c = &self.config;
        let lease = u128::from(c.lease);
        let real = (t.as_micros() * (lease - u128::from(c.drift))).div_ceil(lease * 1000);
        Tick::try_from(real).unwrap_or(Tick::MAX)
    }

    /// Carries out waiter `i`'s machine's step.
    fn waiter_step(&self, s: &mut State, i: usize, step: MStep<G, Ver, fail_open::Outcome<Item, Fail>>) {
        let now = s.now;
        let Waiter::Asking(a) = &mut s.waiters[i] else {
            unreachable!("a waiter's step while it asks")
        };
        a.req = None;
        a.wake = None;
        match step {
            MStep::Send { req, .. } => a.req = Some((req, None)),
            MStep::Wait { until, .. } => a.wake = Some(self.waiter_tick(until).max(now)),
            MStep::Done(fail_open::Outcome::Taken { .. }) => s.waiters[i] = Waiter::Granted { at: now },
            MStep::Done(_) => s.waiters[i] = Waiter::Idle,
        }
    }

    /// Waiter `i`'s request lands on the item through the addon's translation, and is
    /// answered at once.
    fn waiter_lands(&self, s: &mut State, i: usize) {
        let Waiter::Asking(a) = &s.waiters[i] else {
            unreachable!("a waiter's request while it asks")
        };
        let (req, _) = a.req.clone().expect("a request on its way");
        let reply = match req {
            // The model's item keeps no first-in-line mark: the mark decides fairness, never
            // a grant.
            Req::MarkWaiting { .. } => Reply::Done,
            _ => {
                let (item, reply) = env::apply(&req, env::open_fields(self.config.lease), Some(s.item));
                s.item = item.unwrap_or(s.item);
                reply
            }
        };
        let env = self.waiter_env(s.now);
        let Waiter::Asking(a) = &mut s.waiters[i] else {
            unreachable!()
        };
        let step = a.m.answer(answer_of(reply), &env);
        self.waiter_step(s, i, step);
    }

    /// The holder may call `lock.update` now: its machine would write.
    fn may_update(&self, s: &State) -> bool {
        self.config.update && !s.update_used && matches!(s.holder.held.clone().update(), Update::Write { .. })
    }

    /// Starts the holder's `lock.update` as the addon's does: the core's `request::Once` with
    /// the client's retries (one attempt here, timed out after a lease; backoffs of one to two
    /// ticks), none of them past the deadline its machine gives (`Hold::update`).
    fn update_start(&self, s: &mut State, fate: Fate) {
        let now = ms(s.now);
        let (Update::Write { guids }, by) = s.holder.update(now, None) else {
            unreachable!("offered only while the holder's machine writes")
        };
        let lease = self.config.lease;
        let policy = env::lock(Kind::FailOpen, lease, WAITER_REREAD, lease, 1).policy(1);
        let policy = match by {
            Some(by) => policy.until(by),
            None => policy,
        };
        let (m, step) = Once::start(Req::SetData { guids }, policy, None, now);
        s.update_used = true;
        s.updating = Some(Updating {
            m: Box::new(m),
            out: None,
            wake: None,
        });
        self.update_step(s, step, fate);
    }

    /// Carries out the update machine's step (`fate`: of the attempt it sends); at its end, the
    /// holder's machine learns it (`Hold::update_ends`), and steps at once if a heartbeat came
    /// due meanwhile.
    fn update_step(&self, s: &mut State, step: MStep<G, Ver, Ended<Item, Fail>>, fate: Fate) {
        let now = s.now;
        let u = s.updating.as_mut().expect("an update under way");
        u.out = None;
        u.wake = None;
        match step {
            // Past its deadline already: the addon does not send it.
            MStep::Send { timeout_at, .. } if tick(timeout_at) <= now => {
                let step = u.m.answer(env::TIMED_OUT, &env::at(now));
                self.update_step(s, step, fate);
            }
            MStep::Send { req, timeout_at } => u.out = Some(Write::new((req, tick(timeout_at)), fate, now)),
            MStep::Wait { until, .. } => u.wake = Some(tick(until).max(now)),
            MStep::Done(ended) => {
                s.updating = None;
                s.holder.update_ends(matches!(ended, Ended::Refused { .. }));
            }
        }
    }

    /// When the first waiter was granted the lock.
    fn granted_at(s: &State) -> Option<Tick> {
        s.waiters.iter().find_map(|w| match w {
            Waiter::Granted { at } => Some(*at),
            _ => None,
        })
    }
}

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        // The holder took the lock at tick 0 with `guid` 1; its first heartbeat is due at the
        // point of the first period its random number picks (any tick of it here), and never
        // past the lease's loss moment (`heartbeat::first_due`, as the addon's lock asks it).
        broken::set(self.config.bug);
        let config = self.beat_config();
        let mut holders: Vec<Hold<G>> = (1..=u64::from(self.config.period))
            .map(|d| Hold::new(config, true, 1, Some(Duration::ZERO), Duration::ZERO, d * 1000 - 1))
            .collect();
        holders.dedup();
        holders
            .into_iter()
            .map(|holder| State {
                now: 0,
                item: Item {
                    guid: 1,
                    token: 1,
                    lease: self.config.lease,
                    ..Item::default()
                },
                holder: Box::new(holder),
                paused_until: None,
                pause_used: false,
                closed: false,
                updating: None,
                update_used: false,
                resumed: false,
                writes: Vec::new(),
                waiters: vec![Waiter::Idle; self.config.waiters.into()],
            })
            .collect()
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        broken::set(self.config.bug);
        let first = out.len();
        if !self.paused(s) {
            // The holder's timer fires at the instant it asked for.
            if s.holder.poll_timeout().is_some_and(|d| tick(d) <= s.now) {
                let n = self.writes_of(s, None);
                out.extend(self.fate_choices(n).into_iter().map(Action::HolderTimer));
            }
            for (i, w) in s.writes.iter().enumerate() {
                if w.of.awaited && w.answer_at.is_some_and(|at| at <= s.now) {
                    let n = self.writes_of(s, Some(i));
                    out.extend(self.fate_choices(n).into_iter().map(|f| Action::HolderAnswer(i, f)));
                }
            }
            if !s.pause_used && !Self::lost(s) {
                out.push(Action::Pause);
            }
            if self.config.close && !s.closed && !Self::lost(s) {
                out.push(Action::Close);
            }
            if self.may_update(s) {
                out.extend(self.update_fates().into_iter().map(Action::UpdateStart));
            }
            if let Some(u) = &s.updating {
                if u.out
                    .as_ref()
                    .is_some_and(|w| w.of.1 <= s.now || w.answer_at.is_some_and(|at| at <= s.now))
                {
                    out.push(Action::UpdateAnswer);
                }
                if u.wake.is_some_and(|at| at <= s.now) {
                    out.extend(self.update_fates().into_iter().map(Action::UpdateTimer));
                }
            }
        }
        if let Some(w) = s.updating.as_ref().and_then(|u| u.out.as_ref()) {
            if w.land_at.is_some_and(|at| at <= s.now) {
                out.push(Action::UpdateLand);
            }
        }
        for (i, w) in s.writes.iter().enumerate() {
            if w.land_at.is_some_and(|at| at <= s.now) {
                out.push(Action::Land(i));
            }
        }
        // Once one waiter is granted the lock, the run is about the holder alone.
        let granted = Self::granted_at(s).is_some();
        for (i, w) in s.waiters.iter().enumerate().filter(|_| !granted) {
            match w {
                Waiter::Idle => out.push(Action::WaiterStart(i)),
                Waiter::Asking(Asking {
                    req: Some((_, None)), ..
                }) => {
                    out.push(Action::WaiterSend(i, 0));
                    if self.config.delay > 0 {
                        out.push(Action::WaiterSend(i, self.config.delay));
                    }
                }
                Waiter::Asking(Asking {
                    req: Some((_, Some(at))),
                    ..
                }) if *at <= s.now => out.push(Action::WaiterLand(i)),
                Waiter::Asking(Asking { wake: Some(at), .. }) if *at <= s.now => out.push(Action::WaiterTimer(i)),
                _ => {}
            }
        }
        // Time waits for what is due now: anything but a choice the holder or a waiter may
        // make at any moment.
        let forced = out[first..].iter().any(|a| {
            !matches!(
                a,
                Action::Pause | Action::Close | Action::UpdateStart(_) | Action::WaiterStart(_)
            )
        });
        if !forced && s.now < self.config.horizon && !granted {
            out.push(Action::Tick);
        }
    }

    fn next(&self, s: &State, a: &Action) -> Result<State, Violation> {
        broken::set(self.config.bug);
        let mut t = s.clone();
        match a {
            Action::HolderTimer(fates) => _ = self.holder_step(&mut t, None, fates),
            Action::HolderAnswer(i, fates) => _ = self.holder_step(&mut t, Some(*i), fates),
            Action::Land(i) => {
                let w = &mut t.writes[*i];
                let mut item = Some(s.item);
                let renewed = env::renew(&mut item, &w.of.guids, w.of.new, self.config.lease);
                t.item = item.unwrap_or(s.item);
                w.lands(if renewed { Answer::Renewed } else { Answer::NotOurs }, s.now);
                if !w.of.awaited {
                    t.writes.remove(*i);
                }
            }
            Action::Pause => {
                t.paused_until = Some(s.now + self.config.pause);
                t.pause_used = true;
            }
            Action::Close => {
                // Its heartbeat's writes are dropped (they may still land); it lapses at the
                // loss moment of its lease.
                t.holder.abandon(None);
                t.closed = true;
                t.writes.iter_mut().for_each(|w| w.of.awaited = false);
                t.writes.retain(|w| w.land_at.is_some());
            }
            Action::UpdateStart(fate) => self.update_start(&mut t, *fate),
            Action::UpdateLand => {
                let w = t
                    .updating
                    .as_mut()
                    .and_then(|u| u.out.as_mut())
                    .expect("an attempt out");
                let (item, reply) = env::apply(&w.of.0, env::open_fields(self.config.lease), Some(s.item));
                w.lands(answer_of(reply), s.now);
                t.item = item.unwrap_or(s.item);
            }
            Action::UpdateAnswer => {
                let u = t.updating.as_mut().expect("an update under way");
                let w = u.out.take().expect("an attempt out");
                // Its answer, if it has come; else its timeout. An attempt not landed by then
                // is dropped: it writes only the holder's data, never the lease or `guid`.
                let a = match (w.answer_at, w.answer) {
                    (Some(at), Some(a)) if at <= s.now => a,
                    _ => env::TIMED_OUT,
                };
                let step = u.m.answer(a, &env::at(s.now));
                self.update_step(&mut t, step, LOST);
            }
            Action::UpdateTimer(fate) => {
                let u = t.updating.as_mut().expect("an update under way");
                let step = u.m.timer(&env::at(s.now));
                self.update_step(&mut t, step, *fate);
            }
            Action::WaiterStart(i) => {
                // The waiter keeps trying; its `guid`s are its own (200 and up).
                let lock = dynamodb_lock_core::settings::Lock {
                    retry_count: u32::MAX,
                    ..env::lock(Kind::FailOpen, self.config.lease, WAITER_REREAD, 1000, 2)
                };
                let (m, step) = Acquire::start(lock, 200 + *i as G, None, &self.waiter_env(s.now));
                t.waiters[*i] = Waiter::Asking(Asking {
                    m: Box::new(m),
                    req: None,
                    wake: None,
                });
                self.waiter_step(&mut t, *i, step);
            }
            Action::WaiterSend(i, delay) => {
                if let Waiter::Asking(Asking {
                    req: Some((_, land_at)),
                    ..
                }) = &mut t.waiters[*i]
                {
                    *land_at = Some(s.now + delay);
                }
            }
            Action::WaiterLand(i) => self.waiter_lands(&mut t, *i),
            Action::WaiterTimer(i) => {
                let env = self.waiter_env(s.now);
                let Waiter::Asking(a) = &mut t.waiters[*i] else {
                    unreachable!()
                };
                let step = a.m.timer(&env);
                self.waiter_step(&mut t, *i, step);
            }
            Action::Tick => {
                t.now += 1;
                if t.paused_until.is_some_and(|until| t.now >= until) {
                    t.paused_until = None;
                    t.resumed = true;
                }
            }
        }
        if matches!(a, Action::HolderTimer(_) | Action::HolderAnswer(..)) {
            let was_resumed = t.resumed;
            t.resumed = false;
            if let Some(at) = Self::granted_at(&t) {
                if !Self::lost(&t) && (was_resumed || at <= t.now) {
                    let now = t.now;
                    let detail = format!("the waiter was granted the lock at tick {at}; the holder, stepped at tick {now}, still holds it");
                    return Err(Violation::new(PROPERTY, detail));
                }
            }
        }
        Ok(t)
    }

    fn invariant(&self, s: &State) -> Result<(), Violation> {
        match Self::granted_at(s) {
            // A holder that has just resumed is judged by its first step (`next`).
            Some(at) if !self.paused(s) && !s.resumed && !Self::lost(s) => Err(Violation::new(
                PROPERTY,
                format!("the waiter was granted the lock at tick {at} while the holder, running, still holds it"),
            )),
            _ => Ok(()),
        }
    }
}

/// A waiter's re-read pace, in ticks (`rereadPeriodMs`).
const WAITER_REREAD: Tick = 1;

/// Beyond this many states a run stops and reports itself incomplete.
const MAX_STATES: usize = 12_000_000;

/// Explores the lease model of `config`; a violation's steps are its actions.
pub fn check(config: Config) -> Checked<State> {
    explore::explore(&LeaseModel { config }, MAX_STATES).told(|p| p.iter().map(|a| format!("{a:?}")).collect())
}
