//! `kill -9` in the middle of writing loses nothing acknowledged.
//!
//! A child process (this test binary, re-run in child mode) opens the store
//! and runs writer threads that put, overwrite, delete and batch-write keys,
//! each on a random partition, so overwrites and deletes land on other
//! partitions than the original put. Before an operation a thread reports
//! `B` (began) on stdout, after its acknowledgement `K` (acknowledged). The
//! parent kills the child with SIGKILL at a random moment, sometimes while a
//! flush is slowed or paused through the disk trait, reopens the store, and
//! checks every key against what was acknowledged.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use storage_node::{StorageEngine, WriteAck, WriteOp};
use support::faults::{FaultDisk, FaultPlan};
use support::{build_index, get, small_config, value_for};

const CHILD_ENV: &str = "SPLITKV_CRASH_CHILD";
const PARTITIONS: usize = 4;
const THREADS: usize = 4;
const KEYS_PER_THREAD: usize = 40;

/// One operation on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Put { version: u64, len: usize },
    Delete,
}

impl Op {
    fn parse(text: &str) -> Option<Op> {
        if text == "del" {
            return Some(Op::Delete);
        }
        let (version, len) = text.strip_prefix("put:")?.split_once(':')?;
        Some(Op::Put {
            version: version.parse().ok()?,
            len: len.parse().ok()?,
        })
    }

    fn render(self) -> String {
        match self {
            Op::Put { version, len } => format!("put:{version}:{len}"),
            Op::Delete => "del".into(),
        }
    }

    fn expected(self, key: &[u8]) -> Option<Vec<u8>> {
        match self {
            Op::Put { version, len } => Some(value_for(key, version, len)),
            Op::Delete => None,
        }
    }
}

fn key_name(thread: usize, key: usize) -> String {
    format!("t{thread}-k{key:03}")
}

/// How the child's disk misbehaves in a round.
#[derive(Debug, Clone, Copy)]
enum Disturbance {
    None,
    /// Every value-log write sleeps this long first.
    SlowFlush(u64),
    /// Value-log writes from this one on never complete.
    PausedFlush(usize),
}

fn run_child(dir: &str) {
    let mode = std::env::var("SPLITKV_CRASH_MODE").unwrap_or_default();
    let seed: u64 = std::env::var("SPLITKV_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let plan = FaultPlan::new();
    if let Some(ms) = mode.strip_prefix("slow:") {
        plan.direct_write_delay_ms.store(
            ms.parse().unwrap_or(20),
            std::sync::atomic::Ordering::SeqCst,
        );
    }
    if let Some(n) = mode.strip_prefix("pause:") {
        plan.pause_direct_writes_from
            .store(n.parse().unwrap_or(3), std::sync::atomic::Ordering::SeqCst);
    }
    let engine = Arc::new(
        StorageEngine::open_with_disk(
            small_config(std::path::Path::new(dir), PARTITIONS),
            FaultDisk::new(plan),
        )
        .expect("child opens the store"),
    );
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let report = move |line: String| {
        let mut out = out.lock().expect("stdout lock");
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let engine = Arc::clone(&engine);
            let report = report.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 1000 + thread as u64);
                let mut version = seed << 32;
                for batch in 0u64.. {
                    let batch_id = format!("{thread}.{batch}");
                    let count = if rng.random_bool(0.15) { 3 } else { 1 };
                    let mut names = Vec::new();
                    let mut ops = Vec::new();
                    while names.len() < count {
                        let key = key_name(thread, rng.random_range(0..KEYS_PER_THREAD));
                        if names.contains(&key) {
                            continue;
                        }
                        version += 1;
                        let op = if rng.random_bool(0.25) {
                            Op::Delete
                        } else {
                            let len = match rng.random_range(0..100) {
                                0..2 => 200_000,
                                2..10 => 0,
                                _ => rng.random_range(1..3000),
                            };
                            Op::Put { version, len }
                        };
                        names.push(key);
                        ops.push(op);
                    }
                    let values: Vec<Option<Vec<u8>>> = names
                        .iter()
                        .zip(&ops)
                        .map(|(k, op)| op.expected(k.as_bytes()))
                        .collect();
                    let write_ops: Vec<WriteOp<'_>> = names
                        .iter()
                        .zip(&values)
                        .map(|(k, v)| match v {
                            Some(value) => WriteOp::Put {
                                key: k.as_bytes(),
                                value,
                            },
                            None => WriteOp::Delete { key: k.as_bytes() },
                        })
                        .collect();
                    for (key, op) in names.iter().zip(&ops) {
                        report(format!("B {batch_id} {key} {}", op.render()));
                    }
                    let mut acks = vec![WriteAck::default(); write_ops.len()];
                    let partition = rng.random_range(0..PARTITIONS);
                    engine
                        .write(partition, None, &write_ops, &mut acks)
                        .expect("write");
                    report(format!("K {batch_id}"));
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// What the parent knows of one round.
#[derive(Default)]
struct Journal {
    /// Ops begun but not acknowledged, by batch id.
    open: HashMap<String, Vec<(String, Op)>>,
    acknowledged: u64,
}

fn run_round(
    dir: &std::path::Path,
    round: u64,
    disturbance: Disturbance,
    model: &mut HashMap<String, Op>,
) {
    let mode = match disturbance {
        Disturbance::None => String::new(),
        Disturbance::SlowFlush(ms) => format!("slow:{ms}"),
        Disturbance::PausedFlush(n) => format!("pause:{n}"),
    };
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "kill_9_in_the_middle_of_writes_loses_nothing_acknowledged",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir)
        .env("SPLITKV_CRASH_MODE", &mode)
        .env("SPLITKV_CRASH_SEED", (round + 1).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let journal = Arc::new(Mutex::new(Journal::default()));
    let reader = {
        let journal = Arc::clone(&journal);
        let model_snapshot = model.clone();
        std::thread::spawn(move || {
            let mut model = model_snapshot;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut parts = line.split(' ');
                let mut journal = journal.lock().expect("journal");
                match (parts.next(), parts.next(), parts.next(), parts.next()) {
                    (Some("B"), Some(batch), Some(key), Some(op)) => {
                        let op = Op::parse(op).expect("op");
                        journal
                            .open
                            .entry(batch.to_string())
                            .or_default()
                            .push((key.to_string(), op));
                    }
                    (Some("K"), Some(batch), None, None) => {
                        let ops = journal
                            .open
                            .remove(batch)
                            .expect("acknowledged batch began");
                        for (key, op) in ops {
                            model.insert(key, op);
                        }
                        journal.acknowledged += 1;
                    }
                    _ => {}
                }
            }
            model
        })
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(round);
    std::thread::sleep(Duration::from_millis(rng.random_range(150..500)));
    child.kill().expect("kill -9 the child");
    let _ = child.wait();
    let after = reader.join().expect("reader");
    let journal = journal.lock().expect("journal");
    assert!(
        journal.acknowledged > 0,
        "round {round} ({mode}): no operation was acknowledged"
    );

    let engine = StorageEngine::open(small_config(dir, PARTITIONS)).expect("reopen after kill -9");
    let index = build_index(&engine);
    let mut in_flight: HashMap<&str, Op> = HashMap::new();
    for ops in journal.open.values() {
        for (key, op) in ops {
            in_flight.insert(key, *op);
        }
    }
    let mut verified = 0;
    let mut resolved = HashMap::new();
    for thread in 0..THREADS {
        for k in 0..KEYS_PER_THREAD {
            let key = key_name(thread, k);
            let actual = get(&engine, &index, key.as_bytes());
            let acked = after.get(&key).copied();
            let acked_value = acked.and_then(|op| op.expected(key.as_bytes()));
            let maybe = in_flight.get(key.as_str()).copied();
            let matches_acked = actual == acked_value;
            let matches_in_flight = maybe.is_some_and(|op| actual == op.expected(key.as_bytes()));
            assert!(
                matches_acked || matches_in_flight,
                "round {round} ({mode}): key {key} reads {:?} bytes; acknowledged {acked:?}, in flight {maybe:?}",
                actual.as_ref().map(Vec::len)
            );
            let now = if matches_acked { acked } else { maybe };
            if let Some(op) = now {
                resolved.insert(key.clone(), op);
            }
            if matches_in_flight && !matches_acked {
                // An unacknowledged write that happened: its whole batch must have.
                let batch = journal
                    .open
                    .values()
                    .find(|ops| ops.iter().any(|(k, _)| *k == key))
                    .expect("batch of an in-flight key");
                for (other, op) in batch {
                    let other_actual = get(&engine, &index, other.as_bytes());
                    assert_eq!(
                        other_actual,
                        op.expected(other.as_bytes()),
                        "round {round}: batch applied partly ({key} is there, {other} is not)"
                    );
                }
            }
            verified += 1;
        }
    }
    assert_eq!(verified, THREADS * KEYS_PER_THREAD);
    *model = resolved;
    eprintln!(
        "round {round} ({mode}): {} acknowledged, {} in flight at the kill, recovery {:?}",
        journal.acknowledged,
        in_flight.len(),
        engine
            .recovery_report()
            .iter()
            .map(|r| r.replayed_buffers)
            .sum::<usize>()
    );
}

#[test]
fn kill_9_in_the_middle_of_writes_loses_nothing_acknowledged() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        run_child(&dir);
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = HashMap::new();
    // The first value-log write of a run is the O_DIRECT probe at open, so
    // a pause from write 1 on stops the very first buffer flush.
    let disturbances = [
        Disturbance::None,
        Disturbance::SlowFlush(15),
        Disturbance::PausedFlush(2),
        Disturbance::None,
        Disturbance::PausedFlush(6),
        Disturbance::SlowFlush(40),
        Disturbance::None,
        Disturbance::PausedFlush(1),
        Disturbance::None,
        Disturbance::SlowFlush(5),
        Disturbance::PausedFlush(12),
        Disturbance::None,
        Disturbance::SlowFlush(25),
        Disturbance::PausedFlush(3),
        Disturbance::None,
        Disturbance::None,
    ];
    for (round, disturbance) in disturbances.iter().enumerate() {
        run_round(dir.path(), round as u64, *disturbance, &mut model);
    }
}
