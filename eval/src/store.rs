//! What the evaluator drives: SplitKV's engine in this process, or any
//! Redis-protocol server (SplitKV's compute node, or Redis itself).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use compute_node::{Engine, EngineConfig};
use parking_lot::Mutex;

use crate::report::{CatchUpReport, ReaderLag};

/// A key-value store as the evaluator's threads use it. Thread `t` passes
/// its number so that its writes keep to one connection.
pub trait Store: Send + Sync {
    /// Puts and waits for the acknowledgement; with `ttl_ms` other than 0
    /// the key expires that many milliseconds after the put.
    fn put(&self, thread: usize, key: &[u8], value: &[u8], ttl_ms: u64) -> Result<()>;
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
    /// Before the read phase `before`: waits until whatever answers reads
    /// has applied every acknowledged write, and says how that went; none
    /// for a store whose reads see its writes at once.
    fn catch_up(&self, _before: &str) -> Result<Option<CatchUpReport>> {
        Ok(None)
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
    fn put(&self, thread: usize, key: &[u8], value: &[u8], ttl_ms: u64) -> Result<()> {
        let expire_at_ms = match ttl_ms {
            0 => 0,
            ttl_ms => compute_node::expiry::now_ms() + ttl_ms,
        };
        Ok(self
            .engine()?
            .put_expiring_on(thread, key, value, expire_at_ms)?)
    }

    fn get(&self, _thread: usize, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.engine()?.get(key)?)
    }

    fn restart(&mut self) -> Result<u64> {
        let started = Instant::now();
        drop(self.engine.take());
        let dropped = started.elapsed();
        let engine = Engine::connect(self.config.clone()).context("reconnecting the engine")?;
        let connected = started.elapsed();
        let keys = engine.len();
        eprintln!(
            "restart: engine dropped in {} ms, the new one connected and rebuilt in {} ms (rebuild {} ms)",
            dropped.as_millis(),
            (connected - dropped).as_millis(),
            engine.stats().rebuild_ms
        );
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

/// Longest wait for a connection to a Redis-protocol server and its setup
/// (a server that accepts but does not answer fails the run, not hangs it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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
            .map(|_| {
                client
                    .get_connection_with_timeout(CONNECT_TIMEOUT)
                    .map(Mutex::new)
            })
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

    /// The text of `INFO section`.
    pub fn info(&self, section: &str) -> Result<String> {
        self.with(0, |c| redis::cmd("INFO").arg(section).query(c))
    }

    fn info_field(info: &str, name: &str) -> Option<u64> {
        info_text(info, name)?.parse().ok()
    }

    /// The server's address as given.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The server's role and SplitKV's replication fields, from `INFO
    /// replication`, answered within `timeout`.
    pub fn replication(&self, timeout: Duration) -> Result<Replication> {
        let limit = timeout.max(Duration::from_millis(1));
        let info = self.with(0, |c| {
            c.set_read_timeout(Some(limit))?;
            c.set_write_timeout(Some(limit))?;
            let info = redis::cmd("INFO").arg("replication").query::<String>(c);
            // The evaluator's other requests wait as long as they take.
            // (After a timeout the connection is out of step, but the
            // caller gives up on the run.)
            c.set_read_timeout(None)?;
            c.set_write_timeout(None)?;
            Ok(info)
        })?;
        let info = match info {
            Ok(info) => info,
            Err(e) if e.is_timeout() => {
                anyhow::bail!(
                    "{} did not answer INFO replication within {limit:?}",
                    self.address
                )
            }
            Err(e) => {
                return Err(e).with_context(|| format!("INFO replication on {}", self.address));
            }
        };
        Replication::parse(&info).with_context(|| format!("INFO replication of {}", self.address))
    }
}

/// The text of field `name` in an INFO reply.
fn info_text<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| Some(line.strip_prefix(name)?.strip_prefix(':')?.trim()))
}

/// What a SplitKV compute node's `INFO replication` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// True for `role:master` (the writer), false for `role:slave`.
    pub writer: bool,
    /// Its `splitkv_applied_seq` and, for a reader, its lag.
    pub lag: ReaderLag,
}

impl Replication {
    /// Parses an `INFO replication` reply; an error if it has no role or no
    /// `splitkv_applied_seq` (the server is not a SplitKV compute node).
    pub fn parse(info: &str) -> Result<Self> {
        let writer = match info_text(info, "role") {
            Some("master") => true,
            Some("slave") => false,
            Some(other) => anyhow::bail!("unknown role {other:?}"),
            None => anyhow::bail!("no role field"),
        };
        let applied_seq = info_text(info, "splitkv_applied_seq")
            .context("no splitkv_applied_seq field (not a SplitKV compute node?)")?
            .parse()
            .context("splitkv_applied_seq is not a number")?;
        // A reader that could not ask the storage node says "unknown".
        let number = |name| info_text(info, name).and_then(|v| v.parse().ok());
        Ok(Self {
            writer,
            lag: ReaderLag {
                applied_seq,
                lag_entries: number("splitkv_lag_entries"),
                lag_ms: number("splitkv_lag_ms"),
            },
        })
    }
}

impl Store for RespStore {
    fn put(&self, thread: usize, key: &[u8], value: &[u8], ttl_ms: u64) -> Result<()> {
        self.with(thread, |c| {
            let mut set = redis::cmd("SET");
            set.arg(key).arg(value);
            if ttl_ms > 0 {
                set.arg("PX").arg(ttl_ms);
            }
            set.query::<()>(c)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readers_info_replication_gives_its_role_seq_and_lag() {
        let info = "# Replication\r\nrole:slave\r\nmaster_host:storage\r\n\
                    splitkv_applied_seq:1234\r\nsplitkv_lag_entries:7\r\nsplitkv_lag_ms:3\r\n";
        let parsed = Replication::parse(info).expect("parse");
        assert!(!parsed.writer);
        assert_eq!(
            parsed.lag,
            ReaderLag {
                applied_seq: 1234,
                lag_entries: Some(7),
                lag_ms: Some(3),
            }
        );
    }

    #[test]
    fn a_writers_info_replication_has_no_lag_and_unknown_lag_is_none() {
        let writer = Replication::parse("role:master\r\nsplitkv_applied_seq:9\r\n").expect("parse");
        assert!(writer.writer);
        assert_eq!(writer.lag.applied_seq, 9);
        assert_eq!(writer.lag.lag_entries, None);
        let unknown = Replication::parse(
            "role:slave\r\nsplitkv_applied_seq:9\r\nsplitkv_lag_entries:unknown\r\n",
        )
        .expect("parse");
        assert_eq!(unknown.lag.lag_entries, None);
    }

    #[test]
    fn a_server_without_splitkv_fields_is_an_error() {
        let redis = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n";
        let error = Replication::parse(redis).expect_err("no splitkv_applied_seq");
        assert!(
            format!("{error:#}").contains("splitkv_applied_seq"),
            "{error:#}"
        );
        assert!(Replication::parse("").is_err());
    }
}
