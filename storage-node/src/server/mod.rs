//! The QUIC server in front of the storage engine.
//!
//! Every connection is mutually authenticated (see
//! [`splitkv_common::tls`]). Its first stream is the control stream, which
//! must begin with `Hello`; every later stream carries one bulk request. A
//! peer that breaks the protocol (oversized or malformed frame, undecodable
//! message) has its connection closed with the reason, logged; other
//! connections are not affected and no stored byte changes.
//!
//! A point read whose bytes are in memory (a write buffer or the page
//! cache) is answered on its connection's task. Blocking disk reads (other
//! point reads, range reads, key-log exports) run on tokio's blocking
//! threads, at most [`MAX_CONCURRENT_DISK_READS`] at a time across the
//! node; the others wait for a permit without holding a thread. Of a
//! read of several records, those in memory are taken at once and the
//! others are read one after another on one blocking thread, so that a
//! request costs one thread wake however many of its records are cold.
//!
//! Calls go one way, down: this module serves a connection with
//! `handshake` and then `dispatch` on its control stream, and `bulk` on
//! each other stream; `dispatch` hands the one write request (`WriteMany`:
//! a single put or delete travels as a batch of one) to `writes` and the
//! one read request of records (`GetMany`: a single read is a batch of
//! one) to `reads`; all of them share `context`, `answer` and `stream`.

mod answer;
mod buffer_pool;
mod bulk;
mod context;
mod convert;
mod dispatch;
mod handshake;
mod reads;
mod stream;
mod writes;

pub use context::MAX_CONCURRENT_DISK_READS;
pub use dispatch::MAX_IN_FLIGHT_REQUESTS;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use splitkv_common::frame::FrameDecoder;
use splitkv_common::message::{self, close_code};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;

use tokio::sync::Semaphore;

use crate::{StorageConfig, StorageEngine, StorageError};
use context::ServerContext;
use stream::CloseReason;

/// Send priority of control streams; bulk streams keep quinn's default 0.
const CONTROL_PRIORITY: i32 = 1;

/// How the server listens.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (UDP).
    pub listen: SocketAddr,
    /// Transport settings.
    pub transport: TransportSettings,
    /// How long a following reader may take nothing of its key-log stream
    /// before the stream is closed ([`message::DEFAULT_FOLLOW_STALL_MS`]
    /// by default): a slow reader never holds the writer back, and what a
    /// stream holds queued for it is bounded by one export chunk and the
    /// stream's flow-control window.
    pub follow_stall_ms: u64,
}

/// A bound, not yet running, storage-node server.
pub struct Server {
    endpoint: quinn::Endpoint,
    context: Arc<ServerContext>,
}

impl Server {
    /// Binds the listening socket. The engine's key and value limits set the
    /// frame limit.
    pub fn bind(
        engine: Arc<StorageEngine>,
        identity: &NodeIdentity,
        config: &ServerConfig,
    ) -> Result<Self, ServerError> {
        let transport = Arc::new(config.transport.transport_config());
        let server_config = identity
            .server_config(transport)
            .map_err(ServerError::Tls)?;
        let endpoint = config
            .transport
            .server_endpoint(config.listen, server_config, identity)
            .map_err(|e| ServerError::Bind(config.listen, e))?;
        let limits = engine.limits();
        Ok(Self {
            endpoint,
            context: Arc::new(ServerContext {
                max_frame_bytes: message::max_frame_bytes(
                    limits.max_key_bytes,
                    limits.max_value_bytes,
                ),
                engine,
                connections: AtomicU32::new(0),
                follow_stall_ms: config.follow_stall_ms,
                stalled_streams_closed: AtomicU64::new(0),
                disk_reads: Arc::new(Semaphore::new(MAX_CONCURRENT_DISK_READS)),
                export_buffers: Arc::new(bulk::export_buffer_pool()),
            }),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Serves connections until `shutdown` completes, then closes every
    /// connection (clients see the node shutting down) and waits briefly for
    /// them to notice. The engine is left open: the caller closes it, which
    /// flushes every buffer.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                incoming = self.endpoint.accept() => {
                    let Some(incoming) = incoming else { break };
                    let context = Arc::clone(&self.context);
                    tokio::spawn(async move { serve_connection(context, incoming).await });
                }
                () = &mut shutdown => break,
            }
        }
        self.endpoint.close(
            close_code::SHUTTING_DOWN.into(),
            b"storage node shutting down",
        );
        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The TLS configuration could not be built from the node's identity.
    #[error("TLS configuration: {0}")]
    Tls(splitkv_common::tls::TlsError),
    /// The UDP socket could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
}

/// Why [`serve_blocking`] stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The storage engine could not be opened.
    #[error(transparent)]
    Open(StorageError),
    /// The async runtime could not be started.
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The server could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The address of the bound socket could not be read.
    #[error("reading the listening address")]
    LocalAddr(#[source] std::io::Error),
    /// Closing the engine, which flushes every write buffer, failed.
    #[error("flushing on shutdown")]
    Close(#[source] StorageError),
}

/// Runs a storage node on the calling thread until `shutdown` completes:
/// opens the engine of `storage_config`, starts a multi-threaded async
/// runtime (`worker_threads` workers, or tokio's default of one per CPU),
/// binds the server of `server_config`, calls `on_listening` with the
/// address it listens on and the engine, serves, and finally closes the
/// engine, which flushes every write buffer. Logs each of these steps.
///
/// `shutdown` is first polled inside the runtime, so it may register
/// signal handlers there.
pub fn serve_blocking(
    storage_config: StorageConfig,
    identity: &NodeIdentity,
    server_config: &ServerConfig,
    worker_threads: Option<usize>,
    on_listening: impl FnOnce(SocketAddr, &StorageEngine),
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let durability = storage_config.durability;
    let engine = Arc::new(StorageEngine::open(storage_config).map_err(ServeError::Open)?);
    tracing::info!(
        io_engine = %engine.io_engine(),
        durability = %durability,
        partitions = engine.partition_count(),
        "storage engine ready"
    );
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all().thread_name("storage-node");
    if let Some(workers) = worker_threads {
        runtime.worker_threads(workers);
    }
    let runtime = runtime.build().map_err(ServeError::Runtime)?;
    runtime.block_on(async {
        let server = Server::bind(Arc::clone(&engine), identity, server_config)?;
        let listen = server.local_addr().map_err(ServeError::LocalAddr)?;
        tracing::info!(%listen, io_engine = %engine.io_engine(), "storage node serving");
        on_listening(listen, &engine);
        server.run(shutdown).await;
        Ok::<(), ServeError>(())
    })?;
    tracing::info!("shutting down: flushing write buffers");
    engine.close().map_err(ServeError::Close)?;
    tracing::info!("storage node stopped cleanly");
    Ok(())
}

/// TLS alert `certificate_required` (116), as a QUIC crypto error code.
const CERTIFICATE_REQUIRED: u64 = 0x100 + 116;

/// True for a handshake refused only because the client brought no
/// certificate, which is what `storage-node probe` does.
fn is_probe(e: &quinn::ConnectionError) -> bool {
    matches!(e, quinn::ConnectionError::TransportError(t) if u64::from(t.code) == CERTIFICATE_REQUIRED)
}

async fn serve_connection(context: Arc<ServerContext>, incoming: quinn::Incoming) {
    let peer = incoming.remote_address();
    let conn = match incoming.await {
        Ok(conn) => conn,
        Err(e) => {
            if is_probe(&e) {
                // A health probe: it trusts our CA and brings no certificate.
                tracing::debug!(%peer, "answered a probe: {e}");
            } else {
                tracing::warn!(%peer, "refused a connection: {e}");
            }
            return;
        }
    };
    context.connections.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(%peer, "connection accepted");
    serve_streams(&context, &conn).await;
    context.connections.fetch_sub(1, Ordering::Relaxed);
}

/// Serves a connection: its control stream (the handshake, then its
/// requests), and its bulk streams as they come, until the peer goes away
/// or breaks the protocol, which closes the connection with the reason.
async fn serve_streams(context: &Arc<ServerContext>, conn: &quinn::Connection) {
    let Ok((mut send, mut recv)) = conn.accept_bi().await else {
        return;
    };
    if let Err(reason) = serve_control(context, conn, &mut send, &mut recv).await {
        stream::close_for(conn, &reason);
    }
}

async fn serve_control(
    context: &Arc<ServerContext>,
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<(), CloseReason> {
    // Small requests and their answers go before any bulk transfer.
    let _ = send.set_priority(CONTROL_PRIORITY);
    let mut decoder = FrameDecoder::new(context.max_frame_bytes);
    let mut scratch = BytesMut::with_capacity(64 << 10);
    let Some(grant) = handshake::accept(context, send, recv, &mut decoder, &mut scratch).await?
    else {
        return Ok(());
    };
    let bulk_acceptor = {
        let context = Arc::clone(context);
        let conn = conn.clone();
        tokio::spawn(async move {
            while let Ok((send, recv)) = conn.accept_bi().await {
                let context = Arc::clone(&context);
                let conn = conn.clone();
                tokio::spawn(async move { bulk::serve(&context, &conn, send, recv).await });
            }
        })
    };
    let result = dispatch::serve_requests(context, grant, send, recv, decoder, scratch).await;
    bulk_acceptor.abort();
    result
}
