//! Deletes and expires that checkpoints drop, and only when no older put
//! of their key is left anywhere a rebuild reads (the bug Bitcask #82 and
//! Badger #2286 shipped): across clean stops, while serving with periodic
//! checkpoints, with a delete still under way as a checkpoint is made, and
//! on every fallback a damaged checkpoint leaves.

mod support;

use std::collections::HashMap;
use std::path::Path;

use storage_node::{StorageConfig, StorageEngine, WriteAck, WriteOp};
use support::faults::{FaultDisk, FaultPlan, Files, Op};
use support::store::{
    Expected, check, check_directory, config, copy_dir, exported_by_key, fill_key_logs,
    fill_key_logs_of,
};
use support::value_for;

#[test]
fn a_delete_goes_only_once_no_older_put_of_its_key_is_left_and_none_ever_comes_back() {
    use splitkv_common::record::EntryKind;
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let open = || {
        StorageEngine::open_with_disk(
            config(dir.path()),
            FaultDisk::new(std::sync::Arc::clone(&plan)),
        )
        .expect("open")
    };
    let mut expected = Expected::new();
    // Clean closes until both key logs have lost their first chunks.
    for round in 0..3 {
        let engine = open();
        fill_key_logs(&engine, &mut expected, round);
    }
    {
        let engine = open();
        let stats = engine.stats();
        assert!(
            stats.partitions.iter().all(|p| p.keylog_start > 0),
            "{stats:?}"
        );
    }
    // Keys put through one partition and deleted through the other, both
    // ways round; then partition 0 fails to make its checkpoints for four
    // closes, as if the node had crashed before it each time, so that the
    // key log after its checkpoint keeps the puts of `victim-0-*`.
    let victims: Vec<(Vec<u8>, usize)> = (0..40u32)
        .map(|i| {
            (
                format!("victim-{}-{i:02}", i % 2).into_bytes(),
                (i % 2) as usize,
            )
        })
        .collect();
    {
        let engine = open();
        for (key, put_partition) in &victims {
            engine
                .put(*put_partition, key, &value_for(key, 1, 300))
                .expect("put");
        }
        fill_key_logs(&engine, &mut expected, 10);
        for (key, put_partition) in &victims {
            engine.delete(1 - put_partition, key).expect("delete");
            expected.insert(key.clone(), None);
        }
        engine.collect_garbage(50).expect("collect");
        plan.fail_now(
            Op::SyncData,
            Files::NamedIn("p000", "checkpoint.tmp"),
            libc::EIO,
        );
    }
    plan.stop_failing(Op::SyncData);
    let holds = |by_key: &HashMap<Vec<u8>, Vec<EntryKind>>, partition: usize, kind: EntryKind| {
        victims
            .iter()
            .filter(|(key, put_partition)| {
                let in_partition = if kind == EntryKind::Put {
                    *put_partition == partition
                } else {
                    *put_partition != partition
                };
                in_partition && by_key.get(key).is_some_and(|kinds| kinds.contains(&kind))
            })
            .count()
    };
    let mut dropped_at = None;
    for round in 0..8u64 {
        let lagging = round < 3;
        let engine = open();
        // Whatever the checkpoints hold, no deleted key is back.
        check(&engine, &expected);
        check_directory(&engine, &expected);
        let exports = [exported_by_key(&engine, 0), exported_by_key(&engine, 1)];
        let deletes_kept = holds(&exports[1], 1, EntryKind::Delete);
        if round <= 5 {
            // A rebuild of partition 0 could still read the puts of its
            // victims (from the key log after its checkpoint, then after
            // the one it would fall back to), so partition 1 keeps their
            // deletes: until partition 0 has made two checkpoints.
            assert_eq!(deletes_kept, 20, "round {round}");
        }
        if deletes_kept == 0 && dropped_at.is_none() {
            dropped_at = Some(round);
        }
        fill_key_logs(&engine, &mut expected, 20 + round);
        engine.collect_garbage(50).expect("collect");
        if lagging {
            plan.fail_now(
                Op::SyncData,
                Files::NamedIn("p000", "checkpoint.tmp"),
                libc::EIO,
            );
        }
        drop(engine);
        plan.stop_failing(Op::SyncData);
    }
    let dropped_at = dropped_at.expect("the deletes went");
    assert_eq!(dropped_at, 6);
    let engine = open();
    check(&engine, &expected);
    for partition in 0..2 {
        let by_key = exported_by_key(&engine, partition);
        for (key, _) in &victims {
            assert!(
                !by_key.contains_key(key),
                "partition {partition} still holds {}: {:?}",
                String::from_utf8_lossy(key),
                by_key[key]
            );
        }
    }
    drop(engine);
    // Either partition falling back to its previous checkpoint brings no
    // deleted key back either (each on a copy of the data directory).
    for partition in ["p000", "p001"] {
        let copy = tempfile::tempdir().expect("tempdir");
        copy_dir(dir.path(), copy.path());
        let path = copy.path().join(partition).join("checkpoint");
        let mut bytes = std::fs::read(&path).expect("read checkpoint");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        std::fs::write(&path, bytes).expect("write checkpoint");
        let engine = StorageEngine::open(config(copy.path())).expect("open past a corrupt one");
        assert_eq!(
            engine
                .recovery_report()
                .iter()
                .map(|r| r.checkpoints_passed_over)
                .sum::<u32>(),
            1
        );
        check(&engine, &expected);
        check_directory(&engine, &expected);
    }
}

#[test]
fn a_delete_stays_while_a_partition_could_still_be_rebuilt_from_its_whole_key_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut expected = Expected::new();
    let key = b"put-in-0-deleted-in-1".to_vec();
    {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        engine.put(0, &key, b"old").expect("put");
        engine.delete(1, &key).expect("delete");
        expected.insert(key.clone(), None);
    }
    // Partition 1's key log loses chunk after chunk; partition 0's keeps
    // its first.
    for round in 0..5 {
        let engine = StorageEngine::open(config(dir.path())).expect("open");
        fill_key_logs_of(&engine, &[1], &mut expected, round);
        engine
            .put(0, b"small", &value_for(b"small", round, 8))
            .expect("put");
        expected.insert(b"small".to_vec(), Some(value_for(b"small", round, 8)));
    }
    let engine = StorageEngine::open(config(dir.path())).expect("open");
    let stats = engine.stats();
    assert_eq!(stats.partitions[0].keylog_start, 0);
    assert!(stats.partitions[1].keylog_start > 0, "{stats:?}");
    assert!(
        exported_by_key(&engine, 1).contains_key(&key),
        "the delete is kept"
    );
    assert!(
        !exported_by_key(&engine, 0).contains_key(&key),
        "the put it superseded is swept out of partition 0's checkpoint"
    );
    drop(engine);
    // With both of partition 0's checkpoints damaged, its whole key log is
    // read, put included: the delete still shadows it.
    for name in ["checkpoint", "checkpoint.prev"] {
        let path = dir.path().join("p000").join(name);
        let mut bytes = std::fs::read(&path).expect("read checkpoint");
        bytes[70] ^= 0x01;
        std::fs::write(&path, bytes).expect("write checkpoint");
    }
    let engine = StorageEngine::open(config(dir.path())).expect("open from the whole key log");
    assert_eq!(engine.recovery_report()[0].checkpoint_position, None);
    check(&engine, &expected);
    check_directory(&engine, &expected);
}

/// [`config`] with a checkpoint of every partition that appended anything
/// at each collection pass.
fn checkpointing_at_each_pass(dir: &Path) -> StorageConfig {
    let mut config = config(dir);
    config.gc.checkpoint_every_keylog_bytes = 1;
    config
}

/// Passes (each with its checkpoints) over key logs filled anew, until
/// both partitions' key logs have lost their first chunk.
fn pass_until_first_chunks_are_gone(engine: &StorageEngine, expected: &mut Expected) {
    for round in 0..10 {
        if engine.stats().partitions.iter().all(|p| p.keylog_start > 0) {
            return;
        }
        fill_key_logs(engine, expected, round);
        engine.collect_garbage(100).expect("pass");
    }
    panic!("key logs kept their first chunk: {:?}", engine.stats());
}

/// Of `victims` (key, partition its put went to; its delete went to the
/// other), how many deletes the exports of their delete partitions hold.
fn deletes_held(engine: &StorageEngine, victims: &[(Vec<u8>, usize)]) -> usize {
    use splitkv_common::record::EntryKind;
    let exports = [exported_by_key(engine, 0), exported_by_key(engine, 1)];
    victims
        .iter()
        .filter(|(key, put_partition)| {
            exports[1 - put_partition]
                .get(key)
                .is_some_and(|kinds| kinds.contains(&EntryKind::Delete))
        })
        .count()
}

/// Opens a copy of `dir` (as a crash would leave it: the engine there is
/// still open) with partition `damaged`'s current checkpoint corrupted, if
/// given, and checks every key and the directory.
fn check_crash_copy(dir: &Path, damaged: Option<&str>, expected: &Expected) {
    let copy = tempfile::tempdir().expect("tempdir");
    copy_dir(dir, copy.path());
    std::fs::remove_file(copy.path().join("LOCK")).expect("the copy is not locked");
    if let Some(partition) = damaged {
        let path = copy.path().join(partition).join("checkpoint");
        let mut bytes = std::fs::read(&path).expect("read checkpoint");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        std::fs::write(&path, bytes).expect("write checkpoint");
    }
    let engine = StorageEngine::open(config(copy.path())).expect("open the copy");
    let passed_over: u32 = engine
        .recovery_report()
        .iter()
        .map(|r| r.checkpoints_passed_over)
        .sum();
    assert_eq!(passed_over, u32::from(damaged.is_some()), "{damaged:?}");
    check(&engine, expected);
    check_directory(&engine, expected);
}

#[test]
fn while_serving_a_delete_goes_once_every_partition_checkpointed_twice_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = StorageEngine::open(checkpointing_at_each_pass(dir.path())).expect("open");
    let mut expected = Expected::new();
    pass_until_first_chunks_are_gone(&engine, &mut expected);
    let victims: Vec<(Vec<u8>, usize)> = (0..40u32)
        .map(|i| (format!("victim-{i:02}").into_bytes(), (i % 2) as usize))
        .collect();
    for (key, put_partition) in &victims {
        engine
            .put(*put_partition, key, &value_for(key, 1, 300))
            .expect("put");
    }
    for (key, put_partition) in &victims {
        engine.delete(1 - put_partition, key).expect("delete");
        expected.insert(key.clone(), None);
    }
    // The first pass's checkpoints are swept below the deletes; the floor
    // passes them once every checkpoint a partition could open from was
    // made after them: at the third pass, with no clean stop.
    let mut held = Vec::new();
    for round in 0..4 {
        fill_key_logs(&engine, &mut expected, 100 + round);
        engine.collect_garbage(100).expect("pass");
        held.push(deletes_held(&engine, &victims));
        check(&engine, &expected);
        check_directory(&engine, &expected);
    }
    assert_eq!(held, [40, 40, 0, 0]);
    // Neither partition holds anything of the victims any more.
    for partition in 0..2 {
        let by_key = exported_by_key(&engine, partition);
        assert!(victims.iter().all(|(key, _)| !by_key.contains_key(key)));
    }
    // A crash now, and a crash that finds either partition's current
    // checkpoint damaged, bring none back.
    check_crash_copy(dir.path(), None, &expected);
    check_crash_copy(dir.path(), Some("p000"), &expected);
    check_crash_copy(dir.path(), Some("p001"), &expected);
}

#[test]
fn a_delete_under_way_as_a_checkpoint_is_made_holds_back_that_checkpoints_sweep() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let engine = StorageEngine::open_with_disk(
        checkpointing_at_each_pass(dir.path()),
        FaultDisk::new(std::sync::Arc::clone(&plan)),
    )
    .expect("open");
    let mut expected = Expected::new();
    pass_until_first_chunks_are_gone(&engine, &mut expected);
    let key = b"put-in-1-deleted-in-0".to_vec();
    engine.put(1, &key, b"old").expect("put");
    let small = |engine: &StorageEngine, expected: &mut Expected, round: u64| {
        for partition in 0..2 {
            let name = format!("small-{partition}").into_bytes();
            let value = value_for(&name, round, 8);
            engine.put(partition, &name, &value).expect("put");
            expected.insert(name, Some(value));
        }
    };
    small(&engine, &mut expected, 0);
    engine.collect_garbage(100).expect("pass");

    // Partition 0 takes the delete's sequence number, then its batch waits
    // on a large write: the delete is under way, in no key log yet.
    let large = value_for(b"large", 0, 100 << 10);
    let next_seq = engine.stats().next_seq;
    plan.pause_direct_writes_now();
    std::thread::scope(|scope| {
        let batch = scope.spawn(|| {
            let ops = [
                WriteOp::Delete { key: &key },
                WriteOp::Put {
                    key: b"large",
                    value: &large,
                    expire_at_ms: 0,
                },
            ];
            let mut acks = [WriteAck::default(); 2];
            engine.write(0, None, &ops, &mut acks).map(|()| acks)
        });
        while engine.stats().next_seq < next_seq + 2 {
            assert!(!batch.is_finished(), "the batch cannot finish while paused");
            std::thread::yield_now();
        }
        // Both partitions checkpoint while the delete is under way: the
        // put it will supersede is still live in partition 1's.
        small(&engine, &mut expected, 1);
        engine
            .collect_garbage(100)
            .expect("pass while the delete is under way");
        plan.release_paused_writes();
        let acks = batch.join().expect("batch").expect("the batch commits");
        assert_eq!(acks[0].seq, next_seq, "the delete took the number first");
    });
    expected.insert(key.clone(), None);
    expected.insert(b"large".to_vec(), Some(large));

    // Both checkpoint again (partition 1's sweeps the put out and keeps
    // the one made meanwhile as its fallback); then partition 1 fails its
    // checkpoint, so that one stays its fallback while partition 0 makes
    // its third since the delete began.
    small(&engine, &mut expected, 2);
    engine.collect_garbage(100).expect("pass");
    small(&engine, &mut expected, 3);
    plan.fail_now(
        Op::SyncData,
        Files::NamedIn("p001", "checkpoint.tmp"),
        libc::EIO,
    );
    let err = engine
        .collect_garbage(100)
        .expect_err("partition 1's checkpoint fails");
    assert!(err.to_string().contains("partition 1"), "{err}");
    plan.stop_failing(Op::SyncData);
    check(&engine, &expected);
    check_directory(&engine, &expected);
    // Partition 1 falling back to the checkpoint made while the delete was
    // under way reads the put: partition 0 must still hold the delete.
    assert!(
        exported_by_key(&engine, 0).contains_key(&key),
        "partition 0 dropped the delete while a fallback of partition 1 holds the put"
    );
    check_crash_copy(dir.path(), None, &expected);
    check_crash_copy(dir.path(), Some("p001"), &expected);
}
