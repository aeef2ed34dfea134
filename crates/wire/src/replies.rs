//! Command reply builders in MongoDB's shapes: `{ok: 1}`, `{ok: 0, errmsg, code, codeName}`,
//! and the `writeErrors` entries of write commands, with MongoDB's E11000 message.
//!
//! `ok` is a double, as MongoDB sends it. Field order follows MongoDB: result fields first and
//! `ok` last in a success; `ok, errmsg, code, codeName` in a failure.

use bson::{Bson, Document, doc};

use vocabulary::{ErrorCode, duplicate_key_message};

/// `{...fields, ok: 1.0}`; an `ok` already in `fields` is replaced and moved last.
pub fn ok_reply(mut fields: Document) -> Document {
    fields.remove("ok");
    fields.insert("ok", 1.0);
    fields
}

/// `{ok: 0.0, errmsg, code, codeName}`.
pub fn error_reply(code: ErrorCode, errmsg: impl Into<String>) -> Document {
    doc! {
        "ok": 0.0,
        "errmsg": errmsg.into(),
        "code": code.code(),
        "codeName": code.name(),
    }
}

/// One entry of a write command's `writeErrors` array.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteError {
    /// Position of the failed operation in the command's batch.
    pub index: usize,
    pub code: ErrorCode,
    pub errmsg: String,
    /// For duplicate keys: the index's key pattern, e.g. `{name: 1}`.
    pub key_pattern: Option<Document>,
    /// For duplicate keys: the duplicated key, e.g. `{name: "x"}`.
    pub key_value: Option<Document>,
}

impl WriteError {
    /// The duplicate key error MongoDB reports when operation `index` of a batch on `namespace`
    /// ("db.collection") collides in index `index_name`.
    pub fn duplicate_key(
        index: usize,
        namespace: &str,
        index_name: &str,
        key_pattern: Document,
        key_value: Document,
    ) -> WriteError {
        WriteError {
            index,
            code: ErrorCode::DuplicateKey,
            errmsg: duplicate_key_message(namespace, index_name, &key_value),
            key_pattern: Some(key_pattern),
            key_value: Some(key_value),
        }
    }

    /// `{index, code, [codeName,] errmsg, [keyPattern, keyValue]}` as in `writeErrors`.
    pub fn to_document(&self) -> Document {
        let index = i32::try_from(self.index).unwrap_or(i32::MAX);
        let mut document = doc! { "index": index, "code": self.code.code(), "errmsg": self.errmsg.clone() };
        if let Some(pattern) = &self.key_pattern {
            document.insert("keyPattern", pattern.clone());
        }
        if let Some(value) = &self.key_value {
            document.insert("keyValue", value.clone());
        }
        document
    }
}

/// A write command's reply: `{n, [writeErrors,] ok: 1.0}`. Write errors do not fail the command:
/// `ok` stays 1, as in MongoDB.
pub fn write_reply(n: i64, write_errors: &[WriteError]) -> Document {
    let mut reply = doc! { "n": n_value(n) };
    if !write_errors.is_empty() {
        let errors: Vec<Bson> = write_errors.iter().map(|e| Bson::Document(e.to_document())).collect();
        reply.insert("writeErrors", errors);
    }
    ok_reply(reply)
}

/// `n` as MongoDB sends it: an int32 when it fits.
fn n_value(n: i64) -> Bson {
    i32::try_from(n).map(Bson::Int32).unwrap_or(Bson::Int64(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the error reply has MongoDB's fields, types and order.
    #[test]
    fn error_reply_shape() {
        let reply = error_reply(ErrorCode::CommandNotFound, "no such command: 'frobnicate'");
        assert_eq!(
            reply,
            doc! { "ok": 0.0, "errmsg": "no such command: 'frobnicate'", "code": 59, "codeName": "CommandNotFound" }
        );
        let keys: Vec<&str> = reply.keys().map(String::as_str).collect();
        assert_eq!(keys, ["ok", "errmsg", "code", "codeName"]);
    }

    /// Goal: ok comes last and is a double, replacing any earlier ok.
    #[test]
    fn ok_reply_puts_ok_last() {
        let reply = ok_reply(doc! { "ok": 0, "n": 3 });
        assert_eq!(reply, doc! { "n": 3, "ok": 1.0 });
        assert_eq!(reply.keys().last().map(String::as_str), Some("ok"));
    }

    /// Goal: a duplicate key write error matches MongoDB's writeErrors entry and E11000 text.
    #[test]
    fn duplicate_key_write_error() {
        let error = WriteError::duplicate_key(2, "test.users", "name_1", doc! { "name": 1 }, doc! { "name": "x" });
        assert_eq!(
            error.errmsg,
            r#"E11000 duplicate key error collection: test.users index: name_1 dup key: { name: "x" }"#
        );
        assert_eq!(
            error.to_document(),
            doc! {
                "index": 2, "code": 11000, "errmsg": error.errmsg.clone(),
                "keyPattern": { "name": 1 }, "keyValue": { "name": "x" },
            }
        );
        let reply = write_reply(2, &[error]);
        assert_eq!(reply.get_i32("n").ok(), Some(2));
        assert_eq!(reply.get_array("writeErrors").map(Vec::len).ok(), Some(1));
        assert_eq!(reply.get_f64("ok").ok(), Some(1.0));
    }

    /// Goal: a write reply without errors has no writeErrors field.
    #[test]
    fn write_reply_without_errors() {
        assert_eq!(write_reply(5, &[]), doc! { "n": 5, "ok": 1.0 });
        assert_eq!(write_reply(i64::MAX, &[]), doc! { "n": i64::MAX, "ok": 1.0 });
    }
}
