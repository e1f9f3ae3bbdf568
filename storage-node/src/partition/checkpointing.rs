//! Making a partition's checkpoint: the previous checkpoint and the key
//! log after it folded into a new one, written beside the key log (see
//! [`crate::checkpoint`]).

use std::sync::Arc;

use super::Partition;
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
    /// made current. Returns whether one was made.
    pub(crate) fn write_checkpoint(&self, now_ms: u64) -> Result<bool> {
        let _one_at_a_time = self.checkpointing.lock();
        let (snapshot, base, first) = {
            let st = self.state.lock();
            (
                st.keylog.snapshot(),
                st.checkpoints.current.clone(),
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
        self.state.lock().checkpoints.current = Some(Arc::new(made));
        Ok(true)
    }
}
