//! `eval crash`: writers put, overwrite and delete (through random
//! partitions, so overwrites and deletes land on other partitions than the
//! put before them) while the test kill -9s the storage node, or a compute
//! node running the writers, at a random moment. Then it verifies through a
//! fresh compute node that every acknowledged put reads back with its latest
//! acknowledged value, that no acknowledged delete came back, and that no
//! value is wrong. An operation that was under way at the kill may or may
//! not have happened; a round with no acknowledged operation fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use compute_node::{Engine, EngineConfig};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::node::OwnCluster;
use crate::workload::fill_value;

/// Options of `eval crash`.
#[derive(clap::Args, Clone)]
pub struct CrashArgs {
    /// Rounds; every third one kills a compute node instead of the storage
    /// node.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Writer threads.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Keys each writer works on.
    #[arg(long, default_value_t = 200)]
    keys_per_thread: u64,
    /// Partitions of the storage node.
    #[arg(long, default_value_t = 16)]
    partitions: usize,
    /// Latest moment of the kill after the writers start, in milliseconds
    /// (the kill lands at a random moment from a fifth of this on).
    #[arg(long, default_value_t = 1500)]
    max_kill_ms: u64,
    /// Seed of the random choices (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Options of the hidden `crash-writer` subcommand.
#[derive(clap::Args, Clone)]
pub struct WriterArgs {
    /// The storage node, HOST:PORT.
    #[arg(long)]
    storage: String,
    /// The compute node's certificate directory.
    #[arg(long)]
    certs: PathBuf,
    #[arg(long)]
    threads: usize,
    #[arg(long)]
    keys_per_thread: u64,
    #[arg(long)]
    seed: u64,
}

/// One operation on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Put { version: u64, len: usize },
    Delete,
}

impl Op {
    fn render(self) -> String {
        match self {
            Op::Put { version, len } => format!("put:{version}:{len}"),
            Op::Delete => "del".into(),
        }
    }

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

    fn value(self, key: &str) -> Option<Vec<u8>> {
        match self {
            Op::Put { version, len } => {
                let mut value = vec![0u8; len];
                fill_value(key.as_bytes(), version, &mut value);
                Some(value)
            }
            Op::Delete => None,
        }
    }
}

/// What happened to a key in a round, as the writers reported it.
#[derive(Default)]
struct Journal {
    /// Latest acknowledged operation per key (from all rounds so far).
    acked: HashMap<String, Op>,
    /// Operation begun and not acknowledged when the round ended.
    in_flight: HashMap<String, Op>,
    acknowledged: u64,
}

impl Journal {
    fn begin(&mut self, key: &str, op: Op) {
        self.in_flight.insert(key.to_string(), op);
    }

    fn ack(&mut self, key: &str) {
        if let Some(op) = self.in_flight.remove(key) {
            self.acked.insert(key.to_string(), op);
            self.acknowledged += 1;
        }
    }
}

fn key_name(thread: usize, j: u64) -> String {
    format!("t{thread}-k{j:04}")
}

/// One writer: random keys of its own, random operations, random
/// partitions, until `stop` (if any) is set or an operation fails.
fn writer_loop(
    engine: &Engine,
    thread: usize,
    keys: u64,
    seed: u64,
    stop: Option<&AtomicBool>,
    mut event: impl FnMut(&str, Option<Op>),
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (thread as u64) << 32);
    let partitions = engine.partitions();
    let mut version = seed << 20 | (thread as u64) << 48;
    while !stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
        let key = key_name(thread, rng.random_range(0..keys));
        version += 1;
        let op = if rng.random_bool(0.2) {
            Op::Delete
        } else {
            let len = match rng.random_range(0..100) {
                0 => 300_000,
                1..6 => 0,
                _ => rng.random_range(1..6000),
            };
            Op::Put { version, len }
        };
        let link = rng.random_range(0..partitions);
        event(&key, Some(op));
        let result = match op.value(&key) {
            Some(value) => engine.put_on(link, key.as_bytes(), &value),
            None => engine.delete_on(link, key.as_bytes()).map(|_| ()),
        };
        if result.is_err() {
            return;
        }
        event(&key, None);
    }
}

/// Per-round outcome.
#[derive(Debug, Clone, Serialize)]
struct RoundReport {
    round: usize,
    /// storage or compute.
    killed: &'static str,
    kill_after_ms: u64,
    /// For storage-node kills: how long the surviving compute node took to
    /// write again on every connection once the storage node was back.
    recovery_ms: Option<u64>,
    acknowledged: u64,
    in_flight: usize,
    verified: u64,
    lost: u64,
    wrong: u64,
    resurrected: u64,
}

impl RoundReport {
    fn passed(&self) -> bool {
        self.acknowledged > 0 && self.lost == 0 && self.wrong == 0 && self.resurrected == 0
    }
}

/// Runs the crash rounds; true if every round passed.
pub fn run(args: CrashArgs) -> Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("crash test: {} rounds, seed {seed}", args.rounds);
    let mut cluster = OwnCluster::start(None, args.partitions)?;
    let port = cluster.node.as_ref().map_or(0, |n| n.addr.port());
    let mut journal = Journal::default();
    let mut reports = Vec::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..args.rounds {
        let kill_after = rng.random_range(args.max_kill_ms / 5..=args.max_kill_ms.max(1));
        let round_seed = seed.wrapping_add(round as u64 * 7919);
        let compute = round % 3 == 2;
        let report = if compute {
            compute_round(&args, &cluster, &mut journal, round, round_seed, kill_after)?
        } else {
            storage_round(
                &args,
                &mut cluster,
                port,
                &mut journal,
                round,
                round_seed,
                kill_after,
            )?
        };
        let recovery = report
            .recovery_ms
            .map_or(String::new(), |ms| format!(", writing again after {ms} ms"));
        println!(
            "round {:>2}: kill -9 of the {:<7} after {:>4} ms: {:>6} acknowledged, {:>2} in flight, {:>5} keys verified, {} lost, {} wrong, {} resurrected{recovery}{}",
            report.round,
            report.killed,
            report.kill_after_ms,
            report.acknowledged,
            report.in_flight,
            report.verified,
            report.lost,
            report.wrong,
            report.resurrected,
            if report.passed() { "" } else { "  FAILED" }
        );
        reports.push(report);
    }
    cluster.stop()?;
    let passed = reports.iter().all(RoundReport::passed);
    if let Some(path) = &args.json {
        let doc = serde_json::json!({ "seed": seed, "passed": passed, "rounds": reports });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(passed)
}

fn crash_engine_config(cluster: &OwnCluster) -> Result<EngineConfig> {
    let mut config = crate::engine_config(cluster.storage(), &cluster.compute_certs)?;
    config.reconnect_wait_ms = 300;
    config.request_timeout_ms = 1_000;
    Ok(config)
}

fn storage_round(
    args: &CrashArgs,
    cluster: &mut OwnCluster,
    port: u16,
    journal: &mut Journal,
    round: usize,
    seed: u64,
    kill_after: u64,
) -> Result<RoundReport> {
    journal.in_flight.clear();
    let before = journal.acknowledged;
    let engine = Engine::connect(crash_engine_config(cluster)?)?;
    let shared = Mutex::new(std::mem::take(journal));
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<()> {
        for thread in 0..args.threads {
            let (engine, shared, stop) = (&engine, &shared, &stop);
            scope.spawn(move || {
                writer_loop(
                    engine,
                    thread,
                    args.keys_per_thread,
                    seed,
                    Some(stop),
                    |key, op| {
                        let mut journal = shared
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        match op {
                            Some(op) => journal.begin(key, op),
                            None => journal.ack(key),
                        }
                    },
                );
            });
        }
        std::thread::sleep(Duration::from_millis(kill_after));
        let killed = cluster.kill9();
        stop.store(true, Ordering::Relaxed);
        killed
    })?;
    *journal = shared
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cluster.restart(port)?;
    // The compute node that lived through the crash writes again, on every
    // connection, within 10 s of the storage node being back.
    let back = std::time::Instant::now();
    let mut recovered = 0;
    for link in 0..engine.partitions() {
        while back.elapsed() < Duration::from_secs(10) {
            if engine
                .put_on(link, format!("probe-{link}").as_bytes(), b"after the crash")
                .is_ok()
            {
                recovered += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let recovery = back.elapsed();
    drop(engine);
    let mut report = verify(cluster, journal, round, "storage", kill_after, before)?;
    report.recovery_ms = Some(recovery.as_millis() as u64);
    if recovered < args.partitions {
        eprintln!(
            "round {round}: only {recovered} of {} connections wrote again within 10 s",
            args.partitions
        );
        report.wrong += 1;
    }
    Ok(report)
}

fn compute_round(
    args: &CrashArgs,
    cluster: &OwnCluster,
    journal: &mut Journal,
    round: usize,
    seed: u64,
    kill_after: u64,
) -> Result<RoundReport> {
    journal.in_flight.clear();
    let before = journal.acknowledged;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["crash-writer", "--storage", &cluster.storage()])
        .arg("--certs")
        .arg(&cluster.compute_certs)
        .args(["--threads", &args.threads.to_string()])
        .args(["--keys-per-thread", &args.keys_per_thread.to_string()])
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the compute-node writer")?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no stdout from the writer"))?;
    let shared = Arc::new(Mutex::new(std::mem::take(journal)));
    let reader = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut parts = line.split(' ');
                let mut journal = shared
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match (parts.next(), parts.next(), parts.next()) {
                    (Some("B"), Some(key), Some(op)) => {
                        if let Some(op) = Op::parse(op) {
                            journal.begin(key, op);
                        }
                    }
                    (Some("K"), Some(key), None) => journal.ack(key),
                    _ => {}
                }
            }
        })
    };
    // The writer connects (rebuilding its index) before it writes: time the
    // kill from its first operation.
    let started = std::time::Instant::now();
    while shared
        .lock()
        .map(|j| j.in_flight.is_empty() && j.acknowledged == before)
        .unwrap_or(false)
    {
        if started.elapsed() > Duration::from_secs(30) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(kill_after));
    child.kill().context("kill -9 of the compute node")?;
    child.wait()?;
    let _ = reader.join();
    *journal = Arc::try_unwrap(shared)
        .map_err(|_| anyhow!("journal still shared"))?
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    verify(cluster, journal, round, "compute", kill_after, before)
}

/// Checks every key through a fresh compute node and settles the journal
/// on what is there.
fn verify(
    cluster: &OwnCluster,
    journal: &mut Journal,
    round: usize,
    killed: &'static str,
    kill_after: u64,
    before: u64,
) -> Result<RoundReport> {
    let engine = Engine::connect(crash_engine_config(cluster)?)
        .context("connecting a fresh compute node")?;
    let mut report = RoundReport {
        round,
        killed,
        kill_after_ms: kill_after,
        recovery_ms: None,
        acknowledged: journal.acknowledged - before,
        in_flight: journal.in_flight.len(),
        verified: 0,
        lost: 0,
        wrong: 0,
        resurrected: 0,
    };
    let keys: Vec<String> = journal
        .acked
        .keys()
        .chain(journal.in_flight.keys())
        .cloned()
        .collect();
    let mut settled = HashMap::new();
    for key in keys {
        if settled.contains_key(&key) {
            continue;
        }
        let acked = journal.acked.get(&key).copied();
        let maybe = journal.in_flight.get(&key).copied();
        let actual = match engine.get(key.as_bytes()) {
            Ok(value) => value.map(|v| v.to_vec()),
            Err(e) => {
                eprintln!("round {round}: reading {key} failed: {e}");
                report.wrong += 1;
                continue;
            }
        };
        let expected = acked.and_then(|op| op.value(&key));
        if actual == expected {
            report.verified += 1;
            if let Some(op) = acked {
                settled.insert(key, op);
            }
            continue;
        }
        if let Some(op) = maybe
            && actual == op.value(&key)
        {
            report.verified += 1;
            settled.insert(key, op);
            continue;
        }
        match (&expected, &actual) {
            (Some(_), None) => report.lost += 1,
            (None, Some(_)) if acked == Some(Op::Delete) => report.resurrected += 1,
            _ => report.wrong += 1,
        }
        eprintln!(
            "round {round}: key {key}: acknowledged {acked:?}, in flight {maybe:?}, read {:?} bytes",
            actual.as_ref().map(Vec::len)
        );
    }
    journal.acked = settled;
    journal.in_flight.clear();
    Ok(report)
}

/// Body of `crash-writer`: a compute node of its own running the writers,
/// reporting each operation on stdout before it starts (`B key op`) and
/// after its acknowledgement (`K key`), until it is killed.
pub fn writer(args: WriterArgs) -> Result<()> {
    let mut config = crate::engine_config(args.storage, &args.certs)?;
    config.reconnect_wait_ms = 300;
    let engine = Engine::connect(config)?;
    let out = Mutex::new(std::io::stdout());
    std::thread::scope(|scope| {
        for thread in 0..args.threads {
            let (engine, out) = (&engine, &out);
            scope.spawn(move || {
                writer_loop(
                    engine,
                    thread,
                    args.keys_per_thread,
                    args.seed,
                    None,
                    |key, op| {
                        let mut out = out
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let _ = match op {
                            Some(op) => writeln!(out, "B {key} {}", op.render()),
                            None => writeln!(out, "K {key}"),
                        };
                        let _ = out.flush();
                    },
                );
            });
        }
    });
    Ok(())
}
