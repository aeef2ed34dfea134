//! Goal: `$setWindowFields` gives MongoDB's results for each window function and window kind,
//! and its parse errors.
//! Method: the manual's shapes over small literal inputs, whole outputs compared; a proptest
//! compares `$sum`, `$push`, `$min` over random document and range windows with a model that
//! recomputes each window from scratch (proptest prints the failing case and its seed).

use bson::{Bson, Document, doc};
use proptest::prelude::*;
use query::pipeline::{Context, InMemorySource, Pipeline};

fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>, i32> {
    let stages: Vec<Bson> = stages.into_iter().map(Bson::Document).collect();
    let pipeline = Pipeline::parse(&stages).map_err(|e| e.code())?;
    let source = InMemorySource::new();
    let context = Context::new("test", &source);
    pipeline.run(input, &context).map_err(|e| e.code())
}

fn window(spec: Document) -> Vec<Document> {
    vec![doc! {"$setWindowFields": spec}]
}

/// The manual's cake sales: two states, dates and quantities.
fn cakes() -> Vec<Document> {
    let day = |d: i64| Bson::DateTime(bson::DateTime::from_millis(d * 86_400_000));
    vec![
        doc! {"_id": 0, "type": "chocolate", "date": day(100), "state": "CA", "price": 13, "quantity": 120},
        doc! {"_id": 1, "type": "chocolate", "date": day(101), "state": "WA", "price": 14, "quantity": 140},
        doc! {"_id": 2, "type": "vanilla", "date": day(102), "state": "CA", "price": 12, "quantity": 145},
        doc! {"_id": 3, "type": "vanilla", "date": day(103), "state": "WA", "price": 13, "quantity": 104},
        doc! {"_id": 4, "type": "strawberry", "date": day(104), "state": "CA", "price": 41, "quantity": 162},
        doc! {"_id": 5, "type": "strawberry", "date": day(110), "state": "WA", "price": 43, "quantity": 134},
    ]
}

fn field(out: &[Document], name: &str) -> Vec<Bson> {
    out.iter().map(|d| d.get(name).cloned().unwrap_or(Bson::Null)).collect()
}

fn ids(out: &[Document]) -> Vec<Bson> {
    field(out, "_id")
}

fn ints(values: &[i32]) -> Vec<Bson> {
    values.iter().map(|v| Bson::Int32(*v)).collect()
}

#[test]
fn running_totals_per_partition_in_sort_order() {
    let out = run(
        window(doc! {
            "partitionBy": "$state",
            "sortBy": {"date": 1},
            "output": {"running": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}
        }),
        cakes(),
    )
    .unwrap();
    // CA's partition sorts before WA's; each in date order; the hidden partition field is gone.
    assert_eq!(ids(&out), ints(&[0, 2, 4, 1, 3, 5]));
    assert_eq!(field(&out, "running"), ints(&[120, 265, 427, 140, 244, 378]));
    assert!(out.iter().all(|d| d.len() == 7), "{out:?}");
}

#[test]
fn sliding_document_windows_and_the_whole_partition() {
    let out = run(
        window(doc! {
            "partitionBy": "$state",
            "sortBy": {"date": 1},
            "output": {
                "avg": {"$avg": "$quantity", "window": {"documents": [-1, 0]}},
                "total": {"$sum": "$quantity"},
                "next": {"$push": "$_id", "window": {"documents": [1, 1]}},
                "n": {"$count": {}},
            }
        }),
        cakes(),
    )
    .unwrap();
    assert_eq!(
        field(&out, "avg"),
        vec![120.0, 132.5, 153.5, 140.0, 122.0, 119.0].into_iter().map(Bson::Double).collect::<Vec<_>>()
    );
    assert_eq!(field(&out, "total"), ints(&[427, 427, 427, 378, 378, 378]));
    let next: Vec<Bson> = field(&out, "next");
    assert_eq!(next[0], Bson::Array(ints(&[2])));
    assert_eq!(next[2], Bson::Array(vec![]));
    assert_eq!(field(&out, "n"), ints(&[3, 3, 3, 3, 3, 3]));
}

#[test]
fn range_windows_by_value_and_by_time() {
    let input: Vec<Document> = [1, 2, 4, 7, 8].iter().map(|x| doc! {"x": *x}).collect();
    let out = run(
        window(doc! {"sortBy": {"x": 1}, "output": {"near": {"$push": "$x", "window": {"range": [-1, 1]}}}}),
        input,
    )
    .unwrap();
    let expected: Vec<Bson> =
        [vec![1, 2], vec![1, 2], vec![4], vec![7, 8], vec![7, 8]].iter().map(|v| Bson::Array(ints(v))).collect();
    assert_eq!(field(&out, "near"), expected);

    let out = run(
        window(doc! {
            "sortBy": {"date": 1},
            "output": {"lastTwoDays": {"$sum": "$quantity", "window": {"range": [-1, "current"], "unit": "day"}}}
        }),
        cakes(),
    )
    .unwrap();
    assert_eq!(field(&out, "lastTwoDays"), ints(&[120, 260, 285, 249, 266, 134]));
    // A range needs numbers (or dates with a unit) in its one ascending sortBy field.
    let bad =
        run(window(doc! {"sortBy": {"type": 1}, "output": {"s": {"$sum": 1, "window": {"range": [-1, 1]}}}}), cakes());
    assert_eq!(bad, Err(5429414));
    let descending = window(doc! {"sortBy": {"x": -1}, "output": {"s": {"$sum": 1, "window": {"range": [-1, 1]}}}});
    assert_eq!(run(descending, vec![]), Err(8947401));
}

#[test]
fn ranks_shift_and_document_numbers() {
    let input: Vec<Document> =
        [(1, 10), (2, 20), (3, 20), (4, 30)].iter().map(|(id, score)| doc! {"_id": *id, "score": *score}).collect();
    let out = run(
        window(doc! {
            "sortBy": {"score": -1},
            "output": {
                "rank": {"$rank": {}},
                "dense": {"$denseRank": {}},
                "number": {"$documentNumber": {}},
                "previous": {"$shift": {"output": "$_id", "by": -1, "default": "none"}},
            }
        }),
        input,
    )
    .unwrap();
    assert_eq!(ids(&out), ints(&[4, 2, 3, 1]));
    assert_eq!(field(&out, "rank"), ints(&[1, 2, 2, 4]));
    assert_eq!(field(&out, "dense"), ints(&[1, 2, 2, 3]));
    assert_eq!(field(&out, "number"), ints(&[1, 2, 3, 4]));
    assert_eq!(
        field(&out, "previous"),
        vec![Bson::String("none".into()), Bson::Int32(4), Bson::Int32(2), Bson::Int32(3)]
    );
}

#[test]
fn gap_filling_and_moving_averages() {
    let input = vec![
        doc! {"t": 1, "v": 10},
        doc! {"t": 2, "v": Bson::Null},
        doc! {"t": 4},
        doc! {"t": 5, "v": 40},
        doc! {"t": 6},
    ];
    let out = run(
        window(doc! {
            "sortBy": {"t": 1},
            "output": {
                "locf": {"$locf": "$v"},
                "linear": {"$linearFill": "$v"},
                "ema": {"$expMovingAvg": {"input": "$v", "alpha": 0.5}},
            }
        }),
        input,
    )
    .unwrap();
    assert_eq!(field(&out, "locf"), ints(&[10, 10, 10, 40, 40]));
    assert_eq!(
        field(&out, "linear"),
        vec![Bson::Int32(10), Bson::Double(17.5), Bson::Double(32.5), Bson::Int32(40), Bson::Null]
    );
    assert_eq!(
        field(&out, "ema"),
        vec![10.0, 10.0, 10.0, 25.0, 25.0].into_iter().map(Bson::Double).collect::<Vec<_>>()
    );
}

#[test]
fn derivative_integral_and_covariance() {
    let input: Vec<Document> =
        [(0, 0.0), (1, 2.0), (2, 6.0), (4, 6.0)].iter().map(|(t, y)| doc! {"t": *t, "y": *y}).collect();
    let out = run(
        window(doc! {
            "sortBy": {"t": 1},
            "output": {
                "speed": {"$derivative": {"input": "$y"}, "window": {"documents": [-1, "current"]}},
                "area": {"$integral": {"input": "$y"}, "window": {"documents": ["unbounded", "current"]}},
                "cov": {"$covariancePop": ["$t", "$y"]},
            }
        }),
        input,
    )
    .unwrap();
    assert_eq!(field(&out, "speed"), vec![Bson::Null, Bson::Double(2.0), Bson::Double(4.0), Bson::Double(0.0)]);
    assert_eq!(field(&out, "area"), vec![0.0, 1.0, 5.0, 17.0].into_iter().map(Bson::Double).collect::<Vec<_>>());
    // Mean t = 1.75, mean y = 3.5; Σ(t−1.75)(y−3.5) = 13.5 over 4.
    let cov = field(&out, "cov")[0].as_f64().unwrap_or(f64::NAN);
    assert!((cov - 3.375).abs() < 1e-12, "{cov}");
    // $derivative needs explicit bounds; a date sortBy needs a unit.
    let no_bounds = window(doc! {"sortBy": {"t": 1}, "output": {"d": {"$derivative": {"input": "$y"}}}});
    assert_eq!(run(no_bounds, vec![]), Err(9));
    let dated = run(
        window(
            doc! {"sortBy": {"date": 1}, "output": {"d": {"$derivative": {"input": "$quantity"}, "window": {"documents": [-1, 0]}}}},
        ),
        cakes(),
    );
    assert_eq!(dated, Err(5624901));
}

#[test]
fn percentiles_and_n_accumulators_over_windows() {
    let input: Vec<Document> = (1..=5).map(|x| doc! {"x": x}).collect();
    let out = run(
        window(doc! {
            "sortBy": {"x": 1},
            "output": {
                "median": {"$median": {"input": "$x", "method": "approximate"}},
                "p": {"$percentile": {"input": "$x", "p": [0.2, 1.0], "method": "discrete"}, "window": {"documents": [-1, 1]}},
                "top2": {"$topN": {"n": 2, "sortBy": {"x": -1}, "output": "$x"}, "window": {"documents": ["unbounded", "current"]}},
            }
        }),
        input,
    )
    .unwrap();
    assert_eq!(field(&out, "median"), vec![Bson::Double(3.0); 5]);
    assert_eq!(field(&out, "p")[0], Bson::Array(vec![Bson::Double(1.0), Bson::Double(2.0)]));
    assert_eq!(field(&out, "p")[2], Bson::Array(vec![Bson::Double(2.0), Bson::Double(4.0)]));
    assert_eq!(field(&out, "top2")[3], Bson::Array(ints(&[4, 3])));
}

#[test]
fn parse_errors() {
    let cases: Vec<(Document, i32)> = vec![
        (doc! {"output": {"a": {"$sum": 1, "window": [0, 1]}}}, 9),
        (doc! {"output": {"a": {"$summ": 1}}}, 9),
        (doc! {"output": {"a": {"sum": 1}}}, 9),
        (doc! {"output": {"a": {"$sum": 1, "window": {"documents": [0, 1]}}}}, 5339901),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [1, 0]}}}}, 5339900),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0.5, 1]}}}}, 9),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": ["now", 1]}}}}, 9),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1], "documents": [0, 1]}}}}, 9),
        (doc! {"output": {"a": {"$rank": {}}}}, 5371602),
        (doc! {"sortBy": {"x": 1, "y": 1}, "output": {"a": {"$rank": {}}}}, 5371602),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$rank": 1}}}, 5371603),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$locf": "$x", "window": {}}}}, 9),
        (doc! {"output": {"a": {"$shift": {"output": "$x", "by": 1}}}}, 9),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$shift": {"output": "$x", "by": 1.5}}}}, 9),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x", "N": 0}}}}, 9),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$expMovingAvg": {"input": "$x", "alpha": 1}}}}, 9),
        (
            doc! {"sortBy": {"x": 1}, "output": {"a": {"$percentile": {"input": "$x", "p": [1.5], "method": "approximate"}}}},
            7750303,
        ),
        (doc! {"sortBy": {"x": 1}, "output": {"a": {"$median": {"input": "$x"}}}}, 40414),
        (doc! {"output": {"$a": {"$sum": 1}}}, 16410),
        (doc! {"output": {"a": {"$sum": 1}}, "other": 1}, 40415),
        (doc! {"partitionBy": "$x"}, 40414),
    ];
    for (spec, code) in cases {
        assert_eq!(run(window(spec.clone()), vec![]).map(|_| ()), Err(code), "{spec}");
    }
    let arrays = run(window(doc! {"partitionBy": "$tags", "output": {"n": {"$count": {}}}}), vec![doc! {"tags": [1]}]);
    assert_eq!(arrays, Err(14));
}

#[test]
fn no_partition_and_no_sort_keeps_input_order() {
    let input: Vec<Document> = [3, 1, 2].iter().map(|x| doc! {"x": *x}).collect();
    let out = run(window(doc! {"output": {"all": {"$push": "$x"}, "m": {"$max": "$x"}}}), input).unwrap();
    assert_eq!(field(&out, "x"), ints(&[3, 1, 2]));
    assert_eq!(field(&out, "all")[0], Bson::Array(ints(&[3, 1, 2])));
    assert_eq!(field(&out, "m"), ints(&[3, 3, 3]));
    // Missing and null partition values are one partition.
    let mixed = vec![doc! {"p": Bson::Null, "x": 1}, doc! {"x": 2}, doc! {"p": 1, "x": 3}];
    let out = run(window(doc! {"partitionBy": "$p", "output": {"n": {"$count": {}}}}), mixed).unwrap();
    assert_eq!(field(&out, "n"), ints(&[2, 2, 1]));
}

/// One random window: documents `[lower, upper]` offsets or a numeric range.
#[derive(Debug, Clone)]
enum Window {
    Documents(Option<i64>, Option<i64>),
    Range(Option<i64>, Option<i64>),
}

fn bound() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![Just(None), (-3i64..4).prop_map(Some)]
}

fn random_window() -> impl Strategy<Value = Window> {
    prop_oneof![
        (bound(), bound()).prop_map(|(a, b)| Window::Documents(a, b)),
        (bound(), bound()).prop_map(|(a, b)| Window::Range(a, b)),
    ]
    .prop_filter("lower <= upper", |w| match w {
        Window::Documents(Some(a), Some(b)) | Window::Range(Some(a), Some(b)) => a <= b,
        _ => true,
    })
}

fn bound_bson(bound: Option<i64>) -> Bson {
    bound.map_or(Bson::String("unbounded".into()), Bson::Int64)
}

/// The model: each document's window found by scanning the sorted partition.
fn model(xs: &[i64], window: &Window) -> Vec<(i64, Vec<i64>)> {
    let mut sorted = xs.to_vec();
    sorted.sort();
    (0..sorted.len())
        .map(|i| {
            let members: Vec<i64> = (0..sorted.len())
                .filter(|&j| match window {
                    Window::Documents(a, b) => {
                        let offset = j as i64 - i as i64;
                        a.is_none_or(|a| offset >= a) && b.is_none_or(|b| offset <= b)
                    }
                    Window::Range(a, b) => {
                        let delta = sorted[j] - sorted[i];
                        a.is_none_or(|a| delta >= a) && b.is_none_or(|b| delta <= b)
                    }
                })
                .map(|j| sorted[j])
                .collect();
            (sorted[i], members)
        })
        .collect()
}

proptest! {
    #[test]
    fn windows_agree_with_a_model(xs in prop::collection::vec(0i64..12, 0..25), window in random_window()) {
        let spec = match &window {
            Window::Documents(a, b) => doc! {"documents": [bound_bson(*a), bound_bson(*b)]},
            Window::Range(a, b) => doc! {"range": [bound_bson(*a), bound_bson(*b)]},
        };
        let input: Vec<Document> = xs.iter().map(|x| doc! {"x": *x}).collect();
        let out = run(
            window_stage(spec),
            input,
        ).unwrap_or_else(|code| panic!("error {code}"));
        let expected = model(&xs, &window);
        prop_assert_eq!(out.len(), expected.len());
        for (document, (x, members)) in out.iter().zip(expected) {
            prop_assert_eq!(document.get_i64("x").ok(), Some(x));
            let pushed: Vec<i64> = document.get_array("all").map(|a| a.iter().filter_map(Bson::as_i64).collect()).unwrap_or_default();
            prop_assert_eq!(&pushed, &members, "window of {}", x);
            let sum: i64 = members.iter().sum();
            prop_assert_eq!(document.get("sum").and_then(|s| s.as_i64().or(s.as_i32().map(i64::from))), Some(sum));
            let min = members.iter().min().map_or(Bson::Null, |m| Bson::Int64(*m));
            prop_assert_eq!(document.get("min").cloned(), Some(min));
        }
    }
}

fn window_stage(spec: Document) -> Vec<Document> {
    window(doc! {
        "sortBy": {"x": 1},
        "output": {
            "all": {"$push": "$x", "window": spec.clone()},
            "sum": {"$sum": "$x", "window": spec.clone()},
            "min": {"$min": "$x", "window": spec},
        }
    })
}

#[test]
fn percentile_and_median_in_group_and_as_expressions() {
    let input: Vec<Document> = [("a", 1), ("a", 3), ("a", 2), ("b", 10)]
        .iter()
        .map(|(k, v)| doc! {"k": *k, "v": *v, "vs": [*v, 5, "x"]})
        .collect();
    let out = run(
        vec![
            doc! {"$group": {
                "_id": "$k",
                "median": {"$median": {"input": "$v", "method": "approximate"}},
                "p": {"$percentile": {"input": "$v", "p": [0.0, 0.5, 1.0], "method": "continuous"}},
                "none": {"$percentile": {"input": "$missing", "p": [0.5], "method": "discrete"}},
            }},
            doc! {"$sort": {"_id": 1}},
        ],
        input.clone(),
    )
    .unwrap();
    assert_eq!(field(&out, "median"), vec![Bson::Double(2.0), Bson::Double(10.0)]);
    assert_eq!(field(&out, "p")[0], Bson::Array(vec![Bson::Double(1.0), Bson::Double(2.0), Bson::Double(3.0)]));
    assert_eq!(field(&out, "none")[0], Bson::Array(vec![Bson::Null]));
    let out = run(
        vec![doc! {"$project": {
            "_id": 0,
            "m": {"$median": {"input": "$vs", "method": "approximate"}},
            "scalar": {"$percentile": {"input": "$v", "p": [0.9], "method": "approximate"}},
        }}],
        input,
    )
    .unwrap();
    // [1, 5] (the string left out) → the lower middle for a discrete median.
    assert_eq!(out[0], doc! {"m": 1.0, "scalar": [1.0]});
    assert_eq!(out[3], doc! {"m": 5.0, "scalar": [10.0]});
}

#[test]
fn functions_see_documents_without_the_partition_field_and_results_are_bounded() {
    let input: Vec<Document> = (0..4).map(|i| doc! {"g": i % 2, "t": i}).collect();
    let out = run(
        window(doc! {
            "partitionBy": "$g",
            "sortBy": {"t": 1},
            "output": {"previous": {"$shift": {"output": "$$ROOT", "by": -1}}, "all": {"$push": "$$ROOT"}},
        }),
        input.clone(),
    )
    .unwrap();
    assert_eq!(out[1].get_document("previous").unwrap(), &doc! {"g": 0, "t": 0});
    assert!(out.iter().all(|d| !d.to_string().contains("__strata")), "{out:?}");
    // A whole-partition $push gives every document the partition: bounded by the limit.
    let stages: Vec<Bson> =
        window(doc! {"output": {"all": {"$push": "$$ROOT"}}}).into_iter().map(Bson::Document).collect();
    let pipeline = Pipeline::parse(&stages).unwrap();
    let source = InMemorySource::new();
    let limits = query::pipeline::MemoryLimits { sort_bytes: 1 << 20, group_bytes: 4096 };
    let context = Context::new("test", &source).with_limits(limits);
    let many: Vec<Document> = (0..200).map(|i| doc! {"i": i}).collect();
    assert_eq!(pipeline.run(many, &context).map(|_| ()).map_err(|e| e.code()), Err(5414201));
}
