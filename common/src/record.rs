//! The two on-disk record formats, shared by the storage node (which writes
//! them) and the compute node (which parses them out of range reads and
//! key-log exports).
//!
//! Every decoder here takes untrusted bytes: it checks every length against
//! the input before slicing and returns a [`RecordError`] instead of
//! panicking.
//!
//! **Value-log record** (little endian), self-describing so that a range of
//! the log can be checked without any other file:
//!
//! ```text
//! crc32c u32 | flags u8 | reserved u8 | key_len u16 | value_len u32 | seq u64 | key | value
//! ```
//!
//! The checksum covers everything after itself.
//!
//! **Key-log frame**: one frame per write, delete or batch, so that a batch
//! is one unit for recovery. Frames start at 8-byte aligned positions.
//!
//! ```text
//! crc32c u32 | payload_len u32 | entry* | zero padding to 8 bytes
//! entry: kind u8 | flags u8 | key_len u16 | value_len u32 | seq u64 | value_offset u64
//!        | expire_at_ms u64 (only with flag 0x01) | key
//! ```
//!
//! Kinds: 1 put, 2 delete, 3 clear, 4 expire. A clear entry has no key, no
//! value and offset 0: it says that every record of every key with a lower
//! sequence number is gone (what FLUSHALL writes). An expire entry says
//! that the version of its key with the sequence number in its offset
//! field is gone (its time to live ran out), and nothing newer is touched.
//!
//! Flag 0x01 (puts only): the version expires at `expire_at_ms`, absolute
//! Unix time in milliseconds; an entry without it never expires and costs
//! nothing more.
//!
//! The checksum covers `payload_len` and the payload. A frame whose
//! `payload_len` is [`PAD_MARKER`] is padding: the rest of its key-log chunk
//! is unused.

use thiserror::Error;

/// Bytes of a value-log record before its key.
pub const VALUE_HEADER_BYTES: usize = 20;
/// Bytes of a key-log frame header (checksum and payload length).
pub const FRAME_HEADER_BYTES: usize = 8;
/// Bytes of one key-log entry before its key (without an expiry time).
pub const ENTRY_HEADER_BYTES: usize = 24;
/// Bytes an expiry time adds to a key-log entry.
pub const ENTRY_EXPIRY_BYTES: usize = 8;
/// Key-log frames start at multiples of this.
pub const FRAME_ALIGN: usize = 8;
/// `payload_len` of a padding frame that ends its key-log chunk.
pub const PAD_MARKER: u32 = u32::MAX;

const FLAG_VALUE: u8 = 0x01;
/// Key-entry flag: an expiry time follows the entry header.
const ENTRY_FLAG_EXPIRY: u8 = 0x01;

/// Why bytes could not be decoded as a record or frame.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The input ends before the record does.
    #[error("record truncated: needs {needed} bytes, {available} available")]
    Truncated {
        /// Bytes the record claims to occupy.
        needed: usize,
        /// Bytes that were available.
        available: usize,
    },
    /// The stored checksum does not match the bytes: the record is torn or
    /// corrupt and must not be served.
    #[error("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Checksum found in the record.
        stored: u32,
        /// Checksum of the bytes as they are.
        computed: u32,
    },
    /// Structurally invalid (unknown kind, zero-length key, ...).
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

/// Total bytes of a value-log record holding this key and value.
pub fn value_record_len(key_len: usize, value_len: usize) -> usize {
    VALUE_HEADER_BYTES + key_len + value_len
}

/// Writes a complete value-log record (header, key, value, checksum) to the
/// start of `dst`, which must hold at least [`value_record_len`] bytes.
/// Returns the number of bytes written.
///
/// # Panics
/// If `dst` is too short or the key or value exceed the format's field
/// widths (callers check configured limits, which are far below them).
pub fn encode_value_record(dst: &mut [u8], seq: u64, key: &[u8], value: &[u8]) -> usize {
    let len = value_record_len(key.len(), value.len());
    let key_len = u16::try_from(key.len()).expect("key length fits u16");
    let value_len = u32::try_from(value.len()).expect("value length fits u32");
    let dst = &mut dst[..len];
    dst[4] = FLAG_VALUE;
    dst[5] = 0;
    dst[6..8].copy_from_slice(&key_len.to_le_bytes());
    dst[8..12].copy_from_slice(&value_len.to_le_bytes());
    dst[12..20].copy_from_slice(&seq.to_le_bytes());
    dst[VALUE_HEADER_BYTES..VALUE_HEADER_BYTES + key.len()].copy_from_slice(key);
    dst[VALUE_HEADER_BYTES + key.len()..].copy_from_slice(value);
    let crc = crc32c::crc32c(&dst[4..]);
    dst[0..4].copy_from_slice(&crc.to_le_bytes());
    len
}

/// A value-log record whose checksum has been verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueRecord<'a> {
    /// Global sequence number of the write.
    pub seq: u64,
    /// The key as written.
    pub key: &'a [u8],
    /// The value as written.
    pub value: &'a [u8],
}

impl ValueRecord<'_> {
    /// Bytes the record occupies in the log.
    pub fn encoded_len(&self) -> usize {
        value_record_len(self.key.len(), self.value.len())
    }
}

/// Decodes and verifies the value-log record at the start of `bytes`.
/// Never returns a record whose checksum fails.
pub fn decode_value_record(bytes: &[u8]) -> Result<ValueRecord<'_>, RecordError> {
    decode_value_record_checking(bytes, true)
}

/// Decodes the value-log record at the start of `bytes` without computing
/// its checksum again: only for bytes that [`decode_value_record`] verified
/// before and that have not changed since (an immutable buffer read once).
/// Its header is checked as [`decode_value_record`] checks it.
pub fn decode_verified_value_record(bytes: &[u8]) -> Result<ValueRecord<'_>, RecordError> {
    decode_value_record_checking(bytes, false)
}

fn decode_value_record_checking(
    bytes: &[u8],
    verify_checksum: bool,
) -> Result<ValueRecord<'_>, RecordError> {
    let header = bytes
        .get(..VALUE_HEADER_BYTES)
        .ok_or(RecordError::Truncated {
            needed: VALUE_HEADER_BYTES,
            available: bytes.len(),
        })?;
    if header[4] != FLAG_VALUE {
        return Err(RecordError::Malformed("unknown value-record flags"));
    }
    let key_len = usize::from(u16::from_le_bytes([header[6], header[7]]));
    let value_len = read_u32(header, 8) as usize;
    let seq = read_u64(header, 12);
    if key_len == 0 {
        return Err(RecordError::Malformed("empty key"));
    }
    let len = VALUE_HEADER_BYTES + key_len + value_len;
    let record = bytes.get(..len).ok_or(RecordError::Truncated {
        needed: len,
        available: bytes.len(),
    })?;
    if verify_checksum {
        let stored = read_u32(record, 0);
        let computed = crc32c::crc32c(&record[4..]);
        if stored != computed {
            return Err(RecordError::ChecksumMismatch { stored, computed });
        }
    }
    Ok(ValueRecord {
        seq,
        key: &record[VALUE_HEADER_BYTES..VALUE_HEADER_BYTES + key_len],
        value: &record[VALUE_HEADER_BYTES + key_len..],
    })
}

/// What a key-log entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// The key now has the value in the value-log record at the entry's offset.
    Put,
    /// The key was deleted; the entry's offset and length are zero.
    Delete,
    /// Every key was deleted: every record with a lower sequence number, in
    /// any partition, is gone. The entry has an empty key, and its offset
    /// and length are zero.
    Clear,
    /// The version of the key with sequence number `version_seq` expired
    /// and is gone; a newer version, if any, is not touched. The entry's
    /// offset and length are zero (on disk the offset field holds
    /// `version_seq`).
    Expire {
        /// Sequence number of the version that expired.
        version_seq: u64,
    },
}

/// One key-log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyEntry<'a> {
    /// Put, delete or clear.
    pub kind: EntryKind,
    /// Global sequence number: the highest one wins for a key.
    pub seq: u64,
    /// Value-log offset of the record (0 for a delete or a clear).
    pub value_offset: u64,
    /// Length of the value (0 for a delete or a clear).
    pub value_len: u32,
    /// When a put's version expires: absolute Unix time in milliseconds, 0
    /// for never (always 0 for the other kinds).
    pub expire_at_ms: u64,
    /// The key (empty for a clear).
    pub key: &'a [u8],
}

impl KeyEntry<'_> {
    /// Bytes this entry occupies inside a frame.
    pub fn encoded_len(&self) -> usize {
        entry_len(self.key.len(), self.expire_at_ms)
    }

    /// Length of the value-log record this entry points at (0 for a delete
    /// or a clear).
    pub fn record_len(&self) -> usize {
        match self.kind {
            EntryKind::Put => value_record_len(self.key.len(), self.value_len as usize),
            EntryKind::Delete | EntryKind::Clear | EntryKind::Expire { .. } => 0,
        }
    }
}

/// Bytes a key-log entry for a key of `key_len` bytes occupies inside a
/// frame: the expiry bytes only when `expire_at_ms` is not 0.
pub fn entry_len(key_len: usize, expire_at_ms: u64) -> usize {
    let expiry = if expire_at_ms != 0 {
        ENTRY_EXPIRY_BYTES
    } else {
        0
    };
    ENTRY_HEADER_BYTES + expiry + key_len
}

/// Bytes a frame holding entries with `payload_len` bytes occupies,
/// including its header and alignment padding.
pub fn frame_len(payload_len: usize) -> usize {
    (FRAME_HEADER_BYTES + payload_len).next_multiple_of(FRAME_ALIGN)
}

/// Builds key-log frames in a reusable buffer.
#[derive(Debug, Default)]
pub struct FrameBuilder {
    buf: Vec<u8>,
}

impl FrameBuilder {
    /// Starts a new frame, discarding anything built before.
    pub fn begin(&mut self) {
        self.buf.clear();
        self.buf.resize(FRAME_HEADER_BYTES, 0);
    }

    /// Appends one entry to the frame being built (an expiry time is
    /// written only for a put, and only when it is not 0).
    ///
    /// # Panics
    /// If the key is longer than `u16::MAX` bytes.
    pub fn push(&mut self, entry: &KeyEntry<'_>) {
        let key_len = u16::try_from(entry.key.len()).expect("key length fits u16");
        let (kind, offset) = match entry.kind {
            EntryKind::Put => (1, entry.value_offset),
            EntryKind::Delete => (2, entry.value_offset),
            EntryKind::Clear => (3, entry.value_offset),
            EntryKind::Expire { version_seq } => (4, version_seq),
        };
        let expires = entry.kind == EntryKind::Put && entry.expire_at_ms != 0;
        self.buf.push(kind);
        self.buf.push(if expires { ENTRY_FLAG_EXPIRY } else { 0 });
        self.buf.extend_from_slice(&key_len.to_le_bytes());
        self.buf.extend_from_slice(&entry.value_len.to_le_bytes());
        self.buf.extend_from_slice(&entry.seq.to_le_bytes());
        self.buf.extend_from_slice(&offset.to_le_bytes());
        if expires {
            self.buf
                .extend_from_slice(&entry.expire_at_ms.to_le_bytes());
        }
        self.buf.extend_from_slice(entry.key);
    }

    /// Bytes the finished frame will occupy (header, entries, padding).
    pub fn frame_len(&self) -> usize {
        frame_len(self.buf.len() - FRAME_HEADER_BYTES)
    }

    /// Seals the frame (length, checksum, padding) and returns its bytes.
    pub fn finish(&mut self) -> &[u8] {
        let payload_len =
            u32::try_from(self.buf.len() - FRAME_HEADER_BYTES).expect("frame payload fits u32");
        self.buf[4..8].copy_from_slice(&payload_len.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf[4..]);
        self.buf[0..4].copy_from_slice(&crc.to_le_bytes());
        let len = self.frame_len();
        self.buf.resize(len, 0);
        &self.buf
    }
}

/// The bytes of a padding frame, which ends a key-log chunk.
pub fn pad_frame() -> [u8; FRAME_HEADER_BYTES] {
    let len = PAD_MARKER.to_le_bytes();
    let crc = crc32c::crc32c(&len);
    let mut out = [0u8; FRAME_HEADER_BYTES];
    out[0..4].copy_from_slice(&crc.to_le_bytes());
    out[4..8].copy_from_slice(&len);
    out
}

/// One decoded key-log frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A verified frame of entries.
    Entries(FrameEntries<'a>),
    /// A padding frame: continue at the next chunk.
    Pad,
}

/// Decodes the frame at the start of `bytes` and returns it with the number
/// of bytes it occupies (including alignment padding, which may run past the
/// end of `bytes` only for the last frame of a buffer).
///
/// All-zero bytes (the unwritten tail of a log) decode as `Malformed`; a
/// frame is returned only when its checksum matches and every entry in it
/// parses.
pub fn decode_frame(bytes: &[u8]) -> Result<(Frame<'_>, usize), RecordError> {
    let header = bytes
        .get(..FRAME_HEADER_BYTES)
        .ok_or(RecordError::Truncated {
            needed: FRAME_HEADER_BYTES,
            available: bytes.len(),
        })?;
    let stored = read_u32(header, 0);
    let payload_len = read_u32(header, 4);
    if payload_len == PAD_MARKER {
        let computed = crc32c::crc32c(&header[4..8]);
        if stored != computed {
            return Err(RecordError::ChecksumMismatch { stored, computed });
        }
        return Ok((Frame::Pad, FRAME_HEADER_BYTES));
    }
    if payload_len == 0 {
        return Err(RecordError::Malformed("empty frame"));
    }
    let payload_len = payload_len as usize;
    let end = FRAME_HEADER_BYTES
        .checked_add(payload_len)
        .ok_or(RecordError::Malformed("frame length overflows"))?;
    let body = bytes.get(..end).ok_or(RecordError::Truncated {
        needed: end,
        available: bytes.len(),
    })?;
    let computed = crc32c::crc32c(&body[4..]);
    if stored != computed {
        return Err(RecordError::ChecksumMismatch { stored, computed });
    }
    let entries = FrameEntries {
        payload: &body[FRAME_HEADER_BYTES..],
    };
    for entry in entries.iter() {
        entry?;
    }
    Ok((Frame::Entries(entries), frame_len(payload_len)))
}

/// The entries of a verified frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameEntries<'a> {
    payload: &'a [u8],
}

impl<'a> FrameEntries<'a> {
    /// Iterates over the entries in write order.
    pub fn iter(&self) -> EntryIter<'a> {
        EntryIter { rest: self.payload }
    }

    /// The highest sequence number among the entries.
    pub fn max_seq(&self) -> u64 {
        self.iter().flatten().map(|e| e.seq).max().unwrap_or(0)
    }
}

/// Iterator over the entries of a frame.
#[derive(Debug, Clone)]
pub struct EntryIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for EntryIter<'a> {
    type Item = Result<KeyEntry<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let result = parse_entry(self.rest);
        match result {
            Ok((entry, used)) => {
                self.rest = &self.rest[used..];
                Some(Ok(entry))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn parse_entry(bytes: &[u8]) -> Result<(KeyEntry<'_>, usize), RecordError> {
    let header = bytes
        .get(..ENTRY_HEADER_BYTES)
        .ok_or(RecordError::Truncated {
            needed: ENTRY_HEADER_BYTES,
            available: bytes.len(),
        })?;
    let offset = read_u64(header, 16);
    let (kind, value_offset) = match header[0] {
        1 => (EntryKind::Put, offset),
        2 => (EntryKind::Delete, offset),
        3 => (EntryKind::Clear, offset),
        4 => (
            EntryKind::Expire {
                version_seq: offset,
            },
            0,
        ),
        _ => return Err(RecordError::Malformed("unknown key-entry kind")),
    };
    let key_len = usize::from(u16::from_le_bytes([header[2], header[3]]));
    match (kind, key_len) {
        (EntryKind::Clear, 0) => {}
        (EntryKind::Clear, _) => return Err(RecordError::Malformed("a clear entry with a key")),
        (_, 0) => return Err(RecordError::Malformed("empty key")),
        _ => {}
    }
    let flags = header[1];
    let expiry_bytes = match (flags, kind) {
        (0, _) => 0,
        (ENTRY_FLAG_EXPIRY, EntryKind::Put) => ENTRY_EXPIRY_BYTES,
        (ENTRY_FLAG_EXPIRY, _) => {
            return Err(RecordError::Malformed(
                "an expiry time on an entry that is not a put",
            ));
        }
        _ => return Err(RecordError::Malformed("unknown key-entry flags")),
    };
    let key_at = ENTRY_HEADER_BYTES + expiry_bytes;
    let used = key_at + key_len;
    let body = bytes.get(..used).ok_or(RecordError::Truncated {
        needed: used,
        available: bytes.len(),
    })?;
    let expire_at_ms = if expiry_bytes == 0 {
        0
    } else {
        match read_u64(body, ENTRY_HEADER_BYTES) {
            0 => return Err(RecordError::Malformed("an expiry time of 0")),
            at => at,
        }
    };
    let entry = KeyEntry {
        kind,
        value_len: read_u32(header, 4),
        seq: read_u64(header, 8),
        value_offset,
        expire_at_ms,
        key: &body[key_at..],
    };
    Ok((entry, used))
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; value_record_len(key.len(), value.len())];
        encode_value_record(&mut buf, seq, key, value);
        buf
    }

    #[test]
    fn value_record_round_trips() {
        let buf = record(42, b"key", b"value bytes");
        let rec = decode_value_record(&buf).expect("decodes");
        assert_eq!(rec.seq, 42);
        assert_eq!(rec.key, b"key");
        assert_eq!(rec.value, b"value bytes");
        assert_eq!(rec.encoded_len(), buf.len());
    }

    #[test]
    fn a_verified_record_decodes_alike_without_its_checksum_and_its_header_is_still_checked() {
        let buf = record(42, b"key", b"value bytes");
        assert_eq!(
            decode_verified_value_record(&buf).expect("decodes"),
            decode_value_record(&buf).expect("decodes")
        );
        let mut bad_flags = buf.clone();
        bad_flags[4] ^= 0x01;
        assert!(decode_verified_value_record(&bad_flags).is_err());
        assert!(decode_verified_value_record(&buf[..buf.len() - 1]).is_err());
    }

    #[test]
    fn value_record_with_empty_value_round_trips() {
        let buf = record(1, b"k", b"");
        assert_eq!(decode_value_record(&buf).expect("decodes").value, b"");
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let buf = record(7, b"some key", b"some value");
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(decode_value_record(&bad).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn truncated_record_is_an_error() {
        let buf = record(7, b"key", b"value");
        assert!(matches!(
            decode_value_record(&buf[..buf.len() - 1]),
            Err(RecordError::Truncated { .. })
        ));
        assert!(matches!(
            decode_value_record(&buf[..3]),
            Err(RecordError::Truncated { .. })
        ));
    }

    #[test]
    fn frame_round_trips_with_many_entries() {
        let mut builder = FrameBuilder::default();
        builder.begin();
        builder.push(&KeyEntry {
            kind: EntryKind::Put,
            seq: 10,
            value_offset: 4096,
            value_len: 100,
            expire_at_ms: 0,
            key: b"alpha",
        });
        builder.push(&KeyEntry {
            kind: EntryKind::Delete,
            seq: 11,
            value_offset: 0,
            value_len: 0,
            expire_at_ms: 0,
            key: b"beta",
        });
        let bytes = builder.finish().to_vec();
        assert_eq!(bytes.len() % FRAME_ALIGN, 0);
        let (frame, used) = decode_frame(&bytes).expect("decodes");
        assert_eq!(used, bytes.len());
        let Frame::Entries(entries) = frame else {
            panic!("expected entries")
        };
        let all: Vec<_> = entries.iter().map(|e| e.expect("entry")).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].key, b"alpha");
        assert_eq!(all[0].record_len(), VALUE_HEADER_BYTES + 5 + 100);
        assert_eq!(all[1].kind, EntryKind::Delete);
        assert_eq!(entries.max_seq(), 11);
    }

    #[test]
    fn a_clear_entry_round_trips_keyless_and_a_keyed_one_is_refused() {
        let mut builder = FrameBuilder::default();
        builder.begin();
        builder.push(&KeyEntry {
            kind: EntryKind::Clear,
            seq: 42,
            value_offset: 0,
            value_len: 0,
            expire_at_ms: 0,
            key: b"",
        });
        let bytes = builder.finish().to_vec();
        let (Frame::Entries(entries), _) = decode_frame(&bytes).expect("decodes") else {
            panic!("expected entries")
        };
        let all: Vec<_> = entries.iter().map(|e| e.expect("entry")).collect();
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all[0].kind, all[0].seq, all[0].key),
            (EntryKind::Clear, 42, &b""[..])
        );
        assert_eq!(all[0].record_len(), 0);

        builder.begin();
        builder.push(&KeyEntry {
            kind: EntryKind::Clear,
            seq: 43,
            value_offset: 0,
            value_len: 0,
            expire_at_ms: 0,
            key: b"k",
        });
        let bytes = builder.finish().to_vec();
        assert_eq!(
            decode_frame(&bytes).map(|_| ()),
            Err(RecordError::Malformed("a clear entry with a key"))
        );

        builder.begin();
        builder.push(&KeyEntry {
            kind: EntryKind::Delete,
            seq: 44,
            value_offset: 0,
            value_len: 0,
            expire_at_ms: 0,
            key: b"",
        });
        let bytes = builder.finish().to_vec();
        assert_eq!(
            decode_frame(&bytes).map(|_| ()),
            Err(RecordError::Malformed("empty key"))
        );
    }

    #[test]
    fn expiry_times_and_expire_entries_round_trip() {
        let mut builder = FrameBuilder::default();
        builder.begin();
        let timed = KeyEntry {
            kind: EntryKind::Put,
            seq: 10,
            value_offset: 4096,
            value_len: 3,
            expire_at_ms: 1_900_000_000_123,
            key: b"session",
        };
        let plain = KeyEntry {
            expire_at_ms: 0,
            seq: 11,
            ..timed
        };
        let expired = KeyEntry {
            kind: EntryKind::Expire { version_seq: 10 },
            seq: 12,
            value_offset: 0,
            value_len: 0,
            expire_at_ms: 0,
            key: b"session",
        };
        for entry in [&timed, &plain, &expired] {
            builder.push(entry);
        }
        let bytes = builder.finish().to_vec();
        assert_eq!(
            bytes.len(),
            frame_len(timed.encoded_len() + plain.encoded_len() + expired.encoded_len())
        );
        assert_eq!(
            timed.encoded_len(),
            plain.encoded_len() + ENTRY_EXPIRY_BYTES
        );
        let (Frame::Entries(entries), _) = decode_frame(&bytes).expect("decodes") else {
            panic!("expected entries")
        };
        let all: Vec<_> = entries.iter().map(|e| e.expect("entry")).collect();
        assert_eq!(all, vec![timed, plain, expired]);
        assert_eq!(entries.max_seq(), 12);
    }

    #[test]
    fn an_expiry_flag_off_a_put_or_an_unknown_flag_is_refused() {
        let mut builder = FrameBuilder::default();
        builder.begin();
        builder.push(&KeyEntry {
            kind: EntryKind::Put,
            seq: 1,
            value_offset: 0,
            value_len: 1,
            expire_at_ms: 5,
            key: b"k",
        });
        let good = builder.finish().to_vec();
        for (flags, kind, reason) in [
            (0x02, 1, "unknown key-entry flags"),
            (
                ENTRY_FLAG_EXPIRY,
                2,
                "an expiry time on an entry that is not a put",
            ),
        ] {
            let mut bad = good.clone();
            bad[FRAME_HEADER_BYTES] = kind;
            bad[FRAME_HEADER_BYTES + 1] = flags;
            let crc = crc32c::crc32c(&bad[4..FRAME_HEADER_BYTES + good_payload(&good)]);
            bad[0..4].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(
                decode_frame(&bad).map(|_| ()),
                Err(RecordError::Malformed(reason))
            );
        }
    }

    fn good_payload(frame: &[u8]) -> usize {
        read_u32(frame, 4) as usize
    }

    #[test]
    fn zeroed_bytes_are_not_a_frame() {
        assert!(decode_frame(&[0u8; 64]).is_err());
    }

    #[test]
    fn pad_frame_decodes_as_pad() {
        let pad = pad_frame();
        let (frame, used) = decode_frame(&pad).expect("decodes");
        assert_eq!(frame, Frame::Pad);
        assert_eq!(used, FRAME_HEADER_BYTES);
    }

    #[test]
    fn torn_frame_is_rejected() {
        let mut builder = FrameBuilder::default();
        builder.begin();
        builder.push(&KeyEntry {
            kind: EntryKind::Put,
            seq: 1,
            value_offset: 0,
            value_len: 1,
            expire_at_ms: 0,
            key: b"k",
        });
        let bytes = builder.finish().to_vec();
        for cut in 0..bytes.len() - 7 {
            let mut torn = bytes.clone();
            torn[cut..].fill(0);
            assert!(decode_frame(&torn).is_err(), "torn at {cut} accepted");
        }
    }

    proptest::proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = decode_value_record(&bytes);
            if let Ok((Frame::Entries(entries), _)) = decode_frame(&bytes) {
                for entry in entries.iter() {
                    let _ = entry;
                }
            }
        }
    }
}
