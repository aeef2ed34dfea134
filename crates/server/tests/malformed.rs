//! Goal: no malformed message takes the server down or disturbs other connections. Method: a
//! bystander connection is opened first; each corpus entry is sent on its own connection, the
//! server must answer it with an error reply or close that connection, and after every entry
//! both the bystander and a fresh connection still answer `ping`.

mod common;

use bson::{RawDocumentBuf, doc, rawdoc};
use common::{Client, TestServer};

fn header(length: i32, request_id: i32, op_code: i32) -> Vec<u8> {
    let mut bytes = Vec::new();
    for field in [length, request_id, 0, op_code] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes
}

/// A whole message with a correct length around `payload`.
fn message(op_code: i32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = header((16 + payload.len()) as i32, 7, op_code);
    bytes.extend_from_slice(payload);
    bytes
}

fn msg_payload(flags: u32, body: &[u8]) -> Vec<u8> {
    let mut payload = flags.to_le_bytes().to_vec();
    payload.push(0);
    payload.extend_from_slice(body);
    payload
}

fn ping_bytes() -> Vec<u8> {
    rawdoc! { "ping": 1, "$db": "admin" }.into_bytes()
}

fn nested(depth: usize) -> Vec<u8> {
    let mut document = rawdoc! { "leaf": 1 };
    for _ in 0..depth {
        let mut outer = RawDocumentBuf::new();
        outer.append(bson::raw::cstr!("a"), document);
        document = outer;
    }
    let mut command = rawdoc! { "ping": 1, "$db": "admin" };
    command.append(bson::raw::cstr!("x"), document);
    command.into_bytes()
}

/// (name, bytes, expect_reply): the corpus. `expect_reply` entries must get an ok:0 reply;
/// the others may get one or be closed.
fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let mut bad_length_doc = ping_bytes();
    bad_length_doc[0] = 0x7f;
    let mut bad_type = ping_bytes();
    bad_type[4] = 0x77;
    let mut checksum = msg_payload(1, &ping_bytes());
    checksum.extend_from_slice(&0xdead_beef_u32.to_le_bytes());
    let big_string = "x".repeat(17 * 1024 * 1024);
    let oversized = rawdoc! { "insert": "c", "documents": [{ "big": big_string }], "$db": "test" }.into_bytes();
    let mut lying_compressed = 2013i32.to_le_bytes().to_vec();
    lying_compressed.extend_from_slice(&40_000_000i32.to_le_bytes());
    lying_compressed.push(2);
    lying_compressed.extend_from_slice(&[0x78, 0x9c, 1, 2, 3, 4]);
    let mut huge_claim_compressed = 2013i32.to_le_bytes().to_vec();
    huge_claim_compressed.extend_from_slice(&i32::MAX.to_le_bytes());
    huge_claim_compressed.push(1);
    huge_claim_compressed.extend_from_slice(&[0; 8]);
    let mut garbage = Vec::new();
    let mut seed: u64 = 0x5eed;
    for _ in 0..4096 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        garbage.push((seed >> 33) as u8);
    }
    vec![
        ("length shorter than header", header(4, 1, 2013)),
        ("negative length", header(-1, 1, 2013)),
        ("length over 48 MB", header(48_000_001, 1, 2013)),
        ("unknown opcode", message(9999, &[0; 8])),
        ("legacy OP_INSERT", message(2002, &[0; 16])),
        ("unknown required flag bit", message(2013, &msg_payload(1 << 3, &ping_bytes()))),
        ("checksum mismatch", message(2013, &checksum)),
        ("document length lies", message(2013, &msg_payload(0, &bad_length_doc))),
        ("unknown element type", message(2013, &msg_payload(0, &bad_type))),
        ("unknown section kind", message(2013, &[0, 0, 0, 0, 9, 1, 2, 3])),
        ("OP_MSG with no body", message(2013, &[0, 0, 0, 0])),
        ("nested 300 deep", message(2013, &msg_payload(0, &nested(300)))),
        ("document over 16 MiB", message(2013, &msg_payload(0, &oversized))),
        ("compressed with lying size", message(2012, &lying_compressed)),
        ("compressed claiming 2 GB", message(2012, &huge_claim_compressed)),
        ("OP_QUERY truncated", message(2004, &[0, 0, 0, 0, b'a', b'.', b'$'])),
        ("random bytes", garbage),
    ]
}

async fn assert_alive(server: &TestServer, bystander: &mut Client, after: &str) {
    let reply = bystander.command(doc! { "ping": 1, "$db": "admin" }).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0, "bystander after {after}");
    let mut fresh = server.connect().await;
    let reply = fresh.command(doc! { "ping": 1, "$db": "admin" }).await;
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0, "fresh connection after {after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_corpus() {
    let server = TestServer::start().await;
    let mut bystander = server.connect().await;
    for (name, bytes) in corpus() {
        let mut victim = server.connect().await;
        victim.send(&bytes).await;
        match victim.read_frame().await {
            None => {}
            Some(frame) => {
                let request = wire::Request::parse(&frame, &wire::Limits::default()).unwrap();
                let wire::Message::Msg(reply) = request.message else { panic!("{name}: not OP_MSG") };
                let reply = bson::Document::try_from(reply.body).unwrap();
                assert_eq!(reply.get_f64("ok").unwrap(), 0.0, "{name}: {reply}");
            }
        }
        assert_alive(&server, &mut bystander, name).await;
    }
    server.stop().await;
}

/// Goal: an oversized document and a too-deep document get MongoDB's error reply on a
/// connection that stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_errors_are_replies() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let big = "x".repeat(17 * 1024 * 1024);
    let body = rawdoc! { "insert": "c", "documents": [{ "big": big }], "$db": "test" }.into_bytes();
    client.send(&message(2013, &msg_payload(0, &body))).await;
    let reply = client.read_msg_reply().await.expect("reply to an oversized document");
    assert_eq!(reply.get_str("codeName").unwrap(), "BSONObjectTooLarge");
    client.send(&message(2013, &msg_payload(0, &nested(300)))).await;
    let reply = client.read_msg_reply().await.expect("reply to a deep document");
    assert_eq!(reply.get_f64("ok").unwrap(), 0.0);
    assert_eq!(client.command(doc! { "ping": 1, "$db": "admin" }).await.get_f64("ok").unwrap(), 1.0);
    server.stop().await;
}

/// Goal: a header that claims a large message costs the server nothing until the bytes come,
/// and the connection waits for them without blocking others. Method: claim 40 MB, send 100
/// bytes, check another connection works, then close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_length_waits_without_blocking() {
    let server = TestServer::start().await;
    let mut liar = server.connect().await;
    let mut bytes = header(40_000_000, 1, 2013);
    bytes.extend_from_slice(&[0; 84]);
    liar.send(&bytes).await;
    let mut other = server.connect().await;
    assert_eq!(other.command(doc! { "ping": 1, "$db": "admin" }).await.get_f64("ok").unwrap(), 1.0);
    let status = other.command(doc! { "serverStatus": 1, "$db": "admin" }).await;
    assert_eq!(status.get_document("connections").unwrap().get_i64("current").unwrap(), 2);
    drop(liar);
    server.stop().await;
}
