//! The hot-value cache: values of recently read and recently written keys,
//! for random reads that no window covers.
//!
//! It is bounded in bytes (keys, values and a fixed per-entry overhead) and
//! uses `quick_cache`'s S3-FIFO policy: a key enters a small probation queue
//! and is promoted only when read again, so a scan or a run of one-off reads
//! does not push the hot keys out.
//!
//! An entry is never served stale: it records the location (partition,
//! offset, sequence number) of the record its value came from, and a read
//! takes it only if that is the location the index names for the key at the
//! time of the read.
//!
//! Entries are found by a 64-bit hash of the key; the key itself is not
//! kept, so an entry is one allocation (its value) and dropping a cache of a
//! million entries frees a million buffers, not two or three million. Two
//! keys of the same hash share an entry: since a record holds one key, the
//! location check tells them apart, and a collision costs a miss, never a
//! wrong value. A put or delete changes the index before it is
//! acknowledged, so from then on an entry of an older version is never
//! served, whenever it was inserted; the write also replaces or removes the
//! entry so that it does not take room. An insert never replaces an entry of
//! a newer version.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use quick_cache::sync::{Cache, EntryAction, EntryResult};

use crate::index::Location;

/// Bytes counted for each entry on top of its value: the entry's own
/// fields, its value buffer's header and its share of the cache's tables.
pub const ENTRY_OVERHEAD_BYTES: u64 = 96;

/// A cache of more entries than this is freed on a thread of its own when
/// it is dropped (see [`ValueCache`]'s `Drop`): freeing a million entries
/// takes about 0.3 s.
const FREE_APART_MIN_ENTRIES: usize = 1 << 16;

/// Values longer than the cache's capacity divided by this are not cached,
/// so that one large value does not evict many small hot ones.
const LARGEST_VALUE_SHARE_DENOMINATOR: u64 = 64;

/// Expected value size, to size the cache's tables from its byte capacity.
const EXPECTED_VALUE_BYTES: u64 = 4096;

/// A cached value and the record it came from.
#[derive(Clone)]
struct Cached {
    location: Location,
    value: Bytes,
}

/// Weighs an entry by its bytes.
#[derive(Clone)]
struct ByBytes;

impl quick_cache::Weighter<u64, Cached> for ByBytes {
    fn weight(&self, _key_hash: &u64, cached: &Cached) -> u64 {
        cached.value.len() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// Hashes an entry's key, already a hash of the caller's key, as it is:
/// hashing it again would only spend time.
#[derive(Clone, Copy, Default)]
struct KeyHashAsIs;

impl std::hash::BuildHasher for KeyHashAsIs {
    type Hasher = HashAsIs;

    fn build_hasher(&self) -> HashAsIs {
        HashAsIs(0)
    }
}

/// The hasher of [`KeyHashAsIs`]: the last `u64` written is the hash.
struct HashAsIs(u64);

impl std::hash::Hasher for HashAsIs {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; fold anything else in anyway.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// The cache's counters, as [`ValueCache::stats`] reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads the cache could not answer (no entry, or one of another
    /// version).
    pub misses: u64,
    /// Bytes held (values and per-entry overhead).
    pub bytes: u64,
    /// Entries held.
    pub entries: u64,
    /// The bound on `bytes`.
    pub capacity_bytes: u64,
}

/// Values of hot keys, bounded in bytes; see the module documentation.
pub struct ValueCache<S = hashbrown::DefaultHashBuilder> {
    /// `None` when the configured size is 0 (no cache). Keyed by the
    /// key's hash under `hasher`.
    cache: Option<Cache<u64, Cached, ByBytes, KeyHashAsIs>>,
    hasher: S,
    capacity_bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ValueCache {
    /// A cache that holds at most `capacity_bytes` (0: none at all).
    pub fn new(capacity_bytes: u64) -> Self {
        Self::with_hasher(capacity_bytes, hashbrown::DefaultHashBuilder::default())
    }
}

impl<S: BuildHasher> ValueCache<S> {
    /// A cache that holds at most `capacity_bytes` (0: none at all) and
    /// finds entries by the hash of their key under `hasher`.
    pub fn with_hasher(capacity_bytes: u64, hasher: S) -> Self {
        let cache = (capacity_bytes > 0).then(|| {
            let items = (capacity_bytes / (EXPECTED_VALUE_BYTES + ENTRY_OVERHEAD_BYTES)).max(16);
            Cache::with(
                items as usize,
                capacity_bytes,
                ByBytes,
                KeyHashAsIs,
                Default::default(),
            )
        });
        Self {
            cache,
            hasher,
            capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// True if a value of `len` bytes would be cached.
    pub fn admits(&self, len: usize) -> bool {
        self.cache.is_some()
            && (len as u64) <= self.capacity_bytes / LARGEST_VALUE_SHARE_DENOMINATOR
    }

    /// The value of `key` if the cache holds the version at `location` (the
    /// one the index names now), counting a hit or a miss.
    pub fn get(&self, key: &[u8], location: &Location) -> Option<Bytes> {
        let cache = self.cache.as_ref()?;
        match cache.get(&self.hasher.hash_one(key)) {
            Some(cached) if cached.location == *location => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(cached.value)
            }
            _ => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Caches `value` as the version of `key` at `location`, unless the
    /// cache holds a newer version (a higher sequence number) or the value
    /// is too large. The value is copied once into its own buffer, so that
    /// an entry never keeps a larger buffer it was sliced from alive.
    pub fn insert(&self, key: &[u8], location: Location, value: &[u8]) {
        if self.admits(value.len()) {
            self.insert_owned(key, location, Bytes::copy_from_slice(value));
        }
    }

    /// Like [`ValueCache::insert`], for a value already in a buffer of its
    /// own (one made for the cache, not a slice of a larger one).
    pub fn insert_owned(&self, key: &[u8], location: Location, value: Bytes) {
        let Some(cache) = self.cache.as_ref() else {
            return;
        };
        if !self.admits(value.len()) {
            return;
        }
        let mut fresh = Some(Cached { location, value });
        let outcome = cache.entry(&self.hasher.hash_one(key), None, |_, held: &mut Cached| {
            if held.location.seq <= location.seq
                && let Some(fresh) = fresh.take()
            {
                *held = fresh;
            }
            EntryAction::Retain(())
        });
        if let EntryResult::Vacant(guard) = outcome
            && let Some(fresh) = fresh.take()
        {
            let _ = guard.insert(fresh);
        }
    }

    /// Drops `key`'s entry unless it is of a version newer than `seq`.
    pub fn remove(&self, key: &[u8], seq: u64) {
        let Some(cache) = self.cache.as_ref() else {
            return;
        };
        let _ = cache.entry(&self.hasher.hash_one(key), None, |_, held: &mut Cached| {
            if held.location.seq <= seq {
                EntryAction::Remove
            } else {
                EntryAction::Retain(())
            }
        });
    }

    /// Drops every entry of a version older than `seq` (what a clear entry
    /// says is gone).
    pub fn clear_below(&self, seq: u64) {
        if let Some(cache) = self.cache.as_ref() {
            cache.retain(|_, held| held.location.seq >= seq);
        }
    }

    /// Counters and size.
    pub fn stats(&self) -> CacheStats {
        let (bytes, entries) = self
            .cache
            .as_ref()
            .map_or((0, 0), |c| (c.weight(), c.len() as u64));
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes,
            entries,
            capacity_bytes: self.capacity_bytes,
        }
    }
}

impl<S> Drop for ValueCache<S> {
    /// Frees a large cache's entries on a thread of its own at idle
    /// priority, so that whoever drops it (an engine being restarted, say)
    /// need not wait for it; a small one, or one whose thread cannot be
    /// started, is freed here. The memory is given back once that thread
    /// has run.
    fn drop(&mut self) {
        let Some(cache) = self.cache.take() else {
            return;
        };
        if cache.len() < FREE_APART_MIN_ENTRIES {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("cache-free".into())
            .spawn(move || {
                lower_to_idle_priority();
                drop(cache);
            });
        if let Err(e) = spawned {
            tracing::debug!("freeing the value cache here: no thread for it ({e})");
        }
    }
}

/// Puts the calling thread in the idle scheduling class, where it runs only
/// on a CPU nothing else wants. Best effort: a refusal leaves it as it is.
fn lower_to_idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the duration of the call,
    // and pid 0 names the calling thread.
    let refused = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0;
    if refused {
        tracing::debug!(
            "the value cache's freeing thread keeps its priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> Location {
        Location {
            seq,
            offset: seq * 100,
            len: 100,
            partition: 0,
            expire_at_ms: 0,
        }
    }

    #[test]
    fn serves_only_the_version_the_index_names() {
        let cache = ValueCache::new(1 << 20);
        cache.insert(b"k", at(1), b"one");
        assert_eq!(cache.get(b"k", &at(1)).as_deref(), Some(&b"one"[..]));
        assert_eq!(cache.get(b"k", &at(2)), None, "a newer version is named");
        cache.insert(b"k", at(2), b"two");
        cache.insert(b"k", at(1), b"one");
        assert_eq!(
            cache.get(b"k", &at(2)).as_deref(),
            Some(&b"two"[..]),
            "an older insert does not replace a newer entry"
        );
        cache.remove(b"k", 1);
        assert!(
            cache.get(b"k", &at(2)).is_some(),
            "an older delete keeps it"
        );
        cache.remove(b"k", 3);
        assert_eq!(cache.get(b"k", &at(2)), None);
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (3, 2));
    }

    #[test]
    fn holds_no_more_bytes_than_its_capacity() {
        let capacity = 256 << 10;
        let cache = ValueCache::new(capacity);
        let value = vec![7u8; 3000];
        for i in 0..2000u64 {
            cache.insert(format!("key{i}").as_bytes(), at(i + 1), &value);
            assert!(cache.stats().bytes <= capacity, "after {i} inserts");
        }
        let stats = cache.stats();
        assert!(stats.entries > 0 && stats.entries < 2000, "{stats:?}");
        assert!(stats.bytes > capacity / 2, "it is used: {stats:?}");
    }

    #[test]
    fn a_zero_capacity_caches_nothing() {
        let cache = ValueCache::new(0);
        cache.insert(b"k", at(1), b"v");
        assert_eq!(cache.get(b"k", &at(1)), None);
        assert_eq!(cache.stats(), CacheStats::default());
    }

    /// Every key hashes alike.
    #[derive(Default)]
    struct OneHash;

    impl std::hash::Hasher for OneHash {
        fn finish(&self) -> u64 {
            7
        }

        fn write(&mut self, _bytes: &[u8]) {}
    }

    #[test]
    fn keys_of_one_hash_never_get_each_others_values() {
        let cache =
            ValueCache::with_hasher(1 << 20, std::hash::BuildHasherDefault::<OneHash>::default());
        cache.insert(b"a", at(1), b"value of a");
        assert_eq!(cache.get(b"a", &at(1)).as_deref(), Some(&b"value of a"[..]));
        assert_eq!(cache.get(b"b", &at(2)), None, "b's record is elsewhere");
        cache.insert(b"b", at(2), b"value of b");
        assert_eq!(cache.get(b"b", &at(2)).as_deref(), Some(&b"value of b"[..]));
        assert_eq!(cache.get(b"a", &at(1)), None, "b's entry took the place");
        cache.remove(b"a", 1);
        assert!(
            cache.get(b"b", &at(2)).is_some(),
            "a delete of an older version keeps the newer entry"
        );
    }

    /// A value's buffer that reports the thread it was freed on.
    struct Reported {
        bytes: [u8; 8],
        freed: std::sync::mpsc::Sender<Option<String>>,
    }

    impl AsRef<[u8]> for Reported {
        fn as_ref(&self) -> &[u8] {
            &self.bytes
        }
    }

    impl Drop for Reported {
        fn drop(&mut self) {
            let _ = self
                .freed
                .send(std::thread::current().name().map(str::to_string));
        }
    }

    #[test]
    fn a_large_cache_is_freed_whole_on_a_thread_of_its_own() {
        let entries = FREE_APART_MIN_ENTRIES as u64 + 10;
        let cache = ValueCache::new(64 << 20);
        let (freed, frees) = std::sync::mpsc::channel();
        for i in 0..entries {
            let value = Bytes::from_owner(Reported {
                bytes: i.to_le_bytes(),
                freed: freed.clone(),
            });
            cache.insert_owned(&i.to_le_bytes(), at(i + 1), value);
        }
        drop(freed);
        assert_eq!(cache.stats().entries, entries);
        drop(cache);
        let threads: Vec<Option<String>> = frees.iter().collect();
        assert_eq!(threads.len() as u64, entries, "every value is freed");
        assert!(
            threads.iter().all(|t| t.as_deref() == Some("cache-free")),
            "on the cache's own thread: {:?}",
            threads.iter().find(|t| t.as_deref() != Some("cache-free"))
        );
    }

    #[test]
    fn a_small_cache_is_freed_where_it_is_dropped() {
        let cache = ValueCache::new(1 << 20);
        let (freed, frees) = std::sync::mpsc::channel();
        let value = Bytes::from_owner(Reported {
            bytes: [1; 8],
            freed,
        });
        cache.insert_owned(b"k", at(1), value);
        drop(cache);
        let here = std::thread::current().name().map(str::to_string);
        assert_eq!(frees.iter().collect::<Vec<_>>(), vec![here]);
    }

    #[test]
    fn large_values_are_not_cached() {
        let cache = ValueCache::new(64 << 10);
        cache.insert(b"big", at(1), &vec![0u8; 2 << 10]);
        assert_eq!(cache.get(b"big", &at(1)), None);
    }
}
