//! What every partition of a storage node shares: the global sequence
//! counter, the writer epoch, the node's health (poisoned or read-only),
//! and the settings and buffers that hold for every partition.
//!
//! The engine creates one [`NodeState`] and hands it down to each
//! partition; a partition reports a failure by poisoning it, never by
//! calling up into the engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use splitkv_common::message::WireError;

use crate::aligned::BufferPool;
use crate::config::{Durability, Limits};
use crate::directory::KeyDirectory;
use crate::error::{Result, StorageError};
use crate::recent::RecentFlushes;
use crate::space::{DeadBytesBound, SpaceReserve};

/// Node-wide state shared by all partitions.
pub(crate) struct NodeState {
    next_seq: AtomicU64,
    writer_epoch: AtomicU64,
    poisoned: AtomicBool,
    poison_reason: Mutex<Option<String>>,
    read_only: Option<String>,
    /// What acknowledgements guarantee.
    pub(crate) durability: Durability,
    /// Key and value limits.
    pub(crate) limits: Limits,
    /// Size of a key-log chunk, which bounds one batch's frame.
    pub(crate) keylog_chunk_bytes: usize,
    /// Buffers for range reads, reused across requests and partitions.
    pub(crate) range_buffers: Arc<BufferPool>,
    /// Buffers for point reads of records, reused across requests and
    /// partitions.
    pub(crate) record_buffers: Arc<BufferPool>,
    /// Copies of the latest flushes, for point and range reads of bytes
    /// that left the write buffers a moment ago.
    pub(crate) recent: RecentFlushes,
    /// Where every key's newest version is, and each segment's live and
    /// dead bytes: every partition applies its committed entries here.
    pub(crate) directory: KeyDirectory,
    /// Free disk space against the reserve kept for garbage collection.
    pub(crate) space: SpaceReserve,
    /// The bound on dead bytes that makes puts wait for collection.
    pub(crate) dead_bound: DeadBytesBound,
}

/// The settings a [`NodeState`] starts from.
pub(crate) struct NodeSettings {
    /// One past the highest sequence number found on open.
    pub(crate) next_seq: u64,
    /// The writer epoch stored on disk.
    pub(crate) writer_epoch: u64,
    /// Why the node opened read-only, if it did.
    pub(crate) read_only: Option<String>,
    pub(crate) durability: Durability,
    pub(crate) limits: Limits,
    pub(crate) keylog_chunk_bytes: usize,
    /// Range-read buffers kept for reuse.
    pub(crate) range_buffers_kept: usize,
    /// Record-read buffers kept for reuse, and the size of each.
    pub(crate) record_buffers_kept: usize,
    pub(crate) record_buffer_bytes: usize,
    /// Copies of the latest flushes kept for reads.
    pub(crate) recent: RecentFlushes,
    /// The directory rebuilt from the key logs on open.
    pub(crate) directory: KeyDirectory,
    /// The disk reserve.
    pub(crate) space: SpaceReserve,
    /// The dead-bytes bound.
    pub(crate) dead_bound: DeadBytesBound,
}

impl NodeState {
    pub(crate) fn new(settings: NodeSettings) -> Self {
        Self {
            next_seq: AtomicU64::new(settings.next_seq),
            writer_epoch: AtomicU64::new(settings.writer_epoch),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(None),
            read_only: settings.read_only,
            durability: settings.durability,
            limits: settings.limits,
            keylog_chunk_bytes: settings.keylog_chunk_bytes,
            range_buffers: BufferPool::new(settings.range_buffers_kept),
            record_buffers: BufferPool::sized(
                settings.record_buffers_kept,
                settings.record_buffer_bytes,
            ),
            recent: settings.recent,
            directory: settings.directory,
            space: settings.space,
            dead_bound: settings.dead_bound,
        }
    }

    /// Hands out the next global sequence number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// The sequence number the next write will get.
    pub(crate) fn peek_next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Relaxed)
    }

    /// The current writer epoch.
    pub(crate) fn writer_epoch(&self) -> u64 {
        self.writer_epoch.load(Ordering::Acquire)
    }

    /// Makes `epoch` the current writer epoch.
    pub(crate) fn set_writer_epoch(&self, epoch: u64) {
        self.writer_epoch.store(epoch, Ordering::Release);
    }

    /// True once a failure has poisoned the node.
    pub(crate) fn poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Refuses further writes after `err` (the first reason is kept).
    pub(crate) fn poison(&self, err: &StorageError) {
        let mut reason = self.poison_reason.lock();
        if reason.is_none() {
            tracing::error!("storage engine refuses writes from now on: {err}");
            *reason = Some(err.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }

    /// The error writes are refused with since a failure poisoned the
    /// node, if one did.
    pub(crate) fn poison_error(&self) -> Option<StorageError> {
        self.poisoned().then(|| {
            let reason = self.poison_reason.lock().clone().unwrap_or_default();
            WireError::Poisoned { reason }.into()
        })
    }

    /// Refuses a write if the node is read-only or poisoned.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if let Some(reason) = &self.read_only {
            return Err(WireError::ReadOnly {
                reason: reason.clone(),
            }
            .into());
        }
        match self.poison_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Why writes are refused, if they are: all of them (read-only,
    /// poisoned), or puts for want of space.
    pub(crate) fn refusing_writes(&self) -> Option<String> {
        self.check_writable()
            .err()
            .map(|e| e.to_string())
            .or_else(|| self.space.refusing_puts())
    }

    /// Refuses a write under `epoch` if a newer writer epoch has begun.
    pub(crate) fn check_epoch(&self, epoch: Option<u64>) -> Result<()> {
        if let Some(yours) = epoch {
            let current = self.writer_epoch();
            if yours != current {
                return Err(WireError::Fenced { yours, current }.into());
            }
        }
        Ok(())
    }
}
