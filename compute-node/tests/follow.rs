//! A reader compute node follows the writer through the storage node: what
//! the writer writes (puts, overwrites, deletes, clears) becomes visible on
//! the reader without polling, a reader never goes back to an older value,
//! and it follows on after the storage node restarts.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use compute_node::Engine;
use support::{StorageNode, value_for};

/// Longest wait for a write to show on the reader (far above what it
/// takes; only a reader that stopped following would reach it).
const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

fn wait_visible(reader: &Engine, key: &[u8], what: &str) {
    assert!(
        reader.wait_until(VISIBLE_WITHIN, |r| r.contains(key)),
        "{what}: {} not visible on the reader",
        String::from_utf8_lossy(key)
    );
}

fn wait_gone(reader: &Engine, key: &[u8], what: &str) {
    assert!(
        reader.wait_until(VISIBLE_WITHIN, |r| !r.contains(key)),
        "{what}: {} still visible on the reader",
        String::from_utf8_lossy(key)
    );
}

#[test]
fn a_reader_sees_puts_overwrites_deletes_and_clears_of_the_writer() {
    let mut node = StorageNode::start(4);
    let writer = node.connect();
    writer
        .put_on(0, b"before", b"written before the reader came")
        .expect("put");
    let reader = node.connect_reader_view();
    assert!(!reader.is_writer());
    assert_eq!(
        reader.get(b"before").expect("get").as_deref(),
        Some(&b"written before the reader came"[..])
    );
    assert!(reader.wait_until(VISIBLE_WITHIN, |r| r.following()));

    for partition in 0..4 {
        let key = format!("p{partition}");
        writer
            .put_on(
                partition,
                key.as_bytes(),
                &value_for(key.as_bytes(), 1, 300),
            )
            .expect("put");
        wait_visible(&reader, key.as_bytes(), "a put");
        assert_eq!(
            reader.get(key.as_bytes()).expect("get").as_deref(),
            Some(&value_for(key.as_bytes(), 1, 300)[..])
        );
    }
    // An overwrite through another partition.
    writer.put_on(3, b"p0", b"second").expect("overwrite");
    assert!(reader.wait_until(VISIBLE_WITHIN, |r| {
        r.has_applied(&writer.applied_seqs())
    }));
    assert_eq!(
        reader.get(b"p0").expect("get").as_deref(),
        Some(&b"second"[..])
    );
    writer.delete_on(2, b"p1").expect("delete");
    wait_gone(&reader, b"p1", "a delete");
    writer.clear_all().expect("clear");
    for key in [&b"before"[..], b"p0", b"p2", b"p3"] {
        wait_gone(&reader, key, "a clear");
    }
    // The keys are hidden as the clear begins to apply; the count follows
    // once every index shard has dropped them.
    assert!(
        reader.wait_until(VISIBLE_WITHIN, |r| r.is_empty()),
        "{} keys counted after the clear",
        reader.len()
    );

    // The storage node restarts: the reader follows on.
    node.kill();
    node.resume();
    let writer = node.connect();
    writer
        .put_on(1, b"after", b"the restart")
        .expect("put after the restart");
    wait_visible(&reader, b"after", "a put after the storage restart");
    assert_eq!(
        reader.get(b"after").expect("get").as_deref(),
        Some(&b"the restart"[..])
    );

    // A reader refuses writes.
    assert!(reader.put(b"mine", b"no").is_err());
}

#[test]
fn a_reader_never_serves_an_older_value_than_it_served() {
    const VERSIONS: u64 = 2_000;
    let node = StorageNode::start(4);
    let writer = node.connect();
    let reader = node.connect_reader_view();
    let version_of = |value: &[u8]| -> u64 {
        std::str::from_utf8(value)
            .expect("text")
            .parse()
            .expect("a version")
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for version in 1..=VERSIONS {
                // Each version through another partition, so they arrive at
                // the reader on different streams.
                writer
                    .put_on(
                        version as usize % 4,
                        b"counter",
                        version.to_string().as_bytes(),
                    )
                    .expect("put");
            }
            done.store(true, Ordering::Release);
        });
        let mut last = 0;
        let mut reads = 0u64;
        while !done.load(Ordering::Acquire) || last < VERSIONS {
            if let Some(value) = reader.get(b"counter").expect("get") {
                let version = version_of(&value);
                assert!(version >= last, "read {version} after {last}");
                last = version;
            }
            reads += 1;
            if done.load(Ordering::Acquire) && last < VERSIONS {
                assert!(
                    reader.wait_until(VISIBLE_WITHIN, |r| r.has_applied(&writer.applied_seqs())),
                    "the reader stopped following at version {last}"
                );
            }
        }
        assert!(reads > 0);
    });
}

#[test]
fn neither_a_reader_nor_the_writer_serves_half_of_a_batch() {
    const VERSIONS: u64 = 1_500;
    /// Keys of every batch: enough that they fall in several index shards.
    const KEYS: usize = 8;
    let node = StorageNode::start(4);
    let writer = node.connect();
    let reader = node.connect_reader_view();
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| format!("batch-key-{i}").into_bytes())
        .collect();
    let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let done = AtomicBool::new(false);
    // Every value of a batch is the batch's version; a multi-key read
    // must find one version in all of them (or none yet).
    let check = |engine: &Engine, what: &str| {
        let values = engine.get_many(&key_refs).expect("get_many");
        let first = values[0].clone();
        assert!(
            values.iter().all(|value| *value == first),
            "{what} served half a batch: {:?}",
            values
                .iter()
                .map(|v| v.as_deref().map(String::from_utf8_lossy))
                .collect::<Vec<_>>()
        );
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for version in 1..=VERSIONS {
                let value = version.to_string();
                let items: Vec<(&[u8], &[u8])> = key_refs
                    .iter()
                    .map(|&key| (key, value.as_bytes()))
                    .collect();
                writer
                    .put_many_on(version as usize % 4, &items)
                    .expect("put_many");
            }
            done.store(true, Ordering::Release);
        });
        let mut reads = 0u64;
        while !done.load(Ordering::Acquire) {
            check(&reader, "the reader");
            check(&writer, "the writer");
            reads += 1;
        }
        assert!(reads > 10, "only {reads} reads overlapped the batches");
    });
    assert!(reader.wait_until(VISIBLE_WITHIN, |r| r.has_applied(&writer.applied_seqs())));
    check(&reader, "the reader, caught up");
    assert_eq!(
        reader.get(&keys[0]).expect("get").as_deref(),
        Some(VERSIONS.to_string().as_bytes())
    );
}

#[test]
fn a_promoted_reader_takes_writes_and_the_old_writer_loses_no_acknowledged_write() {
    let node = StorageNode::start(4);
    let writer = node.connect();
    let reader = node.connect_reader_view();
    assert!(reader.wait_until(VISIBLE_WITHIN, |r| r.following()));
    let acknowledged = std::sync::Mutex::new(Vec::new());
    let started = std::sync::Barrier::new(2);
    let refused = std::thread::scope(|scope| {
        let writing = scope.spawn(|| {
            let mut i = 0u64;
            loop {
                let key = format!("old:{i}");
                match writer.put_on(
                    i as usize % 4,
                    key.as_bytes(),
                    &value_for(key.as_bytes(), 1, 100),
                ) {
                    Ok(()) => acknowledged.lock().expect("lock").push(key),
                    Err(e) => return e,
                }
                if i == 200 {
                    started.wait();
                }
                i += 1;
            }
        });
        // Promote while the old writer is writing.
        started.wait();
        let promotion = reader.promote().expect("promote");
        assert!(promotion.epoch > 0);
        writing.join().expect("writer thread")
    });
    // The old writer learns it was fenced from the refusal of its write.
    assert!(
        matches!(
            refused.wire(),
            Some(splitkv_common::message::WireError::Fenced { .. })
        ),
        "the old writer's write failed with {refused}, not as fenced"
    );
    assert!(writer.put(b"late", b"refused").is_err());
    assert!(reader.is_writer());
    // Every write the old writer had acknowledged is on the new writer,
    // without waiting: the promotion caught up before it returned.
    let acknowledged = acknowledged.into_inner().expect("lock");
    assert!(acknowledged.len() > 200);
    for key in &acknowledged {
        assert_eq!(
            reader.get(key.as_bytes()).expect("get").as_deref(),
            Some(&value_for(key.as_bytes(), 1, 100)[..]),
            "{key}, acknowledged to the old writer, is missing after the promotion"
        );
    }
    // The new writer writes; a second promotion changes nothing.
    reader.put(b"new", b"by the promoted reader").expect("put");
    let again = reader.promote().expect("promote again");
    assert_eq!(again.caught_up_entries, 0);
    reader.delete(b"old:0").expect("delete");
    // A new reader of the same storage sees the new writer's writes.
    let second = node.connect_reader_view();
    assert_eq!(
        second.get(b"new").expect("get").as_deref(),
        Some(&b"by the promoted reader"[..])
    );
    assert!(!second.contains(b"old:0"));
    assert_eq!(second.len(), reader.len());
}

#[test]
fn a_readers_lag_is_zero_once_it_has_applied_what_the_storage_node_holds() {
    let node = StorageNode::start(4);
    let writer = node.connect();
    for i in 0..100u32 {
        writer
            .put_on(i as usize % 4, format!("k{i}").as_bytes(), b"v")
            .expect("put");
    }
    let reader = node.connect_reader_view();
    let handle = reader.handle().clone();
    let lag = handle
        .block_on(reader.replication_async())
        .expect("replication");
    assert!(!lag.writer);
    assert_eq!(lag.lag_entries, 0, "{lag:?}");
    writer.delete_on(1, b"k1").expect("delete");
    assert!(reader.wait_until(VISIBLE_WITHIN, |r| r.has_applied(&writer.applied_seqs())));
    assert!(!reader.contains(b"k1"));
    let lag = handle
        .block_on(reader.replication_async())
        .expect("replication");
    assert_eq!(lag.lag_entries, 0, "{lag:?}");
    assert_eq!(lag.lag_ms, 0);
    assert_eq!(lag.applied_seq, writer.applied_seq());
    let writer_view = handle
        .block_on(writer.replication_async())
        .expect("replication");
    assert!(writer_view.writer);
}

#[test]
fn eight_readers_follow_one_writer() {
    let node = StorageNode::start(4);
    let writer = node.connect();
    let readers: Vec<Engine> = (0..8).map(|_| node.connect_reader_view()).collect();
    for i in 0..400u32 {
        let key = format!("k{i}");
        writer
            .put_on(
                i as usize % 4,
                key.as_bytes(),
                &value_for(key.as_bytes(), 1, 200),
            )
            .expect("put");
    }
    writer.delete_on(0, b"k7").expect("delete");
    for (n, reader) in readers.iter().enumerate() {
        assert!(
            reader.wait_until(VISIBLE_WITHIN, |r| r.has_applied(&writer.applied_seqs())),
            "reader {n} did not catch up"
        );
        assert_eq!(reader.len(), 399, "reader {n}");
        assert!(!reader.contains(b"k7"));
        assert_eq!(
            reader.get(b"k399").expect("get").as_deref(),
            Some(&value_for(b"k399", 1, 200)[..]),
            "reader {n}"
        );
    }
}
