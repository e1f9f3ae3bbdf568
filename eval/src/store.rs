//! What the evaluator drives: SplitKV's engine in this process, or any
//! Redis-protocol server (SplitKV's compute node, or Redis itself).

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use compute_node::{Engine, EngineConfig};
use parking_lot::Mutex;

/// A key-value store as the evaluator's threads use it. Thread `t` passes
/// its number so that its writes keep to one connection.
pub trait Store: Send + Sync {
    /// Puts and waits for the acknowledgement.
    fn put(&self, thread: usize, key: &[u8], value: &[u8]) -> Result<()>;
    /// Reads a value.
    fn get(&self, thread: usize, key: &[u8]) -> Result<Option<Bytes>>;
    /// Drops the store's state and connects again (the restart phase).
    fn restart(&mut self) -> Result<u64>;
    /// Reads answered from the windows and reads that were not, so far, if
    /// the store reports them.
    fn hits(&self) -> Option<(u64, u64)>;
    /// What this store is, for the report.
    fn describe(&self) -> String;
    /// Live keys in the index and the index's memory, in bytes, if the
    /// store reports them.
    fn index_memory(&self) -> Option<(u64, u64)> {
        None
    }
}

/// SplitKV's engine, in this process.
pub struct EngineStore {
    engine: Option<Engine>,
    config: EngineConfig,
    /// Said of the storage node in the report.
    storage_note: String,
}

impl EngineStore {
    /// Connects an engine (rebuilding its index); `storage_note` describes
    /// the storage node in the report.
    pub fn connect(config: EngineConfig, storage_note: String) -> Result<Self> {
        let engine = Engine::connect(config.clone()).context("connecting the engine")?;
        Ok(Self {
            engine: Some(engine),
            config,
            storage_note,
        })
    }

    fn engine(&self) -> Result<&Engine> {
        self.engine
            .as_ref()
            .ok_or_else(|| anyhow!("the engine is not connected"))
    }
}

impl Store for EngineStore {
    fn put(&self, thread: usize, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.engine()?.put_on(thread, key, value)?)
    }

    fn get(&self, _thread: usize, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.engine()?.get(key)?)
    }

    fn restart(&mut self) -> Result<u64> {
        drop(self.engine.take());
        let engine = Engine::connect(self.config.clone()).context("reconnecting the engine")?;
        let keys = engine.len();
        self.engine = Some(engine);
        Ok(keys)
    }

    fn hits(&self) -> Option<(u64, u64)> {
        let stats = self.engine.as_ref()?.stats();
        Some((stats.hits, stats.misses))
    }

    fn index_memory(&self) -> Option<(u64, u64)> {
        let stats = self.engine.as_ref()?.stats();
        Some((stats.index.live_keys, stats.index.memory_bytes))
    }

    fn describe(&self) -> String {
        format!(
            "SplitKV engine in this process; storage node at {} ({})",
            self.config.storage, self.storage_note
        )
    }
}

/// The `redis://` URL of `address`: `HOST:PORT`, or already a URL (with a
/// password, say), kept as it is.
pub fn redis_url(address: &str) -> String {
    if address.starts_with("redis://") {
        address.to_string()
    } else {
        format!("redis://{address}/")
    }
}

/// A Redis-protocol server, one connection per evaluator thread.
pub struct RespStore {
    address: String,
    connections: Vec<Mutex<redis::Connection>>,
    threads: usize,
}

impl RespStore {
    /// Opens `threads` connections to `address` (`host:port`, or a
    /// `redis://` URL with a password).
    pub fn connect(address: &str, threads: usize) -> Result<Self> {
        let mut store = Self {
            address: address.to_string(),
            connections: Vec::new(),
            threads,
        };
        store.reconnect()?;
        Ok(store)
    }

    fn reconnect(&mut self) -> Result<()> {
        let client =
            redis::Client::open(redis_url(&self.address)).context("parsing the Redis address")?;
        self.connections = (0..self.threads)
            .map(|_| client.get_connection().map(Mutex::new))
            .collect::<Result<_, _>>()
            .with_context(|| format!("connecting to {}", self.address))?;
        Ok(())
    }

    fn with<T>(
        &self,
        thread: usize,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut conn = self.connections[thread % self.connections.len()].lock();
        Ok(f(&mut conn)?)
    }

    fn info_field(info: &str, name: &str) -> Option<u64> {
        info.lines().find_map(|line| {
            line.strip_prefix(name)?
                .strip_prefix(':')?
                .trim()
                .parse()
                .ok()
        })
    }
}

impl Store for RespStore {
    fn put(&self, thread: usize, key: &[u8], value: &[u8]) -> Result<()> {
        self.with(thread, |c| {
            redis::cmd("SET").arg(key).arg(value).query::<()>(c)
        })
    }

    fn get(&self, thread: usize, key: &[u8]) -> Result<Option<Bytes>> {
        let value: Option<Vec<u8>> = self.with(thread, |c| redis::cmd("GET").arg(key).query(c))?;
        Ok(value.map(Bytes::from))
    }

    fn restart(&mut self) -> Result<u64> {
        // A remote server is not ours to restart: the clients reconnect.
        self.connections.clear();
        self.reconnect()?;
        self.with(0, |c| redis::cmd("DBSIZE").query::<u64>(c))
    }

    fn hits(&self) -> Option<(u64, u64)> {
        let info: String = self.with(0, |c| redis::cmd("INFO").query(c)).ok()?;
        Some((
            Self::info_field(&info, "read_hits")?,
            Self::info_field(&info, "read_misses")?,
        ))
    }

    fn describe(&self) -> String {
        format!("Redis-protocol server at {}", self.address)
    }
}
