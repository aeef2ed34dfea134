//! Idle connections for `strata bench clients --idle N`: N raw TCP connections each send one
//! `hello` (an OP_MSG built here: the bench knows no Strata crate) and read its reply, then stay
//! open and silent. The server's resident memory and threads are read from /proc before and
//! after, and again after its thread pool's keep-alive, so the figures are what an idle
//! connection costs the server: memory per connection and threads (none should remain).

use std::time::Duration;

use anyhow::{Context as _, bail};
use bson::doc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An OP_MSG `{hello: 1, $db: "admin"}` with request id `id`.
fn hello_message(id: i32) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    doc! { "hello": 1, "$db": "admin" }.to_writer(&mut body)?;
    let length = i32::try_from(16 + 4 + 1 + body.len())?;
    let mut message = Vec::with_capacity(length as usize);
    for field in [length, id, 0, 2013] {
        message.extend_from_slice(&field.to_le_bytes());
    }
    message.extend_from_slice(&0u32.to_le_bytes()); // flags
    message.push(0); // section kind 0: the body
    message.extend_from_slice(&body);
    Ok(message)
}

/// Opens `count` connections to `address`, each answered once; returns them open.
pub async fn open_idle(address: &str, count: u64) -> anyhow::Result<Vec<TcpStream>> {
    let mut streams = Vec::new();
    for id in 0..count {
        let mut stream = TcpStream::connect(address).await.with_context(|| format!("connection {id} of {count}"))?;
        stream.write_all(&hello_message(id as i32)?).await?;
        let mut header = [0u8; 16];
        stream.read_exact(&mut header).await?;
        let length = i32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let Some(rest) = usize::try_from(length).ok().and_then(|l| l.checked_sub(16)) else {
            bail!("connection {id}: a reply of length {length}");
        };
        let mut reply = vec![0; rest];
        stream.read_exact(&mut reply).await?;
        streams.push(stream);
    }
    Ok(streams)
}

/// How long the server's pool keeps a thread that has nothing to do (tokio's default, 10 s),
/// plus a margin.
pub const POOL_KEEP_ALIVE: Duration = Duration::from_secs(12);
