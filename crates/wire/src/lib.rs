//! The lock protocol's operations (`dynamodb_lock_core::op::Op`) in DynamoDB's JSON protocol,
//! without I/O: `request` gives an operation's request (the DynamoDB operation, its body, and
//! what its reply is read for), with `op::allowed` and `op::apply` stated as condition and
//! update expressions (`expr.rs`), and `Read::reply` reads the answer back as `op::apply`
//! answers; `answer` tells a reply from a failed condition and a refusal, and whether a
//! refusal is worth sending again. Bodies are written and responses read in `json.rs`. The
//! caller signs and sends (the addon's `store::http`); the agreement test holds this
//! translation and `op::apply` side by side on real engines.

mod answer;
mod call;
mod expr;
pub mod json;

pub use answer::{answer, is_throttle, Answer, Refusal};
pub use call::{request, Call, Read};

use dynamodb_lock_core::item::LockRecord;

/// A request that cannot be written, or a reply that cannot be read as its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A request outside what one DynamoDB write can state (too many `guid`s in a condition,
    /// too many holders reclaimed in one grant).
    Config(String),
    /// An operation this translation does not send.
    NotSupported(String),
    /// A reply that does not read as the operation's answer.
    Invalid(String),
}

/// A lock item as DynamoDB's JSON gives it (an `Item` of GetItem, as text), read as every
/// reply is (`None`: no item).
pub fn decode_item(item: &str) -> Result<Option<LockRecord>, Error> {
    let body = ["{\"Item\":", item, "}"].concat();
    json::read_response(body.as_bytes())
        .map(|r| r.record)
        .map_err(|e| Error::Invalid(format!("the item is not DynamoDB JSON: {e}")))
}
