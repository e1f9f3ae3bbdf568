//! Faults injected through the disk trait: a full disk or an I/O error in a
//! flush or a preallocation poisons the engine without losing anything
//! acknowledged; recovery onto a full disk opens read-only; and in `sync`
//! durability a power cut loses nothing acknowledged.

mod support;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use storage_node::{Durability, IoEngineKind, OsDisk, StorageEngine, StorageError, WireError};
use support::faults::{FaultDisk, FaultPlan, PowerCutDisk};
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

/// A fault in a flush or a preallocation: the put that meets it fails, the
/// engine refuses writes, reads go on, and a reopen recovers everything.
fn fault_poisons_without_loss(inject: impl Fn(&FaultPlan), expect_disk_full: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let mut acked;
    {
        let engine = StorageEngine::open_with_disk(
            small_config(dir.path(), PARTITIONS),
            FaultDisk::new(Arc::clone(&plan)),
        )
        .expect("open");
        let (before, err) = {
            let (mut all, err) = put_keys(&engine, 0..300, 500);
            if let Some(err) = err {
                panic!("put before the fault: {err}");
            }
            inject(&plan);
            let (more, err) = put_until_error(&engine, 300, 500);
            all.extend(more);
            (all, err)
        };
        acked = before;
        let message = err.to_string();
        match &err {
            StorageError::Refused(WireError::DiskFull { .. }) => {
                assert!(expect_disk_full, "{message}")
            }
            StorageError::Refused(WireError::Poisoned { reason }) => {
                assert_eq!(
                    reason.contains("disk is full"),
                    expect_disk_full,
                    "{message}"
                );
            }
            StorageError::Io { .. } => assert!(!expect_disk_full, "{message}"),
            other => panic!("unexpected error {other}"),
        }
        let again = engine
            .put(0, b"after", b"the fault")
            .expect_err("poisoned engine refuses writes");
        assert!(
            matches!(again, StorageError::Refused(WireError::Poisoned { .. })),
            "{again}"
        );
        assert!(engine.stats().refusing_writes.is_some());
        assert_all_readable(&engine, &acked);
    }
    let engine = StorageEngine::open(small_config(dir.path(), PARTITIONS)).expect("reopen");
    assert_all_readable(&engine, &acked);
    engine
        .put(0, b"after", b"reopen")
        .expect("writable again after reopen");
    acked.push((b"after".to_vec(), b"reopen".to_vec()));
    assert_all_readable(&engine, &acked);
}

#[test]
fn a_full_disk_during_a_flush_poisons_and_loses_nothing() {
    fault_poisons_without_loss(|plan| plan.fail_direct_writes_now(libc::ENOSPC), true);
}

#[test]
fn an_io_error_during_a_flush_poisons_and_loses_nothing() {
    fault_poisons_without_loss(|plan| plan.fail_direct_writes_now(libc::EIO), false);
}

#[test]
fn a_full_disk_during_key_log_preallocation_poisons_and_loses_nothing() {
    fault_poisons_without_loss(|plan| plan.fail_allocations_now(libc::ENOSPC), true);
}

#[test]
fn an_io_error_during_key_log_preallocation_poisons_and_loses_nothing() {
    fault_poisons_without_loss(|plan| plan.fail_allocations_now(libc::EIO), false);
}

#[test]
fn a_large_write_on_a_full_disk_fails_that_put() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    let engine = StorageEngine::open_with_disk(
        small_config(dir.path(), PARTITIONS),
        FaultDisk::new(Arc::clone(&plan)),
    )
    .expect("open");
    engine.put(0, b"small", b"fine").expect("put");
    plan.fail_direct_writes_now(libc::ENOSPC);
    let err = engine
        .put(0, b"large", &vec![7u8; 300_000])
        .expect_err("large write fails");
    assert!(
        matches!(err, StorageError::Refused(WireError::DiskFull { .. })),
        "{err}"
    );
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
        plan.fail_direct_writes_now(libc::EIO);
        let (acked, _) = put_until_error(&engine, 0, 1000);
        assert!(!acked.is_empty());
        acked
    };
    {
        let full = FaultPlan::new();
        full.direct_write_errno
            .store(libc::ENOSPC as usize, Ordering::SeqCst);
        // The O_DIRECT probe at open passes; the buffer replays after it fail.
        full.fail_direct_writes_from.store(1, Ordering::SeqCst);
        let engine = StorageEngine::open_with_disk(
            small_config(dir.path(), PARTITIONS),
            FaultDisk::new(full),
        )
        .expect("a full disk opens read-only, not an error");
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

/// What writers saw before a power cut, per key.
#[derive(Default)]
struct CutJournal {
    /// Latest value (None: deleted) acknowledged before the cut.
    acked: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The operation that was under way when the cut came, if any: it may or
    /// may not have become durable.
    in_flight: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Writers put and delete until the power is cut.
fn write_until_power_cut(durability: Durability) -> (tempfile::TempDir, CutJournal) {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = PowerCutDisk::new();
    let mut config = small_config(dir.path(), PARTITIONS);
    config.durability = durability;
    let engine =
        Arc::new(StorageEngine::open_with_disk(config, Arc::clone(&disk) as _).expect("open"));
    let cut = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4usize)
        .map(|t| {
            let engine = Arc::clone(&engine);
            let cut = Arc::clone(&cut);
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
                }
                journal
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(400));
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
