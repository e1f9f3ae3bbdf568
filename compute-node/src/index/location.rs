//! [`Location`] and its packed 16-byte form, the header of every index
//! entry.
//!
//! Packed header (a little-endian `u128`):
//!
//! ```text
//! bits   0..11   key-length code: 0..=2046 is the key length, 2047 means
//!                a LEB128 length follows the header (and the expiry slot)
//! bit   11       wide: the location does not fit the packed fields and
//!                lives in its shard's side table (bits 64..96 index it)
//! bits  12..18   partition            (6 bits:  partitions 0..=63)
//! bits  18..42   record length        (24 bits: records up to 16 MiB - 1)
//! bits  42..82   value-log offset     (40 bits: offsets up to 1 TiB - 1)
//! bits  82..127  sequence number      (45 bits: seqs up to 2^45 - 1)
//! bit   127      expiry slot: the entry carries 8 more bytes right after
//!                the header, its expiry (`u64` LE Unix ms, 0 = none)
//! ```
//!
//! A wide header keeps only the key-length code, the wide bit, the side
//! table index (bits 64..96) and the expiry-slot bit:
//!
//! ```text
//! bits   0..11   key-length code
//! bit   11       wide (set)
//! bits  64..96   side-table index (u32::MAX: a dead entry, see below)
//! bit   127      expiry slot
//! ```
//!
//! A location whose fields exceed those widths is stored whole (wide), so
//! no field is ever truncated and ordering by seq stays exact (a record of
//! 16 MiB or more costs its key a 24-byte side entry, small next to the
//! record): the packed form holds the full seq whenever it fits 45 bits,
//! and the wide form holds the full `u64`.
//!
//! The expiry is never packed into the header nor kept in the side table:
//! it lives in the entry's expiry slot, which only entries that were given
//! an expiry have (a key without one costs nothing for it). The slot is
//! independent of packed/wide.
//!
//! A **dead** header marks the old copy of an entry that was moved to the
//! end of its arena (to gain an expiry slot): it keeps its key-length code
//! and expiry-slot bit, so the arena still parses, and is wide with side
//! index `u32::MAX`, which no live entry uses (an arena of at most 4 GiB
//! holds fewer than 2^28 entries).

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
    /// Absolute Unix time in milliseconds at which this version expires
    /// (Redis TTLs), 0 if it never does. The index stores and returns it
    /// as given (tombstones included) and counts it as an expiry only for
    /// live keys; it never hides an expired key itself (callers compare it
    /// with their clock).
    pub expire_at_ms: u64,
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
            expire_at_ms: 0,
        }
    }

    /// The expiry of a live key (`None` for a tombstone or a key that never
    /// expires): what the index counts as an expiring key.
    pub(super) fn live_expiry(&self) -> Option<u64> {
        (!self.is_tombstone() && self.expire_at_ms != 0).then_some(self.expire_at_ms)
    }

    /// True if `self` and `other` name the same version at the same place
    /// (partition, offset and seq), whatever their lengths and expiries.
    pub fn same_place(&self, other: &Location) -> bool {
        self.partition == other.partition && self.offset == other.offset && self.seq == other.seq
    }
}

/// Bytes of a packed header.
pub(super) const HEADER_BYTES: usize = 16;
/// Widest key-length code: keys this long or longer carry a LEB128 length
/// (every key up to 2 KiB - 2 bytes has its length in the header).
pub(super) const LONG_KEY_CODE: u16 = 2047;

/// Bytes of an expiry slot.
pub(super) const EXPIRY_BYTES: usize = 8;

const KEY_CODE_MASK: u128 = 0x7ff;
const WIDE_BIT: u128 = 1 << 11;
const EXPIRY_SLOT_BIT: u128 = 1 << 127;
/// Side-table index of a dead entry.
const DEAD_INDEX: u32 = u32::MAX;
const PARTITION_SHIFT: u32 = 12;
const PARTITION_BITS: u32 = 6;
const LEN_SHIFT: u32 = 18;
const LEN_BITS: u32 = 24;
const OFFSET_SHIFT: u32 = 42;
const OFFSET_BITS: u32 = 40;
const SEQ_SHIFT: u32 = 82;
const SEQ_BITS: u32 = 45;
const WIDE_INDEX_SHIFT: u32 = 64;

/// Largest partition the packed form holds.
pub const PACKED_MAX_PARTITION: u16 = (1 << PARTITION_BITS) - 1;
/// Largest record length the packed form holds.
pub const PACKED_MAX_LEN: u32 = (1 << LEN_BITS) - 1;
/// Largest value-log offset the packed form holds.
pub const PACKED_MAX_OFFSET: u64 = (1 << OFFSET_BITS) - 1;
/// Largest sequence number the packed form holds.
pub const PACKED_MAX_SEQ: u64 = (1 << SEQ_BITS) - 1;

fn mask(bits: u32) -> u128 {
    (1u128 << bits) - 1
}

/// A location as the side table keeps it: whole, but without its expiry
/// (which lives in the entry's expiry slot), so a wide key without an
/// expiry costs no more than before expiries existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WideLocation {
    seq: u64,
    offset: u64,
    len: u32,
    partition: u16,
}

const _: () = assert!(std::mem::size_of::<WideLocation>() == 24);

impl WideLocation {
    pub(super) fn of(location: &Location) -> Self {
        Self {
            seq: location.seq,
            offset: location.offset,
            len: location.len,
            partition: location.partition,
        }
    }

    /// The location, with expiry `expire_at_ms`.
    pub(super) fn with_expiry(self, expire_at_ms: u64) -> Location {
        Location {
            seq: self.seq,
            offset: self.offset,
            len: self.len,
            partition: self.partition,
            expire_at_ms,
        }
    }
}

/// A packed header: key-length code, expiry-slot bit, and a packed or wide
/// location (or the dead mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyHeader(pub(super) u128);

impl KeyHeader {
    /// The header of a key with length code `key_code` at `location`, or
    /// `None` if `location` does not fit the packed fields. The expiry is
    /// not part of it (see [`KeyHeader::with_expiry_slot`]), nor is the
    /// expiry-slot bit set.
    pub(super) fn packed(key_code: u16, location: &Location) -> Option<KeyHeader> {
        debug_assert!(u128::from(key_code) <= KEY_CODE_MASK, "a key-length code");
        if location.partition > PACKED_MAX_PARTITION
            || location.len > PACKED_MAX_LEN
            || location.offset > PACKED_MAX_OFFSET
            || location.seq > PACKED_MAX_SEQ
        {
            return None;
        }
        Some(KeyHeader(
            u128::from(key_code)
                | (u128::from(location.partition) << PARTITION_SHIFT)
                | (u128::from(location.len) << LEN_SHIFT)
                | (u128::from(location.offset) << OFFSET_SHIFT)
                | (u128::from(location.seq) << SEQ_SHIFT),
        ))
    }

    /// The header of a key with length code `key_code` whose location is
    /// entry `index` of its shard's side table.
    pub(super) fn wide(key_code: u16, index: u32) -> KeyHeader {
        debug_assert!(u128::from(key_code) <= KEY_CODE_MASK, "a key-length code");
        debug_assert_ne!(index, DEAD_INDEX, "the dead mark is no side-table index");
        KeyHeader(u128::from(key_code) | WIDE_BIT | (u128::from(index) << WIDE_INDEX_SHIFT))
    }

    /// The dead mark for an entry whose header was `self`: same key-length
    /// code and expiry-slot bit (so the entry's size still parses), wide,
    /// side-table index [`DEAD_INDEX`].
    pub(super) fn dead(self) -> KeyHeader {
        KeyHeader(
            (self.0 & (KEY_CODE_MASK | EXPIRY_SLOT_BIT))
                | WIDE_BIT
                | (u128::from(DEAD_INDEX) << WIDE_INDEX_SHIFT),
        )
    }

    /// `self` with the expiry-slot bit set if `slot`, cleared otherwise.
    pub(super) fn with_expiry_slot(self, slot: bool) -> KeyHeader {
        if slot {
            KeyHeader(self.0 | EXPIRY_SLOT_BIT)
        } else {
            KeyHeader(self.0 & !EXPIRY_SLOT_BIT)
        }
    }

    /// True if the entry carries an expiry slot after its header.
    pub(super) fn has_expiry_slot(self) -> bool {
        self.0 & EXPIRY_SLOT_BIT != 0
    }

    pub(super) fn key_code(self) -> u16 {
        (self.0 & KEY_CODE_MASK) as u16
    }

    /// True if this is the dead mark of an entry that was moved.
    pub(super) fn is_dead(self) -> bool {
        self.raw_wide_index() == Some(DEAD_INDEX)
    }

    fn raw_wide_index(self) -> Option<u32> {
        (self.0 & WIDE_BIT != 0).then_some((self.0 >> WIDE_INDEX_SHIFT) as u32)
    }

    /// The side-table index if the location is stored whole (`None` for a
    /// packed or a dead header).
    pub(super) fn wide_index(self) -> Option<u32> {
        self.raw_wide_index().filter(|&index| index != DEAD_INDEX)
    }

    /// The packed location, expiry 0 (meaningless for a wide or dead
    /// header).
    pub(super) fn unpack(self) -> Location {
        let w = self.0;
        Location {
            partition: ((w >> PARTITION_SHIFT) & mask(PARTITION_BITS)) as u16,
            len: ((w >> LEN_SHIFT) & mask(LEN_BITS)) as u32,
            offset: ((w >> OFFSET_SHIFT) & mask(OFFSET_BITS)) as u64,
            seq: ((w >> SEQ_SHIFT) & mask(SEQ_BITS)) as u64,
            expire_at_ms: 0,
        }
    }

    pub(super) fn to_bytes(self) -> [u8; HEADER_BYTES] {
        self.0.to_le_bytes()
    }

    pub(super) fn from_bytes(bytes: [u8; HEADER_BYTES]) -> KeyHeader {
        KeyHeader(u128::from_le_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widest_packed_fields_survive_a_round_trip() {
        let widest = Location {
            seq: PACKED_MAX_SEQ,
            offset: PACKED_MAX_OFFSET,
            len: PACKED_MAX_LEN,
            partition: PACKED_MAX_PARTITION,
            expire_at_ms: 0,
        };
        let header = KeyHeader::packed(LONG_KEY_CODE, &widest).expect("fits");
        assert!(
            !header.has_expiry_slot(),
            "the seq stays below the slot bit"
        );
        let header = KeyHeader::from_bytes(header.to_bytes());
        assert_eq!(header.unpack(), widest);
        assert_eq!(header.key_code(), LONG_KEY_CODE);
        assert_eq!(header.wide_index(), None);
        let slotted = header.with_expiry_slot(true);
        assert!(slotted.has_expiry_slot());
        assert_eq!(slotted.unpack(), widest, "the slot bit is no seq bit");
        assert_eq!(slotted.with_expiry_slot(false), header);
    }

    #[test]
    fn the_expiry_is_not_packed() {
        let location = Location {
            seq: 9,
            offset: 8,
            len: 7,
            partition: 6,
            expire_at_ms: u64::MAX,
        };
        let header = KeyHeader::packed(3, &location).expect("fits");
        assert!(!header.has_expiry_slot());
        assert_eq!(
            header.unpack(),
            Location {
                expire_at_ms: 0,
                ..location
            }
        );
        let wide = WideLocation::of(&location);
        assert_eq!(wide.with_expiry(5).expire_at_ms, 5);
        assert_eq!(wide.with_expiry(location.expire_at_ms), location);
    }

    #[test]
    fn a_dead_header_keeps_what_parsing_needs() {
        for header in [
            KeyHeader::packed(LONG_KEY_CODE, &Location::tombstone(PACKED_MAX_SEQ, 3))
                .expect("fits"),
            KeyHeader::wide(17, 4).with_expiry_slot(true),
            KeyHeader::packed(0, &Location::tombstone(1, 0))
                .expect("fits")
                .with_expiry_slot(true),
        ] {
            let dead = header.dead();
            assert!(dead.is_dead() && !header.is_dead());
            assert_eq!(dead.key_code(), header.key_code());
            assert_eq!(dead.has_expiry_slot(), header.has_expiry_slot());
            assert_eq!(dead.wide_index(), None);
        }
    }

    #[test]
    fn a_field_one_past_its_width_is_not_packed() {
        let base = Location {
            seq: 1,
            offset: 2,
            len: 3,
            partition: 4,
            expire_at_ms: 5,
        };
        for too_wide in [
            Location {
                seq: PACKED_MAX_SEQ + 1,
                ..base
            },
            Location {
                offset: PACKED_MAX_OFFSET + 1,
                ..base
            },
            Location {
                len: PACKED_MAX_LEN + 1,
                ..base
            },
            Location {
                partition: PACKED_MAX_PARTITION + 1,
                ..base
            },
        ] {
            assert_eq!(KeyHeader::packed(0, &too_wide), None, "{too_wide:?}");
        }
        let wide = KeyHeader::wide(5, u32::MAX - 1);
        assert_eq!(wide.wide_index(), Some(u32::MAX - 1));
        assert_eq!(wide.key_code(), 5);
        assert!(!wide.is_dead());
    }
}
