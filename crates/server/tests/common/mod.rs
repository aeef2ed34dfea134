//! Test helpers: a real server on 127.0.0.1:0 in this process, and a raw-socket client that
//! builds requests with `wire` and reads replies.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use bson::{Document, RawDocumentBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use wire::{Limits, OpCode, OpMsg, OpQuery, OpReply, QueryFlags};

pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(server::ServerConfig { port: 0, ..Default::default() }).await
    }

    pub async fn start_with(config: server::ServerConfig) -> TestServer {
        let store = docstore::Store::open_in_memory(docstore::StoreOptions::default()).unwrap();
        let server = server::Server::bind(config, std::sync::Arc::new(store)).await.unwrap();
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        TestServer { addr, stop: Some(stop), task: Some(task) }
    }

    pub async fn connect(&self) -> Client {
        Client { stream: TcpStream::connect(self.addr).await.unwrap(), next_id: 1 }
    }

    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
    }
}

pub struct Client {
    pub stream: TcpStream,
    next_id: i32,
}

impl Client {
    pub fn next_id(&mut self) -> i32 {
        self.next_id += 1;
        self.next_id
    }

    /// Send an OP_MSG with `body` and read its reply body.
    pub async fn command(&mut self, body: Document) -> Document {
        let bytes = self.msg_bytes(body, 0);
        self.send(&bytes).await;
        self.read_msg_reply().await.expect("reply")
    }

    pub fn msg_bytes(&mut self, body: Document, flags: u32) -> Vec<u8> {
        let raw = RawDocumentBuf::try_from(&body).unwrap();
        let mut message = OpMsg::new(raw);
        message.flags = wire::MsgFlags(flags);
        message.encode(self.next_id(), 0).unwrap()
    }

    pub fn query_bytes(&mut self, collection: &str, body: Document) -> Vec<u8> {
        let query = OpQuery {
            flags: QueryFlags(0),
            full_collection_name: collection.to_owned(),
            number_to_skip: 0,
            number_to_return: -1,
            query: RawDocumentBuf::try_from(&body).unwrap(),
            return_fields_selector: None,
        };
        query.encode(self.next_id()).unwrap()
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Read one whole message; None if the server closed the connection (or 5 s passed).
    pub async fn read_frame(&mut self) -> Option<wire::Frame> {
        let mut buffer = Vec::new();
        let limits = Limits::default();
        loop {
            if let Some((frame, _)) = wire::decode_frame(&buffer, &limits).unwrap() {
                return Some(frame);
            }
            let mut chunk = vec![0u8; 64 * 1024];
            let read = tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut chunk)).await;
            match read {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
                Ok(Ok(n)) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Read `count` whole messages that may arrive in one read (a stream of replies).
    pub async fn read_frames(&mut self, count: usize) -> Vec<wire::Frame> {
        let (mut buffer, mut frames) = (Vec::new(), Vec::new());
        let limits = Limits::default();
        while frames.len() < count {
            if let Some((frame, consumed)) = wire::decode_frame(&buffer, &limits).unwrap() {
                buffer.drain(..consumed);
                frames.push(frame);
                continue;
            }
            let mut chunk = vec![0u8; 64 * 1024];
            let read = tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut chunk)).await;
            match read {
                Ok(Ok(n)) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
                _ => panic!("connection ended after {} of {count} messages", frames.len()),
            }
        }
        frames
    }

    /// Read an OP_MSG reply (decompressing if needed) and return its body.
    pub async fn read_msg_reply(&mut self) -> Option<Document> {
        let frame = self.read_frame().await?;
        let request = wire::Request::parse(&frame, &Limits::default()).unwrap();
        match request.message {
            wire::Message::Msg(message) => Some(Document::try_from(message.body).unwrap()),
            other => panic!("expected OP_MSG, got {other:?}"),
        }
    }

    pub async fn read_op_reply(&mut self) -> Option<Document> {
        let frame = self.read_frame().await?;
        assert_eq!(frame.header.op_code, OpCode::Reply);
        let reply = OpReply::parse(&frame, &Limits::default()).unwrap();
        Some(Document::try_from(reply.documents[0].clone()).unwrap())
    }

    /// True if the server has closed this connection (reads EOF within 5 s).
    pub async fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut byte)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}
