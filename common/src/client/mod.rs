//! The client a compute node uses to talk to a storage node: one persistent
//! QUIC connection per partition (connection `i` writes partition `i`), each
//! with a long-lived control stream on which many requests are in flight,
//! plus a stream of its own for each bulk transfer.
//!
//! Requests return a [`Call`], which can be awaited or waited for from a
//! plain thread. Every request has a deadline. When a connection drops,
//! the requests waiting on it fail at once and the link reconnects in the
//! background with backoff, presenting the same writer epoch; a newer
//! writer fences this one for good.

mod call;
mod link;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;

pub use call::Call;
use call::{Reply, unexpected};
use link::{Link, encode_frame};

use crate::frame::{self, FrameDecoder};
use crate::message::{self, Request, RequestBody, ResponseBody, StatsReport, WireError, WriteAck};
use crate::tls::NodeIdentity;
use crate::transport::TransportSettings;

/// Why a request failed on the client's side of the wire.
#[derive(Debug, Clone, Error)]
pub enum ClientError {
    /// The storage node could not be reached.
    #[error("cannot connect to the storage node at {server}: {reason}")]
    Connect {
        /// The address asked for.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The TLS handshake failed: the storage node refused this node's
    /// certificate, or this node refused the storage node's.
    #[error("the TLS handshake with {server} failed (certificate refused?): {reason}")]
    Refused {
        /// The address asked for.
        server: String,
        /// The TLS alert or reason given.
        reason: String,
    },
    /// The storage node answered with an error.
    #[error("{0}")]
    Storage(WireError),
    /// The connection dropped while the request was in flight; it may or may
    /// not have been carried out.
    #[error("connection to the storage node lost: {reason}")]
    ConnectionLost {
        /// Why.
        reason: String,
    },
    /// The connection is down and being re-established.
    #[error("connection {link} to the storage node is down; reconnecting")]
    Unavailable {
        /// The link.
        link: usize,
    },
    /// No response within the request deadline; the request may or may not
    /// have been carried out.
    #[error("no response from the storage node within {after_ms} ms")]
    DeadlineExceeded {
        /// The deadline.
        after_ms: u64,
    },
    /// A newer writer has taken over; this client may only read.
    #[error("this writer was fenced by a newer one")]
    Fenced,
    /// The storage node sent something this client cannot understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The client is closed.
    #[error("the storage client is closed")]
    ShutDown,
    /// A request larger than the storage node accepts; it was not sent.
    #[error("{what} is {len} bytes; the storage node accepts at most {max}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Called with a link's index each time it reconnects.
pub type ReconnectHook = Arc<dyn Fn(usize) + Send + Sync>;

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
    /// Called after a link reconnects (for example to catch up on the
    /// partition's key log).
    pub on_reconnect: Option<ReconnectHook>,
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
            on_reconnect: None,
        }
    }
}

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

/// State shared by the client and its links' tasks.
pub(crate) struct Shared {
    config: ClientConfig,
    endpoint: quinn::Endpoint,
    quic: quinn::ClientConfig,
    server_name: String,
    epoch: AtomicU64,
    fenced: AtomicBool,
    closing: AtomicBool,
    /// Longest response frame accepted: records and range reads.
    response_limit_bytes: usize,
    links: OnceLock<Vec<Arc<Link>>>,
    /// Receive buffers of finished bulk transfers. Once the caller drops
    /// what it received, the next transfer refills the same memory instead
    /// of faulting in a fresh allocation.
    bulk_buffers: parking_lot::Mutex<Vec<bytes::BytesMut>>,
}

impl Shared {
    fn links(&self) -> &[Arc<Link>] {
        self.links.get().map(Vec::as_slice).unwrap_or(&[])
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
    shared: Arc<Shared>,
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
        let shared = Arc::new(Shared {
            response_limit_bytes: config
                .max_frame_bytes
                .max(message::max_frame_bytes(0, crate::limits::MAX_RANGE_BYTES)),
            config,
            endpoint,
            quic,
            server_name,
            epoch: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            links: OnceLock::new(),
            bulk_buffers: parking_lot::Mutex::new(Vec::new()),
        });
        let (first, welcome) = link::establish(&shared, 0).await?;
        shared.epoch.store(welcome.epoch, Ordering::Release);
        let rest: Vec<_> = (1..welcome.partitions)
            .map(|i| {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move { link::establish(&shared, i).await })
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
                        server: shared.config.server.clone(),
                        reason: format!("connection task failed: {e}"),
                    }))
                }
            }
        }
        if let Some(e) = failure {
            // Close what did come up, so no connection outlives the error.
            shared.closing.store(true, Ordering::Release);
            for link in &links {
                link.close();
            }
            return Err(e);
        }
        let _ = shared.links.set(links);
        // A link lost while the others were still connecting found no link
        // to reconnect; start those now.
        for (index, link) in shared.links().iter().enumerate() {
            if !link.is_up() {
                link::start_reconnect(Arc::clone(&shared), index);
            }
        }
        spawn_sweeper(Arc::downgrade(&shared));
        Ok(Self {
            shared,
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
        self.shared.epoch.load(Ordering::Acquire)
    }

    /// True once a newer writer has fenced this one.
    pub fn is_fenced(&self) -> bool {
        self.shared.fenced.load(Ordering::Acquire)
    }

    /// True if link `link` is connected.
    pub fn is_up(&self, link: usize) -> bool {
        self.shared.links().get(link).is_some_and(|l| l.is_up())
    }

    /// How many times link `link` has reconnected.
    pub fn generation(&self, link: usize) -> u64 {
        self.shared
            .links()
            .get(link)
            .map_or(0, |l| l.generation.load(Ordering::Acquire))
    }

    /// The datagram size MTU discovery has settled on for link `link`.
    pub fn current_mtu(&self, link: usize) -> Option<u16> {
        let live = self.shared.links().get(link)?.live()?;
        Some(live.conn.stats().path.current_mtu)
    }

    fn live(&self, link: usize) -> Result<Arc<link::Live>, ClientError> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(ClientError::ShutDown);
        }
        let slot = self.shared.links().get(link).ok_or_else(|| {
            ClientError::Storage(WireError::NoSuchPartition {
                partition: link as u32,
                count: self.partitions() as u32,
            })
        })?;
        slot.live().ok_or(ClientError::Unavailable { link })
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.shared.config.request_timeout_ms)
    }

    /// Sends a request on link `link`'s control stream, its blob the
    /// concatenation of `blob`. A request the storage node would refuse as
    /// too large a frame (which would cost the whole connection) is refused
    /// here and not sent.
    fn call<T>(
        &self,
        link: usize,
        body: RequestBody<'_>,
        blob: &[&[u8]],
        convert: call::Convert<T>,
    ) -> Result<Call<T>, ClientError> {
        let max =
            message::max_frame_bytes(self.welcome.max_key_bytes, self.welcome.max_value_bytes);
        let blob_len: usize = blob.iter().map(|part| part.len()).sum();
        if blob_len > max {
            return Err(ClientError::TooLarge {
                what: "request",
                len: blob_len,
                max,
            });
        }
        let live = self.live(link)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let encoded = encode_frame(&Request { id, body }, blob);
        let meta_len = encoded.len() - frame::FRAME_PREFIX_BYTES - blob_len;
        if meta_len > frame::MAX_META_BYTES {
            return Err(ClientError::TooLarge {
                what: "the request's keys",
                len: meta_len,
                max: frame::MAX_META_BYTES,
            });
        }
        if encoded.len() > max {
            return Err(ClientError::TooLarge {
                what: "request",
                len: encoded.len(),
                max,
            });
        }
        let rx = live.send(id, encoded, Instant::now() + self.timeout())?;
        Ok(Call::new(rx, convert))
    }

    fn check_writer(&self) -> Result<(), ClientError> {
        if self.is_fenced() {
            Err(ClientError::Fenced)
        } else {
            Ok(())
        }
    }

    /// Puts `key` = `value` through link `link` (into partition `link`).
    pub fn put(
        &self,
        link: usize,
        key: &[u8],
        value: &[u8],
    ) -> Result<Call<WriteAck>, ClientError> {
        self.check_writer()?;
        self.call(
            link,
            RequestBody::Put { key },
            &[value],
            |reply| match reply.body {
                ResponseBody::Written(ack) => Ok(ack),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// Puts every pair through link `link` as one unit (all or none after a
    /// crash). The acknowledgements come back in the same order.
    pub fn put_many(
        &self,
        link: usize,
        items: &[(&[u8], &[u8])],
    ) -> Result<Call<Vec<WriteAck>>, ClientError> {
        self.check_writer()?;
        let keys = items.iter().map(|(k, _)| *k).collect();
        let value_lens = items.iter().map(|(_, v)| v.len() as u32).collect();
        let values: Vec<&[u8]> = items.iter().map(|(_, v)| *v).collect();
        self.call(
            link,
            RequestBody::PutMany { keys, value_lens },
            &values,
            |reply| match reply.body {
                ResponseBody::WrittenMany(acks) => Ok(acks),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// Deletes `key` through link `link`.
    pub fn delete(&self, link: usize, key: &[u8]) -> Result<Call<WriteAck>, ClientError> {
        self.check_writer()?;
        self.call(
            link,
            RequestBody::Delete { key },
            &[],
            |reply| match reply.body {
                ResponseBody::Written(ack) => Ok(ack),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// Reads the record at a location (verified by the storage node; the
    /// caller should check the key it expects).
    pub fn get(
        &self,
        partition: usize,
        offset: u64,
        len: usize,
    ) -> Result<Call<Bytes>, ClientError> {
        let body = RequestBody::Get {
            partition: partition as u32,
            offset,
            len: len as u32,
        };
        self.call(
            partition % self.partitions().max(1),
            body,
            &[],
            |reply| match reply.body {
                ResponseBody::Record => Ok(reply.blob),
                other => Err(unexpected(&other)),
            },
        )
    }

    /// Makes everything acknowledged durable against power loss.
    pub fn sync(&self) -> Result<Call<()>, ClientError> {
        self.call(0, RequestBody::Sync, &[], |reply: Reply| match reply.body {
            ResponseBody::Synced => Ok(()),
            other => Err(unexpected(&other)),
        })
    }

    /// The storage node's counters and state.
    pub fn stats(&self) -> Result<Call<StatsReport>, ClientError> {
        self.call(0, RequestBody::Stats, &[], |reply| match reply.body {
            ResponseBody::Stats(report) => Ok(report),
            other => Err(unexpected(&other)),
        })
    }

    /// A round trip on link `link`.
    pub fn ping(&self, link: usize) -> Result<Call<()>, ClientError> {
        self.call(link, RequestBody::Ping, &[], |reply| match reply.body {
            ResponseBody::Pong => Ok(()),
            other => Err(unexpected(&other)),
        })
    }

    /// Waits until link `link` is up, or the deadline passes.
    pub async fn wait_up(&self, link: usize, timeout: Duration) -> Result<(), ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(outcome) = self.up_or_given_up(link, deadline) {
                return outcome;
            }
            tokio::time::sleep(UP_POLL_INTERVAL).await;
        }
    }

    /// Like [`StorageClient::wait_up`], blocking the thread.
    pub fn wait_up_blocking(&self, link: usize, timeout: Duration) -> Result<(), ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(outcome) = self.up_or_given_up(link, deadline) {
                return outcome;
            }
            std::thread::sleep(UP_POLL_INTERVAL);
        }
    }

    /// One check of [`StorageClient::wait_up`]: `Some` once link `link` is
    /// up, the client is fenced or closed, the link does not exist, or
    /// `deadline` has passed; `None` to keep waiting.
    fn up_or_given_up(&self, link: usize, deadline: Instant) -> Option<Result<(), ClientError>> {
        if self.is_fenced() {
            return Some(Err(ClientError::Fenced));
        }
        match self.live(link) {
            Ok(_) => Some(Ok(())),
            Err(ClientError::Unavailable { .. }) if Instant::now() < deadline => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Opens a bulk stream on `link`, sends `body`, and hands each response
    /// frame to `on_frame` until it returns `Ok(true)` (done) or the stream
    /// ends.
    async fn bulk(
        &self,
        link: usize,
        body: RequestBody<'_>,
        mut on_frame: impl FnMut(ResponseBody, Bytes) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        let live = self.live(link)?;
        let frame = encode_frame(&Request { id: 0, body }, &[]);
        let missed = || ClientError::DeadlineExceeded {
            after_ms: self.shared.config.request_timeout_ms,
        };
        let start = async {
            let (mut send, recv) = live
                .conn
                .open_bi()
                .await
                .map_err(|e| link::connection_error(&self.shared, &e))?;
            send.write_all(&frame)
                .await
                .map_err(|e| link::write_error(&self.shared, e))?;
            let _ = send.finish();
            Ok::<_, ClientError>(recv)
        };
        let mut recv = tokio::time::timeout(self.timeout(), start)
            .await
            .map_err(|_| missed())??;
        let buffer = self.shared.bulk_buffers.lock().pop().unwrap_or_default();
        let mut decoder =
            FrameDecoder::trusting_with_buffer(self.shared.response_limit_bytes, buffer);
        // The deadline bounds each wait for more bytes, not the whole
        // transfer: an export of a large key log may take longer than one
        // request's deadline while bytes keep arriving.
        let result = loop {
            let chunk =
                match tokio::time::timeout(self.timeout(), recv.read_chunk(4 << 20, true)).await {
                    Err(_) => break Err(missed()),
                    Ok(Ok(Some(chunk))) => chunk,
                    Ok(Ok(None)) => {
                        let reason = match decoder.finish() {
                            Err(e) => e.to_string(),
                            Ok(()) => "bulk stream ended before its last frame".into(),
                        };
                        break Err(ClientError::Protocol(reason));
                    }
                    Ok(Err(e)) => break Err(link::read_error(&self.shared, e)),
                };
            if let Err(e) = decoder.push(&chunk.bytes) {
                break Err(ClientError::Protocol(e.to_string()));
            }
            if let Some(done) = deliver_frames(&mut decoder, &mut on_frame) {
                break done;
            }
        };
        let mut pool = self.shared.bulk_buffers.lock();
        if pool.len() < BULK_BUFFERS_KEPT {
            pool.push(decoder.into_buffer());
        }
        result
    }

    /// Reads up to `max_len` bytes of `partition`'s value log from `offset`
    /// on a stream of its own. Returns the bytes (never past the committed
    /// end) and the committed end.
    pub async fn read_range(
        &self,
        partition: usize,
        offset: u64,
        max_len: usize,
    ) -> Result<(Bytes, u64), ClientError> {
        let mut out = None;
        let body = RequestBody::ReadRange {
            partition: partition as u32,
            offset,
            max_len: max_len as u32,
        };
        let link = partition % self.partitions().max(1);
        self.bulk(link, body, |body, blob| match body {
            ResponseBody::Range { committed_end } => {
                out = Some((blob, committed_end));
                Ok(true)
            }
            other => Err(unexpected(&other)),
        })
        .await?;
        out.ok_or_else(|| ClientError::Protocol("range read without a range".into()))
    }

    /// Streams `partition`'s key log from `from_seq` on: `on_chunk` receives
    /// runs of whole, checksummed key-log frames. Returns the key-log end
    /// the export caught up with.
    pub async fn export_keylog(
        &self,
        partition: usize,
        from_seq: u64,
        mut on_chunk: impl FnMut(Bytes) -> Result<(), ClientError>,
    ) -> Result<u64, ClientError> {
        let mut end_seen = 0;
        let body = RequestBody::ExportKeyLog {
            partition: partition as u32,
            from_seq,
        };
        let link = partition % self.partitions().max(1);
        self.bulk(link, body, |body, blob| match body {
            ResponseBody::ExportChunk { end, done, .. } => {
                end_seen = end;
                on_chunk(blob)?;
                Ok(done)
            }
            other => Err(unexpected(&other)),
        })
        .await?;
        Ok(end_seen)
    }

    /// Closes every connection; waiting requests fail with
    /// [`ClientError::ShutDown`].
    pub fn close(&self) {
        self.shared.closing.store(true, Ordering::Release);
        for link in self.shared.links() {
            link.close();
        }
    }
}

impl Drop for StorageClient {
    fn drop(&mut self) {
        self.close();
    }
}

/// Receive buffers of bulk transfers kept for reuse.
const BULK_BUFFERS_KEPT: usize = 8;

/// How often [`StorageClient::wait_up`] looks at a link that is down.
const UP_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Hands each complete frame to `on_frame`; `Some` once the transfer is
/// over (its last frame delivered, or an error).
fn deliver_frames(
    decoder: &mut FrameDecoder,
    on_frame: &mut impl FnMut(ResponseBody, Bytes) -> Result<bool, ClientError>,
) -> Option<Result<(), ClientError>> {
    loop {
        let frame = match decoder.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return None,
            Err(e) => return Some(Err(ClientError::Protocol(e.to_string()))),
        };
        let outcome = message::decode_response(&frame)
            .map_err(|e| ClientError::Protocol(e.to_string()))
            .and_then(|response| response.body.map_err(ClientError::Storage))
            .and_then(|body| on_frame(body, frame.blob));
        match outcome {
            Ok(false) => {}
            Ok(true) => return Some(Ok(())),
            Err(e) => return Some(Err(e)),
        }
    }
}

/// Fails requests past their deadline, every 20 ms, until the client is
/// dropped.
fn spawn_sweeper(shared: std::sync::Weak<Shared>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if shared.closing.load(Ordering::Acquire) {
                return;
            }
            let now = Instant::now();
            let timeout = Duration::from_millis(shared.config.request_timeout_ms);
            for link in shared.links() {
                if let Some(live) = link.live() {
                    live.expire(now, timeout);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn server_names_come_from_the_address() {
        assert_eq!(host_of("storage:7000"), "storage");
        assert_eq!(host_of("127.0.0.1:7000"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7000"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }
}
