//! Builders shared by the wire integration tests.
#![allow(dead_code)]

use bson::{Document, RawDocumentBuf, doc};
use wire::{DocumentSequence, MsgFlags, OpMsg};

pub fn raw(document: Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&document).expect("test document encodes")
}

/// `{insert: "users", $db: "test"}` with a `documents` sequence of `count` documents.
pub fn insert_msg(count: usize, flags: u32) -> OpMsg {
    let documents = (0..count).map(|i| raw(doc! { "_id": i as i32, "name": format!("user{i}") })).collect();
    OpMsg {
        flags: MsgFlags(flags),
        body: raw(doc! { "insert": "users", "$db": "test" }),
        sequences: vec![DocumentSequence { identifier: "documents".to_owned(), documents }],
    }
}

/// A document nested `depth` levels deep (the top level counts as 1).
pub fn nested(depth: usize) -> Document {
    let mut document = doc! { "leaf": 1 };
    for _ in 1..depth {
        document = doc! { "a": document };
    }
    document
}

/// Set the header's length field of an encoded message.
pub fn set_length(message: &mut [u8], length: i32) {
    message[..4].copy_from_slice(&length.to_le_bytes());
}

/// Recompute the header's length field from the buffer's size.
pub fn fix_length(message: &mut [u8]) {
    let length = message.len() as i32;
    set_length(message, length);
}
