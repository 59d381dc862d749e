//! What DynamoDB's answer to a request means for it: read as the operation's reply, a failed
//! condition with the item it met, or a refusal, with whether sending the request again may
//! succeed and whether the write may have landed all the same.

use dynamodb_lock_core::item::LockRecord;

use crate::json::{read_response, Response};
use crate::Error;

/// The codes of throttled requests.
const THROTTLES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "LimitExceededException",
];

/// Errors that say the request's signing time was too far from the service's clock. The
/// service's `Date` header then gives the offset.
const CLOCK_SKEW_ERRORS: &[&str] = &[
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "RequestTimeTooSkewed",
    "RequestExpired",
    "RequestInTheFuture",
];

/// Credentials that expired or were revoked before their announced expiry: the next attempt
/// asks the provider again, which may mend it, so they are retried like a transient fault.
const EXPIRED_CREDENTIALS: &[&str] = &["ExpiredTokenException", "ExpiredToken"];

/// A write to a global table in the strongly consistent mode that met a concurrent write of
/// the same item from another Region: nothing was written, and it may be retried like a
/// throttle (it is not counted as one).
const REPLICATED_WRITE_CONFLICT: &str = "ReplicatedWriteConflictException";

/// An answer, read.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// A 2xx answer: the body, read.
    Ok(Response),
    /// The request's condition did not hold; the item it met, when the answer carries it.
    ConditionFailed(Option<LockRecord>),
    Refused(Refusal),
}

/// An error answer other than a failed condition.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The error's name (`ThrottlingException`), or `InternalServerError` or
    /// `HttpStatus<status>` for an answer without one.
    pub code: String,
    pub message: String,
    /// The service may have applied the write all the same (a 5xx).
    pub maybe_applied: bool,
    /// Sending the request again may succeed: a 5xx, a throttle, a replicated write conflict,
    /// expired credentials.
    pub transient: bool,
    /// A signature refused for its time: the caller compares the service's clock with its own,
    /// and the request is worth sending again if the two are far apart.
    pub clock_skew: bool,
    /// Credentials refused as expired: the caller asks its provider again.
    pub expired_credentials: bool,
}

/// DynamoDB's answer with HTTP `status` and `body`, on table `table`.
pub fn answer(status: u16, body: &[u8], table: &str) -> Result<Answer, Error> {
    let reply = read_response(body);
    if (200..300).contains(&status) {
        return reply
            .map(Answer::Ok)
            .map_err(|e| Error::Invalid(format!("DynamoDB's response could not be read: {e}")));
    }
    let reply = reply.unwrap_or_default();
    if reply.error_type.as_deref() == Some("ConditionalCheckFailedException") {
        return Ok(Answer::ConditionFailed(reply.record));
    }
    let code = reply.error_type.unwrap_or_else(|| match status {
        500.. => "InternalServerError".into(),
        _ => format!("HttpStatus{status}"),
    });
    let mut message = reply
        .message
        .unwrap_or_else(|| "DynamoDB returned an error without a message".into());
    if code == "ResourceNotFoundException" {
        message = format!("{message} (the lock table \"{table}\")");
    }
    let expired_credentials = EXPIRED_CREDENTIALS.contains(&code.as_str());
    Ok(Answer::Refused(Refusal {
        transient: status >= 500
            || status == 429
            || THROTTLES.contains(&code.as_str())
            || code == REPLICATED_WRITE_CONFLICT
            || expired_credentials,
        maybe_applied: status >= 500,
        clock_skew: CLOCK_SKEW_ERRORS.contains(&code.as_str()),
        expired_credentials,
        message,
        code,
    }))
}

/// An error code that asks the client to slow down.
pub fn is_throttle(code: &str) -> bool {
    code == "HttpStatus429" || THROTTLES.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(status: u16, body: &str) -> Refusal {
        match answer(status, body.as_bytes(), "locks").unwrap() {
            Answer::Refused(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_condition_comes_back_with_the_item_it_met() {
        let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Item":{"fencingToken":{"N":"3"}}}"#;
        match answer(400, body.as_bytes(), "locks").unwrap() {
            Answer::ConditionFailed(Some(r)) => assert_eq!(r.fencing_token, Some(3)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn throttles_and_server_errors_are_worth_retrying_and_only_server_errors_may_have_landed() {
        let t = refusal(400, r#"{"__type":"x#ThrottlingException","message":"slow down"}"#);
        assert!(t.transient && !t.maybe_applied && is_throttle(&t.code));
        assert_eq!(t.message, "slow down");
        let s = refusal(500, "");
        assert_eq!(s.code, "InternalServerError");
        assert!(s.transient && s.maybe_applied && !is_throttle(&s.code));
        let r = refusal(429, "");
        assert_eq!(r.code, "HttpStatus429");
        assert!(r.transient && is_throttle(&r.code));
        let c = refusal(400, r#"{"__type":"x#ReplicatedWriteConflictException"}"#);
        assert!(c.transient && !is_throttle(&c.code));
    }

    #[test]
    fn lasting_refusals_are_not_retried_and_a_missing_table_is_named() {
        let v = refusal(400, r#"{"__type":"x#ValidationException","message":"bad"}"#);
        assert!(!v.transient && !v.clock_skew && !v.expired_credentials);
        let n = refusal(400, r#"{"__type":"x#ResourceNotFoundException","message":"no table"}"#);
        assert_eq!(n.message, "no table (the lock table \"locks\")");
        let s = refusal(400, r#"{"__type":"x#InvalidSignatureException"}"#);
        assert!(s.clock_skew && !s.transient);
        let e = refusal(400, r#"{"__type":"x#ExpiredTokenException"}"#);
        assert!(e.expired_credentials && e.transient);
    }

    #[test]
    fn an_unreadable_success_is_an_invalid_response() {
        assert!(matches!(answer(200, b"{not json", "locks"), Err(Error::Invalid(_))));
    }
}
