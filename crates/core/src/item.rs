//! The lock item: attribute names (shared with `dynamodb-lock-client`), key values and the
//! decoded record. Nothing here knows about DynamoDB's wire format, the SDK or Node.

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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockKey {
    pub partition: KeyValue,
    pub sort: Option<KeyValue>,
}

/// What identifies one holder's tenure as seen by a waiter: a heartbeat changes `guid`, a new
/// acquisition changes both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub guid: Vec<u8>,
    pub fencing_token: Option<u64>,
}

/// The decoded lock item. Every field is optional: the table may hold items written by other
/// versions of either library, and decoding must not fail on them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockRecord {
    pub owner: Option<String>,
    pub guid: Option<Vec<u8>>,
    pub fencing_token: Option<u64>,
    pub lease_duration_ms: Option<u64>,
    pub lock_acquired_time_unix_ms: Option<u64>,
    pub lock_waiting_unix_ms: Option<u64>,
    pub lock_waiter: Option<String>,
    pub lock_waiting_since_unix_ms: Option<u64>,
    /// `lockData`. Boxed: most items carry none.
    pub data: Option<Box<LockData>>,
    /// Fifo head item only (boxed: other items, and errors carrying them, stay small).
    pub queue: Option<Box<QueueCounters>>,
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
}

impl LockRecord {
    pub fn is_released(&self) -> bool {
        self.lease_duration_ms == Some(RELEASED_LEASE_MS)
    }

    pub fn carries(&self, guid: &[u8]) -> bool {
        self.guid.as_deref() == Some(guid)
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
            guid: self.guid.clone().unwrap_or_default(),
            fencing_token: self.fencing_token,
        }
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
