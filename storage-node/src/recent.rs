//! The value-log bytes of the latest flushes, kept in memory for reads.
//!
//! A write buffer reaches the value log with O_DIRECT, which leaves nothing
//! in the page cache: without this, the first read of a record written a
//! moment ago would wait for the disk, and so would a window's range read
//! of it. Each flush hands the bytes it wrote here (its records and the
//! zeros that pad them to a block; one copy, on the flusher's thread)
//! before its buffer can be reused, so a record is always in a write
//! buffer, here, or on the disk when a reader looks. The oldest flushes of
//! any partition make room for new ones. The bound counts the memory the
//! copies take (their buffers' capacity, not only the bytes in them);
//! besides it, a [`BufferPool`] keeps the buffers of a few dropped flushes
//! for the next copies, so that copying rarely faults fresh pages in, and
//! a copy a reader is still copying out of lives until it is done.
//!
//! What is held is exactly what a flush wrote at those offsets, and no
//! offset a flush wrote is written again, so an entry is never stale. A
//! segment that garbage collection freed is not served from here: the
//! reader checks for that first, as it does before reading the disk.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::aligned::{BufferPool, PooledBuf};

/// Buffers of dropped flushes kept for the next copies.
const SPARE_BUFFERS_KEPT: usize = 4;

/// Bounded copies of the latest flushes of every partition.
pub(crate) struct RecentFlushes {
    capacity_bytes: u64,
    state: RwLock<State>,
    /// Buffers for the copies; a dropped copy's buffer goes back to it.
    buffers: Arc<BufferPool>,
    hits: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Per partition: a flush's value-log offset and the bytes it wrote.
    by_partition: Vec<BTreeMap<u64, Arc<PooledBuf>>>,
    /// Every flush held, oldest first, as (partition, offset).
    order: VecDeque<(usize, u64)>,
    /// Capacity of the buffers of the flushes held.
    bytes: u64,
}

/// Where a value-log offset stands among the flushes held.
enum HeldAt {
    /// In the flush held at this offset.
    In(u64, Arc<PooledBuf>),
    /// In none; the next flush held starts here, if any does.
    Before(Option<u64>),
}

impl RecentFlushes {
    /// Holds at most `capacity_bytes` of `partitions` partitions' flushes
    /// (0: none).
    pub(crate) fn new(partitions: usize, capacity_bytes: u64) -> Self {
        Self {
            capacity_bytes,
            state: RwLock::new(State {
                by_partition: vec![BTreeMap::new(); partitions],
                ..State::default()
            }),
            buffers: BufferPool::new(SPARE_BUFFERS_KEPT),
            hits: AtomicU64::new(0),
        }
    }

    /// Keeps a copy of `written`, the bytes a flush wrote to `partition`'s
    /// value log at `offset`, dropping the oldest flushes held to make
    /// room. A flush larger than the whole bound is not kept.
    pub(crate) fn keep(&self, partition: usize, offset: u64, written: &[u8]) {
        if written.is_empty() || written.len() as u64 > self.capacity_bytes {
            return;
        }
        // Copied before the lock: under it only the maps change.
        let mut copy = self.buffers.take(written.len());
        copy.copy_from_slice(written);
        let copy_bytes = copy.capacity() as u64;
        let mut dropped = Vec::new();
        {
            let mut st = self.state.write();
            let Some(held) = st.by_partition.get_mut(partition) else {
                return;
            };
            match held.insert(offset, Arc::new(copy)) {
                Some(old) => {
                    st.bytes -= old.capacity() as u64;
                    dropped.push(old);
                }
                None => st.order.push_back((partition, offset)),
            }
            st.bytes += copy_bytes;
            while st.bytes > self.capacity_bytes {
                let Some((oldest_partition, oldest_offset)) = st.order.pop_front() else {
                    break;
                };
                if let Some(old) = st.by_partition[oldest_partition].remove(&oldest_offset) {
                    st.bytes -= old.capacity() as u64;
                    dropped.push(old);
                }
            }
        }
        // Back to the pool (or freed) after the lock is released; a copy a
        // reader still holds goes back when the reader is done with it.
        drop(dropped);
    }

    /// Copies `range` of `partition`'s value log into `dst` if one flush
    /// held holds all of it; returns whether one did. Counts a read
    /// answered.
    pub(crate) fn copy_out(&self, partition: usize, range: Range<u64>, dst: &mut [u8]) -> bool {
        let HeldAt::In(offset, written) = self.lookup(partition, range.start) else {
            return false;
        };
        let from = (range.start - offset) as usize;
        let to = range.end.saturating_sub(offset) as usize;
        if to > written.len() || to.checked_sub(from) != Some(dst.len()) {
            return false;
        }
        dst.copy_from_slice(&written[from..to]);
        self.hits.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Copies `partition`'s value log from `at` into the start of `dst`, as
    /// far as the flush held that covers `at` goes (at most `dst.len()`
    /// bytes), and counts a read answered. When no flush held covers
    /// `at`, copies nothing and tells where the next one held starts.
    pub(crate) fn copy_from(&self, partition: usize, at: u64, dst: &mut [u8]) -> Copied {
        let (offset, written) = match self.lookup(partition, at) {
            HeldAt::In(offset, written) => (offset, written),
            HeldAt::Before(next) => return Copied::Nothing { next },
        };
        let from = (at - offset) as usize;
        let len = dst.len().min(written.len() - from);
        dst[..len].copy_from_slice(&written[from..from + len]);
        self.hits.fetch_add(1, Ordering::Relaxed);
        Copied::Bytes(len)
    }

    /// Where `at` stands among `partition`'s flushes held, under one read
    /// lock; the copy itself is made by the caller without it.
    fn lookup(&self, partition: usize, at: u64) -> HeldAt {
        if self.capacity_bytes == 0 {
            return HeldAt::Before(None);
        }
        let st = self.state.read();
        let Some(held) = st.by_partition.get(partition) else {
            return HeldAt::Before(None);
        };
        if let Some((&offset, written)) = held.range(..=at).next_back()
            && at - offset < written.len() as u64
        {
            return HeldAt::In(offset, Arc::clone(written));
        }
        HeldAt::Before(held.range(at..).next().map(|(&offset, _)| offset))
    }

    /// Reads answered from here, and the bytes the copies held take.
    pub(crate) fn stats(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.state.read().bytes)
    }
}

/// What [`RecentFlushes::copy_from`] copied.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Copied {
    /// This many bytes, from a flush held.
    Bytes(usize),
    /// Nothing: no flush held covers the offset; the next one held starts
    /// here, if any does.
    Nothing { next: Option<u64> },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(recent: &RecentFlushes, partition: usize, range: Range<u64>) -> Option<Vec<u8>> {
        let mut dst = vec![0; (range.end - range.start) as usize];
        recent.copy_out(partition, range, &mut dst).then_some(dst)
    }

    #[test]
    fn a_range_inside_one_flush_is_copied_out_and_nothing_else_is() {
        let recent = RecentFlushes::new(2, 1 << 20);
        let records: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        recent.keep(1, 8192, &records);
        assert_eq!(
            read(&recent, 1, 8192 + 10..8192 + 20),
            Some(records[10..20].to_vec())
        );
        assert_eq!(read(&recent, 1, 8192..8192 + 4096), Some(records.clone()));
        // Past its end, before its start, in another partition.
        assert_eq!(read(&recent, 1, 8192 + 4000..8192 + 4097), None);
        assert_eq!(read(&recent, 1, 8000..8200), None);
        assert_eq!(read(&recent, 0, 8192..8200), None);
        assert_eq!(read(&recent, 7, 8192..8200), None);
        assert_eq!(recent.stats(), (2, 4096));
    }

    #[test]
    fn a_run_is_copied_flush_by_flush_and_a_gap_names_the_next_flush() {
        let recent = RecentFlushes::new(1, 1 << 20);
        recent.keep(0, 4096, &[1; 4096]);
        recent.keep(0, 8192, &[2; 4096]);
        recent.keep(0, 16384, &[3; 4096]);
        let mut dst = vec![0; 10_000];
        assert_eq!(recent.copy_from(0, 6144, &mut dst), Copied::Bytes(2048));
        assert!(dst[..2048].iter().all(|&b| b == 1));
        assert_eq!(recent.copy_from(0, 8192, &mut dst), Copied::Bytes(4096));
        assert!(dst[..4096].iter().all(|&b| b == 2));
        assert_eq!(
            recent.copy_from(0, 16384, &mut dst[..100]),
            Copied::Bytes(100)
        );
        assert_eq!(
            recent.copy_from(0, 12288, &mut dst),
            Copied::Nothing { next: Some(16384) }
        );
        assert_eq!(
            recent.copy_from(0, 0, &mut dst),
            Copied::Nothing { next: Some(4096) }
        );
        assert_eq!(
            recent.copy_from(0, 20480, &mut dst),
            Copied::Nothing { next: None }
        );
        assert_eq!(recent.stats().0, 3);
    }

    #[test]
    fn the_oldest_flushes_make_room_and_the_bound_holds() {
        let recent = RecentFlushes::new(2, 10_000);
        for i in 0..10u64 {
            recent.keep((i % 2) as usize, i * 4096, &[i as u8; 4096]);
            assert!(recent.stats().1 <= 10_000);
        }
        // Two flushes fit: the last two.
        assert_eq!(recent.stats().1, 8192);
        assert_eq!(read(&recent, 1, 9 * 4096..9 * 4096 + 1), Some(vec![9]));
        assert_eq!(read(&recent, 0, 8 * 4096..8 * 4096 + 1), Some(vec![8]));
        assert_eq!(read(&recent, 1, 7 * 4096..7 * 4096 + 1), None);
    }

    #[test]
    fn a_zero_bound_keeps_nothing_and_an_oversized_flush_is_not_kept() {
        let off = RecentFlushes::new(1, 0);
        off.keep(0, 0, &[1; 16]);
        assert_eq!(read(&off, 0, 0..1), None);
        let small = RecentFlushes::new(1, 100);
        small.keep(0, 0, &[1; 101]);
        assert_eq!(read(&small, 0, 0..1), None);
        assert_eq!(small.stats(), (0, 0));
    }
}
