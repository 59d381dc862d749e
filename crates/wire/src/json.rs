//! DynamoDB's JSON protocol, as far as the lock item needs it: request bodies are written
//! with aws-smithy-json's writer into one string, and responses are read with its tokenizer,
//! for the lock's own attributes only
//! (anything else another writer put on the item is skipped, not decoded).

use aws_smithy_json::deserialize::token::{expect_start_array, expect_start_object, expect_string_or_null, skip_value};
use aws_smithy_json::deserialize::{json_token_iter, Token};
use aws_smithy_json::serialize::JsonValueWriter;
use aws_smithy_types::base64;

use dynamodb_lock_core::item::{self, Found, KeyValue, LockKey, LockRecord, TableSpec};

/// An attribute value in a request.
#[derive(Clone, Copy)]
pub enum Attr<'a> {
    S(&'a str),
    N(u64),
    /// A number in its decimal text form (key values as the caller gave them).
    NText(&'a str),
    B(&'a [u8]),
    /// A binary set of one member.
    BS(&'a [u8]),
}

impl<'a> From<&'a KeyValue> for Attr<'a> {
    fn from(v: &'a KeyValue) -> Self {
        match v {
            KeyValue::S(s) => Attr::S(s),
            KeyValue::N(n) => Attr::NText(n),
            KeyValue::B(b) => Attr::B(b),
        }
    }
}

/// A request body under construction: `{"TableName":...` then fields, then `}`. Every name
/// and value is written by aws-smithy-json's writer; only the top level's punctuation is
/// written here, so that fields can be added one call at a time.
pub struct Body(String);

impl Body {
    pub fn new(table: &str) -> Body {
        let mut out = String::with_capacity(512);
        out.push('{');
        JsonValueWriter::new(&mut out).string("TableName");
        out.push(':');
        JsonValueWriter::new(&mut out).string(table);
        Body(out)
    }

    fn field(&mut self, name: &str) -> JsonValueWriter<'_> {
        self.0.push(',');
        JsonValueWriter::new(&mut self.0).string(name);
        self.0.push(':');
        JsonValueWriter::new(&mut self.0)
    }

    /// `"Key"` (or `"Item"` with `extra` attributes) holding the lock's key attributes.
    pub fn item(&mut self, field: &str, table: &TableSpec, key: &LockKey, extra: &[(&str, Attr<'_>)]) {
        let mut o = self.field(field).start_object();
        attr(o.key(&table.partition_key), &Attr::from(&key.partition));
        if let (Some(name), Some(v)) = (&table.sort_key, &key.sort) {
            attr(o.key(name), &Attr::from(v));
        }
        for (name, v) in extra {
            attr(o.key(name), v);
        }
        o.finish();
    }

    pub fn str(&mut self, name: &str, value: &str) {
        self.field(name).string(value);
    }

    pub fn bool(&mut self, name: &str, value: bool) {
        self.field(name).boolean(value);
    }

    pub fn names(&mut self, pairs: &[(&str, &str)]) {
        let mut o = self.field("ExpressionAttributeNames").start_object();
        for (k, v) in pairs {
            o.key(k).string(v);
        }
        o.finish();
    }

    pub fn values(&mut self, values: &[(&str, Attr<'_>)]) {
        let mut o = self.field("ExpressionAttributeValues").start_object();
        for (k, v) in values {
            attr(o.key(k), v);
        }
        o.finish();
    }

    pub fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// `{"S": ...}`, `{"N": "..."}`, `{"B": "<base64>"}` or `{"BS": ["<base64>"]}`.
fn attr(w: JsonValueWriter<'_>, v: &Attr<'_>) {
    let mut o = w.start_object();
    match v {
        Attr::S(s) => o.key("S").string(s),
        Attr::N(n) => o.key("N").string(&n.to_string()),
        Attr::NText(n) => o.key("N").string(n),
        Attr::B(b) => o.key("B").string_unchecked(&base64::encode(b)),
        Attr::BS(b) => {
            let mut set = o.key("BS").start_array();
            set.value().string_unchecked(&base64::encode(b));
            set.finish();
        }
    }
    o.finish();
}

/// What a response body says, in the parts the lock protocol reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// `"Item"` (GetItem, or a failed condition with `ALL_OLD`) or `"Attributes"` (UpdateItem
    /// with `ReturnValues`), decoded.
    pub record: Option<LockRecord>,
    /// The error name: the part of `"__type"` after `#`.
    pub error_type: Option<String>,
    pub message: Option<String>,
}

type Tokens<'a> = std::iter::Peekable<aws_smithy_json::deserialize::JsonTokenIterator<'a>>;
type JsonError = aws_smithy_json::deserialize::error::DeserializeError;

pub fn read_response(body: &[u8]) -> Result<Response, JsonError> {
    let mut reply = Response::default();
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(reply);
    }
    each_field(&mut json_token_iter(body).peekable(), |tokens, name| {
        match name {
            "Item" | "Attributes" => reply.record = read_record(tokens)?,
            "__type" => {
                reply.error_type = read_string(tokens)?.map(|t| t.rsplit('#').next().unwrap_or_default().to_string())
            }
            "message" | "Message" => reply.message = read_string(tokens)?,
            _ => skip_value(tokens)?,
        }
        Ok(())
    })?;
    Ok(reply)
}

fn unexpected(t: Option<Token<'_>>) -> JsonError {
    JsonError::custom(format!("unexpected JSON token {t:?}"))
}

/// An object: each field's name is handed to `read`, which reads (or skips) its value.
fn each_field<'a>(
    tokens: &mut Tokens<'a>,
    mut read: impl FnMut(&mut Tokens<'a>, &str) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    expect_start_object(tokens.next())?;
    loop {
        match tokens.next().transpose()? {
            Some(Token::EndObject { .. }) => return Ok(()),
            Some(Token::ObjectKey { key, .. }) => read(tokens, &key.to_unescaped()?)?,
            other => return Err(unexpected(other)),
        }
    }
}

fn read_string(tokens: &mut Tokens<'_>) -> Result<Option<String>, JsonError> {
    match expect_string_or_null(tokens.next())? {
        Some(value) => Ok(Some(value.to_unescaped()?.into_owned())),
        None => Ok(None),
    }
}

/// An item's attributes, for the ones a lock has, read by the core's one rule
/// (`LockRecord::read`); `null` is no item. A session item's `lockRevoked` goes to `revoked`,
/// in byte order.
fn read_record(tokens: &mut Tokens<'_>) -> Result<Option<LockRecord>, JsonError> {
    if let Some(Ok(Token::ValueNull { .. })) = tokens.peek() {
        tokens.next();
        return Ok(None);
    }
    let mut r = LockRecord::default();
    each_field(tokens, |tokens, name| {
        if name == item::LOCK_REVOKED {
            r.revoked = read_binary_set(tokens)?;
            r.revoked.sort();
        } else if !item::READ_ATTRIBUTES.contains(&name) && !name.starts_with(item::HOLDER_PREFIX) {
            skip_value(tokens)?;
        } else if let Some(value) = read_value(tokens)? {
            r.read(name, value);
        }
        Ok(())
    })?;
    Ok(Some(r))
}

/// A binary set, `{"BS": ["<base64>", ...]}`, decoded; any other type, or a member that is not
/// base64, reads as nothing.
fn read_binary_set(tokens: &mut Tokens<'_>) -> Result<Vec<Vec<u8>>, JsonError> {
    let mut out = Vec::new();
    each_field(tokens, |tokens, kind| {
        if kind != "BS" {
            return skip_value(tokens);
        }
        expect_start_array(tokens.next())?;
        loop {
            match tokens.next().transpose()? {
                Some(Token::EndArray { .. }) => return Ok(()),
                Some(Token::ValueString { value, .. }) => {
                    if let Ok(bytes) = base64::decode(value.to_unescaped()?.as_ref()) {
                        out.push(bytes);
                    }
                }
                other => return Err(unexpected(other)),
            }
        }
    })?;
    Ok(out)
}

/// One attribute value, `{"<type>": value}`: S, N and B as found (B decoded from base64),
/// any other type by its name.
fn read_value(tokens: &mut Tokens<'_>) -> Result<Option<Found>, JsonError> {
    let mut value = None;
    each_field(tokens, |tokens, kind| {
        value = match kind {
            "S" => read_string(tokens)?.map(Found::S),
            "N" => read_string(tokens)?.map(Found::N),
            "B" => read_string(tokens)?.map(|b| match base64::decode(&b) {
                Ok(bytes) => Found::B(bytes),
                Err(_) => Found::Other("B (not base64)".into()),
            }),
            _ => {
                skip_value(tokens)?;
                Some(Found::Other(kind.into()))
            }
        };
        Ok(())
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(sort: bool) -> TableSpec {
        TableSpec {
            name: "lo\"cks".into(),
            partition_key: "id".into(),
            sort_key: sort.then(|| "sk".into()),
        }
    }

    #[test]
    fn bodies_escape_strings_and_encode_binary() {
        let key = LockKey {
            partition: KeyValue::S("a\"b\\c\n\u{1}é😀".into()),
            sort: Some(KeyValue::N("-1.5e3".into())),
        };
        let mut b = Body::new(&table(true).name);
        b.item("Key", &table(true), &key, &[("guid", Attr::B(&[0xff, 0, 1]))]);
        b.str("ConditionExpression", "#g = :g");
        b.names(&[("#g", "guid")]);
        b.values(&[(":g", Attr::N(7)), (":o", Attr::S("me"))]);
        b.bool("ConsistentRead", true);
        assert_eq!(
            b.finish(),
            r##"{"TableName":"lo\"cks","Key":{"id":{"S":"a\"b\\c\n\u0001é😀"},"sk":{"N":"-1.5e3"},"guid":{"B":"/wAB"}},"ConditionExpression":"#g = :g","ExpressionAttributeNames":{"#g":"guid"},"ExpressionAttributeValues":{":g":{"N":"7"},":o":{"S":"me"}},"ConsistentRead":true}"##
        );
    }

    #[test]
    fn bodies_round_trip_through_a_json_parser() {
        let key = LockKey {
            partition: KeyValue::S((0u8..128).map(char::from).collect()),
            sort: None,
        };
        let mut b = Body::new("t");
        b.item("Key", &table(false), &key, &[]);
        let body = b.finish();
        let mut strings = vec![];
        for t in json_token_iter(body.as_bytes()) {
            if let Token::ValueString { value, .. } = t.unwrap() {
                strings.push(value.to_unescaped().unwrap().into_owned());
            }
        }
        assert_eq!(strings, vec!["t".to_string(), (0u8..128).map(char::from).collect()]);
    }

    #[test]
    fn replies_yield_the_lock_attributes_and_skip_the_rest() {
        let body = br#"{"Attributes":{"owner":{"S":"h\u00e9"},"guid":{"B":"AQID"},"fencingToken":{"N":"42"},
            "leaseDurationMs":{"N":"1"},"other":{"M":{"x":{"L":[{"N":"1"},{"BOOL":true},{"NULL":true}]}}},
            "lockAcquiredTimeUnixMs":{"S":"not a number"},"lockWaitingUnixMs":{"N":"17"},
            "lockWaiter":{"S":"w1"},"lockWaitingSinceUnixMs":{"N":"12"}},"ConsumedCapacity":null}"#;
        let r = read_response(body).unwrap();
        assert_eq!(
            r.record,
            Some(LockRecord {
                owner: Some("hé".into()),
                guid: Some(item::GuidValue::B(vec![1, 2, 3])),
                fencing_token: Some(42),
                lease_duration_ms: Some(1),
                lock_acquired_time_unix_ms: None,
                lock_waiting_unix_ms: Some(17),
                lock_waiter: Some("w1".into()),
                lock_waiting_since_unix_ms: Some(12),
                ..Default::default()
            })
        );
        assert_eq!(r.error_type, None);
    }

    #[test]
    fn replies_yield_the_fifo_counters_of_a_head_item() {
        let body = br#"{"Attributes":{"fencingToken":{"N":"7"},"ticketNext":{"N":"9"},"queueNext":{"N":"4"},"queueGranted":{"N":"2"},"ttl":{"N":"5"}}}"#;
        let r = read_response(body).unwrap().record.unwrap();
        assert_eq!(
            (r.fencing_token, r.ticket_next(), r.queue_next(), r.queue_granted()),
            (Some(7), Some(9), Some(4), Some(2))
        );
    }

    #[test]
    fn replies_name_the_attributes_they_hold_in_a_refused_form() {
        let r = read_response(br#"{"Item":{"fencingToken":{"N":"-5"},"guid":{"S":"abc"},"owner":{"N":"3"}}}"#)
            .unwrap()
            .record
            .unwrap();
        assert_eq!(r.fencing_token, None);
        assert_eq!(r.guid, Some(item::GuidValue::S("abc".into())));
        assert_eq!(r.owner, None);
        let m = r.malformed.unwrap();
        assert_eq!((m.attribute, m.found.as_str()), (item::FENCING_TOKEN, "the number -5"));
        let r = read_response(br#"{"Item":{"guid":{"BOOL":true},"fencingToken":{"S":"7"}}}"#)
            .unwrap()
            .record
            .unwrap();
        assert_eq!(
            r.malformed.map(|m| (m.attribute, m.found)),
            Some((item::GUID, "a value of type BOOL".into()))
        );
        let r = read_response(br#"{"Item":{"fencingToken":{"SS":["1"]}}}"#)
            .unwrap()
            .record
            .unwrap();
        assert_eq!(r.malformed.map(|m| m.found), Some("a value of type SS".into()));
    }

    #[test]
    fn replies_yield_lock_data_as_string_or_binary() {
        let r = read_response(br#"{"Item":{"lockData":{"S":"h\u00e9"}}}"#)
            .unwrap()
            .record
            .unwrap();
        assert_eq!(r.data.as_deref(), Some(&item::LockData::S("hé".into())));
        let r = read_response(br#"{"Item":{"lockData":{"B":"AQID"}}}"#)
            .unwrap()
            .record
            .unwrap();
        assert_eq!(r.data.as_deref(), Some(&item::LockData::B(vec![1, 2, 3])));
        let r = read_response(br#"{"Item":{"lockData":{"N":"1"},"owner":{"S":"o"}}}"#)
            .unwrap()
            .record
            .unwrap();
        assert_eq!((r.data, r.owner.as_deref()), (None, Some("o")));
    }

    #[test]
    fn error_replies_give_name_message_and_old_item() {
        let body = br#"{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{"guid":{"B":"AQ=="}}}"#;
        let r = read_response(body).unwrap();
        assert_eq!(r.error_type.as_deref(), Some("ConditionalCheckFailedException"));
        assert_eq!(r.message.as_deref(), Some("The conditional request failed"));
        assert_eq!(r.record.unwrap().guid, Some(item::GuidValue::B(vec![1])));
        let r = read_response(br#"{"__type":"ThrottlingException","Message":"slow"}"#).unwrap();
        assert_eq!(r.error_type.as_deref(), Some("ThrottlingException"));
        assert_eq!(r.message.as_deref(), Some("slow"));
        assert_eq!(read_response(b"{}").unwrap(), Response::default());
        assert_eq!(read_response(b"").unwrap(), Response::default());
        assert!(read_response(b"<html>").is_err());
        assert!(read_response(br#"{"Item":[1]}"#).is_err());
    }
}
