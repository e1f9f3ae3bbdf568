//! One shard of the index: an arena of entries and a compact open-addressing
//! table over it.
//!
//! **Arena.** Entries are appended to a run of fixed-size pages and never
//! move until [`Shard::drop_tombstones`] compacts the shard. An entry is a
//! 16-byte header (the packed location and the key's length code, see
//! [`super::location`]), a LEB128 key length for keys of 127 bytes or more,
//! then the key. Entries are laid end to end and may straddle pages, so the
//! only unused arena bytes are the tail of the last page.
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

use super::IndexError;
use super::location::{HEADER_BYTES, Header, LONG_KEY_CODE, Location};

/// Bytes of one arena page.
pub(super) const PAGE_BYTES: usize = 4096;
/// Largest arena of one shard: offsets are `u32`.
pub(super) const MAX_ARENA_BYTES: usize = u32::MAX as usize;
/// Control bytes compared at once.
const GROUP: usize = 8;
/// Control byte of an unused slot (full slots hold tags below 0x80).
const EMPTY: u8 = 0x80;
/// Smallest table that is allocated.
const MIN_CAPACITY: usize = 16;
/// The table grows once more than this share of its slots is full.
const MAX_LOAD: (usize, usize) = (7, 8);
/// Share of the slots that [`Shard::reserve`] and compaction aim to fill.
const TARGET_LOAD: (usize, usize) = (4, 5);
/// A growing table gets this many times its slots.
const GROWTH: (usize, usize) = (9, 8);
/// `page_starts` value of a page in which no entry starts.
const NO_ENTRY: u32 = u32::MAX;
/// Longest LEB128 key length (a `u32`).
const MAX_LEB128_BYTES: usize = 5;

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

fn key_code(len: usize) -> u8 {
    if len < LONG_KEY_CODE as usize {
        len as u8
    } else {
        LONG_KEY_CODE
    }
}

/// The LEB128 length that follows the header of a long key (empty for a
/// short one).
fn length_prefix(len: usize) -> ([u8; MAX_LEB128_BYTES], usize) {
    let mut out = [0u8; MAX_LEB128_BYTES];
    if len < LONG_KEY_CODE as usize {
        return (out, 0);
    }
    let mut rest = len;
    let mut used = 0;
    loop {
        let byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            out[used] = byte;
            return (out, used + 1);
        }
        out[used] = byte | 0x80;
        used += 1;
    }
}

/// Makes room in a full `vec` for an eighth more items (rather than the
/// doubling of `Vec::push`, whose unused half would count per key).
fn grow_by_an_eighth<T>(vec: &mut Vec<T>) {
    if vec.len() == vec.capacity() {
        vec.reserve_exact(vec.len() / 8 + 1);
    }
}

/// One parsed arena entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    header: Header,
    key_at: usize,
    key_len: usize,
}

impl Entry {
    fn end(&self) -> usize {
        self.key_at + self.key_len
    }
}

/// One arena page.
type Page = Box<[u8; PAGE_BYTES]>;

/// A zeroed page, allocated in place.
fn new_page() -> Page {
    let page: Box<[u8]> = vec![0u8; PAGE_BYTES].into_boxed_slice();
    page.try_into()
        .unwrap_or_else(|_| unreachable!("the page has PAGE_BYTES bytes"))
}

/// Pages of entries laid end to end.
#[derive(Default)]
struct Arena {
    /// One thin pointer per page (its length is [`PAGE_BYTES`]).
    pages: Vec<Page>,
    /// Bytes in use.
    len: usize,
    /// Per page, the offset of the first entry that starts in it.
    page_starts: Vec<u32>,
}

impl Arena {
    fn read(&self, mut at: usize, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            let (page, within) = (at / PAGE_BYTES, at % PAGE_BYTES);
            let n = (PAGE_BYTES - within).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.pages[page][within..within + n]);
            done += n;
            at += n;
        }
    }

    fn write(&mut self, mut at: usize, bytes: &[u8]) {
        let mut done = 0;
        while done < bytes.len() {
            let (page, within) = (at / PAGE_BYTES, at % PAGE_BYTES);
            let n = (PAGE_BYTES - within).min(bytes.len() - done);
            self.pages[page][within..within + n].copy_from_slice(&bytes[done..done + n]);
            done += n;
            at += n;
        }
    }

    /// `len` bytes at `at` if they lie in one page.
    fn contiguous(&self, at: usize, len: usize) -> Option<&[u8]> {
        if len == 0 {
            return Some(&[]);
        }
        let (page, within) = (at / PAGE_BYTES, at % PAGE_BYTES);
        (within + len <= PAGE_BYTES).then(|| &self.pages[page][within..within + len])
    }

    /// Appends one entry; returns its offset.
    fn append(&mut self, header: Header, key: &[u8]) -> Option<u32> {
        let (prefix, prefix_len) = length_prefix(key.len());
        let at = self.len;
        let end = at + HEADER_BYTES + prefix_len + key.len();
        if end > MAX_ARENA_BYTES {
            return None;
        }
        while self.pages.len() * PAGE_BYTES < end {
            grow_by_an_eighth(&mut self.pages);
            self.pages.push(new_page());
        }
        let start_page = at / PAGE_BYTES;
        while self.page_starts.len() <= start_page {
            grow_by_an_eighth(&mut self.page_starts);
            self.page_starts.push(NO_ENTRY);
        }
        if self.page_starts[start_page] == NO_ENTRY {
            self.page_starts[start_page] = at as u32;
        }
        self.write_header(at, header);
        self.write(at + HEADER_BYTES, &prefix[..prefix_len]);
        self.write(at + HEADER_BYTES + prefix_len, key);
        self.len = end;
        Some(at as u32)
    }

    fn header(&self, at: usize) -> Header {
        let mut bytes = [0u8; HEADER_BYTES];
        let (page, within) = (at / PAGE_BYTES, at % PAGE_BYTES);
        match self.pages[page].get(within..within + HEADER_BYTES) {
            Some(stored) => bytes.copy_from_slice(stored),
            None => self.read(at, &mut bytes),
        }
        Header::from_bytes(bytes)
    }

    fn write_header(&mut self, at: usize, header: Header) {
        let (page, within) = (at / PAGE_BYTES, at % PAGE_BYTES);
        match self.pages[page].get_mut(within..within + HEADER_BYTES) {
            Some(stored) => stored.copy_from_slice(&header.to_bytes()),
            None => self.write(at, &header.to_bytes()),
        }
    }

    fn entry(&self, at: usize) -> Entry {
        let header = self.header(at);
        let code = header.key_code();
        let mut key_at = at + HEADER_BYTES;
        let key_len = if code < LONG_KEY_CODE {
            usize::from(code)
        } else {
            let mut len = 0usize;
            let mut shift = 0;
            loop {
                let mut byte = [0u8];
                self.read(key_at, &mut byte);
                key_at += 1;
                len |= usize::from(byte[0] & 0x7f) << shift;
                shift += 7;
                if byte[0] & 0x80 == 0 {
                    break len;
                }
            }
        };
        Entry {
            header,
            key_at,
            key_len,
        }
    }

    fn key_eq(&self, entry: &Entry, key: &[u8]) -> bool {
        if entry.key_len != key.len() {
            return false;
        }
        if let Some(stored) = self.contiguous(entry.key_at, key.len()) {
            return stored == key;
        }
        self.key_eq_straddling(entry, key)
    }

    fn key_eq_straddling(&self, entry: &Entry, key: &[u8]) -> bool {
        let mut at = entry.key_at;
        let mut done = 0;
        while done < key.len() {
            let (page, within) = (at / PAGE_BYTES, at % PAGE_BYTES);
            let n = (PAGE_BYTES - within).min(key.len() - done);
            if self.pages[page][within..within + n] != key[done..done + n] {
                return false;
            }
            done += n;
            at += n;
        }
        true
    }

    /// The key of `entry`, copied into `scratch` only if it straddles pages.
    fn key<'a>(&'a self, entry: &Entry, scratch: &'a mut Vec<u8>) -> &'a [u8] {
        match self.contiguous(entry.key_at, entry.key_len) {
            Some(key) => key,
            None => {
                scratch.resize(entry.key_len, 0);
                self.read(entry.key_at, scratch);
                scratch
            }
        }
    }

    /// The first entry boundary at or after `at` (the arena's end if none).
    fn boundary_at_or_after(&self, at: usize) -> usize {
        if at >= self.len {
            return self.len;
        }
        let page = at / PAGE_BYTES;
        match self.page_starts.get(page).copied() {
            Some(start) if start != NO_ENTRY && (start as usize) <= at => {
                let mut boundary = start as usize;
                while boundary < at {
                    boundary = self.entry(boundary).end();
                }
                boundary
            }
            Some(start) if start != NO_ENTRY => start as usize,
            _ => self.page_starts[page.min(self.page_starts.len())..]
                .iter()
                .find(|&&start| start != NO_ENTRY)
                .map_or(self.len, |&start| start as usize),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.pages.len() * PAGE_BYTES
            + self.pages.capacity() * std::mem::size_of::<Page>()
            + self.page_starts.capacity() * std::mem::size_of::<u32>()
    }
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

/// One shard of the index.
#[derive(Default)]
pub(super) struct Shard {
    /// `capacity + GROUP` control bytes; the last group mirrors the first.
    ctrl: Box<[u8]>,
    /// Arena offset of the entry in each full slot.
    slots: Box<[u32]>,
    /// Entries (keys), tombstones included.
    entries: usize,
    /// Entries whose location is a tombstone.
    tombstones: usize,
    arena: Arena,
    /// Locations too wide for the packed header.
    wide: Vec<Location>,
    /// Unused entries of `wide`.
    wide_free: Vec<u32>,
    /// Changes each time compaction moves entries (scan cursors carry it).
    generation: u16,
}

impl Shard {
    fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Entries and tombstones in this shard.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.entries, self.tombstones)
    }

    pub(super) fn generation(&self) -> u16 {
        self.generation
    }

    /// Reads the table's first control bytes and slot for `hash`, so that
    /// a [`Shard::find`] or [`Shard::insert`] of it soon after finds them
    /// in cache. Returns a value made of them, for the caller to pass to
    /// [`std::hint::black_box`] so that the reads are kept.
    pub(super) fn touch(&self, hash: u64) -> u64 {
        let capacity = self.capacity();
        if capacity == 0 {
            return 0;
        }
        let slot = home(hash, capacity);
        u64::from(self.ctrl[slot]) ^ u64::from(self.slots[slot])
    }

    /// Arena offset of `key`'s entry.
    pub(super) fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let capacity = self.capacity();
        if capacity == 0 {
            return None;
        }
        let tag = tag(hash);
        let mut slot = home(hash, capacity);
        loop {
            let group = group(&self.ctrl, slot);
            let mut candidates = matching(group, tag);
            while candidates != 0 {
                let at = wrap(slot + first_byte(candidates), capacity);
                if self.ctrl[at] == tag {
                    let entry = self.arena.entry(self.slots[at] as usize);
                    if self.arena.key_eq(&entry, key) {
                        return Some(self.slots[at]);
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

    /// The location of the entry at `at`.
    pub(super) fn location(&self, at: u32) -> Location {
        let header = self.arena.header(at as usize);
        match header.wide_index() {
            Some(index) => self.wide[index as usize],
            None => header.unpack(),
        }
    }

    /// The header for a key with length code `code` at `location`, taking
    /// a side-table entry if it does not pack.
    fn header_for(&mut self, code: u8, location: &Location) -> Header {
        if let Some(header) = Header::packed(code, location) {
            return header;
        }
        let index = match self.wide_free.pop() {
            Some(index) => {
                self.wide[index as usize] = *location;
                index
            }
            None => {
                self.wide.push(*location);
                (self.wide.len() - 1) as u32
            }
        };
        Header::wide(code, index)
    }

    /// Points the entry at `at` to `location`.
    pub(super) fn set_location(&mut self, at: u32, location: Location) {
        let header = self.arena.header(at as usize);
        let was_tombstone = self.location(at).is_tombstone();
        let new_header = match header.wide_index() {
            Some(index) => match Header::packed(header.key_code(), &location) {
                Some(packed) => {
                    self.wide_free.push(index);
                    packed
                }
                None => {
                    self.wide[index as usize] = location;
                    header
                }
            },
            None => self.header_for(header.key_code(), &location),
        };
        self.arena.write_header(at as usize, new_header);
        match (was_tombstone, location.is_tombstone()) {
            (false, true) => self.tombstones += 1,
            (true, false) => self.tombstones -= 1,
            _ => {}
        }
    }

    /// Adds `key` (not yet in the shard) at `location`.
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
        let Some(at) = self.arena.append(header, key) else {
            if let Some(index) = header.wide_index() {
                self.wide_free.push(index);
            }
            return Err(IndexError::ShardFull {
                max_bytes: MAX_ARENA_BYTES as u64,
            });
        };
        place(&mut self.ctrl, &mut self.slots, hash, at);
        self.entries += 1;
        if location.is_tombstone() {
            self.tombstones += 1;
        }
        Ok(())
    }

    /// Makes room for `additional` more keys without growing the table.
    pub(super) fn reserve<S: BuildHasher>(&mut self, hasher: &S, additional: usize) {
        let capacity = capacity_for(self.entries + additional, TARGET_LOAD);
        if capacity > self.capacity() {
            self.rebuild_table(hasher, capacity);
        }
    }

    /// Replaces the table with one of `capacity` slots holding every entry.
    fn rebuild_table<S: BuildHasher>(&mut self, hasher: &S, capacity: usize) {
        let mut ctrl = vec![EMPTY; capacity + GROUP].into_boxed_slice();
        let mut slots = vec![0u32; capacity].into_boxed_slice();
        let mut scratch = Vec::new();
        let mut at = 0;
        while at < self.arena.len {
            let entry = self.arena.entry(at);
            let hash = hasher.hash_one(self.arena.key(&entry, &mut scratch));
            place(&mut ctrl, &mut slots, hash, at as u32);
            at = entry.end();
        }
        self.ctrl = ctrl;
        self.slots = slots;
    }

    /// Removes every tombstone, compacting the arena, and shrinks a table
    /// sized well past its entries. Returns the tombstones removed.
    pub(super) fn drop_tombstones<S: BuildHasher>(&mut self, hasher: &S) -> usize {
        if self.tombstones == 0 {
            self.shrink_to_fit(hasher, false);
            return 0;
        }
        self.retain(hasher, |location| !location.is_tombstone())
            .tombstones
    }

    /// Keeps only the entries whose location passes `keep`, compacting the
    /// arena (when any is removed) and shrinking a table sized well past
    /// its entries. Returns what was removed.
    pub(super) fn retain<S: BuildHasher>(
        &mut self,
        hasher: &S,
        keep: impl Fn(&Location) -> bool,
    ) -> Removed {
        let location_of = |arena: &Arena, wide: &[Location], at: usize| {
            let entry = arena.entry(at);
            let location = match entry.header.wide_index() {
                Some(index) => wide[index as usize],
                None => entry.header.unpack(),
            };
            (entry, location)
        };
        let mut removed = Removed::default();
        let mut at = 0;
        while at < self.arena.len {
            let (entry, location) = location_of(&self.arena, &self.wide, at);
            if !keep(&location) {
                if location.is_tombstone() {
                    removed.tombstones += 1;
                } else {
                    removed.live += 1;
                }
            }
            at = entry.end();
        }
        let any = removed.live + removed.tombstones > 0;
        if any {
            let old = std::mem::take(&mut self.arena);
            let old_wide = std::mem::take(&mut self.wide);
            self.wide_free = Vec::new();
            let mut scratch = Vec::new();
            let mut at = 0;
            while at < old.len {
                let (entry, location) = location_of(&old, &old_wide, at);
                if keep(&location) {
                    let key = old.key(&entry, &mut scratch);
                    let header = self.header_for(entry.header.key_code(), &location);
                    // The compacted arena is no longer than the old one.
                    let _ = self.arena.append(header, key);
                }
                at = entry.end();
            }
            self.entries -= removed.live + removed.tombstones;
            self.tombstones -= removed.tombstones;
            self.generation = self.generation.wrapping_add(1);
        }
        self.shrink_to_fit(hasher, any);
        removed
    }

    /// Rebuilds the table for the entries there are if `changed` (entries
    /// were removed, so slots point at old arena offsets) or if it is sized
    /// well past them.
    fn shrink_to_fit<S: BuildHasher>(&mut self, hasher: &S, changed: bool) {
        let fitting = capacity_for(self.entries, TARGET_LOAD);
        if self.entries == 0 {
            self.ctrl = Box::default();
            self.slots = Box::default();
        } else if changed || self.capacity() > fitting * GROWTH.0 / GROWTH.1 {
            self.rebuild_table(hasher, fitting);
        }
        self.wide.shrink_to_fit();
    }

    /// Visits up to `budget` entries from the entry boundary at or after
    /// `from`, calling `f` for each live one.
    pub(super) fn scan(
        &self,
        from: u32,
        budget: usize,
        f: &mut impl FnMut(&[u8], &Location),
    ) -> ScanStep {
        let mut at = self.arena.boundary_at_or_after(from as usize);
        let mut visited = 0;
        let mut scratch = Vec::new();
        while at < self.arena.len {
            if visited == budget {
                return ScanStep {
                    next: Some(at as u32),
                    visited,
                };
            }
            let entry = self.arena.entry(at);
            let location = self.location(at as u32);
            if !location.is_tombstone() {
                f(self.arena.key(&entry, &mut scratch), &location);
            }
            visited += 1;
            at = entry.end();
        }
        ScanStep {
            next: None,
            visited,
        }
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
            if self.ctrl[slot] == EMPTY {
                return None;
            }
            let location = self.location(self.slots[slot]);
            if location.is_tombstone() {
                return None;
            }
            let entry = self.arena.entry(self.slots[slot] as usize);
            let mut scratch = Vec::new();
            Some((self.arena.key(&entry, &mut scratch).to_vec(), location))
        })
    }

    /// Bytes this shard has allocated.
    pub(super) fn memory_bytes(&self) -> usize {
        self.ctrl.len()
            + self.slots.len() * std::mem::size_of::<u32>()
            + self.arena.memory_bytes()
            + self.wide.capacity() * std::mem::size_of::<Location>()
            + self.wide_free.capacity() * std::mem::size_of::<u32>()
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
