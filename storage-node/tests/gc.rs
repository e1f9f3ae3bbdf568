//! Garbage collection on real files: overwrites and deletes, collection,
//! reopening, and reads of what collection freed.

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use storage_node::{StorageEngine, StorageError, WireError};
use support::faults::{FaultDisk, FaultPlan, Files, Op};
use support::store::{
    Expected, SEGMENT_BYTES, check, check_directory, config, copy_dir, for_each_exported_frame,
    live_bytes,
};
use support::{build_index, get, value_for};

/// Disk bytes the value logs' segment files take.
fn segment_disk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for partition in std::fs::read_dir(dir).expect("data dir") {
        let partition = partition.expect("entry").path();
        if !partition.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&partition).expect("partition dir") {
            let file = file.expect("entry");
            let name = file.file_name();
            if name.to_string_lossy().ends_with(".seg") {
                total += file.metadata().expect("metadata").blocks() * 512;
            }
        }
    }
    total
}

#[test]
fn overwrites_and_deletes_survive_collection_and_reopen_and_disk_use_falls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys: Vec<Vec<u8>> = (0..300)
        .map(|i| format!("key-{i:04}").into_bytes())
        .collect();
    let mut expected = Expected::new();
    {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        for round in 0..6u64 {
            for (i, key) in keys.iter().enumerate() {
                // Versions of one key go through both partitions.
                let partition = (i + round as usize) % 2;
                let value = value_for(key, round, 500 + (i * 37) % 1500);
                engine.put(partition, key, &value).expect("put");
                expected.insert(key.clone(), Some(value));
            }
        }
        for (i, key) in keys.iter().enumerate().filter(|(i, _)| i % 7 == 0) {
            // The delete goes to the other partition than the last put.
            engine.delete((i + 1) % 2, key).expect("delete");
            expected.insert(key.clone(), None);
        }
        let before_index = build_index(&engine);
        let stats = engine.stats();
        let dead: u64 = stats.partitions.iter().map(|p| p.dead_bytes).sum();
        let live: u64 = stats.partitions.iter().map(|p| p.live_bytes).sum();
        let live_expected = live_bytes(&expected);
        assert_eq!(live, live_expected, "live bytes are the newest versions");
        assert!(dead > 4 * live, "five of six versions are dead: {stats:?}");

        engine.sync().expect("sync");
        let disk_before = segment_disk_bytes(dir.path());
        let report = engine.collect_garbage(50).expect("collect");
        assert!(report.segments_freed >= 4, "{report:?}");
        let disk_after = segment_disk_bytes(dir.path());
        assert!(
            disk_after < disk_before / 2,
            "disk use fell: {disk_before} -> {disk_after} ({report:?})"
        );
        let stats = engine.stats();
        assert_eq!(
            stats.partitions.iter().map(|p| p.gc_runs).sum::<u64>(),
            report.segments_freed
        );
        assert_eq!(
            stats.partitions.iter().map(|p| p.live_bytes).sum::<u64>(),
            live_expected,
            "collection moves live bytes, it does not change them"
        );
        check(&engine, &expected);

        // A location from before the collection that is in a freed
        // segment answers `moved`, never other bytes.
        let freed_offsets = before_index
            .values()
            .filter(|l| !l.deleted)
            .map(|l| (l.partition, l.offset, l.record_len))
            .collect::<Vec<_>>();
        let mut moved = 0;
        for &(partition, offset, len) in &freed_offsets {
            match engine.read(partition, offset, len) {
                Ok(_) => {}
                Err(StorageError::Refused(WireError::Moved { .. })) => moved += 1,
                Err(e) => panic!("reading a location from before collection: {e}"),
            }
        }
        assert!(moved > 0, "some records moved out of freed segments");
    }
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
    let stats = engine.stats();
    assert_eq!(
        stats.partitions.iter().map(|p| p.live_bytes).sum::<u64>(),
        live_bytes(&expected),
        "the directory rebuilt from the key logs counts the same live bytes"
    );
    // Collecting again after the reopen finds the same keys.
    engine.collect_garbage(0).expect("collect again");
    check(&engine, &expected);
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen again");
    check(&engine, &expected);
}

#[test]
fn a_deleted_key_stays_deleted_whichever_segment_holds_its_put_or_its_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let filler = |engine: &StorageEngine, partition: usize, round: u64| {
        // Enough overwrites of one key to fill and kill whole segments.
        for i in 0..40u64 {
            let value = value_for(b"filler", round * 100 + i, 16 << 10);
            engine.put(partition, b"filler", &value).expect("filler");
        }
    };
    let mut expected = Expected::new();
    {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        // Put in a segment that will be collected, delete through the
        // other partition.
        engine.put(0, b"put-collected", b"old").expect("put");
        engine.delete(1, b"put-collected").expect("delete");
        expected.insert(b"put-collected".to_vec(), None);
        // Put, delete, and a new put in a later segment.
        engine.put(0, b"back-again", b"v1").expect("put");
        engine.delete(0, b"back-again").expect("delete");
        filler(&engine, 0, 1);
        engine.put(0, b"back-again", b"v3").expect("put");
        expected.insert(b"back-again".to_vec(), Some(b"v3".to_vec()));
        // Put in partition 1 (not collected yet), delete in partition 0.
        engine.put(1, b"put-kept", b"old").expect("put");
        engine.delete(0, b"put-kept").expect("delete");
        expected.insert(b"put-kept".to_vec(), None);
        filler(&engine, 0, 2);
        filler(&engine, 1, 3);
        engine.put(1, b"filler", b"last").expect("put");
        expected.insert(b"filler".to_vec(), Some(b"last".to_vec()));

        let report = engine.collect_garbage(50).expect("collect");
        assert!(report.segments_freed >= 2, "{report:?}");
        check(&engine, &expected);
    }
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
    engine.collect_garbage(0).expect("collect after reopen");
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen again");
    check(&engine, &expected);
}

#[test]
fn range_reads_stop_at_a_freed_segment_and_one_inside_it_answers_moved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = StorageEngine::open(config(dir.path())).expect("open");
    // Segment 0 holds a record that stays live, segments 1 and 2 only
    // overwritten ones.
    engine.put(0, b"keep", b"kept").expect("put");
    let mut round = 0;
    while engine.stats().partitions[0].segments < 4 {
        engine
            .put(0, b"churn", &value_for(b"churn", round, 16 << 10))
            .expect("put");
        round += 1;
    }
    engine.delete(0, b"churn").expect("delete");
    let report = engine.collect_garbage(90).expect("collect");
    assert!(report.segments_freed >= 2, "{report:?}");
    let freed = (0..3u64)
        .find(|&id| {
            !dir.path()
                .join("p000")
                .join(format!("value-{id:08}.seg"))
                .exists()
        })
        .expect("a freed segment");
    let inside = engine.read_range(0, 0, (freed * SEGMENT_BYTES) as usize + 4096);
    if freed == 0 {
        assert!(matches!(
            inside,
            Err(StorageError::Refused(WireError::Moved { .. }))
        ));
    } else {
        let range = inside.expect("range before the freed segment");
        assert_eq!(range.bytes().len() as u64, freed * SEGMENT_BYTES);
    }
    let err = engine
        .read_range(0, freed * SEGMENT_BYTES + 4096, 4096)
        .expect_err("inside a freed segment");
    assert!(
        matches!(
            err,
            StorageError::Refused(WireError::Moved { partition: 0, .. })
        ),
        "{err}"
    );
    let index = build_index(&engine);
    assert_eq!(get(&engine, &index, b"keep").as_deref(), Some(&b"kept"[..]));
}

/// Writes 300 keys of 1 KiB once and overwrites the first half twice, then
/// reopens the store (so that every record is in the value log's files):
/// the oldest segments are about half dead.
fn half_dead_store(dir: &Path, plan: &std::sync::Arc<FaultPlan>) -> (StorageEngine, Expected) {
    let mut expected = Expected::new();
    {
        let engine = StorageEngine::open(config(dir)).expect("open");
        for round in 0..3u64 {
            for i in 0..300u32 {
                if round > 0 && i >= 150 {
                    continue;
                }
                let key = format!("key-{i:04}").into_bytes();
                let value = value_for(&key, round, 1024);
                engine.put(0, &key, &value).expect("put");
                expected.insert(key, Some(value));
            }
        }
    }
    let engine =
        StorageEngine::open_with_disk(config(dir), FaultDisk::new(std::sync::Arc::clone(plan)))
            .expect("reopen through the fault disk");
    (engine, expected)
}

#[test]
fn an_io_error_reading_a_segment_stops_collection_with_an_error_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let (engine, expected) = half_dead_store(dir.path(), &plan);
    let disk_before = segment_disk_bytes(dir.path());
    plan.fail_now(Op::Read, Files::ValueLog, libc::EIO);
    let err = engine
        .collect_garbage(40)
        .expect_err("the copy cannot read");
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert!(plan.failed(Op::Read, Files::ValueLog) > 0);
    assert_eq!(segment_disk_bytes(dir.path()), disk_before, "nothing freed");
    assert_eq!(engine.stats().partitions[0].gc_runs, 0);
    plan.stop_failing(Op::Read);
    // Reads and writes go on; the next collection succeeds.
    check(&engine, &expected);
    engine.put(1, b"after", b"error").expect("writes go on");
    let report = engine.collect_garbage(40).expect("collect once reads work");
    assert!(report.segments_freed >= 1, "{report:?}");
    check(&engine, &expected);
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
}

/// Polls `done` until it holds, failing the test after 30 s.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "30 s without: {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_full_disk_while_collection_copies_pauses_it_and_puts_until_there_is_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let (engine, expected) = half_dead_store(dir.path(), &plan);
    drop(engine);
    // The disk is full before the GC thread starts: its copies fill a write
    // buffer whose flush finds no room, and every pass stops there.
    plan.fail_now(Op::DirectWrite, Files::ValueLog, libc::ENOSPC);
    plan.fail_now(Op::Allocate, Files::ValueLog, libc::ENOSPC);
    let mut collecting = config(dir.path());
    collecting.gc.interval_ms = 10;
    collecting.gc.min_dead_percent = 40;
    let engine =
        StorageEngine::open_with_disk(collecting, FaultDisk::new(std::sync::Arc::clone(&plan)))
            .expect("open through the fault disk");
    let value_log_failures = || {
        plan.failed(Op::DirectWrite, Files::ValueLog) + plan.failed(Op::Allocate, Files::ValueLog)
    };
    wait_until("a flush waiting for room", || {
        engine.stats().refusing_writes.is_some()
    });
    let refused = engine.put(1, b"new", b"value").expect_err("disk full");
    assert!(
        matches!(refused, StorageError::Refused(WireError::DiskFull { .. })),
        "refused as disk full, not poisoned: {refused}"
    );
    let err = engine
        .collect_garbage(40)
        .expect_err("a pass stops at the full disk");
    assert!(
        matches!(err, StorageError::Refused(WireError::DiskFull { .. })),
        "{err}"
    );
    // The flush is retried every 100 ms; meanwhile the GC thread's passes
    // (every 10 ms) stop at the full disk too, and the thread goes on.
    let failed = value_log_failures();
    wait_until("three more retries of the flush", || {
        value_log_failures() >= failed + 3
    });
    assert_eq!(engine.stats().gc_failure, None, "the GC thread goes on");
    // Every key still reads back, from the files or the write buffers.
    check(&engine, &expected);

    // Room again: the flush goes through, puts resume, and the GC thread
    // collects on its own, without a restart.
    plan.stop_failing(Op::DirectWrite);
    plan.stop_failing(Op::Allocate);
    wait_until("puts accepted again", || {
        engine.stats().refusing_writes.is_none()
    });
    engine.put(1, b"new", b"value").expect("writable again");
    wait_until("the GC thread freeing a segment", || {
        engine.stats().partitions[0].gc_runs > 0
    });
    assert_eq!(engine.stats().gc_failure, None);
    let mut expected = expected;
    expected.insert(b"new".to_vec(), Some(b"value".to_vec()));
    check(&engine, &expected);
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
}

#[test]
fn below_the_disk_reserve_puts_are_refused_but_not_collection_and_resume_once_space_is_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let (engine, mut expected) = half_dead_store(dir.path(), &plan);
    let reserve = storage_node::config::DEFAULT_DISK_RESERVE_BYTES;
    // The disk is nearly full: a pass ends by reading the free space.
    plan.free_bytes.store(reserve - 1, Ordering::SeqCst);
    let report = engine
        .collect_garbage(40)
        .expect("collection writes into the reserve");
    assert!(report.segments_freed >= 1, "{report:?}");
    assert!(report.relocated_records > 0, "{report:?}");
    let refused = engine
        .put(0, b"new", b"value")
        .expect_err("below the reserve");
    let StorageError::Refused(WireError::DiskFull { context }) = &refused else {
        panic!("refused as disk full, not {refused}");
    };
    assert!(context.contains("--disk-reserve-bytes"), "{context}");
    let refusing = engine.stats().refusing_writes.expect("stats say why");
    assert!(
        refusing.contains("kept for garbage collection"),
        "{refusing}"
    );
    // Deletes make room and are not refused; reads go on.
    engine.delete(0, b"key-0000").expect("delete");
    expected.insert(b"key-0000".to_vec(), None);
    check(&engine, &expected);
    // Space is back: the next pass reads it, and puts resume without a
    // restart.
    plan.free_bytes.store(reserve, Ordering::SeqCst);
    engine.collect_garbage(40).expect("collect");
    assert_eq!(engine.stats().refusing_writes, None);
    engine.put(0, b"new", b"value").expect("puts resume");
    expected.insert(b"new".to_vec(), Some(b"value".to_vec()));
    check(&engine, &expected);
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
}

#[test]
fn a_failed_checkpoint_write_stops_the_pass_with_the_error_and_loses_nothing() {
    for (errno, said) in [
        (libc::EIO, "Input/output error"),
        (libc::ENOSPC, "disk is full"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let plan = FaultPlan::new();
        let (engine, mut expected) = half_dead_store(dir.path(), &plan);
        drop(engine);
        // Each pass also checkpoints what was appended since.
        let mut checkpointing = config(dir.path());
        checkpointing.gc.checkpoint_every_keylog_bytes = 1;
        let engine = StorageEngine::open_with_disk(
            checkpointing,
            FaultDisk::new(std::sync::Arc::clone(&plan)),
        )
        .expect("reopen through the fault disk");
        engine.put(1, b"before", b"the failure").expect("put");
        expected.insert(b"before".to_vec(), Some(b"the failure".to_vec()));
        let before = engine.stats().partitions[1].checkpoint_position;
        plan.fail_now(Op::SyncData, Files::Named("checkpoint.tmp"), errno);
        let err = engine
            .collect_garbage(40)
            .expect_err("the checkpoint cannot be made durable");
        let message = err.to_string();
        assert!(
            message.contains("writing a checkpoint of partition") && message.contains(said),
            "{message}"
        );
        assert!(plan.failed(Op::SyncData, Files::Named("checkpoint.tmp")) > 0);
        assert_eq!(engine.stats().partitions[1].checkpoint_position, before);
        // Nothing is lost, and reads and writes go on.
        check(&engine, &expected);
        engine
            .put(1, b"after", b"the failure")
            .expect("writes go on");
        expected.insert(b"after".to_vec(), Some(b"the failure".to_vec()));
        plan.stop_failing(Op::SyncData);
        engine
            .collect_garbage(40)
            .expect("the next pass checkpoints");
        let made = engine.stats().partitions[1].checkpoint_position;
        assert!(made > before, "{made} > {before}");
        check(&engine, &expected);
        drop(engine);
        let engine = StorageEngine::open(config(dir.path())).expect("reopen");
        assert!(engine.recovery_report()[1].checkpoint_position.is_some());
        check(&engine, &expected);
    }
}

/// Overwrites and deletes 300 keys through both partitions, `round` as the
/// first version number.
fn churn(engine: &StorageEngine, expected: &mut Expected, round: u64) {
    for r in round..round + 3 {
        for i in 0..300u32 {
            let key = format!("key-{i:04}").into_bytes();
            let value = value_for(&key, r, 200 + (i as usize * 13) % 700);
            engine
                .put((i as usize + r as usize) % 2, &key, &value)
                .expect("put");
            expected.insert(key, Some(value));
        }
    }
    for i in (round as u32..300).step_by(11) {
        let key = format!("key-{i:04}").into_bytes();
        engine.delete(i as usize % 2, &key).expect("delete");
        expected.insert(key, None);
    }
}

#[test]
fn a_clean_close_leaves_checkpoints_that_the_next_open_starts_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut expected = Expected::new();
    let ends: Vec<u64> = {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        churn(&engine, &mut expected, 0);
        engine.collect_garbage(50).expect("collect");
        engine
            .stats()
            .partitions
            .iter()
            .map(|p| p.keylog_end)
            .collect()
    };
    for p in 0..2 {
        assert!(
            dir.path()
                .join(format!("p{p:03}"))
                .join("checkpoint")
                .exists()
        );
    }
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    for (p, report) in engine.recovery_report().iter().enumerate() {
        assert_eq!(report.checkpoint_position, Some(ends[p]), "partition {p}");
        assert_eq!(report.checkpoints_passed_over, 0);
    }
    let stats = engine.stats();
    assert_eq!(stats.partitions[0].checkpoint_position, ends[0]);
    assert!(stats.partitions[0].checkpoint_made_at_ms > 0);
    check(&engine, &expected);
    check_directory(&engine, &expected);
    // Writes after the checkpoint, and a clear's effect through one.
    churn(&engine, &mut expected, 10);
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen again");
    assert!(dir.path().join("p000").join("checkpoint.prev").exists());
    check(&engine, &expected);
    check_directory(&engine, &expected);
    engine.clear_all(None).expect("clear");
    let cleared: Expected = expected.keys().map(|k| (k.clone(), None)).collect();
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen after a clear");
    // (The test index of `check` does not apply clears; the directory does.)
    check_directory(&engine, &cleared);
}

#[test]
fn a_corrupt_checkpoint_is_passed_over_for_the_one_before_or_the_whole_key_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut expected = Expected::new();
    let first_position;
    {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        churn(&engine, &mut expected, 0);
        first_position = engine.stats().partitions[0].keylog_end;
    }
    {
        let engine = StorageEngine::open(config(dir.path())).expect("reopen");
        churn(&engine, &mut expected, 20);
    }
    let p0 = dir.path().join("p000");
    let flip = |name: &str| {
        let path = p0.join(name);
        let mut bytes = std::fs::read(&path).expect("read checkpoint");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        std::fs::write(&path, bytes).expect("write checkpoint");
    };
    // A torn new checkpoint left by a crash is never looked at.
    std::fs::write(p0.join("checkpoint.tmp"), b"SKVCKPT1 torn").expect("tmp");
    flip("checkpoint");
    {
        let engine = StorageEngine::open(config(dir.path())).expect("open past a corrupt one");
        let report = engine.recovery_report()[0];
        assert_eq!(report.checkpoints_passed_over, 1);
        assert_eq!(report.checkpoint_position, Some(first_position));
        check(&engine, &expected);
        check_directory(&engine, &expected);
        engine.sync().expect("sync");
        // Dropped without a clean close: the damaged files stay as they are.
        std::mem::forget(engine);
    }
    // The lock of the forgotten engine is held by this process: a second
    // store on a copy of the directory shows both checkpoints damaged.
    let copy = tempfile::tempdir().expect("tempdir");
    copy_dir(dir.path(), copy.path());
    std::fs::remove_file(copy.path().join("LOCK")).ok();
    let flip_copy = |name: &str| {
        let path = copy.path().join("p000").join(name);
        let mut bytes = std::fs::read(&path).expect("read checkpoint");
        bytes[10] ^= 0x01;
        std::fs::write(&path, bytes).expect("write checkpoint");
    };
    flip_copy("checkpoint.prev");
    let engine = StorageEngine::open(config(copy.path())).expect("open from the whole key log");
    let report = engine.recovery_report()[0];
    assert_eq!(report.checkpoints_passed_over, 2);
    assert_eq!(report.checkpoint_position, None);
    check(&engine, &expected);
    check_directory(&engine, &expected);
}

/// Key-log chunk files of partition directory `partition`, by index.
fn keylog_chunks(partition: &Path) -> Vec<u64> {
    let mut chunks: Vec<u64> = std::fs::read_dir(partition)
        .expect("partition dir")
        .filter_map(|e| {
            let name = e.expect("entry").file_name().into_string().ok()?;
            name.strip_prefix("key-")?
                .strip_suffix(".log")?
                .parse()
                .ok()
        })
        .collect();
    chunks.sort_unstable();
    chunks
}

/// Entries an export of `partition` from the start yields.
fn exported_entries(engine: &StorageEngine, partition: usize) -> u64 {
    exported_entries_from(engine, partition, 0)
}

#[test]
fn key_log_chunks_below_the_previous_checkpoint_go_and_exports_start_from_the_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut expected = Expected::new();
    let mut written = 0u64;
    // Each open overwrites 300 keys 20 times (small values, so the key log
    // grows by chunks) and closes cleanly, leaving a checkpoint.
    let mut positions = Vec::new();
    for round in 0..3u64 {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        for r in 0..20 {
            for i in 0..300u32 {
                let key = format!("key-{i:04}").into_bytes();
                let value = value_for(&key, round * 100 + r, 16);
                engine.put(i as usize % 2, &key, &value).expect("put");
                expected.insert(key, Some(value));
                written += 1;
            }
        }
        for i in (round as u32..300).step_by(13) {
            let key = format!("key-{i:04}").into_bytes();
            engine.delete((i as usize + 1) % 2, &key).expect("delete");
            expected.insert(key, None);
            written += 1;
        }
        positions.push(engine.stats().partitions[0].keylog_end);
    }
    let p0 = dir.path().join("p000");
    let chunk_bytes = 64 << 10;
    // The third close made the second checkpoint the previous one: every
    // chunk wholly below it is gone, and none at or above.
    let chunks = keylog_chunks(&p0);
    assert_eq!(
        chunks[0],
        positions[1] / chunk_bytes,
        "{chunks:?} {positions:?}"
    );
    assert!(chunks[0] >= 2, "{chunks:?}");
    assert!(chunks.windows(2).all(|w| w[1] == w[0] + 1));

    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    let report = engine.recovery_report()[0];
    assert_eq!(report.checkpoint_position, Some(positions[2]));
    let stats = engine.stats();
    assert_eq!(stats.partitions[0].keylog_start, chunks[0] * chunk_bytes);
    check(&engine, &expected);
    check_directory(&engine, &expected);
    // An export yields the checkpoint's entries, as many as the stats say:
    // the keys, not the history.
    let mut exported = 0;
    for p in 0..2 {
        let entries = exported_entries(&engine, p);
        assert_eq!(entries, stats.partitions[p].keylog_entries, "partition {p}");
        exported += entries;
    }
    assert!(exported <= 2 * 300 + 2, "{exported} of {written}");
    // Writes after the checkpoint come after its entries in an export, and
    // count.
    churn(&engine, &mut expected, 50);
    let stats = engine.stats();
    for p in 0..2 {
        assert_eq!(
            exported_entries(&engine, p),
            stats.partitions[p].keylog_entries
        );
    }
    check(&engine, &expected);
    drop(engine);

    // With the key log below them gone, a store whose two checkpoints are
    // both damaged is refused with the reason, not opened with keys lost.
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
    drop(engine);
    for name in ["checkpoint", "checkpoint.prev"] {
        let path = p0.join(name);
        let mut bytes = std::fs::read(&path).expect("read checkpoint");
        bytes[70] ^= 0x01;
        std::fs::write(&path, bytes).expect("write checkpoint");
    }
    let message = StorageEngine::open(config(dir.path()))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        message.contains("no checkpoint can be opened") && message.contains("was deleted"),
        "{message}"
    );
}

/// Entries an export of `partition` from the start yields, of the frames
/// holding an entry with a sequence number of at least `min_seq`.
fn exported_entries_from(engine: &StorageEngine, partition: usize, min_seq: u64) -> u64 {
    let mut entries = 0;
    for_each_exported_frame(engine, partition, min_seq, |frame| {
        entries += frame.iter().count() as u64;
    });
    entries
}

#[test]
fn an_export_past_what_the_deleted_chunks_held_reads_the_key_log_kept_not_the_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checkpointing = config(dir.path());
    // Each collection pass also checkpoints what was appended since.
    checkpointing.gc.checkpoint_every_keylog_bytes = 1;
    let engine = StorageEngine::open(checkpointing).expect("open");
    let mut expected = Expected::new();
    let overwrite = |engine: &StorageEngine, expected: &mut Expected, round: u64| {
        for r in 0..10 {
            for i in 0..300u32 {
                let key = format!("key-{i:04}").into_bytes();
                let value = value_for(&key, round * 100 + r, 16);
                engine.put(0, &key, &value).expect("put");
                expected.insert(key, Some(value));
            }
        }
    };
    overwrite(&engine, &mut expected, 0);
    engine.collect_garbage(100).expect("pass and checkpoint");
    overwrite(&engine, &mut expected, 1);
    engine.collect_garbage(100).expect("pass and checkpoint");
    // Ten new keys, then the checkpoint that deletes the chunks below the
    // previous one: the ten are in the key log kept, and in the checkpoint.
    let from_seq = engine.stats().next_seq;
    for i in 0..10u32 {
        let key = format!("new-{i}").into_bytes();
        engine.put(0, &key, b"fresh").expect("put");
        expected.insert(key, Some(b"fresh".to_vec()));
    }
    engine.collect_garbage(100).expect("pass and checkpoint");
    let stats = engine.stats();
    assert!(
        stats.partitions[0].keylog_start > 0,
        "{:?}",
        stats.partitions[0]
    );
    assert!(stats.partitions[0].checkpoint_seq >= from_seq + 9);
    // One single-entry frame per new key, and nothing of the checkpoint,
    // whose frames hold hundreds of keys each.
    assert_eq!(exported_entries_from(&engine, 0, from_seq), 10);
    // From the start, the checkpoint's entries: every key once.
    assert_eq!(exported_entries_from(&engine, 0, 0), 310);
    check(&engine, &expected);
    drop(engine);
    let engine = StorageEngine::open(config(dir.path())).expect("reopen");
    check(&engine, &expected);
}
