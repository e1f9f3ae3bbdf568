//! One partition: its value log, its two write buffers, its key log, and the
//! write path that ties them together.
//!
//! **Write path.** Under the partition lock a put is copied into the active
//! buffer, its key-log frame is appended to the mapped key log, and only
//! then is it acknowledged. The frame is the commit point: recovery trusts
//! exactly the frames that verify. Because frames are appended under the
//! lock, every frame before an acknowledged one is complete, so a torn frame
//! can only follow unacknowledged writes.
//!
//! **Value-log layout.** Each buffer covers `[base, base + fill)` of the value
//! log, with `base` aligned to 4 KiB. A full buffer is sealed (its range
//! padded to 4 KiB) and written by the flusher at `base` while writes go on
//! into the other buffer. A record larger than a buffer gets an aligned
//! region of its own after the sealed buffer, written by the caller's
//! thread; its frame is appended when that write has completed.
//!
//! **Committed end.** Every byte of the value log below the committed end
//! belongs to a complete record or to padding; range reads never go past it.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex, MutexGuard};
use splitkv_common::message::WriteAck;
use splitkv_common::record::{self, EntryKind, FrameBuilder, KeyEntry};

use crate::aligned::{AlignedBuf, align_up};
use crate::buffer::{BufferState, Header, WriteBuffer};
use crate::config::Durability;
use crate::disk::DiskFile;
use crate::engine::Shared;
use crate::error::{Result, StorageError};
use crate::keylog::KeyLog;

/// One operation of a write batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The key (1 byte up to the configured limit).
        key: &'a [u8],
        /// The value (up to the configured limit; may be empty).
        value: &'a [u8],
    },
    /// Delete `key` (a tombstone in the key log).
    Delete {
        /// The key.
        key: &'a [u8],
    },
}

impl WriteOp<'_> {
    fn key(&self) -> &[u8] {
        match self {
            WriteOp::Put { key, .. } | WriteOp::Delete { key } => key,
        }
    }
}

/// Where a write buffer is in its cycle, as the partition tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Free,
    /// Receiving records. `synced` is how much of `fill` is msynced.
    Filling {
        base: u64,
        fill: u64,
        synced: u64,
    },
    /// Waiting for, or under, its write to the value log.
    Sealed {
        base: u64,
        fill: u64,
        synced: u64,
    },
}

impl Slot {
    /// The value-log range of complete records this buffer holds and the
    /// value log may not have yet.
    pub(crate) fn unflushed(&self) -> Option<Range<u64>> {
        match *self {
            Slot::Free => None,
            Slot::Filling { base, fill, .. } | Slot::Sealed { base, fill, .. } => {
                Some(base..base + fill)
            }
        }
    }
}

/// Reusable per-write scratch space, pooled so the write path does not
/// allocate once warm.
#[derive(Default)]
pub(crate) struct Scratch {
    frame: FrameBuilder,
    /// Large records to write outside the lock.
    large: Vec<LargeWrite>,
}

/// A record too large for a buffer, written in an aligned region of its own.
/// The batch's large puts, in order, pair up with these in order.
struct LargeWrite {
    /// Its region of the value log (aligned).
    region: Range<u64>,
    seq: u64,
}

/// State guarded by the partition lock.
pub(crate) struct State {
    /// At most one slot is `Filling`: the active buffer.
    pub(crate) slots: [Slot; 2],
    /// Where the next buffer or large record starts when no buffer is active.
    pub(crate) next_base: u64,
    /// Regions of large records whose writes are under way.
    pub(crate) large_in_flight: Vec<Range<u64>>,
    pub(crate) keylog: KeyLog,
    pub(crate) flush_queue: VecDeque<usize>,
    pub(crate) closing: bool,
    scratch: Vec<Scratch>,
}

impl State {
    pub(crate) fn new(keylog: KeyLog, slots: [Slot; 2], next_base: u64) -> Self {
        let flush_queue = (0..2)
            .filter(|&i| matches!(slots[i], Slot::Sealed { .. }))
            .collect();
        Self {
            slots,
            next_base,
            large_in_flight: Vec::new(),
            keylog,
            flush_queue,
            closing: false,
            scratch: Vec::new(),
        }
    }

    /// The active buffer: the one slot that is `Filling`, if any.
    pub(crate) fn active(&self) -> Option<usize> {
        self.slots
            .iter()
            .position(|slot| matches!(slot, Slot::Filling { .. }))
    }

    /// End of the record area: the active buffer's fill, or `next_base`.
    pub(crate) fn tail(&self) -> u64 {
        self.slots
            .iter()
            .find_map(|slot| match *slot {
                Slot::Filling { base, fill, .. } => Some(base + fill),
                _ => None,
            })
            .unwrap_or(self.next_base)
    }

    /// Every byte below this belongs to a complete record or padding.
    pub(crate) fn committed_end(&self) -> u64 {
        let tail = self.tail();
        self.large_in_flight
            .iter()
            .map(|r| r.start)
            .min()
            .map_or(tail, |start| start.min(tail))
    }
}

/// Counters of one partition's activity.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) puts: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) value_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) flushed_bytes: AtomicU64,
    pub(crate) large_writes: AtomicU64,
}

/// One partition of the store.
pub(crate) struct Partition {
    pub(crate) id: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) vlog: Arc<dyn DiskFile>,
    pub(crate) buffers: [Arc<WriteBuffer>; 2],
    pub(crate) state: Mutex<State>,
    /// Signalled when a buffer becomes free (or the engine is poisoned).
    pub(crate) buffer_freed: Condvar,
    /// Signalled when a buffer is sealed or the partition closes.
    pub(crate) flush_wanted: Condvar,
    pub(crate) commit: crate::flush::GroupCommit,
    pub(crate) counters: Counters,
    /// Bytes of the value log allocated on disk. Writes land inside it, so
    /// they never extend the file (which would serialise them in the file
    /// system) and a full disk shows up at an explicit allocation.
    vlog_allocated: Mutex<u64>,
}

/// The value log is preallocated this far ahead of the writes.
const VLOG_PREALLOCATE_BYTES: u64 = 32 << 20;

impl Partition {
    pub(crate) fn new(
        id: usize,
        shared: Arc<Shared>,
        vlog: Arc<dyn DiskFile>,
        buffers: [Arc<WriteBuffer>; 2],
        state: State,
        vlog_allocated: u64,
    ) -> Self {
        let keylog_end = state.keylog.end();
        Self {
            id,
            shared,
            vlog,
            buffers,
            state: Mutex::new(state),
            buffer_freed: Condvar::new(),
            flush_wanted: Condvar::new(),
            commit: crate::flush::GroupCommit::new(keylog_end),
            counters: Counters::default(),
            vlog_allocated: Mutex::new(vlog_allocated),
        }
    }

    /// Makes sure the value log is allocated up to `end`, allocating
    /// [`VLOG_PREALLOCATE_BYTES`] ahead when it is not.
    pub(crate) fn ensure_vlog_allocated(&self, end: u64) -> std::io::Result<()> {
        let mut allocated = self.vlog_allocated.lock();
        if end <= *allocated {
            return Ok(());
        }
        let target = align_up(end + VLOG_PREALLOCATE_BYTES);
        self.vlog.allocate(*allocated, target - *allocated)?;
        *allocated = target;
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.buffers[0].capacity()
    }

    /// Applies `ops` as one unit and fills `seqs` (one per op) with their
    /// sequence numbers. Returns when the unit is acknowledged: its frame is
    /// in the key log (and, in sync mode, durable). After a crash either all
    /// of it or none of it is there.
    ///
    /// With `wait == false` it returns [`StorageError::WouldBlock`] instead
    /// of waiting for a free buffer, for a record too large for a buffer
    /// (which needs a write of its own) and in sync durability (which needs
    /// an msync); nothing is committed then.
    pub(crate) fn write(
        &self,
        ops: &[WriteOp<'_>],
        epoch: Option<u64>,
        acks: &mut [WriteAck],
        wait: bool,
    ) -> Result<()> {
        assert_eq!(ops.len(), acks.len(), "one acknowledgement per operation");
        self.validate(ops)?;
        let needs_io =
            self.shared.durability == Durability::Sync || ops.iter().any(|op| self.is_large(op));
        if !wait && needs_io {
            return Err(StorageError::WouldBlock);
        }
        let mut st = self.state.lock();
        self.check_writable(&st, epoch)?;
        let mut scratch = st.scratch.pop().unwrap_or_default();
        let result = self.write_locked(&mut st, ops, epoch, acks, wait, &mut scratch);
        st.scratch.push(scratch);
        let keylog_end = result?;
        drop(st);
        if self.shared.durability == Durability::Sync {
            self.commit.wait_durable(self, keylog_end)?;
        }
        Ok(())
    }

    fn is_large(&self, op: &WriteOp<'_>) -> bool {
        match op {
            WriteOp::Put { key, value } => {
                record::value_record_len(key.len(), value.len()) > self.capacity()
            }
            WriteOp::Delete { .. } => false,
        }
    }

    fn write_locked(
        &self,
        st: &mut MutexGuard<'_, State>,
        ops: &[WriteOp<'_>],
        epoch: Option<u64>,
        acks: &mut [WriteAck],
        wait: bool,
        scratch: &mut Scratch,
    ) -> Result<u64> {
        scratch.frame.begin();
        scratch.large.clear();
        let max_seq = match self.stage(st, ops, acks, wait, scratch) {
            Ok(max_seq) => max_seq,
            Err(e) => {
                abandon_large(st, &scratch.large);
                return Err(e);
            }
        };
        if !scratch.large.is_empty() {
            let written = MutexGuard::unlocked(st, || self.write_large(ops, &scratch.large));
            release_large(st, &scratch.large);
            written?;
        }
        // The lock may have been released while waiting for a buffer or a
        // large write: check again so that a fenced or poisoned writer
        // commits nothing.
        self.check_writable(st, epoch)?;
        let frame = scratch.frame.finish();
        let end = st.keylog.append(frame, max_seq).map_err(|e| {
            let err = StorageError::io(
                format!("appending to the key log of partition {}", self.id),
                e,
            );
            self.shared.poison(&err);
            err
        })?;
        for op in ops {
            match op {
                WriteOp::Put { value, .. } => {
                    self.counters.puts.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .value_bytes
                        .fetch_add(value.len() as u64, Ordering::Relaxed);
                }
                WriteOp::Delete { .. } => {
                    self.counters.deletes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(end)
    }

    /// Places every op of the batch under the lock: small records are copied
    /// into the active buffer, large ones get a region (written later, in
    /// `scratch.large`), and every entry goes into the frame being built.
    /// Returns the highest sequence number handed out.
    fn stage(
        &self,
        st: &mut MutexGuard<'_, State>,
        ops: &[WriteOp<'_>],
        acks: &mut [WriteAck],
        wait: bool,
        scratch: &mut Scratch,
    ) -> Result<u64> {
        let mut max_seq = 0;
        for (i, op) in ops.iter().enumerate() {
            let (kind, value_offset, value_len) = match *op {
                WriteOp::Put { key, value } => {
                    let (offset, seq) = if self.is_large(op) {
                        let len = record::value_record_len(key.len(), value.len());
                        let region = self.reserve_large(st, len);
                        let seq = self.shared.next_seq();
                        let offset = region.start;
                        scratch.large.push(LargeWrite { region, seq });
                        (offset, seq)
                    } else {
                        self.copy_into_buffer(st, key, value, wait)?
                    };
                    acks[i] = WriteAck { seq, offset };
                    (EntryKind::Put, offset, value.len() as u32)
                }
                WriteOp::Delete { .. } => {
                    acks[i] = WriteAck {
                        seq: self.shared.next_seq(),
                        offset: 0,
                    };
                    (EntryKind::Delete, 0, 0)
                }
            };
            max_seq = max_seq.max(acks[i].seq);
            scratch.frame.push(&KeyEntry {
                kind,
                seq: acks[i].seq,
                value_offset,
                value_len,
                key: op.key(),
            });
        }
        Ok(max_seq)
    }

    fn validate(&self, ops: &[WriteOp<'_>]) -> Result<()> {
        let limits = self.shared.limits;
        let mut frame_bytes = record::FRAME_HEADER_BYTES;
        for op in ops {
            let key = op.key();
            if key.is_empty() {
                return Err(StorageError::EmptyKey);
            }
            if key.len() > limits.max_key_bytes {
                return Err(StorageError::TooLarge {
                    what: "key",
                    len: key.len(),
                    max: limits.max_key_bytes,
                });
            }
            if let WriteOp::Put { value, .. } = op
                && value.len() > limits.max_value_bytes
            {
                return Err(StorageError::TooLarge {
                    what: "value",
                    len: value.len(),
                    max: limits.max_value_bytes,
                });
            }
            frame_bytes += record::ENTRY_HEADER_BYTES + key.len();
        }
        let max_frame = self.shared.keylog_chunk_bytes;
        if record::frame_len(frame_bytes - record::FRAME_HEADER_BYTES) > max_frame {
            return Err(StorageError::TooLarge {
                what: "batch key-log frame",
                len: frame_bytes,
                max: max_frame,
            });
        }
        Ok(())
    }

    pub(crate) fn check_writable(&self, st: &State, epoch: Option<u64>) -> Result<()> {
        self.shared.check_writable()?;
        if st.closing {
            return Err(StorageError::ShuttingDown);
        }
        if let Some(yours) = epoch {
            let current = self.shared.epoch.load(Ordering::Acquire);
            if yours != current {
                return Err(StorageError::Fenced { yours, current });
            }
        }
        Ok(())
    }

    /// Copies one record into the active buffer, switching buffers (and
    /// waiting for a free one) when it does not fit. Returns its value-log
    /// offset and sequence number.
    fn copy_into_buffer(
        &self,
        st: &mut MutexGuard<'_, State>,
        key: &[u8],
        value: &[u8],
        wait: bool,
    ) -> Result<(u64, u64)> {
        let len = record::value_record_len(key.len(), value.len());
        let (slot, at) = self.reserve_in_buffer(st, len, wait)?;
        let seq = self.shared.next_seq();
        let buffer = &self.buffers[slot];
        // SAFETY: bytes past the fill of the active buffer are touched by no
        // one but the lock holder (readers stop at the fill, the flusher only
        // takes sealed buffers).
        let dst = unsafe { buffer.data_mut(at, len) };
        record::encode_value_record(dst, seq, key, value);
        let Slot::Filling { base, fill, .. } = &mut st.slots[slot] else {
            unreachable!("reserve_in_buffer returns a filling buffer")
        };
        *fill += len as u64;
        buffer.set_fill(*fill);
        Ok((*base + at as u64, seq))
    }

    fn reserve_in_buffer(
        &self,
        st: &mut MutexGuard<'_, State>,
        len: usize,
        wait: bool,
    ) -> Result<(usize, usize)> {
        loop {
            if let Some(active) = st.active() {
                if let Slot::Filling { fill, .. } = st.slots[active]
                    && fill as usize + len <= self.capacity()
                {
                    return Ok((active, fill as usize));
                }
                self.seal(st, active);
            }
            if let Some(free) = (0..2).find(|&i| st.slots[i] == Slot::Free) {
                let base = st.next_base;
                self.buffers[free].write_header(Header {
                    state: BufferState::Filling,
                    base,
                    fill: 0,
                });
                st.slots[free] = Slot::Filling {
                    base,
                    fill: 0,
                    synced: 0,
                };
                continue;
            }
            self.shared.check_writable()?;
            if st.closing {
                return Err(StorageError::ShuttingDown);
            }
            if !wait {
                return Err(StorageError::WouldBlock);
            }
            self.buffer_freed.wait(st);
        }
    }

    /// Seals the buffer in `slot`: pads its last block with zeros, queues it
    /// for the flusher, and moves `next_base` past it.
    pub(crate) fn seal(&self, st: &mut State, slot: usize) {
        let Slot::Filling { base, fill, synced } = st.slots[slot] else {
            return;
        };
        let buffer = &self.buffers[slot];
        if fill == 0 {
            buffer.set_state(BufferState::Free);
            st.slots[slot] = Slot::Free;
            st.next_base = base;
            return;
        }
        // SAFETY: the padding lies past the fill, which no one but the lock
        // holder touches; the returned slice is dropped at once.
        let padded = unsafe { buffer.padded_records(fill) }.len() as u64;
        buffer.set_state(BufferState::Sealed);
        st.slots[slot] = Slot::Sealed { base, fill, synced };
        st.next_base = base + padded;
        st.flush_queue.push_back(slot);
        self.flush_wanted.notify_one();
    }

    /// Reserves an aligned region for a record too large for a buffer.
    fn reserve_large(&self, st: &mut State, len: usize) -> Range<u64> {
        if let Some(active) = st.active() {
            self.seal(st, active);
        }
        let region = st.next_base..st.next_base + align_up(len as u64);
        st.next_base = region.end;
        st.large_in_flight.push(region.clone());
        region
    }

    /// Writes the large records of a batch, each in its own aligned write
    /// (then fdatasync in sync mode). Runs without the partition lock.
    fn write_large(&self, ops: &[WriteOp<'_>], large: &[LargeWrite]) -> Result<()> {
        let large_puts = ops.iter().filter_map(|op| match *op {
            WriteOp::Put { key, value } if self.is_large(op) => Some((key, value)),
            _ => None,
        });
        for ((key, value), write) in large_puts.zip(large) {
            let (offset, seq) = (write.region.start, write.seq);
            let len = record::value_record_len(key.len(), value.len());
            let mut buf = AlignedBuf::zeroed(len);
            record::encode_value_record(&mut buf, seq, key, value);
            let padded = align_up(len as u64) as usize;
            let data = &buf.spare_aligned_mut()[..padded];
            let result = self
                .ensure_vlog_allocated(offset + padded as u64)
                .and_then(|()| self.vlog.write_at(data, offset))
                .and_then(|()| {
                    if self.shared.durability == Durability::Sync {
                        self.vlog.sync_data()
                    } else {
                        Ok(())
                    }
                });
            if let Err(e) = result {
                let err = StorageError::io(
                    format!(
                        "writing a {len}-byte record to the value log of partition {} at {offset}",
                        self.id
                    ),
                    e,
                );
                self.shared.poison(&err);
                return Err(err);
            }
            self.counters.large_writes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Gives up the regions an unfinished batch reserved and will never write,
/// so that they no longer hold the committed end below them. A region that
/// nothing was placed after is handed back to the next reservation; one
/// followed by other data stays a hole no key-log frame points at.
fn abandon_large(st: &mut State, large: &[LargeWrite]) {
    for write in large.iter().rev() {
        if st.active().is_none() && st.next_base == write.region.end {
            st.next_base = write.region.start;
        }
    }
    release_large(st, large);
}

/// Forgets the regions of `large` as in flight (written or abandoned).
fn release_large(st: &mut State, large: &[LargeWrite]) {
    if !large.is_empty() {
        st.large_in_flight
            .retain(|r| !large.iter().any(|l| l.region == *r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::OsDisk;
    use crate::uring::IoEngineKind;

    fn state() -> (tempfile::TempDir, State) {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = OsDisk::new(IoEngineKind::Psync);
        let (keylog, _) =
            KeyLog::open(&disk, &dir.path().join("key.log"), 1 << 20).expect("key log");
        (dir, State::new(keylog, [Slot::Free, Slot::Free], 8192))
    }

    /// What a batch leaves when an op fails after two large puts reserved
    /// their regions.
    fn reserve(st: &mut State) -> Vec<LargeWrite> {
        let large = vec![
            LargeWrite {
                region: 8192..16384,
                seq: 1,
            },
            LargeWrite {
                region: 16384..32768,
                seq: 2,
            },
        ];
        for write in &large {
            st.large_in_flight.push(write.region.clone());
        }
        st.next_base = 32768;
        large
    }

    #[test]
    fn abandoned_large_regions_are_handed_back() {
        let (_dir, mut st) = state();
        let large = reserve(&mut st);
        assert_eq!(st.committed_end(), 8192);
        abandon_large(&mut st, &large);
        assert!(st.large_in_flight.is_empty());
        assert_eq!(st.next_base, 8192, "nothing followed them: reused");
        assert_eq!(st.active(), None);
    }

    #[test]
    fn abandoned_large_regions_stop_holding_back_the_committed_end() {
        let (_dir, mut st) = state();
        let large = reserve(&mut st);
        // Another op of the batch opened a buffer after them.
        st.slots[1] = Slot::Filling {
            base: 32768,
            fill: 100,
            synced: 0,
        };
        assert_eq!(st.committed_end(), 8192);
        abandon_large(&mut st, &large);
        assert!(st.large_in_flight.is_empty());
        assert_eq!(st.next_base, 32768);
        assert_eq!(st.active(), Some(1));
        assert_eq!(st.committed_end(), 32868);
    }
}
