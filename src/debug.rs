//! The debug log, on when `NODE_DEBUG` names `dynamodb-lock-native` (JavaScript reads it as
//! Node's `util.debuglog` does and turns this log on with `setDebug`): each DynamoDB request of
//! the lock protocol with the lock's key, its outcome and how long it took, and each pause a
//! protocol decides on. Lines go to stderr in `util.debuglog`'s form,
//! `DYNAMODB-LOCK-NATIVE <pid>: <message>`. Lock data and `guid`s are never written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::item::{LockKey, LockRecord, TableSpec};
use dynamodb_lock_core::op::{Op, Reply};

static ON: AtomicBool = AtomicBool::new(false);

/// Turns the log on or off for the whole process.
pub fn set(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Whether the log is on: lines are built only then.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Writes one line, if the log is on. The line is built whole and written by one `write`, so that
/// lines written at the same moment by JavaScript (or another thread) never interleave with it:
/// `eprintln!` writes its pieces one by one.
pub fn log(line: impl FnOnce() -> String) {
    if on() {
        let whole = format!("DYNAMODB-LOCK-NATIVE {}: {}\n", std::process::id(), line());
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), whole.as_bytes());
    }
}

/// Milliseconds, as the log shows them.
pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A lock's key without the attribute names: its partition value, and its sort value after a
/// comma.
pub fn key(key: &LockKey) -> String {
    let shown = crate::error::shown_key("", key.sort.as_ref().map(|_| ""), key);
    shown.trim_start().replace(",  ", ", ")
}

/// The `TableName` of a table administration request's JSON body, when it is a plain string.
pub fn table_name(body: &str) -> Option<String> {
    let after = &body[body.find("\"TableName\"")? + "\"TableName\"".len()..];
    let after = after.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let name = &after[..after.find('"')?];
    (!name.contains('\\')).then(|| name.to_string())
}

/// What an operation does, in a few words.
fn op_name(op: &Op<'_, LockRecord>) -> &'static str {
    match op {
        Op::Get => "read",
        Op::PutIfAbsent { .. } => "take if absent (FailClosed)",
        Op::DeleteIfGuid { .. } => "release (FailClosed delete)",
        Op::Take { .. } => "take",
        Op::HandOver { .. } => "hand over",
        Op::Renew { .. } => "heartbeat",
        Op::PutItem { .. } => "write the whole item",
        Op::Release { .. } => "release",
        Op::SetData { .. } => "update data",
        Op::MarkWaiting(_) => "mark first in line",
        Op::FifoTakeFree { .. } => "Fifo take the free head",
        Op::FifoTicket => "Fifo take a ticket",
        Op::FifoReserve { .. } => "Fifo reserve a ticket",
        Op::FifoUntake { .. } => "Fifo give a ticket back",
        Op::FifoPutEntry(_) => "Fifo join the queue",
        Op::FifoGrant { .. } => "Fifo grant the head",
        Op::FifoFinishEntry { .. } => "Fifo finish an entry",
        Op::FifoDeleteFinished => "Fifo delete a finished entry",
        Op::FifoTouchEntry { .. } => "Fifo renew an entry",
        Op::ForceFree { .. } => "an operator's forced release",
        Op::Revoke { .. } => "an operator's revocation",
        Op::MarkRevoked { .. } => "an operator's revocation, named on the session",
        Op::Prune { .. } => "an operator's deletion of an item nobody holds",
        Op::SemTake { .. } => "semaphore take free permits",
        Op::SemGrant(_) => "semaphore grant permits",
        Op::SemRenew { .. } => "semaphore heartbeat",
        Op::SemRelease { .. } => "semaphore release permits",
    }
}

/// An item as the log shows it: its owner, token, lease and session, never its data.
fn item(r: &LockRecord) -> String {
    let mut out = format!("owner {:?}", r.owner.as_deref().unwrap_or("(none)"));
    if let Some(t) = r.fencing_token {
        out.push_str(&format!(", fencing token {t}"));
    }
    match r.lease_duration_ms {
        Some(1) => out.push_str(", released"),
        Some(l) => out.push_str(&format!(", lease {l} ms")),
        None => {}
    }
    if let Some(s) = &r.session {
        out.push_str(&format!(", session {s}"));
    }
    out
}

/// The outcome of an operation, in a few words.
fn outcome(r: &Result<Reply<LockRecord>, StoreError>) -> String {
    match r {
        Ok(Reply::Done) | Ok(Reply::WaitingMark(_)) => "done".into(),
        Ok(Reply::Token(t)) => format!("done, fencing token {t}"),
        Ok(Reply::Before(None)) => "no item".into(),
        Ok(Reply::Before(Some(r))) => format!("found {}", item(r)),
        Ok(Reply::HandedOver(Some(t))) => format!("handed over, fencing token {t}"),
        Ok(Reply::HandedOver(None)) => "handed over".into(),
        Ok(Reply::Revoked(guids)) => format!("done, {} of the session's locks revoked", guids.len()),
        Ok(Reply::Refused(_)) | Err(StoreError::ConditionFailed { current: None }) => "condition failed".into(),
        Err(StoreError::ConditionFailed { current: Some(None) }) => "condition failed: no item".into(),
        Err(StoreError::ConditionFailed { current: Some(Some(r)) }) => {
            format!("condition failed: the item is {}", item(r))
        }
        Err(e) => format!("failed: {}: {}", e.code(), e.message()),
    }
}

/// The line of one request: the table and key, what it does, its outcome and time.
pub fn request(
    table: &TableSpec,
    key: &LockKey,
    op: &Op<'_, LockRecord>,
    r: &Result<Reply<LockRecord>, StoreError>,
    took: Duration,
) -> String {
    let shown = crate::error::shown_key(&table.partition_key, table.sort_key.as_deref(), key);
    format!(
        "{} {shown} in \"{}\": {} in {}",
        op_name(op),
        table.name,
        outcome(r),
        ms(took)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::KeyValue;

    #[test]
    fn a_request_line_names_the_key_the_outcome_and_the_time_but_no_data() {
        let table = TableSpec {
            name: "locks".into(),
            partition_key: "id".into(),
            sort_key: None,
        };
        let key = LockKey {
            partition: KeyValue::S("job-1".into()),
            sort: None,
        };
        let holder = LockRecord {
            owner: Some("worker-7".into()),
            fencing_token: Some(4),
            lease_duration_ms: Some(10000),
            ..Default::default()
        };
        let refused = Err(StoreError::ConditionFailed {
            current: Some(Some(Box::new(holder))),
        });
        let line = request(&table, &key, &Op::Get, &refused, Duration::from_micros(2500));
        assert_eq!(
            line,
            "read id \"job-1\" in \"locks\": condition failed: the item is owner \"worker-7\", fencing token 4, lease 10000 ms in 2.5 ms"
        );
        assert_eq!(
            table_name(r#"{"TableName": "locks","Key":{}}"#).as_deref(),
            Some("locks")
        );
        assert_eq!(table_name(r#"{"Key":{}}"#), None);
        let took = request(
            &table,
            &key,
            &Op::FifoTicket,
            &Ok(Reply::Token(5)),
            Duration::from_millis(3),
        );
        assert_eq!(
            took,
            "Fifo take a ticket id \"job-1\" in \"locks\": done, fencing token 5 in 3.0 ms"
        );
    }
}
