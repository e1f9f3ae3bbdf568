//! Garbage collection across the node: how long to pause to keep to a copy
//! rate (a plain function), the passes that collect every partition's
//! eligible segments, and the thread that runs a pass every interval.
//! Choosing a partition's segments and copying them is the partition's
//! (`partition::gc`).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::config::GcConfig;
use crate::error::{Result, StorageError};
use crate::node_state::NodeState;
use crate::partition::{CheckpointRound, Partition};
use splitkv_common::message::WireError;

/// What a garbage-collection pass did, summed over the partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Segments freed.
    pub segments_freed: u64,
    /// Live records copied to the head of their logs.
    pub relocated_records: u64,
    /// Bytes of those records.
    pub relocated_bytes: u64,
    /// Disk bytes the freed segment files held.
    pub freed_bytes: u64,
}

/// Runs garbage collection for one engine: passes on request and, unless
/// turned off, on its own thread every interval. One pass at a time.
pub(crate) struct Collector {
    shared: Arc<CollectorState>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct CollectorState {
    node: Arc<NodeState>,
    partitions: Vec<Arc<Partition>>,
    config: GcConfig,
    /// Held for the length of a pass.
    pass: Mutex<()>,
    stopping: Mutex<bool>,
    wake: Condvar,
    /// Why the GC thread stopped, if it failed.
    failure: Mutex<Option<String>>,
}

impl Collector {
    /// A collector of `partitions`, which share `node`, with its thread
    /// started unless `config.interval_ms` is 0.
    pub(crate) fn start(
        node: Arc<NodeState>,
        partitions: Vec<Arc<Partition>>,
        config: GcConfig,
    ) -> Result<Self> {
        let shared = Arc::new(CollectorState {
            node,
            partitions,
            config,
            pass: Mutex::new(()),
            stopping: Mutex::new(false),
            wake: Condvar::new(),
            failure: Mutex::new(None),
        });
        let mut thread = None;
        if config.interval_ms > 0 {
            let worker = Arc::clone(&shared);
            thread = Some(
                std::thread::Builder::new()
                    .name("gc".into())
                    .spawn(move || worker.run())
                    .map_err(|e| crate::StorageError::io("starting the GC thread", e))?,
            );
        }
        Ok(Self {
            shared,
            thread: Mutex::new(thread),
        })
    }

    /// Collects every segment with at least `min_dead_percent` of its
    /// record bytes dead, now, on the caller's thread (paced as configured).
    pub(crate) fn collect(&self, min_dead_percent: u8) -> Result<GcReport> {
        self.shared.pass(min_dead_percent)
    }

    /// Why the GC thread stopped, if a pass failed.
    pub(crate) fn failure(&self) -> Option<String> {
        self.shared.failure.lock().clone()
    }

    /// Stops the thread, ending a pass under way between two batches.
    pub(crate) fn stop(&self) {
        *self.shared.stopping.lock() = true;
        self.shared.wake.notify_all();
        self.shared.node.dead_bound.turn_off();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl CollectorState {
    fn run(&self) {
        let interval = Duration::from_millis(self.config.interval_ms);
        loop {
            {
                let mut stopping = self.stopping.lock();
                if !*stopping {
                    self.wake.wait_for(&mut stopping, interval);
                }
                if *stopping {
                    return;
                }
            }
            match self.pass(self.config.min_dead_percent) {
                Ok(report) if report.segments_freed > 0 => tracing::info!(
                    segments = report.segments_freed,
                    relocated_records = report.relocated_records,
                    relocated_bytes = report.relocated_bytes,
                    freed_bytes = report.freed_bytes,
                    "garbage collection freed segments"
                ),
                Ok(_) => {}
                // A full disk (a flush waiting for space, a copy or a
                // checkpoint that found none) ends this pass only: the next
                // one may find room, and collection is what makes it.
                Err(e @ StorageError::Refused(WireError::DiskFull { .. })) => {
                    tracing::warn!("a garbage-collection pass stopped early: {e}");
                }
                Err(e) => {
                    tracing::error!("garbage collection stopped: {e}");
                    *self.failure.lock() = Some(e.to_string());
                    self.node.dead_bound.turn_off();
                    return;
                }
            }
        }
    }

    /// Value bytes the partitions' own writes (not relocations) have
    /// written since the node started.
    fn foreground_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| p.written_value_bytes())
            .sum()
    }

    fn pass(&self, min_dead_percent: u8) -> Result<GcReport> {
        let _pass = self.pass.lock();
        let mut report = GcReport::default();
        let started = Instant::now();
        let written_before = self.foreground_bytes();
        let mut copied = 0u64;
        let mut pace = |bytes: u64| {
            copied += bytes;
            let foreground = self.foreground_bytes().saturating_sub(written_before);
            let pause = pause_for_rate(
                copied,
                foreground,
                started.elapsed(),
                self.config.copy_bytes_per_s,
            );
            let mut stopping = self.stopping.lock();
            if !pause.is_zero() && !*stopping {
                self.wake.wait_for(&mut stopping, pause);
            }
            !*stopping
        };
        // The segments to collect, only those written before the pass (the
        // segments its own copies fill wait for the next), and their live
        // records, from one look at the key directory. A record that a
        // write supersedes after that look is copied all the same, and its
        // copy is dead at once.
        let mut planned = Vec::new();
        for partition in &self.partitions {
            if self.node.check_writable().is_ok() {
                let head = partition.head_segment();
                let ids = partition.gc_candidates(min_dead_percent, head);
                planned.extend(ids.into_iter().map(|id| (partition.id(), id)));
            }
        }
        let live = self.node.directory.live_in_segments(&planned);
        // Copy; then one sync of every partition copied from, all at once
        // (a sync under load takes a while, and the copies of all its
        // segments share it); then free what no live record holds.
        let mut copied = Vec::new();
        for &(partition, id) in &planned {
            let records = live.get(&(partition, id)).map_or(&[][..], Vec::as_slice);
            if let Some(collected) =
                self.partitions[partition].copy_segment(id, records, &mut pace)?
            {
                copied.push((partition, id, collected));
            }
            if *self.stopping.lock() {
                break;
            }
        }
        let mut to_sync: Vec<usize> = copied.iter().map(|&(partition, ..)| partition).collect();
        to_sync.dedup();
        std::thread::scope(|scope| {
            let syncs: Vec<_> = to_sync
                .iter()
                .map(|&partition| scope.spawn(move || self.partitions[partition].sync()))
                .collect();
            syncs.into_iter().try_for_each(|sync| {
                sync.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })?;
        let copied_ids: Vec<(usize, u64)> = copied.iter().map(|&(p, id, _)| (p, id)).collect();
        let still_live = self.node.directory.live_in_segments(&copied_ids);
        for (partition, id, collected) in copied {
            if still_live.contains_key(&(partition, id)) {
                continue;
            }
            if let Some(freed) = self.partitions[partition].free_segment(id, collected)? {
                report.segments_freed += 1;
                report.relocated_records += freed.relocated_records;
                report.relocated_bytes += freed.relocated_bytes;
                report.freed_bytes += freed.freed_bytes;
            }
        }
        if *self.stopping.lock() {
            return Ok(report);
        }
        let every = self.config.checkpoint_every_keylog_bytes;
        if every > 0 {
            // Writes go on: the checkpoints are swept below the first write
            // not yet committed, and drop the deletes below the floor. (No
            // relocation is under way: only passes write them, one at a
            // time, and this one's are done.)
            let next_seq = self.node.peek_next_seq();
            let round = CheckpointRound::while_writing(&self.partitions, next_seq);
            for partition in &self.partitions {
                if self.node.check_writable().is_ok()
                    && partition.checkpoint_due(every, self.config.checkpoint_keylog_growth_percent)
                {
                    partition.write_checkpoint(splitkv_common::clock::now_ms(), &round)?;
                }
            }
            self.node
                .directory
                .forget_gone_below(round.tombstone_floor_seq);
        }
        // What the pass freed (or an operator did) lets puts in again.
        self.node.space.refresh();
        self.node.dead_bound.pass_ended();
        Ok(report)
    }
}

/// Of the foreground's written bytes, the share the GC may copy on top of
/// its base rate: a quarter, so that the foreground keeps 80 % of the
/// bytes written.
const FOREGROUND_SHARE_DIVISOR: u64 = 4;

/// How long to pause after copying `copied_bytes` in `elapsed`, during
/// which the foreground wrote `foreground_bytes`, so as not to exceed
/// `bytes_per_s` plus a quarter of `foreground_bytes` (0: no limit).
pub(crate) fn pause_for_rate(
    copied_bytes: u64,
    foreground_bytes: u64,
    elapsed: Duration,
    bytes_per_s: u64,
) -> Duration {
    if bytes_per_s == 0 {
        return Duration::ZERO;
    }
    let beyond_share = copied_bytes.saturating_sub(foreground_bytes / FOREGROUND_SHARE_DIVISOR);
    let due = Duration::from_secs_f64(beyond_share as f64 / bytes_per_s as f64);
    due.saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_keeps_the_copy_rate_plus_a_quarter_of_the_foreground() {
        let mib = 1 << 20;
        let quarter_s = Duration::from_millis(250);
        assert_eq!(
            pause_for_rate(64 * mib, 0, quarter_s, 64 * mib),
            Duration::from_millis(750)
        );
        assert_eq!(
            pause_for_rate(mib, 0, Duration::from_secs(1), 64 * mib),
            Duration::ZERO
        );
        // A quarter of 200 MiB written by the foreground is free of pause.
        assert_eq!(
            pause_for_rate(50 * mib, 200 * mib, Duration::ZERO, 64 * mib),
            Duration::ZERO
        );
        assert_eq!(
            pause_for_rate(114 * mib, 200 * mib, quarter_s, 64 * mib),
            Duration::from_millis(750)
        );
        assert_eq!(pause_for_rate(mib, 0, Duration::ZERO, 0), Duration::ZERO);
    }
}
