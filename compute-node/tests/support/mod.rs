//! A real storage node for the compute node's tests: the storage-node
//! library served over QUIC on loopback from a runtime of its own, with
//! certificates made for the test. It can be stopped and started again on
//! the same port and data directory.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use compute_node::{Engine, EngineConfig};
use splitkv_common::certs;
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;
use storage_node::server::{Server, ServerConfig};
use storage_node::{Disk, StorageConfig, StorageEngine};
use tokio::sync::oneshot;

/// Key-log chunk size of a storage node started with small segments.
pub const SMALL_KEYLOG_CHUNK_BYTES: usize = 64 << 10;

/// A storage node and the files it uses.
pub struct StorageNode {
    pub dir: tempfile::TempDir,
    pub addr: SocketAddr,
    pub partitions: usize,
    /// The storage node's value limit.
    max_value_bytes: usize,
    /// Value-log segment size of its data directory.
    segment_bytes: u64,
    /// The disk it opens its data directory through: the real one, or a
    /// test's wrapper of it.
    disk: Option<Arc<dyn Disk>>,
    runtime: tokio::runtime::Runtime,
    running: Option<Running>,
}

struct Running {
    engine: Arc<StorageEngine>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl StorageNode {
    /// Starts a storage node with `partitions` partitions on a free port.
    #[allow(dead_code, reason = "gc.rs starts its nodes with small segments")]
    pub fn start(partitions: usize) -> Self {
        Self::start_with_value_limit(partitions, splitkv_common::limits::DEFAULT_MAX_VALUE_BYTES)
    }

    /// Like [`StorageNode::start`], accepting values of at most
    /// `max_value_bytes`.
    #[allow(dead_code, reason = "gc.rs starts its nodes with small segments")]
    pub fn start_with_value_limit(partitions: usize, max_value_bytes: usize) -> Self {
        Self::start_with_segments(
            partitions,
            max_value_bytes,
            storage_node::config::DEFAULT_SEGMENT_BYTES,
        )
    }

    /// Like [`StorageNode::start_with_value_limit`], with value-log segments
    /// of `segment_bytes` and no garbage collection but what
    /// [`StorageNode::collect_garbage`] asks for; with segments of other
    /// than the default size, key-log chunks are small too
    /// ([`SMALL_KEYLOG_CHUNK_BYTES`]), so that a few clean stops delete
    /// some.
    pub fn start_with_segments(
        partitions: usize,
        max_value_bytes: usize,
        segment_bytes: u64,
    ) -> Self {
        Self::start_with(partitions, max_value_bytes, segment_bytes, None)
    }

    /// Like [`StorageNode::start`], its data directory opened through
    /// `disk`.
    #[allow(dead_code, reason = "used by coalesced_reads.rs only")]
    pub fn start_on_disk(partitions: usize, disk: Arc<dyn Disk>) -> Self {
        Self::start_with(
            partitions,
            splitkv_common::limits::DEFAULT_MAX_VALUE_BYTES,
            storage_node::config::DEFAULT_SEGMENT_BYTES,
            Some(disk),
        )
    }

    fn start_with(
        partitions: usize,
        max_value_bytes: usize,
        segment_bytes: u64,
        disk: Option<Arc<dyn Disk>>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        certs::generate_cluster(
            &dir.path().join("certs"),
            &certs::DEFAULT_STORAGE_NAMES,
            false,
        )
        .expect("certs");
        let mut node = Self {
            dir,
            addr: "127.0.0.1:0".parse().expect("address"),
            partitions,
            max_value_bytes,
            segment_bytes,
            disk,
            runtime: node_runtime(),
            running: None,
        };
        node.resume();
        node
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The compute node's certificate directory.
    pub fn compute_certs(&self) -> PathBuf {
        self.dir.path().join("certs").join("compute")
    }

    /// Starts serving again (on the same port after the first start).
    pub fn resume(&mut self) {
        let mut config = StorageConfig::new(self.data_dir());
        config.partitions = self.partitions;
        config.buffer_bytes = 256 << 10;
        config.limits.max_value_bytes = self.max_value_bytes;
        config.segment_bytes = self.segment_bytes;
        if self.segment_bytes != storage_node::config::DEFAULT_SEGMENT_BYTES {
            config.gc.interval_ms = 0;
            config.gc.copy_bytes_per_s = 0;
            config.keylog_chunk_bytes = SMALL_KEYLOG_CHUNK_BYTES;
        }
        let engine = Arc::new(
            match &self.disk {
                Some(disk) => StorageEngine::open_with_disk(config, Arc::clone(disk)),
                None => StorageEngine::open(config),
            }
            .expect("open storage engine"),
        );
        let identity =
            NodeIdentity::load(&self.dir.path().join("certs").join("storage")).expect("identity");
        let config = ServerConfig {
            listen: self.addr,
            transport: TransportSettings::default(),
            follow_stall_ms: splitkv_common::message::DEFAULT_FOLLOW_STALL_MS,
        };
        let server = {
            let _guard = self.runtime.enter();
            Server::bind(Arc::clone(&engine), &identity, &config).expect("bind")
        };
        self.addr = server.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel();
        let task = self.runtime.spawn(server.run(async {
            let _ = stopped.await;
        }));
        self.running = Some(Running { engine, stop, task });
    }

    /// Stops serving and closes the engine (flushing it), as a clean stop.
    pub fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.stop.send(());
            let _ = self.runtime.block_on(running.task);
            running.engine.close().expect("close storage engine");
        }
    }

    /// Stops the node the way a killed process stops: its runtime goes
    /// away with every task and socket it holds, and its connections with
    /// no goodbye to the compute node (which learns of it from missed
    /// deadlines, and from the stateless reset the restarted node answers
    /// its next packet with). The storage engine's files stay as they are.
    #[allow(dead_code, reason = "used by engine.rs, not by resp.rs")]
    pub fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            let runtime = std::mem::replace(&mut self.runtime, node_runtime());
            runtime.shutdown_timeout(std::time::Duration::from_secs(10));
            running.task.abort();
            drop(running.stop);
            drop(running.engine);
        }
    }

    /// Deletes and expire entries the storage node has logged, over all
    /// partitions (0 while it is stopped).
    #[allow(dead_code, reason = "used by expiry.rs only")]
    pub fn deletes_logged(&self) -> u64 {
        self.running.as_ref().map_or(0, |running| {
            running
                .engine
                .stats()
                .partitions
                .iter()
                .map(|p| p.deletes)
                .sum()
        })
    }

    /// The storage node's stats.
    #[allow(dead_code, reason = "used by gc.rs only")]
    pub fn storage_stats(&self) -> storage_node::StorageStats {
        self.running.as_ref().expect("running").engine.stats()
    }

    /// Runs garbage collection on the storage node now.
    #[allow(dead_code, reason = "used by gc.rs only")]
    pub fn collect_garbage(&self, min_dead_percent: u8) -> storage_node::GcReport {
        self.running
            .as_ref()
            .expect("running")
            .engine
            .collect_garbage(min_dead_percent)
            .expect("garbage collection")
    }

    /// An engine configuration for a compute node of this cluster.
    pub fn engine_config(&self) -> EngineConfig {
        let identity =
            Arc::new(NodeIdentity::load(&self.compute_certs()).expect("compute identity"));
        let mut config = EngineConfig::new(format!("localhost:{}", self.addr.port()), identity);
        config.request_timeout_ms = 3_000;
        config
    }

    /// Connects a compute-node engine (a writer: it fences older writers).
    pub fn connect(&self) -> Engine {
        Engine::connect(self.engine_config()).expect("connect engine")
    }

    /// Connects a read-only engine: what a freshly started compute node
    /// would see, without fencing the running writer.
    #[allow(dead_code, reason = "used by engine.rs, not by resp.rs")]
    pub fn connect_reader_view(&self) -> Engine {
        let mut config = self.engine_config();
        config.writer = false;
        Engine::connect(config).expect("connect reader")
    }
}

/// The runtime a storage node serves from.
fn node_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

impl Drop for StorageNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Deterministic value bytes for (key, version) of `len` bytes.
#[allow(dead_code, reason = "most tests use it, coalesced_sets.rs does not")]
pub fn value_for(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut state = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Serves the Redis protocol from `engine` (connected to `storage`) on a
/// free loopback port, asking for `requirepass` if given, until the
/// returned sender is dropped. Returns the address and that sender.
#[allow(dead_code, reason = "the RESP tests use it, the engine tests do not")]
pub fn serve_resp(
    engine: &Arc<Engine>,
    storage: &StorageNode,
    requirepass: Option<&str>,
) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = engine
        .handle()
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("listen");
    let addr = listener.local_addr().expect("address");
    let (stop, stopped) = oneshot::channel::<()>();
    let config = compute_node::resp::RespConfig {
        requirepass: requirepass.map(str::to_string),
        storage: storage.addr.to_string(),
    };
    engine.handle().spawn(compute_node::resp::serve(
        Arc::clone(engine),
        listener,
        config,
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}
