//! Helpers of the BSON seeds of the fuzz corpora, shared by the crates whose targets take BSON
//! (`wire`, `document`, `query`; each includes this file with `#[path]`). Only `bson` and `std`.

use bson::{Decimal128, Document, RawDocumentBuf, Regex};

pub fn bytes(document: &Document) -> Vec<u8> {
    RawDocumentBuf::try_from(document).expect("a seed encodes").into_bytes()
}

/// A decimal128 of `coefficient` × 10^`exponent`.
pub fn decimal(coefficient: u64, exponent: i32) -> Decimal128 {
    let high = u64::try_from(exponent + 6176).expect("an exponent in range") << 49;
    Decimal128::from_bytes([coefficient.to_le_bytes(), high.to_le_bytes()].concat().try_into().expect("16 bytes"))
}

pub fn regex(pattern: &str, options: &str) -> Regex {
    let cstring = |text: &str| text.to_owned().try_into().expect("no NUL");
    Regex { pattern: cstring(pattern), options: cstring(options) }
}

pub fn named(prefix: &str, index: usize, document: &Document) -> String {
    let first = document.keys().next().map_or("empty", String::as_str).trim_start_matches('$');
    let first: String = first.chars().filter(char::is_ascii_alphanumeric).take(24).collect();
    format!("{prefix}-{index:02}-{first}")
}
