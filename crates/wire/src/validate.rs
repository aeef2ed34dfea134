//! BSON validation of untrusted documents: size, length consistency, every element, depth.
//!
//! `bson::RawDocument::from_bytes` checks only the outer length and the trailing NUL. Here each
//! element of every nested document, array and code-with-scope scope is parsed (which checks
//! element lengths, types and UTF-8), with an explicit stack rather than recursion, so a deep
//! document costs heap, not call stack, and the depth limit stops it early.
//!
//! Depth counts the top-level document as 1; each nested document or array adds 1.

use bson::RawDocument;
use bson::raw::{RawBsonRef, RawIter};

use crate::error::{WireError, invalid_bson};

/// The bounds one document is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentLimit {
    pub max_size_bytes: usize,
    pub max_depth: usize,
}

/// Validate `bytes` as exactly one BSON document within `limit`, and borrow it as a
/// `RawDocument`. `what` names the document's place in the message for the error.
pub fn validate_document<'a>(
    bytes: &'a [u8],
    limit: DocumentLimit,
    what: &'static str,
) -> Result<&'a RawDocument, WireError> {
    if bytes.len() > limit.max_size_bytes {
        return Err(WireError::DocumentTooLarge { size: bytes.len(), max: limit.max_size_bytes });
    }
    let document = RawDocument::from_bytes(bytes).map_err(|error| invalid_bson(what, error))?;
    walk(document, limit.max_depth, what)?;
    Ok(document)
}

/// Parse every element of `document` and its children, failing past `max_depth` levels.
fn walk(document: &RawDocument, max_depth: usize, what: &'static str) -> Result<(), WireError> {
    if max_depth == 0 {
        return Err(WireError::NestingTooDeep { max: max_depth });
    }
    let mut stack: Vec<RawIter<'_>> = vec![document.iter_elements()];
    while let Some(top) = stack.last_mut() {
        let Some(element) = top.next() else {
            stack.pop();
            continue;
        };
        let value = element.and_then(|element| element.value()).map_err(|error| invalid_bson(what, error))?;
        if let Some(child) = child_document(value, what)? {
            if stack.len() >= max_depth {
                return Err(WireError::NestingTooDeep { max: max_depth });
            }
            stack.push(child.iter_elements());
        }
    }
    Ok(())
}

/// The document nested in `value`, if it holds one.
fn child_document<'a>(value: RawBsonRef<'a>, what: &'static str) -> Result<Option<&'a RawDocument>, WireError> {
    Ok(match value {
        RawBsonRef::Document(document) => Some(document),
        RawBsonRef::Array(array) => {
            Some(RawDocument::from_bytes(array.as_bytes()).map_err(|error| invalid_bson(what, error))?)
        }
        RawBsonRef::JavaScriptCodeWithScope(code) => Some(code.scope),
        _ => None,
    })
}
