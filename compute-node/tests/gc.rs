//! Garbage collection and checkpoints seen from the compute node: reads of
//! records that a collection moved, by an engine whose index still names
//! the old place and by one that rebuilt its index after the collection;
//! rebuilds and readers that start from checkpoints once the key log below
//! them is gone.

mod support;

use std::collections::HashMap;

use support::{StorageNode, value_for};

const SEGMENT_BYTES: u64 = 1 << 20;

/// Writes keys 0..400, overwrites 100..400 four times and deletes every
/// tenth key, all through the engine; returns what each key should hold.
fn write_history(engine: &compute_node::Engine) -> HashMap<Vec<u8>, Option<Vec<u8>>> {
    let mut expected = HashMap::new();
    for round in 0..5u64 {
        for i in 0..400u32 {
            if round > 0 && i < 100 {
                continue;
            }
            let key = format!("key-{i:04}").into_bytes();
            let value = value_for(&key, round, 2000 + (i as usize * 31) % 2000);
            engine.put(&key, &value).expect("put");
            expected.insert(key, Some(value));
        }
    }
    for i in (0..400u32).step_by(10) {
        let key = format!("key-{i:04}").into_bytes();
        assert!(engine.delete(&key).expect("delete"));
        expected.insert(key, None);
    }
    expected
}

fn check(engine: &compute_node::Engine, expected: &HashMap<Vec<u8>, Option<Vec<u8>>>) {
    for (key, value) in expected {
        assert_eq!(
            engine.get(key).expect("get").as_deref(),
            value.as_deref(),
            "key {}",
            String::from_utf8_lossy(key)
        );
    }
    let keys: Vec<&[u8]> = expected.keys().map(|k| &k[..]).collect();
    let values = engine.get_many(&keys).expect("get many");
    for (key, value) in keys.iter().zip(values) {
        assert_eq!(
            value.as_deref(),
            expected[*key].as_deref(),
            "MGET of {key:?}"
        );
    }
}

#[test]
fn reads_find_records_that_garbage_collection_moved_before_and_after_a_rebuild() {
    let node = StorageNode::start_with_segments(2, 256 << 10, SEGMENT_BYTES);
    let mut config = node.engine_config();
    // Every read goes to the storage node: no value cache, no windows.
    config.cache_bytes = 0;
    config.window_bytes = 0;
    let engine = compute_node::Engine::connect(config.clone()).expect("connect");
    let expected = write_history(&engine);

    let report = node.collect_garbage(50);
    assert!(report.segments_freed >= 1, "{report:?}");
    assert!(
        report.relocated_records > 0,
        "live records moved: {report:?}"
    );

    // The index still names the places from before the collection.
    check(&engine, &expected);
    let relocations = engine.stats().relocations;
    assert!(relocations > 0, "reads met moved records and followed them");
    // Once followed, a record is read at its new place.
    check(&engine, &expected);
    assert_eq!(engine.stats().relocations, relocations);
    drop(engine);

    // A new compute node rebuilds its index from the key logs, relocations
    // included: it never reads an old place.
    let rebuilt = compute_node::Engine::connect(config).expect("connect again");
    check(&rebuilt, &expected);
    assert_eq!(rebuilt.stats().relocations, 0);
}

#[test]
fn a_restarted_storage_node_serves_every_key_after_collections_and_a_new_write_wins() {
    let mut node = StorageNode::start_with_segments(2, 256 << 10, SEGMENT_BYTES);
    let engine = node.connect();
    let mut expected = write_history(&engine);
    node.collect_garbage(0);
    // Writes after the collection, then another collection.
    for i in (0..400u32).step_by(3) {
        let key = format!("key-{i:04}").into_bytes();
        let value = value_for(&key, 99, 3000);
        engine.put(&key, &value).expect("put");
        expected.insert(key, Some(value));
    }
    node.collect_garbage(0);
    check(&engine, &expected);
    drop(engine);
    node.stop();
    node.resume();
    let engine = node.connect();
    check(&engine, &expected);
}

#[test]
fn compute_nodes_rebuild_from_checkpoints_once_the_key_log_below_them_is_gone() {
    let mut node = StorageNode::start_with_segments(2, 256 << 10, SEGMENT_BYTES);
    let mut expected = HashMap::new();
    let mut written = 0u64;
    // Three clean stops, each after thousands of overwrites and some
    // deletes: each stop checkpoints, and the third deletes the key-log
    // chunks below the second one's predecessor.
    for round in 0..3u64 {
        let engine = node.connect();
        for i in 0..3000u32 {
            let key = format!("key-{:04}", i % 1200).into_bytes();
            let value = value_for(&key, round * 10_000 + u64::from(i), 64);
            engine.put(&key, &value).expect("put");
            expected.insert(key, Some(value));
            written += 1;
        }
        for i in (round as u32..1200).step_by(7) {
            let key = format!("key-{i:04}").into_bytes();
            engine.delete(&key).expect("delete");
            expected.insert(key, None);
            written += 1;
        }
        drop(engine);
        node.stop();
        node.resume();
    }
    let stats = node.storage_stats();
    let written_to: Vec<_> = stats
        .partitions
        .iter()
        .filter(|p| p.keylog_end > 0)
        .collect();
    assert!(!written_to.is_empty());
    for (p, report) in written_to.iter().enumerate() {
        assert!(
            report.keylog_start >= support::SMALL_KEYLOG_CHUNK_BYTES as u64,
            "written partition {p} deleted its first chunks: {report:?}"
        );
        assert!(report.keylog_start <= report.checkpoint_position);
    }
    // An export yields each partition's checkpoint: its keys, not the
    // history.
    let exported: u64 = stats.partitions.iter().map(|p| p.keylog_entries).sum();
    assert!(
        exported <= 2 * 1200 + 1,
        "{exported} entries exported of {written} written"
    );

    let engine = node.connect();
    check(&engine, &expected);
    let live = expected.values().filter(|v| v.is_some()).count() as u64;
    assert_eq!(engine.len(), live, "no deleted key came back");

    // A reader rebuilt from the same checkpoints has applied all there is,
    // and follows what comes after them.
    let reader = node.connect_reader_view();
    let handle = reader.handle().clone();
    let lag = handle
        .block_on(reader.replication_async())
        .expect("replication");
    assert_eq!(lag.lag_entries, 0, "{lag:?}");
    engine
        .put(b"key-0000", b"after the checkpoints")
        .expect("put");
    assert!(expected[&b"key-0001"[..]].is_some());
    assert!(engine.delete(b"key-0001").expect("delete"));
    assert!(reader.wait_until(std::time::Duration::from_secs(10), |r| {
        r.has_applied(&engine.applied_seqs())
    }));
    assert_eq!(
        reader.get(b"key-0000").expect("get").as_deref(),
        Some(&b"after the checkpoints"[..])
    );
    assert_eq!(reader.get(b"key-0001").expect("get"), None);
    assert_eq!(reader.len(), engine.len());
    let lag = handle
        .block_on(reader.replication_async())
        .expect("replication");
    assert_eq!(lag.lag_entries, 0, "{lag:?}");
}

/// The value of `field` in an INFO reply.
fn info_field(info: &str, field: &str) -> i64 {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .parse()
        .expect("a number")
}

#[test]
fn info_shows_the_storage_nodes_space_collections_and_checkpoints() {
    let mut node = StorageNode::start_with_segments(2, 256 << 10, SEGMENT_BYTES);
    let engine = std::sync::Arc::new(node.connect());
    let expected = write_history(&engine);
    let (addr, stop) = support::serve_resp(&engine, &node, None);
    let client = redis::Client::open(format!("redis://{addr}")).expect("client");
    let info = |section: &str| -> String {
        let mut con = client.get_connection().expect("connect");
        redis::cmd("INFO")
            .arg(section)
            .query(&mut con)
            .expect("info")
    };
    let before = info("splitkv");
    let live: u64 = expected
        .iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .map(|v| splitkv_common::record::value_record_len(k.len(), v.len()) as u64)
        })
        .sum();
    assert_eq!(info_field(&before, "storage_live_bytes"), live as i64);
    assert!(info_field(&before, "storage_dead_bytes") > 0, "{before}");
    assert_eq!(info_field(&before, "storage_gc_runs"), 0);
    assert_eq!(info_field(&before, "storage_checkpoint_seq"), -1);
    assert_eq!(info_field(&before, "storage_refusing_writes"), 0);
    let segments = info_field(&before, "storage_segments");

    let report = node.collect_garbage(50);
    let after = info("splitkv");
    assert_eq!(
        info_field(&after, "storage_gc_runs"),
        report.segments_freed as i64
    );
    assert_eq!(
        info_field(&after, "storage_reclaimed_bytes"),
        report.freed_bytes as i64
    );
    assert_eq!(
        info_field(&after, "storage_relocations"),
        report.relocated_records as i64
    );
    assert!(info_field(&after, "storage_segments") < segments, "{after}");
    assert_eq!(info_field(&after, "storage_live_bytes"), live as i64);
    // The sections that do not show it do not ask the storage node.
    assert!(!info("server").contains("storage_live_bytes"));

    // A clean stop of the storage node leaves checkpoints.
    drop(stop);
    drop(engine);
    node.stop();
    node.resume();
    let engine = std::sync::Arc::new(node.connect());
    let (addr, _stop) = support::serve_resp(&engine, &node, None);
    let client = redis::Client::open(format!("redis://{addr}")).expect("client");
    let mut con = client.get_connection().expect("connect");
    let text: String = redis::cmd("INFO")
        .arg("splitkv")
        .query(&mut con)
        .expect("info");
    assert!(info_field(&text, "storage_checkpoint_seq") > 0, "{text}");
    assert!(
        info_field(&text, "storage_checkpoint_age_ms") >= 0,
        "{text}"
    );
}
