//! Garbage collection seen from the compute node: reads of records that a
//! collection moved, by an engine whose index still names the old place
//! and by one that rebuilt its index after the collection.

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
