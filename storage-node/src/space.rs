//! Disk space seen by the write path: the reserve of free space kept for
//! garbage collection, and the bound on dead bytes that makes puts wait
//! for collection to catch up.
//!
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
//!
//! A full disk the reserve did not foresee (another process filled it, or
//! the reserve is 0) shows up as a flush that fails for want of space. The
//! flusher then keeps its buffer, retries every [`FLUSH_RETRY_MS`], and
//! reports the stall here: puts are refused as disk full, whatever the
//! reserve, until every stalled flush has gone through.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use splitkv_common::message::WireError;

use crate::directory::PartitionUsage;
use crate::disk::Disk;
use crate::error::Result;

/// Put bytes between two reads of the free space.
pub(crate) const RECHECK_WRITTEN_BYTES: u64 = 8 << 20;
/// While puts are refused, a refused put reads the free space again at
/// most this often.
pub(crate) const RECHECK_REFUSED_MS: u64 = 100;
/// A flush that failed for want of space is tried again this often.
pub(crate) const FLUSH_RETRY_MS: u64 = 100;

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
    /// Partitions whose flush waits for space, and what the last one to
    /// stall was writing.
    stalled_flushes: AtomicUsize,
    stalled_flush: Mutex<String>,
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
            stalled_flushes: AtomicUsize::new(0),
            stalled_flush: Mutex::new(String::new()),
        };
        reserve.refresh();
        reserve
    }

    /// Refuses a put of `bytes` if the free space is below the reserve
    /// (reading it again when due).
    pub(crate) fn check_put(&self, bytes: u64) -> Result<()> {
        if let Some(context) = self.stalled_flush_refusal() {
            return Err(WireError::DiskFull { context }.into());
        }
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
        self.stalled_flush_refusal()
            .or_else(|| self.low.load(Ordering::Acquire).then(|| self.refusal()))
    }

    /// A partition's flush failed for want of space while `context`: puts
    /// are refused until [`SpaceReserve::flush_unstalled`] is called as
    /// often as this.
    pub(crate) fn flush_stalled(&self, context: &str) {
        *self.stalled_flush.lock() = context.to_string();
        let before = self.stalled_flushes.fetch_add(1, Ordering::AcqRel);
        tracing::warn!(
            "refusing puts: {context} failed for want of space; the flush is retried \
             every {FLUSH_RETRY_MS} ms and puts resume once it goes through \
             ({} partitions stalled)",
            before + 1
        );
    }

    /// A stalled flush went through, or gave up (at close, or once the
    /// node was poisoned).
    pub(crate) fn flush_unstalled(&self) {
        let before = self.stalled_flushes.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "unstalled more often than stalled");
        if before == 1 {
            tracing::info!("the stalled flushes went through: accepting puts");
        }
    }

    fn stalled_flush_refusal(&self) -> Option<String> {
        if self.stalled_flushes.load(Ordering::Acquire) == 0 {
            return None;
        }
        Some(format!(
            "{} failed for want of space; puts resume once it goes through \
             (it is retried every {FLUSH_RETRY_MS} ms)",
            self.stalled_flush.lock()
        ))
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

/// Longest a put waits for a collection pass when dead bytes are over
/// their bound: writes slow down to what collection frees, but never
/// stop.
pub(crate) const DEAD_BOUND_WAIT_MS: u64 = 1000;

/// Makes puts wait for garbage collection while the node's dead bytes
/// exceed a share of its live bytes (plus one segment per partition, what
/// collection cannot take from the segments being written), so that disk
/// use stays within a multiple of the live data under any write rate. A
/// put that finds the bound exceeded waits for the end of the next
/// collection pass (at most [`DEAD_BOUND_WAIT_MS`]), then goes on.
pub(crate) struct DeadBytesBound {
    /// Dead bytes allowed, in percent of the live bytes; 0: no bound.
    max_dead_percent_of_live: AtomicU64,
    slack_bytes: u64,
    passes: Mutex<u64>,
    pass_ended: Condvar,
    /// Puts that waited, and the time they waited.
    pub(crate) waits: AtomicU64,
    pub(crate) waited_ms: AtomicU64,
}

impl DeadBytesBound {
    /// A bound of `max_dead_percent_of_live` (0: none) for a node of
    /// `partitions` partitions with segments of `segment_bytes`.
    pub(crate) fn new(
        max_dead_percent_of_live: u64,
        partitions: usize,
        segment_bytes: u64,
    ) -> Self {
        Self {
            max_dead_percent_of_live: AtomicU64::new(max_dead_percent_of_live),
            slack_bytes: partitions as u64 * segment_bytes,
            passes: Mutex::new(0),
            pass_ended: Condvar::new(),
            waits: AtomicU64::new(0),
            waited_ms: AtomicU64::new(0),
        }
    }

    /// Whether `usage` is over the bound.
    pub(crate) fn exceeded(&self, usage: PartitionUsage) -> bool {
        let percent = self.max_dead_percent_of_live.load(Ordering::Relaxed);
        percent > 0
            && usage.dead_bytes
                > (usage.live_bytes / 100).saturating_mul(percent) + self.slack_bytes
    }

    /// No bound from now on, and no put waits any more (the GC thread
    /// stopped: no pass would end a wait).
    pub(crate) fn turn_off(&self) {
        self.max_dead_percent_of_live.store(0, Ordering::Relaxed);
        self.pass_ended();
    }

    /// Waits for the end of the next collection pass if `usage` is over
    /// the bound (at most [`DEAD_BOUND_WAIT_MS`]).
    pub(crate) fn wait_if_exceeded(&self, usage: PartitionUsage) {
        if !self.exceeded(usage) {
            return;
        }
        let started = std::time::Instant::now();
        let mut passes = self.passes.lock();
        let seen = *passes;
        let deadline = started + Duration::from_millis(DEAD_BOUND_WAIT_MS);
        while *passes == seen {
            if self
                .pass_ended
                .wait_until(&mut passes, deadline)
                .timed_out()
            {
                break;
            }
        }
        drop(passes);
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.waited_ms
            .fetch_add(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// A collection pass ended: the puts waiting for one go on.
    pub(crate) fn pass_ended(&self) {
        *self.passes.lock() += 1;
        self.pass_ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_flush_refuses_puts_whatever_the_reserve_until_every_stall_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk: Arc<dyn Disk> =
            Arc::new(crate::disk::OsDisk::new(crate::uring::IoEngineKind::Psync));
        let space = SpaceReserve::new(disk, dir.path().to_path_buf(), 0);
        space.check_put(1).expect("no reserve, no stall: accepted");
        space.flush_stalled("writing a buffer of partition 0");
        space.flush_stalled("writing a buffer of partition 1");
        let refusal = space.check_put(1).expect_err("refused while stalled");
        assert!(
            matches!(
                &refusal,
                crate::error::StorageError::Refused(WireError::DiskFull { context })
                    if context.contains("partition 1 failed for want of space")
            ),
            "{refusal}"
        );
        assert!(space.refusing_puts().is_some());
        space.flush_unstalled();
        assert!(space.check_put(1).is_err(), "one partition still stalled");
        space.flush_unstalled();
        space.check_put(1).expect("accepted once every stall ended");
        assert_eq!(space.refusing_puts(), None);
    }

    #[test]
    fn the_bound_is_a_share_of_the_live_bytes_plus_a_segment_per_partition() {
        let bound = DeadBytesBound::new(200, 2, 1000);
        let usage = |live_bytes, dead_bytes| PartitionUsage {
            live_bytes,
            dead_bytes,
        };
        assert!(!bound.exceeded(usage(10_000, 22_000)));
        assert!(bound.exceeded(usage(10_000, 22_001)));
        assert!(!bound.exceeded(usage(0, 2000)), "the slack");
        assert!(!DeadBytesBound::new(0, 2, 1000).exceeded(usage(0, u64::MAX)));
    }

    #[test]
    fn a_put_over_the_bound_waits_for_the_end_of_a_pass() {
        let bound = Arc::new(DeadBytesBound::new(100, 1, 0));
        let over = PartitionUsage {
            live_bytes: 100,
            dead_bytes: 1000,
        };
        let waiter = {
            let bound = Arc::clone(&bound);
            std::thread::spawn(move || bound.wait_if_exceeded(over))
        };
        // Passes end until the waiter has seen one.
        while !waiter.is_finished() {
            bound.pass_ended();
            std::thread::yield_now();
        }
        waiter.join().expect("waiter");
        assert_eq!(bound.waits.load(Ordering::Relaxed), 1);
        assert!(
            bound.waited_ms.load(Ordering::Relaxed) < DEAD_BOUND_WAIT_MS,
            "a pass's end, not the deadline, let it go"
        );
        bound.wait_if_exceeded(PartitionUsage {
            live_bytes: 1000,
            dead_bytes: 1000,
        });
        assert_eq!(
            bound.waits.load(Ordering::Relaxed),
            1,
            "under the bound: no wait"
        );
    }
}
