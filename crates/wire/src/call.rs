//! Each operation's DynamoDB request (`request`), and its reply read back as `op::apply`
//! answers (`Read::reply`).

use dynamodb_lock_core::item::{self, Guid, LockKey, LockRecord, TableSpec, RELEASED_LEASE_MS};
use dynamodb_lock_core::op::{Grant, Op, OpenFields, Reply};

use crate::expr::{data_attr, Expr, NEXT_TICKET};
use crate::json::{Attr, Body, Response};
use crate::Error;

/// The request of `op` on the item at `key` of `table`. A holder's write is stamped
/// `lockWrittenUnixMs` with `now_unix_ms`, this host's clock, as is a semaphore holder's value.
pub fn request(table: &TableSpec, key: &LockKey, op: &Op<'_, LockRecord>, now_unix_ms: u64) -> Result<Call, Error> {
    Write { table, now_unix_ms }.request(key, op)
}

/// The writes on one table, stamped with one moment.
struct Write<'t> {
    table: &'t TableSpec,
    now_unix_ms: u64,
}

impl Write<'_> {
    /// The same table's writes stamped with `now_unix_ms`: an operator's write is stamped
    /// with the time it records (`lockRevokedUnixMs`, the time of acquisition), so that a
    /// revocation reads as the item's last write until the next one.
    fn at(&self, now_unix_ms: u64) -> Write<'_> {
        Write {
            table: self.table,
            now_unix_ms,
        }
    }

    /// A conditional write's expressions on this table.
    fn expr(&self) -> Expr<'_> {
        Expr::new(&self.table.partition_key)
    }

    /// One conditional `UpdateItem` of a holder (or of a forced release): it also sets
    /// `lockWrittenUnixMs` (one more `SET`, in the same request).
    fn update(&self, key: &LockKey, mut e: Expr<'_>, returns: &str, read: Read) -> Call {
        e.stamp(self.now_unix_ms);
        self.send_update(key, e, returns, read)
    }

    /// One conditional `UpdateItem` as given. A waiter's write (its first-in-line mark, a Fifo
    /// ticket) and an operator's mark are sent through it directly: they leave
    /// `lockWrittenUnixMs` alone, which tells when the holder last wrote.
    fn send_update(&self, key: &LockKey, e: Expr<'_>, returns: &str, read: Read) -> Call {
        let mut b = Body::new(&self.table.name);
        b.item("Key", self.table, key, &[]);
        e.write(&mut b);
        b.str("ReturnValues", returns);
        b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        Call::new("UpdateItem", b, read)
    }

    /// One conditional `DeleteItem`; with `old`, the item deleted, or the one a failed condition
    /// met, comes back.
    fn delete(&self, key: &LockKey, e: Expr<'_>, old: bool, read: Read) -> Call {
        let mut b = Body::new(&self.table.name);
        b.item("Key", self.table, key, &[]);
        e.write(&mut b);
        if old {
            b.str("ReturnValues", "ALL_OLD");
            b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        }
        Call::new("DeleteItem", b, read)
    }

    /// One `PutItem` of an item that must not exist yet: the key and `attrs`.
    fn put_new(&self, key: &LockKey, attrs: &[(&str, Attr<'_>)]) -> Call {
        let mut b = Body::new(&self.table.name);
        b.item("Item", self.table, key, attrs);
        b.str("ConditionExpression", "attribute_not_exists(#pk)");
        b.names(&[("#pk", &self.table.partition_key)]);
        b.str("ReturnValuesOnConditionCheckFailure", "ALL_OLD");
        Call::new("PutItem", b, Read::Done)
    }

    /// A waiter's write of its Fifo ticket (`e`) with one more place in the queue
    /// (`queueNext`): the head as it was comes back.
    fn join_queue(&self, head: &LockKey, mut e: Expr<'_>) -> Call {
        e.set("#qn = if_not_exists(#qn, :zero) + :one")
            .value(":zero", Attr::N(0))
            .value(":one", Attr::N(1))
            .ticket_can_rise();
        self.send_update(head, e, "ALL_OLD", Read::Before)
    }

    /// Each operation's DynamoDB request: its condition and update expressions, as
    /// `op::allowed` and `op::apply` state them, and what its reply is read for.
    fn request(&self, key: &LockKey, op: &Op<'_, LockRecord>) -> Result<Call, Error> {
        let mut e = self.expr();
        Ok(match *op {
            Op::Get => {
                let mut b = Body::new(&self.table.name);
                b.item("Key", self.table, key, &[]);
                b.bool("ConsistentRead", true);
                Call::new("GetItem", b, Read::Before)
            }
            // A new item, written whole.
            Op::PutIfAbsent { owner, guid, data, ttl } => {
                let mut attrs = vec![
                    (item::OWNER, Attr::S(owner)),
                    (item::GUID, Attr::B(guid)),
                    (item::LOCK_WRITTEN_UNIX_MS, Attr::N(self.now_unix_ms)),
                ];
                attrs.extend(data.map(|d| (item::LOCK_DATA, data_attr(d))));
                attrs.extend(ttl.map(|(name, at)| (name, Attr::N(at))));
                self.put_new(key, &attrs)
            }
            // Deleted while one of `guids` holds it; the first-in-line mark it carried comes
            // back.
            Op::DeleteIfGuid { guids } => {
                e.guid_is(guids)?;
                self.delete(key, e, true, Read::Mark)
            }
            // A free item (absent, released, or the version `waited_out` still there) taken
            // with the next fencing token, which comes back.
            Op::Take {
                fields,
                guid,
                waited_out,
                clear_mark,
            } => {
                e.holder(fields, ":guid", guid)
                    .next_token(fields.token_floor)
                    .data(fields.data)
                    .ttl(fields.ttl)
                    .session(fields.session);
                if clear_mark {
                    e.remove("#w, #wid, #ws, #wo");
                }
                e.value(":released", Attr::N(RELEASED_LEASE_MS)).free_to_take(waited_out);
                self.update(key, e, "UPDATED_NEW", Read::Token)
            }
            // Passed on under `new_guid` while no waiter's mark is fresh; with `fields`, to a
            // new holder, with the next fencing token, which comes back.
            Op::HandOver {
                guids,
                new_guid,
                fields,
                marks_fresh_since_unix_ms: fresh,
                ttl,
            } => {
                match fields {
                    Some(f) => e.holder(f, ":new", new_guid).next_token(0).session(f.session),
                    None => e.set_to("#guid", ":new", Attr::B(new_guid)),
                };
                // The next holder brings its own data, if any, with a write of its own.
                e.data(None)
                    .ttl(ttl)
                    .guid_is(guids)?
                    .value(":fresh", Attr::N(fresh))
                    .any(["attribute_not_exists(#w)", "#w < :fresh"]);
                match fields {
                    Some(_) => {
                        e.token_can_rise();
                        self.update(key, e, "UPDATED_NEW", Read::HandedOver(true))
                    }
                    None => self.update(key, e, "NONE", Read::HandedOver(false)),
                }
            }
            // A heartbeat, under a new `guid`. A session's renewal reads its item back: an
            // operator's revocation of one of its locks is on it (`lockRevoked`), and reaches
            // the holder with this answer.
            Op::Renew {
                guids,
                new_guid,
                fields,
            } => {
                // Held (`op::free` is false: a lease that is not the released one): a
                // heartbeat that lands after the release must not take the lock back. `<>`
                // alone is true on an item without a lease (DynamoDB Local applies it; the
                // agreement test caught it), which `free` counts as free: the lease must
                // exist too.
                e.holder(fields, ":new", new_guid)
                    .ttl(fields.ttl)
                    .value(":released", Attr::N(RELEASED_LEASE_MS))
                    .guid_is(guids)?
                    .and("attribute_exists(#lease) AND #lease <> :released");
                let returns = if item::is_session_key(key) { "ALL_NEW" } else { "NONE" };
                self.update(key, e, returns, Read::Revoked)
            }
            Op::PutItem { .. } => {
                return Err(Error::NotSupported(
                    "the original's whole-item put is sent only through a dynamodb object; this store writes the lock item with UpdateItem".into(),
                ))
            }
            // The lease set to the released one; the first-in-line mark the item carried comes
            // back.
            Op::Release {
                guids,
                lock_acquired_time_unix_ms,
                ttl,
            } => {
                e.set_to("#lease", ":released", Attr::N(RELEASED_LEASE_MS))
                    .ttl(ttl)
                    .acquired_time(lock_acquired_time_unix_ms)
                    .guid_is(guids)?;
                self.update(key, e, "ALL_OLD", Read::Mark)
            }
            // The holder's data (or its removal) and the TTL attribute.
            Op::SetData { guids, data, ttl } => {
                e.data(data).ttl(ttl).guid_is(guids)?;
                self.update(key, e, "NONE", Read::Done)
            }
            // A waiter's first-in-line mark, where no other waiter's is fresh (or the other
            // waited less long). A waiter's write: it leaves `lockWrittenUnixMs` alone.
            Op::MarkWaiting(ref mark) => {
                e.set_to("#w", ":w", Attr::N(mark.now_unix_ms))
                    .set_to("#wid", ":wid", Attr::S(mark.waiter))
                    .set_to("#ws", ":ws", Attr::N(mark.since_unix_ms))
                    .set_to("#wo", ":wo", Attr::S(mark.owner))
                    .value(":stale", Attr::N(mark.stale_before_unix_ms))
                    .and("attribute_exists(#pk)")
                    .any(["attribute_not_exists(#w)", "#w < :stale", "#wid = :wid", "#ws > :ws"]);
                self.send_update(key, e, "NONE", Read::Done)
            }
            // A free Fifo head with no ticket out taken with the next ticket, which comes back
            // as the fencing token.
            Op::FifoTakeFree { fields, guid } => {
                e.holder(fields, ":guid", guid)
                    .value(":released", Attr::N(RELEASED_LEASE_MS))
                    .any(["attribute_not_exists(#lease)", "#lease = :released"])
                    .and("attribute_not_exists(#perm)")
                    .take_next_ticket();
                self.update(key, e, "UPDATED_NEW", Read::Token)
            }
            // The next ticket and a place at the queue's end.
            Op::FifoTicket => {
                e.set(&format!("#tn = {NEXT_TICKET}"));
                self.join_queue(key, e)
            }
            // The ticket `ticket` (past every ticket issued and every token) and a place at the
            // queue's end.
            Op::FifoReserve { ticket } => {
                e.set_to("#tn", ":t", Attr::N(ticket))
                    .any([
                        "attribute_not_exists(#tn) AND attribute_not_exists(#ft)",
                        "attribute_not_exists(#tn) AND #ft < :t",
                        "#tn < :t",
                    ]);
                self.join_queue(key, e)
            }
            // A ticket given back while it is still the last one issued.
            Op::FifoUntake {
                ticket,
                position,
                previous_ticket,
            } => {
                e.set_to("#tn", ":prev", Attr::N(previous_ticket))
                    .set_to("#qn", ":pprev", Attr::N(position.saturating_sub(1)))
                    .value(":t", Attr::N(ticket))
                    .value(":p", Attr::N(position))
                    .and("#qn = :p AND #tn = :t")
                    .any(["attribute_not_exists(#ft)", "#ft < :t"]);
                self.send_update(key, e, "NONE", Read::Done)
            }
            // A waiter's own item, new.
            Op::FifoPutEntry(ref entry) => {
                let mut attrs = vec![
                    (item::OWNER, Attr::S(entry.owner)),
                    (item::GUID, Attr::B(entry.guid)),
                    (item::FENCING_TOKEN, Attr::N(entry.ticket)),
                    (item::LEASE_DURATION_MS, Attr::N(entry.lease_duration_ms)),
                    (item::LOCK_WRITTEN_UNIX_MS, Attr::N(self.now_unix_ms)),
                    (entry.ttl.0, Attr::N(entry.ttl.1)),
                ];
                attrs.extend(entry.permits.map(|p| (item::PERMITS, Attr::N(p))));
                self.put_new(key, &attrs)
            }
            // A free head (or the version `waited_out` still there) granted to a waiter's
            // ticket, above every token before it.
            Op::FifoGrant {
                fields,
                guid,
                ticket,
                position,
                waited_out,
            } => {
                e.holder(fields, ":guid", guid)
                    .set_to("#ft", ":tk", Attr::N(ticket))
                    .set_to("#qg", ":p", Attr::N(position));
                e.value(":one", Attr::N(RELEASED_LEASE_MS))
                    .free(["attribute_not_exists(#lease)", "#lease = :one"], waited_out)
                    .any(["attribute_not_exists(#ft)", "#ft < :tk"])
                    .and("attribute_not_exists(#perm)");
                self.update(key, e, "NONE", Read::Done)
            }
            // A waiter's item marked finished (the released lease), under a new `guid`.
            Op::FifoFinishEntry { guids, new_guid } => {
                e.set_to("#lease", ":one", Attr::N(RELEASED_LEASE_MS))
                    .set_to("#guid", ":new", Attr::B(new_guid))
                    .guid_is(guids)?;
                self.update(key, e, "NONE", Read::Done)
            }
            // A finished waiter's item deleted.
            Op::FifoDeleteFinished => {
                e.value(":one", Attr::N(RELEASED_LEASE_MS)).and("#lease = :one");
                self.delete(key, e, false, Read::Done)
            }
            // A waiting item's TTL moved on, while it is not finished.
            Op::FifoTouchEntry { ttl } => {
                e.ttl(Some(ttl))
                    .value(":one", Attr::N(RELEASED_LEASE_MS))
                    .and("attribute_exists(#pk) AND #lease <> :one");
                self.update(key, e, "NONE", Read::Done)
            }
            Op::SemTake {
                fields,
                guid,
                limit,
                permits,
            } => return Ok(self.sem_take(key, fields, guid, limit, permits)),
            Op::SemGrant(ref g) => return self.sem_grant(key, g),
            Op::SemRenew {
                key: holder,
                guids,
                new_guid,
                permits,
                fields,
            } => {
                let name = item::holder_name(holder);
                let value = item::holder_value(permits, fields.lease_duration_ms, new_guid, self.now_unix_ms, fields.owner);
                let (hexes, word) = (hexes(guids), permits_word(permits));
                e.name("#h", &name)
                    .set_to("#h", ":hv", Attr::S(&value))
                    .holder_is(&hexes, &word)?;
                self.update(key, e, "NONE", Read::Done)
            }
            Op::SemRelease {
                key: holder,
                guids,
                permits,
            } => {
                let name = item::holder_name(holder);
                let (hexes, word) = (hexes(guids), permits_word(permits));
                e.name("#h", &name)
                    .set("#held = #held - :k")
                    .value(":k", Attr::N(permits))
                    .remove("#h")
                    .holder_is(&hexes, &word)?;
                self.update(key, e, "NONE", Read::NoMark)
            }
            // An operator's release at once, on the version read: the item deleted, or
            // released under a new `guid`.
            Op::ForceFree {
                read,
                new_guid,
                now_unix_ms,
                delete,
            } => {
                e.at_version(read);
                if delete {
                    return Ok(self.delete(key, e, true, Read::Done));
                }
                e.set_to("#lease", ":released", Attr::N(RELEASED_LEASE_MS))
                    .set_to("#guid", ":new", Attr::B(new_guid))
                    .acquired_time(Some(now_unix_ms));
                self.at(now_unix_ms).update(key, e, "NONE", Read::Done)
            }
            // An operator's revocation, on the version read of a held lock (held through the
            // session named, if one is): a new `guid`; through a session, the session's lease
            // and no session.
            Op::Revoke {
                read,
                new_guid,
                now_unix_ms,
                session,
            } => {
                e.at_version(read)
                    .set_to("#guid", ":new", Attr::B(new_guid))
                    .acquired_time(Some(now_unix_ms))
                    .set_to("#rv", ":rv", Attr::N(now_unix_ms))
                    .value(":released", Attr::N(RELEASED_LEASE_MS))
                    .and("attribute_exists(#lease) AND #lease <> :released");
                if let Some((id, lease)) = session {
                    e.set_to("#lease", ":lease", Attr::N(lease))
                        .remove("#sess")
                        .value(":rsess", Attr::S(id))
                        .and("#sess = :rsess");
                }
                self.at(now_unix_ms).update(key, e, "NONE", Read::Done)
            }
            // A revoked lock's `guid` added to its session's item, while the session is held.
            // An operator's write: it leaves `lockWrittenUnixMs` alone, which tells when the
            // session was last renewed.
            Op::MarkRevoked { guid } => {
                e.add("#revoked :rg")
                    .value(":rg", Attr::BS(guid))
                    .value(":released", Attr::N(RELEASED_LEASE_MS))
                    .and("attribute_exists(#guid) AND attribute_exists(#lease) AND #lease <> :released");
                self.send_update(key, e, "NONE", Read::Done)
            }
            // An item nobody holds deleted, on the version and Fifo ticket read.
            Op::Prune {
                read,
                ticket_next,
                permits,
            } => {
                e.at_version(read);
                match ticket_next {
                    Some(t) => e.value(":ptn", Attr::N(t)).and("#tn = :ptn"),
                    None => e.and("attribute_not_exists(#tn)"),
                };
                match permits {
                    true => e
                        .value(":zero", Attr::N(0))
                        .and("attribute_not_exists(#lease)")
                        .any(["attribute_not_exists(#held)", "#held = :zero"]),
                    false => e
                        .value(":released", Attr::N(RELEASED_LEASE_MS))
                        .and("#lease = :released"),
                };
                self.delete(key, e, true, Read::Done)
            }
        })
    }
}

/// One operation's request: the DynamoDB operation, its body, and what its reply is read for.
pub struct Call {
    pub operation: &'static str,
    pub body: String,
    pub read: Read,
}

impl Call {
    fn new(operation: &'static str, body: Body, read: Read) -> Call {
        Call {
            operation,
            body: body.finish(),
            read,
        }
    }
}

/// What an operation's reply is read for, as `op::apply` answers it.
#[derive(Clone, Copy, Debug)]
pub enum Read {
    Done,
    /// The item as it was (a read, a Fifo ticket).
    Before,
    /// The fencing token the write set (`UPDATED_NEW`).
    Token,
    /// The first-in-line mark the item carried (`ALL_OLD`).
    Mark,
    /// A semaphore holder's release: no mark.
    NoMark,
    /// A hand-over, with the token it raised when it has a new holder.
    HandedOver(bool),
    /// A renewal: the `guid`s of the locks an operator revoked, on a session's item.
    Revoked,
}

impl Read {
    pub fn reply(self, r: Response) -> Result<Reply<LockRecord>, Error> {
        Ok(match self {
            Read::Done => Reply::Done,
            Read::Before => Reply::Before(r.record),
            Read::Token => Reply::Token(new_token(r)?),
            Read::Mark => Reply::WaitingMark(r.record.and_then(|r| r.lock_waiting_unix_ms)),
            Read::NoMark => Reply::WaitingMark(None),
            Read::HandedOver(false) => Reply::HandedOver(None),
            Read::HandedOver(true) => Reply::HandedOver(Some(new_token(r)?)),
            Read::Revoked => match r.record.map(|r| r.revoked) {
                Some(guids) if !guids.is_empty() => Reply::Revoked(guids),
                _ => Reply::Done,
            },
        })
    }
}

/// Names for the holders one semaphore grant reclaims, `fifo::MAX_RECLAIM` at most.
const RECLAIM_NAMES: [(&str, &str, &str); dynamodb_lock_core::fifo::MAX_RECLAIM] = [
    ("#r0", ":r0", ":rp0"),
    ("#r1", ":r1", ":rp1"),
    ("#r2", ":r2", ":rp2"),
    ("#r3", ":r3", ":rp3"),
    ("#r4", ":r4", ":rp4"),
    ("#r5", ":r5", ":rp5"),
    ("#r6", ":r6", ":rp6"),
    ("#r7", ":r7", ":rp7"),
];

/// The first word of a semaphore holder's value, with the space after it: its permits.
fn permits_word(permits: u64) -> String {
    format!("{permits} ")
}

/// A holder's `guid`s in hex, as its semaphore holder attribute carries them.
fn hexes(guids: &[Guid]) -> Vec<String> {
    guids.iter().map(|g| item::guid_hex(g)).collect()
}

/// A semaphore's takes and grants on its head item (`Op::SemTake`, `SemGrant`). A holder is
/// one attribute (`item::holder_name`), so that each holder's writes name only its own;
/// `permitsHeld` counts the permits of them all, which conditions compare with the permits a
/// grant may add.
impl Write<'_> {
    /// Semaphore `SemTake`: the first holder of a semaphore with no ticket out takes the next
    /// ticket and its permits, where the limit leaves room for them.
    fn sem_take(&self, head: &LockKey, fields: &OpenFields<'_>, guid: &Guid, limit: u64, permits: u64) -> Call {
        let name = item::holder_name(guid);
        let value = item::holder_value(permits, fields.lease_duration_ms, guid, self.now_unix_ms, fields.owner);
        let mut e = self.expr();
        e.new_holder(&name, &value, limit, limit.saturating_sub(permits))
            // An earlier attempt that landed made it a holder: not counted twice.
            .and("attribute_not_exists(#h)")
            .set("#held = if_not_exists(#held, :zero) + :k")
            .value(":k", Attr::N(permits))
            .take_next_ticket();
        self.update(head, e, "UPDATED_NEW", Read::Token)
    }

    /// `SemGrant`: a waiter's ticket granted with its permits, reclaiming the permits of the
    /// holders in `reclaim` (each still as it was read).
    fn sem_grant(&self, head: &LockKey, g: &Grant<'_, Guid>) -> Result<Call, Error> {
        let (fields, guid, limit, permits) = (g.fields, g.guid, g.limit, g.permits);
        let n = g.reclaim.len();
        if n > RECLAIM_NAMES.len() {
            return Err(Error::Config(format!("{n} holders reclaimed in one grant")));
        }
        let name = item::holder_name(guid);
        let value = item::holder_value(permits, fields.lease_duration_ms, guid, self.now_unix_ms, fields.owner);
        let freed: u64 = g.reclaim.iter().map(|r| r.permits).sum();
        let names: Vec<_> = g.reclaim.iter().map(|r| item::holder_name(&r.key)).collect();
        let hexes: Vec<_> = g.reclaim.iter().map(|r| item::guid_hex(&r.guid)).collect();
        let words: Vec<_> = g.reclaim.iter().map(|r| permits_word(r.permits)).collect();
        let mut e = self.expr();
        e.new_holder(&name, &value, limit, (limit + freed).saturating_sub(permits))
            .set_to("#ft", ":tk", Attr::N(g.ticket))
            .set_to("#qg", ":p", Attr::N(g.position))
            .any(["attribute_not_exists(#ft)", "#ft < :tk"]);
        // `permitsHeld` moves by what the grant adds less what it reclaims.
        match permits >= freed {
            true => e
                .set("#held = if_not_exists(#held, :zero) + :d")
                .value(":d", Attr::N(permits - freed))
                .value(":zero", Attr::N(0)),
            false => e.set("#held = #held - :d").value(":d", Attr::N(freed - permits)),
        };
        for (i, &(hn, vn, pn)) in RECLAIM_NAMES[..n].iter().enumerate() {
            e.name(hn, &names[i])
                .value(vn, Attr::S(&hexes[i]))
                .value(pn, Attr::S(&words[i]))
                .and(format!("contains({hn}, {vn}) AND begins_with({hn}, {pn})"))
                .remove(hn);
        }
        Ok(self.update(head, e, "NONE", Read::Done))
    }
}

/// The fencing token an update returned (`UPDATED_NEW`).
fn new_token(reply: Response) -> Result<u64, Error> {
    reply
        .record
        .and_then(|r| r.fencing_token)
        .ok_or_else(|| Error::Invalid("DynamoDB did not return a new fencingToken that reads as one".into()))
}

#[cfg(test)]
mod tests {
    use dynamodb_lock_core::item::{KeyValue, LockKey, TableSpec};
    use dynamodb_lock_core::op::{Op, WaitMark};

    use super::{request, Read};
    use crate::json::read_response;

    fn table() -> TableSpec {
        TableSpec {
            name: "locks".into(),
            partition_key: "id".into(),
            sort_key: None,
        }
    }

    fn key() -> LockKey {
        LockKey {
            partition: KeyValue::S("a".into()),
            sort: None,
        }
    }

    #[test]
    fn a_holders_write_is_stamped_with_the_moment_given_and_a_waiters_is_not() {
        let guid = [7u8; 64];
        let renew = Op::Renew {
            guids: &[guid],
            new_guid: &[8u8; 64],
            fields: &dynamodb_lock_core::op::OpenFields {
                owner: "o",
                lease_duration_ms: 1_000,
                lock_acquired_time_unix_ms: None,
                data: None,
                ttl: None,
                token_floor: 0,
                session: None,
            },
        };
        let call = request(&table(), &key(), &renew, 1_784_000_123_456).unwrap();
        assert_eq!(call.operation, "UpdateItem");
        assert!(call.body.contains("\"1784000123456\""), "{}", call.body);
        assert!(call.body.contains("lockWrittenUnixMs"), "{}", call.body);
        let mark = Op::MarkWaiting(WaitMark {
            waiter: "w",
            owner: "o",
            since_unix_ms: 10,
            now_unix_ms: 20,
            stale_before_unix_ms: 5,
        });
        let call = request(&table(), &key(), &mark, 1_784_000_123_456).unwrap();
        assert!(!call.body.contains("1784000123456"), "{}", call.body);
        assert!(!call.body.contains("lockWrittenUnixMs"), "{}", call.body);
    }

    #[test]
    fn a_revocation_is_stamped_written_at_the_moment_it_records() {
        let read = dynamodb_lock_core::item::Version {
            guid: Some(dynamodb_lock_core::item::GuidValue::B(vec![1; 64])),
            fencing_token: Some(3),
        };
        let revoke = Op::Revoke {
            read: &read,
            new_guid: &[9u8; 64],
            now_unix_ms: 1_784_000_000_001,
            session: None,
        };
        let call = request(&table(), &key(), &revoke, 1_784_000_000_007).unwrap();
        assert!(call.body.contains(r#"":lw":{"N":"1784000000001"}"#), "{}", call.body);
        assert!(call.body.contains(r#"":rv":{"N":"1784000000001"}"#), "{}", call.body);
        assert!(!call.body.contains("1784000000007"), "{}", call.body);
    }

    #[test]
    fn a_take_reads_its_new_token_and_refuses_a_reply_without_one() {
        let ok = read_response(br#"{"Attributes":{"fencingToken":{"N":"42"}}}"#).unwrap();
        assert_eq!(Read::Token.reply(ok).unwrap(), dynamodb_lock_core::op::Reply::Token(42));
        let empty = read_response(b"{}").unwrap();
        assert!(matches!(Read::Token.reply(empty), Err(crate::Error::Invalid(_))));
    }

    #[test]
    fn a_condition_on_more_guids_than_one_write_names_is_refused() {
        let guids = [[1u8; 64]; 5];
        let release = Op::DeleteIfGuid { guids: &guids };
        assert!(matches!(
            request(&table(), &key(), &release, 0),
            Err(crate::Error::Config(_))
        ));
    }
}
