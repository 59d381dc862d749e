//! The expressions of one conditional DynamoDB write (`UpdateExpression`,
//! `ConditionExpression`) with the attribute names and values they use, and the conditions
//! the lock protocol's writes share.
//!
//! DynamoDB refuses a request that carries a name or value its expressions do not use. The
//! names are read from the expressions when the request is written, so that a request carries
//! exactly those it uses: the lock item's own attributes have fixed placeholders
//! (`ATTRIBUTE_NAMES`), and the others (the table's partition key as `#pk`, the TTL attribute
//! as `#ttl`, a semaphore holder) are given with `Expr::name`. Each value is added with the
//! part of an expression that uses it.
//!
//! A condition is kept as clauses that must all hold, each a list of alternatives of which
//! one must, and written as the alternatives' combinations joined by `OR` (`a AND c OR a AND
//! d OR b AND c OR b AND d`) when there are few of them: the same condition, since `AND` binds
//! tighter than `OR` and a comparison with a missing attribute is false, not unknown. Engines
//! with a backtracking expression parser (dynalite's) read a parenthesised group several times
//! over: the acquisition's condition cost dynalite about five times as long to parse with
//! parentheses as without. Past `MOST_TERMS` combinations, each clause of several alternatives
//! is written in parentheses instead.

use std::borrow::Cow;

use dynamodb_lock_core::item::{self, Guid, GuidValue, LockData, Version, MAX_FENCING_TOKEN};
use dynamodb_lock_core::op::{OpenFields, Ttl};

use crate::json::{Attr, Body};
use crate::Error;

/// The placeholders of the lock item's own attributes, in every expression.
const ATTRIBUTE_NAMES: [(&str, &str); 19] = [
    ("#owner", item::OWNER),
    ("#guid", item::GUID),
    ("#lease", item::LEASE_DURATION_MS),
    ("#ft", item::FENCING_TOKEN),
    ("#t", item::LOCK_ACQUIRED_TIME_UNIX_MS),
    ("#lw", item::LOCK_WRITTEN_UNIX_MS),
    ("#data", item::LOCK_DATA),
    ("#sess", item::LOCK_SESSION),
    ("#w", item::LOCK_WAITING_UNIX_MS),
    ("#wid", item::LOCK_WAITER),
    ("#ws", item::LOCK_WAITING_SINCE_UNIX_MS),
    ("#wo", item::LOCK_WAITER_OWNER),
    ("#tn", item::TICKET_NEXT),
    ("#qn", item::QUEUE_NEXT),
    ("#qg", item::QUEUE_GRANTED),
    ("#perm", item::PERMITS),
    ("#held", item::PERMITS_HELD),
    ("#revoked", item::LOCK_REVOKED),
    ("#rv", item::LOCK_REVOKED_UNIX_MS),
];

/// The most combinations a condition is written as without parentheses: eight cost dynalite
/// less than two parenthesised clauses, sixteen more than four.
const MOST_TERMS: usize = 8;

/// A part of a condition: a condition without an `OR` at its top.
type Term = Cow<'static, str>;

/// `op::token_can_rise` (see `Expr::token_can_rise`): one of these holds.
const TOKEN_CAN_RISE: [&str; 2] = ["attribute_not_exists(#ft)", "#ft BETWEEN :zero_ft AND :below_max"];

/// The ticket after the last one issued: `ticketNext + 1`, counting from `fencingToken` (or 0)
/// on an item without `ticketNext`.
pub const NEXT_TICKET: &str = "if_not_exists(#tn, if_not_exists(#ft, :zero)) + :one";

/// One conditional write's update (its `SET` and `REMOVE` parts) and condition, with the
/// values they use and the names of attributes other than the lock item's own.
pub struct Expr<'a> {
    set: String,
    remove: String,
    add: String,
    /// Clauses that must all hold, each of alternatives of which one must.
    condition: Vec<Vec<Term>>,
    names: Vec<(&'static str, &'a str)>,
    values: Vec<(&'static str, Attr<'a>)>,
}

impl<'a> Expr<'a> {
    /// An empty write on a table whose partition key is `partition_key` (`#pk`).
    pub fn new(partition_key: &'a str) -> Self {
        Expr {
            set: String::with_capacity(160),
            remove: String::new(),
            add: String::new(),
            condition: Vec::with_capacity(6),
            names: vec![("#pk", partition_key)],
            values: Vec::with_capacity(12),
        }
    }

    /// Adds a clause (`#a = ...`) to the `SET` part.
    pub fn set(&mut self, clause: &str) -> &mut Self {
        join(&mut self.set, ", ", clause);
        self
    }

    /// Sets attribute `name` to the value `placeholder`, which is `value`.
    pub fn set_to(&mut self, name: &str, placeholder: &'static str, value: Attr<'a>) -> &mut Self {
        join(&mut self.set, ", ", name);
        self.set.push_str(" = ");
        self.set.push_str(placeholder);
        self.value(placeholder, value)
    }

    /// Adds a clause (`#a :v`) to the `ADD` part.
    pub fn add(&mut self, clause: &str) -> &mut Self {
        join(&mut self.add, ", ", clause);
        self
    }

    /// Adds an attribute to the `REMOVE` part.
    pub fn remove(&mut self, name: &str) -> &mut Self {
        join(&mut self.remove, ", ", name);
        self
    }

    /// Adds a condition without an `OR` at its top, which must hold with all the others.
    pub fn and(&mut self, condition: impl Into<Term>) -> &mut Self {
        self.condition.push(vec![condition.into()]);
        self
    }

    /// Adds a condition that holds when one of `alternatives` does (each without an `OR` at
    /// its top), and must hold with all the others. None would leave no combination to write,
    /// and so no condition at all: that panics (the request fails) instead.
    pub fn any<T: Into<Term>>(&mut self, alternatives: impl IntoIterator<Item = T>) -> &mut Self {
        let any: Vec<Term> = alternatives.into_iter().map(Into::into).collect();
        assert!(!any.is_empty(), "a condition of no alternatives");
        self.condition.push(any);
        self
    }

    /// The condition expression: every combination of one alternative per clause, joined by
    /// `OR`, when there are at most `MOST_TERMS`; otherwise the clauses joined by `AND`, a
    /// clause of several alternatives in parentheses.
    pub fn condition(&self) -> String {
        let combinations: usize = self.condition.iter().map(Vec::len).product();
        let mut text = String::with_capacity(64 * combinations.min(MOST_TERMS));
        if combinations > MOST_TERMS {
            for clause in &self.condition {
                let any = clause.join(" OR ");
                match clause.len() {
                    1 => join(&mut text, " AND ", &any),
                    _ => join(&mut text, " AND ", &format!("({any})")),
                }
            }
            return text;
        }
        for n in 0..combinations {
            if n > 0 {
                text.push_str(" OR ");
            }
            // The `n`th combination, counted with the first clause's alternative changing slowest.
            let mut rest = n;
            let mut stride = combinations;
            for (i, clause) in self.condition.iter().enumerate() {
                stride /= clause.len();
                if i > 0 {
                    text.push_str(" AND ");
                }
                text.push_str(&clause[rest / stride]);
                rest %= stride;
            }
        }
        text
    }

    pub fn value(&mut self, placeholder: &'static str, value: Attr<'a>) -> &mut Self {
        self.values.push((placeholder, value));
        self
    }

    /// Names an attribute that is not one of the lock item's own.
    pub fn name(&mut self, placeholder: &'static str, attribute: &'a str) -> &mut Self {
        self.names.push((placeholder, attribute));
        self
    }

    /// `#t = :t` when the write carries the writer's clock (every FailOpen write does),
    /// otherwise `REMOVE #t`.
    pub fn acquired_time(&mut self, t: Option<u64>) -> &mut Self {
        match t {
            Some(t) => self.set_to("#t", ":t", Attr::N(t)),
            None => self.remove("#t"),
        }
    }

    /// `lockSession` as an acquisition or a hand-over writes it: set, or removed.
    pub fn session(&mut self, session: Option<&'a str>) -> &mut Self {
        match session {
            Some(id) => self.set_to("#sess", ":sess", Attr::S(id)),
            None => self.remove("#sess"),
        }
    }

    /// The holder's data, or the removal of a previous holder's when there is none.
    pub fn data(&mut self, data: Option<&'a LockData>) -> &mut Self {
        match data {
            Some(d) => self.set_to("#data", ":data", data_attr(d)),
            None => self.remove("#data"),
        }
    }

    /// The TTL attribute, when the table has one.
    pub fn ttl(&mut self, ttl: Option<Ttl<'a>>) -> &mut Self {
        if let Some((name, at)) = ttl {
            self.name("#ttl", name).set_to("#ttl", ":ttl", Attr::N(at));
        }
        self
    }

    /// A holder's `owner`, `guid` (as `placeholder`), lease and acquisition time, as an
    /// acquisition or a heartbeat writes them.
    pub fn holder(&mut self, fields: &OpenFields<'a>, placeholder: &'static str, guid: &'a Guid) -> &mut Self {
        self.set_to("#owner", ":owner", Attr::S(fields.owner))
            .set_to("#guid", placeholder, Attr::B(guid))
            .set_to("#lease", ":lease", Attr::N(fields.lease_duration_ms))
            .acquired_time(fields.lock_acquired_time_unix_ms)
    }

    /// The next fencing token: one more than the item's, counting from `floor` on an item
    /// without one, as `op::apply` does (`#ft + :one` alone is a ValidationException there).
    pub fn next_token(&mut self, floor: u64) -> &mut Self {
        self.set("#ft = if_not_exists(#ft, :zero) + :one")
            .value(":zero", Attr::N(floor))
            .value(":one", Attr::N(1))
    }

    /// The next ticket taken by the holder of a queue with no ticket out: it becomes the
    /// fencing token and the last ticket issued, and the queue's end the place granted. No
    /// ticket is out when none was ever issued, the last one issued is the holder's, or every
    /// one issued was given back before any was granted (`ticketNext` 0, no token yet).
    pub fn take_next_ticket(&mut self) -> &mut Self {
        self.set(&format!(
            "#ft = {NEXT_TICKET}, #tn = {NEXT_TICKET}, #qg = if_not_exists(#qn, :zero)"
        ))
        .value(":zero", Attr::N(0))
        .value(":one", Attr::N(1))
        .any([
            "attribute_not_exists(#tn)",
            "#tn = #ft",
            "attribute_not_exists(#ft) AND #tn = :zero",
        ])
        .ticket_can_rise()
    }

    /// A new semaphore holder `#h` (the attribute `name`) with its `value`, on a head that no
    /// lock holds, whose limit (`permits`) is unset or `limit`, and whose `permitsHeld` is
    /// unset or at most `room`.
    pub fn new_holder(&mut self, name: &'a str, value: &'a str, limit: u64, room: u64) -> &mut Self {
        self.name("#h", name)
            .set_to("#perm", ":n", Attr::N(limit))
            .set_to("#h", ":hv", Attr::S(value))
            .value(":room", Attr::N(room))
            .and("attribute_not_exists(#lease)")
            .any(["attribute_not_exists(#perm)", "#perm = :n"])
            .any(["attribute_not_exists(#held)", "#held <= :room"])
    }

    /// `#guid = :g0`, or `#guid IN (:g0, :g1, ...)`. A lock has at most two live guids (its own
    /// and one a heartbeat may have written).
    pub fn guid_is(&mut self, guids: &'a [Guid]) -> Result<&mut Self, Error> {
        const NAMES: [&str; 4] = [":g0", ":g1", ":g2", ":g3"];
        if guids.is_empty() || guids.len() > NAMES.len() {
            return Err(Error::Config(format!("{} guids in one condition", guids.len())));
        }
        for (name, g) in NAMES.iter().zip(guids) {
            self.value(name, Attr::B(g));
        }
        Ok(match guids.len() {
            1 => self.and("#guid = :g0"),
            n => self.and(format!("#guid IN ({})", NAMES[..n].join(", "))),
        })
    }

    /// The condition that the item is free to take: one of `free` (absent, released), or the
    /// version a waiter waited out still there.
    pub fn free(&mut self, free: [&'static str; 2], waited_out: Option<&'a Version>) -> &mut Self {
        let waited_out = waited_out.map(|v| Term::from(self.version_is(v)));
        self.any(free.into_iter().map(Term::from).chain(waited_out))
    }

    /// The condition that the item is free to take with the next fencing token: absent (and so
    /// without a token), or released (`:released`) or at the version a waiter waited out, with
    /// a token that can rise (`token_can_rise`). Written as one clause, the absent item's
    /// combinations with the token's are not there to parse.
    pub fn free_to_take(&mut self, waited_out: Option<&'a Version>) -> &mut Self {
        let was =
            std::iter::once(Term::from("#lease = :released")).chain(waited_out.map(|v| self.version_is(v).into()));
        let held_before: Vec<Term> = was
            .flat_map(|w| TOKEN_CAN_RISE.map(|t| Term::from(format!("{w} AND {t}"))))
            .collect();
        self.token_bounds()
            .any(std::iter::once(Term::from("attribute_not_exists(#pk)")).chain(held_before))
    }

    /// An operator's write: on the condition that the item exists and still carries version
    /// `v`, as it was read (`op::still_version`).
    pub fn at_version(&mut self, v: &'a Version) -> &mut Self {
        let read = self.version_is(v);
        self.and("attribute_exists(#pk)").and(read)
    }

    /// The condition that the item carries version `v` (`op::still_version`): its `guid` and
    /// its `fencingToken`, each as it was or absent as it was.
    pub fn version_is(&mut self, v: &'a Version) -> String {
        let guid_is = match &v.guid {
            None => "attribute_not_exists(#guid)",
            Some(g) => {
                let g = match g {
                    GuidValue::B(b) => Attr::B(b),
                    GuidValue::S(s) => Attr::S(s),
                    GuidValue::N(n) => Attr::NText(n),
                };
                self.value(":eguid", g);
                "#guid = :eguid"
            }
        };
        let token_is = match v.fencing_token {
            Some(t) => {
                self.value(":eft", Attr::N(t));
                "#ft = :eft"
            }
            None => "attribute_not_exists(#ft)",
        };
        format!("{guid_is} AND {token_is}")
    }

    /// `op::token_can_rise`: only a token that can rise to a safe integer
    /// (`item::MAX_FENCING_TOKEN`) is raised. An item whose token is of another type, negative
    /// or too large is refused as it is, and the refusal carries it (or a read follows) for the
    /// core to name: a comparison with numbers is false for an attribute of another type, so
    /// `BETWEEN` alone refuses those too (an `attribute_type` test beside it cost dynalite twice
    /// the time per acquisition). A fractional token is the one no condition can tell apart:
    /// the write lands, its new token is refused when read back, and the lock is given back.
    pub fn token_can_rise(&mut self) -> &mut Self {
        self.token_bounds().any(TOKEN_CAN_RISE)
    }

    /// The values `TOKEN_CAN_RISE` compares with.
    fn token_bounds(&mut self) -> &mut Self {
        self.value(":zero_ft", Attr::N(0))
            .value(":below_max", Attr::N(MAX_FENCING_TOKEN - 1))
    }

    /// The condition that a new Fifo ticket and queue position can be taken on the head
    /// (`op::ticket_can_rise`): `ticketNext`, `fencingToken` and `queueNext`, where present,
    /// are numbers from 0 to 2^53 - 2, and `queueGranted` one from 0 to 2^53 - 1. Another type
    /// fails the comparison, so the head is refused with the item, which the acquisition
    /// names; a fraction is the one refused form no condition tells apart (see
    /// `token_can_rise`).
    pub fn ticket_can_rise(&mut self) -> &mut Self {
        self.value(":zero_ft", Attr::N(0))
            .value(":below_max", Attr::N(MAX_FENCING_TOKEN - 1))
            .value(":max_ft", Attr::N(MAX_FENCING_TOKEN))
            .any(["attribute_not_exists(#tn)", "#tn BETWEEN :zero_ft AND :below_max"])
            .any(["attribute_not_exists(#ft)", "#ft BETWEEN :zero_ft AND :below_max"])
            .any(["attribute_not_exists(#qn)", "#qn BETWEEN :zero_ft AND :below_max"])
            .any(["attribute_not_exists(#qg)", "#qg BETWEEN :zero_ft AND :max_ft"])
    }

    /// The condition that a semaphore holder's attribute `#h` holds `permits` (its value's
    /// first word, `:hp`) and carries one of `hexes` (its `guid`s in hex).
    pub fn holder_is(&mut self, hexes: &'a [String], permits: &'a str) -> Result<&mut Self, Error> {
        const NAMES: [&str; 4] = [":hg0", ":hg1", ":hg2", ":hg3"];
        if hexes.is_empty() || hexes.len() > NAMES.len() {
            return Err(Error::Config(format!("{} guids in one condition", hexes.len())));
        }
        let mut any = Vec::with_capacity(hexes.len());
        for (name, h) in NAMES.iter().zip(hexes) {
            self.value(name, Attr::S(h));
            any.push(format!("contains(#h, {name})"));
        }
        self.value(":hp", Attr::S(permits));
        Ok(self.and("begins_with(#h, :hp)").any(any))
    }

    /// Sets `lockWrittenUnixMs` to `now` too, first in the `SET` part: a holder's write (or a
    /// forced release's) tells when it was written.
    pub fn stamp(&mut self, now: u64) {
        let lw = if self.set.is_empty() {
            "#lw = :lw"
        } else {
            "#lw = :lw, "
        };
        self.set.insert_str(0, lw);
        self.value(":lw", Attr::N(now));
    }

    /// The update expression: `SET ...`, `REMOVE ...`, or both.
    pub fn update(&self) -> String {
        let mut e = String::with_capacity(self.set.len() + self.remove.len() + 12);
        if !self.set.is_empty() {
            e.push_str("SET ");
            e.push_str(&self.set);
        }
        if !self.remove.is_empty() {
            join(&mut e, " ", "REMOVE ");
            e.push_str(&self.remove);
        }
        if !self.add.is_empty() {
            join(&mut e, " ", "ADD ");
            e.push_str(&self.add);
        }
        e
    }

    /// Writes the expressions there are, with the names and values they use.
    pub fn write(&self, b: &mut Body) {
        let update = self.update();
        if !update.is_empty() {
            b.str("UpdateExpression", &update);
        }
        let condition = self.condition();
        if !condition.is_empty() {
            b.str("ConditionExpression", &condition);
        }
        let names = self.names_in(&[&update, &condition]);
        if !names.is_empty() {
            b.names(&names);
        }
        if !self.values.is_empty() {
            b.values(&self.values);
        }
    }

    /// The names the placeholders (`#...`) in `texts` stand for, each once.
    fn names_in(&self, texts: &[&str]) -> Vec<(&'static str, &'a str)> {
        let mut names: Vec<(&'static str, &'a str)> = Vec::with_capacity(12);
        for text in texts {
            for (at, _) in text.match_indices('#') {
                let end = text[at + 1..]
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .map_or(text.len(), |n| at + 1 + n);
                let placeholder = &text[at..end];
                if names.iter().any(|(p, _)| *p == placeholder) {
                    continue;
                }
                let known = self.names.iter().chain(ATTRIBUTE_NAMES.iter());
                match known.copied().find(|(p, _)| *p == placeholder) {
                    Some(pair) => names.push(pair),
                    None => debug_assert!(false, "no attribute is named {placeholder}"),
                }
            }
        }
        names
    }
}

/// Appends `part` to `text`, after `separator` unless `text` is empty.
fn join(text: &mut String, separator: &str, part: &str) {
    if !text.is_empty() {
        text.push_str(separator);
    }
    text.push_str(part);
}

pub fn data_attr(d: &LockData) -> Attr<'_> {
    match d {
        LockData::S(s) => Attr::S(s),
        LockData::B(b) => Attr::B(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(e: &Expr<'_>) -> Vec<(&'static str, String)> {
        let update = e.update();
        e.names_in(&[&update, &e.condition()])
            .into_iter()
            .map(|(p, a)| (p, a.to_string()))
            .collect()
    }

    #[test]
    fn one_guid_is_an_equality_two_are_a_list() {
        let g = [[1u8; 64], [2u8; 64]];
        let mut e = Expr::new("id");
        e.guid_is(&g[..1]).unwrap();
        assert_eq!(e.condition(), "#guid = :g0");
        let mut e = Expr::new("id");
        e.guid_is(&g).unwrap();
        assert_eq!(e.condition(), "#guid IN (:g0, :g1)");
        assert_eq!(e.values.len(), 2);
        assert!(e.guid_is(&[]).is_err());
    }

    #[test]
    fn a_condition_is_written_as_its_combinations_until_they_are_too_many() {
        let mut e = Expr::new("id");
        e.and("#a = :a")
            .any(["#b = :b", "#c = :c"])
            .any(["#d = :d", "#e = :e AND #f = :f"]);
        assert_eq!(
            e.condition(),
            "#a = :a AND #b = :b AND #d = :d OR #a = :a AND #b = :b AND #e = :e AND #f = :f \
             OR #a = :a AND #c = :c AND #d = :d OR #a = :a AND #c = :c AND #e = :e AND #f = :f"
        );
        // Sixteen combinations: each clause of several alternatives in parentheses.
        let mut e = Expr::new("id");
        for _ in 0..4 {
            e.any(["#a = :a", "#b = :b"]);
        }
        e.and("#c = :c");
        assert_eq!(
            e.condition(),
            ["(#a = :a OR #b = :b)"; 4].join(" AND ") + " AND #c = :c"
        );
        assert_eq!(Expr::new("id").condition(), "");
        let none: [&str; 0] = [];
        let refused = std::panic::catch_unwind(|| {
            Expr::new("id").any(none);
        });
        assert!(refused.is_err(), "a clause of no alternatives is refused, not left out");
    }

    #[test]
    fn an_absent_item_is_free_to_take_without_a_token_condition() {
        let mut e = Expr::new("id");
        e.free_to_take(None);
        assert_eq!(
            e.condition(),
            "attribute_not_exists(#pk) OR #lease = :released AND attribute_not_exists(#ft) \
             OR #lease = :released AND #ft BETWEEN :zero_ft AND :below_max"
        );
        let waited_out = Version {
            guid: None,
            fencing_token: Some(4),
        };
        let mut e = Expr::new("id");
        e.free_to_take(Some(&waited_out));
        let version = "attribute_not_exists(#guid) AND #ft = :eft";
        assert_eq!(
            e.condition(),
            format!(
                "attribute_not_exists(#pk) OR #lease = :released AND attribute_not_exists(#ft) \
                 OR #lease = :released AND #ft BETWEEN :zero_ft AND :below_max \
                 OR {version} AND attribute_not_exists(#ft) OR {version} AND #ft BETWEEN :zero_ft AND :below_max"
            )
        );
        let placeholders: Vec<&str> = e.values.iter().map(|(p, _)| *p).collect();
        assert_eq!(placeholders, [":eft", ":zero_ft", ":below_max"]);
    }

    #[test]
    fn stale_acquired_time_is_removed_without_trust() {
        let mut e = Expr::new("id");
        e.set_to("#lease", ":lease", Attr::N(5)).acquired_time(None);
        assert_eq!(e.update(), "SET #lease = :lease REMOVE #t");
        let mut e = Expr::new("id");
        e.set_to("#lease", ":lease", Attr::N(5)).acquired_time(Some(5));
        assert_eq!(e.update(), "SET #lease = :lease, #t = :t");
        assert!(matches!(e.values.as_slice(), [(":lease", _), (":t", Attr::N(5))]));
    }

    #[test]
    fn update_expressions_join_their_set_and_remove_parts() {
        let data = LockData::S("x".into());
        let mut e = Expr::new("id");
        e.data(Some(&data)).ttl(Some(("expires", 9)));
        assert_eq!(e.update(), "SET #data = :data, #ttl = :ttl");
        assert_eq!(
            names(&e),
            vec![("#data", "lockData".to_string()), ("#ttl", "expires".to_string())]
        );
        let mut e = Expr::new("id");
        e.data(None).ttl(None).remove("#w");
        assert_eq!(e.update(), "REMOVE #data, #w");
        assert!(e.values.is_empty());
    }

    #[test]
    fn a_request_names_the_attributes_its_expressions_use_once_each() {
        let mut e = Expr::new("id");
        e.set("#ft = :tk")
            .and("attribute_exists(#pk)")
            .any(["#ft < :tk", "attribute_not_exists(#ft)"]);
        assert_eq!(
            names(&e),
            vec![("#ft", "fencingToken".to_string()), ("#pk", "id".to_string())]
        );
        let mut e = Expr::new("id");
        e.name("#h", "holder-1").set("#h = :hv").and("begins_with(#h, :hp)");
        assert_eq!(names(&e), vec![("#h", "holder-1".to_string())]);
    }

    #[test]
    fn every_update_of_a_holder_also_sets_the_time_it_was_written() {
        let mut e = Expr::new("id");
        e.set("#a = :a").remove("#t").stamp(7);
        assert_eq!(e.update(), "SET #lw = :lw, #a = :a REMOVE #t");
        let mut e = Expr::new("id");
        e.remove("#data").stamp(7);
        assert_eq!(e.update(), "SET #lw = :lw REMOVE #data");
        assert!(matches!(e.values.as_slice(), [(":lw", Attr::N(7))]));
    }
}
