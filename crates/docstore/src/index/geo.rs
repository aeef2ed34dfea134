//! Geospatial indexes: `2dsphere` (GeoJSON objects and legacy pairs on the sphere) and `2d`
//! (legacy pairs on a flat square, `min`/`max` default ±180).
//!
//! An index has one geo field (compound geo indexes are refused). Each location of a document
//! (a GeoJSON object, a legacy pair, or an array of them) is checked as MongoDB checks it, a bad
//! one refusing the write (16755 for `2dsphere`, 13026/13027 for `2d`); a document without the
//! field has no entry (geo indexes are sparse). An entry's key is the Z-order cell of the
//! location's bounding box center on a 2^26 × 2^26 grid over the index's bounds: nearby places
//! sort near each other. Reads (`read::geo`) use the index to find every located document and
//! measure each; they do not yet prune by cell.

use bson::{Bson, Document, doc};
use geo::BoundingRect;
use query::geo::{Location, location};

use crate::error::{Error, Result};

/// Bits per axis of a cell.
const CELL_BITS: u32 = 26;

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
                        13026,
                        format!("geo values must be 'legacy coordinate pairs' for 2d indexes: {value}"),
                    )));
                }
                let Some(rect) = found.geometry.bounding_rect() else { return Err(self.refused(value)) };
                for coordinate in [rect.min().x, rect.min().y] {
                    if coordinate < *min || coordinate >= *max {
                        return Err(Error::Query(query::error::fail(
                            13027,
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
                16755,
                format!("Can't extract geo keys: can't project geometry {value}"),
            )),
            GeoKind::Flat { .. } => Error::Query(query::error::fail(
                13026,
                format!("geo values must be 'legacy coordinate pairs' for 2d indexes: {value}"),
            )),
        }
    }

    /// The cell of a location: its bounding box center, Z-ordered on the index's grid.
    pub fn cell(&self, found: &Location) -> i64 {
        let (min, max, min_y, max_y) = match self {
            GeoKind::Sphere => (-180.0, 180.0, -90.0, 90.0),
            GeoKind::Flat { min, max } => (*min, *max, *min, *max),
        };
        let center = found.geometry.bounding_rect().map_or((0.0, 0.0), |rect| (rect.center().x, rect.center().y));
        let scale = |value: f64, low: f64, high: f64| {
            let cells = f64::from(1u32 << CELL_BITS);
            (((value - low) / (high - low)) * cells).clamp(0.0, cells - 1.0) as u64
        };
        let (x, y) = (scale(center.0, min, max), scale(center.1, min_y, max_y));
        (0..CELL_BITS).fold(0u64, |cell, bit| cell | ((x >> bit) & 1) << (2 * bit + 1) | ((y >> bit) & 1) << (2 * bit))
            as i64
    }
}

/// The values at a dotted path, through arrays of documents on the way (the last value is
/// kept whole: a legacy pair is an array).
pub fn values_at<'d>(document: &'d Document, parts: &[String]) -> Vec<&'d Bson> {
    let mut out = Vec::new();
    if let Some((head, rest)) = parts.split_first()
        && let Some(value) = document.get(head)
    {
        walk(value, rest, &mut out);
    }
    out
}

fn walk<'d>(value: &'d Bson, rest: &[String], out: &mut Vec<&'d Bson>) {
    let Some((head, tail)) = rest.split_first() else {
        out.push(value);
        return;
    };
    match value {
        Bson::Document(inner) => {
            if let Some(next) = inner.get(head) {
                walk(next, tail, out);
            }
        }
        Bson::Array(items) => items.iter().for_each(|item| walk(item, rest, out)),
        _ => {}
    }
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
    }
}
