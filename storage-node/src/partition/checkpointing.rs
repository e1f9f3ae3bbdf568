//! Making a partition's checkpoint: the previous checkpoint and the key
//! log after it folded into a new one, written beside the key log (see
//! [`crate::checkpoint`]).

use std::sync::Arc;

use super::{Checkpoints, Partition};
use crate::checkpoint::{self, Fold};
use crate::error::{Result, StorageError};

impl Partition {
    /// Key-log bytes appended since the current checkpoint (since the
    /// log's start without one).
    pub(crate) fn keylog_bytes_since_checkpoint(&self) -> u64 {
        let st = self.state.lock();
        let from = st
            .checkpoints
            .current
            .as_ref()
            .map_or(st.keylog.first_position(), |c| c.position);
        st.keylog.end().saturating_sub(from)
    }

    /// Makes a checkpoint of the key log as it is now, made at `now_ms`,
    /// unless nothing was appended since the current one: the frames it
    /// covers are synced first, then the checkpoint is written, synced and
    /// made current, and the one it replaces becomes `checkpoint.prev`.
    /// Then the key-log chunks wholly below that previous one go, so that
    /// either checkpoint can still be opened from. Returns whether one was
    /// made.
    pub(crate) fn write_checkpoint(&self, now_ms: u64) -> Result<bool> {
        let _one_at_a_time = self.checkpointing.lock();
        let (snapshot, entries, base, base_is_current_file, first) = {
            let st = self.state.lock();
            (
                st.keylog.snapshot(),
                st.keylog.entries(),
                st.checkpoints.current.clone(),
                st.checkpoints.is_current_file,
                st.keylog.first_position(),
            )
        };
        let position = snapshot.end();
        let from = base.as_ref().map_or(first, |c| c.position);
        if position == from {
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
        let made = fold.finish(position, now_ms);
        checkpoint::store(&*self.disk, &self.dir, &made).map_err(failed)?;
        let unneeded = {
            let mut st = self.state.lock();
            st.checkpoints = Checkpoints {
                current: Some(Arc::new(made)),
                is_current_file: true,
                keylog_entries_before: entries,
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
