//! The engine's errors.

use splitkv_common::client::ClientError;
use thiserror::Error;

/// Why an engine operation failed.
#[derive(Debug, Error)]
pub enum EngineError {
    /// Keys must be at least one byte.
    #[error("empty key")]
    EmptyKey,
    /// A key or value over the configured limit.
    #[error("{what} is {len} bytes; the limit is {max}")]
    TooLarge {
        /// Key or value.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The request to the storage node failed (see [`ClientError`]; after
    /// a lost connection or a missed deadline a write may or may not have
    /// happened).
    #[error(transparent)]
    Storage(#[from] ClientError),
    /// A record read back does not verify or belongs to another key; it is
    /// not served.
    #[error(
        "record of key {key:?} at partition {partition} offset {offset} does not verify: {reason}"
    )]
    Corrupt {
        /// The key asked for (lossy UTF-8).
        key: String,
        /// Partition.
        partition: usize,
        /// Offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The engine could not start its runtime.
    #[error("cannot start the engine's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Result of engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
