//! The node's key directory: for every key, where its newest version is,
//! and for every value-log segment, how many of its bytes are live and
//! dead.
//!
//! Every key-log entry a partition commits is applied here, under that
//! partition's lock and in its key-log order; on open the directory is
//! rebuilt by applying every partition's key log. A key may be written
//! through any partition, so entries of one key reach the directory from
//! several partitions in any interleaving: every decision goes by sequence
//! number, never by arrival, and the same entries give the same directory
//! in any order.
//!
//! - A put supersedes the key's older version (its record turns dead) or,
//!   if a newer version or a delete is already here, is dead itself.
//! - A delete or an expire leaves a marker that the versions up to a
//!   sequence number are gone, so that an older put applied later is dead.
//! - A clear turns every version with a lower sequence number dead.
//! - A relocation (a put with the sequence number of the version it moves,
//!   in the same partition, further on in its value log) replaces the
//!   version at the older offset; the copy left behind is dead.

use std::collections::{BTreeMap, HashMap};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use splitkv_common::record::{EntryKind, KeyEntry};

/// Shards of the key map (a power of two), so that partitions writing at
/// once rarely wait for one another.
const SHARDS: usize = 64;

/// Live records by (partition, segment id), each list sorted by offset.
pub(crate) type LiveBySegment = HashMap<(usize, u64), Vec<(Box<[u8]>, Place)>>;

/// Where the newest version of a key is, or that its versions are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// The newest version is a record in a value log.
    Live(Place),
    /// Every version with a sequence number up to `through` is gone
    /// (deleted or expired), and no newer one is known.
    Gone {
        /// The highest sequence number that is gone.
        through: u64,
    },
}

/// A version's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// Sequence number of the version.
    pub(crate) seq: u64,
    /// Partition whose value log holds the record.
    pub(crate) partition: u32,
    /// The record's value-log offset.
    pub(crate) offset: u64,
    /// The record's length in bytes (header, key and value).
    pub(crate) record_len: u32,
    /// When the version expires (Unix milliseconds; 0: never).
    pub(crate) expire_at_ms: u64,
}

/// Bytes of one segment's records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegmentUsage {
    /// Bytes of records written into the segment (padding excluded).
    pub(crate) written_bytes: u64,
    /// Bytes of those records superseded since.
    pub(crate) dead_bytes: u64,
}

impl SegmentUsage {
    /// Bytes of records still current.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.written_bytes - self.dead_bytes
    }
}

/// A partition's value-log bytes, summed over its segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PartitionUsage {
    /// Bytes of records still current.
    pub(crate) live_bytes: u64,
    /// Bytes of records superseded.
    pub(crate) dead_bytes: u64,
}

/// One shard of the key map: key → its newest version.
type KeyMap = HashMap<Box<[u8]>, Version>;

/// The node's key directory (see the module documentation).
pub(crate) struct KeyDirectory {
    segment_bytes: u64,
    shards: Box<[Mutex<KeyMap>]>,
    /// Per partition: segment id → usage.
    usage: Box<[Mutex<BTreeMap<u64, SegmentUsage>>]>,
    /// Every version with a lower sequence number was cleared. Raised
    /// before a clear sweeps the shards and read under a shard's lock, so
    /// that a put either meets the raised bound or is swept.
    cleared_below: AtomicU64,
    /// Record bytes of every segment still held, over all partitions.
    written_total: AtomicU64,
    /// Of those, the dead ones.
    dead_total: AtomicU64,
    /// The highest tombstone floor the marks were forgotten below: a call
    /// with no higher floor has nothing to forget and walks nothing.
    forgotten_below: AtomicU64,
}

impl KeyDirectory {
    /// An empty directory for `partitions` partitions whose value logs are
    /// cut into segments of `segment_bytes`.
    pub(crate) fn new(partitions: usize, segment_bytes: u64) -> Self {
        Self {
            segment_bytes,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            usage: (0..partitions)
                .map(|_| Mutex::new(BTreeMap::new()))
                .collect(),
            cleared_below: AtomicU64::new(0),
            written_total: AtomicU64::new(0),
            dead_total: AtomicU64::new(0),
            forgotten_below: AtomicU64::new(0),
        }
    }

    /// The live and dead record bytes of the segments still held, over all
    /// partitions (counters kept as usage changes, read without a lock).
    pub(crate) fn node_usage(&self) -> PartitionUsage {
        let written = self.written_total.load(Ordering::Relaxed);
        let dead = self.dead_total.load(Ordering::Relaxed);
        PartitionUsage {
            live_bytes: written.saturating_sub(dead),
            dead_bytes: dead,
        }
    }

    fn shard(&self, key: &[u8]) -> &Mutex<KeyMap> {
        &self.shards[crc32c::crc32c(key) as usize & (SHARDS - 1)]
    }

    /// The newest version of `key` known here.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Version> {
        self.shard(key).lock().get(key).copied()
    }

    /// Whether a rebuild still needs `entry`, the entry of its key that
    /// wins among `partition`'s own (what a checkpoint's sweep keeps; see
    /// [`crate::checkpoint`]):
    /// - a put while it is the key's newest version here (once another
    ///   entry superseded it, that entry is committed and decides);
    /// - a delete or expire while no newer put superseded it and its
    ///   sequence number is at least `tombstone_floor_seq` (below the
    ///   floor no older version of the key is left anywhere a rebuild
    ///   reads);
    /// - a clear always.
    pub(crate) fn needed_by_rebuild(
        &self,
        partition: usize,
        entry: &KeyEntry<'_>,
        tombstone_floor_seq: u64,
    ) -> bool {
        let version = self.get(entry.key);
        let gone_through = match entry.kind {
            EntryKind::Put => {
                return matches!(version, Some(Version::Live(place))
                    if place.partition as usize == partition
                        && place.seq == entry.seq
                        && place.offset == entry.value_offset);
            }
            EntryKind::Clear => return true,
            EntryKind::Delete => entry.seq,
            EntryKind::Expire { version_seq } => version_seq,
        };
        entry.seq >= tombstone_floor_seq
            && !matches!(version, Some(Version::Live(place)) if place.seq > gone_through)
    }

    /// Forgets the marks of keys whose versions up to a sequence number
    /// below `tombstone_floor_seq` are gone: no older version of those keys
    /// is left to be applied, so the marks decide nothing any more. Walks
    /// the directory only when the floor is higher than at the last call
    /// (a mark kept longer is harmless: it only shadows what is gone).
    pub(crate) fn forget_gone_below(&self, tombstone_floor_seq: u64) {
        if self
            .forgotten_below
            .fetch_max(tombstone_floor_seq, Ordering::AcqRel)
            >= tombstone_floor_seq
        {
            return;
        }
        for shard in self.shards.iter() {
            shard.lock().retain(|_, version| match *version {
                Version::Gone { through } => through >= tombstone_floor_seq,
                Version::Live(_) => true,
            });
        }
    }

    /// Applies one committed key-log entry of `partition`.
    pub(crate) fn apply(&self, partition: usize, entry: &KeyEntry<'_>) {
        match entry.kind {
            EntryKind::Put => self.apply_put(
                Place {
                    seq: entry.seq,
                    partition: partition as u32,
                    offset: entry.value_offset,
                    record_len: entry.record_len() as u32,
                    expire_at_ms: entry.expire_at_ms,
                },
                entry.key,
            ),
            EntryKind::Delete => self.apply_gone(entry.key, entry.seq),
            EntryKind::Expire { version_seq } => self.apply_gone(entry.key, version_seq),
            EntryKind::Clear => self.apply_clear(entry.seq),
        }
    }

    fn apply_put(&self, place: Place, key: &[u8]) {
        self.add_written(&place);
        let mut shard = self.shard(key).lock();
        if place.seq < self.cleared_below.load(Ordering::Acquire) {
            drop(shard);
            self.add_dead(&place);
            return;
        }
        let Some(current) = shard.get_mut(key) else {
            shard.insert(key.into(), Version::Live(place));
            return;
        };
        let superseded = match *current {
            Version::Gone { through } if place.seq <= through => Some(place),
            Version::Gone { .. } => {
                *current = Version::Live(place);
                None
            }
            Version::Live(old) if supersedes(&place, &old) => {
                *current = Version::Live(place);
                Some(old)
            }
            Version::Live(_) => Some(place),
        };
        drop(shard);
        if let Some(dead) = superseded {
            self.add_dead(&dead);
        }
    }

    fn apply_gone(&self, key: &[u8], through: u64) {
        let mut shard = self.shard(key).lock();
        if through < self.cleared_below.load(Ordering::Acquire) {
            // Everything it could remove was cleared already.
            return;
        }
        let superseded = match shard.get_mut(key) {
            None => {
                shard.insert(key.into(), Version::Gone { through });
                None
            }
            Some(current) => match *current {
                Version::Live(old) if old.seq <= through => {
                    *current = Version::Gone { through };
                    Some(old)
                }
                Version::Live(_) => None,
                Version::Gone { through: had } => {
                    *current = Version::Gone {
                        through: had.max(through),
                    };
                    None
                }
            },
        };
        drop(shard);
        if let Some(dead) = superseded {
            self.add_dead(&dead);
        }
    }

    fn apply_clear(&self, seq: u64) {
        let below = self.cleared_below.fetch_max(seq, Ordering::AcqRel).max(seq);
        for shard in self.shards.iter() {
            let mut dead = Vec::new();
            shard.lock().retain(|_, version| match *version {
                Version::Live(place) if place.seq < below => {
                    dead.push(place);
                    false
                }
                Version::Live(_) => true,
                Version::Gone { through } => through >= below,
            });
            for place in &dead {
                self.add_dead(place);
            }
        }
    }

    fn segment_of(&self, place: &Place) -> u64 {
        place.offset / self.segment_bytes
    }

    fn add_written(&self, place: &Place) {
        let segment = self.segment_of(place);
        if let Some(usage) = self.usage.get(place.partition as usize) {
            let len = u64::from(place.record_len);
            usage.lock().entry(segment).or_default().written_bytes += len;
            self.written_total.fetch_add(len, Ordering::Relaxed);
        }
    }

    fn add_dead(&self, place: &Place) {
        let segment = self.segment_of(place);
        if let Some(usage) = self.usage.get(place.partition as usize) {
            let len = u64::from(place.record_len);
            usage.lock().entry(segment).or_default().dead_bytes += len;
            self.dead_total.fetch_add(len, Ordering::Relaxed);
        }
    }

    /// The live records of each of `segments` (partition, segment id), by
    /// segment, each list sorted by offset (a segment without any is not
    /// in the map): one look at every key, however many segments.
    pub(crate) fn live_in_segments(&self, segments: &[(usize, u64)]) -> LiveBySegment {
        let mut live = LiveBySegment::new();
        if segments.is_empty() {
            return live;
        }
        for shard in self.shards.iter() {
            for (key, version) in shard.lock().iter() {
                if let Version::Live(place) = *version {
                    let segment = (place.partition as usize, self.segment_of(&place));
                    if segments.contains(&segment) {
                        live.entry(segment).or_default().push((key.clone(), place));
                    }
                }
            }
        }
        for records in live.values_mut() {
            records.sort_unstable_by_key(|(_, place)| place.offset);
        }
        live
    }

    /// The usage of every segment of `partition` that holds records, by id.
    pub(crate) fn segment_usage(&self, partition: usize) -> BTreeMap<u64, SegmentUsage> {
        self.usage
            .get(partition)
            .map(|usage| usage.lock().clone())
            .unwrap_or_default()
    }

    /// The live and dead bytes of `partition`'s value log.
    pub(crate) fn partition_usage(&self, partition: usize) -> PartitionUsage {
        let Some(usage) = self.usage.get(partition) else {
            return PartitionUsage::default();
        };
        usage
            .lock()
            .values()
            .fold(PartitionUsage::default(), |sum, segment| PartitionUsage {
                live_bytes: sum.live_bytes + segment.live_bytes(),
                dead_bytes: sum.dead_bytes + segment.dead_bytes,
            })
    }

    /// Settles segment `id` of `partition` as holding `used_bytes` (its
    /// records and padding) after a rebuild: what its live records do not
    /// take is dead, whether the entries that superseded it were seen (the
    /// key logs) or folded away (a checkpoint keeps only the winners).
    pub(crate) fn settle_segment(&self, partition: usize, id: u64, used_bytes: u64) {
        if let Some(usage) = self.usage.get(partition) {
            let mut usage = usage.lock();
            let segment = usage.entry(id).or_default();
            let before = *segment;
            let live = segment.live_bytes();
            segment.written_bytes = used_bytes.max(live);
            segment.dead_bytes = segment.written_bytes - live;
            self.adjust_totals(&before, segment);
        }
    }

    /// Forgets the usage of segment `id` of `partition` (freed).
    pub(crate) fn forget_segment(&self, partition: usize, id: u64) {
        if let Some(usage) = self.usage.get(partition)
            && let Some(gone) = usage.lock().remove(&id)
        {
            self.adjust_totals(&gone, &SegmentUsage::default());
        }
    }

    /// Moves the node-wide totals from a segment's usage `before` to `after`.
    fn adjust_totals(&self, before: &SegmentUsage, after: &SegmentUsage) {
        let shift = |total: &AtomicU64, from: u64, to: u64| {
            if to >= from {
                total.fetch_add(to - from, Ordering::Relaxed);
            } else {
                total.fetch_sub(from - to, Ordering::Relaxed);
            }
        };
        shift(
            &self.written_total,
            before.written_bytes,
            after.written_bytes,
        );
        shift(&self.dead_total, before.dead_bytes, after.dead_bytes);
    }
}

/// Whether `new` replaces `old` as a key's newest version: a higher
/// sequence number, or the same version relocated further on in the same
/// partition's value log.
fn supersedes(new: &Place, old: &Place) -> bool {
    new.seq > old.seq
        || (new.seq == old.seq && new.partition == old.partition && new.offset > old.offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SEGMENT: u64 = 1000;

    fn put(seq: u64, offset: u64, key: &[u8]) -> KeyEntry<'_> {
        KeyEntry {
            kind: EntryKind::Put,
            seq,
            value_offset: offset,
            value_len: 10,
            expire_at_ms: 0,
            key,
        }
    }

    fn keyless(kind: EntryKind, seq: u64, key: &[u8]) -> KeyEntry<'_> {
        KeyEntry {
            kind,
            seq,
            value_offset: 0,
            value_len: 0,
            expire_at_ms: 0,
            key,
        }
    }

    fn record_len() -> u64 {
        put(1, 0, b"k").record_len() as u64
    }

    /// Live and dead bytes summed over the partitions; the node-wide
    /// counters must say the same.
    fn totals(dir: &KeyDirectory, partitions: usize) -> (u64, u64) {
        let sum = (0..partitions)
            .map(|p| dir.partition_usage(p))
            .fold((0, 0), |(l, d), u| (l + u.live_bytes, d + u.dead_bytes));
        let node = dir.node_usage();
        assert_eq!(
            (node.live_bytes, node.dead_bytes),
            sum,
            "node-wide counters"
        );
        sum
    }

    #[test]
    fn an_overwrite_turns_the_old_record_dead_in_its_own_segment() {
        let dir = KeyDirectory::new(2, SEGMENT);
        dir.apply(0, &put(1, 10, b"k"));
        dir.apply(1, &put(2, 2500, b"k"));
        let len = record_len();
        assert_eq!(
            dir.segment_usage(0)[&0],
            SegmentUsage {
                written_bytes: len,
                dead_bytes: len
            }
        );
        assert_eq!(
            dir.segment_usage(1)[&2],
            SegmentUsage {
                written_bytes: len,
                dead_bytes: 0
            }
        );
        assert!(matches!(dir.get(b"k"), Some(Version::Live(p)) if p.seq == 2 && p.partition == 1));
    }

    #[test]
    fn an_older_put_applied_after_a_delete_is_dead_at_once() {
        let dir = KeyDirectory::new(2, SEGMENT);
        dir.apply(1, &keyless(EntryKind::Delete, 5, b"k"));
        dir.apply(0, &put(3, 10, b"k"));
        assert_eq!(dir.get(b"k"), Some(Version::Gone { through: 5 }));
        assert_eq!(totals(&dir, 2), (0, record_len()));
        dir.apply(0, &put(6, 40, b"k"));
        assert!(matches!(dir.get(b"k"), Some(Version::Live(p)) if p.seq == 6));
    }

    #[test]
    fn an_expire_removes_only_the_version_it_names() {
        let dir = KeyDirectory::new(1, SEGMENT);
        dir.apply(0, &put(1, 0, b"k"));
        dir.apply(0, &put(2, 100, b"k"));
        dir.apply(0, &keyless(EntryKind::Expire { version_seq: 1 }, 3, b"k"));
        assert!(matches!(dir.get(b"k"), Some(Version::Live(p)) if p.seq == 2));
        dir.apply(0, &keyless(EntryKind::Expire { version_seq: 2 }, 4, b"k"));
        assert_eq!(dir.get(b"k"), Some(Version::Gone { through: 2 }));
        assert_eq!(totals(&dir, 1), (0, 2 * record_len()));
    }

    #[test]
    fn a_clear_kills_every_older_version_whenever_they_are_applied() {
        let dir = KeyDirectory::new(2, SEGMENT);
        dir.apply(0, &put(1, 0, b"a"));
        dir.apply(1, &keyless(EntryKind::Clear, 3, b""));
        dir.apply(0, &put(2, 100, b"b"));
        dir.apply(0, &put(4, 200, b"c"));
        assert_eq!(dir.get(b"a"), None);
        assert_eq!(dir.get(b"b"), None);
        assert!(dir.get(b"c").is_some());
        assert_eq!(totals(&dir, 2), (record_len(), 2 * record_len()));
    }

    #[test]
    fn a_relocation_replaces_the_version_at_the_older_offset_in_any_order() {
        for reversed in [false, true] {
            let dir = KeyDirectory::new(1, SEGMENT);
            let mut entries = vec![put(7, 100, b"k"), put(7, 5000, b"k")];
            if reversed {
                entries.reverse();
            }
            for entry in &entries {
                dir.apply(0, entry);
            }
            assert!(matches!(dir.get(b"k"), Some(Version::Live(p)) if p.offset == 5000));
            let usage = dir.segment_usage(0);
            assert_eq!(usage[&0].dead_bytes, record_len(), "the old copy is dead");
            assert_eq!(usage[&5].live_bytes(), record_len());
        }
    }

    #[test]
    fn a_rebuild_needs_only_newest_puts_and_deletes_above_the_floor_not_superseded() {
        let dir = KeyDirectory::new(2, SEGMENT);
        // "a": put in 0, overwritten in 1. "b": put in 0, deleted in 1.
        // "c": deleted in 0, put again in 1. "d": expired in 1.
        let entries = [
            (0, put(1, 0, b"a")),
            (1, put(2, 0, b"a")),
            (0, put(3, 100, b"b")),
            (1, keyless(EntryKind::Delete, 4, b"b")),
            (0, keyless(EntryKind::Delete, 5, b"c")),
            (1, put(6, 100, b"c")),
            (1, put(7, 200, b"d")),
            (1, keyless(EntryKind::Expire { version_seq: 7 }, 8, b"d")),
        ];
        for (p, e) in &entries {
            dir.apply(*p, e);
        }
        let needed = |floor: u64| -> Vec<bool> {
            entries
                .iter()
                .map(|(p, e)| dir.needed_by_rebuild(*p, e, floor))
                .collect()
        };
        assert_eq!(
            needed(0),
            [false, true, false, true, false, true, false, true]
        );
        // Below the floor, a delete or an expire is needed no more; one at
        // or above it still is.
        assert_eq!(
            needed(8),
            [false, true, false, false, false, true, false, true]
        );
        assert_eq!(
            needed(9),
            [false, true, false, false, false, true, false, false]
        );
        // A relocated version is needed only at its new place.
        dir.apply(1, &put(2, 5000, b"a"));
        assert!(!dir.needed_by_rebuild(1, &put(2, 0, b"a"), 0));
        assert!(dir.needed_by_rebuild(1, &put(2, 5000, b"a"), 0));
        // The marks below the floor go; the live versions stay.
        dir.forget_gone_below(5);
        assert_eq!(dir.get(b"b"), None);
        assert_eq!(dir.get(b"d"), Some(Version::Gone { through: 7 }));
        assert!(matches!(dir.get(b"c"), Some(Version::Live(p)) if p.seq == 6));
        // The same floor again walks nothing (a mark kept is harmless); a
        // higher one forgets what is below it.
        dir.apply(0, &keyless(EntryKind::Delete, 3, b"late"));
        dir.forget_gone_below(5);
        assert_eq!(dir.get(b"late"), Some(Version::Gone { through: 3 }));
        dir.forget_gone_below(8);
        assert_eq!(dir.get(b"late"), None);
        assert_eq!(dir.get(b"d"), None);
    }

    proptest! {
        /// Any interleaving of the partitions' entries gives the same
        /// directory and the same usage, and live bytes are the bytes of
        /// the newest live versions.
        #[test]
        fn the_order_of_partitions_does_not_matter(
            ops in proptest::collection::vec((0u8..4, 0u8..6, 0u8..3), 1..60),
            seed in any::<u64>(),
        ) {
            let keys: Vec<Vec<u8>> = (0..6u8).map(|k| vec![b'k', k]).collect();
            // (partition, entry) in sequence order: kind 1 is a delete, kind 2
            // now and then a clear, anything else a put.
            let mut offsets = [0u64; 4];
            let mut entries = Vec::new();
            for (seq, &(partition, key, kind)) in ops.iter().enumerate() {
                let seq = seq as u64 + 1;
                let key = &keys[key as usize][..];
                let entry = match kind {
                    1 => keyless(EntryKind::Delete, seq, key),
                    2 if seq.is_multiple_of(5) => keyless(EntryKind::Clear, seq, b""),
                    _ => {
                        let offset = offsets[partition as usize];
                        offsets[partition as usize] += 300;
                        put(seq, offset, key)
                    }
                };
                entries.push((partition as usize, entry));
            }
            let in_order = KeyDirectory::new(4, SEGMENT);
            for (p, e) in &entries {
                in_order.apply(*p, e);
            }
            // Another interleaving that keeps each partition's own order.
            let mut queues: Vec<Vec<_>> = vec![Vec::new(); 4];
            for (p, e) in &entries {
                queues[*p].push(*e);
            }
            let shuffled = KeyDirectory::new(4, SEGMENT);
            let mut state = seed | 1;
            let mut heads = [0usize; 4];
            while heads.iter().zip(&queues).any(|(h, q)| *h < q.len()) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let p = (state % 4) as usize;
                if heads[p] < queues[p].len() {
                    shuffled.apply(p, &queues[p][heads[p]]);
                    heads[p] += 1;
                }
            }
            for key in &keys {
                let a = in_order.get(key);
                let b = shuffled.get(key);
                let live = |v: Option<Version>| match v { Some(Version::Live(p)) => Some(p), _ => None };
                prop_assert_eq!(live(a), live(b), "key {:?}", key);
            }
            for p in 0..4 {
                prop_assert_eq!(in_order.segment_usage(p), shuffled.segment_usage(p));
            }
            let live_total: u64 = keys.iter().filter_map(|k| match in_order.get(k) {
                Some(Version::Live(p)) => Some(u64::from(p.record_len)),
                _ => None,
            }).sum();
            prop_assert_eq!(totals(&in_order, 4).0, live_total);
            // Settling and forgetting segments keep the node-wide counters.
            in_order.settle_segment(0, 0, 5000);
            in_order.forget_segment(1, 0);
            totals(&in_order, 4);
        }
    }
}
