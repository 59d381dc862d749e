//! The lock item: attribute names (shared with `dynamodb-lock-client`), key values, the keys of
//! sessions' items and of Fifo's heads and queue entries, and the decoded record. Nothing here knows about DynamoDB's wire format, the SDK or Node.

pub const OWNER: &str = "owner";
pub const GUID: &str = "guid";
pub const FENCING_TOKEN: &str = "fencingToken";
pub const LEASE_DURATION_MS: &str = "leaseDurationMs";
pub const LOCK_ACQUIRED_TIME_UNIX_MS: &str = "lockAcquiredTimeUnixMs";
/// When a FailOpen waiter last said it was waiting (Unix ms, its clock). Only this library
/// writes it; the original ignores it, and its full-item writes drop it.
pub const LOCK_WAITING_UNIX_MS: &str = "lockWaitingUnixMs";
/// The first waiter in line among all processes (its random id), and since when it has been
/// waiting (Unix ms, its clock): a waiter that has waited longer may take its place. Only this
/// library writes them, and only fairness depends on them.
pub const LOCK_WAITER: &str = "lockWaiter";
pub const LOCK_WAITING_SINCE_UNIX_MS: &str = "lockWaitingSinceUnixMs";
/// The `owner` of the first waiter in line, written with its mark, so that people see who
/// waits (the mark's `lockWaiter` is a random id). Nothing is decided from it.
pub const LOCK_WAITER_OWNER: &str = "lockWaiterOwner";
/// The holder's data (`acquireLock(id, { data })`): S for a string, B for a Buffer. Only this
/// library writes it; every acquisition sets or removes it, so it always belongs to the
/// current holder. The original ignores it, and its full-item writes drop it.
pub const LOCK_DATA: &str = "lockData";
/// Fifo head item: the last ticket issued for the resource.
pub const TICKET_NEXT: &str = "ticketNext";
/// Fifo head item: the last queue position issued for the resource.
pub const QUEUE_NEXT: &str = "queueNext";
/// Fifo head item: the queue position of the last entry granted the lock.
pub const QUEUE_GRANTED: &str = "queueGranted";
/// Semaphore head item: how many permits the resource counts, written by its first use. A
/// client constructed with another number is refused (`PermitsMismatch`).
pub const PERMITS: &str = "permits";
/// Semaphore head item: the permits its holders hold together.
pub const PERMITS_HELD: &str = "permitsHeld";
/// Semaphore head item: one attribute per holder, named this and the hex of the `guid` it was
/// granted with (its key), holding `"<permits> <leaseDurationMs> <guid hex> <written> <owner>"`,
/// where the `guid` is the one its last heartbeat wrote and `written` when it wrote it (Unix
/// ms, its clock; for people only, as `lockWrittenUnixMs`).
pub const HOLDER_PREFIX: &str = "holder.";
/// When a holder of this library last wrote the item (Unix ms, the writer's clock): every
/// acquisition, heartbeat, release, hand-over, data update, forced release and Fifo head or
/// entry write of a holder sets it; a waiter's writes (its first-in-line mark, a Fifo ticket
/// drawn or given back) leave it alone, so that it tells when the holder was last heard of.
/// For people only (how long ago a lock was renewed): nothing is ever decided from it. The original ignores it, and
/// its full-item writes drop it.
pub const LOCK_WRITTEN_UNIX_MS: &str = "lockWrittenUnixMs";
/// The session a lock is held through (`session: true`): the session's id, whose item
/// (`session_partition`) is renewed for all of its locks. A lock that names a session writes
/// nothing while it is held; a waiter waits out the session's item, not the lock's. Only this
/// library writes it; the original ignores it, and its full-item writes drop it.
pub const LOCK_SESSION: &str = "lockSession";
/// On a session's item: the `guid`s (a binary set) of the locks held through it that an
/// operator revoked (`forceRelease`). The session's renewal reads it back, and its holder
/// reports exactly those locks lost.
pub const LOCK_REVOKED: &str = "lockRevoked";
/// When an operator last revoked or freed the lock (Unix ms, the operator's clock), for people
/// only.
pub const LOCK_REVOKED_UNIX_MS: &str = "lockRevokedUnixMs";

/// `leaseDurationMs` of a lock held through a session: a day less than the longest delay
/// JavaScript's `setTimeout` takes (2^31 - 1 ms, about 24.8 days), so about 23.9 days. The
/// original waits a lock's `leaseDurationMs` on an unchanged `guid` before it takes it over,
/// and a session lock's `guid` does not change while it is held. It carries
/// `lockAcquiredTimeUnixMs`, from which the original with `trustLocalTime` counts the lease:
/// a clock behind the holder's makes that wait longer than the lease, and `setTimeout` turns a
/// delay above 2^31 - 1 ms into 1 ms, so the day below that limit leaves room for a day of
/// clock skew. Either way the original cannot take a live session's lock for about 23.9 days
/// after its acquisition.
pub const SESSION_LOCK_LEASE_MS: u64 = 2_147_483_647 - 86_400_000;

/// The partition value of a session's item: this prefix and the session's id. On a table with
/// a sort key, its sort value is `SESSION_SORT_VALUE`. Both are strings: sessions need a table
/// whose key attributes are of type S.
pub const SESSION_PREFIX: &str = "dynamodb-lock-native/session/";
pub const SESSION_SORT_VALUE: &str = "session";

/// The key of session `id`'s item, on a table with a sort key or without.
pub fn session_key(id: &str, sorted: bool) -> LockKey {
    LockKey {
        partition: KeyValue::S(format!("{SESSION_PREFIX}{id}")),
        sort: sorted.then(|| KeyValue::S(SESSION_SORT_VALUE.into())),
    }
}

/// The sort value of a Fifo resource's head item.
pub const HEAD_SORT_VALUE: &str = "lock";
/// The sort value prefix of a Fifo resource's queue entries, followed by the 20-digit position.
pub const ENTRY_PREFIX: &str = "q#";

/// The key of Fifo resource `resource`'s head item.
pub fn head_key(resource: &KeyValue) -> LockKey {
    LockKey {
        partition: resource.clone(),
        sort: Some(KeyValue::S(HEAD_SORT_VALUE.into())),
    }
}

/// The key of the queue entry at `position` of Fifo resource `resource`.
pub fn entry_key(resource: &KeyValue, position: u64) -> LockKey {
    LockKey {
        partition: resource.clone(),
        sort: Some(KeyValue::S(format!("{ENTRY_PREFIX}{position:020}"))),
    }
}

/// Whether `key` is a session's item (`session_key`).
pub fn is_session_key(key: &LockKey) -> bool {
    matches!(&key.partition, KeyValue::S(p) if p.starts_with(SESSION_PREFIX))
}

/// The attributes `LockRecord::read` reads; a decoder skips any other an item carries.
pub const READ_ATTRIBUTES: [&str; 16] = [
    OWNER,
    GUID,
    FENCING_TOKEN,
    LEASE_DURATION_MS,
    LOCK_ACQUIRED_TIME_UNIX_MS,
    LOCK_WAITING_UNIX_MS,
    LOCK_WAITER,
    LOCK_WAITING_SINCE_UNIX_MS,
    LOCK_DATA,
    TICKET_NEXT,
    QUEUE_NEXT,
    QUEUE_GRANTED,
    LOCK_WRITTEN_UNIX_MS,
    LOCK_SESSION,
    PERMITS,
    PERMITS_HELD,
];

/// Names a key attribute may not take, because the lock item uses them.
pub const RESERVED_NAMES: [&str; 5] = [
    FENCING_TOKEN,
    LEASE_DURATION_MS,
    LOCK_ACQUIRED_TIME_UNIX_MS,
    OWNER,
    GUID,
];

/// The data a holder keeps with its lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockData {
    S(String),
    B(Vec<u8>),
}

/// `leaseDurationMs` of a released FailOpen lock (the original's convention).
pub const RELEASED_LEASE_MS: u64 = 1;

pub const GUID_LEN: usize = 64;
pub type Guid = [u8; GUID_LEN];

/// A key attribute value as DynamoDB types it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyValue {
    S(String),
    /// A DynamoDB number, kept in its decimal text form.
    N(String),
    B(Vec<u8>),
}

/// Table name and key attribute names, fixed per client.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: String,
    pub partition_key: String,
    pub sort_key: Option<String>,
}

/// The id of one lock: its partition value and, on a table with a sort key, its sort value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockKey {
    pub partition: KeyValue,
    pub sort: Option<KeyValue>,
}

/// The largest fencing token: JavaScript's `Number.MAX_SAFE_INTEGER` (2^53 - 1). Above it a
/// token no longer reaches JavaScript exactly, and two holders could see the same number.
pub const MAX_FENCING_TOKEN: u64 = (1 << 53) - 1;

/// A `guid` as an item carries it. Both libraries write B (64 random bytes); another writer
/// may have left an S or an N, which is kept as found: the original compares guids by value
/// whatever their type, and a waiter names in its takeover's condition the very value it saw.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GuidValue {
    B(Vec<u8>),
    S(String),
    /// A number in its decimal text form.
    N(String),
}

/// What identifies one holder's tenure as seen by a waiter: a heartbeat changes `guid`, a new
/// acquisition changes both. `guid` `None`: the item has none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    pub guid: Option<GuidValue>,
    pub fencing_token: Option<u64>,
}

/// An attribute value as a reply carries it, before the lock reads it: DynamoDB's scalar types,
/// or the name of any other type (`BOOL`, `NULL`, `L`, `M`, `SS`, ...; for a user's object,
/// the JavaScript type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    S(String),
    /// A number in its decimal text form.
    N(String),
    B(Vec<u8>),
    Other(String),
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::S(s) => write!(f, "the string {s:?}"),
            Found::N(n) => write!(f, "the number {n}"),
            Found::B(b) => write!(f, "{} bytes of binary", b.len()),
            Found::Other(t) => write!(f, "a value of type {t}"),
        }
    }
}

/// An attribute of the lock that holds what neither library writes and the protocol cannot
/// act on safely: the item is refused by name (`CorruptLockItem`), never rounded or replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub attribute: &'static str,
    /// What was found, for people: its type and value.
    pub found: String,
}

/// The decoded lock item. Every field is optional: the table may hold items written by other
/// versions of either library, and decoding must not fail on them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRecord {
    pub owner: Option<String>,
    pub guid: Option<GuidValue>,
    pub fencing_token: Option<u64>,
    pub lease_duration_ms: Option<u64>,
    pub lock_acquired_time_unix_ms: Option<u64>,
    pub lock_waiting_unix_ms: Option<u64>,
    pub lock_waiter: Option<String>,
    pub lock_waiting_since_unix_ms: Option<u64>,
    /// `lockWrittenUnixMs`: when this library last wrote the item, for people only.
    pub lock_written_unix_ms: Option<u64>,
    /// `lockSession`: the session the lock is held through.
    pub session: Option<String>,
    /// `lockData`. Boxed: most items carry none.
    pub data: Option<Box<LockData>>,
    /// A session item's `lockRevoked` (`LOCK_REVOKED`): the `guid`s of its locks an operator
    /// revoked, in byte order.
    pub revoked: Vec<Vec<u8>>,
    /// Fifo head item only (boxed: other items, and errors carrying them, stay small).
    pub queue: Option<Box<QueueCounters>>,
    /// The first attribute the item holds in a form the protocol refuses (`LockRecord::read`).
    /// Boxed: almost every item has none.
    pub malformed: Option<Box<Malformed>>,
}

/// A Fifo head item's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// `ticketNext`: the last ticket issued.
    pub ticket_next: Option<u64>,
    /// `queueNext`: the last queue position issued.
    pub queue_next: Option<u64>,
    /// `queueGranted`: the queue position of the last entry granted the lock.
    pub queue_granted: Option<u64>,
    /// `permits`, `permitsHeld`: a semaphore's head only.
    pub permits: Option<u64>,
    pub permits_held: Option<u64>,
    /// A semaphore's holders, in the order read.
    pub holders: Vec<SemHolder>,
    /// The first counter the head holds in a form Fifo refuses (`LockRecord::head_refusal`).
    /// Kept apart from `LockRecord::malformed`: only a Fifo head is refused for its counters.
    pub malformed: Option<Malformed>,
}

/// One holder of a semaphore's permits as its head carries it (`HOLDER_PREFIX`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemHolder {
    /// The `guid` it was granted with: its attribute's name.
    pub key: Guid,
    /// The `guid` its last heartbeat wrote.
    pub guid: Guid,
    pub permits: u64,
    pub lease_duration_ms: u64,
    pub written_unix_ms: Option<u64>,
    pub owner: String,
}

/// The attribute name of the semaphore holder granted with `key`.
pub fn holder_name(key: &[u8]) -> String {
    let mut s = String::with_capacity(HOLDER_PREFIX.len() + 2 * key.len());
    s.push_str(HOLDER_PREFIX);
    push_hex(&mut s, key);
    s
}

/// The value of a semaphore holder's attribute.
pub fn holder_value(permits: u64, lease_duration_ms: u64, guid: &[u8], written_unix_ms: u64, owner: &str) -> String {
    let mut s = format!("{permits} {lease_duration_ms} ");
    push_hex(&mut s, guid);
    s.push_str(&format!(" {written_unix_ms} "));
    s.push_str(owner);
    s
}

/// A `guid` in the form a holder's value carries it, for a condition to look for.
pub fn guid_hex(guid: &[u8]) -> String {
    let mut s = String::with_capacity(2 * guid.len());
    push_hex(&mut s, guid);
    s
}

fn push_hex(s: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
}

fn guid_from_hex(hex: &str) -> Option<Guid> {
    if hex.len() != 2 * GUID_LEN || !hex.is_ascii() {
        return None;
    }
    let mut g = [0u8; GUID_LEN];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(g)
}

/// A semaphore holder's attribute, `name` and `value`, decoded: `None` if either is not in
/// the form this library writes.
fn read_holder(name: &str, value: &Found) -> Option<SemHolder> {
    let key = guid_from_hex(name.strip_prefix(HOLDER_PREFIX)?)?;
    let Found::S(v) = value else { return None };
    let mut parts = v.splitn(5, ' ');
    let permits = parse_u64(parts.next()?).filter(|p| (1..=MAX_FENCING_TOKEN).contains(p))?;
    let lease_duration_ms = parse_u64(parts.next()?).filter(|l| *l <= MAX_FENCING_TOKEN)?;
    let guid = guid_from_hex(parts.next()?)?;
    let written_unix_ms = parts.next().and_then(parse_u64);
    let owner = parts.next().unwrap_or("").to_string();
    Some(SemHolder {
        key,
        guid,
        permits,
        lease_duration_ms,
        written_unix_ms,
        owner,
    })
}

impl LockRecord {
    pub fn is_released(&self) -> bool {
        self.lease_duration_ms == Some(RELEASED_LEASE_MS)
    }

    pub fn carries(&self, guid: &[u8]) -> bool {
        matches!(&self.guid, Some(GuidValue::B(b)) if b == guid)
    }

    /// Reads one attribute of a reply into the record. This is the one rule for what each lock
    /// attribute may hold, whoever decodes the reply (DynamoDB's JSON, a user's object):
    /// - `fencingToken`: an integer N in `0..=MAX_FENCING_TOKEN`. Anything else (negative,
    ///   fractional, 2^53 or more, another type) is refused: a token handed out from it would
    ///   be rounded, repeated or reset, and two holders could share one.
    /// - `guid`: B, or an S or N kept by value (the original takes such an item over after its
    ///   lease, and so does a waiter here). Any other type is refused: it cannot be named in a
    ///   condition as it was seen.
    /// - `leaseDurationMs`: an integer N in `0..=MAX_FENCING_TOKEN`. Anything else is refused:
    ///   no waiter could tell how long the holder believes it holds the lock.
    /// - `lockAcquiredTimeUnixMs` (it may only shorten a `trustLocalTime` wait), `owner`
    ///   (informational) and the waiting marks (fairness only), in another form, read as
    ///   absent: the whole lease is waited out, nobody is named.
    /// - `lockWrittenUnixMs` (for people only) in another form reads as unknown.
    /// - The Fifo counters (`ticketNext`, `queueNext`, `queueGranted`): an integer N in
    ///   `0..=MAX_FENCING_TOKEN`, like a token (tickets become tokens). In another form they
    ///   read as absent and are kept in the counters' `malformed`: a Fifo head is refused for
    ///   them (`head_refusal`), any other item is not concerned.
    ///
    /// The first refused attribute is kept in `malformed`.
    pub fn read(&mut self, name: &str, value: Found) {
        let integer = |v: &Found| match v {
            Found::N(n) => parse_u64(n).filter(|t| *t <= MAX_FENCING_TOKEN),
            _ => None,
        };
        match name {
            FENCING_TOKEN => match integer(&value) {
                Some(t) => self.fencing_token = Some(t),
                None => self.refuse(FENCING_TOKEN, &value),
            },
            LEASE_DURATION_MS => match integer(&value) {
                Some(ms) => self.lease_duration_ms = Some(ms),
                None => self.refuse(LEASE_DURATION_MS, &value),
            },
            GUID => match value {
                Found::B(b) => self.guid = Some(GuidValue::B(b)),
                Found::S(s) => self.guid = Some(GuidValue::S(s)),
                Found::N(n) => self.guid = Some(GuidValue::N(n)),
                Found::Other(_) => self.refuse(GUID, &value),
            },
            OWNER => self.owner = text(value),
            LOCK_WAITER => self.lock_waiter = text(value),
            // A session named otherwise than by a string cannot be waited out.
            LOCK_SESSION => match value {
                Found::S(id) => self.session = Some(id),
                other => self.refuse(LOCK_SESSION, &other),
            },
            LOCK_ACQUIRED_TIME_UNIX_MS => self.lock_acquired_time_unix_ms = number(&value),
            LOCK_WAITING_UNIX_MS => self.lock_waiting_unix_ms = number(&value),
            LOCK_WAITING_SINCE_UNIX_MS => self.lock_waiting_since_unix_ms = number(&value),
            LOCK_WRITTEN_UNIX_MS => self.lock_written_unix_ms = number(&value),
            TICKET_NEXT | QUEUE_NEXT | QUEUE_GRANTED | PERMITS | PERMITS_HELD => {
                let read = integer(&value);
                let q = self.queue_mut();
                let (slot, attribute) = match name {
                    TICKET_NEXT => (&mut q.ticket_next, TICKET_NEXT),
                    QUEUE_NEXT => (&mut q.queue_next, QUEUE_NEXT),
                    QUEUE_GRANTED => (&mut q.queue_granted, QUEUE_GRANTED),
                    PERMITS => (&mut q.permits, PERMITS),
                    _ => (&mut q.permits_held, PERMITS_HELD),
                };
                *slot = read;
                if read.is_none() {
                    q.malformed.get_or_insert_with(|| Malformed {
                        attribute,
                        found: value.to_string(),
                    });
                }
            }
            _ if name.starts_with(HOLDER_PREFIX) => {
                let read = read_holder(name, &value);
                let q = self.queue_mut();
                match read {
                    Some(h) => q.holders.push(h),
                    None => {
                        q.malformed.get_or_insert_with(|| Malformed {
                            attribute: HOLDER_PREFIX,
                            found: value.to_string(),
                        });
                    }
                }
            }
            LOCK_DATA => {
                self.data = match value {
                    Found::S(s) => Some(Box::new(LockData::S(s))),
                    Found::B(b) => Some(Box::new(LockData::B(b))),
                    _ => None,
                }
            }
            _ => {}
        }
    }

    /// Why an acquisition or `getLock` refuses the item, if it does: the attribute `read` refused,
    /// or a `fencingToken` of `MAX_FENCING_TOKEN`, from which no acquisition can rise.
    pub fn refusal(&self) -> Option<Malformed> {
        if let Some(m) = &self.malformed {
            return Some((**m).clone());
        }
        (self.fencing_token == Some(MAX_FENCING_TOKEN)).then(|| Malformed {
            attribute: FENCING_TOKEN,
            found: format!("the number {MAX_FENCING_TOKEN}, the largest token, which no acquisition can raise"),
        })
    }

    /// Why a Fifo acquisition refuses the item as a resource's head, if it does: what `read`
    /// refused, of the lock's attributes or of the counters. A waiter that holds its ticket
    /// already is refused by the same rule: no token is handed out from a head that holds what
    /// neither library writes.
    pub fn head_refusal(&self) -> Option<Malformed> {
        if let Some(m) = &self.malformed {
            return Some((**m).clone());
        }
        self.queue.as_ref().and_then(|q| q.malformed.clone())
    }

    /// Why no new Fifo ticket can be taken on the head, if none can: `head_refusal`, or a
    /// `ticketNext`, `fencingToken` or `queueNext` of `MAX_FENCING_TOKEN`, from which no ticket
    /// (hence no token) or queue position can rise. Tickets issued before stay good: the last
    /// one, `MAX_FENCING_TOKEN`, is still granted.
    pub fn ticket_refusal(&self) -> Option<Malformed> {
        if let Some(m) = self.head_refusal() {
            return Some(m);
        }
        let top = |attribute: &'static str, what: &str| Malformed {
            attribute,
            found: format!("the number {MAX_FENCING_TOKEN}, the largest {what}, which no acquisition can raise"),
        };
        if self.ticket_next() == Some(MAX_FENCING_TOKEN) {
            return Some(top(TICKET_NEXT, "ticket"));
        }
        if self.fencing_token == Some(MAX_FENCING_TOKEN) {
            return Some(top(FENCING_TOKEN, "token"));
        }
        if self.queue_next() == Some(MAX_FENCING_TOKEN) {
            return Some(top(QUEUE_NEXT, "queue position"));
        }
        None
    }

    fn refuse(&mut self, attribute: &'static str, value: &Found) {
        self.malformed.get_or_insert_with(|| {
            Box::new(Malformed {
                attribute,
                found: value.to_string(),
            })
        });
    }

    pub fn ticket_next(&self) -> Option<u64> {
        self.queue.as_ref().and_then(|q| q.ticket_next)
    }

    pub fn queue_next(&self) -> Option<u64> {
        self.queue.as_ref().and_then(|q| q.queue_next)
    }

    pub fn queue_granted(&self) -> Option<u64> {
        self.queue.as_ref().and_then(|q| q.queue_granted)
    }

    /// The Fifo counters, created empty if absent.
    pub fn queue_mut(&mut self) -> &mut QueueCounters {
        self.queue.get_or_insert_with(Default::default)
    }

    pub fn version(&self) -> Version {
        Version {
            guid: self.guid.clone(),
            fencing_token: self.fencing_token,
        }
    }
}

fn text(v: Found) -> Option<String> {
    match v {
        Found::S(s) => Some(s),
        _ => None,
    }
}

fn number(v: &Found) -> Option<u64> {
    match v {
        Found::N(n) => parse_u64(n),
        _ => None,
    }
}

/// Parses a DynamoDB number attribute into a non-negative integer, accepting forms such as
/// `"100"`, `"100.0"` and `"1e3"` that other writers may produce.
pub fn parse_u64(n: &str) -> Option<u64> {
    if let Ok(v) = n.parse::<u64>() {
        return Some(v);
    }
    let f = n.parse::<f64>().ok()?;
    (f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64).then_some(f as u64)
}

/// The first fencing token of an item created where TTL may have deleted an earlier one: the
/// current time in microseconds since 1970 (the creation time in ms, times 1000). A deleted
/// item was last written at least a TTL margin (an hour by default) before it could vanish, and
/// no item takes a thousand acquisitions per millisecond (DynamoDB writes one item at most about
/// a thousand times per second), so the new token starts above every token the old item had, even
/// with the creator's clock that far behind. It stays below 2^53 until the year 2255.
pub fn token_floor(now_unix_ms: u64) -> u64 {
    now_unix_ms.saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_other_writers_forms_parse() {
        assert_eq!(parse_u64("100"), Some(100));
        assert_eq!(parse_u64("100.0"), Some(100));
        assert_eq!(parse_u64("1e3"), Some(1000));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("1.5"), None);
        assert_eq!(parse_u64("x"), None);
    }

    fn read(name: &str, value: Found) -> LockRecord {
        let mut r = LockRecord::default();
        r.read(name, value);
        r
    }

    #[test]
    fn fencing_tokens_outside_the_safe_integers_are_refused_by_name() {
        assert_eq!(read(FENCING_TOKEN, Found::N("41".into())).fencing_token, Some(41));
        assert_eq!(
            read(FENCING_TOKEN, Found::N("9007199254740991".into())).fencing_token,
            Some(MAX_FENCING_TOKEN)
        );
        for bad in [
            Found::N("-5".into()),
            Found::N("1.5".into()),
            Found::N("9007199254740992".into()),
            Found::N("1152921504606846976".into()),
            Found::S("7".into()),
            Found::B(vec![7]),
            Found::Other("BOOL".into()),
        ] {
            let r = read(FENCING_TOKEN, bad.clone());
            assert_eq!(r.fencing_token, None, "{bad:?}");
            let m = r.malformed.expect("refused");
            assert_eq!((m.attribute, m.found), (FENCING_TOKEN, bad.to_string()));
        }
        assert_eq!(Found::N("-5".into()).to_string(), "the number -5");
        assert_eq!(Found::S("x".into()).to_string(), "the string \"x\"");
    }

    #[test]
    fn leases_that_are_not_whole_milliseconds_are_refused() {
        assert_eq!(
            read(LEASE_DURATION_MS, Found::N("1000".into())).lease_duration_ms,
            Some(1000)
        );
        for bad in [Found::N("-1".into()), Found::N("0.5".into()), Found::S("1000".into())] {
            let r = read(LEASE_DURATION_MS, bad);
            assert_eq!(r.malformed.map(|m| m.attribute), Some(LEASE_DURATION_MS));
        }
    }

    #[test]
    fn guids_of_another_writer_are_kept_by_value() {
        let r = read(GUID, Found::S("abc".into()));
        assert_eq!(r.guid, Some(GuidValue::S("abc".into())));
        assert_eq!(r.version().guid, Some(GuidValue::S("abc".into())));
        assert!(r.malformed.is_none());
        assert!(!r.carries(b"abc"), "a string guid is never ours");
        assert_eq!(read(GUID, Found::N("12".into())).guid, Some(GuidValue::N("12".into())));
        let r = read(GUID, Found::Other("BOOL".into()));
        assert_eq!(r.malformed.map(|m| m.attribute), Some(GUID));
    }

    #[test]
    fn informational_and_shortening_attributes_in_another_form_read_as_absent() {
        for (name, bad) in [
            (OWNER, Found::N("1".into())),
            (LOCK_ACQUIRED_TIME_UNIX_MS, Found::S("now".into())),
            (LOCK_ACQUIRED_TIME_UNIX_MS, Found::N("-3".into())),
            (LOCK_WAITING_UNIX_MS, Found::S("x".into())),
        ] {
            let r = read(name, bad);
            assert_eq!(r, LockRecord::default(), "{name}");
        }
    }

    #[test]
    fn the_first_refused_attribute_is_kept() {
        let mut r = LockRecord::default();
        r.read(GUID, Found::Other("NULL".into()));
        r.read(FENCING_TOKEN, Found::N("-1".into()));
        assert_eq!(r.malformed.map(|m| m.attribute), Some(GUID));
    }

    #[test]
    fn released_means_lease_of_one() {
        let mut r = LockRecord {
            lease_duration_ms: Some(1),
            ..Default::default()
        };
        assert!(r.is_released());
        r.lease_duration_ms = Some(10);
        assert!(!r.is_released());
    }
}
