//! The engine's errors.

use splitkv_common::client::ClientError;
use splitkv_common::message::WireError;
use thiserror::Error;

/// Why an engine operation failed.
#[derive(Debug, Error)]
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
    /// A write to a reader (a read-only compute node that follows the
    /// writer); nothing was sent.
    #[error("this compute node is a read-only reader; write through the writer")]
    ReadOnly,
    /// The engine could not start its runtime.
    #[error("cannot start the engine's runtime: {0}")]
    Runtime(std::io::Error),
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

impl EngineError {
    /// This failure, for each operation of a request that failed as a
    /// whole (a batch of puts, a read of several records): the same error
    /// (a runtime failure, which no request meets, as a protocol error).
    pub(crate) fn for_each_op(&self) -> Self {
        match self {
            Self::Invalid(wire) => Self::Invalid(wire.clone()),
            Self::Storage(client) => Self::Storage(client.clone()),
            Self::Corrupt { key, wire } => Self::Corrupt {
                key: key.clone(),
                wire: wire.clone(),
            },
            Self::ReadOnly => Self::ReadOnly,
            Self::Runtime(e) => Self::Storage(ClientError::Protocol(e.to_string())),
        }
    }
}

/// Result of engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
