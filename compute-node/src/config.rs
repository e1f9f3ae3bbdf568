//! Configuration of a compute node's engine.

use std::sync::Arc;

use splitkv_common::client;
use splitkv_common::limits::Limits;
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;

/// Default of [`EngineConfig::client_partitions`]. Measured with 16
/// clients SETting 4 KiB values (`redis-benchmark -c 16 -r 100000`)
/// through a 16-partition storage node, five runs of each setting
/// alternating, on 2 cores: over 4 partitions 56 900 to 70 400 SET/s
/// pipelined 16 deep (mean 65 400) and 16 600 to 20 700 one at a time
/// (mean 19 100); over 2, 46 400 to 65 200 (mean 56 500) and 16 000 to
/// 20 700 (mean 18 500); over every partition 63 400 pipelined and 14 600
/// to 17 500 one at a time, each partition's batches being smaller. An
/// earlier measure of CPU per SET of both nodes: over 2 partitions 67-80
/// us one at a time and 22-25 us pipelined; over every partition 112-115
/// and 26-34 us.
pub const DEFAULT_CLIENT_PARTITIONS: usize = 4;

/// The hot-value cache's default bound: 512 MiB, about 120,000 values of
/// 4 KiB. Large enough to hold the hot part of a working set that a small
/// Redis would hold in memory, small enough beside the index (about 110
/// bytes per key) on a machine with a few GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 512 << 20;

/// How to reach the storage node, and the engine's limits and sizes.
#[derive(Clone)]
pub struct EngineConfig {
    /// `host:port` of the storage node.
    pub storage: String,
    /// This node's certificate, key and the cluster CA.
    pub identity: Arc<NodeIdentity>,
    /// A writer (the default) begins a new writer epoch when it connects,
    /// fencing any older writer. A reader only reads: its writes fail.
    pub writer: bool,
    /// Longest key and value accepted (keys are at least 1 byte); lowered
    /// to the storage node's limits when they are lower.
    pub limits: Limits,
    /// Size of each of a partition's two read windows.
    pub window_bytes: u64,
    /// Bound of the hot-value cache (keys, values and a per-entry
    /// overhead); 0 turns it off.
    pub cache_bytes: u64,
    /// Deadline of each request to the storage node.
    pub request_timeout_ms: u64,
    /// Deadline of each connection attempt.
    pub connect_timeout_ms: u64,
    /// How long a write waits for a connection that is down (the storage
    /// node restarting) before it fails.
    pub reconnect_wait_ms: u64,
    /// Requests each connection to the storage node holds waiting for
    /// answers; a caller past it waits for room.
    pub max_in_flight_requests: usize,
    /// Bytes of requests each connection holds queued to send; a caller
    /// past it waits for room.
    pub outbox_bytes: usize,
    /// Worker threads of the engine's async runtime; `None`, one per CPU
    /// (tokio's default), as the storage node.
    pub worker_threads: Option<usize>,
    /// Partitions [`crate::Engine::assign_partition`] spreads its callers
    /// (the RESP server's clients) over, round robin: each caller's writes
    /// go through its one partition, and the plain SETs of the callers that
    /// share a partition share its requests. 0, or more than the storage
    /// node has, means every partition.
    pub client_partitions: usize,
    /// QUIC transport settings.
    pub transport: TransportSettings,
}

impl EngineConfig {
    /// Defaults (1 KiB keys, 16 MiB values, 10 MiB windows, a 512 MiB value
    /// cache, 5 s deadlines)
    /// for the storage node at `storage`.
    pub fn new(storage: impl Into<String>, identity: Arc<NodeIdentity>) -> Self {
        Self {
            storage: storage.into(),
            identity,
            writer: true,
            limits: Limits::default(),
            window_bytes: 10 << 20,
            cache_bytes: DEFAULT_CACHE_BYTES,
            request_timeout_ms: 5_000,
            connect_timeout_ms: 5_000,
            reconnect_wait_ms: 10_000,
            max_in_flight_requests: client::DEFAULT_MAX_IN_FLIGHT_REQUESTS,
            outbox_bytes: client::DEFAULT_OUTBOX_BYTES,
            worker_threads: None,
            client_partitions: DEFAULT_CLIENT_PARTITIONS,
            transport: TransportSettings::default(),
        }
    }
}
