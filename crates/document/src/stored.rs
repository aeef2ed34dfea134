//! The rules every stored document keeps, whatever wrote it (an insert, an update, an upsert,
//! `$out`, `$merge`): at most 16 MiB (MongoDB's `maxBsonObjectSize`) and at most 100 levels of
//! nesting (mongod's limit for stored documents; the wire allows 200 for command envelopes).

use bson::raw::{RawBsonRef, RawDocument, RawIter};

/// The largest stored document, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The deepest nesting of documents and arrays in a stored document (the top level is 1).
pub const MAX_DEPTH: usize = 100;

/// How a document breaks the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    TooLarge {
        bytes: usize,
    },
    TooDeep,
    /// Bytes that are not a well-formed document.
    Malformed(String),
}

/// Checks size, then nesting (with an explicit stack: a hostile depth cannot overflow ours).
pub fn check(document: &RawDocument) -> Result<(), Violation> {
    let bytes = document.as_bytes().len();
    if bytes > MAX_DOCUMENT_BYTES {
        return Err(Violation::TooLarge { bytes });
    }
    let mut stack: Vec<RawIter<'_>> = vec![document.iter_elements()];
    while let Some(top) = stack.last_mut() {
        let Some(element) = top.next() else {
            stack.pop();
            continue;
        };
        let value = element.and_then(|element| element.value()).map_err(|e| Violation::Malformed(e.to_string()))?;
        let child = match value {
            RawBsonRef::Document(child) => child,
            RawBsonRef::Array(array) => {
                RawDocument::from_bytes(array.as_bytes()).map_err(|e| Violation::Malformed(e.to_string()))?
            }
            RawBsonRef::JavaScriptCodeWithScope(code) => code.scope,
            _ => continue,
        };
        if stack.len() >= MAX_DEPTH {
            return Err(Violation::TooDeep);
        }
        stack.push(child.iter_elements());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawDocumentBuf, doc};

    fn nested(levels: usize) -> RawDocumentBuf {
        let mut document = doc! { "leaf": 1 };
        for _ in 1..levels {
            document = doc! { "a": document };
        }
        RawDocumentBuf::try_from(&document).unwrap()
    }

    #[test]
    fn depth_and_size_limits() {
        assert_eq!(check(&nested(MAX_DEPTH)), Ok(()));
        assert_eq!(check(&nested(MAX_DEPTH + 1)), Err(Violation::TooDeep));
        let arrays = RawDocumentBuf::try_from(&doc! { "a": [[[1]]] }).unwrap();
        assert_eq!(check(&arrays), Ok(()));
        let big = RawDocumentBuf::try_from(&doc! { "s": "x".repeat(MAX_DOCUMENT_BYTES) }).unwrap();
        assert!(matches!(check(&big), Err(Violation::TooLarge { .. })));
        let fits = RawDocumentBuf::try_from(&doc! { "s": "x".repeat(MAX_DOCUMENT_BYTES - 100) }).unwrap();
        assert_eq!(check(&fits), Ok(()));
    }
}
