//! What a request's handler gives back: an answer ready to send, or the
//! promise of one through the connection's channel of finished answers.

use bytes::{Bytes, BytesMut};
use splitkv_common::message::{ResponseBody, WireError};

use super::context::encode_response;

/// A response finished on another thread: its head (prefix and meta) and
/// the parts of its blob, each sent as a chunk of its own so that no
/// record is copied.
pub(crate) struct Answer {
    pub(crate) head: Bytes,
    pub(crate) blob: Vec<Bytes>,
}

impl Answer {
    /// A response without a blob.
    pub(crate) fn plain(id: u64, body: Result<ResponseBody, WireError>) -> Self {
        Self {
            head: encode_response(&mut BytesMut::new(), id, body),
            blob: Vec::new(),
        }
    }

    /// Appends the head and the non-empty parts of the blob to `out`, in
    /// order.
    pub(crate) fn append_to(self, out: &mut Vec<Bytes>) {
        out.push(self.head);
        out.extend(self.blob.into_iter().filter(|part| !part.is_empty()));
    }
}

/// Where the answer to a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Into `out`, ready to send.
    Now,
    /// It will come through the connection's channel of finished answers.
    Later,
}
