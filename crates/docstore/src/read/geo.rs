//! `$near`, `$nearSphere` and the `$geoNear` stage: the documents a geospatial index holds,
//! each measured from the query's point (`query::geo::Near`), those within the distances and
//! the rest of the filter returned nearest first.
//!
//! As in MongoDB these need a geo index on the queried field: `2dsphere` for GeoJSON points
//! and `$nearSphere`, `2d` for a flat `$near` (a `2d` index also serves a legacy
//! `$nearSphere`); without one the query fails with NoQueryExecutionPlans (291). With a
//! `$maxDistance`, only the cells of the box around the circle are read ([`near_box`],
//! `GeoKind::covering`), with the non-point locations; without one (or a box that would cross
//! a pole or the antimeridian) every entry of the index is. A compound geo index serves the same
//! way: by its cells when the location field comes first, read whole when fields precede it.

use std::collections::HashSet;
use std::ops::Bound;

use bson::{Bson, Document, RawDocumentBuf};
use document::keycodec::Direction;
use document::path::FieldPath;
use query::filter::{Filter, MatchExpr, Predicate};
use query::geo::Near;

use crate::catalog::Descriptor;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::index::geo::{GeoKind, UNBOXED};
use crate::index::path_values;
use crate::operation;
use crate::read::bounds::{Interval, KeyRange, key_range};
use crate::read::scan::raw;

/// The `$near`/`$nearSphere` of a filter's top-level conjunction, with its field.
pub(crate) fn near_of(filter: &Filter) -> Option<(FieldPath, Near)> {
    let mut stack = vec![filter.root()];
    while let Some(expression) = stack.pop() {
        match expression {
            MatchExpr::And(children) => stack.extend(children.iter()),
            MatchExpr::Path { path, predicate: Predicate::Near(near) } => {
                return Some((path.clone(), (**near).clone()));
            }
            _ => {}
        }
    }
    None
}

/// The error of a `$near` without the index it needs.
fn no_index() -> Error {
    Error::Query(query::error::fail(
        vocabulary::ErrorCode::NoQueryExecutionPlans,
        "error processing query: planner returned error :: caused by :: unable to find index for $geoNear query",
    ))
}

/// The geo index that serves a near query on `path`.
pub(crate) fn near_index<'c>(collection: &'c Descriptor, path: &FieldPath, near: &Near) -> Result<&'c Index> {
    collection
        .indexes
        .iter()
        .filter(|index| index.meta.ready)
        .find(|index| {
            let on_path = geo_field(index).is_some_and(|field| field == path);
            let serves = match &index.geo {
                Some(GeoKind::Sphere) => near.spherical,
                Some(GeoKind::Flat { .. }) => !near.meters,
                None => false,
            };
            on_path && serves
        })
        .ok_or_else(no_index)
}

/// The radii of a limited near query's rings, in the query's units: the first reaches 1 km
/// (1/4096 of a `2d` square), and past the last a ring holds the whole square or sphere.
fn ring_radii(kind: &GeoKind, near: &Near) -> (f64, f64) {
    match (kind, near.meters) {
        (GeoKind::Flat { min, max }, false) if !near.spherical => ((max - min) / 4096.0, 2.0 * (max - min)),
        (_, true) => (1000.0, std::f64::consts::PI * query::geo::EARTH_RADIUS_METERS),
        _ => (1000.0 / query::geo::EARTH_RADIUS_METERS, std::f64::consts::PI),
    }
}

/// What a near query has found so far: each document once, with its distance.
#[derive(Default)]
struct Found {
    seen: HashSet<Vec<u8>>,
    documents: Vec<(Vec<u8>, RawDocumentBuf, f64)>,
}

impl Context {
    /// The documents of a near query that match `filter` (which holds the `$near`), nearest
    /// first (ties in `_id` order), each with its distance in the query's units.
    ///
    /// `wanted`: how many the caller will take (a find's skip + limit, without another sort).
    /// Then a query without `$maxDistance` on an index led by its location searches rings
    /// that grow fourfold from the first of [`ring_radii`] until they hold that many (only those within
    /// a ring are certain to be the nearest), reading the whole index only when a ring's box
    /// would reach a pole or cross the antimeridian.
    pub(crate) fn find_near(
        &self,
        collection: &Descriptor,
        snapshot: &storage::Snapshot,
        filter: &Filter,
        path: &FieldPath,
        near: &Near,
        wanted: Option<usize>,
    ) -> Result<Vec<(RawDocumentBuf, f64)>> {
        let index = near_index(collection, path, near)?;
        let Some(kind) = &index.geo else { return Err(no_index()) };
        self.index_usage.note(&index.meta.tree);
        let location_first = index.geo_position() == Some(0);
        let mut found = Found::default();
        if let (Some(wanted), None, true) = (wanted, near.max, location_first) {
            let (mut radius, widest) = ring_radii(kind, near);
            while radius <= widest
                && let Some(ranges) = boxed_ranges(kind, &Near { max: Some(radius), ..near.clone() })
            {
                self.read_near(collection, snapshot, index, kind, filter, path, near, ranges, &mut found)?;
                if found.documents.iter().filter(|(_, _, distance)| *distance <= radius).count() >= wanted {
                    found.documents.retain(|(_, _, distance)| *distance <= radius);
                    return Ok(nearest_first(found));
                }
                radius *= 4.0;
            }
        }
        let ranges = key_ranges(kind, near, location_first);
        self.read_near(collection, snapshot, index, kind, filter, path, near, ranges, &mut found)?;
        Ok(nearest_first(found))
    }

    /// Reads `ranges` of the index into `found`: each new document that matches the filter,
    /// measured.
    #[allow(clippy::too_many_arguments)]
    fn read_near(
        &self,
        collection: &Descriptor,
        snapshot: &storage::Snapshot,
        index: &Index,
        kind: &GeoKind,
        filter: &Filter,
        path: &FieldPath,
        near: &Near,
        ranges: Vec<KeyRange>,
        found: &mut Found,
    ) -> Result<()> {
        for range in ranges {
            for item in snapshot.range::<(Bound<&[u8]>, Bound<&[u8]>)>(index.tree, range.bounds()) {
                operation::check()?;
                operation::key_examined();
                let (key, value) = item?;
                let entry = index.decode_entry(key, value)?;
                if !found.seen.insert(entry.id.clone()) {
                    continue;
                }
                let Some(bytes) = snapshot.get(collection.tree, &entry.id)? else { continue };
                operation::doc_examined();
                let document = raw(bytes)?;
                if !filter.matches_raw(&document)? {
                    continue;
                }
                if let Some(distance) = nearest(kind, &document, path, near)? {
                    found.documents.push((entry.id, document, distance));
                }
            }
        }
        Ok(())
    }
}

fn nearest_first(mut found: Found) -> Vec<(RawDocumentBuf, f64)> {
    found.documents.sort_by(|a, b| a.2.total_cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
    found.documents.into_iter().map(|(_, document, distance)| (document, distance)).collect()
}

/// The location field of a geospatial index.
fn geo_field(index: &Index) -> Option<&FieldPath> {
    index.spec.fields().get(index.geo_position()?).map(|(path, _)| path)
}

/// The key ranges a near query reads: its box's cells and the non-point locations, or all
/// (also when other fields come before the location field in the index's key).
fn key_ranges(kind: &GeoKind, near: &Near, location_first: bool) -> Vec<KeyRange> {
    let whole = || vec![KeyRange { lower: Bound::Unbounded, upper: Bound::Unbounded }];
    match boxed_ranges(kind, near).filter(|_| location_first) {
        Some(ranges) => ranges,
        None => whole(),
    }
}

/// The cells of the box around a near query's circle, and the non-point locations (`None`:
/// no box, see [`near_box`]).
fn boxed_ranges(kind: &GeoKind, near: &Near) -> Option<Vec<KeyRange>> {
    let (low, high) = near_box(near)?;
    let cells = kind.covering(low, high).into_iter().chain([(UNBOXED, UNBOXED)]);
    cells
        .map(|(first, last)| {
            let interval = Interval { low: (Bson::Int64(first), true), high: (Bson::Int64(last), true) };
            key_range(&[], Some(&interval), Direction::Ascending)
        })
        .collect::<Vec<_>>()
        .into()
}

/// The box around the circle a `$maxDistance` draws (`None`: no distance, or a circle that
/// reaches a pole or crosses the antimeridian).
pub(crate) fn near_box(near: &Near) -> Option<((f64, f64), (f64, f64))> {
    let max = near.max?;
    let (x, y) = (near.point.x(), near.point.y());
    if !near.spherical {
        return Some(((x - max, y - max), (x + max, y + max)));
    }
    let angle = if near.meters { max / query::geo::EARTH_RADIUS_METERS } else { max };
    if !(0.0..1.0).contains(&angle) {
        return None;
    }
    let (south, north) = (y - angle.to_degrees(), y + angle.to_degrees());
    if south <= -90.0 || north >= 90.0 {
        return None;
    }
    // The widest longitude span is at the latitude farthest from the equator (asin is
    // increasing): wider than the circle's, never narrower.
    let widest = south.abs().max(north.abs()).to_radians().cos();
    let ratio = angle.sin() / widest;
    if ratio >= 1.0 {
        return None;
    }
    let span = ratio.asin().to_degrees() + 1e-9;
    if x - span < -180.0 || x + span > 180.0 {
        return None;
    }
    Some(((x - span, south), (x + span, north)))
}

/// The distance from the query's point to the document's nearest location at `path`.
fn nearest(kind: &GeoKind, raw: &RawDocumentBuf, path: &FieldPath, near: &Near) -> Result<Option<f64>> {
    let fields = document::path::decode_fields(raw, [path.head()])?;
    let mut best: Option<f64> = None;
    for value in path_values(&fields, path.parts()) {
        for found in kind.locations(value)? {
            let distance = near.distance(&found);
            best = Some(best.map_or(distance, |b| b.min(distance)));
        }
    }
    Ok(best)
}

/// A `$geoNear` stage's options.
pub(crate) struct GeoNear {
    /// The filter to run: the stage's `query` and the near condition on its key.
    pub filter: Document,
    pub distance_field: String,
    pub multiplier: f64,
    pub include_locs: Option<String>,
    pub key: Option<String>,
}

impl GeoNear {
    /// Parses `{near, distanceField, spherical, maxDistance, minDistance, query, key,
    /// distanceMultiplier, includeLocs}`; the key may be found later (`with_key`).
    pub(crate) fn parse(spec: &Bson) -> Result<GeoNear> {
        let Bson::Document(spec) = spec else { return Err(Error::bad_value("$geoNear needs an object")) };
        let text = |name: &str| match spec.get(name) {
            None => Ok(None),
            Some(Bson::String(value)) => Ok(Some(value.clone())),
            Some(_) => Err(Error::bad_value(format!("$geoNear: {name} must be a string"))),
        };
        let Some(distance_field) = text("distanceField")? else {
            return Err(Error::bad_value("$geoNear requires a 'distanceField' option as a String"));
        };
        let Some(near) = spec.get("near") else { return Err(Error::bad_value("$geoNear requires a 'near' option")) };
        let spherical = matches!(spec.get("spherical"), Some(Bson::Boolean(true)));
        let geojson = matches!(near, Bson::Document(point) if point.contains_key("type"));
        let operator = if spherical || geojson { "$nearSphere" } else { "$near" };
        let mut condition = match geojson {
            true => bson::doc! {operator: {"$geometry": near.clone()}},
            false => bson::doc! {operator: near.clone()},
        };
        for (option, operator) in [("maxDistance", "$maxDistance"), ("minDistance", "$minDistance")] {
            if let Some(value) = spec.get(option) {
                condition.insert(operator, value.clone());
            }
        }
        let multiplier = match spec.get("distanceMultiplier") {
            None => 1.0,
            Some(Bson::Int32(n)) => f64::from(*n),
            Some(Bson::Int64(n)) => *n as f64,
            Some(Bson::Double(d)) if *d >= 0.0 => *d,
            Some(_) => return Err(Error::bad_value("$geoNear: distanceMultiplier must be a non-negative number")),
        };
        let query = match spec.get("query") {
            None => Document::new(),
            Some(Bson::Document(query)) => query.clone(),
            Some(_) => return Err(Error::bad_value("$geoNear: query must be an object")),
        };
        let mut filter = Document::new();
        filter.insert("$and", vec![Bson::Document(query), Bson::Document(bson::doc! {"__key__": condition})]);
        Ok(GeoNear { filter, distance_field, multiplier, include_locs: text("includeLocs")?, key: text("key")? })
    }

    /// The filter with the near condition on `key`.
    pub(crate) fn filter_on(&self, key: &str) -> Document {
        let mut filter = self.filter.clone();
        if let Ok(clauses) = filter.get_array_mut("$and")
            && let Some(Bson::Document(condition)) = clauses.get_mut(1)
            && let Some(near) = condition.remove("__key__")
        {
            condition.insert(key, near);
        }
        filter
    }
}

/// The one geo index's field, when the stage names no `key`.
pub(crate) fn only_geo_field(collection: &Descriptor) -> Result<String> {
    let mut fields = collection
        .indexes
        .iter()
        .filter(|index| index.geo.is_some())
        .filter_map(|index| geo_field(index).map(|path| path.as_str().to_owned()));
    match (fields.next(), fields.next()) {
        (Some(field), None) => Ok(field),
        (None, _) => Err(no_index()),
        (Some(_), Some(_)) => Err(Error::bad_value("There is more than one geospatial index: $geoNear needs a 'key'")),
    }
}
