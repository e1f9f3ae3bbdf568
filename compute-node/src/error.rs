//! The engine's errors.

use std::sync::Arc;

use splitkv_common::client::ClientError;
use splitkv_common::message::WireError;
use thiserror::Error;

/// Why an engine operation failed. Cheap to clone: a request that fails as
/// a whole (a batch of writes, a read of several records) fails each of
/// its operations with the same error.
#[derive(Debug, Clone, Error)]
pub enum EngineError {
    /// A key or value breaks the configured limits (an empty key, or one
    /// over the limit); refused without asking the storage node, in the
    /// words it would use.
    #[error(transparent)]
    Invalid(WireError),
    /// The request to the storage node failed (see [`ClientError`]; after
    /// a lost connection or a missed deadline a write may or may not have
    /// happened).
    #[error(transparent)]
    Storage(#[from] ClientError),
    /// A record read back does not verify or belongs to another key; it is
    /// not served. `wire` is a [`WireError::Corrupt`] naming the place.
    #[error("key {key:?}: {wire}")]
    Corrupt {
        /// The key asked for (lossy UTF-8).
        key: String,
        /// Where the record is and what is wrong with it.
        wire: WireError,
    },
    /// The storage node answered a request of `asked` operations (writes
    /// or record reads) with `answered` outcomes; none of them is taken (a
    /// write may or may not have happened).
    #[error("the storage node answered {answered} outcomes to a request of {asked}")]
    AnswerCount {
        /// Operations the request carried.
        asked: usize,
        /// Outcomes the answer carried.
        answered: usize,
    },
    /// A write to a reader (a read-only compute node that follows the
    /// writer); nothing was sent.
    #[error("this compute node is a read-only reader; write through the writer")]
    ReadOnly,
    /// The engine could not start its runtime.
    #[error("cannot start the engine's runtime: {0}")]
    Runtime(Arc<std::io::Error>),
    /// A task of the engine's (a key-log pull) ended without its result:
    /// it panicked, or the runtime is shutting down.
    #[error("an engine task failed: {0}")]
    Task(Arc<tokio::task::JoinError>),
}

impl From<tokio::task::JoinError> for EngineError {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::Task(Arc::new(e))
    }
}

impl From<std::io::Error> for EngineError {
    fn from(e: std::io::Error) -> Self {
        Self::Runtime(Arc::new(e))
    }
}

impl EngineError {
    /// The wire error this failure carries, whoever raised it: the
    /// engine's own limit checks, the storage client's refusals before
    /// sending, or the storage node's answer.
    pub fn wire(&self) -> Option<&WireError> {
        match self {
            Self::Invalid(wire) | Self::Corrupt { wire, .. } => Some(wire),
            Self::Storage(client) => client.wire(),
            _ => None,
        }
    }
}

/// Result of engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
