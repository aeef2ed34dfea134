//! OP_MSG (opCode 2013): parse requests, build replies.
//!
//! ```text
//! MsgHeader       header            16 bytes, opCode 2013
//! uint32          flagBits          bit 0 checksumPresent, bit 1 moreToCome,
//!                                   bit 16 exhaustAllowed; other bits 0-15 must be 0
//! Section         sections[]        one or more, until the checksum or the end
//! optional uint32 checksum          CRC-32C of every preceding byte, if checksumPresent
//!
//! Section kind 0 (body):            uint8 0 | document
//! Section kind 1 (sequence):        uint8 1 | int32 size | cstring identifier | document*
//!                                   (size counts itself, the identifier and the documents)
//! ```
//!
//! Invariants of a parsed `OpMsg`: exactly one body; sequence identifiers unique; every
//! document validated against the limits (body: `max_command_size_bytes`, sequence documents:
//! `max_document_size_bytes`; both `max_nesting_depth`); the checksum, if present, verified.
//! Documents are kept as the bytes the client sent, so an inserted document is never re-encoded.

use bson::{Bson, Document, RawDocument, RawDocumentBuf};

use crate::error::{WireError, invalid_bson};
use crate::frame::Frame;
use crate::header::{OpCode, finish_message, start_message};
use crate::limits::Limits;
use crate::reader::Reader;
use crate::validate::DocumentLimit;

/// OP_MSG flagBits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MsgFlags(pub u32);

impl MsgFlags {
    pub const CHECKSUM_PRESENT: u32 = 1 << 0;
    pub const MORE_TO_COME: u32 = 1 << 1;
    pub const EXHAUST_ALLOWED: u32 = 1 << 16;
    /// Bits 0-15 are "required": a receiver must reject any it does not know.
    const REQUIRED_MASK: u32 = 0xFFFF;
    const KNOWN_REQUIRED: u32 = Self::CHECKSUM_PRESENT | Self::MORE_TO_COME;

    pub fn checksum_present(self) -> bool {
        self.0 & Self::CHECKSUM_PRESENT != 0
    }

    /// The sender will not wait for (request) or will send more (reply) messages.
    pub fn more_to_come(self) -> bool {
        self.0 & Self::MORE_TO_COME != 0
    }

    pub fn exhaust_allowed(self) -> bool {
        self.0 & Self::EXHAUST_ALLOWED != 0
    }

    fn check_required(self) -> Result<(), WireError> {
        let unknown = self.0 & Self::REQUIRED_MASK & !Self::KNOWN_REQUIRED;
        if unknown != 0 {
            return Err(WireError::UnknownRequiredFlags { bits: unknown });
        }
        Ok(())
    }
}

/// A kind-1 section: a named run of documents, e.g. `documents` of an `insert`.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSequence {
    pub identifier: String,
    pub documents: Vec<RawDocumentBuf>,
}

/// One OP_MSG message.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    pub flags: MsgFlags,
    pub body: RawDocumentBuf,
    pub sequences: Vec<DocumentSequence>,
}

impl OpMsg {
    /// A reply (or request) with only a body and no flags.
    pub fn new(body: RawDocumentBuf) -> OpMsg {
        OpMsg { flags: MsgFlags::default(), body, sequences: Vec::new() }
    }

    /// Parse an OP_MSG frame, verifying its checksum if it has one.
    pub fn parse(frame: &Frame, limits: &Limits) -> Result<OpMsg, WireError> {
        let mut reader = Reader::new(frame.payload());
        let flags = MsgFlags(reader.u32("OP_MSG flagBits")?);
        flags.check_required()?;
        let sections = if flags.checksum_present() {
            let sections_length =
                reader.remaining().checked_sub(4).ok_or(WireError::Truncated { what: "OP_MSG checksum" })?;
            verify_checksum(frame.as_bytes())?;
            reader.take(sections_length, "OP_MSG sections")?
        } else {
            reader.rest()
        };
        let (body, sequences) = parse_sections(sections, limits)?;
        Ok(OpMsg { flags, body, sequences })
    }

    /// The command as one document: the body with each sequence added as an array field named
    /// by its identifier. An identifier that is already a body field is an error.
    pub fn command_document(&self) -> Result<Document, WireError> {
        let mut command = Document::try_from(self.body.as_ref()).map_err(|error| invalid_bson("OP_MSG body", error))?;
        for sequence in &self.sequences {
            if command.contains_key(&sequence.identifier) {
                return Err(WireError::DuplicateField(sequence.identifier.clone()));
            }
            let documents = sequence
                .documents
                .iter()
                .map(|document| Document::try_from(document.as_ref()).map(Bson::Document))
                .collect::<Result<Vec<Bson>, _>>()
                .map_err(|error| invalid_bson("OP_MSG document sequence", error))?;
            command.insert(sequence.identifier.clone(), Bson::Array(documents));
        }
        Ok(command)
    }

    /// The sequence named `identifier`, if the message has one.
    pub fn sequence(&self, identifier: &str) -> Option<&DocumentSequence> {
        self.sequences.iter().find(|sequence| sequence.identifier == identifier)
    }

    /// Encode as a whole message; appends a CRC-32C if `flags.checksum_present()`.
    pub fn encode(&self, request_id: i32, response_to: i32) -> Result<Vec<u8>, WireError> {
        let mut message = start_message(request_id, response_to, OpCode::Msg);
        message.extend_from_slice(&self.flags.0.to_le_bytes());
        message.push(0);
        message.extend_from_slice(self.body.as_bytes());
        for sequence in &self.sequences {
            encode_sequence(&mut message, sequence)?;
        }
        if self.flags.checksum_present() {
            message.extend_from_slice(&[0; 4]);
            let mut message = finish_message(message)?;
            let covered = message.len().saturating_sub(4);
            let checksum = crc32c::crc32c(message.get(..covered).unwrap_or_default());
            if let Some(slot) = message.get_mut(covered..) {
                slot.copy_from_slice(&checksum.to_le_bytes());
            }
            return Ok(message);
        }
        finish_message(message)
    }
}

/// Build a reply to `request`: flags carry the checksum bit if the request had one.
pub fn reply_flags(request: MsgFlags) -> MsgFlags {
    MsgFlags(request.0 & MsgFlags::CHECKSUM_PRESENT)
}

/// Check the trailing CRC-32C against the rest of `message`.
fn verify_checksum(message: &[u8]) -> Result<(), WireError> {
    let covered = message.len().checked_sub(4).ok_or(WireError::Truncated { what: "OP_MSG checksum" })?;
    let (bytes, trailer) = message.split_at(covered);
    let declared = <[u8; 4]>::try_from(trailer)
        .map(u32::from_le_bytes)
        .map_err(|_| WireError::Truncated { what: "OP_MSG checksum" })?;
    let computed = crc32c::crc32c(bytes);
    if declared != computed {
        return Err(WireError::ChecksumMismatch { declared, computed });
    }
    Ok(())
}

/// Parse the sections region into the body and the document sequences.
fn parse_sections(sections: &[u8], limits: &Limits) -> Result<(RawDocumentBuf, Vec<DocumentSequence>), WireError> {
    let body_limit =
        DocumentLimit { max_size_bytes: limits.max_command_size_bytes, max_depth: limits.max_nesting_depth };
    let mut reader = Reader::new(sections);
    let mut body: Option<&RawDocument> = None;
    let mut sequences: Vec<DocumentSequence> = Vec::new();
    while !reader.is_empty() {
        match reader.u8("OP_MSG section kind")? {
            0 => {
                let document = reader.document(body_limit, "OP_MSG body")?;
                if body.replace(document).is_some() {
                    return Err(WireError::DuplicateBody);
                }
            }
            1 => {
                let sequence = parse_sequence(&mut reader, limits)?;
                if sequences.iter().any(|known| known.identifier == sequence.identifier) {
                    return Err(WireError::DuplicateField(sequence.identifier));
                }
                sequences.push(sequence);
            }
            kind => return Err(WireError::UnknownSectionKind(kind)),
        }
    }
    let body = body.ok_or(WireError::MissingBody)?;
    Ok((body.to_owned(), sequences))
}

/// Parse one kind-1 section after its kind byte.
fn parse_sequence(reader: &mut Reader<'_>, limits: &Limits) -> Result<DocumentSequence, WireError> {
    const WHAT: &str = "OP_MSG document sequence";
    // int32 size (counts itself) | cstring identifier | document*
    let declared = reader.i32(WHAT)?;
    let size = usize::try_from(declared)
        .ok()
        .and_then(|size| size.checked_sub(4))
        .ok_or(WireError::InvalidLength { what: WHAT, length: i64::from(declared) })?;
    let mut section = Reader::new(reader.take(size, WHAT)?);
    let identifier = section.cstring(WHAT)?.to_owned();
    let limit = DocumentLimit { max_size_bytes: limits.max_document_size_bytes, max_depth: limits.max_nesting_depth };
    let mut documents = Vec::new();
    while !section.is_empty() {
        documents.push(section.document(limit, WHAT)?.to_owned());
    }
    Ok(DocumentSequence { identifier, documents })
}

fn encode_sequence(message: &mut Vec<u8>, sequence: &DocumentSequence) -> Result<(), WireError> {
    let documents_length: usize = sequence.documents.iter().map(|d| d.as_bytes().len()).sum();
    let size = documents_length.saturating_add(sequence.identifier.len()).saturating_add(4 + 1);
    let size =
        i32::try_from(size).map_err(|_| WireError::MessageTooLarge { length: size as i64, max: i32::MAX as usize })?;
    if sequence.identifier.contains('\0') {
        return Err(WireError::InvalidCString { what: "OP_MSG document sequence" });
    }
    message.push(1);
    message.extend_from_slice(&size.to_le_bytes());
    message.extend_from_slice(sequence.identifier.as_bytes());
    message.push(0);
    for document in &sequence.documents {
        message.extend_from_slice(document.as_bytes());
    }
    Ok(())
}
