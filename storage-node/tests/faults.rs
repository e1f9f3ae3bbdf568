//! Faults injected through the disk trait, and damage done to the files
//! between two runs: a full disk refuses puts (or the writes that need
//! room) until there is room again, losing nothing and poisoning nothing;
//! an I/O error in a flush, a preallocation or a sync poisons the engine
//! without losing anything acknowledged; a read error fails that read
//! alone; recovery onto a full disk opens read-only; a torn or corrupt
//! key-log frame is cut off and never served; and in `sync` durability a
//! power cut loses nothing acknowledged.

mod support;

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use storage_node::{
    Durability, IoEngineKind, OsDisk, StorageConfig, StorageEngine, StorageError, WireError,
    WriteAck, WriteOp,
};
use support::faults::{FaultDisk, FaultPlan, Files, Op, PowerCutDisk};
use support::{build_index, get, small_config, value_for};

const PARTITIONS: usize = 2;

/// Acknowledged (key, value) pairs.
type Acked = Vec<(Vec<u8>, Vec<u8>)>;

/// Puts the numbered keys `keys` with `len`-byte values until one fails;
/// returns the acknowledged ones and the error, if one came.
fn put_keys(
    engine: &StorageEngine,
    keys: Range<usize>,
    len: usize,
) -> (Acked, Option<StorageError>) {
    let mut acked = Vec::new();
    for i in keys {
        let key = format!("key-{i:06}").into_bytes();
        let value = value_for(&key, 0, len);
        match engine.put(i % PARTITIONS, &key, &value) {
            Ok(_) => acked.push((key, value)),
            Err(e) => return (acked, Some(e)),
        }
    }
    (acked, None)
}

/// Puts numbered keys from `start` until one fails; returns the
/// acknowledged ones and the error.
fn put_until_error(engine: &StorageEngine, start: usize, len: usize) -> (Acked, StorageError) {
    let (acked, err) = put_keys(engine, start..start + 100_000, len);
    (acked, err.expect("an error within 100000 puts"))
}

fn assert_all_readable(engine: &StorageEngine, acked: &[(Vec<u8>, Vec<u8>)]) {
    let index = build_index(engine);
    for (key, value) in acked {
        assert_eq!(
            get(engine, &index, key).as_ref(),
            Some(value),
            "key {}",
            String::from_utf8_lossy(key)
        );
    }
}

/// Asserts that `key` reads as missing (never put, or deleted).
fn assert_missing(engine: &StorageEngine, key: &[u8]) {
    let index = build_index(engine);
    assert_eq!(
        get(engine, &index, key),
        None,
        "key {} is served",
        String::from_utf8_lossy(key)
    );
}

fn assert_none_served(engine: &StorageEngine, keys: &[Vec<u8>]) {
    let index = build_index(engine);
    for key in keys {
        assert!(
            !index.contains_key(key),
            "key {} is served",
            String::from_utf8_lossy(key)
        );
    }
}

/// An I/O error (EIO) in a flush, a preallocation or a sync: the put that
/// meets it fails (or a later one, once the fault has poisoned the engine),
/// the engine refuses writes with an error that names the fault, reads go
/// on, and a reopen recovers everything acknowledged.
///
/// `inject` arms the fault after 300 good puts and may put more itself (it
/// returns what it got acknowledged); then puts go on until one fails.
/// Returns the plan, for the caller to check which operations failed.
fn fault_poisons_without_loss(
    durability: Durability,
    inject: impl Fn(&StorageEngine, &FaultPlan) -> Acked,
) -> Arc<FaultPlan> {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let mut config = small_config(dir.path(), PARTITIONS);
    config.durability = durability;
    let mut acked;
    {
        let engine =
            StorageEngine::open_with_disk(config.clone(), FaultDisk::new(Arc::clone(&plan)))
                .expect("open");
        let (mut all, err) = put_keys(&engine, 0..300, 500);
        if let Some(err) = err {
            panic!("put before the fault: {err}");
        }
        all.extend(inject(&engine, &plan));
        let (more, err) = put_until_error(&engine, 300, 500);
        all.extend(more);
        acked = all;
        let message = err.to_string();
        assert!(
            matches!(
                &err,
                StorageError::Io { .. } | StorageError::Refused(WireError::Poisoned { .. })
            ),
            "unexpected error {message}"
        );
        let fault_text = "Input/output error";
        assert!(message.contains(fault_text), "{message}");
        let again = engine
            .put(0, b"after", b"the fault")
            .expect_err("poisoned engine refuses writes");
        assert!(
            matches!(again, StorageError::Refused(WireError::Poisoned { .. })),
            "{again}"
        );
        let refusal = again.to_string();
        assert!(refusal.contains(fault_text), "{refusal}");
        assert_eq!(engine.stats().refusing_writes, Some(refusal));
        assert_all_readable(&engine, &acked);
    }
    config.durability = Durability::Mmap;
    let engine = StorageEngine::open(config).expect("reopen");
    assert_all_readable(&engine, &acked);
    engine
        .put(0, b"after", b"reopen")
        .expect("writable again after reopen");
    acked.push((b"after".to_vec(), b"reopen".to_vec()));
    assert_all_readable(&engine, &acked);
    plan
}

fn fail_value_log_writes(errno: i32) -> impl Fn(&StorageEngine, &FaultPlan) -> Acked {
    move |_, plan| {
        plan.fail_now(Op::DirectWrite, Files::ValueLog, errno);
        Vec::new()
    }
}

/// Opens `config` through a fault disk following `plan` and puts 300 keys,
/// every one acknowledged.
fn open_with_300_keys(config: &StorageConfig, plan: &Arc<FaultPlan>) -> (StorageEngine, Acked) {
    let engine = StorageEngine::open_with_disk(config.clone(), FaultDisk::new(Arc::clone(plan)))
        .expect("open");
    let (acked, err) = put_keys(&engine, 0..300, 500);
    assert!(err.is_none(), "put before the fault: {err:?}");
    (engine, acked)
}

/// Makes the value log find the disk full: its preallocations and its
/// writes fail with ENOSPC from now on.
fn fill_the_disk_under_the_value_log(plan: &FaultPlan) {
    plan.fail_now(Op::Allocate, Files::ValueLog, libc::ENOSPC);
    plan.fail_now(Op::DirectWrite, Files::ValueLog, libc::ENOSPC);
}

/// Gives the value log room again.
fn free_the_disk(plan: &FaultPlan) {
    plan.stop_failing(Op::Allocate);
    plan.stop_failing(Op::DirectWrite);
}

/// Asserts that `err` is a refusal as disk full (not a poisoned engine)
/// whose message contains `text`.
fn assert_disk_full(err: &StorageError, text: &str) {
    let message = err.to_string();
    assert!(
        matches!(err, StorageError::Refused(WireError::DiskFull { .. })),
        "not a disk-full refusal: {message}"
    );
    assert!(message.contains("disk is full"), "{message}");
    assert!(message.contains(text), "{message}");
}

/// Waits until the engine stops refusing writes (the stalled flushes went
/// through), failing the test after 30 s.
fn wait_until_accepting_writes(engine: &StorageEngine) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while let Some(refusal) = engine.stats().refusing_writes {
        assert!(
            std::time::Instant::now() < deadline,
            "still refusing writes 30 s after the disk has room: {refusal}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Waits until `plan` has failed `n` value-log operations (writes or
/// preallocations), failing the test after 30 s.
fn wait_until_value_log_failures(plan: &FaultPlan, n: usize) {
    let failed = || {
        plan.failed(Op::Allocate, Files::ValueLog) + plan.failed(Op::DirectWrite, Files::ValueLog)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while failed() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} value-log operations failed, waiting for {n}",
            failed()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A full disk that the reserve did not foresee, met by a flush: the flush
/// keeps its buffer and is retried, puts are refused as disk full (the
/// engine is not poisoned), every acknowledged put stays readable and
/// deletes go on; once there is room the flush goes through, puts resume,
/// and a reopen has everything acknowledged and nothing deleted.
fn a_full_disk_in_a_flush_refuses_puts_until_there_is_room(durability: Durability) {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let mut config = small_config(dir.path(), PARTITIONS);
    config.durability = durability;
    let mut acked;
    let deleted;
    {
        let (engine, all) = open_with_300_keys(&config, &plan);
        acked = all;
        fill_the_disk_under_the_value_log(&plan);
        let (more, err) = put_until_error(&engine, 300, 500);
        acked.extend(more);
        assert_disk_full(&err, "failed for want of space");
        let refusal = engine.stats().refusing_writes.expect("refusing puts");
        assert!(refusal.contains("failed for want of space"), "{refusal}");
        assert_all_readable(&engine, &acked);

        // Deletes need no room in the value log: they go on.
        let (key, _) = acked.remove(0);
        engine.delete(0, &key).expect("a delete on a full disk");
        deleted = key;
        assert_missing(&engine, &deleted);

        // The flush is retried while the disk stays full.
        let failed_so_far = plan.failed(Op::Allocate, Files::ValueLog)
            + plan.failed(Op::DirectWrite, Files::ValueLog);
        wait_until_value_log_failures(&plan, failed_so_far + 2);
        let again = engine
            .put(1, b"still", b"full")
            .expect_err("puts stay refused while the disk is full");
        assert_disk_full(&again, "failed for want of space");

        free_the_disk(&plan);
        wait_until_accepting_writes(&engine);
        let (more, err) = put_keys(&engine, 100_000..100_600, 500);
        assert!(err.is_none(), "put after the disk has room: {err:?}");
        acked.extend(more);
        assert_all_readable(&engine, &acked);
        assert_missing(&engine, &deleted);
        engine.close().expect("close once the disk has room");
    }
    let engine = StorageEngine::open(config).expect("reopen");
    assert!(engine.stats().refusing_writes.is_none());
    assert_all_readable(&engine, &acked);
    assert_missing(&engine, &deleted);
}

#[test]
fn a_full_disk_in_a_flush_refuses_puts_until_there_is_room_and_loses_nothing() {
    a_full_disk_in_a_flush_refuses_puts_until_there_is_room(Durability::Mmap);
}

#[test]
fn a_full_disk_in_a_flush_in_sync_durability_refuses_puts_until_there_is_room() {
    a_full_disk_in_a_flush_refuses_puts_until_there_is_room(Durability::Sync);
}

#[test]
fn a_close_on_a_full_disk_fails_and_the_next_open_replays_the_unflushed_buffers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let config = small_config(dir.path(), PARTITIONS);
    let (acked, deleted) = {
        let (engine, mut acked) = open_with_300_keys(&config, &plan);
        fill_the_disk_under_the_value_log(&plan);
        let (more, err) = put_until_error(&engine, 300, 500);
        acked.extend(more);
        assert_disk_full(&err, "failed for want of space");
        let (deleted, _) = acked.remove(1);
        engine.delete(1, &deleted).expect("a delete on a full disk");
        let err = engine
            .close()
            .expect_err("a close cannot flush onto a full disk");
        let message = err.to_string();
        assert!(message.contains("disk is full"), "{message}");
        (acked, deleted)
    };
    let engine = StorageEngine::open(config).expect("reopen with room");
    let replayed: usize = engine
        .recovery_report()
        .iter()
        .map(|r| r.replayed_buffers)
        .sum();
    assert!(
        replayed > 0,
        "the buffers the close could not flush are replayed"
    );
    assert!(engine.stats().refusing_writes.is_none());
    assert_all_readable(&engine, &acked);
    assert_missing(&engine, &deleted);
}

#[test]
fn an_io_error_during_a_flush_poisons_and_loses_nothing() {
    let plan = fault_poisons_without_loss(Durability::Mmap, fail_value_log_writes(libc::EIO));
    assert!(plan.failed(Op::DirectWrite, Files::ValueLog) > 0);
}

/// Puts values large enough to make the value log grow past its
/// preallocation while the key log's preallocations fail (those
/// allocations must go through); returns them.
fn put_large_values_while_the_key_log_cannot_grow(
    engine: &StorageEngine,
    plan: &FaultPlan,
) -> Acked {
    let before = plan.succeeded(Op::Allocate, Files::ValueLog);
    let mut acked = Vec::new();
    for i in 0..3 {
        let key = format!("large-{i}").into_bytes();
        let value = value_for(&key, 0, 12 << 20);
        engine
            .put(0, &key, &value)
            .expect("a large put while only the key log's allocations fail");
        acked.push((key, value));
    }
    assert!(
        plan.succeeded(Op::Allocate, Files::ValueLog) > before,
        "the value log grew (and allocated) while the key log's allocations failed"
    );
    acked
}

#[test]
fn an_io_error_during_key_log_preallocation_poisons_and_loses_nothing() {
    let plan = fault_poisons_without_loss(Durability::Mmap, |engine, plan| {
        plan.fail_now(Op::Allocate, Files::KeyLog, libc::EIO);
        put_large_values_while_the_key_log_cannot_grow(engine, plan)
    });
    assert!(plan.failed(Op::Allocate, Files::KeyLog) > 0);
    assert_eq!(
        plan.failed(Op::Allocate, Files::ValueLog),
        0,
        "only the key log's allocations were failed"
    );
}

#[test]
fn a_full_disk_when_the_key_log_needs_a_chunk_fails_those_writes_until_there_is_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let config = small_config(dir.path(), PARTITIONS);
    let mut acked;
    {
        let (engine, all) = open_with_300_keys(&config, &plan);
        acked = all;
        plan.fail_now(Op::Allocate, Files::KeyLog, libc::ENOSPC);
        acked.extend(put_large_values_while_the_key_log_cannot_grow(
            &engine, &plan,
        ));
        let (more, err) = put_until_error(&engine, 300, 500);
        let refused_index = 300 + more.len();
        acked.extend(more);
        assert_disk_full(&err, "appending to the key log of partition");
        assert!(plan.failed(Op::Allocate, Files::KeyLog) > 0);
        let refused = format!("key-{refused_index:06}").into_bytes();
        let partition = refused_index % PARTITIONS;
        assert_none_served(&engine, std::slice::from_ref(&refused));

        // The same put fails the same way while the disk stays full: the
        // engine is not poisoned.
        let value = value_for(&refused, 0, 500);
        let again = engine
            .put(partition, &refused, &value)
            .expect_err("still no room for the chunk");
        assert_disk_full(&again, "appending to the key log of partition");
        assert_all_readable(&engine, &acked);

        plan.stop_failing(Op::Allocate);
        engine
            .put(partition, &refused, &value)
            .expect("the put goes through once there is room");
        acked.push((refused, value));
        let (more, err) = put_keys(&engine, 100_000..100_600, 500);
        assert!(err.is_none(), "put after the disk has room: {err:?}");
        acked.extend(more);
        assert_all_readable(&engine, &acked);
        engine.close().expect("close");
    }
    let engine = StorageEngine::open(config).expect("reopen");
    assert_all_readable(&engine, &acked);
}

#[test]
fn a_failed_msync_in_sync_durability_poisons_and_loses_nothing() {
    let plan = fault_poisons_without_loss(Durability::Sync, |_, plan| {
        plan.fail_now(Op::MappingFlush, Files::All, libc::EIO);
        Vec::new()
    });
    assert!(plan.failed(Op::MappingFlush, Files::All) > 0);
}

#[test]
fn a_failed_fdatasync_in_sync_durability_poisons_and_loses_nothing() {
    let plan = fault_poisons_without_loss(Durability::Sync, |_, plan| {
        plan.fail_now(Op::SyncData, Files::ValueLog, libc::EIO);
        Vec::new()
    });
    assert!(plan.failed(Op::SyncData, Files::ValueLog) > 0);
}

#[test]
fn a_read_error_fails_that_read_and_leaves_the_data_intact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config(dir.path(), PARTITIONS);
    {
        let engine = StorageEngine::open(config.clone()).expect("open");
        let (_, err) = put_keys(&engine, 0..300, 500);
        assert!(err.is_none());
        // Closing writes every buffer to the value log, so every read below
        // goes to the file.
        engine.close().expect("close");
    }
    let plan = FaultPlan::new();
    let engine = StorageEngine::open_with_disk(config.clone(), FaultDisk::new(Arc::clone(&plan)))
        .expect("reopen");
    let index = build_index(&engine);
    plan.fail_now(Op::Read, Files::ValueLog, libc::EIO);
    for i in 0..10 {
        let key = format!("key-{i:06}").into_bytes();
        let at = index[&key];
        let err = engine
            .read(at.partition, at.offset, at.record_len)
            .expect_err("a failed read is an error");
        let message = err.to_string();
        assert!(
            matches!(&err, StorageError::Io { source, .. } if source.raw_os_error() == Some(libc::EIO)),
            "{message}"
        );
        assert!(message.contains("reading the value log"), "{message}");
    }
    assert_eq!(plan.failed(Op::Read, Files::ValueLog), 10);
    let err = engine
        .read_range(0, 0, 64 << 10)
        .expect_err("a failed range read is an error");
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    assert!(
        engine.stats().refusing_writes.is_none(),
        "a read error does not stop writes"
    );
    engine.put(0, b"during", b"read errors").expect("put");
    plan.stop_failing(Op::Read);
    let mut expected: Acked = (0..300)
        .map(|i| {
            let key = format!("key-{i:06}").into_bytes();
            let value = value_for(&key, 0, 500);
            (key, value)
        })
        .collect();
    expected.push((b"during".to_vec(), b"read errors".to_vec()));
    assert_all_readable(&engine, &expected);
    let range = engine.read_range(0, 0, 64 << 10).expect("range read");
    assert_eq!(range.bytes().len(), 64 << 10);
    drop(engine);
    let engine = StorageEngine::open(config).expect("reopen");
    assert_all_readable(&engine, &expected);
}

/// The small test configuration with `bytes` for copies of recent flushes.
fn with_recent_write_bytes(dir: &Path, bytes: u64) -> StorageConfig {
    let mut config = small_config(dir, PARTITIONS);
    config.recent_write_bytes = bytes;
    config
}

/// Opens `config` on a disk whose value-log reads all fail, after `puts`
/// numbered keys of `len` bytes went in (and many buffers were flushed).
fn with_value_log_reads_failing(
    config: &StorageConfig,
    puts: usize,
    len: usize,
) -> (StorageEngine, Arc<FaultPlan>, Acked) {
    let plan = FaultPlan::new();
    let engine = StorageEngine::open_with_disk(config.clone(), FaultDisk::new(Arc::clone(&plan)))
        .expect("open");
    let (acked, err) = put_keys(&engine, 0..puts, len);
    assert!(err.is_none(), "{err:?}");
    let flushes: u64 = engine.stats().partitions.iter().map(|p| p.flushes).sum();
    // A partition's writer waits for a buffer to be flushed before it
    // seals another: all but its last two buffers are flushed.
    assert!(
        flushes >= 12,
        "the puts filled and flushed buffers: {flushes}"
    );
    plan.fail_now(Op::Read, Files::ValueLog, libc::EIO);
    (engine, plan, acked)
}

#[test]
fn records_flushed_a_moment_ago_are_read_from_memory_not_from_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = with_recent_write_bytes(dir.path(), 4 << 20);
    // 600 records of about 2 KiB: 1.2 MiB through 64 KiB buffers.
    let (engine, plan, acked) = with_value_log_reads_failing(&config, 600, 2000);
    assert_all_readable(&engine, &acked);
    assert_eq!(
        plan.failed(Op::Read, Files::ValueLog),
        0,
        "no read went to the value log"
    );
    let stats = engine.stats();
    // At most two buffers a partition (about 30 records each) were not
    // flushed yet; every other record was read from its copy.
    assert!(
        stats.recent_write_reads >= 450,
        "the flushed records were read from their copies: {}",
        stats.recent_write_reads
    );
    assert!(stats.recent_write_bytes > 0 && stats.recent_write_bytes <= 4 << 20);
    // A window's range read of the same bytes comes from memory too, and
    // holds what the disk holds.
    let ranges: Vec<Vec<u8>> = (0..PARTITIONS)
        .map(|p| {
            let range = engine.read_range(p, 0, 512 << 10).expect("range read");
            assert_eq!(range.bytes().len(), 512 << 10);
            range.bytes().to_vec()
        })
        .collect();
    assert_eq!(plan.failed(Op::Read, Files::ValueLog), 0);
    engine.close().expect("close");
    drop(engine);
    let engine = StorageEngine::open(config).expect("reopen");
    assert_eq!(
        engine.stats().recent_write_bytes,
        0,
        "nothing is held after a reopen"
    );
    for (p, from_memory) in ranges.iter().enumerate() {
        let from_disk = engine.read_range(p, 0, 512 << 10).expect("range read");
        assert!(from_disk.bytes() == &from_memory[..], "partition {p}");
    }
}

#[test]
fn past_its_bound_the_oldest_flushes_are_read_from_the_disk_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = with_recent_write_bytes(dir.path(), 128 << 10);
    let (engine, plan, acked) = with_value_log_reads_failing(&config, 600, 2000);
    let stats = engine.stats();
    assert!(stats.recent_write_bytes <= 128 << 10, "{stats:?}");
    // While the disk fails, the records of the latest flushes still come
    // from their copies (and the newest from the write buffers); the
    // oldest were dropped and their reads meet the disk's error.
    let index = build_index(&engine);
    let mut failed = 0;
    for (key, value) in &acked {
        let at = index[key];
        match engine.read(at.partition, at.offset, at.record_len) {
            Ok(record) => assert_eq!(record.record().value, &value[..]),
            Err(StorageError::Io { .. }) => failed += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let from_copies = engine.stats().recent_write_reads;
    assert!(from_copies > 0, "some records were read from their copies");
    assert!(
        failed > 300,
        "the oldest records were read from the disk: {failed}"
    );
    assert_eq!(plan.failed(Op::Read, Files::ValueLog), failed);
    plan.stop_failing(Op::Read);
    assert_all_readable(&engine, &acked);
    // Range reads over whole partitions take their oldest bytes from the
    // disk and their newest from the copies and the write buffers (the
    // copies held may all be of one partition), and hold what a read of
    // the disk alone holds.
    let ends: Vec<u64> = engine
        .stats()
        .partitions
        .iter()
        .map(|p| p.committed_end)
        .collect();
    let (disk_reads, copies) = (
        plan.succeeded(Op::Read, Files::ValueLog),
        engine.stats().recent_write_reads,
    );
    let mixed: Vec<Vec<u8>> = ends
        .iter()
        .enumerate()
        .map(|(p, &end)| {
            let range = engine.read_range(p, 0, end as usize).expect("range read");
            range.bytes().to_vec()
        })
        .collect();
    assert!(plan.succeeded(Op::Read, Files::ValueLog) > disk_reads);
    assert!(engine.stats().recent_write_reads > copies);
    engine.close().expect("close");
    drop(engine);
    let engine = StorageEngine::open(config).expect("reopen");
    for (p, (&end, mixed)) in ends.iter().zip(&mixed).enumerate() {
        let from_disk = engine.read_range(p, 0, end as usize).expect("range read");
        assert_eq!(mixed.len() as u64, end, "partition {p}");
        assert!(from_disk.bytes() == &mixed[..], "partition {p}");
    }
}

#[test]
fn without_copies_of_recent_flushes_every_flushed_record_is_read_from_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = with_recent_write_bytes(dir.path(), 0);
    let (engine, plan, acked) = with_value_log_reads_failing(&config, 600, 2000);
    let index = build_index(&engine);
    let oldest = index[&acked[0].0];
    let err = engine
        .read(oldest.partition, oldest.offset, oldest.record_len)
        .expect_err("a flushed record is read from the failing disk");
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    plan.stop_failing(Op::Read);
    assert_all_readable(&engine, &acked);
    let stats = engine.stats();
    assert_eq!((stats.recent_write_reads, stats.recent_write_bytes), (0, 0));
    assert!(plan.succeeded(Op::Read, Files::ValueLog) >= 450);
}

#[test]
fn an_unreadable_manifest_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config(dir.path(), PARTITIONS);
    StorageEngine::open(config.clone())
        .expect("create")
        .close()
        .expect("close");
    let plan = FaultPlan::new();
    plan.fail_now(Op::Read, Files::Named("MANIFEST"), libc::EIO);
    let err = StorageEngine::open_with_disk(config.clone(), FaultDisk::new(plan))
        .err()
        .expect("an unreadable manifest refuses the open");
    let message = err.to_string();
    assert!(matches!(err, StorageError::Manifest { .. }), "{message}");
    assert!(message.contains("MANIFEST"), "{message}");
    assert!(message.contains("Input/output error"), "{message}");
    StorageEngine::open(config).expect("opens once the manifest reads");
}

#[test]
fn a_large_write_on_a_full_disk_fails_that_put_until_there_is_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config(dir.path(), PARTITIONS);
    let plan = FaultPlan::new();
    let large = vec![7u8; 300_000];
    {
        let engine =
            StorageEngine::open_with_disk(config.clone(), FaultDisk::new(Arc::clone(&plan)))
                .expect("open");
        engine.put(0, b"small", b"fine").expect("put");
        fill_the_disk_under_the_value_log(&plan);
        let err = engine
            .put(0, b"large", &large)
            .expect_err("large write fails");
        assert_disk_full(&err, "-byte record to the value log of partition 0");
        let index = build_index(&engine);
        assert_eq!(
            get(&engine, &index, b"small").as_deref(),
            Some(&b"fine"[..])
        );
        assert_eq!(
            get(&engine, &index, b"large"),
            None,
            "the failed put is not there"
        );
        // The large put sealed the buffer holding "small", whose flush now
        // waits for room as well.
        free_the_disk(&plan);
        wait_until_accepting_writes(&engine);
        engine
            .put(0, b"large", &large)
            .expect("the large put goes through once there is room");
        engine.close().expect("close");
    }
    let engine = StorageEngine::open(config).expect("reopen");
    let index = build_index(&engine);
    assert_eq!(
        get(&engine, &index, b"small").as_deref(),
        Some(&b"fine"[..])
    );
    assert_eq!(get(&engine, &index, b"large"), Some(large));
}

#[test]
fn a_batch_whose_large_write_fails_leaves_none_of_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config(dir.path(), PARTITIONS);
    let plan = FaultPlan::new();
    {
        let engine =
            StorageEngine::open_with_disk(config.clone(), FaultDisk::new(Arc::clone(&plan)))
                .expect("open");
        engine.put(0, b"old", b"kept").expect("put");
        plan.fail_now(Op::DirectWrite, Files::ValueLog, libc::EIO);
        let big = vec![7u8; 300_000];
        let ops = [
            WriteOp::Put {
                key: b"small-before",
                value: b"1",
                expire_at_ms: 0,
            },
            WriteOp::Delete { key: b"old" },
            WriteOp::Put {
                key: b"large",
                value: &big,
                expire_at_ms: 0,
            },
            WriteOp::Put {
                key: b"small-after",
                value: b"2",
                expire_at_ms: 0,
            },
        ];
        let mut acks = [WriteAck::default(); 4];
        engine
            .write(0, None, &ops, &mut acks)
            .expect_err("the batch's large write fails");
        let index = build_index(&engine);
        assert_eq!(get(&engine, &index, b"old").as_deref(), Some(&b"kept"[..]));
        for key in [&b"small-before"[..], b"large", b"small-after"] {
            assert!(!index.contains_key(key), "{key:?} of the failed batch");
        }
    }
    let engine = StorageEngine::open(config).expect("reopen");
    let index = build_index(&engine);
    assert_eq!(get(&engine, &index, b"old").as_deref(), Some(&b"kept"[..]));
    for key in [&b"small-before"[..], b"large", b"small-after"] {
        assert!(!index.contains_key(key), "{key:?} after reopen");
    }
}

#[test]
fn recovery_onto_a_full_disk_opens_read_only_then_recovers_later() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let acked = {
        let engine = StorageEngine::open_with_disk(
            small_config(dir.path(), PARTITIONS),
            FaultDisk::new(Arc::clone(&plan)),
        )
        .expect("open");
        // Every flush fails: the data stays in the buffers (acknowledged).
        plan.fail_now(Op::DirectWrite, Files::ValueLog, libc::EIO);
        let (acked, _) = put_until_error(&engine, 0, 1000);
        assert!(!acked.is_empty());
        acked
    };
    {
        // The O_DIRECT probe at open passes; the buffer replays fail.
        let full = FaultPlan::new();
        full.fail_now(Op::DirectWrite, Files::ValueLog, libc::ENOSPC);
        let engine = StorageEngine::open_with_disk(
            small_config(dir.path(), PARTITIONS),
            FaultDisk::new(Arc::clone(&full)),
        )
        .expect("a full disk opens read-only, not an error");
        assert!(full.failed(Op::DirectWrite, Files::ValueLog) > 0);
        let refusal = engine.stats().refusing_writes.expect("read-only");
        assert!(refusal.contains("too full to recover"), "{refusal}");
        let err = engine.put(0, b"k", b"v").expect_err("read-only");
        assert!(
            matches!(err, StorageError::Refused(WireError::ReadOnly { .. })),
            "{err}"
        );
        assert_all_readable(&engine, &acked);
    }
    let engine =
        StorageEngine::open(small_config(dir.path(), PARTITIONS)).expect("reopen with space");
    assert!(engine.stats().refusing_writes.is_none());
    assert_all_readable(&engine, &acked);
}

/// How a test damages partition 0's key log between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    /// The last frame keeps its first half; the rest never reached the file
    /// (a torn append).
    TearLast,
    /// One byte in the middle of the last frame is flipped.
    FlipByteInLast,
    /// One byte in the middle of the frame before the last is flipped; the
    /// last frame, intact, lies past the cut.
    FlipByteBeforeAnIntactOne,
}

/// Partition 0's key log as one run of bytes, its chunk files one after
/// the other (position `p` of the log at index `p`).
fn read_key_log_of_partition_0(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for index in 0.. {
        match std::fs::read(key_log_chunk_of_partition_0(dir, index)) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => panic!("reading the key log: {e}"),
        }
    }
    bytes
}

/// Writes `bytes` back over partition 0's key-log chunks (of
/// `chunk_bytes` each).
fn write_key_log_of_partition_0(dir: &Path, bytes: &[u8], chunk_bytes: usize) {
    for (index, chunk) in bytes.chunks(chunk_bytes).enumerate() {
        std::fs::write(key_log_chunk_of_partition_0(dir, index as u64), chunk)
            .expect("write the key log");
    }
}

fn key_log_chunk_of_partition_0(dir: &Path, index: u64) -> PathBuf {
    dir.join("p000").join(format!("key-{index:08}.log"))
}

fn keylog_end(engine: &StorageEngine) -> usize {
    engine.stats().partitions[0].keylog_end as usize
}

/// Writes a batch of three puts named `{prefix}-a`, `-b`, `-c` into
/// partition 0 (one key-log frame) and returns them.
fn put_batch(engine: &StorageEngine, prefix: &str) -> Acked {
    let batch: Acked = ["a", "b", "c"]
        .iter()
        .map(|n| {
            let key = format!("{prefix}-{n}").into_bytes();
            let value = value_for(&key, 0, 300);
            (key, value)
        })
        .collect();
    let ops: Vec<WriteOp<'_>> = batch
        .iter()
        .map(|(key, value)| WriteOp::Put {
            key,
            value,
            expire_at_ms: 0,
        })
        .collect();
    let mut acks = vec![WriteAck::default(); ops.len()];
    engine.write(0, None, &ops, &mut acks).expect("batch");
    batch
}

/// Acknowledged writes, then a batch whose frame is damaged on disk: after
/// a reopen every write before it is readable, none of the batch (nor what
/// followed it) is served, the log is cut where the frame began and zeroed
/// after it, and new writes land there and survive another reopen.
///
/// `puts_before` puts (half of them in partition 0) come before the batch,
/// which puts it in key-log chunk `chunk`.
fn a_damaged_key_log_frame_is_cut_off(damage: Damage, puts_before: usize, chunk: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = small_config(dir.path(), PARTITIONS);
    let (acked, damaged, lost) = {
        let engine = StorageEngine::open(config.clone()).expect("open");
        let (acked, err) = put_keys(&engine, 0..puts_before, 300);
        assert!(err.is_none());
        let start = keylog_end(&engine);
        let mut lost: Vec<Vec<u8>> = put_batch(&engine, "torn")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let damaged = start..keylog_end(&engine);
        assert_eq!(
            start / config.keylog_chunk_bytes,
            chunk,
            "the batch's chunk"
        );
        if damage == Damage::FlipByteBeforeAnIntactOne {
            lost.extend(put_batch(&engine, "past").into_iter().map(|(k, _)| k));
        }
        engine.close().expect("close");
        (acked, damaged, lost)
    };
    let mut bytes = read_key_log_of_partition_0(dir.path());
    let middle = damaged.start + damaged.len() / 2;
    match damage {
        Damage::TearLast => bytes[middle..damaged.end].fill(0),
        Damage::FlipByteInLast | Damage::FlipByteBeforeAnIntactOne => bytes[middle] ^= 0x40,
    }
    write_key_log_of_partition_0(dir.path(), &bytes, config.keylog_chunk_bytes);

    let fresh = {
        let engine = StorageEngine::open(config.clone()).expect("reopen");
        let scan = engine.recovery_report()[0].keylog;
        assert_eq!(
            scan.end as usize, damaged.start,
            "cut where the bad frame began"
        );
        assert!(scan.zeroed_bytes > 0, "{scan:?}");
        assert_eq!(keylog_end(&engine), damaged.start);
        let on_disk = read_key_log_of_partition_0(dir.path());
        assert!(
            on_disk[damaged.start..].iter().all(|&b| b == 0),
            "everything after the cut is zeroed"
        );
        assert_all_readable(&engine, &acked);
        assert_none_served(&engine, &lost);
        // Keys as long as the damaged batch's: its frame lands exactly where
        // the damaged one was, so whatever followed that one would line up
        // after it, were it not zeroed.
        let fresh = put_batch(&engine, "anew");
        assert_eq!(
            keylog_end(&engine),
            damaged.end,
            "the new frame took the cut one's place"
        );
        engine.close().expect("close");
        fresh
    };

    let engine = StorageEngine::open(config).expect("reopen again");
    let scan = engine.recovery_report()[0].keylog;
    assert_eq!(scan.zeroed_bytes, 0, "nothing torn after the new writes");
    assert_eq!(scan.end as usize, damaged.end);
    assert_all_readable(&engine, &acked);
    assert_all_readable(&engine, &fresh);
    assert_none_served(&engine, &lost);
    engine.put(0, b"and", b"on").expect("writable");
}

#[test]
fn a_torn_last_key_log_frame_is_cut_off_and_never_served() {
    a_damaged_key_log_frame_is_cut_off(Damage::TearLast, 200, 0);
}

#[test]
fn a_flipped_byte_in_the_last_key_log_frame_is_cut_off_and_never_served() {
    a_damaged_key_log_frame_is_cut_off(Damage::FlipByteInLast, 200, 0);
}

#[test]
fn frames_after_a_corrupt_key_log_frame_are_zeroed_and_never_come_back() {
    a_damaged_key_log_frame_is_cut_off(Damage::FlipByteBeforeAnIntactOne, 200, 0);
}

/// What writers saw before a power cut, per key.
#[derive(Default)]
struct CutJournal {
    /// Latest value (None: deleted) acknowledged before the cut.
    acked: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The operation that was under way when the cut came, if any: it may or
    /// may not have become durable.
    in_flight: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Operations each writer has acknowledged before the power is cut.
const ACKED_PER_WRITER_BEFORE_CUT: usize = 200;

/// Writers put and delete until the power is cut, which happens once each
/// of them has had [`ACKED_PER_WRITER_BEFORE_CUT`] operations acknowledged
/// and while they go on writing.
fn write_until_power_cut(durability: Durability) -> (tempfile::TempDir, CutJournal) {
    const WRITERS: usize = 4;
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = PowerCutDisk::new();
    let mut config = small_config(dir.path(), PARTITIONS);
    config.durability = durability;
    let engine =
        Arc::new(StorageEngine::open_with_disk(config, Arc::clone(&disk) as _).expect("open"));
    let cut = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(WRITERS);
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let engine = Arc::clone(&engine);
            let cut = Arc::clone(&cut);
            let ready = ready_tx.clone();
            std::thread::spawn(move || {
                let mut journal = CutJournal::default();
                for i in 0u64.. {
                    let key = format!("t{t}-k{}", i % 150).into_bytes();
                    let partition = (i as usize + t) % PARTITIONS;
                    let value =
                        (i % 7 != 3).then(|| value_for(&key, i, 10 + (i as usize * 37) % 3000));
                    let result = match &value {
                        None => engine.delete(partition, &key),
                        Some(value) => engine.put(partition, &key, value),
                    };
                    // An op counts as acknowledged before the cut only if it
                    // returned before the cut began.
                    if cut.load(Ordering::SeqCst) || result.is_err() {
                        journal.in_flight.insert(key, value);
                        break;
                    }
                    journal.acked.insert(key, value);
                    if i + 1 == ACKED_PER_WRITER_BEFORE_CUT as u64 {
                        ready.send(()).expect("the test waits for every writer");
                    }
                }
                journal
            })
        })
        .collect();
    drop(ready_tx);
    for _ in 0..WRITERS {
        ready_rx.recv().expect("a writer reached its count");
    }
    cut.store(true, Ordering::SeqCst);
    disk.cut();
    let mut journal = CutJournal::default();
    for w in writers {
        let part = w.join().expect("writer");
        journal.acked.extend(part.acked);
        journal.in_flight.extend(part.in_flight);
    }
    drop(engine);
    (dir, journal)
}

#[test]
fn sync_durability_survives_a_power_cut() {
    let (dir, journal) = write_until_power_cut(Durability::Sync);
    assert!(
        journal.acked.len() > 50,
        "only {} keys acknowledged",
        journal.acked.len()
    );
    let engine = StorageEngine::open_with_disk(
        small_config(dir.path(), PARTITIONS),
        Arc::new(OsDisk::new(IoEngineKind::Uring)),
    )
    .expect("reopen after the power cut");
    let index = build_index(&engine);
    for (key, value) in &journal.acked {
        let actual = get(&engine, &index, key);
        let in_flight = journal.in_flight.get(key);
        assert!(
            &actual == value || in_flight == Some(&actual),
            "key {}: reads {:?} bytes, acknowledged {:?}, in flight {:?}",
            String::from_utf8_lossy(key),
            actual.as_ref().map(Vec::len),
            value.as_ref().map(Vec::len),
            in_flight.map(|v| v.as_ref().map(Vec::len)),
        );
    }
}

#[test]
fn mmap_durability_does_not_survive_a_power_cut() {
    // The same run in mmap mode: acknowledged writes were never synced, so
    // the cut loses some. This shows the power-cut disk really drops what is
    // not synced, which is what makes the sync-mode test meaningful.
    let (dir, journal) = write_until_power_cut(Durability::Mmap);
    let engine = StorageEngine::open(small_config(dir.path(), PARTITIONS)).expect("reopen");
    let index = build_index(&engine);
    let lost = journal
        .acked
        .iter()
        .filter(|(key, value)| value.is_some() && !index.contains_key(*key))
        .count();
    assert!(
        lost > 0,
        "a power cut in mmap mode lost nothing: the simulation is not cutting"
    );
}

#[test]
fn a_torn_frame_in_a_later_key_log_chunk_is_cut_off_there() {
    // 16 KiB chunks of 48-byte frames: 800 puts put partition 0's batch in
    // its second chunk, after a padding frame.
    a_damaged_key_log_frame_is_cut_off(Damage::TearLast, 800, 1);
}
