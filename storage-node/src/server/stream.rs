//! What every stream of a connection shares: reading one whole frame, and
//! closing the connection, with the reason, when its peer breaks the
//! protocol.

use splitkv_common::frame::{FrameDecoder, FrameError, RawFrame};
use splitkv_common::message::{self, DecodeError};

/// Why the node closes a connection: the peer broke the protocol, or the
/// task serving it failed. Its text is the reason the peer is told.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CloseReason {
    /// A frame was oversized, malformed or cut short.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A frame's message did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The control stream's first frame did not come in time.
    #[error("no Hello within 10 s")]
    HelloTimeout,
    /// The control stream began with another request than `Hello`.
    #[error("the control stream must begin with Hello")]
    HelloRequired,
    /// The answer to `Hello` could not be sent.
    #[error(transparent)]
    Send(#[from] quinn::WriteError),
    /// A blocking task serving the connection panicked.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    /// A range read's blocking thread panicked.
    #[error("a range read failed")]
    RangeReadFailed,
    /// A key-log export's blocking thread panicked.
    #[error("a key-log export failed")]
    ExportFailed,
    /// A following reader reported taking more than it was sent.
    #[error("a reader reported taking {taken} bytes of {sent} sent")]
    TakenBeyondSent {
        /// What it reported taking.
        taken: u64,
        /// What it was sent.
        sent: u64,
    },
    /// A following reader sent something other than a report of what it
    /// took.
    #[error("only reports of what was taken travel on a followed stream")]
    NotAReport,
}

/// Closes `conn` because of `reason`, logging it. Called while the
/// offending stream is still open: dropping a stream first would queue
/// frames that congestion control can hold in front of the close, so the
/// peer would never learn the reason.
pub(crate) fn close_for(conn: &quinn::Connection, reason: &CloseReason) {
    tracing::warn!(peer = %conn.remote_address(), "closing the connection: {reason}");
    conn.close(
        message::close_code::PROTOCOL_VIOLATION.into(),
        reason.to_string().as_bytes(),
    );
}

/// Reads until one whole frame has arrived; `None` if the stream ended
/// cleanly (or was reset) first.
pub(crate) async fn next_frame(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
) -> Result<Option<RawFrame>, FrameError> {
    loop {
        if let Some(frame) = decoder.next_frame()? {
            return Ok(Some(frame));
        }
        match recv.read_chunk(1 << 20, true).await {
            Ok(Some(chunk)) => decoder.push(&chunk.bytes)?,
            Ok(None) => {
                decoder.finish()?;
                return Ok(None);
            }
            Err(_) => return Ok(None),
        }
    }
}
