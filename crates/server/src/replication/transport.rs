//! How members talk: over the MongoDB wire protocol, on the port clients use.
//!
//! - The consensus library's messages go one way: each peer has a task that keeps one
//!   connection open and writes batches of messages as one `replSetRaftMessage` command sent
//!   with `moreToCome` (no reply; the library retries what is lost, and a peer that cannot be
//!   reached is reported so the library slows its probes).
//! - Setting up (`replSetInitiate`, `rs.add()` telling a member to join) is a plain command
//!   with a reply ([`call`]), made from the handler's thread.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bson::{Document, RawDocumentBuf, rawdoc};
use protobuf::Message as _;
use raft::prelude::Message;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Messages sent in one command at most.
const BATCH: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Senders to every other member.
pub struct Transport {
    runtime: tokio::runtime::Handle,
    /// The address this member listens on: its connections to peers start from it (so a peer,
    /// or a proxy in front of it, can tell members apart); `None` when it listens on all.
    source: Option<std::net::IpAddr>,
    peers: HashMap<u64, Peer>,
    /// Told the ids of peers a batch could not reach.
    unreachable: UnboundedSender<u64>,
}

struct Peer {
    host: String,
    outbox: UnboundedSender<Message>,
}

impl Transport {
    pub fn new(
        runtime: tokio::runtime::Handle,
        unreachable: UnboundedSender<u64>,
        source: Option<std::net::IpAddr>,
    ) -> Transport {
        Transport { runtime, source, peers: HashMap::new(), unreachable }
    }

    /// Makes the peers `members` (consensus id, host), starting and stopping their tasks.
    pub fn set_peers(&mut self, members: &[(u64, String)]) {
        self.peers.retain(|id, peer| members.iter().any(|(i, host)| i == id && *host == peer.host));
        for (id, host) in members {
            if self.peers.contains_key(id) {
                continue;
            }
            let (outbox, inbox) = unbounded_channel();
            let unreachable = self.unreachable.clone();
            self.runtime.spawn(run_peer(*id, (host.clone(), self.source), inbox, unreachable));
            self.peers.insert(*id, Peer { host: host.clone(), outbox });
        }
    }

    pub fn send(&self, messages: Vec<Message>) {
        for message in messages {
            if let Some(peer) = self.peers.get(&message.to) {
                let _ = peer.outbox.send(message);
            }
        }
    }
}

/// One peer's sender: batches what is queued and writes it; a failed connection is dropped
/// (with the batch) and made again for the next one.
async fn run_peer(
    id: u64,
    (host, source): (String, Option<std::net::IpAddr>),
    mut inbox: UnboundedReceiver<Message>,
    unreachable: UnboundedSender<u64>,
) {
    let mut stream: Option<tokio::net::TcpStream> = None;
    let mut request_id = 0i32;
    while let Some(first) = inbox.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match inbox.try_recv() {
                Ok(message) => batch.push(message),
                Err(_) => break,
            }
        }
        request_id = request_id.wrapping_add(1);
        let Some(frame) = encode(&batch, request_id) else { continue };
        if stream.is_none() {
            match tokio::time::timeout(CONNECT_TIMEOUT, connect(&host, source)).await {
                Ok(Ok(connected)) => {
                    let _ = connected.set_nodelay(true);
                    stream = Some(connected);
                }
                _ => {
                    let _ = unreachable.send(id);
                    continue;
                }
            }
        }
        let written = match stream.as_mut() {
            Some(connected) => connected.write_all(&frame).await.is_ok(),
            None => false,
        };
        if !written {
            stream = None;
            let _ = unreachable.send(id);
        }
    }
}

/// Connects to `host` from `source` (when given).
async fn connect(host: &str, source: Option<std::net::IpAddr>) -> std::io::Result<tokio::net::TcpStream> {
    let address = tokio::net::lookup_host(host)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{host}: no address")))?;
    let socket = match address {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(ip) = source.filter(|ip| ip.is_ipv4() == address.is_ipv4()) {
        socket.bind(std::net::SocketAddr::new(ip, 0))?;
    }
    socket.connect(address).await
}

fn encode(batch: &[Message], request_id: i32) -> Option<Vec<u8>> {
    let mut messages = bson::RawArrayBuf::new();
    for message in batch {
        let bytes = message.write_to_bytes().ok()?;
        messages.push(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes });
    }
    let body = rawdoc! {"replSetRaftMessage": 1, "messages": messages, "$db": "admin"};
    let mut msg = wire::OpMsg::new(body);
    msg.flags = wire::MsgFlags(wire::MsgFlags::MORE_TO_COME);
    msg.encode(request_id, 0).ok()
}

/// The consensus messages of a `replSetRaftMessage` command.
pub fn decode(command: &Document) -> Result<Vec<Message>, String> {
    let listed = command.get_array("messages").map_err(|e| format!("replSetRaftMessage needs messages: {e}"))?;
    listed
        .iter()
        .map(|value| match value {
            bson::Bson::Binary(binary) => Message::parse_from_bytes(&binary.bytes).map_err(|e| e.to_string()),
            _ => Err("replSetRaftMessage messages are binary".to_owned()),
        })
        .collect()
}

/// Runs `command` on the member at `host` and returns its reply (an `ok: 0` reply is an error
/// with its message).
pub fn call(host: &str, command: RawDocumentBuf, timeout: Duration) -> Result<Document, String> {
    let address = host
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(|e| format!("{host}: {e}"))?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let request = wire::OpMsg::new(command).encode(1, 0).map_err(|e| e.to_string())?;
    stream.write_all(&request).map_err(|e| format!("{host}: {e}"))?;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).map_err(|e| format!("{host}: {e}"))?;
    let length = i32::from_le_bytes(header) as usize;
    if !(21..=48 * 1024 * 1024).contains(&length) {
        return Err(format!("{host}: a reply of {length} bytes"));
    }
    let mut rest = vec![0u8; length - 4];
    stream.read_exact(&mut rest).map_err(|e| format!("{host}: {e}"))?;
    let mut message = header.to_vec();
    message.extend_from_slice(&rest);
    let frame = wire::Frame::from_message(message, &wire::Limits::default()).map_err(|e| e.to_string())?;
    let reply = wire::OpMsg::parse(&frame, &wire::Limits::default()).map_err(|e| e.to_string())?;
    let reply = Document::try_from(reply.body.as_ref()).map_err(|e| e.to_string())?;
    let ok = reply.get("ok").and_then(|ok| ok.as_f64().or_else(|| crate::command::as_i64(ok).map(|n| n as f64)));
    if ok != Some(1.0) {
        return Err(format!("{host}: {}", reply.get_str("errmsg").unwrap_or("refused")));
    }
    Ok(reply)
}
