//! How members talk: over the MongoDB wire protocol, on the port clients use.
//!
//! - The consensus library's messages go one way: each peer has a thread that keeps one
//!   connection open and writes batches of messages as one `replSetRaftMessage` command sent
//!   with `moreToCome` (no reply; the library retries what is lost, and a peer that cannot be
//!   reached is reported so the library slows its probes).
//! - Setting up (`replSetInitiate`, `rs.add()` telling a member to join) is a plain command
//!   with a reply ([`call`]), made from the handler's thread; initial sync's copy is a series
//!   of them on one [`MemberConnection`].
//!
//! Every connection is a [`MemberStream`]: TCP, with TLS over it when the members speak TLS,
//! proven with the set's key or this member's certificate (`member_auth`) before anything else.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Document, RawDocumentBuf, rawdoc};
use protobuf::Message as _;
use raft::prelude::Message;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::member_auth::MemberCredentials;

/// Messages sent in one command at most, and their bytes (unless one alone is larger).
const BATCH: usize = 256;
const BATCH_BYTES: usize = 8 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a peer has to answer the TLS handshake and authentication, and to take a batch.
const PEER_IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Senders to every other member.
pub struct Transport {
    /// The address this member listens on: its connections to peers start from it (so a peer,
    /// or a proxy in front of it, can tell members apart); `None` when it listens on all.
    source: Option<IpAddr>,
    /// What every connection proves this member with first.
    credentials: MemberCredentials,
    peers: HashMap<u64, Peer>,
    /// The set's `replicaSetId`, sent with every batch (the receiver drops another set's).
    set_id: Option<ObjectId>,
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
        unreachable: UnboundedSender<u64>,
        (source, credentials): (Option<IpAddr>, MemberCredentials),
    ) -> Transport {
        Transport { source, credentials, peers: HashMap::new(), set_id: None, unreachable }
    }

    /// The set's `replicaSetId` (for peers started from now on; the set keeps one id).
    pub fn set_set_id(&mut self, set_id: Option<ObjectId>) {
        self.set_id = set_id;
    }

    /// Makes the peers `members` (consensus id, host), starting and stopping their sending
    /// threads (a thread ends once its peer's outbox is dropped).
    pub fn set_peers(&mut self, members: &[(u64, String)]) {
        self.peers.retain(|id, peer| members.iter().any(|(i, host)| i == id && *host == peer.host));
        for (id, host) in members {
            if self.peers.contains_key(id) {
                continue;
            }
            let (outbox, inbox) = unbounded_channel();
            let unreachable = self.unreachable.clone();
            let address = Address {
                host: host.clone(),
                source: self.source,
                credentials: self.credentials.clone(),
                set_id: self.set_id,
            };
            let (id, spawned) = (*id, std::thread::Builder::new().name(format!("to-member-{id}")));
            if let Err(error) = spawned.spawn(move || run_peer(id, &address, inbox, &unreachable)) {
                tracing::error!(%error, "cannot start the sender to a member");
                continue;
            }
            self.peers.insert(id, Peer { host: host.clone(), outbox });
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

/// Where a peer is, where to connect from, and what to prove ourselves with.
struct Address {
    host: String,
    set_id: Option<ObjectId>,
    source: Option<IpAddr>,
    credentials: MemberCredentials,
}

/// One peer's sender: batches what is queued and writes it; a failed connection is dropped
/// (with the batch) and made again for the next one. Returns when the peer is no longer one.
fn run_peer(id: u64, address: &Address, mut inbox: UnboundedReceiver<Outgoing>, unreachable: &UnboundedSender<u64>) {
    let mut stream: Option<MemberStream> = None;
    let mut request_id = 0i32;
    let mut held: Option<Outgoing> = None;
    loop {
        // One message, then what else is queued, up to BATCH messages or BATCH_BYTES (a
        // member's message limit is 48 MB; one message may carry a 16 MiB entry).
        let first = match held.take() {
            Some(outgoing) => outgoing,
            None => match inbox.blocking_recv() {
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
        let Some(frame) = batch.encode(request_id, address.set_id) else { continue };
        if stream.is_none() {
            match MemberStream::connect(&address.host, address.source, &address.credentials) {
                Ok(connected) => stream = Some(connected),
                Err(error) => {
                    tracing::debug!(peer = %address.host, %error, "cannot reach a member");
                    let _ = unreachable.send(id);
                    continue;
                }
            }
        }
        let written = match stream.as_mut() {
            Some(connected) => connected.write_all(&frame).and_then(|()| connected.flush()).is_ok(),
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

    fn encode(self, request_id: i32, set_id: Option<ObjectId>) -> Option<Vec<u8>> {
        let mut messages = bson::RawArrayBuf::new();
        for bytes in self.messages {
            messages.push(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes });
        }
        let mut body = rawdoc! {"replSetRaftMessage": 1, "messages": messages};
        if let Some((from, applied)) = self.position {
            body.append(bson::raw::cstr!("position"), rawdoc! {"from": from as i64, "applied": applied as i64});
        }
        if let Some(set_id) = set_id {
            body.append(bson::raw::cstr!("setId"), set_id);
        }
        body.append(bson::raw::cstr!("$db"), "admin");
        let mut msg = wire::OpMsg::new(body);
        msg.flags = wire::MsgFlags(wire::MsgFlags::MORE_TO_COME);
        msg.encode(request_id, 0).ok()
    }
}

/// A connection to another member: TCP, or TLS over it.
pub enum MemberStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl MemberStream {
    /// Connects to the member at `host` from `source` (when given; so that a peer, or a proxy
    /// in front of it, can tell members apart), speaks TLS when the members do, and proves this
    /// member. Reads and writes then time out after [`PEER_IO_TIMEOUT`].
    pub fn connect(
        host: &str,
        source: Option<IpAddr>,
        credentials: &MemberCredentials,
    ) -> Result<MemberStream, String> {
        let address = resolve(host)?;
        let socket = socket2::Socket::new(socket2::Domain::for_address(address), socket2::Type::STREAM, None)
            .map_err(|e| e.to_string())?;
        if let Some(ip) = source.filter(|ip| ip.is_ipv4() == address.is_ipv4()) {
            socket.bind(&SocketAddr::new(ip, 0).into()).map_err(|e| format!("binding to {ip}: {e}"))?;
        }
        socket.connect_timeout(&address.into(), CONNECT_TIMEOUT).map_err(|e| format!("{host}: {e}"))?;
        let tcp: TcpStream = socket.into();
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut stream = match &credentials.tls {
            None => MemberStream::Plain(tcp),
            Some(config) => {
                let name =
                    host.rsplit_once(':').map_or(host, |(name, _)| name).trim_start_matches('[').trim_end_matches(']');
                let name =
                    rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(|e| format!("{host}: {e}"))?;
                let session = rustls::ClientConnection::new(config.clone(), name).map_err(|e| e.to_string())?;
                MemberStream::Tls(Box::new(rustls::StreamOwned::new(session, tcp)))
            }
        };
        stream.set_timeout(PEER_IO_TIMEOUT)?;
        super::member_auth::prove(&mut stream, credentials).map_err(|e| format!("{host}: {e}"))?;
        Ok(stream)
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            MemberStream::Plain(tcp) => tcp,
            MemberStream::Tls(tls) => tls.get_ref(),
        }
    }

    /// Bounds each read and write by `timeout`.
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), String> {
        let tcp = self.tcp();
        tcp.set_read_timeout(Some(timeout))
            .and_then(|()| tcp.set_write_timeout(Some(timeout)))
            .map_err(|e| e.to_string())
    }
}

impl Read for MemberStream {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            MemberStream::Plain(tcp) => tcp.read(buffer),
            MemberStream::Tls(tls) => tls.read(buffer),
        }
    }
}

impl Write for MemberStream {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            MemberStream::Plain(tcp) => tcp.write(bytes),
            MemberStream::Tls(tls) => tls.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            MemberStream::Plain(tcp) => tcp.flush(),
            MemberStream::Tls(tls) => tls.flush(),
        }
    }
}

fn resolve(host: &str) -> Result<SocketAddr, String> {
    host.to_socket_addrs().map_err(|e| format!("{host}: {e}"))?.next().ok_or_else(|| format!("{host}: no address"))
}

/// A secondary's position report in a `replSetRaftMessage` command: (member, applied ts).
pub fn decode_position(command: &Document) -> Option<(u64, u64)> {
    let position = command.get_document("position").ok()?;
    Some((position.get_i64("from").ok()? as u64, position.get_i64("applied").ok()? as u64))
}

/// The consensus messages of a `replSetRaftMessage` command.
/// The sender's `replicaSetId`, if it sent one (members of a set initiated before members
/// sent it do not).
pub fn decode_set_id(command: &Document) -> Option<ObjectId> {
    command.get_object_id("setId").ok()
}

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
/// with its message), this member proven first.
pub fn call(
    host: &str,
    command: RawDocumentBuf,
    timeout: Duration,
    credentials: &MemberCredentials,
) -> Result<Document, String> {
    let mut connection = MemberConnection::open(host, timeout, credentials)?;
    let reply = connection.command(command)?;
    Document::try_from(reply.as_ref()).map_err(|e| format!("{host}: {e}"))
}

/// A blocking connection to another member for request/reply commands (joining, initial
/// sync's copy).
pub struct MemberConnection {
    host: String,
    stream: MemberStream,
}

impl MemberConnection {
    /// Connects and proves this member; each reply then has `timeout` to come.
    pub fn open(host: &str, timeout: Duration, credentials: &MemberCredentials) -> Result<MemberConnection, String> {
        let stream = MemberStream::connect(host, None, credentials)?;
        stream.set_timeout(timeout)?;
        Ok(MemberConnection { host: host.to_owned(), stream })
    }

    /// Runs `command`; an `ok: 0` reply is an error with its message.
    pub fn command(&mut self, command: RawDocumentBuf) -> Result<RawDocumentBuf, String> {
        super::member_auth::round_trip_raw(&mut self.stream, command).map_err(|e| format!("{}: {e}", self.host))
    }
}
