//! The write path of a partition: a batch of operations is validated,
//! placed (small records into the active buffer, large ones into aligned
//! regions of their own), and committed by appending one key-log frame.

use std::ops::Range;
use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;
use splitkv_common::message::{WireError, WriteAck};
use splitkv_common::record::{self, EntryKind, FrameBuilder, KeyEntry};

use super::slot::Sealing;
use super::{Partition, PartitionState};
use crate::aligned::{AlignedBuf, align_up};
use crate::buffer::{BufferHeader, BufferState};
use crate::config::Durability;
use crate::error::{Result, StorageError};
use crate::node_state::NodeState;

/// One operation of a write batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The key (1 byte up to the configured limit).
        key: &'a [u8],
        /// The value (up to the configured limit; may be empty).
        value: &'a [u8],
        /// When this version expires (absolute Unix milliseconds; 0:
        /// never), kept in its key-log entry.
        expire_at_ms: u64,
    },
    /// Delete `key` (a tombstone in the key log).
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// The version of `key` with sequence number `version_seq` expired (an
    /// expire entry in the key log; a newer version of the key stays).
    Expire {
        /// The key.
        key: &'a [u8],
        /// Sequence number of the expired version.
        version_seq: u64,
    },
    /// Delete every key: a clear entry in the key log, which says that
    /// every record with a lower sequence number, in any partition, is gone.
    Clear,
    /// Garbage collection's copy of version `seq` of `key`: its record
    /// again, at the head of the partition's value log, logged as a put
    /// entry with the version's own sequence number (a relocation: the
    /// same version, further on in the same value log). Only the
    /// partition's garbage collection writes these;
    /// [`StorageEngine::write`](crate::StorageEngine::write) refuses them.
    Relocate {
        /// The key.
        key: &'a [u8],
        /// The version's value.
        value: &'a [u8],
        /// The version's sequence number.
        seq: u64,
        /// The version's expiry (absolute Unix milliseconds; 0: never).
        expire_at_ms: u64,
    },
}

impl<'a> WriteOp<'a> {
    /// The key (empty for a clear).
    fn key(&self) -> &'a [u8] {
        match *self {
            WriteOp::Put { key, .. }
            | WriteOp::Relocate { key, .. }
            | WriteOp::Delete { key }
            | WriteOp::Expire { key, .. } => key,
            WriteOp::Clear => &[],
        }
    }

    /// The key-log entry of this op, placed as `ack` says.
    fn entry(&self, ack: &WriteAck) -> KeyEntry<'a> {
        let (kind, value_offset, value_len, expire_at_ms) = match *self {
            WriteOp::Put {
                value,
                expire_at_ms,
                ..
            }
            | WriteOp::Relocate {
                value,
                expire_at_ms,
                ..
            } => (EntryKind::Put, ack.offset, value.len() as u32, expire_at_ms),
            WriteOp::Delete { .. } => (EntryKind::Delete, 0, 0, 0),
            WriteOp::Expire { version_seq, .. } => (EntryKind::Expire { version_seq }, 0, 0, 0),
            WriteOp::Clear => (EntryKind::Clear, 0, 0, 0),
        };
        KeyEntry {
            kind,
            seq: ack.seq,
            value_offset,
            value_len,
            expire_at_ms,
            key: self.key(),
        }
    }
}

/// Why a write did not complete.
pub(super) enum Stall {
    /// It would have to wait (for a free buffer, a write of its own, or a
    /// sync) and was asked not to; nothing was committed.
    MustWait,
    /// It failed.
    Failed(StorageError),
}

impl From<StorageError> for Stall {
    fn from(e: StorageError) -> Self {
        Stall::Failed(e)
    }
}

/// Reusable per-write scratch space.
#[derive(Default)]
pub(super) struct Scratch {
    frame: FrameBuilder,
    /// Large records to write outside the lock.
    large: Vec<LargeWrite>,
    /// The first sequence number the batch took, while it is noted in
    /// [`PartitionState::uncommitted_seqs`].
    first_seq: Option<u64>,
}

/// A record too large for a buffer, written in an aligned region of its own.
/// The batch's large puts, in order, pair up with these in order.
struct LargeWrite {
    /// Its region of the value log (aligned).
    region: Range<u64>,
    seq: u64,
}

impl Partition {
    /// Applies `ops` as one unit, waiting as long as it takes, and fills
    /// `acks` (one per op). Returns when the unit is acknowledged: its frame
    /// is in the key log (and, in sync durability, durable). After a crash
    /// either all of it or none of it is there.
    pub(crate) fn write(
        &self,
        ops: &[WriteOp<'_>],
        epoch: Option<u64>,
        acks: &mut [WriteAck],
    ) -> Result<()> {
        self.validate(ops)?;
        let end = match self.apply(ops, epoch, acks, true) {
            Ok(end) => end,
            Err(Stall::Failed(e)) => return Err(e),
            Err(Stall::MustWait) => unreachable!("a write that may wait never stalls"),
        };
        self.durable_if_sync(end)
    }

    /// Applies validated `ops` if that needs no waiting: returns the
    /// key-log end after its frame, or `None` (having committed nothing)
    /// where it would have to wait for a free buffer, a record too large for
    /// a buffer, or (in sync durability) a sync.
    pub(super) fn try_apply(
        &self,
        ops: &[WriteOp<'_>],
        epoch: Option<u64>,
        acks: &mut [WriteAck],
    ) -> Result<Option<u64>> {
        if self.node.durability == Durability::Sync || ops.iter().any(|op| self.is_large(op)) {
            return Ok(None);
        }
        match self.apply(ops, epoch, acks, false) {
            Ok(end) => Ok(Some(end)),
            Err(Stall::MustWait) => Ok(None),
            Err(Stall::Failed(e)) => Err(e),
        }
    }

    /// Applies validated `ops` and returns the key-log end after their
    /// frame; the frame is not yet synced. Without `may_wait` it stalls
    /// (committing nothing) instead of waiting for a free buffer.
    pub(super) fn apply(
        &self,
        ops: &[WriteOp<'_>],
        epoch: Option<u64>,
        acks: &mut [WriteAck],
        may_wait: bool,
    ) -> Result<u64, Stall> {
        assert_eq!(ops.len(), acks.len(), "one acknowledgement per operation");
        // Puts need room; deletes (which make room) and relocations (which
        // garbage collection writes into the reserve) do not ask.
        let put_bytes: u64 = ops
            .iter()
            .map(|op| match op {
                WriteOp::Put { key, value, .. } => {
                    record::value_record_len(key.len(), value.len()) as u64
                }
                _ => 0,
            })
            .sum();
        if put_bytes > 0 {
            self.node.space.check_put(put_bytes)?;
            // Over the dead-bytes bound a put waits for collection, on a
            // thread that may wait (the writer thread, or a caller's own).
            let usage = self.node.directory.node_usage();
            if self.node.dead_bound.exceeded(usage) {
                if !may_wait {
                    return Err(Stall::MustWait);
                }
                self.node.dead_bound.wait_if_exceeded(usage);
            }
        }
        let mut st = self.state.lock();
        self.check_writable(&st, epoch)?;
        let mut scratch = st.scratch.pop().unwrap_or_default();
        let result = self.apply_locked(&mut st, ops, epoch, acks, may_wait, &mut scratch);
        // Committed or given up: either way no longer under way.
        if let Some(first) = scratch.first_seq.take()
            && let Some(at) = st.uncommitted_seqs.iter().position(|&s| s == first)
        {
            st.uncommitted_seqs.swap_remove(at);
        }
        st.scratch.push(scratch);
        result
    }

    /// Checks `ops` against the limits: every key and value, and the size of
    /// the batch's key-log frame.
    pub(super) fn validate(&self, ops: &[WriteOp<'_>]) -> Result<()> {
        let limits = self.node.limits;
        let mut frame_bytes = record::FRAME_HEADER_BYTES;
        for op in ops {
            let key = op.key();
            if !matches!(op, WriteOp::Clear) {
                limits.check_key(key)?;
            }
            let mut expire_at_ms = 0;
            if let WriteOp::Put {
                value,
                expire_at_ms: at,
                ..
            }
            | WriteOp::Relocate {
                value,
                expire_at_ms: at,
                ..
            } = op
            {
                limits.check_value(value)?;
                expire_at_ms = *at;
            }
            frame_bytes += record::entry_len(key.len(), expire_at_ms);
        }
        let max_frame = self.node.keylog_chunk_bytes;
        if record::frame_len(frame_bytes - record::FRAME_HEADER_BYTES) > max_frame {
            return Err(StorageError::too_large(
                "batch key-log frame",
                frame_bytes,
                max_frame,
            ));
        }
        Ok(())
    }

    fn is_large(&self, op: &WriteOp<'_>) -> bool {
        match op {
            WriteOp::Put { key, value, .. } | WriteOp::Relocate { key, value, .. } => {
                record::value_record_len(key.len(), value.len()) > self.capacity()
            }
            WriteOp::Delete { .. } | WriteOp::Expire { .. } | WriteOp::Clear => false,
        }
    }

    fn check_writable(&self, st: &PartitionState, epoch: Option<u64>) -> Result<()> {
        self.node.check_writable()?;
        if st.closing {
            return Err(StorageError::shutting_down());
        }
        self.node.check_epoch(epoch)
    }

    fn apply_locked(
        &self,
        st: &mut MutexGuard<'_, PartitionState>,
        ops: &[WriteOp<'_>],
        epoch: Option<u64>,
        acks: &mut [WriteAck],
        may_wait: bool,
        scratch: &mut Scratch,
    ) -> Result<u64, Stall> {
        scratch.frame.begin();
        scratch.large.clear();
        let max_seq = match self.stage(st, ops, acks, may_wait, scratch) {
            Ok(max_seq) => max_seq,
            Err(e) => {
                abandon_large(st, &scratch.large);
                return Err(e);
            }
        };
        if !scratch.large.is_empty() {
            let written = MutexGuard::unlocked(st, || self.write_large(ops, &scratch.large));
            if written.is_err() {
                abandon_large(st, &scratch.large);
            } else {
                release_large(st, &scratch.large);
            }
            written?;
        }
        // The lock may have been released while waiting for a buffer or a
        // large write: check again so that a fenced or poisoned writer
        // commits nothing.
        self.check_writable(st, epoch)?;
        let frame = scratch.frame.finish();
        // A key log that found no room for its next chunk is left as it
        // was: this batch fails as disk full and the next one tries again.
        let end = st
            .keylog
            .append(frame, max_seq, ops.len() as u64)
            .map_err(|e| {
                self.fail_unless_full(
                    format!("appending to the key log of partition {}", self.id),
                    e,
                )
            })?;
        self.keylog_end.send_replace(end);
        // In key-log order, under the lock that orders the key log.
        for (op, ack) in ops.iter().zip(acks.iter()) {
            self.node.directory.apply(self.id, &op.entry(ack));
        }
        for op in ops {
            match op {
                WriteOp::Put { value, .. } => {
                    self.counters.puts.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .value_bytes
                        .fetch_add(value.len() as u64, Ordering::Relaxed);
                }
                WriteOp::Relocate { .. } => {
                    self.counters.relocations.fetch_add(1, Ordering::Relaxed);
                }
                WriteOp::Delete { .. } | WriteOp::Expire { .. } => {
                    self.counters.deletes.fetch_add(1, Ordering::Relaxed);
                }
                WriteOp::Clear => {
                    self.counters.clears.fetch_add(1, Ordering::Relaxed);
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
        st: &mut MutexGuard<'_, PartitionState>,
        ops: &[WriteOp<'_>],
        acks: &mut [WriteAck],
        may_wait: bool,
        scratch: &mut Scratch,
    ) -> Result<u64, Stall> {
        let mut max_seq = 0;
        for (i, op) in ops.iter().enumerate() {
            acks[i] = match *op {
                WriteOp::Put { key, value, .. } | WriteOp::Relocate { key, value, .. } => {
                    let fixed_seq = match *op {
                        WriteOp::Relocate { seq, .. } => Some(seq),
                        _ => None,
                    };
                    let (offset, seq) = if self.is_large(op) {
                        let len = record::value_record_len(key.len(), value.len());
                        let region = self.reserve_large(st, len);
                        let seq = fixed_seq
                            .unwrap_or_else(|| take_seq(&self.node, st, &mut scratch.first_seq));
                        let offset = region.start;
                        scratch.large.push(LargeWrite { region, seq });
                        (offset, seq)
                    } else {
                        self.copy_into_buffer(
                            st,
                            key,
                            value,
                            fixed_seq,
                            may_wait,
                            &mut scratch.first_seq,
                        )?
                    };
                    WriteAck { seq, offset }
                }
                WriteOp::Delete { .. } | WriteOp::Expire { .. } | WriteOp::Clear => WriteAck {
                    seq: take_seq(&self.node, st, &mut scratch.first_seq),
                    offset: 0,
                },
            };
            max_seq = max_seq.max(acks[i].seq);
            scratch.frame.push(&op.entry(&acks[i]));
        }
        Ok(max_seq)
    }

    /// Copies one record into the active buffer, switching buffers (and
    /// waiting for a free one) when it does not fit. Returns its value-log
    /// offset and sequence number: `fixed_seq` for a relocation, else the
    /// next one (see [`take_seq`]).
    fn copy_into_buffer(
        &self,
        st: &mut MutexGuard<'_, PartitionState>,
        key: &[u8],
        value: &[u8],
        fixed_seq: Option<u64>,
        may_wait: bool,
        first_seq: &mut Option<u64>,
    ) -> Result<(u64, u64), Stall> {
        let len = record::value_record_len(key.len(), value.len());
        let (slot, at, base) = self.reserve_in_buffer(st, len, may_wait)?;
        let seq = fixed_seq.unwrap_or_else(|| take_seq(&self.node, st, first_seq));
        let buffer = &self.buffers[slot];
        // SAFETY: bytes past the fill of the active buffer are touched by no
        // one but the lock holder (readers stop at the fill, the flusher only
        // takes sealed buffers).
        let dst = unsafe { buffer.data_mut(at, len) };
        record::encode_value_record(dst, seq, key, value);
        let fill = st.slots[slot].append(len as u64);
        buffer.set_fill(fill);
        Ok((base + at as u64, seq))
    }

    /// Finds room for `len` bytes: returns the active slot, the offset in
    /// its buffer, and its base.
    fn reserve_in_buffer(
        &self,
        st: &mut MutexGuard<'_, PartitionState>,
        len: usize,
        may_wait: bool,
    ) -> Result<(usize, usize, u64), Stall> {
        loop {
            if st.closing {
                return Err(StorageError::shutting_down().into());
            }
            if let Some(active) = st.active() {
                if let super::BufferSlot::Filling { base, fill, .. } = st.slots[active]
                    && fill + len as u64 <= self.buffer_room(base)
                {
                    return Ok((active, fill as usize, base));
                }
                self.seal(st, active);
            }
            if let Some(free) = st.slots.iter().position(super::BufferSlot::is_flushed) {
                let mut base = st.next_base;
                if self.vlog.segment_end(base) - base < len as u64 {
                    // What is left of the segment is padding.
                    base = self.vlog.segment_end(base);
                    st.next_base = base;
                }
                self.buffers[free].write_header(BufferHeader {
                    state: BufferState::Filling,
                    base,
                    fill: 0,
                });
                st.slots[free].open(base);
                continue;
            }
            self.node.check_writable()?;
            if let Some(context) = &st.flush_stalled {
                return Err(StorageError::from(WireError::DiskFull {
                    context: format!("{context} failed for want of space"),
                })
                .into());
            }
            if !may_wait {
                return Err(Stall::MustWait);
            }
            self.buffer_freed.wait(st);
        }
    }

    /// Seals the buffer in `slot`: pads its last block with zeros, queues it
    /// for the flusher, and moves `next_base` past it.
    pub(super) fn seal(&self, st: &mut PartitionState, slot: usize) {
        let buffer = &self.buffers[slot];
        match st.slots[slot].seal() {
            Sealing::Empty { base } => {
                buffer.set_state(BufferState::Free);
                st.next_base = base;
            }
            Sealing::Sealed { base, fill } => {
                // SAFETY: the padding lies past the fill, which no one but
                // the lock holder touches; the returned slice is dropped at
                // once.
                let padded = unsafe { buffer.padded_records(fill) }.len() as u64;
                buffer.set_state(BufferState::Sealed);
                st.next_base = base + padded;
                match &st.flush_queue {
                    // The queue holds as many entries as there are slots,
                    // and a slot is queued only here, once per cycle: this
                    // never waits. It fails only when the flusher has
                    // stopped after a failure; the buffer then stays sealed,
                    // served from its mapping and replayed by recovery.
                    Some(queue) => {
                        let _ = queue.send(slot);
                    }
                    None => debug_assert!(false, "nothing is sealed once the partition closes"),
                }
            }
        }
    }

    /// How many bytes a buffer that starts at `base` may hold: its
    /// capacity, or less where its segment ends first.
    fn buffer_room(&self, base: u64) -> u64 {
        (self.capacity() as u64).min(self.vlog.segment_end(base) - base)
    }

    /// Reserves an aligned region for a record too large for a buffer,
    /// inside one segment.
    fn reserve_large(&self, st: &mut PartitionState, len: usize) -> Range<u64> {
        if let Some(active) = st.active() {
            self.seal(st, active);
        }
        let len = align_up(len as u64);
        if st.next_base + len > self.vlog.segment_end(st.next_base) {
            st.next_base = self.vlog.segment_end(st.next_base);
        }
        let region = st.next_base..st.next_base + len;
        st.next_base = region.end;
        st.large_in_flight.push(region.clone());
        region
    }

    /// Writes the large records of a batch, each in its own aligned write
    /// (then fdatasync in sync mode). Runs without the partition lock.
    fn write_large(&self, ops: &[WriteOp<'_>], large: &[LargeWrite]) -> Result<()> {
        let large_puts = ops.iter().filter_map(|op| match *op {
            WriteOp::Put { key, value, .. } | WriteOp::Relocate { key, value, .. }
                if self.is_large(op) =>
            {
                Some((key, value))
            }
            _ => None,
        });
        for ((key, value), write) in large_puts.zip(large) {
            let (offset, seq) = (write.region.start, write.seq);
            let len = record::value_record_len(key.len(), value.len());
            let mut buf = AlignedBuf::zeroed(len);
            record::encode_value_record(&mut buf, seq, key, value);
            let padded = align_up(len as u64) as usize;
            let data = &buf.spare_aligned_mut()[..padded];
            let context = || {
                format!(
                    "writing a {len}-byte record to the value log of partition {} at {offset}",
                    self.id
                )
            };
            // A full disk fails this batch alone (its region is given up);
            // anything else, or a failed sync, poisons the node.
            self.vlog
                .write_at(data, offset)
                .map_err(|e| self.fail_unless_full(context(), e))?;
            if self.node.durability == Durability::Sync {
                self.vlog
                    .sync_data()
                    .map_err(|e| self.poison(context(), e))?;
            }
            self.counters.large_writes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Hands the batch being staged the node's next sequence number, noting
/// its first one in `st.uncommitted_seqs` (under the partition lock, as it
/// is taken) until the batch commits or gives up. Relocations keep their
/// versions' numbers and are not noted: only garbage-collection passes
/// write them, and a pass's checkpoint round starts after its copies.
fn take_seq(node: &NodeState, st: &mut PartitionState, first_seq: &mut Option<u64>) -> u64 {
    let seq = node.next_seq();
    if first_seq.is_none() {
        *first_seq = Some(seq);
        st.uncommitted_seqs.push(seq);
    }
    seq
}

/// Gives up the regions an unfinished batch reserved and will never write,
/// so that they no longer hold the committed end below them. A region that
/// nothing was placed after is handed back to the next reservation; one
/// followed by other data stays a hole no key-log frame points at.
fn abandon_large(st: &mut PartitionState, large: &[LargeWrite]) {
    for write in large.iter().rev() {
        if st.active().is_none() && st.next_base == write.region.end {
            st.next_base = write.region.start;
        }
    }
    release_large(st, large);
}

/// Forgets the regions of `large` as in flight (written or abandoned).
fn release_large(st: &mut PartitionState, large: &[LargeWrite]) {
    if !large.is_empty() {
        st.large_in_flight
            .retain(|r| !large.iter().any(|l| l.region == *r));
    }
}

#[cfg(test)]
mod tests {
    use super::super::BufferSlot;
    use super::*;
    use crate::disk::OsDisk;
    use crate::keylog::KeyLog;
    use crate::uring::IoEngineKind;

    fn state() -> (tempfile::TempDir, PartitionState) {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk: std::sync::Arc<dyn crate::disk::Disk> =
            std::sync::Arc::new(OsDisk::new(IoEngineKind::Psync));
        let (keylog, _) = KeyLog::open(&disk, dir.path(), 1 << 20).expect("key log");
        let st = PartitionState {
            slots: [BufferSlot::Flushed, BufferSlot::Flushed],
            next_base: 8192,
            large_in_flight: Vec::new(),
            keylog,
            flush_queue: None,
            closing: false,
            flush_stalled: None,
            uncommitted_seqs: Vec::new(),
            scratch: Vec::new(),
            checkpoints: super::super::Checkpoints::default(),
        };
        (dir, st)
    }

    /// What a batch leaves when an op fails after two large puts reserved
    /// their regions.
    fn reserve(st: &mut PartitionState) -> Vec<LargeWrite> {
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
        st.slots[1].open(32768);
        st.slots[1].append(100);
        assert_eq!(st.committed_end(), 8192);
        abandon_large(&mut st, &large);
        assert!(st.large_in_flight.is_empty());
        assert_eq!(st.next_base, 32768);
        assert_eq!(st.active(), Some(1));
        assert_eq!(st.committed_end(), 32868);
    }
}
