//! Filter-matching and index-key-extraction throughput on the documents of the seed posts.
//!
//! Documents are built once as stored BSON bytes (what the collection layer hands to the query
//! layer), then each measurement runs over all of them: matching straight from the bytes
//! (decoding only the fields a filter reads), matching on already decoded documents, full
//! decoding as a baseline, and extracting encoded index keys from the bytes.
//!
//! Usage: `cargo run --release -p query --example match_bench -- [docs_000] [docs_002]`.

use std::hint::black_box;
use std::time::Instant;

use bson::{Bson, Document, RawDocumentBuf, doc, oid::ObjectId};
use document::path::{IndexSpec, Sparseness};
use query::filter::Filter;

/// A small deterministic generator: the benchmark must not depend on a seed file.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Seed 000: `{name, someId1, str1, date1, bio}`, about 2,400 bytes.
fn seed_000(count: usize) -> Vec<RawDocumentBuf> {
    let mut random = Lcg(0);
    let bio = "I am a Java Developer. ".repeat(100);
    (0..count)
        .map(|i| {
            let name = if i % 1000 == 0 {
                "Shekhar Gulati".to_string()
            } else {
                format!("User {}", random.next() % 1_000_000)
            };
            let document = doc! {
                "_id": ObjectId::new(),
                "name": name,
                "someId1": Bson::Int64(1_000_000 + i as i64),
                "str1": if random.next().is_multiple_of(2) { "U" } else { "V" },
                "date1": bson::DateTime::from_millis(860_000_000_000 + (random.next() % 1_000_000_000) as i64),
                "bio": bio.as_str(),
            };
            RawDocumentBuf::try_from(&document).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// Seed 002: `{number, pet, name, email}`.
fn seed_002(count: usize) -> Vec<RawDocumentBuf> {
    let animals = ["cat", "dog", "sugar glider", "pigeon", "dove"];
    (0..count)
        .map(|i| {
            let document = doc! {
                "_id": ObjectId::new(),
                "number": (i / 5 % 10_000) as i32,
                "pet": animals[i % 5],
                "name": "Jason Mooberry",
                "email": "jason@barkingsnake.com",
            };
            RawDocumentBuf::try_from(&document).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

fn report(label: &str, count: usize, started: Instant, hits: usize) {
    let seconds = started.elapsed().as_secs_f64();
    println!("  {label:<58} {:>12.0} docs/s  ({hits} hits, {seconds:.3} s)", count as f64 / seconds);
}

fn bench_filters(documents: &[RawDocumentBuf], filters: &[Document]) {
    let decoded: Vec<Document> =
        documents.iter().map(|raw| Document::try_from(raw.as_ref()).unwrap_or_else(|e| panic!("{e}"))).collect();
    for filter in filters {
        let parsed = Filter::parse(filter).unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let hits = documents.iter().filter(|raw| parsed.matches_raw(raw).unwrap_or(false)).count();
        report(&format!("match raw     {filter}"), documents.len(), started, hits);
        let started = Instant::now();
        let hits = decoded.iter().filter(|d| parsed.matches(d).unwrap_or(false)).count();
        report(&format!("match decoded {filter}"), documents.len(), started, hits);
    }
    let started = Instant::now();
    let fields: usize =
        documents.iter().map(|raw| black_box(Document::try_from(raw.as_ref()).map_or(0, |d| d.len()))).sum();
    report("full decode (baseline)", documents.len(), started, fields / documents.len().max(1));
}

fn bench_keys(documents: &[RawDocumentBuf], patterns: &[Document]) {
    for pattern in patterns {
        let spec = IndexSpec::from_key_pattern(pattern, Sparseness::Dense).unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let mut bytes = 0;
        for raw in documents {
            let keys = spec.keys_raw(raw).unwrap_or_else(|e| panic!("{e}"));
            bytes += keys.keys.iter().map(|k| k.order.len() + k.types.len()).sum::<usize>();
        }
        report(
            &format!("index keys    {pattern} ({} B/doc)", bytes / documents.len().max(1)),
            documents.len(),
            started,
            documents.len(),
        );
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split(':').nth(1))
        .map_or("unknown".to_string(), |model| model.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, nproc {cores}")
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let count_000 = arguments.get(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let count_002 = arguments.get(2).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    println!("command: {}", arguments.join(" "));
    println!("machine: {}", machine());
    println!("single thread; times include nothing but the loop shown");

    let documents = seed_000(count_000);
    let size = documents.iter().map(|d| d.as_bytes().len()).sum::<usize>() / documents.len().max(1);
    println!("\nseed 000: {count_000} docs of {size} B {{_id, name, someId1, str1, date1, bio}}");
    bench_filters(
        &documents,
        &[
            doc! {"name": "Shekhar Gulati"},
            doc! {"someId1": {"$gte": Bson::Int64(1_100_000)}, "str1": "U"},
            doc! {"name": {"$regex": "^Shekhar"}},
            doc! {"$or": [{"str1": "V"}, {"date1": {"$lt": bson::DateTime::from_millis(860_500_000_000)}}]},
        ],
    );
    bench_keys(&documents, &[doc! {"name": 1}, doc! {"someId1": 1}, doc! {"str1": 1, "date1": -1}]);
    drop(documents);

    let documents = seed_002(count_002);
    let size = documents.iter().map(|d| d.as_bytes().len()).sum::<usize>() / documents.len().max(1);
    println!("\nseed 002: {count_002} docs of {size} B {{_id, number, pet, name, email}}");
    bench_filters(&documents, &[doc! {"pet": "dog"}, doc! {"number": {"$lt": 100}, "pet": {"$in": ["cat", "dove"]}}]);
    bench_keys(&documents, &[doc! {"number": 1}, doc! {"pet": 1, "number": 1}, doc! {"_id": 1}]);
}
