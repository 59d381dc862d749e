//! The operations of an agreement run as owned data, and their seeded generation. Guids are
//! small numbers (`guid(n)`), so that steps and items print short; arguments are drawn near the
//! current item (its guid, its version, its mark, its counters) so that both branches of every
//! condition come up.

use crate::item::{Guid, GuidValue, LockData, LockRecord, GUID_LEN};
use crate::store::OpenFields;

/// The TTL attribute every step that writes one uses.
pub const TTL: &str = "ttl";

/// A small seeded generator (splitmix64): the same seed gives the same run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u32) -> Rng {
        Rng(u64::from(seed) ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The guid numbered `n`: its number, then a fixed filler.
pub fn guid(n: u32) -> Guid {
    let mut g = [0xa5; GUID_LEN];
    g[..4].copy_from_slice(&n.to_be_bytes());
    g
}

/// The number of a guid made by `guid`.
pub fn guid_number(g: &[u8]) -> Option<u32> {
    (g.len() == GUID_LEN && g[4..].iter().all(|b| *b == 0xa5)).then(|| u32::from_be_bytes([g[0], g[1], g[2], g[3]]))
}

fn current_guid(cur: Option<&LockRecord>) -> Option<u32> {
    match cur.and_then(|r| r.guid.as_ref()) {
        Some(GuidValue::B(b)) => guid_number(b),
        _ => None,
    }
}

/// A version by guid number: what `take` and `fifo_grant` wait out.
#[derive(Clone, Debug)]
pub struct V {
    pub guid: Option<u32>,
    pub token: Option<u64>,
}

impl V {
    pub fn version(&self) -> crate::item::Version {
        crate::item::Version {
            guid: self.guid.map(|n| GuidValue::B(guid(n).to_vec())),
            fencing_token: self.token,
        }
    }
}

/// `OpenFields`, owned.
#[derive(Clone, Debug)]
pub struct Fields {
    pub owner: String,
    pub lease: u64,
    pub acquired: Option<u64>,
    pub data: Option<LockData>,
    pub ttl: Option<u64>,
    pub floor: u64,
    /// The session the holder holds the lock through.
    pub session: Option<String>,
}

impl Fields {
    pub fn open(&self) -> OpenFields<'_> {
        OpenFields {
            owner: &self.owner,
            lease_duration_ms: self.lease,
            lock_acquired_time_unix_ms: self.acquired,
            data: self.data.as_ref(),
            ttl: self.ttl.map(|t| (TTL, t)),
            token_floor: self.floor,
            session: self.session.as_deref(),
        }
    }
}

/// What the original's whole-item put expects, by guid number.
#[derive(Clone, Debug)]
pub enum Expect {
    Absent,
    AbsentOr(u32, u64),
    Guid(u32),
}

/// One `Store` method call with its arguments.
#[derive(Clone, Debug)]
pub enum Step {
    Get,
    PutIfAbsent {
        owner: String,
        guid: u32,
        data: Option<LockData>,
        ttl: Option<u64>,
    },
    DeleteIfGuid {
        guids: Vec<u32>,
    },
    Take {
        fields: Fields,
        guid: u32,
        waited_out: Option<V>,
        clear_mark: bool,
    },
    HandOver {
        guids: Vec<u32>,
        new_guid: u32,
        fields: Option<Fields>,
        fresh: u64,
        ttl: Option<u64>,
    },
    PutItem {
        owner: String,
        guid: u32,
        token: u64,
        lease: u64,
        acquired: Option<u64>,
        expect: Expect,
    },
    Renew {
        guids: Vec<u32>,
        new_guid: u32,
        fields: Fields,
    },
    Release {
        guids: Vec<u32>,
        acquired: Option<u64>,
        ttl: Option<u64>,
    },
    SetData {
        guids: Vec<u32>,
        data: Option<LockData>,
        ttl: Option<u64>,
    },
    MarkWaiting {
        waiter: String,
        since: u64,
        now: u64,
        stale: u64,
    },
    FifoTakeFree {
        fields: Fields,
        guid: u32,
    },
    FifoTicket,
    FifoReserve {
        ticket: u64,
    },
    FifoUntake {
        ticket: u64,
        position: u64,
        previous: u64,
    },
    FifoPutEntry {
        owner: String,
        guid: u32,
        ticket: u64,
        lease: u64,
        ttl: u64,
    },
    FifoGrant {
        fields: Fields,
        guid: u32,
        ticket: u64,
        position: u64,
        waited_out: Option<V>,
    },
    FifoFinishEntry {
        guids: Vec<u32>,
        new_guid: u32,
    },
    FifoDeleteFinished,
    FifoTouchEntry {
        ttl: u64,
    },
    SemTake {
        fields: Fields,
        guid: u32,
        limit: u64,
        permits: u64,
    },
    SemGrant {
        fields: Fields,
        guid: u32,
        limit: u64,
        permits: u64,
        ticket: u64,
        position: u64,
        /// Holders reclaimed: key, guid, permits (by guid number).
        reclaim: Vec<(u32, u32, u64)>,
    },
    SemRenew {
        key: u32,
        guids: Vec<u32>,
        new_guid: u32,
        permits: u64,
        fields: Fields,
    },
    SemRelease {
        key: u32,
        guids: Vec<u32>,
        permits: u64,
    },
    ForceFree {
        read: V,
        new_guid: u32,
        now: u64,
        delete: bool,
    },
    Revoke {
        read: V,
        new_guid: u32,
        now: u64,
        /// The session and its item's lease.
        session: Option<(String, u64)>,
    },
    MarkRevoked {
        guid: u32,
    },
    Prune {
        read: V,
        ticket_next: Option<u64>,
        permits: bool,
    },
}

impl Step {
    /// The kind counted in the report: the method, and the form where one method has several.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Get => "get",
            Step::PutIfAbsent { .. } => "put_if_absent",
            Step::DeleteIfGuid { .. } => "delete_if_guid",
            Step::Take { clear_mark: true, .. } => "take_clear_mark",
            Step::Take {
                waited_out: Some(_), ..
            } => "take_waited_out",
            Step::Take { .. } => "take",
            Step::HandOver { fields: Some(_), .. } => "hand_over_fail_open",
            Step::HandOver { .. } => "hand_over_fail_closed",
            Step::PutItem {
                expect: Expect::Absent, ..
            } => "put_item_absent",
            Step::PutItem {
                expect: Expect::AbsentOr(..),
                ..
            } => "put_item_absent_or",
            Step::PutItem { .. } => "put_item_guid",
            Step::Renew { .. } => "renew",
            Step::Release { .. } => "release",
            Step::SetData { .. } => "set_data",
            Step::MarkWaiting { .. } => "mark_waiting",
            Step::FifoTakeFree { .. } => "fifo_take_free",
            Step::FifoTicket => "fifo_ticket",
            Step::FifoReserve { .. } => "fifo_reserve",
            Step::FifoUntake { .. } => "fifo_untake",
            Step::FifoPutEntry { .. } => "fifo_put_entry",
            Step::FifoGrant { .. } => "fifo_grant",
            Step::FifoFinishEntry { .. } => "fifo_finish_entry",
            Step::FifoDeleteFinished => "fifo_delete_finished",
            Step::FifoTouchEntry { .. } => "fifo_touch_entry",
            Step::SemTake { .. } => "sem_take",
            Step::SemGrant { reclaim, .. } if reclaim.is_empty() => "sem_grant",
            Step::SemGrant { .. } => "sem_grant_reclaim",
            Step::SemRenew { .. } => "sem_renew",
            Step::SemRelease { .. } => "sem_release",
            Step::ForceFree { delete: true, .. } => "force_delete",
            Step::ForceFree { .. } => "force_free",
            Step::Revoke { session: Some(_), .. } => "revoke_session",
            Step::Revoke { .. } => "revoke",
            Step::MarkRevoked { .. } => "mark_revoked",
            Step::Prune { permits: true, .. } => "prune_semaphore",
            Step::Prune { .. } => "prune",
        }
    }
}

/// Draws arguments for one step on an item (`cur`) at time `now` (milliseconds, rising).
pub struct Gen<'a> {
    pub rng: &'a mut Rng,
    pub cur: Option<&'a LockRecord>,
    pub now: u64,
    /// The next fresh guid number.
    pub next_guid: &'a mut u32,
}

impl Gen<'_> {
    fn fresh(&mut self) -> u32 {
        *self.next_guid += 1;
        *self.next_guid
    }

    /// Mostly the item's own guid, else an earlier or a fresh one.
    fn guid(&mut self) -> u32 {
        match (current_guid(self.cur), self.rng.below(100)) {
            (Some(g), 0..60) => g,
            (_, 60..85) => 1 + self.rng.below(u64::from(*self.next_guid)) as u32,
            _ => self.fresh(),
        }
    }

    fn guids(&mut self) -> Vec<u32> {
        let mut v = vec![self.guid()];
        if self.rng.chance(30) {
            let other = self.guid();
            if other != v[0] {
                v.insert(self.rng.below(2) as usize, other);
            }
        }
        v
    }

    /// The item's version, or one that differs in its guid or its token.
    fn version(&mut self) -> V {
        let guid = current_guid(self.cur);
        let token = self.cur.and_then(|r| r.fencing_token);
        match self.rng.below(100) {
            0..55 => V { guid, token },
            55..75 => V {
                guid,
                token: Some(token.map_or(1, |t| t + 1)),
            },
            75..90 => V {
                guid: Some(self.fresh()),
                token,
            },
            _ => V { guid, token: None },
        }
    }

    fn data(&mut self) -> Option<LockData> {
        match self.rng.below(3) {
            0 => Some(LockData::S(format!("d{}", self.rng.below(5)))),
            1 => Some(LockData::B(vec![self.rng.below(256) as u8; 3])),
            _ => None,
        }
    }

    fn ttl(&mut self) -> Option<u64> {
        self.rng.chance(30).then(|| self.now / 1000 + self.rng.below(100))
    }

    fn fields(&mut self) -> Fields {
        Fields {
            owner: format!("o{}", self.rng.below(3)),
            lease: [1000, 30000][self.rng.below(2) as usize],
            acquired: self.rng.chance(50).then_some(self.now),
            data: self.data(),
            ttl: self.ttl(),
            floor: if self.rng.chance(80) { 0 } else { 1000 },
            session: self.rng.chance(30).then(|| format!("s{}", self.rng.below(2))),
        }
    }

    /// A number near `base`: `base - 1` to `base + 2`, never below 0.
    fn near(&mut self, base: u64) -> u64 {
        (base + self.rng.below(4)).saturating_sub(1)
    }
}

impl Gen<'_> {
    /// A step on a lock item (FailClosed, FailOpen, or written by the original library).
    pub fn lock_step(&mut self) -> Step {
        let cur = self.cur;
        // A released item, now and then: an operator's deletion.
        if cur.is_some_and(|r| r.lease_duration_ms == Some(1)) && self.rng.chance(25) {
            return self.prune(false);
        }
        match self.rng.below(18) {
            0 => Step::Get,
            1 => Step::PutIfAbsent {
                owner: format!("o{}", self.rng.below(3)),
                guid: self.fresh(),
                data: self.data(),
                ttl: self.ttl(),
            },
            2 => Step::DeleteIfGuid { guids: self.guids() },
            3..=5 => {
                let (waited_out, clear_mark) = match self.rng.below(3) {
                    0 => (None, false),
                    1 => (Some(self.version()), false),
                    _ => (self.rng.chance(50).then(|| self.version()), true),
                };
                Step::Take {
                    fields: self.fields(),
                    guid: self.fresh(),
                    waited_out,
                    clear_mark,
                }
            }
            6 => {
                let w = cur.and_then(|r| r.lock_waiting_unix_ms);
                let fresh = match (w, self.rng.below(3)) {
                    (Some(w), 0) => w,
                    (Some(w), 1) => w + 1,
                    _ => self.now - self.rng.below(200),
                };
                Step::HandOver {
                    guids: self.guids(),
                    new_guid: self.fresh(),
                    fields: self.rng.chance(50).then(|| self.fields()),
                    fresh,
                    ttl: self.ttl(),
                }
            }
            7 => self.put_item(),
            8 | 9 => Step::Renew {
                guids: self.guids(),
                new_guid: self.fresh(),
                fields: self.fields(),
            },
            10 => Step::Release {
                guids: self.guids(),
                acquired: self.rng.chance(50).then_some(self.now),
                ttl: self.ttl(),
            },
            11 => Step::SetData {
                guids: self.guids(),
                data: self.data(),
                ttl: self.ttl(),
            },
            15 => Step::ForceFree {
                read: self.version(),
                new_guid: self.fresh(),
                now: self.now,
                delete: self.rng.chance(40),
            },
            16 => Step::Revoke {
                read: self.version(),
                new_guid: self.fresh(),
                now: self.now,
                session: self.rng.chance(50).then(|| {
                    (
                        format!("s{}", self.rng.below(2)),
                        [1000, 30000][self.rng.below(2) as usize],
                    )
                }),
            },
            17 => Step::MarkRevoked { guid: self.guid() },
            _ => self.mark(),
        }
    }

    fn put_item(&mut self) -> Step {
        let token = self.cur.and_then(|r| r.fencing_token);
        let expect = match self.rng.below(3) {
            0 => Expect::Absent,
            1 => {
                // The original always saw a guid and a token (`dynamodb_lock_core::original`).
                let v = self.version();
                Expect::AbsentOr(v.guid.unwrap_or_else(|| self.fresh()), v.token.unwrap_or(1))
            }
            _ => Expect::Guid(self.guid()),
        };
        Step::PutItem {
            owner: format!("o{}", self.rng.below(3)),
            guid: self.fresh(),
            token: token.map_or(1, |t| t + 1),
            lease: [1000, 30000, 1][self.rng.below(3) as usize],
            acquired: self.rng.chance(50).then_some(self.now),
            expect,
        }
    }

    fn mark(&mut self) -> Step {
        let cur = self.cur;
        let w = cur.and_then(|r| r.lock_waiting_unix_ms);
        let ws = cur.and_then(|r| r.lock_waiting_since_unix_ms);
        let stale = match (w, self.rng.below(3)) {
            (Some(w), 0) => w,
            (Some(w), 1) => w + 1,
            _ => self.now - self.rng.below(300),
        };
        let since = match ws {
            Some(s) if self.rng.chance(60) => self.near(s),
            _ => self.now - self.rng.below(100),
        };
        Step::MarkWaiting {
            waiter: format!("w{}", self.rng.below(3)),
            since,
            now: self.now,
            stale,
        }
    }

    /// A step on a Fifo head item.
    pub fn head_step(&mut self) -> Step {
        let cur = self.cur;
        let ft = cur.and_then(|r| r.fencing_token).unwrap_or(0);
        let tn = cur.and_then(|r| r.ticket_next());
        let qn = cur.and_then(|r| r.queue_next()).unwrap_or(0);
        let last = tn.unwrap_or(ft);
        match self.rng.below(10) {
            // Now and then a semaphore's step on a Fifo head: refused, as the kinds exclude
            // each other.
            8 | 9 => self.sem_step(),
            0 => Step::Get,
            1 => Step::FifoTakeFree {
                fields: self.fields(),
                guid: self.fresh(),
            },
            2 => Step::FifoTicket,
            3 => Step::FifoReserve {
                ticket: self.near(last + 1),
            },
            4 | 5 => self.untake(last, qn),
            _ => {
                let waited_out = self.rng.chance(40).then(|| self.version());
                Step::FifoGrant {
                    fields: self.fields(),
                    guid: self.fresh(),
                    ticket: self.near(ft + 1),
                    position: self.near(qn),
                    waited_out,
                }
            }
        }
    }

    /// An operator's deletion, on the item's version and ticket or ones that differ.
    fn prune(&mut self, permits: bool) -> Step {
        let tn = self.cur.and_then(|r| r.ticket_next());
        Step::Prune {
            read: self.version(),
            ticket_next: match self.rng.below(4) {
                0 => tn.map(|t| t + 1).or(Some(1)),
                _ => tn,
            },
            permits,
        }
    }

    /// Gives back a ticket: mostly the last one issued at the last position.
    fn untake(&mut self, last: u64, qn: u64) -> Step {
        let ticket = if self.rng.chance(70) { last } else { self.near(last) };
        let position = if self.rng.chance(70) { qn } else { self.near(qn) };
        Step::FifoUntake {
            ticket,
            position,
            previous: ticket.saturating_sub(1),
        }
    }

    /// A step on a semaphore's head: its own steps, and the queue's tickets taken and given
    /// back.
    pub fn sem_head_step(&mut self) -> Step {
        let cur = self.cur;
        let ft = cur.and_then(|r| r.fencing_token).unwrap_or(0);
        let last = cur.and_then(|r| r.ticket_next()).unwrap_or(ft);
        let qn = cur.and_then(|r| r.queue_next()).unwrap_or(0);
        match self.rng.below(10) {
            0 => Step::Get,
            1 => Step::FifoTicket,
            2 | 3 => self.untake(last, qn),
            4 => self.prune(true),
            _ => self.sem_step(),
        }
    }

    /// A semaphore's step on a head: mostly with the permits it counts and its holders'
    /// keys and guids, else others.
    fn sem_step(&mut self) -> Step {
        let cur = self.cur;
        let counted = cur.and_then(|r| r.queue.as_ref()).and_then(|q| q.permits);
        let limit = match counted {
            Some(n) if self.rng.chance(85) => n,
            _ => 2 + self.rng.below(2),
        };
        // As the machine asks: from 1 to the permits counted (`Op::SemTake`'s contract).
        let permits = 1 + self.rng.below(limit);
        let holders: Vec<(u32, u32, u64)> = cur
            .and_then(|r| r.queue.as_ref())
            .map(|q| {
                q.holders
                    .iter()
                    .filter_map(|h| Some((guid_number(&h.key)?, guid_number(&h.guid)?, h.permits)))
                    .collect()
            })
            .unwrap_or_default();
        let pick = |gen: &mut Self| match holders.len() {
            0 => None,
            n => Some(holders[gen.rng.below(n as u64) as usize]),
        };
        let ft = cur.and_then(|r| r.fencing_token).unwrap_or(0);
        let qn = cur.and_then(|r| r.queue_next()).unwrap_or(0);
        match self.rng.below(5) {
            0 => Step::SemTake {
                fields: self.fields(),
                guid: self.fresh(),
                limit,
                permits,
            },
            1 => {
                let mut reclaim = Vec::new();
                if self.rng.chance(50) {
                    if let Some((k, g, p)) = pick(self) {
                        // As seen, or with another guid or permits.
                        reclaim.push(match self.rng.below(4) {
                            0 => (k, self.fresh(), p),
                            1 => (k, g, p + 1),
                            _ => (k, g, p),
                        });
                    }
                }
                Step::SemGrant {
                    fields: self.fields(),
                    guid: self.fresh(),
                    limit,
                    permits,
                    ticket: self.near(ft + 1),
                    position: self.near(qn),
                    reclaim,
                }
            }
            2 | 3 => {
                let (key, g, p) = pick(self).unwrap_or((self.fresh(), 0, 1));
                let mut guids = vec![if g != 0 && self.rng.chance(75) { g } else { self.guid() }];
                if self.rng.chance(30) {
                    guids.push(self.fresh());
                }
                Step::SemRenew {
                    key,
                    guids,
                    new_guid: self.fresh(),
                    permits: p,
                    fields: self.fields(),
                }
            }
            _ => {
                let (key, g, p) = pick(self).unwrap_or((self.fresh(), 0, 1));
                Step::SemRelease {
                    key,
                    guids: vec![if g != 0 && self.rng.chance(75) { g } else { self.guid() }],
                    permits: p,
                }
            }
        }
    }

    /// A step on a Fifo queue entry.
    pub fn entry_step(&mut self) -> Step {
        match self.rng.below(6) {
            0 => Step::Get,
            1 => Step::FifoPutEntry {
                owner: format!("o{}", self.rng.below(3)),
                guid: self.fresh(),
                ticket: 1 + self.rng.below(5),
                lease: if self.rng.chance(20) { 1 } else { 1000 },
                ttl: self.now / 1000 + self.rng.below(100),
            },
            2 | 3 => Step::FifoFinishEntry {
                guids: self.guids(),
                new_guid: self.fresh(),
            },
            4 => Step::FifoDeleteFinished,
            _ => Step::FifoTouchEntry {
                ttl: self.now / 1000 + self.rng.below(100),
            },
        }
    }
}
