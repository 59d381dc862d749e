//! Configuration validation with the original library's messages (it validates with Joi,
//! `abortEarly: false`, `convert: false`): every problem is reported at once, in schema order,
//! and strings are not numbers. The JavaScript layer turns the problems into a
//! `ValidationError` whose `details` mirror Joi's.

use crate::item::{self, RESERVED_NAMES};

/// A JavaScript value as validation sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Function,
    /// An object with its own enumerable properties (one level deep).
    Object(Vec<(String, RawValue)>),
    /// Symbols, bigints, arrays and other values no option accepts.
    Other(&'static str),
}

impl RawValue {
    fn get<'a>(entries: &'a [(String, RawValue)], key: &str) -> Option<&'a RawValue> {
        entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

pub use dynamodb_lock_core::settings::Kind;

/// One problem, shaped like a Joi error detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub path: Vec<String>,
    pub kind: &'static str,
    pub limit: Option<i64>,
}

#[derive(Clone, Copy)]
enum Rule {
    /// A non-empty string; `reserved` refuses the lock item's own attribute names.
    Str {
        reserved: bool,
    },
    /// An integer >= `min`.
    Int {
        min: i64,
    },
    Bool,
    /// The `dynamodb` option: an options object, an SDK client or a user object.
    Dynamodb,
    /// One of the listed strings.
    OneOf(&'static [&'static str]),
}

struct Field {
    key: &'static str,
    rule: Rule,
    required: bool,
}

const fn f(key: &'static str, rule: Rule, required: bool) -> Field {
    Field { key, rule, required }
}

const TRANSPORTS: &[&str] = &["auto", "sdk", "object"];

/// The original's keys in its order, then this library's additions.
const FAIL_CLOSED: &[Field] = &[
    f("owner", Rule::Str { reserved: false }, false),
    f("dynamodb", Rule::Dynamodb, false),
    f("lockTable", Rule::Str { reserved: false }, true),
    f("partitionKey", Rule::Str { reserved: true }, true),
    f("sortKey", Rule::Str { reserved: true }, false),
    f("acquirePeriodMs", Rule::Int { min: 0 }, true),
    f("retryCount", Rule::Int { min: 0 }, false),
    f("requestTimeoutMs", Rule::Int { min: 1 }, false),
    f("rereadPeriodMs", Rule::Int { min: 1 }, false),
    f("transport", Rule::OneOf(TRANSPORTS), false),
    f("ttlAttribute", Rule::Str { reserved: true }, false),
    f("ttlSeconds", Rule::Int { min: 1 }, false),
    f("allowEventuallyConsistentGlobalTable", Rule::Bool, false),
];

const FAIL_OPEN: &[Field] = &[
    f("owner", Rule::Str { reserved: false }, false),
    f("dynamodb", Rule::Dynamodb, false),
    f("lockTable", Rule::Str { reserved: false }, true),
    f("partitionKey", Rule::Str { reserved: true }, true),
    f("sortKey", Rule::Str { reserved: true }, false),
    f("heartbeatPeriodMs", Rule::Int { min: 0 }, false),
    f("leaseDurationMs", Rule::Int { min: 0 }, true),
    f("trustLocalTime", Rule::Bool, false),
    f("retryCount", Rule::Int { min: 0 }, false),
    f("requestTimeoutMs", Rule::Int { min: 1 }, false),
    f("rereadPeriodMs", Rule::Int { min: 1 }, false),
    f("dangerMarginMs", Rule::Int { min: 0 }, false),
    f("maxHeartbeatsPerSecond", Rule::Int { min: 1 }, false),
    f("transport", Rule::OneOf(TRANSPORTS), false),
    f("ttlAttribute", Rule::Str { reserved: true }, false),
    f("ttlSeconds", Rule::Int { min: 1 }, false),
    f("allowEventuallyConsistentGlobalTable", Rule::Bool, false),
    f("session", Rule::Bool, false),
];

/// Fifo: a table with a string sort key; this library's own options only.
const FIFO: &[Field] = &[
    f("owner", Rule::Str { reserved: false }, false),
    f("dynamodb", Rule::Dynamodb, false),
    f("lockTable", Rule::Str { reserved: false }, true),
    f("partitionKey", Rule::Str { reserved: true }, true),
    f("sortKey", Rule::Str { reserved: true }, true),
    f("leaseDurationMs", Rule::Int { min: 2 }, true),
    f("heartbeatPeriodMs", Rule::Int { min: 1 }, false),
    f("requestTimeoutMs", Rule::Int { min: 1 }, false),
    f("rereadPeriodMs", Rule::Int { min: 1 }, false),
    f("dangerMarginMs", Rule::Int { min: 0 }, false),
    f("ttlAttribute", Rule::Str { reserved: true }, false),
    f("allowEventuallyConsistentGlobalTable", Rule::Bool, false),
];

/// Attribute names of the Fifo head item, which its key and TTL attribute names may not take.
const FIFO_RESERVED: [&str; 5] = [
    item::TICKET_NEXT,
    item::QUEUE_NEXT,
    item::QUEUE_GRANTED,
    item::PERMITS,
    item::PERMITS_HELD,
];

/// Attributes only this library writes, which key and TTL attribute names may not take.
const OWN_NAMES: [&str; 7] = [
    item::LOCK_DATA,
    item::LOCK_WAITING_UNIX_MS,
    item::LOCK_WAITER,
    item::LOCK_WAITER_OWNER,
    item::LOCK_WAITING_SINCE_UNIX_MS,
    item::LOCK_WRITTEN_UNIX_MS,
    item::LOCK_SESSION,
];

/// The methods a user-supplied `dynamodb` object must have (the original's requirement).
pub const OBJECT_METHODS: [&str; 3] = ["delete", "get", "put"];

fn problem(path: &[&str], kind: &'static str, what: &str) -> Problem {
    let label = path.join(".");
    Problem {
        message: format!("\"{label}\" {what}"),
        path: path.iter().map(|s| s.to_string()).collect(),
        kind,
        limit: None,
    }
}

fn check_number(key: &str, v: &RawValue, min: i64, out: &mut Vec<Problem>) {
    let n = match v {
        RawValue::Number(n) if !n.is_nan() => *n,
        _ => return out.push(problem(&[key], "number.base", "must be a number")),
    };
    if n.is_infinite() {
        return out.push(problem(&[key], "number.infinity", "cannot be infinity"));
    }
    if n.fract() != 0.0 {
        out.push(problem(&[key], "number.integer", "must be an integer"));
    } else if n > 9_007_199_254_740_991.0 {
        out.push(problem(&[key], "number.unsafe", "must be a safe number"));
    }
    if n < min as f64 {
        let mut p = problem(&[key], "number.min", &format!("must be larger than or equal to {min}"));
        p.limit = Some(min);
        out.push(p);
    }
}

fn check_dynamodb(v: &RawValue, out: &mut Vec<Problem>) {
    let entries = match v {
        RawValue::Object(entries) => entries,
        _ => return out.push(problem(&["dynamodb"], "object.base", "must be of type object")),
    };
    // An object that offers any of get/put/delete is a user object: it needs all three, as in
    // the original. Other objects are SDK clients or options for the native core.
    let offers_any = OBJECT_METHODS.iter().any(|m| RawValue::get(entries, m).is_some());
    if !offers_any {
        return;
    }
    for m in OBJECT_METHODS {
        match RawValue::get(entries, m) {
            None | Some(RawValue::Undefined) => out.push(problem(&["dynamodb", m], "any.required", "is required")),
            Some(RawValue::Function) => {}
            Some(_) => out.push(problem(&["dynamodb", m], "object.base", "must be of type function")),
        }
    }
}

/// FailClosed and FailOpen: `ttlAttribute` is neither key; `ttlSeconds` goes with it (and
/// FailClosed needs both: its items would never expire otherwise, and may once a holder has
/// had the lock that long); a user object's get/put/delete cannot write it.
fn check_ttl(kind: Kind, entries: &[(String, RawValue)], out: &mut Vec<Problem>) {
    let string = |k| match RawValue::get(entries, k) {
        Some(RawValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let present = |k| !matches!(RawValue::get(entries, k), None | Some(RawValue::Undefined));
    if let Some(ttl) = string("ttlAttribute") {
        if [string("partitionKey"), string("sortKey")].contains(&Some(ttl)) {
            out.push(problem(
                &["ttlAttribute"],
                "any.invalid",
                "must differ from partitionKey and sortKey",
            ));
        }
    }
    if present("ttlSeconds") && !present("ttlAttribute") {
        out.push(problem(
            &["ttlSeconds"],
            "object.with",
            "missing required peer \"ttlAttribute\"",
        ));
    }
    if kind == Kind::FailClosed && present("ttlAttribute") && !present("ttlSeconds") {
        out.push(problem(
            &["ttlAttribute"],
            "object.with",
            "missing required peer \"ttlSeconds\"",
        ));
    }
    let user_object = user_object(entries);
    if present("ttlAttribute") && user_object {
        out.push(problem(
            &["ttlAttribute"],
            "any.invalid",
            "needs the native core's I/O: a dynamodb object's get/put/delete do not write it",
        ));
    }
}

/// The client's I/O goes through a user object (a `dynamodb` with get/put/delete, or
/// `transport: "object"`), which sends only the original library's requests.
fn user_object(entries: &[(String, RawValue)]) -> bool {
    let object = match RawValue::get(entries, "dynamodb") {
        Some(RawValue::Object(db)) => OBJECT_METHODS.iter().any(|m| RawValue::get(db, m).is_some()),
        _ => false,
    };
    object || matches!(RawValue::get(entries, "transport"), Some(RawValue::String(t)) if t == "object")
}

/// FailOpen `session: true`: the session is renewed every `heartbeatPeriodMs`, shorter than the
/// lease, and written through the native core's I/O (a user object's get/put/delete cannot
/// write a lock that names a session).
fn check_session(entries: &[(String, RawValue)], out: &mut Vec<Problem>) {
    if !matches!(RawValue::get(entries, "session"), Some(RawValue::Bool(true))) || !out.is_empty() {
        return;
    }
    let num = |k| match RawValue::get(entries, k) {
        Some(RawValue::Number(n)) => Some(*n),
        _ => None,
    };
    match (num("heartbeatPeriodMs"), num("leaseDurationMs")) {
        (Some(hb), Some(lease)) if hb > 0.0 && hb < lease => {}
        _ => out.push(problem(
            &["session"],
            "any.invalid",
            "needs heartbeatPeriodMs above 0 and below leaseDurationMs: the session is renewed every heartbeat period",
        )),
    }
    let user_object = user_object(entries);
    // A lock held through a session writes nothing while held: nothing would move its TTL
    // attribute on, and DynamoDB could delete a held lock's item.
    if !matches!(RawValue::get(entries, "ttlAttribute"), None | Some(RawValue::Undefined)) {
        out.push(problem(
            &["session"],
            "any.invalid",
            "does not go with ttlAttribute: a lock held through a session writes nothing while held, so nothing would move its TTL on",
        ));
    }
    if user_object {
        out.push(problem(
            &["session"],
            "any.invalid",
            "needs the native core's I/O: a dynamodb object's get/put/delete do not write sessions",
        ));
    }
}

/// Fifo's own rules: the TTL attribute is neither key, and the I/O is the native core's (a
/// user object's get/put/delete cannot queue).
fn check_fifo(entries: &[(String, RawValue)], out: &mut Vec<Problem>) {
    let string = |k| match RawValue::get(entries, k) {
        Some(RawValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let ttl = string("ttlAttribute").unwrap_or("ttl");
    if [string("partitionKey"), string("sortKey")].contains(&Some(ttl)) {
        out.push(problem(
            &["ttlAttribute"],
            "any.invalid",
            "must differ from partitionKey and sortKey (default \"ttl\")",
        ));
    }
    if let Some(RawValue::Object(db)) = RawValue::get(entries, "dynamodb") {
        if OBJECT_METHODS.iter().any(|m| RawValue::get(db, m).is_some()) {
            out.push(problem(
                &["dynamodb"],
                "any.invalid",
                "must be an AWS SDK client or options for the native core: Fifo does not call get/put/delete objects",
            ));
        }
    }
}

/// FailOpen and Fifo: a `dangerMarginMs` is some of the lease, less than all of it. A margin of
/// the whole lease or more would have `"danger"` due before the lease starts, and it never
/// fires. Checked once both values are valid on their own.
fn check_danger_margin(entries: &[(String, RawValue)], out: &mut Vec<Problem>) {
    let has_problem = |k: &str| out.iter().any(|p| p.path.len() == 1 && p.path[0] == k);
    if has_problem("dangerMarginMs") || has_problem("leaseDurationMs") {
        return;
    }
    let num = |k| match RawValue::get(entries, k) {
        Some(RawValue::Number(n)) => Some(*n),
        _ => None,
    };
    if let (Some(margin), Some(lease)) = (num("dangerMarginMs"), num("leaseDurationMs")) {
        if margin > 0.0 && margin >= lease {
            let mut p = problem(
                &["dangerMarginMs"],
                "number.less",
                &format!(
                    "must be less than leaseDurationMs ({lease} ms): \"danger\" fires when that much of the lease is \
                     left, which a margin of the whole lease or more never is. Leave it out (a third of the lease) or \
                     choose a part of the lease"
                ),
            );
            p.limit = Some(lease as i64);
            out.push(p);
        }
    }
}

/// Validates a FailClosed, FailOpen or Fifo configuration. An empty result means valid.
pub fn validate(kind: Kind, config: &RawValue) -> Vec<Problem> {
    let entries = match config {
        RawValue::Undefined => return vec![problem(&["value"], "any.required", "is required").at_root()],
        RawValue::Object(entries) => entries,
        _ => return vec![problem(&["value"], "object.base", "must be of type object").at_root()],
    };
    let schema = match kind {
        Kind::FailClosed => FAIL_CLOSED,
        Kind::FailOpen => FAIL_OPEN,
        Kind::Fifo => FIFO,
    };
    let mut out = Vec::new();
    let reserved_here = |name: &str| {
        RESERVED_NAMES.contains(&name)
            || OWN_NAMES.contains(&name)
            || (kind == Kind::Fifo && FIFO_RESERVED.contains(&name))
    };
    for field in schema {
        let v = match RawValue::get(entries, field.key) {
            None | Some(RawValue::Undefined) => {
                if field.required {
                    out.push(problem(&[field.key], "any.required", "is required"));
                }
                continue;
            }
            Some(v) => v,
        };
        match field.rule {
            Rule::Str { reserved } => match v {
                RawValue::String(s) if s.is_empty() => {
                    out.push(problem(&[field.key], "string.empty", "is not allowed to be empty"))
                }
                RawValue::String(s) if reserved && reserved_here(s) => {
                    out.push(problem(&[field.key], "any.invalid", "contains an invalid value"))
                }
                RawValue::String(_) => {}
                _ => out.push(problem(&[field.key], "string.base", "must be a string")),
            },
            Rule::Int { min } => check_number(field.key, v, min, &mut out),
            Rule::Bool => {
                if !matches!(v, RawValue::Bool(_)) {
                    out.push(problem(&[field.key], "boolean.base", "must be a boolean"))
                }
            }
            Rule::Dynamodb => check_dynamodb(v, &mut out),
            Rule::OneOf(allowed) => match v {
                RawValue::String(s) if allowed.contains(&s.as_str()) => {}
                _ => out.push(problem(
                    &[field.key],
                    "any.only",
                    &format!("must be one of [{}]", allowed.join(", ")),
                )),
            },
        }
    }
    let present = |k| !matches!(RawValue::get(entries, k), None | Some(RawValue::Undefined));
    if matches!(RawValue::get(entries, "transport"), Some(RawValue::String(t)) if t == "object") && !present("dynamodb")
    {
        out.push(problem(
            &["dynamodb"],
            "any.required",
            "is required when transport is \"object\"",
        ));
    }
    if kind == Kind::Fifo {
        check_fifo(entries, &mut out);
    } else {
        check_ttl(kind, entries, &mut out);
    }
    if kind == Kind::FailOpen {
        check_session(entries, &mut out);
    }
    if kind != Kind::FailClosed {
        check_danger_margin(entries, &mut out);
    }
    // FailOpen accepts a heartbeat period as long as the lease, as the original does (the
    // JavaScript side warns); Fifo, which has no such precedent, refuses it.
    if kind == Kind::Fifo && out.is_empty() {
        let num = |k| match RawValue::get(entries, k) {
            Some(RawValue::Number(n)) => Some(*n),
            _ => None,
        };
        if let (Some(hb), Some(lease)) = (num("heartbeatPeriodMs"), num("leaseDurationMs")) {
            if hb > 0.0 && hb >= lease {
                out.push(problem(
                    &["heartbeatPeriodMs"],
                    "number.less",
                    "must be less than leaseDurationMs, or the lease lapses between heartbeats",
                ));
            }
        }
    }
    for (key, _) in entries {
        if !schema.iter().any(|f| f.key == key) {
            out.push(problem(&[key.as_str()], "object.unknown", "is not allowed"));
        }
    }
    out
}

impl Problem {
    fn at_root(mut self) -> Self {
        self.path.clear();
        self
    }
}

#[cfg(test)]
/// The message of the whole `ValidationError`: every detail, as Joi joins them.
pub fn summary(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.message.as_str())
        .collect::<Vec<_>>()
        .join(". ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(entries: &[(&str, RawValue)]) -> RawValue {
        RawValue::Object(entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }
    fn s(v: &str) -> RawValue {
        RawValue::String(v.into())
    }
    fn n(v: f64) -> RawValue {
        RawValue::Number(v)
    }

    #[test]
    fn a_danger_margin_is_less_than_the_lease() {
        let open = |margin: f64| {
            obj(&[
                ("lockTable", s("t")),
                ("partitionKey", s("id")),
                ("leaseDurationMs", n(1000.0)),
                ("dangerMarginMs", n(margin)),
            ])
        };
        for margin in [0.0, 1.0, 999.0] {
            assert!(validate(Kind::FailOpen, &open(margin)).is_empty(), "{margin}");
        }
        for margin in [1000.0, 5000.0] {
            let problems = validate(Kind::FailOpen, &open(margin));
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].path, ["dangerMarginMs"]);
            assert_eq!(problems[0].kind, "number.less");
            assert_eq!(problems[0].limit, Some(1000));
            assert!(
                problems[0]
                    .message
                    .starts_with("\"dangerMarginMs\" must be less than leaseDurationMs (1000 ms)"),
                "{}",
                problems[0].message
            );
        }
        let fifo = obj(&[
            ("lockTable", s("t")),
            ("partitionKey", s("resource")),
            ("sortKey", s("entry")),
            ("leaseDurationMs", n(1000.0)),
            ("dangerMarginMs", n(1000.0)),
        ]);
        assert_eq!(validate(Kind::Fifo, &fifo)[0].path, ["dangerMarginMs"]);
        // A margin that is itself refused is not compared with the lease.
        assert_eq!(validate(Kind::FailOpen, &open(1e4 + 0.5)).len(), 1);
    }

    #[test]
    fn ttl_options_go_together_and_name_a_free_attribute() {
        let base = |kind: &str, extra: &[(&str, RawValue)]| {
            let mut e = vec![("lockTable", s("t")), ("partitionKey", s("id"))];
            e.push(if kind == "closed" {
                ("acquirePeriodMs", n(10.0))
            } else {
                ("leaseDurationMs", n(1000.0))
            });
            e.extend(extra.iter().cloned());
            obj(&e)
        };
        assert!(validate(Kind::FailOpen, &base("open", &[("ttlAttribute", s("expires"))])).is_empty());
        assert!(validate(
            Kind::FailClosed,
            &base("closed", &[("ttlAttribute", s("expires")), ("ttlSeconds", n(60.0))])
        )
        .is_empty());
        assert_eq!(
            summary(&validate(
                Kind::FailClosed,
                &base("closed", &[("ttlAttribute", s("expires"))])
            )),
            "\"ttlAttribute\" missing required peer \"ttlSeconds\""
        );
        assert_eq!(
            summary(&validate(Kind::FailOpen, &base("open", &[("ttlSeconds", n(60.0))]))),
            "\"ttlSeconds\" missing required peer \"ttlAttribute\""
        );
        assert_eq!(
            summary(&validate(Kind::FailOpen, &base("open", &[("ttlAttribute", s("id"))]))),
            "\"ttlAttribute\" must differ from partitionKey and sortKey"
        );
        assert_eq!(
            summary(&validate(
                Kind::FailOpen,
                &base("open", &[("ttlAttribute", s("lockData"))])
            )),
            "\"ttlAttribute\" contains an invalid value"
        );
        assert_eq!(
            summary(&validate(
                Kind::FailOpen,
                &base("open", &[("ttlAttribute", s("x")), ("ttlSeconds", n(0.0))])
            )),
            "\"ttlSeconds\" must be larger than or equal to 1"
        );
        assert_eq!(
            summary(&validate(
                Kind::FailOpen,
                &obj(&[
                    ("lockTable", s("t")),
                    ("partitionKey", s("lockData")),
                    ("leaseDurationMs", n(1.0))
                ])
            )),
            "\"partitionKey\" contains an invalid value"
        );
    }

    #[test]
    fn missing_required_keys_are_all_reported_in_schema_order() {
        let p = validate(Kind::FailClosed, &obj(&[]));
        assert_eq!(
            summary(&p),
            "\"lockTable\" is required. \"partitionKey\" is required. \"acquirePeriodMs\" is required"
        );
        assert_eq!(p[0].path, vec!["lockTable"]);
        assert_eq!(p[0].kind, "any.required");
    }

    #[test]
    fn non_objects_are_refused_like_joi() {
        assert_eq!(
            summary(&validate(Kind::FailOpen, &RawValue::Undefined)),
            "\"value\" is required"
        );
        let p = validate(Kind::FailOpen, &n(5.0));
        assert_eq!(summary(&p), "\"value\" must be of type object");
        assert!(p[0].path.is_empty());
    }

    #[test]
    fn types_are_not_converted() {
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("owner", n(3.0)),
                ("lockTable", n(5.0)),
                ("partitionKey", s("owner")),
                ("acquirePeriodMs", s("10")),
                ("retryCount", n(-1.0)),
                ("extra", n(1.0)),
            ]),
        );
        assert_eq!(
            summary(&p),
            "\"owner\" must be a string. \"lockTable\" must be a string. \"partitionKey\" contains an invalid value. \"acquirePeriodMs\" must be a number. \"retryCount\" must be larger than or equal to 0. \"extra\" is not allowed"
        );
        assert_eq!(p[4].limit, Some(0));
    }

    #[test]
    fn numbers_must_be_finite_integers() {
        let p = validate(
            Kind::FailOpen,
            &obj(&[
                ("lockTable", s("t")),
                ("partitionKey", s("fencingToken")),
                ("sortKey", s("leaseDurationMs")),
                ("leaseDurationMs", n(f64::NAN)),
                ("heartbeatPeriodMs", n(f64::INFINITY)),
                ("trustLocalTime", s("yes")),
                ("retryCount", n(-1.5)),
            ]),
        );
        assert_eq!(
            summary(&p),
            "\"partitionKey\" contains an invalid value. \"sortKey\" contains an invalid value. \"heartbeatPeriodMs\" cannot be infinity. \"leaseDurationMs\" must be a number. \"trustLocalTime\" must be a boolean. \"retryCount\" must be an integer. \"retryCount\" must be larger than or equal to 0"
        );
    }

    #[test]
    fn sort_key_is_accepted_by_fail_closed() {
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("sortKey", s("s")),
                ("acquirePeriodMs", n(0.0)),
            ]),
        );
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn user_objects_need_all_three_methods() {
        let db = obj(&[("get", n(1.0))]);
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("dynamodb", db),
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("acquirePeriodMs", n(1.0)),
            ]),
        );
        assert_eq!(
            summary(&p),
            "\"dynamodb.delete\" is required. \"dynamodb.get\" must be of type function. \"dynamodb.put\" is required"
        );
        let options = obj(&[("region", s("us-east-1")), ("endpoint", s("http://127.0.0.1:1"))]);
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("dynamodb", options),
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("acquirePeriodMs", n(1.0)),
            ]),
        );
        assert!(p.is_empty());
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("dynamodb", RawValue::Null),
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("acquirePeriodMs", n(1.0)),
            ]),
        );
        assert_eq!(summary(&p), "\"dynamodb\" must be of type object");
    }

    #[test]
    fn the_object_transport_needs_an_object() {
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("acquirePeriodMs", n(1.0)),
                ("transport", s("object")),
            ]),
        );
        assert_eq!(summary(&p), "\"dynamodb\" is required when transport is \"object\"");
        let p = validate(
            Kind::FailClosed,
            &obj(&[
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("acquirePeriodMs", n(1.0)),
                ("sortKey", RawValue::Undefined),
            ]),
        );
        assert!(p.is_empty(), "an option set to undefined is an option left out");
    }

    #[test]
    fn empty_strings_are_refused() {
        let p = validate(
            Kind::FailOpen,
            &obj(&[
                ("lockTable", s("")),
                ("partitionKey", s("")),
                ("leaseDurationMs", n(-5.0)),
                ("sortKey", n(7.0)),
            ]),
        );
        assert_eq!(
            summary(&p),
            "\"lockTable\" is not allowed to be empty. \"partitionKey\" is not allowed to be empty. \"sortKey\" must be a string. \"leaseDurationMs\" must be larger than or equal to 0"
        );
    }

    fn fifo(extra: &[(&str, RawValue)]) -> RawValue {
        let mut e = vec![
            ("lockTable", s("t")),
            ("partitionKey", s("p")),
            ("sortKey", s("s")),
            ("leaseDurationMs", n(3000.0)),
        ];
        for (k, v) in extra {
            e.retain(|(key, _)| key != k);
            e.push((k, v.clone()));
        }
        obj(&e)
    }

    #[test]
    fn fifo_needs_a_sort_key_and_a_lease_and_names_what_is_missing() {
        assert!(validate(Kind::Fifo, &fifo(&[])).is_empty());
        let p = validate(Kind::Fifo, &obj(&[("lockTable", s("t")), ("partitionKey", s("p"))]));
        assert_eq!(summary(&p), "\"sortKey\" is required. \"leaseDurationMs\" is required");
        assert_eq!(p[0].path, vec!["sortKey"]);
        let p = validate(
            Kind::Fifo,
            &fifo(&[
                ("heartbeatPeriodMs", n(3000.0)),
                ("retryCount", n(1.0)),
                ("waitMs", n(5.0)),
            ]),
        );
        assert_eq!(
            summary(&p),
            "\"heartbeatPeriodMs\" must be less than leaseDurationMs, or the lease lapses between heartbeats. \"retryCount\" is not allowed. \"waitMs\" is not allowed"
        );
        assert_eq!(
            summary(&validate(Kind::Fifo, &fifo(&[("leaseDurationMs", n(1.0))]))),
            "\"leaseDurationMs\" must be larger than or equal to 2"
        );
    }

    #[test]
    fn fifo_keeps_its_attribute_names_apart_from_keys() {
        let p = validate(
            Kind::Fifo,
            &fifo(&[("sortKey", s("ticketNext")), ("ttlAttribute", s("p"))]),
        );
        assert_eq!(
            summary(&p),
            "\"sortKey\" contains an invalid value. \"ttlAttribute\" must differ from partitionKey and sortKey (default \"ttl\")"
        );
        assert_eq!(
            summary(&validate(Kind::Fifo, &fifo(&[("sortKey", s("ttl"))]))),
            "\"ttlAttribute\" must differ from partitionKey and sortKey (default \"ttl\")"
        );
        assert_eq!(
            summary(&validate(Kind::Fifo, &fifo(&[("ttlAttribute", s("guid"))]))),
            "\"ttlAttribute\" contains an invalid value"
        );
        let user_object = obj(&[
            ("get", RawValue::Function),
            ("put", RawValue::Function),
            ("delete", RawValue::Function),
        ]);
        assert_eq!(
            validate(Kind::Fifo, &fifo(&[("dynamodb", user_object)]))[0].path,
            vec!["dynamodb"]
        );
    }

    #[test]
    fn a_lease_shorter_than_the_heartbeat_period_passes_for_fail_open_only() {
        let base = |hb: f64| {
            obj(&[
                ("lockTable", s("t")),
                ("partitionKey", s("p")),
                ("leaseDurationMs", n(100.0)),
                ("heartbeatPeriodMs", n(hb)),
            ])
        };
        assert!(validate(Kind::FailOpen, &base(30.0)).is_empty());
        assert!(
            validate(Kind::FailOpen, &base(0.0)).is_empty(),
            "0 means no heartbeats, as in the original"
        );
        assert!(
            validate(Kind::FailOpen, &base(100.0)).is_empty(),
            "accepted as the original accepts it"
        );
        assert!(validate(Kind::FailOpen, &base(250.0)).is_empty());
    }
}
