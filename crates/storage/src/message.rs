//! Messages: the writes the Bε-tree buffers, and how a key's history resolves to a value.
//!
//! Every write is a message stamped with a sequence number (`Seq`). Messages for one key are
//! applied in sequence order; a reader at snapshot `S` applies those with `seq <= S` only. A key's
//! history, gathered from the leaf and from every buffer on the root-to-leaf path, is a list of
//! [`Event`]s; [`resolve`] folds it into the value the reader sees.

use std::sync::Arc;

/// Commit order. Every message carries one; later commits have larger ones.
pub type Seq = u64;

/// What a reader sees at the newest possible snapshot.
pub const SEQ_MAX: Seq = u64::MAX;

/// The effect of one message on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The key now holds this value.
    Put(Vec<u8>),
    /// The key is now absent (from a point delete or a range delete covering it).
    Delete,
    /// A blind update: the engine's [`UpdateFn`] combines this operand with the older value.
    Update(Vec<u8>),
}

impl Event {
    /// Puts and deletes decide the value without looking at what came before.
    pub fn is_base(&self) -> bool {
        !matches!(self, Event::Update(_))
    }

    pub fn size_bytes(&self) -> usize {
        match self {
            Event::Put(v) | Event::Update(v) => v.len(),
            Event::Delete => 0,
        }
    }
}

/// Combines a blind update's operand with the key's older value (`None`: absent) into the new
/// value (`None`: the key becomes absent). Must be deterministic: it runs when a reader resolves
/// the key and again when the message reaches a leaf.
pub type UpdateFn = Arc<dyn Fn(&[u8], Option<&[u8]>, &[u8]) -> Option<Vec<u8>> + Send + Sync>;

/// The default update: the value is a little-endian i64 counter and the operand a little-endian
/// i64 delta; an absent value counts as 0. An operand or value that is not 8 bytes leaves the
/// value as it was, so a misused update never invents data.
pub fn counter_update() -> UpdateFn {
    Arc::new(|_key, old, operand| {
        let delta = read_i64(operand);
        let current = match old {
            None => Some(0),
            Some(bytes) => read_i64(bytes),
        };
        match (current, delta) {
            (Some(c), Some(d)) => Some(c.wrapping_add(d).to_le_bytes().to_vec()),
            _ => old.map(<[u8]>::to_vec),
        }
    })
}

fn read_i64(bytes: &[u8]) -> Option<i64> {
    let array: [u8; 8] = bytes.try_into().ok()?;
    Some(i64::from_le_bytes(array))
}

/// Folds a key's events (any order) into its value as of `snapshot`: events newer than the
/// snapshot are ignored, the rest are applied in sequence order.
pub fn resolve(key: &[u8], events: &mut Vec<(Seq, Event)>, snapshot: Seq, update: &UpdateFn) -> Option<Vec<u8>> {
    events.retain(|(seq, _)| *seq <= snapshot);
    events.sort_by_key(|(seq, _)| *seq);
    let start = events.iter().rposition(|(_, e)| e.is_base()).unwrap_or(0);
    let mut value: Option<Vec<u8>> = None;
    for (_, event) in events.drain(..).skip(start) {
        value = match event {
            Event::Put(v) => Some(v),
            Event::Delete => None,
            Event::Update(operand) => update(key, value.as_deref(), &operand),
        };
    }
    value
}

/// Drops the events no reader can need: everything older than the newest base event (put or
/// delete) at or below `horizon`, the oldest snapshot any reader may hold. `events` must be in
/// ascending sequence order; it stays so.
pub fn prune(events: &mut Vec<(Seq, Event)>, horizon: Seq) {
    let prefix = prunable_prefix(events, horizon);
    events.drain(..prefix);
}

/// How many events at the front of `events` `prune` drops.
pub fn prunable_prefix(events: &[(Seq, Event)], horizon: Seq) -> usize {
    events.iter().rposition(|(seq, e)| *seq <= horizon && e.is_base()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    //! Goal: message application follows sequence order and snapshot bounds.
    use super::*;

    fn counter(n: i64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    #[test]
    fn resolve_applies_in_sequence_order_whatever_the_input_order() {
        let update = counter_update();
        let mut events =
            vec![(3, Event::Update(counter(5))), (1, Event::Put(counter(10))), (2, Event::Update(counter(1)))];
        assert_eq!(resolve(b"k", &mut events, SEQ_MAX, &update), Some(counter(16)));
    }

    #[test]
    fn resolve_ignores_events_newer_than_the_snapshot() {
        let update = counter_update();
        let mut events = vec![(1, Event::Put(b"a".to_vec())), (5, Event::Delete)];
        assert_eq!(resolve(b"k", &mut events, 4, &update), Some(b"a".to_vec()));
        let mut events = vec![(1, Event::Put(b"a".to_vec())), (5, Event::Delete)];
        assert_eq!(resolve(b"k", &mut events, 5, &update), None);
    }

    #[test]
    fn update_on_absent_key_starts_from_zero_and_delete_resets() {
        let update = counter_update();
        let mut events = vec![(1, Event::Update(counter(2))), (2, Event::Delete), (3, Event::Update(counter(7)))];
        assert_eq!(resolve(b"k", &mut events, SEQ_MAX, &update), Some(counter(7)));
    }

    #[test]
    fn counter_update_leaves_malformed_values_alone() {
        let update = counter_update();
        assert_eq!(update(b"k", Some(b"abc"), &counter(1)), Some(b"abc".to_vec()));
        assert_eq!(update(b"k", None, b"xy"), None);
    }

    #[test]
    fn prune_keeps_what_the_oldest_snapshot_needs() {
        let mut events = vec![
            (1, Event::Put(b"a".to_vec())),
            (2, Event::Put(b"b".to_vec())),
            (3, Event::Update(b"c".to_vec())),
            (6, Event::Put(b"d".to_vec())),
        ];
        prune(&mut events, 4);
        let seqs: Vec<Seq> = events.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![2, 3, 6]);
        prune(&mut events, 10);
        assert_eq!(events, vec![(6, Event::Put(b"d".to_vec()))]);
    }
}
