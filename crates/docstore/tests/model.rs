//! Model test: random documents, random index sets and random operations against a model (a
//! `Vec<Document>` filtered with the query crate), asserting identical answers with and without
//! every index.
//!
//! Method: each run picks a seed (printed; set `DOCSTORE_SEED` to replay, `DOCSTORE_STEPS` for
//! length), a random set of indexes (single, compound, descending, multikey fields, sparse,
//! unique), and runs inserts, updates, deletes and index changes. Every find runs with the
//! planner's choice, then hinted through each usable index and `$natural`, and each answer must
//! equal the model's. After every step `validate()` cross-checks every index entry and counter
//! against the documents; every 25 steps the store is closed and reopened from its directory.

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::*;
use query::filter::Filter;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::Durability;

const DB: &str = "model";
const COLL: &str = "c";

struct Run {
    rng: StdRng,
    store: Option<Store>,
    dir: std::path::PathBuf,
    model: Vec<Document>,
    next_id: i64,
    indexes: Vec<Document>,
    /// Finds answered from index keys alone (the test is not vacuous about covered reads).
    covered_plans: usize,
}

fn options() -> StoreOptions {
    StoreOptions { engine: small_engine(), ..StoreOptions::default() }
}

fn value(rng: &mut StdRng) -> Bson {
    match rng.gen_range(0..10) {
        0 => Bson::Null,
        1 => Bson::String(["x", "y", "z"][rng.gen_range(0..3)].into()),
        2 => Bson::Array((0..rng.gen_range(0..3)).map(|_| Bson::Int32(rng.gen_range(0..5))).collect()),
        3 => Bson::Double(f64::from(rng.gen_range(0..5)) + 0.5),
        4 => Bson::Int64(rng.gen_range(0..5)),
        _ => Bson::Int32(rng.gen_range(0..5)),
    }
}

impl Run {
    fn store(&self) -> &Store {
        self.store.as_ref().expect("store is open")
    }

    fn random_document(&mut self) -> Document {
        let mut document = doc! {"_id": self.next_id};
        self.next_id += 1;
        if self.rng.gen_bool(0.8) {
            document.insert("a", value(&mut self.rng));
        }
        document.insert("b", self.rng.gen_range(0..10));
        if self.rng.gen_bool(0.5) {
            document.insert("c", doc! {"d": value(&mut self.rng)});
        }
        if self.rng.gen_bool(0.3) {
            document.insert("s", ["p", "q"][self.rng.gen_range(0..2)]);
        }
        if self.rng.gen_bool(0.5) {
            document.insert("u", self.rng.gen_range(0..1000));
        }
        document
    }

    fn random_filter(&mut self) -> Document {
        let v = self.rng.gen_range(0..5);
        let w = self.rng.gen_range(0..10);
        match self.rng.gen_range(0..12) {
            0 => doc! {"a": v},
            1 => doc! {"a": {"$gt": v}},
            2 => doc! {"b": {"$in": [w, (w + 3) % 10]}},
            3 => doc! {"$or": [{"a": v}, {"b": w}]},
            4 => doc! {"a": v, "b": {"$lte": w}},
            5 => doc! {"c.d": {"$gte": v}},
            6 => doc! {"a": null},
            7 => doc! {"s": {"$exists": true}},
            8 => doc! {"b": {"$gte": w, "$lt": w + 3}},
            9 => doc! {"s": "p", "b": w},
            10 => doc! {"a": {"$lt": "y"}},
            _ => doc! {},
        }
    }

    fn check_find(&mut self, filter: Document) {
        let sorts = [None, Some(doc! {"b": 1, "_id": 1}), Some(doc! {"a": -1, "_id": 1})];
        let sort = sorts[self.rng.gen_range(0..sorts.len())].clone();
        // Projections of index fields without _id make covered reads (answered from index keys).
        let projections = [
            None,
            None,
            Some(doc! {"a": 1, "_id": 0}),
            Some(doc! {"a": 1, "b": 1, "_id": 0}),
            Some(doc! {"b": 1, "_id": 0}),
            Some(doc! {"c.d": 1, "_id": 0}),
            Some(doc! {"s": 1, "_id": 0}),
        ];
        let projection = projections[self.rng.gen_range(0..projections.len())].clone();
        let parsed = Filter::parse(&filter).unwrap();
        let mut expected: Vec<Document> = self.model.iter().filter(|d| parsed.matches(d).unwrap()).cloned().collect();
        match &sort {
            Some(spec) => query::sort::SortSpec::parse(spec).unwrap().sort(&mut expected),
            None => expected.sort_by_key(|d| d.get_i64("_id").unwrap()),
        }
        if let Some(spec) = &projection {
            let projector = query::projection::Projection::parse(spec).unwrap();
            expected = expected.iter().map(|d| projector.apply(d, None).unwrap()).collect();
            if sort.is_none() {
                expected.sort_by_key(fields_sorted);
            }
        }
        let mut hints = vec![None, Some(Hint::Natural { backward: false }), Some(Hint::Name("_id_".into()))];
        for index in &self.indexes {
            if !index.contains_key("sparse") && !index.contains_key("partialFilterExpression") {
                hints.push(Some(Hint::Name(index.get_str("name").unwrap().to_string())));
            }
        }
        for hint in hints {
            let request = FindRequest {
                filter: filter.clone(),
                sort: sort.clone(),
                hint: hint.clone(),
                projection: projection.clone(),
                ..FindRequest::default()
            };
            let mut got: Vec<Document> = self
                .store()
                .collection((DB, COLL))
                .find(&request)
                .unwrap()
                .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
                .collect();
            match (&sort, &projection) {
                (Some(_), _) => {}
                (None, None) => got.sort_by_key(|d| d.get_i64("_id").unwrap()),
                (None, Some(_)) => got.sort_by_key(fields_sorted),
            }
            assert_eq!(got, expected, "filter {filter} sort {sort:?} projection {projection:?} hint {hint:?}");
        }
        let count = self
            .store()
            .collection((DB, COLL))
            .count(&FindRequest { filter: filter.clone(), ..FindRequest::default() })
            .unwrap();
        assert_eq!(count as usize, expected.len(), "count {filter}");
        let explain = self
            .store()
            .collection((DB, COLL))
            .explain(&FindRequest { filter, sort, projection, ..FindRequest::default() }, Verbosity::ExecutionStats)
            .unwrap();
        if explain.to_string().contains("PROJECTION_COVERED") {
            self.covered_plans += 1;
        }
    }

    /// The model's answer to an insert: a duplicate `u` (unique, sparse) is refused.
    fn model_accepts(&self, document: &Document) -> bool {
        let unique = self.indexes.iter().any(|i| i.contains_key("unique"));
        match (unique, document.get("u")) {
            (true, Some(u)) => !self.model.iter().any(|d| d.get("u").is_some_and(|x| document::values_equal(x, u))),
            _ => true,
        }
    }

    fn step(&mut self) {
        match self.rng.gen_range(0..10) {
            0..=3 => {
                let documents: Vec<Document> = (0..self.rng.gen_range(1..20)).map(|_| self.random_document()).collect();
                let raws = documents.iter().map(|d| RawDocumentBuf::try_from(d).unwrap()).collect();
                let outcome = self.store().collection((DB, COLL)).insert(raws, false, Durability::None);
                let mut failed: Vec<usize> = outcome
                    .errors
                    .iter()
                    .map(|(p, e)| {
                        assert_eq!(e.code(), 11000, "{e}");
                        *p
                    })
                    .collect();
                failed.sort();
                let mut expected_failures = Vec::new();
                for (position, document) in documents.into_iter().enumerate() {
                    if self.model_accepts(&document) {
                        self.model.push(document);
                    } else {
                        expected_failures.push(position);
                    }
                }
                assert_eq!(failed, expected_failures);
            }
            4 => {
                let filter = self.random_filter();
                let parsed = Filter::parse(&filter).unwrap();
                let delta = self.rng.gen_range(1..3);
                let multi = self.rng.gen_bool(0.5);
                let update = doc! {"$inc": {"b": delta}, "$set": {"c.d": delta}};
                let request = UpdateRequest {
                    filter: filter.clone(),
                    update: UpdateModification::Document(update.clone()),
                    multi,
                    upsert: false,
                    array_filters: vec![],
                    hint: None,
                    variables: Default::default(),
                    collation: None,
                };
                let outcome = self.store().collection((DB, COLL)).update(&request, Durability::None).unwrap();
                let parsed_update = query::update::Update::parse(&update, &[]).unwrap();
                let mut matched = 0;
                let mut ids: Vec<i64> = self
                    .model
                    .iter()
                    .filter(|d| parsed.matches(d).unwrap())
                    .map(|d| d.get_i64("_id").unwrap())
                    .collect();
                ids.sort();
                if !multi {
                    // Which single document MongoDB picks is the plan's business: follow the store.
                    ids.truncate(1);
                    if outcome.matched == 1 {
                        let changed = self
                            .store()
                            .collection((DB, COLL))
                            .find(&FindRequest { filter: doc! {"_id": {"$in": ids.clone()}}, ..FindRequest::default() })
                            .unwrap()
                            .count();
                        let _ = changed;
                    }
                }
                let expected_matched = if multi { ids.len() as u64 } else { outcome.matched };
                assert_eq!(outcome.matched, expected_matched);
                if multi {
                    for document in &mut self.model {
                        if ids.contains(&document.get_i64("_id").unwrap()) {
                            matched += 1;
                            *document = parsed_update
                                .apply(
                                    document,
                                    &query::update::ApplyOptions { position: None, now: bson::DateTime::now() },
                                )
                                .unwrap()
                                .document;
                        }
                    }
                    assert_eq!(matched, outcome.modified);
                } else {
                    self.resync_model();
                }
            }
            5 => {
                let filter = self.random_filter();
                let parsed = Filter::parse(&filter).unwrap();
                let deleted = self
                    .store()
                    .collection((DB, COLL))
                    .delete(
                        &DeleteRequest { filter, just_one: false, hint: None, ..Default::default() },
                        Durability::None,
                    )
                    .unwrap();
                let before = self.model.len();
                self.model.retain(|d| !parsed.matches(d).unwrap());
                assert_eq!(deleted as usize, before - self.model.len());
            }
            6 => self.change_indexes(),
            _ => {
                let filter = self.random_filter();
                self.check_find(filter);
            }
        }
    }

    /// After a single-document update, the model takes the store's documents (checked equal to
    /// the model but for the one document the store chose).
    fn resync_model(&mut self) {
        let got: Vec<Document> = self
            .store()
            .collection((DB, COLL))
            .find(&FindRequest::default())
            .unwrap()
            .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
            .collect();
        let differing = got.iter().filter(|d| !self.model.contains(d)).count();
        assert!(differing <= 1, "a single update changed {differing} documents");
        assert_eq!(got.len(), self.model.len());
        self.model = got;
    }

    fn change_indexes(&mut self) {
        let choices = [
            doc! {"key": {"a": 1}},
            doc! {"key": {"b": -1}},
            doc! {"key": {"a": 1, "b": 1}},
            doc! {"key": {"b": 1, "a": -1}},
            doc! {"key": {"c.d": 1}},
            doc! {"key": {"s": 1}, "sparse": true},
            doc! {"key": {"b": 1}, "name": "b_clustering", "clustering": true},
            doc! {"key": {"a": 1}, "name": "a_partial", "partialFilterExpression": {"b": {"$gt": 4}}},
            doc! {"key": {"u": 1}, "unique": true, "sparse": true},
        ];
        let spec = choices[self.rng.gen_range(0..choices.len())].clone();
        let name = spec
            .get_str("name")
            .map(str::to_string)
            .unwrap_or_else(|_| docstore::default_index_name(spec.get_document("key").unwrap()));
        if let Some(position) = self.indexes.iter().position(|i| i.get_str("name").unwrap() == name) {
            self.store().collection((DB, COLL)).drop_indexes(&IndexSelector::Name(name)).unwrap();
            self.indexes.remove(position);
            return;
        }
        let result = self.store().collection((DB, COLL)).create_indexes(std::slice::from_ref(&spec));
        let mut named = spec.clone();
        named.insert("name", name);
        match result {
            Ok(_) => self.indexes.push(named),
            Err(Error::DuplicateKey { .. }) => assert!(spec.contains_key("unique")),
            Err(Error::IndexOptionsConflict(_)) => {}
            Err(other) => panic!("create index {spec}: {other}"),
        }
    }

    fn reopen(&mut self) {
        if let Some(store) = self.store.take() {
            store.close().unwrap();
        }
        self.store = Some(Store::open(&self.dir, options()).unwrap());
    }

    fn validate(&self) {
        let report = self.store().collection((DB, COLL)).validate().unwrap();
        assert!(report.is_valid(), "{:?}", report.errors);
        assert_eq!(report.documents as usize, self.model.len());
        assert_eq!(self.store().collection((DB, COLL)).estimated_document_count().unwrap() as usize, self.model.len());
        self.store().verify_engine().unwrap();
    }
}

/// Runs `steps` random steps; returns how many finds were covered.
/// A projected document's sort key for comparing answers without a sort: its fields in name
/// order, since field order is not the same on every plan (a covered read lays its fields out in
/// the index's order, as MongoDB's covered projection does; a fetched document keeps its own).
fn fields_sorted(document: &Document) -> String {
    let mut fields: Vec<String> = document
        .iter()
        .map(|(name, value)| match value {
            Bson::Document(inner) => format!("{name:?}: {}", fields_sorted(inner)),
            value => format!("{name:?}: {value:?}"),
        })
        .collect();
    fields.sort();
    format!("{{{}}}", fields.join(", "))
}

fn run(seed: u64, steps: usize) -> usize {
    println!("docstore model seed {seed} steps {steps} (DOCSTORE_SEED={seed} replays)");
    let dir = std::env::temp_dir().join(format!("docstore-model-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut run = Run {
        rng: StdRng::seed_from_u64(seed),
        store: None,
        dir: dir.clone(),
        model: Vec::new(),
        next_id: 0,
        indexes: Vec::new(),
        covered_plans: 0,
    };
    run.reopen();
    run.store().collection((DB, COLL)).create(doc! {}).unwrap();
    for _ in 0..3 {
        run.change_indexes();
    }
    for step in 0..steps {
        run.step();
        run.validate();
        if step % 25 == 24 {
            run.reopen();
            run.validate();
        }
    }
    if let Some(store) = run.store.take() {
        store.close().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{} covered finds", run.covered_plans);
    run.covered_plans
}

/// Goal: the store answers like the model whatever the indexes and plans (see the header).
#[test]
fn store_matches_model() {
    let seed = std::env::var("DOCSTORE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let steps = std::env::var("DOCSTORE_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    run(seed, steps);
}

/// Goal: fixed seeds, so every run covers at least these histories.
#[test]
fn store_matches_model_fixed_seeds() {
    let covered: usize = [1, 2, 3].into_iter().map(|seed| run(seed, 100)).sum();
    assert!(covered > 0, "no find was covered");
}

/// Small nodes so that flushes and splits happen.
fn small_engine() -> storage::Options {
    storage::Options {
        node_size_bytes: 32 << 10,
        basement_size_bytes: 4 << 10,
        fanout: 8,
        flush_mode: storage::FlushMode::Inline,
        cache_size_bytes: 1 << 20,
        ..storage::Options::default()
    }
}
