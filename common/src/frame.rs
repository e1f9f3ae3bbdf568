//! Framing of messages on a byte stream, free of I/O: bytes go in as they
//! arrive, whole frames come out.
//!
//! A frame is
//!
//! ```text
//! frame_len u32 LE | meta_len u32 LE | meta (postcard) | blob (raw bytes)
//! ```
//!
//! where `frame_len` counts everything after itself. The meta is a small
//! postcard message; the blob carries bulk bytes (a value, a record, a range
//! of the log) so that they are never re-encoded: a sender can pass a blob
//! as a chunk of its own, and a receiver gets it as a slice of the bytes the
//! decoder gathered (one copy, from the transport's chunks into the decoder's
//! buffer). A `frame_len` above the limit is refused as soon as its four
//! bytes arrive, before anything is allocated for it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Bytes of the two length fields in front of every frame's meta.
pub const FRAME_PREFIX_BYTES: usize = 8;
/// Largest meta accepted, whatever the frame limit.
pub const MAX_META_BYTES: usize = 4 << 20;
/// Buffer space reserved up front for a frame whose body has not arrived:
/// larger frames grow as their bytes come in.
const INITIAL_RESERVE_BYTES: usize = 1 << 20;

/// Why a byte stream is not a valid sequence of frames. After any of these
/// the stream is out of step and must be closed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// A frame announces more bytes than the limit allows.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A frame is too short to hold its own meta length, or its meta length
    /// runs past the frame.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// The stream ended inside a frame.
    #[error("stream ended {buffered} bytes into an incomplete frame")]
    Truncated {
        /// Bytes of the incomplete frame that had arrived.
        buffered: usize,
    },
}

/// A complete frame, split into its meta and blob without copying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// The postcard-encoded meta.
    pub meta: Bytes,
    /// The raw bytes after the meta (may be empty).
    pub blob: Bytes,
}

/// Reassembles frames from a stream's bytes.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
    reserve_whole_frames: bool,
    buf: BytesMut,
}

impl FrameDecoder {
    /// A decoder that refuses frames whose `frame_len` exceeds
    /// `max_frame_bytes`.
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            max_frame_bytes,
            reserve_whole_frames: false,
            buf: BytesMut::new(),
        }
    }

    /// A decoder for a peer that is trusted to send what it announces (a
    /// client reading its storage node's responses): as soon as a frame's
    /// length is known, room for all of it is reserved, so a 16 MiB range
    /// arrives without reallocations. Lengths over the limit are still
    /// refused.
    pub fn trusting(max_frame_bytes: usize) -> Self {
        Self::trusting_with_buffer(max_frame_bytes, BytesMut::new())
    }

    /// Like [`FrameDecoder::trusting`], receiving into `buf` (any bytes in
    /// it are discarded). A buffer returned by
    /// [`FrameDecoder::into_buffer`] whose frames have all been dropped is
    /// reused without a new allocation.
    pub fn trusting_with_buffer(max_frame_bytes: usize, mut buf: BytesMut) -> Self {
        buf.clear();
        Self {
            max_frame_bytes,
            reserve_whole_frames: true,
            buf,
        }
    }

    /// Gives back the receive buffer, for reuse by another decoder.
    pub fn into_buffer(self) -> BytesMut {
        self.buf
    }

    /// Checks the length of the frame at the front of the buffer, if its
    /// prefix has arrived, and returns it.
    fn front_len(&self) -> Result<Option<usize>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                len: len as u64,
                max: self.max_frame_bytes as u64,
            });
        }
        if len < 4 {
            return Err(FrameError::Malformed("frame shorter than its meta length"));
        }
        Ok(Some(len))
    }

    /// Appends received bytes. Fails (and should close the stream) as soon
    /// as a frame announces a length over the limit.
    pub fn push(&mut self, data: &[u8]) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            self.buf.reserve(data.len().max(64));
        }
        self.buf.extend_from_slice(data);
        if let Some(len) = self.front_len()? {
            let wanted = if self.reserve_whole_frames {
                4 + len
            } else {
                (4 + len).min(INITIAL_RESERVE_BYTES)
            };
            if self.buf.capacity() < wanted {
                self.buf.reserve(wanted - self.buf.len());
            }
        }
        Ok(())
    }

    /// Returns the next complete frame, `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<RawFrame>, FrameError> {
        let Some(len) = self.front_len()? else {
            return Ok(None);
        };
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let meta_len =
            u32::from_le_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]) as usize;
        if meta_len > len - 4 || meta_len > MAX_META_BYTES {
            return Err(FrameError::Malformed("meta length runs past the frame"));
        }
        self.buf.advance(FRAME_PREFIX_BYTES);
        let mut body = self.buf.split_to(len - 4);
        let meta = body.split_to(meta_len).freeze();
        Ok(Some(RawFrame {
            meta,
            blob: body.freeze(),
        }))
    }

    /// Call at the end of the stream: an error if a frame was cut short.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Truncated {
                buffered: self.buf.len(),
            })
        }
    }
}

/// Writes the prefix of a frame with `meta_len` bytes of meta and
/// `blob_len` bytes of blob into `out`. The caller appends the meta and the
/// blob (or sends the blob as a chunk of its own).
///
/// # Panics
/// If the frame would exceed `u32::MAX` bytes.
pub fn put_prefix(out: &mut impl BufMut, meta_len: usize, blob_len: usize) {
    let frame_len = u32::try_from(4 + meta_len + blob_len).expect("frame length fits u32");
    out.put_u32_le(frame_len);
    out.put_u32_le(u32::try_from(meta_len).expect("meta length fits u32"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(meta: &[u8], blob: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_prefix(&mut out, meta.len(), blob.len());
        out.extend_from_slice(meta);
        out.extend_from_slice(blob);
        out
    }

    #[test]
    fn frames_come_out_whole_whatever_the_chunking() {
        let mut stream = frame(b"meta-one", b"blob bytes");
        stream.extend(frame(b"m2", b""));
        stream.extend(frame(b"", b"only blob"));
        for chunk in [1, 3, 7, 64] {
            let mut decoder = FrameDecoder::new(1024);
            let mut frames = Vec::new();
            for piece in stream.chunks(chunk) {
                decoder.push(piece).expect("push");
                while let Some(f) = decoder.next_frame().expect("frame") {
                    frames.push(f);
                }
            }
            decoder.finish().expect("nothing left over");
            assert_eq!(frames.len(), 3, "chunk size {chunk}");
            assert_eq!(&frames[0].meta[..], b"meta-one");
            assert_eq!(&frames[0].blob[..], b"blob bytes");
            assert_eq!(&frames[1].meta[..], b"m2");
            assert!(frames[1].blob.is_empty());
            assert_eq!(&frames[2].blob[..], b"only blob");
        }
    }

    #[test]
    fn an_oversized_length_is_refused_from_its_prefix_alone() {
        let mut decoder = FrameDecoder::new(1000);
        let err = decoder.push(&2000u32.to_le_bytes()).expect_err("refused");
        assert_eq!(
            err,
            FrameError::TooLarge {
                len: 2000,
                max: 1000
            }
        );
        assert!(
            decoder.buf.capacity() < 2000,
            "nothing was allocated for the frame"
        );
    }

    #[test]
    fn a_huge_announced_length_reserves_little() {
        let mut decoder = FrameDecoder::new(64 << 20);
        decoder
            .push(&(60u32 << 20).to_le_bytes())
            .expect("within the limit");
        assert!(decoder.buf.capacity() <= 2 * INITIAL_RESERVE_BYTES);
        assert!(decoder.next_frame().expect("ok").is_none());
    }

    #[test]
    fn malformed_meta_lengths_are_errors() {
        let mut decoder = FrameDecoder::new(1000);
        let mut bad = Vec::new();
        bad.extend_from_slice(&10u32.to_le_bytes());
        bad.extend_from_slice(&7u32.to_le_bytes());
        bad.extend_from_slice(&[0u8; 6]);
        decoder.push(&bad).expect("push");
        assert!(matches!(
            decoder.next_frame(),
            Err(FrameError::Malformed(_))
        ));
        let mut decoder = FrameDecoder::new(1000);
        decoder
            .push(&2u32.to_le_bytes())
            .expect_err("shorter than the meta length");
    }

    #[test]
    fn a_stream_cut_inside_a_frame_is_truncated() {
        let mut decoder = FrameDecoder::new(1000);
        let whole = frame(b"meta", b"blob");
        decoder.push(&whole[..whole.len() - 1]).expect("push");
        assert!(decoder.next_frame().expect("ok").is_none());
        assert_eq!(
            decoder.finish(),
            Err(FrameError::Truncated {
                buffered: whole.len() - 1
            })
        );
    }

    proptest::proptest! {
        #[test]
        fn the_decoder_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
                                    chunk in 1usize..64) {
            let mut decoder = FrameDecoder::new(256);
            for piece in bytes.chunks(chunk) {
                if decoder.push(piece).is_err() {
                    break;
                }
                while let Ok(Some(f)) = decoder.next_frame() {
                    proptest::prop_assert!(f.meta.len() + f.blob.len() <= 256);
                }
            }
        }
    }
}
