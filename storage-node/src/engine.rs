//! The storage engine: a data directory of partitions and the node-wide
//! state they share (see [`crate::node_state`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use splitkv_common::message::{PartitionReport, RecordAt, VersionAt, WireError, WriteAck};

use crate::config::{Durability, Limits, StorageConfig};
use crate::dir_lock::DirLock;
use crate::directory::{KeyDirectory, Version};
use crate::disk::{Disk, OsDisk};
use crate::error::{ManifestError, Result, StorageError};
use crate::gc::{Collector, GcReport};
use crate::manifest::{EpochFile, Manifest};
use crate::node_state::{NodeSettings, NodeState};
use crate::partition::{
    CheckpointRound, ExportCursor, ExportProgress, OwnedWrite, Partition, RangeRead, RecordBytes,
    Submitted, WriteCompletion, WriteOp,
};
use crate::recent::RecentFlushes;
use crate::recovery::{self, PartitionRecovery};
use crate::space::{DeadBytesBound, SpaceReserve};
use crate::uring::IoEngineKind;

/// Range-read buffers kept for reuse (up to 16 MiB each).
const RANGE_BUFFERS_KEPT: usize = 4;

/// Record-read buffers kept for reuse, of [`RECORD_BUFFER_BYTES`] each (8
/// MiB in all). A buffer stays out of the pool while its record is on its
/// way to the compute node (until the transport has it acknowledged), so
/// this covers a few hundred point reads in flight; more allocate.
const RECORD_BUFFERS_KEPT: usize = 512;

/// Size of a pooled record-read buffer: the aligned span of a record with
/// a value of up to about 12 KiB. Larger records get a buffer of their own.
const RECORD_BUFFER_BYTES: usize = 16 * 1024;

/// A snapshot of the storage engine's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageStats {
    /// Per partition, in order.
    pub partitions: Vec<PartitionReport>,
    /// The engine carrying O_DIRECT writes.
    pub io_engine: IoEngineKind,
    /// What acknowledgements guarantee.
    pub durability: Durability,
    /// Why writes are refused, if they are.
    pub refusing_writes: Option<String>,
    /// The current writer epoch.
    pub writer_epoch: u64,
    /// The next sequence number to be handed out.
    pub next_seq: u64,
    /// Why the garbage-collection thread stopped, if a pass failed.
    pub gc_failure: Option<String>,
    /// Puts that waited for a collection pass because dead bytes were over
    /// their bound ([`crate::GcConfig::max_dead_percent_of_live`]).
    pub gc_put_waits: u64,
    /// The milliseconds they waited in all.
    pub gc_put_waited_ms: u64,
    /// Reads answered from the copies of recent flushes
    /// ([`StorageConfig::recent_write_bytes`]) since the node started: a
    /// point read each, and each flush's part of a range read.
    pub recent_write_reads: u64,
    /// Bytes those copies hold now.
    pub recent_write_bytes: u64,
}

/// A SplitKV data directory opened for reading and writing.
///
/// Thread-safe: every method takes `&self`. Writes to one partition are
/// serialised by its lock. Different partitions do not share a lock on the
/// write path, but they do share the global sequence counter, the writer
/// epoch, the poison state (one partition's failed flush or sync refuses
/// writes to all), the pool of range-read buffers, and the disk's I/O
/// engine (one io_uring thread carries every partition's O_DIRECT
/// writes). Each partition has a flusher thread and a writer thread (for
/// submitted writes that had to wait).
pub struct StorageEngine {
    node: Arc<NodeState>,
    partitions: Vec<Arc<Partition>>,
    epoch_file: Mutex<EpochFile>,
    disk: Arc<dyn Disk>,
    manifest: Manifest,
    recovery: Vec<PartitionRecovery>,
    collector: Collector,
    closed: AtomicBool,
    _lock: DirLock,
}

impl StorageEngine {
    /// Opens (or creates) the data directory of `config` on the real file
    /// system, with the configured I/O engine.
    pub fn open(config: StorageConfig) -> Result<Self> {
        let disk = Arc::new(OsDisk::new(config.io_engine));
        Self::open_with_disk(config, disk)
    }

    /// Opens (or creates) the data directory of `config` through `disk`.
    ///
    /// Recovers every partition (see [`crate::recovery`]): after this
    /// returns, every write acknowledged before a crash is readable.
    pub fn open_with_disk(config: StorageConfig, disk: Arc<dyn Disk>) -> Result<Self> {
        let dir = config.data_dir.clone();
        disk.create_dir_all(&dir)
            .map_err(|e| StorageError::io(format!("creating {}", dir.display()), e))?;
        let lock = DirLock::acquire(&*disk, &dir, config.lock_wait_ms)?;
        recovery::probe_direct_io(&*disk, &dir)?;
        let manifest = Manifest::load_or_create(&*disk, &config)?;
        check_segment_holds_largest_record(&manifest, &config)?;
        let (epoch_file, epoch) = EpochFile::open(&*disk, &dir)?;

        let mut recovered = Vec::with_capacity(manifest.partitions);
        for id in 0..manifest.partitions {
            recovered.push(recovery::recover_partition(&disk, &dir, id, &manifest)?);
        }
        let max_seq = recovered
            .iter()
            .map(|r| {
                let checkpointed = r.parts.checkpoint.as_ref().map_or(0, |c| c.max_seq);
                r.report.keylog.max_seq.max(checkpointed)
            })
            .max()
            .unwrap_or(0);
        let read_only = recovered.iter().find_map(|r| r.read_only_reason.clone());
        let directory = KeyDirectory::new(manifest.partitions, manifest.segment_bytes);
        for (id, r) in recovered.iter().enumerate() {
            let mut from = r.parts.keylog.first_position();
            if let Some(checkpoint) = &r.parts.checkpoint {
                checkpoint.for_each_entry(|entry| directory.apply(id, entry));
                from = checkpoint.position;
            }
            r.parts
                .keylog
                .snapshot()
                .for_each_entry(from..u64::MAX, |entry| directory.apply(id, entry));
        }
        for (id, r) in recovered.iter().enumerate() {
            // Entries of records in freed segments were all superseded by
            // relocations; their segments no longer count.
            for segment in directory.segment_usage(id).into_keys() {
                if r.parts.vlog.is_freed(segment) {
                    directory.forget_segment(id, segment);
                }
            }
            // Every segment with a file holds records up to its end, or up
            // to where new records start for the one being written.
            let vlog = &r.parts.vlog;
            let head = vlog.segment_of(r.parts.next_base);
            for segment in vlog.segment_ids() {
                let used = match segment.cmp(&head) {
                    std::cmp::Ordering::Less => vlog.segment_bytes(),
                    std::cmp::Ordering::Equal => r.parts.next_base - segment * vlog.segment_bytes(),
                    std::cmp::Ordering::Greater => 0,
                };
                directory.settle_segment(id, segment, used);
            }
        }
        if let Some(reason) = &read_only {
            tracing::error!("opening {} read-only: {reason}", dir.display());
        }
        let node = Arc::new(NodeState::new(NodeSettings {
            next_seq: max_seq + 1,
            writer_epoch: epoch,
            read_only,
            durability: config.durability,
            limits: config.limits,
            keylog_chunk_bytes: manifest.keylog_chunk_bytes,
            range_buffers_kept: RANGE_BUFFERS_KEPT,
            record_buffers_kept: RECORD_BUFFERS_KEPT,
            record_buffer_bytes: RECORD_BUFFER_BYTES,
            recent: RecentFlushes::new(manifest.partitions, config.recent_write_bytes),
            directory,
            space: SpaceReserve::new(Arc::clone(&disk), dir.clone(), config.disk_reserve_bytes),
            // Without the GC thread no pass would end a wait.
            dead_bound: DeadBytesBound::new(
                if config.gc.interval_ms > 0 {
                    config.gc.max_dead_percent_of_live
                } else {
                    0
                },
                manifest.partitions,
                manifest.segment_bytes,
            ),
        }));
        let mut partitions = Vec::with_capacity(recovered.len());
        let mut reports = Vec::with_capacity(recovered.len());
        for (id, r) in recovered.into_iter().enumerate() {
            reports.push(r.report);
            match Partition::open(id, Arc::clone(&node), r.parts) {
                Ok(partition) => partitions.push(partition),
                Err(e) => {
                    stop_partitions(&partitions);
                    return Err(e);
                }
            }
        }
        // Marks of deletes below the floor came from the key-log tails;
        // nothing they could shadow is left.
        node.directory
            .forget_gone_below(crate::partition::tombstone_floor_seq(&partitions));
        let collector = match Collector::start(Arc::clone(&node), partitions.clone(), config.gc) {
            Ok(collector) => collector,
            Err(e) => {
                stop_partitions(&partitions);
                return Err(e);
            }
        };
        tracing::info!(
            dir = %dir.display(),
            partitions = manifest.partitions,
            next_seq = max_seq + 1,
            io_engine = %disk.io_engine(),
            durability = %config.durability,
            "storage engine open"
        );
        Ok(Self {
            node,
            partitions,
            epoch_file: Mutex::new(epoch_file),
            disk,
            manifest,
            recovery: reports,
            collector,
            closed: AtomicBool::new(false),
            _lock: lock,
        })
    }

    fn partition(&self, partition: usize) -> Result<&Partition> {
        self.partitions.get(partition).map(|p| &**p).ok_or_else(|| {
            WireError::NoSuchPartition {
                partition: partition as u32,
                count: self.partitions.len() as u32,
            }
            .into()
        })
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// The data directory's layout.
    pub fn manifest(&self) -> Manifest {
        self.manifest
    }

    /// What recovery did for each partition when the engine opened.
    pub fn recovery_report(&self) -> &[PartitionRecovery] {
        &self.recovery
    }

    /// The engine carrying O_DIRECT writes (io_uring unless refused).
    pub fn io_engine(&self) -> IoEngineKind {
        self.disk.io_engine()
    }

    /// Key and value limits.
    pub fn limits(&self) -> Limits {
        self.node.limits
    }

    /// Puts `key` = `value` into `partition` and returns its sequence number
    /// once acknowledged (see [`StorageEngine::write`]).
    pub fn put(&self, partition: usize, key: &[u8], value: &[u8]) -> Result<u64> {
        let mut ack = [WriteAck::default()];
        self.write(
            partition,
            None,
            &[WriteOp::Put {
                key,
                value,
                expire_at_ms: 0,
            }],
            &mut ack,
        )?;
        Ok(ack[0].seq)
    }

    /// Deletes `key` (writes a tombstone into `partition`'s key log).
    pub fn delete(&self, partition: usize, key: &[u8]) -> Result<u64> {
        let mut ack = [WriteAck::default()];
        self.write(partition, None, &[WriteOp::Delete { key }], &mut ack)?;
        Ok(ack[0].seq)
    }

    /// Applies `ops` to `partition` as one unit, on the calling thread
    /// (waiting for a free buffer, a large write or a sync as needed), and
    /// writes one acknowledgement (sequence number and value-log offset) per
    /// op into `acks`.
    ///
    /// Guarantees on return: every op is in the key log, after every write
    /// acknowledged before it in this partition; in `mmap` durability it
    /// survives the death of this process, in `sync` durability a power
    /// loss. After a crash either all ops of the unit are there or none.
    /// With `epoch`, the write is refused with [`WireError::Fenced`] if a
    /// newer writer epoch has begun. It takes its place in the partition's
    /// log when it takes the partition lock, which may be ahead of writes
    /// waiting in the partition's queue (see [`StorageEngine::submit_write`]).
    pub fn write(
        &self,
        partition: usize,
        epoch: Option<u64>,
        ops: &[WriteOp<'_>],
        acks: &mut [WriteAck],
    ) -> Result<()> {
        if ops.iter().any(|op| matches!(op, WriteOp::Relocate { .. })) {
            return Err(WireError::BadRequest {
                reason: "relocations are written by garbage collection only".into(),
            }
            .into());
        }
        self.partition(partition)?.write(ops, epoch, acks)
    }

    /// Hands `request` over to `partition`, without blocking on the disk:
    /// it is applied at once when no submitted write of the partition waits
    /// before it and it needs no waiting ([`Submitted::Done`]; `done` is not
    /// called), else it waits in the partition's bounded queue for the
    /// partition's writer thread, which calls `done` with its outcome
    /// ([`Submitted::Queued`]). If that queue is full, nothing is done and
    /// both come back ([`Submitted::QueueFull`]; see
    /// [`StorageEngine::queue_write`]).
    ///
    /// Writes submitted to one partition commit in the order they were
    /// submitted and are acknowledged in log order, with the guarantees of
    /// [`StorageEngine::write`].
    pub fn submit_write(
        &self,
        partition: usize,
        epoch: Option<u64>,
        request: OwnedWrite,
        done: WriteCompletion,
    ) -> Submitted {
        match self.partition(partition) {
            Ok(p) => p.submit(epoch, request, done),
            Err(e) => Submitted::Done(Err(e)),
        }
    }

    /// Puts `request` into `partition`'s queue, blocking while the queue is
    /// full, behind every write submitted before it; the partition's writer
    /// thread calls `done` with the outcome. Returns once it is queued, or
    /// the refusal (then `done` is dropped uncalled).
    pub fn queue_write(
        &self,
        partition: usize,
        epoch: Option<u64>,
        request: OwnedWrite,
        done: WriteCompletion,
    ) -> Result<()> {
        self.partition(partition)?.queue_write(epoch, request, done)
    }

    /// Deletes every key (FLUSHALL): a clear entry goes into every
    /// partition's key log, behind the writes already submitted to that
    /// partition. Blocks until every partition has acknowledged its entry
    /// (with the guarantees of [`StorageEngine::write`]) and returns the
    /// highest of their sequence numbers: from then on, every record with
    /// a lower sequence number is gone, after any restart too. If this
    /// fails part way, the clear entries already written still count (a
    /// reader honours the highest clear entry of any partition).
    pub fn clear_all(&self, epoch: Option<u64>) -> Result<WriteAck> {
        let (sent, acks) = std::sync::mpsc::sync_channel(self.partitions.len());
        for partition in 0..self.partitions.len() {
            let sent = sent.clone();
            self.queue_write(
                partition,
                epoch,
                OwnedWrite::clear(),
                Box::new(move |result| {
                    let _ = sent.send(result);
                }),
            )?;
        }
        drop(sent);
        let mut highest = WriteAck::default();
        for result in acks.iter() {
            let ack = result?.first().copied().unwrap_or_default();
            highest.seq = highest.seq.max(ack.seq);
        }
        Ok(highest)
    }

    /// Reads the record at `offset` of `len` bytes in `partition`, verifying
    /// its checksum: a torn or corrupt record is an error, never data.
    pub fn read(&self, partition: usize, offset: u64, len: usize) -> Result<RecordBytes> {
        self.partition(partition)?.read(offset, len)
    }

    /// Reads the record like [`StorageEngine::read`] if all of its bytes are
    /// in memory (a write buffer, the copies of recent flushes or the page
    /// cache), without waiting for the disk: `Ok(None)` if some are not.
    /// Safe to call where blocking is not (an async task); the caller reads
    /// with `read` on a blocking thread when this gives `None`.
    pub fn read_in_memory(
        &self,
        partition: usize,
        offset: u64,
        len: usize,
    ) -> Result<Option<RecordBytes>> {
        self.partition(partition)?.read_in_memory(offset, len)
    }

    /// Reads up to `max_len` (at most 16 MiB) bytes of `partition`'s value
    /// log from `offset`, including records still in write buffers, never
    /// past the committed end (which it returns).
    pub fn read_range(&self, partition: usize, offset: u64, max_len: usize) -> Result<RangeRead> {
        self.partition(partition)?.read_range(offset, max_len)
    }

    /// Appends to `out` about `max_bytes` of complete key-log frames of
    /// `partition`, from `cursor` on ([`ExportCursor::start`] to start: the
    /// current checkpoint's frames, then the key log after it), that hold
    /// entries with a sequence number of at least `min_seq`. An export from
    /// the start yields every entry that still decides a key, so that the
    /// highest sequence number per key across partitions is what the whole
    /// key logs say.
    pub fn export_keylog(
        &self,
        partition: usize,
        cursor: &ExportCursor,
        min_seq: u64,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<ExportProgress> {
        self.partition(partition)?
            .export(cursor, min_seq, max_bytes, out)
    }

    /// The end of `partition`'s key log, changing after every append, for a
    /// reader that follows it (see [`StorageEngine::export_keylog`]).
    pub fn watch_keylog(&self, partition: usize) -> Result<tokio::sync::watch::Receiver<u64>> {
        Ok(self.partition(partition)?.watch_keylog())
    }

    /// Makes everything acknowledged so far durable against power loss,
    /// whatever the durability mode.
    pub fn sync(&self) -> Result<()> {
        for partition in &self.partitions {
            partition.sync()?;
        }
        Ok(())
    }

    /// Begins a new writer epoch and returns it. Once this returns, no write
    /// made under an older epoch can still be committed: every partition's
    /// lock has been passed after the new epoch was stored.
    pub fn begin_writer_epoch(&self) -> Result<u64> {
        let file = self.epoch_file.lock();
        let next = self.node.writer_epoch() + 1;
        file.store(next, self.node.durability)?;
        self.node.set_writer_epoch(next);
        for partition in &self.partitions {
            partition.fence_barrier();
        }
        Ok(next)
    }

    /// The current writer epoch.
    pub fn writer_epoch(&self) -> u64 {
        self.node.writer_epoch()
    }

    /// A snapshot of counters and state.
    pub fn stats(&self) -> StorageStats {
        let (recent_write_reads, recent_write_bytes) = self.node.recent.stats();
        StorageStats {
            partitions: self.partitions.iter().map(|p| p.report()).collect(),
            io_engine: self.io_engine(),
            durability: self.node.durability,
            refusing_writes: self.node.refusing_writes(),
            writer_epoch: self.writer_epoch(),
            next_seq: self.node.peek_next_seq(),
            gc_failure: self.collector.failure(),
            gc_put_waits: self.node.dead_bound.waits.load(Ordering::Relaxed),
            gc_put_waited_ms: self.node.dead_bound.waited_ms.load(Ordering::Relaxed),
            recent_write_reads,
            recent_write_bytes,
        }
    }

    /// Where the newest version of `key` is on this node, `None` if it has
    /// none: the answer for a reader whose location was freed by garbage
    /// collection.
    pub fn locate(&self, key: &[u8]) -> Option<VersionAt> {
        match self.node.directory.get(key)? {
            Version::Live(place) => Some(VersionAt {
                seq: place.seq,
                record: RecordAt {
                    partition: place.partition,
                    offset: place.offset,
                    len: place.record_len,
                },
                expire_at_ms: place.expire_at_ms,
            }),
            Version::Gone { .. } => None,
        }
    }

    /// Runs garbage collection now: frees every value-log segment with at
    /// least `min_dead_percent` of its record bytes dead, after copying its
    /// live records to the head of its log (paced as configured; waits for
    /// a pass of the GC thread under way). A segment a write buffer still
    /// holds part of is left for a later pass.
    pub fn collect_garbage(&self, min_dead_percent: u8) -> Result<GcReport> {
        self.collector.collect(min_dead_percent)
    }

    /// Writes every buffer to the value log, makes everything durable, and
    /// stops the partitions' threads. Writes are refused from the moment
    /// this starts; queued writes are completed with that refusal. Fails if
    /// that could not be done, or if a failure had poisoned the engine
    /// before: what did not reach the value log stays in the write buffers'
    /// files and is replayed by the next open. Only the first call closes
    /// (and can fail); later ones return at once. Called by `Drop` too,
    /// where errors can only be logged.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.collector.stop();
        for partition in &self.partitions {
            partition.begin_close();
        }
        let mut first_error = None;
        for partition in &self.partitions {
            if let Err(e) = partition.finish_close() {
                first_error.get_or_insert(e);
            }
        }
        // A clean close leaves a checkpoint of every partition, so that
        // the next open reads only the checkpoints. Nothing is written any
        // more: the checkpoints are swept below the next sequence number.
        if first_error.is_none() && self.node.check_writable().is_ok() {
            let round = CheckpointRound::at_close(&self.partitions, self.node.peek_next_seq());
            for partition in &self.partitions {
                if let Err(e) = partition.write_checkpoint(splitkv_common::clock::now_ms(), &round)
                {
                    first_error.get_or_insert(e);
                }
            }
        }
        // A node poisoned before or during the close could not make
        // everything durable: what is left is replayed by the next open.
        match first_error.or_else(|| self.node.poison_error()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for StorageEngine {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!("closing the storage engine: {e}");
        }
    }
}

/// Stops the threads of partitions opened before an open failed.
fn stop_partitions(partitions: &[Arc<Partition>]) {
    for partition in partitions {
        partition.begin_close();
    }
    for partition in partitions {
        let _ = partition.finish_close();
    }
}

/// A record never straddles two segments, so the largest one the limits
/// allow must fit in a segment.
fn check_segment_holds_largest_record(manifest: &Manifest, config: &StorageConfig) -> Result<()> {
    let limits = config.limits;
    let largest = crate::aligned::align_up(splitkv_common::record::value_record_len(
        limits.max_key_bytes,
        limits.max_value_bytes,
    ) as u64);
    if largest > manifest.segment_bytes {
        return Err(StorageError::Manifest {
            path: config.data_dir.join("MANIFEST"),
            reason: ManifestError::SegmentTooSmall {
                segment_bytes: manifest.segment_bytes,
                largest,
            },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use bytes::Bytes;

    use super::*;
    use crate::partition::MAX_QUEUED_WRITES_PER_PARTITION;

    fn open(dir: &std::path::Path, durability: Durability) -> StorageEngine {
        let mut config = StorageConfig::new(dir);
        config.partitions = 2;
        config.buffer_bytes = 16 << 10;
        config.keylog_chunk_bytes = 64 << 10;
        config.durability = durability;
        config.io_engine = IoEngineKind::Psync;
        StorageEngine::open(config).expect("open")
    }

    /// Submits puts to partition 0, every third one too large for a buffer
    /// (so it must wait for a write of its own), and returns each put's
    /// sequence number in submission order, whether it finished at once or
    /// through its completion.
    fn submit_mixed_puts(engine: &StorageEngine, count: usize) -> Vec<u64> {
        let (done_tx, done_rx) = mpsc::channel();
        let mut seqs = vec![None; count];
        let mut queued = 0;
        for (i, seq) in seqs.iter_mut().enumerate() {
            let len = if i % 3 == 0 { 40 << 10 } else { 100 };
            let value = Bytes::from(vec![i as u8; len]);
            let key = Bytes::from(format!("k{i}").into_bytes());
            let tx = done_tx.clone();
            let done: WriteCompletion = Box::new(move |result| {
                let _ = tx.send((i, result));
            });
            match engine.submit_write(0, None, OwnedWrite::put(key, value, 0), done) {
                Submitted::Done(result) => *seq = Some(result.expect("put")[0].seq),
                Submitted::Queued => queued += 1,
                Submitted::QueueFull(..) => panic!("{count} writes fit the queue"),
            }
        }
        for _ in 0..queued {
            let (i, result) = done_rx.recv().expect("every queued write completes");
            seqs[i] = Some(result.expect("put")[0].seq);
        }
        seqs.into_iter().map(|s| s.expect("acknowledged")).collect()
    }

    fn assert_submission_order(durability: Durability) {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = open(dir.path(), durability);
        let seqs = submit_mixed_puts(&engine, 60);
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "committed out of submission order: {seqs:?}"
        );
        let report = &engine.stats().partitions[0];
        assert_eq!(report.puts, 60);
        assert_eq!(report.large_writes, 20);
        engine.close().expect("close");
    }

    #[test]
    fn submitted_writes_commit_in_submission_order_around_ones_that_wait() {
        assert_submission_order(Durability::Mmap);
    }

    #[test]
    fn submitted_writes_in_sync_durability_are_queued_and_commit_in_order() {
        assert_submission_order(Durability::Sync);
    }

    #[test]
    fn a_full_queue_hands_the_write_back_and_queue_write_waits_for_room() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Arc::new(open(dir.path(), Durability::Mmap));
        let (done_tx, done_rx) = mpsc::channel();
        let completion = |i: usize| -> WriteCompletion {
            let tx = done_tx.clone();
            Box::new(move |result: Result<Vec<WriteAck>>| {
                let _ = tx.send((i, result.expect("put")[0].seq));
            })
        };
        let put = |i: usize, len: usize| {
            OwnedWrite::put(
                Bytes::from(format!("k{i}").into_bytes()),
                Bytes::from(vec![1; len]),
                0,
            )
        };
        // A large put must wait, so it is queued; its completion holds the
        // writer thread until released, so nothing leaves the queue.
        let (entered_tx, entered_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let first = completion(0);
        let holding: WriteCompletion = Box::new(move |result| {
            let _ = entered_tx.send(());
            let _ = release_rx.recv();
            first(result);
        });
        assert!(matches!(
            engine.submit_write(0, None, put(0, 40 << 10), holding),
            Submitted::Queued
        ));
        entered_rx
            .recv()
            .expect("the writer thread completes the large put");
        for i in 1..=MAX_QUEUED_WRITES_PER_PARTITION {
            let submitted = engine.submit_write(0, None, put(i, 100), completion(i));
            assert!(matches!(submitted, Submitted::Queued), "{i}: {submitted:?}");
        }
        let last = MAX_QUEUED_WRITES_PER_PARTITION + 1;
        let Submitted::QueueFull(write, done) =
            engine.submit_write(0, None, put(last, 100), completion(last))
        else {
            panic!("the queue is full");
        };
        let waiter = {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || engine.queue_write(0, None, write, done))
        };
        release_tx.send(()).expect("release the writer thread");
        waiter
            .join()
            .expect("waiter")
            .expect("queued once there is room");
        let mut seqs = vec![0; last + 1];
        for _ in 0..=last {
            let (i, seq) = done_rx.recv().expect("every write completes");
            seqs[i] = seq;
        }
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "committed out of submission order"
        );
    }

    #[test]
    fn a_submitted_write_that_breaks_a_limit_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = open(dir.path(), Durability::Mmap);
        let never: WriteCompletion = Box::new(|_| panic!("refused writes are not queued"));
        let submitted = engine.submit_write(
            0,
            None,
            OwnedWrite::put(Bytes::new(), Bytes::new(), 0),
            never,
        );
        assert!(
            matches!(
                submitted,
                Submitted::Done(Err(StorageError::Refused(WireError::EmptyKey)))
            ),
            "{submitted:?}"
        );
        let never: WriteCompletion = Box::new(|_| panic!("refused writes are not queued"));
        let submitted =
            engine.submit_write(5, None, OwnedWrite::delete(Bytes::from_static(b"k")), never);
        assert!(
            matches!(
                submitted,
                Submitted::Done(Err(StorageError::Refused(
                    WireError::NoSuchPartition { .. }
                )))
            ),
            "{submitted:?}"
        );
    }

    #[test]
    fn writes_submitted_after_close_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = open(dir.path(), Durability::Mmap);
        engine.close().expect("close");
        let never: WriteCompletion = Box::new(|_| panic!("refused writes are not queued"));
        let submitted = engine.submit_write(
            0,
            None,
            OwnedWrite::put(Bytes::from_static(b"k"), Bytes::from_static(b"v"), 0),
            never,
        );
        assert!(
            matches!(
                submitted,
                Submitted::Done(Err(StorageError::Refused(WireError::ShuttingDown)))
            ),
            "{submitted:?}"
        );
        let never: WriteCompletion = Box::new(|_| panic!("refused writes are not queued"));
        let queued =
            engine.queue_write(0, None, OwnedWrite::delete(Bytes::from_static(b"k")), never);
        assert!(
            matches!(queued, Err(StorageError::Refused(WireError::ShuttingDown))),
            "{queued:?}"
        );
    }
}
