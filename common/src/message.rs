//! The messages between compute and storage nodes: what each request and
//! response means, and their encoding into frames (see [`crate::frame`]).
//! Pure functions, no I/O.
//!
//! **Streams.** A client opens one long-lived bidirectional *control* stream
//! per connection; its first request is [`Hello`], answered by
//! [`ResponseBody::Welcome`]. Then requests flow with ids, and responses
//! carry the id of their request; they may come back out of order, but
//! writes on one control stream take effect in the order they were sent.
//! Bulk requests ([`RequestBody::ReadRange`], [`RequestBody::ExportKeyLog`])
//! each travel on a bidirectional stream of their own, so that they never
//! hold up small requests.
//!
//! **Blobs.** Values, records, ranges and key-log chunks travel as the
//! frame's blob, not inside the postcard meta.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::frame::{self, RawFrame};

/// How long a storage node waits, by default, for a following reader to
/// take a chunk of its key-log stream before it closes that stream (a
/// reader that falls this far behind follows again from its last sequence
/// number).
pub const DEFAULT_FOLLOW_STALL_MS: u64 = 10_000;

/// What a storage node sends on a followed stream beyond what the reader
/// has reported taking ([`RequestBody::FollowTaken`]), counted as
/// [`follow_chunk_cost`]: what the node holds for one stream of a reader
/// that stops reading is bounded by this and one export chunk.
pub const FOLLOW_WINDOW_BYTES: u64 = 1 << 20;

/// What each chunk of a followed stream counts toward
/// [`FOLLOW_WINDOW_BYTES`] beyond its frame bytes: its head and the
/// buffers that carry it, so that many chunks of one small append each are
/// bounded as well as a few large ones.
pub const FOLLOW_CHUNK_OVERHEAD_BYTES: u64 = 256;

/// A reader reports what it has taken of a followed stream once it has
/// taken this much more than it last reported (a quarter of
/// [`FOLLOW_WINDOW_BYTES`], so the node never waits on a reader that keeps
/// up).
pub const FOLLOW_REPORT_BYTES: u64 = FOLLOW_WINDOW_BYTES / 4;
// A reader that keeps up reports before the node waits on it.
const _: () = assert!(FOLLOW_REPORT_BYTES < FOLLOW_WINDOW_BYTES);

/// What a chunk of `frame_bytes` key-log frames counts toward
/// [`FOLLOW_WINDOW_BYTES`]; the node and the reader count alike.
pub fn follow_chunk_cost(frame_bytes: usize) -> u64 {
    frame_bytes as u64 + FOLLOW_CHUNK_OVERHEAD_BYTES
}

/// Version of this protocol; a node refuses a peer that speaks another
/// with [`WireError::ProtocolVersion`]. So that a peer of any version can
/// send its [`Hello`] and read that refusal, `Hello` stays the first
/// [`RequestBody`], and the encoding of a [`Response`] carrying the refusal
/// does not change (see the test `the_version_handshake_reads_the_same_in_every_version`).
pub const PROTOCOL_VERSION: u32 = 10;

/// Application error codes with which a storage node closes a connection.
pub mod close_code {
    /// The peer broke the protocol (malformed or oversized frame, undecodable
    /// message, a stream that does not begin with `Hello`); the reason text
    /// says how.
    pub const PROTOCOL_VIOLATION: u32 = 1;
    /// The node is shutting down.
    pub const SHUTTING_DOWN: u32 = 2;
}

/// Bytes of meta a frame may need on top of its blob (keys of a batch,
/// lengths, ids): the frame limit is the largest key plus the largest value
/// plus this.
pub const FRAME_OVERHEAD_BYTES: usize = 64 << 10;

/// The frame limit that follows from the key and value limits: a request
/// carrying the largest key with the largest value fits.
pub fn max_frame_bytes(max_key_bytes: usize, max_value_bytes: usize) -> usize {
    max_key_bytes + max_value_bytes + FRAME_OVERHEAD_BYTES
}

/// The first request on a control stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The client's [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// What the connection is for.
    pub role: Role,
}

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Writes go to `partition`. With `epoch: None` the storage node begins
    /// a new writer epoch (fencing every older writer) and returns it; with
    /// `Some(e)` the connection joins epoch `e`, which must be current.
    Writer {
        /// The partition this connection writes.
        partition: u32,
        /// The writer epoch to join, or `None` to begin a new one.
        epoch: Option<u64>,
    },
    /// Reads only.
    Reader,
}

/// Longest range read of a partition's value log, in bytes: a protocol
/// limit (the storage node refuses longer ranges, the client accepts
/// responses this large whatever its record limits).
pub const MAX_RANGE_BYTES: usize = 16 << 20;

/// Most records one [`RequestBody::GetMany`] reads.
pub const MAX_READS_PER_REQUEST: usize = 256;

/// Most bytes of records one [`RequestBody::GetMany`] of more than one read
/// asks for (a single read may be as long as a record can be).
pub const MAX_GET_MANY_BYTES: usize = MAX_RANGE_BYTES;

/// Where a record is, for [`RequestBody::GetMany`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAt {
    /// Partition of the record.
    pub partition: u32,
    /// Value-log offset.
    pub offset: u64,
    /// Record length.
    pub len: u32,
}

/// Where a version of a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionAt {
    /// The version's sequence number.
    pub seq: u64,
    /// Where its record is.
    pub record: RecordAt,
    /// When it expires (absolute Unix milliseconds; 0: never).
    pub expire_at_ms: u64,
}

/// How one read of a [`RequestBody::GetMany`] went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordRead {
    /// The record, verified, is the next `len` bytes of the blob.
    Read {
        /// Its length.
        len: u32,
    },
    /// This read failed alone; it has no bytes in the blob.
    Failed(WireError),
}

/// A request. Bulk bytes (values) travel in the frame's blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestBody<'a> {
    /// Opens a control stream.
    Hello(Hello),
    /// Puts, deletes and expiries applied as one unit (all or none after a
    /// crash), in order; the values of the puts are the blob, concatenated,
    /// with their lengths in `ops`. The one write request: a single put or
    /// delete is a `WriteMany` of one.
    WriteMany {
        /// The keys, in order.
        #[serde(borrow)]
        keys: Vec<&'a [u8]>,
        /// What to do with each key, in the same order.
        ops: Vec<BatchEntry>,
    },
    /// Read records, each verified by the storage node, with one outcome
    /// each: at most [`MAX_READS_PER_REQUEST`], and, for more than one, at
    /// most [`MAX_GET_MANY_BYTES`] in all. The one read request: a read of
    /// one record is a `GetMany` of one.
    GetMany {
        /// The records, in the order their outcomes come back.
        reads: Vec<RecordAt>,
    },
    /// Where the newest version of `key` is on the node: what a reader
    /// asks after a read answered [`WireError::Moved`].
    Locate {
        /// The key.
        #[serde(borrow)]
        key: &'a [u8],
    },
    /// Read up to `max_len` bytes of a partition's value log (bulk stream).
    ReadRange {
        /// The partition.
        partition: u32,
        /// First byte.
        offset: u64,
        /// At most this many bytes (16 MiB at most).
        max_len: u32,
    },
    /// Stream a partition's key log from `from_seq` on (bulk stream).
    ExportKeyLog {
        /// The partition.
        partition: u32,
        /// Only frames with an entry at or above this sequence number.
        from_seq: u64,
    },
    /// Stream a partition's key log from `from_seq` on, as
    /// [`RequestBody::ExportKeyLog`] does, and then go on streaming what is
    /// appended to it, for as long as the stream is open (bulk stream): a
    /// reader follows the writer this way. The chunk that catches up with
    /// the end is marked `done`; later chunks come as frames are appended
    /// (each `done` too). The reader keeps its half of the stream open and
    /// reports on it what it has taken ([`RequestBody::FollowTaken`]); the
    /// node sends at most [`FOLLOW_WINDOW_BYTES`] past the last report, and a reader that reports nothing more for
    /// [`DEFAULT_FOLLOW_STALL_MS`] (the storage node's setting) while the
    /// node waits on it is cut off.
    FollowKeyLog {
        /// The partition.
        partition: u32,
        /// Only frames with an entry at or above this sequence number.
        from_seq: u64,
    },
    /// On a followed stream, from the reader: the chunks it has taken so
    /// far, as the running total of their [`follow_chunk_cost`].
    FollowTaken {
        /// Cost of the chunks taken since the stream began.
        cost_bytes: u64,
    },
    /// Delete every key (FLUSHALL): a clear entry goes into every
    /// partition's key log, each with a sequence number of its own; answered with
    /// [`ResponseBody::Written`] carrying the highest of them, once every
    /// partition's entry is acknowledged. From then on every record with a
    /// lower sequence number is gone, across restarts of either node.
    /// Writes sent after it on the same connection before its answer may
    /// take effect before it: wait for the answer to order them after it.
    Clear,
    /// Make everything acknowledged durable against power loss.
    Sync,
    /// Report counters and state.
    Stats,
    /// Answer at once.
    Ping,
}

/// One operation of a [`RequestBody::WriteMany`], without its key (in
/// `keys`) or value (in the blob).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchEntry {
    /// A put whose value is the next `value_len` bytes of the blob.
    Put {
        /// Bytes of the value.
        value_len: u32,
        /// When the version expires (absolute Unix milliseconds; 0: never).
        expire_at_ms: u64,
    },
    /// A delete.
    Delete,
    /// The version of the key with sequence number `version_seq` expired:
    /// it is gone, and a newer version is not touched.
    Expire {
        /// Sequence number of the expired version.
        version_seq: u64,
    },
}

impl BatchEntry {
    /// Bytes of the blob this operation takes.
    fn value_len(&self) -> Option<u32> {
        match *self {
            BatchEntry::Put { value_len, .. } => Some(value_len),
            BatchEntry::Delete | BatchEntry::Expire { .. } => None,
        }
    }
}

/// A request with its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request<'a> {
    /// Chosen by the client; the response carries it back.
    pub id: u64,
    /// What is asked.
    #[serde(borrow)]
    pub body: RequestBody<'a>,
}

/// Where a write landed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteAck {
    /// Global sequence number: the highest wins for a key.
    pub seq: u64,
    /// Value-log offset of the record (0 for a delete).
    pub offset: u64,
}

/// One partition's counters and ends, as of one moment: what the storage
/// engine reports about a partition and what a stats report carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReport {
    /// Puts acknowledged since the node started.
    pub puts: u64,
    /// Deletes acknowledged since the node started.
    pub deletes: u64,
    /// Clear entries (FLUSHALL) acknowledged since the node started.
    pub clears: u64,
    /// Value bytes acknowledged since the node started.
    pub value_bytes: u64,
    /// Buffers flushed to the value log since the node started.
    pub flushes: u64,
    /// Bytes those flushes wrote.
    pub flushed_bytes: u64,
    /// Records written in regions of their own (too large for a buffer).
    pub large_writes: u64,
    /// Committed end of the value log.
    pub committed_end: u64,
    /// First key-log position the node still holds: the chunks below it
    /// were deleted once two checkpoints covered them.
    pub keylog_start: u64,
    /// End of the key log.
    pub keylog_end: u64,
    /// Entries an export of the key log from the start yields now: the
    /// current checkpoint's and those of the key log after its position
    /// (every put, delete and clear there). A follower that has applied as
    /// many since its export began is caught up.
    pub keylog_entries: u64,
    /// Value-log segment files.
    pub segments: u64,
    /// Bytes of value-log records that hold a key's newest version.
    pub live_bytes: u64,
    /// Bytes of value-log records superseded (overwritten, deleted,
    /// expired or cleared) and not yet reclaimed.
    pub dead_bytes: u64,
    /// Segments freed by garbage collection since the node started.
    pub gc_runs: u64,
    /// Disk bytes those segments held.
    pub reclaimed_bytes: u64,
    /// Records garbage collection copied to the head of the log since the
    /// node started.
    pub relocations: u64,
    /// The key-log position the current checkpoint covers (0: none).
    pub checkpoint_position: u64,
    /// The highest sequence number in the current checkpoint.
    pub checkpoint_seq: u64,
    /// When the current checkpoint was made (Unix milliseconds; 0: none).
    pub checkpoint_made_at_ms: u64,
}

/// A storage node's state, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsReport {
    /// Per partition.
    pub partitions: Vec<PartitionReport>,
    /// `uring` or `psync`.
    pub io_engine: String,
    /// `mmap` or `sync`.
    pub durability: String,
    /// Why writes are refused, if they are.
    pub refusing_writes: Option<String>,
    /// Current writer epoch.
    pub writer_epoch: u64,
    /// Open client connections.
    pub connections: u32,
    /// Key-log streams closed since the node started because their reader
    /// took nothing for the stall bound.
    pub stalled_streams_closed: u64,
    /// Puts that waited for a garbage-collection pass because the node's
    /// dead bytes were over their bound.
    pub gc_put_waits: u64,
    /// The milliseconds they waited in all.
    pub gc_put_waited_ms: u64,
}

/// A successful response. Bulk bytes travel in the frame's blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseBody {
    /// The answer to [`Hello`].
    Welcome {
        /// The node's partition count: connection `i` writes partition `i`.
        partitions: u32,
        /// The writer epoch this connection holds (0 for readers).
        epoch: u64,
        /// The node's key limit.
        max_key_bytes: u32,
        /// The node's value limit.
        max_value_bytes: u32,
        /// `uring` or `psync`.
        io_engine: String,
    },
    /// A clear ([`RequestBody::Clear`]) was acknowledged.
    Written(WriteAck),
    /// Every operation of a [`RequestBody::WriteMany`] was acknowledged,
    /// in order.
    WrittenMany(Vec<WriteAck>),
    /// The outcome of each read of a [`RequestBody::GetMany`], in order;
    /// the blob is the records read, concatenated.
    Records(Vec<RecordRead>),
    /// The answer to [`RequestBody::Locate`]: where the key's newest
    /// version is, `None` if it has none (deleted, expired or never
    /// written).
    Located(Option<VersionAt>),
    /// The blob is the range (possibly shorter than asked).
    Range {
        /// The partition's committed end when read.
        committed_end: u64,
    },
    /// The blob is a run of whole key-log frames.
    ExportChunk {
        /// Key-log position after this chunk.
        next: u64,
        /// End of the key log when the chunk was read.
        end: u64,
        /// True on the last chunk of the export.
        done: bool,
    },
    /// Everything acknowledged is durable.
    Synced,
    /// The node's state.
    Stats(StatsReport),
    /// The answer to a ping.
    Pong,
}

/// Why a request failed, in terms a client can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum WireError {
    /// A newer writer has taken over; this connection may only read.
    #[error("fenced: writer epoch {yours} was superseded by epoch {current}")]
    Fenced {
        /// The epoch of the refused writer.
        yours: u64,
        /// The current epoch.
        current: u64,
    },
    /// A key, value, batch or range exceeds a limit.
    #[error("{what} is {len} bytes; the limit is {max}")]
    TooLarge {
        /// What was too large.
        what: String,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Keys must not be empty.
    #[error("empty key")]
    EmptyKey,
    /// No such partition.
    #[error("partition {partition} does not exist (the node has {count})")]
    NoSuchPartition {
        /// Asked for.
        partition: u32,
        /// How many there are.
        count: u32,
    },
    /// The location is in a value-log segment that garbage collection
    /// freed: the record moved (the key log says where, and so does
    /// [`RequestBody::Locate`]).
    #[error(
        "partition {partition} offset {offset} was freed by garbage collection: the record moved"
    )]
    Moved {
        /// Partition.
        partition: u32,
        /// Offset.
        offset: u64,
    },
    /// The record at a location does not verify; its bytes are not sent.
    #[error("record at partition {partition} offset {offset} is unreadable: {reason}")]
    Corrupt {
        /// Partition.
        partition: u32,
        /// Offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The storage node refuses writes after a failed flush or sync.
    #[error("storage node refuses writes after a failure: {reason}")]
    Poisoned {
        /// The failure.
        reason: String,
    },
    /// The storage node is read-only.
    #[error("storage node is read-only: {reason}")]
    ReadOnly {
        /// Why.
        reason: String,
    },
    /// The storage node's disk is full.
    #[error("storage node's disk is full: {context}")]
    DiskFull {
        /// What it was doing.
        context: String,
    },
    /// An I/O error on the storage node.
    #[error("I/O error on the storage node: {message}")]
    Io {
        /// The error.
        message: String,
    },
    /// The storage node is shutting down.
    #[error("storage node is shutting down")]
    ShuttingDown,
    /// A write on a connection that is not a writer.
    #[error("this connection is not a writer")]
    NotAWriter,
    /// A second [`Hello`] on a stream. (A stream that does not begin with
    /// `Hello` is closed as a protocol violation instead.)
    #[error("the stream must begin with exactly one Hello")]
    HelloRequired,
    /// The peers speak different protocol versions.
    #[error("protocol version mismatch: node speaks {node}, client {client}")]
    ProtocolVersion {
        /// The node's version.
        node: u32,
        /// The client's version.
        client: u32,
    },
    /// The request is malformed or not allowed on this stream.
    #[error("bad request: {reason}")]
    BadRequest {
        /// What is wrong.
        reason: String,
    },
}

/// A response with its request's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The id of the request answered.
    pub id: u64,
    /// The outcome.
    pub body: Result<ResponseBody, WireError>,
}

/// Why a frame's meta could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("undecodable message: {0}")]
pub struct DecodeError(pub String);

/// Encodes a frame whose meta is `meta` and whose blob is `blob` into
/// `out`, reusing its capacity. Returns the frame as one buffer.
pub fn encode<T: Serialize>(out: &mut BytesMut, meta: &T, blob: &[u8]) -> Bytes {
    encode_parts(out, meta, &[blob])
}

/// Like [`encode`], with a blob that is the concatenation of `parts`
/// (copied once, straight into `out`).
pub fn encode_parts<T: Serialize>(out: &mut BytesMut, meta: &T, parts: &[&[u8]]) -> Bytes {
    let blob_len = parts.iter().map(|p| p.len()).sum();
    put_head(out, meta, blob_len);
    out.reserve(blob_len);
    for part in parts {
        out.extend_from_slice(part);
    }
    out.split().freeze()
}

/// Encodes only the prefix and meta of a frame whose blob of `blob_len`
/// bytes will be sent as a separate chunk (so large blobs are not copied).
pub fn encode_head<T: Serialize>(out: &mut BytesMut, meta: &T, blob_len: usize) -> Bytes {
    put_head(out, meta, blob_len);
    out.split().freeze()
}

/// Appends the prefix and meta of a frame with a blob of `blob_len` bytes.
fn put_head<T: Serialize>(out: &mut BytesMut, meta: &T, blob_len: usize) {
    let prefix_at = out.len();
    out.put_bytes(0, frame::FRAME_PREFIX_BYTES);
    let meta_start = out.len();
    postcard::to_io(meta, (&mut *out).writer()).expect("postcard encodes into memory");
    let meta_len = out.len() - meta_start;
    let mut prefix = &mut out[prefix_at..prefix_at + frame::FRAME_PREFIX_BYTES];
    frame::put_prefix(&mut prefix, meta_len, blob_len);
}

/// Decodes a request's meta. The returned request borrows from the frame.
pub fn decode_request(frame: &RawFrame) -> Result<Request<'_>, DecodeError> {
    postcard::from_bytes(&frame.meta).map_err(|e| DecodeError(e.to_string()))
}

/// Decodes a response's meta.
pub fn decode_response(frame: &RawFrame) -> Result<Response, DecodeError> {
    postcard::from_bytes(&frame.meta).map_err(|e| DecodeError(e.to_string()))
}

/// Splits the blob of a [`RequestBody::WriteMany`] into the values of its
/// puts (`None` for each other operation), checking that the lengths add up.
pub fn split_values<'a>(
    blob: &'a [u8],
    ops: &[BatchEntry],
) -> Result<Vec<Option<&'a [u8]>>, DecodeError> {
    let mut values = Vec::with_capacity(ops.len());
    let mut rest = blob;
    for op in ops {
        let Some(len) = op.value_len() else {
            values.push(None);
            continue;
        };
        let len = len as usize;
        if len > rest.len() {
            return Err(DecodeError("batch value lengths run past the blob".into()));
        }
        let (value, tail) = rest.split_at(len);
        values.push(Some(value));
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(DecodeError("batch blob is longer than its values".into()));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameDecoder;

    fn put(value_len: u32) -> BatchEntry {
        BatchEntry::Put {
            value_len,
            expire_at_ms: u64::from(value_len) * 1000,
        }
    }

    fn expire(version_seq: u64) -> BatchEntry {
        BatchEntry::Expire { version_seq }
    }

    fn round_trip(bytes: &Bytes) -> RawFrame {
        let mut decoder = FrameDecoder::new(1 << 20);
        decoder.push(bytes).expect("push");
        decoder.next_frame().expect("frame").expect("complete")
    }

    #[test]
    fn requests_round_trip_with_their_blobs() {
        let mut out = BytesMut::new();
        let request = Request {
            id: 7,
            body: RequestBody::WriteMany {
                keys: vec![b"a", b"gone", b"bb", b"old"],
                ops: vec![put(3), BatchEntry::Delete, put(0), expire(7)],
            },
        };
        let bytes = encode(&mut out, &request, b"xyz");
        let frame = round_trip(&bytes);
        assert_eq!(decode_request(&frame).expect("decodes"), request);
        assert_eq!(
            split_values(
                &frame.blob,
                &[put(3), BatchEntry::Delete, put(0), expire(7)]
            )
            .expect("split"),
            vec![Some(&b"xyz"[..]), None, Some(b""), None]
        );
        assert!(split_values(&frame.blob, &[put(4)]).is_err());
        assert!(split_values(&frame.blob, &[put(2), BatchEntry::Delete]).is_err());
    }

    #[test]
    fn responses_round_trip() {
        let mut out = BytesMut::new();
        for body in [
            Ok(ResponseBody::Written(WriteAck {
                seq: 9,
                offset: 4096,
            })),
            Err(WireError::Fenced {
                yours: 1,
                current: 2,
            }),
            Ok(ResponseBody::Range { committed_end: 99 }),
        ] {
            let response = Response { id: 3, body };
            let head = encode_head(&mut out, &response, 5);
            let mut whole = head.to_vec();
            whole.extend_from_slice(b"12345");
            let frame = round_trip(&Bytes::from(whole));
            assert_eq!(decode_response(&frame).expect("decodes"), response);
            assert_eq!(&frame.blob[..], b"12345");
        }
    }

    #[test]
    fn garbage_meta_is_a_decode_error() {
        let frame = RawFrame {
            meta: Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            blob: Bytes::new(),
        };
        assert!(decode_request(&frame).is_err());
        assert!(decode_response(&frame).is_err());
    }

    #[test]
    fn batch_lengths_must_match_the_blob() {
        assert!(split_values(b"abc", &[put(4)]).is_err());
        assert!(split_values(b"abc", &[put(1)]).is_err());
        assert!(split_values(b"abc", &[put(1), BatchEntry::Delete, put(2)]).is_ok());
    }

    #[test]
    fn the_frame_limit_fits_the_largest_put() {
        let limit = max_frame_bytes(1024, 16 << 20);
        let mut out = BytesMut::new();
        let key = vec![1u8; 1024];
        let request = Request {
            id: u64::MAX,
            body: RequestBody::WriteMany {
                keys: vec![&key],
                ops: vec![BatchEntry::Put {
                    value_len: 16 << 20,
                    expire_at_ms: u64::MAX,
                }],
            },
        };
        let head = encode_head(&mut out, &request, 16 << 20);
        assert!(head.len() - 4 + (16 << 20) <= limit);
    }

    /// A peer of an older or newer version sends its `Hello` and reads the
    /// refusal in these same bytes, whatever else changed between the
    /// versions.
    #[test]
    fn the_version_handshake_reads_the_same_in_every_version() {
        // id 5, `Hello` (variant 0), protocol 9, `Role::Reader` (variant 1).
        let old_hello = RawFrame {
            meta: Bytes::from_static(&[5, 0, 9, 1]),
            blob: Bytes::new(),
        };
        assert_eq!(
            decode_request(&old_hello).expect("an old Hello decodes"),
            Request {
                id: 5,
                body: RequestBody::Hello(Hello {
                    protocol: 9,
                    role: Role::Reader,
                }),
            }
        );
        let refusal = Response {
            id: 5,
            body: Err(WireError::ProtocolVersion {
                node: PROTOCOL_VERSION,
                client: 9,
            }),
        };
        let mut out = BytesMut::new();
        let frame = round_trip(&encode(&mut out, &refusal, &[]));
        // id 5, `Err` (1), `ProtocolVersion` (variant 13), node, client.
        let version = u8::try_from(PROTOCOL_VERSION).expect("a one-byte varint");
        assert_eq!(&frame.meta[..], &[5, 1, 13, version, 9]);
        assert_eq!(
            refusal.body.expect_err("a refusal").to_string(),
            format!("protocol version mismatch: node speaks {PROTOCOL_VERSION}, client 9")
        );
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_meta_never_panics(meta in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let frame = RawFrame { meta: Bytes::from(meta), blob: Bytes::new() };
            let _ = decode_request(&frame);
            let _ = decode_response(&frame);
        }
    }
}
