//! Goal: the blocking stages that consume their input document by document (`$group`,
//! `$count`, `$sortByCount`, `$bucket`, `$bucketAuto`, `$sort`) give MongoDB's answers, hold
//! only their own state, fail with 292 past their memory limit without `allowDiskUse`, and give
//! exactly the in-memory answer (order and types included) when they spill.
//! Method: pipelines over generated documents (a lazy input of many documents where memory is
//! the point, seeded random documents where equivalence is), with tiny `MemoryLimits` and the
//! `InMemorySpill` store standing in for `allowDiskUse`.

use std::sync::Arc;

use bson::{Bson, Document, doc};
use query::pipeline::{Context, InMemorySource, InMemorySpill, MemoryLimits, Pipeline};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TINY: MemoryLimits = MemoryLimits { sort_bytes: 8 * 1024, group_bytes: 8 * 1024 };

/// How a run may use memory.
#[derive(Clone, Copy)]
enum Memory {
    /// MongoDB's default limits, no spilling.
    Default,
    /// [`TINY`] limits, no spilling (`allowDiskUse: false`).
    Tiny,
    /// [`TINY`] limits, spilling to memory (`allowDiskUse: true`).
    TinySpilling,
}

fn run_stream(
    stages: &[Document],
    input: impl Iterator<Item = Document> + Send,
    memory: Memory,
) -> Result<Vec<Document>, (i32, String)> {
    let stages: Vec<Bson> = stages.iter().cloned().map(Bson::Document).collect();
    let pipeline = Pipeline::parse(&stages).map_err(|e| (e.code(), e.code_name().to_string()))?;
    let source = InMemorySource::new();
    let context = match memory {
        Memory::Default => Context::new("test", &source),
        Memory::Tiny => Context::new("test", &source).with_limits(TINY),
        Memory::TinySpilling => Context::new("test", &source).with_limits(TINY).with_spill(Arc::new(InMemorySpill)),
    };
    pipeline
        .stream(Box::new(input.map(Ok)), &context)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (e.code(), e.code_name().to_string()))
}

fn run(stages: &[Document], input: &[Document], memory: Memory) -> Result<Vec<Document>, (i32, String)> {
    run_stream(stages, input.iter().cloned(), memory)
}

fn exceeded() -> (i32, String) {
    (292, "QueryExceededMemoryLimitNoDiskUseAllowed".to_string())
}

/// Goal: the grouping semantics the streaming `$group` must keep: one group per value under
/// MongoDB equality with the first-seen `_id`, missing as null, groups in first-seen order,
/// accumulators fed in arrival order. Method: a hand-checked answer, in memory and spilled.
#[test]
fn group_keeps_first_seen_order_and_value_equality() {
    let input = vec![
        doc! {"k": 2, "v": "a"},
        doc! {"k": 1, "v": "b"},
        doc! {"v": "c"},
        doc! {"k": 1.0, "v": "d"},
        doc! {"k": Bson::Int64(1), "v": "e"},
        doc! {"k": Bson::Null, "v": "f"},
        doc! {"k": 2},
    ];
    let stages = [doc! {"$group": {
        "_id": "$k",
        "n": {"$sum": 1},
        "first": {"$first": "$v"},
        "last": {"$last": "$v"},
        "all": {"$push": "$v"},
    }}];
    let expected = vec![
        doc! {"_id": 2, "n": 2, "first": "a", "last": Bson::Null, "all": ["a"]},
        doc! {"_id": 1, "n": 3, "first": "b", "last": "e", "all": ["b", "d", "e"]},
        doc! {"_id": Bson::Null, "n": 2, "first": "c", "last": "f", "all": ["c", "f"]},
    ];
    assert_eq!(run(&stages, &input, Memory::Default), Ok(expected.clone()));
    let many_groups: Vec<Document> = (0..2_000).map(|i| doc! {"k": format!("filler {i}"), "v": i}).collect();
    let spilled_input: Vec<Document> = many_groups.iter().cloned().chain(input).collect();
    let spilled = run(&stages, &spilled_input, Memory::TinySpilling).unwrap_or_default();
    assert_eq!(spilled.len(), 2_003);
    assert_eq!(spilled[2_000..].to_vec(), expected, "groups first seen after spilling started");
}

/// Goal: `$count` and a constant-key `$group` (count_documents) hold nothing per document.
/// Method: 300,000 lazily generated documents through a group limit of 8 KiB, without
/// spilling: holding the documents (or one group per document) would fail with 292.
#[test]
fn count_and_few_groups_run_in_constant_memory() {
    let documents = || (0..300_000).map(|i| doc! {"_id": i, "k": i % 10, "pad": "x".repeat(50)});
    let count_documents = [doc! {"$match": {}}, doc! {"$group": {"_id": 1, "n": {"$sum": 1}}}];
    assert_eq!(run_stream(&count_documents, documents(), Memory::Tiny), Ok(vec![doc! {"_id": 1, "n": 300_000}]));
    assert_eq!(run_stream(&[doc! {"$count": "n"}], documents(), Memory::Tiny), Ok(vec![doc! {"n": 300_000}]));
    let by_key =
        run_stream(&[doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}}], documents(), Memory::Tiny).unwrap_or_default();
    let expected: Vec<Document> = (0..10).map(|k| doc! {"_id": k, "n": 30_000}).collect();
    assert_eq!(by_key, expected);
    let by_count = run_stream(&[doc! {"$sortByCount": "$k"}], documents(), Memory::Tiny).unwrap_or_default();
    assert_eq!(by_count.len(), 10);
    let bucket = doc! {"$bucket": {"groupBy": "$_id", "boundaries": [0, 100_000, 300_000]}};
    let buckets = run_stream(&[bucket], documents(), Memory::Tiny);
    assert_eq!(buckets, Ok(vec![doc! {"_id": 0, "count": 100_000}, doc! {"_id": 100_000, "count": 200_000}]));
}

/// Goal: `$count`'s answers: nothing for no input, an int when it fits, errors from upstream
/// passed on. Method: direct runs.
#[test]
fn count_semantics() {
    assert_eq!(run(&[doc! {"$count": "n"}], &[], Memory::Default), Ok(vec![]));
    let three = [doc! {"a": 1}, doc! {"a": 2}, doc! {"a": 3}];
    assert_eq!(run(&[doc! {"$count": "total"}], &three, Memory::Default), Ok(vec![doc! {"total": 3}]));
    let failing = [doc! {"$project": {"x": {"$divide": [1, "$a"]}}}, doc! {"$count": "n"}];
    assert_eq!(run(&failing, &[doc! {"a": 1}, doc! {"a": 0}], Memory::Default).map_err(|(code, _)| code), Err(2));
}

/// Goal: past the limit, `$group`, `$sort` and `$bucketAuto` fail with 292 without spilling.
/// Method: 2,000 distinct keys / documents against 8 KiB limits.
#[test]
fn blocking_stages_past_the_limit_fail_with_292() {
    let input: Vec<Document> = (0..2_000).map(|i| doc! {"k": i, "pad": "x".repeat(20)}).collect();
    let stages = [
        doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}},
        doc! {"$sort": {"k": -1}},
        doc! {"$bucketAuto": {"groupBy": "$k", "buckets": 4}},
        doc! {"$sortByCount": "$k"},
    ];
    for stage in stages {
        assert_eq!(run(std::slice::from_ref(&stage), &input, Memory::Tiny), Err(exceeded()), "{stage}");
        assert!(run(std::slice::from_ref(&stage), &input, Memory::Default).is_ok(), "{stage}");
    }
}

/// Seeded documents whose keys mix types, equal numbers of different types, missing, null,
/// documents and arrays; values mix numbers, strings and missing.
fn random_documents(seed: u64, n: usize, distinct_keys: i64) -> Vec<Document> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let k = rng.gen_range(0..distinct_keys);
            let key = match rng.gen_range(0..8) {
                0 => Some(Bson::Double(k as f64)),
                1 => Some(Bson::Int64(k)),
                2 => Some(Bson::String(format!("s{}", k % 50))),
                3 => None,
                4 => Some(Bson::Null),
                5 => Some(Bson::Document(doc! {"x": k % 7})),
                _ => Some(Bson::Int32(k as i32)),
            };
            let mut document = doc! {"_id": i as i64};
            if let Some(key) = key {
                document.insert("k", key);
            }
            match rng.gen_range(0..4) {
                0 => {}
                1 => {
                    document.insert("v", Bson::String(format!("v{}", rng.gen_range(0..5))));
                }
                2 => {
                    document.insert("v", Bson::Double(rng.gen_range(-10.0..10.0)));
                }
                _ => {
                    document.insert("v", Bson::Int32(rng.gen_range(-100..100)));
                }
            }
            document
        })
        .collect()
}

/// Goal: spilling changes nothing in the answer: same groups, same order, same accumulator
/// values and types, same sort order (stable on equal keys), same buckets.
/// Method: seeded random documents through each stage in memory and spilled; the seed is
/// printed to replay a failure.
#[test]
fn spilling_gives_the_in_memory_answer() {
    let group = doc! {"$group": {
        "_id": "$k",
        "n": {"$sum": 1},
        "sum": {"$sum": "$v"},
        "avg": {"$avg": "$v"},
        "min": {"$min": "$v"},
        "max": {"$max": "$v"},
        "first": {"$first": "$v"},
        "last": {"$last": "$v"},
        "all": {"$push": "$v"},
        "set": {"$addToSet": "$v"},
        "sd": {"$stdDevPop": "$v"},
    }};
    let pipelines = [
        vec![group],
        vec![doc! {"$sort": {"v": 1}}],
        vec![doc! {"$sort": {"k": -1, "v": 1}}],
        vec![doc! {"$sortByCount": "$k"}],
        vec![
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 7, "output": {"n": {"$sum": 1}, "ids": {"$push": "$_id"}}}},
        ],
    ];
    for seed in 0..4u64 {
        let input = random_documents(seed, 3_000, 400);
        for stages in &pipelines {
            let in_memory = run(stages, &input, Memory::Default);
            assert!(in_memory.is_ok(), "seed {seed}: {stages:?}: {in_memory:?}");
            assert_eq!(
                run(stages, &input, Memory::Tiny),
                Err(exceeded()),
                "seed {seed}: {stages:?} must pass the limit"
            );
            assert_eq!(run(stages, &input, Memory::TinySpilling), in_memory, "seed {seed}: {stages:?}");
        }
    }
}

/// Goal: under a collation, `$group` tells keys apart by the collation (each group named by the
/// first key met), the same in memory and spilled.
/// Method: 3,000 documents whose keys are 40 words in three spellings each, grouped under a
/// case-insensitive collation (40 groups) and without one (120); past a tiny limit, spilled.
#[test]
fn group_keys_compare_under_the_collation_in_memory_and_spilled() {
    let collation =
        query::collation::Collation::parse(&Bson::Document(doc! {"locale": "en", "strength": 2})).expect("collation");
    let spellings = |word: usize, i: usize| match i % 3 {
        0 => format!("word{word}"),
        1 => format!("WORD{word}"),
        _ => format!("Word{word}"),
    };
    // Each word's documents together, so that most groups first appear after the limit is met.
    let input: Vec<Document> = (0..3_000).map(|i| doc! {"_id": i as i64, "k": spellings(i / 75, i)}).collect();
    let stages: Vec<Bson> =
        vec![Bson::Document(doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "all": {"$push": "$_id"}}})];
    let pipeline = Pipeline::parse(&stages).expect("pipeline");
    let source = InMemorySource::new();
    let run = |context: Context<'_>| -> Vec<Document> {
        pipeline.stream(Box::new(input.iter().cloned().map(Ok)), &context).collect::<Result<_, _>>().expect("run")
    };
    let collated = run(Context::new("test", &source).with_collation(Some(collation.clone())));
    assert_eq!(collated.len(), 40, "one group per word, whatever its case");
    for group in &collated {
        assert_eq!(group.get_i32("n").ok(), Some(75));
        let first = group.get_array("all").expect("all")[0].as_i64().expect("id") as usize;
        assert_eq!(group.get_str("_id").ok(), input[first].get_str("k").ok(), "named by the first key met");
    }
    let spilled = run(Context::new("test", &source)
        .with_limits(TINY)
        .with_spill(Arc::new(InMemorySpill))
        .with_collation(Some(collation)));
    assert_eq!(spilled, collated, "spilling changes nothing");
    let within_limit = pipeline
        .stream(Box::new(input.iter().cloned().map(Ok)), &Context::new("test", &source).with_limits(TINY))
        .collect::<Result<Vec<_>, _>>();
    assert!(within_limit.is_err(), "the tiny limit is met, so the run above spilled");
    assert_eq!(run(Context::new("test", &source)).len(), 120, "without a collation every spelling is a group");
}
