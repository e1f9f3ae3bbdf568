//! A request in flight: wait for it asynchronously or from a plain thread.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::ClientError;
use crate::message::{ResponseBody, WireError};

/// What a response carries: its body and its blob.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) body: ResponseBody,
    pub(crate) blob: Bytes,
}

/// The outcome delivered to a waiting request.
pub(crate) type Outcome = Result<Result<Reply, WireError>, ClientError>;

/// Turns a reply into the caller's type.
pub(crate) type Convert<T> = fn(Reply) -> Result<T, ClientError>;

/// A request that has been sent. Every call ends: with the response, with
/// the storage node's error, with [`ClientError::ConnectionLost`] when the
/// connection drops, or with [`ClientError::DeadlineExceeded`].
#[must_use = "a call does nothing unless waited for"]
pub struct Call<T> {
    rx: oneshot::Receiver<Outcome>,
    convert: Convert<T>,
}

impl<T> Call<T> {
    pub(crate) fn new(rx: oneshot::Receiver<Outcome>, convert: Convert<T>) -> Self {
        Self { rx, convert }
    }

    fn finish(
        outcome: Result<Outcome, oneshot::error::RecvError>,
        convert: Convert<T>,
    ) -> Result<T, ClientError> {
        match outcome {
            Ok(Ok(Ok(reply))) => convert(reply),
            Ok(Ok(Err(wire))) => Err(ClientError::Storage(wire)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ClientError::ConnectionLost {
                reason: "the connection's tasks stopped".into(),
            }),
        }
    }

    /// Waits for the outcome.
    pub async fn wait(self) -> Result<T, ClientError> {
        Self::finish(self.rx.await, self.convert)
    }

    /// Waits for the outcome, blocking the thread. Must not be called from
    /// inside an async task.
    pub fn wait_blocking(self) -> Result<T, ClientError> {
        Self::finish(self.rx.blocking_recv(), self.convert)
    }
}

pub(crate) fn unexpected(body: &ResponseBody) -> ClientError {
    ClientError::Unexpected(format!("{body:?}"))
}
