//! Reads of a partition: one record by location, a range of the value log
//! (to fill a compute node's window), and key-log exports.
//!
//! Bytes still in a write buffer are copied from its mapping under the
//! partition lock (a buffer is only reused after its data reached the value
//! log, so anything not in a buffer at that moment is in the file); the rest
//! is read from the value log without the lock: a record through the page
//! cache ([`crate::disk::DiskFile::read_cached_at`]), a range with O_DIRECT;
//! either from the node's copies of its latest flushes where they hold it
//! (`crate::recent`).

use std::ops::Range;
use std::sync::Arc;

use splitkv_common::record::{self, RecordError, ValueRecord};

use splitkv_common::message::WireError;

use super::value_log::{self, Via};
use super::{Partition, PartitionState};
use crate::aligned::{PooledBuf, align_down, align_up};
use crate::checkpoint::Checkpoint;
use crate::error::{Result, StorageError};
use crate::keylog::BadPosition;
use crate::recent::Copied;

/// Largest range one [`read_range`](crate::StorageEngine::read_range) call
/// returns: the protocol's limit.
pub use splitkv_common::limits::MAX_RANGE_BYTES;

/// A verified value-log record, in an aligned buffer straight from the disk
/// or a write buffer. The buffer returns to the node's pool when dropped.
#[derive(Debug)]
pub struct RecordBytes {
    buf: PooledBuf,
    start: usize,
    len: usize,
}

impl RecordBytes {
    /// The whole record (header, key, value), checksum verified.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    /// The decoded record.
    pub fn record(&self) -> ValueRecord<'_> {
        record::decode_value_record(self.as_bytes()).expect("verified when read")
    }

    /// The buffer and the record's range in it, for sending without a copy.
    /// The buffer returns to its pool when dropped.
    pub fn into_parts(self) -> (PooledBuf, Range<usize>) {
        let range = self.start..self.start + self.len;
        (self.buf, range)
    }
}

/// Bytes of a partition's value log, as of one moment.
#[derive(Debug)]
pub struct RangeRead {
    /// The bytes; see [`RangeRead::bytes`].
    buf: PooledBuf,
    start: usize,
    len: usize,
    /// The partition's committed end when the range was read. The range
    /// stops there: it holds no byte of an incomplete record.
    pub committed_end: u64,
}

impl RangeRead {
    /// The bytes from the requested offset, possibly fewer than asked (never
    /// past the committed end).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    /// The buffer and the range's position in it, for sending without a
    /// copy. The buffer returns to its pool when dropped.
    pub fn into_parts(self) -> (PooledBuf, Range<usize>, u64) {
        let range = self.start..self.start + self.len;
        (self.buf, range, self.committed_end)
    }
}

/// Where a key-log export is. An export from the start serves the
/// partition's current checkpoint first (the entries that still matter as
/// of its position) and then the key log after that position, so that it
/// costs the partition's keys rather than its history; what it yields is
/// what the whole key log yields, decided by sequence number. An export of
/// the entries from a sequence number that no deleted key-log chunk
/// reaches reads the key log kept instead, skipping the chunks of older
/// entries.
#[derive(Clone)]
pub struct ExportCursor(At);

#[derive(Clone)]
enum At {
    Start,
    Checkpoint {
        checkpoint: Arc<Checkpoint>,
        offset: usize,
    },
    Log(u64),
}

impl ExportCursor {
    /// The start of an export.
    pub fn start() -> Self {
        Self(At::Start)
    }

    /// Key-log position `position`, the checkpoint left aside: the frames
    /// of the key log itself from there (a position below the log's first
    /// chunk kept is refused).
    pub fn at_position(position: u64) -> Self {
        Self(At::Log(position))
    }
}

impl std::fmt::Debug for ExportCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            At::Start => f.write_str("start"),
            At::Checkpoint { checkpoint, offset } => write!(
                f,
                "checkpoint at {} (body offset {offset})",
                checkpoint.position
            ),
            At::Log(position) => write!(f, "key-log position {position}"),
        }
    }
}

/// Progress of a key-log export.
#[derive(Debug, Clone)]
pub struct ExportProgress {
    /// Where to continue the export from.
    pub next: ExportCursor,
    /// The key-log position the export has reached: the checkpoint's
    /// position while its entries are being served.
    pub position: u64,
    /// End of the key log when this chunk was read.
    pub end: u64,
    /// Whether the export has caught up with `end`.
    pub caught_up: bool,
}

impl Partition {
    /// Reads and verifies the record at `offset` of `len` bytes.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Result<RecordBytes> {
        match self.read_record(offset, len, Via::Cache)? {
            Some(record) => Ok(record),
            // Not reached: a read that may wait for the disk does not give up.
            None => Err(self.read_error(offset, std::io::ErrorKind::WouldBlock.into())),
        }
    }

    /// Reads and verifies the record at `offset` of `len` bytes if none of
    /// it has to come from the disk (it is in a write buffer, the node's
    /// copies of recent flushes or the page cache): `Ok(None)` otherwise.
    /// Never waits for the device, so it may run on a thread that must not
    /// block.
    pub(crate) fn read_in_memory(&self, offset: u64, len: usize) -> Result<Option<RecordBytes>> {
        self.read_record(offset, len, Via::CacheNoWait)
    }

    fn read_record(&self, offset: u64, len: usize, via: Via) -> Result<Option<RecordBytes>> {
        let limits = self.node.limits;
        let max = record::value_record_len(limits.max_key_bytes, limits.max_value_bytes);
        if len > max {
            return Err(StorageError::too_large("record read", len, max));
        }
        let corrupt = |source| StorageError::corrupt(self.id, offset, source);
        let Some(end) = offset.checked_add(len as u64).filter(|&e| e < u64::MAX / 2) else {
            return Err(corrupt(RecordError::Malformed("location out of range")));
        };
        // Taken before the lock: under it only a memcpy happens. The
        // pooled buffer may hold stale bytes; only the record's range,
        // overwritten below, is exposed.
        let aligned = align_down(offset);
        let start = (offset - aligned) as usize;
        let mut buf = self
            .node
            .record_buffers
            .take((align_up(end) - aligned) as usize);
        let in_buffer = {
            let st = self.state.lock();
            self.copy_from_buffers(&st, offset..end, &mut buf[start..start + len])
        };
        let in_memory =
            in_buffer || self.copy_from_recent(offset..end, &mut buf[start..start + len]);
        if !in_memory {
            let Some(got) = self.read_vlog(&mut buf, aligned, via)? else {
                return Ok(None);
            };
            if got < start + len {
                return Err(corrupt(RecordError::Truncated {
                    needed: len,
                    available: got.saturating_sub(start),
                }));
            }
        }
        let bytes = &buf[start..start + len];
        let decoded = record::decode_value_record(bytes).map_err(corrupt)?;
        if decoded.encoded_len() != len {
            return Err(corrupt(RecordError::Malformed(
                "record length differs from the location's",
            )));
        }
        Ok(Some(RecordBytes { buf, start, len }))
    }

    /// Copies `range` out of a write buffer into `dst` if one holds all of
    /// it; returns whether one did.
    fn copy_from_buffers(&self, st: &PartitionState, range: Range<u64>, dst: &mut [u8]) -> bool {
        for (slot, state) in st.slots.iter().enumerate() {
            let Some(held) = state.unflushed() else {
                continue;
            };
            if range.start >= held.start && range.end <= held.end {
                // SAFETY: bytes below the fill are never written again while
                // the buffer is unflushed, and we hold the lock that keeps it
                // from being reused.
                let src = unsafe {
                    self.buffers[slot].data((range.start - held.start) as usize, dst.len())
                };
                dst.copy_from_slice(src);
                return true;
            }
        }
        false
    }

    /// Copies `range` out of the node's copies of recent flushes into `dst`
    /// if they hold all of it; returns whether they did. A range in a
    /// segment that garbage collection freed is left to the value log,
    /// which answers that it moved.
    fn copy_from_recent(&self, range: Range<u64>, dst: &mut [u8]) -> bool {
        !self.vlog.is_freed(self.vlog.segment_of(range.start))
            && self.node.recent.copy_out(self.id, range, dst)
    }

    fn read_vlog(&self, buf: &mut PooledBuf, offset: u64, via: Via) -> Result<Option<usize>> {
        // The buffer's length is the record's aligned span; a pooled
        // buffer's capacity may be larger, and is not read into.
        let target: &mut [u8] = buf;
        // A point read of flushed bytes: through the page cache, so that a
        // record read again (by another compute node, or after one
        // restarts) is not read from the disk again.
        self.vlog
            .read_via(target, offset, via)
            .map_err(|e| self.read_error(offset, e))
    }

    fn read_error(&self, offset: u64, e: std::io::Error) -> StorageError {
        if value_log::is_moved(&e) {
            return WireError::Moved {
                partition: self.id as u32,
                offset,
            }
            .into();
        }
        StorageError::io(
            format!("reading the value log of partition {} at {offset}", self.id),
            e,
        )
    }

    /// Reads up to `max_len` bytes of the value log from `offset`, stopping at
    /// the committed end, including records still in the write buffers.
    pub(crate) fn read_range(&self, offset: u64, max_len: usize) -> Result<RangeRead> {
        if max_len > MAX_RANGE_BYTES {
            return Err(StorageError::too_large(
                "range read",
                max_len,
                MAX_RANGE_BYTES,
            ));
        }
        let aligned_start = align_down(offset);
        // The range is settled by one look under the lock; if it is not
        // empty, its buffer is taken without the lock, which is then taken
        // again only to copy what the write buffers still hold. The bytes
        // below the committed end seen here do not change in between (the
        // committed end only grows, and a buffer is freed only after its
        // bytes reached the value log).
        let committed_end = self.state.lock().committed_end();
        if offset >= committed_end {
            return Ok(RangeRead {
                buf: self.node.range_buffers.take(0),
                start: 0,
                len: 0,
                committed_end,
            });
        }
        if self.vlog.is_freed(self.vlog.segment_of(offset)) {
            return Err(self.read_error(offset, value_log::moved(offset)));
        }
        // A range stops where a freed segment starts.
        let end = committed_end
            .min(offset + max_len as u64)
            .min(self.vlog.freed_from(offset));
        let aligned_end = align_up(end);
        let mut buf = self
            .node
            .range_buffers
            .take((aligned_end - aligned_start) as usize);
        let covered = {
            let st = self.state.lock();
            let mut covered: [Option<Range<u64>>; 2] = [None, None];
            for (slot, state) in st.slots.iter().enumerate() {
                let Some(held) = state.unflushed() else {
                    continue;
                };
                let lo = held.start.max(aligned_start);
                let hi = held.end.min(end);
                if lo >= hi {
                    continue;
                }
                // SAFETY: as in copy_from_buffers.
                let src = unsafe {
                    self.buffers[slot].data((lo - held.start) as usize, (hi - lo) as usize)
                };
                let at = (lo - aligned_start) as usize;
                buf[at..at + src.len()].copy_from_slice(src);
                // The buffer's padding up to its aligned end is zeros on
                // disk; the pooled buffer may hold stale bytes there.
                let pad_end = align_up(held.end).min(aligned_end);
                if pad_end > hi {
                    let from = (hi - aligned_start) as usize;
                    buf.spare_aligned_mut()[from..(pad_end - aligned_start) as usize].fill(0);
                }
                covered[slot] = Some(held.start..align_up(held.end));
            }
            covered
        };
        for gap in gaps(aligned_start..align_up(end), &covered) {
            // What the node's copies of recent flushes hold is copied from
            // them; the rest is read from the disk. Flushes start and end
            // on block boundaries, so every disk read stays aligned.
            let mut at = gap.start;
            while at < gap.end {
                let target = &mut buf.spare_aligned_mut()
                    [(at - aligned_start) as usize..(gap.end - aligned_start) as usize];
                let upto = match self.node.recent.copy_from(self.id, at, target) {
                    Copied::Bytes(copied) => {
                        at += copied as u64;
                        continue;
                    }
                    Copied::Nothing { next } => next.map_or(gap.end, |next| next.min(gap.end)),
                };
                let target = &mut target[..(upto - at) as usize];
                let got = self
                    .vlog
                    .read_at(target, at)
                    .map_err(|e| self.read_error(at, e))?;
                // Everything below the committed end has been written, so
                // the file holds at least the bytes up to `end`.
                let needed = (upto.min(end) - at) as usize;
                if got < needed {
                    return Err(StorageError::corrupt(
                        self.id,
                        at,
                        RecordError::Truncated {
                            needed,
                            available: got,
                        },
                    ));
                }
                at = upto;
            }
        }
        let start = (offset - aligned_start) as usize;
        let len = (end - offset) as usize;
        debug_assert!(start + len <= buf.len());
        Ok(RangeRead {
            buf,
            start,
            len,
            committed_end,
        })
    }

    /// Copies about `max_bytes` of complete key-log frames holding entries
    /// with a sequence number of at least `min_seq` into `out`, from
    /// `cursor` on (see [`ExportCursor`]).
    pub(crate) fn export(
        &self,
        cursor: &ExportCursor,
        min_seq: u64,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<ExportProgress> {
        let (snapshot, current, first, forgotten_max_seq) = {
            let st = self.state.lock();
            (
                st.keylog.snapshot(),
                st.checkpoints.current.clone(),
                st.keylog.first_position(),
                st.keylog.forgotten_max_seq(),
            )
        };
        let end = snapshot.end();
        let at = match (&cursor.0, current) {
            // Entries from a sequence number above everything the deleted
            // chunks held are all in the key log kept, which the chunks'
            // highest sequence numbers let the export skip through: a tail
            // pull or a follower that comes back costs its tail, not the
            // checkpoint.
            (At::Start, Some(_)) if min_seq > 0 && min_seq > forgotten_max_seq => At::Log(first),
            (At::Start, Some(checkpoint)) => At::Checkpoint {
                checkpoint,
                offset: 0,
            },
            (At::Start, None) => At::Log(first),
            (other, _) => other.clone(),
        };
        let from = match at {
            At::Checkpoint { checkpoint, offset } => {
                let next = checkpoint.read_frames(offset, min_seq, max_bytes, out);
                let position = checkpoint.position;
                let next = if next < checkpoint.body.len() {
                    At::Checkpoint {
                        checkpoint,
                        offset: next,
                    }
                } else {
                    At::Log(position)
                };
                return Ok(ExportProgress {
                    caught_up: matches!(next, At::Log(p) if p >= end),
                    next: ExportCursor(next),
                    position,
                    end,
                });
            }
            At::Log(from) => from,
            At::Start => unreachable!("a start was resolved above"),
        };
        if from < first {
            return Err(StorageError::io(
                format!("exporting the key log of partition {}", self.id),
                std::io::Error::other(format!(
                    "position {from} is below the key log's first chunk kept ({first}): \
                     newer checkpoints replaced the one the export began from; export again"
                )),
            ));
        }
        let next = snapshot
            .read_frames(from, min_seq, max_bytes, out)
            .map_err(|BadPosition(pos)| {
                StorageError::corrupt(
                    self.id,
                    pos,
                    RecordError::Malformed("export position is not the start of a key-log frame"),
                )
            })?;
        Ok(ExportProgress {
            next: ExportCursor(At::Log(next)),
            position: next,
            end,
            caught_up: next >= end,
        })
    }
}

/// The parts of `range` not covered by any of `covered` (all aligned).
fn gaps(range: Range<u64>, covered: &[Option<Range<u64>>; 2]) -> Vec<Range<u64>> {
    let mut holes = vec![range];
    for cover in covered.iter().flatten() {
        let mut next = Vec::with_capacity(holes.len() + 1);
        for hole in holes {
            if cover.end <= hole.start || cover.start >= hole.end {
                next.push(hole);
                continue;
            }
            if hole.start < cover.start {
                next.push(hole.start..cover.start);
            }
            if cover.end < hole.end {
                next.push(cover.end..hole.end);
            }
        }
        holes = next;
    }
    holes
}

#[cfg(test)]
mod tests {
    use super::gaps;

    #[test]
    fn gaps_subtract_covered_ranges() {
        assert_eq!(gaps(0..100, &[None, None]), vec![0..100]);
        assert_eq!(gaps(0..100, &[Some(20..40), None]), vec![0..20, 40..100]);
        assert_eq!(
            gaps(0..100, &[Some(20..40), Some(60..200)]),
            vec![0..20, 40..60]
        );
        assert_eq!(
            gaps(50..60, &[Some(0..100), None]),
            Vec::<std::ops::Range<u64>>::new()
        );
    }
}
