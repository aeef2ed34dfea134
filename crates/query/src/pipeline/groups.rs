//! A running `$group` (also `$sortByCount`'s): it takes its input one document at a time and
//! holds only the groups.
//!
//! Groups are keyed by the `_id` expression's value under MongoDB equality (`1`, `1.0` and
//! `NumberLong(1)` are one group; a missing `_id` is null). Keys are hashed by a coarse form
//! (numbers by their double value) and confirmed with `compare_values`, so distinct values
//! that collide in the hash still form distinct groups. Groups come out in first-seen order,
//! each accumulating its documents in arrival order.
//!
//! Memory: each group counts its key, its accumulators' `approximate_bytes` and a fixed
//! overhead against `MemoryLimits::group_bytes`. Past it without a spill store the stage fails
//! with 292. With one (`allowDiskUse`), the groups already in memory stay there and keep
//! accumulating, while each document of a group first seen later is spilled as
//! `(key order bytes ++ arrival) → {k: key, a: arrival, "0": argument, ...}` (its accumulator
//! arguments evaluated now, missing ones left out). So a group lives wholly in memory or wholly
//! in the spill. At the end the spill is read in key order, then arrival order, and finished
//! one group at a time; finished spilled groups go through a second run keyed by their first
//! arrival and are merged with the groups in memory, so the output order and every
//! accumulator's input order are those of an all-in-memory run.
//! Known limit: groups in memory when spilling starts keep growing in memory (a `$push` into
//! them is not bounded).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use bson::{Bson, Document};
use document::keycodec::encode_value;

use super::group::GroupSpec;
use super::spill::{SortedDocuments, SpillStore, arrival_suffix, memory_exceeded};
use super::{Context, DocumentStream, Fold};
use crate::collation::Collation;
use crate::error::QueryError;
use crate::expr::accumulator::Accumulator;
use crate::expr::{Scope, Variables, approximate_bytes};

/// What a group costs besides its key and accumulators: its entry and its hash slot.
const GROUP_OVERHEAD_BYTES: usize = std::mem::size_of::<Group>() + 4 * std::mem::size_of::<usize>();

struct Group {
    key: Bson,
    /// The key under the statement's collation (its surrogate), when that differs from the
    /// key: groups are told apart by it, and output with the first key seen.
    identity: Option<Bson>,
    first_arrival: u64,
    accumulators: Vec<Accumulator>,
}

/// Groups in memory, keyed by value under MongoDB equality, in first-seen order.
#[derive(Default)]
struct Groups {
    entries: Vec<Group>,
    by_hash: HashMap<u64, Vec<usize>>,
    /// Approximate bytes held by `entries`.
    bytes: usize,
}

impl Groups {
    fn find(&self, identity: &Bson, hash: u64) -> Option<usize> {
        let candidates = self.by_hash.get(&hash)?;
        candidates.iter().copied().find(|&i| {
            self.entries
                .get(i)
                .is_some_and(|group| document::compare_values(group.identity(), identity) == Ordering::Equal)
        })
    }

    fn insert(&mut self, key: Bson, identity: Option<Bson>, hash: u64, arrival: u64, spec: &GroupSpec) -> usize {
        let accumulators = spec.fresh_accumulators();
        let keys_bytes = approximate_bytes(&key) + identity.as_ref().map_or(0, approximate_bytes);
        self.bytes += GROUP_OVERHEAD_BYTES + keys_bytes + accumulators_bytes(&accumulators);
        self.entries.push(Group { key, identity, first_arrival: arrival, accumulators });
        let index = self.entries.len() - 1;
        self.by_hash.entry(hash).or_default().push(index);
        index
    }

    /// Feeds one document to group `index`, keeping `bytes` up to date.
    fn accumulate(&mut self, index: usize, spec: &GroupSpec, scope: &mut Scope<'_>) -> Result<(), QueryError> {
        let Some(group) = self.entries.get_mut(index) else {
            return Err(QueryError::bad_value("$group: a group index out of range"));
        };
        let before = accumulators_bytes(&group.accumulators);
        for (accumulator_spec, accumulator) in spec.accumulators.iter().zip(group.accumulators.iter_mut()) {
            accumulator.process(&scope.eval(&accumulator_spec.expr)?, scope.vars().collation())?;
        }
        self.bytes = (self.bytes + accumulators_bytes(&group.accumulators)).saturating_sub(before);
        Ok(())
    }
}

fn accumulators_bytes(accumulators: &[Accumulator]) -> usize {
    accumulators.iter().map(Accumulator::approximate_bytes).sum()
}

/// `$group`'s state while its input streams past.
pub struct GroupFold {
    spec: GroupSpec,
    vars: Variables,
    limit_bytes: usize,
    store: Option<Arc<dyn SpillStore>>,
    groups: Groups,
    /// Documents of the groups first seen after memory ran out (`allowDiskUse`).
    spilled: Option<SortedDocuments>,
    arrivals: u64,
}

impl GroupFold {
    pub fn new(spec: GroupSpec, context: &Context<'_>) -> GroupFold {
        GroupFold {
            spec,
            vars: context.vars.clone(),
            limit_bytes: context.limits.group_bytes,
            store: context.spill.clone(),
            groups: Groups::default(),
            spilled: None,
            arrivals: 0,
        }
    }

    fn start_spilling(&mut self) -> Result<(), QueryError> {
        match &self.store {
            Some(store) => {
                self.spilled = Some(SortedDocuments::spilled("$group", store));
                Ok(())
            }
            None => Err(memory_exceeded("$group", self.limit_bytes)),
        }
    }
}

impl Fold for GroupFold {
    fn add(&mut self, document: Document) -> Result<(), QueryError> {
        let arrival = self.arrivals;
        self.arrivals += 1;
        let mut scope = Scope::new(&document, &self.vars);
        let key = scope.eval(&self.spec.id)?.unwrap_or(Bson::Null);
        let identity = identity_of(&key, self.vars.collation());
        let hash = key_hash(identity.as_ref().unwrap_or(&key));
        let index = match (self.groups.find(identity.as_ref().unwrap_or(&key), hash), &mut self.spilled) {
            (Some(index), _) => index,
            (None, Some(spilled)) => return spill_document(spilled, &self.spec, key, identity, arrival, &mut scope),
            (None, None) => self.groups.insert(key, identity, hash, arrival, &self.spec),
        };
        self.groups.accumulate(index, &self.spec, &mut scope)?;
        if self.groups.bytes > self.limit_bytes && self.spilled.is_none() {
            self.start_spilling()?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError> {
        let GroupFold { spec, groups, spilled, store, vars, .. } = *self;
        let spilled_groups = match (spilled, &store) {
            (Some(spilled), Some(store)) => Some(finish_spilled(&spec, spilled, store, vars.collation())?),
            _ => None,
        };
        let in_memory = groups
            .entries
            .into_iter()
            .map(move |group| (group.first_arrival, spec.output(group.key, group.accumulators)));
        match spilled_groups {
            None => Ok(Box::new(in_memory.map(|(_, document)| Ok(document)))),
            Some(spilled_groups) => Ok(Box::new(merge_by_arrival(in_memory, spilled_groups))),
        }
    }
}

/// A group key's surrogate under `collation`, if it differs from the key (it holds strings).
fn identity_of(key: &Bson, collation: Option<&Collation>) -> Option<Bson> {
    match collation?.surrogate(key) {
        Cow::Owned(surrogate) => Some(surrogate),
        Cow::Borrowed(_) => None,
    }
}

impl Group {
    /// What tells this group from others: its key's surrogate, or its key.
    fn identity(&self) -> &Bson {
        self.identity.as_ref().unwrap_or(&self.key)
    }
}

fn key_hash(key: &Bson) -> u64 {
    let mut hasher = DefaultHasher::new();
    coarse_hash(key, &mut hasher);
    hasher.finish()
}

/// A hash equal for values MongoDB calls equal: numbers by double value, documents and arrays
/// by their members, strings by bytes.
fn coarse_hash(value: &Bson, hasher: &mut impl Hasher) {
    if let Some(n) = crate::number::Num::from_bson(value) {
        let d = n.to_f64();
        let bits = if d == 0.0 {
            0
        } else if d.is_nan() {
            1
        } else {
            d.to_bits()
        };
        (0u8, bits).hash(hasher);
        return;
    }
    document::canonical_type_rank(value).hash(hasher);
    match value {
        Bson::String(s) | Bson::Symbol(s) => s.hash(hasher),
        Bson::Document(d) => {
            for (k, v) in d {
                k.hash(hasher);
                coarse_hash(v, hasher);
            }
        }
        Bson::Array(items) => items.iter().for_each(|item| coarse_hash(item, hasher)),
        Bson::Boolean(b) => b.hash(hasher),
        Bson::DateTime(d) => d.timestamp_millis().hash(hasher),
        Bson::ObjectId(o) => o.bytes().hash(hasher),
        _ => {}
    }
}

/// Spills a document of a group that is not in memory: only its key, arrival and accumulator
/// arguments, under its key's order bytes (equal keys, equal bytes) then its arrival.
fn spill_document(
    spilled: &mut SortedDocuments,
    spec: &GroupSpec,
    key: Bson,
    identity: Option<Bson>,
    arrival: u64,
    scope: &mut Scope<'_>,
) -> Result<(), QueryError> {
    let mut sort_key = encode_value(identity.as_ref().unwrap_or(&key));
    arrival_suffix(&mut sort_key, arrival);
    let mut record = Document::new();
    record.insert("k", key);
    record.insert("a", arrival_bson(arrival));
    for (i, accumulator) in spec.accumulators.iter().enumerate() {
        if let Some(argument) = scope.eval(&accumulator.expr)? {
            record.insert(i.to_string(), argument);
        }
    }
    spilled.push(sort_key, record)
}

fn arrival_bson(arrival: u64) -> Bson {
    Bson::Int64(i64::try_from(arrival).unwrap_or(i64::MAX))
}

fn arrival_of(record: &Document) -> u64 {
    record.get_i64("a").ok().and_then(|a| u64::try_from(a).ok()).unwrap_or(u64::MAX)
}

type Arrived = Box<dyn Iterator<Item = Result<(u64, Document), QueryError>> + Send>;

/// Finishes the spilled groups one at a time, then orders them by first arrival through a
/// second run.
fn finish_spilled(
    spec: &GroupSpec,
    spilled: SortedDocuments,
    store: &Arc<dyn SpillStore>,
    collation: Option<&Collation>,
) -> Result<Arrived, QueryError> {
    let mut by_arrival = SortedDocuments::spilled("$group", store);
    let mut current: Option<Group> = None;
    for record in spilled.into_sorted()? {
        let mut record = record?;
        let key = record.remove("k").unwrap_or(Bson::Null);
        let identity = identity_of(&key, collation);
        let same_group = |group: &Group| {
            document::compare_values(group.identity(), identity.as_ref().unwrap_or(&key)) == Ordering::Equal
        };
        if !current.as_ref().is_some_and(same_group) {
            if let Some(done) = current.take() {
                push_finished(&mut by_arrival, spec, done)?;
            }
            let first_arrival = arrival_of(&record);
            current = Some(Group { key, identity, first_arrival, accumulators: spec.fresh_accumulators() });
        }
        if let Some(group) = current.as_mut() {
            for (i, accumulator) in group.accumulators.iter_mut().enumerate() {
                accumulator.process(&record.get(i.to_string()).cloned(), collation)?;
            }
        }
    }
    if let Some(done) = current {
        push_finished(&mut by_arrival, spec, done)?;
    }
    let finished = by_arrival.into_sorted()?;
    Ok(Box::new(finished.map(|record| {
        let mut record = record?;
        match record.remove("g") {
            Some(Bson::Document(output)) => Ok((arrival_of(&record), output)),
            _ => Err(QueryError::bad_value("$group: a spilled group lost its output")),
        }
    })))
}

fn push_finished(by_arrival: &mut SortedDocuments, spec: &GroupSpec, group: Group) -> Result<(), QueryError> {
    let mut record = Document::new();
    record.insert("a", arrival_bson(group.first_arrival));
    record.insert("g", spec.output(group.key, group.accumulators));
    by_arrival.push(group.first_arrival.to_be_bytes().to_vec(), record)
}

/// The groups of memory and of the spill, both in first-arrival order, merged.
fn merge_by_arrival(
    in_memory: impl Iterator<Item = (u64, Document)> + Send + 'static,
    spilled: Arrived,
) -> impl Iterator<Item = Result<Document, QueryError>> + Send + 'static {
    let mut in_memory = in_memory.peekable();
    let mut spilled = spilled.peekable();
    std::iter::from_fn(move || {
        let from_memory = match (in_memory.peek(), spilled.peek()) {
            (None, None) => return None,
            (Some((memory_arrival, _)), Some(Ok((spilled_arrival, _)))) => memory_arrival < spilled_arrival,
            (Some(_), None) => true,
            (_, Some(_)) => false,
        };
        if from_memory {
            in_memory.next().map(|(_, document)| Ok(document))
        } else {
            spilled.next().map(|item| item.map(|(_, document)| document))
        }
    })
}
