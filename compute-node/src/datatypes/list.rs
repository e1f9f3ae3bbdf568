//! A list: elements from head (index 0) to tail.

use std::collections::VecDeque;

use bytes::Bytes;

use super::codec::{self, Reader};
use super::{DataType, DecodeError, collection_bytes, collection_header};

/// A decoded list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct List {
    /// The elements, head first.
    pub elements: VecDeque<Bytes>,
}

impl List {
    /// Reads a stored list.
    pub fn decode(stored: Bytes) -> Result<Self, DecodeError> {
        let parts = collection_bytes(stored)?;
        if parts.data_type != DataType::List {
            return Err(DecodeError::Corrupt("not a list"));
        }
        let mut reader: Reader = parts.elements;
        let mut elements = VecDeque::with_capacity(parts.count);
        for _ in 0..parts.count {
            elements.push_back(reader.bytes()?);
        }
        reader.finish()?;
        Ok(Self { elements })
    }

    /// The stored form.
    pub fn encode(&self) -> Bytes {
        let bytes: usize = self.elements.iter().map(|e| codec::bytes_len(e)).sum();
        let mut out = collection_header(DataType::List, false, self.elements.len(), bytes);
        for element in &self.elements {
            codec::put_bytes(&mut out, element);
        }
        Bytes::from(out)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    /// True if the list has no element.
    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    /// The position `index` names (negative from the tail), if inside.
    pub fn position(&self, index: i64) -> Option<usize> {
        let len = self.elements.len() as i64;
        let at = if index < 0 { len + index } else { index };
        (0..len).contains(&at).then_some(at as usize)
    }

    /// What OBJECT ENCODING answers (Redis 7.0 keeps every list in a
    /// quicklist).
    pub fn encoding_name(&self) -> &'static str {
        "quicklist"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_and_finds_positions() {
        let mut list = List::default();
        for e in ["a", "b", "c"] {
            list.elements
                .push_back(Bytes::copy_from_slice(e.as_bytes()));
        }
        let back = List::decode(list.encode()).unwrap();
        assert_eq!(back, list);
        assert_eq!(back.position(0), Some(0));
        assert_eq!(back.position(-1), Some(2));
        assert_eq!(back.position(3), None);
        assert_eq!(back.position(-4), None);
    }
}
