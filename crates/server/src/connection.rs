//! One client connection: read bytes, cut frames, run commands one at a time, write replies.
//!
//! Invariants: the read buffer grows only with bytes actually received (at most doubling, so
//! a header that claims 48 MB costs nothing until the bytes come); a frame the decoder cannot
//! cut or a message that cannot be answered closes this connection with a log line and
//! nothing else; commands of one connection run in order, as the protocol requires. A request
//! with `moreToCome` runs and gets no reply. On shutdown the connection finishes the request
//! it is running, then closes.

use std::sync::Arc;

use bson::RawDocumentBuf;
use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, info, warn};
use wire::{ErrorCode, Frame, Limits, Message, OpCode, ReplyStream, Request, WireError};

use crate::command::Command;
use crate::dispatch;
use crate::error::CommandError;
use crate::state::{ConnectionInfo, Shared};

const INITIAL_BUFFER_BYTES: usize = 16 * 1024;

/// What to do after one frame.
enum Outcome {
    Reply(Vec<u8>),
    NoReply,
    Close,
}

/// Serve one connection until the client leaves, sends something unusable, or the server shuts
/// down.
pub async fn serve(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    info: ConnectionInfo,
    mut shutdown: watch::Receiver<bool>,
) {
    let limits = Limits::default();
    let mut buffer = BytesMut::with_capacity(INITIAL_BUFFER_BYTES);
    loop {
        match wire::decode_frame(&buffer, &limits) {
            Ok(Some((frame, consumed))) => {
                buffer.advance(consumed);
                match handle_frame(&shared, &info, frame, &limits).await {
                    Outcome::Reply(bytes) => {
                        if let Err(error) = stream.write_all(&bytes).await {
                            debug!(connection = info.id, %error, "write failed; closing");
                            return;
                        }
                    }
                    Outcome::NoReply => {}
                    Outcome::Close => return,
                }
                continue;
            }
            Ok(None) => {}
            Err(error) => {
                warn!(connection = info.id, peer = %info.peer, %error, "malformed message; closing connection");
                return;
            }
        }
        if *shutdown.borrow() {
            return;
        }
        reserve_for_next(&mut buffer, &limits);
        tokio::select! {
            read = stream.read_buf(&mut buffer) => match read {
                Ok(0) => {
                    if !buffer.is_empty() {
                        debug!(connection = info.id, pending = buffer.len(), "client closed mid-message");
                    }
                    return;
                }
                Ok(_) => {}
                Err(error) => {
                    debug!(connection = info.id, %error, "read failed; closing");
                    return;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// Make room for the next read: up to the rest of the current message, but never more than
/// the bytes already held (or 16 KiB), so memory follows what the client really sent.
fn reserve_for_next(buffer: &mut BytesMut, limits: &Limits) {
    let wanted = match wire::message_length(buffer, limits) {
        Ok(Some(length)) => length.saturating_sub(buffer.len()),
        _ => INITIAL_BUFFER_BYTES,
    };
    let step = wanted.min(buffer.len().max(INITIAL_BUFFER_BYTES));
    buffer.reserve(step.max(1));
}

/// Parse, run and answer one message.
async fn handle_frame(shared: &Arc<Shared>, info: &ConnectionInfo, frame: Frame, limits: &Limits) -> Outcome {
    let request = match Request::parse(&frame, limits) {
        Ok(request) => request,
        Err(error) => return parse_failure(shared, info, &frame, error),
    };
    let (name, body) = match command_of(&request) {
        Ok(command) => {
            let name = command.name.clone();
            (name, dispatch::run(shared.clone(), info.clone(), command).await)
        }
        Err(error) => ("unknown".to_owned(), dispatch::error_document(&error)),
    };
    if !request.expects_reply() {
        return Outcome::NoReply;
    }
    encode(shared, info, &request, &name, body)
}

/// The command a request carries; OP_QUERY is accepted only on `<db>.$cmd`.
fn command_of(request: &Request) -> Result<Command, CommandError> {
    if let Message::Query(query) = &request.message
        && !query.is_command()
    {
        return Err(CommandError::new(
            ErrorCode::UnsupportedOpQueryCommand,
            format!("OP_QUERY is no longer supported for {}; use OP_MSG", query.full_collection_name),
        ));
    }
    Command::from_request(request)
}

fn encode(shared: &Shared, info: &ConnectionInfo, request: &Request, name: &str, body: RawDocumentBuf) -> Outcome {
    match wire::encode_reply(request, shared.next_request_id(), name, body, ReplyStream::Last) {
        Ok(bytes) => Outcome::Reply(bytes),
        Err(error) => {
            warn!(connection = info.id, %error, "cannot encode reply; closing connection");
            Outcome::Close
        }
    }
}

/// A whole message that does not parse. A bad document in an OP_MSG or OP_QUERY gets an error
/// reply (its requestID is known and the stream is intact); anything else closes the
/// connection, as mongod does for checksum and flag errors.
fn parse_failure(shared: &Shared, info: &ConnectionInfo, frame: &Frame, error: WireError) -> Outcome {
    let answerable = matches!(
        error,
        WireError::DocumentTooLarge { .. } | WireError::NestingTooDeep { .. } | WireError::InvalidBson { .. }
    );
    let stand_in = match (answerable, frame.header.op_code) {
        (true, OpCode::Msg) => stand_in_msg(frame),
        (true, OpCode::Query) => stand_in_query(frame),
        _ => None,
    };
    let Some(request) = stand_in else {
        warn!(connection = info.id, peer = %info.peer, %error, "malformed message; closing connection");
        return Outcome::Close;
    };
    info!(connection = info.id, %error, "rejected message");
    if !request.expects_reply() {
        return Outcome::NoReply;
    }
    let body = dispatch::error_document(&CommandError::from(error));
    encode(shared, info, &request, "unknown", body)
}

/// An empty OP_MSG request with the client's header and reply-relevant flags.
fn stand_in_msg(frame: &Frame) -> Option<Request> {
    let flag_bytes: [u8; 4] = frame.payload().get(..4)?.try_into().ok()?;
    let flags = u32::from_le_bytes(flag_bytes) & (wire::MsgFlags::CHECKSUM_PRESENT | wire::MsgFlags::MORE_TO_COME);
    let message = wire::OpMsg { flags: wire::MsgFlags(flags), body: RawDocumentBuf::new(), sequences: Vec::new() };
    Some(Request { header: frame.header, message: Message::Msg(message), compressor: None })
}

/// An empty OP_QUERY command request with the client's header, answered with OP_REPLY.
fn stand_in_query(frame: &Frame) -> Option<Request> {
    let query = wire::OpQuery {
        flags: wire::QueryFlags(0),
        full_collection_name: "admin.$cmd".to_owned(),
        number_to_skip: 0,
        number_to_return: -1,
        query: RawDocumentBuf::new(),
        return_fields_selector: None,
    };
    Some(Request { header: frame.header, message: Message::Query(query), compressor: None })
}
