//! The storage engine: a data directory of partitions, the global sequence
//! counter, the writer epoch, and the poison flag.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use splitkv_common::message::WriteAck;

use crate::aligned::BufferPool;
use crate::config::{Durability, EngineConfig, Limits};
use crate::disk::{Disk, OsDisk};
use crate::error::{Result, StorageError};
use crate::manifest::{DirLock, EpochFile, Manifest};
use crate::partition::{Partition, WriteOp};
use crate::read::{ExportProgress, RangeRead, RecordBytes};
use crate::recovery::{self, PartitionRecovery};
use crate::uring::IoEngineKind;

/// Range-read buffers kept for reuse (up to 16 MiB each).
const RANGE_BUFFERS_KEPT: usize = 4;

/// State shared by all partitions.
pub(crate) struct Shared {
    next_seq: AtomicU64,
    pub(crate) epoch: AtomicU64,
    poisoned: AtomicBool,
    poison_reason: Mutex<Option<String>>,
    read_only: Option<String>,
    pub(crate) durability: Durability,
    pub(crate) limits: Limits,
    pub(crate) keylog_chunk_bytes: usize,
    /// Buffers for range reads, reused across requests.
    pub(crate) range_buffers: Arc<BufferPool>,
}

impl Shared {
    /// Hands out the next global sequence number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

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

    pub(crate) fn check_writable(&self) -> Result<()> {
        if let Some(reason) = &self.read_only {
            return Err(StorageError::ReadOnly {
                reason: reason.clone(),
            });
        }
        if self.poisoned() {
            let reason = self.poison_reason.lock().clone().unwrap_or_default();
            return Err(StorageError::Poisoned { reason });
        }
        Ok(())
    }
}

/// A snapshot of one partition's state and activity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionStats {
    /// Puts acknowledged since open.
    pub puts: u64,
    /// Deletes acknowledged since open.
    pub deletes: u64,
    /// Value bytes acknowledged since open.
    pub value_bytes: u64,
    /// Buffers written to the value log since open.
    pub flushes: u64,
    /// Bytes those flushes wrote.
    pub flushed_bytes: u64,
    /// Records written in regions of their own (too large for a buffer).
    pub large_writes: u64,
    /// The committed end of the value log.
    pub committed_end: u64,
    /// The end of the key log.
    pub keylog_end: u64,
}

/// A snapshot of the engine's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineStats {
    /// Per partition, in order.
    pub partitions: Vec<PartitionStats>,
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
}

/// A SplitKV data directory opened for reading and writing.
///
/// Thread-safe: every method takes `&self`. Writes to one partition are
/// serialised by its lock. Different partitions do not share a lock on the
/// write path, but they do share the global sequence counter, the writer
/// epoch, the poison state (one partition's failed flush or sync refuses
/// writes to all), the pool of range-read buffers, and the disk's I/O
/// engine (one io_uring thread carries every partition's O_DIRECT
/// writes).
pub struct StorageEngine {
    shared: Arc<Shared>,
    partitions: Vec<Arc<Partition>>,
    flushers: Mutex<Vec<JoinHandle<()>>>,
    epoch_file: Mutex<EpochFile>,
    disk: Arc<dyn Disk>,
    manifest: Manifest,
    recovery: Vec<PartitionRecovery>,
    closed: AtomicBool,
    _lock: DirLock,
}

impl StorageEngine {
    /// Opens (or creates) the data directory of `config` on the real file
    /// system, with the configured I/O engine.
    pub fn open(config: EngineConfig) -> Result<Self> {
        let disk = Arc::new(OsDisk::new(config.io_engine));
        Self::open_with_disk(config, disk)
    }

    /// Opens (or creates) the data directory of `config` through `disk`.
    ///
    /// Recovers every partition (see [`crate::recovery`]): after this
    /// returns, every write acknowledged before a crash is readable.
    pub fn open_with_disk(config: EngineConfig, disk: Arc<dyn Disk>) -> Result<Self> {
        let dir = config.data_dir.clone();
        disk.create_dir_all(&dir)
            .map_err(|e| StorageError::io(format!("creating {}", dir.display()), e))?;
        let lock = DirLock::acquire(&*disk, &dir)?;
        recovery::probe_direct_io(&*disk, &dir)?;
        let manifest = Manifest::load_or_create(&*disk, &config)?;
        let (epoch_file, epoch) = EpochFile::open(&*disk, &dir)?;

        let mut recovered = Vec::with_capacity(manifest.partitions);
        for id in 0..manifest.partitions {
            recovered.push(recovery::recover_partition(&*disk, &dir, id, &manifest)?);
        }
        let max_seq = recovered
            .iter()
            .map(|r| r.report.keylog.max_seq)
            .max()
            .unwrap_or(0);
        let read_only = recovered.iter().find_map(|r| r.read_only_reason.clone());
        if let Some(reason) = &read_only {
            tracing::error!("opening {} read-only: {reason}", dir.display());
        }
        let shared = Arc::new(Shared {
            next_seq: AtomicU64::new(max_seq + 1),
            epoch: AtomicU64::new(epoch),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(None),
            read_only,
            durability: config.durability,
            limits: config.limits,
            keylog_chunk_bytes: manifest.keylog_chunk_bytes,
            range_buffers: BufferPool::new(RANGE_BUFFERS_KEPT),
        });
        let mut partitions = Vec::with_capacity(recovered.len());
        let mut reports = Vec::with_capacity(recovered.len());
        for (id, r) in recovered.into_iter().enumerate() {
            reports.push(r.report);
            partitions.push(Arc::new(Partition::new(
                id,
                Arc::clone(&shared),
                r.vlog,
                r.buffers,
                r.state,
                r.vlog_allocated,
            )));
        }
        let mut flushers = Vec::new();
        if shared.read_only.is_none() {
            for partition in &partitions {
                let partition = Arc::clone(partition);
                let handle = std::thread::Builder::new()
                    .name(format!("flush-p{}", partition.id))
                    .spawn(move || partition.run_flusher())
                    .map_err(|e| StorageError::io("starting a flusher thread", e))?;
                flushers.push(handle);
            }
        }
        tracing::info!(
            dir = %dir.display(),
            partitions = manifest.partitions,
            next_seq = max_seq + 1,
            io_engine = %disk.io_engine(),
            durability = %config.durability,
            "storage engine open"
        );
        Ok(Self {
            shared,
            partitions,
            flushers: Mutex::new(flushers),
            epoch_file: Mutex::new(epoch_file),
            disk,
            manifest,
            recovery: reports,
            closed: AtomicBool::new(false),
            _lock: lock,
        })
    }

    fn partition(&self, partition: usize) -> Result<&Partition> {
        self.partitions
            .get(partition)
            .map(|p| &**p)
            .ok_or(StorageError::NoSuchPartition {
                partition,
                count: self.partitions.len(),
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
        self.shared.limits
    }

    /// Puts `key` = `value` into `partition` and returns its sequence number
    /// once acknowledged (see [`StorageEngine::write`]).
    pub fn put(&self, partition: usize, key: &[u8], value: &[u8]) -> Result<u64> {
        let mut ack = [WriteAck::default()];
        self.write(partition, None, &[WriteOp::Put { key, value }], &mut ack)?;
        Ok(ack[0].seq)
    }

    /// Deletes `key` (writes a tombstone into `partition`'s key log).
    pub fn delete(&self, partition: usize, key: &[u8]) -> Result<u64> {
        let mut ack = [WriteAck::default()];
        self.write(partition, None, &[WriteOp::Delete { key }], &mut ack)?;
        Ok(ack[0].seq)
    }

    /// Applies `ops` to `partition` as one unit and writes one
    /// acknowledgement (sequence number and value-log offset) per op into
    /// `acks`.
    ///
    /// Guarantees on return: every op is in the key log, after every write
    /// acknowledged before it in this partition; in `mmap` durability it
    /// survives the death of this process, in `sync` durability a power
    /// loss. After a crash either all ops of the unit are there or none.
    /// With `epoch`, the write is refused with [`StorageError::Fenced`] if a
    /// newer writer epoch has begun.
    pub fn write(
        &self,
        partition: usize,
        epoch: Option<u64>,
        ops: &[WriteOp<'_>],
        acks: &mut [WriteAck],
    ) -> Result<()> {
        self.partition(partition)?.write(ops, epoch, acks, true)
    }

    /// Like [`StorageEngine::write`], but never waits: where `write` would
    /// wait for a buffer to be flushed, write a record too large for a
    /// buffer, or sync, it returns [`StorageError::WouldBlock`] having
    /// committed nothing, so an async caller can retry on a blocking thread.
    pub fn try_write(
        &self,
        partition: usize,
        epoch: Option<u64>,
        ops: &[WriteOp<'_>],
        acks: &mut [WriteAck],
    ) -> Result<()> {
        self.partition(partition)?.write(ops, epoch, acks, false)
    }

    /// Reads the record at `offset` of `len` bytes in `partition`, verifying
    /// its checksum: a torn or corrupt record is an error, never data.
    pub fn read(&self, partition: usize, offset: u64, len: usize) -> Result<RecordBytes> {
        self.partition(partition)?.read(offset, len)
    }

    /// Reads up to `max_len` (at most 16 MiB) bytes of `partition`'s value
    /// log from `offset`, including records still in write buffers, never
    /// past the committed end (which it returns).
    pub fn read_range(&self, partition: usize, offset: u64, max_len: usize) -> Result<RangeRead> {
        self.partition(partition)?.read_range(offset, max_len)
    }

    /// Appends to `out` about `max_bytes` of complete key-log frames of
    /// `partition`, from position `from` (0 to start), that hold entries with
    /// a sequence number of at least `min_seq`.
    pub fn export_keylog(
        &self,
        partition: usize,
        from: u64,
        min_seq: u64,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<ExportProgress> {
        self.partition(partition)?
            .export(from, min_seq, max_bytes, out)
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
        let next = self.shared.epoch.load(Ordering::Acquire) + 1;
        file.store(next)?;
        self.shared.epoch.store(next, Ordering::Release);
        for partition in &self.partitions {
            drop(partition.state.lock());
        }
        Ok(next)
    }

    /// The current writer epoch.
    pub fn writer_epoch(&self) -> u64 {
        self.shared.epoch.load(Ordering::Acquire)
    }

    /// A snapshot of counters and state.
    pub fn stats(&self) -> EngineStats {
        let partitions = self
            .partitions
            .iter()
            .map(|p| {
                let (committed_end, keylog_end) = {
                    let st = p.state.lock();
                    (st.committed_end(), st.keylog.end())
                };
                let c = &p.counters;
                PartitionStats {
                    puts: c.puts.load(Ordering::Relaxed),
                    deletes: c.deletes.load(Ordering::Relaxed),
                    value_bytes: c.value_bytes.load(Ordering::Relaxed),
                    flushes: c.flushes.load(Ordering::Relaxed),
                    flushed_bytes: c.flushed_bytes.load(Ordering::Relaxed),
                    large_writes: c.large_writes.load(Ordering::Relaxed),
                    committed_end,
                    keylog_end,
                }
            })
            .collect();
        EngineStats {
            partitions,
            io_engine: self.io_engine(),
            durability: self.shared.durability,
            refusing_writes: self.shared.check_writable().err().map(|e| e.to_string()),
            writer_epoch: self.writer_epoch(),
            next_seq: self.shared.next_seq.load(Ordering::Relaxed),
        }
    }

    /// Writes every buffer to the value log, makes everything durable, and
    /// stops the flushers. Writes are refused from the moment this starts.
    /// Called by `Drop` too, where errors can only be logged.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for partition in &self.partitions {
            partition.begin_close();
        }
        let mut first_error = None;
        if self.shared.check_writable().is_ok() {
            for partition in &self.partitions {
                if let Err(e) = partition.wait_flushed().and_then(|()| partition.sync()) {
                    first_error.get_or_insert(e);
                }
            }
        }
        for handle in self.flushers.lock().drain(..) {
            let _ = handle.join();
        }
        match first_error {
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
