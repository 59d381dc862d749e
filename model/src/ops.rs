//! The lock item's conditional operations, as the `Store` trait states them
//! (src/store/mod.rs) and src/store/memory.rs and src/store/http.rs implement them, over an
//! abstract item: its `guid`, its `fencingToken` and whether it is released
//! (`leaseDurationMs` 1). Each operation is applied atomically to one item: DynamoDB's
//! conditional writes are linearizable per item.
//!
//! This file has no dependencies: the addon's unit tests include it (src/store/memory.rs,
//! `model_ops_agree_with_the_memory_store`) and check every operation against the in-memory
//! store on the same inputs, so that the model cannot drift from the code unnoticed.

/// A `guid`. 0 is never used.
pub type G = u8;

/// The lock item, as far as the protocol's conditions see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Item {
    pub guid: G,
    /// `fencingToken`; 0 when absent (FailClosed items carry none).
    pub token: u8,
    /// `leaseDurationMs` is 1.
    pub released: bool,
    /// Model time since the holder sent the write that set `lockAcquiredTimeUnixMs` (only read by
    /// the variant that trusts the holder's clock). Not a condition of any operation.
    pub age: u8,
}

/// What identifies one tenure: `guid` and `fencingToken` (`Version` in src/item.rs).
pub type Ver = (G, u8);

impl Item {
    pub fn version(&self) -> Ver {
        (self.guid, self.token)
    }
}

/// A refused condition, with the item as it was (`ReturnValuesOnConditionCheckFailure`).
pub type Refused = Option<Item>;

fn carries(slot: &Option<Item>, guids: &[G]) -> bool {
    slot.is_some_and(|i| guids.contains(&i.guid))
}

/// `get`: strongly consistent read.
pub fn get(slot: &Option<Item>) -> Option<Item> {
    *slot
}

/// `put_if_absent` (FailClosed acquisition).
pub fn put_if_absent(slot: &mut Option<Item>, guid: G) -> Result<(), Refused> {
    if slot.is_some() {
        return Err(*slot);
    }
    *slot = Some(Item {
        guid,
        token: 0,
        released: false,
        age: 0,
    });
    Ok(())
}

/// `delete_if_guid` (FailClosed release).
pub fn delete_if_guid(slot: &mut Option<Item>, guids: &[G]) -> Result<(), Refused> {
    if !carries(slot, guids) {
        return Err(*slot);
    }
    *slot = None;
    Ok(())
}

/// `take` (FailOpen acquisition): absent, released, or still at `waited_out`. Returns the
/// new token, the previous one plus one.
pub fn take(slot: &mut Option<Item>, guid: G, waited_out: Option<Ver>) -> Result<u8, Refused> {
    let free = match slot {
        None => true,
        Some(i) => i.released || waited_out == Some(i.version()),
    };
    if !free {
        return Err(*slot);
    }
    let token = slot.map_or(0, |i| i.token) + 1;
    *slot = Some(Item {
        guid,
        token,
        released: false,
        age: 0,
    });
    Ok(token)
}

/// `renew` (FailOpen heartbeat): rotate `guid` to `new` if it is one of `guids`.
pub fn renew(slot: &mut Option<Item>, guids: &[G], new: G) -> Result<(), Refused> {
    if !carries(slot, guids) {
        return Err(*slot);
    }
    if let Some(i) = slot {
        i.guid = new;
        i.released = false;
        i.age = 0;
    }
    Ok(())
}

/// `release` (FailOpen release): `leaseDurationMs` 1 if `guid` is one of `guids`; the item
/// and its token stay.
pub fn release(slot: &mut Option<Item>, guids: &[G]) -> Result<(), Refused> {
    if !carries(slot, guids) {
        return Err(*slot);
    }
    if let Some(i) = slot {
        i.released = true;
    }
    Ok(())
}
