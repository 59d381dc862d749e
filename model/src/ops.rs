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
        holderless: true,
        ..Item::default()
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
/// new token, the previous one plus one (`floor` plus one for an item without a token:
/// `OpenFields::token_floor`, 0 where no TTL deletes items).
pub fn take(slot: &mut Option<Item>, guid: G, waited_out: Option<Ver>, floor: u8) -> Result<u8, Refused> {
    let free = match slot {
        None => true,
        Some(i) => i.released || waited_out == Some(i.version()),
    };
    if !free {
        return Err(*slot);
    }
    let token = match slot {
        Some(i) if i.token > 0 => i.token,
        _ => floor,
    } + 1;
    *slot = Some(Item {
        guid,
        token,
        ..Item::default()
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
        i.holderless = false;
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
        i.holderless = false;
    }
    Ok(())
}

/// The ticket after which a head's next one comes: `ticketNext`, else `fencingToken`
/// (`fifo::last_ticket`).
pub fn last_ticket(head: &Option<Item>) -> u8 {
    head.map_or(0, |h| h.tn.unwrap_or(h.token))
}

/// Free for a Fifo grant: nobody was granted it, or it is released (`fifo::is_free`).
pub fn fifo_free(head: &Option<Item>) -> bool {
    head.is_none_or(|h| h.holderless || h.released)
}

/// `fifo_take_free`: the head is free and no ticket is out; token and ticket become the next
/// ticket, `queueGranted` becomes `queueNext`.
pub fn fifo_take_free(slot: &mut Option<Item>, guid: G) -> Result<u8, Refused> {
    let r = slot.unwrap_or(Item {
        holderless: true,
        ..Item::default()
    });
    let no_ticket_out = r.tn.is_none() || r.tn == Some(r.token);
    if !(fifo_free(slot) && no_ticket_out) {
        return Err(*slot);
    }
    let token = r.tn.unwrap_or(r.token) + 1;
    *slot = Some(Item {
        guid,
        token,
        released: false,
        holderless: false,
        tn: Some(token),
        qg: Some(r.qn.unwrap_or(0)),
        ..r
    });
    Ok(token)
}

/// `fifo_ticket`: the next ticket and queue position, unconditionally. Returns the head as it
/// was.
pub fn fifo_ticket(slot: &mut Option<Item>) -> Option<Item> {
    let before = *slot;
    let mut r = slot.unwrap_or(Item {
        holderless: true,
        ..Item::default()
    });
    r.tn = Some(last_ticket(&before) + 1);
    r.qn = Some(r.qn.unwrap_or(0) + 1);
    *slot = Some(r);
    before
}

/// `fifo_grant`: grant the head to `ticket` at `position` if it is free (or still at
/// `waited_out`) and its token is lower than `ticket`.
pub fn fifo_grant(
    slot: &mut Option<Item>,
    guid: G,
    ticket: u8,
    position: u8,
    waited_out: Option<Ver>,
) -> Result<(), Refused> {
    let r = slot.unwrap_or(Item {
        holderless: true,
        ..Item::default()
    });
    let free = fifo_free(slot) || (slot.is_some() && waited_out == Some(r.version()));
    if !free || (r.token > 0 && r.token >= ticket) {
        return Err(*slot);
    }
    *slot = Some(Item {
        guid,
        token: ticket,
        released: false,
        holderless: false,
        qg: Some(position),
        age: 0,
        ..r
    });
    Ok(())
}

/// `fifo_untake`: give back `ticket` at `position` if both are still the last issued.
pub fn fifo_untake(slot: &mut Option<Item>, ticket: u8, position: u8, previous: u8) -> Result<(), Refused> {
    match slot {
        Some(r) if r.qn == Some(position) && r.tn == Some(ticket) => {
            r.tn = Some(previous);
            r.qn = Some(position.saturating_sub(1));
            Ok(())
        }
        _ => Err(*slot),
    }
}
