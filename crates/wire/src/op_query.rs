//! Legacy OP_QUERY (opCode 2004): parse. Drivers and mongosh still send their first `hello` /
//! `isMaster` this way, to `admin.$cmd`, before they know the server speaks OP_MSG.
//!
//! ```text
//! MsgHeader  header                16 bytes, opCode 2004
//! int32      flags                 bit 1 TailableCursor, 2 SlaveOk, 3 OplogReplay,
//!                                  4 NoCursorTimeout, 5 AwaitData, 6 Exhaust, 7 Partial;
//!                                  bit 0 and bits 8-31 reserved, must be 0
//! cstring    fullCollectionName    "db.collection", "admin.$cmd" for commands
//! int32      numberToSkip
//! int32      numberToReturn
//! document   query                 the command, possibly wrapped as {$query: cmd, ...}
//! document?  returnFieldsSelector  optional projection
//! ```

use bson::RawDocumentBuf;

use crate::error::WireError;
use crate::frame::Frame;
use crate::limits::Limits;
use crate::reader::Reader;
use crate::validate::DocumentLimit;

/// OP_QUERY flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryFlags(pub i32);

impl QueryFlags {
    pub const TAILABLE_CURSOR: i32 = 1 << 1;
    pub const SLAVE_OK: i32 = 1 << 2;
    pub const OPLOG_REPLAY: i32 = 1 << 3;
    pub const NO_CURSOR_TIMEOUT: i32 = 1 << 4;
    pub const AWAIT_DATA: i32 = 1 << 5;
    pub const EXHAUST: i32 = 1 << 6;
    pub const PARTIAL: i32 = 1 << 7;
    const KNOWN: i32 = 0xFE;

    pub fn contains(self, flag: i32) -> bool {
        self.0 & flag == flag
    }
}

/// One OP_QUERY message.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    pub flags: QueryFlags,
    pub full_collection_name: String,
    pub number_to_skip: i32,
    pub number_to_return: i32,
    pub query: RawDocumentBuf,
    pub return_fields_selector: Option<RawDocumentBuf>,
}

impl OpQuery {
    pub fn parse(frame: &Frame, limits: &Limits) -> Result<OpQuery, WireError> {
        const WHAT: &str = "OP_QUERY";
        let limit =
            DocumentLimit { max_size_bytes: limits.max_command_size_bytes, max_depth: limits.max_nesting_depth };
        let mut reader = Reader::new(frame.payload());
        let flags = reader.i32(WHAT)?;
        if flags & !QueryFlags::KNOWN != 0 {
            return Err(WireError::ReservedQueryFlags { bits: flags & !QueryFlags::KNOWN });
        }
        let full_collection_name = reader.cstring(WHAT)?.to_owned();
        let number_to_skip = reader.i32(WHAT)?;
        let number_to_return = reader.i32(WHAT)?;
        let query = reader.document(limit, "OP_QUERY query")?.to_owned();
        let return_fields_selector = if reader.is_empty() {
            None
        } else {
            Some(reader.document(limit, "OP_QUERY returnFieldsSelector")?.to_owned())
        };
        if !reader.is_empty() {
            return Err(WireError::TrailingBytes { what: WHAT, count: reader.remaining() });
        }
        Ok(OpQuery {
            flags: QueryFlags(flags),
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
            return_fields_selector,
        })
    }

    /// The database of `full_collection_name` (the part before the first dot).
    pub fn database(&self) -> &str {
        self.full_collection_name.split('.').next().unwrap_or_default()
    }

    /// True if this is a command: a query on the `$cmd` pseudo-collection.
    pub fn is_command(&self) -> bool {
        self.full_collection_name.ends_with(".$cmd")
    }

    /// The command document: `query`, or `query.$query` when the driver wrapped it (with
    /// `$readPreference` beside it) as older drivers do.
    pub fn command(&self) -> Result<&bson::RawDocument, WireError> {
        match self.query.get("$query") {
            Ok(Some(bson::RawBsonRef::Document(inner))) => Ok(inner),
            Ok(_) => Ok(&self.query),
            Err(error) => Err(crate::error::invalid_bson("OP_QUERY query", error)),
        }
    }

    /// Encode as a whole message (used by tests and tools that play the client).
    pub fn encode(&self, request_id: i32) -> Result<Vec<u8>, WireError> {
        if self.full_collection_name.contains('\0') {
            return Err(WireError::InvalidCString { what: "OP_QUERY fullCollectionName" });
        }
        let mut message = crate::header::start_message(request_id, 0, crate::header::OpCode::Query);
        message.extend_from_slice(&self.flags.0.to_le_bytes());
        message.extend_from_slice(self.full_collection_name.as_bytes());
        message.push(0);
        message.extend_from_slice(&self.number_to_skip.to_le_bytes());
        message.extend_from_slice(&self.number_to_return.to_le_bytes());
        message.extend_from_slice(self.query.as_bytes());
        if let Some(selector) = &self.return_fields_selector {
            message.extend_from_slice(selector.as_bytes());
        }
        crate::header::finish_message(message)
    }
}
