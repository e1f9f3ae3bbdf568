//! Moving data from the write buffers to the disk: the flusher thread
//! (sealed buffer → value log), closing, and the syncs of sync durability
//! and of [`StorageEngine::sync`](crate::StorageEngine::sync).
//!
//! The flusher is fed the slots the write path seals through a channel
//! bounded by the number of slots; it takes each `Sealed → Flushing`,
//! writes it, and marks it `Flushed`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::Partition;
use super::commit::Turn;
use crate::buffer::BufferState;
use crate::config::Durability;
use crate::error::{Result, is_out_of_space};
use crate::space::FLUSH_RETRY_MS;

/// Why a flush failed.
enum FlushFailure {
    /// The write found the disk full: it is retried.
    OutOfSpace(std::io::Error),
    /// Anything else: the node is poisoned.
    Other(std::io::Error),
}

impl Partition {
    /// Body of the partition's flusher thread: writes each sealed buffer to
    /// the value log at its base, then marks it flushed. In sync mode the
    /// value log is fdatasynced and the free state msynced before the buffer
    /// can be reused, so recovery never replays a stale buffer over newer
    /// data.
    ///
    /// A write that fails for want of space keeps the buffer sealed (still
    /// served to readers) and is retried every [`FLUSH_RETRY_MS`] while
    /// puts are refused as disk full; at close it is tried once more.
    /// Returns when the partition closes with nothing left to flush, or
    /// after any other failure (which poisons the node and leaves the buffer
    /// sealed, still served to readers and replayed by recovery).
    pub(super) fn run_flusher(&self, sealed: Receiver<usize>) {
        for slot in &sealed {
            if !self.flush_slot(slot) {
                break;
            }
        }
        // Whoever waits for a buffer must learn why none will come free.
        let _st = self.state.lock();
        self.buffer_freed.notify_all();
    }

    /// Flushes the sealed buffer in `slot`, retrying while the disk is
    /// full. Returns false once the node is poisoned (by this flush or
    /// another failure).
    fn flush_slot(&self, slot: usize) -> bool {
        let mut stalled = false;
        let flushed = loop {
            if self.node.poisoned() {
                break false;
            }
            let (base, fill) = self.state.lock().slots[slot].start_flush();
            let context = || {
                format!(
                    "writing a buffer of partition {} to the value log at offset {base}",
                    self.id
                )
            };
            match self.write_buffer(slot, base, fill) {
                Ok(padded) => {
                    self.counters.flushes.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .flushed_bytes
                        .fetch_add(padded as u64, Ordering::Relaxed);
                    let mut st = self.state.lock();
                    st.slots[slot].finish_flush();
                    st.flush_stalled = None;
                    self.buffer_freed.notify_all();
                    break true;
                }
                Err(FlushFailure::OutOfSpace(e)) => {
                    let mut st = self.state.lock();
                    st.slots[slot].abort_flush();
                    if st.closing && stalled {
                        drop(st);
                        self.poison(context(), e);
                        break false;
                    }
                    if !stalled {
                        stalled = true;
                        self.node.space.flush_stalled(&context());
                        st.flush_stalled = Some(context());
                        // Writers waiting for this buffer learn that puts
                        // are refused.
                        self.buffer_freed.notify_all();
                    }
                    if !st.closing {
                        self.buffer_freed
                            .wait_for(&mut st, Duration::from_millis(FLUSH_RETRY_MS));
                    }
                }
                Err(FlushFailure::Other(e)) => {
                    let mut st = self.state.lock();
                    st.slots[slot].abort_flush();
                    st.flush_stalled = None;
                    drop(st);
                    self.poison(context(), e);
                    break false;
                }
            }
        };
        if stalled {
            self.node.space.flush_unstalled();
        }
        flushed
    }

    /// Writes the buffer in `slot` (taken for flushing) to the value log
    /// and, in sync mode, makes it durable and marks it free on disk.
    /// Returns the bytes written; on failure the buffer is sealed again.
    fn write_buffer(&self, slot: usize, base: u64, fill: u64) -> Result<usize, FlushFailure> {
        let buffer = &self.buffers[slot];
        // SAFETY: a buffer that is flushing is written by no one but this
        // thread until it is marked flushed or sealed again.
        let data = unsafe { buffer.padded_records(fill) };
        let padded = data.len();
        let result = match self.vlog.write_at(data, base) {
            Err(e) if is_out_of_space(&e) => Err(FlushFailure::OutOfSpace(e)),
            written => written
                .map(|()| {
                    // Before the buffer is marked flushed: a reader that no
                    // longer finds these bytes in it finds them here.
                    self.node.recent.keep(self.id, base, data);
                })
                .and_then(|()| self.sync_if(|| self.vlog.sync_data()))
                .and_then(|()| {
                    buffer.set_state(BufferState::Free);
                    self.sync_if(|| buffer.sync_header())
                })
                .map_err(FlushFailure::Other),
        };
        if result.is_err() {
            buffer.set_state(BufferState::Sealed);
        }
        result.map(|()| padded)
    }

    fn sync_if(&self, op: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
        if self.node.durability == Durability::Sync {
            op()
        } else {
            Ok(())
        }
    }

    /// Starts closing: refuses new writes, seals the active buffer, tells
    /// the flusher that nothing more will be sealed, and wakes everyone who
    /// waits on the partition.
    pub(crate) fn begin_close(&self) {
        {
            let mut st = self.state.lock();
            st.closing = true;
            if let Some(active) = st.active() {
                self.seal(&mut st, active);
            }
            st.flush_queue = None;
            self.buffer_freed.notify_all();
        }
        self.queue.close();
    }

    /// Ends closing (after [`Partition::begin_close`]): waits for the writer
    /// thread to complete what was queued, then, unless the node refuses
    /// writes, for every sealed buffer to reach the value log and for
    /// everything to be durable, and finally for the flusher to stop.
    pub(crate) fn finish_close(&self) -> Result<()> {
        let writer = self.threads.lock().writer.take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        let result = if self.node.check_writable().is_ok() {
            self.wait_flushed().and_then(|()| self.sync())
        } else {
            Ok(())
        };
        let flusher = self.threads.lock().flusher.take();
        if let Some(flusher) = flusher {
            let _ = flusher.join();
        }
        result
    }

    /// Waits until every sealed buffer has reached the value log.
    fn wait_flushed(&self) -> Result<()> {
        let mut st = self.state.lock();
        while st.slots.iter().any(|slot| slot.awaits_flush()) {
            self.node.check_writable()?;
            self.buffer_freed.wait(&mut st);
        }
        Ok(())
    }

    /// Makes everything written so far durable, in either durability mode:
    /// the buffers' records and the key log through the group commit, then
    /// the value log (fdatasync).
    pub(crate) fn sync(&self) -> Result<()> {
        let target = self.state.lock().keylog.end();
        self.wait_durable(target)?;
        self.vlog
            .sync_data()
            .map_err(|e| self.poison(format!("syncing the value log of partition {}", self.id), e))
    }

    /// In sync durability, returns once the key log is durable up to
    /// `target`; in mmap durability at once.
    pub(super) fn durable_if_sync(&self, target: u64) -> Result<()> {
        if self.node.durability == Durability::Sync {
            self.wait_durable(target)
        } else {
            Ok(())
        }
    }

    /// Returns once the key log is durable up to `target` (and with it the
    /// records its frames point at), leading a round of syncs if no one
    /// else is.
    fn wait_durable(&self, target: u64) -> Result<()> {
        loop {
            match self.commit.turn(target, &self.node)? {
                Turn::Durable => return Ok(()),
                Turn::Lead { from } => {
                    let synced = self.sync_records(from);
                    self.commit.finish_round(synced.as_ref().ok().copied());
                    synced?;
                }
            }
        }
    }

    /// A group-commit round: msync of the buffers' unsynced records and of
    /// the key log from `from` to its current end, which it returns. (The
    /// value log is synced by the flusher before a buffer is reused, and by
    /// large writes before their frames are appended.)
    fn sync_records(&self, from: u64) -> Result<u64> {
        let (ranges, keylog) = {
            let mut st = self.state.lock();
            let ranges = [st.slots[0].take_unsynced(), st.slots[1].take_unsynced()];
            (ranges, st.keylog.snapshot())
        };
        let result = (|| {
            for (slot, range) in ranges.iter().enumerate() {
                if let Some(range) = range {
                    self.buffers[slot]
                        .sync_data(range.start as usize, (range.end - range.start) as usize)?;
                }
            }
            keylog.sync(from, keylog.end())
        })();
        result.map_err(|e| self.poison(format!("syncing partition {}", self.id), e))?;
        Ok(keylog.end())
    }
}
