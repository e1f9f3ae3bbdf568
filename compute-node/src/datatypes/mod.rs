//! How Redis's data types are laid out in the values the engine stores.
//!
//! A string is stored as its bytes, unchanged, unless its first byte is
//! [`MARKER`]: then it is stored as `MARKER, 0` followed by its bytes. A
//! collection (hash, list, set, sorted set) is stored as one value under
//! its key:
//!
//! ```text
//! MARKER u8 | type tag u8 (1 hash, 2 list, 3 set, 4 sorted set)
//!           | encoding u8 (0 compact, 1 large: what OBJECT ENCODING names)
//!           | count LEB128 | element*
//! element:  hash: field, value; list and set: member; sorted set: member,
//!           score (f64, little endian, 8 bytes)
//!           each byte string: length LEB128 | bytes
//! ```
//!
//! So every value tells its type from its first two bytes, a collection
//! lives at its key like a string (a write of either replaces the other,
//! the newest sequence number winning as for any key), and every change a
//! command makes to a collection is one put: one unit in storage. A
//! collection is never stored empty: its last element's removal deletes
//! the key, as in Redis.
//!
//! Decoding shares the stored buffer (elements are slices of it, no copy
//! per element) and checks every length against the input: a value that
//! does not parse is a [`DecodeError`], never a panic.

mod codec;
pub mod hash;
pub mod list;
pub mod set;
pub mod zset;

use bytes::Bytes;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use zset::SortedSet;

/// The first byte of every stored value that is not a plain string.
pub const MARKER: u8 = 0xFF;

const TAG_STRING: u8 = 0;
const TAG_HASH: u8 = 1;
const TAG_LIST: u8 = 2;
const TAG_SET: u8 = 3;
const TAG_SORTED_SET: u8 = 4;

/// Bytes before a collection's count: marker, type tag, encoding.
const COLLECTION_HEADER_BYTES: usize = 3;

/// The error Redis answers a command given a key of another type.
pub const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Redis's data types, as TYPE names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// A string.
    String,
    /// A hash of fields to values.
    Hash,
    /// A list.
    List,
    /// A set.
    Set,
    /// A sorted set.
    SortedSet,
}

impl DataType {
    /// The type's name as TYPE answers it and SCAN's TYPE option takes it.
    pub fn name(self) -> &'static str {
        match self {
            DataType::String => "string",
            DataType::Hash => "hash",
            DataType::List => "list",
            DataType::Set => "set",
            DataType::SortedSet => "zset",
        }
    }

    /// The type a stored value holds, from its first two bytes (a value
    /// too short to be a collection is a string).
    pub fn of(stored: &[u8]) -> DataType {
        match stored {
            [MARKER, TAG_HASH, ..] => DataType::Hash,
            [MARKER, TAG_LIST, ..] => DataType::List,
            [MARKER, TAG_SET, ..] => DataType::Set,
            [MARKER, TAG_SORTED_SET, ..] => DataType::SortedSet,
            _ => DataType::String,
        }
    }
}

/// What every collection type offers its commands: its type, its stored
/// form both ways, and whether it is empty (an empty collection is not
/// stored: its key is deleted).
pub trait Collection: Sized {
    /// The type TYPE names.
    const TYPE: DataType;
    /// Reads the stored form.
    fn decode(stored: Bytes) -> Result<Self, DecodeError>;
    /// The stored form.
    fn encode(&self) -> Bytes;
    /// True if it has no element.
    fn is_empty(&self) -> bool;
    /// Number of elements.
    fn len(&self) -> usize;
    /// Removes the element (field, member) named `name`; true if it was
    /// there. Lists have no names: nothing is removed.
    fn remove_named(&mut self, name: &[u8]) -> bool;
}

macro_rules! collection {
    ($type:ty, $tag:expr, $remove:expr) => {
        impl Collection for $type {
            const TYPE: DataType = $tag;
            fn decode(stored: Bytes) -> Result<Self, DecodeError> {
                <$type>::decode(stored)
            }
            fn encode(&self) -> Bytes {
                <$type>::encode(self)
            }
            fn is_empty(&self) -> bool {
                <$type>::is_empty(self)
            }
            fn len(&self) -> usize {
                <$type>::len(self)
            }
            fn remove_named(&mut self, name: &[u8]) -> bool {
                $remove(self, name)
            }
        }
    };
}

collection!(Hash, DataType::Hash, Hash::remove);
collection!(List, DataType::List, |_: &mut List, _: &[u8]| false);
collection!(Set, DataType::Set, Set::remove);
collection!(SortedSet, DataType::SortedSet, SortedSet::remove);

/// Why a stored value could not be read as the type it claims.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A length or count runs past the value's end, or a field is invalid.
    #[error("stored value is corrupt: {0}")]
    Corrupt(&'static str),
}

/// The value to store for the string `value`: the same bytes, shared,
/// unless its first byte is [`MARKER`] (then one copy with `MARKER, 0`
/// in front).
pub fn stored_string(value: Bytes) -> Bytes {
    if value.first() != Some(&MARKER) {
        return value;
    }
    let mut escaped = Vec::with_capacity(value.len() + 2);
    escaped.extend_from_slice(&[MARKER, TAG_STRING]);
    escaped.extend_from_slice(&value);
    Bytes::from(escaped)
}

/// The string a stored value holds (a slice of it, no copy), or `None` if
/// it holds a collection.
pub fn string_of(stored: Bytes) -> Option<Bytes> {
    match stored[..] {
        [MARKER, TAG_STRING, ..] => Some(stored.slice(2..)),
        [MARKER, TAG_HASH..=TAG_SORTED_SET, ..] => None,
        _ => Some(stored),
    }
}

/// The string a stored value holds, borrowed, or `None` for a collection.
pub fn string_slice(stored: &[u8]) -> Option<&[u8]> {
    match stored {
        [MARKER, TAG_STRING, rest @ ..] => Some(rest),
        [MARKER, TAG_HASH..=TAG_SORTED_SET, ..] => None,
        _ => Some(stored),
    }
}

/// The integer `text` spells in canonical form (as Redis's `string2ll`
/// accepts: optional `-`, no leading zeros, no `+`, within `i64`).
pub fn parse_integer(text: &[u8]) -> Option<i64> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty()
        || digits.len() > 20
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
        || text == b"-0"
    {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// The size thresholds at which a collection leaves its compact encoding
/// (Redis's `*-max-listpack-*` and `set-max-intset-entries` settings),
/// which decide what OBJECT ENCODING answers and the order small sets
/// reply in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries`.
    pub hash_max_entries: usize,
    /// `hash-max-listpack-value` (bytes).
    pub hash_max_value_bytes: usize,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// `zset-max-listpack-entries`.
    pub zset_max_entries: usize,
    /// `zset-max-listpack-value` (bytes).
    pub zset_max_value_bytes: usize,
    /// `list-max-listpack-size`: a positive count of entries, or -1..=-5
    /// for 4, 8, 16, 32 or 64 KiB.
    pub list_max_listpack_size: i64,
}

impl Default for EncodingLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        Self {
            hash_max_entries: 512,
            hash_max_value_bytes: 64,
            set_max_intset_entries: 512,
            zset_max_entries: 128,
            zset_max_value_bytes: 64,
            list_max_listpack_size: -2,
        }
    }
}

/// The type tag, encoding byte and element bytes of a stored collection.
pub(crate) struct CollectionBytes {
    pub(crate) data_type: DataType,
    pub(crate) large: bool,
    pub(crate) count: usize,
    pub(crate) elements: codec::Reader,
}

/// Splits a stored collection into its header and its elements.
pub(crate) fn collection_bytes(stored: Bytes) -> Result<CollectionBytes, DecodeError> {
    if stored.len() < COLLECTION_HEADER_BYTES || stored[0] != MARKER {
        return Err(DecodeError::Corrupt("not a collection"));
    }
    let data_type = DataType::of(&stored);
    if data_type == DataType::String {
        return Err(DecodeError::Corrupt("not a collection"));
    }
    let large = match stored[2] {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::Corrupt("unknown encoding")),
    };
    let mut elements = codec::Reader::new(stored.slice(COLLECTION_HEADER_BYTES..));
    let count = elements.count()?;
    Ok(CollectionBytes {
        data_type,
        large,
        count,
        elements,
    })
}

/// Starts the stored form of a collection: header and count.
fn collection_header(data_type: DataType, large: bool, count: usize, capacity: usize) -> Vec<u8> {
    let tag = match data_type {
        DataType::String => TAG_STRING,
        DataType::Hash => TAG_HASH,
        DataType::List => TAG_LIST,
        DataType::Set => TAG_SET,
        DataType::SortedSet => TAG_SORTED_SET,
    };
    let mut out = Vec::with_capacity(COLLECTION_HEADER_BYTES + 10 + capacity);
    out.extend_from_slice(&[MARKER, tag, u8::from(large)]);
    codec::put_len(&mut out, count);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers_are_redis_s() {
        assert_eq!(parse_integer(b"12"), Some(12));
        assert_eq!(parse_integer(b"-7"), Some(-7));
        assert_eq!(parse_integer(b"0"), Some(0));
        for not in [
            &b"012"[..],
            b"+1",
            b"-0",
            b"",
            b"-",
            b"1.0",
            b" 1",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_integer(not), None, "{not:?}");
        }
    }

    #[test]
    fn strings_keep_their_bytes_unless_they_start_with_the_marker() {
        let plain = Bytes::from_static(b"hello");
        assert_eq!(stored_string(plain.clone()), plain);
        assert_eq!(string_of(plain.clone()), Some(plain));
        let marked = Bytes::from_static(&[MARKER, 1, 2]);
        let stored = stored_string(marked.clone());
        assert_eq!(&stored[..], &[MARKER, 0, MARKER, 1, 2]);
        assert_eq!(DataType::of(&stored), DataType::String);
        assert_eq!(string_of(stored.clone()), Some(marked.clone()));
        assert_eq!(string_slice(&stored), Some(&marked[..]));
        assert_eq!(string_of(Bytes::new()), Some(Bytes::new()));
        assert_eq!(
            string_of(Bytes::from_static(&[MARKER])).as_deref(),
            Some(&[MARKER][..])
        );
    }

    #[test]
    fn collections_are_not_strings() {
        let mut hash = Hash::default();
        hash.set(Bytes::from_static(b"f"), Bytes::from_static(b"v"));
        let stored = hash.encode();
        assert_eq!(DataType::of(&stored), DataType::Hash);
        assert_eq!(string_of(stored.clone()), None);
        assert_eq!(Hash::decode(stored).map(|h| h.len()), Ok(1));
    }

    #[test]
    fn truncated_collections_are_errors_not_panics() {
        let mut set = Set::default();
        for member in [&b"a"[..], b"bb", b"ccc"] {
            set.add(Bytes::copy_from_slice(member), &EncodingLimits::default());
        }
        let stored = set.encode();
        for end in 0..stored.len() {
            let cut = stored.slice(..end);
            if DataType::of(&cut) == DataType::Set {
                assert!(Set::decode(cut).is_err(), "cut at {end}");
            }
        }
        assert_eq!(Set::decode(stored).map(|s| s.len()), Ok(3));
    }
}
