//! The byte-level pieces of a stored collection: LEB128 lengths, byte
//! strings and scores, read from a shared buffer without copying.

use bytes::Bytes;

use super::DecodeError;

/// Appends `len` as LEB128.
pub(crate) fn put_len(out: &mut Vec<u8>, mut len: usize) {
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
}

/// Appends a byte string: its length, then its bytes.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Appends a score: an `f64`, little endian.
pub(crate) fn put_score(out: &mut Vec<u8>, score: f64) {
    out.extend_from_slice(&score.to_le_bytes());
}

/// Bytes `bytes` takes as a byte string.
pub(crate) fn bytes_len(bytes: &[u8]) -> usize {
    let mut n = bytes.len();
    let mut prefix = 1;
    while n >= 0x80 {
        n >>= 7;
        prefix += 1;
    }
    prefix + bytes.len()
}

/// Reads the pieces of a stored collection in order.
pub(crate) struct Reader {
    buf: Bytes,
    at: usize,
}

impl Reader {
    pub(crate) fn new(buf: Bytes) -> Self {
        Self { buf, at: 0 }
    }

    fn len(&mut self) -> Result<usize, DecodeError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.buf.get(self.at) else {
                return Err(DecodeError::Corrupt("length runs past the end"));
            };
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return usize::try_from(value)
                    .map_err(|_| DecodeError::Corrupt("length too large"));
            }
        }
        Err(DecodeError::Corrupt("length too long"))
    }

    /// An element count: at most the bytes left (every element takes at
    /// least one), so a corrupt count never sizes an allocation.
    pub(crate) fn count(&mut self) -> Result<usize, DecodeError> {
        let count = self.len()?;
        if count > self.buf.len() - self.at {
            return Err(DecodeError::Corrupt("count larger than the value"));
        }
        Ok(count)
    }

    /// A byte string, sharing the buffer.
    pub(crate) fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.len()?;
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.buf.len())
            .ok_or(DecodeError::Corrupt("element runs past the end"))?;
        let bytes = self.buf.slice(self.at..end);
        self.at = end;
        Ok(bytes)
    }

    /// A score.
    pub(crate) fn score(&mut self) -> Result<f64, DecodeError> {
        let end = self.at + 8;
        let Some(raw) = self.buf.get(self.at..end) else {
            return Err(DecodeError::Corrupt("score runs past the end"));
        };
        self.at = end;
        let mut le = [0u8; 8];
        le.copy_from_slice(raw);
        let score = f64::from_le_bytes(le);
        if score.is_nan() {
            return Err(DecodeError::Corrupt("score is not a number"));
        }
        Ok(score)
    }

    /// Checks that nothing follows the last element.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.at != self.buf.len() {
            return Err(DecodeError::Corrupt("bytes after the last element"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_strings_read_back() {
        let mut out = Vec::new();
        for len in [0usize, 1, 127, 128, 300, 1 << 20] {
            put_len(&mut out, len);
        }
        put_bytes(&mut out, b"abc");
        put_score(&mut out, -1.5);
        let mut reader = Reader::new(Bytes::from(out));
        for len in [0usize, 1, 127, 128, 300, 1 << 20] {
            assert_eq!(reader.len(), Ok(len));
        }
        assert_eq!(reader.bytes().as_deref(), Ok(&b"abc"[..]));
        assert_eq!(reader.score(), Ok(-1.5));
        assert_eq!(reader.finish(), Ok(()));
        assert!(reader.bytes().is_err());
        assert_eq!(bytes_len(&[0u8; 200]), 202);
    }
}
