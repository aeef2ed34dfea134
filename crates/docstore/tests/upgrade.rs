//! Opening a data directory written in key format 1 (numbers as decimal expansions, before
//! 2026-11-27): `tests/fixtures/key-format-1/`, made by `fixtures/make_key_format_1.py` with
//! the server of that day. The open rebuilds every collection's trees in the current format
//! (`catalog::key_format`); these tests read the result through indexes, `_id` lookups and the
//! capped collection's order, and `validate` every collection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bson::{Bson, Decimal128, Document, doc, rawdoc};
use docstore::*;
use storage::Durability;
use storage::io::{FileSystem, OpenMode, SimFs, sim::Fault};

fn fixture_copy() -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/key-format-1");
    let to = std::env::temp_dir().join(format!("docstore-upgrade-{}-{}", std::process::id(), rand::random::<u64>()));
    copy_dir(&from, &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn find(store: &Store, collection: &str, request: FindRequest) -> Vec<Document> {
    let cursor = store.collection(("upgrade", collection)).find(&request).unwrap();
    cursor.map(|d| Document::try_from(d.unwrap().as_ref()).unwrap()).collect()
}

fn numbers(documents: &[Document]) -> Vec<i32> {
    documents.iter().map(|d| d.get_i32("n").unwrap()).collect()
}

fn decimal(text: &str) -> Bson {
    Bson::Decimal128(text.parse::<Decimal128>().unwrap())
}

fn request(filter: Document, sort: Option<Document>, hint: Option<&str>) -> FindRequest {
    let hint = hint.map(|name| match name {
        "$natural" => Hint::Natural { backward: false },
        name => Hint::Name(name.into()),
    });
    FindRequest { filter, sort, hint, ..FindRequest::default() }
}

/// Goal: after the upgrade, each index returns what a collection scan returns, in the order
/// MongoDB gives, and `_id` lookups find numbers of every type.
#[test]
fn a_format_1_directory_opens_with_every_index_rebuilt() {
    let dir = fixture_copy();
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    let upgraded = ["local.system.replset", "upgrade.ids", "upgrade.log", "upgrade.numbers", "upgrade.strings"];
    assert_eq!(store.upgraded_collections(), upgraded, "every collection but the oplog");

    // The index on price orders the same as a sort without it (by compare_values).
    let scanned = find(&store, "numbers", request(doc! {}, Some(doc! {"price": 1, "n": 1}), Some("$natural")));
    assert_eq!(scanned.len(), 41);
    let by_index = find(&store, "numbers", request(doc! {}, Some(doc! {"price": 1, "n": 1}), Some("price_1")));
    assert_eq!(numbers(&by_index), numbers(&scanned));
    let descending = find(&store, "numbers", request(doc! {}, Some(doc! {"price": -1, "n": 1}), Some("price_-1_n_1")));
    let mut expected = scanned.clone();
    expected.sort_by(|a, b| {
        document::compare_values(b.get("price").unwrap(), a.get("price").unwrap())
            .then(a.get_i32("n").unwrap().cmp(&b.get_i32("n").unwrap()))
    });
    assert_eq!(numbers(&descending), numbers(&expected));

    // Equality across types through each index: 1 == 1.0 == 1.00; 0.1 (double) != 0.1 (decimal).
    for hint in ["price_1", "price_-1_n_1", "price_hashed"] {
        let ones = find(&store, "numbers", request(doc! {"price": 1}, Some(doc! {"n": 1}), Some(hint)));
        assert_eq!(numbers(&ones), vec![1, 31], "{hint}");
        let tenth = find(&store, "numbers", request(doc! {"price": 0.1}, None, Some(hint)));
        assert_eq!(numbers(&tenth), vec![12], "{hint}");
        let decimal_tenth = find(&store, "numbers", request(doc! {"price": decimal("0.10")}, None, Some(hint)));
        assert_eq!(numbers(&decimal_tenth), vec![30], "{hint}");
    }
    let range =
        find(&store, "numbers", request(doc! {"price": {"$gt": 0.1, "$lte": 2}}, Some(doc! {"n": 1}), Some("price_1")));
    // The decimal 0.1000000000000000055511151231257827 is the double 0.1 cut to 34 digits:
    // just below it, so outside the range.
    assert_eq!(numbers(&range), vec![1, 14, 15, 31]);

    // The unique index still refuses a duplicate.
    let outcome =
        store.collection(("upgrade", "numbers")).insert(vec![rawdoc! {"_id": "dup", "n": 3}], true, Durability::None);
    assert_eq!(outcome.errors.first().map(|(_, e)| e.code()), Some(11000));

    // _id lookups of every number type, and the _id order.
    for (id, n) in [(Bson::Double(0.1), 4), (decimal("0.1"), 3), (Bson::Int64((1 << 53) + 1), 2), (Bson::Int32(-7), 5)]
    {
        let found = find(&store, "ids", request(doc! {"_id": id.clone()}, None, None));
        assert_eq!(numbers(&found), vec![n], "{id}");
    }
    assert_eq!(find(&store, "ids", request(doc! {"_id": 2.5}, None, None)).len(), 1);
    assert_eq!(find(&store, "ids", request(doc! {"_id": decimal("3.00")}, None, None)).len(), 1);
    let in_id_order = find(&store, "ids", request(doc! {}, Some(doc! {"_id": 1}), None));
    assert_eq!(numbers(&in_id_order), vec![5, 6, 3, 4, 0, 1, 8, 2, 7]);

    for collection in ["numbers", "ids", "log", "strings"] {
        let report = store.collection(("upgrade", collection)).validate().unwrap();
        assert!(report.is_valid(), "{collection}: {:?}", report.errors);
    }
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: a capped collection keeps its insertion order and its limits through the upgrade,
/// and a second open finds nothing left to do (the trees stay as the first open left them).
#[test]
fn a_capped_collection_keeps_its_order_and_the_upgrade_runs_once() {
    let dir = fixture_copy();
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    let natural = find(&store, "log", request(doc! {}, None, Some("$natural")));
    let order = numbers(&natural);
    assert_eq!(order.last(), Some(&199));
    assert!(order.windows(2).all(|pair| pair[1] == pair[0] + 1), "{order:?}");
    let before = order.len();
    let next =
        (200..200 + before as i32).map(|n| rawdoc! {"_id": f64::from(n) * 0.25 - 10.0, "n": n, "pad": "x".repeat(40)});
    let outcome = store.collection(("upgrade", "log")).insert(next.collect(), true, Durability::None);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let after = numbers(&find(&store, "log", request(doc! {}, None, Some("$natural"))));
    assert_eq!(after.first(), Some(&200), "the oldest went first: {after:?}");
    let trees: Vec<Document> = store.collection(("upgrade", "numbers")).list_indexes().unwrap();
    store.close().unwrap();

    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    assert!(store.upgraded_collections().is_empty(), "the second open has nothing to upgrade");
    assert_eq!(store.collection(("upgrade", "numbers")).list_indexes().unwrap(), trees);
    assert_eq!(numbers(&find(&store, "log", request(doc! {}, None, Some("$natural")))), after);
    let strings =
        find(&store, "strings", request(doc! {"n": {"$gte": 1.1, "$lt": 4.4}}, Some(doc! {"n": 1}), Some("n_1")));
    assert_eq!(strings.iter().map(|d| d.get_str("_id").unwrap()).collect::<Vec<_>>(), ["k0001", "k0002", "k0003"]);
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The fixture on a simulated disk at `/db`, every byte and name durable.
fn simulated_fixture() -> SimFs {
    let fs = SimFs::new();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/key-format-1");
    storage::io::create_dir_all_durably(&fs, Path::new("/db/log")).unwrap();
    for relative in ["data.strata", "log/0000000000000002.log"] {
        let file = fs.open(&Path::new("/db").join(relative), OpenMode::CreateNew).unwrap();
        file.write_all_at(&std::fs::read(from.join(relative)).unwrap(), 0).unwrap();
        file.sync().unwrap();
    }
    fs.sync_dir(Path::new("/db")).unwrap();
    fs.sync_dir(Path::new("/db/log")).unwrap();
    fs
}

/// What every collection of the fixture must still hold, upgraded or not yet.
fn check_fixture(store: &Store) {
    let ones = find(store, "numbers", request(doc! {"price": 1}, Some(doc! {"n": 1}), Some("price_1")));
    assert_eq!(numbers(&ones), vec![1, 31]);
    assert_eq!(find(store, "numbers", request(doc! {}, None, None)).len(), 41);
    let found = find(store, "ids", request(doc! {"_id": decimal("0.1")}, None, None));
    assert_eq!(numbers(&found), vec![3]);
    let order = numbers(&find(store, "log", request(doc! {}, None, Some("$natural"))));
    assert!(order.len() > 20 && order.last() == Some(&199), "{order:?}");
    assert!(order.windows(2).all(|pair| pair[1] == pair[0] + 1), "{order:?}");
    for collection in ["numbers", "ids", "log", "strings"] {
        let report = store.collection(("upgrade", collection)).validate().unwrap();
        assert!(report.is_valid(), "{collection}: {:?}", report.errors);
    }
}

/// Goal: a power loss at any I/O call of the upgrade leaves a directory that opens (finishing
/// the upgrade) with nothing lost. Method: count the I/O calls of a whole open (about 150);
/// at each of them, fail every call from there on (the machine stops), then take two crash
/// images chosen by seeds (unsynced writes kept, dropped or torn) and open them.
#[test]
fn a_crash_anywhere_in_the_upgrade_loses_nothing() {
    let options = || StoreOptions { ttl_interval: std::time::Duration::from_secs(3600), ..StoreOptions::default() };
    let fs = simulated_fixture();
    let start = fs.calls();
    let store = Store::open_with(Arc::new(fs.clone()), Path::new("/db"), options()).unwrap();
    let calls = fs.calls() - start;
    check_fixture(&store);
    store.close().unwrap();
    for (point, seed) in (start..start + calls).flat_map(|point| [(point, point), (point, point + 1_000_000)]) {
        let fs = simulated_fixture();
        fs.fail_from(point, Fault::Eio);
        if let Ok(store) = Store::open_with(Arc::new(fs.clone()), Path::new("/db"), options()) {
            let _ = store.close();
        }
        let crashed = fs.crash(seed);
        let store = Store::open_with(Arc::new(crashed), Path::new("/db"), options())
            .unwrap_or_else(|e| panic!("call {point} of {calls}, seed {seed}: {e}"));
        check_fixture(&store);
        store.close().unwrap();
    }
}
