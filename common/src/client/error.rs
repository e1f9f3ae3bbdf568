//! What can go wrong on the client's side of the wire.

use thiserror::Error;

use crate::frame::FrameError;
use crate::message::{DecodeError, WireError};
use crate::record::RecordError;

/// Why a request failed on the client's side of the wire.
#[derive(Debug, Clone, Error)]
pub enum ClientError {
    /// The storage node could not be reached.
    #[error("cannot connect to the storage node at {server}: {reason}")]
    Connect {
        /// The address asked for.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The TLS handshake failed: the storage node refused this node's
    /// certificate, or this node refused the storage node's.
    #[error("the TLS handshake with {server} failed (certificate refused?): {reason}")]
    Refused {
        /// The address asked for.
        server: String,
        /// The TLS alert or reason given.
        reason: String,
    },
    /// The storage node answered with an error, or said so earlier: a
    /// writer fenced while reconnecting fails every later write with the
    /// [`WireError::Fenced`] it was given.
    #[error("{0}")]
    Storage(WireError),
    /// Refused here, before sending, with the error the storage node
    /// would have answered (a partition the node does not have, or a
    /// request too large for one frame, which would cost the whole
    /// connection).
    #[error("{0}")]
    Invalid(WireError),
    /// The connection dropped while the request was in flight; it may or may
    /// not have been carried out.
    #[error("connection to the storage node lost: {reason}")]
    ConnectionLost {
        /// Why.
        reason: String,
    },
    /// The connection of a partition is down and being re-established;
    /// nothing was sent.
    #[error("the connection of partition {partition} to the storage node is down; reconnecting")]
    Unavailable {
        /// The partition.
        partition: usize,
    },
    /// The connection of a partition has as many requests waiting as it
    /// holds ([`ClientConfig::max_in_flight_requests`]) or as many bytes
    /// queued to send ([`ClientConfig::outbox_bytes`]); nothing was sent.
    /// [`StorageClient::wait_for_room`] waits until a request would fit.
    ///
    /// [`ClientConfig::max_in_flight_requests`]: super::ClientConfig::max_in_flight_requests
    /// [`ClientConfig::outbox_bytes`]: super::ClientConfig::outbox_bytes
    /// [`StorageClient::wait_for_room`]: super::StorageClient::wait_for_room
    #[error("the connection of partition {partition} is full ({full}); the request was not sent")]
    Busy {
        /// The partition.
        partition: usize,
        /// Which bound was reached.
        full: &'static str,
    },
    /// No response within the request deadline; the request may or may not
    /// have been carried out.
    #[error("no response from the storage node within {after_ms} ms")]
    DeadlineExceeded {
        /// The deadline.
        after_ms: u64,
    },
    /// The storage node sent something this client cannot understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The bytes from the storage node do not frame.
    #[error("protocol error: {0}")]
    Frame(#[from] FrameError),
    /// A frame from the storage node does not decode as a message.
    #[error("protocol error: {0}")]
    Decode(#[from] DecodeError),
    /// An answer of another kind than the request asks for.
    #[error("protocol error: unexpected response {0}")]
    Unexpected(String),
    /// A key-log chunk from the storage node does not decode.
    #[error("key-log export of partition {partition}: {error}")]
    KeyLog {
        /// The partition whose key log it is.
        partition: usize,
        /// What is wrong with it.
        #[source]
        error: RecordError,
    },
    /// The client is closed.
    #[error("the storage client is closed")]
    ShutDown,
}

impl ClientError {
    /// The wire error this failure carries: the storage node's answer, or
    /// the refusal made here in its words.
    pub fn wire(&self) -> Option<&WireError> {
        match self {
            Self::Storage(wire) | Self::Invalid(wire) => Some(wire),
            _ => None,
        }
    }
}
