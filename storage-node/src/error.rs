//! The storage engine's errors.
//!
//! Every refusal a client can be told about is a
//! [`WireError`], wrapped as
//! [`StorageError::Refused`]; the other variants are failures that only make
//! sense on the storage node (and reach a client as
//! [`WireError::Io`]).

use std::io;
use std::path::PathBuf;

use splitkv_common::message::WireError;
use splitkv_common::record::RecordError;
use thiserror::Error;

/// Everything the storage engine can refuse or fail with.
#[derive(Debug, Error)]
pub enum StorageError {
    /// A refusal in the protocol's terms: fenced, too large, empty key, no
    /// such partition, corrupt record, poisoned, read-only, disk full,
    /// shutting down. A client receives exactly this error.
    #[error(transparent)]
    Refused(#[from] WireError),
    /// Another process still held the data directory's lock after the
    /// node waited [`crate::StorageConfig::lock_wait_ms`] for it.
    #[error(
        "data directory {dir} is in use by another process: its LOCK file was still held{} \
         after waiting {waited_ms} ms",
        match (holder_pid, holder_running) {
            (Some(pid), true) => format!(" by pid {pid}, which is running"),
            (Some(pid), false) => format!(" for pid {pid}, which has ended (another process shares its open file)"),
            (None, _) => String::new(),
        }
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
        /// The holder's pid as it recorded it, if it did.
        holder_pid: Option<u32>,
        /// Whether the recorded holder still ran at the end of the wait
        /// (true where it is unknown).
        holder_running: bool,
        /// How long the node waited for the lock, in milliseconds.
        waited_ms: u64,
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
    /// An I/O operation failed (other than for want of space, which is
    /// [`WireError::DiskFull`]).
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the engine was doing.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The data directory's manifest is missing, unreadable or does not
    /// match the configuration.
    #[error("manifest {path}: {reason}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        reason: ManifestError,
    },
}

/// What is wrong with a data directory's manifest or writer epoch file,
/// or with the layout a configuration asks of a new one.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read (or is too large, or not UTF-8).
    #[error("unreadable: {0}")]
    Unreadable(#[source] std::io::Error),
    /// The manifest does not verify.
    #[error(transparent)]
    Invalid(#[from] InvalidManifest),
    /// The data directory has another partition count than the
    /// configuration asks for.
    #[error("the data directory has {found} partitions, the configuration asks for {asked}")]
    PartitionCount {
        /// The directory's count.
        found: usize,
        /// The configuration's.
        asked: usize,
    },
    /// There is no manifest and the directory holds something else.
    #[error(
        "missing, and the directory is not empty (it holds {0:?}); \
         refusing to create a store in it"
    )]
    ForeignDirectory(std::ffi::OsString),
    /// A value-log segment cannot hold the largest record the limits
    /// allow.
    #[error(
        "its value-log segments of {segment_bytes} bytes cannot hold a record of the largest key and value the limits allow ({largest} bytes); lower the value limit"
    )]
    SegmentTooSmall {
        /// The directory's segment size.
        segment_bytes: u64,
        /// The largest record, aligned.
        largest: u64,
    },
    /// The writer epoch file's checksum does not match.
    #[error("writer epoch checksum mismatch")]
    EpochChecksum,
}

/// Why a manifest's text, or a layout, is not one this build opens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidManifest {
    /// The first line is not the manifest header.
    #[error("not a SplitKV manifest")]
    NotAManifest,
    /// A line is not `name = value`.
    #[error("malformed line {0:?}")]
    MalformedLine(String),
    /// A value is not a number.
    #[error("malformed number in {0:?}")]
    MalformedNumber(String),
    /// A field is missing.
    #[error("missing field {0}")]
    MissingField(&'static str),
    /// The format version does not fit.
    #[error("format out of range")]
    FormatOutOfRange,
    /// Another format version than this build reads.
    #[error("format version {found} is not supported by this build (which reads version {reads})")]
    OtherFormat {
        /// The directory's version.
        found: u32,
        /// The version this build reads.
        reads: u32,
    },
    /// The partition count is not in 1..=1024.
    #[error("partition count {0} is not in 1..=1024")]
    PartitionCount(usize),
    /// The buffer size is not a positive multiple of 4096.
    #[error("buffer_bytes {0} is not a positive multiple of 4096")]
    BufferBytes(usize),
    /// The key-log chunk size is not a positive multiple of 4096.
    #[error("keylog_chunk_bytes {0} is not a positive multiple of 4096")]
    KeylogChunkBytes(usize),
    /// The segment size is not a multiple of 4096 of at least the buffer
    /// size.
    #[error(
        "segment_bytes {segment_bytes} is not a multiple of 4096 of at least buffer_bytes ({buffer_bytes})"
    )]
    SegmentBytes {
        /// The segment size.
        segment_bytes: u64,
        /// The buffer size.
        buffer_bytes: usize,
    },
}

impl StorageError {
    /// Wraps an I/O error with context, classifying a full disk as
    /// [`WireError::DiskFull`].
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        let context = context.into();
        if is_out_of_space(&source) {
            WireError::DiskFull { context }.into()
        } else {
            StorageError::Io { context, source }
        }
    }

    /// [`WireError::TooLarge`]: `what` is `len` bytes, over the limit `max`.
    pub fn too_large(what: &str, len: usize, max: usize) -> Self {
        WireError::TooLarge {
            what: what.to_string(),
            len: len as u64,
            max: max as u64,
        }
        .into()
    }

    /// [`WireError::Corrupt`]: the bytes at `offset` of `partition` are not
    /// a record that verifies.
    pub fn corrupt(partition: usize, offset: u64, source: RecordError) -> Self {
        WireError::Corrupt {
            partition: partition as u32,
            offset,
            reason: source.to_string(),
        }
        .into()
    }

    /// [`WireError::ShuttingDown`].
    pub fn shutting_down() -> Self {
        WireError::ShuttingDown.into()
    }

    /// The error a client receives for this one: the refusal itself, or
    /// [`WireError::Io`] with this error's message for a storage-local
    /// failure.
    pub fn into_wire(self) -> WireError {
        match self {
            StorageError::Refused(refusal) => refusal,
            other => WireError::Io {
                message: other.to_string(),
            },
        }
    }
}

/// Whether `e` says the disk is full (ENOSPC).
pub(crate) fn is_out_of_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC)
}

/// Result type of the storage engine.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
