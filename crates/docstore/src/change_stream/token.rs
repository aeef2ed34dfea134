//! Resume tokens: `{_data: "<hex>"}`, opaque to clients, naming a position in the oplog.
//!
//! ```text
//! _data = hex( ts:u64 big-endian | op index:u32 big-endian | from invalidate:u8 )
//! ```
//!
//! An event's token names its oplog entry's `ts` and its place among the entry's operations
//! (a transaction's `applyOps` holds several; other entries one, index 0). A high-water-mark
//! token (a `postBatchResumeToken` with no event) names a whole `ts` (index `u32::MAX`): resuming
//! after it skips everything up to that entry. Hex order is position order.

use bson::{Document, Timestamp, doc};

use crate::error::{Error, Result};
use crate::oplog::{as_u64, from_u64};

/// A point between oplog operations: everything at or before it has been seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Position {
    pub ts: u64,
    /// The last operation seen at `ts` (`u32::MAX`: all of them).
    pub index: u32,
}

impl Position {
    /// After everything at `ts`.
    pub(crate) fn after(ts: Timestamp) -> Position {
        Position { ts: as_u64(ts), index: u32::MAX }
    }

    /// Before everything at `ts` (`startAtOperationTime`).
    pub(crate) fn before(ts: Timestamp) -> Position {
        match as_u64(ts).checked_sub(1) {
            Some(previous) => Position { ts: previous, index: u32::MAX },
            None => Position { ts: 0, index: u32::MAX },
        }
    }

    pub(crate) fn timestamp(&self) -> Timestamp {
        from_u64(self.ts)
    }

    /// Whether the operation at (`ts`, `index`) comes after this position.
    pub(crate) fn precedes(&self, ts: u64, index: u32) -> bool {
        (ts, index) > (self.ts, self.index)
    }
}

/// The token of an event (or, with `from_invalidate`, of the invalidate that follows it).
pub(crate) fn encode(position: Position, from_invalidate: bool) -> Document {
    let mut bytes = Vec::with_capacity(13);
    bytes.extend_from_slice(&position.ts.to_be_bytes());
    bytes.extend_from_slice(&position.index.to_be_bytes());
    bytes.push(u8::from(from_invalidate));
    let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
    doc! {"_data": hex}
}

/// Reads a token back: its position and whether it came from an invalidate.
pub(crate) fn decode(token: &Document) -> Result<(Position, bool)> {
    let invalid = || Error::bad_value(format!("invalid resume token: {token}"));
    let hex = token.get_str("_data").map_err(|_| invalid())?;
    if hex.len() != 26 || !hex.is_ascii() {
        return Err(invalid());
    }
    let mut bytes = [0u8; 13];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| invalid())?;
    }
    let ts = u64::from_be_bytes(bytes[..8].try_into().map_err(|_| invalid())?);
    let index = u32::from_be_bytes(bytes[8..12].try_into().map_err(|_| invalid())?);
    Ok((Position { ts, index }, bytes[12] == 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens round-trip and sort as positions do.
    #[test]
    fn tokens_round_trip_in_order() {
        let a = Position { ts: as_u64(Timestamp { time: 5, increment: 2 }), index: 0 };
        let b = Position { ts: as_u64(Timestamp { time: 5, increment: 2 }), index: 1 };
        let c = Position::after(Timestamp { time: 6, increment: 0 });
        for (position, invalidate) in [(a, false), (b, true), (c, false)] {
            assert_eq!(decode(&encode(position, invalidate)).unwrap(), (position, invalidate));
        }
        let hex = |p| encode(p, false).get_str("_data").unwrap().to_string();
        assert!(hex(a) < hex(b) && hex(b) < hex(c));
        assert!(decode(&doc! {"_data": "zz"}).is_err());
    }
}
