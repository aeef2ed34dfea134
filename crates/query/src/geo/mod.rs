//! Geospatial values and the query operators on them: `$geoWithin`, `$geoIntersects`, `$near`
//! and `$nearSphere`, on the `geo` crate's geometries.
//!
//! A stored location is a GeoJSON object (`{type: "Point", coordinates: [lng, lat]}`, and
//! LineString, Polygon, MultiPoint, MultiLineString, MultiPolygon, GeometryCollection) or a
//! legacy coordinate pair (`[x, y]` or a document of two numbers). Distances follow MongoDB's
//! units: a GeoJSON `$near`/`$nearSphere` point measures meters on a sphere of MongoDB's radius
//! (6,378.1 km, haversine); a legacy `$nearSphere` measures radians; a legacy `$near` measures
//! flat distance in the coordinates' units (a `2d` index).
//!
//! Containment and intersection of GeoJSON shapes (`$geoWithin: {$geometry}`,
//! `$geoIntersects`) follow great circles, as MongoDB's `2dsphere` does ([`sphere`]); only a
//! query part near a hemisphere or wider falls back to the plane of longitude and latitude.
//! `$box`, `$polygon` and `$center` are flat, `$centerSphere` and distances spherical.

pub mod sphere;

use bson::{Bson, Document};
use geo::{
    Closest, Contains, Coord, Distance, Euclidean, Geometry, GeometryCollection, HaversineClosestPoint,
    HaversineMeasure, Intersects, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon, Rect,
};

use crate::error::{QueryError, Result};

/// MongoDB's radius of the Earth, in meters (`kRadiusOfEarthInMeters`).
pub const EARTH_RADIUS_METERS: f64 = 6_378_100.0;

const SPHERE: HaversineMeasure = HaversineMeasure::new(EARTH_RADIUS_METERS);

/// A location read from a document: the geometry, and whether it was GeoJSON.
#[derive(Debug, Clone)]
pub struct Location {
    pub geometry: Geometry<f64>,
    pub geojson: bool,
}

/// A stored value as a location, if it is one.
pub fn location(value: &Bson) -> Option<Location> {
    match value {
        Bson::Document(document) if document.contains_key("type") => {
            geojson(document).ok().map(|geometry| Location { geometry, geojson: true })
        }
        other => legacy_point(other).map(|point| Location { geometry: Geometry::Point(point), geojson: false }),
    }
}

/// A legacy coordinate pair: `[x, y]` or `{a: x, b: y}` (the first two numbers).
pub fn legacy_point(value: &Bson) -> Option<Point<f64>> {
    let numbers: Vec<f64> = match value {
        Bson::Array(items) => items.iter().take(2).map(number).collect::<Option<_>>()?,
        Bson::Document(fields) => fields.values().take(2).map(number).collect::<Option<_>>()?,
        _ => return None,
    };
    match numbers.as_slice() {
        [x, y] => Some(Point::new(*x, *y)),
        _ => None,
    }
}

fn number(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// A GeoJSON object as a geometry, checked as a `2dsphere` index checks it (longitudes in
/// ±180, latitudes in ±90, closed rings of four or more positions).
pub fn geojson(document: &Document) -> std::result::Result<Geometry<f64>, String> {
    let kind = document.get_str("type").map_err(|_| "GeoJSON needs a string 'type'".to_owned())?;
    if kind == "GeometryCollection" {
        let Ok(members) = document.get_array("geometries") else {
            return Err("GeometryCollection needs 'geometries'".into());
        };
        let geometries = members
            .iter()
            .map(|member| match member {
                Bson::Document(member) => geojson(member),
                _ => Err("a GeometryCollection member must be an object".into()),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        return Ok(Geometry::GeometryCollection(GeometryCollection::new_from(geometries)));
    }
    let coordinates = document.get("coordinates").ok_or_else(|| format!("{kind} needs 'coordinates'"))?;
    Ok(match kind {
        "Point" => Geometry::Point(Point::from(position(coordinates)?)),
        "LineString" => Geometry::LineString(line(coordinates)?),
        "Polygon" => Geometry::Polygon(polygon(coordinates)?),
        "MultiPoint" => Geometry::MultiPoint(MultiPoint::new(
            list(coordinates)?.iter().map(|p| position(p).map(Point::from)).collect::<std::result::Result<_, _>>()?,
        )),
        "MultiLineString" => Geometry::MultiLineString(MultiLineString::new(
            list(coordinates)?.iter().map(line).collect::<std::result::Result<_, _>>()?,
        )),
        "MultiPolygon" => Geometry::MultiPolygon(MultiPolygon::new(
            list(coordinates)?.iter().map(polygon).collect::<std::result::Result<_, _>>()?,
        )),
        other => return Err(format!("unknown GeoJSON type: {other}")),
    })
}

fn list(value: &Bson) -> std::result::Result<&Vec<Bson>, String> {
    match value {
        Bson::Array(items) => Ok(items),
        _ => Err("GeoJSON coordinates must be an array".into()),
    }
}

fn position(value: &Bson) -> std::result::Result<Coord<f64>, String> {
    let items = list(value)?;
    let (Some(x), Some(y)) = (items.first().and_then(number), items.get(1).and_then(number)) else {
        return Err(format!("Point must only contain numeric elements: {value}"));
    };
    if !(-180.0..=180.0).contains(&x) || !(-90.0..=90.0).contains(&y) {
        return Err(format!("longitude/latitude is out of bounds, lng: {x} lat: {y}"));
    }
    Ok(Coord { x, y })
}

fn line(value: &Bson) -> std::result::Result<LineString<f64>, String> {
    let coords: Vec<Coord<f64>> = list(value)?.iter().map(position).collect::<std::result::Result<_, _>>()?;
    if coords.len() < 2 {
        return Err("GeoJSON LineString must have at least 2 vertices".into());
    }
    Ok(LineString::new(coords))
}

fn polygon(value: &Bson) -> std::result::Result<Polygon<f64>, String> {
    let mut rings = Vec::new();
    for ring in list(value)? {
        let coords: Vec<Coord<f64>> = list(ring)?.iter().map(position).collect::<std::result::Result<_, _>>()?;
        if coords.len() < 4 || coords.first() != coords.last() {
            return Err("Loop must be closed and have at least 4 vertices".into());
        }
        rings.push(LineString::new(coords));
    }
    if rings.is_empty() {
        return Err("Polygon has no loops".into());
    }
    let exterior = rings.remove(0);
    Ok(Polygon::new(exterior, rings))
}

/// A `$geoWithin` shape.
#[derive(Debug, Clone)]
pub enum Shape {
    /// `$geometry`: a GeoJSON Polygon or MultiPolygon, on the sphere.
    Geometry(Box<sphere::SphericalShape>),
    /// `$box`, `$polygon`: flat.
    Flat(Geometry<f64>),
    /// `$center: [[x, y], r]`: flat.
    Center(Point<f64>, f64),
    /// `$centerSphere: [[lng, lat], radians]`.
    CenterSphere(Point<f64>, f64),
}

impl Shape {
    pub fn parse(operand: &Bson) -> Result<Shape> {
        let bad = |message: &str| QueryError::bad_value(format!("$geoWithin: {message}"));
        let Bson::Document(spec) = operand else { return Err(bad("needs an object")) };
        let Some((name, value)) = spec.iter().next() else { return Err(bad("needs a shape")) };
        let pair = |value: &Bson| legacy_point(value).ok_or_else(|| bad("a point must be a pair of numbers"));
        Ok(match name.as_str() {
            "$geometry" => match value {
                Bson::Document(geometry) => match geojson(geometry).map_err(|e| bad(&e))? {
                    shape @ (Geometry::Polygon(_) | Geometry::MultiPolygon(_)) => {
                        Shape::Geometry(Box::new(sphere::SphericalShape::new(shape)))
                    }
                    _ => return Err(bad("$geometry must be a Polygon or MultiPolygon")),
                },
                _ => return Err(bad("$geometry must be an object")),
            },
            "$box" => {
                let Bson::Array(corners) = value else { return Err(bad("$box needs two corners")) };
                let (Some(a), Some(b)) = (corners.first(), corners.get(1)) else {
                    return Err(bad("$box needs two corners"));
                };
                Shape::Flat(Geometry::Rect(Rect::new(pair(a)?.0, pair(b)?.0)))
            }
            "$polygon" => {
                let Bson::Array(points) = value else { return Err(bad("$polygon needs points")) };
                let mut coords: Vec<Coord<f64>> = points.iter().map(|p| pair(p).map(|p| p.0)).collect::<Result<_>>()?;
                if coords.len() < 3 {
                    return Err(bad("$polygon needs at least 3 points"));
                }
                coords.push(coords[0]);
                Shape::Flat(Geometry::Polygon(Polygon::new(LineString::new(coords), Vec::new())))
            }
            "$center" | "$centerSphere" => {
                let Bson::Array(parts) = value else { return Err(bad("needs [point, radius]")) };
                let (Some(center), Some(radius)) = (parts.first(), parts.get(1).and_then(number)) else {
                    return Err(bad("needs [point, radius]"));
                };
                if radius < 0.0 {
                    return Err(bad("radius must be a non-negative number"));
                }
                if name == "$center" {
                    Shape::Center(pair(center)?, radius)
                } else {
                    Shape::CenterSphere(pair(center)?, radius)
                }
            }
            other => return Err(bad(&format!("unknown shape {other}"))),
        })
    }

    /// Whether the location lies wholly inside the shape.
    pub fn contains(&self, location: &Location) -> bool {
        let geometry = &location.geometry;
        match self {
            Shape::Geometry(shape) => shape.contains(geometry),
            Shape::Flat(shape) => shape.contains(geometry) || on_boundary(shape, geometry),
            Shape::Center(center, radius) => {
                vertices(geometry).iter().all(|p| Euclidean.distance(*center, *p) <= *radius)
            }
            Shape::CenterSphere(center, radians) => {
                vertices(geometry).iter().all(|p| SPHERE.distance(*center, *p) <= radians * EARTH_RADIUS_METERS)
            }
        }
    }
}

/// MongoDB counts a point on a shape's edge as within it; `contains` does not.
fn on_boundary(shape: &Geometry<f64>, geometry: &Geometry<f64>) -> bool {
    matches!(geometry, Geometry::Point(_)) && shape.intersects(geometry)
}

fn vertices(geometry: &Geometry<f64>) -> Vec<Point<f64>> {
    use geo::CoordsIter;
    geometry.coords_iter().map(Point::from).collect()
}

/// `$geoIntersects: {$geometry}`: the GeoJSON geometry a location must meet, on the sphere.
pub fn parse_intersects(operand: &Bson) -> Result<sphere::SphericalShape> {
    let bad = |message: &str| QueryError::bad_value(format!("$geoIntersects: {message}"));
    let Some(Bson::Document(geometry)) = operand.as_document().and_then(|spec| spec.get("$geometry")) else {
        return Err(bad("needs {$geometry: <GeoJSON>}"));
    };
    geojson(geometry).map(sphere::SphericalShape::new).map_err(|e| bad(&e))
}

/// `$near`/`$nearSphere` (with `$minDistance`/`$maxDistance` beside them).
#[derive(Debug, Clone, PartialEq)]
pub struct Near {
    pub point: Point<f64>,
    /// Measured on the sphere (`$nearSphere`, or a GeoJSON point), else on the plane.
    pub spherical: bool,
    /// A GeoJSON point: distances in meters (else radians on the sphere, units on the plane).
    pub meters: bool,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Near {
    /// Parses the operator `name` (`$near`, `$nearSphere`) with its sibling operators.
    pub fn parse(name: &str, operators: &Document) -> Result<Near> {
        let bad = |message: String| QueryError::bad_value(format!("{name}: {message}"));
        let operand = operators.get(name).ok_or_else(|| bad("missing".into()))?;
        let mut min = operators
            .get("$minDistance")
            .map(|v| number(v).ok_or_else(|| bad("$minDistance must be a number".into())))
            .transpose()?;
        let mut max = operators
            .get("$maxDistance")
            .map(|v| number(v).ok_or_else(|| bad("$maxDistance must be a number".into())))
            .transpose()?;
        let (point, meters) = match operand {
            Bson::Document(spec) if spec.contains_key("$geometry") => {
                let Some(Bson::Document(geometry)) = spec.get("$geometry") else {
                    return Err(bad("$geometry must be an object".into()));
                };
                let Ok(Geometry::Point(point)) = geojson(geometry) else {
                    return Err(bad("$geometry must be a GeoJSON Point".into()));
                };
                min = min.or(spec.get("$minDistance").and_then(number));
                max = max.or(spec.get("$maxDistance").and_then(number));
                (point, true)
            }
            other => (legacy_point(other).ok_or_else(|| bad("needs a point".into()))?, false),
        };
        if min.is_some_and(|m| m < 0.0) || max.is_some_and(|m| m < 0.0) {
            return Err(bad("distances must be non-negative".into()));
        }
        Ok(Near { point, spherical: meters || name == "$nearSphere", meters, min, max })
    }

    /// The distance from the point to the location, in this query's units.
    pub fn distance(&self, location: &Location) -> f64 {
        let point = self.point;
        if !self.spherical {
            return Euclidean.distance(&point, &location.geometry);
        }
        let closest = match location.geometry.haversine_closest_point(&point) {
            Closest::Intersection(_) => return 0.0,
            Closest::SinglePoint(p) => p,
            Closest::Indeterminate => vertices(&location.geometry).first().copied().unwrap_or(point),
        };
        let meters = SPHERE.distance(point, closest);
        if self.meters { meters } else { meters / EARTH_RADIUS_METERS }
    }

    /// Whether a distance lies in `[$minDistance, $maxDistance]`.
    pub fn admits(&self, distance: f64) -> bool {
        self.min.is_none_or(|min| distance >= min) && self.max.is_none_or(|max| distance <= max)
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    fn at(lng: f64, lat: f64) -> Location {
        location(&Bson::Document(doc! {"type": "Point", "coordinates": [lng, lat]})).unwrap_or_else(|| panic!("point"))
    }

    /// Within: GeoJSON polygons (edges included), boxes, spherical circles.
    #[test]
    fn shapes_contain_locations() {
        let square = Shape::parse(&Bson::Document(
            doc! {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 4], [0, 0]]]}},
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(square.contains(&at(1.0, 1.0)) && square.contains(&at(4.0, 2.0)) && !square.contains(&at(5.0, 1.0)));
        let boxed = Shape::parse(&Bson::Document(doc! {"$box": [[0, 0], [2, 2]]})).unwrap_or_else(|e| panic!("{e}"));
        assert!(boxed.contains(&location(&Bson::Array(vec![1.into(), 1.into()])).unwrap_or_else(|| panic!("pair"))));
        // 1 degree of latitude is about 111 km: inside 0.02 radians (127 km), not 0.01.
        let near = |radians: f64| {
            Shape::parse(&Bson::Document(doc! {"$centerSphere": [[0, 0], radians]})).unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(near(0.02).contains(&at(0.0, 1.0)) && !near(0.01).contains(&at(0.0, 1.0)));
        assert!(geojson(&doc! {"type": "Point", "coordinates": [200, 0]}).is_err());
        assert!(geojson(&doc! {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1]]]}).is_err());
    }

    /// Distances: meters for GeoJSON points, radians for legacy spheres, units on the plane.
    #[test]
    fn near_measures_in_mongodbs_units() {
        let near = Near::parse(
            "$near",
            &doc! {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}, "$maxDistance": 200_000},
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let degree = near.distance(&at(0.0, 1.0));
        assert!((degree - EARTH_RADIUS_METERS.to_radians()).abs() < 1.0, "{degree}");
        assert!(near.admits(degree));
        let flat = Near::parse("$near", &doc! {"$near": [0, 0]}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            flat.distance(&location(&Bson::Array(vec![3.into(), 4.into()])).unwrap_or_else(|| panic!("pair"))),
            5.0
        );
        let sphere = Near::parse("$nearSphere", &doc! {"$nearSphere": [0, 0]}).unwrap_or_else(|e| panic!("{e}"));
        assert!((sphere.distance(&at(0.0, 1.0)) - 1f64.to_radians()).abs() < 1e-9);
    }
}
