//! Size limits shared by both halves: the key and value limits are
//! configuration (these are the defaults), the range limit is protocol.

/// Default longest key: 1 KiB.
pub const DEFAULT_MAX_KEY_BYTES: usize = 1024;
/// Default longest value: 16 MiB.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 16 << 20;

/// Longest range read of a partition's value log, in bytes: a protocol
/// limit (the storage node refuses longer ranges, the client accepts
/// responses this large whatever its record limits).
pub const MAX_RANGE_BYTES: usize = 16 << 20;
