//! The QUIC server in front of the storage engine.
//!
//! Every connection is mutually authenticated (see
//! [`splitkv_common::tls`]). Its first stream is the control stream, which
//! must begin with `Hello`; every later stream carries one bulk request. A
//! peer that breaks the protocol (oversized or malformed frame, undecodable
//! message) has its connection closed with the reason, logged; other
//! connections are not affected and no stored byte changes.

mod bulk;
mod control;
mod convert;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use splitkv_common::message::{self, close_code};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;

use crate::StorageEngine;

/// How the server listens.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (UDP).
    pub listen: SocketAddr,
    /// Transport settings.
    pub transport: TransportSettings,
}

/// State shared by every connection's tasks.
pub(crate) struct Shared {
    pub(crate) engine: Arc<StorageEngine>,
    pub(crate) max_frame_bytes: usize,
    pub(crate) connections: AtomicU32,
}

/// A bound, not yet running, storage-node server.
pub struct Server {
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
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
            shared: Arc::new(Shared {
                max_frame_bytes: message::max_frame_bytes(
                    limits.max_key_bytes,
                    limits.max_value_bytes,
                ),
                engine,
                connections: AtomicU32::new(0),
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
                    let shared = Arc::clone(&self.shared);
                    tokio::spawn(async move { serve_connection(shared, incoming).await });
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

/// TLS alert `certificate_required` (116), as a QUIC crypto error code.
const CERTIFICATE_REQUIRED: u64 = 0x100 + 116;

/// True for a handshake refused only because the client brought no
/// certificate, which is what `storage-node probe` does.
fn is_probe(e: &quinn::ConnectionError) -> bool {
    matches!(e, quinn::ConnectionError::TransportError(t) if u64::from(t.code) == CERTIFICATE_REQUIRED)
}

async fn serve_connection(shared: Arc<Shared>, incoming: quinn::Incoming) {
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
    shared.connections.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(%peer, "connection accepted");
    control::serve(&shared, &conn).await;
    shared.connections.fetch_sub(1, Ordering::Relaxed);
}
