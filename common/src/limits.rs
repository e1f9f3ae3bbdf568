//! Size limits shared by both halves: the key and value limits are
//! configuration (these are the defaults), the range limit is protocol.
//!
//! [`Limits`] is the one place where a key or value is checked against
//! them: the storage node, the storage client and the compute node's
//! engine all call [`Limits::check_key`] and [`Limits::check_value`], so a
//! refusal reads the same wherever it happens.

use crate::message::WireError;

/// Default longest key: 1 KiB.
pub const DEFAULT_MAX_KEY_BYTES: usize = 1024;
/// Default longest value: 16 MiB.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 16 << 20;

/// Longest range read of a partition's value log, in bytes: a protocol
/// limit, defined with the messages and named here beside the other limits.
pub use crate::message::MAX_RANGE_BYTES;

/// Limits on what a write may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest key in bytes (keys are at least 1 byte).
    pub max_key_bytes: usize,
    /// Longest value in bytes.
    pub max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_key_bytes: DEFAULT_MAX_KEY_BYTES,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
        }
    }
}

impl Limits {
    /// Accepts a key of 1 byte up to `max_key_bytes`; refuses an empty key
    /// with [`WireError::EmptyKey`] and a longer one with
    /// [`WireError::TooLarge`].
    pub fn check_key(&self, key: &[u8]) -> Result<(), WireError> {
        if key.is_empty() {
            return Err(WireError::EmptyKey);
        }
        check_len("key", key.len(), self.max_key_bytes)
    }

    /// Accepts a value of up to `max_value_bytes` (empty included); refuses
    /// a longer one with [`WireError::TooLarge`].
    pub fn check_value(&self, value: &[u8]) -> Result<(), WireError> {
        check_len("value", value.len(), self.max_value_bytes)
    }
}

fn check_len(what: &str, len: usize, max: usize) -> Result<(), WireError> {
    if len > max {
        return Err(WireError::TooLarge {
            what: what.to_string(),
            len: len as u64,
            max: max as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_checked_against_the_limits() {
        let limits = Limits {
            max_key_bytes: 4,
            max_value_bytes: 8,
        };
        assert_eq!(limits.check_key(b""), Err(WireError::EmptyKey));
        assert_eq!(limits.check_key(b"abcd"), Ok(()));
        assert_eq!(
            limits.check_key(b"abcde"),
            Err(WireError::TooLarge {
                what: "key".into(),
                len: 5,
                max: 4
            })
        );
        assert_eq!(limits.check_value(b""), Ok(()));
        assert_eq!(limits.check_value(&[0; 8]), Ok(()));
        assert_eq!(
            limits.check_value(&[0; 9]),
            Err(WireError::TooLarge {
                what: "value".into(),
                len: 9,
                max: 8
            })
        );
    }
}
