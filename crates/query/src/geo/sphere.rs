//! Containment and intersection on the sphere, where edges are great-circle arcs (MongoDB's
//! `2dsphere` semantics for `$geoWithin: {$geometry}` and `$geoIntersects`).
//!
//! Method: the gnomonic projection, centered on a query part's own center (the normalized sum
//! of its vertices' unit vectors), maps every great circle to a straight line. So within the
//! open hemisphere around that center, a spherical polygon is exactly the planar polygon of its
//! projected vertices, and the `geo` crate's planar predicates answer on the sphere. A query
//! part whose vertices all lie well inside its hemisphere is answered that way; the smaller of
//! the two regions a ring bounds is its inside, as MongoDB takes a ring without its
//! big-polygon CRS. A stored location is cut to that hemisphere first (no part of the query is
//! beyond it; the minor arc between two points of a hemisphere stays in it): a point or a
//! vertex beyond it is outside every query polygon, arcs are cut where they leave, polygon
//! rings clipped (Sutherland–Hodgman against the plane). A query part wider than that (a ring
//! near a hemisphere or larger, a line spanning the globe) is answered on the plane of
//! longitude and latitude, as before.

use geo::{Contains, Coord, Geometry, Intersects, LineString, MultiLineString, Point, Polygon};

use super::on_boundary;

type Vector = [f64; 3];

/// Query parts whose smallest vertex height over their center's plane is below this are too
/// wide to project (`cos 80°`).
const WIDEST: f64 = 0.17;

fn unit(c: Coord<f64>) -> Vector {
    let (lng, lat) = (c.x.to_radians(), c.y.to_radians());
    [lat.cos() * lng.cos(), lat.cos() * lng.sin(), lat.sin()]
}

fn dot(a: Vector, b: Vector) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: Vector, b: Vector) -> Vector {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

fn normalized(a: Vector) -> Option<Vector> {
    let length = dot(a, a).sqrt();
    (length > 1e-12).then(|| [a[0] / length, a[1] / length, a[2] / length])
}

/// One part of a query geometry, with the plane it is answered on.
#[derive(Debug, Clone)]
pub struct Part {
    view: Option<View>,
    /// One of the part's own points (a vertex), for a stored area that may hold it whole.
    anchor: Coord<f64>,
    /// The part projected on its view's plane, or as given when it has no view.
    planar: Geometry<f64>,
}

/// A gnomonic projection: its center and the axes of its tangent plane.
#[derive(Debug, Clone, Copy)]
struct View {
    center: Vector,
    east: Vector,
    north: Vector,
    /// Points lower than this over the center's plane are cut away from stored locations.
    floor: f64,
}

impl View {
    /// The view centered on these vertices, if they all lie well inside its hemisphere.
    fn of(vertices: &[Vector]) -> Option<View> {
        let sum = vertices.iter().fold([0.0; 3], |s, v| [s[0] + v[0], s[1] + v[1], s[2] + v[2]]);
        let center = normalized(sum)?;
        let lowest = vertices.iter().map(|v| dot(*v, center)).fold(f64::INFINITY, f64::min);
        if lowest < WIDEST {
            return None;
        }
        let helper = if center[2].abs() < 0.9 { [0.0, 0.0, 1.0] } else { [1.0, 0.0, 0.0] };
        let east = normalized(cross(helper, center))?;
        let north = cross(center, east);
        Some(View { center, east, north, floor: lowest / 2.0 })
    }

    fn project(&self, v: Vector) -> Coord<f64> {
        let height = dot(v, self.center);
        Coord { x: dot(v, self.east) / height, y: dot(v, self.north) / height }
    }

    fn height(&self, v: Vector) -> f64 {
        dot(v, self.center)
    }

    /// The highest point of the minor arc from `a` to `b` when it rises above the floor though
    /// both ends are below it (an arc is highest where it passes nearest the center).
    fn peak(&self, a: Vector, b: Vector) -> Option<Vector> {
        let normal = normalized(cross(a, b))?;
        let toward = dot(self.center, normal);
        let nearest = normalized([
            self.center[0] - toward * normal[0],
            self.center[1] - toward * normal[1],
            self.center[2] - toward * normal[2],
        ])?;
        let between = dot(cross(a, nearest), normal) >= 0.0 && dot(cross(nearest, b), normal) >= 0.0;
        (between && self.height(nearest) > self.floor).then_some(nearest)
    }

    /// Where the arc from `a` (above the floor) to `b` (below it) crosses the floor's plane.
    fn crossing(&self, a: Vector, b: Vector) -> Vector {
        let (ha, hb) = (self.height(a) - self.floor, self.height(b) - self.floor);
        let t = ha / (ha - hb);
        let chord = [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]), a[2] + t * (b[2] - a[2])];
        // The chord point's direction is on the arc; nudged up so it stays above the floor.
        let on_arc = normalized(chord).unwrap_or(a);
        if self.height(on_arc) >= self.floor { on_arc } else { a }
    }
}

impl Part {
    fn new(geometry: Geometry<f64>) -> Part {
        let anchor = coords(&geometry).first().copied().unwrap_or(Coord { x: 0.0, y: 0.0 });
        let vertices: Vec<Vector> = coords(&geometry).into_iter().map(unit).collect();
        match View::of(&vertices) {
            Some(view) => {
                let planar = map(&geometry, &|c| view.project(unit(c)));
                Part { view: Some(view), anchor, planar }
            }
            None => Part { view: None, anchor, planar: geometry },
        }
    }
}

/// A query geometry split in parts, each answered on its own plane.
#[derive(Debug, Clone)]
pub struct SphericalShape {
    pub geometry: Geometry<f64>,
    parts: Vec<Part>,
}

impl SphericalShape {
    pub fn new(geometry: Geometry<f64>) -> SphericalShape {
        let parts = components(&geometry).into_iter().map(Part::new).collect();
        SphericalShape { geometry, parts }
    }

    /// Whether `location` lies wholly inside the shape (one of its polygons), its boundary
    /// counting as inside for a point.
    pub fn contains(&self, location: &Geometry<f64>) -> bool {
        self.parts.iter().any(|part| match &part.view {
            None => part.planar.contains(location) || on_boundary(&part.planar, location),
            Some(view) => {
                let vertices = coords(location);
                if vertices.iter().any(|c| view.height(unit(*c)) < view.floor) {
                    return false;
                }
                let projected = map(location, &|c| view.project(unit(c)));
                part.planar.contains(&projected) || on_boundary(&part.planar, &projected)
            }
        })
    }

    /// Whether `location` meets the shape anywhere.
    pub fn intersects(&self, location: &Geometry<f64>) -> bool {
        self.parts.iter().any(|part| match &part.view {
            None => part.planar.intersects(location),
            Some(view) => {
                clipped(view, location).is_some_and(|projected| part.planar.intersects(&projected))
                    || holds_point(location, part.anchor)
            }
        })
    }
}

/// Whether an area of `location` holds the point on the sphere: a stored polygon so wide that
/// its whole boundary is beyond a query part's hemisphere may still cover the part.
fn holds_point(location: &Geometry<f64>, point: Coord<f64>) -> bool {
    components(location).into_iter().any(|component| {
        matches!(component, Geometry::Polygon(_))
            && SphericalShape::new(component).contains(&Geometry::Point(Point(point)))
    })
}

/// The geometry's single parts (a multi-geometry's members, a collection's, recursively).
fn components(geometry: &Geometry<f64>) -> Vec<Geometry<f64>> {
    match geometry {
        Geometry::MultiPolygon(m) => m.0.iter().cloned().map(Geometry::Polygon).collect(),
        Geometry::MultiLineString(m) => m.0.iter().cloned().map(Geometry::LineString).collect(),
        Geometry::MultiPoint(m) => m.0.iter().copied().map(Geometry::Point).collect(),
        Geometry::GeometryCollection(c) => c.0.iter().flat_map(components).collect(),
        other => vec![other.clone()],
    }
}

fn coords(geometry: &Geometry<f64>) -> Vec<Coord<f64>> {
    use geo::CoordsIter;
    geometry.coords_iter().collect()
}

fn map(geometry: &Geometry<f64>, f: &dyn Fn(Coord<f64>) -> Coord<f64>) -> Geometry<f64> {
    use geo::MapCoords;
    geometry.map_coords(f)
}

/// The part of a stored location above the view's floor, projected (`None`: nothing is).
fn clipped(view: &View, location: &Geometry<f64>) -> Option<Geometry<f64>> {
    let vertices = coords(location);
    if vertices.iter().all(|c| view.height(unit(*c)) >= view.floor) {
        return Some(map(location, &|c| view.project(unit(c))));
    }
    let pieces: Vec<Geometry<f64>> = components(location)
        .iter()
        .filter_map(|part| match part {
            Geometry::Point(p) => {
                (view.height(unit(p.0)) >= view.floor).then(|| Geometry::Point(Point(view.project(unit(p.0)))))
            }
            Geometry::Line(line) => clip_line(view, &[line.start, line.end]).map(Geometry::MultiLineString),
            Geometry::LineString(line) => clip_line(view, &line.0).map(Geometry::MultiLineString),
            Geometry::Polygon(polygon) => clip_polygon(view, polygon).map(Geometry::Polygon),
            Geometry::Rect(rect) => clip_polygon(view, &rect.to_polygon()).map(Geometry::Polygon),
            Geometry::Triangle(triangle) => clip_polygon(view, &triangle.to_polygon()).map(Geometry::Polygon),
            _ => None,
        })
        .collect();
    (!pieces.is_empty()).then_some(Geometry::GeometryCollection(geo::GeometryCollection(pieces)))
}

/// The runs of a polyline above the floor, each arc cut where it crosses it.
fn clip_line(view: &View, line: &[Coord<f64>]) -> Option<MultiLineString<f64>> {
    let mut runs: Vec<LineString<f64>> = Vec::new();
    let mut run: Vec<Coord<f64>> = Vec::new();
    for pair in line.windows(2) {
        let (a, b) = (unit(pair[0]), unit(pair[1]));
        let (above_a, above_b) = (view.height(a) >= view.floor, view.height(b) >= view.floor);
        match (above_a, above_b) {
            (true, true) => {
                if run.is_empty() {
                    run.push(view.project(a));
                }
                run.push(view.project(b));
            }
            (true, false) => {
                if run.is_empty() {
                    run.push(view.project(a));
                }
                run.push(view.project(view.crossing(a, b)));
                runs.push(LineString::new(std::mem::take(&mut run)));
            }
            (false, true) => {
                run = vec![view.project(view.crossing(b, a)), view.project(b)];
            }
            (false, false) => {
                if let Some(peak) = view.peak(a, b) {
                    let (enter, exit) = (view.crossing(peak, a), view.crossing(peak, b));
                    runs.push(LineString::new(vec![view.project(enter), view.project(peak), view.project(exit)]));
                }
            }
        }
    }
    if run.len() > 1 {
        runs.push(LineString::new(run));
    }
    if line.len() == 1 && view.height(unit(line[0])) >= view.floor {
        runs.push(LineString::new(vec![view.project(unit(line[0]))]));
    }
    (!runs.is_empty()).then(|| MultiLineString::new(runs))
}

/// A polygon's rings clipped to the part above the floor (Sutherland–Hodgman).
fn clip_polygon(view: &View, polygon: &Polygon<f64>) -> Option<Polygon<f64>> {
    let exterior = clip_ring(view, polygon.exterior())?;
    let holes = polygon.interiors().iter().filter_map(|ring| clip_ring(view, ring)).collect();
    Some(Polygon::new(exterior, holes))
}

fn clip_ring(view: &View, ring: &LineString<f64>) -> Option<LineString<f64>> {
    let points: Vec<Vector> = ring.0.iter().map(|c| unit(*c)).collect();
    let mut out: Vec<Coord<f64>> = Vec::new();
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let (above_a, above_b) = (view.height(a) >= view.floor, view.height(b) >= view.floor);
        if above_a {
            out.push(view.project(a));
        }
        if above_a != above_b {
            let crossing = if above_a { view.crossing(a, b) } else { view.crossing(b, a) };
            out.push(view.project(crossing));
        } else if !above_a && let Some(peak) = view.peak(a, b) {
            out.push(view.project(view.crossing(peak, a)));
            out.push(view.project(view.crossing(peak, b)));
        }
    }
    if out.len() < 3 {
        return None;
    }
    out.push(out[0]);
    Some(LineString::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polygon(coords: &[(f64, f64)]) -> Geometry<f64> {
        Geometry::Polygon(Polygon::new(LineString::from(coords.to_vec()), Vec::new()))
    }

    fn point(x: f64, y: f64) -> Geometry<f64> {
        Geometry::Point(Point::new(x, y))
    }

    #[test]
    fn edges_follow_great_circles() {
        // A wide band: its northern edge, from (-100, 40) to (-80, 40), bows north to
        // atan(tan 40° / cos 10°) = 40.44° at -90 on the sphere; on the plane it is the 40th
        // parallel.
        let band = polygon(&[(-100.0, 30.0), (-80.0, 30.0), (-80.0, 40.0), (-100.0, 40.0), (-100.0, 30.0)]);
        let shape = SphericalShape::new(band.clone());
        assert!(shape.contains(&point(-90.0, 40.3)));
        assert!(!band.contains(&point(-90.0, 40.3)));
        assert!(!shape.contains(&point(-90.0, 40.6)));
        // The southern edge bows north too (to 30.38°): just above the 30th parallel is out.
        assert!(!shape.contains(&point(-90.0, 30.3)));
        assert!(shape.contains(&point(-90.0, 35.0)));
        assert!(!shape.contains(&point(90.0, 35.0)));
        // A small polygon agrees with the plane.
        let paris = polygon(&[(2.2, 48.8), (2.5, 48.8), (2.5, 48.9), (2.2, 48.9), (2.2, 48.8)]);
        let small = SphericalShape::new(paris);
        assert!(small.contains(&point(2.3376, 48.8606)));
        assert!(!small.contains(&point(2.6, 48.85)));
    }

    #[test]
    fn lines_meet_shapes_on_the_sphere_and_far_sides_are_cut() {
        // A meridian segment from 40.2°N meets the band under its bowed northern edge, which
        // on the plane it would miss.
        let band = polygon(&[(-100.0, 30.0), (-80.0, 30.0), (-80.0, 40.0), (-100.0, 40.0), (-100.0, 30.0)]);
        let shape = SphericalShape::new(band.clone());
        let meridian = Geometry::LineString(LineString::from(vec![(-90.0, 40.2), (-90.0, 60.0)]));
        assert!(shape.intersects(&meridian));
        assert!(!band.intersects(&meridian));
        let north = Geometry::LineString(LineString::from(vec![(-90.0, 40.6), (-90.0, 60.0)]));
        assert!(!shape.intersects(&north));
        // A line reaching round to the far side still meets the shape where it passes.
        let long = Geometry::LineString(LineString::from(vec![(-90.0, 35.0), (90.0, 35.0)]));
        assert!(shape.intersects(&long));
        // A point query: a polygon around it meets it.
        let at = SphericalShape::new(point(-90.0, 35.0));
        let around = polygon(&[(-95.0, 30.0), (-85.0, 30.0), (-85.0, 40.0), (-95.0, 40.0), (-95.0, 30.0)]);
        assert!(at.intersects(&around));
        assert!(!at.intersects(&point(90.0, -35.0)));
        // Stored shapes whose vertices are all far beyond the query's hemisphere but that pass
        // over it (an arc rising between its ends) or cover it (a wide polygon).
        let small = SphericalShape::new(polygon(&[(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0)]));
        let equator = Geometry::LineString(LineString::from(vec![(-70.0, 0.0), (70.0, 0.0)]));
        assert!(small.intersects(&equator));
        let north = Geometry::LineString(LineString::from(vec![(-70.0, 5.0), (70.0, 5.0)]));
        assert!(small.intersects(&north) == north_arc_reaches(1.0));
        let wide = polygon(&[(-70.0, -10.0), (70.0, -10.0), (70.0, 10.0), (-70.0, 10.0), (-70.0, -10.0)]);
        assert!(SphericalShape::new(point(0.0, 5.0)).intersects(&wide));
        assert!(small.intersects(&wide));
        assert!(!SphericalShape::new(point(0.0, 40.0)).intersects(&wide));
    }

    /// Whether the arc from (-70, 5) to (70, 5) passes at or below latitude `top` at 0°: it
    /// bows north to atan(tan 5° / cos 70°) = 14.3°, so it does not.
    fn north_arc_reaches(top: f64) -> bool {
        (5.0f64.to_radians().tan() / 70.0f64.to_radians().cos()).atan().to_degrees() <= top
    }
}
