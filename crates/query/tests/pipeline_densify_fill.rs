//! Goal: `$densify` and `$fill` give the manual's results and MongoDB's parse errors.
//! Method: the manual's examples (hourly readings, coffee altitudes) over literal documents
//! through an in-memory source; whole field sequences compared.

use bson::{Bson, Document, doc};
use query::pipeline::{Context, InMemorySource, Pipeline};

fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>, i32> {
    let stages: Vec<Bson> = stages.into_iter().map(Bson::Document).collect();
    let pipeline = Pipeline::parse(&stages).map_err(|e| e.code())?;
    let source = InMemorySource::new();
    pipeline.run(input, &Context::new("test", &source)).map_err(|e| e.code())
}

fn field(out: &[Document], name: &str) -> Vec<Bson> {
    out.iter().map(|d| d.get(name).cloned().unwrap_or(Bson::Null)).collect()
}

fn hour(h: i64) -> Bson {
    Bson::DateTime(bson::DateTime::from_millis(1_621_296_000_000 + h * 3_600_000))
}

fn coffee() -> Vec<Document> {
    [
        (600, "Arabica Typica"),
        (750, "Arabica Typica"),
        (950, "Arabica Typica"),
        (1250, "Gesha"),
        (1700, "Gesha"),
        (1600, "Gesha"),
    ]
    .iter()
    .map(|(altitude, variety)| doc! {"altitude": *altitude, "variety": *variety})
    .collect()
}

fn ints(values: &[i32]) -> Vec<Bson> {
    values.iter().map(|v| Bson::Int32(*v)).collect()
}

#[test]
fn densify_hours_within_explicit_bounds() {
    let input: Vec<Document> = [0, 4, 8, 12].iter().map(|h| doc! {"timestamp": hour(*h), "temp": 12}).collect();
    let out = run(
        vec![doc! {"$densify": {"field": "timestamp", "range": {"step": 1, "unit": "hour", "bounds": [hour(0), hour(8)]}}}],
        input,
    )
    .unwrap();
    let hours: Vec<Bson> = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12].iter().map(|h| hour(*h)).collect();
    assert_eq!(field(&out, "timestamp"), hours);
    // Generated documents hold only the densified field.
    assert_eq!(out[1], doc! {"timestamp": hour(1)});
    assert_eq!(out[0].get("temp"), Some(&Bson::Int32(12)));
}

#[test]
fn densify_per_partition_and_over_the_full_range() {
    let out = run(
        vec![doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"], "range": {"bounds": "partition", "step": 200}}}],
        coffee(),
    )
    .unwrap();
    assert_eq!(field(&out, "altitude"), ints(&[600, 750, 800, 950, 1250, 1450, 1600, 1650, 1700]));
    assert_eq!(out[2], doc! {"variety": "Arabica Typica", "altitude": 800});

    let out = run(
        vec![doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"], "range": {"bounds": "full", "step": 200}}}],
        coffee(),
    )
    .unwrap();
    assert_eq!(
        field(&out, "altitude"),
        ints(&[600, 750, 800, 950, 1000, 1200, 1400, 1600, 600, 800, 1000, 1200, 1250, 1400, 1600, 1700])
    );
}

#[test]
fn densify_passes_nulls_and_refuses_other_types() {
    let input = vec![doc! {"x": 1}, doc! {"y": 1}, doc! {"x": 4}];
    let out = run(vec![doc! {"$densify": {"field": "x", "range": {"bounds": "full", "step": 1}}}], input).unwrap();
    assert_eq!(field(&out, "x"), vec![Bson::Null, Bson::Int32(1), Bson::Int32(2), Bson::Int32(3), Bson::Int32(4)]);
    let strings =
        run(vec![doc! {"$densify": {"field": "x", "range": {"bounds": "full", "step": 1}}}], vec![doc! {"x": "a"}]);
    assert_eq!(strings, Err(5733201));
    let dated =
        run(vec![doc! {"$densify": {"field": "x", "range": {"bounds": "full", "step": 1}}}], vec![doc! {"x": hour(1)}]);
    assert_eq!(dated, Err(6053601));
    // An explicit range over no documents is generated whole.
    let empty = run(vec![doc! {"$densify": {"field": "x", "range": {"bounds": [0, 3], "step": 1}}}], vec![]).unwrap();
    assert_eq!(field(&empty, "x"), ints(&[0, 1, 2]));
}

#[test]
fn densify_parse_errors() {
    let cases: Vec<(Bson, i32)> = vec![
        (Bson::Int32(1), 9),
        (doc! {"range": {"step": 1, "bounds": "full"}}.into(), 40414),
        (doc! {"field": "x"}.into(), 40414),
        (doc! {"field": "x", "range": {"step": 0, "bounds": "full"}}.into(), 5733401),
        (doc! {"field": "x", "range": {"step": 1.5, "unit": "hour", "bounds": "full"}}.into(), 6586400),
        (doc! {"field": "x", "range": {"step": 1, "bounds": "somewhere"}}.into(), 5946802),
        (doc! {"field": "x", "range": {"step": 1, "bounds": [3, 1]}}.into(), 5733402),
        (doc! {"field": "x", "range": {"step": 1, "bounds": [1]}}.into(), 5733403),
        (doc! {"field": "x", "range": {"step": 1, "bounds": [1, 2.5]}}.into(), 5876900),
        (doc! {"field": "x", "range": {"step": 1, "bounds": [hour(0), hour(1)]}}.into(), 5733410),
        (doc! {"field": "x", "range": {"step": 1, "bounds": "partition"}}.into(), 5733408),
        (doc! {"field": "x", "range": {"step": 1, "bounds": "full"}, "other": 1}.into(), 40415),
    ];
    for (spec, code) in cases {
        assert_eq!(run(vec![doc! {"$densify": spec.clone()}], vec![]).map(|_| ()), Err(code), "{spec}");
    }
}

#[test]
fn fill_by_method_and_by_value() {
    let input = vec![
        doc! {"t": 1, "a": 1, "b": Bson::Null, "p": "x"},
        doc! {"t": 2, "p": "x"},
        doc! {"t": 3, "a": 3, "b": 5, "p": "x"},
        doc! {"t": 4, "p": "x"},
        doc! {"t": 1, "b": 7, "p": "y"},
        doc! {"t": 2, "p": "y"},
    ];
    let out = run(
        vec![doc! {"$fill": {
            "sortBy": {"t": 1},
            "partitionByFields": ["p"],
            "output": {"a": {"method": "linear"}, "b": {"method": "locf"}, "c": {"value": {"$multiply": ["$t", 10]}}},
        }}],
        input,
    )
    .unwrap();
    assert_eq!(
        field(&out, "a"),
        vec![Bson::Int32(1), Bson::Double(2.0), Bson::Int32(3), Bson::Null, Bson::Null, Bson::Null]
    );
    assert_eq!(
        field(&out, "b"),
        vec![Bson::Null, Bson::Null, Bson::Int32(5), Bson::Int32(5), Bson::Int32(7), Bson::Int32(7)]
    );
    assert_eq!(field(&out, "c"), ints(&[10, 20, 30, 40, 10, 20]));
    assert!(out.iter().all(|d| d.keys().all(|k| !k.starts_with("__"))), "{out:?}");
}

#[test]
fn fill_parse_errors() {
    let cases: Vec<(Document, i32)> = vec![
        (doc! {"sortBy": {"t": 1}}, 40414),
        (doc! {"output": {}}, 6050203),
        (doc! {"output": {"a": 1}}, 6050200),
        (doc! {"output": {"a": {"method": "locf", "value": 1}}}, 6050201),
        (doc! {"output": {"a": {"method": "cubic"}}}, 6050202),
        (doc! {"partitionBy": "$p", "partitionByFields": ["p"], "output": {"a": {"value": 1}}}, 6050204),
        (doc! {"output": {"a": {"method": "linear"}}}, 605001),
    ];
    for (spec, code) in cases {
        assert_eq!(run(vec![doc! {"$fill": spec.clone()}], vec![]).map(|_| ()), Err(code), "{spec}");
    }
}

#[test]
fn densify_full_reaches_the_greatest_value_and_missing_is_null() {
    let input = vec![doc! {"p": "a", "x": 0}, doc! {"p": "b", "x": 2}];
    let spec = doc! {"$densify": {"field": "x", "partitionByFields": ["p"], "range": {"bounds": "full", "step": 1}}};
    let out = run(vec![spec], input).unwrap();
    assert_eq!(field(&out, "x"), ints(&[0, 1, 2, 0, 1, 2]));
    assert_eq!(
        field(&out, "p"),
        ["a", "a", "a", "b", "b", "b"].iter().map(|p| Bson::String((*p).into())).collect::<Vec<_>>()
    );
    // Missing and null partition values are one partition, as the sort puts them together.
    let mixed = vec![doc! {"x": 0}, doc! {"p": Bson::Null, "x": 1}, doc! {"x": 3}];
    let spec = doc! {"$densify": {"field": "x", "partitionByFields": ["p"], "range": {"bounds": [0, 4], "step": 1}}};
    assert_eq!(field(&run(vec![spec], mixed).unwrap(), "x"), ints(&[0, 1, 2, 3]));
}
