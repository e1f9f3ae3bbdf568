//! Round trips through the storage engine on real files: every shape of key
//! and value, overwrites, deletes, batches, reopening, and the errors a
//! caller can meet.

mod support;

use std::process::Command;
use std::sync::atomic::Ordering;

use storage_node::{
    Durability, ExportCursor, StorageConfig, StorageEngine, StorageError, WireError, WriteAck,
    WriteOp,
};
use support::faults::{FaultDisk, FaultPlan, Files, Op};
use support::{build_index, get, small_config, value_for};

fn open(dir: &std::path::Path) -> StorageEngine {
    StorageEngine::open(small_config(dir, 4)).expect("open")
}

#[test]
fn every_shape_of_key_and_value_round_trips_and_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long_key = vec![0xABu8; 1024];
    let binary_key: Vec<u8> = (0..=255u8).collect();
    let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"e".to_vec(), Vec::new()),
        (vec![0u8], b"one-byte key".to_vec()),
        (long_key.clone(), b"1 KiB key".to_vec()),
        (
            binary_key.clone(),
            (0..=255u8).rev().cycle().take(5000).collect(),
        ),
        (b"mib".to_vec(), value_for(b"mib", 1, 1 << 20)),
        (b"16mib".to_vec(), value_for(b"16mib", 1, 16 << 20)),
        (b"small-after-large".to_vec(), b"still in order".to_vec()),
    ];
    {
        let engine = open(dir.path());
        for (i, (key, value)) in cases.iter().enumerate() {
            engine.put(i % 4, key, value).expect("put");
        }
        let index = build_index(&engine);
        for (key, value) in &cases {
            assert_eq!(
                get(&engine, &index, key).as_deref(),
                Some(&value[..]),
                "key {:?}",
                &key[..key.len().min(8)]
            );
        }
        let stats = engine.stats();
        assert!(
            stats.partitions.iter().map(|p| p.large_writes).sum::<u64>() >= 1,
            "16 MiB took the large path"
        );
    }
    let engine = open(dir.path());
    let index = build_index(&engine);
    for (key, value) in &cases {
        assert_eq!(get(&engine, &index, key).as_deref(), Some(&value[..]));
    }
}

#[test]
fn overwrites_and_deletes_resolve_by_sequence_across_partitions() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let engine = open(dir.path());
        let s1 = engine.put(0, b"k", b"first").expect("put");
        let s2 = engine.put(1, b"k", b"second").expect("put");
        assert!(s2 > s1, "sequence numbers grow");
        engine.put(2, b"gone", b"x").expect("put");
        engine.delete(3, b"gone").expect("delete");
        engine.put(3, b"back", b"x").expect("put");
        engine.delete(0, b"back").expect("delete");
        engine.put(1, b"back", b"again").expect("put");
        let index = build_index(&engine);
        assert_eq!(get(&engine, &index, b"k").as_deref(), Some(&b"second"[..]));
        assert_eq!(get(&engine, &index, b"gone"), None);
        assert_eq!(
            get(&engine, &index, b"back").as_deref(),
            Some(&b"again"[..])
        );
    }
    let engine = open(dir.path());
    let index = build_index(&engine);
    assert_eq!(get(&engine, &index, b"k").as_deref(), Some(&b"second"[..]));
    assert_eq!(get(&engine, &index, b"gone"), None);
    let next = engine.put(0, b"after", b"reopen").expect("put");
    assert!(
        next > index[&b"back"[..]].seq,
        "sequence resumes past the highest found"
    );
}

#[test]
fn many_writes_cross_buffers_and_key_log_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("key-{i:05}").into_bytes())
        .collect();
    {
        let engine = open(dir.path());
        for (i, key) in keys.iter().enumerate() {
            engine
                .put(i % 4, key, &value_for(key, 0, 100 + i % 900))
                .expect("put");
        }
        let stats = engine.stats();
        assert!(
            stats.partitions.iter().all(|p| p.flushes > 3),
            "buffers were flushed: {stats:?}"
        );
        let chunk = engine.manifest().keylog_chunk_bytes as u64;
        assert!(
            stats.partitions.iter().all(|p| p.keylog_end > chunk),
            "every key log went past its first chunk: {stats:?}"
        );
        let index = build_index(&engine);
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(
                get(&engine, &index, key),
                Some(value_for(key, 0, 100 + i % 900))
            );
        }
    }
    let engine = open(dir.path());
    let index = build_index(&engine);
    assert_eq!(index.len(), keys.len());
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            get(&engine, &index, key),
            Some(value_for(key, 0, 100 + i % 900))
        );
    }
}

#[test]
fn a_batch_gets_one_sequence_per_op_in_op_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.put(0, b"old", b"x").expect("put");
    let big = value_for(b"b", 0, 3 << 20);
    let ops = [
        WriteOp::Put {
            key: b"a",
            value: b"1",
            expire_at_ms: 0,
        },
        WriteOp::Put {
            key: b"b",
            value: &big,
            expire_at_ms: 0,
        },
        WriteOp::Delete { key: b"old" },
        WriteOp::Put {
            key: b"c",
            value: b"3",
            expire_at_ms: 0,
        },
    ];
    let mut acks = [WriteAck::default(); 4];
    engine.write(2, None, &ops, &mut acks).expect("batch");
    assert!(
        acks.windows(2).all(|w| w[0].seq < w[1].seq),
        "seqs in op order: {acks:?}"
    );
    let index = build_index(&engine);
    assert_eq!(get(&engine, &index, b"a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&engine, &index, b"b"), Some(big));
    assert_eq!(get(&engine, &index, b"old"), None);
    assert_eq!(index[&b"c"[..]].seq, acks[3].seq);
    assert_eq!(index[&b"c"[..]].offset, acks[3].offset);
    assert_eq!(acks[2].offset, 0, "a delete has no record");
}

#[test]
fn limits_are_checked_with_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    assert!(matches!(
        engine.put(0, b"", b"v"),
        Err(StorageError::Refused(WireError::EmptyKey))
    ));
    let err = engine.put(0, &[1u8; 1025], b"v").expect_err("key too long");
    assert!(
        matches!(
            err,
            StorageError::Refused(WireError::TooLarge {
                ref what,
                len: 1025,
                max: 1024
            }) if what == "key"
        ),
        "{err}"
    );
    let err = engine
        .put(0, b"k", &vec![0u8; (16 << 20) + 1])
        .expect_err("value too long");
    assert!(
        matches!(err, StorageError::Refused(WireError::TooLarge { ref what, .. }) if what == "value"),
        "{err}"
    );
    assert!(matches!(
        engine.put(9, b"k", b"v"),
        Err(StorageError::Refused(WireError::NoSuchPartition {
            partition: 9,
            count: 4
        }))
    ));
    let err = engine
        .read_range(0, 0, (16 << 20) + 1)
        .expect_err("range too long");
    assert!(matches!(
        err,
        StorageError::Refused(WireError::TooLarge { .. })
    ));
    assert!(
        engine.stats().partitions.iter().all(|p| p.puts == 0),
        "nothing was written"
    );
}

#[test]
fn range_reads_include_buffered_records_and_stop_at_the_committed_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    let mut expected = Vec::new();
    for i in 0..400u32 {
        let key = format!("r{i}").into_bytes();
        let value = value_for(&key, 0, 700);
        engine.put(1, &key, &value).expect("put");
        expected.push((key, value));
    }
    let index = build_index(&engine);
    let stats = engine.stats().partitions[1].clone();
    let committed = stats.committed_end;
    assert!(
        stats.flushes > 0 && stats.flushed_bytes < committed,
        "part of the log is on disk and part still in a buffer: {stats:?}"
    );
    let range = engine.read_range(1, 0, 16 << 20).expect("range");
    assert_eq!(range.committed_end, committed);
    assert_eq!(
        range.bytes().len() as u64,
        committed,
        "a range never passes the committed end"
    );
    for (key, value) in &expected {
        let at = index[key].offset as usize;
        let record = splitkv_common::record::decode_value_record(&range.bytes()[at..])
            .expect("record in range");
        assert_eq!(record.key, &key[..]);
        assert_eq!(record.value, &value[..]);
    }
    // An unaligned window in the middle matches the full read.
    let part = engine.read_range(1, 12_345, 100_000).expect("range");
    assert_eq!(part.bytes(), &range.bytes()[12_345..112_345]);
    let past = engine.read_range(1, committed + 10, 100).expect("range");
    assert!(past.bytes().is_empty());
}

#[test]
fn a_flipped_byte_in_the_value_log_is_a_checksum_error_not_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let located = {
        let engine = open(dir.path());
        engine
            .put(0, b"victim", &value_for(b"victim", 0, 3000))
            .expect("put");
        engine.put(0, b"bystander", b"fine").expect("put");
        build_index(&engine)
    };
    let victim = located[&b"victim"[..]];
    let path = dir.path().join("p000").join("value-00000000.seg");
    let mut bytes = std::fs::read(&path).expect("read value log");
    bytes[victim.offset as usize + 2000] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write value log");

    let engine = open(dir.path());
    let err = engine
        .read(0, victim.offset, victim.record_len)
        .expect_err("corrupt record must not be served");
    assert!(
        matches!(
            err,
            StorageError::Refused(WireError::Corrupt { partition: 0, .. })
        ),
        "{err}"
    );
    let index = build_index(&engine);
    assert_eq!(
        get(&engine, &index, b"bystander").as_deref(),
        Some(&b"fine"[..])
    );
}

#[test]
fn reads_of_bad_locations_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.put(0, b"k", b"v").expect("put");
    assert!(engine.read(0, 1 << 40, 30).is_err(), "past the end");
    assert!(
        engine.read(0, u64::MAX - 3, 30).is_err(),
        "overflowing location"
    );
    assert!(engine.read(0, 3, 22).is_err(), "not a record boundary");
    let mut out = Vec::new();
    assert!(
        engine
            .export_keylog(0, &ExportCursor::at_position(3), 0, 1024, &mut out)
            .is_err(),
        "misaligned export position"
    );
}

#[test]
fn a_new_writer_epoch_fences_the_old_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let epoch = {
        let engine = open(dir.path());
        let first = engine.begin_writer_epoch().expect("epoch");
        let mut seq = [WriteAck::default()];
        let op = [WriteOp::Put {
            key: b"k",
            value: b"v",
            expire_at_ms: 0,
        }];
        engine
            .write(0, Some(first), &op, &mut seq)
            .expect("current writer writes");
        let second = engine.begin_writer_epoch().expect("epoch");
        let err = engine
            .write(0, Some(first), &op, &mut seq)
            .expect_err("old writer fenced");
        assert!(
            matches!(err, StorageError::Refused(WireError::Fenced { yours, current }) if yours == first && current == second)
        );
        second
    };
    let engine = open(dir.path());
    assert_eq!(engine.writer_epoch(), epoch, "the epoch survives a restart");
}

fn assert_direct_io_error(result: Result<StorageEngine, StorageError>, dir: &std::path::Path) {
    let err = result
        .err()
        .expect("a file system without O_DIRECT is refused");
    assert!(
        matches!(err, StorageError::DirectIoUnsupported { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains(&dir.display().to_string()), "{message}");
    assert!(message.contains("O_DIRECT"), "{message}");
}

#[test]
fn a_file_system_refusing_direct_io_is_a_clear_error() {
    // A disk whose file system refuses O_DIRECT the way ramfs does: opening
    // with O_DIRECT fails with EINVAL.
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    plan.refuse_direct_opens.store(true, Ordering::SeqCst);
    assert_direct_io_error(
        StorageEngine::open_with_disk(StorageConfig::new(dir.path()), FaultDisk::new(plan)),
        dir.path(),
    );
}

#[test]
fn ramfs_refuses_direct_io_with_a_clear_error() {
    // ramfs has no direct I/O (tmpfs gained it in Linux 6.6). Mounting needs
    // root (CI runs as root): a failed mount fails the test rather than
    // passing it on some other check.
    let dir = tempfile::tempdir().expect("tempdir");
    let target = std::ffi::CString::new(dir.path().to_str().expect("utf-8 path")).expect("path");
    // SAFETY: plain mount(2) with valid C strings.
    let mounted = unsafe {
        libc::mount(
            c"ramfs".as_ptr(),
            target.as_ptr(),
            c"ramfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    } == 0;
    let mount_error = std::io::Error::last_os_error();
    assert!(
        mounted,
        "cannot mount ramfs on {}: {mount_error} (this test needs root with CAP_SYS_ADMIN)",
        dir.path().display()
    );
    let data = dir.path().join("data");
    let result = StorageEngine::open(StorageConfig::new(&data));
    // SAFETY: unmounting what we mounted above.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    assert_direct_io_error(result, &data);
}

#[test]
fn a_second_process_is_refused_by_the_lock() {
    const CHILD_ENV: &str = "SPLITKV_LOCK_TEST_DIR";
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        // Child: try to open the directory the parent holds.
        let mut config = small_config(std::path::Path::new(&dir), 4);
        config.lock_wait_ms = 100;
        match StorageEngine::open(config) {
            // A running holder that keeps the lock past the wait is named
            // and refused.
            Err(StorageError::Locked {
                holder_pid,
                holder_running: true,
                waited_ms: 100,
                ..
            }) if holder_pid == Some(std::os::unix::process::parent_id()) => std::process::exit(42),
            Err(e) => {
                eprintln!("unexpected error: {e}");
                std::process::exit(1)
            }
            Ok(_) => std::process::exit(0),
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // This test again, in a child process that opens the directory.
    let child_opens = || {
        Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "a_second_process_is_refused_by_the_lock",
                "--nocapture",
            ])
            .env(CHILD_ENV, dir.path())
            .status()
            .expect("run child")
            .code()
    };
    let engine = open(dir.path());
    assert_eq!(
        child_opens(),
        Some(42),
        "the second process must see Locked after its wait, naming this process"
    );
    drop(engine);
    // Once the first process lets go, the directory opens again.
    assert_eq!(child_opens(), Some(0));
}

#[test]
fn a_node_opened_right_after_kill_9_of_the_last_one_waits_for_its_lock() {
    const CHILD_ENV: &str = "SPLITKV_KILLED_HOLDER_TEST_DIR";
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        // Child: open, and write through the I/O engine until killed, so that
        // the kill finds writes in flight in io_uring workers that outlive
        // the process.
        let engine = open(std::path::Path::new(&dir));
        std::thread::scope(|s| {
            for partition in 0..4usize {
                let engine = &engine;
                s.spawn(move || {
                    let value = vec![7u8; 256 << 10];
                    for i in 0u64.. {
                        engine
                            .put(partition, &i.to_le_bytes(), &value)
                            .expect("put");
                        if partition == 0 && i == 16 {
                            println!("WRITTEN");
                        }
                    }
                });
            }
        });
        unreachable!("the writers run until the process is killed");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for round in 0..5 {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "a_node_opened_right_after_kill_9_of_the_last_one_waits_for_its_lock",
                "--nocapture",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run child");
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
            child.stdout.take().expect("stdout"),
        ));
        assert!(
            lines.any(|line| line.expect("child stdout") == "WRITTEN"),
            "round {round}: the child wrote"
        );
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        // At once, while the dead child's io_uring workers may still hold
        // its files: the open waits for the lock instead of failing.
        let engine = StorageEngine::open(small_config(dir.path(), 4))
            .unwrap_or_else(|e| panic!("round {round}: open after kill -9: {e}"));
        drop(engine);
    }
}

/// Holds the LOCK file of `dir` as a process would (an flock on its own
/// open file), with `record` written as its holder.
fn hold_lock(dir: &std::path::Path, record: &str) -> std::fs::File {
    std::fs::create_dir_all(dir).expect("mkdir");
    let file = std::fs::File::create(dir.join("LOCK")).expect("create LOCK");
    file.try_lock().expect("take the lock");
    std::io::Write::write_all(&mut &file, format!("{record:<47}\n").as_bytes())
        .expect("write holder");
    file
}

#[test]
fn a_lock_held_for_an_ended_process_is_waited_for_and_a_running_holder_refused_after_the_wait() {
    // An ended holder: a reaped child's pid.
    let mut child = Command::new("true").spawn().expect("spawn");
    let dead_pid = child.id();
    child.wait().expect("reap");
    let dir = tempfile::tempdir().expect("tempdir");
    let held = hold_lock(dir.path(), &format!("pid {dead_pid} start 1"));
    let (opened_tx, opened_rx) = std::sync::mpsc::channel();
    let path = dir.path().to_path_buf();
    let opener = std::thread::spawn(move || {
        let opened = StorageEngine::open(small_config(&path, 4));
        opened_tx.send(opened.is_ok()).expect("send");
        opened
    });
    // While the lock is held the open cannot succeed; it must not fail
    // either, since the holder has ended.
    match opened_rx.recv_timeout(std::time::Duration::from_millis(300)) {
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        other => panic!("the open ended while the lock was held: {other:?}"),
    }
    drop(held);
    let engine = opener
        .join()
        .expect("opener")
        .expect("the open takes the lock once it is let go");
    drop(engine);

    // A running holder (this process, by its pid and start time as /proc
    // tells them) that keeps the lock past the wait is refused and named.
    let dir = tempfile::tempdir().expect("tempdir");
    let _held = hold_lock(dir.path(), &this_process_holder_record());
    let mut config = small_config(dir.path(), 4);
    config.lock_wait_ms = 100;
    match StorageEngine::open(config) {
        Err(e @ StorageError::Locked { .. }) => {
            let StorageError::Locked {
                holder_pid,
                holder_running,
                waited_ms,
                ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(*holder_pid, Some(std::process::id()));
            assert!(*holder_running, "{e}");
            assert_eq!(*waited_ms, 100);
            let message = e.to_string();
            assert!(
                message.contains(&format!("pid {}, which is running", std::process::id())),
                "{message}"
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("opened a directory another holder holds"),
    }
}

/// The holder record of this process: its pid and its start time as
/// `/proc` tells them.
fn this_process_holder_record() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let start = stat[stat.rfind(')').expect("name") + 1..]
        .split_ascii_whitespace()
        .nth(19)
        .expect("field 22")
        .to_string();
    format!("pid {} start {start}", std::process::id())
}

#[test]
fn a_new_writer_epoch_is_synced_as_durably_as_an_acknowledged_write() {
    for (durability, syncs) in [(Durability::Mmap, 0), (Durability::Sync, 1)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let plan = FaultPlan::new();
        let mut config = small_config(dir.path(), 2);
        config.durability = durability;
        let epoch = {
            let engine =
                StorageEngine::open_with_disk(config.clone(), FaultDisk::new(plan.clone()))
                    .expect("open");
            let before = plan.succeeded(Op::SyncData, Files::Named("EPOCH"));
            let epoch = engine.begin_writer_epoch().expect("epoch");
            assert_eq!(
                plan.succeeded(Op::SyncData, Files::Named("EPOCH")) - before,
                syncs,
                "{durability:?}: syncs of the epoch file for a new writer"
            );
            epoch
        };
        let engine = StorageEngine::open(config).expect("reopen");
        assert_eq!(
            engine.writer_epoch(),
            epoch,
            "{durability:?}: the epoch outlives the process that granted it"
        );
    }
}

#[test]
fn a_lock_held_for_a_holder_that_still_seems_to_run_is_waited_for() {
    // A node killed a moment ago can still show in /proc, as running, while
    // the kernel tears it down and its lock is let go: the holder record
    // names a running process (this one), the disk answers "held" a few
    // times, then lets the lock go. The open waits instead of refusing.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path()).expect("mkdir");
    std::fs::write(
        dir.path().join("LOCK"),
        format!("{:<47}\n", this_process_holder_record()),
    )
    .expect("write the holder record");
    let plan = FaultPlan::new();
    plan.refuse_locks_times.store(5, Ordering::SeqCst);
    let engine =
        StorageEngine::open_with_disk(small_config(dir.path(), 4), FaultDisk::new(plan.clone()))
            .unwrap_or_else(|e| panic!("the open waits for a lock that is let go: {e}"));
    assert_eq!(
        plan.refuse_locks_times.load(Ordering::SeqCst),
        0,
        "every refusal was seen before the lock was taken"
    );
    drop(engine);
}

#[test]
fn the_data_directory_lock_is_taken_through_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = FaultPlan::new();
    plan.refuse_locks.store(true, Ordering::SeqCst);
    let mut config = small_config(dir.path(), 4);
    config.lock_wait_ms = 100;
    let err = StorageEngine::open_with_disk(config, FaultDisk::new(plan))
        .err()
        .expect("a lock held elsewhere refuses the open");
    assert!(matches!(err, StorageError::Locked { .. }), "{err}");
    assert!(
        !dir.path().join("MANIFEST").exists(),
        "nothing is created without the lock"
    );
}

#[test]
fn a_new_store_is_not_created_in_a_directory_holding_other_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), b"not SplitKV's").expect("write");
    let err = StorageEngine::open(small_config(dir.path(), 4))
        .err()
        .expect("a foreign directory is refused");
    let message = err.to_string();
    assert!(matches!(err, StorageError::Manifest { .. }), "{message}");
    assert!(message.contains("notes.txt"), "{message}");
    assert!(!dir.path().join("MANIFEST").exists());
    assert_eq!(
        std::fs::read(dir.path().join("notes.txt")).expect("read"),
        b"not SplitKV's"
    );
}

/// Every key-log entry of `partition`, in log order: kind, seq, expiry
/// time and key.
fn logged_entries(
    engine: &StorageEngine,
    partition: usize,
) -> Vec<(splitkv_common::record::EntryKind, u64, u64, Vec<u8>)> {
    use splitkv_common::record::{self, Frame};
    let mut out = Vec::new();
    let progress = engine
        .export_keylog(
            partition,
            &ExportCursor::at_position(0),
            0,
            1 << 20,
            &mut out,
        )
        .expect("export");
    assert!(progress.caught_up, "one chunk holds the log");
    let mut entries = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let (frame, used) = record::decode_frame(&out[at..]).expect("frame verifies");
        if let Frame::Entries(frame) = frame {
            for entry in frame.iter() {
                let entry = entry.expect("entry");
                entries.push((
                    entry.kind,
                    entry.seq,
                    entry.expire_at_ms,
                    entry.key.to_vec(),
                ));
            }
        }
        at += used;
    }
    entries
}

#[test]
fn expiry_times_and_expire_entries_survive_reopen_in_the_key_log() {
    use splitkv_common::record::EntryKind;
    let dir = tempfile::tempdir().expect("tempdir");
    let expire_at_ms = 4_102_444_800_000; // 2100-01-01
    let mut acks = [WriteAck::default(); 3];
    {
        let engine = open(dir.path());
        let ops = [
            WriteOp::Put {
                key: b"session",
                value: b"token",
                expire_at_ms,
            },
            WriteOp::Put {
                key: b"plain",
                value: b"v",
                expire_at_ms: 0,
            },
            WriteOp::Expire {
                key: b"old",
                version_seq: 1,
            },
        ];
        engine.write(0, None, &ops, &mut acks).expect("batch");
        assert!(acks[0].seq < acks[1].seq && acks[1].seq < acks[2].seq);
    }
    let engine = open(dir.path());
    assert_eq!(
        logged_entries(&engine, 0),
        vec![
            (
                EntryKind::Put,
                acks[0].seq,
                expire_at_ms,
                b"session".to_vec()
            ),
            (EntryKind::Put, acks[1].seq, 0, b"plain".to_vec()),
            (
                EntryKind::Expire { version_seq: 1 },
                acks[2].seq,
                0,
                b"old".to_vec()
            ),
        ]
    );
    let index = build_index(&engine);
    assert_eq!(
        get(&engine, &index, b"session").as_deref(),
        Some(&b"token"[..])
    );
}

/// A new O_DIRECT file on the real disk with `pages` pages of a pattern
/// (byte `i` is `i * step % 251`) written to it, and those bytes.
fn direct_file_written(
    pages: usize,
    step: usize,
) -> (
    tempfile::TempDir,
    std::sync::Arc<dyn storage_node::DiskFile>,
    storage_node::aligned::AlignedBuf,
) {
    use storage_node::aligned::AlignedBuf;
    use storage_node::{Disk, FileKind, IoEngineKind, OsDisk};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("direct.log");
    let disk = OsDisk::new(IoEngineKind::Uring);
    let file = disk.open(&path, FileKind::Direct, true).expect("open");
    let mut written = AlignedBuf::zeroed(pages * 4096);
    for (i, b) in written.iter_mut().enumerate() {
        *b = (i * step % 251) as u8;
    }
    file.allocate(0, written.len() as u64).expect("allocate");
    file.write_at(&written, 0).expect("direct write");
    (dir, file, written)
}

#[test]
fn a_direct_file_reads_written_bytes_through_the_page_cache_at_any_offset() {
    let (_dir, file, written) = direct_file_written(3, 7);
    // A direct read must be aligned; a cached one need not be.
    let mut unaligned = vec![0u8; 5000];
    assert!(
        file.read_at(&mut unaligned, 1).is_err(),
        "an unaligned direct read is refused"
    );
    for _ in 0..2 {
        let got = file.read_cached_at(&mut unaligned, 1).expect("cached read");
        assert_eq!(got, unaligned.len());
        assert_eq!(&unaligned[..], &written[1..5001]);
    }
    // Past the end it reads what there is.
    let mut tail = vec![0u8; 100];
    assert_eq!(
        file.read_cached_at(&mut tail, written.len() as u64 - 10)
            .expect("read"),
        10
    );
    assert_eq!(&tail[..10], &written[written.len() - 10..]);
}

#[test]
fn a_read_that_must_not_wait_reads_only_bytes_already_in_the_page_cache() {
    const PAGE: usize = 4096;
    let (_dir, file, written) = direct_file_written(128, 13);
    // Written with O_DIRECT: nothing of it is in the page cache.
    let mut got = vec![0u8; 5000];
    assert_eq!(
        file.read_cached_nowait_at(&mut got, 100)
            .expect("nowait read"),
        None,
        "bytes only on the device are not read without waiting"
    );
    // A read that may wait brings the first two pages into the cache.
    let mut first = vec![0u8; 2 * PAGE];
    file.read_cached_at(&mut first, 0).expect("cached read");
    assert_eq!(
        file.read_cached_nowait_at(&mut got, 100)
            .expect("nowait read"),
        Some(got.len())
    );
    assert_eq!(&got[..], &written[100..5100]);
    // A range that runs on from those pages into pages nothing has read is
    // not read, not even in part. (The kernel may cache a little more than
    // was read, a large folio, but not a hundred pages on with readahead
    // off; its readahead window is 32 pages at most.)
    let start = 2 * PAGE - 10;
    let mut across = vec![0u8; 120 * PAGE - start];
    assert_eq!(
        file.read_cached_nowait_at(&mut across, start as u64)
            .expect("nowait read"),
        None,
        "a range running into pages not in the cache is not read without waiting"
    );
    // A direct write over a cached page leaves no stale copy to read: the
    // kernel drops the cached page or (where it cannot) writes through it,
    // so a read that does not wait either finds nothing or the new bytes,
    // and one that may wait reads the new bytes.
    let mut rewritten = storage_node::aligned::AlignedBuf::zeroed(PAGE);
    rewritten.fill(0xA5);
    file.write_at(&rewritten, PAGE as u64)
        .expect("direct rewrite");
    let mut page = vec![0u8; PAGE + 20];
    let fresh = |page: &[u8]| {
        page[..10] == written[PAGE - 10..PAGE]
            && page[10..10 + PAGE].iter().all(|&b| b == 0xA5)
            && page[10 + PAGE..] == written[2 * PAGE..2 * PAGE + 10]
    };
    if let Some(n) = file
        .read_cached_nowait_at(&mut page, PAGE as u64 - 10)
        .expect("nowait read")
    {
        assert_eq!(n, page.len());
        assert!(fresh(&page), "a read that does not wait read a stale page");
    }
    page.fill(0);
    file.read_cached_at(&mut page, PAGE as u64 - 10)
        .expect("cached read");
    assert!(fresh(&page), "a read that may wait read a stale page");
}

#[test]
fn a_record_is_read_without_waiting_from_its_buffer_or_the_page_cache_but_not_from_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let value = value_for(b"k", 1, 4000);
    {
        let engine = open(dir.path());
        engine.put(1, b"k", &value).expect("put");
        let at = build_index(&engine)[&b"k"[..]];
        let in_buffer = engine
            .read_in_memory(at.partition, at.offset, at.record_len)
            .expect("read")
            .expect("a record still in its write buffer is in memory");
        assert_eq!(in_buffer.record().value, &value[..]);
        engine.close().expect("close");
    }
    // Reopened: the close flushed the buffer to the value log with O_DIRECT.
    let engine = open(dir.path());
    let at = build_index(&engine)[&b"k"[..]];
    assert!(
        engine
            .read_in_memory(at.partition, at.offset, at.record_len)
            .expect("read")
            .is_none(),
        "a record only on the disk is not read without waiting"
    );
    assert_eq!(
        get(&engine, &build_index(&engine), b"k"),
        Some(value.clone())
    );
    let cached = engine
        .read_in_memory(at.partition, at.offset, at.record_len)
        .expect("read")
        .expect("read once, the record is in the page cache");
    assert_eq!(cached.record().value, &value[..]);
    // Its checks are those of any read.
    assert!(
        engine
            .read_in_memory(at.partition, at.offset, at.record_len - 1)
            .is_err()
    );
}
