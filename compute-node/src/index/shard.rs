//! One shard of the index: an arena of entries and a compact open-addressing
//! table over it.
//!
//! **Arena.** Entries are appended end to end to the shard's [`Arena`] (one
//! growing memory mapping; the entry layout is in the `arena` module), so
//! the only unused arena bytes are the tail of its last page and the bytes
//! of dead entries.
//!
//! An entry moves in only two ways. A key that gains an expiry while its
//! entry has no slot is appended anew at the arena's end (with a slot), its
//! table slot repointed, and its old copy marked dead (it still parses, and
//! every walk skips it); so an entry only ever moves *forward* in its
//! arena. Compaction ([`Shard::retain`], run by [`Shard::drop_tombstones`],
//! by clears, and on its own once dead bytes pass half the live bytes and a
//! page, see [`Shard::mostly_dead`]) rewrites the whole arena and bumps the
//! shard's generation; it also drops the expiry slots of entries whose
//! expiry is 0.
//!
//! **Table.** One control byte (a 7-bit tag of the hash, or [`EMPTY`]) and
//! one `u32` arena offset per slot, probed linearly in groups of eight
//! control bytes compared at once. Its capacity is any number of slots (the
//! home slot is a multiply-shift of the hash), so it grows by an eighth at a
//! time rather than doubling, and a shard's growth copies only that shard's
//! slots (4 + 1 bytes each). Entries are never removed from the table
//! except by compaction, which rebuilds it, so a probe ends at the first
//! empty slot.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use super::IndexError;
use super::arena::{Arena, MAX_ARENA_BYTES, PAGE_BYTES, key_code, read_location};
use super::location::{HEADER_BYTES, KeyHeader, Location, WideLocation};
use super::table::{EMPTY, GROUP, Table};

/// Smallest table that is allocated.
const MIN_CAPACITY: usize = 16;
/// The table grows once more than this share of its slots is full.
const MAX_LOAD: (usize, usize) = (7, 8);
/// Share of the slots that [`Shard::reserve`] and compaction aim to fill
/// (below [`MAX_LOAD`], so that a few more keys fit before a growth).
const TARGET_LOAD: (usize, usize) = (6, 7);
/// A growing table gets this many times its slots.
const GROWTH: (usize, usize) = (9, 8);

const LSB: u64 = 0x0101_0101_0101_0101;
const MSB: u64 = 0x8080_8080_8080_8080;

/// The 7-bit tag of `hash` kept in the control byte.
fn tag(hash: u64) -> u8 {
    ((hash >> 49) & 0x7f) as u8
}

/// The home slot of `hash` in a table of `capacity` slots.
fn home(hash: u64, capacity: usize) -> usize {
    ((u64::from(hash as u32) * capacity as u64) >> 32) as usize
}

fn wrap(slot: usize, capacity: usize) -> usize {
    if slot >= capacity {
        slot - capacity
    } else {
        slot
    }
}

/// The eight control bytes from `slot` on (the table keeps a copy of its
/// first group after its end, so this never wraps).
fn group(ctrl: &[u8], slot: usize) -> u64 {
    let mut bytes = [0u8; GROUP];
    bytes.copy_from_slice(&ctrl[slot..slot + GROUP]);
    u64::from_le_bytes(bytes)
}

/// High bit set in each byte of `group` that may equal `tag` (a false
/// positive is possible next to a true match; callers check the byte).
fn matching(group: u64, tag: u8) -> u64 {
    let x = group ^ (LSB * u64::from(tag));
    x.wrapping_sub(LSB) & !x & MSB
}

fn empty(group: u64) -> u64 {
    group & MSB
}

fn first_byte(bits: u64) -> usize {
    (bits.trailing_zeros() / 8) as usize
}

/// Slots needed for `entries` at `load`.
fn capacity_for(entries: usize, load: (usize, usize)) -> usize {
    (entries * load.1).div_ceil(load.0).max(MIN_CAPACITY)
}

/// What [`Shard::retain`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Removed {
    /// Entries of live keys.
    pub live: usize,
    /// Tombstones.
    pub tombstones: usize,
}

/// What [`Shard::scan`] reached.
pub(super) struct ScanStep {
    /// Where to go on in this shard, if entries remain.
    pub(super) next: Option<u32>,
    /// Entries visited.
    pub(super) visited: usize,
}

/// A lower bound of the smallest expiry of a shard's live keys
/// (`u64::MAX` if none has one). Lowered by writers under the shard's write
/// lock, and set exactly by a complete walk of the shard, under its read
/// lock or its write lock; as no writer runs meanwhile, concurrent walks
/// store the same value.
struct NextExpiry(AtomicU64);

impl Default for NextExpiry {
    fn default() -> Self {
        Self(AtomicU64::new(u64::MAX))
    }
}

impl NextExpiry {
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::Relaxed);
    }

    fn lower_to(&self, ms: u64) {
        self.0.fetch_min(ms, Ordering::Relaxed);
    }
}

/// The expiry totals of a set of live keys, as counted by a walk.
#[derive(Debug, Clone, Copy)]
struct ExpiryTally {
    expiring: usize,
    sum: u128,
    min: u64,
}

impl Default for ExpiryTally {
    fn default() -> Self {
        Self {
            expiring: 0,
            sum: 0,
            min: u64::MAX,
        }
    }
}

impl ExpiryTally {
    fn add(&mut self, location: &Location) {
        if let Some(ms) = location.live_expiry() {
            self.expiring += 1;
            self.sum += u128::from(ms);
            self.min = self.min.min(ms);
        }
    }
}

/// One shard of the index.
#[derive(Default)]
pub(super) struct Shard {
    /// Per slot a control byte and the arena offset of its entry.
    table: Table,
    /// Entries (keys), tombstones included, dead copies not.
    entries: usize,
    /// Entries whose location is a tombstone.
    tombstones: usize,
    arena: Arena,
    /// Locations too wide for the packed header (without their expiries).
    wide: Vec<WideLocation>,
    /// Unused entries of `wide`.
    wide_free: Vec<u32>,
    /// Arena bytes of dead entries (old copies of moved entries).
    dead_bytes: usize,
    /// Live keys (not tombstones) whose expiry is not 0.
    expiring: usize,
    /// Sum of their expiries.
    expire_at_sum: u128,
    /// A lower bound of the smallest of their expiries.
    next_expiry: NextExpiry,
    /// Changes each time compaction moves entries (scan cursors carry it).
    generation: u16,
}

impl Shard {
    fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Entries and tombstones in this shard.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.entries, self.tombstones)
    }

    /// Live keys with an expiry, and the sum of their expiries.
    pub(super) fn expiry_totals(&self) -> (usize, u128) {
        (self.expiring, self.expire_at_sum)
    }

    /// A lower bound of the smallest expiry of this shard's live keys
    /// (`u64::MAX` if none has one).
    pub(super) fn next_expiry_ms(&self) -> u64 {
        self.next_expiry.get()
    }

    pub(super) fn generation(&self) -> u16 {
        self.generation
    }

    /// Reads the table's first control bytes and slot for `hash`, so that
    /// a [`Shard::find_slot`] or [`Shard::insert`] of it soon after finds
    /// them in cache. Returns a value made of them, for the caller to pass
    /// to [`std::hint::black_box`] so that the reads are kept.
    pub(super) fn touch(&self, hash: u64) -> u64 {
        let capacity = self.capacity();
        if capacity == 0 {
            return 0;
        }
        let slot = home(hash, capacity);
        u64::from(self.table.ctrl()[slot]) ^ u64::from(self.table.slots()[slot])
    }

    /// The table slot that holds `key`'s entry (valid until the shard next
    /// changes).
    pub(super) fn find_slot(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let capacity = self.capacity();
        if capacity == 0 {
            return None;
        }
        let (ctrl, slots) = (self.table.ctrl(), self.table.slots());
        let tag = tag(hash);
        let mut slot = home(hash, capacity);
        loop {
            let group = group(ctrl, slot);
            let mut candidates = matching(group, tag);
            while candidates != 0 {
                let at = wrap(slot + first_byte(candidates), capacity);
                if ctrl[at] == tag {
                    let entry = self.arena.entry(slots[at] as usize);
                    if self.arena.key_eq(&entry, key) {
                        return Some(at);
                    }
                }
                candidates &= candidates - 1;
            }
            if empty(group) != 0 {
                return None;
            }
            slot = wrap(slot + GROUP, capacity);
        }
    }

    /// The location of the entry in table slot `slot` (from
    /// [`Shard::find_slot`]).
    pub(super) fn location(&self, slot: usize) -> Location {
        let entry = self.arena.entry(self.table.slots()[slot] as usize);
        read_location(&self.arena, &self.wide, &entry)
    }

    /// The header for a key with length code `code` at `location`, taking
    /// a side-table entry if it does not pack (expiry-slot bit clear).
    fn header_for(&mut self, code: u16, location: &Location) -> KeyHeader {
        if let Some(header) = KeyHeader::packed(code, location) {
            return header;
        }
        let wide = WideLocation::of(location);
        let index = match self.wide_free.pop() {
            Some(index) => {
                self.wide[index as usize] = wide;
                index
            }
            None => {
                self.wide.push(wide);
                (self.wide.len() - 1) as u32
            }
        };
        KeyHeader::wide(code, index)
    }

    /// The header that replaces `old` for `location` (expiry-slot bit
    /// clear): `old`'s side-table entry is reused if `location` is wide
    /// too, and freed if it packs.
    fn header_replacing(&mut self, old: KeyHeader, location: &Location) -> KeyHeader {
        let code = old.key_code();
        match old.wide_index() {
            Some(index) => match KeyHeader::packed(code, location) {
                Some(packed) => {
                    self.wide_free.push(index);
                    packed
                }
                None => {
                    self.wide[index as usize] = WideLocation::of(location);
                    KeyHeader::wide(code, index)
                }
            },
            None => self.header_for(code, location),
        }
    }

    /// Counts a live key's expiry going from `old` to `new` (as given by
    /// [`Location::live_expiry`]).
    fn count_expiry(&mut self, old: Option<u64>, new: Option<u64>) {
        if let Some(ms) = old {
            self.expiring -= 1;
            self.expire_at_sum -= u128::from(ms);
        }
        if let Some(ms) = new {
            self.expiring += 1;
            self.expire_at_sum += u128::from(ms);
            self.next_expiry.lower_to(ms);
        }
        if self.expiring == 0 {
            self.next_expiry.set(u64::MAX);
        }
    }

    /// Points the entry in table slot `slot` (from [`Shard::find_slot`]) to
    /// `location`, expiry included.
    ///
    /// An entry that has an expiry slot keeps it (holding 0 if `location`
    /// has no expiry). An entry without one that is given an expiry is
    /// appended anew, with a slot, at the arena's end: its table slot is
    /// repointed, its old copy marked dead, and the shard compacted if dead
    /// bytes then pass half its live bytes (and a page, see
    /// [`Shard::mostly_dead`]). Fails, changing
    /// nothing, only if that move would pass [`MAX_ARENA_BYTES`].
    pub(super) fn set_location<S: BuildHasher>(
        &mut self,
        hasher: &S,
        slot: usize,
        location: Location,
    ) -> Result<(), IndexError> {
        let at = self.table.slots()[slot] as usize;
        let entry = self.arena.entry(at);
        let old = read_location(&self.arena, &self.wide, &entry);
        let mut target = at;
        let mut expiry_at = entry.expiry_at;
        let moved = location.expire_at_ms != 0 && expiry_at.is_none();
        if moved {
            let mut key = vec![0u8; entry.key_len];
            self.arena.read(entry.key_at, &mut key);
            // The header written below replaces this placeholder.
            let Some(new_at) = self.arena.append(entry.header.dead(), Some(0), &key) else {
                return Err(IndexError::ShardFull {
                    max_bytes: MAX_ARENA_BYTES as u64,
                });
            };
            self.arena.write_header(at, entry.header.dead());
            self.dead_bytes += entry.end() - at;
            self.table.parts_mut().1[slot] = new_at;
            target = new_at as usize;
            expiry_at = Some(target + HEADER_BYTES);
        }
        let header = self
            .header_replacing(entry.header, &location)
            .with_expiry_slot(expiry_at.is_some());
        self.arena.write_header(target, header);
        if let Some(expiry_at) = expiry_at {
            self.arena.write_u64(expiry_at, location.expire_at_ms);
        }
        match (old.is_tombstone(), location.is_tombstone()) {
            (false, true) => self.tombstones += 1,
            (true, false) => self.tombstones -= 1,
            _ => {}
        }
        self.count_expiry(old.live_expiry(), location.live_expiry());
        if moved && self.mostly_dead() {
            self.retain(hasher, |_| true);
        }
        Ok(())
    }

    /// True once dead bytes pass half the live bytes (a third of the arena)
    /// and a page: the point at which a move compacts the shard, so dead
    /// bytes never take more than half as much room again as live ones.
    ///
    /// The bound is on live bytes, not the whole arena: a dead copy of
    /// `n` bytes always has a live copy of `n + 8` (the moved entry, which
    /// has a slot and so cannot move again before compaction), so dead
    /// bytes never reach half the arena.
    fn mostly_dead(&self) -> bool {
        self.dead_bytes >= PAGE_BYTES && self.dead_bytes * 2 > self.arena.len() - self.dead_bytes
    }

    /// Adds `key` (not yet in the shard) at `location`, with an expiry slot
    /// if `location` has an expiry.
    pub(super) fn insert<S: BuildHasher>(
        &mut self,
        hasher: &S,
        hash: u64,
        key: &[u8],
        location: Location,
    ) -> Result<(), IndexError> {
        if (self.entries + 1) * MAX_LOAD.1 > self.capacity() * MAX_LOAD.0 {
            let mut capacity = self.capacity();
            while (self.entries + 1) * MAX_LOAD.1 > capacity * MAX_LOAD.0 {
                capacity = (capacity * GROWTH.0 / GROWTH.1).max(MIN_CAPACITY);
            }
            self.rebuild_table(hasher, capacity);
        }
        let header = self.header_for(key_code(key.len()), &location);
        let expiry = (location.expire_at_ms != 0).then_some(location.expire_at_ms);
        let Some(at) = self.arena.append(header, expiry, key) else {
            if let Some(index) = header.wide_index() {
                self.wide_free.push(index);
            }
            return Err(IndexError::ShardFull {
                max_bytes: MAX_ARENA_BYTES as u64,
            });
        };
        let (ctrl, slots) = self.table.parts_mut();
        place(ctrl, slots, hash, at);
        self.entries += 1;
        if location.is_tombstone() {
            self.tombstones += 1;
        }
        self.count_expiry(None, location.live_expiry());
        Ok(())
    }

    /// Makes room for `additional` more keys without growing the table.
    pub(super) fn reserve<S: BuildHasher>(&mut self, hasher: &S, additional: usize) {
        let capacity = capacity_for(self.entries + additional, TARGET_LOAD);
        if capacity > self.capacity() {
            self.rebuild_table(hasher, capacity);
        }
    }

    /// Replaces the table with one of `capacity` slots holding every entry
    /// (dead copies left out).
    fn rebuild_table<S: BuildHasher>(&mut self, hasher: &S, capacity: usize) {
        let mut table = Table::new(capacity);
        let (ctrl, slots) = table.parts_mut();
        let mut at = 0;
        while at < self.arena.len() {
            let entry = self.arena.entry(at);
            if !entry.header.is_dead() {
                let hash = hasher.hash_one(self.arena.key(&entry));
                place(ctrl, slots, hash, at as u32);
            }
            at = entry.end();
        }
        self.table = table;
    }

    /// Removes every tombstone, compacting the arena (also when it only
    /// holds dead copies), and shrinks a table sized well past its entries.
    /// Returns the tombstones removed.
    pub(super) fn drop_tombstones<S: BuildHasher>(&mut self, hasher: &S) -> usize {
        if self.tombstones == 0 && self.dead_bytes == 0 {
            self.shrink_to_fit(hasher, false);
            return 0;
        }
        self.retain(hasher, |location| !location.is_tombstone())
            .tombstones
    }

    /// Keeps only the entries whose location passes `keep`, compacting the
    /// arena when any is removed or dead copies take room (which bumps the
    /// generation, drops dead copies, and drops the expiry slots that hold
    /// 0), and shrinking a table sized well past its entries. Recounts the
    /// expiry totals and sets the next expiry exactly. Returns what was
    /// removed.
    pub(super) fn retain<S: BuildHasher>(
        &mut self,
        hasher: &S,
        keep: impl Fn(&Location) -> bool,
    ) -> Removed {
        let mut removed = Removed::default();
        let mut kept = ExpiryTally::default();
        let mut at = 0;
        while at < self.arena.len() {
            let entry = self.arena.entry(at);
            at = entry.end();
            if entry.header.is_dead() {
                continue;
            }
            let location = read_location(&self.arena, &self.wide, &entry);
            if !keep(&location) {
                if location.is_tombstone() {
                    removed.tombstones += 1;
                } else {
                    removed.live += 1;
                }
            } else {
                kept.add(&location);
            }
        }
        let any = removed.live + removed.tombstones > 0 || self.dead_bytes > 0;
        if any {
            let old = std::mem::take(&mut self.arena);
            let old_wide = std::mem::take(&mut self.wide);
            self.wide_free = Vec::new();
            let mut at = 0;
            while at < old.len() {
                let entry = old.entry(at);
                at = entry.end();
                if entry.header.is_dead() {
                    continue;
                }
                let location = read_location(&old, &old_wide, &entry);
                if keep(&location) {
                    let key = old.key(&entry);
                    let header = self.header_for(entry.header.key_code(), &location);
                    let expiry = (location.expire_at_ms != 0).then_some(location.expire_at_ms);
                    // The compacted arena is no longer than the old one: no
                    // entry gains a slot, and dead copies are dropped.
                    let _ = self.arena.append(header, expiry, key);
                }
            }
            self.entries -= removed.live + removed.tombstones;
            self.tombstones -= removed.tombstones;
            self.dead_bytes = 0;
            self.generation = self.generation.wrapping_add(1);
        }
        self.expiring = kept.expiring;
        self.expire_at_sum = kept.sum;
        self.next_expiry.set(kept.min);
        self.shrink_to_fit(hasher, any);
        removed
    }

    /// Rebuilds the table for the entries there are if `changed` (entries
    /// were removed, so slots point at old arena offsets) or if it is sized
    /// well past them.
    fn shrink_to_fit<S: BuildHasher>(&mut self, hasher: &S, changed: bool) {
        let fitting = capacity_for(self.entries, TARGET_LOAD);
        if self.entries == 0 {
            self.table = Table::default();
        } else if changed || self.capacity() > Table::granted(fitting * GROWTH.0 / GROWTH.1) {
            self.rebuild_table(hasher, fitting);
        }
        self.wide.shrink_to_fit();
    }

    /// Visits up to `budget` entries (dead copies included) from the entry
    /// boundary at or after `from`, calling `f` for each live one.
    pub(super) fn scan(
        &self,
        from: u32,
        budget: usize,
        f: &mut impl FnMut(&[u8], &Location),
    ) -> ScanStep {
        let mut at = self.arena.boundary_at_or_after(from as usize);
        let mut visited = 0;
        while at < self.arena.len() {
            if visited == budget {
                return ScanStep {
                    next: Some(at as u32),
                    visited,
                };
            }
            let entry = self.arena.entry(at);
            if !entry.header.is_dead() {
                let location = read_location(&self.arena, &self.wide, &entry);
                if !location.is_tombstone() {
                    f(self.arena.key(&entry), &location);
                }
            }
            visited += 1;
            at = entry.end();
        }
        ScanStep {
            next: None,
            visited,
        }
    }

    /// Walks the entries that start in `from..until` (from the boundary at
    /// or after `from`), or until `f` returns false, calling `f` with the
    /// key, location and expiry of each live key whose expiry is not 0.
    /// Returns where it stopped (`None` if it went through the range); a
    /// walk of the whole arena sets the next expiry exactly.
    fn walk_expiring(
        &self,
        from: u32,
        until: u32,
        mut f: impl FnMut(&[u8], &Location, u64) -> bool,
    ) -> Option<u32> {
        let mut at = self.arena.boundary_at_or_after(from as usize);
        let end = self.arena.len().min(until as usize);
        let mut min = u64::MAX;
        while at < end {
            let entry = self.arena.entry(at);
            if !entry.header.is_dead() {
                let location = read_location(&self.arena, &self.wide, &entry);
                if let Some(ms) = location.live_expiry() {
                    if !f(self.arena.key(&entry), &location, ms) {
                        return Some(at as u32);
                    }
                    min = min.min(ms);
                }
            }
            at = entry.end();
        }
        if from == 0 && end == self.arena.len() {
            self.next_expiry.set(min);
        }
        None
    }

    /// Appends to `out` the live keys that start in `from..until` (from the
    /// boundary at or after `from`) whose expiry is not 0 and at most
    /// `now_ms`, until `out` holds `max_keys`. Returns where to go on if an
    /// expired key was left for want of room (`None` if every one in the
    /// range was collected). A walk of the whole arena sets the next expiry
    /// exactly.
    pub(super) fn collect_expired(
        &self,
        from: u32,
        until: u32,
        now_ms: u64,
        max_keys: usize,
        out: &mut Vec<(Vec<u8>, Location)>,
    ) -> Option<u32> {
        self.walk_expiring(from, until, |key, location, ms| {
            if ms > now_ms {
                return true;
            }
            if out.len() >= max_keys {
                return false;
            }
            out.push((key.to_vec(), *location));
            true
        })
    }

    /// Live keys whose expiry is not 0 and at most `now_ms`; sets the next
    /// expiry exactly.
    pub(super) fn expired_present(&self, now_ms: u64) -> usize {
        let mut expired = 0;
        self.walk_expiring(0, u32::MAX, |_, _, ms| {
            expired += usize::from(ms <= now_ms);
            true
        });
        expired
    }

    /// A live key found from a slot picked by `random`.
    pub(super) fn random_live(&self, random: u64) -> Option<(Vec<u8>, Location)> {
        if self.entries == self.tombstones {
            return None;
        }
        let capacity = self.capacity();
        let start = (random % capacity as u64) as usize;
        (0..capacity).find_map(|step| {
            let slot = wrap(start + step, capacity);
            if self.table.ctrl()[slot] == EMPTY {
                return None;
            }
            // The table points only at entries that are not dead.
            let entry = self.arena.entry(self.table.slots()[slot] as usize);
            let location = read_location(&self.arena, &self.wide, &entry);
            if location.is_tombstone() {
                return None;
            }
            Some((self.arena.key(&entry).to_vec(), location))
        })
    }

    /// Bytes this shard has allocated (dead copies' bytes included, as
    /// they are until compaction).
    pub(super) fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self.arena.memory_bytes()
            + self.wide.capacity() * std::mem::size_of::<WideLocation>()
            + self.wide_free.capacity() * std::mem::size_of::<u32>()
    }

    /// Checks every count and bound this shard keeps against a walk of its
    /// arena and table; panics on a mismatch.
    #[cfg(test)]
    pub(super) fn audit<S: BuildHasher>(&self, hasher: &S) {
        let mut entries = 0;
        let mut tombstones = 0;
        let mut dead_bytes = 0;
        let mut tally = ExpiryTally::default();
        let mut wide_used = std::collections::HashSet::new();
        let mut at = 0;
        while at < self.arena.len() {
            let entry = self.arena.entry(at);
            if entry.header.is_dead() {
                dead_bytes += entry.end() - at;
            } else {
                let location = read_location(&self.arena, &self.wide, &entry);
                entries += 1;
                tombstones += usize::from(location.is_tombstone());
                tally.add(&location);
                if let Some(index) = entry.header.wide_index() {
                    assert!(wide_used.insert(index), "side entry {index} used twice");
                    assert!(
                        !self.wide_free.contains(&index),
                        "used side entry {index} is free"
                    );
                }
                let key = self.arena.key(&entry).to_vec();
                let slot = self
                    .find_slot(hasher.hash_one(&key), &key)
                    .expect("every entry is in the table");
                assert_eq!(
                    self.table.slots()[slot] as usize,
                    at,
                    "the table points at the entry"
                );
            }
            at = entry.end();
        }
        assert_eq!(at, self.arena.len(), "entries end at the arena's end");
        assert_eq!(entries, self.entries);
        assert_eq!(tombstones, self.tombstones);
        assert_eq!(dead_bytes, self.dead_bytes);
        assert_eq!(
            (tally.expiring, tally.sum),
            (self.expiring, self.expire_at_sum)
        );
        assert!(
            self.next_expiry.get() <= tally.min,
            "next expiry is a lower bound"
        );
        assert!(!self.mostly_dead(), "a mostly dead shard is compacted");
    }
}

/// Puts arena offset `at` in the first empty slot of `hash`'s probe run.
fn place(ctrl: &mut [u8], slots: &mut [u32], hash: u64, at: u32) {
    let capacity = slots.len();
    let mut slot = home(hash, capacity);
    loop {
        let free = empty(group(ctrl, slot));
        if free != 0 {
            let chosen = wrap(slot + first_byte(free), capacity);
            let tag = tag(hash);
            ctrl[chosen] = tag;
            if chosen < GROUP {
                ctrl[capacity + chosen] = tag;
            }
            slots[chosen] = at;
            return;
        }
        slot = wrap(slot + GROUP, capacity);
    }
}
