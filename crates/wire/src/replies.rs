//! Command reply builders in MongoDB's shapes: `{ok: 1}`, `{ok: 0, errmsg, code, codeName}`,
//! and the `writeErrors` entries of write commands, with MongoDB's E11000 message.
//!
//! `ok` is a double, as MongoDB sends it. Field order follows MongoDB: result fields first and
//! `ok` last in a success; `ok, errmsg, code, codeName` in a failure.

use bson::{doc, Bson, Document};

use crate::codes::ErrorCode;

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

/// `E11000 duplicate key error collection: db.coll index: name_1 dup key: { name: "x" }`.
pub fn duplicate_key_message(namespace: &str, index_name: &str, key_value: &Document) -> String {
    format!(
        "E11000 duplicate key error collection: {namespace} index: {index_name} dup key: {}",
        format_document(key_value)
    )
}

/// A document in the server's log/message notation: `{ a: 1, b: "x" }`, `{}` when empty.
pub fn format_document(document: &Document) -> String {
    if document.is_empty() {
        return "{}".to_owned();
    }
    let fields: Vec<String> =
        document.iter().map(|(key, value)| format!("{key}: {}", format_value(value))).collect();
    format!("{{ {} }}", fields.join(", "))
}

fn format_value(value: &Bson) -> String {
    match value {
        Bson::String(text) => format!("{text:?}"),
        Bson::Int32(number) => number.to_string(),
        Bson::Int64(number) => number.to_string(),
        Bson::Double(number) if number.is_finite() && number.fract() == 0.0 => format!("{number:.1}"),
        Bson::Double(number) => number.to_string(),
        Bson::Boolean(flag) => flag.to_string(),
        Bson::Null => "null".to_owned(),
        Bson::ObjectId(id) => format!("ObjectId('{}')", id.to_hex()),
        Bson::DateTime(date) => format!("new Date({})", date.timestamp_millis()),
        Bson::Document(inner) => format_document(inner),
        Bson::Array(items) if items.is_empty() => "[]".to_owned(),
        Bson::Array(items) => {
            let items: Vec<String> = items.iter().map(format_value).collect();
            format!("[ {} ]", items.join(", "))
        }
        Bson::MinKey => "MinKey".to_owned(),
        Bson::MaxKey => "MaxKey".to_owned(),
        other => other.to_string(),
    }
}
