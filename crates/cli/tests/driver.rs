//! The official Rust `mongodb` driver against the real `strata` binary: handshake, commands,
//! error shapes, graceful shutdown.

mod common;

use common::{Strata, temp_dir};
use mongodb::Client;
use mongodb::bson::doc;

async fn client(server: &Strata) -> Client {
    Client::with_uri_str(server.uri()).await.unwrap()
}

/// Goal: the driver connects, and the handshake and diagnostics answer as mongod's do.
#[tokio::test]
async fn handshake_and_diagnostics() {
    let dir = temp_dir("handshake");
    let server = Strata::start(&dir);
    let client = client(&server).await;
    let admin = client.database("admin");
    let hello = admin.run_command(doc! { "hello": 1 }).await.unwrap();
    assert_eq!(hello.get_i32("maxWireVersion").unwrap(), 21);
    let build = admin.run_command(doc! { "buildInfo": 1 }).await.unwrap();
    assert_eq!(build.get_str("version").unwrap(), "7.0.0");
    let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    assert!(status.get_document("connections").is_ok());
    let error = admin.run_command(doc! { "frobnicate": 1 }).await.unwrap_err();
    match *error.kind {
        mongodb::error::ErrorKind::Command(ref command) => {
            assert_eq!(command.code, 59);
            assert_eq!(command.code_name, "CommandNotFound");
        }
        ref other => panic!("expected a command error, got {other:?}"),
    }
    drop(client);
    assert!(server.terminate().success(), "SIGTERM exits 0");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: compressed connections work with each compressor the driver has.
#[tokio::test]
async fn compressed_connections() {
    let dir = temp_dir("compression");
    let server = Strata::start(&dir);
    for compressor in ["zstd", "zlib", "snappy"] {
        let uri = format!("{}&compressors={compressor}", server.uri());
        let client = Client::with_uri_str(uri).await.unwrap();
        let reply = client.database("admin").run_command(doc! { "ping": 1 }).await.unwrap();
        assert_eq!(reply.get_f64("ok").unwrap(), 1.0, "{compressor}");
    }
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: the driver's CRUD, index, aggregate and cursor paths work end to end, and a duplicate
/// key comes back as MongoDB's write error (code 11000, keyPattern/keyValue).
#[tokio::test]
async fn crud_indexes_and_errors() {
    let dir = temp_dir("crud");
    let server = Strata::start(&dir);
    let client = client(&server).await;
    let collection = client.database("shop").collection::<mongodb::bson::Document>("items");
    let documents: Vec<_> = (0..250).map(|i| doc! { "sku": format!("s{i}"), "qty": i }).collect();
    let inserted = collection.insert_many(documents).await.unwrap();
    assert_eq!(inserted.inserted_ids.len(), 250);
    let index = mongodb::IndexModel::builder()
        .keys(doc! { "sku": 1 })
        .options(mongodb::options::IndexOptions::builder().unique(true).build())
        .build();
    assert_eq!(collection.create_index(index).await.unwrap().index_name, "sku_1");
    let found = collection.find_one(doc! { "sku": "s42" }).await.unwrap().unwrap();
    assert_eq!(found.get_i32("qty").unwrap(), 42);
    let mut cursor = collection.find(doc! { "qty": { "$gte": 50 } }).batch_size(20).await.unwrap();
    let mut count = 0;
    while cursor.advance().await.unwrap() {
        count += 1;
    }
    assert_eq!(count, 200, "getMore batches");
    let updated =
        collection.update_many(doc! { "qty": { "$lt": 10 } }, doc! { "$set": { "low": true } }).await.unwrap();
    assert_eq!((updated.matched_count, updated.modified_count), (10, 10));
    assert_eq!(collection.delete_many(doc! { "low": true }).await.unwrap().deleted_count, 10);
    assert_eq!(collection.count_documents(doc! {}).await.unwrap(), 240);
    let mut groups = collection
        .aggregate(vec![
            doc! { "$match": { "qty": { "$gte": 240 } } },
            doc! { "$group": { "_id": null, "n": { "$sum": 1 } } },
        ])
        .await
        .unwrap();
    assert!(groups.advance().await.unwrap());
    assert_eq!(groups.deserialize_current().unwrap().get_i32("n").unwrap(), 10);
    let error = collection.insert_one(doc! { "sku": "s42" }).await.unwrap_err();
    match *error.kind {
        mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(ref write)) => {
            assert_eq!(write.code, 11000);
            assert!(
                write.message.contains("E11000 duplicate key error collection: shop.items index: sku_1"),
                "{}",
                write.message
            );
        }
        ref other => panic!("expected a write error, got {other:?}"),
    }
    let names = client.database("shop").list_collection_names().await.unwrap();
    assert_eq!(names, vec!["items".to_owned()]);
    drop(client);
    assert!(server.terminate().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: data written before a clean shutdown is there after a restart.
#[tokio::test]
async fn restart_keeps_data() {
    let dir = temp_dir("restart");
    let server = Strata::start(&dir);
    let collection = client(&server).await.database("d").collection::<mongodb::bson::Document>("c");
    collection.insert_many((0..100).map(|i| doc! { "i": i })).await.unwrap();
    assert!(server.terminate().success());
    let server = Strata::start(&dir);
    let collection = client(&server).await.database("d").collection::<mongodb::bson::Document>("c");
    assert_eq!(collection.count_documents(doc! { "i": { "$gte": 50 } }).await.unwrap(), 50);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}
