//! Goal: every committed input of the fuzz corpora (`filter`, `update`) still runs through
//! their bodies in `query::fuzzing` without a panic, on stable. Method, and what makes it
//! fail: `fuzz/replay.rs`, which every crate with a fuzz target includes.
//!
//! `cargo test --release -p query --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! generated seeds (`seed-*`) into the corpora.

use bson::{Bson, DateTime, doc};

#[path = "../../../fuzz/bson_seeds.rs"]
#[allow(dead_code, reason = "each crate's seeds use some of the shared helpers")]
mod bson_seeds;
#[path = "../../../fuzz/replay.rs"]
mod replay;

use bson_seeds::{bytes, decimal, named, regex};
use replay::Seeds;

#[test]
fn filter() {
    replay::replay("filter", query::fuzzing::filter);
}

#[test]
fn update() {
    replay::replay("update", query::fuzzing::update);
}

/// Each target listed for this crate in `fuzz/replay.rs` is replayed above, and every target of
/// `fuzz/Cargo.toml` is listed there.
#[test]
fn every_fuzz_target_is_replayed() {
    replay::check_targets(env!("CARGO_PKG_NAME"), &["filter", "update"]);
}

/// Writes the generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files are kept).
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    replay::write_seeds("filter", filters());
    replay::write_seeds("update", updates());
}

/// Filters with every query operator, then documents to match them against.
fn filters() -> Seeds {
    let filters = vec![
        doc! { "a": 1 },
        doc! { "a": { "$eq": 1 }, "b": "x" },
        doc! { "a": { "$gt": 1, "$lte": 10 } },
        doc! { "a": { "$gte": DateTime::from_millis(0) } },
        doc! { "a": { "$lt": "m" } },
        doc! { "a": { "$ne": Bson::Null } },
        doc! { "a": { "$in": [1, "two", Bson::Null, regex("^h", "")] } },
        doc! { "a": { "$nin": [[], {}] } },
        doc! { "a": { "$exists": false } },
        doc! { "a": { "$type": "string" }, "b": { "$type": [1, "long", "decimal", "number"] } },
        doc! { "s": { "$regex": "^H.*D$", "$options": "im" } },
        doc! { "s": regex("wor", "s") },
        doc! { "s": { "$not": regex("x", "") } },
        doc! { "a": { "$mod": [3, 1] } },
        doc! { "c": { "$size": 3 } },
        doc! { "c": { "$all": [1, 2] } },
        doc! { "a": { "$all": [{ "$elemMatch": { "b": { "$gte": 1 } } }] } },
        doc! { "a": { "$elemMatch": { "b": 1, "c": { "$exists": false } } } },
        doc! { "c": { "$elemMatch": { "$gt": 1, "$lt": 3 } } },
        doc! { "a": { "$not": { "$gt": 1 } } },
        doc! { "$and": [{ "a": 1 }, { "b": { "$ne": "y" } }] },
        doc! { "$or": [{ "a": 1 }, { "d.e": 5 }, { "a.0.b": 1 }] },
        doc! { "$nor": [{ "a": 2 }, { "n": { "$exists": true } }] },
        doc! { "$expr": { "$gt": ["$a", { "$add": [1, { "$size": { "$ifNull": ["$c", []] } }] }] } },
        doc! { "$expr": { "$and": [
            { "$eq": [{ "$toLower": "$s" }, "hello, world"] },
            { "$regexMatch": { "input": "$s", "regex": "o" } },
            { "$in": [2, { "$map": { "input": "$c", "in": { "$multiply": ["$$this", 2] } } }] },
            { "$lt": [{ "$dateToString": { "date": "$dt", "format": "%Y" } }, "3000"] },
        ] } },
        doc! { "$expr": { "$cond": [
            { "$isArray": "$a" },
            { "$gt": [{ "$reduce": { "input": "$a", "initialValue": 0, "in": { "$add": ["$$value", 1] } } }, 1] },
            false,
        ] } },
        doc! { "$expr": { "$switch": {
            "branches": [{ "case": { "$eq": [{ "$type": "$a" }, "int"] }, "then": true }],
            "default": { "$toBool": { "$mod": [{ "$toLong": "$big" }, 2] } },
        } } },
        doc! { "$jsonSchema": {
            "bsonType": "object",
            "required": ["_id"],
            "properties": {
                "a": { "bsonType": ["int", "array"], "minimum": 0, "items": { "type": "object" }, "maxItems": 5 },
                "s": { "type": "string", "pattern": "^H", "minLength": 1, "maxLength": 50 },
                "e": { "enum": [1, "x"] },
            },
            "additionalProperties": true,
        } },
        doc! { "$alwaysTrue": 1, "$comment": "every document" },
        doc! { "$alwaysFalse": 1 },
        doc! { "$where": "this.a > 1" },
        doc! { "ref": { "$ref": "c", "$id": 1, "$db": "fuzz" } },
        doc! { "d.f.g": { "$gte": 2 }, "a.b": { "$in": [[2, 3], 1] } },
        doc! { "big": { "$gt": 9_007_199_254_740_992.0 }, "dbl": { "$lte": decimal(15, -1) } },
        doc! { "nan": f64::NAN, "inf": { "$lt": 0 } },
        doc! { "min": { "$lt": Bson::MaxKey }, "max": { "$gt": Bson::MinKey } },
    ];
    let extra = doc! {
        "_id": 9, "a": [1, [2, 3]], "s": "HELLO\nWORLD", "ref": { "$ref": "c", "$id": 1, "$db": "fuzz" }, "e": "x",
    };
    let mut seeds = Seeds::new();
    for (index, filter) in filters.iter().enumerate() {
        let mut input = bytes(filter);
        if index % 3 == 0 {
            input.extend(bytes(&extra));
        }
        seeds.push((named("filter", index, filter), input));
    }
    seeds.push((
        "projection".into(),
        bytes(&doc! { "a": 1, "c": { "$slice": [1, 1] }, "d.e": 1, "x": { "$add": ["$a", 1] } }),
    ));
    seeds.push(("projection-elem-match".into(), bytes(&doc! { "a": { "$elemMatch": { "b": 1 } }, "_id": 0 })));
    seeds.push(("sort".into(), bytes(&doc! { "a": -1, "d.e": 1, "_id": 1 })));
    seeds
}

/// Updates with every update operator, replacements and pipelines, on their own (then applied
/// to fixed documents) or with a target and array filters.
fn updates() -> Seeds {
    let updates = vec![
        doc! { "$set": { "a": 2, "d.e": { "x": 1 }, "new.deep.path": [] } },
        doc! { "$unset": { "b": "", "d.e": 1 } },
        doc! { "$inc": { "a": 1, "big": 1, "dbl": -0.5 } },
        doc! { "$mul": { "a": 2, "small": 2_i64, "dec": decimal(3, 0) } },
        doc! { "$min": { "a": 0, "dt": DateTime::from_millis(0) }, "$max": { "b": "z" } },
        doc! { "$rename": { "b": "bb", "d.e": "e" } },
        doc! { "$currentDate": { "now": true, "ts": { "$type": "timestamp" }, "date": { "$type": "date" } } },
        doc! { "$setOnInsert": { "created": 1 }, "$set": { "a": 5 } },
        doc! { "$push": { "c": 4 } },
        doc! { "$push": { "c": { "$each": [5, 6, 0], "$position": 1, "$slice": -3, "$sort": 1 } } },
        doc! { "$push": { "list": { "$each": [{ "k": 2 }, { "k": 1 }], "$sort": { "k": -1 } } } },
        doc! { "$addToSet": { "c": 1, "tags": { "$each": ["a", "b", "a"] } } },
        doc! { "$pop": { "c": -1, "a": 1 } },
        doc! { "$pull": { "c": { "$gte": 2 }, "d.f": { "g": 1 } } },
        doc! { "$pullAll": { "c": [1, 3] } },
        doc! { "$bit": { "a": { "and": 5 }, "big": { "or": 1_i64 }, "small": { "xor": 3 } } },
        doc! { "$set": { "c.$": 9 } },
        doc! { "$set": { "c.$[]": 0, "d.f.$[].g": 7 } },
        doc! { "$inc": { "d.f.$[x].g": 10 } },
        doc! { "$set": { "a.5": 1, "c.10": 1 } },
        doc! { "a": 1, "b": { "c": [1, 2] } },
        doc! { "_id": 2, "changed": true },
        doc! {},
        doc! {
            "0": { "$set": { "total": { "$sum": ["$a", 1] }, "s": { "$concat": ["$b", "!"] } } },
            "1": { "$unset": "d" },
        },
        doc! { "0": { "$project": { "a": 1, "len": { "$size": { "$ifNull": ["$c", []] } } } } },
        doc! { "0": { "$replaceWith": { "$mergeObjects": ["$d", { "_id": "$_id" }] } } },
        doc! {
            "0": { "$replaceRoot": { "newRoot": { "_id": "$_id", "x": "$$NOW" } } },
            "1": { "$addFields": { "y": { "$literal": "$x" } } },
        },
    ];
    let target = doc! { "_id": 1, "a": 1, "b": "x", "c": [1, 2, 3], "d": { "e": 5, "f": [{ "g": 1 }, { "g": 2 }] } };
    let mut seeds = Seeds::new();
    for (index, update) in updates.iter().enumerate() {
        seeds.push((named("update", index, update), bytes(update)));
        if update.keys().any(|key| key.starts_with('$')) && index % 2 == 0 {
            let mut input = bytes(update);
            input.extend(bytes(&target));
            if index == 18 {
                input.extend(bytes(&doc! { "x.g": { "$gt": 1 } }));
            }
            seeds.push((format!("{}-on-target", named("update", index, update)), input));
        }
    }
    seeds
}
