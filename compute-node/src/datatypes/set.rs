//! A set: members in the order Redis replies with them where that order is
//! defined (ascending integers while the set is an intset), else in
//! insertion order.

use bytes::Bytes;
use indexmap::IndexSet;

use super::codec::{self, Reader};
use super::{
    DataType, DecodeError, EncodingLimits, collection_bytes, collection_header, parse_integer,
};

/// A decoded set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Set {
    members: IndexSet<Bytes, hashbrown::DefaultHashBuilder>,
    /// True once the set left the intset encoding (it never returns).
    large: bool,
}

impl Set {
    /// Reads a stored set.
    pub fn decode(stored: Bytes) -> Result<Self, DecodeError> {
        let parts = collection_bytes(stored)?;
        if parts.data_type != DataType::Set {
            return Err(DecodeError::Corrupt("not a set"));
        }
        let mut reader: Reader = parts.elements;
        let mut members = IndexSet::with_capacity_and_hasher(parts.count, Default::default());
        for _ in 0..parts.count {
            members.insert(reader.bytes()?);
        }
        reader.finish()?;
        Ok(Self {
            members,
            large: parts.large,
        })
    }

    /// The stored form.
    pub fn encode(&self) -> Bytes {
        let bytes: usize = self.members.iter().map(|m| codec::bytes_len(m)).sum();
        let mut out = collection_header(DataType::Set, self.large, self.members.len(), bytes);
        for member in &self.members {
            codec::put_bytes(&mut out, member);
        }
        Bytes::from(out)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True if the set has no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// True if `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Adds `member`; true if it is new. An intset stays sorted, and
    /// becomes a hashtable when `member` is not an integer or the set
    /// passes `limits.set_max_intset_entries`.
    pub fn add(&mut self, member: Bytes, limits: &EncodingLimits) -> bool {
        if self.members.contains(&member) {
            return false;
        }
        if !self.large {
            match parse_integer(&member) {
                Some(value) if self.members.len() < limits.set_max_intset_entries => {
                    let at = self.members.partition_point(|m| {
                        parse_integer(m).is_some_and(|existing| existing < value)
                    });
                    self.members.shift_insert(at, member);
                    return true;
                }
                _ => self.large = true,
            }
        }
        self.members.insert(member)
    }

    /// Removes `member`; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.members.shift_remove(member)
    }

    /// Removes and returns the member at `index` (reply order).
    pub fn remove_index(&mut self, index: usize) -> Option<Bytes> {
        self.members.shift_remove_index(index)
    }

    /// Members in reply order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Bytes> {
        self.members.iter()
    }

    /// The member at `index` in reply order.
    pub fn get_index(&self, index: usize) -> Option<&Bytes> {
        self.members.get_index(index)
    }

    /// What OBJECT ENCODING answers.
    pub fn encoding_name(&self) -> &'static str {
        if self.large { "hashtable" } else { "intset" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn an_intset_replies_sorted_until_it_holds_a_string() {
        let limits = EncodingLimits::default();
        let mut set = Set::default();
        for member in ["5", "-3", "10", "5"] {
            set.add(b(member), &limits);
        }
        let order: Vec<_> = set.iter().cloned().collect();
        assert_eq!(order, vec![b("-3"), b("5"), b("10")]);
        assert_eq!(set.encoding_name(), "intset");
        set.add(b("x"), &limits);
        assert_eq!(set.encoding_name(), "hashtable");
        set.add(b("1"), &limits);
        let back = Set::decode(set.encode()).unwrap();
        let order: Vec<_> = back.iter().cloned().collect();
        assert_eq!(order, vec![b("-3"), b("5"), b("10"), b("x"), b("1")]);
    }

    #[test]
    fn an_intset_past_its_limit_becomes_a_hashtable() {
        let limits = EncodingLimits {
            set_max_intset_entries: 2,
            ..EncodingLimits::default()
        };
        let mut set = Set::default();
        for member in ["1", "2", "3"] {
            set.add(b(member), &limits);
        }
        assert_eq!(set.encoding_name(), "hashtable");
        assert!(set.remove(b"2"));
        assert_eq!(set.len(), 2);
    }
}
