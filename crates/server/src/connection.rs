//! One client connection: read bytes, cut frames, run commands one at a time, write replies.
//!
//! A connection lives in two modes. Idle, it is a tokio task waiting for its socket to become
//! readable: no thread, and no buffer unless a message is half received, so ten thousand idle
//! clients cost a task and a socket each. When bytes arrive, the socket moves (blocking) onto
//! a thread of the runtime's blocking pool for a *burst*: that thread reads, runs each command
//! (`dispatch::run`, on the same thread) and writes each reply, with no hand-off between
//! threads per command, until the client has sent nothing for `IDLE_AFTER`; then the socket
//! goes back to the task. A command that waits (a `j:true` commit for its log sync, a long
//! scan) blocks only its own connection's thread; other connections have their own. When more
//! than `LINGERING_BURSTS` run, a burst ends as soon as its client has nothing pending, and the
//! idle task notices a client that left (a peek) without starting a burst, so crowds of clients
//! arriving or leaving at once do not become crowds of threads.
//!
//! A client speaking TLS (see `tls`) keeps its rustls session in the connection's state across
//! idle periods; a burst reads and writes through it (`Link`), so the handshake, too, is served
//! a step at a time as the client's bytes arrive.
//!
//! Invariants: the read buffer grows only with bytes actually received (at most doubling, so
//! a header that claims 48 MB costs nothing until the bytes come); a frame the decoder cannot
//! cut or a message that cannot be answered closes this connection with a log line and
//! nothing else; commands of one connection run in order, as the protocol requires. A request
//! with `moreToCome` runs and gets no reply. A getMore sent with `exhaustAllowed` is answered by
//! a stream of replies, each with `moreToCome` until the cursor ends, each answering the one
//! before (its `responseTo`), as mongod streams an exhaust cursor. On shutdown the connection
//! finishes the request it is running, then closes (a burst notices within `IDLE_AFTER`).

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bson::RawDocumentBuf;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, info, warn};
use wire::{ErrorCode, Frame, Limits, Message, MsgHeader, OpCode, ReplyStream, Request, WireError};

use crate::admission::Admission;
use crate::command::Command;
use crate::dispatch;
use crate::error::CommandError;
use crate::read_buffer::ReadBuffer;
use crate::state::{ConnectionInfo, Context, Park, Shared};

const INITIAL_BUFFER_BYTES: usize = 16 * 1024;

/// A read buffer larger than this is let go once it is empty, rather than kept for the next
/// message (a 48 MB insert's buffer would otherwise stay with its connection).
const LARGE_BUFFER_BYTES: usize = 1 << 20;

/// A burst ends after this long without a request: the thread goes back to the pool. Clients
/// sending one command per call send the next within a round trip, far sooner.
const IDLE_AFTER: Duration = Duration::from_millis(50);

/// With more bursts than this running, a burst whose client has sent nothing more ends at once
/// instead of waiting `IDLE_AFTER` for it. Waiting keeps a thread per connection that called
/// in the last 50 ms; ten thousand clients connecting at once made that hundreds of threads
/// (about 160 KB of memory each), past a tight memory limit. Beyond this many, a client's next
/// command pays a hand-off to a thread instead, which is what a thread per core would cost.
const LINGERING_BURSTS: u64 = 64;

/// What to do after one frame.
enum Outcome {
    Reply(Vec<u8>),
    NoReply,
    Close,
    /// The command waits (`Context::park`): run it again after a wakeup or its deadline.
    Park(Park),
    /// An exhaust getMore's first reply: more follow without further requests.
    Exhaust {
        request: Request,
        command: Command,
        body: RawDocumentBuf,
    },
}

/// How a burst ended.
enum Burst {
    /// Nothing received for `IDLE_AFTER`: wait for the socket as a task again.
    Idle,
    /// The client left or sent something unusable, or the server is shutting down.
    Close,
    /// A command waits (an awaitable `hello`, a change stream's `getMore`): the task waits
    /// for a wakeup or the deadline, then a burst runs the command again.
    Park(Park),
}

/// One connection's state, carried between its idle task and its bursts.
struct Session {
    /// What every command of this connection runs with (built once, not per command).
    context: Context,
    buffer: ReadBuffer,
    shutdown: watch::Receiver<bool>,
    /// The TLS session when the client speaks TLS (kept across idle periods).
    tls: Option<Box<rustls::ServerConnection>>,
    /// The TLS handshake finished and the client's certificate (if any) was noted.
    handshake_noted: bool,
    /// The message of a parked command, run again first in the next burst.
    parked: Option<Frame>,
    /// Whether the message at the start of the buffer was admitted, or is being skipped as it
    /// arrives because it does not fit in memory (`admission`).
    admission: Admission,
}

/// The byte stream of a burst: the socket, or TLS over it.
enum Link<'a> {
    Plain(&'a std::net::TcpStream),
    Tls(rustls::Stream<'a, rustls::ServerConnection, &'a std::net::TcpStream>),
}

impl Link<'_> {
    /// Whether a read would find something now: plaintext TLS already decrypted, or bytes on the
    /// socket (a peek that does not wait).
    fn has_pending(&mut self) -> bool {
        let socket = match self {
            Link::Plain(stream) => *stream,
            Link::Tls(stream) => {
                if stream.conn.process_new_packets().is_ok_and(|state| state.plaintext_bytes_to_read() > 0) {
                    return true;
                }
                &**stream.sock
            }
        };
        // A peek on the socket made non-blocking for it (three system calls, paid only when
        // crowded). An error other than "nothing yet" is left for the read to meet and report,
        // and so is a socket that cannot be switched.
        if socket.set_nonblocking(true).is_err() {
            return true;
        }
        let peeked = socket.peek(&mut [0u8; 1]);
        if socket.set_nonblocking(false).is_err() {
            return true;
        }
        !matches!(peeked, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
    }
}

impl Read for Link<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(stream) => (&**stream).read(buffer),
            Link::Tls(stream) => stream.read(buffer),
        }
    }
}

impl Write for Link<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(stream) => (&**stream).write(bytes),
            Link::Tls(stream) => stream.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Link::Plain(stream) => (&**stream).flush(),
            Link::Tls(stream) => stream.flush(),
        }
    }
}

/// Serve one connection until the client leaves, sends something unusable, or the server shuts
/// down.
pub async fn serve(mut stream: TcpStream, shared: Arc<Shared>, info: ConnectionInfo, shutdown: watch::Receiver<bool>) {
    let tls = match start_tls(&stream, &shared).await {
        Ok(tls) => tls,
        Err(error) => {
            debug!(connection = info.id, %error, "cannot start TLS; closing");
            return;
        }
    };
    let context = Context::new(shared, info);
    let mut session = Session {
        context,
        buffer: ReadBuffer::default(),
        shutdown,
        tls,
        handshake_noted: false,
        parked: None,
        admission: Admission::Unchecked,
    };
    let mut park: Option<Park> = None;
    loop {
        if *session.shutdown.borrow() {
            return;
        }
        match park.take() {
            Some(park) => {
                let mut wakeups = session.context.shared.wakeups(park.on).subscribe();
                tokio::select! {
                    _ = wakeups.wait_for(|generation| *generation != park.seen) => {},
                    _ = tokio::time::sleep_until(park.deadline.into()) => {},
                    _ = session.shutdown.changed() => return,
                }
            }
            None => tokio::select! {
                ready = stream.readable() => match ready {
                    Err(error) => {
                        debug!(connection = session.context.connection.id, %error, "socket failed; closing");
                        return;
                    }
                    // A client that went away (closed, or reset) needs no thread to say so: ten
                    // thousand leaving at once would otherwise start ten thousand bursts.
                    Ok(()) if session.buffer.is_empty() && gone(&stream).await => return,
                    Ok(()) => {}
                },
                _ = session.shutdown.changed() => return,
            },
        }
        let blocking = match to_blocking(stream) {
            Ok(blocking) => blocking,
            Err(error) => {
                debug!(connection = session.context.connection.id, %error, "cannot serve the socket; closing");
                return;
            }
        };
        let burst = tokio::task::spawn_blocking(move || {
            let shared = Arc::clone(&session.context.shared);
            let _active = Active::enter(&shared.counters.connections_active);
            let end = session.burst(&blocking);
            (session, blocking, end)
        });
        let (returned, blocking, end) = match burst.await {
            Ok(outcome) => outcome,
            Err(error) => {
                // Handlers' panics are caught in dispatch; this is one in the framing itself.
                warn!(%error, "connection thread failed; closing connection");
                return;
            }
        };
        session = returned;
        if let Burst::Park(wait) = end {
            park = Some(wait);
        }
        match end {
            Burst::Close => return,
            Burst::Idle | Burst::Park(_) => match to_async(blocking) {
                Ok(back) => stream = back,
                Err(error) => {
                    debug!(connection = session.context.connection.id, %error, "cannot wait on the socket; closing");
                    return;
                }
            },
        }
    }
}

/// A burst running, counted in `connections.active` (`crowded`) until it ends, however it ends.
struct Active<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> Active<'a> {
    fn enter(counter: &'a std::sync::atomic::AtomicU64) -> Active<'a> {
        counter.fetch_add(1, Ordering::Relaxed);
        Active(counter)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a readable socket's peer has closed or reset the connection (a peek that finds no
/// bytes, or an error other than "nothing yet").
async fn gone(stream: &TcpStream) -> bool {
    match stream.peek(&mut [0u8; 1]).await {
        Ok(received) => received == 0,
        Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// A TLS session if this client speaks TLS (always under `requireTLS`; under
/// `preferTLS`/`allowTLS`, if its first bytes are a TLS handshake).
async fn start_tls(stream: &TcpStream, shared: &Shared) -> std::io::Result<Option<Box<rustls::ServerConnection>>> {
    let Some(tls) = &shared.tls else { return Ok(None) };
    let mut first = [0u8; 2];
    let peeked = if tls.mode == crate::tls::TlsMode::RequireTls { 0 } else { stream.peek(&mut first).await? };
    if !tls.expects_tls(first.get(..peeked).unwrap_or_default()) {
        return Ok(None);
    }
    tls.accept().map(|session| Some(Box::new(session))).map_err(std::io::Error::other)
}

/// The socket as a blocking one that gives up reading after `IDLE_AFTER`.
fn to_blocking(stream: TcpStream) -> std::io::Result<std::net::TcpStream> {
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IDLE_AFTER))?;
    Ok(stream)
}

fn to_async(stream: std::net::TcpStream) -> std::io::Result<TcpStream> {
    stream.set_nonblocking(true)?;
    TcpStream::from_std(stream)
}

impl Session {
    /// Serves requests on this (blocking) thread until the client goes quiet or away.
    fn burst(&mut self, stream: &std::net::TcpStream) -> Burst {
        let mut tls = self.tls.take();
        let mut socket = stream;
        let end = match tls.as_deref_mut() {
            Some(session) => self.serve_link(&mut Link::Tls(rustls::Stream::new(session, &mut socket))),
            None => self.serve_link(&mut Link::Plain(stream)),
        };
        self.tls = tls;
        end
    }

    fn serve_link(&mut self, stream: &mut Link<'_>) -> Burst {
        if let Some(frame) = self.parked.take()
            && let Some(end) = self.answer(stream, frame)
        {
            return end;
        }
        loop {
            if let Some(end) = self.serve_buffered(stream) {
                return end;
            }
            if *self.shutdown.borrow() {
                return Burst::Close;
            }
            if self.buffer.is_empty() && self.crowded() && !stream.has_pending() {
                self.buffer.release();
                return Burst::Idle;
            }
            let limits = self.limits();
            reserve_for_next(&mut self.buffer, &limits);
            match self.buffer.read_from(stream) {
                Ok(0) => {
                    if !self.buffer.is_empty() {
                        debug!(
                            connection = self.context.connection.id,
                            pending = self.buffer.len(),
                            "client closed mid-message"
                        );
                    }
                    return Burst::Close;
                }
                Ok(received) => self.context.shared.metrics.bytes_in(received),
                Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    if self.buffer.is_empty() {
                        // An idle connection keeps no buffer.
                        self.buffer.release();
                    }
                    return Burst::Idle;
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    debug!(connection = self.context.connection.id, %error, "read failed; closing");
                    return Burst::Close;
                }
            }
        }
    }

    /// Whether so many bursts run that this one should not wait for its client's next request.
    fn crowded(&self) -> bool {
        self.context.shared.counters.connections_active.load(Ordering::Relaxed) > LINGERING_BURSTS
    }

    /// Answers every whole message in the buffer; `Some` if the connection must end.
    fn serve_buffered(&mut self, stream: &mut Link<'_>) -> Option<Burst> {
        if !self.handshake_noted {
            self.note_handshake(stream);
        }
        loop {
            let limits = self.limits();
            if let Some(end) = self.skip_refused(stream) {
                return Some(end);
            }
            if matches!(self.admission, Admission::Unchecked) {
                let memory_limit = self.context.shared.config.memory_limit_bytes;
                self.admission = Admission::check(self.buffer.held(), &limits, memory_limit);
            }
            if matches!(self.admission, Admission::Refused { .. }) {
                return None;
            }
            match wire::decode_frame(self.buffer.held(), &limits) {
                Ok(Some((frame, consumed))) => {
                    self.buffer.consume(consumed);
                    self.admission = Admission::Unchecked;
                    // The frame holds its own copy: a large message's buffer goes now, not
                    // when the next one comes.
                    if self.buffer.is_empty() && self.buffer.capacity() > LARGE_BUFFER_BYTES {
                        self.buffer.release();
                    }
                    if let Some(end) = self.answer(stream, frame) {
                        return Some(end);
                    }
                }
                Ok(None) => return None,
                Err(error) => {
                    warn!(connection = self.context.connection.id, peer = %self.context.connection.peer, %error, "malformed message; closing connection");
                    return Some(Burst::Close);
                }
            }
        }
    }
}

impl Session {
    /// Skips what has arrived of a message refused for memory; once all of it is skipped,
    /// answers it. `Some` if the connection must end.
    fn skip_refused(&mut self, stream: &mut Link<'_>) -> Option<Burst> {
        let (request, error) = self.admission.skip(&mut self.buffer)?;
        info!(connection = self.context.connection.id, %error, "refused a message for memory");
        if !request.expects_reply() {
            return None;
        }
        let body = dispatch::error_document(&error);
        match encode(&self.context, &request, "unknown", body) {
            Outcome::Reply(bytes) => self.send(stream, &bytes),
            _ => Some(Burst::Close),
        }
    }

    /// Writes one reply; `Some(Close)` if the client cannot take it.
    fn send(&self, stream: &mut Link<'_>, bytes: &[u8]) -> Option<Burst> {
        self.context.shared.metrics.bytes_out(bytes.len());
        if let Err(error) = stream.write_all(bytes).and_then(|()| stream.flush()) {
            debug!(connection = self.context.connection.id, %error, "write failed; closing");
            return Some(Burst::Close);
        }
        None
    }

    /// Runs one message and writes its reply; `Some` if the burst must end (the connection
    /// closes, or the command parked).
    fn answer(&mut self, stream: &mut Link<'_>, frame: Frame) -> Option<Burst> {
        match handle_frame(&self.context, &frame, &self.limits()) {
            Outcome::Reply(bytes) => self.send(stream, &bytes),
            Outcome::NoReply => None,
            Outcome::Close => Some(Burst::Close),
            Outcome::Park(park) => {
                self.parked = Some(frame);
                Some(Burst::Park(park))
            }
            Outcome::Exhaust { request, command, body } => self.stream_exhaust(stream, request, &command, body),
        }
    }

    /// Writes an exhaust cursor's replies: each batch with `moreToCome` while the cursor has
    /// more, answering the previous reply; the getMore runs again for each.
    fn stream_exhaust(
        &mut self,
        stream: &mut Link<'_>,
        mut request: Request,
        command: &Command,
        mut body: RawDocumentBuf,
    ) -> Option<Burst> {
        loop {
            let more = open_cursor(&body);
            let kind = if more { ReplyStream::MoreToCome } else { ReplyStream::Last };
            let Some((reply_id, bytes)) = encoded(&self.context, &request, &command.name, body, kind) else {
                return Some(Burst::Close);
            };
            if let Some(end) = self.send(stream, &bytes) {
                return Some(end);
            }
            if !more || *self.shutdown.borrow() {
                return None;
            }
            request.header.request_id = reply_id;
            body = dispatch::run(&self.context, command);
            if self.context.take_park().is_some() {
                // A tailable cursor waiting for data cannot wait inside a stream of replies.
                warn!(connection = self.context.connection.id, "exhaust getMore on an awaiting cursor; closing");
                return Some(Burst::Close);
            }
        }
    }
}

/// Whether a getMore's reply leaves its cursor open (an error reply does not).
fn open_cursor(body: &RawDocumentBuf) -> bool {
    body.get_document("cursor").and_then(|cursor| cursor.get_i64("id")).is_ok_and(|id| id != 0)
}

/// Largest message a client may send before it has authenticated (with `--auth`): the
/// handshake and authentication need a few kilobytes, so a stranger cannot make the server
/// buffer 48 MB per connection.
pub const UNAUTHENTICATED_MESSAGE_BYTES: usize = 64 * 1024;

impl Session {
    /// The message limits for the next message: MongoDB's, or the stranger's.
    fn limits(&self) -> Limits {
        if crate::auth::is_stranger(&self.context) {
            Limits { max_message_size_bytes: UNAUTHENTICATED_MESSAGE_BYTES, ..Limits::default() }
        } else {
            Limits::default()
        }
    }

    /// Once the TLS handshake is done: the subject of a verified client certificate is what
    /// MONGODB-X509 authenticates (rustls has already checked it against the CA file).
    fn note_handshake(&mut self, stream: &Link<'_>) {
        let Link::Tls(tls) = stream else {
            self.handshake_noted = true;
            return;
        };
        if tls.conn.is_handshaking() {
            return;
        }
        self.handshake_noted = true;
        let certificate = tls.conn.peer_certificates().and_then(|chain| chain.first());
        if let Some((subject, attributes)) = certificate.and_then(|der| crate::tls::identity(der)) {
            debug!(connection = self.context.connection.id, %subject, "client certificate");
            crate::auth::set_certificate(&self.context, subject, attributes);
        }
    }
}

/// Make room for the next read: up to the rest of the current message, but never more than
/// the bytes already held (or 16 KiB), so memory follows what the client really sent.
fn reserve_for_next(buffer: &mut ReadBuffer, limits: &Limits) {
    let wanted = match wire::message_length(buffer.held(), limits) {
        Ok(Some(length)) => length.saturating_sub(buffer.len()),
        _ => INITIAL_BUFFER_BYTES,
    };
    let step = wanted.min(buffer.len().max(INITIAL_BUFFER_BYTES));
    buffer.reserve(step.max(1));
}

/// Parse, run and answer one message.
fn handle_frame(context: &Context, frame: &Frame, limits: &Limits) -> Outcome {
    let request = match Request::parse(frame, limits) {
        Ok(request) => request,
        Err(error) => return parse_failure(context, frame, error),
    };
    let mut request = request;
    let (command, body) = match command_of(&mut request) {
        Ok(command) => {
            let body = dispatch::run(context, &command);
            (Some(command), body)
        }
        Err(error) => (None, dispatch::error_document(&error)),
    };
    if let Some(park) = context.take_park() {
        return Outcome::Park(park);
    }
    if context.take_close() {
        info!(connection = context.connection.id, "closing the connection as a fail point asks");
        return Outcome::Close;
    }
    if !request.expects_reply() {
        return Outcome::NoReply;
    }
    let exhaust = matches!(&request.message, Message::Msg(message) if message.flags.exhaust_allowed());
    match command {
        Some(command) if exhaust && command.name == "getMore" && open_cursor(&body) => {
            Outcome::Exhaust { request, command, body }
        }
        Some(command) => encode(context, &request, &command.name, body),
        None => encode(context, &request, "unknown", body),
    }
}

/// The command a request carries; OP_QUERY is accepted only on `<db>.$cmd`.
fn command_of(request: &mut Request) -> Result<Command, CommandError> {
    if let Message::Query(query) = &request.message
        && !query.is_command()
    {
        return Err(CommandError::new(
            ErrorCode::UnsupportedOpQueryCommand,
            format!("OP_QUERY is no longer supported for {}; use OP_MSG", query.full_collection_name),
        ));
    }
    Command::take_from_request(request)
}

fn encode(context: &Context, request: &Request, name: &str, body: RawDocumentBuf) -> Outcome {
    match encoded(context, request, name, body, ReplyStream::Last) {
        Some((_, bytes)) => Outcome::Reply(bytes),
        None => Outcome::Close,
    }
}

/// A reply's bytes and its request id (a following exhaust reply answers it); `None` (logged)
/// if it cannot be encoded.
fn encoded(
    context: &Context,
    request: &Request,
    name: &str,
    body: RawDocumentBuf,
    kind: ReplyStream,
) -> Option<(i32, Vec<u8>)> {
    let reply_id = context.shared.next_request_id();
    match wire::encode_reply(request, reply_id, name, body, kind) {
        Ok(bytes) => Some((reply_id, bytes)),
        Err(error) => {
            warn!(connection = context.connection.id, %error, "cannot encode reply; closing connection");
            None
        }
    }
}

/// A whole message that does not parse. A bad document in an OP_MSG or OP_QUERY gets an error
/// reply (its requestID is known and the stream is intact); anything else closes the
/// connection, as mongod does for checksum and flag errors.
fn parse_failure(context: &Context, frame: &Frame, error: WireError) -> Outcome {
    let answerable = matches!(
        error,
        WireError::DocumentTooLarge { .. } | WireError::NestingTooDeep { .. } | WireError::InvalidBson { .. }
    );
    let Some(request) = stand_in(frame.header, frame.payload()).filter(|_| answerable) else {
        let connection = &context.connection;
        warn!(connection = connection.id, peer = %connection.peer, %error, "malformed message; closing connection");
        return Outcome::Close;
    };
    info!(connection = context.connection.id, %error, "rejected message");
    if !request.expects_reply() {
        return Outcome::NoReply;
    }
    let body = dispatch::error_document(&CommandError::from(error));
    encode(context, &request, "unknown", body)
}

/// An empty request with the client's header and reply-relevant flags (from the start of
/// `payload`), to answer a message that was not, or could not be, parsed: OP_MSG is answered
/// with OP_MSG, OP_QUERY with OP_REPLY; anything else gets no answer.
pub(crate) fn stand_in(header: MsgHeader, payload: &[u8]) -> Option<Request> {
    let message = match header.op_code {
        OpCode::Msg => {
            let flags = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?);
            let kept = flags & (wire::MsgFlags::CHECKSUM_PRESENT | wire::MsgFlags::MORE_TO_COME);
            Message::Msg(wire::OpMsg {
                flags: wire::MsgFlags(kept),
                body: RawDocumentBuf::new(),
                sequences: Vec::new(),
            })
        }
        OpCode::Query => Message::Query(wire::OpQuery {
            flags: wire::QueryFlags(0),
            full_collection_name: "admin.$cmd".to_owned(),
            number_to_skip: 0,
            number_to_return: -1,
            query: RawDocumentBuf::new(),
            return_fields_selector: None,
        }),
        _ => return None,
    };
    Some(Request { header, message, compressor: None })
}
