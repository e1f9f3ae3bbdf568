//! The client a compute node uses to talk to a storage node: one persistent
//! QUIC connection per partition (connection `i` writes partition `i`), each
//! with a long-lived control stream on which many requests are in flight,
//! plus a stream of its own for each bulk transfer.
//!
//! Requests return a [`Call`], which can be awaited or waited for from a
//! plain thread. Every request has a deadline; a request that passes it
//! fails alone, and its connection stays up. A connection is given up only
//! when the peer is gone (its control stream ends, or QUIC's idle timeout
//! fires despite keep-alives): then the requests waiting on it fail at once
//! and the link reconnects in the background with backoff, presenting the
//! same writer epoch; a newer writer fences this one for good. What
//! happens to the links is told as [`LinkEvent`]s on the channel the
//! caller hands over in [`ClientConfig::link_events`].
//!
//! Each connection holds at most [`ClientConfig::max_in_flight_requests`]
//! requests waiting for answers and [`ClientConfig::outbox_bytes`] bytes
//! waiting to be sent; a request that finds either full is refused with
//! [`ClientError::Busy`] before anything is sent, and
//! [`StorageClient::wait_for_room`] waits until it would fit.

mod bulk;
mod call;
mod error;
mod link;
mod requests;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

pub use call::Call;
pub use error::ClientError;
use link::Link;
pub use requests::{BatchOp, KeyWrite};

use crate::message::{self, WireError};
use crate::tls::NodeIdentity;
use crate::transport::TransportSettings;

/// What happened to the connection of a partition, told on
/// [`ClientConfig::link_events`] in the order it happened to that
/// connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// The connection was lost; the requests waiting on it have failed and
    /// it is reconnecting.
    Down {
        /// The partition.
        partition: usize,
    },
    /// The connection is up again; `generation` counts its reconnections
    /// (1 after the first).
    Reconnected {
        /// The partition.
        partition: usize,
        /// Reconnections so far.
        generation: u64,
    },
    /// A newer writer (of epoch `current_epoch`) has fenced this one: told
    /// once, when the storage node first refuses a write or a reconnection
    /// for it. Every later write fails with [`WireError::Fenced`].
    Fenced {
        /// The epoch of the writer that fenced this one.
        current_epoch: u64,
    },
}

/// How to reach a storage node.
#[derive(Clone)]
pub struct ClientConfig {
    /// `host:port` of the storage node. The host is also the name its
    /// certificate must carry.
    pub server: String,
    /// This node's certificate, key and the cluster CA.
    pub identity: Arc<NodeIdentity>,
    /// Writer (the default) takes a new writer epoch, fencing older
    /// writers; a reader only reads.
    pub writer: bool,
    /// Deadline of each request.
    pub request_timeout_ms: u64,
    /// Deadline of each connection attempt, handshake included.
    pub connect_timeout_ms: u64,
    /// Transport settings.
    pub transport: TransportSettings,
    /// Frame limit for responses that carry a record: at least the frame of
    /// the largest key with the largest value ([`message::max_frame_bytes`]).
    /// Range reads of up to [`crate::limits::MAX_RANGE_BYTES`] are accepted
    /// whatever this says.
    pub max_frame_bytes: usize,
    /// Requests one connection holds waiting for their answers (or their
    /// deadlines); one more is refused with [`ClientError::Busy`].
    pub max_in_flight_requests: usize,
    /// Bytes of encoded requests one connection holds queued to send; a
    /// request that would pass it is refused with [`ClientError::Busy`]
    /// (one request larger than this is sent when nothing else is queued).
    pub outbox_bytes: usize,
    /// Where to tell what happens to the connections (for example to catch
    /// up on a partition's key log after a reconnection). The channel is the
    /// caller's and bounded: a reconnection waits until its event fits.
    pub link_events: Option<mpsc::Sender<LinkEvent>>,
}

impl ClientConfig {
    /// A writer's configuration with default deadlines and transport.
    pub fn new(server: impl Into<String>, identity: Arc<NodeIdentity>) -> Self {
        Self {
            server: server.into(),
            identity,
            writer: true,
            request_timeout_ms: 5_000,
            connect_timeout_ms: 5_000,
            transport: TransportSettings::default(),
            max_frame_bytes: message::max_frame_bytes(
                crate::limits::DEFAULT_MAX_KEY_BYTES,
                crate::limits::DEFAULT_MAX_VALUE_BYTES,
            ),
            max_in_flight_requests: DEFAULT_MAX_IN_FLIGHT_REQUESTS,
            outbox_bytes: DEFAULT_OUTBOX_BYTES,
            link_events: None,
        }
    }
}

/// Default of [`ClientConfig::max_in_flight_requests`].
pub const DEFAULT_MAX_IN_FLIGHT_REQUESTS: usize = 4096;
/// Default of [`ClientConfig::outbox_bytes`]: 32 MiB.
pub const DEFAULT_OUTBOX_BYTES: usize = 32 << 20;

/// What the storage node said in its `Welcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// Partition count.
    pub partitions: usize,
    /// Writer epoch held (0 for readers).
    pub epoch: u64,
    /// The node's key limit.
    pub max_key_bytes: usize,
    /// The node's value limit.
    pub max_value_bytes: usize,
    /// The node's I/O engine.
    pub io_engine: String,
}

/// What the client and its links' tasks share: the configuration, the
/// endpoint, the writer epoch and the links.
pub(crate) struct ClientState {
    config: ClientConfig,
    endpoint: quinn::Endpoint,
    quic: quinn::ClientConfig,
    server_name: String,
    /// True while the links present themselves as a writer's.
    writer: AtomicBool,
    epoch: AtomicU64,
    /// The epoch that fenced this writer; 0 while it is not fenced.
    fenced_by: AtomicU64,
    closing: AtomicBool,
    /// Longest response frame accepted: records and range reads.
    response_limit_bytes: usize,
    links: OnceLock<Vec<Arc<Link>>>,
    /// Receive buffers of finished bulk transfers. Once the caller drops
    /// what it received, the next transfer refills the same memory instead
    /// of faulting in a fresh allocation.
    bulk_buffers: parking_lot::Mutex<Vec<bytes::BytesMut>>,
}

impl ClientState {
    fn links(&self) -> &[Arc<Link>] {
        self.links.get().map(Vec::as_slice).unwrap_or(&[])
    }

    /// The error every write gets once a newer writer has fenced this one.
    fn fenced(&self) -> Option<WireError> {
        match self.fenced_by.load(Ordering::Acquire) {
            0 => None,
            current => Some(WireError::Fenced {
                yours: self.epoch.load(Ordering::Acquire),
                current,
            }),
        }
    }

    /// Records that epoch `current` fenced this writer, and wakes whoever
    /// waits for a link; true the first time.
    fn fence(&self, current: u64) -> bool {
        let first = self.fenced_by.swap(current.max(1), Ordering::AcqRel) == 0;
        for link in self.links() {
            link.wake_waiters();
        }
        first
    }

    /// The epoch a link presents: none before the first link has one.
    fn epoch_for_hello(&self) -> Option<u64> {
        match self.epoch.load(Ordering::Acquire) {
            0 => None,
            e => Some(e),
        }
    }

    /// Resolves the server address (again on every connection attempt: a
    /// restarted node may have a new address).
    async fn resolve(&self) -> Result<SocketAddr, ClientError> {
        let mut addrs = tokio::net::lookup_host(&self.config.server)
            .await
            .map_err(|e| ClientError::Connect {
                server: self.config.server.clone(),
                reason: format!("cannot resolve: {e}"),
            })?;
        addrs.next().ok_or_else(|| ClientError::Connect {
            server: self.config.server.clone(),
            reason: "the name resolves to no address".into(),
        })
    }
}

/// A connected client: one link per partition.
pub struct StorageClient {
    state: Arc<ClientState>,
    welcome: Welcome,
    next_id: AtomicU64,
}

/// Splits `host:port` into the host (the TLS server name).
fn host_of(server: &str) -> &str {
    let host = match server.rsplit_once(':') {
        Some((host, _)) => host,
        None => server,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

impl StorageClient {
    /// Connects to the storage node: the first link learns the partition
    /// count (and, for a writer, begins a new writer epoch, fencing every
    /// older writer); then one link per partition is opened in parallel.
    /// Must be called inside a tokio runtime, which the client's tasks use.
    pub async fn connect(config: ClientConfig) -> Result<Self, ClientError> {
        let transport = Arc::new(config.transport.transport_config());
        let quic = config
            .identity
            .client_config(transport)
            .map_err(|e| ClientError::Connect {
                server: config.server.clone(),
                reason: e.to_string(),
            })?;
        let server_name = host_of(&config.server).to_string();
        let writer = config.writer;
        let probe_addr: SocketAddr = tokio::net::lookup_host(&config.server)
            .await
            .ok()
            .and_then(|mut a| a.next())
            .unwrap_or_else(|| "0.0.0.0:0".parse().expect("literal address"));
        let endpoint =
            config
                .transport
                .client_endpoint(probe_addr)
                .map_err(|e| ClientError::Connect {
                    server: config.server.clone(),
                    reason: format!("cannot open a UDP socket: {e}"),
                })?;
        let state = Arc::new(ClientState {
            response_limit_bytes: config
                .max_frame_bytes
                .max(message::max_frame_bytes(0, crate::limits::MAX_RANGE_BYTES)),
            config,
            endpoint,
            quic,
            server_name,
            writer: AtomicBool::new(writer),
            epoch: AtomicU64::new(0),
            fenced_by: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            links: OnceLock::new(),
            bulk_buffers: parking_lot::Mutex::new(Vec::new()),
        });
        let (first, welcome) = link::establish(&state, 0).await?;
        state.epoch.store(welcome.epoch, Ordering::Release);
        let rest: Vec<_> = (1..welcome.partitions)
            .map(|i| {
                let state = Arc::clone(&state);
                tokio::spawn(async move { link::establish(&state, i).await })
            })
            .collect();
        let mut links = vec![Arc::new(Link::new(first))];
        let mut failure = None;
        for handle in rest {
            match handle.await {
                Ok(Ok((live, _))) => links.push(Arc::new(Link::new(live))),
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(e) => {
                    failure = failure.or(Some(ClientError::Connect {
                        server: state.config.server.clone(),
                        reason: format!("connection task failed: {e}"),
                    }))
                }
            }
        }
        if let Some(e) = failure {
            // Close what did come up, so no connection outlives the error.
            state.closing.store(true, Ordering::Release);
            for link in &links {
                link.close();
            }
            return Err(e);
        }
        let _ = state.links.set(links);
        // A link lost while the others were still connecting found no link
        // to reconnect; start those now.
        for (index, link) in state.links().iter().enumerate() {
            if !link.is_up() {
                link::start_reconnect(Arc::clone(&state), index);
            }
        }
        spawn_sweeper(Arc::downgrade(&state));
        Ok(Self {
            state,
            welcome,
            next_id: AtomicU64::new(1),
        })
    }

    /// What the storage node announced.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Number of partitions (and links).
    pub fn partitions(&self) -> usize {
        self.welcome.partitions
    }

    /// The writer epoch this client holds.
    pub fn epoch(&self) -> u64 {
        self.state.epoch.load(Ordering::Acquire)
    }

    /// True while this client is a writer (configured as one, or promoted).
    pub fn is_writer(&self) -> bool {
        self.state.writer.load(Ordering::Acquire)
    }

    /// Turns a reader into the writer: the first link reopens as a writer,
    /// which begins a new writer epoch on the storage node (every older
    /// writer is fenced from then on: none of its writes commits after
    /// this returns), then the other links reopen in that epoch. The reader
    /// connections are closed; their waiting requests and key-log streams
    /// fail. A link that cannot reopen now keeps reconnecting in the
    /// background as a writer's. Returns the new epoch; a client that is
    /// already a writer returns its epoch at once.
    pub async fn promote(&self) -> Result<u64, ClientError> {
        if self.is_writer() {
            return Ok(self.epoch());
        }
        let state = &self.state;
        let role = message::Role::Writer {
            partition: 0,
            epoch: None,
        };
        let (first, welcome) = link::establish_as(state, 0, role).await?;
        state.epoch.store(welcome.epoch, Ordering::Release);
        state.fenced_by.store(0, Ordering::Release);
        state.writer.store(true, Ordering::Release);
        let links = state.links();
        let rest: Vec<_> = (1..links.len())
            .map(|i| {
                let state = Arc::clone(state);
                tokio::spawn(async move { link::establish(&state, i).await })
            })
            .collect();
        if let Some(link) = links.first() {
            link.replace(Some(first));
        }
        for (index, handle) in rest.into_iter().enumerate() {
            let partition = index + 1;
            let reason = match handle.await {
                Ok(Ok((live, _))) => {
                    links[partition].replace(Some(live));
                    continue;
                }
                Ok(Err(e)) => e.to_string(),
                Err(e) => format!("connection task failed: {e}"),
            };
            tracing::warn!(
                partition,
                "could not reopen the connection as a writer's at once ({reason}); reconnecting"
            );
            links[partition].replace(None);
            link::start_reconnect(Arc::clone(state), partition);
        }
        tracing::info!(epoch = welcome.epoch, "promoted to the writer");
        Ok(welcome.epoch)
    }

    /// Turns a fenced writer into a reader: connections that are up stay
    /// (a fenced writer's connections still read and follow key logs), and
    /// any that is down reconnects as a reader's. Writes go on failing with
    /// the [`WireError::Fenced`] that fenced it, until a
    /// [`StorageClient::promote`].
    pub fn demote(&self) {
        let state = &self.state;
        // SeqCst: see the end of `link::start_reconnect`.
        state.writer.store(false, Ordering::SeqCst);
        for (partition, link) in state.links().iter().enumerate() {
            if !link.is_up() {
                link::start_reconnect(Arc::clone(state), partition);
            }
        }
        tracing::info!("serving as a reader now that a newer writer has fenced this one");
    }

    /// True once a newer writer has fenced this one.
    pub fn is_fenced(&self) -> bool {
        self.state.fenced().is_some()
    }

    /// True if the connection of `partition` is up.
    pub fn is_up(&self, partition: usize) -> bool {
        self.state.links().get(partition).is_some_and(|l| l.is_up())
    }

    /// How many times the connection of `partition` has reconnected.
    pub fn generation(&self, partition: usize) -> u64 {
        self.state
            .links()
            .get(partition)
            .map_or(0, |l| l.generation.load(Ordering::Acquire))
    }

    /// The datagram size MTU discovery has settled on for the connection of
    /// `partition`.
    pub fn current_mtu(&self, partition: usize) -> Option<u16> {
        let live = self.state.links().get(partition)?.live()?;
        Some(live.conn.stats().path.current_mtu)
    }

    fn link(&self, partition: usize) -> Result<&Arc<Link>, ClientError> {
        if self.state.closing.load(Ordering::Acquire) {
            return Err(ClientError::ShutDown);
        }
        self.state.links().get(partition).ok_or_else(|| {
            ClientError::Invalid(WireError::NoSuchPartition {
                partition: partition as u32,
                count: self.partitions() as u32,
            })
        })
    }

    fn live(&self, partition: usize) -> Result<Arc<link::Live>, ClientError> {
        self.link(partition)?
            .live()
            .ok_or(ClientError::Unavailable { partition })
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.state.config.request_timeout_ms)
    }

    /// Waits until the connection of `partition` is up, or `timeout` has
    /// passed ([`ClientError::Unavailable`]). Fails at once if this writer
    /// is fenced or the client is closed.
    pub async fn wait_up(&self, partition: usize, timeout: Duration) -> Result<(), ClientError> {
        let link = self.link(partition)?;
        let waited = tokio::time::timeout(timeout, async {
            loop {
                let changed = link.changed();
                tokio::pin!(changed);
                changed.as_mut().enable();
                self.check_writer()?;
                match self.live(partition) {
                    Err(ClientError::Unavailable { .. }) => changed.await,
                    other => return other.map(|_| ()),
                }
            }
        });
        waited
            .await
            .unwrap_or(Err(ClientError::Unavailable { partition }))
    }

    /// Waits until the connection of `partition` has room for one more
    /// request (see [`ClientError::Busy`]), or fails with
    /// [`ClientError::Busy`], naming the bound still reached, once
    /// `timeout` has passed. The request deadline is a good `timeout`: a
    /// full map of waiting requests makes room at the latest when its
    /// oldest request passes its deadline. Returns at once if the
    /// connection is down: sending will say so.
    pub async fn wait_for_room(
        &self,
        partition: usize,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let live = match self.live(partition) {
            Ok(live) => live,
            Err(ClientError::Unavailable { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        tokio::time::timeout(timeout, live.wait_for_room())
            .await
            .map_err(|_| ClientError::Busy {
                partition,
                full: live.full_bound(),
            })
    }

    /// Closes every connection; waiting requests fail with
    /// [`ClientError::ShutDown`].
    pub fn close(&self) {
        self.state.closing.store(true, Ordering::Release);
        for link in self.state.links() {
            link.close();
        }
    }
}

impl StorageClient {
    /// Waits up to `timeout` for every closed connection's close to reach
    /// the storage node (so that it lets go of them at once rather than at
    /// its idle timeout). Call after [`StorageClient::close`].
    pub async fn wait_closed(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.state.endpoint.wait_idle()).await;
    }
}

impl Drop for StorageClient {
    fn drop(&mut self) {
        self.close();
    }
}

/// Fails requests past their deadline, every 20 ms, until the client is
/// dropped.
fn spawn_sweeper(state: std::sync::Weak<ClientState>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            if state.closing.load(Ordering::Acquire) {
                return;
            }
            let now = Instant::now();
            let timeout = Duration::from_millis(state.config.request_timeout_ms);
            for link in state.links() {
                if let Some(live) = link.live() {
                    live.expire(now, timeout);
                }
            }
        }
    });
}

#[cfg(test)]
mod host_tests {
    use super::host_of;

    #[test]
    fn server_names_come_from_the_address() {
        assert_eq!(host_of("storage:7000"), "storage");
        assert_eq!(host_of("127.0.0.1:7000"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7000"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }
}

#[cfg(test)]
mod tests;
