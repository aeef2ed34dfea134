//! The query planner: a collection scan, one index scan, or a union of index scans for `$or`.
//!
//! Candidates are the `_id` index (the collection tree itself) and every ready secondary index.
//! For each, [`Candidate::new`] walks the key pattern: fields with equality (or `$in`) predicates
//! extend a set of exact key prefixes; the first field with a range predicate bounds the last
//! component; the first field without predicates ends the bounds. A candidate is scored by
//! (equality fields, whether a range bounds it, whether it yields the requested sort order,
//! uniqueness, fewer fields) and the best wins; with none bounded or sorting, a collection scan.
//! There is no trial execution: the score is the whole cost model. Scoring needs each field's
//! intervals only; the encoded keys are built for the winner alone (`Candidate::into_scan`).
//!
//! Eligibility: a sparse index only when the bounds exclude `null` (else documents without the
//! field would be missed); a partial index only when every top-level field of its filter appears
//! with the same value in the query's filter (a syntactic stand-in for implication); a multikey
//! index never intersects two predicates on one field and never provides a sort. A `$or` at the
//! top becomes a union of index scans when every branch has a bounded index (results deduplicated
//! by `_id`). A hint forces its index, with bounds from the filter or the whole index, even
//! sparse or partial ones (as MongoDB does). Every plan re-applies the whole filter to each
//! document, so bounds only need to be supersets.
//!
//! Collation: an index whose collation is the query's (both simple, or the same spec) gets
//! bounds from every predicate, strings turned into the collation's surrogates as its keys
//! hold them, and may give the sort order. Any other index gets bounds only from predicates
//! without strings (numbers order alike under every collation) and never gives the order.
//!
//! A wildcard index is a candidate once per queried path it covers (`IndexChoice::wildcard`):
//! its keys for that path are those starting with the path, so the path is a fixed key prefix
//! and the path's predicates bound the value; scalar predicates only, never `null`, no sort.

use std::borrow::Cow;
use std::collections::HashMap;

use bson::{Bson, Document, doc};
use document::keycodec::Direction;
use document::path::FieldPath;
use query::collation::Collation;
use query::filter::{Filter, InItem, MatchExpr, Predicate};
use query::sort::SortSpec;

use crate::catalog::Descriptor;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::read::bounds::{
    IndexBounds, Interval, KeyRange, combine, extend_prefix, hashed_intervals, key_range, predicate_intervals,
};

/// How many exact prefixes `$in` lists may multiply into before the rest becomes a range.
const MAX_POINT_PREFIXES: usize = 4096;

/// A hint: an index by name or key pattern, or `$natural` (a collection scan).
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    Name(String),
    KeyPattern(Document),
    Natural { backward: bool },
}

impl Hint {
    /// Reads the `hint` argument of find/count/update/delete/aggregate.
    pub fn from_bson(value: &Bson) -> Result<Hint> {
        match value {
            Bson::String(name) => Ok(Hint::Name(name.clone())),
            Bson::Document(pattern) => match pattern.get("$natural") {
                Some(direction) => Ok(Hint::Natural {
                    backward: matches!(direction, Bson::Int32(-1) | Bson::Int64(-1))
                        || *direction == Bson::Double(-1.0),
                }),
                None => Ok(Hint::KeyPattern(pattern.clone())),
            },
            _ => Err(Error::bad_value("hint must be a string or an object")),
        }
    }
}

/// A scan of one index's key ranges.
#[derive(Debug, Clone)]
pub(crate) struct IndexScan {
    /// `None`: the `_id` index (the collection tree).
    pub index: Option<String>,
    pub name: String,
    pub key_pattern: Document,
    pub ranges: Vec<KeyRange>,
    /// indexBounds for explain.
    pub bounds: IndexBounds,
    pub backward: bool,
    pub multikey: bool,
    pub sparse: bool,
    pub partial: bool,
    pub unique: bool,
}

/// Where documents come from.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "one plan per query: boxing the scan would save nothing worth an allocation"
)]
pub(crate) enum Access {
    CollectionScan { backward: bool },
    IndexScan(IndexScan),
    Or(Vec<IndexScan>),
}

/// The chosen plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub access: Access,
    /// Whether the access already yields the requested sort order (no SORT stage).
    pub sorted: bool,
    /// Whether the index entries answer the query without fetching documents (set by the find
    /// that runs the plan, which knows its snapshot: see `read::covered`).
    pub covered: bool,
}

/// An index the planner may choose and how it would scan it. Its keys are built only if it
/// wins (`into_scan`): every branch of an `$or` weighs every index, and building each one's
/// keys, bounds and names was most of what planning cost an iibench query.
struct Candidate<'c> {
    choice: IndexChoice<'c>,
    /// What each index field's predicates do to the scan, in the index's order.
    fields: Vec<FieldBounds>,
    sorted: bool,
    backward: bool,
    null_excluded: bool,
}

/// What one index field's intervals (in the order the scan reads them) do to a scan.
enum FieldBounds {
    /// Exact values: each extends every key prefix so far.
    Points(Vec<Interval>),
    /// The first range: it bounds the last component of the keys.
    Range(Vec<Interval>),
    /// No predicate bounds it: the keys end before it (the first such field), or after an
    /// earlier range.
    Unbounded,
}

/// An index the planner may choose: the `_id` index (`secondary: None`) or a ready secondary
/// index, with its fields and key pattern.
struct IndexChoice<'c> {
    secondary: Option<&'c Index>,
    /// Borrowed from the index: a query plans against every index, and copying each one's
    /// fields and key pattern was a fortieth of an iibench query's CPU beyond memory.
    fields: Cow<'c, [(FieldPath, Direction)]>,
    key_pattern: Cow<'c, Document>,
    /// The position of a `"hashed"` field: equality only, no order.
    hashed: Option<usize>,
    /// The index's collation, when it is the query's (strings in bounds become surrogates).
    collation: Option<&'c Collation>,
    /// Whether the index's collation is the query's (else strings give no bounds, no order).
    same_collation: bool,
    /// A wildcard index's candidate for one path: the encoded path every key starts with.
    key_prefix: Option<Vec<u8>>,
}

impl<'c> IndexChoice<'c> {
    /// The `_id` index: its keys are binary.
    fn id(query: Option<&Collation>) -> Result<IndexChoice<'c>> {
        Ok(IndexChoice {
            secondary: None,
            fields: Cow::Owned(vec![(FieldPath::parse("_id")?, Direction::Ascending)]),
            key_pattern: Cow::Owned(doc! {"_id": 1}),
            hashed: None,
            collation: None,
            same_collation: query.is_none(),
            key_prefix: None,
        })
    }

    fn secondary(index: &'c Index, query: Option<&Collation>) -> IndexChoice<'c> {
        IndexChoice {
            secondary: Some(index),
            fields: Cow::Borrowed(index.spec.fields()),
            key_pattern: Cow::Borrowed(&index.key_pattern),
            hashed: index.spec.hashed(),
            collation: index.collation.as_ref(),
            same_collation: index.collation.as_ref() == query,
            key_prefix: None,
        }
    }

    /// A wildcard index read for one path: keys `(path, value)` with the path fixed.
    fn wildcard(index: &'c Index, path: &str, query: Option<&Collation>) -> Result<IndexChoice<'c>> {
        let direction = index.spec.fields().get(1).map_or(Direction::Ascending, |(_, direction)| *direction);
        Ok(IndexChoice {
            fields: Cow::Owned(vec![(FieldPath::parse(path)?, direction)]),
            key_prefix: Some(extend_prefix(&[], &Bson::String(path.to_owned()), Direction::Ascending)),
            ..IndexChoice::secondary(index, query)
        })
    }

    fn multikey(&self) -> bool {
        self.key_prefix.is_some() || self.secondary.is_some_and(|i| i.meta.multikey)
    }
}

/// Chooses a plan for a filter (and sort) over a collection.
pub(crate) fn plan(
    collection: &Descriptor,
    filter: &Filter,
    filter_document: &Document,
    sort: Option<&SortSpec>,
    hint: Option<&Hint>,
) -> Result<Plan> {
    if let Some(hint) = hint {
        return plan_hinted(collection, filter, sort, hint);
    }
    let collation = filter.collation();
    let sort = sort.filter(|s| !s.is_empty());
    if let MatchExpr::Or(branches) = filter.root()
        && let Some(scans) = plan_or(collection, branches, filter_document, collation)?
    {
        return Ok(Plan { access: Access::Or(scans), sorted: sort.is_none(), covered: false });
    }
    let predicates = top_level_predicates(filter.root());
    match best_candidate(collection, &predicates, filter_document, sort, true, collation)? {
        Some(candidate) => Ok(Plan {
            sorted: candidate.sorted || sort.is_none(),
            access: Access::IndexScan(candidate.into_scan()),
            covered: false,
        }),
        None => Ok(Plan { access: Access::CollectionScan { backward: false }, sorted: sort.is_none(), covered: false }),
    }
}

/// One scan per branch of an `$or`, or `None` if a branch has no useful index. When one index
/// serves every branch as well as each branch's own best (ties on everything but the index's
/// length), every branch scans it: the union's entries then come from one index, and a
/// projection of its fields is answered from the index alone (`read::covered`).
fn plan_or(
    collection: &Descriptor,
    branches: &[MatchExpr],
    filter_document: &Document,
    collation: Option<&Collation>,
) -> Result<Option<Vec<IndexScan>>> {
    let mut per_branch = Vec::with_capacity(branches.len());
    for branch in branches {
        let predicates = top_level_predicates(branch);
        let candidates = scored_candidates(collection, &predicates, filter_document, None, false, collation)?;
        if candidates.is_empty() {
            return Ok(None);
        }
        per_branch.push(candidates);
    }
    if let Some(shared) = shared_index(&per_branch) {
        let scans = per_branch
            .into_iter()
            .filter_map(|candidates| {
                candidates.into_iter().find(|(candidate, _)| candidate.index_name() == Some(shared.as_str()))
            })
            .map(|(candidate, _)| candidate.into_scan())
            .collect();
        return Ok(Some(scans));
    }
    let scans = per_branch.into_iter().filter_map(best_of).map(Candidate::into_scan).collect();
    Ok(Some(scans))
}

/// A secondary index that is, for every branch, as good as that branch's best.
fn shared_index(per_branch: &[Vec<(Candidate<'_>, Score)>]) -> Option<String> {
    // Per branch, the indexes that tie its best on everything but length.
    let best_indexes: Vec<Vec<&str>> = per_branch
        .iter()
        .map(|candidates| {
            let best = candidates.iter().map(|(_, score)| score.ignoring_length()).max();
            candidates
                .iter()
                .filter(|(_, score)| Some(score.ignoring_length()) == best)
                .filter_map(|(candidate, _)| candidate.index_name())
                .collect()
        })
        .collect();
    let (first, rest) = best_indexes.split_first()?;
    first.iter().find(|name| rest.iter().all(|names| names.contains(name))).map(|name| (*name).to_owned())
}

/// How a candidate ranks: equality fields, then a range, then a useful order, then uniqueness,
/// then the shorter index.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Score(usize, bool, bool, bool, std::cmp::Reverse<usize>);

impl Score {
    fn ignoring_length(&self) -> (usize, bool, bool, bool) {
        (self.0, self.1, self.2, self.3)
    }
}

/// The best-scoring candidate; the first of equal scores.
fn best_of<'c>(candidates: Vec<(Candidate<'c>, Score)>) -> Option<Candidate<'c>> {
    let best = candidates.into_iter().reduce(|best, next| if next.1 > best.1 { next } else { best });
    best.map(|(candidate, _)| candidate)
}

fn best_candidate<'c>(
    collection: &'c Descriptor,
    predicates: &HashMap<String, Vec<&Predicate>>,
    filter_document: &Document,
    sort: Option<&SortSpec>,
    sort_counts: bool,
    collation: Option<&'c Collation>,
) -> Result<Option<Candidate<'c>>> {
    Ok(best_of(scored_candidates(collection, predicates, filter_document, sort, sort_counts, collation)?))
}

/// Every useful, eligible scan of the `_id` index and the ready indexes, with its score, in
/// the order the indexes are listed (the first of equal scores wins).
fn scored_candidates<'c>(
    collection: &'c Descriptor,
    predicates: &HashMap<String, Vec<&Predicate>>,
    filter_document: &Document,
    sort: Option<&SortSpec>,
    sort_counts: bool,
    collation: Option<&'c Collation>,
) -> Result<Vec<(Candidate<'c>, Score)>> {
    let mut choices = vec![IndexChoice::id(collation)?];
    // A text index answers `$text` only (`read::text`), a geo index `$near` (`read::geo`).
    let secondary = collection.ready_indexes().filter(|index| !index.is_special() && index.wildcard.is_none());
    choices.extend(secondary.map(|index| IndexChoice::secondary(index, collation)));
    for index in collection.ready_indexes() {
        let Some(scope) = &index.wildcard else { continue };
        for path in predicates.keys().filter(|path| scope.covers(path)) {
            choices.push(IndexChoice::wildcard(index, path, collation)?);
        }
    }
    let mut scored = Vec::new();
    for choice in choices {
        let candidate = Candidate::new(choice, predicates, sort);
        let (equality_fields, ranged) = (candidate.equality_fields(), candidate.ranged());
        let useful = equality_fields > 0 || ranged || (sort_counts && candidate.sorted);
        if !useful || !eligible(&candidate, filter_document) {
            continue;
        }
        let choice = &candidate.choice;
        let unique = choice.secondary.is_none_or(Index::is_unique);
        let score = Score(
            equality_fields,
            ranged,
            candidate.sorted && sort_counts,
            unique,
            std::cmp::Reverse(choice.fields.len()),
        );
        scored.push((candidate, score));
    }
    Ok(scored)
}

fn eligible(candidate: &Candidate<'_>, filter_document: &Document) -> bool {
    let choice = &candidate.choice;
    let Some(index) = choice.secondary else {
        return true;
    };
    // A wildcard index has no key for a missing field, as a sparse one.
    if (index.sparse || choice.key_prefix.is_some()) && !candidate.null_excluded {
        return false;
    }
    match &index.partial {
        Some((partial, _)) => partial.iter().all(|(field, value)| filter_document.get(field) == Some(value)),
        None => true,
    }
}

fn plan_hinted(collection: &Descriptor, filter: &Filter, sort: Option<&SortSpec>, hint: &Hint) -> Result<Plan> {
    let sort = sort.filter(|s| !s.is_empty());
    let collation = filter.collation();
    let choice = match hint {
        Hint::Natural { backward } => {
            return Ok(Plan {
                access: Access::CollectionScan { backward: *backward },
                sorted: sort.is_none(),
                covered: false,
            });
        }
        Hint::Name(name) if name == "_id_" => IndexChoice::id(collation)?,
        Hint::KeyPattern(pattern) if crate::index::spec::same_key_pattern(pattern, &doc! {"_id": 1}) => {
            IndexChoice::id(collation)?
        }
        Hint::Name(name) => collection
            .ready_indexes()
            .find(|i| &i.name == name)
            .map(|index| IndexChoice::secondary(index, collation))
            .ok_or_else(bad_hint)?,
        Hint::KeyPattern(pattern) => collection
            .ready_indexes()
            .find(|i| crate::index::spec::same_key_pattern(&i.key_pattern, pattern))
            .map(|index| IndexChoice::secondary(index, collation))
            .ok_or_else(bad_hint)?,
    };
    let predicates = top_level_predicates(filter.root());
    let candidate = Candidate::new(choice, &predicates, sort);
    let sorted = candidate.sorted || sort.is_none();
    Ok(Plan { sorted, access: Access::IndexScan(candidate.into_scan()), covered: false })
}

fn bad_hint() -> Error {
    Error::BadValue("hint provided does not correspond to an existing index".into())
}

/// The predicates of the filter's top-level conjunction, by path.
fn top_level_predicates(root: &MatchExpr) -> HashMap<String, Vec<&Predicate>> {
    let mut out: HashMap<String, Vec<&Predicate>> = HashMap::new();
    let mut stack = vec![root];
    while let Some(expr) = stack.pop() {
        match expr {
            MatchExpr::And(children) => stack.extend(children.iter()),
            MatchExpr::Path { path, predicate } => out.entry(path.as_str().to_string()).or_default().push(predicate),
            _ => {}
        }
    }
    out
}

impl<'c> Candidate<'c> {
    /// How `choice` would scan for the predicates (see the module header), without its keys.
    fn new(choice: IndexChoice<'c>, predicates: &HashMap<String, Vec<&Predicate>>, sort: Option<&SortSpec>) -> Self {
        let multikey = choice.multikey();
        let mut fields = Vec::with_capacity(choice.fields.len());
        let (mut prefixes, mut bounded) = (1usize, false);
        let (mut single_points, mut null_excluded) = (0, false);
        for (position, (path, _)) in choice.fields.iter().enumerate() {
            let intervals =
                if bounded { None } else { field_intervals(&choice, predicates.get(path.as_str()), multikey) };
            null_excluded |= intervals.as_ref().is_some_and(|list| !list.iter().any(contains_null));
            let intervals =
                if choice.hashed == Some(position) { intervals.and_then(hashed_intervals) } else { intervals };
            let Some(intervals) = intervals else {
                fields.push(FieldBounds::Unbounded);
                bounded = true;
                continue;
            };
            let all_points = intervals.iter().all(Interval::is_point);
            if all_points && prefixes * intervals.len().max(1) <= MAX_POINT_PREFIXES {
                if intervals.len() == 1 && single_points == position {
                    single_points += 1;
                }
                prefixes *= intervals.len();
                fields.push(FieldBounds::Points(intervals));
            } else {
                bounded = true;
                fields.push(FieldBounds::Range(intervals));
            }
        }
        let sort_direction =
            sort.filter(|_| choice.same_collation).and_then(|s| sort_direction(&choice, s, single_points));
        let sorted = sort_direction.is_some() && !multikey;
        let backward = sorted && sort_direction == Some(true);
        Candidate { choice, fields, sorted, backward, null_excluded }
    }

    /// How many leading fields the scan fixes to exact values.
    fn equality_fields(&self) -> usize {
        self.fields.iter().filter(|field| matches!(field, FieldBounds::Points(_))).count()
    }

    /// Whether a field bounds the scan to a range.
    fn ranged(&self) -> bool {
        self.fields.iter().any(|field| matches!(field, FieldBounds::Range(_)))
    }

    /// The secondary index's name; `None` for the `_id` index.
    fn index_name(&self) -> Option<&str> {
        self.choice.secondary.map(|index| index.name.as_str())
    }

    /// The scan, its keys built: exact prefixes from the point fields, then the range (or the
    /// whole of the next field) under each.
    fn into_scan(self) -> IndexScan {
        let Candidate { choice, fields, backward, .. } = self;
        let mut prefixes: Vec<Vec<u8>> = vec![choice.key_prefix.clone().unwrap_or_default()];
        let mut ranges: Option<Vec<KeyRange>> = None;
        let mut bounds = IndexBounds::default();
        for ((path, direction), field) in choice.fields.iter().zip(fields) {
            let in_scan_order = |mut intervals: Vec<Interval>| {
                if *direction == Direction::Descending {
                    intervals.reverse();
                }
                intervals
            };
            let intervals = match field {
                FieldBounds::Points(intervals) => {
                    let intervals = in_scan_order(intervals);
                    prefixes = prefixes
                        .iter()
                        .flat_map(|p| intervals.iter().map(move |i| extend_prefix(p, &i.low.0, *direction)))
                        .collect();
                    intervals
                }
                FieldBounds::Range(intervals) => {
                    let intervals = in_scan_order(intervals);
                    ranges = Some(
                        prefixes
                            .iter()
                            .flat_map(|p| intervals.iter().map(move |i| key_range(p, Some(i), *direction)))
                            .collect(),
                    );
                    intervals
                }
                FieldBounds::Unbounded => {
                    if ranges.is_none() {
                        ranges = Some(prefixes.iter().map(|p| key_range(p, None, *direction)).collect());
                    }
                    vec![Interval::full()]
                }
            };
            bounds.push(path.as_str(), *direction, intervals);
        }
        let mut ranges =
            ranges.unwrap_or_else(|| prefixes.iter().map(|p| key_range(p, None, Direction::Ascending)).collect());
        if backward {
            ranges.reverse();
        }
        let (secondary, multikey) = (choice.secondary, choice.multikey());
        IndexScan {
            index: secondary.map(|i| i.name.clone()),
            name: secondary.map_or_else(|| "_id_".to_string(), |i| i.name.clone()),
            key_pattern: choice.key_pattern.into_owned(),
            ranges,
            bounds,
            backward,
            multikey,
            sparse: secondary.is_some_and(|i| i.sparse),
            partial: secondary.is_some_and(|i| i.partial.is_some()),
            unique: secondary.is_none_or(Index::is_unique),
        }
    }
}

/// The intervals one field's predicates allow in `choice`'s keys; `None` when none bounds it.
fn field_intervals(
    choice: &IndexChoice<'_>,
    predicates: Option<&Vec<&Predicate>>,
    multikey: bool,
) -> Option<Vec<Interval>> {
    let usable = |p: &&&Predicate| {
        (choice.same_collation || !predicate_has_text(p)) && (choice.key_prefix.is_none() || scalar_only(p))
    };
    let lists = predicates.map(|ps| ps.iter().filter(usable).map(|p| predicate_intervals(p, multikey)));
    let intervals = lists.and_then(|lists| combine(lists, multikey));
    match choice.collation {
        Some(collation) => intervals.map(|list| list.into_iter().map(|i| collated(i, collation)).collect()),
        None => intervals,
    }
}

/// Whether a predicate compares with scalars only (a wildcard index has leaves, no documents or
/// arrays to find).
fn scalar_only(predicate: &Predicate) -> bool {
    let scalar = |value: &Bson| !matches!(value, Bson::Document(_) | Bson::Array(_));
    match predicate {
        Predicate::Eq(value) | Predicate::Compare(_, value) => scalar(value),
        Predicate::In(items) => items.iter().all(|item| matches!(item, InItem::Value(value) if scalar(value))),
        Predicate::And(predicates) => predicates.iter().all(scalar_only),
        _ => true,
    }
}

/// Whether a predicate compares with a string (its bounds differ between collations).
fn predicate_has_text(predicate: &Predicate) -> bool {
    match predicate {
        Predicate::Eq(value) | Predicate::Compare(_, value) => query::collation::holds_text(value),
        Predicate::In(items) => {
            items.iter().any(|item| matches!(item, InItem::Value(value) if query::collation::holds_text(value)))
        }
        Predicate::And(predicates) => predicates.iter().any(predicate_has_text),
        // The others give no bounds.
        _ => false,
    }
}

/// An interval of values as a collated index holds them: strings as the collation's surrogates.
fn collated(interval: Interval, collation: &Collation) -> Interval {
    let convert = |(value, inclusive): (Bson, bool)| (collation.surrogate(&value).into_owned(), inclusive);
    Interval { low: convert(interval.low), high: convert(interval.high) }
}

fn contains_null(interval: &Interval) -> bool {
    let null = Bson::Null;
    let above = match document::compare_values(&interval.low.0, &null) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => interval.low.1,
        std::cmp::Ordering::Greater => false,
    };
    let below = match document::compare_values(&null, &interval.high.0) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => interval.high.1,
        std::cmp::Ordering::Greater => false,
    };
    above && below
}

/// Whether scanning the index yields the sort order: `Some(false)` forward, `Some(true)`
/// backward. The sort fields must follow the index fields from some position reached through
/// single-value equality fields only, all in the index's directions or all reversed.
fn sort_direction(choice: &IndexChoice<'_>, sort: &SortSpec, single_points: usize) -> Option<bool> {
    let wanted = sort.fields();
    (0..=single_points).find_map(|start| {
        let fields = choice.fields.get(start..start + wanted.len())?;
        if choice.hashed.is_some_and(|hashed| (start..start + wanted.len()).contains(&hashed)) {
            return None;
        }
        let same_paths = fields.iter().zip(wanted).all(|((a, _), (b, _))| a == b);
        if !same_paths {
            return None;
        }
        if fields.iter().zip(wanted).all(|((_, a), (_, b))| a == b) {
            Some(false)
        } else if fields.iter().zip(wanted).all(|((_, a), (_, b))| a != b) {
            Some(true)
        } else {
            None
        }
    })
}
