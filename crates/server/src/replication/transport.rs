//! How members talk: over the MongoDB wire protocol, on the port clients use.
//!
//! - The consensus library's messages go one way: each peer has a task that keeps one
//!   connection open and writes batches of messages as one `replSetRaftMessage` command sent
//!   with `moreToCome` (no reply; the library retries what is lost, and a peer that cannot be
//!   reached is reported so the library slows its probes).
//! - Setting up (`replSetInitiate`, `rs.add()` telling a member to join) is a plain command
//!   with a reply ([`call`]), made from the handler's thread.

use std::collections::HashMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bson::{Document, RawDocumentBuf, rawdoc};
use protobuf::Message as _;
use raft::prelude::Message;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Messages sent in one command at most, and their bytes (unless one alone is larger).
const BATCH: usize = 256;
const BATCH_BYTES: usize = 8 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Senders to every other member.
pub struct Transport {
    runtime: tokio::runtime::Handle,
    /// The address this member listens on: its connections to peers start from it (so a peer,
    /// or a proxy in front of it, can tell members apart); `None` when it listens on all.
    source: Option<std::net::IpAddr>,
    /// The set's key (`--keyFile`): every connection authenticates with it first.
    key: Option<std::sync::Arc<str>>,
    peers: HashMap<u64, Peer>,
    /// Told the ids of peers a batch could not reach.
    unreachable: UnboundedSender<u64>,
}

struct Peer {
    host: String,
    outbox: UnboundedSender<Outgoing>,
}

/// What goes to a peer: the library's messages, and a secondary's report of how far it has
/// applied (to the primary, for `w: N`; MongoDB's `replSetUpdatePosition`).
enum Outgoing {
    Raft(Message),
    Position { from: u64, applied: u64 },
}

impl Transport {
    pub fn new(
        runtime: tokio::runtime::Handle,
        unreachable: UnboundedSender<u64>,
        (source, key): (Option<std::net::IpAddr>, Option<std::sync::Arc<str>>),
    ) -> Transport {
        Transport { runtime, source, key, peers: HashMap::new(), unreachable }
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
            let address = Address { host: host.clone(), source: self.source, key: self.key.clone() };
            self.runtime.spawn(run_peer(*id, address, inbox, unreachable));
            self.peers.insert(*id, Peer { host: host.clone(), outbox });
        }
    }

    pub fn send(&self, messages: Vec<Message>) {
        for message in messages {
            if let Some(peer) = self.peers.get(&message.to) {
                let _ = peer.outbox.send(Outgoing::Raft(message));
            }
        }
    }

    /// Tells member `to` (the primary) that `from` has applied the entry at `applied`.
    pub fn report_position(&self, to: u64, from: u64, applied: u64) {
        if let Some(peer) = self.peers.get(&to) {
            let _ = peer.outbox.send(Outgoing::Position { from, applied });
        }
    }
}

/// One peer's sender: batches what is queued and writes it; a failed connection is dropped
/// (with the batch) and made again for the next one.
/// Where a peer is, where to connect from, and the key to prove ourselves with.
struct Address {
    host: String,
    source: Option<std::net::IpAddr>,
    key: Option<std::sync::Arc<str>>,
}

async fn run_peer(
    id: u64,
    address: Address,
    mut inbox: UnboundedReceiver<Outgoing>,
    unreachable: UnboundedSender<u64>,
) {
    let mut stream: Option<tokio::net::TcpStream> = None;
    let mut request_id = 0i32;
    let mut held: Option<Outgoing> = None;
    loop {
        // One message, then what else is queued, up to BATCH messages or BATCH_BYTES (a
        // member's message limit is 48 MB; one message may carry a 16 MiB entry).
        let first = match held.take() {
            Some(outgoing) => outgoing,
            None => match inbox.recv().await {
                Some(outgoing) => outgoing,
                None => return,
            },
        };
        let mut batch = Batch::default();
        batch.add(first);
        while batch.messages.len() < BATCH {
            let Ok(outgoing) = inbox.try_recv() else { break };
            let size = match &outgoing {
                Outgoing::Raft(message) => message.compute_size() as usize,
                Outgoing::Position { .. } => 0,
            };
            if batch.bytes + size > BATCH_BYTES {
                held = Some(outgoing);
                break;
            }
            batch.add(outgoing);
        }
        request_id = request_id.wrapping_add(1);
        let Some(frame) = batch.encode(request_id) else { continue };
        if stream.is_none() {
            match tokio::time::timeout(CONNECT_TIMEOUT, connect(&address)).await {
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

/// One `replSetRaftMessage` command being gathered.
#[derive(Default)]
struct Batch {
    messages: Vec<Vec<u8>>,
    bytes: usize,
    /// The newest position report (only the latest matters).
    position: Option<(u64, u64)>,
}

impl Batch {
    fn add(&mut self, outgoing: Outgoing) {
        match outgoing {
            // (A message that cannot be encoded is dropped: the library resends what is lost.)
            Outgoing::Raft(message) => {
                if let Ok(bytes) = message.write_to_bytes() {
                    self.bytes += bytes.len();
                    self.messages.push(bytes);
                }
            }
            Outgoing::Position { from, applied } => self.position = Some((from, applied)),
        }
    }

    fn encode(self, request_id: i32) -> Option<Vec<u8>> {
        let mut messages = bson::RawArrayBuf::new();
        for bytes in self.messages {
            messages.push(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes });
        }
        let mut body = rawdoc! {"replSetRaftMessage": 1, "messages": messages};
        if let Some((from, applied)) = self.position {
            body.append(bson::raw::cstr!("position"), rawdoc! {"from": from as i64, "applied": applied as i64});
        }
        body.append(bson::raw::cstr!("$db"), "admin");
        let mut msg = wire::OpMsg::new(body);
        msg.flags = wire::MsgFlags(wire::MsgFlags::MORE_TO_COME);
        msg.encode(request_id, 0).ok()
    }
}

/// Connects to the peer from our own address (when given), and authenticates with the set's
/// key (when there is one).
async fn connect(address: &Address) -> std::io::Result<tokio::net::TcpStream> {
    let host = &address.host;
    let peer = tokio::net::lookup_host(host)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{host}: no address")))?;
    let socket = match peer {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(ip) = address.source.filter(|ip| ip.is_ipv4() == peer.is_ipv4()) {
        socket.bind(std::net::SocketAddr::new(ip, 0))?;
    }
    let stream = socket.connect(peer).await?;
    let Some(key) = address.key.clone() else { return Ok(stream) };
    // The conversation is a few round trips: run it blocking, off the runtime's threads.
    let mut blocking = stream.into_std()?;
    let blocking = tokio::task::spawn_blocking(move || {
        blocking.set_nonblocking(false)?;
        blocking.set_read_timeout(Some(CONNECT_TIMEOUT * 4))?;
        super::member_auth::authenticate(&mut blocking, &key).map_err(std::io::Error::other)?;
        blocking.set_read_timeout(None)?;
        blocking.set_nonblocking(true)?;
        Ok::<_, std::io::Error>(blocking)
    })
    .await
    .map_err(std::io::Error::other)??;
    tokio::net::TcpStream::from_std(blocking)
}

/// A secondary's position report in a `replSetRaftMessage` command: (member, applied ts).
pub fn decode_position(command: &Document) -> Option<(u64, u64)> {
    let position = command.get_document("position").ok()?;
    Some((position.get_i64("from").ok()? as u64, position.get_i64("applied").ok()? as u64))
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
/// with its message), authenticating first with the set's key when there is one.
pub fn call(host: &str, command: RawDocumentBuf, timeout: Duration, key: Option<&str>) -> Result<Document, String> {
    let mut connection = MemberConnection::open(host, timeout, key)?;
    let reply = connection.command(command)?;
    Document::try_from(reply.as_ref()).map_err(|e| format!("{host}: {e}"))
}

/// A blocking connection to another member, authenticated with the set's key when there is
/// one, for request/reply commands (joining, initial sync's copy).
pub struct MemberConnection {
    host: String,
    stream: TcpStream,
}

impl MemberConnection {
    pub fn open(host: &str, timeout: Duration, key: Option<&str>) -> Result<MemberConnection, String> {
        let address = host
            .to_socket_addrs()
            .map_err(|e| format!("{host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host}: no address"))?;
        let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(|e| format!("{host}: {e}"))?;
        stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        if let Some(key) = key {
            super::member_auth::authenticate(&mut stream, key).map_err(|e| format!("{host}: {e}"))?;
        }
        Ok(MemberConnection { host: host.to_owned(), stream })
    }

    /// Runs `command`; an `ok: 0` reply is an error with its message.
    pub fn command(&mut self, command: RawDocumentBuf) -> Result<RawDocumentBuf, String> {
        super::member_auth::round_trip_raw(&mut self.stream, command).map_err(|e| format!("{}: {e}", self.host))
    }
}
