//! A sorted set: members ordered by score, ties by member bytes, each
//! member once.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use bytes::Bytes;
use hashbrown::HashMap;

use super::codec::{self, Reader};
use super::{DataType, DecodeError, EncodingLimits, collection_bytes, collection_header};

/// A member and its score, ordered as a sorted set orders them: by score
/// (never NaN; -0 equals 0), then by member bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The score.
    pub score: f64,
    /// The member.
    pub member: Bytes,
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| self.member.cmp(&other.member))
    }
}

/// A decoded sorted set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SortedSet {
    order: BTreeSet<Entry>,
    scores: HashMap<Bytes, f64>,
    /// True once the set left the compact encoding (it never returns).
    large: bool,
}

impl SortedSet {
    /// Reads a stored sorted set.
    pub fn decode(stored: Bytes) -> Result<Self, DecodeError> {
        let parts = collection_bytes(stored)?;
        if parts.data_type != DataType::SortedSet {
            return Err(DecodeError::Corrupt("not a sorted set"));
        }
        let mut reader: Reader = parts.elements;
        let mut set = SortedSet {
            large: parts.large,
            scores: HashMap::with_capacity(parts.count),
            ..Self::default()
        };
        for _ in 0..parts.count {
            let member = reader.bytes()?;
            let score = reader.score()?;
            if set.scores.insert(member.clone(), score).is_some() {
                return Err(DecodeError::Corrupt("a member twice"));
            }
            set.order.insert(Entry { score, member });
        }
        reader.finish()?;
        Ok(set)
    }

    /// The stored form, in score order.
    pub fn encode(&self) -> Bytes {
        let bytes: usize = self
            .order
            .iter()
            .map(|e| codec::bytes_len(&e.member) + 8)
            .sum();
        let mut out = collection_header(DataType::SortedSet, self.large, self.order.len(), bytes);
        for entry in &self.order {
            codec::put_bytes(&mut out, &entry.member);
            codec::put_score(&mut out, entry.score);
        }
        Bytes::from(out)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True if the set has no member.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score (never NaN); true if the member is new.
    pub fn insert(&mut self, member: Bytes, score: f64) -> bool {
        debug_assert!(!score.is_nan());
        let new = match self.scores.insert(member.clone(), score) {
            Some(old) => {
                self.order.remove(&Entry {
                    score: old,
                    member: member.clone(),
                });
                false
            }
            None => true,
        };
        self.order.insert(Entry { score, member });
        new
    }

    /// Removes `member`; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove_entry(member) {
            Some((member, score)) => {
                self.order.remove(&Entry { score, member });
                true
            }
            None => false,
        }
    }

    /// Entries from the lowest score up.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Entry> + ExactSizeIterator {
        self.order.iter()
    }

    /// The 0-based rank of `member` from the lowest score.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        let probe = Entry {
            score,
            member: Bytes::copy_from_slice(member),
        };
        Some(self.order.range(..probe).count())
    }

    /// Moves to the large encoding once the set passes `limits` (never
    /// back, as Redis).
    pub fn settle(&mut self, limits: &EncodingLimits) {
        if !self.large
            && (self.order.len() > limits.zset_max_entries
                || self
                    .order
                    .iter()
                    .any(|e| e.member.len() > limits.zset_max_value_bytes))
        {
            self.large = true;
        }
    }

    /// What OBJECT ENCODING answers.
    pub fn encoding_name(&self) -> &'static str {
        if self.large { "skiplist" } else { "listpack" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn members_order_by_score_then_bytes() {
        let mut set = SortedSet::default();
        assert!(set.insert(b("b"), 1.0));
        assert!(set.insert(b("a"), 1.0));
        assert!(set.insert(b("c"), -2.5));
        assert!(!set.insert(b("b"), 0.5));
        let order: Vec<_> = set.iter().map(|e| e.member.clone()).collect();
        assert_eq!(order, vec![b("c"), b("b"), b("a")]);
        assert_eq!(set.rank(b"a"), Some(2));
        assert_eq!(set.rank(b"zz"), None);
        let back = SortedSet::decode(set.encode()).unwrap();
        assert_eq!(back, set);
        assert!(set.remove(b"b"));
        assert_eq!(set.len(), 2);
        assert_eq!(set.score(b"b"), None);
    }
}
