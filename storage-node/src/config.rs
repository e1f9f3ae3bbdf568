//! Configuration of the storage engine.

use std::path::PathBuf;

use crate::uring::IoEngineKind;

/// What an acknowledgement guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Acknowledged writes are in a shared mapping (the page cache): they
    /// survive a crash or `kill -9` of the process, not a power loss.
    #[default]
    Mmap,
    /// Acknowledged writes are on the device: the write buffer and key log
    /// are msynced before the acknowledgement, the value log is fdatasynced
    /// before a buffer is reused, and directories are fsynced when files
    /// are created. Writers of one partition that wait at the same time
    /// share one round of msyncs: threads calling the engine, and the
    /// submitted writes that the partition's writer thread applies in one
    /// round (a connection's pipelined writes).
    Sync,
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::Mmap => "mmap",
            Durability::Sync => "sync",
        })
    }
}

/// A name that is not a [`Durability`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown durability {0:?}: expected mmap or sync")]
pub struct UnknownDurability(pub String);

impl std::str::FromStr for Durability {
    type Err = UnknownDurability;

    fn from_str(s: &str) -> Result<Self, UnknownDurability> {
        match s {
            "mmap" => Ok(Durability::Mmap),
            "sync" => Ok(Durability::Sync),
            other => Err(UnknownDurability(other.to_string())),
        }
    }
}

pub use splitkv_common::limits::Limits;

/// Default value-log segment size: 32 MiB. It holds the largest record of
/// the default limits (16 MiB values), and with 16 partitions the segments
/// open for writes take at most 512 MiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 32 << 20;

/// How to open a data directory.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// The data directory (created if missing).
    pub data_dir: PathBuf,
    /// Number of partitions of a new data directory. An existing directory
    /// keeps the count in its manifest; asking for a different one is an
    /// error.
    pub partitions: usize,
    /// Capacity of each write buffer in bytes (a multiple of 4096), for a
    /// new data directory; an existing one keeps its own.
    pub buffer_bytes: usize,
    /// Key-log space is preallocated and mapped in chunks of this many bytes
    /// (a multiple of 4096), for a new data directory.
    pub keylog_chunk_bytes: usize,
    /// Size of each value-log segment in bytes (a multiple of 4096, at
    /// least `buffer_bytes` and the largest record the limits allow), for a
    /// new data directory: garbage collection frees space a segment at a
    /// time, and each partition has one segment open for writes.
    pub segment_bytes: u64,
    /// What an acknowledgement guarantees.
    pub durability: Durability,
    /// The engine for O_DIRECT writes, when the engine opens its own disk.
    pub io_engine: IoEngineKind,
    /// Key and value limits.
    pub limits: Limits,
    /// Garbage collection.
    pub gc: GcConfig,
    /// Puts are refused (as disk full, without poisoning the node) while
    /// the data directory's file system has less free space than this, so
    /// that garbage collection can always make room; they resume once
    /// there is more. 0: no reserve.
    pub disk_reserve_bytes: u64,
    /// Memory for copies of the latest flushes of the value logs, so that
    /// a point read or a range read of bytes written a moment ago is not a
    /// disk read (the value log is written with O_DIRECT, which leaves
    /// nothing in the page cache). The oldest flushes make room. 0: none.
    pub recent_write_bytes: u64,
    /// How long opening the data directory waits for its lock while
    /// another process holds it, in milliseconds, before it fails with
    /// [`crate::StorageError::Locked`]: a node killed a moment ago lets it
    /// go a little after it has ended.
    pub lock_wait_ms: u64,
}

/// Default disk reserve: 256 MiB. Garbage collection copies one segment at
/// a time (at most 32 MiB of live records by default) into segments
/// preallocated 32 MiB ahead, with key-log chunks of 8 MiB; 256 MiB leaves
/// room for that several times over, and for the puts under way when the
/// free space is read (every 8 MiB of puts).
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 256 << 20;

/// Default memory for copies of recent flushes kept for reads: 256 MiB, a
/// quarter of a second of writes at the disk's O_DIRECT write rate here,
/// and half the compute node's default value cache, whose misses on
/// freshly written data it answers from memory.
pub const DEFAULT_RECENT_WRITE_BYTES: u64 = 256 << 20;

impl StorageConfig {
    /// The defaults (16 partitions, 1 MiB buffers, 8 MiB key-log chunks,
    /// [`DEFAULT_SEGMENT_BYTES`] segments, mmap durability, io_uring,
    /// [`DEFAULT_DISK_RESERVE_BYTES`], [`DEFAULT_RECENT_WRITE_BYTES`],
    /// [`crate::dir_lock::DEFAULT_LOCK_WAIT_MS`]) for
    /// `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            partitions: 16,
            buffer_bytes: 1 << 20,
            keylog_chunk_bytes: 8 << 20,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            durability: Durability::Mmap,
            io_engine: IoEngineKind::Uring,
            limits: Limits::default(),
            gc: GcConfig::default(),
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
            recent_write_bytes: DEFAULT_RECENT_WRITE_BYTES,
            lock_wait_ms: crate::dir_lock::DEFAULT_LOCK_WAIT_MS,
        }
    }
}

/// Garbage-collection settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcConfig {
    /// How often the GC thread looks for a segment to collect, in
    /// milliseconds; 0 turns the thread off (collection then runs only when
    /// asked, [`crate::StorageEngine::collect_garbage`]).
    pub interval_ms: u64,
    /// A segment is collected once at least this share of its record
    /// bytes, in percent, is dead.
    pub min_dead_percent: u8,
    /// The GC copies live records at most this fast, in bytes per second
    /// per node, plus a quarter of the value bytes written meanwhile: the
    /// foreground keeps at least 80 % of the write bandwidth under load,
    /// and a quiet node still reclaims at this rate. 0: no limit.
    pub copy_bytes_per_s: u64,
    /// A partition's key log is checkpointed at a clean close and, if this
    /// is not 0, at the end of a collection pass once this many bytes were
    /// appended since its last checkpoint (and
    /// [`GcConfig::checkpoint_keylog_growth_percent`] allows it): a restart
    /// after a crash then replays at most about the larger of this and the
    /// checkpoint's size per partition on top of its checkpoint. 0: at a
    /// clean close only.
    /// Making a checkpoint holds a copy of the partition's keys while it
    /// folds them (the storage node's directory holds every key already).
    pub checkpoint_every_keylog_bytes: u64,
    /// The GC thread checkpoints a partition only once the key log appended
    /// since its last checkpoint is at least this share, in percent, of that
    /// checkpoint's size, so that rewriting a large checkpoint costs at most
    /// this share of the key log it folds in (as Redis's
    /// `auto-aof-rewrite-percentage`). 0: whenever
    /// [`GcConfig::checkpoint_every_keylog_bytes`] were appended.
    pub checkpoint_keylog_growth_percent: u64,
    /// While the GC thread runs, puts wait for its next pass (at most a
    /// second each) whenever the node's dead bytes exceed this share of
    /// its live bytes, in percent, plus one segment per partition: disk
    /// use then stays within about (1 + this / 100) times the live data
    /// plus the segments being written, however fast clients write. 0: no
    /// bound.
    pub max_dead_percent_of_live: u64,
}

impl Default for GcConfig {
    /// Every 100 ms, segments half dead, 64 MiB/s, a checkpoint every
    /// 64 MiB of key log once it has grown by the checkpoint's own size
    /// (Redis's `auto-aof-rewrite-min-size` and `-percentage`), dead bytes at
    /// most 1.5 times the live ones plus a segment per partition.
    fn default() -> Self {
        Self {
            interval_ms: 100,
            min_dead_percent: 50,
            copy_bytes_per_s: 64 << 20,
            checkpoint_every_keylog_bytes: 64 << 20,
            checkpoint_keylog_growth_percent: 100,
            max_dead_percent_of_live: 150,
        }
    }
}
