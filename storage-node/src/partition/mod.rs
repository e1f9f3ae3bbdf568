//! One partition: its value log, its two write buffers, its key log, and
//! everything that moves bytes between them. Nothing outside this module
//! tree touches a partition's state; the engine calls its methods.
//!
//! - [`slot`]: the cycle of a write buffer (`Filling → Sealed → Flushing →
//!   Flushed`), with asserted transitions.
//! - [`writer`]: the write path, under the partition lock.
//! - [`queue`]: writes that cannot finish at once wait here, in arrival
//!   order, for the partition's writer thread.
//! - [`flusher`]: the flusher thread (sealed buffer → value log), closing,
//!   and syncing.
//! - [`commit`]: the group commit of sync durability.
//! - [`reader`]: point reads, range reads and key-log exports.
//!
//! **Write path.** Under the partition lock a put is copied into the active
//! buffer, its key-log frame is appended to the mapped key log, and only
//! then is it acknowledged. The frame is the commit point: recovery trusts
//! exactly the frames that verify. Because frames are appended under the
//! lock, every frame before an acknowledged one is complete, so a torn frame
//! can only follow unacknowledged writes.
//!
//! **Value-log layout.** The value log is a sequence of fixed-size segment
//! files ([`value_log`]); no record and no buffer's range straddles two.
//! Each buffer covers `[base, base + fill)` of the value log, with `base`
//! aligned to 4 KiB. A full buffer is sealed (its range
//! padded to 4 KiB) and written by the flusher at `base` while writes go on
//! into the other buffer. A record larger than a buffer gets an aligned
//! region of its own after the sealed buffer, written by the writing
//! thread; its frame is appended when that write has completed.
//!
//! **Committed end.** Every byte of the value log below the committed end
//! belongs to a complete record or to padding; range reads never go past it.

mod checkpointing;
mod commit;
mod flusher;
mod gc;
mod queue;
mod reader;
mod slot;
pub(crate) mod value_log;
mod writer;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};
use splitkv_common::message::PartitionReport;

use crate::buffer::WriteBuffer;
use crate::checkpoint::Checkpoint;
use crate::error::{Result, StorageError};
use crate::keylog::KeyLog;
use crate::node_state::NodeState;

pub(crate) use checkpointing::{CheckpointRound, tombstone_floor_seq};
pub use queue::{MAX_QUEUED_WRITES_PER_PARTITION, OwnedOp, OwnedWrite, Submitted, WriteCompletion};
pub use reader::{ExportCursor, ExportProgress, MAX_RANGE_BYTES, RangeRead, RecordBytes};
pub(crate) use slot::BufferSlot;
pub use writer::WriteOp;

use commit::GroupCommit;
use queue::WriteQueue;
use value_log::ValueLog;
use writer::Scratch;

/// Sealed buffers waiting for the flusher: at most both buffers of the
/// partition, so queueing one never blocks the sealing writer.
const FLUSH_QUEUE_SLOTS: usize = 2;

/// What recovery hands over to open a partition.
pub(crate) struct PartitionParts {
    /// The value log's segments (O_DIRECT).
    pub(crate) vlog: ValueLog,
    /// The two write buffers.
    pub(crate) buffers: [Arc<WriteBuffer>; 2],
    /// Where each buffer is in its cycle: `Flushed`, or `Sealed` if
    /// recovery could not write it out.
    pub(crate) slots: [BufferSlot; 2],
    /// The key log, cut after its last frame that verifies.
    pub(crate) keylog: KeyLog,
    /// Where new records start in the value log.
    pub(crate) next_base: u64,
    /// The checkpoint the partition opened from, if any.
    pub(crate) checkpoint: Option<Arc<Checkpoint>>,
    /// Whether that checkpoint is the file `checkpoint` (not
    /// `checkpoint.prev`, opened for want of a current one that verifies).
    pub(crate) checkpoint_is_current_file: bool,
    /// What the checkpoint a rebuild would fall back to is swept below, if
    /// there is one that verifies (`checkpoint.prev` behind `checkpoint`).
    pub(crate) fallback_swept_below_seq: Option<u64>,
    /// Entries of the key log below the checkpoint's position, as
    /// [`KeyLog::entries`] counts them.
    pub(crate) keylog_entries_before_checkpoint: u64,
    /// The partition directory.
    pub(crate) dir: std::path::PathBuf,
    /// The disk it is on.
    pub(crate) disk: Arc<dyn crate::disk::Disk>,
}

/// State guarded by the partition lock.
struct PartitionState {
    /// At most one slot is `Filling`: the active buffer.
    slots: [BufferSlot; 2],
    /// Where the next buffer or large record starts when no buffer is active.
    next_base: u64,
    /// Regions of large records whose writes are under way.
    large_in_flight: Vec<Range<u64>>,
    keylog: KeyLog,
    /// Sealed slots go to the flusher through this; `None` once closing.
    flush_queue: Option<Sender<usize>>,
    closing: bool,
    /// What the flusher was writing when it found the disk full, while it
    /// waits for space: a write that needs a free buffer is then refused
    /// as disk full instead of waiting.
    flush_stalled: Option<String>,
    /// The first sequence number of each batch that has taken sequence
    /// numbers and has not yet committed or given up (a handful at most:
    /// the batches waiting for a buffer or a large write): a checkpoint
    /// round sweeps below the lowest.
    uncommitted_seqs: Vec<u64>,
    /// Per-write scratch space, pooled so the write path does not allocate
    /// once warm.
    scratch: Vec<Scratch>,
    /// The partition's checkpoints, changed together with the key log's
    /// first chunk.
    checkpoints: Checkpoints,
}

/// The checkpoint a partition holds in memory: the newest one on disk,
/// where exports start.
#[derive(Default)]
pub(crate) struct Checkpoints {
    current: Option<Arc<Checkpoint>>,
    /// Whether `current` is the file `checkpoint`: storing the next one
    /// then makes it `checkpoint.prev`, and the key log below it may go.
    is_current_file: bool,
    /// Entries of the key log below `current`'s position, as
    /// [`KeyLog::entries`] counts them.
    keylog_entries_before: u64,
    /// What the checkpoint a rebuild falls back to when `current` does not
    /// verify is swept below; `None` without one.
    fallback_swept_below_seq: Option<u64>,
}

impl Checkpoints {
    /// Entries an export from the start yields: the checkpoint's, then the
    /// key log's after its position, of `keylog_entries` in all.
    fn export_entries(&self, keylog_entries: u64) -> u64 {
        match &self.current {
            Some(c) => c.entries + keylog_entries.saturating_sub(self.keylog_entries_before),
            None => keylog_entries,
        }
    }
}

impl PartitionState {
    /// The active buffer: the one slot that is `Filling`, if any.
    fn active(&self) -> Option<usize> {
        self.slots.iter().position(BufferSlot::is_filling)
    }

    /// The key-log position the current checkpoint covers up to (the
    /// log's first position without one): a rebuild replays from here.
    fn checkpoint_position(&self) -> u64 {
        self.checkpoints
            .current
            .as_ref()
            .map_or(self.keylog.first_position(), |c| c.position)
    }

    /// End of the record area: the active buffer's fill, or `next_base`.
    fn tail(&self) -> u64 {
        self.slots
            .iter()
            .find_map(BufferSlot::filling_end)
            .unwrap_or(self.next_base)
    }

    /// Every byte below this belongs to a complete record or padding.
    fn committed_end(&self) -> u64 {
        let tail = self.tail();
        self.large_in_flight
            .iter()
            .map(|r| r.start)
            .min()
            .map_or(tail, |start| start.min(tail))
    }
}

/// PartitionCounters of one partition's activity.
#[derive(Debug, Default)]
struct PartitionCounters {
    puts: AtomicU64,
    deletes: AtomicU64,
    clears: AtomicU64,
    value_bytes: AtomicU64,
    flushes: AtomicU64,
    flushed_bytes: AtomicU64,
    large_writes: AtomicU64,
    relocations: AtomicU64,
    gc_runs: AtomicU64,
    reclaimed_bytes: AtomicU64,
}

/// The partition's threads, joined when it closes.
#[derive(Default)]
struct Threads {
    flusher: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
}

/// One partition of the store.
pub(crate) struct Partition {
    id: usize,
    node: Arc<NodeState>,
    vlog: ValueLog,
    buffers: [Arc<WriteBuffer>; 2],
    state: Mutex<PartitionState>,
    /// Signalled when a buffer is flushed (or the flusher stops).
    buffer_freed: Condvar,
    commit: GroupCommit,
    queue: WriteQueue,
    counters: PartitionCounters,
    threads: Mutex<Threads>,
    /// Held while a checkpoint is made: one at a time.
    checkpointing: Mutex<()>,
    /// The partition directory (its checkpoints' home).
    dir: std::path::PathBuf,
    disk: Arc<dyn crate::disk::Disk>,
    /// The key log's end, published after every append (for readers that
    /// follow the key log).
    keylog_end: tokio::sync::watch::Sender<u64>,
}

impl Partition {
    /// Opens partition `id` from what recovery left and starts its writer
    /// thread and, unless the node refuses writes, its flusher thread
    /// (which first writes out any buffer recovery left sealed).
    pub(crate) fn open(
        id: usize,
        node: Arc<NodeState>,
        parts: PartitionParts,
    ) -> Result<Arc<Self>> {
        let (flush_tx, flush_rx) = crossbeam_channel::bounded(FLUSH_QUEUE_SLOTS);
        for (slot, state) in parts.slots.iter().enumerate() {
            assert!(
                state.is_flushed() || matches!(state, BufferSlot::Sealed { .. }),
                "recovery leaves buffers flushed or sealed"
            );
            if state.awaits_flush() {
                flush_tx
                    .try_send(slot)
                    .expect("the flush queue holds both slots");
            }
        }
        let keylog_end = parts.keylog.end();
        let checkpoints = Checkpoints {
            current: parts.checkpoint.clone(),
            is_current_file: parts.checkpoint_is_current_file,
            keylog_entries_before: parts.keylog_entries_before_checkpoint,
            fallback_swept_below_seq: parts.fallback_swept_below_seq,
        };
        let partition = Arc::new(Self {
            id,
            vlog: parts.vlog,
            buffers: parts.buffers,
            state: Mutex::new(PartitionState {
                slots: parts.slots,
                next_base: parts.next_base,
                large_in_flight: Vec::new(),
                keylog: parts.keylog,
                flush_queue: Some(flush_tx),
                closing: false,
                flush_stalled: None,
                uncommitted_seqs: Vec::new(),
                scratch: Vec::new(),
                checkpoints,
            }),
            buffer_freed: Condvar::new(),
            commit: GroupCommit::new(keylog_end),
            queue: WriteQueue::new(),
            counters: PartitionCounters::default(),
            threads: Mutex::new(Threads::default()),
            checkpointing: Mutex::new(()),
            dir: parts.dir,
            disk: parts.disk,
            keylog_end: tokio::sync::watch::Sender::new(keylog_end),
            node,
        });
        let spawn = |role: &str, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(format!("{role}-p{id}"))
                .spawn(body)
                .map_err(|e| {
                    StorageError::io(format!("starting the {role} thread of partition {id}"), e)
                })
        };
        let writer = {
            let partition = Arc::clone(&partition);
            spawn("write", Box::new(move || partition.run_writer()))?
        };
        partition.threads.lock().writer = Some(writer);
        if partition.node.check_writable().is_ok() {
            let flusher = {
                let partition = Arc::clone(&partition);
                spawn("flush", Box::new(move || partition.run_flusher(flush_rx)))
            };
            match flusher {
                Ok(flusher) => partition.threads.lock().flusher = Some(flusher),
                Err(e) => {
                    partition.begin_close();
                    let _ = partition.finish_close();
                    return Err(e);
                }
            }
        }
        Ok(partition)
    }

    /// The key log's end, changing after every append: a reader that
    /// follows the key log waits on it while it has caught up.
    pub(crate) fn watch_keylog(&self) -> tokio::sync::watch::Receiver<u64> {
        self.keylog_end.subscribe()
    }

    /// Returns once every write that held the partition lock before this
    /// call has let go of it: a write that takes the lock later sees the
    /// node's state as of this call (for example a new writer epoch).
    pub(crate) fn fence_barrier(&self) {
        drop(self.state.lock());
    }

    /// A snapshot of the partition's counters and ends.
    pub(crate) fn report(&self) -> PartitionReport {
        let (committed_end, keylog_start, keylog_end, keylog_entries, checkpoint) = {
            let st = self.state.lock();
            (
                st.committed_end(),
                st.keylog.first_position(),
                st.keylog.end(),
                st.checkpoints.export_entries(st.keylog.entries()),
                st.checkpoints.current.clone(),
            )
        };
        let c = &self.counters;
        let usage = self.node.directory.partition_usage(self.id);
        PartitionReport {
            puts: c.puts.load(Ordering::Relaxed),
            deletes: c.deletes.load(Ordering::Relaxed),
            clears: c.clears.load(Ordering::Relaxed),
            value_bytes: c.value_bytes.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            flushed_bytes: c.flushed_bytes.load(Ordering::Relaxed),
            large_writes: c.large_writes.load(Ordering::Relaxed),
            committed_end,
            keylog_start,
            keylog_end,
            keylog_entries,
            segments: self.vlog.segment_count() as u64,
            gc_runs: c.gc_runs.load(Ordering::Relaxed),
            reclaimed_bytes: c.reclaimed_bytes.load(Ordering::Relaxed),
            relocations: c.relocations.load(Ordering::Relaxed),
            checkpoint_position: checkpoint.as_ref().map_or(0, |c| c.position),
            checkpoint_seq: checkpoint.as_ref().map_or(0, |c| c.max_seq),
            checkpoint_made_at_ms: checkpoint.as_ref().map_or(0, |c| c.made_at_ms),
            live_bytes: usage.live_bytes,
            dead_bytes: usage.dead_bytes,
        }
    }

    fn capacity(&self) -> usize {
        self.buffers[0].capacity()
    }

    /// Wraps `e` with what the partition was doing: a full disk fails
    /// that write alone (as [`WireError::DiskFull`]), anything else poisons
    /// the node.
    ///
    /// [`WireError::DiskFull`]: splitkv_common::message::WireError::DiskFull
    fn fail_unless_full(&self, context: String, e: std::io::Error) -> StorageError {
        if crate::error::is_out_of_space(&e) {
            StorageError::io(context, e)
        } else {
            self.poison(context, e)
        }
    }

    /// Wraps `e` with what the partition was doing and poisons the node
    /// with it: the partition's on-disk state is no longer known to be what
    /// it acknowledged, so no write may follow.
    fn poison(&self, context: String, e: std::io::Error) -> StorageError {
        let err = StorageError::io(context, e);
        self.node.poison(&err);
        err
    }
}
