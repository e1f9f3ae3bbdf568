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

pub mod aligned;
mod buffer;
pub mod config;
pub mod crash_journal;
pub mod disk;
mod engine;
pub mod error;
mod flush;
mod keylog;
pub mod manifest;
mod partition;
mod read;
pub mod recovery;
pub mod server;
mod uring;

pub use config::{Durability, EngineConfig, Limits};
pub use disk::{Disk, DiskFile, FileKind, Mapping, OsDisk};
pub use engine::{EngineStats, PartitionStats, StorageEngine};
pub use error::StorageError;
pub use keylog::ScanSummary;
pub use partition::WriteOp;
pub use read::{ExportProgress, MAX_RANGE_BYTES, RangeRead, RecordBytes};
pub use splitkv_common::message::WriteAck;
pub use uring::IoEngineKind;
