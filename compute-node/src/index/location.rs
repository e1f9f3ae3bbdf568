//! [`Location`] and its packed 16-byte form, the header of every index
//! entry.
//!
//! Packed header (a little-endian `u128`):
//!
//! ```text
//! bits   0..7    key-length code: 0..=126 is the key length, 127 means a
//!                LEB128 length follows the header
//! bit    7       wide: the location does not fit the packed fields and
//!                lives in its shard's side table (bits 64..96 index it)
//! bits   8..16   partition            (8 bits:  partitions 0..=255)
//! bits  16..40   record length        (24 bits: records up to 16 MiB - 1)
//! bits  40..80   value-log offset     (40 bits: offsets up to 1 TiB - 1)
//! bits  80..128  sequence number      (48 bits: seqs up to 2^48 - 1)
//! ```
//!
//! A location whose fields exceed those widths is stored whole (wide), so
//! no field is ever truncated and ordering by seq stays exact (a record of
//! 16 MiB or more costs its key a 24-byte side entry, small next to the
//! record): the packed
//! form holds the full seq whenever it fits 48 bits, and the wide form holds
//! the full `u64`.

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

    /// True if `self` and `other` name the same version at the same place
    /// (partition, offset and seq), whatever their lengths.
    pub fn same_place(&self, other: &Location) -> bool {
        self.partition == other.partition && self.offset == other.offset && self.seq == other.seq
    }
}

/// Bytes of a packed header.
pub(super) const HEADER_BYTES: usize = 16;
/// Widest key-length code: keys this long or longer carry a LEB128 length.
pub(super) const LONG_KEY_CODE: u8 = 127;

const KEY_CODE_MASK: u128 = 0x7f;
const WIDE_BIT: u128 = 1 << 7;
const PARTITION_SHIFT: u32 = 8;
const PARTITION_BITS: u32 = 8;
const LEN_SHIFT: u32 = 16;
const LEN_BITS: u32 = 24;
const OFFSET_SHIFT: u32 = 40;
const OFFSET_BITS: u32 = 40;
const SEQ_SHIFT: u32 = 80;
const SEQ_BITS: u32 = 48;
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

/// A packed header: key-length code plus a packed or wide location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header(pub(super) u128);

impl Header {
    /// The header of a key with length code `key_code` at `location`, or
    /// `None` if `location` does not fit the packed fields.
    pub(super) fn packed(key_code: u8, location: &Location) -> Option<Header> {
        if location.partition > PACKED_MAX_PARTITION
            || location.len > PACKED_MAX_LEN
            || location.offset > PACKED_MAX_OFFSET
            || location.seq > PACKED_MAX_SEQ
        {
            return None;
        }
        Some(Header(
            u128::from(key_code)
                | (u128::from(location.partition) << PARTITION_SHIFT)
                | (u128::from(location.len) << LEN_SHIFT)
                | (u128::from(location.offset) << OFFSET_SHIFT)
                | (u128::from(location.seq) << SEQ_SHIFT),
        ))
    }

    /// The header of a key with length code `key_code` whose location is
    /// entry `index` of its shard's side table.
    pub(super) fn wide(key_code: u8, index: u32) -> Header {
        Header(u128::from(key_code) | WIDE_BIT | (u128::from(index) << WIDE_INDEX_SHIFT))
    }

    pub(super) fn key_code(self) -> u8 {
        (self.0 & KEY_CODE_MASK) as u8
    }

    /// The side-table index if the location is stored whole.
    pub(super) fn wide_index(self) -> Option<u32> {
        (self.0 & WIDE_BIT != 0).then_some((self.0 >> WIDE_INDEX_SHIFT) as u32)
    }

    /// The packed location (meaningless for a wide header).
    pub(super) fn unpack(self) -> Location {
        let w = self.0;
        Location {
            partition: ((w >> PARTITION_SHIFT) & mask(PARTITION_BITS)) as u16,
            len: ((w >> LEN_SHIFT) & mask(LEN_BITS)) as u32,
            offset: ((w >> OFFSET_SHIFT) & mask(OFFSET_BITS)) as u64,
            seq: ((w >> SEQ_SHIFT) & mask(SEQ_BITS)) as u64,
        }
    }

    pub(super) fn to_bytes(self) -> [u8; HEADER_BYTES] {
        self.0.to_le_bytes()
    }

    pub(super) fn from_bytes(bytes: [u8; HEADER_BYTES]) -> Header {
        Header(u128::from_le_bytes(bytes))
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
        };
        let header = Header::packed(LONG_KEY_CODE, &widest).expect("fits");
        let header = Header::from_bytes(header.to_bytes());
        assert_eq!(header.unpack(), widest);
        assert_eq!(header.key_code(), LONG_KEY_CODE);
        assert_eq!(header.wide_index(), None);
    }

    #[test]
    fn a_field_one_past_its_width_is_not_packed() {
        let base = Location {
            seq: 1,
            offset: 2,
            len: 3,
            partition: 4,
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
            assert_eq!(Header::packed(0, &too_wide), None, "{too_wide:?}");
        }
        let wide = Header::wide(5, u32::MAX);
        assert_eq!(wide.wide_index(), Some(u32::MAX));
        assert_eq!(wide.key_code(), 5);
    }
}
