//! The key index: key → where its newest version lives (partition, value-log
//! offset, record length, sequence number) and when it expires, or a
//! tombstone if its newest version is a delete.
//!
//! The index only ever moves a key to a higher sequence number, whatever
//! order acknowledgements and key-log entries arrive in, with one tie
//! rule: a tombstone at the same sequence number as a live put replaces it
//! (any other tie keeps what the index has). An expiry delete is logged as
//! a tombstone that names the expired version by its seq, so it must beat
//! that version and lose to any later write, whatever order a rebuild sees
//! them in. It is split into [`SHARDS`] shards, each behind its own
//! reader-writer lock: lookups share a shard, and writers to different
//! shards proceed together.
//!
//! Expiry: each location carries its version's absolute expiry
//! ([`Location::expire_at_ms`]). The index keeps, per shard, the count and
//! sum of its live keys' expiries and a lower bound of the smallest, so
//! that [`Index::expiring_keys`] and [`Index::avg_expire_at_ms`] cost no
//! walk, and [`Index::collect_expired`] and [`Index::expired_keys_present`]
//! walk only shards that may hold an expired key. It never hides an expired
//! key: [`Index::get`], [`Index::scan`] and the live-key counts include it
//! until the caller deletes it.
//!
//! Memory: each key costs a 16-byte packed header (location and key length,
//! laid out in the `location` module), its key bytes (plus a LEB128 length
//! for keys of 2047 bytes or more) in its shard's arena, and 5 bytes per
//! table slot at a load of at most 87.5 % (a table takes all the slots its
//! whole pages hold, so a small shard's load is lower). A key with a TTL costs 8
//! bytes more (its expiry, in a slot after the header); one that gains a
//! TTL after insertion is moved to the end of its shard's arena, its old
//! bytes reclaimed by compaction (once a shard's dead bytes pass half its
//! live bytes and a page). A shard's table grows by an eighth when it is
//! 7/8 full, so growth copies one small table at a time and never holds two
//! copies of the whole index; [`Index::reserve`] sizes every table for an
//! expected key count up front. Keys are compared byte for byte: the hash
//! tag only picks candidates. Arenas and tables are anonymous mappings, not
//! heap memory (see the `arena` and `table` modules; what stays on the heap
//! is small: span starts, the side table of wide locations, empty tables),
//! so the process's resident memory follows the index's accounting. Measured at 1 Mi keys
//! (accounted / resident bytes per key): 30.6 / 31.0 for 8-byte keys (30.0
//! / 30.0 at 16 Mi), 122.6 / 123.0 for 100-byte keys, the key length + 22.8
//! / + 23.6 at 1 KiB; 38.6 / 39.0 for 8-byte keys with a TTL, 48.2 / 48.7
//! when every key gained its TTL after insertion (the moves' dead bytes
//! not yet compacted).
//!
//! Limits: a location whose seq, offset, record length or partition passes
//! the packed widths ([`PACKED_MAX_SEQ`], 2^45 - 1; [`PACKED_MAX_PARTITION`],
//! 63; and friends) is kept whole in a side table at 24 bytes more per key
//! (a node with more than 64 partitions pays that for the keys of the
//! others), so ordering by seq is always exact (the expiry never goes there:
//! it stays in the entry's slot); one shard's arena holds at most 4 GiB of
//! headers, expiries and keys ([`IndexError::ShardFull`]).

mod arena;
mod location;
mod shard;
mod table;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

pub use location::{
    Location, PACKED_MAX_LEN, PACKED_MAX_OFFSET, PACKED_MAX_PARTITION, PACKED_MAX_SEQ,
};
use shard::Shard;

/// Number of shards (a power of two: the top bits of a key's hash pick its
/// shard).
pub const SHARDS: usize = 256;
const SHARD_SHIFT: u32 = 64 - SHARDS.trailing_zeros();

/// Changes of a batch whose table lines [`Index::apply_many`] reads ahead
/// together before applying them one by one.
const TOUCH_AHEAD: usize = 16;

/// The hasher the index uses unless given another.
pub type DefaultHasher = hashbrown::DefaultHashBuilder;

/// Why the index refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// A shard's arena would pass the widest offset its table holds.
    #[error("index shard full: its keys and headers would exceed {max_bytes} bytes")]
    ShardFull {
        /// The most arena bytes one shard holds.
        max_bytes: u64,
    },
}

/// Counts of what the index holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Keys whose newest version is a put.
    pub live_keys: u64,
    /// Keys whose newest version is a delete.
    pub tombstones: u64,
    /// Bytes the index has allocated: tables, arenas and side tables.
    pub memory_bytes: u64,
}

/// The sharded key index.
pub struct Index<S = DefaultHasher> {
    shards: Box<[CacheLine<RwLock<Shard>>]>,
    hasher: S,
    /// Entries that are live keys, kept as entries change (so counting
    /// them does not walk the index).
    live_keys: AtomicU64,
    /// Sequence number below which every location is gone (the highest
    /// clear applied, see [`Index::clear_below`]): such a location is never
    /// applied. Read under the shard lock of the change, so a change is
    /// either removed by a clear or refused after it.
    floor_seq: AtomicU64,
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Self::with_hasher(DefaultHasher::default())
    }
}

/// A value on cache lines of its own, so that locking one shard does not
/// disturb the next one's readers.
#[repr(align(128))]
struct CacheLine<T>(T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What applying one location did to its key.
#[derive(Debug, Clone, Copy)]
struct Change {
    applied: bool,
    was_live: bool,
    is_live: bool,
}

impl Change {
    const NONE: Change = Change {
        applied: false,
        was_live: false,
        is_live: false,
    };

    /// +1 if the key became live, -1 if it stopped being live.
    fn live_delta(self) -> i64 {
        i64::from(self.is_live) - i64::from(self.was_live)
    }
}

/// Scan cursor layout: arena offset in the low 32 bits, shard in the next
/// 16, the shard's compaction generation in the top 16.
fn encode_cursor(shard: usize, at: u32, generation: u16) -> u64 {
    u64::from(at) | ((shard as u64) << 32) | (u64::from(generation) << 48)
}

fn decode_cursor(cursor: u64) -> (usize, u32, u16) {
    (
        ((cursor >> 32) & 0xffff) as usize,
        cursor as u32,
        (cursor >> 48) as u16,
    )
}

impl<S: BuildHasher> Index<S> {
    /// An empty index hashing keys with `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| CacheLine(RwLock::new(Shard::default())))
                .collect(),
            hasher,
            live_keys: AtomicU64::new(0),
            floor_seq: AtomicU64::new(0),
        }
    }

    fn hash(&self, key: &[u8]) -> (u64, &RwLock<Shard>) {
        let hash = self.hasher.hash_one(key);
        (hash, &self.shards[(hash >> SHARD_SHIFT) as usize])
    }

    /// The newest known location of `key` (a tombstone if deleted), with
    /// its expiry (an expired key is still returned).
    pub fn get(&self, key: &[u8]) -> Option<Location> {
        let (hash, shard) = self.hash(key);
        let shard = shard.read();
        shard.find_slot(hash, key).map(|slot| shard.location(slot))
    }

    /// Records `location` (its expiry included) for `key` if it is newer
    /// than what the index has: a higher seq, or the same seq as a live put
    /// if `location` is a tombstone (see the module doc). Returns true if
    /// the index changed.
    ///
    /// # Panics
    /// If `key` must be appended to its shard's arena (it is new, or it
    /// gains an expiry while stored without an expiry slot) and the arena
    /// is full ([`IndexError::ShardFull`]: 4 GiB of keys and headers in one
    /// shard, about 1 TiB in the index); [`Index::try_apply`] returns that
    /// error instead, having changed nothing.
    pub fn apply(&self, key: &[u8], location: Location) -> bool {
        self.try_apply(key, location)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Index::apply`], returning [`IndexError::ShardFull`] (and changing
    /// nothing) instead of panicking when a key does not fit its shard.
    pub fn try_apply(&self, key: &[u8], location: Location) -> Result<bool, IndexError> {
        let (hash, shard) = self.hash(key);
        let change = self.apply_locked(&mut shard.write(), hash, key, location)?;
        self.count_live(change.live_delta());
        Ok(change.applied)
    }

    /// [`Index::apply`] for each change in turn, taking each shard's lock
    /// once for all of its changes (a rebuild applies a key-log chunk at a
    /// time this way). Returns how many changed the index.
    ///
    /// The changes are first copied, with their hashes, into shard order
    /// (a counting sort), so that applying them reads one run per shard
    /// front to back rather than jumping around the batch.
    ///
    /// # Panics
    /// As [`Index::apply`].
    pub fn apply_many(&self, changes: &[(&[u8], Location)]) -> usize {
        let Some(&(first_key, _)) = changes.first() else {
            return 0;
        };
        let mut starts = [0usize; SHARDS + 1];
        let hashes: Vec<u64> = changes
            .iter()
            .map(|(key, _)| {
                let hash = self.hasher.hash_one(key);
                starts[(hash >> SHARD_SHIFT) as usize + 1] += 1;
                hash
            })
            .collect();
        for shard in 0..SHARDS {
            starts[shard + 1] += starts[shard];
        }
        let mut next = starts;
        let mut sorted = vec![(0u64, first_key, Location::tombstone(0, 0)); changes.len()];
        for (&hash, &(key, location)) in hashes.iter().zip(changes) {
            let shard = (hash >> SHARD_SHIFT) as usize;
            sorted[next[shard]] = (hash, key, location);
            next[shard] += 1;
        }
        drop(hashes);
        // Concurrent callers start at different shards rather than queue
        // behind each other shard after shard.
        let first = (sorted[0].0 >> SHARD_SHIFT) as usize;
        let mut changed = 0;
        // Counted once per batch: one shared counter updated per change
        // would bounce its cache line between the threads of a rebuild.
        let mut live_delta = 0i64;
        for step in 0..SHARDS {
            let shard_index = (first + step) % SHARDS;
            let run = &sorted[starts[shard_index]..starts[shard_index + 1]];
            if run.is_empty() {
                continue;
            }
            let mut shard = self.shards[shard_index].write();
            for window in run.chunks(TOUCH_AHEAD) {
                // Independent reads of a window's table lines are waited
                // for together rather than one miss after another.
                let touched = window
                    .iter()
                    .fold(0, |acc, &(hash, _, _)| acc ^ shard.touch(hash));
                std::hint::black_box(touched);
                for &(hash, key, location) in window {
                    let change = self
                        .apply_locked(&mut shard, hash, key, location)
                        .unwrap_or_else(|e| panic!("{e}"));
                    changed += usize::from(change.applied);
                    live_delta += change.live_delta();
                }
            }
        }
        self.count_live(live_delta);
        changed
    }

    fn apply_locked(
        &self,
        shard: &mut Shard,
        hash: u64,
        key: &[u8],
        location: Location,
    ) -> Result<Change, IndexError> {
        if location.seq < self.floor_seq.load(Ordering::Acquire) {
            return Ok(Change::NONE);
        }
        let was_live = match shard.find_slot(hash, key) {
            Some(slot) => {
                let existing = shard.location(slot);
                // An expiry delete (a tombstone naming the expired version's
                // seq) beats that version, and a relocation by garbage
                // collection (the same version further on in the same value
                // log) beats its older place; every other tie keeps the
                // entry.
                let same_seq = existing.seq == location.seq;
                let relocated = same_seq
                    && !location.is_tombstone()
                    && !existing.is_tombstone()
                    && location.partition == existing.partition
                    && location.offset > existing.offset;
                let newer = existing.seq < location.seq
                    || (same_seq && location.is_tombstone() && !existing.is_tombstone())
                    || relocated;
                if !newer {
                    return Ok(Change::NONE);
                }
                shard.set_location(&self.hasher, slot, location)?;
                !existing.is_tombstone()
            }
            None => {
                shard.insert(&self.hasher, hash, key, location)?;
                false
            }
        };
        Ok(Change {
            applied: true,
            was_live,
            is_live: !location.is_tombstone(),
        })
    }

    fn count_live(&self, delta: i64) {
        if delta != 0 {
            self.live_keys.fetch_add(delta as u64, Ordering::Relaxed);
        }
    }

    /// Moves `key` from `from` to `to` (a relocation by garbage collection)
    /// only if its entry still points at `from` (same partition, offset and
    /// seq, whatever the expiries) and `to` does not lower its seq. The
    /// entry then takes `to` whole, its expiry included (a relocation
    /// record carries its version's expiry). Returns true if it moved.
    ///
    /// # Panics
    /// If `to` gives an expiry to an entry stored without an expiry slot
    /// and moving the entry to the end of its shard's arena does not fit
    /// ([`IndexError::ShardFull`], as for [`Index::apply`]).
    pub fn relocate(&self, key: &[u8], from: Location, to: Location) -> bool {
        let (hash, shard) = self.hash(key);
        let mut shard = shard.write();
        let Some(slot) = shard.find_slot(hash, key) else {
            return false;
        };
        let existing = shard.location(slot);
        if !existing.same_place(&from) || to.seq < existing.seq {
            return false;
        }
        shard
            .set_location(&self.hasher, slot, to)
            .unwrap_or_else(|e| panic!("{e}"));
        let change = Change {
            applied: true,
            was_live: !existing.is_tombstone(),
            is_live: !to.is_tombstone(),
        };
        self.count_live(change.live_delta());
        true
    }

    /// Makes room for `additional` more keys, spread over the shards, so
    /// that inserting them does not grow the tables (a shard that receives
    /// more than its share still grows on its own).
    pub fn reserve(&self, additional: u64) {
        let per_shard = additional.div_ceil(SHARDS as u64) as usize;
        for shard in self.shards.iter() {
            shard.write().reserve(&self.hasher, per_shard);
        }
    }

    /// Drops every tombstone and shrinks tables sized well past their keys
    /// (after a generous [`Index::reserve`]). Only safe once no older
    /// version of a deleted key can still arrive (after a rebuild has merged
    /// every partition). Takes one shard's lock at a time.
    pub fn drop_tombstones(&self) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.write().drop_tombstones(&self.hasher) as u64)
            .sum()
    }

    /// Removes every entry, tombstones included, whose sequence number is
    /// below `seq`, and from then on refuses every location below it: what
    /// a clear entry (FLUSHALL) with sequence number `seq` says. Entries at
    /// or above `seq` (writes that came after the clear) stay. Takes one
    /// shard's lock at a time. Returns the live keys removed.
    pub fn clear_below(&self, seq: u64) -> u64 {
        self.floor_seq.fetch_max(seq, Ordering::AcqRel);
        let mut removed_live = 0;
        for shard in self.shards.iter() {
            let removed = shard
                .write()
                .retain(&self.hasher, |location| location.seq >= seq);
            removed_live += removed.live as u64;
        }
        self.live_keys.fetch_sub(removed_live, Ordering::Relaxed);
        removed_live
    }

    /// The sequence number below which every location is gone (0 if no
    /// clear was applied).
    pub fn floor_seq(&self) -> u64 {
        self.floor_seq.load(Ordering::Acquire)
    }

    /// Counts and memory use (each shard's counts as of its own moment).
    pub fn stats(&self) -> IndexStats {
        let mut stats = IndexStats {
            memory_bytes: std::mem::size_of_val(&*self.shards) as u64,
            ..IndexStats::default()
        };
        for shard in self.shards.iter() {
            let shard = shard.read();
            let (entries, tombstones) = shard.counts();
            stats.live_keys += (entries - tombstones) as u64;
            stats.tombstones += tombstones as u64;
            stats.memory_bytes += shard.memory_bytes() as u64;
        }
        stats
    }

    /// Live keys (not tombstones), without walking the index. A key whose
    /// expiry has passed counts until it is deleted.
    pub fn live_keys(&self) -> u64 {
        self.live_keys.load(Ordering::Relaxed)
    }

    /// Live keys and the sum of their expiries, over the keys with one
    /// (each shard's as of its own moment).
    fn expiry_totals(&self) -> (u64, u128) {
        self.shards.iter().fold((0, 0), |(keys, sum), shard| {
            let (shard_keys, shard_sum) = shard.read().expiry_totals();
            (keys + shard_keys as u64, sum + shard_sum)
        })
    }

    /// Live keys (not tombstones) that have an expiry (`expire_at_ms` not
    /// 0), expired ones included; each shard counted as of its own moment,
    /// without walking any.
    pub fn expiring_keys(&self) -> u64 {
        self.expiry_totals().0
    }

    /// The mean `expire_at_ms` of the keys [`Index::expiring_keys`] counts
    /// (rounded down), or `None` if there are none: what INFO's `avg_ttl`
    /// is computed from. Walks no shard.
    pub fn avg_expire_at_ms(&self) -> Option<u64> {
        let (keys, sum) = self.expiry_totals();
        // A mean of u64s fits a u64.
        (keys != 0).then(|| (sum / u128::from(keys)) as u64)
    }

    /// One step of the cycle that finds expired keys, for the caller to
    /// delete (the index only reads): from `cursor` (0 to begin; any `u64`
    /// is accepted), returns up to `max_keys` live keys whose expiry is not
    /// 0 and at most `now_ms`, with their locations, and the cursor to go
    /// on from.
    ///
    /// A call goes once round the index: from the cursor's place to the end
    /// of its shard, through the other shards in turn (wrapping past the
    /// last to the first), then from the start of the cursor's shard to the
    /// cursor's place. It stops early once it holds `max_keys` (inside a
    /// shard, or at the next shard's start), returning where it stopped;
    /// after a whole round it returns where it began. So a call given room
    /// returns each expired key once, and calls that each go on from the
    /// cursor the last returned cycle over every shard: a key that stays
    /// expired is returned within a round's worth of calls.
    ///
    /// A shard is skipped without being walked when its lower bound of the
    /// next expiry is past `now_ms`, and a shard walked whole in one go gets
    /// that bound set to its exact smallest expiry. A shard compacted since
    /// the cursor was returned is walked from its start. Each shard is
    /// walked under its read lock, as of its own moment.
    pub fn collect_expired(
        &self,
        now_ms: u64,
        cursor: u64,
        max_keys: usize,
    ) -> (Vec<(Vec<u8>, Location)>, u64) {
        let (first, at, generation) = decode_cursor(cursor);
        let first = first % SHARDS;
        let mut expired = Vec::new();
        if max_keys == 0 {
            return (expired, encode_cursor(first, at, generation));
        }
        // Where the round began in the first shard, once checked against
        // its generation ((0, 0): at its start, so the round ends with the
        // shard before it).
        let mut begin = (0, 0);
        for step in 0..=SHARDS {
            let shard_index = (first + step) % SHARDS;
            if expired.len() >= max_keys {
                return (expired, encode_cursor(shard_index, 0, 0));
            }
            let shard = self.shards[shard_index].read();
            let (from, until) = if step == 0 {
                if at != 0 && generation == shard.generation() {
                    begin = (at, generation);
                }
                (begin.0, u32::MAX)
            } else if step == SHARDS {
                if begin.0 == 0 {
                    break;
                }
                // A shard compacted since the round began: all of it.
                let until = if shard.generation() == begin.1 {
                    begin.0
                } else {
                    u32::MAX
                };
                (0, until)
            } else {
                (0, u32::MAX)
            };
            if shard.next_expiry_ms() > now_ms {
                continue;
            }
            if let Some(next) = shard.collect_expired(from, until, now_ms, max_keys, &mut expired) {
                return (
                    expired,
                    encode_cursor(shard_index, next, shard.generation()),
                );
            }
        }
        (expired, encode_cursor(first, begin.0, begin.1))
    }

    /// Live keys whose expiry is not 0 and at most `now_ms` (present until
    /// the caller deletes them: DBSIZE subtracts them from
    /// [`Index::live_keys`]). Walks only the shards whose lower bound of
    /// the next expiry is at most `now_ms`, each under its read lock and as
    /// of its own moment, and sets that bound exactly for each.
    pub fn expired_keys_present(&self, now_ms: u64) -> u64 {
        self.shards
            .iter()
            .map(|shard| {
                let shard = shard.read();
                if shard.next_expiry_ms() > now_ms {
                    0
                } else {
                    shard.expired_present(now_ms) as u64
                }
            })
            .sum()
    }

    /// One step of a full walk of the index: starting at `cursor` (0 to
    /// begin), visits about `count` entries (tombstones included in the
    /// count, not passed to `f`), calls `f` with each live key and its
    /// location, and returns the cursor to continue from (0 once the walk
    /// is complete).
    ///
    /// A key present from the first step to the last is passed at least
    /// once, however keys are added, tables grow or entries move meanwhile:
    /// cursors are arena positions, and an entry only ever moves forward in
    /// its shard's arena (a key that gains an expiry is appended anew at the
    /// end; its old copy is skipped), so a key may then be passed twice. A
    /// shard compacted during the walk (by [`Index::drop_tombstones`], by a
    /// clear, or on its own once moves have left a third of its arena dead) is
    /// walked again from its start, so a key may then be passed twice too.
    /// Old copies of moved keys count toward `count` as entries. Any `u64`
    /// is accepted as a cursor. `f` runs under a shard's read lock and must
    /// not change the index.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &Location)) -> u64 {
        // Why moves keep the guarantee: within one generation of a shard, a
        // key's arena position p only grows (a move appends at the end) and
        // so does the walk's cursor c; each step runs under the read lock,
        // so nothing moves during it. Let step i be the first whose end
        // c(i+1) passes the key's position p(i) in that step (the last step
        // reaches the arena's end, so there is one). Step i-1 ended at or
        // before p(i-1) <= p(i), so step i starts at c(i) <= p(i) < c(i+1)
        // and visits the key. A key moved after it was passed lands past
        // the cursor and may be passed again, as SCAN allows.
        let (mut shard_index, mut at, generation) = decode_cursor(cursor);
        let mut budget = count.max(1);
        while shard_index < self.shards.len() {
            let shard = self.shards[shard_index].read();
            if at != 0 && generation != shard.generation() {
                at = 0;
            }
            let step = shard.scan(at, budget, &mut f);
            budget -= step.visited;
            if let Some(next) = step.next {
                return encode_cursor(shard_index, next, shard.generation());
            }
            shard_index += 1;
            at = 0;
            if budget == 0 && shard_index < self.shards.len() {
                return encode_cursor(shard_index, 0, 0);
            }
        }
        0
    }

    /// A live key and its location, picked with the help of `random` (not
    /// uniformly: keys after runs of free slots are likelier), or `None` if
    /// the index holds no live key.
    pub fn random_key(&self, random: u64) -> Option<(Vec<u8>, Location)> {
        let start = (random >> SHARD_SHIFT) as usize;
        (0..self.shards.len()).find_map(|step| {
            let shard = self.shards[(start + step) % self.shards.len()].read();
            shard.random_live(random)
        })
    }
}

#[cfg(test)]
mod tests;
