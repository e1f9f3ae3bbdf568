//! Helpers shared by the storage engine's integration tests: an index built
//! from the key logs (what a compute node would hold), and disks that wrap
//! the real one to slow, pause or fail operations, or to lose everything not
//! yet synced.

#![allow(dead_code)]

pub mod faults;
pub mod store;

use std::collections::HashMap;
use std::path::Path;

use splitkv_common::record::{self, EntryKind, Frame};
use storage_node::{ExportCursor, StorageConfig, StorageEngine};

/// The newest key-log entry of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub partition: usize,
    pub seq: u64,
    pub deleted: bool,
    pub offset: u64,
    pub record_len: usize,
}

/// Builds the key → newest entry map from every partition's key log, the
/// way a compute node rebuilds its index: the highest sequence number wins
/// across partitions, deletes included.
pub fn build_index(engine: &StorageEngine) -> HashMap<Vec<u8>, Located> {
    let mut index: HashMap<Vec<u8>, Located> = HashMap::new();
    for partition in 0..engine.partition_count() {
        let mut from = ExportCursor::start();
        loop {
            let mut out = Vec::new();
            let progress = engine
                .export_keylog(partition, &from, 0, 1 << 20, &mut out)
                .expect("export");
            let mut at = 0;
            while at < out.len() {
                let (frame, used) =
                    record::decode_frame(&out[at..]).expect("exported frame verifies");
                if let Frame::Entries(entries) = frame {
                    for entry in entries.iter() {
                        let entry = entry.expect("entry");
                        let located = Located {
                            partition,
                            seq: entry.seq,
                            deleted: entry.kind == EntryKind::Delete,
                            offset: entry.value_offset,
                            record_len: entry.record_len(),
                        };
                        // A relocation by garbage collection is a put of
                        // the same version further on in the same value log.
                        let newer = index.get(entry.key).is_none_or(|old| {
                            old.seq < entry.seq
                                || (old.seq == entry.seq
                                    && !located.deleted
                                    && old.partition == partition
                                    && old.offset < entry.value_offset)
                        });
                        if newer {
                            index.insert(entry.key.to_vec(), located);
                        }
                    }
                }
                at += used;
            }
            from = progress.next;
            if progress.caught_up {
                break;
            }
        }
    }
    index
}

/// Reads the current value of `key` through `index`: `None` if missing or
/// deleted. Panics on a record that does not verify or belongs to another key.
pub fn get(
    engine: &StorageEngine,
    index: &HashMap<Vec<u8>, Located>,
    key: &[u8],
) -> Option<Vec<u8>> {
    let located = index.get(key)?;
    if located.deleted {
        return None;
    }
    let bytes = engine
        .read(located.partition, located.offset, located.record_len)
        .unwrap_or_else(|e| panic!("reading {key:?}: {e}"));
    let record = bytes.record();
    assert_eq!(
        record.key, key,
        "record at the key's location holds another key"
    );
    assert_eq!(
        record.seq, located.seq,
        "record's seq differs from the key log's"
    );
    Some(record.value.to_vec())
}

/// A configuration with small buffers and key-log chunks, so that tests
/// exercise buffer switches, flushes and chunk growth quickly.
pub fn small_config(dir: &Path, partitions: usize) -> StorageConfig {
    let mut config = StorageConfig::new(dir);
    config.partitions = partitions;
    config.buffer_bytes = 64 * 1024;
    config.keylog_chunk_bytes = 16 * 1024;
    config
}

/// Deterministic value bytes for (key, version), of `len` bytes.
pub fn value_for(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut state = crc32c::crc32c(key) as u64 ^ version.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}
