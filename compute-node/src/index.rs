//! The key index: key → where its newest version lives (partition, value-log
//! offset, record length, sequence number), or a tombstone if its newest
//! version is a delete.
//!
//! The index only ever moves a key to a higher sequence number, whatever
//! order acknowledgements and key-log entries arrive in. It is split into
//! shards, each behind its own lock, so that many threads update it at once.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashMap;
use parking_lot::RwLock;

/// Keys up to this many bytes are stored inline in the index entry.
const INLINE_KEY_BYTES: usize = 23;
const SHARDS: usize = 64;

/// A key, stored inline when short (the common case) to save an allocation
/// and a pointer per entry.
#[derive(Clone, PartialEq, Eq)]
pub enum IndexKey {
    /// `len` bytes inline.
    Inline {
        /// Length of the key.
        len: u8,
        /// The key, zero padded.
        bytes: [u8; INLINE_KEY_BYTES],
    },
    /// A longer key on the heap.
    Heap(Box<[u8]>),
}

impl IndexKey {
    /// Makes an index key from key bytes.
    pub fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE_KEY_BYTES {
            let mut bytes = [0u8; INLINE_KEY_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            IndexKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            IndexKey::Heap(key.into())
        }
    }

    /// The key bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IndexKey::Inline { len, bytes } => &bytes[..*len as usize],
            IndexKey::Heap(bytes) => bytes,
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            IndexKey::Inline { .. } => 0,
            IndexKey::Heap(bytes) => bytes.len(),
        }
    }
}

impl Hash for IndexKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl hashbrown::Equivalent<IndexKey> for [u8] {
    fn equivalent(&self, key: &IndexKey) -> bool {
        self == key.as_bytes()
    }
}

/// Where the newest version of a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Sequence number of the newest version.
    pub seq: u64,
    /// Value-log offset of its record (0 for a tombstone).
    pub offset: u64,
    /// Length of its record (0 for a tombstone).
    pub len: u32,
    /// Partition of its record.
    pub partition: u16,
}

impl Location {
    /// True if the newest version is a delete.
    pub fn is_tombstone(&self) -> bool {
        self.len == 0
    }

    /// A tombstone at `seq`.
    pub fn tombstone(seq: u64, partition: u16) -> Self {
        Self {
            seq,
            offset: 0,
            len: 0,
            partition,
        }
    }
}

/// Counts of what the index holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Keys whose newest version is a put.
    pub live_keys: u64,
    /// Keys whose newest version is a delete.
    pub tombstones: u64,
    /// Bytes the index occupies in memory (tables and long keys).
    pub memory_bytes: u64,
}

/// The sharded key index.
pub struct Index {
    shards: Vec<RwLock<HashMap<IndexKey, Location>>>,
    hasher: hashbrown::DefaultHashBuilder,
    /// Entries that are live keys, kept as entries change (so counting
    /// them does not walk the index).
    live_keys: AtomicU64,
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            live_keys: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &[u8]) -> &RwLock<HashMap<IndexKey, Location>> {
        // The shard is chosen from the top bits of a hash of its own (the
        // shard's table hashes the key again with its own seed).
        let hash = self
            .hasher
            .hash_one(key)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(hash >> 58) as usize % SHARDS]
    }

    /// The newest known location of `key` (a tombstone if deleted).
    pub fn get(&self, key: &[u8]) -> Option<Location> {
        self.shard(key).read().get(key).copied()
    }

    /// Records `location` for `key` if it is newer than what the index has.
    /// Returns true if the index changed.
    pub fn apply(&self, key: &[u8], location: Location) -> bool {
        let mut shard = self.shard(key).write();
        let was_live = match shard.get_mut(key) {
            Some(existing) if existing.seq >= location.seq => return false,
            Some(existing) => !std::mem::replace(existing, location).is_tombstone(),
            None => {
                shard.insert(IndexKey::new(key), location);
                false
            }
        };
        match (was_live, location.is_tombstone()) {
            (false, false) => self.live_keys.fetch_add(1, Ordering::Relaxed),
            (true, true) => self.live_keys.fetch_sub(1, Ordering::Relaxed),
            _ => 0,
        };
        true
    }

    /// Drops every tombstone. Only safe once no older version of a deleted
    /// key can still arrive (after a rebuild has merged every partition).
    pub fn drop_tombstones(&self) -> u64 {
        let mut dropped = 0;
        for shard in &self.shards {
            let mut shard = shard.write();
            let before = shard.len();
            shard.retain(|_, loc| !loc.is_tombstone());
            dropped += (before - shard.len()) as u64;
            shard.shrink_to_fit();
        }
        dropped
    }

    /// Counts and memory use.
    pub fn stats(&self) -> IndexStats {
        let mut stats = IndexStats::default();
        for shard in &self.shards {
            let shard = shard.read();
            stats.memory_bytes += shard.allocation_size() as u64;
            for (key, loc) in shard.iter() {
                if loc.is_tombstone() {
                    stats.tombstones += 1;
                } else {
                    stats.live_keys += 1;
                }
                stats.memory_bytes += key.heap_bytes() as u64;
            }
        }
        stats
    }

    /// Live keys (not tombstones), without walking the index.
    pub fn live_keys(&self) -> u64 {
        self.live_keys.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(seq: u64, offset: u64) -> Location {
        Location {
            seq,
            offset,
            len: 100,
            partition: 1,
        }
    }

    #[test]
    fn the_highest_sequence_wins_whatever_the_order() {
        let index = Index::new();
        assert!(index.apply(b"k", put(5, 10)));
        assert!(
            !index.apply(b"k", put(3, 20)),
            "an older version never replaces a newer one"
        );
        assert_eq!(index.get(b"k"), Some(put(5, 10)));
        assert!(index.apply(b"k", Location::tombstone(7, 2)));
        assert!(
            !index.apply(b"k", put(6, 30)),
            "a delete is not undone by an older put"
        );
        assert!(index.get(b"k").expect("entry").is_tombstone());
        assert_eq!(index.live_keys(), 0, "a deleted key is not counted");
        assert!(index.apply(b"k", put(9, 40)));
        assert_eq!(index.get(b"k"), Some(put(9, 40)));
        assert_eq!(index.live_keys(), 1);
    }

    #[test]
    fn the_live_key_count_follows_every_change() {
        let index = Index::new();
        let changes: [(&[u8], Location); 7] = [
            (b"a", put(1, 0)),
            (b"b", put(2, 0)),
            (b"a", put(3, 0)),
            (b"b", Location::tombstone(4, 0)),
            (b"c", Location::tombstone(5, 0)),
            (b"b", Location::tombstone(6, 0)),
            (b"c", put(7, 0)),
        ];
        for (key, location) in changes {
            index.apply(key, location);
            assert_eq!(index.live_keys(), index.stats().live_keys);
        }
        assert_eq!(index.live_keys(), 2);
        index.drop_tombstones();
        assert_eq!(index.live_keys(), 2);
    }

    #[test]
    fn short_and_long_keys_are_stored_and_found() {
        let index = Index::new();
        let long = vec![7u8; 1024];
        index.apply(b"", put(1, 0));
        index.apply(&[1u8; 23], put(2, 0));
        index.apply(&[1u8; 24], put(3, 0));
        index.apply(&long, put(4, 0));
        assert_eq!(index.get(&[1u8; 23]).map(|l| l.seq), Some(2));
        assert_eq!(index.get(&[1u8; 24]).map(|l| l.seq), Some(3));
        assert_eq!(index.get(&long).map(|l| l.seq), Some(4));
        assert_eq!(index.get(&[1u8; 22]), None);
        assert_eq!(IndexKey::new(&long).as_bytes(), &long[..]);
    }

    #[test]
    fn dropping_tombstones_keeps_live_keys() {
        let index = Index::new();
        index.apply(b"a", put(1, 0));
        index.apply(b"b", Location::tombstone(2, 0));
        assert_eq!(index.stats().tombstones, 1);
        assert_eq!(index.drop_tombstones(), 1);
        let stats = index.stats();
        assert_eq!((stats.live_keys, stats.tombstones), (1, 0));
        assert!(index.get(b"b").is_none());
    }

    #[test]
    fn a_million_short_keys_fit_well_under_200_mib() {
        let index = Index::new();
        for i in 0..1_000_000u64 {
            index.apply(&i.to_be_bytes(), put(i + 1, i * 4124));
        }
        let stats = index.stats();
        assert_eq!(stats.live_keys, 1_000_000);
        let per_key = stats.memory_bytes as f64 / 1e6;
        assert!(
            stats.memory_bytes < 150 << 20,
            "{} bytes ({per_key:.0} per key)",
            stats.memory_bytes
        );
    }
}
