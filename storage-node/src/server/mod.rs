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

mod bulk;
mod control;
mod convert;

pub use control::MAX_IN_FLIGHT_REQUESTS;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use splitkv_common::message::{self, Response, ResponseBody, WireError, close_code};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;

use tokio::sync::Semaphore;

use crate::{StorageConfig, StorageEngine, StorageError};

/// Most blocking disk reads (point reads, range reads, key-log exports)
/// the server runs at once, over all connections.
pub const MAX_CONCURRENT_DISK_READS: usize = 64;

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

/// What every connection's tasks use: the engine, the frame limit, the
/// count of open connections, and the permits for blocking disk reads.
pub(crate) struct ServerContext {
    pub(crate) engine: Arc<StorageEngine>,
    pub(crate) max_frame_bytes: usize,
    pub(crate) connections: AtomicU32,
    /// [`ServerConfig::follow_stall_ms`].
    pub(crate) follow_stall_ms: u64,
    /// Key-log streams closed for stalling.
    pub(crate) stalled_streams_closed: AtomicU64,
    /// [`MAX_CONCURRENT_DISK_READS`] permits.
    pub(crate) disk_reads: Arc<Semaphore>,
}

impl ServerContext {
    /// Runs `read` on a blocking thread once a disk-read permit is free and
    /// returns its result; `None` if the read panicked.
    pub(crate) async fn disk_read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&StorageEngine) -> T + Send + 'static,
    ) -> Option<T> {
        let _permit = Arc::clone(&self.disk_reads).acquire_owned().await.ok()?;
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || read(&engine))
            .await
            .ok()
    }
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

/// Encodes a response without a blob into one frame, reusing `scratch`'s
/// capacity.
pub(crate) fn encode_response(
    scratch: &mut BytesMut,
    id: u64,
    body: Result<ResponseBody, WireError>,
) -> Bytes {
    message::encode(scratch, &Response { id, body }, &[])
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
    control::serve(&context, &conn).await;
    context.connections.fetch_sub(1, Ordering::Relaxed);
}
