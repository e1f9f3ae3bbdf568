//! A shard's arena: its entries laid end to end in one anonymous memory
//! mapping that grows in place.
//!
//! An entry is a 16-byte header (the packed location, the key's length code
//! and the expiry-slot bit, see [`super::location`]), for an entry with an
//! expiry slot 8 bytes of expiry (`u64` LE Unix ms, 0 = none), a LEB128 key
//! length for keys of [`LONG_KEY_CODE`] bytes or more, then the key.
//!
//! The mapping reserves address space ahead of the entries (up to the next
//! power of two), and grows with `mremap`, which moves pages without
//! copying them; only the pages the entries reach are ever touched (huge
//! pages are refused for it), so the arena costs its bytes in use rounded
//! up to a page, and none of it is on the heap, where a growing index's
//! freed tables would otherwise leave holes between arena pages. Dropping
//! an arena (a compaction writes a new one) unmaps it. Reads are bounded
//! by the entries' own lengths, which callers take from entries below
//! [`Arena::len`].

use memmap2::{Advice, MmapMut, RemapOptions};

use super::location::{
    EXPIRY_BYTES, HEADER_BYTES, KeyHeader, LONG_KEY_CODE, Location, WideLocation,
};

/// Bytes of a memory page: the unit in which the arena touches memory.
pub(super) const PAGE_BYTES: usize = 4096;
/// Bytes of a span, for each of which the arena records where the first
/// entry that starts in it starts (so that a walk can begin at any offset:
/// it parses at most one span's entries to find a boundary).
const SPAN_BYTES: usize = 16 << 10;
/// Largest arena of one shard: offsets are `u32`.
pub(super) const MAX_ARENA_BYTES: usize = u32::MAX as usize;
/// First reservation of address space.
const FIRST_RESERVE_BYTES: usize = 64 << 10;
/// `span_starts` value of a span in which no entry starts.
const NO_ENTRY: u32 = u32::MAX;
/// Longest LEB128 key length (a `u32`).
const MAX_LEB128_BYTES: usize = 5;

/// The key-length code of a key of `len` bytes.
pub(super) fn key_code(len: usize) -> u16 {
    if len < LONG_KEY_CODE as usize {
        len as u16
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
pub(super) struct Entry {
    pub(super) header: KeyHeader,
    /// Arena offset of its expiry slot, if it has one.
    pub(super) expiry_at: Option<usize>,
    pub(super) key_at: usize,
    pub(super) key_len: usize,
}

impl Entry {
    /// The offset just past the entry.
    pub(super) fn end(&self) -> usize {
        self.key_at + self.key_len
    }
}

/// The location of the (not dead) entry `entry`, its side-table part read
/// from `wide`.
pub(super) fn read_location(arena: &Arena, wide: &[WideLocation], entry: &Entry) -> Location {
    debug_assert!(!entry.header.is_dead(), "a dead entry has no location");
    let expire_at_ms = entry.expiry_at.map_or(0, |at| arena.read_u64(at));
    match entry.header.wide_index() {
        Some(index) => wide[index as usize].with_expiry(expire_at_ms),
        None => Location {
            expire_at_ms,
            ..entry.header.unpack()
        },
    }
}

/// Entries laid end to end in one mapping.
#[derive(Default)]
pub(super) struct Arena {
    /// The reserved address space (`None` until the first entry).
    region: Option<MmapMut>,
    /// Bytes in use.
    len: usize,
    /// Per span, the offset of the first entry that starts in it.
    span_starts: Vec<u32>,
}

impl Arena {
    /// Bytes in use.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn bytes(&self, at: usize, len: usize) -> &[u8] {
        match &self.region {
            Some(region) => &region[at..at + len],
            None => &[][..len],
        }
    }

    fn bytes_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        match &mut self.region {
            Some(region) => &mut region[at..at + len],
            None => &mut [][..len],
        }
    }

    /// Copies `out.len()` bytes from `at` into `out`.
    pub(super) fn read(&self, at: usize, out: &mut [u8]) {
        out.copy_from_slice(self.bytes(at, out.len()));
    }

    pub(super) fn read_u64(&self, at: usize) -> u64 {
        let mut bytes = [0u8; EXPIRY_BYTES];
        self.read(at, &mut bytes);
        u64::from_le_bytes(bytes)
    }

    /// Copies `bytes` into the arena at `at` (within the mapped length).
    fn write(&mut self, at: usize, bytes: &[u8]) {
        self.bytes_mut(at, bytes.len()).copy_from_slice(bytes);
    }

    pub(super) fn write_u64(&mut self, at: usize, value: u64) {
        self.write(at, &value.to_le_bytes());
    }

    /// Makes the mapping reach `end` bytes. A growing mapping reserves
    /// address space up to the next power of two (at least
    /// [`FIRST_RESERVE_BYTES`]); where the system refuses that (strict
    /// overcommit, an address-space limit), it asks for the pages `end`
    /// needs alone. Failing that too is an allocation failure, handled as
    /// Rust handles any.
    fn reach(&mut self, end: usize) {
        debug_assert!(end <= MAX_ARENA_BYTES, "append checks the arena's bound");
        let reserved = self.region.as_ref().map_or(0, |region| region.len());
        if end <= reserved {
            return;
        }
        let roomy = end
            .max(FIRST_RESERVE_BYTES)
            .next_power_of_two()
            .min(MAX_ARENA_BYTES.next_multiple_of(PAGE_BYTES));
        let exact = end.next_multiple_of(PAGE_BYTES);
        if !self.grow_to(roomy) && !self.grow_to(exact) {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(exact, PAGE_BYTES)
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            );
        }
    }

    /// Grows (or first maps) the mapping to `len` bytes; false if the
    /// system refuses.
    fn grow_to(&mut self, len: usize) -> bool {
        match &mut self.region {
            // SAFETY: an anonymous mapping has no file whose end could be
            // read past, and `&mut self` holds no reference into the
            // mapping across the move.
            Some(region) => {
                unsafe { region.remap(len, RemapOptions::new().may_move(true)) }.is_ok()
            }
            None => match MmapMut::map_anon(len) {
                Ok(region) => {
                    // Huge pages would make the untouched reservation past
                    // the entries resident; a refusal only costs that.
                    let _ = region.advise(Advice::NoHugePage);
                    self.region = Some(region);
                    true
                }
                Err(_) => false,
            },
        }
    }

    /// Appends one entry, with an expiry slot holding `expiry` if that is
    /// `Some` (the header's expiry-slot bit is set to match); returns its
    /// offset, or `None` if the arena would pass [`MAX_ARENA_BYTES`].
    pub(super) fn append(
        &mut self,
        header: KeyHeader,
        expiry: Option<u64>,
        key: &[u8],
    ) -> Option<u32> {
        let (prefix, prefix_len) = length_prefix(key.len());
        let slot_len = if expiry.is_some() { EXPIRY_BYTES } else { 0 };
        let at = self.len;
        let end = at + HEADER_BYTES + slot_len + prefix_len + key.len();
        if end > MAX_ARENA_BYTES {
            return None;
        }
        self.reach(end);
        let span = at / SPAN_BYTES;
        while self.span_starts.len() <= span {
            grow_by_an_eighth(&mut self.span_starts);
            self.span_starts.push(NO_ENTRY);
        }
        if self.span_starts[span] == NO_ENTRY {
            self.span_starts[span] = at as u32;
        }
        self.write_header(at, header.with_expiry_slot(expiry.is_some()));
        if let Some(expiry) = expiry {
            self.write_u64(at + HEADER_BYTES, expiry);
        }
        let prefix_at = at + HEADER_BYTES + slot_len;
        self.write(prefix_at, &prefix[..prefix_len]);
        self.write(prefix_at + prefix_len, key);
        self.len = end;
        Some(at as u32)
    }

    pub(super) fn header(&self, at: usize) -> KeyHeader {
        let mut bytes = [0u8; HEADER_BYTES];
        self.read(at, &mut bytes);
        KeyHeader::from_bytes(bytes)
    }

    pub(super) fn write_header(&mut self, at: usize, header: KeyHeader) {
        self.write(at, &header.to_bytes());
    }

    /// The entry that starts at `at`.
    pub(super) fn entry(&self, at: usize) -> Entry {
        let header = self.header(at);
        let code = header.key_code();
        let mut key_at = at + HEADER_BYTES;
        let expiry_at = header.has_expiry_slot().then(|| {
            key_at += EXPIRY_BYTES;
            at + HEADER_BYTES
        });
        let key_len = if code < LONG_KEY_CODE {
            usize::from(code)
        } else {
            let mut len = 0usize;
            let mut shift = 0;
            loop {
                let byte = self.bytes(key_at, 1)[0];
                key_at += 1;
                len |= usize::from(byte & 0x7f) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    break len;
                }
            }
        };
        Entry {
            header,
            expiry_at,
            key_at,
            key_len,
        }
    }

    /// Whether `entry`'s key is `key`.
    pub(super) fn key_eq(&self, entry: &Entry, key: &[u8]) -> bool {
        entry.key_len == key.len() && self.key(entry) == key
    }

    /// The key of `entry`.
    pub(super) fn key(&self, entry: &Entry) -> &[u8] {
        self.bytes(entry.key_at, entry.key_len)
    }

    /// The first entry boundary at or after `at` (the arena's end if none).
    pub(super) fn boundary_at_or_after(&self, at: usize) -> usize {
        if at >= self.len {
            return self.len;
        }
        let span = at / SPAN_BYTES;
        match self.span_starts.get(span).copied() {
            Some(start) if start != NO_ENTRY && (start as usize) <= at => {
                let mut boundary = start as usize;
                while boundary < at {
                    boundary = self.entry(boundary).end();
                }
                boundary
            }
            Some(start) if start != NO_ENTRY => start as usize,
            _ => self.span_starts[span.min(self.span_starts.len())..]
                .iter()
                .find(|&&start| start != NO_ENTRY)
                .map_or(self.len, |&start| start as usize),
        }
    }

    /// Bytes of memory the arena holds: the pages its entries reach (the
    /// reserved address space beyond them is never touched) and its span
    /// starts.
    pub(super) fn memory_bytes(&self) -> usize {
        self.len.next_multiple_of(PAGE_BYTES)
            + self.span_starts.capacity() * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(code: u16, seq: u64) -> KeyHeader {
        KeyHeader::packed(code, &Location::tombstone(seq, 0)).expect("fits")
    }

    #[test]
    fn entries_of_every_key_length_survive_the_mapping_growing_and_moving() {
        let mut arena = Arena::default();
        let mut placed = Vec::new();
        for i in 0..20_000usize {
            let key: Vec<u8> = (0..(i % 300)).map(|b| (b ^ i) as u8).collect();
            let expiry = (i % 3 == 0).then_some(i as u64 * 7);
            let at = arena
                .append(header(key_code(key.len()), i as u64), expiry, &key)
                .expect("room");
            placed.push((at as usize, key, expiry));
        }
        assert!(arena.len() > 2 * FIRST_RESERVE_BYTES, "the mapping grew");
        let mut at = 0;
        for (i, (expected_at, key, expiry)) in placed.iter().enumerate() {
            assert_eq!(at, *expected_at);
            let entry = arena.entry(at);
            assert!(arena.key_eq(&entry, key), "key {i}");
            assert_eq!(entry.header.unpack().seq, i as u64);
            assert_eq!(entry.expiry_at.map(|at| arena.read_u64(at)), *expiry);
            at = entry.end();
        }
        assert_eq!(at, arena.len());
        assert_eq!(
            arena.memory_bytes() - arena.span_starts.capacity() * 4,
            arena.len().next_multiple_of(PAGE_BYTES)
        );
    }

    #[test]
    fn boundaries_are_found_from_any_offset() {
        let mut arena = Arena::default();
        let mut starts = Vec::new();
        for i in 0..2000u64 {
            let key = vec![i as u8; (i % 200) as usize + 1];
            starts.push(
                arena
                    .append(header(key_code(key.len()), i), None, &key)
                    .expect("room") as usize,
            );
        }
        for probe in (0..arena.len() + 10).step_by(37) {
            let expected = starts
                .iter()
                .copied()
                .find(|&start| start >= probe)
                .unwrap_or(arena.len());
            assert_eq!(arena.boundary_at_or_after(probe), expected, "from {probe}");
        }
        assert_eq!(Arena::default().boundary_at_or_after(0), 0);
    }
}
