//! The compute node's in-memory view of the storage node: the key index,
//! the hot-value cache, each partition's read windows, the positions
//! acknowledged and applied per partition, and the gate that keeps a
//! multi-key read from seeing half a batch. It does no I/O: the tasks
//! around it (the write and read routes, the rebuild, a reader's followers,
//! the active expiry, promotion) are given it, feed it what the storage
//! node answers, and ask it what to send.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use splitkv_common::client::{ClientError, KeyWrite};
use splitkv_common::message::{WireError, WriteAck};
use splitkv_common::record::{self, EntryKind, Frame, VALUE_HEADER_BYTES};

use crate::batch_gate::BatchGate;
use crate::cache::ValueCache;
use crate::error::{EngineError, Result};
use crate::expiry;
use crate::index::{Index, Location};
use crate::window::{Fetch, PartitionWindows, WindowLookup};

/// Counters of the engine's work since it started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) puts: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) point_reads: AtomicU64,
    /// Index entries moved after a read answered `moved`.
    pub(crate) relocations: AtomicU64,
    /// Coalesced write batches sent (see `writes`).
    pub(crate) put_batches: AtomicU64,
    /// Coalesced `GetMany` requests sent (see `reads`).
    pub(crate) read_batches: AtomicU64,
    pub(crate) window_fetches: AtomicU64,
    pub(crate) window_fetch_bytes: AtomicU64,
    pub(crate) tail_pulls: AtomicU64,
    pub(crate) clears: AtomicU64,
    /// Keys the active expiry removed.
    pub(crate) expired_keys: AtomicU64,
    /// Milliseconds the start's index rebuild took.
    pub(crate) rebuild_ms: AtomicU64,
}

/// What one run of merged key-log entries brought.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Merged {
    /// Highest sequence number of any entry.
    pub(crate) max_seq: u64,
    /// Highest clear entry (FLUSHALL) seen.
    pub(crate) clear_seq: u64,
    /// End of the furthest record any entry points at.
    pub(crate) value_end: u64,
    /// Entries merged (puts, deletes and clears).
    pub(crate) entries: u64,
}

/// Key-log bytes of a one-entry frame with an 8-byte key, the smallest
/// common entry: a merge sizes its list of changes for a chunk's bytes
/// divided by this.
const PRESIZE_ENTRY_BYTES: u64 =
    (record::FRAME_HEADER_BYTES + record::ENTRY_HEADER_BYTES + 8) as u64;

/// The in-memory view (see the module documentation).
pub(crate) struct View {
    pub(crate) index: Index,
    pub(crate) windows: Vec<PartitionWindows>,
    /// Values of hot keys, for reads no window covers.
    pub(crate) cache: ValueCache,
    /// Keeps multi-key reads from seeing part of a batch.
    pub(crate) batches: BatchGate,
    pub(crate) counters: Counters,
    /// Per partition: the highest sequence number acknowledged or applied
    /// in it. After its connection comes back, the key-log tail past it is
    /// pulled, so a write whose acknowledgement was lost becomes visible.
    acked_seq: Vec<AtomicU64>,
    /// Per partition: key-log entries applied (the rebuild's and, for a
    /// reader, the followed ones).
    applied_entries: Vec<AtomicU64>,
    /// Per partition: milliseconds since the view was made at which
    /// entries were last applied.
    applied_at_ms: Vec<AtomicU64>,
    /// Per partition, for a reader: its key-log stream has caught up with
    /// the end it found and is following what is appended.
    caught_up: Vec<AtomicBool>,
    /// Woken each time a reader applies followed key-log entries, and each
    /// time the writer's active expiry removes keys.
    applied: tokio::sync::Notify,
    started: Instant,
}

impl View {
    /// An empty view of `partitions` partitions, with windows of
    /// `window_bytes` and a value cache bound to `cache_bytes`.
    pub(crate) fn new(partitions: usize, window_bytes: u64, cache_bytes: u64) -> Self {
        let zeros = || (0..partitions).map(|_| AtomicU64::new(0)).collect();
        Self {
            index: Index::new(),
            windows: (0..partitions)
                .map(|_| PartitionWindows::new(window_bytes))
                .collect(),
            cache: ValueCache::new(cache_bytes),
            batches: BatchGate::default(),
            counters: Counters::default(),
            acked_seq: zeros(),
            applied_entries: zeros(),
            applied_at_ms: zeros(),
            caught_up: (0..partitions).map(|_| AtomicBool::new(false)).collect(),
            applied: tokio::sync::Notify::new(),
            started: Instant::now(),
        }
    }

    pub(crate) fn partitions(&self) -> usize {
        self.windows.len()
    }

    /// The highest sequence number applied in `partition`.
    pub(crate) fn acked_seq(&self, partition: usize) -> u64 {
        self.acked_seq[partition].load(Ordering::Acquire)
    }

    /// Per partition, the highest sequence number applied there.
    pub(crate) fn acked_seqs(&self) -> Vec<u64> {
        (0..self.partitions())
            .map(|partition| self.acked_seq(partition))
            .collect()
    }

    /// Key-log entries applied in `partition` and when they were last
    /// (milliseconds since the view was made), if there is such a
    /// partition.
    pub(crate) fn applied(&self, partition: usize) -> Option<(u64, u64)> {
        let entries = self.applied_entries.get(partition)?;
        Some((
            entries.load(Ordering::Acquire),
            self.applied_at_ms[partition].load(Ordering::Acquire),
        ))
    }

    /// Notes one acknowledged write of this node's own: a key-log entry of
    /// `partition` at `seq`. Counted among the applied entries too, so that
    /// a writer that becomes a reader measures its lag from what it holds
    /// (an entry pulled after a reconnection and then acknowledged counts
    /// twice, which can only make the lag read lower).
    pub(crate) fn note_acked(&self, partition: usize, seq: u64) {
        self.applied_entries[partition].fetch_add(1, Ordering::AcqRel);
        self.acked_seq[partition].fetch_max(seq, Ordering::AcqRel);
    }

    /// Notes key-log entries of `partition` merged into the index.
    /// The entry count is raised before the sequence number, so whoever
    /// sees the sequence number sees the count.
    pub(crate) fn note_applied(&self, partition: usize, merged: &Merged) {
        self.applied_at_ms[partition].store(self.uptime_ms(), Ordering::Release);
        self.applied_entries[partition].fetch_add(merged.entries, Ordering::AcqRel);
        self.windows[partition].note_committed_end(merged.value_end);
        self.acked_seq[partition].fetch_max(merged.max_seq, Ordering::AcqRel);
    }

    /// Notes whether `partition`'s key-log stream has caught up (a reader's).
    pub(crate) fn set_caught_up(&self, partition: usize, caught_up: bool) {
        self.caught_up[partition].store(caught_up, Ordering::Release);
    }

    /// True while every partition's key-log stream has caught up.
    pub(crate) fn all_caught_up(&self) -> bool {
        self.caught_up
            .iter()
            .all(|caught_up| caught_up.load(Ordering::Acquire))
    }

    /// Wakes whoever waits for applied entries ([`View::applied_changed`]).
    pub(crate) fn notify_applied(&self) {
        self.applied.notify_waiters();
    }

    /// Completes the next time entries are applied or expired keys removed.
    pub(crate) fn applied_changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.applied.notified()
    }

    pub(crate) fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Records the acknowledgements of a batch of writes, one per write in
    /// order, as one unit (no multi-key read sees part of it): a put enters
    /// the index, then the value cache (when it takes values of its size),
    /// so that from the index change on no read returns an older version; a
    /// delete leaves a tombstone at its sequence number; an expiry removes
    /// the version it names (a tombstone at that version's sequence number,
    /// which a newer version outranks). Returns, per write, whether it was
    /// an expiry that removed its version. The only way an acknowledged
    /// write enters the view.
    pub(crate) fn record<B: AsRef<[u8]>>(
        &self,
        partition: usize,
        writes: &[KeyWrite<B>],
        acks: Vec<WriteAck>,
    ) -> Result<Vec<bool>> {
        if acks.len() != writes.len() {
            return Err(EngineError::AnswerCount {
                asked: writes.len(),
                answered: acks.len(),
            });
        }
        let tombstone = |seq| Location::tombstone(seq, partition as u16);
        Ok(self.batches.apply(|| {
            writes
                .iter()
                .zip(acks)
                .map(|(write, ack)| {
                    let removed = match write {
                        KeyWrite::Put {
                            key,
                            value,
                            expire_at_ms,
                        } => {
                            let (key, value) = (key.as_ref(), value.as_ref());
                            let len = record::value_record_len(key.len(), value.len());
                            let location = Location {
                                seq: ack.seq,
                                offset: ack.offset,
                                len: len as u32,
                                partition: partition as u16,
                                expire_at_ms: *expire_at_ms,
                            };
                            if self.index.apply(key, location) {
                                if self.cache.admits(value.len()) {
                                    self.cache.insert(key, location, value);
                                } else {
                                    self.cache.remove(key, ack.seq);
                                }
                            }
                            self.windows[partition].note_committed_end(ack.offset + len as u64);
                            self.counters.puts.fetch_add(1, Ordering::Relaxed);
                            false
                        }
                        KeyWrite::Delete { key } => {
                            let key = key.as_ref();
                            self.index.apply(key, tombstone(ack.seq));
                            self.cache.remove(key, ack.seq);
                            self.counters.deletes.fetch_add(1, Ordering::Relaxed);
                            false
                        }
                        KeyWrite::Expire { key, version_seq } => {
                            let key = key.as_ref();
                            let removed = self.index.apply(key, tombstone(*version_seq));
                            if removed {
                                self.cache.remove(key, *version_seq);
                            }
                            removed
                        }
                    };
                    self.note_acked(partition, ack.seq);
                    removed
                })
                .collect()
        }))
    }

    /// Applies a clear entry with sequence number `seq` (FLUSHALL): every
    /// version below it leaves the index and the value cache, and no
    /// acknowledgement below it is applied from then on. Returns the live
    /// keys removed. Does nothing for a clear already applied.
    pub(crate) fn apply_clear(&self, seq: u64) -> u64 {
        if seq <= self.index.floor_seq() {
            return 0;
        }
        let removed = self.index.clear_below(seq);
        self.cache.clear_below(seq);
        self.counters.clears.fetch_add(1, Ordering::Relaxed);
        removed
    }

    /// Applies every entry of a run of key-log frames of `partition` to the
    /// index, a chunk at a time (each shard locked once per chunk), then the
    /// highest clear entry of the chunk: the clear removes what the chunk
    /// and earlier chunks of any partition brought below it, and refuses
    /// what later chunks bring below it, so the order in which partitions
    /// arrive does not matter. A put whose expiry time has passed is
    /// applied as a tombstone at its own sequence number, as its expire
    /// entry would be.
    pub(crate) fn merge_frames(
        &self,
        partition: usize,
        frames: &Bytes,
        merged: &mut Merged,
    ) -> Result<(), ClientError> {
        let mut changes = Vec::with_capacity(frames.len() / PRESIZE_ENTRY_BYTES as usize);
        let mut clear_seq = 0;
        let now_ms = expiry::now_ms();
        let mut at = 0;
        while at < frames.len() {
            let key_log = |error| ClientError::KeyLog { partition, error };
            let (frame, used) = record::decode_frame(&frames[at..]).map_err(key_log)?;
            if let Frame::Entries(entries) = frame {
                for entry in entries.iter() {
                    let entry = entry.map_err(key_log)?;
                    merged.entries += 1;
                    merged.max_seq = merged.max_seq.max(entry.seq);
                    let location = match entry.kind {
                        EntryKind::Put => {
                            let len = entry.record_len();
                            merged.value_end =
                                merged.value_end.max(entry.value_offset + len as u64);
                            let location = Location {
                                seq: entry.seq,
                                offset: entry.value_offset,
                                len: len as u32,
                                partition: partition as u16,
                                expire_at_ms: entry.expire_at_ms,
                            };
                            if expiry::has_expired(&location, now_ms) {
                                // Gone already: held as what it is, a
                                // tombstone at its own sequence number.
                                Location::tombstone(entry.seq, partition as u16)
                            } else {
                                location
                            }
                        }
                        EntryKind::Delete => Location::tombstone(entry.seq, partition as u16),
                        EntryKind::Expire { version_seq } => {
                            Location::tombstone(version_seq, partition as u16)
                        }
                        EntryKind::Clear => {
                            clear_seq = clear_seq.max(entry.seq);
                            continue;
                        }
                    };
                    changes.push((entry.key, location));
                }
            }
            at += used;
        }
        self.batches.apply(|| self.index.apply_many(&changes));
        if clear_seq > 0 {
            self.apply_clear(clear_seq);
            merged.clear_seq = merged.clear_seq.max(clear_seq);
        }
        Ok(())
    }

    /// `key`'s location if it has a value that has not expired.
    pub(crate) fn visible(&self, key: &[u8]) -> Option<Location> {
        self.visible_at(key, expiry::now_ms())
    }

    /// `key`'s location if it has a value that has not expired at `now_ms`.
    pub(crate) fn visible_at(&self, key: &[u8], now_ms: u64) -> Option<Location> {
        self.index
            .get(key)
            .filter(|location| expiry::is_visible(location, now_ms))
    }

    fn hit(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    fn miss(&self) {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// `key`'s value if a ready window holds its record intact, counting
    /// the read as a hit or a miss; `None`: read the record on its own (a
    /// window that will hold it may be on its way, and is not waited for).
    /// Also returns the window fetch the placement policy wants started,
    /// if any.
    pub(crate) fn window_value(
        &self,
        key: &[u8],
        location: &Location,
    ) -> (Option<Bytes>, Option<Fetch>) {
        let partition = location.partition as usize;
        let (lookup, fetch) =
            self.windows[partition].lookup(location.offset, u64::from(location.len));
        let value = match lookup {
            // A record's checksum is verified once per window: on its
            // first hit there.
            WindowLookup::Hit(record) => {
                let verified = record.checksum_verified();
                let value = check_record(key, location, &record.bytes, !verified).ok();
                if value.is_some() && !verified {
                    record.mark_verified();
                }
                value
            }
            WindowLookup::PointRead => None,
        };
        if value.is_some() {
            self.hit();
        } else {
            self.miss();
        }
        (value, fetch)
    }

    /// `key`'s value from the value cache, if it holds the version at
    /// `location`.
    pub(crate) fn cached_value(&self, key: &[u8], location: &Location) -> Option<Bytes> {
        let value = self.cache.get(key, location)?;
        self.hit();
        Some(value)
    }

    /// Caches a value read from the storage node, if the index still names
    /// the record it came from (a newer write may have been acknowledged
    /// meanwhile; the cache then keeps the newer version).
    pub(crate) fn fill_cache(&self, key: &[u8], location: &Location, value: &[u8]) {
        if self.cache.admits(value.len()) && self.index.get(key) == Some(*location) {
            self.cache.insert(key, *location, value);
        }
    }

    /// Moves `key`'s index entry from `from` to `to`, where garbage
    /// collection put the same version.
    pub(crate) fn relocate(&self, key: &[u8], from: Location, to: Location) {
        self.counters.relocations.fetch_add(1, Ordering::Relaxed);
        self.index.relocate(key, from, to);
    }
}

/// Why a record read back is not the one its index entry names.
#[derive(Debug, thiserror::Error)]
enum Mismatch {
    /// The bytes do not decode or verify.
    #[error(transparent)]
    Record(#[from] record::RecordError),
    #[error("the record belongs to another key")]
    OtherKey,
    #[error("the record has sequence {record}, the index {index}")]
    OtherSeq { record: u64, index: u64 },
    #[error("the record's length differs from the index's")]
    OtherLen,
}

/// Checks a record against the index entry it was read for and returns its
/// value; without `verify_checksum` its checksum is taken as verified (the
/// same bytes verified before).
fn check_record(
    key: &[u8],
    location: &Location,
    bytes: &Bytes,
    verify_checksum: bool,
) -> std::result::Result<Bytes, Mismatch> {
    let decoded = if verify_checksum {
        record::decode_value_record(bytes)
    } else {
        record::decode_verified_value_record(bytes)
    }?;
    if decoded.key != key {
        return Err(Mismatch::OtherKey);
    }
    if decoded.seq != location.seq {
        return Err(Mismatch::OtherSeq {
            record: decoded.seq,
            index: location.seq,
        });
    }
    if decoded.encoded_len() != bytes.len() {
        return Err(Mismatch::OtherLen);
    }
    Ok(bytes.slice(VALUE_HEADER_BYTES + key.len()..))
}

/// The value of a record read from the storage node, checked like a
/// window's.
pub(crate) fn value_of(key: &[u8], location: &Location, bytes: &Bytes) -> Result<Bytes> {
    check_record(key, location, bytes, true).map_err(|mismatch| EngineError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        wire: WireError::Corrupt {
            partition: u32::from(location.partition),
            offset: location.offset,
            reason: mismatch.to_string(),
        },
    })
}
