//! The SplitKV storage node: the storage engine (this module tree) and the
//! QUIC server in front of it.
//!
//! The engine keeps `P` partitions. Each has an append-only value log
//! written only in aligned blocks with O_DIRECT, two memory-mapped 1 MiB
//! write buffers in front of it, and a mapped key log with one checksummed
//! frame per write. A write is acknowledged once its bytes are in the
//! mappings, so it survives `kill -9`; `sync` durability also msyncs them
//! first, so it survives power loss. See [`StorageEngine`] for the
//! guarantees and [`recovery`] for what happens after a crash.
//!
//! Calls go one way: [`server`] → [`StorageEngine`] → partition → write
//! buffers, key log, [`disk`]. What the partitions share lives below them,
//! in the node state the engine hands down.

pub mod aligned;
mod buffer;
mod checkpoint;
pub mod config;
pub mod crash_journal;
pub mod dir_lock;
mod directory;
pub mod disk;
mod engine;
pub mod error;
pub mod gc;
mod keylog;
pub mod manifest;
mod node_state;
mod partition;
mod recent;
pub mod recovery;
pub mod server;
mod space;
mod uring;

pub use config::{Durability, GcConfig, Limits, StorageConfig, UnknownDurability};
pub use disk::{Disk, DiskFile, FileKind, Mapping, OsDisk};
pub use engine::{StorageEngine, StorageStats};
pub use error::StorageError;
pub use gc::GcReport;
pub use keylog::ScanSummary;
pub use partition::{
    ExportCursor, ExportProgress, MAX_QUEUED_WRITES_PER_PARTITION, MAX_RANGE_BYTES, OwnedOp,
    OwnedWrite, RangeRead, RecordBytes, Submitted, WriteCompletion, WriteOp,
};
pub use splitkv_common::message::{PartitionReport, WireError, WriteAck};
pub use uring::{IoEngineKind, UnknownIoEngine};
