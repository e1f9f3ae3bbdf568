//! A hash: fields and their values, in insertion order (the order Redis's
//! compact listpack encoding keeps and replies in; a field's update keeps
//! its place, a removal closes the gap).

use bytes::Bytes;
use indexmap::IndexMap;

use super::codec::{self, Reader};
use super::{DataType, DecodeError, EncodingLimits, collection_bytes, collection_header};

/// A decoded hash.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hash {
    fields: IndexMap<Bytes, Bytes, hashbrown::DefaultHashBuilder>,
    /// True once the hash left the compact encoding (it never returns).
    large: bool,
}

impl Hash {
    /// Reads a stored hash.
    pub fn decode(stored: Bytes) -> Result<Self, DecodeError> {
        let parts = collection_bytes(stored)?;
        if parts.data_type != DataType::Hash {
            return Err(DecodeError::Corrupt("not a hash"));
        }
        let mut reader: Reader = parts.elements;
        let mut fields = IndexMap::with_capacity_and_hasher(parts.count, Default::default());
        for _ in 0..parts.count {
            let field = reader.bytes()?;
            let value = reader.bytes()?;
            fields.insert(field, value);
        }
        reader.finish()?;
        Ok(Self {
            fields,
            large: parts.large,
        })
    }

    /// The stored form.
    pub fn encode(&self) -> Bytes {
        let bytes: usize = self
            .fields
            .iter()
            .map(|(f, v)| codec::bytes_len(f) + codec::bytes_len(v))
            .sum();
        let mut out = collection_header(DataType::Hash, self.large, self.fields.len(), bytes);
        for (field, value) in &self.fields {
            codec::put_bytes(&mut out, field);
            codec::put_bytes(&mut out, value);
        }
        Bytes::from(out)
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True if the hash has no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        self.fields.get(field)
    }

    /// Sets `field` to `value`; true if the field is new.
    pub fn set(&mut self, field: Bytes, value: Bytes) -> bool {
        self.fields.insert(field, value).is_none()
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        self.fields.shift_remove(field).is_some()
    }

    /// Fields and values in reply order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Bytes, &Bytes)> {
        self.fields.iter()
    }

    /// The field and value at `index` in reply order.
    pub fn get_index(&self, index: usize) -> Option<(&Bytes, &Bytes)> {
        self.fields.get_index(index)
    }

    /// Moves to the large encoding once the hash passes `limits` (never
    /// back, as Redis).
    pub fn settle(&mut self, limits: &EncodingLimits) {
        if !self.large
            && (self.fields.len() > limits.hash_max_entries
                || self.fields.iter().any(|(f, v)| {
                    f.len() > limits.hash_max_value_bytes || v.len() > limits.hash_max_value_bytes
                }))
        {
            self.large = true;
        }
    }

    /// What OBJECT ENCODING answers.
    pub fn encoding_name(&self) -> &'static str {
        if self.large { "hashtable" } else { "listpack" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn a_hash_reads_back_in_insertion_order() {
        let mut hash = Hash::default();
        assert!(hash.set(b("b"), b("1")));
        assert!(hash.set(b("a"), b("2")));
        assert!(!hash.set(b("b"), b("3")));
        assert!(hash.set(b("c"), b("4")));
        assert!(hash.remove(b"a"));
        assert!(!hash.remove(b"a"));
        let back = Hash::decode(hash.encode()).unwrap();
        let pairs: Vec<_> = back.iter().map(|(f, v)| (f.clone(), v.clone())).collect();
        assert_eq!(pairs, vec![(b("b"), b("3")), (b("c"), b("4"))]);
        assert_eq!(back, hash);
    }

    #[test]
    fn the_encoding_grows_and_stays() {
        let limits = EncodingLimits {
            hash_max_entries: 2,
            ..EncodingLimits::default()
        };
        let mut hash = Hash::default();
        hash.set(b("a"), b("1"));
        hash.settle(&limits);
        assert_eq!(hash.encoding_name(), "listpack");
        hash.set(b("b"), b("1"));
        hash.set(b("c"), b("1"));
        hash.settle(&limits);
        assert_eq!(hash.encoding_name(), "hashtable");
        hash.remove(b"c");
        hash.settle(&limits);
        assert_eq!(
            Hash::decode(hash.encode()).unwrap().encoding_name(),
            "hashtable"
        );
    }
}
