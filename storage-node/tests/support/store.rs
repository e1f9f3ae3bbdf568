//! A store for garbage-collection and checkpoint tests, and checks of what
//! it serves: small buffers, segments and key-log chunks, and every key's
//! expected value checked through the key logs and the node's directory.

use std::collections::HashMap;
use std::path::Path;

use storage_node::{GcConfig, StorageConfig, StorageEngine};

use super::{build_index, get, value_for};

/// Size of a value-log segment of [`config`].
pub const SEGMENT_BYTES: u64 = 256 << 10;

/// Small buffers and segments, no GC thread, no pacing: collection runs
/// only when a test asks.
pub fn config(dir: &Path) -> StorageConfig {
    let mut config = StorageConfig::new(dir);
    config.partitions = 2;
    config.buffer_bytes = 64 << 10;
    config.keylog_chunk_bytes = 64 << 10;
    config.segment_bytes = SEGMENT_BYTES;
    config.limits.max_value_bytes = 128 << 10;
    config.gc = GcConfig {
        interval_ms: 0,
        min_dead_percent: 50,
        copy_bytes_per_s: 0,
        checkpoint_every_keylog_bytes: 0,
        checkpoint_keylog_growth_percent: 0,
        max_dead_percent_of_live: 0,
    };
    config
}

/// The value every key should have now, `None` for deleted.
pub type Expected = HashMap<Vec<u8>, Option<Vec<u8>>>;

pub fn check(engine: &StorageEngine, expected: &Expected) {
    let index = build_index(engine);
    for (key, value) in expected {
        assert_eq!(
            get(engine, &index, key).as_ref(),
            value.as_ref(),
            "key {}",
            String::from_utf8_lossy(key)
        );
    }
}

/// Record bytes of the values in `expected`.
pub fn live_bytes(expected: &Expected) -> u64 {
    expected
        .iter()
        .filter_map(|(key, value)| {
            value
                .as_ref()
                .map(|v| splitkv_common::record::value_record_len(key.len(), v.len()) as u64)
        })
        .sum()
}

/// The storage node's own directory (rebuilt from checkpoints) names, for
/// every key, what the key logs name.
pub fn check_directory(engine: &StorageEngine, expected: &Expected) {
    let index = build_index(engine);
    for (key, value) in expected {
        let located = engine.locate(key);
        match value {
            None => assert_eq!(located, None, "key {}", String::from_utf8_lossy(key)),
            Some(_) => {
                let l = index[key];
                let at = located.expect("located");
                assert_eq!(
                    (at.seq, at.record.partition as usize, at.record.offset),
                    (l.seq, l.partition, l.offset),
                    "key {}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
    assert_eq!(
        engine
            .stats()
            .partitions
            .iter()
            .map(|p| p.live_bytes)
            .sum::<u64>(),
        live_bytes(expected)
    );
}

pub fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Calls `f` with every entry frame an export of `partition` from the
/// start yields, of the frames holding an entry with a sequence number of
/// at least `min_seq`.
pub fn for_each_exported_frame(
    engine: &StorageEngine,
    partition: usize,
    min_seq: u64,
    mut f: impl FnMut(&splitkv_common::record::FrameEntries<'_>),
) {
    let mut cursor = storage_node::ExportCursor::start();
    loop {
        let mut out = Vec::new();
        let progress = engine
            .export_keylog(partition, &cursor, min_seq, 64 << 10, &mut out)
            .expect("export");
        let mut at = 0;
        while at < out.len() {
            let (frame, used) = splitkv_common::record::decode_frame(&out[at..]).expect("frame");
            if let splitkv_common::record::Frame::Entries(frame) = frame {
                f(&frame);
            }
            at += used;
        }
        if progress.caught_up {
            return;
        }
        cursor = progress.next;
    }
}

/// Every entry an export of `partition` from the start yields, by key.
pub fn exported_by_key(
    engine: &StorageEngine,
    partition: usize,
) -> HashMap<Vec<u8>, Vec<splitkv_common::record::EntryKind>> {
    let mut by_key: HashMap<Vec<u8>, Vec<_>> = HashMap::new();
    for_each_exported_frame(engine, partition, 0, |frame| {
        for entry in frame.iter() {
            let entry = entry.expect("entry");
            by_key
                .entry(entry.key.to_vec())
                .or_default()
                .push(entry.kind);
        }
    });
    by_key
}

/// Overwrites 2000 keys of each partition with small values: about a
/// key-log chunk per partition.
pub fn fill_key_logs(engine: &StorageEngine, expected: &mut Expected, round: u64) {
    fill_key_logs_of(engine, &[0, 1], expected, round);
}

/// Overwrites 2000 keys of each of `partitions` with small values.
pub fn fill_key_logs_of(
    engine: &StorageEngine,
    partitions: &[usize],
    expected: &mut Expected,
    round: u64,
) {
    for &partition in partitions {
        for i in 0..2000u32 {
            let key = format!("fill-{partition}-{i:04}").into_bytes();
            let value = value_for(&key, round, 16);
            engine.put(partition, &key, &value).expect("put");
            expected.insert(key, Some(value));
        }
    }
}
