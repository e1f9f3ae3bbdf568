//! Default size limits shared by both halves. Both are configuration; these
//! are the values used when nothing else is said.

/// Default longest key: 1 KiB.
pub const DEFAULT_MAX_KEY_BYTES: usize = 1024;
/// Default longest value: 16 MiB.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 16 << 20;
