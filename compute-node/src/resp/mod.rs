//! A Redis-protocol server in front of the [`Engine`], so that redis-cli,
//! redis-benchmark and Redis client libraries work against SplitKV with
//! their default settings. Every command SplitKV has answers as Redis 7
//! does; each connection speaks RESP2 until `HELLO 3` switches it to RESP3,
//! and one encoder writes every reply in the connection's version.
//!
//! Parts: `parser` (bytes in, whole commands out, lengths checked before
//! anything is reserved), `table` (the command table `COMMAND` answers
//! from and dispatch reads), `command_docs` (what COMMAND DOCS adds to the
//! table: histories and argument lists), `commands` (the batch loop, and
//! what each command does and answers, transactions), `reply` (the
//! encoder), `clients` (the connected clients, for CLIENT LIST and KILL),
//! `info` (INFO's text), `glob` (Redis's patterns, for CONFIG GET, KEYS
//! and SCAN).
//!
//! Each client connection reads what has arrived, parses every complete
//! command, carries the batch out in order, and writes all the
//! replies with one write. It reads no more until the replies are written,
//! so a client that pipelines faster than it reads is slowed by its own
//! socket rather than buffered without end; replies are written early, in
//! the middle of a batch, once 1 MiB of them is waiting. What
//! one client can make the server hold is bounded: one command's arguments
//! by the frame limit (smaller before a required AUTH), a batch by 1024
//! commands, values being read by runs of 64 keys, a transaction by
//! 65536 queued commands, and WATCH by 65536 keys.
//! Malformed input gets an error reply and the connection is closed;
//! unknown commands and wrong arity get an error reply and the connection
//! goes on.

mod clients;
mod command_docs;
mod commands;
mod glob;
mod info;
mod parser;
mod reply;
mod table;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use splitkv_common::message;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use crate::Engine;
use clients::ClientRegistry;
use commands::{Flow, RespClient, ServerState};
use parser::{ParseLimits, RequestParser};
use reply::Replies;

/// Commands carried out per batch at most.
const MAX_BATCH: usize = 1024;
/// Bytes asked for per read from a client.
const READ_BYTES: usize = 16 << 10;
/// Most bytes taken from a client in one turn before its commands are
/// carried out: a read that fills the buffer is followed by more reads of
/// what has already arrived, up to this, so that a pipeline of 16 SETs of
/// 4 KiB is one run rather than four.
const TURN_BYTES: usize = 256 << 10;
/// Most arguments of one command (MSET/MGET/DEL of many keys).
const MAX_ARGS: usize = 1 << 20;
/// What a client may send before it has given a required password (as
/// Redis: enough for AUTH, too little to make the server hold much).
const UNAUTHENTICATED_LIMITS: ParseLimits = ParseLimits {
    max_args: 10,
    max_arg_bytes: 16 << 10,
    max_command_bytes: 64 << 10,
};

/// How the server listens.
#[derive(Debug, Clone)]
pub struct RespConfig {
    /// The password clients must give with AUTH, if any.
    pub requirepass: Option<String>,
    /// A line for INFO naming the storage node.
    pub storage: String,
}

/// Serves clients on `listener` until `shutdown` completes.
pub async fn serve(
    engine: Arc<Engine>,
    listener: TcpListener,
    config: RespConfig,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let shared = Arc::new(ServerState {
        requirepass: config.requirepass,
        storage: config.storage,
        clients: Arc::new(ClientRegistry::default()),
        started: std::time::Instant::now(),
        commands_processed: std::sync::atomic::AtomicU64::new(0),
        exec_gate: tokio::sync::RwLock::new(()),
        key_locks: commands::KeyLocks::default(),
        encoding_limits: Default::default(),
        blocked: Default::default(),
    });
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let engine = Arc::clone(&engine);
                    let shared = Arc::clone(&shared);
                    tokio::spawn(async move {
                        if let Err(e) = serve_client(&engine, stream, peer, &shared).await {
                            tracing::debug!(%peer, "client connection ended: {e}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("accepting a client failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            () = &mut shutdown => return,
        }
    }
}

async fn serve_client(
    engine: &Engine,
    stream: TcpStream,
    peer: SocketAddr,
    shared: &ServerState,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr()?;
    let peer_fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let (mut reader, mut writer) = stream.into_split();
    let registered = shared.clients.register(peer, local);
    let mut client = RespClient::new(engine, shared, &registered.entry, local.port());
    client.watch_peer(peer_fd);
    let engine_limits = engine.limits();
    let limits = ParseLimits {
        max_args: MAX_ARGS,
        max_arg_bytes: engine_limits
            .max_value_bytes
            .max(engine_limits.max_key_bytes),
        // An MSET travels to the storage node as one frame.
        max_command_bytes: message::max_frame_bytes(
            engine_limits.max_key_bytes,
            engine_limits.max_value_bytes,
        ),
    };
    let mut parser = RequestParser::new(if client.authenticated {
        limits
    } else {
        UNAUTHENTICATED_LIMITS
    });
    let mut input = BytesMut::with_capacity(READ_BYTES);
    let mut out = Replies::new(16 << 10);
    let mut batch = Vec::with_capacity(64);
    // Bytes read in the last turn: a client that pipelines more than one
    // read's worth gets room for as much up front, so the turn is one read
    // and the buffer is not grown (and copied) while full of unparsed bytes.
    let mut turn_bytes = 0;
    loop {
        let wanted = parser
            .wanted()
            .max(READ_BYTES)
            .max(turn_bytes.min(TURN_BYTES));
        if input.capacity() - input.len() < wanted {
            input.reserve(wanted);
        }
        turn_bytes = 0;
        tokio::select! {
            read = reader.read_buf(&mut input) => match read? {
                0 => return Ok(()),
                read => turn_bytes += read,
            },
            () = registered.entry.killed.notified() => return Ok(()),
        }
        while input.len() == input.capacity() && input.len() < TURN_BYTES {
            input.reserve(READ_BYTES);
            match reader.try_read_buf(&mut input) {
                // The end of the stream shows on the next read.
                Ok(0) => break,
                Ok(read) => turn_bytes += read,
                // Nothing more has arrived; or an error, which the next
                // read meets too, once the commands already read are
                // carried out.
                Err(_) => break,
            }
        }
        loop {
            let mut broken = None;
            while batch.len() < MAX_BATCH {
                match parser.next(&mut input) {
                    Ok(Some(cmd)) => batch.push(cmd),
                    Ok(None) => break,
                    Err(e) => {
                        broken = Some(e);
                        break;
                    }
                }
            }
            let more = batch.len() == MAX_BATCH;
            let flow = client.run(&batch, &mut out, &mut writer).await?;
            // Done with the arguments: the read buffer they were split from
            // is then (unless a value is still held elsewhere) ours alone
            // again, and the next reserve reuses it instead of a new one.
            for cmd in batch.drain(..) {
                parser.recycle(cmd);
            }
            parser.set_limits(if client.authenticated {
                limits
            } else {
                UNAUTHENTICATED_LIMITS
            });
            if let Some(e) = broken {
                out.error(&format!("ERR {e}"));
                commands::write_replies(&mut out, &mut writer).await?;
                tracing::debug!(%peer, "closing a client after a protocol error: {e}");
                return Ok(());
            }
            if flow == Flow::Close {
                commands::write_replies(&mut out, &mut writer).await?;
                return Ok(());
            }
            if out.pending_bytes() >= commands::FLUSH_BYTES || !more {
                commands::write_replies(&mut out, &mut writer).await?;
            }
            if !more {
                break;
            }
        }
    }
}
