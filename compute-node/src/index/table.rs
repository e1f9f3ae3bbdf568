//! The memory of a shard's open-addressing table: a `u32` arena offset per
//! slot, then one control byte per slot and a copy of the first
//! [`GROUP`] control bytes, in one allocation.
//!
//! A shard's table is replaced by one an eighth larger each time it grows,
//! so a growing index frees a stream of tables of every size. On the heap
//! those stay as holes in the process (a 1 Mi-key index built without
//! [`super::Index::reserve`] was measured 1.7 bytes per key above its own
//! accounting once its arenas had left the heap, and 1 byte per key when
//! only tables under a page were left there). Every table that has slots
//! is therefore an anonymous mapping of its own, unmapped when it is
//! dropped, and it takes as many slots as its whole pages hold: the
//! rounding costs nothing that is not counted, and a small shard grows less
//! often. An index of a few keys costs a page per shard for it.

use memmap2::MmapMut;

use super::arena::PAGE_BYTES;

/// Control bytes compared at once (the table keeps a copy of its first
/// group after its end, so that a group read never wraps).
pub(super) const GROUP: usize = 8;
/// Control byte of an unused slot (full slots hold tags below 0x80).
pub(super) const EMPTY: u8 = 0x80;

/// Slots and control bytes of one table.
pub(super) struct Table {
    capacity: usize,
    words: Words,
}

/// `capacity` slot words, then the control bytes packed four to a word.
enum Words {
    Heap(Box<[u32]>),
    Mapped(MmapMut),
}

impl Default for Table {
    /// A table of no slots (its control bytes still hold one empty group).
    fn default() -> Self {
        Self::new(0)
    }
}

impl Table {
    /// A table of at least `capacity` slots (see [`Table::granted`]),
    /// every one empty.
    pub(super) fn new(capacity: usize) -> Self {
        let granted = Self::granted(capacity);
        // A refused mapping (no address space left) falls back to the heap,
        // which then fails the way any allocation does.
        let mapped = (capacity > 0)
            .then(|| MmapMut::map_anon(words_for(granted) * 4).ok())
            .flatten();
        let (capacity, words) = match mapped {
            Some(map) => {
                // Its pages are all touched at once; huge pages would only
                // round them up. A refusal costs nothing else.
                let _ = map.advise(memmap2::Advice::NoHugePage);
                (granted, Words::Mapped(map))
            }
            None => (
                capacity,
                Words::Heap(vec![0u32; words_for(capacity)].into_boxed_slice()),
            ),
        };
        let mut table = Self { capacity, words };
        table.parts_mut().0.fill(EMPTY);
        table
    }

    /// The slots a table asked for `capacity` gets: as many as the whole
    /// pages of its mapping hold (0 for 0).
    pub(super) fn granted(capacity: usize) -> usize {
        if capacity == 0 {
            return 0;
        }
        let words = (words_for(capacity) * 4).next_multiple_of(PAGE_BYTES) / 4;
        let mut granted = (words * 4 - GROUP) / 5;
        while words_for(granted) > words {
            granted -= 1;
        }
        granted
    }

    /// Number of slots.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    fn bytes(&self) -> &[u8] {
        match &self.words {
            Words::Heap(words) => {
                // SAFETY: the words' memory read as bytes (any alignment
                // suits `u8`, every bit pattern is a `u8`).
                unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 4) }
            }
            Words::Mapped(map) => map,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.words {
            Words::Heap(words) => {
                // SAFETY: as in `bytes`; `&mut self` makes the borrow unique.
                unsafe {
                    std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 4)
                }
            }
            Words::Mapped(map) => map,
        }
    }

    /// The `capacity + GROUP` control bytes.
    pub(super) fn ctrl(&self) -> &[u8] {
        let start = self.capacity * 4;
        &self.bytes()[start..start + self.capacity + GROUP]
    }

    /// The arena offset in each slot (meaningful where the slot is full).
    pub(super) fn slots(&self) -> &[u32] {
        let bytes = &self.bytes()[..self.capacity * 4];
        // SAFETY: heap words and mappings (page-aligned) are aligned for
        // `u32`; the range holds `capacity` of them.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u32>(), self.capacity) }
    }

    /// The control bytes and the slots, to change both.
    pub(super) fn parts_mut(&mut self) -> (&mut [u8], &mut [u32]) {
        let capacity = self.capacity;
        let (slot_bytes, rest) = self.bytes_mut().split_at_mut(capacity * 4);
        // SAFETY: as in `slots`, and the two halves do not overlap.
        let slots = unsafe {
            std::slice::from_raw_parts_mut(slot_bytes.as_mut_ptr().cast::<u32>(), capacity)
        };
        (&mut rest[..capacity + GROUP], slots)
    }

    /// Bytes this table holds (a mapping's rounded up to whole pages).
    pub(super) fn memory_bytes(&self) -> usize {
        match &self.words {
            Words::Heap(words) => words.len() * 4,
            Words::Mapped(map) => map.len().next_multiple_of(PAGE_BYTES),
        }
    }
}

/// Words of a table of `capacity` slots.
fn words_for(capacity: usize) -> usize {
    capacity + (capacity + GROUP).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_control_bytes_of_heap_and_mapped_tables_are_apart() {
        for asked in [0, 1, 16, 100, 1000, 5000] {
            let mut table = Table::new(asked);
            let capacity = table.capacity();
            assert_eq!(capacity, Table::granted(asked));
            assert!(capacity >= asked);
            assert!(table.ctrl().iter().all(|&c| c == EMPTY));
            assert_eq!(table.ctrl().len(), capacity + GROUP);
            assert_eq!(table.slots().len(), capacity);
            let (ctrl, slots) = table.parts_mut();
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = u32::MAX - i as u32;
            }
            for (i, c) in ctrl.iter_mut().enumerate() {
                *c = (i % 128) as u8;
            }
            assert!(
                table
                    .slots()
                    .iter()
                    .enumerate()
                    .all(|(i, &s)| s == u32::MAX - i as u32)
            );
            assert!(
                table
                    .ctrl()
                    .iter()
                    .enumerate()
                    .all(|(i, &c)| c == (i % 128) as u8)
            );
            assert!(table.memory_bytes() >= capacity * 5 + GROUP);
            if asked > 0 {
                assert!(matches!(table.words, Words::Mapped(_)));
                assert!(
                    table.memory_bytes() < (capacity + 1) * 5 + GROUP + 4,
                    "{asked}: the whole pages are slots"
                );
            }
        }
        assert!(matches!(Table::default().words, Words::Heap(_)));
    }
}
