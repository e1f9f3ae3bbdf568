//! Making a partition's checkpoint: the previous checkpoint and the key
//! log after it folded into a new one, written beside the key log (see
//! [`crate::checkpoint`]).

use std::sync::Arc;

use super::{Checkpoints, Partition};
use crate::checkpoint::{self, Fold};
use crate::error::{Result, StorageError};

/// A round of checkpoints over the node's partitions: what each one may
/// sweep (see [`crate::checkpoint`]).
pub(crate) struct CheckpointRound<'a> {
    /// Deletes and expires with a lower sequence number may be dropped: the
    /// node's tombstone floor ([`tombstone_floor_seq`]) as the round began.
    pub(crate) tombstone_floor_seq: u64,
    /// Every write with a lower sequence number was committed (in its key
    /// log and the node's directory) as the round began, so a checkpoint
    /// made in the round is swept below it.
    pub(crate) committed_below_seq: u64,
    /// Whether every partition's key log is durable already (a clean
    /// close, after every partition closed and synced): otherwise they are
    /// synced before a swept checkpoint is stored, so that the entries its
    /// sweep relied on last as long as it does.
    pub(crate) key_logs_synced: bool,
    /// Every partition of the node.
    pub(crate) partitions: &'a [Arc<Partition>],
}

impl<'a> CheckpointRound<'a> {
    /// A round while writes go on, over every partition of the node, whose
    /// next sequence number is `next_seq` (read first).
    pub(crate) fn while_writing(partitions: &'a [Arc<Partition>], next_seq: u64) -> Self {
        // A batch takes its sequence numbers and records the first as
        // uncommitted under its partition's lock: a batch that took one
        // below `next_seq` is seen here unless it has committed.
        let committed_below_seq = partitions
            .iter()
            .filter_map(|p| p.lowest_uncommitted_seq())
            .fold(next_seq, u64::min);
        Self {
            tombstone_floor_seq: tombstone_floor_seq(partitions),
            committed_below_seq,
            key_logs_synced: false,
            partitions,
        }
    }

    /// The round of a clean close: every partition has closed (nothing is
    /// written any more) and synced its key log; `next_seq` is the node's
    /// next sequence number.
    pub(crate) fn at_close(partitions: &'a [Arc<Partition>], next_seq: u64) -> Self {
        Self {
            tombstone_floor_seq: tombstone_floor_seq(partitions),
            committed_below_seq: next_seq,
            key_logs_synced: true,
            partitions,
        }
    }
}

/// The node's tombstone floor: the lowest sequence number below which every
/// checkpoint any of `partitions` could open from is swept. No put that a
/// delete or expire below it superseded is left anywhere a rebuild reads,
/// so such a delete or expire may go.
pub(crate) fn tombstone_floor_seq(partitions: &[Arc<Partition>]) -> u64 {
    partitions
        .iter()
        .map(|p| p.swept_below_seq())
        .min()
        .unwrap_or(0)
}

impl Partition {
    /// The sequence number below which every checkpoint this partition
    /// could open from is swept: 0 while the first chunk of its key log is
    /// still held (the whole key log is the last fallback then, and it
    /// holds every entry ever written).
    pub(crate) fn swept_below_seq(&self) -> u64 {
        let st = self.state.lock();
        if st.keylog.first_position() == 0 {
            return 0;
        }
        let current = st
            .checkpoints
            .current
            .as_ref()
            .map_or(0, |c| c.swept_below_seq);
        current.min(st.checkpoints.fallback_swept_below_seq.unwrap_or(u64::MAX))
    }

    /// The lowest sequence number a batch of this partition has taken but
    /// not yet committed (or given up), if a batch is under way.
    pub(crate) fn lowest_uncommitted_seq(&self) -> Option<u64> {
        self.state.lock().uncommitted_seqs.iter().copied().min()
    }

    /// Syncs the key log from the current checkpoint's position (the part
    /// before it was synced when that checkpoint was made) to its end.
    pub(crate) fn sync_key_log(&self) -> Result<()> {
        let (snapshot, from) = {
            let st = self.state.lock();
            (st.keylog.snapshot(), st.checkpoint_position())
        };
        snapshot.sync(from, snapshot.end()).map_err(|e| {
            StorageError::io(format!("syncing the key log of partition {}", self.id), e)
        })
    }

    /// Whether the key log appended since the current checkpoint (since the
    /// log's start without one) is at least `min_bytes`, and at least
    /// `growth_percent` of the current checkpoint's body.
    pub(crate) fn checkpoint_due(&self, min_bytes: u64, growth_percent: u64) -> bool {
        let st = self.state.lock();
        let appended = st.keylog.end().saturating_sub(st.checkpoint_position());
        let checkpoint_bytes = st
            .checkpoints
            .current
            .as_ref()
            .map_or(0, |c| c.body.len() as u64);
        appended >= min_bytes && appended >= (checkpoint_bytes / 100).saturating_mul(growth_percent)
    }

    /// Makes a checkpoint of the key log as it is now, made at `now_ms`
    /// and swept as `round` allows, unless nothing was appended since the
    /// current one and it would be swept no further: the frames it covers
    /// are synced first, then every partition's key log, then the
    /// checkpoint is written, synced and made current, and the one it
    /// replaces becomes `checkpoint.prev`. Then the key-log chunks wholly
    /// below that previous one go, so that either checkpoint can still be
    /// opened from. Returns whether one was made.
    pub(crate) fn write_checkpoint(
        &self,
        now_ms: u64,
        round: &CheckpointRound<'_>,
    ) -> Result<bool> {
        let _one_at_a_time = self.checkpointing.lock();
        let (snapshot, entries, base, base_is_current_file, from) = {
            let st = self.state.lock();
            (
                st.keylog.snapshot(),
                st.keylog.entries(),
                st.checkpoints.current.clone(),
                st.checkpoints.is_current_file,
                st.checkpoint_position(),
            )
        };
        let position = snapshot.end();
        let base_swept = base.as_ref().map_or(0, |c| c.swept_below_seq);
        let swept_below_seq = round.committed_below_seq.max(base_swept);
        if position == from && (base.is_none() || swept_below_seq == base_swept) {
            return Ok(false);
        }
        let failed =
            |e| StorageError::io(format!("writing a checkpoint of partition {}", self.id), e);
        snapshot.sync(from, position).map_err(failed)?;
        let mut fold = Fold::default();
        if let Some(base) = &base {
            fold.add_checkpoint(base);
        }
        snapshot.for_each_entry(from..position, |entry| fold.add(entry));
        let directory = &self.node.directory;
        let made = fold.finish_swept(position, now_ms, swept_below_seq, |entry| {
            directory.needed_by_rebuild(self.id, entry, round.tombstone_floor_seq)
        });
        if !round.key_logs_synced {
            for partition in round.partitions {
                partition.sync_key_log()?;
            }
        }
        checkpoint::store(&*self.disk, &self.dir, &made).map_err(failed)?;
        let unneeded = {
            let mut st = self.state.lock();
            st.checkpoints = Checkpoints {
                current: Some(Arc::new(made)),
                is_current_file: true,
                keylog_entries_before: entries,
                fallback_swept_below_seq: base
                    .as_ref()
                    .filter(|_| base_is_current_file)
                    .map(|c| c.swept_below_seq),
            };
            // The replaced checkpoint is `checkpoint.prev` now only if it
            // was the current file; otherwise the previous file is one that
            // did not verify, and the key log below stays for the fallback.
            match &base {
                Some(previous) if base_is_current_file => {
                    st.keylog.forget_chunks_below(previous.position)
                }
                _ => Vec::new(),
            }
        };
        if !unneeded.is_empty() {
            let failed = |e| {
                StorageError::io(
                    format!("deleting key-log chunks of partition {}", self.id),
                    e,
                )
            };
            for file in &unneeded {
                self.disk.remove_file(file).map_err(failed)?;
            }
            self.disk.sync_dir(&self.dir).map_err(failed)?;
        }
        Ok(true)
    }
}
