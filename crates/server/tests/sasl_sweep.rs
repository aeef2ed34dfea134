//! Goal: no client message makes a SCRAM conversation succeed without the password, and none
//! crashes the server — truncated, bit-flipped, reordered, replayed (a final message from an
//! earlier conversation) and forged client messages, against a server with access control on.
//! The seeded, CI-sized cousin of the `sasl` fuzz target. Method: an in-process server with
//! `auth: true` and one user; each round runs a real client side of SCRAM-SHA-256 or -SHA-1
//! (computing the right proof), then sends a mutation of one of its messages instead, and
//! checks the connection is not authenticated and may not read; a control round sends the
//! true message and must succeed. `STRATA_SEED` replays a seed; the seed is printed on failure.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use hmac::{KeyInit, Mac};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use server::{InProcess, ServerConfig};
use sha2::Digest;

const ROUNDS: usize = 300;
const PASSWORD: &str = "correct horse";

fn run(server: &InProcess, db: &str, body: Document) -> Document {
    Document::try_from(server.run_document(db, body)).expect("replies are documents")
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes })
}

fn authenticated(server: &InProcess) -> bool {
    let status = run(server, "admin", doc! { "connectionStatus": 1 });
    let users = status.get_document("authInfo").and_then(|info| info.get_array("authenticatedUsers"));
    !users.expect("authInfo").is_empty()
}

/// The client side of SCRAM, enough to compute true messages.
struct Client {
    sha256: bool,
    nonce: String,
}

impl Client {
    fn first(&self) -> String {
        format!("n,,n=ann,r={}", self.nonce)
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        if self.sha256 {
            let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        } else {
            let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(key).unwrap();
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }

    /// The true final message for the server's first message.
    fn last(&self, server_first: &str) -> String {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").unwrap();
        let salt = BASE64.decode(fields[1].strip_prefix("s=").unwrap()).unwrap();
        let iterations: u32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let (password, len) = if self.sha256 {
            (PASSWORD.to_owned(), 32)
        } else {
            let digest = md5::Md5::digest(format!("ann:mongo:{PASSWORD}").as_bytes());
            (digest.iter().map(|b| format!("{b:02x}")).collect::<String>(), 20)
        };
        let mut salted = vec![0; len];
        if self.sha256 {
            pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password.as_bytes(), &salt, iterations, &mut salted);
        } else {
            pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password.as_bytes(), &salt, iterations, &mut salted);
        }
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = if self.sha256 {
            sha2::Sha256::digest(&client_key).to_vec()
        } else {
            sha1::Sha1::digest(&client_key).to_vec()
        };
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", &self.first()[3..]);
        let signature = self.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }
}

fn mutate(rng: &mut StdRng, message: &str, replayed: Option<&String>) -> Vec<u8> {
    let mut bytes = message.as_bytes().to_vec();
    match rng.gen_range(0..7) {
        0 => {
            let at = rng.gen_range(0..bytes.len());
            bytes[at] ^= 1 << rng.gen_range(0..8);
        }
        1 => bytes.truncate(rng.gen_range(0..bytes.len())),
        2 => bytes = replayed.map_or_else(Vec::new, |old| old.as_bytes().to_vec()),
        3 => bytes = (0..rng.gen_range(0..200)).map(|_| rng.r#gen()).collect(),
        4 => bytes.extend_from_slice(b",p=AAAA"),
        5 => {
            let text = message.replace("c=biws", "c=eSws");
            bytes = text.into_bytes();
        }
        _ => {
            let parts: Vec<&str> = message.split(',').rev().collect();
            bytes = parts.join(",").into_bytes();
        }
    }
    bytes
}

#[test]
fn forged_sasl_messages_never_authenticate() {
    let seed: u64 = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let server = InProcess::open_in_memory_with(ServerConfig { auth: true, ..ServerConfig::default() }).unwrap();
    // The localhost exception creates the only user.
    let created = run(&server, "admin", doc! { "createUser": "ann", "pwd": PASSWORD, "roles": ["root"] });
    assert_eq!(created.get_f64("ok").ok(), Some(1.0), "{created}");
    let mut replayable: Option<String> = None;
    for round in 0..ROUNDS {
        let client = Client { sha256: rng.gen_bool(0.5), nonce: format!("{:x}", rng.r#gen::<u64>()) };
        let mechanism = if client.sha256 { "SCRAM-SHA-256" } else { "SCRAM-SHA-1" };
        let control = round % 25 == 0;
        let forge_first = !control && rng.gen_bool(0.3);
        let first = if forge_first { mutate(&mut rng, &client.first(), None) } else { client.first().into_bytes() };
        let started = run(
            &server,
            "admin",
            doc! {
                "saslStart": 1, "mechanism": mechanism, "payload": binary(first), "options": { "skipEmptyExchange": true },
            },
        );
        let context = format!("seed {seed} round {round} ({mechanism}, control {control}): ");
        if started.get_f64("ok").ok() != Some(1.0) {
            assert!(forge_first, "{context}a true first message was refused: {started}");
            assert!(!authenticated(&server), "{context}authenticated after a refused start");
            continue;
        }
        let id = started.get_i32("conversationId").unwrap();
        let server_first = String::from_utf8(started.get_binary_generic("payload").unwrap().clone()).unwrap();
        let last = if forge_first { "c=biws,r=x,p=AAAA".to_owned() } else { client.last(&server_first) };
        let sent = if control { last.clone().into_bytes() } else { mutate(&mut rng, &last, replayable.as_ref()) };
        let reply =
            run(&server, "admin", doc! { "saslContinue": 1, "conversationId": id, "payload": binary(sent.clone()) });
        let succeeded = reply.get_f64("ok").ok() == Some(1.0);
        // A forged first message makes `last` a forgery too, even when sent unchanged.
        if !forge_first && (control || sent == last.as_bytes()) {
            assert!(succeeded, "{context}the true final message failed: {reply}");
            assert!(authenticated(&server), "{context}not authenticated after success");
            run(&server, "admin", doc! { "logout": 1 });
        } else {
            assert!(!succeeded, "{context}a forged final message {:?} succeeded", String::from_utf8_lossy(&sent));
            assert!(!authenticated(&server), "{context}authenticated by a forged message");
            let read = run(&server, "admin", doc! { "find": "c" });
            assert_eq!(read.get_i32("code").ok(), Some(13), "{context}{read}");
        }
        replayable = Some(last);
    }
}
