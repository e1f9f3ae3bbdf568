//! The reserve of free disk space kept for garbage collection: puts are
//! refused (as [`WireError::DiskFull`], without poisoning the node) once
//! the data directory's file system has less free space than the reserve,
//! so that garbage collection, whose copies are not refused, can always
//! make room on a nearly full disk. Deletes are not refused: they free
//! space. Writes resume once the free space is back above the reserve.
//!
//! The free space is read (one statvfs) after every
//! [`RECHECK_WRITTEN_BYTES`] of puts, at the end of every garbage
//! collection pass, and, while puts are refused, at most every
//! [`RECHECK_REFUSED_MS`] by a refused put.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use splitkv_common::message::WireError;

use crate::disk::Disk;
use crate::error::Result;

/// Put bytes between two reads of the free space.
pub(crate) const RECHECK_WRITTEN_BYTES: u64 = 8 << 20;
/// While puts are refused, a refused put reads the free space again at
/// most this often.
pub(crate) const RECHECK_REFUSED_MS: u64 = 100;

/// The node's view of its free disk space against its reserve.
pub(crate) struct SpaceReserve {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    reserve_bytes: u64,
    /// Whether the last reading was below the reserve.
    low: AtomicBool,
    free_bytes: AtomicU64,
    written_since_check: AtomicU64,
    checked_at_ms: AtomicU64,
}

impl SpaceReserve {
    /// A reserve of `reserve_bytes` (0: none, puts are never refused for
    /// space) on the file system of `dir`, read once now.
    pub(crate) fn new(disk: Arc<dyn Disk>, dir: PathBuf, reserve_bytes: u64) -> Self {
        let reserve = Self {
            disk,
            dir,
            reserve_bytes,
            low: AtomicBool::new(false),
            free_bytes: AtomicU64::new(u64::MAX),
            written_since_check: AtomicU64::new(0),
            checked_at_ms: AtomicU64::new(0),
        };
        reserve.refresh();
        reserve
    }

    /// Refuses a put of `bytes` if the free space is below the reserve
    /// (reading it again when due).
    pub(crate) fn check_put(&self, bytes: u64) -> Result<()> {
        if self.reserve_bytes == 0 {
            return Ok(());
        }
        let written = self.written_since_check.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let low = self.low.load(Ordering::Acquire);
        let recheck_due = written >= RECHECK_WRITTEN_BYTES
            || (low
                && splitkv_common::clock::now_ms()
                    >= self.checked_at_ms.load(Ordering::Relaxed) + RECHECK_REFUSED_MS);
        let low = if recheck_due { self.refresh() } else { low };
        if low {
            return Err(WireError::DiskFull {
                context: self.refusal(),
            }
            .into());
        }
        Ok(())
    }

    /// Why puts are refused, if they are.
    pub(crate) fn refusing_puts(&self) -> Option<String> {
        self.low.load(Ordering::Acquire).then(|| self.refusal())
    }

    fn refusal(&self) -> String {
        format!(
            "{} has {} bytes free, less than the {} kept for garbage collection \
             (--disk-reserve-bytes); puts resume once collection or an operator frees space",
            self.dir.display(),
            self.free_bytes.load(Ordering::Relaxed),
            self.reserve_bytes
        )
    }

    /// Reads the free space now; returns whether it is below the reserve.
    /// A failed reading keeps the last verdict.
    pub(crate) fn refresh(&self) -> bool {
        if self.reserve_bytes == 0 {
            return false;
        }
        self.written_since_check.store(0, Ordering::Relaxed);
        self.checked_at_ms
            .store(splitkv_common::clock::now_ms(), Ordering::Relaxed);
        let free = match self.disk.free_bytes(&self.dir) {
            Ok(free) => free,
            Err(e) => {
                tracing::warn!("reading the free space of {}: {e}", self.dir.display());
                return self.low.load(Ordering::Acquire);
            }
        };
        self.free_bytes.store(free, Ordering::Relaxed);
        let low = free < self.reserve_bytes;
        let was_low = self.low.swap(low, Ordering::AcqRel);
        if low && !was_low {
            tracing::warn!("refusing puts: {}", self.refusal());
        } else if was_low && !low {
            tracing::info!(
                free_bytes = free,
                reserve_bytes = self.reserve_bytes,
                "free space is above the reserve again: accepting puts"
            );
        }
        low
    }
}
