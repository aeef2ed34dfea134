//! The top-level elements of a stored document, read straight from its bytes.
//!
//! Why not `bson::RawDocument::iter`: an index key is extracted for every document inserted, and
//! the crate's iterator reads each field name byte by byte, checks it is UTF-8 and builds an
//! error context per element; on a bio-style document (a short `name` beside a 2 KB `bio`) that
//! was most of the key's cost. This scanner only measures elements to step over them and hands
//! out a few scalar types decoded; it answers `None` for anything it does not read (a document
//! whose lengths, terminators or names are damaged included), and the caller takes the general
//! path, which reports the error. It does not check the contents of values it steps over (a
//! string's UTF-8, say): stored documents were checked by bson when they were inserted.

use bson::spec::ElementType;

/// A top-level element: its name's bytes, its BSON type and its value's bytes.
pub struct RawElement<'a> {
    pub name: &'a [u8],
    pub kind: ElementType,
    pub value: &'a [u8],
}

/// A scalar value decoded from an element, borrowing the document's bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    Double(f64),
    String(&'a str),
    ObjectId([u8; 12]),
    Boolean(bool),
    DateTime(i64),
    Null,
    Int32(i32),
    Int64(i64),
}

/// Calls `visit` with each top-level element in order; `None` if the bytes are not a well-formed
/// document as far as this reads them (lengths, terminators, UTF-8 names and regular expressions;
/// not the contents of other values: `scalar` checks those it decodes).
pub fn for_each_element<'a>(document: &'a [u8], mut visit: impl FnMut(RawElement<'a>)) -> Option<()> {
    let declared = read_i32(document, 0)?;
    if usize::try_from(declared).ok()? != document.len() || document.last() != Some(&0) {
        return None;
    }
    let end = document.len() - 1;
    let mut at = 4;
    while at < end {
        let kind = ElementType::from(document[at])?;
        let name_start = at + 1;
        let name_len = document.get(name_start..end)?.iter().position(|&byte| byte == 0)?;
        let value_start = name_start + name_len + 1;
        let value_len = value_length(kind, document.get(value_start..end)?)?;
        let value = document.get(value_start..value_start.checked_add(value_len)?)?;
        // A field name must be UTF-8, as bson's reader (the general path) insists.
        let name = &document[name_start..name_start + name_len];
        std::str::from_utf8(name).ok()?;
        visit(RawElement { name, kind, value });
        at = value_start + value_len;
    }
    (at == end).then_some(())
}

/// The length of a value of BSON type `kind` at the start of `rest`.
fn value_length(kind: ElementType, rest: &[u8]) -> Option<usize> {
    let prefixed = |extra: usize| -> Option<usize> { usize::try_from(read_i32(rest, 0)?).ok()?.checked_add(extra) };
    // A regular expression's pattern and options: UTF-8, as bson's reader insists.
    let cstring = |from: usize| -> Option<usize> {
        let text = rest.get(from..)?;
        let len = text.iter().position(|&byte| byte == 0)?;
        std::str::from_utf8(&text[..len]).ok()?;
        Some(len + 1)
    };
    use ElementType::*;
    match kind {
        Double | DateTime | Timestamp | Int64 => Some(8),
        String | JavaScriptCode | Symbol => prefixed(4),
        EmbeddedDocument | Array | JavaScriptCodeWithScope => prefixed(0),
        Binary => prefixed(5),
        Undefined | Null | MaxKey | MinKey => Some(0),
        ObjectId => Some(12),
        Boolean => Some(1),
        RegularExpression => {
            let pattern = cstring(0)?;
            Some(pattern + cstring(pattern)?)
        }
        DbPointer => prefixed(4 + 12),
        Int32 => Some(4),
        Decimal128 => Some(16),
    }
}

/// The value of an element, for the scalar types listed in [`Scalar`]; `None` for other types
/// and for a string that is not UTF-8 or not terminated.
pub fn scalar<'a>(element: &RawElement<'a>) -> Option<Scalar<'a>> {
    let value = element.value;
    Some(match element.kind {
        ElementType::Double => Scalar::Double(f64::from_le_bytes(value.try_into().ok()?)),
        ElementType::String => {
            let (terminator, text) = value.get(4..)?.split_last()?;
            if *terminator != 0 {
                return None;
            }
            Scalar::String(std::str::from_utf8(text).ok()?)
        }
        ElementType::ObjectId => Scalar::ObjectId(value.try_into().ok()?),
        ElementType::Boolean => match value {
            [0] => Scalar::Boolean(false),
            [1] => Scalar::Boolean(true),
            _ => return None,
        },
        ElementType::DateTime => Scalar::DateTime(i64::from_le_bytes(value.try_into().ok()?)),
        ElementType::Null => Scalar::Null,
        ElementType::Int32 => Scalar::Int32(i32::from_le_bytes(value.try_into().ok()?)),
        ElementType::Int64 => Scalar::Int64(i64::from_le_bytes(value.try_into().ok()?)),
        _ => return None,
    })
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}
