//! `strata dump` and `strata restore` between two real servers: every BSON type and every index
//! kind Strata has, gzipped and not, a part of a dump (`--db`, `--collection`, `--query`), and
//! the files in mongodump's documented layout (`<db>/<collection>.bson` as BSON documents back to
//! back, `<db>/<collection>.metadata.json` as canonical Extended JSON with `indexes`,
//! `collectionName`, `options`).

mod common;

use std::path::Path;
use std::process::Command;

use common::{Strata, temp_dir};
use mongodb::Client;
use mongodb::bson::{Bson, Document, RawDocumentBuf, doc, oid::ObjectId, spec::BinarySubtype};

fn strata(args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "strata {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One document holding a value of every BSON type.
fn every_type(id: i32) -> Document {
    doc! {
        "_id": id,
        "double": 1.5,
        "string": format!("s{id}"),
        "document": { "nested": [1, { "deep": true }] },
        "array": [1, "two", 3.0],
        "binary": Bson::Binary(mongodb::bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![0, 1, 2, 255] }),
        "uuid": Bson::Binary(mongodb::bson::Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] }),
        "objectId": ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").unwrap(),
        "bool": false,
        "date": mongodb::bson::DateTime::from_millis(1_700_000_000_000),
        "null": Bson::Null,
        "regex": Bson::RegularExpression(mongodb::bson::Regex { pattern: "^a.*".to_owned().try_into().unwrap(), options: "i".to_owned().try_into().unwrap() }),
        "javascript": Bson::JavaScriptCode("function() { return 1; }".into()),
        "int32": id,
        "timestamp": Bson::Timestamp(mongodb::bson::Timestamp { time: 1, increment: 2 }),
        "int64": 1_i64 << 40,
        "decimal": Bson::Decimal128("1.25".parse().unwrap()),
        "minKey": Bson::MinKey,
        "maxKey": Bson::MaxKey,
        "k": id % 7,
        "tags": [format!("t{}", id % 3), "all"],
    }
}

/// Every index kind Strata has: single, compound with a descending key, unique, sparse
/// multikey, TTL, partial.
fn index_specs_to_build() -> Vec<Document> {
    vec![
        doc! { "key": { "k": 1 }, "name": "k_1" },
        doc! { "key": { "k": -1, "string": 1 }, "name": "k_-1_string_1" },
        doc! { "key": { "string": 1 }, "name": "string_unique", "unique": true },
        doc! { "key": { "tags": 1 }, "name": "tags_1", "sparse": true },
        doc! { "key": { "date": 1 }, "name": "date_ttl", "expireAfterSeconds": 1_000_000_000 },
        doc! { "key": { "int32": 1 }, "name": "partial", "partialFilterExpression": { "k": { "$gt": 2 } } },
    ]
}

async fn load(client: &Client) {
    let collection = client.database("app").collection::<Document>("things");
    collection.insert_many((0..500).map(every_type)).await.unwrap();
    let specs = index_specs_to_build();
    client.database("app").run_command(doc! { "createIndexes": "things", "indexes": specs }).await.unwrap();
    client.database("app").create_collection("empty").await.unwrap();
    client.database("other").collection::<Document>("c").insert_one(doc! { "x": 1 }).await.unwrap();
}

async fn raw_documents(client: &Client, db: &str, collection: &str) -> Vec<RawDocumentBuf> {
    let mut cursor = client
        .database(db)
        .collection::<RawDocumentBuf>(collection)
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap();
    let mut documents = Vec::new();
    while cursor.advance().await.unwrap() {
        documents.push(RawDocumentBuf::from_bytes(cursor.current().as_bytes().to_vec()).unwrap());
    }
    documents
}

async fn index_specs(client: &Client, db: &str, collection: &str) -> Vec<Document> {
    let listed = client.database(db).run_command(doc! { "listIndexes": collection }).await.unwrap();
    let mut specs: Vec<Document> = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|spec| spec.as_document().unwrap().clone())
        .collect();
    specs.sort_by_key(|spec| spec.get_str("name").unwrap().to_owned());
    specs
}

fn check_layout(dir: &Path, gzip: bool) {
    let suffix = if gzip { ".gz" } else { "" };
    let data = dir.join("app").join(format!("things.bson{suffix}"));
    let mut reader: Box<dyn std::io::Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(std::fs::File::open(&data).unwrap()))
    } else {
        Box::new(std::fs::File::open(&data).unwrap())
    };
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).unwrap();
    let mut count = 0;
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let length = i32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        mongodb::bson::RawDocument::from_bytes(&rest[..length]).unwrap();
        rest = &rest[length..];
        count += 1;
    }
    assert_eq!(count, 500);
    let metadata = dir.join("app").join(format!("things.metadata.json{suffix}"));
    let mut text = String::new();
    let mut reader: Box<dyn std::io::Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(std::fs::File::open(&metadata).unwrap()))
    } else {
        Box::new(std::fs::File::open(&metadata).unwrap())
    };
    reader.read_to_string(&mut text).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["collectionName"], "things");
    assert_eq!(json["type"], "collection");
    assert!(json["options"].is_object());
    let names: Vec<&str> =
        json["indexes"].as_array().unwrap().iter().map(|index| index["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"_id_") && names.contains(&"partial"), "{names:?}");
    assert_eq!(json["indexes"][0]["v"], serde_json::json!({ "$numberInt": "2" }), "canonical Extended JSON");
    assert!(dir.join("app").join(format!("empty.bson{suffix}")).exists());
}

use std::io::Read as _;

/// Goal: a dump restored into another server gives the same documents, byte for byte, and the
/// same indexes, with and without gzip.
#[tokio::test(flavor = "multi_thread")]
async fn dump_and_restore_round_trip() {
    let dir = temp_dir("tools");
    let (source, target) = (Strata::start(&dir.join("source")), Strata::start(&dir.join("target")));
    let from = Client::with_uri_str(source.uri()).await.unwrap();
    load(&from).await;
    for gzip in [false, true] {
        let out = dir.join(if gzip { "dump-gz" } else { "dump" });
        let out_text = out.to_str().unwrap();
        let mut dump = vec!["dump", "--uri", &source.address, "--out", out_text];
        let uri_source = source.uri();
        dump[2] = &uri_source;
        if gzip {
            dump.push("--gzip");
        }
        strata(&dump);
        check_layout(&out, gzip);
        let uri_target = target.uri();
        strata(&["restore", "--uri", &uri_target, "--drop", out_text]);
        let to = Client::with_uri_str(target.uri()).await.unwrap();
        for (db, collection) in [("app", "things"), ("app", "empty"), ("other", "c")] {
            assert_eq!(
                raw_documents(&from, db, collection).await,
                raw_documents(&to, db, collection).await,
                "{db}.{collection}"
            );
            assert_eq!(
                index_specs(&from, db, collection).await,
                index_specs(&to, db, collection).await,
                "{db}.{collection}"
            );
        }
    }
    // A part: one collection, a filter.
    let part = dir.join("part");
    let uri_source = source.uri();
    strata(&[
        "dump",
        "--uri",
        &uri_source,
        "--out",
        part.to_str().unwrap(),
        "--db",
        "app",
        "--collection",
        "things",
        "--query",
        r#"{"k": {"$numberInt": "3"}}"#,
    ]);
    assert!(!part.join("other").exists());
    let fresh = dir.join("fresh");
    let third = Strata::start(&fresh);
    let uri_third = third.uri();
    strata(&["restore", "--uri", &uri_third, part.to_str().unwrap()]);
    let restored = Client::with_uri_str(third.uri()).await.unwrap();
    let count = restored.database("app").collection::<Document>("things").count_documents(doc! {}).await.unwrap();
    assert_eq!(count, (0..500).filter(|i| i % 7 == 3).count() as u64);
    drop((source, target, third));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: `strata stat` prints a header and a line per interval with the server's rates.
#[tokio::test(flavor = "multi_thread")]
async fn stat_prints_rates() {
    let dir = temp_dir("stat");
    let server = Strata::start(&dir);
    let client = Client::with_uri_str(server.uri()).await.unwrap();
    let inserting = tokio::spawn(async move {
        let collection = client.database("s").collection::<Document>("c");
        for i in 0..200 {
            collection.insert_one(doc! { "i": i }).await.unwrap();
        }
    });
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["stat", "--uri", &server.uri(), "--interval", "0.3", "-n", "3"])
        .output()
        .unwrap();
    inserting.await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].split_whitespace().eq([
        "insert", "query", "update", "delete", "getmore", "command", "flushes", "syncs", "cache", "MiB", "conn", "time"
    ]));
    assert!(lines[1..].iter().all(|line| line.split_whitespace().count() == 11), "{text}");
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: `strata export` / `strata import` round-trip every BSON type through JSON lines
/// (relaxed and canonical Extended JSON v2), and CSV carries the named fields, nested ones by
/// their dotted path, with numbers read back as numbers.
#[tokio::test(flavor = "multi_thread")]
async fn export_and_import() {
    let dir = temp_dir("export");
    let server = Strata::start(&dir.join("data"));
    let uri = server.uri();
    let client = Client::with_uri_str(&uri).await.unwrap();
    let source = client.database("x").collection::<Document>("every");
    source.insert_many((0..50).map(every_type)).await.unwrap();
    for format in ["relaxed", "canonical"] {
        let file = dir.join(format!("every-{format}.json"));
        let file_text = file.to_str().unwrap();
        strata(&["export", "--uri", &uri, "-d", "x", "-c", "every", "--jsonFormat", format, "-o", file_text]);
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 50);
        let target = format!("back_{format}");
        strata(&["import", "--uri", &uri, "-d", "x", "-c", &target, "--file", file_text]);
        assert_eq!(raw_documents(&client, "x", "every").await, raw_documents(&client, "x", &target).await, "{format}");
    }
    let csv = dir.join("every.csv");
    strata(&[
        "export",
        "--uri",
        &uri,
        "-d",
        "x",
        "-c",
        "every",
        "--type",
        "csv",
        "-f",
        "_id,string,document.nested.1.deep,int64",
        "-o",
        csv.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("_id,string,document.nested.1.deep,int64"));
    assert_eq!(lines.next(), Some("0,s0,true,1099511627776"));
    strata(&[
        "import",
        "--uri",
        &uri,
        "-d",
        "x",
        "-c",
        "from_csv",
        "--type",
        "csv",
        "--headerline",
        "--file",
        csv.to_str().unwrap(),
    ]);
    let back =
        client.database("x").collection::<Document>("from_csv").find_one(doc! { "_id": 7 }).await.unwrap().unwrap();
    assert_eq!(
        back,
        doc! { "_id": 7, "string": "s7", "document": { "nested": { "1": { "deep": true } } }, "int64": 1_099_511_627_776_i64 }
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}
