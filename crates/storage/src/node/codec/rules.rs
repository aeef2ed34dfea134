//! The rules a decoded node keeps whatever its checksums say: those `tree::verify` checks of a
//! node alone (an internal node's height and ascending pivots, a leaf's basements in key order
//! and none empty beside others) and, for a section read alone into a thin node, the bounds its
//! head gives it. A block that breaks them is `Error::Corruption`, never a node that hides keys
//! from the readers its head routes.

use super::reader::{Reader, corrupt};
use crate::error::Result;
use crate::node::NodeId;
use crate::node::basement::Basement;
use crate::node::buffer::Buffer;

/// An internal node's height, child ids and pivots, written alike by both formats: a height of
/// at least 1, and strictly ascending pivots (`tree::verify`'s rules for an internal node alone,
/// so that a block whose checksums hold but whose routing does not is corruption, not a node
/// that hides keys from readers).
pub(super) fn read_routing(r: &mut Reader<'_>) -> Result<(u32, Vec<NodeId>, Vec<Vec<u8>>)> {
    let height = r.u32()?;
    if height == 0 {
        return Err(corrupt("internal node of height 0".into()));
    }
    let count = r.count(8)?;
    if count == 0 {
        return Err(corrupt("internal node without children".into()));
    }
    let mut children = Vec::with_capacity(count);
    for _ in 0..count {
        children.push(NodeId(r.u64()?));
    }
    let mut pivots: Vec<Vec<u8>> = Vec::with_capacity(count - 1);
    for _ in 1..count {
        let pivot = r.bytes()?.to_vec();
        if pivots.last().is_some_and(|previous| previous >= &pivot) {
            return Err(corrupt("pivots out of order".into()));
        }
        pivots.push(pivot);
    }
    Ok((height, children, pivots))
}

/// A leaf's basements as `tree::verify` requires them of a leaf alone: none empty beside others,
/// and each one's keys below the next one's (each basement's own keys are checked by
/// `Basement::decode`). A leaf that broke this would route keys to the wrong basement: readers
/// would miss them and a flush would merge into the wrong place.
pub(super) fn check_basements(basements: &[Basement]) -> Result<()> {
    if basements.len() > 1 && basements.iter().any(Basement::is_empty) {
        return Err(corrupt("an empty basement beside others".into()));
    }
    for pair in basements.windows(2) {
        if let [left, right] = pair
            && left.last_key() >= right.first_key()
        {
            return Err(corrupt("basements out of key order".into()));
        }
    }
    Ok(())
}

/// A leaf's basement `index` against the keys its head routes by (`first_keys`, the first key
/// of each basement after the first): a basement after the first starts at its head key, and
/// every basement ends below the next one's. Checked for a whole node and for a section read
/// alone into a thin node, whose neighbours are not read: a section whose checksum holds but
/// whose keys lie outside its head's bounds would hide them from readers routed by the head.
pub fn check_basement_bounds(first_keys: &[Vec<u8>], index: usize, basement: &Basement) -> Result<()> {
    let lower = index.checked_sub(1).and_then(|i| first_keys.get(i)).map(Vec::as_slice);
    if lower.is_some() && basement.first_key() != lower {
        return Err(corrupt("a basement's first key differs from its head".into()));
    }
    if let (Some(upper), Some(last)) = (first_keys.get(index), basement.last_key())
        && last >= upper.as_slice()
    {
        return Err(corrupt("a basement's keys reach past the next basement's first key".into()));
    }
    Ok(())
}

/// An internal node's buffer `index` against its child's key range, `[pivots[index - 1],
/// pivots[index])`: every point message buffered for a child lies in that child's range.
pub fn check_buffer_bounds(pivots: &[Vec<u8>], index: usize, buffer: &Buffer) -> Result<()> {
    let Some((lowest, highest)) = buffer.key_span() else { return Ok(()) };
    let (lower, upper) = child_bounds(pivots, index);
    if lower.is_some_and(|lower| lowest < lower) || upper.is_some_and(|upper| highest >= upper) {
        return Err(corrupt("a buffer holds messages outside its child's key range".into()));
    }
    Ok(())
}

/// The keys child `index` owns, `[pivots[index - 1], pivots[index])`, within its node's.
pub(super) fn child_bounds(pivots: &[Vec<u8>], index: usize) -> (Option<&[u8]>, Option<&[u8]>) {
    let lower = index.checked_sub(1).and_then(|i| pivots.get(i)).map(Vec::as_slice);
    (lower, pivots.get(index).map(Vec::as_slice))
}
