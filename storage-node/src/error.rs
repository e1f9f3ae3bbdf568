//! The storage engine's errors.

use std::io;
use std::path::PathBuf;

use splitkv_common::record::RecordError;
use thiserror::Error;

/// Everything the storage engine can refuse or fail with.
#[derive(Debug, Error)]
pub enum StorageError {
    /// Another process holds the data directory's lock.
    #[error("data directory {dir} is in use by another process (its LOCK file is held)")]
    Locked {
        /// The data directory.
        dir: PathBuf,
    },
    /// The data directory's file system does not support O_DIRECT, which the
    /// value log needs; there is no fallback to buffered writes.
    #[error(
        "data directory {dir}: the file system refuses O_DIRECT ({source}); \
         put the data directory on a file system with direct I/O such as ext4 or xfs"
    )]
    DirectIoUnsupported {
        /// The data directory.
        dir: PathBuf,
        /// What the kernel answered.
        source: io::Error,
    },
    /// The disk has no space left for this write or for the space it
    /// preallocates.
    #[error("disk full while {context}")]
    DiskFull {
        /// What the engine was doing.
        context: String,
    },
    /// An I/O operation failed.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the engine was doing.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A flush or sync failed earlier; the engine refuses writes until it is
    /// reopened (reads go on). Nothing acknowledged before the failure is
    /// lost: reopening recovers it.
    #[error("storage engine refuses writes after an earlier failure: {reason}")]
    Poisoned {
        /// The failure that poisoned the engine.
        reason: String,
    },
    /// The engine was opened read-only (for example because recovery could
    /// not write to a full disk); reads work, writes are refused.
    #[error("storage engine is read-only: {reason}")]
    ReadOnly {
        /// Why the engine is read-only.
        reason: String,
    },
    /// A newer writer has taken over; this writer's writes are refused.
    #[error("fenced: writer epoch {yours} was superseded by epoch {current}")]
    Fenced {
        /// The epoch the refused writer holds.
        yours: u64,
        /// The current writer epoch.
        current: u64,
    },
    /// A key, value, batch or range is outside the configured limits.
    #[error("{what} is {len} bytes; the limit is {max}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Keys must be at least one byte long.
    #[error("empty key")]
    EmptyKey,
    /// The partition number does not exist.
    #[error("partition {partition} does not exist (the store has {count})")]
    NoSuchPartition {
        /// The requested partition.
        partition: usize,
        /// How many partitions there are.
        count: usize,
    },
    /// The record at a location is torn, corrupt or not a record; its bytes
    /// are not served.
    #[error("record at partition {partition} offset {offset} is unreadable: {source}")]
    Corrupt {
        /// Partition of the record.
        partition: usize,
        /// Value-log offset of the record.
        offset: u64,
        /// What is wrong with it.
        source: RecordError,
    },
    /// The data directory's manifest is missing, unreadable or does not
    /// match the configuration.
    #[error("manifest {path}: {reason}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The engine is shutting down.
    #[error("storage engine is shutting down")]
    ShuttingDown,
    /// Only from [`StorageEngine::try_write`](crate::StorageEngine::try_write):
    /// the write would have to wait; nothing was committed.
    #[error("the write would block")]
    WouldBlock,
}

impl StorageError {
    /// Wraps an I/O error with context, classifying a full disk as
    /// [`StorageError::DiskFull`].
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        let context = context.into();
        if source.raw_os_error() == Some(libc::ENOSPC) {
            StorageError::DiskFull { context }
        } else {
            StorageError::Io { context, source }
        }
    }
}

/// Result type of the storage engine.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
