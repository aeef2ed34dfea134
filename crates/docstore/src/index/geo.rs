//! Geospatial indexes: `2dsphere` (GeoJSON objects and legacy pairs on the sphere) and `2d`
//! (legacy pairs on a flat square, `min`/`max` default ±180).
//!
//! An index has one geo field (compound geo indexes are refused). Each location of a document
//! (a GeoJSON object, a legacy pair, or an array of them) is checked as MongoDB checks it, a bad
//! one refusing the write (16755 for `2dsphere`, 13026/13027 for `2d`); a document without the
//! field has no entry (geo indexes are sparse). A point's key is its Z-order cell on a
//! 2^26 × 2^26 grid over the index's bounds, so nearby places sort near each other and a box
//! is a few key ranges ([`GeoKind::covering`]); any other geometry's key is [`UNBOXED`], which
//! every bounded read also scans (a line or polygon may reach a box its center is outside of).

use bson::{Bson, Document, doc};
use geo::BoundingRect;
use query::geo::{Location, location};

use crate::error::{Error, Result};

/// Bits per axis of a cell.
const CELL_BITS: u32 = 26;

/// The key of a location that is not a point (cells are never negative).
pub(crate) const UNBOXED: i64 = -1;

/// Most key ranges a box is covered by (more ranges, tighter; fewer, fewer seeks).
const MAX_RANGES: usize = 24;

/// Which kind of geospatial index.
#[derive(Debug, Clone, PartialEq)]
pub enum GeoKind {
    /// `2dsphere`: GeoJSON or legacy pairs, longitudes and latitudes.
    Sphere,
    /// `2d`: legacy pairs in `[min, max)` on both axes.
    Flat { min: f64, max: f64 },
}

impl GeoKind {
    /// The kind a key pattern's value names, with the spec's options.
    pub fn from_spec(kind: &str, spec: &Document) -> Result<GeoKind> {
        let bound = |name: &str, default: f64| match spec.get(name) {
            None => Ok(default),
            Some(Bson::Int32(n)) => Ok(f64::from(*n)),
            Some(Bson::Int64(n)) => Ok(*n as f64),
            Some(Bson::Double(d)) if d.is_finite() => Ok(*d),
            Some(_) => Err(Error::CannotCreateIndex(format!("{name} must be a number"))),
        };
        match kind {
            "2dsphere" => Ok(GeoKind::Sphere),
            _ => {
                let (min, max) = (bound("min", -180.0)?, bound("max", 180.0)?);
                if min >= max {
                    return Err(Error::CannotCreateIndex("2d index: max must be greater than min".into()));
                }
                Ok(GeoKind::Flat { min, max })
            }
        }
    }

    /// What listIndexes shows beside the key.
    pub fn normalized_fields(&self, spec: &Document) -> Document {
        match self {
            GeoKind::Sphere => doc! {"2dsphereIndexVersion": 3},
            GeoKind::Flat { .. } => ["min", "max", "bits"]
                .iter()
                .filter_map(|name| spec.get(*name).map(|value| ((*name).to_owned(), value.clone())))
                .collect(),
        }
    }

    /// The locations of a value at the indexed path, each checked (see the module header).
    pub fn locations(&self, value: &Bson) -> Result<Vec<Location>> {
        if let Some(found) = location(value) {
            return self.checked(found, value).map(|found| vec![found]);
        }
        match value {
            Bson::Array(items) if !items.is_empty() => items
                .iter()
                .map(|item| {
                    location(item).ok_or_else(|| self.refused(item)).and_then(|found| self.checked(found, item))
                })
                .collect(),
            Bson::Array(_) | Bson::Null => Ok(Vec::new()),
            other => Err(self.refused(other)),
        }
    }

    fn checked(&self, found: Location, value: &Bson) -> Result<Location> {
        match self {
            GeoKind::Sphere => {
                let Some(rect) = found.geometry.bounding_rect() else { return Err(self.refused(value)) };
                let inside = |x: f64, y: f64| (-180.0..=180.0).contains(&x) && (-90.0..=90.0).contains(&y);
                if !inside(rect.min().x, rect.min().y) || !inside(rect.max().x, rect.max().y) {
                    return Err(self.refused(value));
                }
                Ok(found)
            }
            GeoKind::Flat { min, max } => {
                if found.geojson {
                    return Err(Error::Query(query::error::fail(
                        vocabulary::location::GEO_2D_VALUE_NOT_COORDINATE_PAIR,
                        format!("geo values must be 'legacy coordinate pairs' for 2d indexes: {value}"),
                    )));
                }
                let Some(rect) = found.geometry.bounding_rect() else { return Err(self.refused(value)) };
                for coordinate in [rect.min().x, rect.min().y] {
                    if coordinate < *min || coordinate >= *max {
                        return Err(Error::Query(query::error::fail(
                            vocabulary::location::GEO_2D_POINT_OUTSIDE_BOUNDS,
                            format!("point not in interval of [ {min}, {max} ) :: caused by :: {value}"),
                        )));
                    }
                }
                Ok(found)
            }
        }
    }

    fn refused(&self, value: &Bson) -> Error {
        match self {
            GeoKind::Sphere => Error::Query(query::error::fail(
                vocabulary::location::GEO_2DSPHERE_CANNOT_EXTRACT_KEYS,
                format!("Can't extract geo keys: can't project geometry {value}"),
            )),
            GeoKind::Flat { .. } => Error::Query(query::error::fail(
                vocabulary::location::GEO_2D_VALUE_NOT_COORDINATE_PAIR,
                format!("geo values must be 'legacy coordinate pairs' for 2d indexes: {value}"),
            )),
        }
    }

    /// The key of a location: a point's cell, else [`UNBOXED`].
    pub fn cell(&self, found: &Location) -> i64 {
        match &found.geometry {
            geo::Geometry::Point(point) => {
                let (x, y) = self.grid(point.x(), point.y());
                interleave(x, y) as i64
            }
            _ => UNBOXED,
        }
    }

    /// The index's bounds: (min x, max x, min y, max y).
    fn bounds(&self) -> (f64, f64, f64, f64) {
        match self {
            GeoKind::Sphere => (-180.0, 180.0, -90.0, 90.0),
            GeoKind::Flat { min, max } => (*min, *max, *min, *max),
        }
    }

    /// A position's grid coordinates (clamped to the grid).
    fn grid(&self, x: f64, y: f64) -> (u64, u64) {
        let (min_x, max_x, min_y, max_y) = self.bounds();
        let scale = |value: f64, low: f64, high: f64| {
            let cells = f64::from(1u32 << CELL_BITS);
            (((value - low) / (high - low)) * cells).clamp(0.0, cells - 1.0) as u64
        };
        (scale(x, min_x, max_x), scale(y, min_y, max_y))
    }

    /// Inclusive ranges of cells that hold every point of the box `[x0, x1] × [y0, y1]` (and
    /// some around it): quadtree cells split while the budget allows, whole ones kept.
    pub fn covering(&self, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) -> Vec<(i64, i64)> {
        let (low, high) = (self.grid(x0, y0), self.grid(x1, y1));
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        // (level, x prefix, y prefix), coarsest first.
        let mut pending = std::collections::VecDeque::from([(0u32, 0u64, 0u64)]);
        while let Some((level, px, py)) = pending.pop_front() {
            let shift = CELL_BITS - level;
            let (cx0, cx1) = (px << shift, ((px + 1) << shift) - 1);
            let (cy0, cy1) = (py << shift, ((py + 1) << shift) - 1);
            if cx1 < low.0 || cx0 > high.0 || cy1 < low.1 || cy0 > high.1 {
                continue;
            }
            let inside = cx0 >= low.0 && cx1 <= high.0 && cy0 >= low.1 && cy1 <= high.1;
            if inside || level == CELL_BITS || ranges.len() + pending.len() + 4 > MAX_RANGES {
                let first = interleave(px, py) << (2 * shift);
                ranges.push((first, first | ((1u64 << (2 * shift)) - 1)));
                continue;
            }
            for (dx, dy) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                pending.push_back((level + 1, px * 2 + dx, py * 2 + dy));
            }
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (first, last) in ranges {
            match merged.last_mut() {
                Some(previous) if previous.1.saturating_add(1) >= first => previous.1 = previous.1.max(last),
                _ => merged.push((first, last)),
            }
        }
        merged.into_iter().map(|(first, last)| (first as i64, last as i64)).collect()
    }
}

/// The Z-order of grid coordinates: x's bits above y's, pair by pair.
fn interleave(x: u64, y: u64) -> u64 {
    (0..CELL_BITS).fold(0u64, |cell, bit| cell | ((x >> bit) & 1) << (2 * bit + 1) | ((y >> bit) & 1) << (2 * bit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2dsphere takes GeoJSON and pairs in range; 2d takes pairs in its bounds only.
    #[test]
    fn locations_are_checked_by_kind() {
        let sphere = GeoKind::Sphere;
        let point = Bson::Document(doc! {"type": "Point", "coordinates": [2.35, 48.85]});
        assert_eq!(sphere.locations(&point).map(|l| l.len()).ok(), Some(1));
        let pairs = Bson::Array(vec![Bson::Array(vec![1.into(), 2.into()]), Bson::Array(vec![3.into(), 4.into()])]);
        assert_eq!(sphere.locations(&pairs).map(|l| l.len()).ok(), Some(2));
        assert_eq!(sphere.locations(&Bson::String("x".into())).err().map(|e| e.code()), Some(16755));
        let flat = GeoKind::from_spec("2d", &doc! {"min": 0, "max": 10}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(flat.locations(&Bson::Array(vec![11.into(), 1.into()])).err().map(|e| e.code()), Some(13027));
        assert_eq!(flat.locations(&point).err().map(|e| e.code()), Some(13026));
        let near =
            sphere.cell(&location(&Bson::Array(vec![2.35.into(), 48.85.into()])).unwrap_or_else(|| panic!("pair")));
        let nearby =
            sphere.cell(&location(&Bson::Array(vec![2.36.into(), 48.86.into()])).unwrap_or_else(|| panic!("pair")));
        let far =
            sphere.cell(&location(&Bson::Array(vec![(-122.4).into(), 37.7.into()])).unwrap_or_else(|| panic!("pair")));
        assert!((near - nearby).abs() < (near - far).abs());
        let line = Bson::Document(doc! {"type": "LineString", "coordinates": [[0, 0], [1, 1]]});
        assert_eq!(sphere.cell(&sphere.locations(&line).unwrap_or_else(|e| panic!("{e}"))[0]), UNBOXED);
    }

    /// Every point of a box lies in one of its covering's ranges, over a sweep of boxes.
    #[test]
    fn coverings_hold_every_point_of_their_box() {
        let sphere = GeoKind::Sphere;
        for (x0, y0, size) in [
            (2.0f64, 48.0f64, 0.5f64),
            (-180.0, -90.0, 1.0),
            (-1.0, -1.0, 2.0),
            (100.0, 10.0, 30.0),
            (179.0, 89.0, 1.0),
        ] {
            let (x1, y1) = ((x0 + size).min(180.0), (y0 + size).min(90.0));
            let ranges = sphere.covering((x0, y0), (x1, y1));
            assert!(!ranges.is_empty() && ranges.len() <= MAX_RANGES, "{ranges:?}");
            for step in 0..=20 {
                for other in 0..=20 {
                    let x = x0 + (x1 - x0) * f64::from(step) / 20.0;
                    let y = y0 + (y1 - y0) * f64::from(other) / 20.0;
                    let (gx, gy) = sphere.grid(x, y);
                    let cell = interleave(gx, gy) as i64;
                    assert!(ranges.iter().any(|(a, b)| (*a..=*b).contains(&cell)), "({x}, {y}) outside {ranges:?}");
                }
            }
        }
    }
}
