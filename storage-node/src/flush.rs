//! Moving data from the write buffers to the disk: the flusher thread of a
//! partition (sealed buffer → value log) and, in sync mode, the group
//! commit that makes acknowledged writes durable.
//!
//! The group commit shares one round of msyncs among the writers of a
//! partition that wait for durability at the same time, which takes
//! several threads calling the engine at once. One server connection does
//! not give that: it awaits each write that has to wait (every write in
//! sync mode) before handling the next request, so its writes are synced
//! one by one; only writes of different connections (or threads) share a
//! sync.

use std::sync::atomic::Ordering;

use parking_lot::{Condvar, Mutex};

use crate::buffer::BufferState;
use crate::config::Durability;
use crate::error::{Result, StorageError};
use crate::partition::{Partition, Slot};

impl Partition {
    /// Body of the partition's flusher thread: writes each sealed buffer to
    /// the value log at its base, then marks it free. In sync mode the value
    /// log is fdatasynced and the free state msynced before the buffer can be
    /// reused, so recovery never replays a stale buffer over newer data.
    ///
    /// Returns when the partition closes with nothing left to flush, or after
    /// a failed write (which poisons the engine and leaves the buffer
    /// unflushed, still served to readers and replayed by recovery).
    pub(crate) fn run_flusher(&self) {
        self.flush_until_closed_or_poisoned();
        // Whoever waits for a buffer must learn why none will come free.
        let _st = self.state.lock();
        self.buffer_freed.notify_all();
    }

    fn flush_until_closed_or_poisoned(&self) {
        loop {
            let (slot, base, fill) = {
                let mut st = self.state.lock();
                loop {
                    if self.shared.poisoned() {
                        return;
                    }
                    if let Some(&slot) = st.flush_queue.front()
                        && let Slot::Sealed { base, fill, .. } = st.slots[slot]
                    {
                        break (slot, base, fill);
                    }
                    if st.closing {
                        return;
                    }
                    self.flush_wanted.wait(&mut st);
                }
            };
            let buffer = &self.buffers[slot];
            // SAFETY: a sealed buffer is written by no one but this thread
            // until it is freed below.
            let data = unsafe { buffer.padded_records(fill) };
            let padded = data.len();
            let result = self
                .ensure_vlog_allocated(base + padded as u64)
                .and_then(|()| self.vlog.write_at(data, base))
                .and_then(|()| self.sync_if(|| self.vlog.sync_data()))
                .and_then(|()| {
                    buffer.set_state(BufferState::Free);
                    self.sync_if(|| buffer.sync_header())
                });
            if let Err(e) = result {
                let err = StorageError::io(
                    format!(
                        "writing a buffer of partition {} to the value log at offset {base}",
                        self.id
                    ),
                    e,
                );
                buffer.set_state(BufferState::Sealed);
                self.shared.poison(&err);
                return;
            }
            self.counters.flushes.fetch_add(1, Ordering::Relaxed);
            self.counters
                .flushed_bytes
                .fetch_add(padded as u64, Ordering::Relaxed);
            let mut st = self.state.lock();
            st.slots[slot] = Slot::Free;
            st.flush_queue.pop_front();
            self.buffer_freed.notify_all();
        }
    }

    fn sync_if(&self, op: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
        if self.shared.durability == Durability::Sync {
            op()
        } else {
            Ok(())
        }
    }

    /// Starts closing: refuses new writes, seals the active buffer and wakes
    /// everyone who waits on the partition.
    pub(crate) fn begin_close(&self) {
        let mut st = self.state.lock();
        st.closing = true;
        if let Some(active) = st.active() {
            self.seal(&mut st, active);
        }
        self.flush_wanted.notify_all();
        self.buffer_freed.notify_all();
    }

    /// Waits until every sealed buffer has reached the value log.
    pub(crate) fn wait_flushed(&self) -> Result<()> {
        let mut st = self.state.lock();
        while !st.flush_queue.is_empty() {
            self.shared.check_writable()?;
            self.buffer_freed.wait(&mut st);
        }
        Ok(())
    }

    /// Makes everything written so far durable, in either durability mode:
    /// the buffers' records and the key log through the group commit, then
    /// the value log (fdatasync).
    pub(crate) fn sync(&self) -> Result<()> {
        let target = self.state.lock().keylog.end();
        self.commit.wait_durable(self, target)?;
        self.vlog.sync_data().map_err(|e| {
            let err =
                StorageError::io(format!("syncing the value log of partition {}", self.id), e);
            self.shared.poison(&err);
            err
        })
    }

    /// The group-commit leader's work: msync of the buffers' unsynced records
    /// and of the key log from `from` to its current end, which it returns.
    /// (The value log is synced by the flusher before a buffer is reused, and
    /// by large writes before their frames are appended.)
    fn sync_records(&self, from: u64) -> Result<u64> {
        let (ranges, keylog) = {
            let mut st = self.state.lock();
            let mut ranges = [None, None];
            for (slot, range) in ranges.iter_mut().enumerate() {
                if let Slot::Filling { fill, synced, .. } | Slot::Sealed { fill, synced, .. } =
                    &mut st.slots[slot]
                {
                    *range = Some((*synced, *fill));
                    *synced = *fill;
                }
            }
            (ranges, st.keylog.snapshot())
        };
        let result = (|| {
            for (slot, range) in ranges.iter().enumerate() {
                if let Some((lo, hi)) = *range {
                    self.buffers[slot].sync_data(lo as usize, (hi - lo) as usize)?;
                }
            }
            keylog.sync(from, keylog.end())
        })();
        result.map_err(|e| {
            let err = StorageError::io(format!("syncing partition {}", self.id), e);
            self.shared.poison(&err);
            err
        })?;
        Ok(keylog.end())
    }
}

/// Group commit for sync mode: a writer waiting for durability either finds
/// its frame already synced, or becomes the leader and syncs everything
/// appended so far on behalf of all waiters, or waits for the leader.
pub(crate) struct GroupCommit {
    state: Mutex<CommitState>,
    done: Condvar,
}

struct CommitState {
    /// Key-log position below which everything is durable.
    synced_end: u64,
    leader_active: bool,
}

impl GroupCommit {
    pub(crate) fn new(synced_end: u64) -> Self {
        Self {
            state: Mutex::new(CommitState {
                synced_end,
                leader_active: false,
            }),
            done: Condvar::new(),
        }
    }

    /// Returns once the key log is durable up to `target` (and with it the
    /// records its frames point at).
    pub(crate) fn wait_durable(&self, partition: &Partition, target: u64) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if st.synced_end >= target {
                return Ok(());
            }
            partition.shared.check_writable()?;
            if st.leader_active {
                self.done.wait(&mut st);
                continue;
            }
            st.leader_active = true;
            let from = st.synced_end;
            drop(st);
            let result = partition.sync_records(from);
            st = self.state.lock();
            st.leader_active = false;
            if let Ok(end) = result {
                st.synced_end = st.synced_end.max(end);
            }
            self.done.notify_all();
            result?;
        }
    }
}
