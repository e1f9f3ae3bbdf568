//! What the compute node's benchmarks share: a storage node holding
//! generated keys, served on loopback QUIC from a runtime of its own.

use std::sync::Arc;

use splitkv_common::certs;
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;
use storage_node::server::{Server, ServerConfig};
use storage_node::{StorageConfig, StorageEngine};

/// Partitions of the benchmark's storage node (the storage node's default).
pub const REBUILD_PARTITIONS: usize = 16;
/// Value bytes of every key the rebuild benchmark writes.
pub const REBUILD_VALUE_BYTES: usize = 16;
/// Threads writing the keys before the measurements.
const WRITER_THREADS: usize = 2;

/// A storage node served from a runtime of its own on loopback, as a
/// storage-node process on the same host would be.
pub struct BenchNode {
    pub dir: tempfile::TempDir,
    pub port: u16,
    engine: Arc<StorageEngine>,
    runtime: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl BenchNode {
    /// A fresh storage node holding `keys` 8-byte keys, one put each (so
    /// one key-log frame each), spread round robin over the partitions.
    pub fn with_keys(keys: u64) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        certs::generate_cluster(
            &dir.path().join("certs"),
            &certs::DEFAULT_STORAGE_NAMES,
            false,
        )
        .expect("certs");
        let mut config = StorageConfig::new(dir.path().join("data"));
        config.partitions = REBUILD_PARTITIONS;
        let engine = Arc::new(StorageEngine::open(config).expect("open storage engine"));
        std::thread::scope(|scope| {
            for writer in 0..WRITER_THREADS as u64 {
                let engine = &engine;
                scope.spawn(move || {
                    let value = [0x5au8; REBUILD_VALUE_BYTES];
                    let mut i = writer;
                    while i < keys {
                        let partition = (i % REBUILD_PARTITIONS as u64) as usize;
                        engine
                            .put(partition, &i.to_le_bytes(), &value)
                            .expect("put");
                        i += WRITER_THREADS as u64;
                    }
                });
            }
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("storage-node")
            .enable_all()
            .build()
            .expect("runtime");
        let identity =
            NodeIdentity::load(&dir.path().join("certs").join("storage")).expect("identity");
        let server_config = ServerConfig {
            listen: "127.0.0.1:0".parse().expect("address"),
            transport: TransportSettings::default(),
            follow_stall_ms: splitkv_common::message::DEFAULT_FOLLOW_STALL_MS,
        };
        let server = {
            let _guard = runtime.enter();
            Server::bind(Arc::clone(&engine), &identity, &server_config).expect("bind")
        };
        let port = server.local_addr().expect("address").port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = runtime.spawn(server.run(async {
            let _ = stopped.await;
        }));
        Self {
            dir,
            port,
            engine,
            runtime,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn compute_identity(&self) -> Arc<NodeIdentity> {
        Arc::new(
            NodeIdentity::load(&self.dir.path().join("certs").join("compute"))
                .expect("compute identity"),
        )
    }

    pub fn server(&self) -> String {
        format!("localhost:{}", self.port)
    }
}

impl Drop for BenchNode {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = self.runtime.block_on(task);
        }
        let _ = self.engine.close();
    }
}

impl BenchNode {
    /// An engine configuration for a compute node of this cluster: a
    /// writer, or a reader.
    #[allow(
        dead_code,
        reason = "the replica benchmark uses it, the index benchmark does not"
    )]
    pub fn engine_config(&self, writer: bool) -> compute_node::EngineConfig {
        let mut config = compute_node::EngineConfig::new(self.server(), self.compute_identity());
        config.writer = writer;
        config
    }
}
