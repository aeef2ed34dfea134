//! Handshake and diagnostic commands over a raw socket against an in-process server: every
//! field drivers read, OP_QUERY answered with OP_REPLY, compression, moreToCome, unknown
//! commands.

mod common;

use bson::{Bson, Document, doc};
use common::TestServer;
use wire::{Compressor, OpCode};

/// Goal: `hello` has every field drivers size themselves by, with mongod's values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_fields() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let reply = client.command(doc! { "hello": 1, "helloOk": true, "$db": "admin" }).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
    assert!(reply.get_bool("isWritablePrimary").unwrap());
    assert!(reply.get_bool("helloOk").unwrap());
    assert_eq!(reply.get_i32("maxBsonObjectSize").unwrap(), 16_777_216);
    assert_eq!(reply.get_i32("maxMessageSizeBytes").unwrap(), 48_000_000);
    assert_eq!(reply.get_i32("maxWriteBatchSize").unwrap(), 100_000);
    assert_eq!(reply.get_i32("logicalSessionTimeoutMinutes").unwrap(), 30);
    assert_eq!(reply.get_i32("minWireVersion").unwrap(), 0);
    assert_eq!(reply.get_i32("maxWireVersion").unwrap(), 21);
    assert!(reply.get_datetime("localTime").is_ok());
    assert!(reply.get_i64("connectionId").unwrap() >= 1);
    assert!(reply.get("compression").is_none());
    let legacy = client.command(doc! { "isMaster": 1, "$db": "admin" }).await;
    assert!(legacy.get_bool("ismaster").unwrap());
    server.stop().await;
}

/// Goal: the legacy OP_QUERY handshake on admin.$cmd is answered with OP_REPLY, and an
/// OP_QUERY on a collection is refused with code 352.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn op_query_handshake() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let bytes = client.query_bytes("admin.$cmd", doc! { "isMaster": 1, "client": { "driver": { "name": "test" } } });
    client.send(&bytes).await;
    let reply = client.read_op_reply().await.unwrap();
    assert!(reply.get_bool("ismaster").unwrap());
    assert_eq!(reply.get_i32("maxWireVersion").unwrap(), 21);
    let wrapped = client
        .query_bytes("admin.$cmd", doc! { "$query": { "ismaster": 1 }, "$readPreference": { "mode": "primary" } });
    client.send(&wrapped).await;
    assert!(client.read_op_reply().await.unwrap().get_bool("ismaster").unwrap());
    let bytes = client.query_bytes("test.users", doc! { "name": "x" });
    client.send(&bytes).await;
    let reply = client.read_op_reply().await.unwrap();
    assert_eq!(reply.get_i32("code").unwrap(), 352);
    server.stop().await;
}

/// Goal: compression is negotiated in the client's order, and a compressed request gets a
/// compressed reply with the same compressor (hello itself is never compressed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_negotiated_and_used() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let reply =
        client.command(doc! { "hello": 1, "compression": ["zstd", "lz4", "snappy", "zlib"], "$db": "admin" }).await;
    assert_eq!(reply.get_array("compression").unwrap(), &vec![Bson::from("zstd"), "snappy".into(), "zlib".into()]);
    for compressor in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        let plain = client.msg_bytes(doc! { "ping": 1, "$db": "admin" }, 0);
        let compressed = wire::compression::compress(&plain, compressor).unwrap();
        client.send(&compressed).await;
        let frame = client.read_frame().await.unwrap();
        assert_eq!(frame.header.op_code, OpCode::Compressed);
        let request = wire::Request::parse(&frame, &wire::Limits::default()).unwrap();
        assert_eq!(request.compressor, Some(compressor));
    }
    server.stop().await;
}

/// Goal: a request with moreToCome runs and gets no reply; the next request's reply is the
/// next thing on the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_to_come_gets_no_reply() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let silent = client.msg_bytes(doc! { "ping": 1, "$db": "admin" }, wire::MsgFlags::MORE_TO_COME);
    client.send(&silent).await;
    let reply = client.command(doc! { "buildInfo": 1, "$db": "admin" }).await;
    assert_eq!(reply.get_str("version").unwrap(), "7.0.0");
    server.stop().await;
}

/// Goal: a getMore with `exhaustAllowed` is answered by a stream of replies, each with
/// `moreToCome` but the last, each answering the reply before it, together every document once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaust_get_more_streams_its_batches() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let documents: Vec<Document> = (0..23).map(|i| doc! {"_id": i}).collect();
    client.command(doc! {"insert": "c", "documents": documents, "$db": "test"}).await;
    let found = client.command(doc! {"find": "c", "batchSize": 5, "$db": "test"}).await;
    let cursor = found.get_document("cursor").unwrap().get_i64("id").unwrap();
    let exhaust_allowed = 1 << 16;
    let get_more = doc! {"getMore": cursor, "collection": "c", "batchSize": 5, "$db": "test"};
    let bytes = client.msg_bytes(get_more, exhaust_allowed);
    let request_id = wire::MsgHeader::parse(&bytes).unwrap().request_id;
    client.send(&bytes).await;
    let frames = client.read_frames(4).await;
    let (mut answering, mut seen) = (request_id, 5);
    for (position, frame) in frames.iter().enumerate() {
        assert_eq!(frame.header.response_to, answering, "reply {position} answers the one before");
        answering = frame.header.request_id;
        let wire::Message::Msg(message) = wire::Request::parse(frame, &wire::Limits::default()).unwrap().message else {
            panic!("not OP_MSG");
        };
        assert_eq!(message.flags.more_to_come(), position < 3, "moreToCome on reply {position}");
        let body = Document::try_from(message.body).unwrap();
        let cursor = body.get_document("cursor").unwrap();
        seen += cursor.get_array("nextBatch").unwrap().len();
        assert_eq!(cursor.get_i64("id").unwrap() == 0, position == 3);
    }
    assert_eq!(seen, 23);
    let reply = client.command(doc! {"ping": 1, "$db": "admin"}).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
    server.stop().await;
}

/// Goal: each diagnostic command answers ok with the fields tools read; unknown commands get
/// CommandNotFound; generic arguments are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostic_commands() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let generic = doc! {
        "$db": "admin", "lsid": { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![0; 16] } },
        "$clusterTime": { "clusterTime": bson::Timestamp { time: 1, increment: 1 } },
        "$readPreference": { "mode": "primaryPreferred" }, "comment": "hi", "maxTimeMS": 1000,
    };
    for name in [
        "ping",
        "buildInfo",
        "whatsmyuri",
        "getCmdLineOpts",
        "connectionStatus",
        "listCommands",
        "hostInfo",
        "serverStatus",
    ] {
        let mut body = doc! { name: 1 };
        body.extend(generic.clone());
        let reply = client.command(body).await;
        assert_eq!(reply.get_f64("ok").unwrap(), 1.0, "{name}: {reply}");
    }
    let reply = client.command(doc! { "getParameter": 1, "featureCompatibilityVersion": 1, "$db": "admin" }).await;
    assert_eq!(reply.get_document("featureCompatibilityVersion").unwrap().get_str("version").unwrap(), "7.0");
    let reply = client.command(doc! { "endSessions": [{ "id": 1 }], "$db": "admin" }).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
    let reply = client.command(doc! { "killSessions": [], "$db": "admin" }).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
    let status = client.command(doc! { "serverStatus": 1, "$db": "admin" }).await;
    assert!(status.get_document("connections").unwrap().get_i64("current").unwrap() >= 1);
    assert!(status.get_document("opcounters").is_ok());
    let strata = status.get_document("strata").unwrap();
    assert_eq!(strata.get_array("nodeBytesWrittenByHeight").unwrap().len(), 8);
    let cache = strata.get_document("cache").unwrap();
    for counter in ["writeCopies", "partialEvictions", "headLoads", "sectionLoads", "sectionsStartedEarly"] {
        assert!(cache.get_i64(counter).is_ok(), "serverStatus.strata.cache.{counter}");
    }
    let kinds = cache.get_document("bytesByKind").unwrap();
    let held: i64 = ["dirty", "clean", "sections", "internalHeads", "leafHeads", "withWriters", "held"]
        .iter()
        .map(|kind| kinds.get_i64(kind).unwrap_or_else(|_| panic!("serverStatus.strata.cache.bytesByKind.{kind}")))
        .sum();
    assert_eq!(held, cache.get_i64("usedBytes").unwrap(), "the kinds add up to the cache's used bytes: {kinds}");
    assert!(strata.get_i64("nodeBytesRead").is_ok());
    assert_eq!(strata.get_i64("flushFailures").unwrap(), 0);
    assert_eq!(strata.get_i64("checkpointFailures").unwrap(), 0);
    let reply = client.command(doc! { "frobnicate": 1, "$db": "admin" }).await;
    assert_eq!(reply.get_i32("code").unwrap(), 59);
    assert_eq!(reply.get_str("codeName").unwrap(), "CommandNotFound");
    assert_eq!(reply.get_str("errmsg").unwrap(), "no such command: 'frobnicate'");
    let reply = client.command(doc! { "ping": 1 }).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 0.0, "OP_MSG without $db is refused");
    server.stop().await;
}

/// Goal: a client over the connection limit is closed at once; the others keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limit() {
    let config = server::ServerConfig { port: 0, max_connections: 2, ..Default::default() };
    let server = TestServer::start_with(config).await;
    let mut first = server.connect().await;
    let mut second = server.connect().await;
    first.command(doc! { "ping": 1, "$db": "admin" }).await;
    second.command(doc! { "ping": 1, "$db": "admin" }).await;
    let mut third = server.connect().await;
    assert!(third.is_closed().await);
    first.command(doc! { "ping": 1, "$db": "admin" }).await;
    drop(second);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut fourth = server.connect().await;
    assert_eq!(fourth.command(doc! { "ping": 1, "$db": "admin" }).await.get_f64("ok").unwrap(), 1.0);
    server.stop().await;
}
