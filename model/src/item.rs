//! The model's lock item: what the protocol's conditions see of a lock item (or a Fifo head
//! item), small enough to keep millions of states. The store operations are the core's
//! (`dynamodb_lock_core::op::apply`), applied to this item through its `Record` view.
//!
//! This file depends on the core crate alone: the addon's unit tests include it
//! (src/tests/memory.rs, `model_ops_agree_with_the_memory_store`) and check that every
//! operation leaves this item and the whole decoded item alike, so that what the model drops
//! cannot change an answer unnoticed.

use dynamodb_lock_core::item::{LockData, RELEASED_LEASE_MS, SESSION_LOCK_LEASE_MS};
use dynamodb_lock_core::op::{Holder, Mark, Record};

/// A `guid`. 0 is never used.
pub type G = u8;

/// The lock item (or a Fifo head item), as far as the protocol's conditions see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Item {
    /// 0: no `guid`.
    pub guid: G,
    /// `fencingToken`; 0 when absent (FailClosed items carry none).
    pub token: u8,
    /// `leaseDurationMs` is 1.
    pub released: bool,
    /// No `leaseDurationMs` at all (a FailClosed item, or a Fifo head nobody was granted).
    pub holderless: bool,
    /// Fifo head counters: `ticketNext`, `queueNext`, `queueGranted`.
    pub tn: Option<u8>,
    pub qn: Option<u8>,
    pub qg: Option<u8>,
    /// Model time since the holder sent the write that set `lockAcquiredTimeUnixMs` (only read by
    /// the variant that trusts the holder's clock). Not a condition of any operation.
    pub age: u8,
    /// `leaseDurationMs` of a held item, when it is not `HELD_LEASE_MS` (the machines' model
    /// writes its lease in ticks).
    pub lease: u16,
    /// `lockAcquiredTimeUnixMs`, on the writer's wall clock in ticks (`trustLocalTime`).
    pub acquired: Option<u16>,
    /// `lockSession`: 0 when absent, else the session `SESSIONS[session - 1]`.
    pub session: u8,
    /// A semaphore's head: `permits` (0: absent), `permitsHeld`, and its holders (key 0: no
    /// holder in that place), each with its `guid`, permits and lease.
    pub permits: u8,
    pub held: u8,
    pub holders: [Slot; MAX_HOLDERS],
    /// A session's item: `lockRevoked`, the `guid` of a lock held through it that an operator
    /// revoked (0: none; the model revokes one lock at most).
    pub revoked: G,
}

/// One holder of a semaphore's head: key, `guid`, permits, `leaseDurationMs`.
pub type Slot = (G, G, u8, u16);

/// The most holders the model's semaphore head names at once.
pub const MAX_HOLDERS: usize = 4;

/// The session ids the model's items may name (`lockSession`).
pub const SESSIONS: [&str; 2] = ["s1", "s2"];

/// `lease` of an item whose `leaseDurationMs` is `SESSION_LOCK_LEASE_MS` (a lock held through
/// a session).
pub const SESSION_LEASE: u16 = u16::MAX;

/// What identifies one tenure: `guid` and `fencingToken` (`Version` in the core's item).
pub type Ver = (G, u8);

/// The `leaseDurationMs` a held item reads as: any lease but the released one.
pub const HELD_LEASE_MS: u64 = 1000;

impl Item {
    pub fn version(&self) -> Ver {
        (self.guid, self.token)
    }
}

/// A token, position or count as the model keeps it.
pub fn small(v: u64) -> u8 {
    u8::try_from(v).expect("the model's tokens and positions stay below 256")
}

/// The item as `op::apply` reads and writes it. The model keeps no owner, data or
/// first-in-line mark: they read as absent and writes of them are dropped. It keeps
/// `lockSession` as a small id.
impl Record for Item {
    type Guid = G;
    type Version = Ver;

    fn empty() -> Self {
        Item {
            holderless: true,
            ..Item::default()
        }
    }
    fn carries(&self, guid: &G) -> bool {
        self.guid == *guid
    }
    fn version(&self) -> Ver {
        Item::version(self)
    }
    fn fencing_token(&self) -> Option<u64> {
        (self.token > 0).then_some(self.token.into())
    }
    fn lease_duration_ms(&self) -> Option<u64> {
        match (self.holderless, self.released) {
            (true, _) => None,
            (false, true) => Some(RELEASED_LEASE_MS),
            (false, false) if self.lease == 0 => Some(HELD_LEASE_MS),
            (false, false) if self.lease == SESSION_LEASE => Some(SESSION_LOCK_LEASE_MS),
            (false, false) => Some(self.lease.into()),
        }
    }
    fn lock_acquired_time_unix_ms(&self) -> Option<u64> {
        self.acquired.map(u64::from)
    }
    fn ticket_next(&self) -> Option<u64> {
        self.tn.map(u64::from)
    }
    fn queue_next(&self) -> Option<u64> {
        self.qn.map(u64::from)
    }
    fn queue_granted(&self) -> Option<u64> {
        self.qg.map(u64::from)
    }
    fn guid(&self) -> Option<G> {
        (self.guid != 0).then_some(self.guid)
    }
    fn lock_waiting_unix_ms(&self) -> Option<u64> {
        None
    }
    fn lock_waiter(&self) -> Option<&str> {
        None
    }
    fn lock_waiting_since_unix_ms(&self) -> Option<u64> {
        None
    }
    fn mark(&self) -> Mark {
        Mark::default()
    }
    fn session(&self) -> Option<&str> {
        self.session.checked_sub(1).map(|i| SESSIONS[usize::from(i)])
    }
    fn revoked(&self) -> Vec<Vec<u8>> {
        (self.revoked != 0).then(|| vec![self.revoked]).into_iter().collect()
    }
    fn add_revoked(&mut self, guid: &G) {
        assert!(
            self.revoked == 0 || self.revoked == *guid,
            "the model revokes one lock at most"
        );
        self.revoked = *guid;
    }
    fn keep_revoked(&mut self, old: &Self) {
        self.revoked = old.revoked;
    }

    fn set_owner(&mut self, _: &str) {}
    fn set_guid(&mut self, guid: &G) {
        self.guid = *guid;
    }
    fn set_fencing_token(&mut self, token: u64) {
        self.token = small(token);
    }
    fn set_lease_duration_ms(&mut self, ms: u64) {
        self.released = ms == RELEASED_LEASE_MS;
        self.holderless = false;
        self.lease = match ms {
            HELD_LEASE_MS | RELEASED_LEASE_MS => 0,
            SESSION_LOCK_LEASE_MS => SESSION_LEASE,
            ms => u16::try_from(ms).expect("the model's leases stay small"),
        };
    }
    fn set_lock_acquired_time_unix_ms(&mut self, ms: Option<u64>) {
        self.age = 0;
        self.acquired = ms.map(|m| u16::try_from(m).expect("the model's clocks stay small"));
    }
    fn set_data(&mut self, _: Option<&LockData>) {}
    fn set_mark(&mut self, _: Mark) {}
    fn set_session(&mut self, session: Option<&str>) {
        self.session = match session {
            None => 0,
            Some(id) => {
                let i = SESSIONS
                    .iter()
                    .position(|s| *s == id)
                    .expect("a session the model names");
                i as u8 + 1
            }
        };
    }
    fn set_ticket_next(&mut self, ticket: u64) {
        self.tn = Some(small(ticket));
    }
    fn set_queue_next(&mut self, position: u64) {
        self.qn = Some(small(position));
    }
    fn set_queue_granted(&mut self, position: u64) {
        self.qg = Some(small(position));
    }
    fn permits(&self) -> Option<u64> {
        (self.permits > 0).then_some(self.permits.into())
    }
    fn permits_held(&self) -> u64 {
        self.held.into()
    }
    fn holders(&self) -> Vec<Holder<G>> {
        self.holders
            .iter()
            .filter(|h| h.0 != 0)
            .map(|&(key, guid, permits, lease)| Holder {
                key,
                guid,
                permits: permits.into(),
                lease_duration_ms: lease.into(),
            })
            .collect()
    }
    fn set_permits(&mut self, n: u64) {
        self.permits = small(n);
    }
    fn set_permits_held(&mut self, held: u64) {
        self.held = small(held);
    }
    fn set_holder(&mut self, key: &G, holder: Option<&Holder<G>>, _owner: &str) {
        let at = self.holders.iter().position(|h| h.0 == *key);
        match holder {
            Some(h) => {
                let slot = (
                    *key,
                    h.guid,
                    small(h.permits),
                    u16::try_from(h.lease_duration_ms).expect("the model's leases stay small"),
                );
                let i = at
                    .or_else(|| self.holders.iter().position(|h| h.0 == 0))
                    .expect("the model's semaphore names few holders");
                self.holders[i] = slot;
            }
            None => {
                if let Some(i) = at {
                    self.holders[i] = (0, 0, 0, 0);
                }
            }
        }
        // One order for one set of holders: states that differ only in it are one state.
        self.holders.sort_unstable_by_key(|h| std::cmp::Reverse(h.0));
    }
}

/// The fields of every FailOpen write in the model: its item keeps none of them but the lease,
/// and no item is deleted by TTL, so tokens count from 0.
pub const FIELDS: dynamodb_lock_core::op::OpenFields<'static> = dynamodb_lock_core::op::OpenFields {
    owner: "",
    lease_duration_ms: HELD_LEASE_MS,
    lock_acquired_time_unix_ms: None,
    data: None,
    ttl: None,
    token_floor: 0,
    session: None,
};
