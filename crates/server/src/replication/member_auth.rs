//! Members proving themselves to each other, as mongod's members do (`--clusterAuthMode`):
//!
//! - with `--keyFile` (mode `keyFile`, the default), each connection a member opens to another
//!   first authenticates as `__system@local` with SCRAM-SHA-256, the key being the password.
//!   The receiving member knows that user from the same key (`auth::set_internal_user`);
//! - with X.509 (mode `x509`), the connection speaks TLS and the member presents its cluster
//!   certificate, then authenticates with MONGODB-X509. The receiving member takes a certificate
//!   whose organization, organizational units and domain components equal its own as a member's
//!   (`tls::member_attributes`) and logs the connection in as `__system@local`;
//! - `sendKeyFile` and `sendX509` send one and accept both, for moving a running set from keys
//!   to certificates one member at a time, as with mongod.
//!
//! `__system`'s role is the only one with the `internal` action the members' own commands
//! need. A member that cannot prove itself cannot join, send consensus messages or be added.

use std::io::{Read, Write};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bson::{Binary, Document, RawDocumentBuf, rawdoc, spec::BinarySubtype};

use crate::auth::scram::{Mechanism, random_bytes};

/// The internal user's name and database.
pub const USER: &str = "__system";
pub const DB: &str = "local";

/// `--clusterAuthMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClusterAuthMode {
    /// The key only (the default).
    #[default]
    KeyFile,
    /// Sends the key; accepts the key or a member's certificate.
    SendKeyFile,
    /// Sends its certificate; accepts the key or a member's certificate.
    SendX509,
    /// Certificates only.
    X509,
}

impl ClusterAuthMode {
    pub fn parse(text: &str) -> Option<ClusterAuthMode> {
        match text {
            "keyFile" => Some(ClusterAuthMode::KeyFile),
            "sendKeyFile" => Some(ClusterAuthMode::SendKeyFile),
            "sendX509" => Some(ClusterAuthMode::SendX509),
            "x509" => Some(ClusterAuthMode::X509),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ClusterAuthMode::KeyFile => "keyFile",
            ClusterAuthMode::SendKeyFile => "sendKeyFile",
            ClusterAuthMode::SendX509 => "sendX509",
            ClusterAuthMode::X509 => "x509",
        }
    }

    /// True if this member proves itself with its certificate rather than the key.
    pub fn sends_x509(self) -> bool {
        matches!(self, ClusterAuthMode::SendX509 | ClusterAuthMode::X509)
    }

    /// True if another member may prove itself with the key.
    pub fn accepts_key(self) -> bool {
        self != ClusterAuthMode::X509
    }

    /// True if another member may prove itself with its certificate.
    pub fn accepts_x509(self) -> bool {
        self != ClusterAuthMode::KeyFile
    }
}

/// What this member opens connections to the others with.
#[derive(Clone, Default)]
pub struct MemberCredentials {
    /// The set's key, sent unless the mode sends the certificate.
    pub key: Option<Arc<str>>,
    /// Authenticate with MONGODB-X509 (the certificate TLS presented).
    pub x509: bool,
    /// TLS to the other members (`preferTLS`, `requireTLS`), presenting the cluster certificate.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Proves this member on a fresh connection, as `credentials` say (nothing without a key or a
/// certificate: the set runs without access control).
pub fn prove<S: Read + Write>(stream: &mut S, credentials: &MemberCredentials) -> Result<(), String> {
    if credentials.x509 {
        let command = rawdoc! {"authenticate": 1, "mechanism": crate::auth::X509_MECHANISM, "$db": "$external"};
        return round_trip(stream, command).map(drop).map_err(|e| format!("member authentication: {e}"));
    }
    match &credentials.key {
        Some(key) => authenticate(stream, key),
        None => Ok(()),
    }
}

/// Runs `command` on `stream` and returns the reply (an `ok: 0` reply is an error with its
/// message).
pub fn round_trip<S: Read + Write>(stream: &mut S, command: RawDocumentBuf) -> Result<Document, String> {
    let reply = round_trip_raw(stream, command)?;
    Document::try_from(reply.as_ref()).map_err(|e| e.to_string())
}

/// [`round_trip`], the reply left as its bytes (a batch of documents copied from a member).
pub fn round_trip_raw<S: Read + Write>(stream: &mut S, command: RawDocumentBuf) -> Result<RawDocumentBuf, String> {
    let request = wire::OpMsg::new(command).encode(1, 0).map_err(|e| e.to_string())?;
    stream.write_all(&request).and_then(|()| stream.flush()).map_err(|e| e.to_string())?;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).map_err(|e| e.to_string())?;
    let length = i32::from_le_bytes(header) as usize;
    if !(21..=48 * 1024 * 1024).contains(&length) {
        return Err(format!("a reply of {length} bytes"));
    }
    let mut rest = vec![0u8; length - 4];
    stream.read_exact(&mut rest).map_err(|e| e.to_string())?;
    let mut message = header.to_vec();
    message.extend_from_slice(&rest);
    let frame = wire::Frame::from_message(message, &wire::Limits::default()).map_err(|e| e.to_string())?;
    let reply = wire::OpMsg::parse(&frame, &wire::Limits::default()).map_err(|e| e.to_string())?;
    let body = reply.body.as_ref();
    let ok = match body.get("ok").map_err(|e| e.to_string())? {
        Some(bson::RawBsonRef::Double(ok)) => ok == 1.0,
        Some(bson::RawBsonRef::Int32(ok)) => ok == 1,
        Some(bson::RawBsonRef::Int64(ok)) => ok == 1,
        _ => false,
    };
    if !ok {
        return Err(body.get_str("errmsg").unwrap_or("refused").to_owned());
    }
    Ok(body.to_owned())
}

fn binary(bytes: Vec<u8>) -> Binary {
    Binary { subtype: BinarySubtype::Generic, bytes }
}

fn payload(reply: &Document) -> Result<String, String> {
    let bytes = reply.get_binary_generic("payload").map_err(|e| format!("a SCRAM reply without its payload: {e}"))?;
    String::from_utf8(bytes.clone()).map_err(|e| e.to_string())
}

/// Authenticates `stream` as the internal user with `key` (SCRAM-SHA-256, RFC 5802/7677, with
/// MongoDB's `saslStart`/`saslContinue`), checking the server's signature too.
fn authenticate<S: Read + Write>(stream: &mut S, key: &str) -> Result<(), String> {
    let mechanism = Mechanism::Sha256;
    let nonce = BASE64.encode(random_bytes(24));
    let first_bare = format!("n={USER},r={nonce}");
    let start = rawdoc! {
        "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": binary(format!("n,,{first_bare}").into_bytes()),
        "options": {"skipEmptyExchange": true}, "$db": DB,
    };
    let reply = round_trip(stream, start).map_err(|e| format!("member authentication: {e}"))?;
    let conversation = reply.get("conversationId").cloned().unwrap_or(bson::Bson::Int32(1));
    let server_first = payload(&reply)?;
    let field = |name: char| {
        server_first.split(',').find_map(|part| part.strip_prefix(&format!("{name}=")[..])).map(str::to_owned)
    };
    let (Some(combined), Some(salt), Some(iterations)) = (field('r'), field('s'), field('i')) else {
        return Err(format!("member authentication: a malformed server-first message {server_first:?}"));
    };
    if !combined.starts_with(&nonce) {
        return Err("member authentication: the server's nonce does not extend ours".into());
    }
    let salt = BASE64.decode(salt).map_err(|e| e.to_string())?;
    let iterations: u32 = iterations.parse().map_err(|_| "member authentication: a bad iteration count".to_owned())?;
    let normalized = mechanism.normalized_password(USER, key).map_err(|e| e.0)?;
    let salted = mechanism.salted_password(&normalized, &salt, iterations);
    let client_key = mechanism.hmac(&salted, b"Client Key");
    let stored_key = mechanism.hash(&client_key);
    let without_proof = format!("c=biws,r={combined}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
    let final_message = format!("{without_proof},p={}", BASE64.encode(proof));
    let mut next = rawdoc! {"saslContinue": 1, "payload": binary(final_message.into_bytes()), "$db": DB};
    next.append(
        bson::raw::cstr!("conversationId"),
        bson::RawBson::try_from(conversation.clone()).map_err(|e| e.to_string())?,
    );
    let reply = round_trip(stream, next).map_err(|e| format!("member authentication: {e}"))?;
    let server_signature = mechanism.hmac(&mechanism.hmac(&salted, b"Server Key"), auth_message.as_bytes());
    if payload(&reply)? != format!("v={}", BASE64.encode(server_signature)) {
        return Err("member authentication: the other member's signature is wrong".into());
    }
    if reply.get_bool("done").unwrap_or(true) {
        return Ok(());
    }
    let mut empty = rawdoc! {"saslContinue": 1, "payload": binary(Vec::new()), "$db": DB};
    empty.append(bson::raw::cstr!("conversationId"), bson::RawBson::try_from(conversation).map_err(|e| e.to_string())?);
    round_trip(stream, empty).map(drop).map_err(|e| format!("member authentication: {e}"))
}
