//! `Command`: one client command, out of its OP_MSG or OP_QUERY envelope, with typed access to
//! its fields. Type errors become MongoDB's `TypeMismatch`, missing fields `BadValue`.
//!
//! The body is decoded once into a `Document` for argument access; document sequences (the
//! `documents` of an insert, the `updates` of an update...) stay as the client's raw bytes, so
//! an inserted document is never re-encoded.

use bson::{Bson, Document, RawDocumentBuf};
use wire::{ErrorCode, Message, Request};

use crate::error::CommandError;

/// Generic arguments every command accepts and ignores (sessions, cluster time, read
/// preference, API version...). `$db` is read separately.
pub const GENERIC_ARGUMENTS: [&str; 12] = [
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "comment",
    "maxTimeMS",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
];

#[derive(Debug, Clone)]
pub struct Command {
    /// The first key of the body, as the client spelled it.
    pub name: String,
    /// `$db` for OP_MSG; the part before `.$cmd` for OP_QUERY.
    pub database: String,
    /// Shared, not copied, with the registry of running commands (`operations`).
    pub body: std::sync::Arc<Document>,
    /// Kind-1 sections: identifier and the raw documents.
    pub sequences: Vec<(String, Vec<RawDocumentBuf>)>,
    /// True when the request came as a legacy OP_QUERY.
    pub legacy: bool,
}

impl Command {
    pub fn from_request(request: &Request) -> Result<Command, CommandError> {
        let sequences = match &request.message {
            Message::Msg(message) => {
                message.sequences.iter().map(|s| (s.identifier.clone(), s.documents.clone())).collect()
            }
            Message::Query(_) => Vec::new(),
        };
        Command::with_sequences(request, sequences)
    }

    /// `from_request`, moving the request's document sequences into the command instead of
    /// copying them: an insert of 48 MB would otherwise hold its documents twice.
    pub fn take_from_request(request: &mut Request) -> Result<Command, CommandError> {
        let sequences = match &mut request.message {
            Message::Msg(message) => {
                message.sequences.iter_mut().map(|s| (s.identifier.clone(), std::mem::take(&mut s.documents))).collect()
            }
            Message::Query(_) => Vec::new(),
        };
        Command::with_sequences(request, sequences)
    }

    fn with_sequences(
        request: &Request,
        sequences: Vec<(String, Vec<RawDocumentBuf>)>,
    ) -> Result<Command, CommandError> {
        match &request.message {
            Message::Msg(message) => {
                let body = Document::try_from(message.body.as_ref())?;
                let database = match body.get("$db") {
                    Some(Bson::String(name)) => name.clone(),
                    Some(_) => return Err(CommandError::type_mismatch("$db must be a string")),
                    None => {
                        return Err(CommandError::new(
                            ErrorCode::FailedToParse,
                            "OP_MSG requests require a $db argument",
                        ));
                    }
                };
                Command::new(body, database, sequences, false)
            }
            Message::Query(query) => {
                let body = Document::try_from(query.command()?)?;
                Command::new(body, query.database().to_owned(), Vec::new(), true)
            }
        }
    }

    /// A command given as a document (no envelope, no document sequences).
    pub fn from_document(body: Document, database: String) -> Result<Command, CommandError> {
        Command::new(body, database, Vec::new(), false)
    }

    fn new(
        body: Document,
        database: String,
        sequences: Vec<(String, Vec<RawDocumentBuf>)>,
        legacy: bool,
    ) -> Result<Command, CommandError> {
        let Some(name) = body.keys().next().cloned() else {
            return Err(CommandError::new(ErrorCode::FailedToParse, "empty command document"));
        };
        Ok(Command { name, database, body: std::sync::Arc::new(body), sequences, legacy })
    }

    /// The value of the command's first field (`{find: "users"}` → "users").
    pub fn argument(&self) -> Option<&Bson> {
        self.body.get(&self.name)
    }

    /// The collection the command names in its first field.
    pub fn collection(&self) -> Result<String, CommandError> {
        match self.argument() {
            Some(Bson::String(name)) if !name.is_empty() => Ok(name.clone()),
            Some(Bson::String(_)) => Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid namespace specified '{}.'", self.database),
            )),
            _ => Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("collection name has invalid type {}", type_name(self.argument())),
            )),
        }
    }

    /// "db.collection".
    pub fn namespace(&self, collection: &str) -> String {
        format!("{}.{}", self.database, collection)
    }

    pub fn get(&self, key: &str) -> Option<&Bson> {
        self.body.get(key)
    }

    pub fn optional_str(&self, key: &str) -> Result<Option<&str>, CommandError> {
        match self.body.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::String(text)) => Ok(Some(text)),
            Some(other) => Err(mismatch(key, "string", other)),
        }
    }

    pub fn optional_document(&self, key: &str) -> Result<Option<&Document>, CommandError> {
        match self.body.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::Document(document)) => Ok(Some(document)),
            Some(other) => Err(mismatch(key, "object", other)),
        }
    }

    pub fn optional_bool(&self, key: &str) -> Result<Option<bool>, CommandError> {
        match self.body.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(value) => truthy(value).map(Some).ok_or_else(|| mismatch(key, "bool", value)),
        }
    }

    /// A number field as i64 (int32, int64 or integral double).
    pub fn optional_i64(&self, key: &str) -> Result<Option<i64>, CommandError> {
        match self.body.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(value) => as_i64(value).map(Some).ok_or_else(|| mismatch(key, "number", value)),
        }
    }

    /// The raw documents of `key`: a kind-1 sequence if there is one, else the body's array.
    pub fn documents(&self, key: &str) -> Result<Vec<RawDocumentBuf>, CommandError> {
        if let Some((_, documents)) = self.sequences.iter().find(|(id, _)| id == key) {
            return Ok(documents.clone());
        }
        match self.body.get(key) {
            None => Ok(Vec::new()),
            Some(Bson::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Bson::Document(document) => Ok(RawDocumentBuf::try_from(document)?),
                    other => Err(mismatch(key, "array of objects", other)),
                })
                .collect(),
            Some(other) => Err(mismatch(key, "array", other)),
        }
    }

    /// True if the client asked for no reply to this write (`writeConcern: {w: 0}`).
    pub fn unacknowledged(&self) -> bool {
        let Some(Bson::Document(concern)) = self.body.get("writeConcern") else {
            return false;
        };
        matches!(concern.get("w").and_then(as_i64), Some(0))
    }

    /// How durable a write must be before the reply: `j: true` waits for the log sync, `w: 0`
    /// waits for nothing, the default is the periodic (100 ms) sync.
    pub fn durability(&self) -> docstore::Durability {
        if self.journaled() {
            docstore::Durability::Immediate
        } else if self.unacknowledged() {
            docstore::Durability::None
        } else {
            docstore::Durability::Periodic
        }
    }

    /// True if the write concern asks for the journal (`j: true`, or `fsync: true`).
    pub fn journaled(&self) -> bool {
        let Some(Bson::Document(concern)) = self.body.get("writeConcern") else {
            return false;
        };
        let flag = |key: &str| concern.get(key).and_then(truthy).unwrap_or(false);
        flag("j") || flag("fsync")
    }
}

/// MongoDB's truthiness for boolean options: bools, and numbers (non-zero is true).
pub fn truthy(value: &Bson) -> Option<bool> {
    match value {
        Bson::Boolean(flag) => Some(*flag),
        Bson::Int32(number) => Some(*number != 0),
        Bson::Int64(number) => Some(*number != 0),
        Bson::Double(number) => Some(*number != 0.0),
        _ => None,
    }
}

/// A number as i64, if it is integral and in range.
pub fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(number) => Some(i64::from(*number)),
        Bson::Int64(number) => Some(*number),
        Bson::Double(number) if number.fract() == 0.0 && number.abs() < 9.2e18 => Some(*number as i64),
        _ => None,
    }
}

pub fn mismatch(key: &str, expected: &str, found: &Bson) -> CommandError {
    CommandError::type_mismatch(format!(
        "BSON field '{key}' is the wrong type '{}', expected type '{expected}'",
        type_name(Some(found))
    ))
}

/// MongoDB's name for a value's type, as in `$type`.
pub fn type_name(value: Option<&Bson>) -> &'static str {
    match value {
        None => "missing",
        Some(value) => wire::type_name(i32::from(value.element_type() as u8 as i8)).unwrap_or("unknown"),
    }
}
